//! Committed bytes: the golden InboundEvent records (guard against accidental schema changes)
//! and log entries written with LogEntry v1 (evolution: they must stay readable under every
//! later version). Each version of a record reads data written with the previous one.
//!
//! Regenerate (only when a fixture is added, never to make a failing test pass):
//! `cargo test -p load-agent-avro --test fixtures_and_evolution -- --ignored regenerate`

mod common;

use std::path::PathBuf;

use apache_avro::schema_compatibility::SchemaCompatibility;
use load_agent_avro::registry::records;
use load_agent_avro::{
    EmbeddedRegistry, SchemaId, decode_inbound, decode_log_entry, encode_inbound, log_entry,
};
use load_agent_domain::LogEntry;

/// LogEntry v1 in `schemas/avro/ids.json`.
const LOG_ENTRY_V1: SchemaId = SchemaId(3);

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn read_fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn goldens() -> Vec<(&'static str, load_agent_domain::InboundEvent)> {
    let events = common::every_event_kind();
    vec![
        ("inbound_event_v1_sms.bin", common::sms_event()),
        ("inbound_event_v1_load_registered.bin", events[0].clone()),
    ]
}

fn v1_entries() -> Vec<(&'static str, LogEntry)> {
    vec![
        ("log_entry_v1_decision.bin", LogEntry::Decision(common::full_decision())),
        ("log_entry_v1_load_registered.bin", LogEntry::Event(common::every_event_kind()[0].clone())),
    ]
}

#[test]
#[ignore = "writes the committed fixtures"]
fn regenerate() {
    for (name, event) in goldens() {
        std::fs::write(fixture(name), encode_inbound(&event)).expect("write golden");
    }
    for (name, entry) in v1_entries() {
        let body = log_entry::encode_log_entry_as(LOG_ENTRY_V1, &entry).expect("v1 encodes");
        std::fs::write(fixture(name), body).expect("write v1 fixture");
    }
}

#[test]
fn golden_inbound_events_decode_to_the_expected_events() {
    for (name, expected) in goldens() {
        let bytes = read_fixture(name);
        assert_eq!(&bytes[..5], &[0, 0, 0, 0, 1], "{name}: framed with InboundEvent v1 (id 1)");
        assert_eq!(decode_inbound(&bytes).as_ref(), Ok(&expected), "{name}");
        // While v1 is the newest InboundEvent, encoding is byte-for-byte stable too.
        if load_agent_avro::inbound::latest_inbound_schema_id() == SchemaId(1) {
            assert_eq!(encode_inbound(&expected), bytes, "{name}: the InboundEvent encoding changed");
        }
    }
}

#[test]
fn log_entries_written_with_v1_decode_under_the_newest_version() {
    let reg = EmbeddedRegistry::global();
    assert_eq!(reg.schema_by_id(LOG_ENTRY_V1).map(|s| s.label()).as_deref(), Some("LogEntry.v1"));
    assert!(reg.latest(records::LOG_ENTRY).is_some_and(|s| s.version > 1));
    for (name, expected) in v1_entries() {
        let bytes = read_fixture(name);
        let (entry, meta) = log_entry::decode_log_entry_with_meta(LOG_ENTRY_V1, &bytes)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(entry, expected, "{name}");
        assert_eq!(common::appointment_offsets(&entry), common::appointment_offsets(&expected));
        assert_eq!(meta.written_by, None, "v1 has no written_by: the v2 default applies");
        // The same bytes under the newest id are not a valid v2 body.
        let newest = reg.latest(records::LOG_ENTRY).map(|s| s.id).expect("newest");
        assert!(decode_log_entry(newest, &bytes).is_err(), "{name}: v1 bytes must be read with the v1 id");
    }
}

/// For every record with more than one version: the schemas are compatible (the newer reads
/// the older) and data written with each version decodes.
#[test]
fn each_version_reads_data_written_with_the_previous_one() {
    let reg = EmbeddedRegistry::global();
    let mut records: Vec<&str> = reg.schemas().iter().map(|s| s.record.as_str()).collect();
    records.dedup();
    let mut checked = 0;
    for record in records {
        let versions = reg.versions(record);
        for pair in versions.windows(2) {
            let (old, new) = (pair[0], pair[1]);
            assert!(
                SchemaCompatibility::can_read(&old.schema, &new.schema).is_ok(),
                "{} cannot read {}",
                new.label(),
                old.label()
            );
            match record {
                records::LOG_ENTRY => {
                    for entry in common::every_log_entry() {
                        let body =
                            log_entry::encode_log_entry_as(old.id, &entry).expect("old version encodes");
                        assert_eq!(
                            decode_log_entry(old.id, &body).as_ref(),
                            Ok(&entry),
                            "{} via {}",
                            entry.entry_id(),
                            old.label()
                        );
                    }
                }
                other => panic!("{other} has several versions: add its data check here"),
            }
            checked += 1;
        }
    }
    assert!(checked >= 1);
}
