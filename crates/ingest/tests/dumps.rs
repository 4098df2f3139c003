//! The recorded dumps of `evals/dumps/`: each is generated from its spec, and replays (through
//! the consumer's unit of work, on a fresh SQLite store, no broker) to its golden decisions.
//!
//! After a deliberate change of behavior, regenerate and review:
//! `cargo test -p load-agent-ingest --test dumps -- --ignored regenerate`, then read the diff of
//! `evals/dumps/*.golden.jsonl` against behavior.md.

use std::path::{Path, PathBuf};

use load_agent_ingest::{generate_dump, replay, write_dump};

fn dumps_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/dumps")
}

/// (spec, dump, golden) for every spec.
fn cases() -> Vec<(PathBuf, PathBuf, PathBuf)> {
    let dir = dumps_dir();
    let mut specs: Vec<PathBuf> = std::fs::read_dir(dir.join("specs"))
        .expect("evals/dumps/specs")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    specs.sort();
    assert!(specs.len() >= 2, "at least two recorded dumps");
    specs
        .into_iter()
        .map(|spec| {
            let stem = spec.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
            (spec, dir.join(format!("{stem}.jsonl")), dir.join(format!("{stem}.golden.jsonl")))
        })
        .collect()
}

fn generated(spec: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(spec).expect("spec");
    let records = generate_dump(&text).unwrap_or_else(|e| panic!("{}: {e}", spec.display()));
    let mut out = Vec::new();
    write_dump(&records, &mut out).expect("in memory");
    out
}

#[test]
fn each_dump_is_generated_from_its_spec() {
    for (spec, dump, _) in cases() {
        let on_disk = std::fs::read(&dump).unwrap_or_else(|e| panic!("{}: {e}", dump.display()));
        assert!(
            generated(&spec) == on_disk,
            "{} is not what {} generates: regenerate it (see this file's header)",
            dump.display(),
            spec.display()
        );
    }
}

#[tokio::test]
async fn each_dump_replays_to_its_golden() {
    for (_, dump, golden) in cases() {
        let mut out = Vec::new();
        let summary = replay(&dump, None, Some(&golden), None, &mut out)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", dump.display()));
        let printed = String::from_utf8_lossy(&out);
        assert_eq!(summary.exit_code(), 0, "{}:\n{printed}", dump.display());
        assert!(summary.differences.is_empty() && summary.gave_up.is_empty(), "{printed}");
    }
}

#[tokio::test]
#[ignore = "rewrites evals/dumps; run after a deliberate change and review the diff"]
async fn regenerate() {
    for (spec, dump, golden) in cases() {
        std::fs::write(&dump, generated(&spec)).expect("write the dump");
        let mut out = Vec::new();
        replay(&dump, Some(&golden), None, None, &mut out).await.expect("replay");
        print!("{}", String::from_utf8_lossy(&out));
    }
}
