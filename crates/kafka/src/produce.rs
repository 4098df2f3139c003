//! Everything that writes to Kafka, on one idempotent producer type:
//! - [`KafkaDestinations`]: the relay's [`Destinations`], one topic per service;
//! - [`KafkaEventPublisher`]: the [`EventPublisher`] the relay and the timer pump publish
//!   `action_outcome` and `timer_fired` events to (publish only: the consumer reads the topic);
//! - [`DlqProducer`]: dead letters;
//! - [`relay_ends`]: the two Kafka ends of a relay (the binary wires the relay around them).
//!
//! Every send waits for the broker's acknowledgement (`acks=all`) before it returns, so a
//! caller that moves on (marks a row dispatched, stores an offset) only does so for a record
//! the broker has. Sends are cheap to keep in flight together: the relay sends a whole claimed
//! batch at once and the producer pipelines the records (idempotent, so order per partition
//! holds across retries).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use load_agent_avro::Addresses;
use load_agent_avro::action_command::encode_action_command_with_id;
use load_agent_avro::inbound::encode_inbound_with_id;
use load_agent_domain::{Destination, InboundEvent, LoadRegistered, OutcomeStatus};
use load_agent_ingest::dump_spec::partition_for;
use load_agent_ingest::{DeadLetter, InboundRecord};
use load_agent_runtime::{
    CacheConfig, DeliveryCommand, DeliveryError, Destinations, EventPublisher, LogProjection, QueueError,
    Receipt, SnapshotSource,
};
use load_agent_store::{DeadLetterStore, EventStore, KeptDeadLetter};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};
use tracing::warn;

use crate::config::KafkaConfig;
use crate::dlq::{
    PRODUCER_MAX_BYTES, dead_letter_headers, kept_reference, record_size_estimate, reduced_dead_letter,
};
use crate::metric_names as names;

/// Header carrying an action's idempotency key (topics.md).
pub const HEADER_IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Header naming the action kind of an `ActionCommand` record (for routing and metrics without
/// decoding the value).
pub const HEADER_ACTION_KIND: &str = "action-kind";
/// Header naming who wrote an inbound record the agent produced itself.
pub use load_agent_ingest::record::HEADER_SOURCE;

/// Which of `count` clients a record with this key goes through (0-based): the partitioner's
/// murmur2 modulo `count`, so with a count that divides a topic's partitions each client writes
/// whole partitions of its own. The producer's lanes use it, and so does anything that spreads
/// keys over several producers the same way (the load test's generators).
pub fn key_slot(key: &[u8], count: usize) -> usize {
    if count <= 1 {
        return 0;
    }
    let n = u32::try_from(count).unwrap_or(u32::MAX);
    usize::try_from(partition_for(key, n)).unwrap_or(0).min(count - 1)
}

/// An idempotent producer that waits for each acknowledgement, over one or more *lanes*.
///
/// A lane is one librdkafka producer, with its own connection to each broker. librdkafka puts
/// one partition in each produce request (confluentinc/librdkafka#1700) and an idempotent
/// producer keeps at most 5 requests in flight per connection, so one lane sends a burst of
/// records for twelve partitions as three rounds of acknowledgements, one after the other.
///
/// With several lanes ([`Producer::with_lanes`], `kafka.producer_lanes`) a record goes through
/// the lane its key picks, as the partitioner picks its partition (Kafka's murmur2 of the key,
/// modulo the lanes), so a key always goes through the same lane (its records keep their order)
/// and, with a lane count that divides the partitions, each lane writes whole partitions of its
/// own; the lanes' requests are in flight side by side. A record without a key takes the first
/// lane.
///
/// An idempotent producer can fail for good: librdkafka raises a *fatal* error (a broker that
/// reports an out-of-order sequence number, a fenced producer id) and from then on refuses every
/// record. The send that meets one replaces that lane's producer with a new one (a new producer
/// id and sequence) and returns its error as a retryable one, so the relay's next attempt goes
/// through instead of the process needing a restart.
#[derive(Clone)]
pub struct Producer {
    lanes: Arc<[Lane]>,
    config: rdkafka::ClientConfig,
    timeout: Duration,
}

/// One lane: its current producer, replaced when it fails for good.
struct Lane {
    current: std::sync::RwLock<FutureProducer<ProducerStats>>,
    context: ProducerStats,
}

/// A producer's librdkafka context: its statistics give the round trip of its produce requests
/// to each broker, as the gauge `load_agent_producer_broker_round_trip_seconds{client,lane}`
/// and to the load test's probe (the lanes of one client together).
#[derive(Clone)]
pub struct ProducerStats {
    client: Arc<str>,
    /// 1-based.
    lane: usize,
}

impl rdkafka::ClientContext for ProducerStats {
    fn stats(&self, statistics: rdkafka::Statistics) {
        crate::stats::publish(
            &statistics,
            Some(names::PRODUCER_ROUND_TRIP_SECONDS),
            &[("client", self.client.to_string()), ("lane", self.lane.to_string())],
            &self.client,
        );
    }
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("lanes", &self.lanes.len())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Where a record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

impl Written {
    /// `topic/partition/offset`: the receipt `mark_dispatched` stores.
    pub fn receipt(&self) -> String {
        format!("{}/{}/{}", self.topic, self.partition, self.offset)
    }
}

impl Producer {
    /// Builds the idempotent producer of `config`, one lane (no network until the first send);
    /// `client` names it in its round-trip metric (`dlq`, `floor-producer`, ...).
    pub fn new(config: &KafkaConfig, client: &str) -> Result<Self, KafkaError> {
        Self::with_lanes(config, client, 1)
    }

    /// The same over `lanes` producers (at least 1), a key always through the same one.
    pub fn with_lanes(config: &KafkaConfig, client: &str, lanes: usize) -> Result<Self, KafkaError> {
        let settings = config.producer_config();
        let client: Arc<str> = client.into();
        let lanes = (1..=lanes.max(1))
            .map(|lane| {
                let context = ProducerStats { client: client.clone(), lane };
                let producer = settings.create_with_context(context.clone())?;
                Ok(Lane { current: std::sync::RwLock::new(producer), context })
            })
            .collect::<Result<Vec<_>, KafkaError>>()?;
        Ok(Producer { lanes: lanes.into(), config: settings, timeout: config.send_timeout })
    }

    /// How many lanes the producer has.
    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// The lane of a record with this key (0-based): the partitioner's murmur2 modulo the
    /// lanes; the first lane without a key.
    fn lane_index(&self, key: Option<&[u8]>) -> usize {
        key.map_or(0, |k| key_slot(k, self.lanes.len()))
    }

    fn lane(&self, key: Option<&[u8]>) -> &Lane {
        &self.lanes[self.lane_index(key)]
    }

    /// Sends one record and waits until the broker acknowledges it. Headers are name/value
    /// pairs, borrowed (`(&str, &[u8])`) or owned (`(String, Vec<u8>)`).
    pub async fn send<N: AsRef<str>, V: AsRef<[u8]>>(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(N, V)],
    ) -> Result<Written, KafkaError> {
        let mut owned = OwnedHeaders::new_with_capacity(headers.len().max(1));
        for (name, value) in headers {
            owned = owned.insert(Header { key: name.as_ref(), value: Some(value.as_ref()) });
        }
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).headers(owned);
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(v) = value {
            record = record.payload(v);
        }
        let lane = self.lane(key);
        let producer = lane.current();
        match producer.send(record, self.timeout).await {
            Ok(d) => Ok(Written { topic: topic.to_owned(), partition: d.partition, offset: d.offset }),
            Err((e, _)) => {
                lane.replace_if_fatal(&producer, &self.config);
                Err(e)
            }
        }
    }

    /// Waits for every queued record of every lane (shutdown).
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        let deadline = std::time::Instant::now() + timeout;
        for lane in self.lanes.iter() {
            lane.current().flush(deadline.saturating_duration_since(std::time::Instant::now()))?;
        }
        Ok(())
    }
}

impl Lane {
    /// The current producer (a cheap handle; a replaced one finishes its own sends).
    fn current(&self) -> FutureProducer<ProducerStats> {
        match self.current.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces `failed` when librdkafka says it failed for good; a concurrent send that met the
    /// same error finds it replaced already.
    fn replace_if_fatal(&self, failed: &FutureProducer<ProducerStats>, settings: &rdkafka::ClientConfig) {
        let Some((code, reason)) = failed.client().fatal_error() else {
            return;
        };
        let mut guard = match self.current.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if guard.client().fatal_error().is_none() {
            return;
        }
        match settings.create_with_context(self.context.clone()) {
            Ok(fresh) => {
                warn!(?code, %reason, lane = self.context.lane, "the Kafka producer failed for good; replaced by a new one");
                *guard = fresh;
            }
            Err(e) => {
                warn!(?code, %reason, lane = self.context.lane, error = %e, "the Kafka producer failed for good and could not be replaced")
            }
        }
    }
}

/// Whether a produce error can go away by itself (true) or means the record can never be
/// written as it is (false).
pub fn is_retryable(e: &KafkaError) -> bool {
    let code = match e {
        KafkaError::MessageProduction(code) => *code,
        _ => return true,
    };
    !matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::UnsupportedForMessageFormat
    )
}

// ---------------------------------------------------------------------------------------------

/// The relay's two ends on Kafka: the action topics ([`KafkaDestinations`], each command with
/// its contact's addresses from the load's registration, kept by a [`RegistrationAddressBook`]
/// over `events`), and the inbound topic its `action_outcome`s go to ([`KafkaEventPublisher`]).
pub fn relay_ends(events: Arc<dyn EventStore>, config: &KafkaConfig) -> Result<RelayEnds, KafkaError> {
    // As many loads as the worker's snapshot cache keeps by default, for as long unused: each a
    // registration rather than a whole load state.
    let kept = CacheConfig::default();
    let addresses: Arc<dyn AddressBook> =
        Arc::new(RegistrationAddressBook::new(events, kept.max_capacity, kept.time_to_idle));
    let destinations = Arc::new(KafkaDestinations::new(config, Some(addresses))?);
    let outcomes = Arc::new(KafkaEventPublisher::new(config, "load-agent-relay")?);
    Ok(RelayEnds { destinations, outcomes })
}

/// What [`relay_ends`] makes: `Relay::new(outbox, timers, ends.destinations, ends.outcomes, clock)`.
pub struct RelayEnds {
    pub destinations: Arc<dyn Destinations>,
    pub outcomes: Arc<dyn EventPublisher>,
}

/// Resolves the addresses of an action's contact for its `ActionCommand` (phone, email, Slack
/// channel), from the load's registration.
#[async_trait]
pub trait AddressBook: Send + Sync {
    async fn addresses(&self, load_id: &str, contact_id: &str) -> Result<Addresses, String>;
}

/// Reads the contact from the load's registration, projected from its log once and then kept.
/// The registration is write-once (the projection keeps a load's first `load_registered` and
/// ignores any later one), so a kept registration holds the contacts' addresses for good: the log
/// is read only for a load not kept yet, or not registered yet (nothing is kept for it, so its
/// registration is found when it lands). Only the registration is kept, not the load's state
/// (its messages, asks, decisions): the same memory holds many more loads than a snapshot cache,
/// and the worker's snapshot cache and its hit-rate metrics stay the worker's.
pub struct RegistrationAddressBook {
    projection: LogProjection,
    kept: moka::future::Cache<String, Arc<LoadRegistered>>,
}

impl RegistrationAddressBook {
    /// Keeps at most `capacity` loads' registrations, each dropped after `time_to_idle` unused.
    pub fn new(events: Arc<dyn EventStore>, capacity: u64, time_to_idle: Duration) -> Self {
        let kept = moka::future::Cache::builder().max_capacity(capacity).time_to_idle(time_to_idle).build();
        RegistrationAddressBook { projection: LogProjection::new(events), kept }
    }

    /// Registrations kept now (moka counts lazily; for tests).
    pub async fn kept(&self) -> u64 {
        self.kept.run_pending_tasks().await;
        self.kept.entry_count()
    }

    /// The load's registration, `None` before it is logged. Lookups of a load not kept that
    /// arrive together (a claimed batch's rows of one load, sent at once) share one read of its
    /// log.
    async fn registration(&self, load_id: &str) -> Result<Option<Arc<LoadRegistered>>, String> {
        // `Err(None)`: not registered yet, so nothing is kept; `Err(Some(_))`: the read failed.
        let read = async {
            let state = self.projection.snapshot(load_id).await.map_err(|e| Some(e.to_string()))?;
            state.load.map(Arc::new).ok_or(None::<String>)
        };
        match self.kept.try_get_with_by_ref(load_id, read).await {
            Ok(registration) => Ok(Some(registration)),
            Err(e) => match e.as_ref() {
                None => Ok(None),
                Some(failed) => Err(failed.clone()),
            },
        }
    }
}

#[async_trait]
impl AddressBook for RegistrationAddressBook {
    async fn addresses(&self, load_id: &str, contact_id: &str) -> Result<Addresses, String> {
        Ok(self
            .registration(load_id)
            .await?
            .and_then(|r| r.contact(contact_id).map(Addresses::of_contact))
            .unwrap_or_default())
    }
}

/// The relay's destination on Kafka: each action goes to `load-agent.actions.<service>`, keyed
/// by `load_id` (so one load's actions stay in order on one partition), with the header
/// `idempotency-key`, its value the Avro `ActionCommand` with the log version it was committed
/// at. The receipt is `topic/partition/offset`.
///
/// Order per load and topic: the outbox hands out one row per load and destination at a time,
/// and the idempotent producer keeps the order of what it is given per partition, retries
/// included.
pub struct KafkaDestinations {
    producer: Producer,
    config: KafkaConfig,
    addresses: Option<Arc<dyn AddressBook>>,
}

impl std::fmt::Debug for KafkaDestinations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaDestinations")
            .field("prefix", &self.config.actions_topic_prefix)
            .finish_non_exhaustive()
    }
}

impl KafkaDestinations {
    /// `addresses`: where the contact's phone, email and Slack channel come from; without one,
    /// commands carry the contact id only.
    pub fn new(config: &KafkaConfig, addresses: Option<Arc<dyn AddressBook>>) -> Result<Self, KafkaError> {
        Ok(KafkaDestinations {
            producer: Producer::with_lanes(config, "actions", config.producer_lanes)?,
            config: config.clone(),
            addresses,
        })
    }

    pub fn producer(&self) -> &Producer {
        &self.producer
    }
}

#[async_trait]
impl Destinations for KafkaDestinations {
    async fn send(
        &self,
        destination: Destination,
        command: &DeliveryCommand,
    ) -> Result<Receipt, DeliveryError> {
        if destination == Destination::Timer {
            return Err(DeliveryError::Permanent(
                "timer actions are applied by the relay, never published".into(),
            ));
        }
        let addresses = match (&self.addresses, command.contact_id()) {
            (Some(book), Some(contact)) => book
                .addresses(&command.load_id, contact)
                .await
                .map_err(|e| DeliveryError::Retryable(format!("resolving the contact's addresses: {e}")))?,
            _ => Addresses::NONE,
        };
        let value = encode_action_command_with_id(
            self.config.schema_ids.action_command,
            &command.action,
            &command.load_id,
            command.load_version,
            &addresses,
        );
        let topic = self.config.actions_topic(destination);
        let kind = command.kind();
        let headers: [(&str, &[u8]); 2] = [
            (HEADER_IDEMPOTENCY_KEY, command.idempotency_key.as_bytes()),
            (HEADER_ACTION_KIND, kind.as_str().as_bytes()),
        ];
        match self.producer.send(&topic, Some(command.load_id.as_bytes()), Some(&value), &headers).await {
            Ok(w) => Ok(Receipt { id: w.receipt() }),
            Err(e) if is_retryable(&e) => Err(DeliveryError::Retryable(format!("kafka {topic}: {e}"))),
            Err(e) => Err(DeliveryError::Permanent(format!("kafka {topic}: {e}"))),
        }
    }

    /// The broker has the command; the delivery service has not said anything yet.
    fn sent_status(&self) -> OutcomeStatus {
        OutcomeStatus::Published
    }
}

/// Publishes events to the inbound topic (keyed by `load_id`, Avro `InboundEvent`): what the
/// relay (`action_outcome`) and the timer pump (`timer_fired`) hand to [`EventPublisher::publish`].
/// Consumption is the Kafka consumer's job, so this is only the queue's sending half, not a
/// `LoadQueue`.
pub struct KafkaEventPublisher {
    producer: Producer,
    topic: String,
    source: String,
    schema_id: load_agent_avro::SchemaId,
}

impl std::fmt::Debug for KafkaEventPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaEventPublisher").field("topic", &self.topic).finish_non_exhaustive()
    }
}

impl KafkaEventPublisher {
    /// `source`: the value of the `source` header of every record (`load-agent-relay`,
    /// `load-agent-timer-pump`, ...); over `config.producer_lanes` lanes.
    pub fn new(config: &KafkaConfig, source: &str) -> Result<Self, KafkaError> {
        Ok(KafkaEventPublisher {
            producer: Producer::with_lanes(config, source, config.producer_lanes)?,
            topic: config.events_topic.clone(),
            source: source.into(),
            schema_id: config.schema_ids.inbound_event,
        })
    }

    pub async fn publish_event(&self, event: &InboundEvent) -> Result<Written, KafkaError> {
        let value = encode_inbound_with_id(self.schema_id, event);
        let headers: [(&str, &[u8]); 1] = [(HEADER_SOURCE, self.source.as_bytes())];
        self.producer.send(&self.topic, Some(event.load_id.as_bytes()), Some(&value), &headers).await
    }
}

#[async_trait]
impl EventPublisher for KafkaEventPublisher {
    async fn publish(&self, event: InboundEvent) -> Result<(), QueueError> {
        match self.publish_event(&event).await {
            Ok(_) => Ok(()),
            Err(e) => {
                warn!(load_id = %event.load_id, event_id = %event.event_id, error = %e, "publishing to the inbound topic failed");
                Err(QueueError::Other(format!("kafka {}: {e}", self.topic)))
            }
        }
    }
}

/// Writes dead letters to the DLQ topic: the original key and value, the original headers and
/// the `dlq-*` headers naming the error and the source record; or, when the topic cannot hold
/// that (too large for its `max.message.bytes`, or refused for good), the whole record kept in
/// the store's `dead_letters` and a reduced record pointing to it (`crate::dlq`).
#[derive(Clone)]
pub struct DlqProducer {
    producer: Producer,
    topic: String,
    /// The largest record the DLQ topic takes (its `max.message.bytes`, capped by the
    /// producer's own limit).
    limit: usize,
    kept: Arc<dyn DeadLetterStore>,
}

impl std::fmt::Debug for DlqProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DlqProducer")
            .field("topic", &self.topic)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

/// How a dead letter was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DlqWritten {
    /// The whole record is in the DLQ topic.
    Whole(Written),
    /// The whole record is in `dead_letters`; a reduced record in the DLQ topic points to it.
    Reduced { written: Written, why: String },
    /// The DLQ topic refused even the reduced record for good (it is missing, or the service
    /// may not write to it): the whole record is in `dead_letters` only.
    KeptOnly { error: String },
}

impl DlqWritten {
    /// The `form` label of `load_agent_dead_letters_total`.
    pub fn form(&self) -> &'static str {
        match self {
            DlqWritten::Whole(_) => "whole",
            DlqWritten::Reduced { .. } => "reduced",
            DlqWritten::KeptOnly { .. } => "kept_only",
        }
    }
}

impl DlqProducer {
    /// `kept`: where records the DLQ topic cannot hold are kept whole. The topic's limit is
    /// assumed to be the producer's own until [`DlqProducer::with_topic_limit`] says otherwise.
    pub fn new(config: &KafkaConfig, kept: Arc<dyn DeadLetterStore>) -> Result<Self, KafkaError> {
        Ok(DlqProducer {
            producer: Producer::new(config, "dlq")?,
            topic: config.dlq_topic.clone(),
            limit: PRODUCER_MAX_BYTES,
            kept,
        })
    }

    /// The DLQ topic's `max.message.bytes` (read at start).
    pub fn with_topic_limit(mut self, topic_limit: usize) -> Self {
        self.limit = topic_limit.min(PRODUCER_MAX_BYTES);
        self
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Writes the dead letter whole if the topic can hold it, else keeps it in `dead_letters`
    /// and writes the reduced form. `Err`: a failure that may heal (the broker or the store
    /// unreachable); call again later.
    pub async fn write(&self, record: &InboundRecord, dead: &DeadLetter) -> Result<DlqWritten, String> {
        let headers = dead_letter_headers(record, dead);
        let size = record_size_estimate(record.key.as_deref(), record.value.as_deref(), &headers);
        let why = if size > self.limit {
            format!(
                "the dead letter takes about {size} bytes, over the {} bytes the DLQ topic {} takes",
                self.limit, self.topic
            )
        } else {
            match self
                .producer
                .send(&self.topic, record.key.as_deref(), record.value.as_deref(), &headers)
                .await
            {
                Ok(w) => return Ok(DlqWritten::Whole(w)),
                Err(e) if is_retryable(&e) => return Err(format!("kafka {}: {e}", self.topic)),
                Err(e) => format!("the DLQ topic {} refused the whole record: {e}", self.topic),
            }
        };
        let letter = KeptDeadLetter {
            source_topic: record.topic.clone(),
            source_partition: record.partition,
            source_offset: record.offset,
            key: record.key.clone(),
            headers: record.headers.clone(),
            value: record.value.clone(),
            error_code: dead.code.to_owned(),
            error: dead.error.clone(),
            kept_at: chrono::Utc::now(),
        };
        self.kept
            .keep_dead_letter(&letter)
            .await
            .map_err(|e| format!("keeping dead letter {} in dead_letters: {e}", kept_reference(record)))?;
        let (key, headers) = reduced_dead_letter(record, dead, &why);
        match self.producer.send(&self.topic, key.as_deref(), None, &headers).await {
            Ok(written) => Ok(DlqWritten::Reduced { written, why }),
            Err(e) if is_retryable(&e) => Err(format!("kafka {} (reduced dead letter): {e}", self.topic)),
            Err(e) => {
                Ok(DlqWritten::KeptOnly { error: format!("kafka {} (reduced dead letter): {e}", self.topic) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A broker that answers an idempotent producer with an out-of-order sequence number (as the
    /// test broker did under load) makes librdkafka fail the producer for good; the producer is
    /// replaced and the next send is written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_producer_that_failed_for_good_is_replaced_and_the_next_send_goes_through() {
        use rdkafka::mocking::MockCluster;
        use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

        let cluster = MockCluster::new(1).expect("a mock cluster");
        cluster.create_topic("t", 1, 1).expect("a topic");
        let mut config = KafkaConfig::new(cluster.bootstrap_servers());
        config.send_timeout = Duration::from_secs(10);
        // Over three lanes: the lane of the key `k` is replaced, the others are not touched.
        let producer = Producer::with_lanes(&config, "test", 3).expect("a producer");
        producer.send::<&str, &[u8]>("t", Some(b"k"), Some(b"one"), &[]).await.expect("the first send");
        cluster.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER],
        );
        let failed = producer.send::<&str, &[u8]>("t", Some(b"k"), Some(b"two"), &[]).await;
        let e = failed.expect_err("the broker refused the sequence");
        assert!(is_retryable(&e), "{e:?}");
        let written = producer.send::<&str, &[u8]>("t", Some(b"k"), Some(b"three"), &[]).await;
        assert!(written.is_ok(), "the replaced producer writes: {written:?}");
    }

    /// Over four lanes and twelve partitions, each key's records land on its partition (the
    /// partitioner's) in the order they were sent, a partition is written by one lane only, and
    /// every lane is used.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lanes_keep_each_keys_order_and_split_the_partitions_between_them() {
        use std::collections::{HashMap, HashSet};

        use rdkafka::mocking::MockCluster;

        let cluster = MockCluster::new(1).expect("a mock cluster");
        cluster.create_topic("t", 12, 1).expect("a topic");
        let config = KafkaConfig::new(cluster.bootstrap_servers());
        let producer = Producer::with_lanes(&config, "test", 4).expect("four lanes");
        assert_eq!(producer.lanes(), 4);
        let keys: Vec<String> = (0..60).map(|n| format!("L-{n}")).collect();
        let written = futures::future::join_all(keys.iter().map(|key| {
            let producer = producer.clone();
            async move {
                let mut written = Vec::new();
                for i in 0..3 {
                    let value = format!("{key}/{i}");
                    let w =
                        producer.send::<&str, &[u8]>("t", Some(key.as_bytes()), Some(value.as_bytes()), &[]);
                    written.push(w.await.expect("written"));
                }
                written
            }
        }))
        .await;
        let mut lanes_of_partition: HashMap<i32, HashSet<usize>> = HashMap::new();
        for (key, written) in keys.iter().zip(&written) {
            let partition = partition_for(key.as_bytes(), 12);
            assert!(written.iter().all(|w| w.partition == partition), "{key}: {written:?}");
            assert!(written.windows(2).all(|w| w[0].offset < w[1].offset), "{key} in order: {written:?}");
            let lane = producer.lane_index(Some(key.as_bytes()));
            lanes_of_partition.entry(partition).or_default().insert(lane);
        }
        assert!(lanes_of_partition.values().all(|lanes| lanes.len() == 1), "{lanes_of_partition:?}");
        let used: HashSet<usize> = lanes_of_partition.values().flatten().copied().collect();
        assert_eq!(used.len(), 4, "every lane writes");
        assert_eq!(producer.lane_index(None), 0, "no key: the first lane");
        producer.flush(Duration::from_secs(5)).expect("flushed");
    }

    #[test]
    fn produce_errors_that_cannot_heal_are_permanent() {
        assert!(!is_retryable(&KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)));
        assert!(is_retryable(&KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut)));
        assert!(is_retryable(&KafkaError::MessageProduction(RDKafkaErrorCode::UnknownTopicOrPartition)));
        assert!(is_retryable(&KafkaError::Canceled));
    }

    #[test]
    fn a_receipt_names_topic_partition_and_offset() {
        let w = Written { topic: "load-agent.actions.sms".into(), partition: 3, offset: 1742 };
        assert_eq!(w.receipt(), "load-agent.actions.sms/3/1742");
    }
}
