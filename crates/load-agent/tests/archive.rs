//! `load-agent archive export|verify`, `inspect --archive` and `replay --archive` as an operator
//! runs them, on a SQLite database filled by replaying the recorded sample traffic: the archive
//! reads back exactly as the live log (the same inspect text, the same state), a flipped byte
//! fails verify naming the file, and bad input exits 2 with a message naming what is wrong.

use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::text;

const BIN: &str = env!("CARGO_BIN_EXE_load-agent");

fn run(db: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("LOAD_AGENT_DATABASE_URL", format!("sqlite://{}", db.display()))
        .env_remove("LOAD_AGENT_CONFIG")
        .output()
        .expect("run load-agent")
}

fn stdout(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", text(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The state's sets (hash sets, serialized in a per-process order) sorted.
fn normalize(state: &mut serde_json::Value) {
    for set in ["committed_action_keys", "event_ids"] {
        if let Some(items) = state.get_mut(set).and_then(serde_json::Value::as_array_mut) {
            items.sort_by_key(ToString::to_string);
        }
    }
}

/// The sample traffic replayed into a SQLite file; returns its load ids and the month of the
/// first load's first entry.
async fn fill(db: &Path) -> (Vec<String>, String) {
    let stores = load_agent_store::open_store(&format!("sqlite://{}", db.display())).await.expect("open");
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/dumps/sample.jsonl");
    let records = load_agent_ingest::read_dump(&dump).expect("the sample dump");
    load_agent_ingest::replay_records(records, stores.clone()).await.expect("replay");
    let ids = stores.events.load_ids(usize::MAX).await.expect("ids");
    let (entries, _) = stores.events.read(&ids[0]).await.expect("read");
    (ids, entries[0].recorded_at().format("%Y-%m").to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_reads_back_through_inspect_and_replay_as_the_live_log() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("live.db");
    let (ids, month) = fill(&db).await;
    let archive = dir.path().join("archive");
    let archive_s = archive.display().to_string();

    let out = stdout(&run(
        &db,
        &["archive", "export", "--to", &archive_s, "--month", &month, "--loads-per-file", "2"],
    ));
    assert!(out.starts_with(&format!("exported {} load(s)", ids.len())), "{out}");
    assert!(archive.join("manifest.json").is_file());
    let out = stdout(&run(&db, &["archive", "verify", &archive_s]));
    assert!(out.starts_with("ok: ") && out.contains("checked against sqlite://"), "{out}");

    // An archive holds the log, not the outbox: compare with the live log once its outbox rows
    // are gone (the outbox keeps them days, an archive is written months later).
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display())).await.expect("connect");
    sqlx::query("DELETE FROM outbox").execute(&pool).await.expect("prune the outbox");
    pool.close().await;
    for id in &ids {
        assert_eq!(
            stdout(&run(&db, &["inspect", "--archive", &archive_s, id])),
            stdout(&run(&db, &["inspect", id])),
            "load {id}: the same inspect text"
        );
        let json = |args: &[&str]| -> serde_json::Value {
            let mut v: serde_json::Value = serde_json::from_str(&stdout(&run(&db, args))).expect("JSON");
            normalize(&mut v["state"]);
            v
        };
        let live = json(&["inspect", id, "--json"]);
        assert_eq!(
            json(&["inspect", "--archive", &archive_s, id, "--json"]),
            live,
            "load {id}: inspect --json"
        );
        let replayed = json(&["replay", "--archive", &archive_s, id]);
        assert_eq!(replayed["state"], live["state"], "load {id}: the state re-projected from the archive");
        assert_eq!(replayed["version"], live["version"]);
    }
    let out = run(&db, &["inspect", "--archive", &archive_s, "no-such-load"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no load \"no-such-load\" in the archive"), "{}", text(&out));

    // One byte flipped: verify fails and names the file; inspect refuses the file.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(archive.join("manifest.json")).expect("read")).expect("JSON");
    let victim = manifest["files"][0]["path"].as_str().expect("a path").to_owned();
    let victim_load = manifest["files"][0]["loads"][0]["load_id"].as_str().expect("a load").to_owned();
    let mut bytes = std::fs::read(archive.join(&victim)).expect("read");
    let at = bytes.len() - 20;
    bytes[at] ^= 0x40;
    std::fs::write(archive.join(&victim), &bytes).expect("write");
    let out = run(&db, &["archive", "verify", &archive_s, "--archive-only"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains(&victim) && text(&out).contains("SHA-256"), "{}", text(&out));
    let out = run(&db, &["inspect", "--archive", &archive_s, &victim_load]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains(&victim), "{}", text(&out));

    // Files without a manifest: an unfinished export, not an archive.
    std::fs::remove_file(archive.join("manifest.json")).expect("remove");
    let out = run(&db, &["archive", "verify", &archive_s]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("no manifest.json") && text(&out).contains("did not finish"),
        "{}",
        text(&out)
    );
}

#[test]
fn bad_input_exits_2_naming_what_is_wrong() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("empty.db");
    let to = dir.path().join("a").display().to_string();
    for (args, says) in [
        (vec!["inspect", "--archive", "/no/such/archive", "L1"], "archive location \"/no/such/archive\""),
        // Not an archive location in any build (object store URLs need the `cloud` feature).
        (vec!["inspect", "--archive", "ftp://bucket/x", "L1"], "scheme ftp:// is not"),
        (vec!["replay", "--archive", "/no/such/archive", "L1"], "not a readable directory"),
        (vec!["archive", "verify", "/no/such/archive"], "not a readable directory"),
        (vec!["archive", "export", "--to", &to, "--month", "2026-13"], "expected YYYY-MM"),
        (vec!["archive", "export", "--to", &to], "--month"),
        (vec!["archive", "export", "--to", &to, "--load", "L1"], "nothing to export"),
        (vec!["replay", "--archive", "x", "L1", "--golden", "g"], "cannot be used with"),
    ] {
        let out = run(&db, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    }
}
