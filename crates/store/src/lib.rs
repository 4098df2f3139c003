//! The store of load-agent (ADR 0003): the per-load append-only log, the transactional outbox
//! and the durable timers, each behind a trait with two implementations through sqlx — SQLite
//! (the embedded default and the evals) and PostgreSQL (production) — proven by one contract
//! suite (`tests/contract/`).
//!
//! Layout:
//! - [`event_store`]: [`EventStore`] — `read`, `read_since`, `read_entry`, `append` (entries, outbox
//!   rows and the load's summary in one transaction at an expected version), `append_batch`, `llm_cost`,
//!   `load_ids`, and for the archive `read_stored` (rows as stored, [`StoredEntry`]) and
//!   `load_ids_started_between` (the loads of a month).
//! - [`outbox`]: [`Outbox`] — claims with tokens and leases, per-load order per destination,
//!   marks, monitoring queries, `rows_for_load`; [`DelegatingOutbox`], a wrapper that forwards
//!   to an inner outbox all but the methods it overrides.
//! - [`timers`]: [`TimerStore`] — idempotent `schedule` / `cancel` / `mark_fired`, `due`.
//! - [`attention`]: [`LoadIndex`] — the operations console's attention list, from the
//!   `load_summary` projection written in the append transaction.
//! - [`lifecycle`]: [`Lifecycle`] — partitions made ahead (Postgres; SQLite is unpartitioned).
//! - [`lock`]: [`LoadLock`] — the optional per-load lease.
//! - [`dead_letters`]: [`DeadLetterStore`] — bodies of dead letters the DLQ topic cannot hold
//!   as they are, kept by source record.
//! - [`error`]: [`StoreError`] (infrastructure), [`AppendError`], [`StaleClaimError`] /
//!   [`ClaimError`].
//! - `codec` (private): log entries to Avro bytes plus plain columns (through
//!   `load_agent_avro`), actions to JSON, the checks every append passes first.
//! - [`sqlite`]: [`SqliteStore`] — WAL, one writer task with group commit, reader pool.
//! - [`postgres`]: [`PgStore`] — one statement per append, `FOR UPDATE SKIP LOCKED` claims,
//!   advisory-lock leases, `connect_in_schema` for tests and evals.
//! - [`stores`]: [`Stores`] (the handles of one database) and [`StoreOptions`], shared by the
//!   backends.
//! - [`open`]: [`open_store`] from a URL (which picks the backend), [`migrate`].
//! - [`settings`]: the `[database]` and `[lifecycle]` sections of the configuration
//!   ([`DatabaseSettings`], [`DatabaseUrl`] with its password masked, [`LifecycleSettings`]).
//!
//! Migrations live in `migrations/{postgres,sqlite}/` at the workspace root and are embedded.
//!
//! Architecture invariant: the store knows entries, rows and timers; it never decides anything
//! and never reads the clock. Every time (leases, due times, marks) is passed in by the caller,
//! so evals run the same code on a fake clock; the database clock is never used either.

pub mod attention;
pub mod dead_letters;
pub mod error;
pub mod event_store;
pub mod lifecycle;
pub mod lock;
pub mod open;
pub mod outbox;
pub mod postgres;
pub mod settings;
pub mod sqlite;
pub mod stores;
pub mod timers;

mod codec;

pub use attention::{AttentionPage, AttentionQuery, AttentionReason, AttentionRow, LoadIndex};
pub use codec::MAX_ROWS_PER_APPEND;
pub use dead_letters::{DeadLetterStore, KeptDeadLetter};
pub use error::{AppendError, ClaimError, StaleClaimError, StoreError};
pub use event_store::{AppendRequest, EventStore, StoredEntry};
pub use lifecycle::{
    DeletedRows, DroppedDay, ExpiredPartition, Lifecycle, PartitionInfo, PartitionPlan, PartitionSpan,
    PartitionedTable, RetentionWindows, RunLock, expired,
};
pub use lock::{LoadLease, LoadLock, NoopLoadLock};
pub use open::{migrate, open_store, open_store_with};
pub use outbox::{
    ClaimedRow, DEFAULT_LEASE, DUE_ROWS_EXAMINED, DeferredMark, DelegatingOutbox, DispatchedMark, FailedMark,
    NewOutboxRow, NextAttempt, Outbox, OutboxRowView, OutboxStatus,
};
pub use postgres::PgStore;
pub use settings::{DatabaseSettings, DatabaseUrl, LifecycleSettings};
pub use sqlite::SqliteStore;
pub use stores::{StoreOptions, Stores};
pub use timers::{TimerRow, TimerStatus, TimerStore, TimerView};

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    /// The runtime opens stores inside spawned tasks, so the constructors' futures must be
    /// `Send` (sqlx's migrator on a bare connection once broke that).
    #[test]
    fn constructor_futures_are_send() {
        let options = StoreOptions::default();
        assert_send(&open_store("sqlite::memory:"));
        assert_send(&migrate("sqlite::memory:"));
        assert_send(&SqliteStore::open_temporary(&options));
        assert_send(&SqliteStore::open("x.db"));
        assert_send(&PgStore::connect_in_schema("postgres://localhost/x", "s"));
        assert_send(&PgStore::connect("postgres://localhost/x"));
    }
}
