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

use chrono::{TimeZone, Utc};
use load_agent_archive::{Archive, ArchiveLocation, ExportOptions, export};
use load_agent_domain::LogEntry;
use load_agent_store::{PgStore, open_store};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: about a minute on Postgres (docs/capacity.md)"]
async fn archive_1000_realistic_loads_from_postgres() {
    let loads = env_usize("LOADS", 1000);
    let per_load = env_usize("ENTRIES_PER_LOAD", 230);

    // The templates: the sample traffic, replayed once.
    let scratch = open_store("sqlite::memory:").await.expect("SQLite");
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/dumps/sample.jsonl");
    load_agent_kafka::replay_records(load_agent_kafka::read_dump(&dump).expect("dump"), scratch.clone())
        .await
        .expect("replay");
    let mut templates = Vec::new();
    for id in scratch.events.load_ids(usize::MAX).await.expect("ids") {
        let (entries, _) = scratch.events.read(&id).await.expect("read");
        if entries.len() >= 4 {
            templates.push((id, entries));
        }
    }

    let url =
        std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
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
        let mut version = 0;
        for chunk in log.chunks(1000) {
            version = stores.events.append(&load_id, chunk, version, &[]).await.expect("append");
        }
        ids.push(load_id);
    }
    let filled = started.elapsed();

    let dir = tempfile::tempdir().expect("a directory");
    let location = ArchiveLocation::parse(&dir.path().display().to_string(), false).expect("location");
    let options =
        ExportOptions::new("measure", Utc.with_ymd_and_hms(2027, 4, 1, 0, 0, 0).single().expect("time"));
    let started = Instant::now();
    let manifest = export(stores.events.as_ref(), &ids, &location, &options).await.expect("export");
    let exported = started.elapsed();

    let started = Instant::now();
    let archive = Archive::open(location).await.expect("open");
    let report = archive.verify(Some(stores.events.as_ref())).await.expect("verify");
    let verified = started.elapsed();
    assert!(report.is_ok(), "{:?}", report.findings);

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
