//! Re-running training on the committed corpus reproduces the committed
//! weights byte for byte (`load-agent triage train` is deterministic), and
//! training reads the training files only, never the frozen test set.

use std::path::PathBuf;

use load_agent_triage::{TrainError, train_command};

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
    // A sanity bound on what every build embeds (6.9 MB with 24 writers; docs/triage.md).
    assert!(committed.len() < 8_000_000, "weights file is {} bytes", committed.len());
    assert_eq!(summary.cross_validation, "leave-one-source-out");
}

#[test]
fn training_reads_only_the_training_files() {
    // A malformed frozen test file, and a malformed file that is not JSON Lines, do not matter:
    // train/*.jsonl is all training reads.
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir_all(dir.path().join("train")).expect("train dir");
    std::fs::create_dir_all(dir.path().join("test")).expect("test dir");
    std::fs::write(
        dir.path().join("train/a.jsonl"),
        "{\"text\":\"ok\",\"intent\":\"ack\"}\n{\"text\":\"eta 3\",\"intent\":\"eta_given\"}\n",
    )
    .expect("write train");
    std::fs::write(dir.path().join("train/notes.md"), "not json\n").expect("write notes");
    std::fs::write(dir.path().join("test/frozen.jsonl"), "not json\n").expect("write test");
    let out = dir.path().join("w.json");
    let summary = train_command(dir.path(), &out).expect("the test set is never read");
    assert_eq!(summary.examples, 2);

    // No training file at all is an error naming the folder.
    let empty = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir_all(empty.path().join("train")).expect("train dir");
    let err = train_command(empty.path(), &out).expect_err("nothing to train on");
    assert!(matches!(err, TrainError::NoTrainingFiles { .. }), "{err}");
    assert!(err.to_string().contains("train"), "{err}");
}
