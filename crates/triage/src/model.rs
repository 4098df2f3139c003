//! The triage model: a calibrated multinomial logistic regression over hashed
//! features, and `classify`, its only hot-path entry point.

use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::extract::{EtaValue, ExtractedValues, TempEvidence};
use crate::features::{Features, HASH_BITS, TriageInput, featurize};
use crate::intent::Intent;
use crate::lang::Lang;

/// The probability below which no intent is ever acted on, whatever its trained threshold;
/// also the threshold of every intent in a model trained on too little data to choose one.
/// The thresholds in force are per intent and come with the weights
/// ([`TriageModel::threshold`]); see `docs/triage.md`.
pub const CONFIDENCE_THRESHOLD: f64 = 0.70;

/// "Non-negligible" for the two intents whose mistake is costly in one direction (behavior.md
/// §6, docs/triage.md): when the model's probability that a message is an `opt_out` or a
/// `wrong_number` (the two together) reaches this, the message is never acted on as another
/// intent — no reply by SMS to someone who may have asked us to stop — and goes to the planner,
/// which may not message carriers.
pub const OPT_OUT_GUARD: f64 = 0.10;

/// Why triage says not to act on its top intent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Abstain {
    /// The top intent's probability is below that intent's threshold.
    BelowThreshold {
        /// The threshold of the top intent.
        threshold: f64,
    },
    /// Another intent is on top, but the message may be an opt-out or a wrong number.
    OptOutRisk {
        /// The probability of `opt_out` and `wrong_number` together.
        probability: f64,
    },
    /// Another intent is on top, but the message asks in so many words to stop the messages
    /// or says it reached the wrong person (`crate::guard`).
    AsksToStop,
}

impl fmt::Display for Abstain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Abstain::BelowThreshold { threshold } => write!(f, "below its threshold {threshold:.2}"),
            Abstain::OptOutRisk { probability } => {
                write!(f, "may be an opt-out or a wrong number (p = {probability:.2})")
            }
            Abstain::AsksToStop => write!(f, "asks to stop the messages or says it is the wrong person"),
        }
    }
}

/// Whether a classification may be acted on: `None` when it may, else why not. `distribution`
/// is every intent's probability (any order; may be empty when a provider gives only its top
/// intent, and then only the threshold applies); `asks_to_stop` is [`asks_to_stop`] of the
/// message.
pub fn abstain_reason(
    intent: Intent,
    probability: f64,
    distribution: &[(Intent, f64)],
    threshold: f64,
    asks_to_stop: bool,
) -> Option<Abstain> {
    if probability < threshold {
        return Some(Abstain::BelowThreshold { threshold });
    }
    if !intent.is_opt_out_like() {
        if asks_to_stop {
            return Some(Abstain::AsksToStop);
        }
        let risk: f64 = distribution.iter().filter(|(i, _)| i.is_opt_out_like()).map(|(_, p)| p).sum();
        if risk >= OPT_OUT_GUARD {
            return Some(Abstain::OptOutRisk { probability: risk });
        }
    }
    None
}

/// Whether a message asks in so many words to stop the messages, or says it reached the wrong
/// person (a short list of explicit phrases in English and Spanish, not negated, in the
/// message's new text: a reply's quoted thread and signature do not count). Such a message is
/// never acted on as another intent, whatever the model's probabilities.
pub fn asks_to_stop(text: &str) -> bool {
    let (body, _) = crate::body::split(text);
    let norm = crate::text::normalize(&body);
    crate::guard::asks_to_stop(&crate::cues::Words::of(&crate::text::lex(&norm)))
}

/// The open-ask type under which a bare number is a reefer reading.
pub const REEFER_TEMP_ASK: &str = "reefer_temp";

/// The open-ask type under which a bare number is an ETA.
pub const ETA_REQUEST_ASK: &str = "eta_request";

/// Number of classes, `Intent::ALL.len()`.
const N: usize = Intent::ALL.len();

/// Weights are stored as integers: the float weight times this scale, rounded.
/// Four decimals keep the file byte-stable across retrains and small.
pub(crate) const WEIGHT_SCALE: f64 = 10_000.0;

const FORMAT: &str = "load-agent-triage-weights/2";

/// The weights committed in the repository (`crates/triage/model/weights.json`).
const EMBEDDED_WEIGHTS: &str = include_str!("../model/weights.json");

/// What triage decided about one message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Triage {
    /// The most probable intent.
    pub intent: Intent,
    /// Its calibrated probability.
    pub probability: f64,
    /// Every intent with its probability, most probable first; sums to 1.
    pub distribution: Vec<(Intent, f64)>,
    /// The caller may act on `intent` ([`Triage::abstain`] is `None`); otherwise the message
    /// goes to the planner path.
    pub confident: bool,
    /// The threshold in force for `intent`.
    pub threshold: f64,
    /// Why not to act on `intent`, when `confident` is false.
    pub abstain: Option<Abstain>,
    /// ETA, temperature and stop found in the message.
    pub values: ExtractedValues,
    /// The message's language, the language hint when the text does not tell.
    pub lang: Lang,
}

/// Open-addressing map from feature id to weight row, built at load time:
/// a lookup is one or two probes, against ~14 for a binary search, and
/// lookups are most of `classify`'s time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RowIndex {
    /// `(feature id, row)`; [`RowIndex::EMPTY`] marks a free slot.
    slots: Vec<(u32, u32)>,
    mask: usize,
}

impl RowIndex {
    /// Feature ids are below 2^HASH_BITS, so this is never a key.
    const EMPTY: u32 = u32::MAX;

    fn new(keys: &[u32]) -> Self {
        // At most half full, so probe sequences stay short.
        let capacity = (keys.len() * 2).next_power_of_two().max(16);
        let mask = capacity - 1;
        let mut slots = vec![(Self::EMPTY, 0); capacity];
        for (row, &key) in keys.iter().enumerate() {
            // Ids are hash outputs, already uniformly mixed.
            let mut i = key as usize & mask;
            while slots[i].0 != Self::EMPTY {
                i = (i + 1) & mask;
            }
            // A weights file has far fewer than 2^32 rows.
            slots[i] = (key, row as u32);
        }
        RowIndex { slots, mask }
    }

    fn row(&self, id: u32) -> Option<usize> {
        let mut i = id as usize & self.mask;
        loop {
            let (key, row) = self.slots[i];
            if key == id {
                return Some(row as usize);
            }
            if key == Self::EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// A trained triage model. Cheap to share; `classify` takes `&self`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriageModel {
    /// Feature ids with a weight row, strictly increasing.
    keys: Vec<u32>,
    /// `keys` indexed for lookup.
    index: RowIndex,
    /// `keys.len()` rows of `N` weights, scaled by [`WEIGHT_SCALE`].
    weights: Vec<i32>,
    bias: [i32; N],
    /// Calibration temperature, scaled by [`WEIGHT_SCALE`].
    temperature: i32,
    /// The acting threshold of each intent, in class order, scaled by [`WEIGHT_SCALE`].
    thresholds: [i32; N],
}

/// The weights text is not a valid triage model.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// Not JSON of the expected shape.
    #[error("weights are not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON of the right shape with values this build cannot use.
    #[error("weights are invalid: {0}")]
    Invalid(String),
}

/// The on-disk layout, used for reading; writing is hand-formatted so the
/// file has one feature per line and diffs stay readable.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightsFile {
    format: String,
    hash_bits: u32,
    weight_scale: i64,
    temperature: i64,
    intents: Vec<String>,
    thresholds: Vec<i64>,
    bias: Vec<i64>,
    features: Vec<Vec<i64>>,
}

fn to_i32(v: i64, what: &str) -> Result<i32, WeightsError> {
    i32::try_from(v).map_err(|_| WeightsError::Invalid(format!("{what} {v} is out of range")))
}

impl TriageModel {
    /// The model committed with this crate, parsed once and cached.
    pub fn embedded() -> &'static TriageModel {
        static MODEL: OnceLock<TriageModel> = OnceLock::new();
        MODEL.get_or_init(|| {
            TriageModel::from_weights_str(EMBEDDED_WEIGHTS)
                .expect("the committed weights file is valid (guarded by the crate's tests)")
        })
    }

    /// Builds a model from quantized parts (training's output).
    pub(crate) fn from_parts(
        keys: Vec<u32>,
        weights: Vec<i32>,
        bias: [i32; N],
        temperature: i32,
        thresholds: [i32; N],
    ) -> Self {
        debug_assert_eq!(keys.len() * N, weights.len());
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        TriageModel {
            index: RowIndex::new(&keys),
            keys,
            weights,
            bias,
            temperature: temperature.max(1),
            thresholds,
        }
    }

    /// Parses a weights file written by [`TriageModel::to_weights_string`].
    pub fn from_weights_str(text: &str) -> Result<Self, WeightsError> {
        let file: WeightsFile = serde_json::from_str(text)?;
        if file.format != FORMAT {
            return Err(WeightsError::Invalid(format!("format {:?}, expected {FORMAT:?}", file.format)));
        }
        if file.hash_bits != HASH_BITS || file.weight_scale != WEIGHT_SCALE as i64 {
            return Err(WeightsError::Invalid(format!(
                "hash_bits {} / weight_scale {}, this build uses {HASH_BITS} / {WEIGHT_SCALE}",
                file.hash_bits, file.weight_scale
            )));
        }
        let expected: Vec<&str> = Intent::ALL.iter().map(|i| i.as_str()).collect();
        if file.intents != expected {
            return Err(WeightsError::Invalid(format!("intents {:?}, expected {expected:?}", file.intents)));
        }
        if file.bias.len() != N {
            return Err(WeightsError::Invalid(format!("{} biases, expected {N}", file.bias.len())));
        }
        let mut bias = [0i32; N];
        for (b, &v) in bias.iter_mut().zip(&file.bias) {
            *b = to_i32(v, "bias")?;
        }
        if file.thresholds.len() != N {
            return Err(WeightsError::Invalid(format!("{} thresholds, expected {N}", file.thresholds.len())));
        }
        let mut thresholds = [0i32; N];
        for (t, &v) in thresholds.iter_mut().zip(&file.thresholds) {
            if !(0..=WEIGHT_SCALE as i64).contains(&v) {
                return Err(WeightsError::Invalid(format!("threshold {v} is outside [0, {WEIGHT_SCALE}]")));
            }
            *t = to_i32(v, "threshold")?;
        }
        let temperature = to_i32(file.temperature, "temperature")?;
        if temperature <= 0 {
            return Err(WeightsError::Invalid(format!("temperature {temperature} is not positive")));
        }
        let mut keys = Vec::with_capacity(file.features.len());
        let mut weights = Vec::with_capacity(file.features.len() * N);
        for row in &file.features {
            let [key, ws @ ..] = row.as_slice() else {
                return Err(WeightsError::Invalid("empty feature row".to_owned()));
            };
            if ws.len() != N {
                return Err(WeightsError::Invalid(format!(
                    "feature {key} has {} weights, expected {N}",
                    ws.len()
                )));
            }
            let key = u32::try_from(*key)
                .ok()
                .filter(|k| *k < (1 << HASH_BITS))
                .ok_or_else(|| WeightsError::Invalid(format!("feature id {key} is out of range")))?;
            if keys.last().is_some_and(|&last| last >= key) {
                return Err(WeightsError::Invalid(format!("feature id {key} is not in increasing order")));
            }
            keys.push(key);
            for &w in ws {
                weights.push(to_i32(w, "weight")?);
            }
        }
        Ok(TriageModel { index: RowIndex::new(&keys), keys, weights, bias, temperature, thresholds })
    }

    /// The weights file: compact JSON, one feature row per line, integers only,
    /// so the same model always gives the same bytes.
    pub fn to_weights_string(&self) -> String {
        fn join<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
            items.into_iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
        }
        let intents = join(Intent::ALL.iter().map(|i| format!("\"{}\"", i.as_str())));
        let mut s = String::with_capacity(256 + self.keys.len() * 80);
        // Writing to a String cannot fail.
        let _ = write!(
            s,
            "{{\"format\":\"{FORMAT}\",\"hash_bits\":{HASH_BITS},\"weight_scale\":{},\"temperature\":{},\n\"intents\":[{intents}],\n\"thresholds\":[{}],\n\"bias\":[{}],\n\"features\":[",
            WEIGHT_SCALE as i64,
            self.temperature,
            join(self.thresholds),
            join(self.bias),
        );
        for (i, (key, row)) in self.keys.iter().zip(self.weights.chunks_exact(N)).enumerate() {
            let sep = if i == 0 { "\n" } else { ",\n" };
            let _ = write!(s, "{sep}[{key},{}]", join(row));
        }
        s.push_str("\n]}\n");
        s
    }

    /// Number of features with weights.
    pub fn feature_count(&self) -> usize {
        self.keys.len()
    }

    /// The calibration temperature the logits are divided by.
    pub fn temperature(&self) -> f64 {
        f64::from(self.temperature) / WEIGHT_SCALE
    }

    /// The probability at or above which `intent` may be acted on.
    pub fn threshold(&self, intent: Intent) -> f64 {
        f64::from(self.thresholds[intent.index()]) / WEIGHT_SCALE
    }

    /// Whether a classification of this model (or of a remote provider, judged by this model's
    /// thresholds) may be acted on; see [`abstain_reason`].
    pub fn abstain(
        &self,
        intent: Intent,
        probability: f64,
        distribution: &[(Intent, f64)],
        asks_to_stop: bool,
    ) -> Option<Abstain> {
        abstain_reason(intent, probability, distribution, self.threshold(intent), asks_to_stop)
    }

    /// Uncalibrated logits (before the temperature) of sparse features.
    pub(crate) fn logits(&self, features: &Features) -> [f64; N] {
        let mut acc = [0f64; N];
        for (a, &b) in acc.iter_mut().zip(&self.bias) {
            *a = f64::from(b);
        }
        for &(id, value) in features {
            if let Some(row) = self.index.row(id) {
                let ws = &self.weights[row * N..(row + 1) * N];
                for (a, &w) in acc.iter_mut().zip(ws) {
                    *a += value * f64::from(w);
                }
            }
        }
        acc.map(|a| a / WEIGHT_SCALE)
    }

    /// Calibrated class probabilities, in class order.
    pub(crate) fn probabilities(&self, features: &Features) -> [f64; N] {
        softmax(&self.logits(features), self.temperature())
    }

    /// Classifies one message. Pure, allocation-light, no IO; never panics.
    pub fn classify(&self, input: &TriageInput<'_>) -> Triage {
        let mut features = Vec::with_capacity(256);
        let analysis = featurize(input, &mut features);
        let probs = self.probabilities(&features);

        let mut distribution: Vec<(Intent, f64)> = Intent::ALL.into_iter().zip(probs).collect();
        // Stable: ties keep class order.
        distribution.sort_by(|a, b| b.1.total_cmp(&a.1));
        let (intent, probability) = distribution[0];

        let bare_reading_counts = input.open_ask == Some(REEFER_TEMP_ASK);
        let temperature_f = analysis
            .temperature
            .filter(|t| t.evidence != TempEvidence::Bare || bare_reading_counts)
            .map(|t| t.fahrenheit);

        let eta = analysis
            .eta
            .or_else(|| (input.open_ask == Some(ETA_REQUEST_ASK)).then(|| bare_eta(input.text)).flatten());

        let abstain = self.abstain(intent, probability, &distribution, analysis.asks_to_stop);
        Triage {
            intent,
            probability,
            threshold: self.threshold(intent),
            confident: abstain.is_none(),
            abstain,
            distribution,
            values: ExtractedValues { eta, temperature_f, stop: analysis.stop },
            lang: analysis.lang,
        }
    }
}

/// A bare number answering an ETA request: 1 to 12 is a clock hour ("3"),
/// 13 to 90 is minutes ("20", "45?"); anything else is not an ETA.
fn bare_eta(text: &str) -> Option<EtaValue> {
    let digits = text.trim().trim_end_matches(['?', '!', '.']).trim();
    let n: u32 = digits.parse().ok()?;
    match n {
        1..=12 => {
            Some(EtaValue::At { hour: u8::try_from(n).ok()?, minute: 0, meridiem: None, tomorrow: false })
        }
        13..=90 => Some(EtaValue::In { minutes: n }),
        _ => None,
    }
}

/// Softmax of `logits / temperature`, numerically stable.
pub(crate) fn softmax(logits: &[f64; N], temperature: f64) -> [f64; N] {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut out = logits.map(|z| ((z - max) / temperature).exp());
    let sum: f64 = out.iter().sum();
    if !(sum.is_finite() && sum > 0.0) {
        // Only reachable with corrupt weights; a uniform answer is never confident.
        return [1.0 / N as f64; N];
    }
    for p in &mut out {
        *p /= sum;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_weights_parse_and_round_trip() {
        let model = TriageModel::embedded();
        assert!(model.feature_count() > 1000);
        assert_eq!(model.to_weights_string(), EMBEDDED_WEIGHTS);
    }

    #[test]
    fn invalid_weights_are_rejected_with_a_reason() {
        let err = TriageModel::from_weights_str("{").expect_err("truncated JSON");
        assert!(matches!(err, WeightsError::Json(_)));
        let bad = EMBEDDED_WEIGHTS.replacen("\"hash_bits\":22", "\"hash_bits\":20", 1);
        let err = TriageModel::from_weights_str(&bad).expect_err("wrong hash bits");
        assert!(err.to_string().contains("hash_bits"), "{err}");
    }

    #[test]
    fn classify_gives_a_sorted_distribution_summing_to_one() {
        let t = TriageModel::embedded().classify(&TriageInput::new("eta 2:30"));
        let sum: f64 = t.distribution.iter().map(|(_, p)| p).sum();
        assert!((sum - 1.0).abs() < 1e-9);
        assert!(t.distribution.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!((t.intent, t.probability), t.distribution[0]);
        assert_eq!(t.confident, t.abstain.is_none());
        assert_eq!(t.threshold, TriageModel::embedded().threshold(t.intent));
        assert!(t.threshold >= CONFIDENCE_THRESHOLD);
    }

    #[test]
    fn the_opt_out_guard_holds_back_any_other_intent_but_not_the_opt_out_itself() {
        let dist =
            [(Intent::Ack, 0.85), (Intent::OptOut, 0.07), (Intent::WrongNumber, 0.05), (Intent::Other, 0.03)];
        assert_eq!(
            abstain_reason(Intent::Ack, 0.85, &dist, 0.7, false),
            Some(Abstain::OptOutRisk { probability: 0.07 + 0.05 })
        );
        let calm = [(Intent::Ack, 0.95), (Intent::OptOut, 0.04), (Intent::Other, 0.01)];
        assert_eq!(abstain_reason(Intent::Ack, 0.95, &calm, 0.7, false), None);
        let opt = [(Intent::OptOut, 0.8), (Intent::WrongNumber, 0.15), (Intent::Ack, 0.05)];
        assert_eq!(abstain_reason(Intent::OptOut, 0.8, &opt, 0.7, false), None);
        assert_eq!(
            abstain_reason(Intent::OptOut, 0.6, &opt, 0.7, false),
            Some(Abstain::BelowThreshold { threshold: 0.7 })
        );
        // An explicit stop request holds back any other intent, however sure, but not the
        // opt-out itself, and never lifts a reading below its threshold.
        assert_eq!(abstain_reason(Intent::Ack, 0.95, &calm, 0.7, true), Some(Abstain::AsksToStop));
        assert_eq!(abstain_reason(Intent::OptOut, 0.8, &opt, 0.7, true), None);
        // A problem report that also asks to stop goes to the planner too (with no planner, to
        // an urgent task for a person, as the problem itself would).
        let breakdown = [(Intent::ProblemReport, 0.95), (Intent::OptOut, 0.04), (Intent::Other, 0.01)];
        assert_eq!(
            abstain_reason(Intent::ProblemReport, 0.95, &breakdown, 0.7, true),
            Some(Abstain::AsksToStop)
        );
        assert_eq!(
            abstain_reason(Intent::Ack, 0.5, &calm, 0.7, true),
            Some(Abstain::BelowThreshold { threshold: 0.7 })
        );
        // A provider without a distribution is judged by the threshold alone.
        assert_eq!(abstain_reason(Intent::EtaGiven, 0.9, &[], 0.7, false), None);
    }

    #[test]
    fn an_arrival_that_asks_to_stop_the_texts_is_not_acted_on() {
        let t = TriageModel::embedded()
            .classify(&TriageInput::new("ya llegue pero ya no me esten mandando textos, me distraen"));
        assert!(!t.confident || t.intent.is_opt_out_like(), "{t:?}");
        assert!(asks_to_stop("Delivered. Please stop texting me"));
        assert!(!asks_to_stop("Delivered. Stop 2 next"));
        // Only the new text counts: the agent's own quoted words are not the sender's.
        assert!(!asks_to_stop(
            "eta 3pm\n\nOn Tue, Mar 3, 2026 at 9:14 AM Loads <l@x.com> wrote:\n> reply STOP to opt out"
        ));
    }

    #[test]
    fn a_bare_number_is_a_reading_only_while_a_reefer_temp_ask_is_open() {
        let model = TriageModel::embedded();
        let open = TriageInput { open_ask: Some(REEFER_TEMP_ASK), ..TriageInput::new("34") };
        assert_eq!(model.classify(&open).values.temperature_f, Some(34.0));
        let eta_ask = TriageInput { open_ask: Some("eta_request"), ..TriageInput::new("34") };
        assert_eq!(model.classify(&eta_ask).values.temperature_f, None);
        assert_eq!(model.classify(&TriageInput::new("reefer at 34")).values.temperature_f, Some(34.0));
    }

    #[test]
    fn a_bare_number_is_an_eta_only_while_an_eta_request_is_open() {
        let model = TriageModel::embedded();
        let eta =
            |text, open_ask| model.classify(&TriageInput { open_ask, ..TriageInput::new(text) }).values.eta;
        assert_eq!(eta("20", Some(ETA_REQUEST_ASK)), Some(EtaValue::In { minutes: 20 }));
        assert_eq!(eta("45?", Some(ETA_REQUEST_ASK)), Some(EtaValue::In { minutes: 45 }));
        assert_eq!(
            eta("3", Some(ETA_REQUEST_ASK)),
            Some(EtaValue::At { hour: 3, minute: 0, meridiem: None, tomorrow: false })
        );
        assert_eq!(eta("20", Some(REEFER_TEMP_ASK)), None);
        assert_eq!(eta("20", None), None);
        assert_eq!(eta("5000", Some(ETA_REQUEST_ASK)), None);
    }
}
