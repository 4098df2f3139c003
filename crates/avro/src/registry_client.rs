//! A client for a Confluent-compatible schema registry (Confluent, Karapace, Apicurio in its
//! Confluent mode, Redpanda), for when one is configured (feature `registry-client`).
//!
//! It does the IO the codecs must not: registering our `.avsc` texts under the topic name
//! strategy subject `<topic>-value`, and fetching writer schemas by id (cached by
//! `schema_registry_converter`'s `AvroDecoder`). Bytes are still encoded and decoded by the
//! sync codecs: a producer registers once at start-up and frames with
//! [`crate::inbound::encode_inbound_with_id`]; a consumer hands the fetched writer schema to
//! [`crate::inbound::decode_inbound_with_schema`], which resolves by name to the newest reader.
//!
//! REST calls used: `POST /subjects/{subject}/versions` (register), `POST /subjects/{subject}`
//! (is this schema registered?), `GET /subjects/{subject}/versions/latest`,
//! `GET /schemas/ids/{id}`.

use std::sync::Arc;

use apache_avro::Schema;
use load_agent_domain::InboundEvent;
use schema_registry_converter::async_impl::avro::{AvroDecoder, AvroEncoder};
use schema_registry_converter::async_impl::schema_registry::{
    SrSettings, get_schema_by_subject_and_version, perform_sr_call, post_schema,
};
use schema_registry_converter::avro_common::AvroSchema;
use schema_registry_converter::error::SRCError;
use schema_registry_converter::schema_registry_common::{
    RawError, SchemaType, SrCall, SubjectNameStrategy, SuppliedSchema,
};

use crate::action_command::{DecodedActionCommand, decode_action_command_with_schema};
use crate::confluent;
use crate::datum::ToDatum;
use crate::error::DecodeError;
use crate::inbound::decode_inbound_with_schema;
use crate::registry::{EmbeddedRegistry, RegisteredSchema, SchemaId, records};
use crate::wire;

pub use schema_registry_converter::async_impl::schema_registry::SrSettings as RegistrySettings;

#[derive(Debug, thiserror::Error)]
pub enum RegistryClientError {
    /// The registry failed or refused; `is_retryable` tells a transient failure (retry the
    /// record) from a permanent one.
    #[error("schema registry: {0}")]
    Registry(#[from] SRCError),
    /// The record itself is bad: goes to the DLQ like any decode error.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("no embedded schema for record {0}")]
    UnknownRecord(String),
}

impl RegistryClientError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, RegistryClientError::Registry(e) if e.retriable)
    }
}

/// The subject of a topic's values under the topic name strategy.
pub fn value_subject(topic: &str) -> String {
    format!("{topic}-value")
}

/// A registered schema as the registry reports it.
#[derive(Debug, Clone)]
pub struct RegistryEntry {
    pub id: SchemaId,
    pub version: Option<u32>,
    pub schema: Schema,
}

pub struct RegistryClient {
    settings: SrSettings,
    decoder: AvroDecoder,
    encoder: AvroEncoder,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient").finish_non_exhaustive()
    }
}

fn newest(record: &str) -> Result<&'static RegisteredSchema, RegistryClientError> {
    EmbeddedRegistry::global()
        .latest(record)
        .ok_or_else(|| RegistryClientError::UnknownRecord(record.to_owned()))
}

fn supplied(schema: &RegisteredSchema) -> SuppliedSchema {
    SuppliedSchema::new(Some(schema.record.clone()), SchemaType::Avro, schema.text.to_owned())
}

/// The registry's `error_code` (40401 subject not found, 40403 schema not found, ...).
fn registry_error_code(e: &SRCError) -> Option<u32> {
    std::error::Error::source(e).and_then(|s| s.downcast_ref::<RawError>()).map(|r| r.error_code)
}

impl RegistryClient {
    /// A client for the registry at `url` (proxies from the environment apply).
    pub fn new(url: &str) -> Result<Self, RegistryClientError> {
        Ok(Self::with_settings(SrSettings::new_builder(url.to_owned()).build()?))
    }

    /// A client with explicit settings (authentication, timeouts, proxies, several urls).
    pub fn with_settings(settings: SrSettings) -> Self {
        RegistryClient {
            decoder: AvroDecoder::new(settings.clone()),
            encoder: AvroEncoder::new(settings.clone()),
            settings,
        }
    }

    /// Registers the newest embedded schema of `record` (`InboundEvent`, `load_agent.LogEntry`,
    /// ...) under `<topic>-value`, or finds it if already there, and returns the registry's id.
    pub async fn register(&self, topic: &str, record: &str) -> Result<SchemaId, RegistryClientError> {
        let schema = newest(record)?;
        let registered = post_schema(&self.settings, value_subject(topic), supplied(schema)).await?;
        Ok(SchemaId(registered.id))
    }

    /// The registry's id of the newest embedded schema of `record` under `<topic>-value`, or
    /// `None` if it is not registered there.
    pub async fn lookup(&self, topic: &str, record: &str) -> Result<Option<SchemaId>, RegistryClientError> {
        let schema = newest(record)?;
        let body = serde_json::json!({ "schema": schema.text, "schemaType": "AVRO" }).to_string();
        let subject = value_subject(topic);
        match perform_sr_call(&self.settings, SrCall::PostForVersion(&subject, &body)).await {
            Ok(raw) => Ok(raw.id.map(SchemaId)),
            Err(e) if matches!(registry_error_code(&e), Some(40401 | 40403)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The latest schema registered under `<topic>-value`.
    pub async fn latest(&self, topic: &str) -> Result<RegistryEntry, RegistryClientError> {
        let registered =
            get_schema_by_subject_and_version(&self.settings, &value_subject(topic), None).await?;
        let schema = Schema::parse_str(&registered.schema).map_err(|e| {
            SRCError::non_retryable_with_cause(
                e,
                &format!("latest schema of {} does not parse", value_subject(topic)),
            )
        })?;
        Ok(RegistryEntry { id: SchemaId(registered.id), version: registered.version, schema })
    }

    /// The writer schema of `id` (fetched once, then cached).
    pub async fn schema_by_id(&self, id: SchemaId) -> Result<Arc<AvroSchema>, RegistryClientError> {
        Ok(self.decoder.get_schema(id.0).await?)
    }

    /// Encodes `event` with `schema_registry_converter`'s encoder: registers (or finds) the
    /// newest `InboundEvent` schema under `<topic>-value` on first use, then frames with its id.
    /// The body is the same as [`crate::inbound::encode_inbound_body`].
    pub async fn encode_inbound(
        &self,
        topic: &str,
        event: &InboundEvent,
    ) -> Result<Vec<u8>, RegistryClientError> {
        let schema = newest(records::INBOUND_EVENT)?;
        let strategy =
            SubjectNameStrategy::TopicNameStrategyWithSchema(topic.to_owned(), false, supplied(schema));
        Ok(self.encoder.encode_value(wire::InboundEvent::from(event).to_datum(), &strategy).await?)
    }

    /// Decodes a framed `InboundEvent` whose schema id comes from the registry.
    pub async fn decode_inbound(&self, bytes: &[u8]) -> Result<InboundEvent, RegistryClientError> {
        let (id, body) = confluent::unframe(bytes).map_err(DecodeError::from)?;
        let writer = self.schema_by_id(id).await?;
        Ok(decode_inbound_with_schema(id, &writer.parsed, body)?)
    }

    /// Decodes a framed `ActionCommand` whose schema id comes from the registry.
    pub async fn decode_action_command(
        &self,
        bytes: &[u8],
    ) -> Result<DecodedActionCommand, RegistryClientError> {
        let (id, body) = confluent::unframe(bytes).map_err(DecodeError::from)?;
        let writer = self.schema_by_id(id).await?;
        Ok(decode_action_command_with_schema(id, &writer.parsed, body)?)
    }
}
