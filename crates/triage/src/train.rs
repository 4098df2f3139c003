//! Deterministic training: multinomial logistic regression fitted with
//! AdaGrad over a fixed, seeded example order, then temperature scaling fitted
//! on out-of-fold predictions.
//!
//! Same corpus in, same weights file out, byte for byte: every source of
//! randomness is a fixed-seed SplitMix64, maps are iterated in sorted order,
//! and weights are rounded to four decimals before they are stored or used.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::corpus::{CorpusError, LabeledMessage, read_corpus};
use crate::eval::expected_calibration_error;
use crate::features::featurize;
use crate::intent::Intent;
use crate::model::{TriageModel, WEIGHT_SCALE, softmax};

const N: usize = Intent::ALL.len();

/// Passes over the training data.
const EPOCHS: usize = 16;
/// AdaGrad base step.
const LEARNING_RATE: f64 = 0.2;
/// L2 penalty, applied to the weights of the features present in each step.
const L2: f64 = 2e-3;
/// A text feature must occur in at least this many training messages to get
/// a weight: a feature seen once only memorizes its message and bloats the file.
const MIN_DOC_FREQ: u32 = 2;
/// Folds of the cross-validation that produces the calibration data.
const FOLDS: usize = 5;
/// Seed of the example order.
const SEED: u64 = 0x0074_7269_6167_6501;
/// Probabilities at which the summary reports coverage and accuracy.
const THRESHOLD_GRID: [f64; 9] = [0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9];

/// One point of the confidence/coverage trade-off on out-of-fold predictions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdPoint {
    /// Minimum top probability.
    pub threshold: f64,
    /// Share of messages at or above it.
    pub coverage: f64,
    /// Accuracy on those messages.
    pub accuracy: f64,
}

/// What a training run produced, for the CLI to print.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainSummary {
    /// Training messages read.
    pub examples: usize,
    /// Features with weights in the model.
    pub features: usize,
    /// The calibration temperature.
    pub temperature: f64,
    /// Accuracy of the out-of-fold predictions (a cross-validated estimate).
    pub oof_accuracy: f64,
    /// ECE of the out-of-fold predictions before temperature scaling.
    pub oof_ece_uncalibrated: f64,
    /// ECE of the out-of-fold predictions after temperature scaling.
    pub oof_ece: f64,
    /// Coverage and accuracy above each candidate confidence threshold.
    pub thresholds: Vec<ThresholdPoint>,
    /// Size of the weights file.
    pub weights_bytes: usize,
}

impl TrainSummary {
    /// A human-readable summary.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "trained on {} messages: {} features, {} bytes of weights",
            self.examples, self.features, self.weights_bytes
        );
        let _ = writeln!(
            s,
            "out-of-fold ({FOLDS}-fold) accuracy {:.2} %, ECE {:.3} -> {:.3} after temperature {:.4}",
            self.oof_accuracy * 100.0,
            self.oof_ece_uncalibrated,
            self.oof_ece,
            self.temperature
        );
        let _ = writeln!(s, "threshold  coverage  accuracy");
        for p in &self.thresholds {
            let _ = writeln!(
                s,
                "{:>9.2}  {:>7.1} %  {:>7.1} %",
                p.threshold,
                p.coverage * 100.0,
                p.accuracy * 100.0
            );
        }
        s
    }
}

/// Training could not read its corpus or write the weights.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The corpus is unreadable or malformed.
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    /// The weights file could not be written.
    #[error("{}: cannot write the weights: {source}", path.display())]
    Write {
        /// The weights file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What `load-agent triage train` runs: trains on `corpus_dir/train.jsonl`
/// (never the held-out file) and writes the weights file to `out`.
pub fn train_command(corpus_dir: &Path, out: &Path) -> Result<TrainSummary, TrainError> {
    let examples = read_corpus(&corpus_dir.join("train.jsonl"))?;
    let (model, summary) = train_with_summary(&examples);
    std::fs::write(out, model.to_weights_string())
        .map_err(|source| TrainError::Write { path: out.to_path_buf(), source })?;
    Ok(summary)
}

/// Trains a model; deterministic.
pub fn train(examples: &[LabeledMessage]) -> TriageModel {
    train_with_summary(examples).0
}

/// Trains a model and reports the calibration it measured on the way.
pub fn train_with_summary(examples: &[LabeledMessage]) -> (TriageModel, TrainSummary) {
    let data: Vec<Example> = examples.iter().map(Example::new).collect();

    // Out-of-fold logits: each message scored by a model that never saw it.
    let folds = stratified_folds(&data);
    let mut oof: Vec<([f64; N], usize)> = Vec::with_capacity(data.len());
    for fold in 0..FOLDS {
        let (held, rest): (Vec<usize>, Vec<usize>) = (0..data.len()).partition(|&i| folds[i] == fold);
        if held.is_empty() || rest.is_empty() {
            continue;
        }
        let model = fit(&data, &rest);
        oof.extend(held.iter().map(|&i| (model.logits(&data[i].features), data[i].label)));
    }
    let temperature = fit_temperature(&oof);
    let temperature_q = quantize(temperature).max(1);
    let temperature = f64::from(temperature_q) / WEIGHT_SCALE;

    let all: Vec<usize> = (0..data.len()).collect();
    let model = fit(&data, &all).quantized(temperature_q);

    let scored = |t: f64| -> Vec<(f64, bool)> {
        oof.iter()
            .map(|(z, label)| {
                let p = softmax(z, t);
                let (best, &conf) = p
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
                    .unwrap_or((0, &0.0));
                (conf, best == *label)
            })
            .collect()
    };
    let calibrated = scored(temperature);
    let accuracy = share(calibrated.iter().filter(|(_, ok)| *ok).count(), calibrated.len());
    let thresholds = THRESHOLD_GRID
        .iter()
        .map(|&threshold| {
            let kept: Vec<&(f64, bool)> = calibrated.iter().filter(|(p, _)| *p >= threshold).collect();
            ThresholdPoint {
                threshold,
                coverage: share(kept.len(), calibrated.len()),
                accuracy: share(kept.iter().filter(|(_, ok)| *ok).count(), kept.len()),
            }
        })
        .collect();
    let summary = TrainSummary {
        examples: examples.len(),
        features: model.feature_count(),
        temperature,
        oof_accuracy: accuracy,
        oof_ece_uncalibrated: expected_calibration_error(&scored(1.0)),
        oof_ece: expected_calibration_error(&calibrated),
        thresholds,
        weights_bytes: model.to_weights_string().len(),
    };
    (model, summary)
}

fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

fn quantize(w: f64) -> i32 {
    // Clamped, so the cast cannot overflow.
    (w * WEIGHT_SCALE).round().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// A featurized training message: sorted, merged sparse features and a class.
struct Example {
    features: Vec<(u32, f64)>,
    label: usize,
}

impl Example {
    fn new(message: &LabeledMessage) -> Self {
        let mut features = Vec::new();
        featurize(&message.input(), &mut features);
        features.sort_by_key(|&(id, _)| id);
        let mut merged: Vec<(u32, f64)> = Vec::with_capacity(features.len());
        for (id, v) in features {
            match merged.last_mut() {
                Some(last) if last.0 == id => last.1 += v,
                _ => merged.push((id, v)),
            }
        }
        Example { features: merged, label: message.intent.index() }
    }
}

/// Assigns each example a fold, round-robin within its intent, so every fold
/// has every intent in proportion.
fn stratified_folds(data: &[Example]) -> Vec<usize> {
    let mut seen = [0usize; N];
    data.iter()
        .map(|e| {
            let fold = seen[e.label] % FOLDS;
            seen[e.label] += 1;
            fold
        })
        .collect()
}

/// SplitMix64: tiny, fixed, and good enough to shuffle a few hundred examples.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform-enough index below `n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        // n is a slice length, far below 2^32; the modulo bias is irrelevant here.
        (self.next_u64() % n as u64) as usize
    }
}

/// A model in training: float weights over the features kept for this fit.
struct Dense {
    keys: Vec<u32>,
    weights: Vec<[f64; N]>,
    bias: [f64; N],
}

impl Dense {
    fn logits(&self, features: &[(u32, f64)]) -> [f64; N] {
        let mut z = self.bias;
        for &(id, v) in features {
            if let Ok(row) = self.keys.binary_search(&id) {
                let w = &self.weights[row];
                for c in 0..N {
                    z[c] += v * w[c];
                }
            }
        }
        z
    }

    fn quantized(&self, temperature: i32) -> TriageModel {
        let mut keys = Vec::with_capacity(self.keys.len());
        let mut weights = Vec::with_capacity(self.weights.len());
        for (&key, row) in self.keys.iter().zip(&self.weights) {
            let q: Vec<i32> = row.iter().map(|&w| quantize(w)).collect();
            if q.iter().any(|&w| w != 0) {
                keys.push(key);
                weights.extend(q);
            }
        }
        let bias = self.bias.map(quantize);
        TriageModel::from_parts(keys, weights, bias, temperature)
    }
}

/// Fits weights on the examples `idx` of `data`.
fn fit(data: &[Example], idx: &[usize]) -> Dense {
    let mut doc_freq: HashMap<u32, u32> = HashMap::new();
    for &i in idx {
        for &(id, _) in &data[i].features {
            *doc_freq.entry(id).or_default() += 1;
        }
    }
    let mut keys: Vec<u32> =
        doc_freq.into_iter().filter(|&(_, n)| n >= MIN_DOC_FREQ).map(|(id, _)| id).collect();
    keys.sort_unstable();

    // Rows instead of ids, so the inner loop indexes directly.
    let rows: Vec<Vec<(usize, f64)>> = idx
        .iter()
        .map(|&i| {
            data[i]
                .features
                .iter()
                .filter_map(|&(id, v)| keys.binary_search(&id).ok().map(|r| (r, v)))
                .collect()
        })
        .collect();
    let labels: Vec<usize> = idx.iter().map(|&i| data[i].label).collect();

    // Rows of fixed-size arrays: one bounds check per feature, not per weight,
    // which keeps training fast enough to run in debug-mode tests.
    let mut weights = vec![[0f64; N]; keys.len()];
    let mut grad_sq = vec![[0f64; N]; keys.len()];
    let mut bias = [0f64; N];
    let mut bias_grad_sq = [0f64; N];
    let mut order: Vec<usize> = (0..rows.len()).collect();
    let mut rng = SplitMix64(SEED);
    const EPS: f64 = 1e-8;

    for _ in 0..EPOCHS {
        for i in (1..order.len()).rev() {
            let j = rng.below(i + 1);
            order.swap(i, j);
        }
        for &e in &order {
            let x = &rows[e];
            let mut z = bias;
            for &(r, v) in x {
                let w = &weights[r];
                for c in 0..N {
                    z[c] += v * w[c];
                }
            }
            let mut g = softmax(&z, 1.0);
            g[labels[e]] -= 1.0;
            for c in 0..N {
                bias_grad_sq[c] += g[c] * g[c];
                bias[c] -= LEARNING_RATE * g[c] / (bias_grad_sq[c] + EPS).sqrt();
            }
            for &(r, v) in x {
                let w = &mut weights[r];
                let gs = &mut grad_sq[r];
                for c in 0..N {
                    let grad = g[c] * v + L2 * w[c];
                    gs[c] += grad * grad;
                    w[c] -= LEARNING_RATE * grad / (gs[c] + EPS).sqrt();
                }
            }
        }
    }
    Dense { keys, weights, bias }
}

/// Mean negative log-likelihood of `logits / t`.
fn nll(oof: &[([f64; N], usize)], t: f64) -> f64 {
    let total: f64 = oof.iter().map(|(z, label)| -softmax(z, t)[*label].max(1e-300).ln()).sum();
    total / oof.len().max(1) as f64
}

/// The temperature minimizing the out-of-fold NLL: golden-section search over
/// ln t in [ln 0.05, ln 20] (the NLL is unimodal in t for a fixed model).
fn fit_temperature(oof: &[([f64; N], usize)]) -> f64 {
    if oof.is_empty() {
        return 1.0;
    }
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    let (mut lo, mut hi) = (0.05f64.ln(), 20f64.ln());
    let f = |x: f64| nll(oof, x.exp());
    let mut a = hi - phi * (hi - lo);
    let mut b = lo + phi * (hi - lo);
    let (mut fa, mut fb) = (f(a), f(b));
    for _ in 0..80 {
        if fa <= fb {
            hi = b;
            b = a;
            fb = fa;
            a = hi - phi * (hi - lo);
            fa = f(a);
        } else {
            lo = a;
            a = b;
            fa = fb;
            b = lo + phi * (hi - lo);
            fb = f(b);
        }
    }
    ((lo + hi) / 2.0).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> Vec<LabeledMessage> {
        let mut v = Vec::new();
        for t in ["ok", "10-4", "ok thanks", "copy that", "👍", "got it", "roger", "ok 👍"] {
            v.push(LabeledMessage::new(t, Intent::Ack));
        }
        for t in ["eta 2:30", "bout 45 min out", "eta 3pm", "1 hr out", "20 mins away", "eta 4:15"] {
            v.push(LabeledMessage::new(t, Intent::EtaGiven));
        }
        v
    }

    #[test]
    fn training_is_deterministic_and_learns_a_toy_problem() {
        let a = train(&toy());
        let b = train(&toy());
        assert_eq!(a.to_weights_string(), b.to_weights_string());
        let t = a.classify(&crate::TriageInput::new("eta 5:45"));
        assert_eq!(t.intent, Intent::EtaGiven);
        let t = a.classify(&crate::TriageInput::new("ok 10-4"));
        assert_eq!(t.intent, Intent::Ack);
    }

    #[test]
    fn training_on_nothing_gives_a_usable_model() {
        let model = train(&[]);
        let t = model.classify(&crate::TriageInput::new("anything"));
        let sum: f64 = t.distribution.iter().map(|(_, p)| p).sum();
        assert!((sum - 1.0).abs() < 1e-9);
    }

    #[test]
    fn temperature_fit_softens_overconfident_logits() {
        // Confident logits that are right only half the time need t > 1.
        let oof: Vec<([f64; N], usize)> = (0..40)
            .map(|i| {
                let mut z = [0.0; N];
                z[0] = 6.0;
                (z, if i % 2 == 0 { 0 } else { 1 })
            })
            .collect();
        assert!(fit_temperature(&oof) > 2.0);
    }
}
