//! Time is injected everywhere (style habit 8): the worker, the relay, the pump and the evals
//! read it through a [`Clock`], so leases, backoff, timers and decisions run on a fake clock in
//! evals and tests.

use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Duration, Utc};

/// The source of "now".
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;

    /// How long, in real time, this clock takes to move by `span` (the timer pump sleeps that
    /// long until the next timer is due). The wall clock and a [`FakeClock`] move one to one; a
    /// clock that runs faster than the wall clock says less.
    fn real_duration(&self, span: chrono::TimeDelta) -> std::time::Duration {
        span.to_std().unwrap_or_default()
    }
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to. Clones share the same time, so one `FakeClock` can be
/// handed to the worker, the relay, the pump and the eval driver.
#[derive(Debug, Clone)]
pub struct FakeClock {
    now: Arc<Mutex<DateTime<Utc>>>,
}

impl FakeClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        FakeClock { now: Arc::new(Mutex::new(start)) }
    }

    fn lock(&self) -> MutexGuard<'_, DateTime<Utc>> {
        // A panic while holding the lock cannot leave a half-written time behind.
        self.now.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn set(&self, to: DateTime<Utc>) {
        *self.lock() = to;
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.lock();
        *now += by;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> DateTime<Utc> {
        *self.lock()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> DateTime<Utc> {
        (**self).now()
    }

    fn real_duration(&self, span: Duration) -> std::time::Duration {
        (**self).real_duration(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that runs ten times faster than the wall clock.
    #[derive(Debug)]
    struct Fast;

    impl Clock for Fast {
        fn now(&self) -> DateTime<Utc> {
            Utc::now()
        }

        fn real_duration(&self, span: Duration) -> std::time::Duration {
            span.to_std().unwrap_or_default() / 10
        }
    }

    #[test]
    fn a_clock_behind_an_arc_keeps_its_own_pace() {
        let inner: Arc<dyn Clock> = Arc::new(Fast);
        let outer: Arc<dyn Clock> = Arc::new(inner);
        assert_eq!(outer.real_duration(Duration::seconds(10)), std::time::Duration::from_secs(1));
        assert_eq!(SystemClock.real_duration(Duration::seconds(10)), std::time::Duration::from_secs(10));
        assert_eq!(
            SystemClock.real_duration(Duration::seconds(-1)),
            std::time::Duration::ZERO,
            "past: no wait"
        );
    }

    #[test]
    fn clones_of_a_fake_clock_share_its_time() {
        let t0 = DateTime::parse_from_rfc3339("2026-03-02T13:00:00Z").map(|t| t.with_timezone(&Utc));
        let Ok(t0) = t0 else { panic!("fixture time") };
        let clock = FakeClock::new(t0);
        let shared = clock.clone();
        clock.advance(Duration::minutes(30));
        assert_eq!(shared.now(), t0 + Duration::minutes(30));
        shared.set(t0);
        assert_eq!(clock.now(), t0);
    }
}
