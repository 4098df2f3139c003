//! Evaluation of a model on labeled messages: accuracy, per-intent precision
//! and recall, expected calibration error and the misclassified lines.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use crate::corpus::{CorpusError, LabeledMessage, read_corpus};
use crate::intent::Intent;
use crate::model::TriageModel;

/// Number of equal-width confidence bins of the ECE.
pub const ECE_BINS: usize = 10;

/// Precision, recall and support of one intent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntentStats {
    /// Of the messages predicted as this intent, the share that are (0 when none predicted).
    pub precision: f64,
    /// Of the messages labeled with this intent, the share predicted as it (0 when none).
    pub recall: f64,
    /// Messages labeled with this intent.
    pub support: usize,
}

/// A message the model got wrong.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Misclassified {
    /// The corpus file, when the message came from one.
    pub file: Option<String>,
    /// The 1-based line, when the message came from a file.
    pub line: Option<usize>,
    /// The message.
    pub text: String,
    /// The labeled intent.
    pub expected: Intent,
    /// The model's intent.
    pub predicted: Intent,
    /// The model's probability for `predicted`.
    pub probability: f64,
}

/// The result of [`evaluate`]. Serializes to a JSON object with exactly the
/// keys `accuracy`, `ece`, `per_intent`, `errors`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// Share of messages classified as labeled.
    pub accuracy: f64,
    /// Expected calibration error: [`ECE_BINS`] equal-width bins over the top
    /// probability, weighted mean of |accuracy - mean confidence| per bin.
    pub ece: f64,
    /// Stats for every intent that was labeled or predicted at least once.
    pub per_intent: BTreeMap<Intent, IntentStats>,
    /// The misclassified messages, in input order.
    pub errors: Vec<Misclassified>,
    /// Messages evaluated.
    #[serde(skip)]
    pub examples: usize,
}

/// Classifies every example and scores the predictions.
pub fn evaluate(model: &TriageModel, examples: &[LabeledMessage]) -> EvalReport {
    let mut confidences = Vec::with_capacity(examples.len());
    let mut errors = Vec::new();
    let mut labeled = [0usize; Intent::ALL.len()];
    let mut predicted = [0usize; Intent::ALL.len()];
    let mut hits = [0usize; Intent::ALL.len()];
    for example in examples {
        let triage = model.classify(&example.input());
        let correct = triage.intent == example.intent;
        confidences.push((triage.probability, correct));
        labeled[example.intent.index()] += 1;
        predicted[triage.intent.index()] += 1;
        if correct {
            hits[example.intent.index()] += 1;
        } else {
            errors.push(Misclassified {
                file: example.origin.as_ref().map(|o| o.file.display().to_string()),
                line: example.origin.as_ref().map(|o| o.line),
                text: example.text.clone(),
                expected: example.intent,
                predicted: triage.intent,
                probability: triage.probability,
            });
        }
    }
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let per_intent = Intent::ALL
        .into_iter()
        .filter(|i| labeled[i.index()] + predicted[i.index()] > 0)
        .map(|i| {
            let k = i.index();
            let stats = IntentStats {
                precision: ratio(hits[k], predicted[k]),
                recall: ratio(hits[k], labeled[k]),
                support: labeled[k],
            };
            (i, stats)
        })
        .collect();
    EvalReport {
        accuracy: ratio(examples.len() - errors.len(), examples.len()),
        ece: expected_calibration_error(&confidences),
        per_intent,
        errors,
        examples: examples.len(),
    }
}

/// ECE over `(top probability, correct)` pairs with [`ECE_BINS`] equal-width
/// bins; a probability of exactly 1 falls in the last bin. 0 for no pairs.
pub(crate) fn expected_calibration_error(points: &[(f64, bool)]) -> f64 {
    if points.is_empty() {
        return 0.0;
    }
    let mut count = [0usize; ECE_BINS];
    let mut conf = [0f64; ECE_BINS];
    let mut right = [0usize; ECE_BINS];
    for &(p, ok) in points {
        // Clamped to [0, ECE_BINS - 1], so the cast is in range.
        let bin = ((p * ECE_BINS as f64).floor().max(0.0) as usize).min(ECE_BINS - 1);
        count[bin] += 1;
        conf[bin] += p;
        right[bin] += usize::from(ok);
    }
    let n = points.len() as f64;
    (0..ECE_BINS)
        .filter(|&b| count[b] > 0)
        .map(|b| {
            let c = count[b] as f64;
            (c / n) * (right[b] as f64 / c - conf[b] / c).abs()
        })
        .sum()
}

impl EvalReport {
    /// The human-readable report `load-agent triage eval` prints.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let correct = self.examples - self.errors.len().min(self.examples);
        let _ = writeln!(s, "messages  {}", self.examples);
        let _ = writeln!(s, "accuracy  {:.2} % ({correct}/{})", self.accuracy * 100.0, self.examples);
        let _ =
            writeln!(s, "ECE       {:.4} ({ECE_BINS} equal-width bins over the top probability)", self.ece);
        let _ = writeln!(s, "\n{:<22} {:>9} {:>7} {:>8}", "intent", "precision", "recall", "support");
        for (intent, st) in &self.per_intent {
            let _ = writeln!(
                s,
                "{:<22} {:>9.3} {:>7.3} {:>8}",
                intent.as_str(),
                st.precision,
                st.recall,
                st.support
            );
        }
        let _ = writeln!(s, "\nmisclassified ({}):", self.errors.len());
        for e in &self.errors {
            let place = match (&e.file, e.line) {
                (Some(f), Some(l)) => format!("{f}:{l}"),
                _ => "-".to_owned(),
            };
            let _ = writeln!(
                s,
                "  {place}  expected {}, predicted {} ({:.2}): {:?}",
                e.expected, e.predicted, e.probability, e.text
            );
        }
        s
    }
}

/// What `load-agent triage eval FILE... [--json]` runs: evaluates the embedded
/// model on every line of `files` and writes the text report, or one JSON
/// object with `json`. The CLI exits 0 whatever the accuracy and 2 on an error.
pub fn eval_command(files: &[PathBuf], json: bool, out: &mut dyn Write) -> Result<(), CorpusError> {
    let mut examples = Vec::new();
    for file in files {
        examples.extend(read_corpus(file)?);
    }
    let report = evaluate(TriageModel::embedded(), &examples);
    let text = if json {
        let mut j = serde_json::to_string_pretty(&report)
            .map_err(|e| CorpusError::Write(std::io::Error::other(e)))?;
        j.push('\n');
        j
    } else {
        report.to_text()
    };
    out.write_all(text.as_bytes()).map_err(CorpusError::Write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ece_of_perfectly_calibrated_bins_is_zero() {
        let mut pts = vec![(0.95, true); 19];
        pts.push((0.95, false));
        assert!(expected_calibration_error(&pts) < 1e-12);
        assert_eq!(expected_calibration_error(&[]), 0.0);
        // Overconfident: 1.0 claimed, half right.
        let pts = [(1.0, true), (1.0, false)];
        assert!((expected_calibration_error(&pts) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn report_json_has_exactly_the_documented_keys() {
        let msgs =
            vec![LabeledMessage::new("ok", Intent::Ack), LabeledMessage::new("eta 2:30", Intent::EtaGiven)];
        let report = evaluate(TriageModel::embedded(), &msgs);
        let value = serde_json::to_value(&report).expect("the report serializes");
        let mut keys: Vec<&str> =
            value.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
        keys.sort_unstable();
        assert_eq!(keys, ["accuracy", "ece", "errors", "per_intent"]);
        assert!(report.to_text().contains("accuracy"));
    }

    #[test]
    fn evaluating_nothing_does_not_divide_by_zero() {
        let report = evaluate(TriageModel::embedded(), &[]);
        assert_eq!(report.accuracy, 0.0);
        assert!(report.per_intent.is_empty());
    }
}
