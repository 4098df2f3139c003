//! Row encoding shared by both backends: a log entry becomes its Avro bytes, its writer schema
//! id and its plain columns; an outbox row's action becomes JSON text. Also the checks every
//! append request passes before it reaches a database.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use load_agent_avro::log_entry::{decode_log_entry, encode_log_entry};
use load_agent_avro::registry::SchemaId;
use load_agent_domain::{Action, Destination, LoadSummary, LogEntry};

use crate::error::{AppendError, StoreError};
use crate::event_store::StoredEntry;
use crate::outbox::{NewOutboxRow, OutboxStatus};
use crate::timers::TimerStatus;

/// The most entries, and the most outbox rows, one append may carry (keeps every statement
/// below SQLite's 32,766 bound parameters).
pub const MAX_ROWS_PER_APPEND: usize = 2048;

/// A log entry ready for its row.
pub(crate) struct EncodedEntry {
    pub entry_id: String,
    pub kind: &'static str,
    pub recorded_at: DateTime<Utc>,
    pub llm_cost_usd: f64,
    pub schema_id: i32,
    pub body: Vec<u8>,
}

/// An outbox row ready for its row.
pub(crate) struct EncodedOutboxRow {
    pub id: String,
    pub load_version: i64,
    pub destination: &'static str,
    pub action: String,
}

/// An append request after its checks: what the backends write.
pub(crate) struct EncodedAppend {
    pub load_id: String,
    pub expected_version: i64,
    pub entries: Vec<EncodedEntry>,
    pub outbox: Vec<EncodedOutboxRow>,
    /// `created_at` of the outbox rows: the latest `recorded_at` of the entries.
    pub created_at: DateTime<Utc>,
    /// The load's `load_summary` row after the append, if the caller gave it.
    pub summary: Option<EncodedSummary>,
}

/// A load's summary ready for its `load_summary` row.
pub(crate) struct EncodedSummary {
    pub client: Option<String>,
    pub stage: &'static str,
    pub version: i64,
    pub open_asks: i32,
    pub escalated_asks: i32,
    pub escalated_since: Option<DateTime<Utc>>,
    pub urgent_task_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

pub(crate) fn encode_summary(load_id: &str, s: &LoadSummary) -> Result<EncodedSummary, StoreError> {
    let version = i64::try_from(s.version).map_err(|_| {
        StoreError::InvalidRequest(format!("load {load_id}: summary version {} exceeds i64", s.version))
    })?;
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    Ok(EncodedSummary {
        client: s.client.clone(),
        stage: s.stage.as_str(),
        version,
        open_asks: count(s.open_asks),
        escalated_asks: count(s.escalated_asks),
        escalated_since: s.escalated_since,
        urgent_task_at: s.urgent_task_at,
        updated_at: s.updated_at,
    })
}

impl EncodedAppend {
    /// The version after a successful append.
    pub fn new_version(&self) -> u64 {
        to_u64(self.expected_version) + self.entries.len() as u64
    }
}

/// Checks and encodes an append request. Refuses, before any database work, duplicates inside
/// the request itself (as [`AppendError::DuplicateEntry`] / [`AppendError::DuplicateActionKey`],
/// exactly as if the first copy were already stored), entries or rows of another load, and
/// outbox rows without entries.
pub(crate) fn encode_append(
    load_id: &str,
    entries: &[LogEntry],
    expected_version: u64,
    outbox: &[NewOutboxRow],
    summary: Option<&LoadSummary>,
) -> Result<EncodedAppend, AppendError> {
    let expected = i64::try_from(expected_version).map_err(|_| {
        StoreError::InvalidRequest(format!("expected_version {expected_version} exceeds i64"))
    })?;
    if entries.len() > MAX_ROWS_PER_APPEND || outbox.len() > MAX_ROWS_PER_APPEND {
        return Err(StoreError::InvalidRequest(format!(
            "load {load_id}: {} entries and {} outbox rows in one append (at most {MAX_ROWS_PER_APPEND} each)",
            entries.len(),
            outbox.len()
        ))
        .into());
    }
    if entries.is_empty() && !outbox.is_empty() {
        return Err(StoreError::InvalidRequest(format!(
            "load {load_id}: outbox rows without the entries that decide them"
        ))
        .into());
    }
    let mut seen = HashSet::with_capacity(entries.len());
    let mut encoded = Vec::with_capacity(entries.len());
    for entry in entries {
        if entry.load_id() != load_id {
            return Err(StoreError::InvalidRequest(format!(
                "entry {} belongs to load {}, not {load_id}",
                entry.entry_id(),
                entry.load_id()
            ))
            .into());
        }
        if !seen.insert(entry.entry_id()) {
            return Err(AppendError::DuplicateEntry { entry_id: entry.entry_id().to_owned() });
        }
        let (SchemaId(schema_id), body) = encode_log_entry(entry);
        let schema_id = i32::try_from(schema_id)
            .map_err(|_| StoreError::InvalidRequest(format!("schema id {schema_id} exceeds i32")))?;
        encoded.push(EncodedEntry {
            entry_id: entry.entry_id().to_owned(),
            kind: entry.kind_str(),
            recorded_at: entry.recorded_at(),
            llm_cost_usd: entry.llm_cost_usd(),
            schema_id,
            body,
        });
    }
    let mut keys = HashSet::with_capacity(outbox.len());
    let mut rows = Vec::with_capacity(outbox.len());
    for row in outbox {
        if row.load_id != load_id {
            return Err(StoreError::InvalidRequest(format!(
                "outbox row {} belongs to load {}, not {load_id}",
                row.id, row.load_id
            ))
            .into());
        }
        if !keys.insert(row.id.as_str()) {
            return Err(AppendError::DuplicateActionKey { key: row.id.clone() });
        }
        let load_version = i64::try_from(row.load_version).map_err(|_| {
            StoreError::InvalidRequest(format!("outbox row {}: load_version exceeds i64", row.id))
        })?;
        let action = load_agent_avro::encode_outbox_action(&row.action)
            .map_err(|e| StoreError::InvalidRequest(format!("outbox row {}: action: {e}", row.id)))?;
        rows.push(EncodedOutboxRow {
            id: row.id.clone(),
            load_version,
            destination: row.destination.as_str(),
            action,
        });
    }
    let created_at = encoded.iter().map(|e| e.recorded_at).max().unwrap_or(DateTime::UNIX_EPOCH);
    Ok(EncodedAppend {
        load_id: load_id.to_owned(),
        expected_version: expected,
        entries: encoded,
        outbox: rows,
        created_at,
        summary: summary.map(|s| encode_summary(load_id, s)).transpose()?,
    })
}

/// Re-creates a refusal decided before any database work (such refusals never hold a database
/// error), for the result of each request of a batch.
pub(crate) fn copy_refusal(e: &AppendError) -> AppendError {
    match e {
        AppendError::Conflict { expected, actual } => {
            AppendError::Conflict { expected: *expected, actual: *actual }
        }
        AppendError::DuplicateEntry { entry_id } => {
            AppendError::DuplicateEntry { entry_id: entry_id.clone() }
        }
        AppendError::DuplicateActionKey { key } => AppendError::DuplicateActionKey { key: key.clone() },
        AppendError::Store(e) => AppendError::Store(StoreError::InvalidRequest(e.to_string())),
    }
}

/// Decodes one stored entry.
pub(crate) fn decode_entry(
    load_id: &str,
    seq: i64,
    schema_id: i64,
    body: &[u8],
) -> Result<LogEntry, StoreError> {
    let decode_error =
        |message: String| StoreError::Decode { load_id: load_id.to_owned(), seq, schema_id, message };
    let id = u32::try_from(schema_id).map_err(|_| decode_error("schema id out of range".into()))?;
    decode_log_entry(SchemaId(id), body).map_err(|e| decode_error(e.to_string()))
}

/// Rows per decoding chunk: a log longer than this is decoded on the blocking pool, a chunk at
/// a time, while the next rows are still arriving.
const DECODE_CHUNK: usize = 64;

/// [`EventStore::read_since`](crate::EventStore::read_since) from two reads that are not one
/// snapshot: `entries` (the rows after `after`, decoded) and, only when it finds none,
/// `log_version` (to report a log behind the caller's version). An append that commits between
/// the two would make the answer "no entries, yet a version past `after`": the suffix is read
/// again then, so the entries and the version always agree.
pub(crate) async fn suffix_and_version<E, V>(
    after: u64,
    entries: impl Fn() -> E,
    log_version: impl FnOnce() -> V,
) -> Result<(Vec<LogEntry>, u64), StoreError>
where
    E: std::future::Future<Output = Result<(Vec<LogEntry>, u64), StoreError>>,
    V: std::future::Future<Output = Result<u64, StoreError>>,
{
    let (read, version) = entries().await?;
    if !read.is_empty() || after == 0 {
        return Ok((read, version));
    }
    let now = log_version().await?;
    if now <= after {
        return Ok((Vec::new(), now));
    }
    entries().await
}

/// Decodes a load's rows `(seq, schema_id, body)` as they stream in, in seq order, checking that
/// they are exactly `after + 1 ..= after + n`; returns the entries and the version.
///
/// Avro decoding dominates a long read, so each full chunk of rows is handed to the blocking
/// pool as soon as it has arrived: decoding overlaps the transfer of the remaining rows and
/// uses the other cores. A short log is decoded inline.
pub(crate) async fn decode_log_stream<S>(
    load_id: &str,
    after: u64,
    mut rows: S,
) -> Result<(Vec<LogEntry>, u64), StoreError>
where
    S: futures::Stream<Item = Result<(i64, i64, Vec<u8>), sqlx::Error>> + Unpin,
{
    use futures::TryStreamExt;

    let mut version = after;
    let mut chunk = Vec::new();
    let mut pending = Vec::new();
    while let Some(row) = rows.try_next().await? {
        if to_u64(row.0) != version + 1 {
            return Err(StoreError::Corrupt(format!(
                "log of load {load_id} has seq {} where {} belongs (seqs must be contiguous)",
                row.0,
                version + 1
            )));
        }
        version += 1;
        chunk.push(row);
        if chunk.len() == DECODE_CHUNK {
            let full = std::mem::replace(&mut chunk, Vec::with_capacity(DECODE_CHUNK));
            let owned_id = load_id.to_owned();
            pending.push(tokio::task::spawn_blocking(move || decode_rows(&owned_id, &full)));
        }
    }
    let mut entries = Vec::with_capacity(usize::try_from(version - after).unwrap_or(0));
    for handle in pending {
        let decoded = handle
            .await
            .map_err(|e| StoreError::Corrupt(format!("decoding the log of {load_id}: {e}")))??;
        entries.extend(decoded);
    }
    entries.extend(decode_rows(load_id, &chunk)?);
    Ok((entries, version))
}

fn decode_rows(load_id: &str, rows: &[(i64, i64, Vec<u8>)]) -> Result<Vec<LogEntry>, StoreError> {
    rows.iter().map(|(seq, schema_id, body)| decode_entry(load_id, *seq, *schema_id, body)).collect()
}

/// One stored log row: `(seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body)`.
pub(crate) type StoredRow<T> = (i64, String, String, T, f64, i64, Vec<u8>);

/// A load's stored rows in seq order as [`StoredEntry`]s, checking that the seqs are exactly
/// `1..=n`.
pub(crate) fn stored_rows(
    load_id: &str,
    rows: Vec<StoredRow<DateTime<Utc>>>,
) -> Result<Vec<StoredEntry>, StoreError> {
    rows.into_iter()
        .zip(1u64..)
        .map(|((seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body), expected)| {
            if to_u64(seq) != expected {
                return Err(StoreError::Corrupt(format!(
                    "log of load {load_id} has seq {seq} where {expected} belongs (seqs must be contiguous)"
                )));
            }
            let schema_id = u32::try_from(schema_id).map_err(|_| StoreError::Decode {
                load_id: load_id.to_owned(),
                seq,
                schema_id,
                message: "schema id out of range".into(),
            })?;
            Ok(StoredEntry { seq: expected, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body })
        })
        .collect()
}

pub(crate) fn decode_action(id: &str, json: &str) -> Result<Action, StoreError> {
    load_agent_avro::decode_outbox_action(json)
        .map_err(|e| StoreError::Corrupt(format!("outbox row {id}: action JSON: {e}")))
}

pub(crate) fn decode_destination(id: &str, s: &str) -> Result<Destination, StoreError> {
    Destination::parse(s)
        .ok_or_else(|| StoreError::Corrupt(format!("outbox row {id}: unknown destination {s:?}")))
}

pub(crate) fn decode_status(id: &str, s: &str) -> Result<OutboxStatus, StoreError> {
    OutboxStatus::parse(s)
        .ok_or_else(|| StoreError::Corrupt(format!("outbox row {id}: unknown status {s:?}")))
}

pub(crate) fn decode_timer_status(id: &str, s: &str) -> Result<TimerStatus, StoreError> {
    TimerStatus::parse(s).ok_or_else(|| StoreError::Corrupt(format!("timer {id}: unknown status {s:?}")))
}

/// A stored non-negative counter; negative values (impossible by construction) read as 0.
pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

pub(crate) fn to_u32(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

pub(crate) fn limit_i64(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// `now - then`, clamped at zero (a fake clock may run behind a stored time).
pub(crate) fn age(now: DateTime<Utc>, then: DateTime<Utc>) -> std::time::Duration {
    (now - then).to_std().unwrap_or_default()
}

/// The SQLite form of a time: fixed-width UTC with microseconds, so that text order is time
/// order. Postgres stores `timestamptz` (also microseconds); both truncate sub-microsecond digits.
pub(crate) fn sqlite_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

pub(crate) fn parse_sqlite_time(what: &str, s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("{what}: bad time {s:?}: {e}")))
}

pub(crate) fn parse_sqlite_time_opt(
    what: &str,
    s: Option<String>,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    s.map(|s| parse_sqlite_time(what, &s)).transpose()
}

pub(crate) fn attempt_i32(attempt: u32) -> Result<i32, StoreError> {
    i32::try_from(attempt)
        .map_err(|_| StoreError::InvalidRequest(format!("timer attempt {attempt} exceeds i32")))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use load_agent_testkit::events::{self, entry};

    use super::*;

    fn sms(id: &str) -> LogEntry {
        entry("L1", id, load_agent_testkit::t0(), events::sms("drv", id))
    }

    /// `suffix_and_version` over a log at version 2 whose next append (version 3) commits
    /// between the suffix read and the version read when `straddled`.
    async fn read(
        after: u64,
        log_at: u64,
        straddled: bool,
    ) -> (Result<(Vec<LogEntry>, u64), StoreError>, usize) {
        let reads = AtomicUsize::new(0);
        let entries = || {
            let n = reads.fetch_add(1, Ordering::Relaxed);
            async move {
                match (n, straddled) {
                    (0, true) => Ok((Vec::new(), after)),
                    _ if log_at > after => Ok((vec![sms("c")], log_at)),
                    _ => Ok((Vec::new(), after)),
                }
            }
        };
        let result = suffix_and_version(after, entries, || async move { Ok(log_at) }).await;
        (result, reads.load(Ordering::Relaxed))
    }

    #[tokio::test]
    async fn a_suffix_read_across_a_commit_is_read_again_so_entries_and_version_agree() {
        let (result, reads) = read(2, 3, true).await;
        let (entries, version) = result.expect("read");
        assert_eq!((entries.len(), version, reads), (1, 3, 2), "the committed entry, read the second time");
        // Nothing committed: one suffix read, the log's version.
        let (result, reads) = read(2, 2, false).await;
        assert_eq!((result.expect("read").1, reads), (2, 1));
        // A log behind the caller's version (a cache ahead of it) is reported as it is.
        let (result, reads) = read(5, 3, false).await;
        let (entries, version) = result.expect("read");
        assert_eq!((entries.is_empty(), version, reads), (true, 3, 1));
    }
}
