//! Every shipped scenario (`evals/scenarios/`) passes on SQLite and on Postgres.
//!
//! Postgres is `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`); an
//! unreachable database fails the test, it is never skipped.

use std::path::PathBuf;

use load_agent_runtime::eval::run_eval;

fn scenario_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../evals/scenarios")
}

fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

async fn run_all(database_url: Option<&str>) {
    let report = tempfile::NamedTempFile::new().expect("temp report file");
    let mut out = Vec::new();
    let summary = run_eval(&[scenario_dir()], Some(report.path()), database_url, &mut out)
        .await
        .unwrap_or_else(|e| panic!("eval could not run: {e}\n{}", String::from_utf8_lossy(&out)));
    let printed = String::from_utf8_lossy(&out);
    println!("{printed}");
    assert!(summary.passed >= 30, "at least 30 scenarios ship, ran {}", summary.passed + summary.failed);
    assert_eq!(summary.failed, 0, "failing scenarios:\n{printed}");
    assert!(printed.trim_end().ends_with(&format!("{} passed, 0 failed", summary.passed)));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.path()).expect("report written"))
            .expect("report is JSON");
    assert_eq!(json["passed"], summary.passed);
    assert_eq!(json["failed"], 0);
    let first_step = &json["scenarios"][0]["steps"][0];
    for field in ["index", "at", "event_id", "passed", "failures", "decisions"] {
        assert!(first_step.get(field).is_some(), "report step lacks {field}: {first_step}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_scenario_passes_on_sqlite() {
    run_all(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_scenario_passes_on_postgres() {
    run_all(Some(&database_url())).await;
}
