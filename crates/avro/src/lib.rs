//! Avro schemas and codecs for load-agent (topics.md): the records on Kafka and in the log.
//!
//! Layout:
//! - [`registry`]: the embedded schema registry. The `.avsc` files of `schemas/avro/` and their
//!   fixed ids (`schemas/avro/ids.json`) compiled in with `include_str!`; [`SchemaId`].
//! - [`confluent`]: the Confluent wire framing (magic byte 0, 4-byte big-endian schema id, body).
//! - [`wire`]: wire structs, an exact mirror of the Avro records, separate from the domain types.
//!   Conversions: `From<&domain>` to write, `TryFrom<wire>` to read, naming the bad field.
//! - [`inbound`]: `InboundEvent` on `load-agent.events` (framed).
//! - [`json`]: the JSON form of `InboundEvent`, the versioned request body of `POST /events`
//!   ([`json::InboundEventV1`], with the API's response bodies, their OpenAPI schemas and the
//!   documented examples); errors name the field at fault by its JSON path.
//! - [`action_command`]: `ActionCommand` on `load-agent.actions.<service>` (framed), with the
//!   resolved addresses of the contact ([`Addresses`]).
//! - [`log_entry`]: stored log entries (unframed body plus writer schema id), every version
//!   readable, the newest written.
//! - [`outbox`]: the stored JSON of an outbox row's action ([`outbox::OutboxActionV1`]), its
//!   shape pinned by tests, apart from the domain's `Action`.
//! - [`archive`]: archive files (docs/archive.md), Avro object container files of log rows with
//!   their stored bodies byte for byte and the LogEntry schemas in the file's metadata.
//! - [`error`]: [`DecodeError`] (with a stable `code()` and the field path, for DLQ headers),
//!   [`FieldError`], [`WireError`].
//! - `registry_client` (feature `registry-client`): an async client for a Confluent-compatible
//!   schema registry, for when one is configured; it only fetches and registers schemas and
//!   hands bytes to the sync codecs.
//!
//! Reading: a body is decoded with its writer schema (from the embedded registry, or from the
//! schema registry by id) and read into the newest wire struct by field and branch name, with
//! the defaults of the newest schema; see `datum.rs` for why resolution is done by name here.
//!
//! Architecture invariant: the codecs do no IO and know no tokio and no Kafka client: encoding
//! and decoding are sync functions over bytes, and no input makes them panic. The only IO in the
//! crate is the optional `registry_client`, behind a feature that is off by default, so that
//! `cargo tree -p load-agent-avro -i tokio` finds nothing.

mod codec;
mod convert;
mod datum;

pub mod action_command;
pub mod archive;
pub mod confluent;
pub mod error;
pub mod inbound;
pub mod json;
pub mod log_entry;
pub mod outbox;
pub mod registry;
#[cfg(feature = "registry-client")]
pub mod registry_client;
#[cfg(feature = "registry-stub")]
pub mod registry_stub;
pub mod wire;

pub use action_command::{DecodedActionCommand, decode_action_command, encode_action_command};
pub use convert::Addresses;
pub use error::{DecodeError, FieldError, FieldProblem, WireError};
pub use inbound::{decode_inbound, encode_inbound};
pub use log_entry::{decode_log_entry, encode_log_entry};
pub use outbox::{decode_outbox_action, encode_outbox_action};
pub use registry::{EmbeddedRegistry, SchemaId};
