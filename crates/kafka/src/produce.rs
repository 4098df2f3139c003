//! Everything that writes to Kafka, on one idempotent producer type:
//! - [`KafkaDestinations`]: the relay's [`Destinations`], one topic per service;
//! - [`KafkaEventPublisher`]: the [`LoadQueue`] the relay and the timer pump publish
//!   `action_outcome` and `timer_fired` events to (publish only: the consumer reads the topic);
//! - [`DlqProducer`]: dead letters.
//!
//! Every send waits for the broker's acknowledgement (`acks=all`) before it returns, so a
//! caller that moves on (marks a row dispatched, stores an offset) only does so for a record
//! the broker has.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use load_agent_avro::Addresses;
use load_agent_avro::action_command::encode_action_command_with_id;
use load_agent_avro::inbound::encode_inbound_with_id;
use load_agent_domain::{Destination, InboundEvent};
use load_agent_runtime::{
    ActionCommand, Delivery, DeliveryError, Destinations, LoadQueue, QueueError, Receipt, SnapshotSource,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tracing::warn;

use crate::config::KafkaConfig;
use crate::dlq::dead_letter_headers;
use crate::process::DeadLetter;
use crate::record::InboundRecord;

/// Header carrying an action's idempotency key (topics.md).
pub const HEADER_IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Header naming the action kind of an `ActionCommand` record (for routing and metrics without
/// decoding the value).
pub const HEADER_ACTION_KIND: &str = "action-kind";
/// Header naming who wrote an inbound record the agent produced itself.
pub use crate::record::HEADER_SOURCE;

/// An idempotent producer that waits for each acknowledgement.
#[derive(Clone)]
pub struct Producer {
    inner: FutureProducer,
    timeout: Duration,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").field("timeout", &self.timeout).finish_non_exhaustive()
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
    /// Builds the idempotent producer of `config` (no network until the first send).
    pub fn new(config: &KafkaConfig) -> Result<Self, KafkaError> {
        Ok(Producer { inner: config.producer_config().create()?, timeout: config.send_timeout })
    }

    /// Sends one record and waits until the broker acknowledges it.
    pub async fn send(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, &[u8])],
    ) -> Result<Written, KafkaError> {
        let mut owned = OwnedHeaders::new_with_capacity(headers.len().max(1));
        for (name, value) in headers {
            owned = owned.insert(Header { key: name, value: Some(*value) });
        }
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).headers(owned);
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(v) = value {
            record = record.payload(v);
        }
        match self.inner.send(record, self.timeout).await {
            Ok(d) => Ok(Written { topic: topic.to_owned(), partition: d.partition, offset: d.offset }),
            Err((e, _)) => Err(e),
        }
    }

    /// Waits for every queued record (shutdown).
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        rdkafka::producer::Producer::flush(&self.inner, timeout)
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

/// Resolves the addresses of an action's contact for its `ActionCommand` (phone, email, Slack
/// channel), from the load's registration.
#[async_trait]
pub trait AddressBook: Send + Sync {
    async fn addresses(&self, load_id: &str, contact_id: &str) -> Result<Addresses, String>;
}

/// Reads the contact from the load's projected state (a [`crate::SnapshotCache`] keeps that
/// cheap).
pub struct SnapshotAddressBook {
    snapshots: Arc<dyn SnapshotSource>,
}

impl SnapshotAddressBook {
    pub fn new(snapshots: Arc<dyn SnapshotSource>) -> Self {
        SnapshotAddressBook { snapshots }
    }
}

#[async_trait]
impl AddressBook for SnapshotAddressBook {
    async fn addresses(&self, load_id: &str, contact_id: &str) -> Result<Addresses, String> {
        let state = self.snapshots.snapshot(load_id).await.map_err(|e| e.to_string())?;
        Ok(state
            .load
            .as_ref()
            .and_then(|l| l.contact(contact_id))
            .map(Addresses::of_contact)
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
        Ok(KafkaDestinations { producer: Producer::new(config)?, config: config.clone(), addresses })
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
        command: &ActionCommand,
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
}

/// Publishes events to the inbound topic (keyed by `load_id`, Avro `InboundEvent`): what the
/// relay (`action_outcome`) and the timer pump (`timer_fired`) hand to [`LoadQueue::publish`].
/// Consumption is the Kafka consumer's job, so the receiving half of the trait is empty:
/// `try_receive`/`receive` return `None` and `ack`/`nack` do nothing.
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
    /// `load-agent-timer-pump`, ...).
    pub fn new(config: &KafkaConfig, source: &str) -> Result<Self, KafkaError> {
        Ok(KafkaEventPublisher {
            producer: Producer::new(config)?,
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
impl LoadQueue for KafkaEventPublisher {
    async fn publish(&self, event: InboundEvent) -> Result<(), QueueError> {
        match self.publish_event(&event).await {
            Ok(_) => Ok(()),
            Err(e) => {
                warn!(load_id = %event.load_id, event_id = %event.event_id, error = %e, "publishing to the inbound topic failed");
                Err(QueueError::Other(format!("kafka {}: {e}", self.topic)))
            }
        }
    }

    async fn try_receive(&self) -> Option<Delivery> {
        None
    }

    async fn receive(&self) -> Option<Delivery> {
        None
    }

    async fn ack(&self, _delivery: &Delivery) {}

    async fn nack(&self, _delivery: Delivery) {}
}

/// Writes dead letters to the DLQ topic: the original key and value, the original headers and
/// the `dlq-*` headers naming the error and the source record.
#[derive(Debug, Clone)]
pub struct DlqProducer {
    producer: Producer,
    topic: String,
}

impl DlqProducer {
    pub fn new(config: &KafkaConfig) -> Result<Self, KafkaError> {
        Ok(DlqProducer { producer: Producer::new(config)?, topic: config.dlq_topic.clone() })
    }

    pub async fn send(&self, record: &InboundRecord, dead: &DeadLetter) -> Result<Written, KafkaError> {
        let headers = dead_letter_headers(record, dead);
        let refs: Vec<(&str, &[u8])> = headers.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
        self.producer.send(&self.topic, record.key.as_deref(), record.value.as_deref(), &refs).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
