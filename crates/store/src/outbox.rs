//! The transactional outbox (ADR 0003): rows are written by [`EventStore::append`] in the
//! decision's transaction and handed to relays through claims with leases.
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

/// Refuses a batch mark that names a row twice: the two marks could not both apply, and which
/// one wins would depend on the backend.
pub(crate) fn check_distinct(marks: &[DispatchedMark]) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::with_capacity(marks.len());
    match marks.iter().find(|m| !seen.insert(m.id.as_str())) {
        Some(twice) => Err(StoreError::InvalidRequest(format!(
            "outbox row {} is named twice in one batch mark",
            twice.id
        ))),
        None => Ok(()),
    }
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

    /// Releases the claim until `until` without counting an attempt (a rate limit). A row not
    /// tried yet (`attempts == 0`) also forgets its `first_attempt_at`, so the wait does not spend
    /// its retry budget: the next claim starts it.
    async fn mark_deferred(
        &self,
        id: &str,
        token: Uuid,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(), ClaimError>;

    /// `Ok` when `token` still holds the row with a live lease at `now`. An expired lease is
    /// stale here even before another relay takes over. (The relay no longer calls it before
    /// each send: it compares the claim's `lease_until` with its clock, which is the same test
    /// without a round trip, and its batch mark checks the token; see `runtime/src/relay.rs`.)
    async fn recheck_claim(&self, id: &str, token: Uuid, now: DateTime<Utc>) -> Result<(), ClaimError>;

    /// Age of the oldest pending row (by insertion order), `None` when nothing is pending.
    async fn oldest_pending_age(&self, now: DateTime<Utc>) -> Result<Option<Duration>, StoreError>;

    /// Number of rows that died at or after `since`.
    async fn dead_since(&self, since: DateTime<Utc>) -> Result<u64, StoreError>;

    /// Every outbox row of a load in commit order, for `inspect`.
    async fn rows_for_load(&self, load_id: &str) -> Result<Vec<OutboxRowView>, StoreError>;
}
