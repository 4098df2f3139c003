//! Re-running training on the committed corpus reproduces the committed
//! weights byte for byte (`load-agent triage train` is deterministic).

use std::path::PathBuf;

use load_agent_triage::train_command;

#[test]
fn retraining_reproduces_the_committed_weights_byte_for_byte() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus_dir = crate_dir.join("../../evals/triage");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("weights.json");

    let summary = train_command(&corpus_dir, &out).expect("training on the committed corpus succeeds");

    let retrained = std::fs::read_to_string(&out).expect("train_command wrote the weights");
    let committed =
        std::fs::read_to_string(crate_dir.join("model/weights.json")).expect("weights are committed");
    assert_eq!(summary.weights_bytes, retrained.len());
    assert!(
        retrained == committed,
        "retrained weights differ from crates/triage/model/weights.json; \
         run `load-agent triage train` and commit the result"
    );
    assert!(committed.len() < 3_000_000, "weights file is {} bytes", committed.len());
}

#[test]
fn training_reads_only_the_training_split() {
    // A directory holding only a malformed held-out file still trains: train.jsonl is all it reads.
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(
        dir.path().join("train.jsonl"),
        "{\"text\":\"ok\",\"intent\":\"ack\"}\n{\"text\":\"eta 3\",\"intent\":\"eta_given\"}\n",
    )
    .expect("write train");
    std::fs::write(dir.path().join("heldout.jsonl"), "not json\n").expect("write held-out");
    let out = dir.path().join("w.json");
    let summary = train_command(dir.path(), &out).expect("held-out is never read");
    assert_eq!(summary.examples, 2);
}
