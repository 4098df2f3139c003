//! The ingestion path without a broker (topics.md): what the embedded default needs of the
//! consumer's side, with no Kafka client in it. The Kafka crate (`load-agent-kafka`) runs the
//! same unit of work behind its consumer.
//!
//! Layout:
//! - [`record`]: [`InboundRecord`], an owned record: what the unit of work, the DLQ, dumps and
//!   replay handle.
//! - [`process`]: the unit of work, [`RecordProcessor::process`]: decode, key check, the load
//!   worker; [`RecordOutcome`], [`DeadLetter`]; [`record_processor`], the worker behind the
//!   consumer and replay.
//! - [`dump`], [`replay`], [`dump_spec`]: the dump file format, `load-agent replay`, and the
//!   generator of the recorded dumps under `evals/dumps/`.
//! - [`settings`]: the `[kafka]` section of the configuration ([`KafkaSettings`], its checks),
//!   read by every build (the embedded default refuses `kafka.brokers` by name).
//! - [`topics`]: the default topic and group names (their one home).
//! - [`metric_names`]: the name of every metric this crate emits (one constant each).
//!
//! Feature `registry`: [`RecordProcessor::with_registry`], decoding through a
//! Confluent-compatible schema registry (the Kafka crate turns it on).
//!
//! Architecture invariant: this crate decides nothing and knows no Kafka client. Decisions come
//! from the runtime's worker (`load_agent_agent::process_event`), and the only path from a record
//! to the log is [`RecordProcessor::process`], which the consumer and `replay` both run.

pub mod dump;
pub mod dump_spec;
pub mod metric_names;
pub mod process;
pub mod record;
pub mod replay;
pub mod settings;
pub mod topics;

pub use dump::{DumpRecord, read_dump, write_dump};
pub use dump_spec::generate_dump;
pub use process::{
    DeadLetter, DeadLetterKind, MAX_RECORD_BYTES, RecordOutcome, RecordProcessor, record_processor,
};
pub use record::InboundRecord;
pub use replay::{ReplayError, ReplaySummary, replay, replay_records};
pub use settings::{KAFKA_PROTOCOLS, KAFKA_SASL_MECHANISMS, KafkaSettings};
