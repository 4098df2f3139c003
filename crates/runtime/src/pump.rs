//! The timer pump (ADR 0003): reads due timers, publishes `timer_fired` with the deterministic
//! event id `timer_fired_event_id(timer_id)` to the load queue, then marks them fired. A crash
//! between the publish and the mark publishes twice; the event store drops the second copy by
//! event id, and a timer that is not current is a filtered noop when it is processed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use load_agent_domain::{EventKind, InboundEvent, timer_fired_event_id};
use load_agent_store::{StoreError, TimerRow, TimerStore};
use serde::Serialize;
use tracing::{error, info, warn};

use crate::clock::Clock;
use crate::metric_names as names;
use crate::queue::EventPublisher;
use crate::shutdown::Shutdown;

/// Loads whose timers are published at once within a batch.
pub const PUBLISH_CONCURRENCY: usize = 64;

/// The shortest pause between two passes, even when a timer is due sooner.
pub const MIN_PAUSE: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PumpConfig {
    /// Timers read per batch.
    pub batch: usize,
    /// The longest pause between passes; at most 30 s so a timer fires within a minute after
    /// `fire_at` even when it was scheduled while the pump slept. Between passes the pump sleeps
    /// until the next scheduled timer is due, when that is sooner.
    pub poll_interval: Duration,
}

impl Default for PumpConfig {
    fn default() -> Self {
        PumpConfig { batch: 500, poll_interval: Duration::from_secs(10) }
    }
}

impl PumpConfig {
    /// The longest poll interval the pump accepts (ADR 0003).
    pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(30);
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PumpReport {
    /// Timers published and marked fired.
    pub fired: usize,
    /// Timers that could not be published (left scheduled for the next pass).
    pub publish_failures: usize,
    /// Timers published whose mark failed (published again next pass; deduped by event id).
    pub mark_failures: usize,
}

pub struct TimerPump {
    timers: Arc<dyn TimerStore>,
    queue: Arc<dyn EventPublisher>,
    clock: Arc<dyn Clock>,
    config: PumpConfig,
}

impl std::fmt::Debug for TimerPump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerPump").field("config", &self.config).finish_non_exhaustive()
    }
}

/// The `timer_fired` event of a timer: its payload is exactly `{load_id, ask_id, attempt}`
/// (plus the timer id and its fire time).
pub fn timer_fired_event(timer: &TimerRow, now: DateTime<Utc>) -> InboundEvent {
    InboundEvent {
        event_id: timer_fired_event_id(&timer.timer_id),
        load_id: timer.load_id.clone(),
        occurred_at: now,
        kind: EventKind::TimerFired {
            timer_id: timer.timer_id.clone(),
            ask_id: timer.ask_id.clone(),
            attempt: timer.attempt,
            fire_at: timer.fire_at,
        },
    }
}

impl TimerPump {
    pub fn new(timers: Arc<dyn TimerStore>, queue: Arc<dyn EventPublisher>, clock: Arc<dyn Clock>) -> Self {
        TimerPump { timers, queue, clock, config: PumpConfig::default() }
    }

    /// Sets the batch and poll interval; the interval is capped at 30 s.
    pub fn with_config(mut self, mut config: PumpConfig) -> Self {
        config.poll_interval = config.poll_interval.min(PumpConfig::MAX_POLL_INTERVAL);
        config.batch = config.batch.max(1);
        self.config = config;
        self
    }

    pub fn config(&self) -> PumpConfig {
        self.config
    }

    /// Fires every timer due at `now` (`fire_at <= now`). Per batch: the timers of different
    /// loads are published concurrently (one load's in fire order, so its queue sees them in
    /// that order), then every published one is marked fired in one statement. A crash between
    /// the two publishes again next pass; the event id makes the copy a redelivery.
    pub async fn pump_once(&self, now: DateTime<Utc>) -> Result<PumpReport, StoreError> {
        let mut report = PumpReport::default();
        loop {
            let due = self.timers.due(now, self.config.batch).await?;
            let full_batch = due.len() >= self.config.batch;
            let published = self.publish_all(&due, now).await;
            report.publish_failures += due.len() - published.len();
            let ids: Vec<String> = published.iter().map(|t| t.timer_id.clone()).collect();
            let progressed = match self.timers.mark_fired(&ids, now).await {
                Ok(()) => {
                    report.fired += published.len();
                    for timer in &published {
                        let late = (now - timer.fire_at).num_milliseconds().max(0) as f64 / 1000.0;
                        metrics::counter!(names::TIMERS_FIRED_TOTAL).increment(1);
                        metrics::histogram!(names::TIMER_FIRE_DELAY_SECONDS).record(late);
                        info!(load_id = %timer.load_id, timer_id = %timer.timer_id, late_s = late, "timer fired");
                    }
                    !published.is_empty()
                }
                Err(e) => {
                    report.mark_failures += published.len();
                    error!(timers = published.len(), error = %e, "timers published but not marked fired; published again next pass");
                    false
                }
            };
            if !full_batch || !progressed {
                return Ok(report);
            }
        }
    }

    /// Publishes the `timer_fired` of every timer; returns those published. Loads go
    /// concurrently, up to [`PUBLISH_CONCURRENCY`] at once; one load's timers in order.
    async fn publish_all<'t>(&self, due: &'t [TimerRow], now: DateTime<Utc>) -> Vec<&'t TimerRow> {
        let mut by_load: Vec<Vec<&TimerRow>> = Vec::new();
        let mut slot: HashMap<&str, usize> = HashMap::new();
        for timer in due {
            let i = *slot.entry(timer.load_id.as_str()).or_insert_with(|| {
                by_load.push(Vec::new());
                by_load.len() - 1
            });
            by_load[i].push(timer);
        }
        let loads: Vec<_> = by_load.into_iter().map(|timers| self.publish_load(timers, now)).collect();
        let published: Vec<Vec<&TimerRow>> =
            futures::stream::iter(loads).buffer_unordered(PUBLISH_CONCURRENCY).collect().await;
        published.into_iter().flatten().collect()
    }

    /// One load's timers, in order; returns those published.
    async fn publish_load<'t>(&self, timers: Vec<&'t TimerRow>, now: DateTime<Utc>) -> Vec<&'t TimerRow> {
        let mut ok = Vec::with_capacity(timers.len());
        for timer in timers {
            match self.queue.publish(timer_fired_event(timer, now)).await {
                Ok(()) => {
                    crate::crash::crash_point("pump.after_publish");
                    ok.push(timer);
                }
                Err(e) => {
                    warn!(load_id = %timer.load_id, timer_id = %timer.timer_id, error = %e, "timer not published; next pass");
                }
            }
        }
        ok
    }

    /// Pumps until shutdown. After a clean pass it sleeps until the next scheduled timer is
    /// due ([`TimerPump::pause`]); after a pass that failed, or could not publish or mark every
    /// due timer, it waits the whole `poll_interval` (a broker or store outage is not retried in
    /// a tight loop).
    pub async fn run(self: Arc<Self>, mut shutdown: Shutdown) {
        loop {
            let pause = match self.pump_once(self.clock.now()).await {
                Ok(report) if report.publish_failures == 0 && report.mark_failures == 0 => self.pause().await,
                Ok(_) => self.config.poll_interval,
                Err(e) => {
                    error!(error = %e, "timer pump pass failed");
                    self.config.poll_interval
                }
            };
            tokio::select! {
                _ = shutdown.recv() => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// How long to sleep before the next pass: until the earliest scheduled timer is due, at
    /// least [`MIN_PAUSE`] and at most `poll_interval` (a timer scheduled meanwhile for sooner
    /// than that is seen at the next poll, as before). A timer that was scheduled before the
    /// pump went to sleep therefore fires within milliseconds of its `fire_at`, not up to a
    /// whole interval late.
    pub async fn pause(&self) -> Duration {
        let next = match self.timers.next_fire_at().await {
            Ok(next) => next,
            Err(e) => {
                warn!(error = %e, "reading the next timer failed; polling at the interval");
                None
            }
        };
        match next {
            // Not `clamp`: a configured interval below MIN_PAUSE must not panic.
            Some(at) => {
                self.clock.real_duration(at - self.clock.now()).max(MIN_PAUSE).min(self.config.poll_interval)
            }
            None => self.config.poll_interval,
        }
    }
}
