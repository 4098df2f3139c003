//! Turns a message and its context into hashed sparse features.
//!
//! Feature groups (each feature is a namespaced string hashed to a
//! [`HASH_BITS`]-bit id, so the model needs no vocabulary):
//!
//! - `u`/`b`: word unigrams and bigrams (with start/end markers) over the
//!   normalized tokens, numbers replaced by their shape (`2:30` -> `0:00`,
//!   `-10` -> `-00`) so "eta 2:30" and "eta 4:15" look alike; `n`: the three
//!   words after a negator again, marked ("still not loaded" -> `n:loaded`);
//! - `c`: character 3- to 5-grams of the same token string with a space at
//!   each word boundary, which absorb typos and spelling variants
//!   ("reciever", "recieving", "deliverd");
//! - `h`: handcrafted: length bucket, what the extractors found (an ETA kind,
//!   a temperature and how it was recognized, a stop, a delay), a number in
//!   reading range, digits, `?`-only, emoji, ALL CAPS, detected language;
//! - `k`: domain cue families from [`crate::cues`] (e.g. `problem` for
//!   "blowout"/"se poncho"), each alone and crossed with the open ask, the
//!   question shape, the length, its position and negation, plus pairs of
//!   families present together;
//! - `x`: context: the open ask type, the sender's role, the language hint,
//!   and crosses of the open ask with the extractor findings and the length
//!   (a bare "34" is a reading while a `reefer_temp` ask is open and an ETA
//!   clue while an `eta_request` is).
//!
//! The `u`+`b`+`n` group and the `c` group are each scaled to unit L2 norm
//! (with repeats counted), so a long email does not drown the other features,
//! which are binary.

use crate::body::{self, Shape};
use crate::cues::{Cue, NEGATORS, Words, cues_in};
use crate::extract::{
    EtaValue, StopRef, TempEvidence, TempReading, eta_from_tokens, has_delay, stop_from_tokens,
    temperature_from_tokens,
};
use crate::guard;
use crate::lang::{self, Lang};
use crate::text::{Tok, TokKind, lex, normalize};

/// Feature ids are hashes reduced to this many bits.
pub(crate) const HASH_BITS: u32 = 22;

/// The context a message arrives with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TriageInput<'a> {
    /// The message body as received.
    pub text: &'a str,
    /// The contact's language when the load knows it (`en`, `es`); a hint for detection.
    pub lang: Option<&'a str>,
    /// The sender's role (`driver`, `carrier_dispatcher`, ...).
    pub from_role: Option<&'a str>,
    /// The type of an ask open for the sender (`eta_request`, `reefer_temp`), if any.
    pub open_ask: Option<&'a str>,
}

impl<'a> TriageInput<'a> {
    /// An input with no context.
    pub fn new(text: &'a str) -> Self {
        TriageInput { text, ..TriageInput::default() }
    }
}

/// What the feature pass learned about the message besides the features.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Analysis {
    pub lang: Lang,
    pub eta: Option<EtaValue>,
    pub temperature: Option<TempReading>,
    pub stop: Option<StopRef>,
    /// A duration that is a delay or a wait ("45 min late", "waiting 3 hrs").
    pub delay: bool,
    /// An explicit request to stop the messages or wrong-person statement ([`crate::guard`]).
    pub asks_to_stop: bool,
}

/// Sparse features of one message: `(feature id, value)`, ids may repeat.
pub(crate) type Features = Vec<(u32, f64)>;

/// Computes the features of `input` into `out` (cleared first).
pub(crate) fn featurize(input: &TriageInput<'_>, out: &mut Features) -> Analysis {
    out.clear();
    let (body, shape) = body::split(input.text);
    let norm = normalize(&body);
    let toks = lex(&norm);
    // The words the phrase matchers read, once for the cues and the stop-request guard.
    let words = Words::of(&toks);
    let hint = input.lang.and_then(|l| l.parse::<Lang>().ok());
    let analysis = Analysis {
        lang: lang::detect(&toks, hint),
        eta: eta_from_tokens(&toks),
        temperature: temperature_from_tokens(&toks),
        stop: stop_from_tokens(&toks),
        delay: has_delay(&toks),
        asks_to_stop: guard::asks_to_stop(&words),
    };

    let forms: Vec<Form<'_>> = toks.iter().map(Form::of).collect();
    word_features(&forms, out);
    char_features(&forms, out);
    handcrafted_features(input, &body, &toks, &words, &analysis, out);
    shape_features(shape, out);
    analysis
}

/// A token as the model sees it: the word itself, or the shape of a number.
#[derive(Debug, Clone)]
enum Form<'a> {
    Text(&'a str),
    Shape(String),
}

/// Longest word form hashed; longer runs (URLs, base64) are cut.
const MAX_FORM_CHARS: usize = 24;

impl<'a> Form<'a> {
    fn of(tok: &Tok<'a>) -> Self {
        match tok.kind {
            TokKind::Word | TokKind::Sym => {
                let cut =
                    tok.text.char_indices().nth(MAX_FORM_CHARS).map_or(tok.text, |(i, _)| &tok.text[..i]);
                Form::Text(cut)
            }
            TokKind::Num | TokKind::Clock => Form::Shape(
                tok.text
                    .chars()
                    .take(MAX_FORM_CHARS)
                    .map(|c| if c.is_ascii_digit() { '0' } else { c })
                    .collect(),
            ),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Form::Text(s) => s,
            Form::Shape(s) => s,
        }
    }
}

/// FNV-1a over a namespace byte and parts separated by 0xff, then a 64-bit
/// finalizer (FNV's low bits mix poorly), reduced to [`HASH_BITS`].
pub(crate) fn feature_id(namespace: u8, parts: &[&str]) -> u32 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    };
    eat(namespace);
    for part in parts {
        eat(0xff);
        for &b in part.as_bytes() {
            eat(b);
        }
    }
    // splitmix64 finalizer
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    // Masked to HASH_BITS (< 32), so the cast keeps every bit that matters.
    (h & ((1u64 << HASH_BITS) - 1)) as u32
}

/// Pushes `ids` with the value that gives the group unit L2 norm.
fn push_group(ids: &[u32], out: &mut Features) {
    if ids.is_empty() {
        return;
    }
    let value = 1.0 / (ids.len() as f64).sqrt();
    out.extend(ids.iter().map(|&id| (id, value)));
}

/// Words after a negator that get a negated twin feature ("not loaded" -> `neg:loaded`).
const NEGATION_SCOPE: usize = 3;

fn word_features(forms: &[Form<'_>], out: &mut Features) {
    let mut ids = Vec::with_capacity(forms.len() * 2 + 1);
    let mut negated_left = 0;
    for form in forms {
        let word = form.as_str();
        ids.push(feature_id(b'u', &[word]));
        if NEGATORS.contains(&word) {
            negated_left = NEGATION_SCOPE;
        } else if negated_left > 0 {
            ids.push(feature_id(b'n', &[word]));
            negated_left -= 1;
        }
    }
    let mut prev = "<s>";
    for form in forms {
        ids.push(feature_id(b'b', &[prev, form.as_str()]));
        prev = form.as_str();
    }
    ids.push(feature_id(b'b', &[prev, "</s>"]));
    push_group(&ids, out);
}

fn char_features(forms: &[Form<'_>], out: &mut Features) {
    let mut line = String::with_capacity(forms.iter().map(|f| f.as_str().len() + 1).sum::<usize>() + 1);
    line.push(' ');
    for form in forms {
        line.push_str(form.as_str());
        line.push(' ');
    }
    let bounds: Vec<usize> = line.char_indices().map(|(i, _)| i).chain(std::iter::once(line.len())).collect();
    let chars = bounds.len() - 1;
    let mut ids = Vec::with_capacity(chars * 3);
    for n in 3..=5 {
        for start in 0..chars.saturating_sub(n - 1) {
            let gram = &line[bounds[start]..bounds[start + n]];
            ids.push(feature_id(b'c', &[gram]));
        }
    }
    push_group(&ids, out);
}

fn length_bucket(n: usize) -> &'static str {
    match n {
        0 => "0",
        1 => "1",
        2 => "2",
        3 => "3",
        4..=6 => "4-6",
        7..=12 => "7-12",
        13..=25 => "13-25",
        _ => "26+",
    }
}

/// How the message is laid out: an email, with a quoted thread, a forward, a signature.
fn shape_features(shape: Shape, out: &mut Features) {
    let flags = [
        (shape.multiline, "multiline"),
        (shape.quoted, "quoted"),
        (shape.forwarded, "forwarded"),
        (shape.signed, "signed"),
    ];
    for (on, name) in flags {
        if on {
            out.push((feature_id(b'h', &["shape", name]), 1.0));
        }
    }
}

fn handcrafted_features(
    input: &TriageInput<'_>,
    body: &str,
    toks: &[Tok<'_>],
    words: &Words<'_>,
    analysis: &Analysis,
    out: &mut Features,
) {
    let mut flag = |namespace: u8, parts: &[&str]| out.push((feature_id(namespace, parts), 1.0));

    let ask = input.open_ask.unwrap_or("none");
    let role = input.from_role.unwrap_or("none");
    let hint = input.lang.unwrap_or("none");
    let len = length_bucket(toks.len());
    flag(b'h', &["len", len]);

    let eta = match analysis.eta {
        None => "none",
        Some(EtaValue::Now) => "now",
        Some(EtaValue::In { .. }) => "in",
        Some(EtaValue::At { .. }) => "at",
    };
    flag(b'h', &["eta", eta]);

    let temp = match analysis.temperature.map(|t| t.evidence) {
        None => "none",
        Some(TempEvidence::Explicit) => "explicit",
        Some(TempEvidence::SetPoint) => "set",
        Some(TempEvidence::Bare) => "bare",
    };
    flag(b'h', &["temp", temp]);

    if let Some(stop) = analysis.stop {
        let kind = match stop {
            StopRef::Pickup => "pickup",
            StopRef::Delivery => "delivery",
            StopRef::Sequence(_) => "sequence",
        };
        flag(b'h', &["stop", kind]);
    }

    if toks.iter().any(|t| matches!(t.kind, TokKind::Num | TokKind::Clock)) {
        flag(b'h', &["digits"]);
    }
    if analysis.delay {
        flag(b'h', &["delay"]);
    }
    // A number that could be a reading ("its at 34 like it should be"): in
    // range and not followed by a word other than a degree unit ("34 min").
    let tempish = toks.iter().enumerate().any(|(i, t)| {
        let followed_by_other_word = toks.get(i + 1).is_some_and(|n| {
            (n.kind == TokKind::Word && !n.is_any_word(&["f", "degrees", "grados", "deg"])) || n.is_sym(':')
        });
        t.number().is_some_and(|v| (-40.0..=100.0).contains(&v)) && !followed_by_other_word
    });
    if tempish {
        flag(b'h', &["num", "tempish"]);
        flag(b'x', &["ask", ask, "num", "tempish"]);
    }
    let question = toks.iter().any(|t| t.is_sym('?'));
    let only_symbols = !toks.is_empty() && toks.iter().all(|t| t.kind == TokKind::Sym);
    let only_questions = !toks.is_empty() && toks.iter().all(|t| t.is_sym('?'));
    if question {
        flag(b'h', &["q", "any"]);
    }
    if toks.last().is_some_and(|t| t.is_sym('?')) {
        flag(b'h', &["q", "end"]);
    }
    if only_questions {
        flag(b'h', &["q", "only"]);
    }
    if only_symbols {
        flag(b'h', &["sym", "only"]);
    }
    if toks.iter().any(|t| t.kind == TokKind::Sym && !t.text.is_ascii()) {
        flag(b'h', &["emoji"]);
    }
    let letters = body.chars().filter(|c| c.is_alphabetic()).count();
    if letters >= 3 && !body.chars().any(char::is_lowercase) {
        flag(b'h', &["caps"]);
    }
    flag(b'h', &["lang", analysis.lang.as_str()]);

    let cues = cues_in(words);
    let questionish = question || cues.iter().any(|h| h.cue == Cue::Question);
    for hit in &cues {
        let name = hit.cue.as_str();
        flag(b'k', &[name]);
        flag(b'k', &[name, "ask", ask]);
        flag(b'k', &[name, "q", if questionish { "yes" } else { "no" }]);
        flag(b'k', &[name, "len", len]);
        if hit.at_start {
            flag(b'k', &[name, "start"]);
        }
        if hit.negated {
            flag(b'k', &[name, "neg"]);
        }
    }
    // Pairs of cue families: "reefer" + "alarm" is trouble, "po" + "?" is a question.
    for (i, a) in cues.iter().enumerate() {
        for b in &cues[i + 1..] {
            flag(b'k', &[a.cue.as_str(), "+", b.cue.as_str()]);
        }
    }
    if cues.is_empty() {
        flag(b'k', &["none", "len", len]);
    }
    flag(b'x', &["ask", ask]);
    flag(b'x', &["role", role]);
    flag(b'x', &["hint", hint]);
    flag(b'x', &["ask", ask, "eta", eta]);
    flag(b'x', &["ask", ask, "temp", temp]);
    flag(b'x', &["ask", ask, "len", len]);
    flag(b'x', &["role", role, "len", len]);
    if only_questions {
        flag(b'x', &["ask", ask, "q", "only"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_namespaced() {
        assert_eq!(feature_id(b'u', &["eta"]), feature_id(b'u', &["eta"]));
        assert_ne!(feature_id(b'u', &["eta"]), feature_id(b'c', &["eta"]));
        assert_ne!(feature_id(b'b', &["a", "bc"]), feature_id(b'b', &["ab", "c"]));
        assert!(feature_id(b'u', &["x"]) < (1 << HASH_BITS));
    }

    #[test]
    fn numbers_become_shapes() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        featurize(&TriageInput::new("eta 2:30"), &mut a);
        featurize(&TriageInput::new("ETA 4:15"), &mut b);
        let ids = |f: &Features| f.iter().map(|&(id, _)| id).collect::<Vec<_>>();
        // Same features except the ALL CAPS flag.
        let caps = feature_id(b'h', &["caps"]);
        let b_ids: Vec<u32> = ids(&b).into_iter().filter(|&id| id != caps).collect();
        assert_eq!(ids(&a), b_ids);
    }

    #[test]
    fn text_groups_have_unit_norm() {
        let mut f = Vec::new();
        featurize(&TriageInput::new("truck broke down on i-40 near exit 12"), &mut f);
        let flags = f.iter().filter(|&&(_, v)| v == 1.0).count();
        let norm: f64 = f.iter().filter(|&&(_, v)| v < 1.0).map(|&(_, v)| v * v).sum();
        assert!(flags >= 8);
        assert!((norm - 2.0).abs() < 1e-9, "two groups of unit norm, got {norm}");
    }

    #[test]
    fn empty_text_still_has_context_features() {
        let mut f = Vec::new();
        let a = featurize(
            &TriageInput {
                text: "",
                lang: Some("es"),
                from_role: Some("driver"),
                open_ask: Some("reefer_temp"),
            },
            &mut f,
        );
        assert_eq!(a.lang, Lang::Es);
        assert!(f.len() >= 8);
    }
}
