//! The archive's cost at the 10x plan's load size (docs/capacity.md, "Archiving"): 1,000 loads
//! of about 230 entries each, appended to Postgres, exported, verified against the store and
//! read back. Ignored by default (it takes a minute or two); run it with
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
//!   cargo test --release -p load-agent-archive --test measure -- --ignored --nocapture
//! ```
//!
//! The logs are the recorded sample traffic's (`evals/dumps/sample.jsonl`, replayed through the
//! agent once), each load's log repeated under fresh entry ids until it is about 230 entries
//! long, then copied under 1,000 load ids (`LOADS`, `ENTRIES_PER_LOAD` to change them).

use std::path::Path;
use std::time::Instant;

use chrono::{Datelike, TimeZone, Utc};
use load_agent_archive::{Archive, ArchiveLocation, ExportOptions, export};
use load_agent_domain::LogEntry;
use load_agent_store::{PgStore, open_store};
use load_agent_testkit::pg::database_url;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `template`'s log (of `template_id`) as load `load_id`'s, repeated `times` with entry ids
/// made unique per repetition.
fn copy_log(template_id: &str, template: &[LogEntry], load_id: &str, times: usize) -> Vec<LogEntry> {
    let json = serde_json::to_string(template).expect("entries serialize");
    let renamed: Vec<LogEntry> =
        serde_json::from_str(&json.replace(template_id, load_id)).expect("entries deserialize");
    let mut out = Vec::with_capacity(renamed.len() * times);
    for k in 0..times {
        for e in &renamed {
            let mut e = e.clone();
            if k > 0 {
                match &mut e {
                    LogEntry::Event(ev) => ev.event_id = format!("{}~{k}", ev.event_id),
                    LogEntry::Decision(d) => {
                        d.trigger_event_id = format!("{}~{k}", d.trigger_event_id);
                        d.decision_id = format!("dec:{}", d.trigger_event_id);
                    }
                }
            }
            out.push(e);
        }
    }
    out
}

/// The logs to copy: the sample traffic, replayed once through the agent (loads of 4 entries or
/// more), each with its load id.
async fn templates() -> Vec<(String, Vec<LogEntry>)> {
    let scratch = open_store("sqlite::memory:").await.expect("SQLite");
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/dumps/sample.jsonl");
    load_agent_ingest::replay_records(load_agent_ingest::read_dump(&dump).expect("dump"), scratch.clone())
        .await
        .expect("replay");
    let mut templates = Vec::new();
    for id in scratch.events.load_ids(usize::MAX).await.expect("ids") {
        let (entries, _) = scratch.events.read(&id).await.expect("read");
        if entries.len() >= 4 {
            templates.push((id, entries));
        }
    }
    templates
}

/// Appends `log` to `load_id` in appends of at most 1,000 entries.
async fn append_log(stores: &load_agent_store::Stores, load_id: &str, log: &[LogEntry]) {
    let mut version = 0;
    for chunk in log.chunks(1000) {
        version = stores.events.append(load_id, chunk, version, &[]).await.expect("append");
    }
}

/// Exports `ids` to a fresh directory and verifies the archive against the store, timing both:
/// the directory (kept until dropped), the manifest, the archive, export and verify times.
async fn export_and_verify(
    stores: &load_agent_store::Stores,
    ids: &[String],
    exported_at: chrono::DateTime<Utc>,
) -> (tempfile::TempDir, load_agent_archive::Manifest, Archive, std::time::Duration, std::time::Duration) {
    let dir = tempfile::tempdir().expect("a directory");
    let location = ArchiveLocation::parse(&dir.path().display().to_string(), false).expect("location");
    let options = ExportOptions::new("measure", exported_at);
    let started = Instant::now();
    let manifest = export(stores.events.as_ref(), ids, &location, &options).await.expect("export");
    let exported = started.elapsed();
    let started = Instant::now();
    let archive = Archive::open(location).await.expect("open");
    let report = archive.verify(Some(stores.events.as_ref())).await.expect("verify");
    let verified = started.elapsed();
    assert!(report.is_ok(), "{:?}", report.findings);
    (dir, manifest, archive, exported, verified)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: about a minute on Postgres (docs/capacity.md)"]
async fn archive_1000_realistic_loads_from_postgres() {
    let loads = env_usize("LOADS", 1000);
    let per_load = env_usize("ENTRIES_PER_LOAD", 230);

    let templates = templates().await;

    let url = database_url();
    let schema = format!("archive_measure_{}", uuid::Uuid::new_v4().simple());
    let store = PgStore::connect_in_schema(&url, &schema).await.expect("Postgres");
    let stores = store.clone().into_stores();

    let started = Instant::now();
    let mut ids = Vec::with_capacity(loads);
    let (mut entries_total, mut body_bytes) = (0usize, 0usize);
    for i in 0..loads {
        let (template_id, template) = &templates[i % templates.len()];
        let load_id = format!("M{i:06}");
        let times = per_load.div_ceil(template.len());
        let log = copy_log(template_id, template, &load_id, times);
        for e in &log {
            body_bytes += load_agent_avro::log_entry::encode_log_entry(e).1.len();
        }
        entries_total += log.len();
        append_log(&stores, &load_id, &log).await;
        ids.push(load_id);
    }
    let filled = started.elapsed();

    let exported_at = Utc.with_ymd_and_hms(2027, 4, 1, 0, 0, 0).single().expect("time");
    let (_dir, manifest, archive, exported, verified) = export_and_verify(&stores, &ids, exported_at).await;

    let started = Instant::now();
    let (entries, _) = archive.read_load(&ids[loads / 2]).await.expect("read");
    let read_one = started.elapsed();
    assert!(!entries.is_empty());

    println!(
        "archive measure: {loads} loads, {entries_total} entries ({:.0} per load), {body_bytes} bytes of Avro bodies \
         ({:.0} per entry); appended in {filled:.1?}",
        entries_total as f64 / loads as f64,
        body_bytes as f64 / entries_total as f64
    );
    println!(
        "archive measure: export {exported:.2?} ({:.0} entries/s), {} files, {} bytes ({:.1} % of the bodies, {:.0} bytes per \
         entry); verify against the store {verified:.2?}; read_load of one load {read_one:.2?}",
        entries_total as f64 / exported.as_secs_f64(),
        manifest.totals.files,
        manifest.totals.bytes,
        100.0 * manifest.totals.bytes as f64 / body_bytes as f64,
        manifest.totals.bytes as f64 / entries_total as f64,
    );
    drop(stores);
    store.drop_schema().await.expect("drop the schema");
}

/// Median and 99th percentile of `samples`, in microseconds.
fn pct(samples: &mut [std::time::Duration]) -> (u128, u128) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_micros();
    (at(0.5), at(0.99))
}

/// Issue 18, part 4 (docs/capacity.md, "Partitions at a million loads"): a 1,000-entry load
/// read among 1,000,000 loads (partition-pruned, against the same statement over every
/// partition and against the same load in an empty store), log bytes per entry before and after
/// the partitioning, and the time to archive, verify and drop one month. Ignored by default
/// (about ten minutes, 3 GB in Postgres); run it with
///
/// ```sh
/// DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
///   cargo test --release -p load-agent-archive --test measure -- --ignored --nocapture million
/// ```
///
/// The month to archive holds `LOADS` (1,000) realistic loads of about 230 entries and the
/// 1,000-entry load; the twelve months before it hold the rest of `MILLION` loads, five rows
/// each, written with SQL (`generate_series`) since only their number and size matter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: about ten minutes and 3 GB on Postgres (docs/capacity.md)"]
async fn a_month_among_a_million_loads() {
    use load_agent_store::PartitionPlan;
    let loads = env_usize("LOADS", 1000);
    let million = env_usize("MILLION", 1_000_000);
    let per_load = env_usize("ENTRIES_PER_LOAD", 230);

    let templates = templates().await;
    let first_at = templates[0].1[0].recorded_at();
    let month = first_at.date_naive().with_day(1).expect("a month's first day");

    let url = database_url();
    let schema = format!("million_measure_{}", uuid::Uuid::new_v4().simple());
    let store = PgStore::connect_in_schema(&url, &schema).await.expect("Postgres");
    let pool = store.pool().clone();
    let stores = store.clone().into_stores();
    for back in 0..=12u32 {
        let at = month.checked_sub_months(chrono::Months::new(back)).expect("a month")
            + chrono::TimeDelta::days(14);
        let now = at.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
        stores.lifecycle.ensure_partitions(now, &PartitionPlan::default()).await.expect("partitions");
    }

    // The month to archive: realistic loads, and one of 1,000 entries.
    let mut archived_ids = Vec::with_capacity(loads + 1);
    let mut entries_total = 0usize;
    for i in 0..=loads {
        let (template_id, template) = &templates[i % templates.len()];
        let (load_id, target) =
            if i == loads { ("BIG".to_owned(), 1000) } else { (format!("M{i:06}"), per_load) };
        let log = copy_log(template_id, template, &load_id, target.div_ceil(template.len()));
        let log = &log[..target.min(log.len())];
        entries_total += log.len();
        append_log(&stores, &load_id, log).await;
        archived_ids.push(load_id);
    }
    let big_len = stores.events.read("BIG").await.expect("read").1;

    let read_big = |n: usize| {
        let events = stores.events.clone();
        async move {
            let mut samples = Vec::with_capacity(n);
            for _ in 0..n {
                let started = Instant::now();
                let (entries, _) = events.read("BIG").await.expect("read");
                samples.push(started.elapsed());
                assert_eq!(entries.len() as u64, big_len);
            }
            pct(&mut samples)
        }
    };
    sqlx::query("VACUUM ANALYZE log_entries").execute(&pool).await.expect("vacuum");
    let empty = read_big(200).await;

    // The rest of the million, over the twelve months before.
    let started = Instant::now();
    let body: Vec<u8> = stores.events.read_stored("M000000").await.expect("stored")[0].body.clone();
    let filler = million.saturating_sub(loads + 1);
    sqlx::query(
        "INSERT INTO load_months (load_id, load_month)
         SELECT 'F' || lpad(i::text, 7, '0'), ($1::date - make_interval(months => 1 + i % 12))::date
         FROM generate_series(1, $2::int) AS i",
    )
    .bind(month)
    .bind(i32::try_from(filler).expect("filler fits i32"))
    .execute(&pool)
    .await
    .expect("filler directory");
    sqlx::query(
        "INSERT INTO log_entries (load_id, seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body, load_month)
         SELECT m.load_id, s, 'f' || s, 'sms', m.load_month + make_interval(hours => s), 0, 1, $1, m.load_month
         FROM load_months m CROSS JOIN generate_series(1, 5) AS s WHERE m.load_id LIKE 'F%'",
    )
    .bind(&body)
    .execute(&pool)
    .await
    .expect("filler log");
    sqlx::query("VACUUM ANALYZE").execute(&pool).await.expect("vacuum");
    let filled = started.elapsed();
    let full = read_big(200).await;

    // The read statement itself, pruned to one partition and over every partition.
    let timed = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            let mut samples = Vec::with_capacity(200);
            for _ in 0..200 {
                let started = Instant::now();
                let rows = sqlx::query(sql).bind("BIG").bind(0i64).fetch_all(&pool).await.expect(sql);
                samples.push(started.elapsed());
                assert_eq!(rows.len() as u64, big_len);
            }
            pct(&mut samples)
        }
    };
    let pruned = timed(
        "SELECT seq, schema_id, body FROM log_entries WHERE load_id = $1 AND seq > $2 \
         AND load_month = (SELECT load_month FROM load_months WHERE load_id = $1) ORDER BY seq",
    )
    .await;
    let unpruned =
        timed("SELECT seq, schema_id, body FROM log_entries WHERE load_id = $1 AND seq > $2 ORDER BY seq")
            .await;
    let rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM log_entries").fetch_one(&pool).await.expect("count");
    let partitions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = 'log_entries'::regclass")
            .fetch_one(&pool)
            .await
            .expect("partitions");

    // Bytes per entry of the month, partitioned (with its directory rows), and the same rows in
    // the unpartitioned table of migration 0003.
    let part = format!("log_entries{}", month.format("_p%Y_%m"));
    let after: i64 = sqlx::query_scalar(&format!(
        "SELECT pg_total_relation_size('{part}') + (SELECT pg_total_relation_size('load_months') \
         * count(*) FILTER (WHERE load_month = $1) / count(*) FROM load_months)"
    ))
    .bind(month)
    .fetch_one(&pool)
    .await
    .expect("size after");
    let month_rows: i64 =
        sqlx::query_scalar(&format!("SELECT count(*) FROM {part}")).fetch_one(&pool).await.expect("rows");
    let old_schema = format!("{schema}_0003");
    let old = load_agent_testkit::pg::schema_at_migration(&url, &old_schema, 3).await;
    sqlx::query(&format!(
        "INSERT INTO log_entries SELECT load_id, seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body \
         FROM \"{schema}\".{part}"
    ))
    .execute(&old)
    .await
    .expect("copy");
    sqlx::query("VACUUM ANALYZE log_entries").execute(&old).await.expect("vacuum");
    let before: i64 = sqlx::query_scalar("SELECT pg_total_relation_size('log_entries')")
        .fetch_one(&old)
        .await
        .expect("size before");
    old.close().await;

    // Archive, verify and drop the month.
    let (_dir, manifest, _archive, exported, verified) =
        export_and_verify(&stores, &archived_ids, Utc::now()).await;
    let held = manifest.load_versions();
    let started = Instant::now();
    let dropped = stores.lifecycle.drop_log_month(month, &held).await.expect("drop");
    let drop_time = started.elapsed();
    assert_eq!(dropped as usize, entries_total);

    println!(
        "million measure: {} loads, {rows} log rows in {partitions} partitions (filler written in {filled:.1?})",
        million
    );
    println!(
        "million measure: read of the {big_len}-entry load (EventStore::read, decode included): empty store p50 {} us \
         p99 {} us; among {million} loads p50 {} us p99 {} us",
        empty.0, empty.1, full.0, full.1
    );
    println!(
        "million measure: the read statement alone, pruned to one partition p50 {} us p99 {} us; over every partition \
         p50 {} us p99 {} us",
        pruned.0, pruned.1, unpruned.0, unpruned.1
    );
    println!(
        "million measure: the month's log, {month_rows} rows: partitioned {after} bytes ({:.0} per row, directory \
         included), unpartitioned (0003) {before} bytes ({:.0} per row)",
        after as f64 / month_rows as f64,
        before as f64 / month_rows as f64
    );
    println!(
        "million measure: archive of the month ({} loads, {entries_total} entries): export {exported:.2?}, verify \
         {verified:.2?}, drop {drop_time:.2?}",
        archived_ids.len()
    );
    drop(stores);
    sqlx::query(&format!("DROP SCHEMA \"{old_schema}\" CASCADE")).execute(&pool).await.expect("drop");
    store.drop_schema().await.expect("drop the schema");
}
