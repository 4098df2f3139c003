//! `load-agent partitions ensure|list` as an operator runs them: on Postgres the partitions
//! ahead are made once and listed with their bounds; on SQLite there is nothing to do; a bad
//! argument exits 2 with usage.

use std::process::{Command, Output};

mod common;

use common::{schema_store, text};

const BIN: &str = env!("CARGO_BIN_EXE_load-agent");

fn run(url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("LOAD_AGENT_DATABASE_URL", url)
        .env_remove("LOAD_AGENT_CONFIG")
        .output()
        .expect("run load-agent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_makes_the_partitions_ahead_once_and_list_shows_them() {
    let (store, url) = schema_store("partitions_cli").await;

    let out = run(&url, &["partitions", "ensure", "--days-ahead", "30"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let made = String::from_utf8_lossy(&out.stdout).into_owned();
    let ahead = (chrono::Utc::now() + chrono::Duration::days(30)).format("outbox_p%Y_%m_%d").to_string();
    assert!(made.contains(&format!("made {ahead}")), "the 30th day ahead is made: {made}");

    let again = run(&url, &["partitions", "ensure", "--days-ahead", "30"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stdout).starts_with("0 partitions made"), "{}", text(&again));

    let list = run(&url, &["partitions", "list"]);
    assert_eq!(list.status.code(), Some(0), "{}", text(&list));
    let listed = String::from_utf8_lossy(&list.stdout).into_owned();
    let this_month = chrono::Utc::now().format("log_entries_p%Y_%m").to_string();
    for name in
        [this_month.as_str(), ahead.as_str(), "outbox_default", "timers_default", "log_entries_default"]
    {
        assert!(listed.contains(name), "{name} listed: {listed}");
    }
    store.drop_schema().await.expect("drop the schema");
}

#[test]
fn sqlite_has_nothing_to_do_and_a_bad_argument_exits_2() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("p.db").display());
    let out = run(&url, &["partitions", "ensure"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("not partitioned"), "{}", text(&out));
    let bad = run(&url, &["partitions", "ensure", "--days-ahead", "0"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("--days-ahead"), "{}", text(&bad));
}
