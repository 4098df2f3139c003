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

use crate::corpus::{CorpusError, LabeledMessage, jsonl_files, read_corpus};
use crate::eval::{Misclassified, expected_calibration_error};
use crate::features::featurize;
use crate::intent::Intent;
use crate::model::{CONFIDENCE_THRESHOLD, TriageModel, WEIGHT_SCALE, abstain_reason, softmax};

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

/// Folds of the stratified cross-validation used when the corpus has fewer than
/// [`MIN_GROUPS`] source files (a toy corpus); otherwise each file is a fold.
const FOLDS: usize = 5;
/// Source files (writers) needed for leave-one-writer-out cross-validation.
const MIN_GROUPS: usize = 3;
/// Precision an intent's acting threshold must reach on the out-of-fold predictions.
pub const TARGET_PRECISION: f64 = 0.985;
/// Candidate acting thresholds, lowest first; the floor is [`CONFIDENCE_THRESHOLD`].
const THRESHOLD_CANDIDATES: [f64; 16] =
    [0.70, 0.72, 0.74, 0.76, 0.78, 0.80, 0.82, 0.84, 0.86, 0.88, 0.90, 0.92, 0.94, 0.96, 0.98, 0.99];
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

/// Out-of-fold figures of one source file (writer): scored by models that never saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupScore {
    /// The training file.
    pub source: String,
    /// Its messages.
    pub examples: usize,
    /// Top-1 accuracy.
    pub accuracy: f64,
    /// Share acted on under the policy.
    pub coverage: f64,
    /// Messages acted on with the wrong intent, as a share of all its messages.
    pub confident_wrong: f64,
}

/// What a training run produced, for the CLI to print.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainSummary {
    /// Training messages read.
    pub examples: usize,
    /// Source files (writers) they came from.
    pub sources: usize,
    /// How the out-of-fold predictions were made: `leave-one-source-out` or `stratified-5-fold`.
    pub cross_validation: &'static str,
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
    /// The acting threshold chosen for each intent.
    pub intent_thresholds: Vec<(Intent, f64)>,
    /// Out-of-fold share acted on under the chosen thresholds and the opt-out guard.
    pub oof_coverage: f64,
    /// Out-of-fold accuracy of the share acted on.
    pub oof_acted_accuracy: f64,
    /// Out-of-fold messages acted on with the wrong intent, as a share of all messages.
    pub oof_confident_wrong: f64,
    /// Out-of-fold messages labeled `opt_out` or `wrong_number` acted on as another intent.
    pub oof_opt_out_acted_as_other: usize,
    /// Out-of-fold predictions the policy would have acted on but the stop-request guard held
    /// back (`crate::guard`), and how many of those were wrong readings and opt-out-like messages.
    pub oof_stop_guard: StopGuardScore,
    /// Out-of-fold figures per source file.
    pub per_source: Vec<GroupScore>,
    /// Coverage and accuracy above each candidate single threshold.
    pub thresholds: Vec<ThresholdPoint>,
    /// Size of the weights file.
    pub weights_bytes: usize,
    /// The messages the out-of-fold models got wrong, in corpus order (for label review:
    /// `load-agent triage train --errors FILE`).
    #[serde(skip)]
    pub oof_errors: Vec<Misclassified>,
}

/// What the stop-request guard did to the out-of-fold predictions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StopGuardScore {
    /// Predictions acted on without the guard that it held back.
    pub held: usize,
    /// Of those, the wrong readings (confident-wrong readings it prevented).
    pub held_wrong: usize,
    /// Of those, the messages labeled `opt_out` or `wrong_number`.
    pub held_opt_out_like: usize,
}

impl TrainSummary {
    /// A human-readable summary.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "trained on {} messages from {} sources: {} features, {} bytes of weights",
            self.examples, self.sources, self.features, self.weights_bytes
        );
        let _ = writeln!(
            s,
            "out-of-fold ({}) accuracy {:.2} %, ECE {:.3} -> {:.3} after temperature {:.4}",
            self.cross_validation,
            self.oof_accuracy * 100.0,
            self.oof_ece_uncalibrated,
            self.oof_ece,
            self.temperature
        );
        let _ = writeln!(
            s,
            "policy (per-intent thresholds, opt-out guard): coverage {:.1} %, accuracy of the acted-on {:.2} %, confident-wrong {:.2} % of messages",
            self.oof_coverage * 100.0,
            self.oof_acted_accuracy * 100.0,
            self.oof_confident_wrong * 100.0
        );
        let _ = writeln!(
            s,
            "opt-out/wrong-number acted on as another intent: {}; the stop-request guard held back {} readings ({} wrong, {} opt-out/wrong-number)",
            self.oof_opt_out_acted_as_other,
            self.oof_stop_guard.held,
            self.oof_stop_guard.held_wrong,
            self.oof_stop_guard.held_opt_out_like
        );
        let _ = writeln!(s, "thresholds:");
        for (intent, t) in &self.intent_thresholds {
            let _ = writeln!(s, "  {:<22} {t:.2}", intent.as_str());
        }
        let _ = writeln!(s, "per source         messages  accuracy  coverage  confident-wrong");
        for g in &self.per_source {
            let _ = writeln!(
                s,
                "  {:<16} {:>8}  {:>6.1} %  {:>6.1} %  {:>6.2} %",
                g.source,
                g.examples,
                g.accuracy * 100.0,
                g.coverage * 100.0,
                g.confident_wrong * 100.0
            );
        }
        let _ = writeln!(s, "single threshold  coverage  accuracy");
        for p in &self.thresholds {
            let _ = writeln!(
                s,
                "{:>16.2}  {:>7.1} %  {:>7.1} %",
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
    /// The training folder has no `*.jsonl` file.
    #[error("{}: no training files (*.jsonl)", path.display())]
    NoTrainingFiles {
        /// The folder.
        path: PathBuf,
    },
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

/// The training files of a corpus folder: `corpus_dir/train/*.jsonl`, in name order. The frozen
/// test set (`corpus_dir/test/`) is never among them.
pub fn training_files(corpus_dir: &Path) -> Result<Vec<PathBuf>, TrainError> {
    let dir = corpus_dir.join(TRAIN_DIR);
    let files = jsonl_files(&dir)?;
    if files.is_empty() {
        return Err(TrainError::NoTrainingFiles { path: dir });
    }
    Ok(files)
}

/// The folder of a corpus holding the training files.
pub const TRAIN_DIR: &str = "train";

/// Every message of the training files of `corpus_dir`, file by file.
pub fn read_training_corpus(corpus_dir: &Path) -> Result<Vec<LabeledMessage>, TrainError> {
    let mut examples = Vec::new();
    for file in training_files(corpus_dir)? {
        examples.extend(read_corpus(&file)?);
    }
    Ok(examples)
}

/// What `load-agent triage train` runs: trains on `corpus_dir/train/*.jsonl` (never the test
/// set) and writes the weights file to `out`.
pub fn train_command(corpus_dir: &Path, out: &Path) -> Result<TrainSummary, TrainError> {
    let examples = read_training_corpus(corpus_dir)?;
    let (model, summary) = train_with_summary(&examples);
    std::fs::write(out, model.to_weights_string())
        .map_err(|source| TrainError::Write { path: out.to_path_buf(), source })?;
    Ok(summary)
}

/// Trains a model; deterministic.
pub fn train(examples: &[LabeledMessage]) -> TriageModel {
    train_with_summary(examples).0
}

/// The source of a message for cross-validation: its file name, `-` without one.
fn source_of(message: &LabeledMessage) -> String {
    message
        .origin
        .as_ref()
        .and_then(|o| o.file.file_name())
        .map_or_else(|| "-".to_owned(), |n| n.to_string_lossy().into_owned())
}

/// Trains a model and reports the calibration it measured on the way.
///
/// 1. Out-of-fold logits: each message scored by a model that never saw it. With at least
///    [`MIN_GROUPS`] source files, a fold is a whole file (leave-one-writer-out), so the
///    figures say how the model does on a writer it was not fitted on.
/// 2. The temperature minimizing their negative log-likelihood.
/// 3. Per intent, the lowest threshold at which the calibrated out-of-fold predictions of that
///    intent reach [`TARGET_PRECISION`] (floor [`CONFIDENCE_THRESHOLD`]).
/// 4. The model fitted on everything, with that temperature and those thresholds.
pub fn train_with_summary(examples: &[LabeledMessage]) -> (TriageModel, TrainSummary) {
    let data: Vec<Example> = examples.iter().map(Example::new).collect();
    let sources: Vec<String> = examples.iter().map(source_of).collect();
    let mut names: Vec<&String> = sources.iter().collect();
    names.sort();
    names.dedup();
    let by_source = names.len() >= MIN_GROUPS;
    let folds: Vec<usize> = if by_source {
        sources.iter().map(|s| names.binary_search(&s).unwrap_or(0)).collect()
    } else {
        stratified_folds(&data)
    };
    let fold_count = if by_source { names.len() } else { FOLDS };

    let mut oof: Vec<([f64; N], usize)> = vec![([0.0; N], 0); data.len()];
    let mut scored_oof = vec![false; data.len()];
    // The folds are independent fits: run them on every core. Each fit is deterministic and
    // the results are gathered in fold order, so the threads change nothing but the time.
    let fold_logits = parallel_map(fold_count, |fold| {
        let (held, rest): (Vec<usize>, Vec<usize>) = (0..data.len()).partition(|&i| folds[i] == fold);
        if held.is_empty() || rest.is_empty() {
            return Vec::new();
        }
        let model = fit(&data, &rest);
        held.into_iter().map(|i| (i, model.logits(&data[i].features))).collect::<Vec<_>>()
    });
    for (i, z) in fold_logits.into_iter().flatten() {
        oof[i] = (z, data[i].label);
        scored_oof[i] = true;
    }
    let kept: Vec<usize> = (0..data.len()).filter(|&i| scored_oof[i]).collect();
    let oof_kept: Vec<([f64; N], usize)> = kept.iter().map(|&i| oof[i]).collect();
    let temperature = fit_temperature(&oof_kept);
    let temperature_q = quantize(temperature).max(1);
    let temperature = f64::from(temperature_q) / WEIGHT_SCALE;

    let calibrated: Vec<([f64; N], usize)> =
        oof_kept.iter().map(|(z, l)| (softmax(z, temperature), *l)).collect();
    let thresholds = choose_thresholds(&calibrated);
    let threshold_of = |c: usize| f64::from(thresholds[c]) / WEIGHT_SCALE;

    let all: Vec<usize> = (0..data.len()).collect();
    let model = fit(&data, &all).quantized(temperature_q, thresholds);

    // (top probability, correct, acted on) of every out-of-fold prediction, and what the
    // stop-request guard changed.
    let mut stop_guard = StopGuardScore::default();
    let mut opt_out_acted_as_other = 0;
    let judged: Vec<(f64, bool, bool)> = kept
        .iter()
        .zip(&calibrated)
        .map(|(&i, (p, label))| {
            let (best, conf) = top(p);
            let intent = Intent::ALL[best];
            let dist: Vec<(Intent, f64)> = Intent::ALL.into_iter().zip(p.iter().copied()).collect();
            let threshold = threshold_of(best);
            let acted = abstain_reason(intent, conf, &dist, threshold, data[i].asks_to_stop).is_none();
            let acted_unguarded = abstain_reason(intent, conf, &dist, threshold, false).is_none();
            let correct = best == *label;
            let opt_out_like = Intent::ALL[*label].is_opt_out_like();
            if acted_unguarded && !acted {
                stop_guard.held += 1;
                stop_guard.held_wrong += usize::from(!correct);
                stop_guard.held_opt_out_like += usize::from(opt_out_like);
            }
            if acted && opt_out_like && !intent.is_opt_out_like() {
                opt_out_acted_as_other += 1;
            }
            (conf, correct, acted)
        })
        .collect();
    let points = judged;
    let uncalibrated: Vec<(f64, bool)> =
        oof_kept.iter().map(|(z, l)| (top(&softmax(z, 1.0)).1, top(z).0 == *l)).collect();
    let pairs: Vec<(f64, bool)> = points.iter().map(|&(p, ok, _)| (p, ok)).collect();
    let policy = |pts: &[(f64, bool, bool)]| {
        let acted = pts.iter().filter(|p| p.2).count();
        let acted_right = pts.iter().filter(|p| p.2 && p.1).count();
        (
            share(pts.iter().filter(|p| p.1).count(), pts.len()),
            share(acted, pts.len()),
            share(acted_right, acted),
            share(acted - acted_right, pts.len()),
        )
    };
    let (accuracy, coverage, acted_accuracy, confident_wrong) = policy(&points);
    let per_source = if by_source {
        names
            .iter()
            .enumerate()
            .map(|(g, name)| {
                let pts: Vec<(f64, bool, bool)> =
                    kept.iter().zip(&points).filter(|(i, _)| folds[**i] == g).map(|(_, p)| *p).collect();
                let (accuracy, coverage, _, confident_wrong) = policy(&pts);
                GroupScore {
                    source: (*name).clone(),
                    examples: pts.len(),
                    accuracy,
                    coverage,
                    confident_wrong,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let single = THRESHOLD_GRID
        .iter()
        .map(|&threshold| {
            let kept: Vec<&(f64, bool)> = pairs.iter().filter(|(p, _)| *p >= threshold).collect();
            ThresholdPoint {
                threshold,
                coverage: share(kept.len(), pairs.len()),
                accuracy: share(kept.iter().filter(|(_, ok)| *ok).count(), kept.len()),
            }
        })
        .collect();
    let oof_errors = kept
        .iter()
        .zip(&calibrated)
        .zip(&points)
        .filter(|(_, (_, ok, _))| !ok)
        .map(|((&i, (p, _)), &(probability, _, acted))| {
            let m = &examples[i];
            Misclassified {
                file: m.origin.as_ref().map(|o| o.file.display().to_string()),
                line: m.origin.as_ref().map(|o| o.line),
                text: m.text.clone(),
                expected: m.intent,
                predicted: Intent::ALL[top(p).0],
                probability,
                acted,
            }
        })
        .collect();
    let summary = TrainSummary {
        oof_errors,
        examples: examples.len(),
        sources: names.len(),
        cross_validation: if by_source { "leave-one-source-out" } else { "stratified-5-fold" },
        features: model.feature_count(),
        temperature,
        oof_accuracy: accuracy,
        oof_ece_uncalibrated: expected_calibration_error(&uncalibrated),
        oof_ece: expected_calibration_error(&pairs),
        intent_thresholds: Intent::ALL.into_iter().map(|i| (i, model.threshold(i))).collect(),
        oof_coverage: coverage,
        oof_acted_accuracy: acted_accuracy,
        oof_confident_wrong: confident_wrong,
        oof_opt_out_acted_as_other: opt_out_acted_as_other,
        oof_stop_guard: stop_guard,
        per_source,
        thresholds: single,
        weights_bytes: model.to_weights_string().len(),
    };
    (model, summary)
}

/// `f(0..n)` on up to [`std::thread::available_parallelism`] threads, results in index order.
fn parallel_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, n.max(1));
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let f = &f;
                scope.spawn(move || (t..n).step_by(threads).map(|i| (i, f(i))).collect::<Vec<_>>())
            })
            .collect();
        for handle in handles {
            // A panicking fit is a bug; surface it in the caller.
            for (i, v) in handle.join().unwrap_or_else(|e| std::panic::resume_unwind(e)) {
                out[i] = Some(v);
            }
        }
    });
    out.into_iter().flatten().collect()
}

/// Index and value of the largest probability; ties go to the lower class index.
fn top(p: &[f64; N]) -> (usize, f64) {
    p.iter()
        .copied()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (i, v)| if v > best.1 { (i, v) } else { best })
}

/// Per intent, the lowest candidate threshold at which the out-of-fold predictions of that
/// intent at or above it are right often enough: `(wrong + 0.5) / (kept + 1)` at most
/// `1 - TARGET_PRECISION` (the half-count keeps a handful of lucky predictions from passing).
/// An intent that never gets there takes the highest candidate.
fn choose_thresholds(calibrated: &[([f64; N], usize)]) -> [i32; N] {
    let mut out = [0i32; N];
    for (c, slot) in out.iter_mut().enumerate() {
        let predicted: Vec<(f64, bool)> = calibrated
            .iter()
            .filter_map(|(p, label)| {
                let (best, conf) = top(p);
                (best == c).then_some((conf, *label == c))
            })
            .collect();
        let chosen = THRESHOLD_CANDIDATES
            .iter()
            .copied()
            .find(|&t| {
                let kept: Vec<&(f64, bool)> = predicted.iter().filter(|(p, _)| *p >= t).collect();
                let wrong = kept.iter().filter(|(_, ok)| !ok).count();
                !kept.is_empty() && (wrong as f64 + 0.5) / (kept.len() as f64 + 1.0) <= 1.0 - TARGET_PRECISION
            })
            .unwrap_or(THRESHOLD_CANDIDATES[THRESHOLD_CANDIDATES.len() - 1]);
        *slot = quantize(chosen.max(CONFIDENCE_THRESHOLD));
    }
    out
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
    /// The message asks in so many words to stop ([`crate::guard`]).
    asks_to_stop: bool,
}

impl Example {
    fn new(message: &LabeledMessage) -> Self {
        let mut features = Vec::new();
        let analysis = featurize(&message.input(), &mut features);
        features.sort_by_key(|&(id, _)| id);
        let mut merged: Vec<(u32, f64)> = Vec::with_capacity(features.len());
        for (id, v) in features {
            match merged.last_mut() {
                Some(last) if last.0 == id => last.1 += v,
                _ => merged.push((id, v)),
            }
        }
        Example { features: merged, label: message.intent.index(), asks_to_stop: analysis.asks_to_stop }
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

    fn quantized(&self, temperature: i32, thresholds: [i32; N]) -> TriageModel {
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
        TriageModel::from_parts(keys, weights, bias, temperature, thresholds)
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
    // which keeps training fast.
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
