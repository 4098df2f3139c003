//! The per-load append-only log (ADR 0001, ADR 0003).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
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

/// One log row exactly as stored: the plain columns and the Avro body under its writer schema,
/// byte for byte (for the archive, which keeps the bytes the log holds, not a re-encoding).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntry {
    pub seq: u64,
    pub entry_id: String,
    pub kind: String,
    pub recorded_at: DateTime<Utc>,
    pub llm_cost_usd: f64,
    /// The id of the body's writer schema (`schemas/avro/ids.json`).
    pub schema_id: u32,
    pub body: Vec<u8>,
}

impl StoredEntry {
    /// The row `entry` would be stored as at `seq` (encoded with the newest `LogEntry` schema).
    pub fn encode(seq: u64, entry: &LogEntry) -> Self {
        let (schema_id, body) = load_agent_avro::log_entry::encode_log_entry(entry);
        StoredEntry {
            seq,
            entry_id: entry.entry_id().to_owned(),
            kind: entry.kind_str().to_owned(),
            recorded_at: entry.recorded_at(),
            llm_cost_usd: entry.llm_cost_usd(),
            schema_id: schema_id.0,
            body,
        }
    }
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

    /// Whether the store already commits appends queued together in one transaction on its
    /// own (SQLite's one writer does), so that grouping them before it (the runtime's
    /// `GroupCommit`) would only add a queue. Stores that wrap another forward it.
    fn commits_grouped(&self) -> bool {
        false
    }

    /// The total LLM cost recorded in a load's log (a SQL sum over the plain cost column).
    async fn llm_cost(&self, load_id: &str) -> Result<f64, StoreError>;

    /// Up to `limit` load ids that have a log, in id order.
    async fn load_ids(&self, limit: usize) -> Result<Vec<String>, StoreError>;

    /// A load's log rows exactly as stored (seq order, bodies undecoded), `vec![]` for an unknown
    /// load: what the archive exports and verifies against. Both backends read the rows; the
    /// default re-encodes [`read`](Self::read) (for test doubles, which keep no bytes).
    async fn read_stored(&self, load_id: &str) -> Result<Vec<StoredEntry>, StoreError> {
        let (entries, _) = self.read(load_id).await?;
        Ok(entries.iter().zip(1u64..).map(|(e, seq)| StoredEntry::encode(seq, e)).collect())
    }

    /// Up to `limit` load ids, in id order, whose FIRST entry (seq 1: the start of the load's
    /// log, normally its registration) was recorded in `[from, until)`: the loads of a month,
    /// for the archive. A scan of the first rows (`seq = 1`); the default reads every log.
    async fn load_ids_started_between(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        for id in self.load_ids(usize::MAX).await? {
            if out.len() >= limit {
                break;
            }
            let (entries, _) = self.read(&id).await?;
            if entries.first().is_some_and(|e| e.recorded_at() >= from && e.recorded_at() < until) {
                out.push(id);
            }
        }
        Ok(out)
    }
}
