//! The runtime of load-agent (ADR 0003): everything between the load queue and the delivery
//! services, plus the scenario evals that drive it on a fake clock.
//!
//! Layout:
//! - [`clock`]: [`Clock`], [`SystemClock`], [`FakeClock`]: every read of "now" goes through one.
//! - [`queue`]: [`LoadQueue`] and [`InProcessQueue`]: FIFO per load, one run in flight per load;
//!   [`EventPublisher`], the queue's sending half (what the relay and the pump publish to).
//! - [`snapshot`]: [`SnapshotSource`] (where a run's state comes from) and [`LogProjection`].
//! - [`worker`]: [`Worker`]: one run per event (`process_one`) and the consumer loop.
//! - [`group_commit`]: [`GroupCommit`]: appends of different loads grouped into one transaction.
//! - [`delivery`]: the channel contract ([`Destinations`], [`DeliveryCommand`], [`Receipt`],
//!   [`DeliveryError`]) and [`FakeServices`], the in-process fakes with fault injection.
//! - [`relay`]: [`Relay`], ADR 0003's dispatcher (`relay_once` and the loop), [`RetryPolicy`].
//! - [`pump`]: [`TimerPump`] (`pump_once` and the loop).
//! - [`limit`]: [`ContactLimitedOutbox`], the per-contact send limit (governor) in front of
//!   every relay, in both modes.
//! - [`alerts`]: [`OpsAlerts`], independent of the Hero tooling.
//! - [`metric_names`]: the name of every metric this crate emits (one constant each).
//! - [`harness`]: [`InProcessRuntime`], the pieces wired on one set of stores.
//! - [`settings`]: the `[relay]`, `[timers]`, `[worker]` and `[shutdown]` sections of the
//!   configuration, and [`RuntimeConfig::from_settings`].
//! - [`shutdown`]: stopping the loops.
//! - [`crash`]: crash points for the crash tests (`LOAD_AGENT_CRASH_AT`).
//! - [`eval`]: `load-agent eval` ([`eval::run_eval`]).
//!
//! Architecture invariant: the runtime decides nothing. Decisions come from
//! `load_agent_agent::process_event`; the runtime reads, commits, sends and schedules. It knows
//! no Kafka and no vendor: production transports plug in behind [`LoadQueue`],
//! [`EventPublisher`] and [`Destinations`].

pub mod alerts;
pub mod cache;
pub mod clock;
pub mod crash;
pub mod delivery;
pub mod eval;
pub mod group_commit;
pub mod harness;
pub mod limit;
pub mod metric_names;
pub mod pump;
pub mod queue;
pub mod relay;
pub mod settings;
pub mod shutdown;
pub mod snapshot;
pub mod stages;
pub mod worker;

pub use alerts::{OpsAlert, OpsAlerts};
pub use cache::{CacheConfig, CacheStats, CacheWeigher, SnapshotCache};
pub use clock::{Clock, FakeClock, SystemClock};
pub use crash::crash_point;
pub use delivery::{
    Delivered, DeliveryCommand, DeliveryError, Destinations, FailMode, FakeServices, FaultChange, FaultRule,
    Receipt,
};
pub use eval::{EvalError, EvalSummary, run_eval};
pub use group_commit::{GroupCommit, GroupCommitConfig};
pub use harness::{InProcessRuntime, RuntimeConfig, SettleError, SettleReport};
pub use limit::{ContactLimit, ContactLimitedOutbox, ContactSendLimiter, SendLimits, SendLimitsSetting};
pub use pump::{PumpConfig, PumpReport, TimerPump, timer_fired_event};
pub use queue::{Delivery, EventPublisher, InProcessQueue, LoadQueue, QueueError};
pub use relay::{Relay, RelayConfig, RelayReport, RetryPolicy, outcome_event};
pub use settings::{RelaySettings, ShutdownSettings, TimerSettings, WorkerSettings};
pub use shutdown::{Shutdown, ShutdownTrigger, shutdown_channel};
pub use snapshot::{LogProjection, SnapshotSource};
pub use stages::{RoundTrips, Stage, StageSink};
pub use worker::{DeadLetters, LogDeadLetters, RunOutcome, Worker, WorkerConfig, outbox_rows};
