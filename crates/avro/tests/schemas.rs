//! The schema files themselves: all embedded, all parsing, and every named type shared by the
//! newest versions defined identically in each file (the files are self-contained, so a shared
//! type is copied; this test keeps the copies equal).

use std::collections::BTreeMap;
use std::path::PathBuf;

use load_agent_avro::EmbeddedRegistry;
use load_agent_avro::registry::SCHEMA_FILES;
use serde_json::Value;

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/avro")
}

#[test]
fn every_schema_file_is_embedded_with_an_id() {
    let mut on_disk: Vec<String> = std::fs::read_dir(schema_dir())
        .expect("schemas/avro")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".avsc"))
        .collect();
    on_disk.sort();
    let mut embedded: Vec<String> = SCHEMA_FILES.iter().map(|(n, _)| (*n).to_owned()).collect();
    embedded.sort();
    assert_eq!(on_disk, embedded, "add new .avsc files to registry::SCHEMA_FILES and ids.json");
    for (name, text) in SCHEMA_FILES {
        let on_disk = std::fs::read_to_string(schema_dir().join(name)).expect("read");
        assert_eq!(&on_disk, text, "{name}");
    }
    assert!(EmbeddedRegistry::load().is_ok());
}

#[test]
fn file_names_follow_record_and_version() {
    for s in EmbeddedRegistry::global().schemas() {
        assert_eq!(s.file, format!("{}.avsc", s.label()));
        assert!(s.record.starts_with("load_agent."), "{}", s.record);
    }
}

/// Named type definitions of one file, with references expanded into full definitions and
/// docs dropped (docs may differ; structure may not).
fn named_types(text: &str) -> BTreeMap<String, Value> {
    fn collect(v: &Value, defs: &mut BTreeMap<String, Value>) {
        match v {
            Value::Array(items) => items.iter().for_each(|i| collect(i, defs)),
            Value::Object(map) => {
                if matches!(map.get("type").and_then(Value::as_str), Some("record" | "enum" | "fixed"))
                    && let Some(name) = map.get("name").and_then(Value::as_str)
                {
                    defs.insert(name.to_owned(), v.clone());
                }
                map.values().for_each(|x| collect(x, defs));
            }
            _ => {}
        }
    }
    fn expand(v: &Value, defs: &BTreeMap<String, Value>, depth: usize) -> Value {
        assert!(depth < 64, "recursive schema");
        match v {
            Value::String(s) if defs.contains_key(s.trim_start_matches("load_agent.")) => {
                expand(&defs[s.trim_start_matches("load_agent.")], defs, depth + 1)
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| expand(i, defs, depth + 1)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| *k != "doc" && *k != "namespace")
                    .map(|(k, x)| {
                        let x = if k == "type" || k == "items" || k == "fields" {
                            expand(x, defs, depth + 1)
                        } else {
                            x.clone()
                        };
                        (k.clone(), x)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let json: Value = serde_json::from_str(text).expect("json");
    let mut defs = BTreeMap::new();
    collect(&json, &mut defs);
    defs.iter().map(|(name, def)| (name.clone(), expand(def, &defs, 0))).collect()
}

#[test]
fn shared_named_types_are_identical_across_the_newest_versions() {
    let reg = EmbeddedRegistry::global();
    let mut newest: BTreeMap<&str, &load_agent_avro::registry::RegisteredSchema> = BTreeMap::new();
    for s in reg.schemas() {
        let e = newest.entry(s.record.as_str()).or_insert(s);
        if s.version > e.version {
            *e = s;
        }
    }
    let mut seen: BTreeMap<String, (String, Value)> = BTreeMap::new();
    let mut shared = 0;
    for s in newest.values() {
        for (name, def) in named_types(s.text) {
            match seen.get(&name) {
                Some((file, first)) => {
                    assert_eq!(first, &def, "{name} differs between {file} and {}", s.file);
                    shared += 1;
                }
                None => {
                    seen.insert(name, (s.file.to_owned(), def));
                }
            }
        }
    }
    assert!(shared >= 20, "InboundEvent and the action bodies are shared: {shared}");
}
