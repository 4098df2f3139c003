//! The transactional outbox (ADR 0003): rows are written by [`EventStore::append`] in the
//! decision's transaction and handed to relays through claims with leases. [`DelegatingOutbox`]
//! is how a wrapper in front of an outbox is written: it overrides only what it changes.
//!
//! [`EventStore::append`]: crate::EventStore::append

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use load_agent_domain::{Action, Destination};
use uuid::Uuid;

use crate::error::{ClaimError, StaleClaimError, StoreError};

/// The default claim lease (ADR 0003).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(90);

/// How many waiting rows [`Outbox::relay_lag`] looks at (the relay's next ones).
pub const DUE_ROWS_EXAMINED: u32 = 1000;

/// An outbox row to write with an append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutboxRow {
    /// The action's idempotency key; unique across the outbox.
    pub id: String,
    pub load_id: String,
    pub destination: Destination,
    /// Stored as the serde JSON text of the action.
    pub action: Action,
    /// The version the decision committed at; rows of a load are handed out in
    /// `(load_version, insertion)` order per destination.
    pub load_version: u64,
}

/// A row handed to one relay by [`Outbox::pending`]. `claim_token` holds the row until
/// `lease_until` or until the row is marked.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedRow {
    pub id: String,
    pub load_id: String,
    pub destination: Destination,
    pub action: Action,
    pub load_version: u64,
    pub claim_token: Uuid,
    pub lease_until: DateTime<Utc>,
    /// Failed attempts before this claim.
    pub attempts: u32,
    /// When the row was first claimed: the anchor of the retry budget.
    pub first_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

/// One row of [`Outbox::mark_dispatched_batch`]: the claimed row, the token of its claim and
/// the service's receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchedMark {
    pub id: String,
    pub token: Uuid,
    pub receipt: String,
}

/// One row of [`Outbox::mark_failed_batch`]: the claimed row, the token of its claim, why the
/// attempt failed and what comes next (a retry at a time, or dead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedMark {
    pub id: String,
    pub token: Uuid,
    pub failure: String,
    pub next: NextAttempt,
}

/// One row of [`Outbox::mark_deferred_batch`]: the claimed row, the token of its claim and when
/// it may be handed out again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredMark {
    pub id: String,
    pub token: Uuid,
    pub until: DateTime<Utc>,
}

/// Refuses a batch mark that names a row twice: the two marks could not both apply, and which
/// one wins would depend on the backend.
pub(crate) fn check_distinct<'a>(ids: impl ExactSizeIterator<Item = &'a str>) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    for id in ids {
        if !seen.insert(id) {
            return Err(StoreError::InvalidRequest(format!(
                "outbox row {id} is named twice in one batch mark"
            )));
        }
    }
    Ok(())
}

/// What happens to a row after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextAttempt {
    /// Hand the row out again at or after this time.
    RetryAt(DateTime<Utc>),
    /// Give up: the row is dead and never handed out again.
    Dead,
}

load_agent_domain::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum OutboxStatus {
        /// Not yet delivered: new, claimed, waiting for a retry or deferred.
        Pending => "pending",
        Dispatched => "dispatched",
        Dead => "dead",
    }
}

/// One outbox row as `inspect` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRowView {
    pub id: String,
    pub load_id: String,
    pub destination: Destination,
    pub action: Action,
    pub load_version: u64,
    pub status: OutboxStatus,
    pub attempts: u32,
    pub first_attempt_at: Option<DateTime<Utc>>,
    /// The current claim's lease, if the row is claimed (possibly expired).
    pub lease_until: Option<DateTime<Utc>>,
    pub retry_at: Option<DateTime<Utc>>,
    pub last_failure: Option<String>,
    pub receipt: Option<String>,
    pub created_at: DateTime<Utc>,
    pub dispatched_at: Option<DateTime<Utc>>,
    pub dead_at: Option<DateTime<Utc>>,
}

/// Claims, marks and monitoring queries of the outbox. Every time is passed in.
///
/// Claim rules:
/// - a row is handed out when it is pending, due (`retry_at` passed or unset) and has no live
///   lease; an expired lease hands it over with a fresh token;
/// - per load and destination, rows are handed out in commit order `(load_version,
///   insertion)`: a row waits while an earlier pending row of its load and destination
///   exists (claimed, waiting for a retry or deferred); dispatched and dead rows do not block;
/// - a mark needs the token of the current claim; a row taken over or already marked gives
///   [`StaleClaimError`](crate::StaleClaimError).
#[async_trait]
pub trait Outbox: Send + Sync {
    /// Claims up to `limit` due rows with a fresh claim token each and a lease of the store's
    /// lease duration from `now` (90 s by default). Sets `first_attempt_at` on a first claim.
    async fn pending(&self, limit: usize, now: DateTime<Utc>) -> Result<Vec<ClaimedRow>, StoreError>;

    /// The action was delivered; `receipt` is the service's reference.
    async fn mark_dispatched(
        &self,
        id: &str,
        token: Uuid,
        receipt: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError>;

    /// Marks several delivered rows at once, in ONE statement (Postgres) or one transaction of
    /// the writer (SQLite), each guarded by its own claim token exactly as
    /// [`mark_dispatched`](Outbox::mark_dispatched) is. Returns one result per mark, in the
    /// order given: `Ok` when the row was marked, [`StaleClaimError`] when its token no longer
    /// held it (taken over after its lease, or already marked); the others are marked all the
    /// same. `Err` only for an infrastructure failure, and then nothing was marked. An empty
    /// batch does nothing; an id given twice is an [`StoreError::InvalidRequest`].
    async fn mark_dispatched_batch(
        &self,
        marks: &[DispatchedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError>;

    /// An attempt failed: counts it, records `failure` and either schedules a retry or buries
    /// the row. Releases the claim.
    async fn mark_failed(
        &self,
        id: &str,
        token: Uuid,
        failure: &str,
        next: NextAttempt,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError>;

    /// Marks several failed attempts at once, each exactly as [`mark_failed`](Outbox::mark_failed)
    /// would, in ONE statement (Postgres) or one transaction of the writer (SQLite): the relay's
    /// failures of a batch (a service down fails every row of it) cost one round trip, not one
    /// each. Results and errors as [`mark_dispatched_batch`](Outbox::mark_dispatched_batch): one
    /// per mark in the order given, stale rows left unchanged and the others marked; `Err` only
    /// for an infrastructure failure, and then nothing was marked; an id given twice is an
    /// [`StoreError::InvalidRequest`].
    async fn mark_failed_batch(
        &self,
        marks: &[FailedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError>;

    /// Releases each row's claim until its `until` without counting an attempt (a send limit).
    /// A row not tried yet (`attempts == 0`) also forgets its `first_attempt_at`, so the wait
    /// does not spend its retry budget: the next claim starts it. In ONE statement (Postgres) or
    /// one transaction of the writer (SQLite): a claim that finds many rows over their limits
    /// releases them in one round trip. Results and errors as
    /// [`mark_dispatched_batch`](Outbox::mark_dispatched_batch).
    async fn mark_deferred_batch(
        &self,
        marks: &[DeferredMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError>;

    /// `Ok` when `token` still holds the row with a live lease at `now`. An expired lease is
    /// stale here even before another relay takes over. (The relay no longer calls it before
    /// each send: it compares the claim's `lease_until` with its clock, which is the same test
    /// without a round trip, and its batch mark checks the token; see `runtime/src/relay.rs`.)
    async fn recheck_claim(&self, id: &str, token: Uuid, now: DateTime<Utc>) -> Result<(), ClaimError>;

    /// Age of the oldest pending row (by insertion order), `None` when nothing is pending. Rows
    /// deferred on purpose (a retry's backoff, a send limit) count: this is the backlog's age,
    /// not the relay's lag (see [`relay_lag`](Self::relay_lag)).
    async fn oldest_pending_age(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError>;

    /// The relay's lag: how long the longest-waiting undelivered row has waited, leaving out the
    /// waits the agent chose. A row deferred without a failed attempt (a send limit: `attempts`
    /// 0, `retry_at` ahead) is not late, nor are the rows of its load and destination queued
    /// behind it (the claim's per-load order); once its `retry_at` passes it waits from then, and
    /// so do the rows that were queued behind it, also after it is delivered. A
    /// row that failed and waits out its backoff counts from its creation: delivery is failing.
    /// Claimed rows count (not delivered yet). `None` when no row waits. Looks at the first
    /// [`DUE_ROWS_EXAMINED`] such rows in insertion order (the rows the relay takes next), so
    /// its cost does not grow with the backlog.
    async fn relay_lag(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError>;

    /// Number of rows that died at or after `since`.
    async fn dead_since(&self, since: DateTime<Utc>) -> Result<u64, StoreError>;

    /// Every outbox row of a load in commit order, for `inspect`.
    async fn rows_for_load(&self, load_id: &str) -> Result<Vec<OutboxRowView>, StoreError>;
}

/// An [`Outbox`] that forwards every call to another one, [`inner`](DelegatingOutbox::inner),
/// except the methods it overrides: the one way to write an outbox wrapper (the runtime's
/// per-contact send limit, the load test's probe, test doubles). Each method defaults to the
/// inner outbox's; every `DelegatingOutbox` is an [`Outbox`] (a blanket impl), so a wrapper
/// holds `inner: Arc<dyn Outbox>` and writes only what it changes or watches:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// use async_trait::async_trait;
/// use chrono::{DateTime, Utc};
/// use load_agent_store::{ClaimedRow, DelegatingOutbox, Outbox, StoreError};
///
/// struct CountingClaims {
///     inner: Arc<dyn Outbox>,
///     claims: AtomicUsize,
/// }
///
/// #[async_trait]
/// impl DelegatingOutbox for CountingClaims {
///     fn inner(&self) -> &dyn Outbox {
///         self.inner.as_ref()
///     }
///
///     async fn pending(&self, limit: usize, now: DateTime<Utc>) -> Result<Vec<ClaimedRow>, StoreError> {
///         self.claims.fetch_add(1, Ordering::Relaxed);
///         self.inner.pending(limit, now).await
///     }
/// }
/// ```
///
/// The same shape as the test kit's `Intercepted` event store (`load_agent_testkit::store`):
/// default methods that pass the call through, overridden where a wrapper steps in.
#[async_trait]
pub trait DelegatingOutbox: Send + Sync {
    /// The outbox the methods not overridden forward to.
    fn inner(&self) -> &dyn Outbox;

    /// See [`Outbox::pending`].
    async fn pending(&self, limit: usize, now: DateTime<Utc>) -> Result<Vec<ClaimedRow>, StoreError> {
        self.inner().pending(limit, now).await
    }

    /// See [`Outbox::mark_dispatched`].
    async fn mark_dispatched(
        &self,
        id: &str,
        token: Uuid,
        receipt: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        self.inner().mark_dispatched(id, token, receipt, now).await
    }

    /// See [`Outbox::mark_dispatched_batch`].
    async fn mark_dispatched_batch(
        &self,
        marks: &[DispatchedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        self.inner().mark_dispatched_batch(marks, now).await
    }

    /// See [`Outbox::mark_failed`].
    async fn mark_failed(
        &self,
        id: &str,
        token: Uuid,
        failure: &str,
        next: NextAttempt,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        self.inner().mark_failed(id, token, failure, next, now).await
    }

    /// See [`Outbox::mark_failed_batch`].
    async fn mark_failed_batch(
        &self,
        marks: &[FailedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        self.inner().mark_failed_batch(marks, now).await
    }

    /// See [`Outbox::mark_deferred_batch`].
    async fn mark_deferred_batch(
        &self,
        marks: &[DeferredMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        self.inner().mark_deferred_batch(marks, now).await
    }

    /// See [`Outbox::recheck_claim`].
    async fn recheck_claim(&self, id: &str, token: Uuid, now: DateTime<Utc>) -> Result<(), ClaimError> {
        self.inner().recheck_claim(id, token, now).await
    }

    /// See [`Outbox::oldest_pending_age`].
    async fn oldest_pending_age(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        self.inner().oldest_pending_age(now).await
    }

    /// See [`Outbox::relay_lag`].
    async fn relay_lag(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        self.inner().relay_lag(now).await
    }

    /// See [`Outbox::dead_since`].
    async fn dead_since(&self, since: DateTime<Utc>) -> Result<u64, StoreError> {
        self.inner().dead_since(since).await
    }

    /// See [`Outbox::rows_for_load`].
    async fn rows_for_load(&self, load_id: &str) -> Result<Vec<OutboxRowView>, StoreError> {
        self.inner().rows_for_load(load_id).await
    }
}

/// Every [`DelegatingOutbox`] is an [`Outbox`]: each method is the wrapper's (its override, or
/// the default that forwards to `inner`).
#[async_trait]
impl<T: DelegatingOutbox> Outbox for T {
    async fn pending(&self, limit: usize, now: DateTime<Utc>) -> Result<Vec<ClaimedRow>, StoreError> {
        DelegatingOutbox::pending(self, limit, now).await
    }

    async fn mark_dispatched(
        &self,
        id: &str,
        token: Uuid,
        receipt: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        DelegatingOutbox::mark_dispatched(self, id, token, receipt, now).await
    }

    async fn mark_dispatched_batch(
        &self,
        marks: &[DispatchedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        DelegatingOutbox::mark_dispatched_batch(self, marks, now).await
    }

    async fn mark_failed(
        &self,
        id: &str,
        token: Uuid,
        failure: &str,
        next: NextAttempt,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError> {
        DelegatingOutbox::mark_failed(self, id, token, failure, next, now).await
    }

    async fn mark_failed_batch(
        &self,
        marks: &[FailedMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        DelegatingOutbox::mark_failed_batch(self, marks, now).await
    }

    async fn mark_deferred_batch(
        &self,
        marks: &[DeferredMark],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<(), StaleClaimError>>, StoreError> {
        DelegatingOutbox::mark_deferred_batch(self, marks, now).await
    }

    async fn recheck_claim(&self, id: &str, token: Uuid, now: DateTime<Utc>) -> Result<(), ClaimError> {
        DelegatingOutbox::recheck_claim(self, id, token, now).await
    }

    async fn oldest_pending_age(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        DelegatingOutbox::oldest_pending_age(self, now).await
    }

    async fn relay_lag(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError> {
        DelegatingOutbox::relay_lag(self, now).await
    }

    async fn dead_since(&self, since: DateTime<Utc>) -> Result<u64, StoreError> {
        DelegatingOutbox::dead_since(self, since).await
    }

    async fn rows_for_load(&self, load_id: &str) -> Result<Vec<OutboxRowView>, StoreError> {
        DelegatingOutbox::rows_for_load(self, load_id).await
    }
}
