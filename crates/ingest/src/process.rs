//! The unit of work of the consumer: one record in, one outcome out. Decode the Avro value
//! (`load_agent_avro::decode_inbound`), check the record key against the payload's `load_id`,
//! and run the load worker (`Worker::process_one`: snapshot, `prepare_event`, decide, append);
//! [`record_processor`] builds it from the stores.
//!
//! The Kafka consumer (`load_agent_kafka::consumer`) and `replay` (replay.rs) both call
//! [`RecordProcessor::process`], so a replayed dump exercises exactly the consumer's code.
//! Nothing here touches Kafka: the caller sends dead letters and stores offsets.

use std::sync::Arc;

use load_agent_agent::{Agent, InvalidEvent};
use load_agent_avro::{DecodeError, decode_inbound};
use load_agent_domain::DecisionRecord;
use load_agent_llm::LlmClient;
use load_agent_runtime::{
    CacheConfig, Clock, GroupCommit, GroupCommitConfig, RunOutcome, SnapshotCache, SnapshotSource, Worker,
    WorkerConfig,
};
use load_agent_store::Stores;
use tracing::warn;

use crate::metric_names as names;
use crate::record::InboundRecord;

load_agent_domain::spelled_enum! {
    /// Why a record goes to the DLQ: header `dlq-reason-kind`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DeadLetterKind {
        /// The value is not a decodable `InboundEvent` (framing, schema id, Avro body, a field the
        /// domain rejects while decoding).
        Decode => "decode",
        /// The value decodes but is not valid for its load (key mismatch, unknown load, bad field).
        InvalidEvent => "invalid_event",
    }
}

/// What is wrong with a dead-lettered record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub kind: DeadLetterKind,
    /// A stable short code (`bad_magic`, `key_mismatch`, `unknown_load`, ...): header `dlq-error-code`.
    pub code: &'static str,
    /// The human-readable error: header `dlq-error`.
    pub error: String,
    /// The offending field's path, when a field is to blame: header `dlq-error-field`.
    pub field: Option<String>,
}

impl DeadLetter {
    pub fn decode(e: &DecodeError) -> Self {
        DeadLetter {
            kind: DeadLetterKind::Decode,
            code: decode_code(e),
            error: e.to_string(),
            field: e.field_path().map(str::to_owned),
        }
    }

    fn too_large(len: usize) -> Self {
        DeadLetter {
            kind: DeadLetterKind::Decode,
            code: "record_too_large",
            error: format!(
                "the record value is {len} bytes, over the {MAX_RECORD_BYTES}-byte limit: not decoded"
            ),
            field: None,
        }
    }

    pub fn invalid(e: &InvalidEvent) -> Self {
        DeadLetter {
            kind: DeadLetterKind::InvalidEvent,
            code: invalid_code(e),
            error: e.to_string(),
            field: invalid_field(e),
        }
    }

    fn missing_key() -> Self {
        DeadLetter {
            kind: DeadLetterKind::InvalidEvent,
            code: "missing_key",
            error: "the record has no key, or a key that is not UTF-8: records of load-agent.events are keyed by load_id"
                .into(),
            field: None,
        }
    }
}

/// Record values longer than this are dead-lettered before they are decoded (`record_too_large`).
/// No valid event comes near it: the largest field, an email body, is limited to 256 KiB
/// (`load_agent_agent::prepare::MAX_EMAIL_TEXT_BYTES`). Brokers refuse larger records by
/// default (`message.max.bytes`, about 1 MB); this guards a broker configured higher.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// The stable code of a value that does not decode. apache-avro reports a string that is not
/// UTF-8 as a body error ("Invalid utf-8 string"); it gets its own code, `invalid_utf8`.
pub fn decode_code(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Body { reason, .. } if reason.to_ascii_lowercase().contains("utf-8") => "invalid_utf8",
        _ => e.code(),
    }
}

/// The stable code of an invalid event, for DLQ headers and metric labels.
pub fn invalid_code(e: &InvalidEvent) -> &'static str {
    match e {
        InvalidEvent::EmptyEventId => "empty_event_id",
        InvalidEvent::KeyMismatch { .. } => "key_mismatch",
        InvalidEvent::UnknownLoad(_) => "unknown_load",
        InvalidEvent::BadRegistration(_) => "bad_registration",
        InvalidEvent::UnknownSop(_) => "unknown_sop",
        InvalidEvent::UnknownSopVersion { .. } => "unknown_sop_version",
        InvalidEvent::RegistrationLoadIdMismatch { .. } => "registration_load_id_mismatch",
        InvalidEvent::BadField { .. } => "bad_field",
        InvalidEvent::Oversized { .. } => "oversized",
        InvalidEvent::BadTimestamp { .. } => "bad_timestamp",
        InvalidEvent::EventIdReused { .. } => "event_id_reused",
    }
}

fn invalid_field(e: &InvalidEvent) -> Option<String> {
    match e {
        InvalidEvent::EmptyEventId => Some("event_id".into()),
        InvalidEvent::KeyMismatch { .. } => Some("load_id".into()),
        InvalidEvent::BadField { field, .. }
        | InvalidEvent::Oversized { field, .. }
        | InvalidEvent::BadTimestamp { field, .. } => Some((*field).to_owned()),
        InvalidEvent::RegistrationLoadIdMismatch { .. } => Some("payload.load_id".into()),
        InvalidEvent::EventIdReused { .. } => Some("event_id".into()),
        _ => None,
    }
}

/// What one record came to.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordOutcome {
    /// The event, its decision and its outbox rows are committed: the offset may move past it.
    Committed { decision: DecisionRecord, version: u64 },
    /// The event was already in the log (a redelivery): the offset may move past it.
    AlreadyProcessed,
    /// The record goes to the DLQ; once the DLQ has it, the offset may move past it.
    DeadLetter(DeadLetter),
    /// Not done (conflicts exhausted, the store failing): run it again later; the offset stays.
    Retry { reason: String },
}

impl RecordOutcome {
    pub fn label(&self) -> &'static str {
        match self {
            RecordOutcome::Committed { .. } => "committed",
            RecordOutcome::AlreadyProcessed => "already_processed",
            RecordOutcome::DeadLetter(_) => "dead_letter",
            RecordOutcome::Retry { .. } => "retry",
        }
    }
}

/// Runs records through the load worker.
#[derive(Clone)]
pub struct RecordProcessor {
    worker: Arc<Worker>,
    /// Decodes records framed with a Confluent-compatible registry's ids (feature `registry`);
    /// `None`: the embedded registry.
    #[cfg(feature = "registry")]
    registry: Option<Arc<load_agent_avro::registry_client::RegistryClient>>,
}

impl std::fmt::Debug for RecordProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordProcessor").finish_non_exhaustive()
    }
}

impl RecordProcessor {
    /// The consumer was assigned partitions: their loads may have been written by another
    /// process since this one last ran them, so the worker verifies its cached snapshots again
    /// ([`Worker::distrust_snapshots`]).
    pub fn partitions_assigned(&self) {
        self.worker.distrust_snapshots();
    }

    pub fn new(worker: Arc<Worker>) -> Self {
        RecordProcessor {
            worker,
            #[cfg(feature = "registry")]
            registry: None,
        }
    }

    /// Decodes values through a Confluent-compatible schema registry (writer schemas fetched by
    /// id and cached). A registry that cannot answer leaves the record for a retry; a value it
    /// cannot decode goes to the DLQ.
    #[cfg(feature = "registry")]
    pub fn with_registry(mut self, registry: Arc<load_agent_avro::registry_client::RegistryClient>) -> Self {
        self.registry = Some(registry);
        self
    }

    async fn decode(&self, record: &InboundRecord) -> Result<load_agent_domain::InboundEvent, RecordOutcome> {
        let len = record.value.as_ref().map_or(0, Vec::len);
        if len > MAX_RECORD_BYTES {
            return Err(RecordOutcome::DeadLetter(DeadLetter::too_large(len)));
        }
        #[cfg(feature = "registry")]
        if let Some(registry) = &self.registry {
            use load_agent_avro::registry_client::RegistryClientError;
            let event = match registry.decode_inbound(record.value.as_deref().unwrap_or_default()).await {
                Ok(event) => event,
                Err(e) if e.is_retryable() => {
                    return Err(RecordOutcome::Retry { reason: format!("schema registry: {e}") });
                }
                Err(RegistryClientError::Decode(e)) => {
                    return Err(RecordOutcome::DeadLetter(DeadLetter::decode(&e)));
                }
                Err(e) => {
                    return Err(RecordOutcome::DeadLetter(DeadLetter {
                        kind: DeadLetterKind::Decode,
                        code: "registry",
                        error: e.to_string(),
                        field: None,
                    }));
                }
            };
            return key_checked(record, event).map_err(RecordOutcome::DeadLetter);
        }
        checked_event(record).map_err(RecordOutcome::DeadLetter)
    }

    pub fn worker(&self) -> &Arc<Worker> {
        &self.worker
    }

    /// The unit of work: decode, check the key, run the worker.
    pub async fn process(&self, record: &InboundRecord) -> RecordOutcome {
        let outcome = match self.decode(record).await {
            Err(outcome) => outcome,
            Ok(event) => match self.worker.process_one(event).await {
                RunOutcome::Committed { decision, version, .. } => {
                    RecordOutcome::Committed { decision, version }
                }
                RunOutcome::AlreadyProcessed => RecordOutcome::AlreadyProcessed,
                RunOutcome::Invalid(reason) => RecordOutcome::DeadLetter(DeadLetter::invalid(&reason)),
                RunOutcome::GiveBack { reason } => RecordOutcome::Retry { reason },
            },
        };
        if let RecordOutcome::DeadLetter(d) = &outcome {
            // `load_agent_dead_letters_total` counts what the consumer wrote, not this verdict.
            warn!(
                topic = %record.topic,
                partition = record.partition,
                offset = record.offset,
                code = d.code,
                error = %d.error,
                "record dead-lettered"
            );
        }
        metrics::counter!(names::RECORDS_TOTAL, "outcome" => outcome.label()).increment(1);
        outcome
    }
}

/// The load worker over a snapshot cache, its appends grouped across loads by `group_commit`,
/// as the consumer's unit of work. The cache is returned for its stats (hit rate).
pub fn record_processor(
    stores: &Stores,
    agent: Arc<Agent>,
    llm: Arc<dyn LlmClient>,
    clock: Arc<dyn Clock>,
    worker: WorkerConfig,
    cache: CacheConfig,
    group_commit: GroupCommitConfig,
) -> (RecordProcessor, SnapshotCache) {
    let cache = SnapshotCache::new(stores.events.clone(), cache);
    let snapshots: Arc<dyn SnapshotSource> = Arc::new(cache.clone());
    let appends = GroupCommit::wrap(stores.events.clone(), group_commit);
    let worker = Worker::new(appends, snapshots, agent, llm, clock).with_config(worker);
    (RecordProcessor::new(Arc::new(worker)), cache)
}

/// Decodes a record's value and checks its key against the payload's `load_id`: the part of the
/// unit of work that needs no store.
pub fn checked_event(record: &InboundRecord) -> Result<load_agent_domain::InboundEvent, DeadLetter> {
    let len = record.value.as_ref().map_or(0, Vec::len);
    if len > MAX_RECORD_BYTES {
        return Err(DeadLetter::too_large(len));
    }
    let event =
        decode_inbound(record.value.as_deref().unwrap_or_default()).map_err(|e| DeadLetter::decode(&e))?;
    key_checked(record, event)
}

/// The record key must be the payload's `load_id`.
fn key_checked(
    record: &InboundRecord,
    event: load_agent_domain::InboundEvent,
) -> Result<load_agent_domain::InboundEvent, DeadLetter> {
    let Some(key) = record.key_str() else {
        return Err(DeadLetter::missing_key());
    };
    if key != event.load_id {
        return Err(DeadLetter::invalid(&InvalidEvent::KeyMismatch {
            key: key.to_owned(),
            payload: event.load_id,
        }));
    }
    Ok(event)
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use load_agent_avro::encode_inbound;
    use load_agent_domain::{EventKind, InboundEvent};

    use super::*;

    fn record(key: Option<&str>, value: Option<Vec<u8>>) -> InboundRecord {
        InboundRecord {
            topic: "load-agent.events".into(),
            partition: 0,
            offset: 7,
            timestamp_ms: Some(0),
            key: key.map(|k| k.as_bytes().to_vec()),
            headers: vec![],
            value,
        }
    }

    fn sms(load: &str) -> Vec<u8> {
        encode_inbound(&InboundEvent {
            event_id: "sms_1".into(),
            load_id: load.into(),
            occurred_at: Utc.timestamp_opt(1_772_456_400, 0).single().unwrap_or_default(),
            kind: EventKind::Sms { from: "drv".into(), text: "ok".into() },
        })
    }

    #[test]
    fn a_record_whose_key_matches_its_payload_is_accepted() {
        let event = checked_event(&record(Some("481207"), Some(sms("481207")))).expect("valid");
        assert_eq!(event.load_id, "481207");
    }

    #[test]
    fn a_key_that_differs_from_the_payload_is_an_invalid_event() {
        let dead = checked_event(&record(Some("481208"), Some(sms("481207")))).expect_err("mismatch");
        assert_eq!((dead.kind, dead.code), (DeadLetterKind::InvalidEvent, "key_mismatch"));
        assert!(dead.error.contains("481207") && dead.error.contains("481208"), "{}", dead.error);
    }

    #[test]
    fn undecodable_values_and_missing_keys_are_dead_letters() {
        let dead =
            checked_event(&record(Some("1"), Some(b"{\"json\": true}".to_vec()))).expect_err("not avro");
        assert_eq!((dead.kind, dead.code), (DeadLetterKind::Decode, "bad_magic"));
        let dead = checked_event(&record(Some("1"), None)).expect_err("tombstone");
        assert_eq!(dead.code, "empty");
        let dead = checked_event(&record(None, Some(sms("481207")))).expect_err("no key");
        assert_eq!(dead.code, "missing_key");
    }

    #[test]
    fn a_string_that_is_not_utf8_is_a_decode_dead_letter_with_its_own_code() {
        let mut bytes = sms("481207");
        let pos = bytes.windows(2).position(|w| w == b"ok").expect("the text in the body");
        bytes[pos..pos + 2].copy_from_slice(&[0xc3, 0x28]);
        let dead = checked_event(&record(Some("481207"), Some(bytes))).expect_err("not UTF-8");
        assert_eq!((dead.kind, dead.code), (DeadLetterKind::Decode, "invalid_utf8"), "{dead:?}");
        assert!(dead.error.to_lowercase().contains("utf-8"), "{}", dead.error);
    }

    #[test]
    fn a_value_over_the_record_limit_is_not_decoded() {
        let mut bytes = sms("481207");
        bytes.resize(MAX_RECORD_BYTES + 1, 0);
        let dead = checked_event(&record(Some("481207"), Some(bytes))).expect_err("too large");
        assert_eq!((dead.kind, dead.code), (DeadLetterKind::Decode, "record_too_large"));
        assert!(dead.error.contains(&format!("{} bytes", MAX_RECORD_BYTES + 1)), "{}", dead.error);
        // At the limit, the value is decoded (here: trailing bytes after the record).
        let mut bytes = sms("481207");
        bytes.resize(MAX_RECORD_BYTES, 0);
        let dead = checked_event(&record(Some("481207"), Some(bytes))).expect_err("trailing bytes");
        assert_eq!(dead.code, "trailing_bytes");
    }

    #[test]
    fn every_invalid_event_has_a_stable_code_and_the_new_ones_name_their_field() {
        let at = Utc.timestamp_opt(1_772_456_400, 0).single().unwrap_or_default();
        let cases = [
            (
                InvalidEvent::Oversized { field: "payload.text", kind: "sms", bytes: 20_000, limit: 16_384 },
                "oversized",
                Some("payload.text"),
            ),
            (
                InvalidEvent::BadTimestamp { field: "occurred_at", at, now: at, problem: "x".into() },
                "bad_timestamp",
                Some("occurred_at"),
            ),
            (
                InvalidEvent::EventIdReused {
                    event_id: "e".into(),
                    load_id: "l".into(),
                    difference: "d".into(),
                },
                "event_id_reused",
                Some("event_id"),
            ),
        ];
        for (e, code, field) in cases {
            let dead = DeadLetter::invalid(&e);
            assert_eq!(
                (dead.kind, dead.code, dead.field.as_deref()),
                (DeadLetterKind::InvalidEvent, code, field)
            );
            assert_eq!(dead.error, e.to_string());
        }
    }
}
