//! Writes the seed corpus of every fuzz target from real inputs (docs/fuzzing.md "Corpus"):
//!
//! - `avro_decode`: the committed Avro fixtures (crates/avro/tests/fixtures), the records of the
//!   recorded topic dumps (evals/dumps/*.jsonl, including their DLQ records), the sample values
//!   of the avro tests (every event kind, every action, every log entry, in every schema version)
//!   and the events of the scenario evals, each behind its mode byte (`AvroMode`).
//! - `scenario_parse`: evals/scenarios/*.yaml.
//! - `sop_parse`: sops/templates.yaml, sops/*/v*.yaml and each SOP spec as JSON.
//! - `triage_extract`: up to 300 message texts of evals/triage/*.jsonl, behind the context byte
//!   built from the line's `open_ask`, `lang` and `from_role`.
//!
//! Run from anywhere: `scripts/fuzz.sh seed` (or `cargo run --manifest-path fuzz/Cargo.toml
//! --example seed`). Seeds are named `seed-*`; existing files of the same name are overwritten,
//! nothing else is touched.

#[path = "../../crates/avro/tests/common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use base64::Engine;
use load_agent_avro::log_entry::encode_log_entry_as;
use load_agent_avro::{Addresses, SchemaId, encode_action_command, encode_inbound, encode_log_entry};
use load_agent_domain::{InboundEvent, LoadRegistered, LogEntry};
use load_agent_fuzz::AvroMode;
use load_agent_runtime::eval::{StepEvent, load_scenario};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let corpus = root.join("fuzz/corpus");
    let mut w = Writer { corpus, count: Default::default() };

    avro(&root, &mut w)?;
    for p in files(&root.join("evals/scenarios"), "yaml")? {
        w.put("scenario_parse", &stem(&p), &std::fs::read(&p)?)?;
    }
    sop(&root, &mut w)?;
    triage(&root, &mut w)?;

    for (target, n) in &w.count {
        println!("{target}: {n} seeds");
    }
    Ok(())
}

struct Writer {
    corpus: PathBuf,
    count: std::collections::BTreeMap<&'static str, usize>,
}

impl Writer {
    fn put(&mut self, target: &'static str, name: &str, bytes: &[u8]) -> Res<()> {
        let dir = self.corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        *self.count.entry(target).or_default() += 1;
        Ok(())
    }

    fn avro(&mut self, mode: AvroMode, name: &str, bytes: &[u8]) -> Res<()> {
        let mut input = vec![mode.byte()];
        input.extend_from_slice(bytes);
        self.put("avro_decode", name, &input)
    }
}

fn files(dir: &Path, ext: &str) -> Res<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    Ok(out)
}

fn stem(p: &Path) -> String {
    p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

fn avro(root: &Path, w: &mut Writer) -> Res<()> {
    // Committed fixtures: framed InboundEvents and LogEntry v1 bodies.
    for p in files(&root.join("crates/avro/tests/fixtures"), "bin")? {
        let name = stem(&p);
        let mode = if name.starts_with("inbound_event") { AvroMode::Inbound } else { AvroMode::LogEntryV1 };
        w.avro(mode, &format!("fixture-{name}"), &std::fs::read(&p)?)?;
    }
    // Recorded topic dumps: the values of load-agent.events as the consumer reads them.
    for p in files(&root.join("evals/dumps"), "jsonl")? {
        let name = stem(&p);
        if name.ends_with(".golden") {
            continue;
        }
        for (i, line) in std::fs::read_to_string(&p)?.lines().enumerate() {
            let record: serde_json::Value = serde_json::from_str(line)?;
            if let Some(b64) = record.get("value_b64").and_then(|v| v.as_str()) {
                let bytes = base64::engine::general_purpose::STANDARD.decode(b64)?;
                w.avro(AvroMode::Inbound, &format!("dump-{name}-{i:03}"), &bytes)?;
            }
        }
    }
    // The avro tests' sample values: every event kind, every action, every log entry.
    for (i, event) in common::every_event_kind().iter().enumerate() {
        w.avro(AvroMode::Inbound, &format!("event-{i:02}"), &encode_inbound(event))?;
    }
    let addresses = [
        Addresses::NONE,
        Addresses {
            phone: Some("+13125550111".into()),
            email: Some("dana@carrier.example".into()),
            slack_channel: Some("#acme-loads".into()),
        },
    ];
    for (i, action) in common::every_action().iter().enumerate() {
        let a = &addresses[i % 2];
        w.avro(
            AvroMode::ActionCommand,
            &format!("action-{i:02}"),
            &encode_action_command(action, "481207", 7, a),
        )?;
    }
    for (i, entry) in common::every_log_entry().iter().enumerate() {
        w.avro(AvroMode::LogEntryV2, &format!("entry-v2-{i:02}"), &encode_log_entry(entry).1)?;
        if let Ok(body) = encode_log_entry_as(SchemaId(3), entry) {
            w.avro(AvroMode::LogEntryV1, &format!("entry-v1-{i:02}"), &body)?;
        }
    }
    // The scenario evals' events: realistic texts in both languages, every event kind.
    for p in files(&root.join("evals/scenarios"), "yaml")? {
        let s = load_scenario(&p)?;
        let name = stem(&p);
        let reg = registration(&s.load, s.start);
        w.avro(AvroMode::Inbound, &format!("scenario-{name}-reg"), &encode_inbound(&reg))?;
        for (i, step) in s.steps.iter().enumerate() {
            if let Some(StepEvent::New { id, kind, occurred_at }) = &step.event {
                let event = InboundEvent {
                    event_id: id.clone(),
                    load_id: s.load.load_id.clone(),
                    occurred_at: *occurred_at,
                    kind: kind.clone(),
                };
                w.avro(AvroMode::Inbound, &format!("scenario-{name}-{i:02}"), &encode_inbound(&event))?;
                if i == 0 {
                    let entry = LogEntry::Event(event);
                    w.avro(
                        AvroMode::LogEntryV2,
                        &format!("scenario-{name}-{i:02}-entry"),
                        &encode_log_entry(&entry).1,
                    )?;
                }
            }
        }
    }
    Ok(())
}

fn registration(load: &LoadRegistered, at: chrono::DateTime<chrono::Utc>) -> InboundEvent {
    InboundEvent {
        event_id: format!("load_registered:{}", load.load_id),
        load_id: load.load_id.clone(),
        occurred_at: at,
        kind: load_agent_domain::EventKind::LoadRegistered { load: load.clone() },
    }
}

fn sop(root: &Path, w: &mut Writer) -> Res<()> {
    w.put("sop_parse", "templates", &std::fs::read(root.join("sops/templates.yaml"))?)?;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("sops"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        for p in files(&dir, "yaml")? {
            let name = format!("{}-{}", stem(&dir), stem(&p));
            let text = std::fs::read_to_string(&p)?;
            w.put("sop_parse", &name, text.as_bytes())?;
            // The same spec as the JSON a model returns for `load-agent sop compile`.
            let value: serde_json::Value = serde_yaml::from_str(&text)?;
            w.put("sop_parse", &format!("{name}-json"), serde_json::to_string_pretty(&value)?.as_bytes())?;
        }
    }
    Ok(())
}

/// The context byte of `load_agent_fuzz::triage_extract`.
fn context_byte(line: &serde_json::Value) -> u8 {
    let idx = |field: &str, options: [&str; 3]| -> u8 {
        match line.get(field).and_then(|v| v.as_str()) {
            None => 0,
            Some(v) => options.iter().position(|o| *o == v).map_or(3, |i| i as u8 + 1),
        }
    };
    idx("open_ask", ["eta_request", "reefer_temp", "\u{0}"])
        | idx("lang", ["en", "es", "\u{0}"]) << 2
        | idx("from_role", ["driver", "carrier_dispatcher", "broker"]) << 4
}

fn triage(root: &Path, w: &mut Writer) -> Res<()> {
    const MAX: usize = 300;
    let mut seen = BTreeSet::new();
    let mut lines = Vec::new();
    for p in files(&root.join("evals/triage"), "jsonl")? {
        for line in std::fs::read_to_string(&p)?.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line)?;
            let text = v.get("text").and_then(|t| t.as_str()).unwrap_or_default().to_owned();
            if seen.insert(text.clone()) {
                lines.push((context_byte(&v), text));
            }
        }
    }
    // An even sample over both files (every intent and language appears throughout them).
    let stride = lines.len().div_ceil(MAX).max(1);
    for (i, (ctx, text)) in lines.iter().enumerate().step_by(stride) {
        let mut input = vec![*ctx];
        input.extend_from_slice(text.as_bytes());
        w.put("triage_extract", &format!("{i:04}"), &input)?;
    }
    Ok(())
}
