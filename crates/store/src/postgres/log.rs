//! `EventStore` on Postgres.

use async_trait::async_trait;
use chrono::{DateTime, Datelike, NaiveDate, Utc};
use futures::TryStreamExt;
use load_agent_domain::{LoadSummary, LogEntry};
use sqlx::postgres::PgRow;
use sqlx::{Executor, PgConnection, Postgres, Row};

use super::parts::undefined_table;
use super::{PgStore, unique_violation};
use crate::codec::{
    EncodedAppend, copy_refusal, decode_entry, decode_log_stream, encode_append, limit_i64, stored_rows,
    suffix_and_version, to_u64,
};
use crate::error::{AppendError, StoreError};
use crate::event_store::{AppendRequest, EventStore, StoredEntry};
use crate::outbox::NewOutboxRow;

/// One append as one statement: the version check and the duplicate checks decide whether the
/// two inserts write anything; the statement returns what it saw. Mirrors the pglimit shape
/// (read max seq, insert the log rows under PK (load_id, seq) and unique (load_id, entry_id),
/// insert the outbox rows) in a single round trip.
///
/// The log is partitioned by the load's month (migrations 0004). The statement's lookups name
/// the month as a parameter (`$22`, the store's cached month of the load, or its guess): a
/// partition key given as a parameter is pruned when the generic plan starts, so only that
/// partition is opened, where a month looked up inside the statement (an init plan) is pruned
/// only after every partition's scans were set up (docs/performance.md, "Partitioned store").
/// The directory `load_months` still decides: the statement returns the load's month (`dir`,
/// and `month`: the directory's, else its first entry's for a new load), writes nothing when
/// `$22` is not it (the caller learns the month and runs it again), and a load's first append
/// writes its directory row (the month of its first entry). Two first appends of one load
/// collide on `load_months_pkey` even when their entries fall in different months. A load
/// without a directory row has no log rows in any partition, so the lookups of a new load find
/// nothing whatever `$22` is.
///
/// `{log}` is the table the statement reads and writes ([`in_log`]): the parent `log_entries`,
/// or the month's partition itself when the store knows it is attached (`PgStore::log_table`).
/// Named directly, the statement's plan holds that one table: Postgres 15 locks and sets up
/// every partition a generic plan names at each execution, pruned or not, so through the
/// parent each append paid for every month retention keeps (docs/capacity.md, "A year of log
/// partitions"). The rows and checks are the same either way: `$22` is the partition's month.
///
/// The version is the load's last `seq` read as `ORDER BY seq DESC LIMIT 1`, one backward step
/// of the primary key, not `max(seq)`: through a partition named directly, a generic plan made
/// while the partition had no statistics computed `max` by reading every entry of the load
/// through the other unique index (3,000 rows for a load of 3,000 entries; through the parent
/// the same `max` was planned as the backward step). The explicit form is the backward step
/// whatever the statistics (docs/performance.md, "Partitions named: the version's plan").
///
/// The duplicate checks' `EXISTS (... OFFSET 0)` keeps each a sub-plan probed per id through its
/// unique index. Without it Postgres may turn the `EXISTS` into a semi-join, and a generic plan
/// expecting few rows for the load materialized all of the load's entries and compared each id
/// against them: every append read its load's whole log (11 ms instead of 0.7 ms at 6,700
/// entries; docs/performance.md, "Fourth look"). The same holds for `APPEND_LOADS`.
const APPEND: &str = r#"
WITH dir AS (
    SELECT (SELECT load_month FROM load_months WHERE load_id = $1) AS m
), cur AS (
    SELECT coalesce((SELECT seq FROM {log} WHERE load_id = $1 AND load_month = $22::date
                     ORDER BY seq DESC LIMIT 1), 0)::int8 AS v
), dup_entry AS (
    SELECT (SELECT e.id FROM UNNEST($3::text[]) WITH ORDINALITY AS e(id, n)
            WHERE EXISTS (SELECT 1 FROM {log} l WHERE l.load_id = $1 AND l.entry_id = e.id
                          AND l.load_month = $22::date OFFSET 0)
            ORDER BY e.n LIMIT 1) AS id
), month AS (
    SELECT coalesce(dir.m, date_trunc('month', ($5::timestamptz[])[1] AT TIME ZONE 'UTC')::date) AS m FROM dir
), dup_key AS (
    SELECT (SELECT k.id FROM UNNEST($9::text[]) WITH ORDINALITY AS k(id, n)
            WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.id = k.id OFFSET 0)
            ORDER BY k.n LIMIT 1) AS id
), ok AS (
    SELECT cur.v FROM cur, dup_entry, dup_key, month
    WHERE cur.v = $2 AND dup_entry.id IS NULL AND dup_key.id IS NULL AND month.m = $22::date
), dir_row AS (
    INSERT INTO load_months (load_id, load_month)
    SELECT $1, month.m FROM ok, month, dir WHERE dir.m IS NULL
), log_rows AS (
    INSERT INTO {log} (load_id, seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body, load_month)
    SELECT $1, ok.v + e.n, e.entry_id, e.kind, e.recorded_at, e.cost, e.schema_id, e.body, month.m
    FROM ok, month, UNNEST($3::text[], $4::text[], $5::timestamptz[], $6::float8[], $7::int4[], $8::bytea[])
             WITH ORDINALITY AS e(entry_id, kind, recorded_at, cost, schema_id, body, n)
), outbox_rows AS (
    INSERT INTO outbox (id, load_id, load_version, destination, action, created_at)
    SELECT o.id, $1, o.load_version, o.destination, o.action, $13
    FROM ok, UNNEST($9::text[], $10::int8[], $11::text[], $12::text[])
             WITH ORDINALITY AS o(id, load_version, destination, action, n)
    ORDER BY o.n
), summary AS (
    INSERT INTO load_summary (load_id, client, stage, version, open_asks, escalated_asks,
                              escalated_since, urgent_task_at, updated_at)
    SELECT $1, $14, $15, $16, $17, $18, $19, $20, $21 FROM ok WHERE $15::text IS NOT NULL
    ON CONFLICT (load_id) DO UPDATE SET
        client = excluded.client, stage = excluded.stage, version = excluded.version,
        open_asks = excluded.open_asks, escalated_asks = excluded.escalated_asks,
        escalated_since = excluded.escalated_since, urgent_task_at = excluded.urgent_task_at,
        updated_at = excluded.updated_at
    WHERE load_summary.version <= excluded.version
)
SELECT cur.v, dup_entry.id, dup_key.id, dir.m, month.m FROM cur, dup_entry, dup_key, dir, month
"#;

/// A batch of appends of DIFFERENT loads as one statement (group commit: one round trip and one
/// commit for the batch). Each load keeps its own version check and duplicate checks, and
/// writes only when all pass; the statement returns, per load in request order, the version it
/// saw and the duplicates it found. A lost race on a unique index fails the statement (the
/// caller falls back to one savepoint per load).
///
/// Each load's directory row is read by a sub-plan per load (`dir`, a primary-key probe). As a
/// join, a generic plan made while `load_months` was small hashed the batch and scanned the
/// whole directory on every batch: a cost that grew with the number of loads ever seen
/// (docs/capacity.md, "What the group commit was waiting for").
///
/// `{log}` is the parent or one month's partition, as in [`APPEND`]. Named for month `$26`, the
/// statement writes only the loads of that month (the directory's, or the first entry's for a
/// new load) and returns each load's month, so the caller runs the others through the parent;
/// `$26` is `NULL` through the parent, where every load is written in its own month.
const APPEND_LOADS: &str = r#"
WITH req AS (
    SELECT r.load_id, r.expected, r.created_at, r.i
    FROM UNNEST($1::text[], $2::int8[], $3::timestamptz[]) WITH ORDINALITY AS r(load_id, expected, created_at, i)
), ent AS (
    SELECT * FROM UNNEST($4::int8[], $5::int8[], $6::text[], $7::text[], $8::timestamptz[], $9::float8[],
                         $10::int4[], $11::bytea[])
        AS e(li, n, entry_id, kind, recorded_at, cost, schema_id, body)
), obx AS (
    SELECT * FROM UNNEST($12::int8[], $13::text[], $14::int8[], $15::text[], $16::text[]) WITH ORDINALITY
        AS o(li, id, load_version, destination, action, n)
), dir AS (
    SELECT req.*, (SELECT d.load_month FROM load_months d WHERE d.load_id = req.load_id) AS dir_month
    FROM req OFFSET 0
), cur AS (
    SELECT dir.i, dir.load_id, dir.expected, dir.created_at, dir.dir_month,
           coalesce(dir.dir_month,
                    (SELECT date_trunc('month', e.recorded_at AT TIME ZONE 'UTC')::date FROM ent e
                     WHERE e.li = dir.i ORDER BY e.n LIMIT 1)) AS month,
           coalesce((SELECT l.seq FROM {log} l WHERE l.load_id = dir.load_id AND l.load_month = dir.dir_month
                     ORDER BY l.seq DESC LIMIT 1), 0)::int8 AS v,
           (SELECT e.entry_id FROM ent e
            WHERE e.li = dir.i
              AND EXISTS (SELECT 1 FROM {log} l WHERE l.load_id = dir.load_id AND l.entry_id = e.entry_id
                          AND l.load_month = dir.dir_month OFFSET 0)
            ORDER BY e.n LIMIT 1) AS dup_entry,
           (SELECT o.id FROM obx o
            WHERE o.li = dir.i AND EXISTS (SELECT 1 FROM outbox x WHERE x.id = o.id OFFSET 0)
            ORDER BY o.n LIMIT 1) AS dup_key
    FROM dir
), ok AS (
    SELECT * FROM cur WHERE v = expected AND dup_entry IS NULL AND dup_key IS NULL
      AND ($26::date IS NULL OR month = $26::date)
), dir_rows AS (
    INSERT INTO load_months (load_id, load_month)
    SELECT ok.load_id, ok.month FROM ok WHERE ok.dir_month IS NULL AND ok.month IS NOT NULL  -- no entries: no log yet
), log_rows AS (
    INSERT INTO {log} (load_id, seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body, load_month)
    SELECT ok.load_id, ok.v + e.n, e.entry_id, e.kind, e.recorded_at, e.cost, e.schema_id, e.body, ok.month
    FROM ok JOIN ent e ON e.li = ok.i
), outbox_rows AS (
    INSERT INTO outbox (id, load_id, load_version, destination, action, created_at)
    SELECT o.id, ok.load_id, o.load_version, o.destination, o.action, ok.created_at
    FROM ok JOIN obx o ON o.li = ok.i
    ORDER BY o.n
), summary AS (
    INSERT INTO load_summary (load_id, client, stage, version, open_asks, escalated_asks,
                              escalated_since, urgent_task_at, updated_at)
    SELECT ok.load_id, s.client, s.stage, s.version, s.open_asks, s.escalated, s.escalated_since,
           s.urgent_at, s.updated_at
    FROM ok JOIN UNNEST($17::int8[], $18::text[], $19::text[], $20::int8[], $21::int4[], $22::int4[],
                        $23::timestamptz[], $24::timestamptz[], $25::timestamptz[])
        AS s(li, client, stage, version, open_asks, escalated, escalated_since, urgent_at, updated_at)
        ON s.li = ok.i
    ON CONFLICT (load_id) DO UPDATE SET
        client = excluded.client, stage = excluded.stage, version = excluded.version,
        open_asks = excluded.open_asks, escalated_asks = excluded.escalated_asks,
        escalated_since = excluded.escalated_since, urgent_task_at = excluded.urgent_task_at,
        updated_at = excluded.updated_at
    WHERE load_summary.version <= excluded.version
)
SELECT i, v, dup_entry, dup_key, month FROM cur ORDER BY i
"#;

/// Every read of one load filters on its partition, `load_month = (SELECT load_month FROM
/// load_months WHERE load_id = $1)` (its month in the directory; `NULL`, so no partition, for an
/// unknown load): Postgres prunes the other partitions when it runs the statement.
const VERSION: &str = "SELECT coalesce(max(seq), 0)::int8 FROM log_entries \
    WHERE load_id = $1 AND load_month = (SELECT load_month FROM load_months WHERE load_id = $1)";
const READ_SINCE: &str = "SELECT seq, schema_id, body FROM log_entries WHERE load_id = $1 AND seq > $2 \
    AND load_month = (SELECT load_month FROM load_months WHERE load_id = $1) ORDER BY seq";
const READ_ENTRY: &str = "SELECT seq, schema_id, body FROM log_entries WHERE load_id = $1 AND entry_id = $2 \
    AND load_month = (SELECT load_month FROM load_months WHERE load_id = $1)";
const READ_STORED: &str = "SELECT seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body FROM log_entries \
    WHERE load_id = $1 AND load_month = (SELECT load_month FROM load_months WHERE load_id = $1) ORDER BY seq";
const LLM_COST: &str = "SELECT coalesce(sum(llm_cost_usd), 0)::float8 FROM log_entries \
    WHERE load_id = $1 AND load_month = (SELECT load_month FROM load_months WHERE load_id = $1)";

/// What one load's checks found: its outcome.
fn outcome(
    req: &EncodedAppend,
    version: i64,
    dup_entry: Option<String>,
    dup_key: Option<String>,
) -> Result<u64, AppendError> {
    if version != req.expected_version {
        Err(AppendError::Conflict { expected: to_u64(req.expected_version), actual: to_u64(version) })
    } else if let Some(entry_id) = dup_entry {
        Err(AppendError::DuplicateEntry { entry_id })
    } else if let Some(key) = dup_key {
        Err(AppendError::DuplicateActionKey { key })
    } else {
        Ok(req.new_version())
    }
}

/// The log's parent table: every statement through it finds any load's rows.
const LOG_PARENT: &str = "log_entries";

/// The log's partition of `month`, as `load_agent_ensure_months` (migration 0004) names it.
fn log_partition(month: NaiveDate) -> String {
    format!("log_entries_p{:04}_{:02}", month.year(), month.month())
}

/// `sql` reading and writing the log through `table` (the parent or one month's partition).
fn in_log(sql: &str, table: &str) -> String {
    sql.replace("{log}", table)
}

/// Runs the appends of different loads as one statement ([`APPEND_LOADS`]) through `table`:
/// one outcome per request, in order, with the load's month (`None` for a new load without
/// entries). Through a partition (`month` is its month), a load of another month is not written
/// and its outcome means nothing: the caller runs it again through the parent. `Err` is a
/// failed statement (a lost race on a unique index, or worse).
async fn run_append_loads<'c, E>(
    executor: E,
    reqs: &[&EncodedAppend],
    table: &str,
    month: Option<NaiveDate>,
) -> Result<Vec<(Result<u64, AppendError>, Option<NaiveDate>)>, sqlx::Error>
where
    E: Executor<'c, Database = Postgres>,
{
    let (mut e_li, mut e_n, mut o_li) = (Vec::new(), Vec::new(), Vec::new());
    let (mut entries, mut rows) = (Vec::new(), Vec::new());
    let (mut s_li, mut sums) = (Vec::new(), Vec::new());
    for (i, req) in reqs.iter().enumerate() {
        let li = i as i64 + 1;
        for (n, entry) in req.entries.iter().enumerate() {
            e_li.push(li);
            e_n.push(n as i64 + 1);
            entries.push(entry);
        }
        for row in &req.outbox {
            o_li.push(li);
            rows.push(row);
        }
        if let Some(summary) = &req.summary {
            s_li.push(li);
            sums.push(summary);
        }
    }
    let sql = in_log(APPEND_LOADS, table);
    let result: Vec<PgRow> = sqlx::query(&sql)
        .bind(reqs.iter().map(|r| r.load_id.as_str()).collect::<Vec<_>>())
        .bind(reqs.iter().map(|r| r.expected_version).collect::<Vec<_>>())
        .bind(reqs.iter().map(|r| r.created_at).collect::<Vec<DateTime<Utc>>>())
        .bind(e_li)
        .bind(e_n)
        .bind(entries.iter().map(|x| x.entry_id.as_str()).collect::<Vec<_>>())
        .bind(entries.iter().map(|x| x.kind).collect::<Vec<_>>())
        .bind(entries.iter().map(|x| x.recorded_at).collect::<Vec<DateTime<Utc>>>())
        .bind(entries.iter().map(|x| x.llm_cost_usd).collect::<Vec<_>>())
        .bind(entries.iter().map(|x| x.schema_id).collect::<Vec<_>>())
        .bind(entries.iter().map(|x| x.body.as_slice()).collect::<Vec<_>>())
        .bind(o_li)
        .bind(rows.iter().map(|x| x.id.as_str()).collect::<Vec<_>>())
        .bind(rows.iter().map(|x| x.load_version).collect::<Vec<_>>())
        .bind(rows.iter().map(|x| x.destination).collect::<Vec<_>>())
        .bind(rows.iter().map(|x| x.action.as_str()).collect::<Vec<_>>())
        .bind(s_li)
        .bind(sums.iter().map(|x| x.client.as_deref()).collect::<Vec<_>>())
        .bind(sums.iter().map(|x| x.stage).collect::<Vec<_>>())
        .bind(sums.iter().map(|x| x.version).collect::<Vec<_>>())
        .bind(sums.iter().map(|x| x.open_asks).collect::<Vec<_>>())
        .bind(sums.iter().map(|x| x.escalated_asks).collect::<Vec<_>>())
        .bind(sums.iter().map(|x| x.escalated_since).collect::<Vec<Option<DateTime<Utc>>>>())
        .bind(sums.iter().map(|x| x.urgent_task_at).collect::<Vec<Option<DateTime<Utc>>>>())
        .bind(sums.iter().map(|x| x.updated_at).collect::<Vec<DateTime<Utc>>>())
        .bind(month)
        .fetch_all(executor)
        .await?;
    if result.len() != reqs.len() {
        return Err(sqlx::Error::Protocol(format!(
            "the batch append answered {} rows for {} loads",
            result.len(),
            reqs.len()
        )));
    }
    let mut outcomes = Vec::with_capacity(reqs.len());
    for (req, row) in reqs.iter().zip(result) {
        let version: i64 = row.try_get(1)?;
        outcomes.push((outcome(req, version, row.try_get(2)?, row.try_get(3)?), row.try_get(4)?));
    }
    Ok(outcomes)
}

/// How many times an append that lost a race on a unique index is re-run before its error is
/// mapped by constraint name. The re-run sees the winner's commit and reports it precisely.
const RACE_RERUNS: usize = 3;

/// What one append statement did.
enum Ran {
    /// A decided outcome (written, or refused with nothing written); the load's month from the
    /// directory, `None` for a load without a log before this statement.
    Decided(Result<u64, AppendError>, Option<NaiveDate>),
    /// Nothing was written: the load's log is in this month, not the one the statement named.
    ElsewhereMonth(NaiveDate),
}

/// The first day of the UTC month of `at`: a load's month when `at` is its first entry's time.
fn month_of(at: DateTime<Utc>) -> NaiveDate {
    at.date_naive().with_day(1).unwrap_or_else(|| at.date_naive())
}

/// Runs one append statement with its lookups in `month`, through `table` (the parent, or the
/// partition of `month`). `Err` is a failed statement (a lost race on a unique index, or worse).
async fn run_append(
    conn: &mut PgConnection,
    req: &EncodedAppend,
    month: NaiveDate,
    table: &str,
) -> Result<Ran, sqlx::Error> {
    if req.entries.is_empty() {
        let v: i64 = sqlx::query_scalar(VERSION).bind(&req.load_id).fetch_one(&mut *conn).await?;
        let outcome = if v == req.expected_version {
            Ok(to_u64(v))
        } else {
            Err(AppendError::Conflict { expected: to_u64(req.expected_version), actual: to_u64(v) })
        };
        return Ok(Ran::Decided(outcome, None));
    }
    let e = &req.entries;
    let o = &req.outbox;
    let sum = req.summary.as_ref();
    let sql = in_log(APPEND, table);
    let row: PgRow = sqlx::query(&sql)
        .bind(&req.load_id)
        .bind(req.expected_version)
        .bind(e.iter().map(|x| x.entry_id.as_str()).collect::<Vec<_>>())
        .bind(e.iter().map(|x| x.kind).collect::<Vec<_>>())
        .bind(e.iter().map(|x| x.recorded_at).collect::<Vec<DateTime<Utc>>>())
        .bind(e.iter().map(|x| x.llm_cost_usd).collect::<Vec<_>>())
        .bind(e.iter().map(|x| x.schema_id).collect::<Vec<_>>())
        .bind(e.iter().map(|x| x.body.as_slice()).collect::<Vec<_>>())
        .bind(o.iter().map(|x| x.id.as_str()).collect::<Vec<_>>())
        .bind(o.iter().map(|x| x.load_version).collect::<Vec<_>>())
        .bind(o.iter().map(|x| x.destination).collect::<Vec<_>>())
        .bind(o.iter().map(|x| x.action.as_str()).collect::<Vec<_>>())
        .bind(req.created_at)
        .bind(sum.and_then(|x| x.client.as_deref()))
        .bind(sum.map(|x| x.stage))
        .bind(sum.map(|x| x.version))
        .bind(sum.map(|x| x.open_asks))
        .bind(sum.map(|x| x.escalated_asks))
        .bind(sum.and_then(|x| x.escalated_since))
        .bind(sum.and_then(|x| x.urgent_task_at))
        .bind(sum.map(|x| x.updated_at))
        .bind(month)
        .fetch_one(&mut *conn)
        .await?;
    let dir: Option<NaiveDate> = row.try_get(3)?;
    let its: NaiveDate = row.try_get(4)?;
    if its != month {
        return Ok(Ran::ElsewhereMonth(its));
    }
    let version: i64 = row.try_get(0)?;
    Ok(Ran::Decided(outcome(req, version, row.try_get(1)?, row.try_get(2)?), dir))
}

/// Which unique index an append collided with. On a partitioned table the error names the
/// partition's index (`log_entries_p2026_12_load_id_entry_id_load_month_key`,
/// `outbox_p2026_12_03_pkey`), so the parent's name is matched by prefix and columns.
#[derive(Debug, PartialEq, Eq)]
enum UniqueHit {
    /// `(load_id, entry_id)`: the event is in the log already.
    EntryId,
    /// `outbox (id, ...)`: an idempotency key is taken.
    ActionKey,
    /// `(load_id, seq)` or `load_months_pkey`: another append won the version.
    Version,
}

impl UniqueHit {
    fn of(constraint: &str) -> Self {
        if constraint.starts_with("log_entries") && constraint.contains("entry_id") {
            UniqueHit::EntryId
        } else if constraint.starts_with("outbox") {
            UniqueHit::ActionKey
        } else {
            UniqueHit::Version
        }
    }
}

/// Maps a unique violation that survived the re-runs by constraint name.
async fn map_unique_violation<'c, E>(executor: E, req: &EncodedAppend, constraint: &str) -> AppendError
where
    E: Executor<'c, Database = Postgres>,
{
    match UniqueHit::of(constraint) {
        UniqueHit::EntryId => AppendError::DuplicateEntry {
            entry_id: req.entries.first().map(|e| e.entry_id.clone()).unwrap_or_default(),
        },
        UniqueHit::ActionKey => AppendError::DuplicateActionKey {
            key: req.outbox.first().map(|o| o.id.clone()).unwrap_or_default(),
        },
        UniqueHit::Version => {
            match sqlx::query_scalar::<_, i64>(VERSION).bind(&req.load_id).fetch_one(executor).await {
                Ok(v) => AppendError::Conflict { expected: to_u64(req.expected_version), actual: to_u64(v) },
                Err(e) => AppendError::Store(e.into()),
            }
        }
    }
}

impl PgStore {
    /// The month an append of `req` looks in first: the load's month as this store last saw
    /// it, else the month of its first entry (right for a new load; the statement corrects it
    /// for any other).
    fn month_hint(&self, req: &EncodedAppend) -> NaiveDate {
        self.months
            .get(&req.load_id)
            .unwrap_or_else(|| month_of(req.entries.first().map_or(req.created_at, |e| e.recorded_at)))
    }

    /// The partition of `month` when it is attached to the log, for statements that name it
    /// directly (`parts.rs`); `None` sends them through the parent.
    async fn log_table<'c, E>(&self, executor: E, month: NaiveDate) -> Result<Option<String>, sqlx::Error>
    where
        E: Executor<'c, Database = Postgres>,
    {
        self.parts.attached(executor, LOG_PARENT, log_partition(month)).await
    }

    /// Runs `req` on `conn` in the load's month: once when the store knows the month, twice
    /// when it guessed wrong (the first statement wrote nothing and named the month). The month
    /// seen is remembered for the load's next appends. `named`: the statement names the month's
    /// partition when it is attached (not inside a transaction, where a partition dropped
    /// meanwhile would fail the whole transaction rather than this one statement).
    async fn run_append_in_month(
        &self,
        conn: &mut PgConnection,
        req: &EncodedAppend,
        named: bool,
    ) -> Result<Result<u64, AppendError>, sqlx::Error> {
        let mut month = self.month_hint(req);
        for _ in 0..2 {
            let table = match named {
                true => self.log_table(&mut *conn, month).await?,
                false => None,
            };
            let ran = match table {
                Some(table) => match run_append(conn, req, month, &table).await {
                    Err(e) if undefined_table(&e) => {
                        self.parts.forget(&table);
                        run_append(conn, req, month, LOG_PARENT).await?
                    }
                    ran => ran?,
                },
                None => run_append(conn, req, month, LOG_PARENT).await?,
            };
            match ran {
                Ran::ElsewhereMonth(m) => {
                    self.months.insert(req.load_id.clone(), m);
                    month = m;
                }
                Ran::Decided(outcome, dir) => {
                    // A load's first append: its month is its first entry's.
                    let first =
                        req.entries.first().filter(|_| outcome.is_ok()).map(|e| month_of(e.recorded_at));
                    if let Some(m) = dir.or(first) {
                        self.months.insert(req.load_id.clone(), m);
                    }
                    return Ok(outcome);
                }
            }
        }
        Err(sqlx::Error::Protocol(format!("the log of load {} moved between two statements", req.load_id)))
    }

    async fn append_one(&self, req: &EncodedAppend) -> Result<u64, AppendError> {
        let mut constraint = String::new();
        let mut conn = self.pool.acquire().await.map_err(StoreError::from)?;
        for _ in 0..RACE_RERUNS {
            match self.run_append_in_month(&mut conn, req, true).await {
                Ok(outcome) => return outcome,
                Err(e) => match unique_violation(&e) {
                    Some(name) => constraint = name,
                    None => return Err(e.into()),
                },
            }
        }
        Err(map_unique_violation(&mut *conn, req, &constraint).await)
    }

    /// A batch of different loads (the group commit's batches): one statement, one round trip,
    /// one commit. When every load's month is one attached partition's, the statement names
    /// it ([`APPEND_LOADS`]); the loads it did not write (another month than the store
    /// expected) then go through the parent in a second statement.
    async fn append_distinct(&self, reqs: &[&EncodedAppend]) -> Vec<Result<u64, AppendError>> {
        let mut months = reqs.iter().map(|r| self.month_hint(r));
        let month = months.next().filter(|first| months.all(|m| m == *first));
        let table = match month {
            Some(month) => match self.log_table(&self.pool, month).await {
                Ok(table) => table.map(|t| (month, t)),
                Err(e) => return store_error_for_all(reqs.len(), &e),
            },
            None => None,
        };
        let Some((month, table)) = table else {
            return self.append_distinct_through_parent(reqs).await;
        };
        let ran = match run_append_loads(&self.pool, reqs, &table, Some(month)).await {
            Ok(ran) => ran,
            Err(e) if undefined_table(&e) => {
                self.parts.forget(&table);
                return self.append_distinct_through_parent(reqs).await;
            }
            Err(e) if unique_violation(&e).is_some() => return self.append_with_savepoints(reqs).await,
            Err(e) => return store_error_for_all(reqs.len(), &e),
        };
        let mut outcomes = Vec::with_capacity(reqs.len());
        let mut elsewhere = Vec::new();
        for (req, (outcome, its)) in reqs.iter().zip(ran) {
            if its == Some(month) {
                self.months.insert(req.load_id.clone(), month);
                outcomes.push(Some(outcome));
            } else {
                elsewhere.push(*req);
                outcomes.push(None);
            }
        }
        if !elsewhere.is_empty() {
            let mut rest = self.append_distinct_through_parent(&elsewhere).await.into_iter();
            for outcome in outcomes.iter_mut().filter(|o| o.is_none()) {
                *outcome = rest.next();
            }
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    Err(AppendError::Store(StoreError::Commit("the batch append lost an outcome".into())))
                })
            })
            .collect()
    }

    /// [`append_distinct`](Self::append_distinct) through the parent: each load in its own
    /// month. A lost race on a unique index (nothing was written) falls back to savepoints.
    async fn append_distinct_through_parent(&self, reqs: &[&EncodedAppend]) -> Vec<Result<u64, AppendError>> {
        match run_append_loads(&self.pool, reqs, LOG_PARENT, None).await {
            Ok(ran) => ran
                .into_iter()
                .zip(reqs)
                .map(|((outcome, its), req)| {
                    if let Some(m) = its.filter(|_| outcome.is_ok()) {
                        self.months.insert(req.load_id.clone(), m);
                    }
                    outcome
                })
                .collect(),
            Err(e) if unique_violation(&e).is_some() => self.append_with_savepoints(reqs).await,
            Err(e) => store_error_for_all(reqs.len(), &e),
        }
    }

    /// A batch in which a load may appear twice: the statements back to back in one
    /// transaction, each seeing the ones before. A lost race on a unique index (the transaction
    /// is rolled back) falls back to savepoints.
    async fn append_in_order(&self, reqs: &[&EncodedAppend]) -> Vec<Result<u64, AppendError>> {
        match self.append_batch_plain(reqs).await {
            Ok(Some(results)) => results,
            Ok(None) => self.append_with_savepoints(reqs).await,
            Err(e) => store_error_for_all(reqs.len(), &e),
        }
    }

    async fn append_with_savepoints(&self, reqs: &[&EncodedAppend]) -> Vec<Result<u64, AppendError>> {
        match self.append_batch_savepoints(reqs).await {
            Ok(results) => results,
            Err(e) => store_error_for_all(reqs.len(), &e),
        }
    }

    /// The statements back to back in one transaction. `None` when a statement lost a race on
    /// a unique index (the transaction is rolled back).
    async fn append_batch_plain(
        &self,
        reqs: &[&EncodedAppend],
    ) -> Result<Option<Vec<Result<u64, AppendError>>>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let mut results = Vec::with_capacity(reqs.len());
        for req in reqs {
            match self.run_append_in_month(&mut tx, req, false).await {
                Ok(outcome) => results.push(outcome),
                Err(e) if unique_violation(&e).is_some() => {
                    tx.rollback().await?;
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
        tx.commit().await?;
        Ok(Some(results))
    }

    /// The safe path of a batch: one savepoint per load, so a lost race undoes only that load.
    async fn append_batch_savepoints(
        &self,
        reqs: &[&EncodedAppend],
    ) -> Result<Vec<Result<u64, AppendError>>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let mut results = Vec::with_capacity(reqs.len());
        for req in reqs {
            let mut outcome = None;
            let mut constraint = String::new();
            for _ in 0..RACE_RERUNS {
                tx.execute("SAVEPOINT load_append").await?;
                match self.run_append_in_month(&mut tx, req, false).await {
                    Ok(o) => {
                        tx.execute("RELEASE SAVEPOINT load_append").await?;
                        outcome = Some(o);
                        break;
                    }
                    Err(e) => match unique_violation(&e) {
                        Some(name) => {
                            tx.execute("ROLLBACK TO SAVEPOINT load_append").await?;
                            tx.execute("RELEASE SAVEPOINT load_append").await?;
                            constraint = name;
                        }
                        None => return Err(e),
                    },
                }
            }
            let outcome = match outcome {
                Some(o) => o,
                None => Err(map_unique_violation(&mut *tx, req, &constraint).await),
            };
            results.push(outcome);
        }
        tx.commit().await?;
        Ok(results)
    }
}

/// The results of a batch in request order: a request refused before any statement keeps its
/// refusal; each other takes the next of `outcomes` (the valid requests' outcomes, in order).
fn in_request_order(
    requests: &[Result<EncodedAppend, AppendError>],
    mut outcomes: impl Iterator<Item = Result<u64, AppendError>>,
) -> Vec<Result<u64, AppendError>> {
    requests
        .iter()
        .map(|req| match req {
            Err(e) => Err(copy_refusal(e)),
            Ok(_) => outcomes.next().unwrap_or_else(|| {
                Err(AppendError::Store(StoreError::Commit("the batch append lost an outcome".into())))
            }),
        })
        .collect()
}

fn store_error_for_all(n: usize, e: &sqlx::Error) -> Vec<Result<u64, AppendError>> {
    (0..n).map(|_| Err(AppendError::Store(StoreError::Commit(e.to_string())))).collect()
}

#[async_trait]
impl EventStore for PgStore {
    async fn read(&self, load_id: &str) -> Result<(Vec<LogEntry>, u64), StoreError> {
        self.read_since(load_id, 0).await
    }

    async fn read_since(&self, load_id: &str, version: u64) -> Result<(Vec<LogEntry>, u64), StoreError> {
        let after = i64::try_from(version)
            .map_err(|_| StoreError::InvalidRequest(format!("version {version} exceeds i64")))?;
        let entries = || {
            let rows = sqlx::query_as::<_, (i64, i32, Vec<u8>)>(READ_SINCE)
                .bind(load_id)
                .bind(after)
                .fetch(&self.pool)
                .map_ok(|(seq, schema_id, body)| (seq, i64::from(schema_id), body));
            decode_log_stream(load_id, version, rows)
        };
        // Nothing new: the log's actual version (it may be behind a caller's cache).
        let log_version = || async {
            let v: i64 = sqlx::query_scalar(VERSION).bind(load_id).fetch_one(&self.pool).await?;
            Ok(to_u64(v))
        };
        suffix_and_version(version, entries, log_version).await
    }

    async fn read_entry(&self, load_id: &str, entry_id: &str) -> Result<Option<LogEntry>, StoreError> {
        let row = sqlx::query_as::<_, (i64, i32, Vec<u8>)>(READ_ENTRY)
            .bind(load_id)
            .bind(entry_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|(seq, schema_id, body)| decode_entry(load_id, seq, i64::from(schema_id), &body)).transpose()
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
        self.append_one(&req).await
    }

    async fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<u64, AppendError>> {
        let encoded: Vec<Result<EncodedAppend, AppendError>> = requests
            .iter()
            .map(|r| encode_append(&r.load_id, &r.entries, r.expected_version, &r.outbox, r.summary.as_ref()))
            .collect();
        let valid: Vec<&EncodedAppend> = encoded.iter().filter_map(|r| r.as_ref().ok()).collect();
        let mut loads = std::collections::HashSet::new();
        let distinct = valid.iter().all(|r| loads.insert(r.load_id.as_str()));
        let outcomes = match valid.as_slice() {
            [] => Vec::new(),
            // One load (a batch the group commit took alone): its append is one statement in
            // its own transaction, where a transaction around it would cost two more round
            // trips (`BEGIN`, `COMMIT`) with the transaction held open between them.
            [only] => vec![self.append_one(only).await],
            // Different loads (the group commit's batches): one statement.
            _ if distinct => self.append_distinct(&valid).await,
            // A load twice in the batch must see its earlier request: statements in order.
            _ => self.append_in_order(&valid).await,
        };
        in_request_order(&encoded, outcomes.into_iter())
    }

    async fn llm_cost(&self, load_id: &str) -> Result<f64, StoreError> {
        let cost: f64 = sqlx::query_scalar(LLM_COST).bind(load_id).fetch_one(&self.pool).await?;
        Ok(cost)
    }

    async fn load_ids(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        // The directory names every load with a log once.
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT load_id FROM load_months ORDER BY load_id LIMIT $1")
                .bind(limit_i64(limit))
                .fetch_all(&self.pool)
                .await?;
        Ok(ids)
    }

    async fn read_stored(&self, load_id: &str) -> Result<Vec<StoredEntry>, StoreError> {
        let rows = sqlx::query_as::<_, (i64, String, String, DateTime<Utc>, f64, i32, Vec<u8>)>(READ_STORED)
            .bind(load_id)
            .fetch_all(&self.pool)
            .await?;
        stored_rows(
            load_id,
            rows.into_iter().map(|(q, i, k, t, c, s, b)| (q, i, k, t, c, i64::from(s), b)).collect(),
        )
    }

    async fn load_ids_started_between(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar(
            // A load's month is its first entry's: only the partitions of [from, until] are read.
            "SELECT load_id FROM log_entries WHERE seq = 1 AND recorded_at >= $1 AND recorded_at < $2 \
             AND load_month >= date_trunc('month', $1 AT TIME ZONE 'UTC')::date \
             AND load_month <= ($2 AT TIME ZONE 'UTC')::date ORDER BY load_id LIMIT $3",
        )
        .bind(from)
        .bind(until)
        .bind(limit_i64(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::{APPEND, APPEND_LOADS, PgStore, UniqueHit, in_log, log_partition};
    use crate::{Lifecycle, PartitionPlan};

    /// Through a month's partition named directly, without statistics (a month just begun), the
    /// append's generic plans read the load's version as one backward step of the primary key,
    /// whatever its log's length; `max(seq)` was planned there as a read of every entry of the
    /// load (docs/performance.md, "Partitions named: the version's plan"). Needs Postgres
    /// (`DATABASE_URL`, as every Postgres test here).
    #[tokio::test]
    async fn the_version_is_one_step_of_the_key_through_a_partition_without_statistics() {
        let url = std::env::var("DATABASE_URL")
            .expect("DATABASE_URL is not set: run ./scripts/test.sh (it starts PostgreSQL and exports it)");
        let schema = format!("version_plan_{}", std::process::id());
        let store = PgStore::connect_in_schema(&url, &schema).await.expect("postgres");
        let april = NaiveDate::from_ymd_opt(2026, 4, 1).expect("a date");
        let noon = april.and_hms_opt(12, 0, 0).expect("a time").and_utc();
        store.ensure_partitions(noon, &PartitionPlan::default()).await.expect("partitions");
        let part = log_partition(april);
        sqlx::query("INSERT INTO load_months (load_id, load_month) VALUES ('L-42', '2026-04-01')")
            .execute(store.pool())
            .await
            .expect("directory row");
        // A long log: 3,000 entries of one load (through the parent: they land in April's partition).
        sqlx::query(
            "INSERT INTO log_entries (load_id, seq, entry_id, kind, recorded_at, schema_id, body, load_month) \
             SELECT 'L-42', g, 'e' || g, 'sms', '2026-04-02T00:00:00Z', 1, '\\x00', '2026-04-01' \
             FROM generate_series(1, 3000) AS g",
        )
        .execute(store.pool())
        .await
        .expect("the load's entries");
        // The store's own connection settings (generic plans, no JIT), on one session.
        let mut conn = store.pool().acquire().await.expect("a connection");
        for (name, sql, params) in [("append_one", APPEND, 22), ("append_loads", APPEND_LOADS, 26)] {
            let prepare = format!("PREPARE {name} AS {}", in_log(sql, &part));
            sqlx::query(&prepare).execute(&mut *conn).await.expect("prepare");
            let nulls = vec!["NULL"; params].join(", ");
            let explain = format!("EXPLAIN EXECUTE {name}({nulls})");
            let plan: Vec<String> =
                sqlx::query_scalar(&explain).fetch_all(&mut *conn).await.expect("explain");
            let plan = plan.join("\n");
            assert!(plan.contains(&format!("Backward using {part}_pkey")), "{name}'s version read:\n{plan}");
            assert!(!plan.contains("Aggregate"), "{name} aggregates the load's entries:\n{plan}");
        }
        drop(conn);
        store.drop_schema().await.expect("drop the test schema");
    }

    #[test]
    fn collisions_are_named_by_the_parents_index_through_any_partition() {
        for name in ["log_entries_p2026_12_load_id_entry_id_load_month_key", "log_entries_entry_id_key"] {
            assert_eq!(UniqueHit::of(name), UniqueHit::EntryId, "{name}");
        }
        for name in ["outbox_p2026_12_03_pkey", "outbox_default_pkey", "outbox_pkey"] {
            assert_eq!(UniqueHit::of(name), UniqueHit::ActionKey, "{name}");
        }
        for name in ["log_entries_p2026_12_pkey", "log_entries_default_pkey", "load_months_pkey", ""] {
            assert_eq!(UniqueHit::of(name), UniqueHit::Version, "{name}");
        }
    }
}
