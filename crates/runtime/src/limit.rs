//! The per-contact send limit (governor): at most N messages per contact per period, per
//! destination (default: 6 SMS per contact per hour).
//!
//! It sits in front of the relay as an [`Outbox`] wrapper, [`ContactLimitedOutbox`], so it
//! applies to every destination and every relay, whatever sends the rows (Kafka producers or
//! the in-process fakes). A claimed row over its contact's limit is released at once with
//! `mark_deferred_batch` (all of a claim's deferrals in one mark) until the limiter's next
//! allowed instant: it is never dropped, no attempt is counted, and the store restarts its retry
//! budget when the row had not been tried yet (the budget runs from the first send attempt, ADR
//! 0003). Rows of a load are handed out in order per destination, so a deferred row also holds
//! back the later rows of its load on that destination: the order of messages to a contact
//! never changes.
//!
//! A key is counted once: a row the limiter admitted passes again without being counted when
//! its send is retried (the contact gets one message per key; the services dedupe on it).
//!
//! The limiter runs on the injected [`Clock`] (a governor clock adapter), so tests and replays
//! run it on a `FakeClock`. Its state is in memory, per relay process: with several relays,
//! divide the quota between them.
//!
//! governor's GCRA allows a burst of N at once and then one more every `period / N`: a
//! sustained rate of N per period, never more than N back to back.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use load_agent_domain::Destination;
use load_agent_store::{ClaimedRow, DeferredMark, DelegatingOutbox, Outbox, StoreError};
use tracing::{debug, warn};

use crate::clock::Clock;
use crate::metric_names as names;

/// At most `max` messages per contact in `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContactLimit {
    pub max: NonZeroU32,
    pub per: Duration,
}

impl ContactLimit {
    fn quota(&self) -> Option<Quota> {
        let interval = self.per / self.max.get();
        Quota::with_period(interval).map(|q| q.allow_burst(self.max))
    }
}

/// Limits per destination; destinations without one are not limited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendLimits {
    pub per_destination: BTreeMap<Destination, ContactLimit>,
}

impl Default for SendLimits {
    /// 6 SMS per contact per hour.
    fn default() -> Self {
        let mut per_destination = BTreeMap::new();
        if let Some(max) = NonZeroU32::new(6) {
            per_destination.insert(Destination::Sms, ContactLimit { max, per: Duration::from_secs(3600) });
        }
        SendLimits { per_destination }
    }
}

impl SendLimits {
    /// No limit at all.
    pub fn none() -> Self {
        SendLimits { per_destination: BTreeMap::new() }
    }

    /// Parses `dest=N/PERIOD[,dest=N/PERIOD...]`, e.g. `sms=6/1h,email=20/1h`; PERIOD is a
    /// number with `s`, `m` or `h` (a bare unit means 1). An empty string means no limit.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut per_destination = BTreeMap::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad =
                |why: &str| format!("send limit {item:?}: {why} (expected dest=N/PERIOD, e.g. sms=6/1h)");
            let (dest, rest) = item.split_once('=').ok_or_else(|| bad("no '='"))?;
            let destination = Destination::parse(dest.trim()).ok_or_else(|| bad("unknown destination"))?;
            if destination == Destination::Timer {
                return Err(bad("timers are not sent to contacts"));
            }
            let (n, period) = rest.split_once('/').ok_or_else(|| bad("no '/'"))?;
            let max = n
                .trim()
                .parse::<u32>()
                .ok()
                .and_then(NonZeroU32::new)
                .ok_or_else(|| bad("N must be a positive integer"))?;
            let per = parse_period(period.trim()).ok_or_else(|| bad("bad period"))?;
            per_destination.insert(destination, ContactLimit { max, per });
        }
        Ok(SendLimits { per_destination })
    }
}

/// The `relay.send_limits` setting: its text as written (what `config --print` shows) and the
/// limits parsed from it once, when the configuration is read (a bad spec is refused there,
/// naming the setting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendLimitsSetting {
    text: String,
    limits: SendLimits,
}

impl SendLimitsSetting {
    pub fn parse(text: &str) -> Result<Self, String> {
        Ok(SendLimitsSetting { text: text.to_owned(), limits: SendLimits::parse(text)? })
    }

    pub fn limits(&self) -> &SendLimits {
        &self.limits
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl Default for SendLimitsSetting {
    /// `sms=6/1h`, [`SendLimits::default`].
    fn default() -> Self {
        SendLimitsSetting { text: "sms=6/1h".to_owned(), limits: SendLimits::default() }
    }
}

impl<'de> serde::Deserialize<'de> for SendLimitsSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        SendLimitsSetting::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for SendLimitsSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

fn parse_period(s: &str) -> Option<Duration> {
    let unit = match s.chars().last()? {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        _ => return None,
    };
    let n = &s[..s.len() - 1];
    let n: u64 = if n.is_empty() { 1 } else { n.parse().ok()? };
    (n > 0).then(|| Duration::from_secs(n * unit))
}

/// governor's view of the injected clock: the time since the Unix epoch.
#[derive(Debug, Clone)]
pub struct GovernorClock {
    clock: Arc<dyn Clock>,
}

impl GovernorClock {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        GovernorClock { clock }
    }
}

fn since_epoch(t: DateTime<Utc>) -> Duration {
    (t - DateTime::<Utc>::UNIX_EPOCH).to_std().unwrap_or(Duration::ZERO)
}

impl governor::clock::Clock for GovernorClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        since_epoch(self.clock.now())
    }
}

type Contact = (String, String);
type KeyedLimiter =
    RateLimiter<Contact, DefaultKeyedStateStore<Contact>, GovernorClock, NoOpMiddleware<Duration>>;

/// Whether a row may be sent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Now,
    /// Over its contact's limit: not before this instant.
    NotBefore(DateTime<Utc>),
}

/// The limiters, one per limited destination, keyed by `(load_id, contact_id)` (contact ids are
/// scoped to their load).
pub struct ContactSendLimiter {
    limiters: BTreeMap<Destination, KeyedLimiter>,
    /// Keys admitted recently: a retried send of one of them is not counted again.
    admitted: moka::sync::Cache<String, ()>,
    checks: AtomicU64,
}

impl std::fmt::Debug for ContactSendLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContactSendLimiter")
            .field("destinations", &self.limiters.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ContactSendLimiter {
    pub fn new(limits: &SendLimits, clock: Arc<dyn Clock>) -> Self {
        let clock = GovernorClock::new(clock);
        let mut limiters = BTreeMap::new();
        let mut window = Duration::from_secs(60);
        for (destination, limit) in &limits.per_destination {
            if let Some(quota) = limit.quota() {
                limiters.insert(
                    *destination,
                    RateLimiter::new(quota, DefaultKeyedStateStore::default(), clock.clone()),
                );
                window = window.max(limit.per);
            }
        }
        let admitted = moka::sync::Cache::builder().max_capacity(1_000_000).time_to_live(window).build();
        ContactSendLimiter { limiters, admitted, checks: AtomicU64::new(0) }
    }

    /// Counts the row against its contact's limit, unless its destination is not limited, it
    /// addresses no contact, or its key was already admitted.
    pub fn admit(&self, row: &ClaimedRow) -> Admission {
        let Some(limiter) = self.limiters.get(&row.destination) else { return Admission::Now };
        let Some(contact) = row.action.body.contact_id() else { return Admission::Now };
        if self.admitted.contains_key(&row.id) {
            return Admission::Now;
        }
        if self.checks.fetch_add(1, Ordering::Relaxed) % 1024 == 1023 {
            // Forget contacts whose limit has fully recovered (bounded memory).
            limiter.retain_recent();
        }
        match limiter.check_key(&(row.load_id.clone(), contact.to_owned())) {
            Ok(()) => {
                self.admitted.insert(row.id.clone(), ());
                Admission::Now
            }
            Err(not_until) => {
                let at = DateTime::<Utc>::UNIX_EPOCH
                    + TimeDelta::from_std(not_until.earliest_possible()).unwrap_or(TimeDelta::MAX)
                    // Times are stored to the millisecond: round up, never early.
                    + TimeDelta::milliseconds(1);
                Admission::NotBefore(at)
            }
        }
    }
}

/// The outbox as the relay sees it, with the send limit applied to what `pending` hands out.
pub struct ContactLimitedOutbox {
    inner: Arc<dyn Outbox>,
    limiter: ContactSendLimiter,
}

impl ContactLimitedOutbox {
    pub fn new(inner: Arc<dyn Outbox>, limits: &SendLimits, clock: Arc<dyn Clock>) -> Self {
        ContactLimitedOutbox { inner, limiter: ContactSendLimiter::new(limits, clock) }
    }
}

#[async_trait]
impl DelegatingOutbox for ContactLimitedOutbox {
    fn inner(&self) -> &dyn Outbox {
        self.inner.as_ref()
    }

    async fn pending(&self, limit: usize, now: DateTime<Utc>) -> Result<Vec<ClaimedRow>, StoreError> {
        let rows = self.inner.pending(limit, now).await?;
        let mut admitted = Vec::with_capacity(rows.len());
        let mut deferred = Vec::new();
        for row in rows {
            match self.limiter.admit(&row) {
                Admission::Now => admitted.push(row),
                Admission::NotBefore(until) => {
                    metrics::counter!(names::SEND_LIMIT_DEFERRALS_TOTAL, "destination" => row.destination.as_str())
                        .increment(1);
                    deferred.push((row, until));
                }
            }
        }
        if deferred.is_empty() {
            return Ok(admitted);
        }
        // The deferrals are one batch mark: a claim holding many loads' rows over their limits
        // releases them in one round trip before its admitted rows are sent.
        let marks: Vec<DeferredMark> = deferred
            .iter()
            .map(|(row, until)| DeferredMark { id: row.id.clone(), token: row.claim_token, until: *until })
            .collect();
        match self.inner.mark_deferred_batch(&marks, now).await {
            Ok(results) => {
                for ((row, until), marked) in deferred.iter().zip(results) {
                    match marked {
                        Ok(()) => {
                            debug!(key = %row.id, load_id = %row.load_id, %until, "over the contact's send limit: deferred")
                        }
                        // Taken over after its lease: the new claim decides.
                        Err(e) => {
                            warn!(key = %row.id, error = %e, "deferring a row over the send limit failed")
                        }
                    }
                }
            }
            // The leases expire and the rows are handed out again: never lost.
            Err(e) => warn!(rows = deferred.len(), error = %e, "deferring rows over the send limit failed"),
        }
        Ok(admitted)
    }
}

#[cfg(test)]
mod tests {
    use crate::clock::FakeClock;
    use load_agent_domain::{Action, ActionBody};
    use uuid::Uuid;

    use super::*;

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-02T13:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn sms_row(key: &str, load: &str, to: &str) -> ClaimedRow {
        ClaimedRow {
            id: key.into(),
            load_id: load.into(),
            destination: Destination::Sms,
            action: Action {
                key: key.into(),
                ask: None,
                body: ActionBody::SendSms { to: to.into(), body: "hi".into() },
            },
            load_version: 2,
            claim_token: Uuid::new_v4(),
            lease_until: t0(),
            attempts: 0,
            first_attempt_at: t0(),
            created_at: t0(),
        }
    }

    #[test]
    fn the_default_setting_is_its_own_text_parsed() {
        let default = SendLimitsSetting::default();
        assert_eq!(SendLimitsSetting::parse(default.as_str()), Ok(default));
    }

    #[test]
    fn limits_parse_per_destination() {
        let l = SendLimits::parse("sms=6/1h, email=20/30m").expect("valid");
        let sms = l.per_destination.get(&Destination::Sms).copied();
        assert_eq!(sms.map(|c| (c.max.get(), c.per)), Some((6, Duration::from_secs(3600))));
        assert_eq!(
            l.per_destination.get(&Destination::Email).map(|c| c.per),
            Some(Duration::from_secs(1800))
        );
        assert_eq!(SendLimits::parse("sms=6/h").map(|l| l.per_destination.len()), Ok(1));
        assert_eq!(SendLimits::parse(""), Ok(SendLimits::none()));
        for bad in ["sms", "sms=0/1h", "fax=1/1h", "sms=6/1d", "timer=1/1h", "sms=6"] {
            assert!(SendLimits::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(SendLimits::default().per_destination.len(), 1);
    }

    #[test]
    fn the_seventh_sms_to_a_contact_in_an_hour_waits_on_the_fake_clock() {
        let clock = FakeClock::new(t0());
        let limiter = ContactSendLimiter::new(&SendLimits::default(), Arc::new(clock.clone()));
        for i in 0..6 {
            assert_eq!(limiter.admit(&sms_row(&format!("k{i}"), "L1", "drv")), Admission::Now, "sms {i}");
        }
        let Admission::NotBefore(at) = limiter.admit(&sms_row("k6", "L1", "drv")) else {
            panic!("the seventh SMS must wait");
        };
        // One more every 10 minutes once the burst of 6 is spent.
        assert!(at > t0() && at <= t0() + TimeDelta::minutes(10) + TimeDelta::milliseconds(1), "{at}");
        // Another contact, or the same contact id on another load, is not affected.
        assert_eq!(limiter.admit(&sms_row("x", "L1", "disp")), Admission::Now);
        assert_eq!(limiter.admit(&sms_row("y", "L2", "drv")), Admission::Now);
        // A key already admitted passes again without being counted (a retried send).
        assert_eq!(limiter.admit(&sms_row("k0", "L1", "drv")), Admission::Now);
        clock.set(at);
        assert_eq!(
            limiter.admit(&sms_row("k6", "L1", "drv")),
            Admission::Now,
            "allowed at the instant it named"
        );
    }

    #[test]
    fn destinations_without_a_limit_and_rows_without_a_contact_pass() {
        let clock = FakeClock::new(t0());
        let limits = SendLimits::parse("sms=1/1h").expect("valid");
        let limiter = ContactSendLimiter::new(&limits, Arc::new(clock));
        let mut hero = sms_row("h", "L1", "drv");
        hero.destination = Destination::Hero;
        hero.action.body = ActionBody::CreateHeroTask { title: "t".into(), body: "b".into(), urgent: true };
        for _ in 0..3 {
            assert_eq!(limiter.admit(&hero), Admission::Now);
        }
        assert_eq!(limiter.admit(&sms_row("a", "L1", "drv")), Admission::Now);
        assert!(matches!(limiter.admit(&sms_row("b", "L1", "drv")), Admission::NotBefore(_)));
    }
}
