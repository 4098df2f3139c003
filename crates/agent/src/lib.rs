//! The decision pipeline of load-agent (ADR 0001): `process_event(state, event, deps)`.
//!
//! Layout:
//! - [`pipeline`]: `process_event` — the deterministic filter, triggers, triage, the SOP
//!   executor, the planner and attachments, action outcomes.
//! - [`sop`]: compiled SOP specs (data under `sops/`), their validation and registry.
//! - [`templates`]: message templates in English and Spanish.
//! - [`validate`]: the checks every action passes before commit.
//! - `yaml_error`: the field/problem split of serde errors that SOP and template errors share.
//! - [`prepare`]: validation of an inbound event against the load before it is processed
//!   (unknown load, bad registration, sizes, times against the clock), whether a known event id
//!   is a redelivery, and pinning the SOP version at registration.
//!
//! Architecture invariant: deciding performs no side effect and no IO beyond the `LlmClient`
//! it is given. This crate knows nothing of databases, queues, Kafka, Avro or any LLM vendor.

mod context;
pub mod pipeline;
pub mod prepare;
pub mod sop;
pub mod templates;
mod validate;
mod yaml_error;

pub use pipeline::{Agent, Deps, Processed, hero_fallback_record, process_event};
pub use prepare::{InvalidEvent, check_redelivery, prepare_event, prepare_event_at};
pub use sop::{Sop, SopError, SopRegistry, SopSpec, parse_sop};
pub use templates::Templates;
