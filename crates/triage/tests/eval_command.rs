//! `eval_command`, as `load-agent triage eval FILE... [--json]` runs it.

use std::path::PathBuf;

use load_agent_triage::{CorpusError, LineProblem, eval_command};

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write a corpus file");
    path
}

#[test]
fn text_report_lists_accuracy_per_intent_ece_and_errors() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let a = write(
        &dir,
        "a.jsonl",
        "{\"text\":\"eta 2:30\",\"intent\":\"eta_given\",\"open_ask\":\"eta_request\"}\n\
         {\"text\":\"10-4\",\"intent\":\"wrong_number\"}\n",
    );
    let b = write(&dir, "b.jsonl", "{\"text\":\"STOP\",\"intent\":\"opt_out\"}\n");
    let mut out = Vec::new();
    eval_command(&[a.clone(), b], false, &mut out).expect("well-formed files evaluate");
    let text = String::from_utf8(out).expect("the report is UTF-8");
    assert!(text.contains("accuracy"), "{text}");
    assert!(text.contains("ECE"), "{text}");
    assert!(text.contains("eta_given"), "{text}");
    for heading in ["coverage", "confident-wrong", "risk-coverage", "threshold", "lang"] {
        assert!(text.contains(heading), "{heading} missing:\n{text}");
    }
    // The deliberately mislabeled line is reported with its file and line.
    assert!(text.contains(&format!("{}:2", a.display())), "{text}");
}

#[test]
fn json_report_is_one_object_with_the_documented_keys() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let a = write(&dir, "a.jsonl", "{\"text\":\"ok\",\"intent\":\"ack\"}\n");
    let mut out = Vec::new();
    eval_command(&[a], true, &mut out).expect("a well-formed file evaluates");
    let value: serde_json::Value = serde_json::from_slice(&out).expect("--json prints JSON");
    // behavior.md §10's keys, and the acting policy's figures (docs/triage.md).
    for key in ["accuracy", "ece", "errors", "per_intent"] {
        assert!(value.get(key).is_some(), "{key} missing: {value}");
    }
    assert!(value["per_intent"]["ack"]["support"].as_u64() == Some(1), "{value}");
    assert!(value["policy"]["thresholds"]["opt_out"].as_f64().is_some(), "{value}");
    assert!(value["policy"]["opt_out_guard"].as_f64().is_some(), "{value}");
    for key in
        ["coverage", "acted_accuracy", "confident_wrong", "confident_wrong_rate", "opt_out_acted_as_other"]
    {
        assert!(value[key].is_number(), "{key} missing: {value}");
    }
    assert_eq!(value["per_lang"]["en"]["messages"].as_u64(), Some(1), "{value}");
    let table = value["risk_coverage"].as_array().expect("a risk-coverage table");
    assert!(table.len() >= 5, "{value}");
    assert!(table.last().is_some_and(|row| row["threshold"].is_null()), "the policy row comes last: {value}");
}

#[test]
fn a_malformed_file_is_an_error_naming_the_file_and_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let good = write(&dir, "good.jsonl", "{\"text\":\"ok\",\"intent\":\"ack\"}\n");
    let bad = write(
        &dir,
        "bad.jsonl",
        "{\"text\":\"ok\",\"intent\":\"ack\"}\n{\"text\":\"eta 3\",\"intent\":\"eta\"}\n",
    );
    let mut out = Vec::new();
    let err = eval_command(&[good, bad.clone()], false, &mut out).expect_err("unknown intent");
    match &err {
        CorpusError::Malformed { path, line, problem } => {
            assert_eq!(path, &bad);
            assert_eq!(*line, 2);
            assert_eq!(problem, &LineProblem::UnknownIntent("eta".to_owned()));
        }
        other => panic!("expected a malformed-line error, got {other:?}"),
    }
    assert_eq!(err.to_string(), format!("{}:2: unknown intent \"eta\"", bad.display()));
    assert!(out.is_empty(), "nothing is printed for a malformed corpus");

    let missing = dir.path().join("missing.jsonl");
    let err = eval_command(std::slice::from_ref(&missing), true, &mut out).expect_err("no such file");
    assert!(matches!(err, CorpusError::Read { ref path, .. } if path == &missing));
}
