//! Deterministic value extractors: ETAs, reefer temperatures, stop references.
//!
//! Each extractor is a pure function over the message text that never panics,
//! whatever the input (the proptest suite feeds them arbitrary strings). They
//! work on the normalized, lexed message (lowercase, accents folded), so "Llegué",
//! "llegue" and "LLEGUE" are the same word.
//!
//! Contracts, in short:
//! - [`extract_eta`]: the first clock time in the message ("eta 2:30", "230pm",
//!   "a las 3"), else the first duration ("45 min out", "2 horas"), else "now"
//!   ("here", "ya llegué"); durations followed by "late"/"behind" or preceded by
//!   "waiting"/"for" are delays, not ETAs, and are skipped.
//! - [`extract_temperature`]: the first reading with temperature context (a
//!   unit like `34F`/`35 grados`, or a keyword like "reefer"/"temp"), in °F
//!   (Celsius readings are converted); else a message that is only a number
//!   ("34", "-10"). The bare-number fallback is the extractor's contract; the
//!   caller decides when a bare number means a temperature (`classify` keeps
//!   it only while a `reefer_temp` ask is open).
//! - [`extract_stop_ref`]: the first stop the message names.

use chrono::{DateTime, Duration, FixedOffset, NaiveDate, NaiveTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::text::{Tok, TokKind, lex, normalize};

/// Morning or afternoon, when the sender said which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Meridiem {
    /// Before noon ("am", "de la mañana").
    Am,
    /// Noon or after ("pm", "de la tarde", "tonight").
    Pm,
}

/// An ETA as the sender said it; [`resolve_eta`] turns it into an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EtaValue {
    /// At the stop now ("here", "ya llegué", "im at the dock").
    Now,
    /// A duration from now ("45 min out", "bout an hour", "1.5 hrs", "2 horas").
    In {
        /// Whole minutes from now, at least 1.
        minutes: u32,
    },
    /// A local clock time at the stop ("eta 2:30", "230pm", "by 14:15", "a las 3").
    At {
        /// 0..=23 when given on a 24-hour clock, else 1..=12.
        hour: u8,
        /// 0..=59.
        minute: u8,
        /// `None` when the sender did not say; always `None` for 24-hour times (`hour > 12`).
        meridiem: Option<Meridiem>,
        /// "tomorrow", "mañana": the time is on the stop's next calendar day.
        tomorrow: bool,
    },
}

/// A stop the message names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopRef {
    /// "shipper", "pickup", "recolección".
    Pickup,
    /// "receiver", "consignee", "delivery", "entrega", "last stop".
    Delivery,
    /// "stop 2", "2nd stop", "segunda parada": a stop sequence (1-based).
    Sequence(u32),
}

/// The values [`crate::TriageModel::classify`] extracted from a message.
///
/// They are extracted whatever the intent; the caller reads the ones its
/// intent needs (an ETA for `eta_given`, a reading for `temperature_report`,
/// a stop for the questions).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ExtractedValues {
    /// See [`extract_eta`].
    pub eta: Option<EtaValue>,
    /// See [`extract_temperature`]; a bare number only while a `reefer_temp` ask is open.
    pub temperature_f: Option<f64>,
    /// See [`extract_stop_ref`].
    pub stop: Option<StopRef>,
}

/// Extracts an ETA; see the module documentation for the precedence rules.
pub fn extract_eta(text: &str) -> Option<EtaValue> {
    let norm = normalize(text);
    eta_from_tokens(&lex(&norm))
}

/// Extracts a temperature reading in °F; see the module documentation.
pub fn extract_temperature(text: &str) -> Option<f64> {
    let norm = normalize(text);
    temperature_from_tokens(&lex(&norm)).map(|r| r.fahrenheit)
}

/// Extracts the first stop the message names.
pub fn extract_stop_ref(text: &str) -> Option<StopRef> {
    let norm = normalize(text);
    stop_from_tokens(&lex(&norm))
}

/// Turns an ETA into an absolute instant, reading clock times in the stop's
/// time zone (`stop_offset`, the UTC offset of the stop's appointment).
///
/// - `Now` is `now`; `In { minutes }` is `now + minutes`.
/// - `At` with am/pm is that local time; without am/pm, an hour `h <= 12` may
///   mean `h` or `h + 12` (12 may mean noon or midnight), a 24-hour time
///   (`h > 12`, or `0`) means itself.
/// - Without a day hint the result is the first occurrence of a candidate
///   local time at or after `now - 30 minutes`: a driver who texts "eta 2:30"
///   at 2:40 is running a few minutes late, not arriving tomorrow, while
///   "eta 12:30" at 23:50 is 00:30 the next day.
/// - With `tomorrow`, it is the earliest candidate on the calendar day after
///   today's (in the stop's zone).
pub fn resolve_eta(value: &EtaValue, now: DateTime<Utc>, stop_offset: FixedOffset) -> DateTime<Utc> {
    let (hour, minute, meridiem, tomorrow) = match *value {
        EtaValue::Now => return now,
        EtaValue::In { minutes } => {
            return now
                .checked_add_signed(Duration::minutes(i64::from(minutes)))
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
        }
        EtaValue::At { hour, minute, meridiem, tomorrow } => (hour, minute, meridiem, tomorrow),
    };
    let minute = u32::from(minute.min(59));
    let hours = candidate_hours(hour, meridiem);
    let at = |date: NaiveDate, h: u32| -> Option<DateTime<Utc>> {
        let local = date.and_time(NaiveTime::from_hms_opt(h, minute, 0)?);
        // A fixed offset maps every local time to exactly one instant.
        Some(stop_offset.from_local_datetime(&local).single()?.with_timezone(&Utc))
    };
    let today = now.with_timezone(&stop_offset).date_naive();
    if tomorrow {
        let day = today.succ_opt().unwrap_or(today);
        if let Some(t) = hours.iter().filter_map(|&h| at(day, h)).min() {
            return t;
        }
        return now;
    }
    let earliest = now.checked_sub_signed(Duration::minutes(30)).unwrap_or(now);
    let first_day = earliest.with_timezone(&stop_offset).date_naive();
    first_day
        .iter_days()
        .take(3)
        .flat_map(|day| hours.iter().filter_map(move |&h| at(day, h)))
        .filter(|t| *t >= earliest)
        .min()
        .unwrap_or(now)
}

/// The 24-hour local hours an `At` may mean.
fn candidate_hours(hour: u8, meridiem: Option<Meridiem>) -> Vec<u32> {
    let h = u32::from(hour.min(23));
    match (meridiem, h) {
        (_, 13..) | (None, 0) => vec![h],
        (Some(Meridiem::Am), _) => vec![h % 12],
        (Some(Meridiem::Pm), _) => vec![h % 12 + 12],
        (None, 12) => vec![12, 0],
        (None, _) => vec![h, h + 12],
    }
}

// ---------------------------------------------------------------------------
// ETA
// ---------------------------------------------------------------------------

const MINUTE_UNITS: &[&str] = &[
    "min", "mins", "minute", "minutes", "minuts", "minits", "mns", "mn", "mint", "mints", "minuto",
    "minutos", "mts",
];
const HOUR_UNITS: &[&str] = &["hr", "hrs", "hour", "hours", "hors", "hrz", "houres", "horas", "hora", "hs"];
/// Words after a duration that make it a delay, not an ETA ("45 min late").
const DELAY_AFTER: &[&str] = &[
    "late",
    "behind",
    "delay",
    "delayed",
    "tarde",
    "retraso",
    "retrasado",
    "atrasado",
    "ago",
    "wait",
    "waiting",
    "detention",
    "already",
];
/// Words before a duration that make it a wait, not an ETA ("waiting 2 hrs").
const DELAY_BEFORE: &[&str] = &[
    "for",
    "waiting",
    "wait",
    "waited",
    "been",
    "hace",
    "llevo",
    "esperando",
    "detained",
    "sitting",
    "sat",
    "stuck",
    "take",
    "takes",
    "took",
    "every",
    "last",
    "past",
    "adding",
    "add",
    "adds",
    "added",
    "extra",
];
/// Words that introduce a clock time ("at 3", "a las 3", "around 4").
const TIME_KEYWORDS: &[&str] = &[
    "at", "by", "around", "round", "arround", "about", "bout", "abt", "approx", "eta", "arrive", "arriving",
    "till", "til", "until", "las", "tipo", "before", "after", "b4",
];
/// Words that may sit between a time keyword and the time ("eta is 3").
const TIME_FILLERS: &[&str] = &[
    "is",
    "of",
    "es",
    "prob",
    "probably",
    "maybe",
    "like",
    "around",
    "about",
    "bout",
    "abt",
    "approx",
    "approximately",
    "roughly",
    "sobre",
    "at",
    "a",
    "las",
    "como",
    "eso",
    "de",
];
/// A number followed by one of these is not a clock time.
const NOT_A_TIME_AFTER: &[&str] = &[
    "f", "deg", "degs", "degree", "degrees", "grados", "grado", "c", "stop", "stops", "miles", "mile", "mi",
    "millas", "pallets", "pallet", "cases", "lbs", "pounds", "percent", "st", "nd", "rd", "th", "door",
    "dock", "puerta", "trucks", "loads", "days", "dias", "day", "weeks",
];
const WORD_NUMBERS: &[(&str, u32)] = &[
    ("a", 1),
    ("an", 1),
    ("one", 1),
    ("un", 1),
    ("uno", 1),
    ("una", 1),
    ("two", 2),
    ("dos", 2),
    ("three", 3),
    ("tres", 3),
    ("four", 4),
    ("cuatro", 4),
    ("five", 5),
    ("cinco", 5),
    ("six", 6),
    ("seis", 6),
    ("seven", 7),
    ("siete", 7),
    ("eight", 8),
    ("ocho", 8),
    ("nine", 9),
    ("nueve", 9),
    ("ten", 10),
    ("diez", 10),
    ("fifteen", 15),
    ("quince", 15),
    ("twenty", 20),
    ("veinte", 20),
    ("thirty", 30),
    ("treinta", 30),
    ("forty", 40),
    ("fourty", 40),
    ("cuarenta", 40),
    ("fifty", 50),
    ("cincuenta", 50),
];

/// Largest duration accepted as an ETA: three days.
const MAX_ETA_MINUTES: f64 = 72.0 * 60.0;

pub(crate) fn eta_from_tokens(toks: &[Tok<'_>]) -> Option<EtaValue> {
    clock_time(toks)
        .or_else(|| duration(toks).map(|minutes| EtaValue::In { minutes }))
        .or_else(|| is_now(toks).then_some(EtaValue::Now))
}

fn word_number(tok: &Tok<'_>) -> Option<u32> {
    if tok.kind != TokKind::Word {
        return None;
    }
    WORD_NUMBERS.iter().find(|(w, _)| *w == tok.text).map(|&(_, n)| n)
}

fn is_minute_unit(tok: &Tok<'_>) -> bool {
    tok.is_any_word(MINUTE_UNITS) || (tok.joined && tok.is_word("m"))
}

fn is_hour_unit(tok: &Tok<'_>) -> bool {
    tok.is_any_word(HOUR_UNITS) || (tok.is_word("h") && tok.joined)
}

/// The numeric value of token `i` as a quantity ("45", "1.5", "an", "forty five"),
/// with the index of its last token.
fn quantity_at(toks: &[Tok<'_>], i: usize) -> Option<(f64, usize)> {
    let tok = toks.get(i)?;
    if let Some(v) = tok.number() {
        if v <= 0.0 {
            return None;
        }
        // "1 1/2 hours"
        if let (Some(one), Some(slash), Some(two)) = (toks.get(i + 1), toks.get(i + 2), toks.get(i + 3))
            && one.integer() == Some(1)
            && slash.is_sym('/')
            && two.integer() == Some(2)
        {
            return Some((v + 0.5, i + 3));
        }
        return Some((v, i));
    }
    let n = word_number(tok)?;
    // "forty five", "cuarenta y cinco"
    if n >= 20 {
        let mut j = i + 1;
        if toks.get(j).is_some_and(|t| t.is_word("y") || t.is_word("and")) {
            j += 1;
        }
        if let Some(ones) = toks.get(j).and_then(word_number).filter(|&o| (1..10).contains(&o)) {
            return Some((f64::from(n + ones), j));
        }
    }
    Some((f64::from(n), i))
}

/// "and a half" / "y media" right after token `i`: the index of its last token.
fn half_after(toks: &[Tok<'_>], i: usize) -> Option<usize> {
    let word = |k: usize| toks.get(i + k).filter(|t| t.kind == TokKind::Word).map(|t| t.text);
    match (word(1), word(2), word(3)) {
        (Some("and"), Some("a"), Some("half")) => Some(i + 3),
        (Some("and" | "n" | "y"), Some("half" | "media"), _) => Some(i + 2),
        _ => None,
    }
}

fn is_delay_context(toks: &[Tok<'_>], first: usize, last: usize) -> bool {
    let after = toks.iter().skip(last + 1).take(2).any(|t| t.is_any_word(DELAY_AFTER));
    let before = toks[first.saturating_sub(2)..first].iter().any(|t| t.is_any_word(DELAY_BEFORE));
    after || before
}

/// Every duration in the message, left to right: its minutes and whether it
/// is a delay or a wait rather than an ETA.
fn durations<'t>(toks: &'t [Tok<'_>]) -> impl Iterator<Item = (f64, bool)> + 't {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < toks.len() {
            let start = i;
            if let Some((minutes, last)) = duration_at(toks, start) {
                i = last + 1;
                return Some((minutes, is_delay_context(toks, start, last)));
            }
            i += 1;
        }
        None
    })
}

/// The first duration that is an ETA, in minutes.
fn duration(toks: &[Tok<'_>]) -> Option<u32> {
    durations(toks)
        .find(|&(minutes, delay)| !delay && (1.0..=MAX_ETA_MINUTES).contains(&minutes))
        // In range, so the cast cannot truncate.
        .map(|(minutes, _)| minutes.round() as u32)
}

/// Whether the message has a duration that is a delay or a wait, not an ETA
/// ("running 45 min late", "been waiting 3 hrs", "llevo 4 horas").
pub(crate) fn has_delay(toks: &[Tok<'_>]) -> bool {
    durations(toks).any(|(_, delay)| delay)
}

/// A duration starting at token `i`: the minutes and the index of its last token.
fn duration_at(toks: &[Tok<'_>], i: usize) -> Option<(f64, usize)> {
    let tok = toks.get(i)?;
    // "half hour", "half an hour", "media hora"
    if tok.is_word("half") || tok.is_word("media") {
        let mut j = i + 1;
        if toks.get(j).is_some_and(|t| t.is_word("an") || t.is_word("a")) {
            j += 1;
        }
        return toks.get(j).filter(|t| is_hour_unit(t)).map(|_| (30.0, j));
    }
    // "couple hours", "couple of hrs", "un par de horas"
    if tok.is_word("couple") || tok.is_word("par") {
        let mut j = i + 1;
        if toks.get(j).is_some_and(|t| t.is_word("of") || t.is_word("de")) {
            j += 1;
        }
        return toks.get(j).filter(|t| is_hour_unit(t)).map(|_| (120.0, j));
    }
    // "bout hour out", "in hour and half": a bare singular hour after an approximation word.
    if tok.is_any_word(&["hour", "hr", "hora"]) {
        let prev = i.checked_sub(1).and_then(|p| toks.get(p));
        if prev.is_some_and(|p| {
            p.is_any_word(&[
                "about", "bout", "abt", "around", "like", "maybe", "in", "within", "approx", "roughly",
            ])
        }) {
            return Some(match half_after(toks, i) {
                Some(last) => (90.0, last),
                None => (60.0, i),
            });
        }
        return None;
    }
    let (qty, qlast) = quantity_at(toks, i)?;
    let mut j = qlast + 1;
    // "1 and a half hours"
    let mut extra_half = 0.0;
    if let Some(h) = half_after(toks, qlast) {
        extra_half = 0.5;
        j = h + 1;
    }
    let unit = toks.get(j);
    if unit.is_some_and(is_hour_unit) {
        let mut minutes = (qty + extra_half) * 60.0;
        let mut last = j;
        if let Some(h) = half_after(toks, j) {
            minutes += 30.0;
            last = h;
        } else if let Some(m) = toks.get(j + 1).and_then(Tok::integer).filter(|&m| m < 60) {
            // "1h30", "1 hr 30 min", "2 horas 15 minutos"
            let unit_ok = toks.get(j + 2).is_some_and(is_minute_unit) || toks[j + 1].joined;
            if unit_ok {
                minutes += f64::from(m);
                last = if toks.get(j + 2).is_some_and(is_minute_unit) { j + 2 } else { j + 1 };
            }
        }
        return Some((minutes, last));
    }
    if unit.is_some_and(is_minute_unit) && extra_half == 0.0 {
        // Word numbers below 5 before "min" are rare and usually "a min" = "a moment".
        if tok.kind == TokKind::Word && qty < 5.0 {
            return None;
        }
        return Some((qty, j));
    }
    // "in 20", "en 20", "be there in 15": minutes when no unit follows.
    let prev_is_in = i
        .checked_sub(1)
        .and_then(|p| toks.get(p))
        .is_some_and(|t| t.is_any_word(&["in", "en", "within", "inside"]));
    let next_blocks = toks
        .get(qlast + 1)
        .is_some_and(|t| t.kind == TokKind::Word || t.kind == TokKind::Num || t.is_sym(':') || t.is_sym('°'));
    if prev_is_in && tok.kind == TokKind::Num && (5.0..=90.0).contains(&qty) && !next_blocks {
        return Some((qty, qlast));
    }
    None
}

fn meridiem_word(tok: &Tok<'_>) -> Option<Meridiem> {
    match tok.text {
        "am" | "a" if tok.kind == TokKind::Word => Some(Meridiem::Am),
        "pm" | "p" if tok.kind == TokKind::Word => Some(Meridiem::Pm),
        _ => None,
    }
}

/// am/pm right after token `i` ("2pm", "2 pm", "2:30 p m"); only "am"/"pm" count when separated.
fn meridiem_after(toks: &[Tok<'_>], i: usize) -> Option<Meridiem> {
    let next = toks.get(i + 1)?;
    match next.text {
        "am" | "pm" => meridiem_word(next),
        "a" | "p" if next.joined || toks.get(i + 2).is_some_and(|t| t.is_word("m")) => meridiem_word(next),
        _ => None,
    }
}

/// A part-of-day phrase anywhere in the message ("tonight", "de la tarde").
fn meridiem_hint(toks: &[Tok<'_>]) -> Option<Meridiem> {
    for (i, t) in toks.iter().enumerate() {
        if t.kind != TokKind::Word {
            continue;
        }
        let prev = i.checked_sub(1).and_then(|p| toks.get(p));
        let after_la_or_the = prev.is_some_and(|p| p.is_word("la") || p.is_word("the"));
        match t.text {
            "tonight" | "tonite" | "evening" | "afternoon" | "noche" => return Some(Meridiem::Pm),
            "tarde" if after_la_or_the => return Some(Meridiem::Pm),
            "morning" | "manana" if after_la_or_the => return Some(Meridiem::Am),
            "morning" => return Some(Meridiem::Am),
            _ => {}
        }
    }
    None
}

fn tomorrow_hint(toks: &[Tok<'_>]) -> bool {
    toks.iter().enumerate().any(|(i, t)| {
        let prev_la = i.checked_sub(1).and_then(|p| toks.get(p)).is_some_and(|p| p.is_word("la"));
        t.is_any_word(&[
            "tomorrow",
            "tmrw",
            "tmr",
            "tmrrw",
            "tomorow",
            "tommorow",
            "tommorrow",
            "tmw",
            "2morrow",
            "2moro",
            "tomoro",
            "tomm",
        ]) || (t.is_word("manana") && !prev_la)
    })
}

fn at_value(toks: &[Tok<'_>], hour: u32, minute: u32, meridiem: Option<Meridiem>) -> Option<EtaValue> {
    if hour > 23 || minute > 59 {
        return None;
    }
    let meridiem = if hour > 12 || hour == 0 { None } else { meridiem.or_else(|| meridiem_hint(toks)) };
    Some(EtaValue::At {
        hour: u8::try_from(hour).ok()?,
        minute: u8::try_from(minute).ok()?,
        meridiem,
        tomorrow: tomorrow_hint(toks),
    })
}

/// The time keyword before token `i` ("at 3", "a las 3", "eta is bout 3"),
/// looking back over up to four keywords and fillers; "eta" wins over the
/// nearer keywords so "eta bout 45" is read as "eta 45".
fn time_keyword_before<'a>(toks: &[Tok<'a>], i: usize) -> Option<&'a str> {
    let mut found = None;
    for j in (i.saturating_sub(4)..i).rev() {
        let t = &toks[j];
        if t.is_word("eta") {
            return Some(t.text);
        }
        if t.is_any_word(TIME_KEYWORDS) || t.is_sym('@') {
            found = found.or(Some(t.text));
            continue;
        }
        let filler = t.is_any_word(TIME_FILLERS) || t.is_sym(':') || t.is_sym('-') || t.is_sym('=');
        if !filler {
            break;
        }
    }
    found
}

/// The first clock time in the message.
fn clock_time(toks: &[Tok<'_>]) -> Option<EtaValue> {
    for (i, tok) in toks.iter().enumerate() {
        match tok.kind {
            TokKind::Clock => {
                if let Some((h, m)) = tok.clock() {
                    let value = at_value(toks, h.into(), m.into(), meridiem_after(toks, i));
                    if value.is_some() {
                        return value;
                    }
                }
            }
            TokKind::Num => {
                if let Some(v) = clock_from_number(toks, i) {
                    return Some(v);
                }
            }
            TokKind::Word => match tok.text {
                "noon" | "mediodia" => return at_value(toks, 12, 0, Some(Meridiem::Pm)),
                "midnight" | "medianoche" => return at_value(toks, 12, 0, Some(Meridiem::Am)),
                _ => {}
            },
            TokKind::Sym => {}
        }
    }
    None
}

/// A clock time written as a plain number: "230pm", "2 pm", "eta 3", "a las 4", "3ish", "eta 2.30".
fn clock_from_number(toks: &[Tok<'_>], i: usize) -> Option<EtaValue> {
    let tok = &toks[i];
    let next = toks.get(i + 1);
    if next.is_some_and(|n| is_minute_unit(n) || is_hour_unit(n) || n.is_any_word(NOT_A_TIME_AFTER))
        || next.is_some_and(|n| n.is_sym('°') || n.is_sym('%'))
    {
        return None;
    }
    // "eta 10-15 min", "20 to 30 mins": a range of durations, not a clock time.
    let is_range = next.is_some_and(|n| n.is_sym('-') || n.is_word("to") || n.is_word("a"))
        && toks.get(i + 2).is_some_and(|t| t.kind == TokKind::Num)
        && toks.get(i + 3).is_some_and(|u| is_minute_unit(u) || is_hour_unit(u));
    if is_range {
        return None;
    }
    // "2.30" after a time keyword.
    if let Some((h, m)) = tok.text.split_once('.') {
        if m.len() == 2 && time_keyword_before(toks, i).is_some() {
            let h: u32 = h.parse().ok()?;
            let m: u32 = m.parse().ok()?;
            return at_value(toks, h, m, meridiem_after(toks, i));
        }
        return None;
    }
    let n = tok.integer()?;
    let digits = tok.text.len();
    let split = |n: u32| -> (u32, u32) { if digits >= 3 { (n / 100, n % 100) } else { (n, 0) } };
    if digits > 4 {
        return None;
    }
    if let Some(mer) = meridiem_after(toks, i) {
        let (h, m) = split(n);
        if (1..=12).contains(&h) {
            return at_value(toks, h, m, Some(mer));
        }
        return None;
    }
    if next.is_some_and(|t| t.is_any_word(&["ish", "oclock"]))
        || (next.is_some_and(|t| t.is_word("o")) && toks.get(i + 2).is_some_and(|t| t.is_word("clock")))
    {
        let (h, m) = split(n);
        return at_value(toks, h, m, None);
    }
    // A bare "230" or "0830" answering an ETA request.
    if (3..=4).contains(&digits) && toks.len() == 1 {
        let (h, m) = split(n);
        return at_value(toks, h, m, None);
    }
    let keyword = time_keyword_before(toks, i)?;
    if keyword == "eta" && digits <= 2 && (13..=90).contains(&n) {
        // "eta 45", "eta 20": minutes; drivers rarely give an ETA on a 24-hour clock.
        return Some(EtaValue::In { minutes: n });
    }
    let (h, m) = split(n);
    at_value(toks, h, m, None)
}

/// Phrases that mean "at the stop now".
const NOW_PHRASES: &[&[&str]] = &[
    &["arrived"],
    &["checked", "in"],
    &["check", "in", "done"],
    &["on", "site"],
    &["onsite"],
    &["at", "the", "dock"],
    &["at", "dock"],
    &["in", "a", "door"],
    &["in", "door"],
    &["at", "the", "gate"],
    &["at", "gate"],
    &["at", "the", "shipper"],
    &["at", "shipper"],
    &["at", "the", "receiver"],
    &["at", "receiver"],
    &["at", "the", "consignee"],
    &["at", "consignee"],
    &["at", "pickup"],
    &["at", "the", "pickup"],
    &["at", "the", "stop"],
    &["at", "the", "facility"],
    &["pulling", "in"],
    &["pulled", "in"],
    &["backed", "in"],
    &["got", "here"],
    &["made", "it"],
    &["llegue"],
    &["llegamos"],
    &["ya", "estoy"],
    &["estoy", "aqui"],
    &["aqui", "estoy"],
    &["ya", "aqui"],
    &["estoy", "en", "el"],
    &["estoy", "en", "la"],
];

/// Words before a "now" phrase that make it future or negated ("will be here", "not here yet").
const NOT_NOW_BEFORE: &[&str] = &[
    "be", "get", "not", "no", "isnt", "arent", "havent", "hasnt", "didnt", "wont", "cant", "to", "gonna",
    "will", "when", "from", "never", "aun", "todavia", "until", "till", "once", "if", "cuando", "cuanto",
    "que", "si", "hasta",
];

fn is_now(toks: &[Tok<'_>]) -> bool {
    let words: Vec<&str> = toks.iter().filter(|t| t.kind == TokKind::Word).map(|t| t.text).collect();
    let negated = |start: usize, end: usize| {
        words[start.saturating_sub(3)..start].iter().any(|w| NOT_NOW_BEFORE.contains(w))
            || words.get(end..end + 2).is_some_and(|after| after.contains(&"yet"))
            || words.get(end).is_some_and(|w| *w == "yet")
    };
    for start in 0..words.len() {
        for phrase in NOW_PHRASES {
            let end = start + phrase.len();
            if words.get(start..end) == Some(phrase) && !negated(start, end) {
                return true;
            }
        }
        // "at the dc now", "im at the warehouse now"
        if words[start] == "at"
            && !negated(start, start + 1)
            && words.iter().skip(start + 1).take(3).any(|w| *w == "now")
        {
            return true;
        }
        // "here", "im here", "here at the shipper", but not "here is the po" or "get here".
        if words[start] == "here"
            && !negated(start, start + 1)
            && !words
                .get(start + 1)
                .is_some_and(|w| ["is", "are", "you", "it", "ya", "we", "whats", "the"].contains(w))
        {
            return true;
        }
    }
    false
}

// ---------------------------------------------------------------------------
// Temperature
// ---------------------------------------------------------------------------

/// How a temperature reading was recognized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TempEvidence {
    /// A keyword or unit says it is a reading ("reefer at 34", "34F").
    Explicit,
    /// Only a set point was named ("set at 34").
    SetPoint,
    /// The whole message is a number; a reading only in context.
    Bare,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TempReading {
    pub fahrenheit: f64,
    pub evidence: TempEvidence,
}

const TEMP_KEYWORDS: &[&str] = &[
    "temp",
    "temps",
    "temperature",
    "temperatura",
    "tmp",
    "reefer",
    "reefers",
    "reading",
    "reads",
    "box",
    "running",
    "holding",
    "marca",
    "thermo",
    "thermostat",
    "termometro",
    "pulp",
    "air",
    "return",
    "supply",
    "sitting",
    "showing",
    "shows",
];
/// Keywords that name a connector-requiring subject: "unit at 34" yes, "unit 5312" no.
const TEMP_SUBJECTS_NEEDING_CONNECTOR: &[&str] = &["unit", "trailer", "caja", "trl"];
const SET_KEYWORDS: &[&str] = &["set", "setpoint", "setting", "sp"];
const TEMP_FILLERS: &[&str] = &[
    "is",
    "at",
    "its",
    "was",
    "now",
    "rn",
    "currently",
    "right",
    "about",
    "around",
    "esta",
    "a",
    "en",
    "de",
    "el",
    "la",
    "to",
    "of",
    "down",
    "steady",
    "solid",
    "point",
    "reefer",
    "temp",
    "holding",
    "running",
    "reading",
    "says",
    "showing",
    "shows",
    "sitting",
    "still",
    "like",
    "check",
];
const FAHRENHEIT_UNITS: &[&str] =
    &["f", "deg", "degs", "degree", "degrees", "grados", "grado", "fahrenheit", "farenheit", "df"];
const CELSIUS_UNITS: &[&str] = &["c", "celsius", "centigrados", "centigrado"];
/// A number followed by one of these is not a temperature.
const NOT_A_TEMP_AFTER: &[&str] = &[
    "am", "pm", "stop", "stops", "miles", "mi", "pallets", "lbs", "percent", "cases", "st", "nd", "rd", "th",
    "ish",
];

const MIN_READING_F: f64 = -60.0;
const MAX_READING_F: f64 = 130.0;

pub(crate) fn temperature_from_tokens(toks: &[Tok<'_>]) -> Option<TempReading> {
    let mut set_point: Option<TempReading> = None;
    for (i, tok) in toks.iter().enumerate() {
        let Some(mut value) = tok.number() else {
            continue;
        };
        let next = toks.get(i + 1);
        let after_next = toks.get(i + 2);
        if next.is_some_and(|n| {
            is_minute_unit(n)
                || is_hour_unit(n)
                || n.is_any_word(NOT_A_TEMP_AFTER)
                || n.is_sym(':')
                || n.is_sym('%')
        }) {
            continue;
        }
        let degree_sign = next.is_some_and(|n| n.is_sym('°'));
        let unit = if degree_sign { after_next } else { next };
        let celsius = unit.is_some_and(|u| u.is_any_word(CELSIUS_UNITS));
        let fahrenheit = unit.is_some_and(|u| u.is_any_word(FAHRENHEIT_UNITS));
        if celsius {
            // Rounded to a tenth so "2c" reads as 35.6, not 35.600000000000001.
            value = ((value * 9.0 / 5.0 + 32.0) * 10.0).round() / 10.0;
        }
        if !(MIN_READING_F..=MAX_READING_F).contains(&value) {
            continue;
        }
        let reading = |evidence| TempReading { fahrenheit: value, evidence };
        if degree_sign || celsius || fahrenheit {
            return Some(reading(TempEvidence::Explicit));
        }
        match temp_keyword_before(toks, i) {
            Some(TempEvidence::Explicit) => return Some(reading(TempEvidence::Explicit)),
            Some(TempEvidence::SetPoint) if set_point.is_none() => {
                set_point = Some(reading(TempEvidence::SetPoint));
            }
            _ => {}
        }
    }
    set_point.or_else(|| bare_number(toks))
}

fn temp_keyword_before(toks: &[Tok<'_>], i: usize) -> Option<TempEvidence> {
    let mut j = i;
    let mut saw_connector = false;
    for _ in 0..4 {
        j = j.checked_sub(1)?;
        let t = toks.get(j)?;
        if t.is_any_word(SET_KEYWORDS) {
            return Some(TempEvidence::SetPoint);
        }
        if t.is_any_word(TEMP_KEYWORDS) {
            return Some(TempEvidence::Explicit);
        }
        if t.is_any_word(TEMP_SUBJECTS_NEEDING_CONNECTOR) {
            return saw_connector.then_some(TempEvidence::Explicit);
        }
        if t.is_any_word(TEMP_FILLERS) || t.is_sym(':') || t.is_sym('=') || t.is_sym('@') || t.is_sym('~') {
            saw_connector = true;
            continue;
        }
        return None;
    }
    None
}

/// The message is only a number, maybe signed or with a degree unit: "34", "-10", "34.5".
fn bare_number(toks: &[Tok<'_>]) -> Option<TempReading> {
    // Question marks and emoji around the number do not change what it is ("34 👍").
    let mut content = toks
        .iter()
        .filter(|t| !(t.kind == TokKind::Sym && (matches!(t.text, "?" | "!") || !t.text.is_ascii())));
    let only = content.next()?;
    if content.next().is_some() {
        return None;
    }
    let value = only.number()?;
    (MIN_READING_F..=MAX_READING_F)
        .contains(&value)
        .then_some(TempReading { fahrenheit: value, evidence: TempEvidence::Bare })
}

// ---------------------------------------------------------------------------
// Stop references
// ---------------------------------------------------------------------------

const PICKUP_WORDS: &[&str] = &[
    "shipper",
    "shippers",
    "pickup",
    "pickups",
    "pu",
    "origin",
    "recoleccion",
    "recogida",
    "recoger",
    "cargar",
    "shiper",
];
const DELIVERY_WORDS: &[&str] = &[
    "receiver",
    "receivers",
    "reciever",
    "recievers",
    "consignee",
    "consignees",
    "delivery",
    "deliver",
    "deliveries",
    "delivering",
    "drop",
    "dropoff",
    "destination",
    "entrega",
    "entregar",
    "destino",
    "receiving",
    "descarga",
    "descargar",
    "consignatario",
    "reciver",
];
const ORDINALS: &[(&str, u32)] = &[
    ("first", 1),
    ("primera", 1),
    ("primer", 1),
    ("second", 2),
    ("segunda", 2),
    ("segundo", 2),
    ("third", 3),
    ("tercera", 3),
    ("tercer", 3),
    ("fourth", 4),
    ("cuarta", 4),
    ("fifth", 5),
    ("quinta", 5),
];
const MAX_STOP_SEQUENCE: u32 = 99;

pub(crate) fn stop_from_tokens(toks: &[Tok<'_>]) -> Option<StopRef> {
    for (i, tok) in toks.iter().enumerate() {
        let next = toks.get(i + 1);
        match tok.kind {
            TokKind::Word if tok.is_any_word(&["stop", "parada", "stp"]) => {
                // "stop 2", "stop #2", "stop no 2"
                let mut j = i + 1;
                if toks.get(j).is_some_and(|t| t.is_sym('#') || t.is_word("no") || t.is_word("number")) {
                    j += 1;
                }
                if let Some(n) =
                    toks.get(j).and_then(Tok::integer).filter(|n| (1..=MAX_STOP_SEQUENCE).contains(n))
                {
                    return Some(StopRef::Sequence(n));
                }
                // "last stop"
                let prev = i.checked_sub(1).and_then(|p| toks.get(p));
                if prev.is_some_and(|p| p.is_any_word(&["last", "final", "ultima"])) {
                    return Some(StopRef::Delivery);
                }
                // "segunda parada"
                if let Some(n) = prev.and_then(ordinal) {
                    return Some(StopRef::Sequence(n));
                }
            }
            TokKind::Word if tok.is_any_word(PICKUP_WORDS) => return Some(StopRef::Pickup),
            TokKind::Word if tok.is_word("pick") && next.is_some_and(|n| n.is_word("up")) => {
                return Some(StopRef::Pickup);
            }
            TokKind::Word if tok.is_any_word(DELIVERY_WORDS) => return Some(StopRef::Delivery),
            TokKind::Word | TokKind::Num => {
                // "2nd stop", "second stop", "primera parada"
                let ordinal_here = ordinal(tok).map(|n| (n, i + 1)).or_else(|| {
                    // "2nd" lexes as "2" + "nd"
                    let n = tok.integer()?;
                    next.filter(|t| t.joined && t.is_any_word(&["st", "nd", "rd", "th"]))?;
                    Some((n, i + 2))
                });
                if let Some((n, after)) = ordinal_here
                    && toks.get(after).is_some_and(|t| t.is_any_word(&["stop", "parada", "drop"]))
                    && (1..=MAX_STOP_SEQUENCE).contains(&n)
                {
                    return Some(StopRef::Sequence(n));
                }
            }
            TokKind::Clock | TokKind::Sym => {}
        }
    }
    None
}

fn ordinal(tok: &Tok<'_>) -> Option<u32> {
    if tok.kind != TokKind::Word {
        return None;
    }
    ORDINALS.iter().find(|(w, _)| *w == tok.text).map(|&(_, n)| n)
}

#[cfg(test)]
mod tests;
