//! Local triage for messages from load contacts (behavior.md §6): which
//! intent a driver's or dispatcher's text, email or Slack message has, how
//! sure the model is, and the values in it (an ETA, a reefer reading, a stop).
//!
//! Layout:
//! - [`intent`]: the thirteen [`Intent`]s of §6;
//! - `body`: the part of a message its sender wrote now (an email without its quoted thread,
//!   signature and disclaimer);
//! - `text`: normalization and the lexer everything else reads;
//! - [`extract`]: deterministic value extractors ([`extract_eta`],
//!   [`extract_temperature`], [`extract_stop_ref`]) and [`resolve_eta`];
//! - `features`: hashed sparse features of a [`TriageInput`];
//! - [`model`]: [`TriageModel`], a calibrated logistic regression whose
//!   weights are committed in `model/weights.json` and embedded at build time;
//!   [`TriageModel::classify`] is the hot path (pure, microseconds);
//! - [`corpus`], [`train`](mod@train), [`eval`], [`dedupe`]: the labeled corpus in
//!   `evals/triage/`, deterministic training and evaluation, as library
//!   functions the `load-agent triage` CLI wires up ([`train_command`],
//!   [`eval_command`]).
//!
//! Invariant: the crate does no IO except reading corpus files and writing
//! the weights file in the train/eval functions; it knows nothing of loads,
//! asks or channels beyond the context strings of [`TriageInput`]. Of `load-agent-domain` it
//! uses `spelled_enum!` only (one spelling per variant of [`Intent`], [`Lang`] and the cues).
//!
//! ```
//! use load_agent_triage::{EtaValue, Intent, TriageInput, TriageModel};
//!
//! let triage = TriageModel::embedded().classify(&TriageInput {
//!     text: "bout 45 min out",
//!     lang: Some("en"),
//!     from_role: Some("driver"),
//!     open_ask: Some("eta_request"),
//! });
//! assert_eq!(triage.intent, Intent::EtaGiven);
//! assert_eq!(triage.values.eta, Some(EtaValue::In { minutes: 45 }));
//! ```

mod body;
pub mod corpus;
mod cues;
pub mod dedupe;
pub mod eval;
pub mod extract;
mod features;
mod guard;
pub mod intent;
mod lang;
pub mod model;
mod text;
pub mod train;

pub use corpus::{
    CorpusError, LabeledMessage, LineOrigin, LineProblem, jsonl_files, parse_corpus, read_corpus,
};
pub use dedupe::{
    CHECK_DIR, DedupeReport, NEAR_DUPLICATE_JACCARD, NearDuplicate, TEST_DIR, dedupe_command, held_out_files,
    near_duplicate_key, near_duplicates, test_files,
};
pub use eval::{
    AbstainCounts, EvalReport, IntentStats, LangStats, Misclassified, PolicyReport, RiskPoint, eval_command,
    evaluate,
};
pub use extract::{
    EtaValue, ExtractedValues, Meridiem, StopRef, extract_eta, extract_stop_ref, extract_temperature,
    resolve_eta,
};
pub use features::TriageInput;
pub use intent::Intent;
pub use lang::Lang;
pub use model::{
    Abstain, CONFIDENCE_THRESHOLD, ETA_REQUEST_ASK, OPT_OUT_GUARD, REEFER_TEMP_ASK, Triage, TriageModel,
    WeightsError, abstain_reason, asks_to_stop,
};
pub use train::{
    GroupScore, StopGuardScore, TARGET_PRECISION, TRAIN_DIR, ThresholdPoint, TrainError, TrainSummary,
    read_training_corpus, train, train_command, train_with_summary, training_files,
};
