//! The production pieces on Kafka, built from one set of stores: what `load-agent worker`,
//! `relay` and `timer-pump` run (and the integration tests).
//!
//! - worker: [`record_processor`] (the load worker over a [`SnapshotCache`]) and
//!   [`crate::consume`];
//! - relay: [`kafka_relay`] (the outbox behind the send limit, [`KafkaDestinations`], outcomes
//!   published by a [`KafkaEventPublisher`]);
//! - timer pump: [`kafka_timer_pump`] (`timer_fired` published by a [`KafkaEventPublisher`]).

use std::sync::Arc;

use load_agent_agent::Agent;
use load_agent_llm::LlmClient;
use load_agent_runtime::{
    CacheConfig, Clock, GroupCommit, GroupCommitConfig, SnapshotCache, SnapshotSource, Worker, WorkerConfig,
};
#[cfg(feature = "broker")]
use load_agent_runtime::{LoadQueue, PumpConfig, Relay, RelayConfig, TimerPump};
#[cfg(feature = "broker")]
use load_agent_store::Outbox;
use load_agent_store::Stores;
#[cfg(feature = "broker")]
use rdkafka::error::KafkaError;

#[cfg(feature = "broker")]
use crate::config::KafkaConfig;
use crate::process::RecordProcessor;
#[cfg(feature = "broker")]
use crate::produce::{AddressBook, KafkaDestinations, KafkaEventPublisher, SnapshotAddressBook};
#[cfg(feature = "broker")]
use load_agent_runtime::{ContactLimitedOutbox, SendLimits};

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

/// The relay on Kafka: due rows pass the per-contact send limit, go to
/// `load-agent.actions.<service>` with the contact's addresses (read from the load's snapshot),
/// and their outcomes go to the inbound topic. Run it with `Arc::new(relay).run(shutdown)`.
#[cfg(feature = "broker")]
pub fn kafka_relay(
    stores: &Stores,
    kafka: &KafkaConfig,
    limits: &SendLimits,
    clock: Arc<dyn Clock>,
    config: RelayConfig,
) -> Result<Relay, KafkaError> {
    let snapshots: Arc<dyn SnapshotSource> =
        Arc::new(SnapshotCache::new(stores.events.clone(), CacheConfig::default()));
    let addresses: Arc<dyn AddressBook> = Arc::new(SnapshotAddressBook::new(snapshots));
    let destinations = Arc::new(KafkaDestinations::new(kafka, Some(addresses))?);
    let outcomes: Arc<dyn LoadQueue> = Arc::new(KafkaEventPublisher::new(kafka, "load-agent-relay")?);
    let outbox: Arc<dyn Outbox> =
        Arc::new(ContactLimitedOutbox::new(stores.outbox.clone(), limits, clock.clone()));
    Ok(Relay::new(outbox, stores.timers.clone(), destinations, outcomes, clock).with_config(config))
}

/// The timer pump on Kafka: `timer_fired` events go to the inbound topic. Run it with
/// `Arc::new(pump).run(shutdown)`.
#[cfg(feature = "broker")]
pub fn kafka_timer_pump(
    stores: &Stores,
    kafka: &KafkaConfig,
    clock: Arc<dyn Clock>,
    config: PumpConfig,
) -> Result<TimerPump, KafkaError> {
    let publisher: Arc<dyn LoadQueue> = Arc::new(KafkaEventPublisher::new(kafka, "load-agent-timer-pump")?);
    Ok(TimerPump::new(stores.timers.clone(), publisher, clock).with_config(config))
}
