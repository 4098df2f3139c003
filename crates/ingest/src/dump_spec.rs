//! Recorded dumps from a readable spec (`evals/dumps/specs/*.yaml`), deterministically: the
//! same spec always gives the same bytes, so the dumps of `evals/dumps/` can be regenerated.
//!
//! ```yaml
//! topic: load-agent.events        # default
//! partitions: 4                   # records land on murmur2(key) % partitions, like Java clients
//! templates:                      # LoadRegistered fields shared by several loads
//!   client_a: {client: client_a, contacts: [...], stops: [...]}
//! loads:                          # one per load; `template` fields, then the load's own
//!   - {load_id: "481207", template: client_a}
//! records:                        # sorted by `at` when generated
//!   - {at: "2026-03-02T06:50:00-06:00", key: "481207", event: {type: load_registered}}
//!   - {at: "2026-03-02T07:00:00-06:00", key: "481207",
//!      event: {id: ping_0700, type: ping, stop: 1, delay_risk: high}}
//!   - {at: "2026-03-02T07:05:00-06:00", key: "481207", raw_text: "not avro"}   # malformed
//! ```
//!
//! An `event` is the JSON form of an `InboundEvent` (`type` and its fields) with `id` for its
//! event id; `load_id` defaults to the key, `occurred_at` to `at`, a ping's `recorded_at` to
//! `at`, and a `load_registered` takes its load from `loads` (event id
//! `load_registered:<load_id>`). `raw_text` / `raw_b64` give the value's bytes as they are.
//! `headers` default by event type (`source: sms-gateway`, ...).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use chrono::{DateTime, FixedOffset};
use load_agent_avro::encode_inbound;
use load_agent_domain::InboundEvent;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::record::InboundRecord;
use crate::topics::EVENTS_TOPIC;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    #[serde(default = "default_topic")]
    topic: String,
    #[serde(default = "one")]
    partitions: u32,
    #[serde(default)]
    templates: BTreeMap<String, Map<String, Value>>,
    #[serde(default)]
    loads: Vec<Map<String, Value>>,
    records: Vec<RecordSpec>,
}

fn default_topic() -> String {
    EVENTS_TOPIC.into()
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordSpec {
    at: DateTime<FixedOffset>,
    key: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    event: Option<Map<String, Value>>,
    raw_text: Option<String>,
    raw_b64: Option<String>,
}

/// Builds the records a spec describes.
pub fn generate_dump(spec_yaml: &str) -> Result<Vec<InboundRecord>, String> {
    let spec: Spec = serde_yaml::from_str(spec_yaml).map_err(|e| format!("dump spec: {e}"))?;
    if spec.partitions == 0 {
        return Err("dump spec: partitions must be at least 1".into());
    }
    let mut loads: BTreeMap<String, Value> = BTreeMap::new();
    for (i, load) in spec.loads.iter().enumerate() {
        let mut merged = match load.get("template").and_then(Value::as_str) {
            Some(name) => spec
                .templates
                .get(name)
                .cloned()
                .ok_or_else(|| format!("loads[{i}]: no template {name:?}"))?,
            None => Map::new(),
        };
        for (k, v) in load {
            if k != "template" {
                merged.insert(k.clone(), v.clone());
            }
        }
        let id = merged
            .get("load_id")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("loads[{i}]: no load_id"))?
            .to_owned();
        loads.insert(id, Value::Object(merged));
    }
    // Producers write in time order: records are sorted by `at` (stable: the spec's order
    // stands between records of one instant).
    let mut specs: Vec<(usize, &RecordSpec)> = spec.records.iter().enumerate().collect();
    specs.sort_by_key(|(_, r)| r.at);
    let mut next_offset: BTreeMap<i32, i64> = BTreeMap::new();
    let mut records = Vec::with_capacity(specs.len());
    for (i, r) in specs {
        let at = |e: String| format!("records[{i}]: {e}");
        let (value, kind) = match (&r.event, &r.raw_text, &r.raw_b64) {
            (Some(event), None, None) => {
                let event = build_event(event, r, &loads).map_err(at)?;
                (encode_inbound(&event), Some(event.kind_str()))
            }
            (None, Some(text), None) => (text.as_bytes().to_vec(), None),
            (None, None, Some(b64)) => (B64.decode(b64).map_err(|e| at(format!("raw_b64: {e}")))?, None),
            _ => return Err(at("exactly one of event, raw_text, raw_b64".into())),
        };
        let partition = match &r.key {
            Some(k) => partition_for(k.as_bytes(), spec.partitions),
            None => 0,
        };
        let offset = next_offset.entry(partition).or_insert(0);
        let headers = r.headers.clone().unwrap_or_else(|| default_headers(kind));
        records.push(InboundRecord {
            topic: spec.topic.clone(),
            partition,
            offset: *offset,
            timestamp_ms: Some(r.at.timestamp_millis()),
            key: r.key.as_ref().map(|k| k.as_bytes().to_vec()),
            headers: headers.into_iter().map(|(k, v)| (k, v.into_bytes())).collect(),
            value: Some(value),
        });
        *offset += 1;
    }
    Ok(records)
}

fn build_event(
    spec: &Map<String, Value>,
    r: &RecordSpec,
    loads: &BTreeMap<String, Value>,
) -> Result<InboundEvent, String> {
    let mut e = spec.clone();
    let kind = e.get("type").and_then(Value::as_str).ok_or("event: no type")?.to_owned();
    let load_id = match (e.get("load_id").and_then(Value::as_str), &r.key) {
        (Some(l), _) => l.to_owned(),
        (None, Some(k)) => k.clone(),
        (None, None) => return Err("event: no load_id and no key".into()),
    };
    let at = Value::String(r.at.to_rfc3339());
    let id = match e.remove("id") {
        Some(Value::String(id)) => id,
        Some(_) => return Err("event: id must be a string".into()),
        None if kind == "load_registered" => format!("load_registered:{load_id}"),
        None => return Err("event: no id".into()),
    };
    if kind == "load_registered" && !e.contains_key("load") {
        let load = loads
            .get(&load_id)
            .cloned()
            .ok_or_else(|| format!("event: load {load_id:?} is not in `loads`"))?;
        e.insert("load".into(), load);
    }
    if kind == "ping" && !e.contains_key("recorded_at") {
        e.insert("recorded_at".into(), at.clone());
    }
    e.insert("event_id".into(), Value::String(id));
    e.insert("load_id".into(), Value::String(load_id));
    e.entry("occurred_at").or_insert(at);
    serde_json::from_value(Value::Object(e)).map_err(|err| format!("event: {err}"))
}

fn default_headers(kind: Option<&str>) -> BTreeMap<String, String> {
    let source = match kind {
        Some("load_registered") => "tms",
        Some("sms") => "sms-gateway",
        Some("email") => "email-gateway",
        Some("slack") => "slack-bot",
        Some("ping" | "stop_status") => "tracking",
        Some("attachment") => "document-service",
        _ => "unknown",
    };
    BTreeMap::from([("source".to_owned(), source.to_owned())])
}

/// The partition a Java client (and librdkafka's `murmur2_random`) picks for a key.
pub fn partition_for(key: &[u8], partitions: u32) -> i32 {
    let positive = murmur2(key) & 0x7fff_ffff;
    (positive % partitions.max(1)) as i32
}

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if let Some(first) = rest.first() {
        h ^= u32::from(*first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use load_agent_avro::decode_inbound;
    use load_agent_domain::EventKind;

    use super::*;

    #[test]
    fn murmur2_matches_kafkas_reference_values() {
        // From Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 4] = [
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key) as i32, expected, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn a_spec_becomes_framed_records_on_their_key_partition() {
        let spec = r#"
partitions: 4
templates:
  a:
    client: client_a
    contacts: [{id: drv, role: driver, name: Luis, phone: "+13125550111"}]
    stops:
      - {sequence: 1, kind: pickup, name: DC, address: "1 Dock Rd", appointment: "2026-03-02T08:00:00-06:00", po_numbers: ["55821"]}
      - {sequence: 2, kind: delivery, name: Store, address: "88 Main St", appointment: "2026-03-02T16:00:00-05:00"}
loads:
  - {load_id: "481207", template: a}
records:
  - {at: "2026-03-02T06:50:00-06:00", key: "481207", event: {type: load_registered}}
  - {at: "2026-03-02T07:00:00-06:00", key: "481207", event: {id: ping_0700, type: ping, stop: 1, delay_risk: high}}
  - {at: "2026-03-02T07:01:00-06:00", key: "481207", raw_text: "not avro", headers: {source: junk}}
"#;
        let records = generate_dump(spec).expect("valid spec");
        assert_eq!(records.len(), 3);
        let p = partition_for(b"481207", 4);
        assert!(records.iter().all(|r| r.partition == p));
        assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), [0, 1, 2]);
        let reg = decode_inbound(records[0].value.as_deref().unwrap_or_default()).expect("avro");
        assert_eq!(reg.event_id, "load_registered:481207");
        assert!(matches!(reg.kind, EventKind::LoadRegistered { ref load } if load.client == "client_a"));
        let ping = decode_inbound(records[1].value.as_deref().unwrap_or_default()).expect("avro");
        assert!(matches!(ping.kind, EventKind::Ping { recorded_at, .. } if recorded_at == ping.occurred_at));
        assert_eq!(records[1].header("source"), Some(&b"tracking"[..]));
        assert_eq!(records[2].value.as_deref(), Some(&b"not avro"[..]));
        assert_eq!(generate_dump(spec).expect("again"), records, "deterministic");
    }
}
