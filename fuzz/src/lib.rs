//! The fuzz harnesses of load-agent (docs/fuzzing.md). Each `pub fn` takes the raw fuzzer input
//! and panics only on a bug: a decoder or parser that panics, or a documented contract that does
//! not hold (a decoded record that does not re-encode to stable bytes, an extracted ETA out of
//! its documented range, ...). Errors (`Err`) are the expected answer to garbage and are ignored.
//!
//! The fuzz targets in `fuzz_targets/` are one line each over these functions, and
//! `tests/corpus.rs` replays the committed corpus and regressions through them on stable Rust.

use std::path::Path;
use std::sync::LazyLock;

use chrono::{DateTime, Duration, FixedOffset, TimeZone, Utc};
use load_agent_agent::templates::{Fields, PLACEHOLDERS};
use load_agent_agent::{Templates, parse_sop, sop::spec_from_json};
use load_agent_avro::{
    SchemaId, decode_action_command, decode_inbound, decode_log_entry, encode_action_command, encode_inbound,
    encode_log_entry,
};
use load_agent_domain::Language;
use load_agent_runtime::eval::parse_scenario;
use load_agent_triage::{
    EtaValue, Meridiem, TriageInput, TriageModel, extract_eta, extract_stop_ref, extract_temperature,
    resolve_eta,
};

// ---------------------------------------------------------------------------------------------
// avro_decode
// ---------------------------------------------------------------------------------------------

/// The decoder `avro_decode` drives, chosen by the first input byte (`% 4`); the rest is the
/// record bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvroMode {
    /// `decode_inbound`: a Confluent-framed `InboundEvent` (the consumer's input).
    Inbound = 0,
    /// `decode_action_command`: a Confluent-framed `ActionCommand` (the delivery side).
    ActionCommand = 1,
    /// `decode_log_entry` with schema id 3 (`LogEntry` v1): a stored log entry body.
    LogEntryV1 = 2,
    /// `decode_log_entry` with schema id 4 (`LogEntry` v2, the newest).
    LogEntryV2 = 3,
}

impl AvroMode {
    pub const ALL: [AvroMode; 4] =
        [AvroMode::Inbound, AvroMode::ActionCommand, AvroMode::LogEntryV1, AvroMode::LogEntryV2];

    pub fn of(byte: u8) -> AvroMode {
        AvroMode::ALL[usize::from(byte % 4)]
    }

    /// The seed prefix of this mode.
    pub fn byte(self) -> u8 {
        self as u8
    }
}

/// Decodes the input with the decoder its first byte names. A record that decodes must
/// re-encode, decode again, and re-encode to the same bytes (the codecs are stable: what is read
/// can be written and read back unchanged).
pub fn avro_decode(data: &[u8]) {
    let Some((&mode, bytes)) = data.split_first() else { return };
    match AvroMode::of(mode) {
        AvroMode::Inbound => {
            let Ok(event) = decode_inbound(bytes) else { return };
            let once = encode_inbound(&event);
            let again = decode_inbound(&once)
                .unwrap_or_else(|e| panic!("a decoded InboundEvent does not decode after re-encoding: {e}"));
            assert_eq!(encode_inbound(&again), once, "InboundEvent re-encoding is not stable");
        }
        AvroMode::ActionCommand => {
            let Ok(cmd) = decode_action_command(bytes) else { return };
            let encode = |c: &load_agent_avro::DecodedActionCommand| {
                encode_action_command(&c.to_action(), &c.load_id, c.load_version, &c.addresses)
            };
            let once = encode(&cmd);
            let again = decode_action_command(&once)
                .unwrap_or_else(|e| panic!("a decoded ActionCommand does not decode after re-encoding: {e}"));
            assert_eq!(encode(&again), once, "ActionCommand re-encoding is not stable");
        }
        AvroMode::LogEntryV1 | AvroMode::LogEntryV2 => {
            let id = if AvroMode::of(mode) == AvroMode::LogEntryV1 { SchemaId(3) } else { SchemaId(4) };
            let Ok(entry) = decode_log_entry(id, bytes) else { return };
            let (new_id, once) = encode_log_entry(&entry);
            let again = decode_log_entry(new_id, &once)
                .unwrap_or_else(|e| panic!("a decoded LogEntry does not decode after re-encoding: {e}"));
            assert_eq!(encode_log_entry(&again), (new_id, once), "LogEntry re-encoding is not stable");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// scenario_parse
// ---------------------------------------------------------------------------------------------

/// Parses the input (lossy UTF-8) as a scenario file; errors must render.
pub fn scenario_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match parse_scenario(Path::new("fuzz.yaml"), &text) {
        Ok(s) => {
            assert!(!s.name.trim().is_empty(), "a parsed scenario has an empty name");
            assert!(s.steps.windows(2).all(|w| w[0].at <= w[1].at), "parsed steps go back in time");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// sop_parse
// ---------------------------------------------------------------------------------------------

/// The shipped templates, which the shipped SOPs are checked against.
pub static SHIPPED_TEMPLATES: LazyLock<Templates> = LazyLock::new(|| {
    Templates::parse("sops/templates.yaml", include_str!("../../sops/templates.yaml"))
        .unwrap_or_else(|e| panic!("the shipped templates do not parse: {e}"))
});

/// The input (lossy UTF-8) as: an SOP spec file (`parse_sop` with the shipped templates), a
/// templates file (`Templates::parse`, then every template rendered in both languages), and the
/// JSON a model returns for `load-agent sop compile` (`spec_from_json`, whose YAML must parse
/// back to the same spec with `parse_sop`).
pub fn sop_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let templates = &*SHIPPED_TEMPLATES;

    if let Err(e) = parse_sop("fuzz.yaml", &text, templates) {
        let _ = e.to_string();
    }

    match Templates::parse("fuzz.yaml", &text) {
        Ok(parsed) => render_all(&parsed, &text),
        Err(e) => {
            let _ = e.to_string();
        }
    }

    if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text)
        && let Ok((sop, yaml)) = spec_from_json("fuzz.json", json, templates)
    {
        let back = parse_sop("fuzz.yaml", &yaml, templates)
            .unwrap_or_else(|e| panic!("the YAML spec_from_json renders does not parse: {e}\n{yaml}"));
        assert_eq!(back.spec, sop.spec, "spec_from_json's YAML reads back as another spec");
    }
}

fn render_all(templates: &Templates, text: &str) {
    let Ok(ids) = serde_yaml::from_str::<std::collections::BTreeMap<String, serde_yaml::Value>>(text) else {
        return;
    };
    let mut fields = Fields::new();
    for (i, name) in PLACEHOLDERS.iter().enumerate() {
        // Values with braces: a filled value is never read as a placeholder again.
        fields.insert(name, format!("v{i}{{{name}}}"));
    }
    for id in ids.keys() {
        assert!(templates.get(id).is_some(), "template {id:?} parsed but cannot be found");
        for lang in [Language::En, Language::Es] {
            let _ = templates.render(id, lang, &fields);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// triage_extract
// ---------------------------------------------------------------------------------------------

/// Instants `resolve_eta` is asked at: ordinary ones, around midnight and the year end, the US
/// DST change, and the ends of the range its callers use (`now` is the worker's clock, never an
/// input; the triage proptests use the same ±5e9 s range). chrono's own range ends are out of
/// its domain: there `now.with_timezone(offset)` has no local date and chrono panics.
static NOWS: LazyLock<Vec<DateTime<Utc>>> = LazyLock::new(|| {
    let at = |s: &str| DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).ok();
    let mut nows: Vec<DateTime<Utc>> =
        ["2026-03-02T13:13:00Z", "2026-12-31T23:50:00Z", "2026-03-08T08:15:00Z", "1970-01-01T00:00:00Z"]
            .into_iter()
            .filter_map(at)
            .collect();
    nows.extend([-5_000_000_000, 5_000_000_000].into_iter().filter_map(|s| DateTime::from_timestamp(s, 0)));
    nows
});

/// Stop offsets: UTC, US Central, +14 h and the ends of `FixedOffset`'s range.
static OFFSETS: LazyLock<Vec<FixedOffset>> = LazyLock::new(|| {
    [0, -6 * 3600, 14 * 3600, -86_399, 86_399].into_iter().filter_map(FixedOffset::east_opt).collect()
});

/// The first input byte picks the message context (bits 0-1 the open ask, 2-3 the language hint,
/// 4-5 the sender's role) and seeds a synthetic clock-time ETA; the rest (lossy UTF-8) is the
/// message text. Runs the three extractors and the classifier, checks their documented
/// contracts, and resolves every ETA at several instants and stop offsets.
pub fn triage_extract(data: &[u8]) {
    let Some((&ctx, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);

    let eta = extract_eta(&text);
    check_eta(eta, "extract_eta");
    if let Some(t) = extract_temperature(&text) {
        assert!(t.is_finite(), "extract_temperature returned {t}");
    }
    let _ = extract_stop_ref(&text);

    let pick = |shift: u32, options: [Option<&'static str>; 4]| options[usize::from((ctx >> shift) & 3)];
    let input = TriageInput {
        text: &text,
        open_ask: pick(0, [None, Some("eta_request"), Some("reefer_temp"), Some("ask:x")]),
        lang: pick(2, [None, Some("en"), Some("es"), Some("xx")]),
        from_role: pick(4, [None, Some("driver"), Some("carrier_dispatcher"), Some("broker")]),
    };
    let triage = TriageModel::embedded().classify(&input);
    assert!(
        triage.probability.is_finite() && (0.0..=1.0).contains(&triage.probability),
        "classify returned probability {}",
        triage.probability
    );
    check_eta(triage.values.eta, "classify");
    if let Some(t) = triage.values.temperature_f {
        assert!(t.is_finite(), "classify returned temperature {t}");
    }

    // Out of the extractor's range on purpose: `resolve_eta` is public and takes any value.
    let synthetic = EtaValue::At {
        hour: ctx,
        minute: ctx.rotate_left(3),
        meridiem: [None, Some(Meridiem::Am), Some(Meridiem::Pm), None][usize::from(ctx >> 6)],
        tomorrow: ctx & 0x20 != 0,
    };
    for value in [eta, triage.values.eta, Some(synthetic)].into_iter().flatten() {
        for &now in NOWS.iter() {
            for &offset in OFFSETS.iter() {
                check_resolved(&value, now, offset, resolve_eta(&value, now, offset));
            }
        }
    }
}

/// The contract of `EtaValue` (crates/triage/src/extract.rs).
fn check_eta(eta: Option<EtaValue>, who: &str) {
    match eta {
        None | Some(EtaValue::Now) => {}
        Some(EtaValue::In { minutes }) => assert!(minutes >= 1, "{who}: In {{ minutes: {minutes} }}"),
        Some(EtaValue::At { hour, minute, meridiem, .. }) => {
            assert!(hour <= 23 && minute <= 59, "{who}: At {hour}:{minute}");
            assert!(hour <= 12 || meridiem.is_none(), "{who}: At {hour} with {meridiem:?}");
        }
    }
}

/// The contract of `resolve_eta`: `Now` is now, `In` is not before now, a clock time without a
/// day hint is the first candidate at or after `now - 30 min` within the next days (or `now`
/// when there is none).
fn check_resolved(value: &EtaValue, now: DateTime<Utc>, offset: FixedOffset, got: DateTime<Utc>) {
    match *value {
        EtaValue::Now => assert_eq!(got, now),
        EtaValue::In { .. } => assert!(got >= now, "{value:?} at {now} resolved to {got}"),
        EtaValue::At { tomorrow: false, .. } => {
            let earliest = now.checked_sub_signed(Duration::minutes(30)).unwrap_or(now);
            let latest = now.checked_add_signed(Duration::days(3)).unwrap_or(DateTime::<Utc>::MAX_UTC);
            assert!(
                got == now || (earliest <= got && got <= latest),
                "{value:?} at {now} (offset {offset}) resolved to {got}"
            );
        }
        EtaValue::At { tomorrow: true, .. } => {
            let today = now.with_timezone(&offset).date_naive();
            let local = offset.from_utc_datetime(&got.naive_utc()).date_naive();
            assert!(
                got == now || local > today,
                "{value:?} at {now} (offset {offset}) resolved to {got}, not after today"
            );
        }
    }
}
