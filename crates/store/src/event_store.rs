//! The per-load append-only log (ADR 0001, ADR 0003).

use async_trait::async_trait;
use load_agent_domain::{LoadSummary, LogEntry};

use crate::error::{AppendError, StoreError};
use crate::outbox::NewOutboxRow;

/// One load's append, for [`EventStore::append_batch`].
#[derive(Debug, Clone, PartialEq)]
pub struct AppendRequest {
    pub load_id: String,
    pub entries: Vec<LogEntry>,
    pub expected_version: u64,
    pub outbox: Vec<NewOutboxRow>,
    /// The load's summary after these entries (the `load_summary` row), if the caller has it.
    pub summary: Option<LoadSummary>,
}

/// The log of every load. A load's version is the seq of its last entry, which is also its
/// number of entries (seqs are 1..n, contiguous).
///
/// Entries are stored as Avro bytes with the id of their writer schema, beside plain columns
/// (kind, entry id, recorded_at, LLM cost) so that audits are SQL.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// The whole log of a load and its version (`(vec![], 0)` for an unknown load).
    async fn read(&self, load_id: &str) -> Result<(Vec<LogEntry>, u64), StoreError>;

    /// The entries after `version` and the current version: the suffix of [`read`](Self::read)
    /// for incremental projection.
    async fn read_since(&self, load_id: &str, version: u64) -> Result<(Vec<LogEntry>, u64), StoreError>;

    /// The entry of `load_id`'s log whose entry id is `entry_id` (an event id, or `dec:{event_id}`
    /// for a decision), if any: the worker compares a redelivered event with the one logged
    /// under its id. Both backends read it through the `(load_id, entry_id)` unique index; the
    /// default reads the whole log (for test doubles).
    async fn read_entry(&self, load_id: &str, entry_id: &str) -> Result<Option<LogEntry>, StoreError> {
        let (entries, _) = self.read(load_id).await?;
        Ok(entries.into_iter().find(|e| e.entry_id() == entry_id))
    }

    /// Appends `entries`, writes `outbox` rows and, if given, the load's `summary` (its
    /// `load_summary` row, for the console's [`LoadIndex`](crate::LoadIndex)) in ONE transaction,
    /// only if the log is still at `expected_version`; returns the new version. On any error
    /// nothing is written.
    ///
    /// Outbox rows need the entries that decide them: rows without entries are refused. Each
    /// row's `created_at` is the latest `recorded_at` of the appended entries (the decision's
    /// time), never the database clock. A wrapper must forward the summary.
    async fn append_summarized(
        &self,
        load_id: &str,
        entries: &[LogEntry],
        expected_version: u64,
        outbox: &[NewOutboxRow],
        summary: Option<&LoadSummary>,
    ) -> Result<u64, AppendError>;

    /// [`append_summarized`](Self::append_summarized) without a summary (tools and tests; the
    /// worker always passes one).
    async fn append(
        &self,
        load_id: &str,
        entries: &[LogEntry],
        expected_version: u64,
        outbox: &[NewOutboxRow],
    ) -> Result<u64, AppendError> {
        self.append_summarized(load_id, entries, expected_version, outbox, None).await
    }

    /// Several loads' appends in one transaction, for throughput: each request is all or
    /// nothing with its own version check, and gets its own result, in order (a later request
    /// for the same load sees the earlier ones). Keep batches to tens of loads: on Postgres a
    /// batch that loses a race on a unique index is re-run with one savepoint per load.
    async fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<u64, AppendError>>;

    /// The total LLM cost recorded in a load's log (a SQL sum over the plain cost column).
    async fn llm_cost(&self, load_id: &str) -> Result<f64, StoreError>;

    /// Up to `limit` load ids that have a log, in id order.
    async fn load_ids(&self, limit: usize) -> Result<Vec<String>, StoreError>;
}
