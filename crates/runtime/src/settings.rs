//! The runtime's sections of the configuration: `[relay]`, `[timers]`, `[worker]` and
//! `[shutdown]`, with the defaults the service runs with and their checks, and
//! [`RuntimeConfig::from_settings`]. The binary composes them (docs/configuration.md).
//!
//! The service's defaults are not all the defaults of [`RelayConfig`], [`PumpConfig`] and
//! [`GroupCommitConfig`], which the evals and tests run with (one row at a time, a 500 ms relay
//! poll, a 10 s timer poll): docs/configuration.md lists the differences.

use std::time::Duration;

use load_agent_domain::settings::SettingError;
use serde::{Deserialize, Serialize};

use crate::cache::{CacheConfig, CacheWeigher};
use crate::group_commit::GroupCommitConfig;
use crate::harness::RuntimeConfig;
use crate::limit::SendLimitsSetting;
use crate::pump::PumpConfig;
use crate::relay::{RelayConfig, RetryPolicy};
use crate::worker::WorkerConfig;

fn bad(setting: &str, problem: impl Into<String>) -> SettingError {
    SettingError::new(setting, problem)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelaySettings {
    pub lease_secs: u64,
    pub batch: u32,
    pub poll_ms: u64,
    pub retry_budget_secs: u64,
    pub backoff_base_ms: u64,
    pub backoff_max_secs: u64,
    /// Per-contact send limits, `dest=N/PERIOD[,...]` (e.g. `sms=6/1h`); an action over the
    /// limit waits in the outbox (never dropped, no retry budget spent).
    pub send_limits: SendLimitsSetting,
    /// Rows of one claimed batch sent at once (per-load order holds at any value).
    pub concurrency: usize,
    /// Relay passes running at once in one process (per-load order holds at any value).
    pub loops: usize,
}

impl Default for RelaySettings {
    fn default() -> Self {
        RelaySettings {
            lease_secs: 90,
            batch: 500,
            // The service polls twice as often as `RelayConfig::default()` (500 ms, the evals').
            poll_ms: 250,
            retry_budget_secs: 150,
            backoff_base_ms: 5000,
            backoff_max_secs: 60,
            send_limits: SendLimitsSetting::default(),
            concurrency: 500,
            loops: 2,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimerSettings {
    /// How often the pump polls for due timers; at most 30 s (timers fire within a minute).
    pub poll_secs: u64,
    pub batch: u32,
}

impl Default for TimerSettings {
    fn default() -> Self {
        TimerSettings { poll_secs: 5, batch: 500 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkerSettings {
    /// Loads processed at once.
    pub concurrency: usize,
    pub max_conflict_retries: u32,
    /// What the cache holds at most: snapshots, or log entries behind them (`cache_weigher`).
    pub cache_capacity: u64,
    /// What `cache_capacity` counts: `snapshots` (loads) or `log_entries` (the versions of the
    /// cached snapshots, so a few long-lived loads weigh as much as many new ones and the
    /// cache's memory stays bounded however long the logs grow).
    pub cache_weigher: String,
    pub cache_idle_secs: u64,
    /// Serve a cached snapshot without reading the log: this worker is the only writer of the
    /// loads it runs, and an append's version check refuses a snapshot another writer made stale
    /// (the run then reads the log and re-decides). A Kafka rebalance makes every snapshot
    /// verified once again. `false`: every run reads the entries after its cached version.
    pub cache_trusted: bool,
    /// Group commit (issue 15): appends of different loads ready within this many milliseconds
    /// share one transaction.
    pub group_commit_window_ms: u64,
    /// Loads per group-commit transaction at most; 1 turns group commit off.
    pub group_commit_max_batch: usize,
    /// Group-commit transactions in flight at once.
    pub group_commit_committers: usize,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            concurrency: 64,
            max_conflict_retries: 5,
            cache_capacity: 50_000,
            cache_weigher: "snapshots".into(),
            cache_idle_secs: 1800,
            cache_trusted: true,
            group_commit_window_ms: 0,
            // On for Postgres (SQLite groups its own commits); 1 turns it off (docs/runtime.md).
            group_commit_max_batch: 32,
            group_commit_committers: 4,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownSettings {
    /// After SIGTERM: stop fetching, finish in-flight runs, store offsets, release claims, and
    /// exit within this many seconds.
    pub grace_secs: u64,
}

impl Default for ShutdownSettings {
    fn default() -> Self {
        ShutdownSettings { grace_secs: 25 }
    }
}

impl RelaySettings {
    pub fn validate(&self) -> Result<(), SettingError> {
        if self.loops == 0 || self.loops > 16 {
            return Err(bad("relay.loops", "must be between 1 and 16"));
        }
        if self.lease_secs < 10 {
            return Err(bad("relay.lease_secs", "must be at least 10"));
        }
        // `send_limits` was parsed when it was read.
        Ok(())
    }

    /// The claim lease of the outbox (the store's option).
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs)
    }
}

impl TimerSettings {
    pub fn validate(&self) -> Result<(), SettingError> {
        if self.poll_secs == 0 || self.poll_secs > 30 {
            return Err(bad("timers.poll_secs", "must be between 1 and 30 (timers fire within a minute)"));
        }
        Ok(())
    }
}

impl WorkerSettings {
    /// `cache_weigher` as the cache's [`CacheWeigher`].
    pub fn weigher(&self) -> Result<CacheWeigher, SettingError> {
        match self.cache_weigher.as_str() {
            "snapshots" => Ok(CacheWeigher::Snapshots),
            "log_entries" => Ok(CacheWeigher::LogEntries),
            _ => Err(bad("worker.cache_weigher", "must be snapshots or log_entries")),
        }
    }

    pub fn validate(&self) -> Result<(), SettingError> {
        if self.concurrency == 0 || self.cache_capacity == 0 {
            return Err(bad(
                "worker.concurrency",
                "worker.concurrency and worker.cache_capacity must be positive",
            ));
        }
        self.weigher()?;
        if self.group_commit_max_batch == 0 {
            return Err(bad(
                "worker.group_commit_max_batch",
                "must be at least 1 (1 turns group commit off)",
            ));
        }
        if self.group_commit_window_ms > 1_000 {
            return Err(bad(
                "worker.group_commit_window_ms",
                "must be at most 1000 (a few milliseconds is the point)",
            ));
        }
        if self.group_commit_committers == 0 {
            return Err(bad("worker.group_commit_committers", "must be at least 1"));
        }
        Ok(())
    }
}

impl ShutdownSettings {
    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.grace_secs)
    }
}

impl RuntimeConfig {
    /// The service's runtime: the `[relay]`, `[timers]` and `[worker]` sections, and one run's
    /// deadline (`llm.run_deadline_ms`, which spans the LLM calls of a run).
    pub fn from_settings(
        relay: &RelaySettings,
        timers: &TimerSettings,
        worker: &WorkerSettings,
        run_deadline: Duration,
    ) -> Self {
        RuntimeConfig {
            worker: WorkerConfig {
                max_conflict_retries: worker.max_conflict_retries,
                run_deadline,
                ..WorkerConfig::default()
            },
            relay: RelayConfig {
                batch: relay.batch as usize,
                idle_poll: Duration::from_millis(relay.poll_ms),
                concurrency: relay.concurrency.max(1),
                loops: relay.loops.max(1),
                retry: RetryPolicy {
                    budget: Duration::from_secs(relay.retry_budget_secs),
                    base: Duration::from_millis(relay.backoff_base_ms),
                    cap: Duration::from_secs(relay.backoff_max_secs),
                    ..RetryPolicy::default()
                },
            },
            pump: PumpConfig {
                batch: timers.batch as usize,
                poll_interval: Duration::from_secs(timers.poll_secs),
            },
            queue_capacity: None,
            // Both modes keep the same snapshot cache (issue 15).
            cache: Some(CacheConfig {
                max_capacity: worker.cache_capacity,
                time_to_idle: Duration::from_secs(worker.cache_idle_secs),
                // `validate` refuses any other value before the runtime is made.
                weigher: worker.weigher().unwrap_or_default(),
                trusted: worker.cache_trusted,
            }),
            group_commit: GroupCommitConfig {
                window: Duration::from_millis(worker.group_commit_window_ms),
                max_batch: worker.group_commit_max_batch,
                committers: worker.group_commit_committers,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_defaults_are_valid_and_make_its_runtime() {
        let (relay, timers, worker) =
            (RelaySettings::default(), TimerSettings::default(), WorkerSettings::default());
        relay.validate().expect("relay");
        timers.validate().expect("timers");
        worker.validate().expect("worker");
        let rc = RuntimeConfig::from_settings(&relay, &timers, &worker, Duration::from_secs(120));
        assert_eq!(rc.relay.idle_poll, Duration::from_millis(250), "the service's poll, not RelayConfig's");
        assert_eq!((rc.relay.batch, rc.relay.concurrency, rc.relay.loops), (500, 500, 2));
        assert_eq!(rc.relay.retry, RetryPolicy::default());
        assert_eq!(rc.pump.poll_interval, Duration::from_secs(5));
        assert!(rc.group_commit.is_on(), "group commit is on by default");
        assert_eq!(
            rc.group_commit,
            GroupCommitConfig::default(),
            "the service's group commit is the crate's"
        );
        assert_eq!(rc.worker.run_deadline, Duration::from_secs(120));
        assert_eq!(relay.lease(), Duration::from_secs(90));
    }

    #[test]
    fn send_limits_are_parsed_once_when_read_and_printed_as_written() {
        let relay: RelaySettings =
            serde_json::from_str(r#"{"send_limits": "sms=6/60m, email=3/1h"}"#).expect("valid");
        assert_eq!(
            relay.send_limits.limits(),
            &crate::SendLimits::parse("sms=6/1h,email=3/1h").expect("same")
        );
        let printed = serde_json::to_value(&relay).expect("serializes");
        assert_eq!(printed["send_limits"], "sms=6/60m, email=3/1h");
        let e = serde_json::from_str::<RelaySettings>(r#"{"send_limits": "sms=6"}"#).expect_err("no period");
        assert!(e.to_string().contains("send limit \"sms=6\""), "{e}");
        let e = serde_json::from_str::<RelaySettings>(r#"{"bogus": 1}"#).expect_err("unknown");
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn bad_values_name_the_setting() {
        let e = TimerSettings { poll_secs: 31, ..TimerSettings::default() }.validate().expect_err("31 s");
        assert_eq!(e.setting, "timers.poll_secs");
        let e = RelaySettings { loops: 17, ..RelaySettings::default() }.validate().expect_err("17 loops");
        assert_eq!(e.setting, "relay.loops");
        let e = WorkerSettings { group_commit_window_ms: 1001, ..WorkerSettings::default() }
            .validate()
            .expect_err("window");
        assert_eq!(e.setting, "worker.group_commit_window_ms");
        let e = WorkerSettings { cache_weigher: "bytes".into(), ..WorkerSettings::default() }
            .validate()
            .expect_err("weigher");
        assert_eq!(e.setting, "worker.cache_weigher");
    }

    #[test]
    fn the_cache_can_be_bounded_by_log_entries() {
        let worker = WorkerSettings {
            cache_weigher: "log_entries".into(),
            cache_capacity: 2_000_000,
            ..WorkerSettings::default()
        };
        worker.validate().expect("valid");
        let rc = RuntimeConfig::from_settings(
            &RelaySettings::default(),
            &TimerSettings::default(),
            &worker,
            Duration::from_secs(120),
        );
        let cache = rc.cache.expect("a cache");
        assert_eq!((cache.weigher, cache.max_capacity), (CacheWeigher::LogEntries, 2_000_000));
        let defaults = RuntimeConfig::from_settings(
            &RelaySettings::default(),
            &TimerSettings::default(),
            &WorkerSettings::default(),
            Duration::from_secs(120),
        );
        assert_eq!(defaults.cache.expect("a cache").weigher, CacheWeigher::Snapshots);
    }
}
