//! Kafka for load-agent (topics.md): the load workers' consumer, the relay's
//! Kafka destinations and event publisher, topic dumps and replay.
//!
//! Layout:
//! - [`config`]: [`KafkaConfig`], topic names and the librdkafka settings of every client.
//! - [`settings`]: the `[kafka]` section of the configuration ([`KafkaSettings`], its checks),
//!   from which [`KafkaConfig::from_settings`] builds the clients' configuration.
//! - [`record`]: [`InboundRecord`], an owned record: what the unit of work, the DLQ, dumps and
//!   replay handle.
//! - [`process`]: the unit of work, [`RecordProcessor::process`]: decode, key check, the load
//!   worker; [`RecordOutcome`], [`DeadLetter`]. No Kafka in it.
//! - [`partition`]: [`PartitionWork`], per-partition scheduling and offset bookkeeping as pure
//!   code: one running record per key, the lowest unfinished offset.
//! - [`consumer`]: [`consume`], the rdkafka `StreamConsumer` loop, rebalance drain, backpressure.
//! - [`dlq`]: the dead-letter headers, the reduced form, the size limits.
//! - [`dlq_tool`]: `load-agent dlq list | show | redrive` (feature `broker`).
//! - [`produce`]: the idempotent [`Producer`], [`KafkaDestinations`] (relay → action topics),
//!   [`KafkaEventPublisher`] (relay and timer pump → inbound topic), [`DlqProducer`].
//! - [`floor`]: the broker's own produce → consume latency with the service's settings (the
//!   load test's floor, feature `broker`).
//! - [`admin`]: [`ensure_topics`], creating the topics.
//! - [`metric_names`]: the name of every metric this crate emits (one constant each).
//! - [`registry`]: a Confluent-compatible schema registry: registering our schemas (producer
//!   ids) and decoding records framed with its ids (feature `broker`).
//! - [`dump`], [`replay`], [`dump_spec`]: `load-agent dump`, `load-agent replay`, and the
//!   generator of the recorded dumps under `evals/dumps/`.
//! - [`wiring`]: the relay and timer pump of a Kafka deployment (feature `broker`);
//!   [`record_processor`]: the worker behind the consumer and replay.
//!
//! Feature `broker` (default) links librdkafka; without it the crate still decodes, processes
//! and replays records (what `load-agent replay` needs), so the embedded default builds with
//! nothing but Rust.
//!
//! Architecture invariant: this crate moves records and offsets; it decides nothing. Decisions
//! come from the runtime's worker (`load_agent_agent::process_event`), and the only path from a
//! record to the log is [`RecordProcessor::process`], which `replay` runs too.

#[cfg(feature = "broker")]
pub mod admin;
pub mod config;
#[cfg(feature = "broker")]
pub mod consumer;
pub mod dlq;
#[cfg(feature = "broker")]
pub mod dlq_tool;
pub mod dump;
#[cfg(feature = "broker")]
pub mod dump_kafka;
pub mod dump_spec;
#[cfg(feature = "broker")]
pub mod floor;
pub mod metric_names;
pub mod partition;
pub mod process;
#[cfg(feature = "broker")]
pub mod produce;
pub mod record;
#[cfg(feature = "broker")]
pub mod registry;
pub mod replay;
pub mod settings;
pub mod wiring;

#[cfg(feature = "broker")]
pub use admin::{ensure_topics, topic_max_message_bytes};
pub use config::{ACTION_DESTINATIONS, DLQ_TOPIC, EVENTS_TOPIC, GROUP_ID, KafkaConfig, SchemaIds};
#[cfg(feature = "broker")]
pub use consumer::{ConsumeReport, ConsumerConfig, ConsumerError, consume};
pub use dump::{DumpRecord, read_dump, write_dump};
#[cfg(feature = "broker")]
pub use dump_kafka::{DumpError, DumpSummary, dump, read_topic};
pub use dump_spec::generate_dump;
pub use partition::PartitionWork;
pub use process::{DeadLetter, DeadLetterKind, RecordOutcome, RecordProcessor};
#[cfg(feature = "broker")]
pub use produce::{
    AddressBook, DlqProducer, DlqWritten, KafkaDestinations, KafkaEventPublisher, Producer,
    SnapshotAddressBook, Written,
};
pub use record::InboundRecord;
#[cfg(feature = "broker")]
pub use registry::register_schemas;
pub use replay::{ReplayError, ReplaySummary, replay, replay_records};
pub use settings::{KAFKA_PROTOCOLS, KAFKA_SASL_MECHANISMS, KafkaSettings};
pub use wiring::record_processor;
#[cfg(feature = "broker")]
pub use wiring::{kafka_relay, kafka_timer_pump};
