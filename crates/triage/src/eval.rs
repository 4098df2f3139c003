//! Evaluation of a model on labeled messages: accuracy, per-intent precision
//! and recall, expected calibration error and the misclassified lines.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use crate::corpus::{CorpusError, LabeledMessage, read_corpus};
use crate::intent::Intent;
use crate::lang::Lang;
use crate::model::{Abstain, OPT_OUT_GUARD, TriageModel};

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
    /// Whether the agent would have acted on the wrong intent (a confident wrong reading);
    /// otherwise the message would have gone to the planner.
    pub acted: bool,
}

/// Figures of the messages of one language.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LangStats {
    /// Messages in this language (the line's `lang`, else the detected one).
    pub messages: usize,
    /// Top-1 accuracy.
    pub accuracy: f64,
    /// Share acted on.
    pub coverage: f64,
    /// Accuracy of the share acted on.
    pub acted_accuracy: f64,
    /// Messages acted on with the wrong intent.
    pub confident_wrong: usize,
}

/// One row of the risk–coverage table: the messages whose top probability is at or above a
/// single threshold (the per-intent policy row has `threshold: null`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RiskPoint {
    /// The single threshold; `None` for the policy in force.
    pub threshold: Option<f64>,
    /// Share of messages kept.
    pub coverage: f64,
    /// Share of the kept messages that are wrong (1 - their accuracy).
    pub risk: f64,
    /// Kept messages that are wrong.
    pub confident_wrong: usize,
}

/// The acting policy the evaluation applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyReport {
    /// The acting threshold of each intent.
    pub thresholds: BTreeMap<Intent, f64>,
    /// Probability of `opt_out` + `wrong_number` at which another intent is not acted on.
    pub opt_out_guard: f64,
    /// Messages that ask in so many words to stop, or say they reached the wrong person, are
    /// never acted on as another intent (`crate::asks_to_stop`); always true in this build.
    pub stop_request_guard: bool,
}

/// How many messages were not acted on, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AbstainCounts {
    /// The top intent's probability was below its threshold.
    pub below_threshold: usize,
    /// Another intent was on top, but `opt_out` + `wrong_number` reached the opt-out guard.
    pub opt_out_risk: usize,
    /// Another intent was on top, but the message asks to stop the messages in so many words.
    pub asks_to_stop: usize,
}

/// The result of [`evaluate`]. Serializes to one JSON object: the keys of behavior.md §10
/// (`accuracy`, `ece`, `per_intent`, `errors`) and the acting policy's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// Messages evaluated.
    pub messages: usize,
    /// Share of messages classified as labeled (top-1, acted on or not).
    pub accuracy: f64,
    /// Expected calibration error: [`ECE_BINS`] equal-width bins over the top
    /// probability, weighted mean of |accuracy - mean confidence| per bin.
    pub ece: f64,
    /// The thresholds and the opt-out guard in force.
    pub policy: PolicyReport,
    /// Share of messages acted on (the rest go to the planner).
    pub coverage: f64,
    /// The messages not acted on, by reason.
    pub abstained: AbstainCounts,
    /// Accuracy of the messages acted on.
    pub acted_accuracy: f64,
    /// Messages acted on with the wrong intent.
    pub confident_wrong: usize,
    /// `confident_wrong` as a share of all messages.
    pub confident_wrong_rate: f64,
    /// `opt_out` and `wrong_number` messages acted on as another intent (the costly direction;
    /// one read as the other is counted in `confident_wrong` but not here).
    pub opt_out_acted_as_other: usize,
    /// Stats for every intent that was labeled or predicted at least once.
    pub per_intent: BTreeMap<Intent, IntentStats>,
    /// Figures per language.
    pub per_lang: BTreeMap<Lang, LangStats>,
    /// Coverage and risk at single thresholds, and under the policy in force (last row).
    pub risk_coverage: Vec<RiskPoint>,
    /// The misclassified messages, in input order.
    pub errors: Vec<Misclassified>,
}

/// Single thresholds of the risk–coverage table.
const RISK_GRID: [f64; 9] = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99];

/// Classifies every example and scores the predictions.
pub fn evaluate(model: &TriageModel, examples: &[LabeledMessage]) -> EvalReport {
    struct Judged {
        probability: f64,
        correct: bool,
        acted: bool,
        lang: Lang,
    }
    let mut judged = Vec::with_capacity(examples.len());
    let mut errors = Vec::new();
    let mut labeled = [0usize; Intent::ALL.len()];
    let mut predicted = [0usize; Intent::ALL.len()];
    let mut hits = [0usize; Intent::ALL.len()];
    let mut opt_out_acted_as_other = 0;
    let mut abstained = AbstainCounts::default();
    for example in examples {
        let triage = model.classify(&example.input());
        match triage.abstain {
            None => {}
            Some(Abstain::BelowThreshold { .. }) => abstained.below_threshold += 1,
            Some(Abstain::OptOutRisk { .. }) => abstained.opt_out_risk += 1,
            Some(Abstain::AsksToStop) => abstained.asks_to_stop += 1,
        }
        let correct = triage.intent == example.intent;
        judged.push(Judged {
            probability: triage.probability,
            correct,
            acted: triage.confident,
            lang: example.lang.unwrap_or(triage.lang),
        });
        labeled[example.intent.index()] += 1;
        predicted[triage.intent.index()] += 1;
        if correct {
            hits[example.intent.index()] += 1;
        } else {
            if triage.confident && example.intent.is_opt_out_like() && !triage.intent.is_opt_out_like() {
                opt_out_acted_as_other += 1;
            }
            errors.push(Misclassified {
                file: example.origin.as_ref().map(|o| o.file.display().to_string()),
                line: example.origin.as_ref().map(|o| o.line),
                text: example.text.clone(),
                expected: example.intent,
                predicted: triage.intent,
                probability: triage.probability,
                acted: triage.confident,
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
    let acted = judged.iter().filter(|j| j.acted).count();
    let acted_right = judged.iter().filter(|j| j.acted && j.correct).count();
    let per_lang = [Lang::En, Lang::Es]
        .into_iter()
        .filter_map(|lang| {
            let of: Vec<&Judged> = judged.iter().filter(|j| j.lang == lang).collect();
            let acted = of.iter().filter(|j| j.acted).count();
            let acted_right = of.iter().filter(|j| j.acted && j.correct).count();
            (!of.is_empty()).then(|| {
                let stats = LangStats {
                    messages: of.len(),
                    accuracy: ratio(of.iter().filter(|j| j.correct).count(), of.len()),
                    coverage: ratio(acted, of.len()),
                    acted_accuracy: ratio(acted_right, acted),
                    confident_wrong: acted - acted_right,
                };
                (lang, stats)
            })
        })
        .collect();
    let row = |threshold: Option<f64>, keep: &dyn Fn(&Judged) -> bool| {
        let kept = judged.iter().filter(|j| keep(j)).count();
        let wrong = judged.iter().filter(|j| keep(j) && !j.correct).count();
        RiskPoint {
            threshold,
            coverage: ratio(kept, judged.len()),
            risk: ratio(wrong, kept),
            confident_wrong: wrong,
        }
    };
    let mut risk_coverage: Vec<RiskPoint> =
        RISK_GRID.iter().map(|&t| row(Some(t), &|j: &Judged| j.probability >= t)).collect();
    risk_coverage.push(row(None, &|j: &Judged| j.acted));
    let pairs: Vec<(f64, bool)> = judged.iter().map(|j| (j.probability, j.correct)).collect();
    EvalReport {
        messages: examples.len(),
        accuracy: ratio(examples.len() - errors.len(), examples.len()),
        ece: expected_calibration_error(&pairs),
        policy: PolicyReport {
            thresholds: Intent::ALL.into_iter().map(|i| (i, model.threshold(i))).collect(),
            opt_out_guard: OPT_OUT_GUARD,
            stop_request_guard: true,
        },
        coverage: ratio(acted, examples.len()),
        abstained,
        acted_accuracy: ratio(acted_right, acted),
        confident_wrong: acted - acted_right,
        confident_wrong_rate: ratio(acted - acted_right, examples.len()),
        opt_out_acted_as_other,
        per_intent,
        per_lang,
        risk_coverage,
        errors,
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
    /// The human-readable report `load-agent triage eval` prints: the same figures as the JSON.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let correct = self.messages - self.errors.len().min(self.messages);
        let pct = |x: f64| x * 100.0;
        let _ = writeln!(s, "messages  {}", self.messages);
        let _ = writeln!(
            s,
            "accuracy  {:.2} % ({correct}/{}), top-1 whether acted on or not",
            pct(self.accuracy),
            self.messages
        );
        let _ =
            writeln!(s, "ECE       {:.4} ({ECE_BINS} equal-width bins over the top probability)", self.ece);
        let _ = writeln!(
            s,
            "\nacting policy: per-intent thresholds, opt-out guard {:.2}, stop-request guard {}",
            self.policy.opt_out_guard,
            if self.policy.stop_request_guard { "on" } else { "off" }
        );
        let _ = writeln!(s, "coverage         {:.1} % acted on, the rest to the planner", pct(self.coverage));
        let _ = writeln!(
            s,
            "not acted on     {} below threshold, {} opt-out risk, {} asking to stop",
            self.abstained.below_threshold, self.abstained.opt_out_risk, self.abstained.asks_to_stop
        );
        let _ = writeln!(s, "acted accuracy   {:.2} %", pct(self.acted_accuracy));
        let _ = writeln!(
            s,
            "confident-wrong  {} ({:.2} % of messages)",
            self.confident_wrong,
            pct(self.confident_wrong_rate)
        );
        let _ =
            writeln!(s, "opt-out/wrong-number acted on as another intent: {}", self.opt_out_acted_as_other);
        let _ = writeln!(
            s,
            "\n{:<22} {:>9} {:>9} {:>7} {:>8}",
            "intent", "threshold", "precision", "recall", "support"
        );
        for (intent, st) in &self.per_intent {
            let t = self.policy.thresholds.get(intent).copied().unwrap_or(f64::NAN);
            let _ = writeln!(
                s,
                "{:<22} {:>9.2} {:>9.3} {:>7.3} {:>8}",
                intent.as_str(),
                t,
                st.precision,
                st.recall,
                st.support
            );
        }
        let _ = writeln!(
            s,
            "\n{:<5} {:>8} {:>9} {:>9} {:>14} {:>15}",
            "lang", "messages", "accuracy", "coverage", "acted accuracy", "confident-wrong"
        );
        for (lang, st) in &self.per_lang {
            let _ = writeln!(
                s,
                "{:<5} {:>8} {:>7.2} % {:>7.1} % {:>12.2} % {:>15}",
                lang.as_str(),
                st.messages,
                pct(st.accuracy),
                pct(st.coverage),
                pct(st.acted_accuracy),
                st.confident_wrong
            );
        }
        let _ = writeln!(
            s,
            "\nrisk-coverage\n{:<10} {:>9} {:>8} {:>15}",
            "threshold", "coverage", "risk", "confident-wrong"
        );
        for p in &self.risk_coverage {
            let t = p.threshold.map_or_else(|| "policy".to_owned(), |t| format!("{t:.2}"));
            let _ = writeln!(
                s,
                "{t:<10} {:>7.1} % {:>6.2} % {:>15}",
                pct(p.coverage),
                pct(p.risk),
                p.confident_wrong
            );
        }
        let _ = writeln!(s, "\nmisclassified ({}, {} acted on):", self.errors.len(), self.confident_wrong);
        for e in &self.errors {
            let place = match (&e.file, e.line) {
                (Some(f), Some(l)) => format!("{f}:{l}"),
                _ => "-".to_owned(),
            };
            let _ = writeln!(
                s,
                "  {place}  expected {}, predicted {} ({:.2}{}): {:?}",
                e.expected,
                e.predicted,
                e.probability,
                if e.acted { ", ACTED ON" } else { "" },
                e.text
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
        assert_eq!(
            keys,
            [
                "abstained",
                "accuracy",
                "acted_accuracy",
                "confident_wrong",
                "confident_wrong_rate",
                "coverage",
                "ece",
                "errors",
                "messages",
                "opt_out_acted_as_other",
                "per_intent",
                "per_lang",
                "policy",
                "risk_coverage"
            ]
        );
        assert!(report.to_text().contains("accuracy"));
    }

    #[test]
    fn a_confident_wrong_reading_is_counted_apart_from_one_sent_to_the_planner() {
        let model = TriageModel::embedded();
        let with_ask = |text: &str, intent| LabeledMessage {
            open_ask: Some("eta_request".into()),
            lang: Some(Lang::En),
            ..LabeledMessage::new(text, intent)
        };
        // A clear ETA labeled as an opt-out on purpose: acted on, wrong, and the costly direction.
        let mislabeled = with_ask("eta 2:30", Intent::OptOut);
        assert!(model.classify(&mislabeled.input()).confident, "a plain ETA is acted on");
        let right = with_ask("ok 10-4", Intent::Ack);
        let report = evaluate(model, &[mislabeled, right.clone()]);
        let right_acted = model.classify(&right.input()).confident;
        assert_eq!(report.confident_wrong, 1);
        assert_eq!(report.opt_out_acted_as_other, 1);
        assert!((report.confident_wrong_rate - 0.5).abs() < 1e-12);
        assert_eq!(report.coverage, if right_acted { 1.0 } else { 0.5 });
        assert_eq!(report.acted_accuracy, if right_acted { 0.5 } else { 0.0 });
        assert!(report.errors[0].acted);
        assert_eq!(report.per_lang[&Lang::En].messages, 2);
        let policy_row = report.risk_coverage.last().expect("the policy row");
        assert_eq!((policy_row.threshold, policy_row.confident_wrong), (None, 1));
        assert_eq!(report.risk_coverage[0].threshold, Some(0.0));
        assert_eq!(report.risk_coverage[0].coverage, 1.0);
    }

    #[test]
    fn evaluating_nothing_does_not_divide_by_zero() {
        let report = evaluate(TriageModel::embedded(), &[]);
        assert_eq!(report.accuracy, 0.0);
        assert!(report.per_intent.is_empty());
    }
}
