//! Broken input gives a descriptive error, never a panic: framing, unknown ids, truncated and
//! random bodies, unknown event types, unknown symbols, bad appointments.

mod common;

use apache_avro::Schema;
use apache_avro::types::Value;
use load_agent_avro::error::FieldProblem;
use load_agent_avro::{
    DecodeError, SchemaId, WireError, confluent, decode_action_command, decode_inbound, decode_log_entry,
    encode_inbound, encode_log_entry, inbound, wire,
};
use load_agent_domain::LogEntry;
use proptest::prelude::*;

#[test]
fn wrong_magic_byte() {
    let mut bytes = encode_inbound(&common::sms_event());
    bytes[0] = 1;
    let err = decode_inbound(&bytes).expect_err("bad magic");
    assert_eq!(err, DecodeError::Wire(WireError::BadMagic { found: 1 }));
    assert_eq!(err.code(), "bad_magic");
    assert!(err.to_string().contains("magic byte 0x01"), "{err}");
}

#[test]
fn short_and_empty_buffers() {
    assert_eq!(decode_inbound(&[]), Err(DecodeError::Wire(WireError::Empty)));
    for len in 1..5 {
        assert_eq!(decode_inbound(&[0; 4][..len]), Err(DecodeError::Wire(WireError::TooShort { len })));
    }
}

#[test]
fn unknown_schema_id() {
    let framed = confluent::frame(SchemaId(4242), b"\x02ab");
    let err = decode_inbound(&framed).expect_err("unknown id");
    assert_eq!(err, DecodeError::UnknownSchemaId(SchemaId(4242)));
    assert_eq!(err.code(), "unknown_schema_id");
    assert!(err.to_string().contains("4242"));
    assert_eq!(decode_log_entry(SchemaId(0), b""), Err(DecodeError::UnknownSchemaId(SchemaId(0))));
}

#[test]
fn a_schema_id_of_another_record() {
    let (id, body) = encode_log_entry(&LogEntry::Event(common::sms_event()));
    let err = decode_inbound(&confluent::frame(id, &body)).expect_err("a LogEntry id on the events topic");
    assert!(matches!(err, DecodeError::WrongRecord { id: SchemaId(4), .. }), "{err}");
    assert!(err.to_string().contains("load_agent.LogEntry"), "{err}");
    let err =
        decode_action_command(&encode_inbound(&common::sms_event())).expect_err("an event is no command");
    assert_eq!(err.code(), "wrong_record");
}

#[test]
fn truncated_bodies() {
    for event in common::every_event_kind() {
        let bytes = encode_inbound(&event);
        for cut in 5..bytes.len() {
            let err = decode_inbound(&bytes[..cut]).expect_err("truncated");
            assert!(
                matches!(err, DecodeError::Body { .. } | DecodeError::Field { .. }),
                "cut at {cut}: {err}"
            );
        }
    }
    for entry in common::every_log_entry() {
        let (id, body) = encode_log_entry(&entry);
        for cut in 0..body.len() {
            assert!(decode_log_entry(id, &body[..cut]).is_err(), "{} cut at {cut}", entry.entry_id());
        }
    }
}

#[test]
fn trailing_bytes() {
    let mut bytes = encode_inbound(&common::sms_event());
    bytes.extend_from_slice(b"junk");
    let err = decode_inbound(&bytes).expect_err("trailing");
    assert!(matches!(err, DecodeError::TrailingBytes { count: 4, .. }), "{err}");
}

fn wire_of(event: &load_agent_domain::InboundEvent) -> wire::InboundEvent {
    wire::InboundEvent::from(event)
}

#[test]
fn an_unknown_symbol_names_the_field() {
    let mut w = wire_of(&common::every_event_kind()[0]);
    let wire::EventPayload::LoadRegistered(load) = &mut w.payload else { panic!("load_registered") };
    load.contacts[1].role = "pilot".into();
    let err = decode_inbound(&inbound::encode_inbound_wire(w)).expect_err("unknown role");
    assert_eq!(err.code(), "invalid_field");
    assert_eq!(err.field_path(), Some("payload.contacts[1].role"));
    let text = err.to_string();
    assert!(text.contains("\"pilot\"") && text.contains("carrier_dispatcher"), "{text}");

    let mut w = wire_of(&common::every_event_kind()[6]);
    let wire::EventPayload::Ping(p) = &mut w.payload else { panic!("ping") };
    p.delay_risk = "extreme".into();
    let err = decode_inbound(&inbound::encode_inbound_wire(w)).expect_err("unknown band");
    assert_eq!(err.field_path(), Some("payload.delay_risk"));
}

#[test]
fn a_bad_appointment_names_the_field() {
    for bad in ["2026-03-02 08:00", "2026-03-02T08:00:00", "tomorrow", "2026-13-02T08:00:00-06:00"] {
        let mut w = wire_of(&common::every_event_kind()[0]);
        let wire::EventPayload::LoadRegistered(load) = &mut w.payload else { panic!("load_registered") };
        load.stops[1].appointment = bad.into();
        let err = decode_inbound(&inbound::encode_inbound_wire(w)).expect_err("bad appointment");
        assert_eq!(err.field_path(), Some("payload.stops[1].appointment"), "{bad}");
        let DecodeError::Field { error, .. } = &err else { panic!("{err}") };
        assert!(matches!(error.problem(), FieldProblem::BadTimestamp { found, .. } if found == bad), "{err}");
        assert!(err.to_string().contains("RFC 3339"), "{err}");
    }
}

#[test]
fn a_negative_u32_names_the_field() {
    let mut w = wire_of(&common::every_event_kind()[6]);
    let wire::EventPayload::Ping(p) = &mut w.payload else { panic!("ping") };
    p.stop = -1;
    let err = decode_inbound(&inbound::encode_inbound_wire(w)).expect_err("negative stop");
    assert_eq!(err.field_path(), Some("payload.stop"));
    assert!(err.to_string().contains("-1 is out of range"), "{err}");
}

/// A writer with a newer event kind (a branch this reader does not know): the error names the
/// field and the unknown type, and lists the known ones.
#[test]
fn an_unknown_event_type_names_the_field() {
    let registry = load_agent_avro::EmbeddedRegistry::global();
    let mut json: serde_json::Value =
        serde_json::from_str(registry.latest("InboundEvent").expect("schema").text).expect("json");
    let payload = json["fields"]
        .as_array_mut()
        .and_then(|fields| fields.iter_mut().find(|f| f["name"] == "payload"))
        .expect("payload field");
    payload["type"].as_array_mut().expect("union").push(
        serde_json::json!({"type": "record", "name": "Fax", "fields": [{"name": "pages", "type": "long"}]}),
    );
    let schema = Schema::parse(&json).expect("newer schema");
    let value = Value::Record(vec![
        ("event_id".into(), Value::String("fax_1".into())),
        ("load_id".into(), Value::String("481207".into())),
        ("occurred_at".into(), Value::TimestampMicros(1_772_456_400_000_000)),
        ("payload".into(), Value::Union(9, Box::new(Value::Record(vec![("pages".into(), Value::Long(3))])))),
    ]);
    let body = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
        .build()
        .and_then(|w| w.write_value_to_vec(value))
        .expect("encodes");
    let err = inbound::decode_inbound_with_schema(SchemaId(77), &schema, &body).expect_err("unknown kind");
    assert_eq!(err.field_path(), Some("payload"));
    let text = err.to_string();
    assert!(text.contains("unknown type \"Fax\"") && text.contains("LoadRegistered|Sms|"), "{text}");

    // The same writer's known kinds still decode: resolution is by name, not position.
    let sms = common::sms_event();
    let body = inbound::encode_inbound_body(&sms);
    assert_eq!(inbound::decode_inbound_with_schema(SchemaId(77), &schema, &body), Ok(sms));
}

#[test]
fn an_inconsistent_action_command_is_refused() {
    let action = &common::every_action()[0];
    let bytes =
        load_agent_avro::encode_action_command(action, "481207", 1, &load_agent_avro::Addresses::NONE);
    let mut w = load_agent_avro::action_command::decode_action_command_wire(&bytes).expect("wire");
    w.action_kind = "tms_note".into();
    let err = decode_action_command(&load_agent_avro::action_command::encode_action_command_wire(w.clone()))
        .expect_err("kind mismatch");
    assert_eq!(err.field_path(), Some("action_kind"));
    w.action_kind = "send_sms".into();
    w.attempt = None;
    let err = decode_action_command(&load_agent_avro::action_command::encode_action_command_wire(w))
        .expect_err("half an ask");
    assert_eq!(err.field_path(), Some("ask_id"));
}

fn valid_samples() -> Vec<Vec<u8>> {
    common::every_event_kind().iter().map(encode_inbound).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_inbound(&bytes);
        let _ = decode_action_command(&bytes);
        for id in 0..6 {
            let _ = decode_log_entry(SchemaId(id), &bytes);
        }
    }

    #[test]
    fn arbitrary_bodies_behind_a_valid_header_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_inbound(&confluent::frame(SchemaId(1), &body));
        let _ = decode_action_command(&confluent::frame(SchemaId(2), &body));
        let _ = decode_log_entry(SchemaId(3), &body);
        let _ = decode_log_entry(SchemaId(4), &body);
    }

    #[test]
    fn mutated_valid_records_never_panic(
        sample in 0usize..17,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let samples = valid_samples();
        let mut bytes = samples[sample % samples.len()].clone();
        for (index, byte) in flips {
            let i = index.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = decode_inbound(&bytes);
        if bytes.len() > 5 {
            let _ = decode_log_entry(SchemaId(4), &bytes[5..]);
        }
    }
}
