//! `EventStore` on SQLite: appends run in the writer's transaction, reads on the reader pool.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use load_agent_domain::{LoadSummary, LogEntry};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqliteRow};

use super::SqliteStore;
use super::command::WriteCmd;
use crate::codec::{
    EncodedAppend, EncodedSummary, StoredRow, decode_entry, decode_log_stream, encode_append, limit_i64,
    parse_sqlite_time, sqlite_time, stored_rows, suffix_and_version, to_u64,
};
use crate::error::{AppendError, StoreError};
use crate::event_store::{AppendRequest, EventStore, StoredEntry};
use crate::outbox::NewOutboxRow;

const VERSION: &str = "SELECT coalesce(max(seq), 0) FROM log_entries WHERE load_id = ?1";

/// A bound value of a generated statement.
enum Arg<'a> {
    Null,
    Text(&'a str),
    Int(i64),
    Real(f64),
    Blob(&'a [u8]),
}

/// A generated query and its values, in the order of their `?` placeholders. A multi-statement
/// query takes its anonymous placeholders in order across statements, so a value used twice is
/// bound twice.
#[derive(Default)]
struct Generated<'a> {
    sql: String,
    args: Vec<Arg<'a>>,
}

impl<'a> Generated<'a> {
    fn sql(&mut self, s: &str) -> &mut Self {
        self.sql.push_str(s);
        self
    }

    fn arg(&mut self, a: Arg<'a>) -> &mut Self {
        self.sql.push('?');
        self.args.push(a);
        self
    }

    /// `(?, ?, ...)` of `values`, separated by `, `.
    fn list(&mut self, values: impl IntoIterator<Item = Arg<'a>>) -> &mut Self {
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.sql(", ");
            }
            self.arg(v);
        }
        self
    }

    fn query(&self) -> sqlx::query::Query<'_, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'_>> {
        let mut q = sqlx::query(&self.sql);
        for a in &self.args {
            q = match a {
                Arg::Null => q.bind(None::<&str>),
                Arg::Text(v) => q.bind(*v),
                Arg::Int(v) => q.bind(*v),
                Arg::Real(v) => q.bind(*v),
                Arg::Blob(v) => q.bind(*v),
            };
        }
        q
    }
}

/// The whole append as one multi-statement query, so that it costs one trip to SQLite's
/// connection thread:
/// 1. what the log and the outbox hold now (version, the first duplicate entry id, the first
///    duplicate key), returned to decide the outcome;
/// 2. the entries, inserted only if the version matches and nothing is duplicated (the same
///    conditions as 1, in the same write transaction, so both agree);
/// 3. the outbox rows, inserted only if 2 inserted (`changes()`).
///
/// Only placeholders and ordinals are generated; every value is bound.
fn append_query_into<'a>(
    g: &mut Generated<'a>,
    req: &'a EncodedAppend,
    recorded_at: &'a [String],
    created_at: &'a str,
    times: &'a SummaryTimes,
) {
    let load = || Arg::Text(&req.load_id);
    let entry_ids = || req.entries.iter().map(|e| Arg::Text(&e.entry_id));
    let keys = || req.outbox.iter().map(|o| Arg::Text(&o.id));
    let version = |g: &mut Generated<'a>| {
        g.sql("(SELECT coalesce(max(seq), 0) FROM log_entries WHERE load_id = ").arg(load()).sql(")");
    };
    // 1. The state the outcome is decided on.
    g.sql("SELECT ");
    version(g);
    if req.entries.is_empty() {
        // A version check only.
        g.sql(", NULL, NULL;\n");
        return;
    }
    g.sql(", (SELECT e.column2 FROM (VALUES ");
    for (i, e) in req.entries.iter().enumerate() {
        g.sql(if i > 0 { ", (" } else { "(" })
            .sql(&i.to_string())
            .sql(", ")
            .arg(Arg::Text(&e.entry_id))
            .sql(")");
    }
    g.sql(") AS e WHERE EXISTS (SELECT 1 FROM log_entries l WHERE l.load_id = ")
        .arg(load())
        .sql(" AND l.entry_id = e.column2) ORDER BY e.column1 LIMIT 1), ");
    if req.outbox.is_empty() {
        g.sql("NULL");
    } else {
        g.sql("(SELECT k.column2 FROM (VALUES ");
        for (i, o) in req.outbox.iter().enumerate() {
            g.sql(if i > 0 { ", (" } else { "(" })
                .sql(&i.to_string())
                .sql(", ")
                .arg(Arg::Text(&o.id))
                .sql(")");
        }
        g.sql(
            ") AS k WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.id = k.column2) ORDER BY k.column1 LIMIT 1)",
        );
    }
    g.sql(";\n");

    // 2. The entries, under the same conditions.
    g.sql(
        "INSERT INTO log_entries (load_id, seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body) \
         SELECT v.column2, v.column3 + v.column1, v.column4, v.column5, v.column6, v.column7, v.column8, v.column9 \
         FROM (VALUES ",
    );
    for (i, (e, at)) in req.entries.iter().zip(recorded_at).enumerate() {
        g.sql(if i > 0 { ", (" } else { "(" }).sql(&(i + 1).to_string()).sql(", ");
        g.list([
            load(),
            Arg::Int(req.expected_version),
            Arg::Text(&e.entry_id),
            Arg::Text(e.kind),
            Arg::Text(at),
            Arg::Real(e.llm_cost_usd),
            Arg::Int(i64::from(e.schema_id)),
            Arg::Blob(&e.body),
        ]);
        g.sql(")");
    }
    g.sql(") AS v WHERE ");
    version(g);
    g.sql(" = ").arg(Arg::Int(req.expected_version));
    g.sql(" AND NOT EXISTS (SELECT 1 FROM log_entries WHERE load_id = ")
        .arg(load())
        .sql(" AND entry_id IN (");
    g.list(entry_ids()).sql("))");
    if !req.outbox.is_empty() {
        g.sql(" AND NOT EXISTS (SELECT 1 FROM outbox WHERE id IN (").list(keys()).sql("))");
    }
    g.sql(" ORDER BY v.column1;\n");

    // 3. The outbox rows, only if the entries went in.
    if !req.outbox.is_empty() {
        g.sql(
            "INSERT INTO outbox (id, load_id, load_version, destination, action, created_at) \
             SELECT r.column2, r.column3, r.column4, r.column5, r.column6, r.column7 FROM (VALUES ",
        );
        for (i, o) in req.outbox.iter().enumerate() {
            g.sql(if i > 0 { ", (" } else { "(" }).sql(&i.to_string()).sql(", ");
            g.list([
                Arg::Text(&o.id),
                load(),
                Arg::Int(o.load_version),
                Arg::Text(o.destination),
                Arg::Text(&o.action),
                Arg::Text(created_at),
            ]);
            g.sql(")");
        }
        g.sql(") AS r WHERE changes() > 0 ORDER BY r.column1;\n");
    }

    // 4. The load's summary, only if the entries went in: its last entry is at the new version.
    if let (Some(s), Some(last)) = (&req.summary, req.entries.last()) {
        g.sql(
            "INSERT INTO load_summary (load_id, client, stage, version, open_asks, escalated_asks, \
             escalated_since, urgent_task_at, updated_at) SELECT ",
        );
        g.list([
            load(),
            s.client.as_deref().map_or(Arg::Null, Arg::Text),
            Arg::Text(s.stage),
            Arg::Int(s.version),
            Arg::Int(i64::from(s.open_asks)),
            Arg::Int(i64::from(s.escalated_asks)),
            times.escalated_since.as_deref().map_or(Arg::Null, Arg::Text),
            times.urgent_task_at.as_deref().map_or(Arg::Null, Arg::Text),
            Arg::Text(&times.updated_at),
        ]);
        g.sql(" WHERE EXISTS (SELECT 1 FROM log_entries WHERE load_id = ")
            .arg(load())
            .sql(" AND seq = ")
            .arg(Arg::Int(req.expected_version + req.entries.len() as i64))
            .sql(" AND entry_id = ")
            .arg(Arg::Text(&last.entry_id))
            .sql(") ");
        g.sql(SUMMARY_UPSERT).sql(";\n");
    }
}

/// The `ON CONFLICT` of a `load_summary` write: a later version replaces an earlier one.
pub(super) const SUMMARY_UPSERT: &str = "ON CONFLICT (load_id) DO UPDATE SET \
     client = excluded.client, stage = excluded.stage, version = excluded.version, \
     open_asks = excluded.open_asks, escalated_asks = excluded.escalated_asks, \
     escalated_since = excluded.escalated_since, urgent_task_at = excluded.urgent_task_at, \
     updated_at = excluded.updated_at WHERE load_summary.version <= excluded.version";

/// A summary's times in their SQLite form.
#[derive(Default)]
pub(super) struct SummaryTimes {
    pub escalated_since: Option<String>,
    pub urgent_task_at: Option<String>,
    pub updated_at: String,
}

impl SummaryTimes {
    pub(super) fn of(s: Option<&EncodedSummary>) -> Self {
        s.map_or_else(SummaryTimes::default, |s| SummaryTimes {
            escalated_since: s.escalated_since.map(sqlite_time),
            urgent_task_at: s.urgent_task_at.map(sqlite_time),
            updated_at: sqlite_time(s.updated_at),
        })
    }
}

/// The outcome of one append from the first row of its query.
fn outcome_of(row: &SqliteRow, req: &EncodedAppend) -> Result<Result<u64, AppendError>, sqlx::Error> {
    let version: i64 = row.try_get(0)?;
    Ok(if version != req.expected_version {
        Err(AppendError::Conflict { expected: to_u64(req.expected_version), actual: to_u64(version) })
    } else if let Some(entry_id) = row.try_get::<Option<String>, _>(1)? {
        Err(AppendError::DuplicateEntry { entry_id })
    } else if let Some(key) = row.try_get::<Option<String>, _>(2)? {
        Err(AppendError::DuplicateActionKey { key })
    } else {
        Ok(req.new_version())
    })
}

/// The times of an append in their SQLite form: each entry's `recorded_at`, the rows' `created_at`.
fn times_of(req: &EncodedAppend) -> (Vec<String>, String) {
    (req.entries.iter().map(|e| sqlite_time(e.recorded_at)).collect(), sqlite_time(req.created_at))
}

/// One append inside the writer's transaction (one trip to SQLite; the statement stays
/// prepared). The transaction holds the database's only write lock, so the checks are exact:
/// a refusal writes nothing, and the inserts cannot hit a constraint.
pub(super) async fn append_in(
    conn: &mut SqliteConnection,
    req: &EncodedAppend,
) -> Result<Result<u64, AppendError>, sqlx::Error> {
    let (recorded_at, created_at) = times_of(req);
    let times = SummaryTimes::of(req.summary.as_ref());
    let mut g = Generated::default();
    append_query_into(&mut g, req, &recorded_at, &created_at, &times);
    // `fetch_all` runs every statement of the query; only the first returns a row.
    let rows = g.query().fetch_all(&mut *conn).await?;
    let row = rows.first().ok_or(sqlx::Error::RowNotFound)?;
    outcome_of(row, req)
}

#[async_trait]
impl EventStore for SqliteStore {
    async fn read(&self, load_id: &str) -> Result<(Vec<LogEntry>, u64), StoreError> {
        self.read_since(load_id, 0).await
    }

    /// The writer task runs the appends queued while its last transaction committed in one
    /// transaction (the module documentation of `sqlite`).
    fn commits_grouped(&self) -> bool {
        true
    }

    async fn read_since(&self, load_id: &str, version: u64) -> Result<(Vec<LogEntry>, u64), StoreError> {
        let after = i64::try_from(version)
            .map_err(|_| StoreError::InvalidRequest(format!("version {version} exceeds i64")))?;
        let entries = || {
            let rows = sqlx::query_as::<_, (i64, i64, Vec<u8>)>(
                "SELECT seq, schema_id, body FROM log_entries WHERE load_id = ?1 AND seq > ?2 ORDER BY seq",
            )
            .bind(load_id)
            .bind(after)
            .fetch(&self.readers);
            decode_log_stream(load_id, version, rows)
        };
        let log_version = || async {
            let v: i64 = sqlx::query_scalar(VERSION).bind(load_id).fetch_one(&self.readers).await?;
            Ok(to_u64(v))
        };
        suffix_and_version(version, entries, log_version).await
    }

    async fn read_entry(&self, load_id: &str, entry_id: &str) -> Result<Option<LogEntry>, StoreError> {
        let row = sqlx::query_as::<_, (i64, i64, Vec<u8>)>(
            "SELECT seq, schema_id, body FROM log_entries WHERE load_id = ?1 AND entry_id = ?2",
        )
        .bind(load_id)
        .bind(entry_id)
        .fetch_optional(&self.readers)
        .await?;
        row.map(|(seq, schema_id, body)| decode_entry(load_id, seq, schema_id, &body)).transpose()
    }

    async fn append_summarized(
        &self,
        load_id: &str,
        entries: &[LogEntry],
        expected_version: u64,
        outbox: &[NewOutboxRow],
        summary: Option<&LoadSummary>,
    ) -> Result<u64, AppendError> {
        let req = encode_append(load_id, entries, expected_version, outbox, summary)?;
        let mut results = self.write(|reply| WriteCmd::Append { requests: vec![Ok(req)], reply }).await?;
        results
            .pop()
            .unwrap_or_else(|| Err(StoreError::Commit("the writer returned no result".into()).into()))
    }

    async fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<u64, AppendError>> {
        let n = requests.len();
        let encoded: Vec<_> = requests
            .iter()
            .map(|r| encode_append(&r.load_id, &r.entries, r.expected_version, &r.outbox, r.summary.as_ref()))
            .collect();
        match self.write(|reply| WriteCmd::Append { requests: encoded, reply }).await {
            Ok(results) => results,
            Err(e) => {
                let message = e.to_string();
                (0..n).map(|_| Err(StoreError::Commit(message.clone()).into())).collect()
            }
        }
    }

    async fn llm_cost(&self, load_id: &str) -> Result<f64, StoreError> {
        let cost: f64 =
            sqlx::query_scalar("SELECT coalesce(sum(llm_cost_usd), 0.0) FROM log_entries WHERE load_id = ?1")
                .bind(load_id)
                .fetch_one(&self.readers)
                .await?;
        Ok(cost)
    }

    async fn load_ids(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT load_id FROM log_entries WHERE seq = 1 ORDER BY load_id LIMIT ?1")
                .bind(limit_i64(limit))
                .fetch_all(&self.readers)
                .await?;
        Ok(ids)
    }

    async fn read_stored(&self, load_id: &str) -> Result<Vec<StoredEntry>, StoreError> {
        let rows = sqlx::query_as::<_, StoredRow<String>>(
            "SELECT seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body FROM log_entries \
             WHERE load_id = ?1 ORDER BY seq",
        )
        .bind(load_id)
        .fetch_all(&self.readers)
        .await?;
        let rows = rows
            .into_iter()
            .map(|(q, i, k, t, c, s, b)| {
                let what = format!("log entry {load_id}#{q} recorded_at");
                Ok((q, i, k, parse_sqlite_time(&what, &t)?, c, s, b))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        stored_rows(load_id, rows)
    }

    async fn load_ids_started_between(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT load_id FROM log_entries WHERE seq = 1 AND recorded_at >= ?1 AND recorded_at < ?2 \
             ORDER BY load_id LIMIT ?3",
        )
        .bind(sqlite_time(from))
        .bind(sqlite_time(until))
        .bind(limit_i64(limit))
        .fetch_all(&self.readers)
        .await?;
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::codec::{EncodedEntry, EncodedOutboxRow};

    #[test]
    fn append_queries_bind_one_value_per_placeholder() {
        let entry = |id: &str| EncodedEntry {
            entry_id: id.into(),
            kind: "sms",
            recorded_at: Utc::now(),
            llm_cost_usd: 0.0,
            schema_id: 1,
            body: vec![1, 2],
        };
        for (entries, rows, summarized) in [(1, 0, false), (2, 1, true), (3, 4, false), (2, 0, true)] {
            let req = EncodedAppend {
                load_id: "L".into(),
                expected_version: 0,
                entries: (0..entries).map(|i| entry(&format!("e{i}"))).collect(),
                outbox: (0..rows)
                    .map(|i| EncodedOutboxRow {
                        id: format!("k{i}"),
                        load_version: 2,
                        destination: "sms",
                        action: "{}".into(),
                    })
                    .collect(),
                created_at: Utc::now(),
                summary: summarized.then(|| EncodedSummary {
                    client: Some("client_a".into()),
                    stage: "to_pickup",
                    version: entries as i64,
                    open_asks: 1,
                    escalated_asks: 0,
                    escalated_since: None,
                    urgent_task_at: Some(Utc::now()),
                    updated_at: Utc::now(),
                }),
            };
            let summary_times = SummaryTimes::of(req.summary.as_ref());
            let times = vec![String::new(); entries];
            let mut g = Generated::default();
            append_query_into(&mut g, &req, &times, "", &summary_times);
            assert_eq!(g.sql.matches('?').count(), g.args.len(), "{}", g.sql);
            assert_eq!(g.sql.matches(';').count(), 2 + usize::from(rows > 0) + usize::from(summarized));
        }
    }
}
