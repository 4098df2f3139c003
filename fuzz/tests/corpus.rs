//! Replays the committed corpus and the crash regressions of every target through its harness on
//! stable Rust, without sanitizers: a quick check that no committed input panics
//! (`cargo test --manifest-path fuzz/Cargo.toml`, or `scripts/fuzz.sh replay`).

use std::path::PathBuf;

fn replay(target: &str, harness: fn(&[u8])) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else { continue };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths.into_iter().filter(|p| p.is_file()) {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let r = std::panic::catch_unwind(|| harness(&data));
            assert!(r.is_ok(), "{target}: {} panics", p.display());
            n += 1;
        }
    }
    assert!(n > 0, "{target}: no corpus (run scripts/fuzz.sh seed)");
}

#[test]
fn avro_decode() {
    replay("avro_decode", load_agent_fuzz::avro_decode);
}

#[test]
fn scenario_parse() {
    replay("scenario_parse", load_agent_fuzz::scenario_parse);
}

#[test]
fn sop_parse() {
    replay("sop_parse", load_agent_fuzz::sop_parse);
}

#[test]
fn triage_extract() {
    replay("triage_extract", load_agent_fuzz::triage_extract);
}

/// The harness reaches its deepest checks from real inputs: the shipped SOPs, as the JSON a
/// model returns, pass `spec_from_json` and read back from its YAML (the `sop_parse` oracle).
#[test]
fn shipped_sops_reach_the_spec_from_json_round_trip() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let templates = &*load_agent_fuzz::SHIPPED_TEMPLATES;
    for client in ["client_a", "client_b"] {
        let text = std::fs::read_to_string(root.join("sops").join(client).join("v1.yaml")).expect("sop");
        let json: serde_json::Value = serde_yaml::from_str(&text).expect("yaml");
        let (sop, yaml) = load_agent_agent::sop::spec_from_json("t.json", json, templates).expect(client);
        let back = load_agent_agent::parse_sop("t.yaml", &yaml, templates).expect("yaml parses");
        assert_eq!(back.spec, sop.spec);
    }
}
