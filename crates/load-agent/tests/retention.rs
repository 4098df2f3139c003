//! `load-agent retention run` on Postgres as an operator runs it: a dry run changes nothing; a
//! run killed between archiving a month and dropping it (crash point `retention.after_verify`)
//! has dropped nothing and left a verified archive; the next run drops the month, and the
//! archive then reads back what the store held. A run while another holds the retention lock
//! does nothing.

#![cfg(feature = "crash-points")]

use std::process::{Command, Output};

use chrono::{TimeZone, Utc};
use load_agent_domain::{EventKind, InboundEvent, LogEntry};
use load_agent_store::PartitionPlan;

mod common;

use common::{schema_store, text};

const BIN: &str = env!("CARGO_BIN_EXE_load-agent");

fn run(url: &str, archive_to: &str, args: &[&str], crash_at: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("LOAD_AGENT_DATABASE_URL", url)
        .env("LOAD_AGENT_LIFECYCLE_ARCHIVE_TO", archive_to)
        .env_remove("LOAD_AGENT_CONFIG")
        .env_remove("LOAD_AGENT_CRASH_AT");
    if let Some(point) = crash_at {
        cmd.env("LOAD_AGENT_CRASH_AT", point);
    }
    cmd.output().expect("run load-agent")
}

fn sms(load: &str, id: &str, day: u32) -> LogEntry {
    LogEntry::Event(InboundEvent {
        event_id: id.into(),
        load_id: load.into(),
        occurred_at: Utc.with_ymd_and_hms(2024, 1, day, 10, 0, 0).single().expect("a time"),
        kind: EventKind::Sms { from: "drv".into(), text: format!("{id}: running late") },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_is_dropped_only_after_its_archive_is_verified_even_across_a_crash() {
    let (store, url) = schema_store("retention_cli").await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let archive_to = dir.path().join("archive");
    let archive_to = archive_to.to_str().expect("a UTF-8 path");

    // January 2024, long past the 13 months the log is kept.
    let stores = store.clone().into_stores();
    stores
        .lifecycle
        .ensure_partitions(
            Utc.with_ymd_and_hms(2024, 1, 15, 0, 0, 0).single().expect("a time"),
            &PartitionPlan::default(),
        )
        .await
        .expect("partitions of January 2024");
    for (i, load) in ["R1", "R2", "R3"].iter().enumerate() {
        let day = 3 + u32::try_from(i).unwrap_or(0);
        stores.events.append(load, &[sms(load, "e1", day)], 0, &[]).await.expect("append");
        stores.events.append(load, &[sms(load, "e2", day + 1)], 1, &[]).await.expect("append");
    }
    let before = stores.events.read("R2").await.expect("read");

    let dry = run(&url, archive_to, &["retention", "run", "--dry-run"], None);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    assert!(text(&dry).contains("plan   log_entries_p2024_01: would archive it"), "{}", text(&dry));
    assert_eq!(stores.events.read("R2").await.expect("read").1, 2, "a dry run changes nothing");
    assert!(!std::path::Path::new(archive_to).join("2024-01").exists(), "a dry run writes no archive");

    // Another run holds the retention lock (a worker's job): this one does nothing, and says so.
    let held = stores.lifecycle.try_lock_retention().await.expect("try").expect("the lock is free");
    let excluded = run(&url, archive_to, &["retention", "run"], None);
    assert_eq!(excluded.status.code(), Some(0), "not a failure: {}", text(&excluded));
    assert!(
        text(&excluded).contains("kept   retention: another retention run holds the lock"),
        "{}",
        text(&excluded)
    );
    assert!(!std::path::Path::new(archive_to).join("2024-01").exists(), "an excluded run writes nothing");
    held.release().await;

    let crashed = run(&url, archive_to, &["retention", "run"], Some("retention.after_verify"));
    assert_ne!(crashed.status.code(), Some(0), "the crash point aborts the run: {}", text(&crashed));
    assert!(text(&crashed).contains("retention.after_verify"), "{}", text(&crashed));
    assert_eq!(
        stores.events.read("R2").await.expect("read"),
        before,
        "killed before the drop: nothing dropped"
    );
    let month = format!("{archive_to}/2024-01");
    let verify = run(&url, archive_to, &["archive", "verify", &month], None);
    assert_eq!(verify.status.code(), Some(0), "the archive was written and verifies: {}", text(&verify));

    let done = run(&url, archive_to, &["retention", "run"], None);
    eprintln!("{}", text(&done));
    assert_eq!(done.status.code(), Some(0), "{}", text(&done));
    assert!(
        text(&done).contains("done   log_entries_p2024_01: archived to")
            && text(&done).contains("dropped 6 log row(s) of 3 load(s)"),
        "{}",
        text(&done)
    );
    assert_eq!(stores.events.read("R2").await.expect("read").1, 0, "the month left the database");
    let replayed = run(&url, archive_to, &["replay", "--archive", &month, "R2"], None);
    assert_eq!(replayed.status.code(), Some(0), "{}", text(&replayed));
    assert!(String::from_utf8_lossy(&replayed.stdout).contains("\"version\": 2"), "{}", text(&replayed));
    let again = run(&url, archive_to, &["retention", "run"], None);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(!text(&again).contains("log_entries_p2024_01"), "already dropped: {}", text(&again));
    drop(stores);
    store.drop_schema().await.expect("drop the schema");
}
