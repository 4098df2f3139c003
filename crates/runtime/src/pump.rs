//! The timer pump (ADR 0003): reads due timers, publishes `timer_fired` with the deterministic
//! event id `timer_fired_event_id(timer_id)` to the load queue, then marks them fired. A crash
//! between the publish and the mark publishes twice; the event store drops the second copy by
//! event id, and a timer that is not current is a filtered noop when it is processed.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use load_agent_domain::{EventKind, InboundEvent, timer_fired_event_id};
use load_agent_store::{StoreError, TimerRow, TimerStore};
use serde::Serialize;
use tracing::{error, info, warn};

use crate::clock::Clock;
use crate::queue::LoadQueue;
use crate::shutdown::Shutdown;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PumpConfig {
    /// Timers read per batch.
    pub batch: usize,
    /// Pause between passes; at most 30 s so a timer fires within a minute after `fire_at`.
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
    queue: Arc<dyn LoadQueue>,
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
    pub fn new(timers: Arc<dyn TimerStore>, queue: Arc<dyn LoadQueue>, clock: Arc<dyn Clock>) -> Self {
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

    /// Fires every timer due at `now` (`fire_at <= now`).
    pub async fn pump_once(&self, now: DateTime<Utc>) -> Result<PumpReport, StoreError> {
        let mut report = PumpReport::default();
        loop {
            let due = self.timers.due(now, self.config.batch).await?;
            let full_batch = due.len() >= self.config.batch;
            let mut progressed = false;
            for timer in &due {
                if let Err(e) = self.queue.publish(timer_fired_event(timer, now)).await {
                    report.publish_failures += 1;
                    warn!(load_id = %timer.load_id, timer_id = %timer.timer_id, error = %e, "timer not published; next pass");
                    continue;
                }
                crate::crash::crash_point("pump.after_publish");
                match self.timers.mark_fired(&timer.timer_id, now).await {
                    Ok(()) => {
                        report.fired += 1;
                        progressed = true;
                        let late = (now - timer.fire_at).num_milliseconds().max(0) as f64 / 1000.0;
                        metrics::counter!("load_agent_timers_fired_total").increment(1);
                        metrics::histogram!("load_agent_timer_lag_seconds").record(late);
                        info!(load_id = %timer.load_id, timer_id = %timer.timer_id, late_s = late, "timer fired");
                    }
                    Err(e) => {
                        report.mark_failures += 1;
                        error!(timer_id = %timer.timer_id, error = %e, "timer published but not marked fired");
                    }
                }
            }
            if !full_batch || !progressed {
                return Ok(report);
            }
        }
    }

    /// Pumps every `poll_interval` until shutdown.
    pub async fn run(self: Arc<Self>, mut shutdown: Shutdown) {
        loop {
            if let Err(e) = self.pump_once(self.clock.now()).await {
                error!(error = %e, "timer pump pass failed");
            }
            tokio::select! {
                _ = shutdown.recv() => return,
                _ = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
    }
}
