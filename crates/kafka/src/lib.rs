//! Kafka for load-agent (topics.md): the load workers' consumer, the relay's Kafka destinations
//! and event publisher, the DLQ, topic dumps from a broker, the schema registry's wiring.
//!
//! What needs no broker lives in `load-agent-ingest` (the embedded default builds without this
//! crate): the owned record, the unit of work (`RecordProcessor`, `DeadLetter`), dump files,
//! replay, the `[kafka]` section and the topic names' defaults (re-exported by [`config`]).
//!
//! Layout:
//! - [`config`]: [`KafkaConfig`] (built from the `[kafka]` section by
//!   [`KafkaConfig::from_settings`]), topic names and the librdkafka settings of every client.
//! - [`record`]: an `InboundRecord` copied out of an rdkafka message.
//! - [`partition`]: [`PartitionWork`], per-partition scheduling and offset bookkeeping as pure
//!   code: one running record per key, the lowest unfinished offset.
//! - [`consumer`]: [`consume`], the rdkafka `StreamConsumer` loop, rebalance drain, backpressure.
//! - [`dlq`]: the dead-letter headers, the reduced form, the size limits.
//! - [`dlq_tool`]: `load-agent dlq list | show | redrive`.
//! - [`produce`]: the idempotent [`Producer`], [`KafkaDestinations`] (relay → action topics),
//!   [`KafkaEventPublisher`] (relay and timer pump → inbound topic), [`DlqProducer`].
//! - [`floor`]: the broker's own produce → consume latency with the service's settings (the
//!   load test's floor).
//! - [`admin`]: [`ensure_topics`], creating the topics.
//! - [`metric_names`]: the name of every metric this crate emits (one constant each).
//! - [`registry`]: a Confluent-compatible schema registry: registering our schemas (producer
//!   ids); the unit of work decodes records framed with its ids (`load-agent-ingest`'s feature
//!   `registry`, on here).
//! - [`dump_kafka`]: `load-agent dump`, a topic recorded into a dump file.
//!
//! The binary wires the relay and the timer pump of a Kafka deployment from
//! [`KafkaDestinations`] and [`KafkaEventPublisher`].
//!
//! Architecture invariant: this crate moves records and offsets; it decides nothing. Decisions
//! come from the runtime's worker (`load_agent_agent::process_event`), and the only path from a
//! record to the log is `load_agent_ingest::RecordProcessor::process`, which `replay` runs too.

pub mod admin;
pub mod config;
pub mod consumer;
pub mod dlq;
pub mod dlq_tool;
pub mod dump_kafka;
pub mod floor;
pub mod metric_names;
pub mod partition;
pub mod produce;
pub mod record;
pub mod registry;
mod stats;

pub use admin::{ensure_topics, topic_max_message_bytes};
pub use config::{ACTION_DESTINATIONS, DLQ_TOPIC, EVENTS_TOPIC, GROUP_ID, KafkaConfig, SchemaIds};
pub use consumer::{ConsumeReport, ConsumerConfig, ConsumerError, consume};
pub use dump_kafka::{DumpError, DumpSummary, dump, read_topic};
pub use partition::PartitionWork;
pub use produce::{
    AddressBook, DlqProducer, DlqWritten, KafkaDestinations, KafkaEventPublisher, Producer,
    RegistrationAddressBook, RelayEnds, Written, relay_ends,
};
pub use registry::register_schemas;
