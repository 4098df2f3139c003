//! The in-process runtime: one load queue, the worker, the relay, the timer pump and the fake
//! delivery services on one set of stores. The evals drive it step by step on a fake clock
//! ([`InProcessRuntime::settle`]); `serve`'s embedded mode runs its loops
//! ([`InProcessRuntime::spawn_loops`]).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use load_agent_agent::Agent;
use load_agent_domain::InboundEvent;
use load_agent_llm::LlmClient;
use load_agent_store::{EventStore, Outbox, StoreError, Stores, TimerStore};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::alerts::OpsAlerts;
use crate::cache::{CacheConfig, SnapshotCache};
use crate::clock::Clock;
use crate::delivery::{Destinations, FakeServices};
use crate::group_commit::{GroupCommit, GroupCommitConfig};
use crate::pump::{PumpConfig, TimerPump};
use crate::queue::{EventPublisher, InProcessQueue, LoadQueue, QueueError};
use crate::relay::{Relay, RelayConfig};
use crate::shutdown::Shutdown;
use crate::snapshot::{LogProjection, SnapshotSource};
use crate::worker::{DeadLetters, LogDeadLetters, RunOutcome, Worker, WorkerConfig};

/// Settling gives up after this many rounds of queue, relay and pump (a loop that never ends
/// is a bug, reported as such).
pub const MAX_SETTLE_ROUNDS: usize = 500;

/// Everything one in-process deployment needs.
pub struct InProcessRuntime {
    pub events: Arc<dyn EventStore>,
    pub outbox: Arc<dyn Outbox>,
    pub timers: Arc<dyn TimerStore>,
    pub queue: Arc<InProcessQueue>,
    pub worker: Arc<Worker>,
    pub relay: Arc<Relay>,
    pub pump: Arc<TimerPump>,
    pub snapshots: Arc<dyn SnapshotSource>,
    /// The snapshot cache behind `snapshots`, when [`RuntimeConfig::cache`] asks for one.
    pub cache: Option<SnapshotCache>,
    pub fakes: FakeServices,
    pub alerts: OpsAlerts,
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for InProcessRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessRuntime").field("queue", &self.queue).finish_non_exhaustive()
    }
}

/// Options of [`InProcessRuntime::new`].
#[derive(Debug, Clone, Copy)]
pub struct RuntimeConfig {
    pub worker: WorkerConfig,
    pub relay: RelayConfig,
    pub pump: PumpConfig,
    /// Pending events the queue holds at most; `None` for [`InProcessQueue::DEFAULT_CAPACITY`].
    pub queue_capacity: Option<usize>,
    /// The worker's snapshot cache, as the Kafka consumer has it; `None` projects the whole log
    /// on every run.
    pub cache: Option<CacheConfig>,
    /// How the worker's appends are grouped across loads ([`GroupCommitConfig::OFF`] here by
    /// default: the evals run one event at a time; `serve` turns it on from its settings).
    pub group_commit: GroupCommitConfig,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            worker: WorkerConfig::default(),
            relay: RelayConfig::default(),
            pump: PumpConfig::default(),
            queue_capacity: None,
            cache: Some(CacheConfig::default()),
            group_commit: GroupCommitConfig::OFF,
        }
    }
}

/// What one [`InProcessRuntime::settle`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SettleReport {
    pub runs: usize,
    pub rounds: usize,
    /// Events the worker refused as invalid, with the reason.
    pub invalid: Vec<(String, String)>,
    /// Runs that gave their event back, with the reason.
    pub given_back: Vec<(String, String)>,
    pub ops_alerts: usize,
}

impl InProcessRuntime {
    /// Wires a runtime on `stores` with the fake delivery services `fakes`.
    pub fn new(
        stores: Stores,
        agent: Arc<Agent>,
        llm: Arc<dyn LlmClient>,
        clock: Arc<dyn Clock>,
        fakes: FakeServices,
        config: RuntimeConfig,
    ) -> Self {
        let destinations: Arc<dyn Destinations> = Arc::new(fakes.clone());
        Self::with_destinations(stores, agent, llm, clock, fakes, destinations, config)
    }

    /// As [`new`](Self::new), sending to `destinations` (the fakes are kept for inspection).
    pub fn with_destinations(
        stores: Stores,
        agent: Arc<Agent>,
        llm: Arc<dyn LlmClient>,
        clock: Arc<dyn Clock>,
        fakes: FakeServices,
        destinations: Arc<dyn Destinations>,
        config: RuntimeConfig,
    ) -> Self {
        let queue =
            Arc::new(InProcessQueue::new(config.queue_capacity.unwrap_or(InProcessQueue::DEFAULT_CAPACITY)));
        let dyn_queue: Arc<dyn LoadQueue> = queue.clone();
        let cache = config.cache.map(|c| SnapshotCache::new(stores.events.clone(), c));
        let snapshots: Arc<dyn SnapshotSource> = match &cache {
            Some(cache) => Arc::new(cache.clone()),
            None => Arc::new(LogProjection::new(stores.events.clone())),
        };
        let alerts = OpsAlerts::new();
        let appends = GroupCommit::wrap(stores.events.clone(), config.group_commit);
        let worker =
            Worker::new(appends, snapshots.clone(), agent, llm, clock.clone()).with_config(config.worker);
        let relay = Relay::new(
            stores.outbox.clone(),
            stores.timers.clone(),
            destinations,
            dyn_queue.clone(),
            clock.clone(),
        )
        .with_config(config.relay)
        .with_wakeup(worker.commit_signal())
        .with_alerts(alerts.clone())
        .with_timer_faults(fakes.clone());
        let pump = TimerPump::new(stores.timers.clone(), dyn_queue, clock.clone()).with_config(config.pump);
        InProcessRuntime {
            events: stores.events,
            outbox: stores.outbox,
            timers: stores.timers,
            queue,
            worker: Arc::new(worker),
            relay: Arc::new(relay),
            pump: Arc::new(pump),
            snapshots,
            cache,
            fakes,
            alerts,
            clock,
        }
    }

    /// Puts an event on the load queue.
    pub async fn publish(&self, event: InboundEvent) -> Result<(), QueueError> {
        self.queue.publish(event).await
    }

    /// Processes queued events until the queue is empty (events published meanwhile included).
    pub async fn drain_queue(&self, report: &mut SettleReport) -> usize {
        let mut runs = 0;
        while let Some(delivery) = self.queue.try_receive().await {
            runs += 1;
            let outcome = self.worker.process_one(delivery.event.clone()).await;
            match outcome {
                RunOutcome::Committed { .. } | RunOutcome::AlreadyProcessed => {
                    self.queue.ack(&delivery).await
                }
                RunOutcome::Invalid(reason) => {
                    report.invalid.push((delivery.event.event_id.clone(), reason.to_string()));
                    LogDeadLetters.dead_letter(&delivery.event, &reason).await;
                    self.queue.ack(&delivery).await;
                }
                RunOutcome::GiveBack { reason } => {
                    report.given_back.push((delivery.event.event_id.clone(), reason));
                    // Settling is synchronous: a run that gives back would spin, so the event
                    // is dropped here and the caller reports it.
                    self.queue.ack(&delivery).await;
                }
            }
        }
        runs
    }

    /// Until nothing is left: process the load queue, relay the outbox, pump due timers, all
    /// at `now` (scenarios.md "What runs in a step", 3).
    pub async fn settle(&self, now: DateTime<Utc>) -> Result<SettleReport, SettleError> {
        let mut report = SettleReport::default();
        for round in 1..=MAX_SETTLE_ROUNDS {
            report.rounds = round;
            let runs = self.drain_queue(&mut report).await;
            report.runs += runs;
            let relayed = self.relay.relay_once(now).await.map_err(SettleError::Store)?;
            report.ops_alerts += relayed.ops_alerts;
            let pumped = self.pump.pump_once(now).await.map_err(SettleError::Store)?;
            if runs == 0 && !relayed.did_work() && pumped.fired == 0 && self.queue.is_empty() {
                return Ok(report);
            }
        }
        Err(SettleError::NoFixpoint { rounds: MAX_SETTLE_ROUNDS })
    }

    /// Starts the worker (`concurrency` consumers), relay and pump loops; they stop on `shutdown`.
    pub fn spawn_loops(
        &self,
        concurrency: usize,
        dead_letters: Arc<dyn DeadLetters>,
        shutdown: Shutdown,
    ) -> JoinSet<()> {
        let mut set = JoinSet::new();
        let queue: Arc<dyn LoadQueue> = self.queue.clone();
        set.spawn(self.worker.clone().run_many(concurrency, queue, dead_letters, shutdown.clone()));
        set.spawn(self.relay.clone().run(shutdown.clone()));
        set.spawn(self.pump.clone().run(shutdown));
        set
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error("store: {0}")]
    Store(StoreError),
    #[error("the queue, relay and pump did not settle after {rounds} rounds")]
    NoFixpoint { rounds: usize },
}
