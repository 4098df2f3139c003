//! Regression gate for the committed weights: held-out accuracy and
//! calibration, and the shape of the labeled corpus. Not a timing test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use load_agent_triage::{Intent, LabeledMessage, Lang, TriageModel, evaluate, read_corpus};

fn corpus(name: &str) -> Vec<LabeledMessage> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../evals/triage").join(name);
    read_corpus(&path).expect("the committed corpus is well formed")
}

#[test]
fn held_out_accuracy_and_calibration_meet_the_targets() {
    let heldout = corpus("heldout.jsonl");
    let report = evaluate(TriageModel::embedded(), &heldout);
    assert!(report.accuracy >= 0.95, "accuracy below 95 %:\n{}", report.to_text());
    assert!(report.ece <= 0.05, "ECE above 0.05:\n{}", report.to_text());
}

#[test]
fn corpus_is_large_split_and_covers_every_intent() {
    let train = corpus("train.jsonl");
    let heldout = corpus("heldout.jsonl");
    let total = train.len() + heldout.len();
    assert!(total >= 650, "{total} labeled lines");
    let share = heldout.len() as f64 / total as f64;
    assert!((0.18..=0.27).contains(&share), "held-out share {share:.3}");

    let mut per_intent: BTreeMap<Intent, usize> = BTreeMap::new();
    for m in train.iter().chain(&heldout) {
        *per_intent.entry(m.intent).or_default() += 1;
    }
    for intent in Intent::ALL {
        let n = per_intent.get(&intent).copied().unwrap_or(0);
        assert!(n >= 25, "{intent}: only {n} lines");
        assert!(heldout.iter().any(|m| m.intent == intent), "{intent} missing from held-out");
    }

    // The held-out split is a real test: no held-out text also appears in training.
    let key = |m: &LabeledMessage| m.text.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ");
    let train_texts: BTreeSet<String> = train.iter().map(key).collect();
    let leaked: Vec<&str> =
        heldout.iter().filter(|m| train_texts.contains(&key(m))).map(|m| m.text.as_str()).collect();
    assert!(leaked.is_empty(), "held-out lines also in train: {leaked:?}");
}

#[test]
fn detected_language_agrees_with_the_corpus_labels() {
    let model = TriageModel::embedded();
    let all: Vec<LabeledMessage> = corpus("train.jsonl").into_iter().chain(corpus("heldout.jsonl")).collect();
    let labeled: Vec<&LabeledMessage> = all.iter().filter(|m| m.lang.is_some()).collect();
    let agree = labeled
        .iter()
        .filter(|m| {
            // No hint: the text alone decides (ties fall back to English).
            let mut input = m.input();
            input.lang = None;
            Some(model.classify(&input).lang) == m.lang
        })
        .count();
    let share = agree as f64 / labeled.len() as f64;
    assert!(share >= 0.9, "language detection agrees on {share:.3}");
    // With the contact's language as a hint, messages without language words follow it.
    let spanish: Vec<&&LabeledMessage> = labeled.iter().filter(|m| m.lang == Some(Lang::Es)).collect();
    let with_hint = spanish.iter().filter(|m| model.classify(&m.input()).lang == Lang::Es).count();
    assert!(with_hint as f64 / spanish.len() as f64 >= 0.95);
}
