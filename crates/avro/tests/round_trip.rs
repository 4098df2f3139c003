//! domain -> Avro -> domain is the identity, for every event kind, every action body and full
//! log entries; the wire unions are in schema order; the JSON form round-trips too.

mod common;

use apache_avro::Schema;
use load_agent_avro::action_command::{self, NO_DESTINATION};
use load_agent_avro::registry::records;
use load_agent_avro::{
    Addresses, EmbeddedRegistry, SchemaId, confluent, decode_action_command, decode_inbound,
    decode_log_entry, encode_action_command, encode_inbound, encode_log_entry, log_entry, wire,
};
use load_agent_domain::{ActionBody, Contact, InboundEvent, Language, LogEntry, Role};

#[test]
fn every_event_kind_round_trips() {
    let events = common::every_event_kind();
    let kinds: std::collections::BTreeSet<_> = events.iter().map(InboundEvent::kind_str).collect();
    assert_eq!(kinds.len(), 9, "every EventKind is covered: {kinds:?}");
    for event in events {
        let bytes = encode_inbound(&event);
        assert_eq!(bytes[0], 0, "magic byte");
        assert_eq!(confluent::unframe(&bytes).map(|(id, _)| id), Ok(SchemaId(1)));
        let back = decode_inbound(&bytes).unwrap_or_else(|e| panic!("{}: {e}", event.event_id));
        assert_eq!(back, event);
        let entry = LogEntry::Event(event);
        assert_eq!(common::appointment_offsets(&LogEntry::Event(back)), common::appointment_offsets(&entry));
    }
}

#[test]
fn appointment_keeps_its_offset_and_fraction() {
    let event = &common::every_event_kind()[0];
    let back = decode_inbound(&encode_inbound(event)).expect("decodes");
    let offsets = common::appointment_offsets(&LogEntry::Event(back));
    assert_eq!(offsets, ["2026-03-02T08:00:00-06:00", "2026-03-02T16:30:15.250+05:30"]);
}

#[test]
fn every_action_body_round_trips_as_an_action_command() {
    let actions = common::every_action();
    let kinds: std::collections::BTreeSet<_> = actions.iter().map(|a| a.kind()).collect();
    assert_eq!(kinds.len(), 9, "every ActionKind is covered");
    for (version, action) in actions.iter().enumerate() {
        let version = version as u64 + 7;
        for addresses in [Addresses::NONE, full_addresses()] {
            let bytes = encode_action_command(action, "481207", version, &addresses);
            let cmd = decode_action_command(&bytes).unwrap_or_else(|e| panic!("{}: {e}", action.key));
            assert_eq!(cmd.to_action(), *action);
            assert_eq!(cmd.load_id, "481207");
            assert_eq!(cmd.load_version, version);
            assert_eq!(cmd.action_kind, action.kind());
            assert_eq!(cmd.destination, action.body.destination());
            assert_eq!(cmd.contact_id.as_deref(), action.body.contact_id());
            // Only the address the body uses travels.
            let expected = match (&action.body, addresses.is_empty()) {
                (_, true) => Addresses::NONE,
                (ActionBody::SendSms { .. }, _) => {
                    Addresses { phone: addresses.phone.clone(), ..Addresses::NONE }
                }
                (ActionBody::SendEmail { .. }, _) => {
                    Addresses { email: addresses.email.clone(), ..Addresses::NONE }
                }
                (ActionBody::PostSlack { .. }, _) => {
                    Addresses { slack_channel: addresses.slack_channel.clone(), ..Addresses::NONE }
                }
                _ => Addresses::NONE,
            };
            assert_eq!(cmd.addresses, expected, "{}", action.key);
        }
    }
}

fn full_addresses() -> Addresses {
    Addresses {
        phone: Some("+13125550111".into()),
        email: Some("dana@carrier.example".into()),
        slack_channel: Some("#acme-loads".into()),
    }
}

#[test]
fn addresses_of_a_contact() {
    let c = Contact {
        id: "drv".into(),
        role: Role::Driver,
        name: "Luis".into(),
        phone: Some("+1".into()),
        email: None,
        slack: Some("@luis".into()),
        language: Language::En,
    };
    assert_eq!(
        Addresses::of_contact(&c),
        Addresses { phone: Some("+1".into()), email: None, slack_channel: Some("@luis".into()) }
    );
}

#[test]
fn a_command_carries_the_ask_step_and_the_noop_has_no_destination() {
    let actions = common::every_action();
    let step = actions.iter().find(|a| a.ask.is_some()).expect("a step action");
    let cmd =
        decode_action_command(&encode_action_command(step, "481207", 3, &Addresses::NONE)).expect("decodes");
    assert_eq!(cmd.ask, Some(common::step_ref(1)));
    let noop = actions.iter().find(|a| a.is_noop()).expect("a noop");
    let cmd =
        decode_action_command(&encode_action_command(noop, "481207", 3, &Addresses::NONE)).expect("decodes");
    assert_eq!(cmd.destination, None);
    let w = wire::ActionCommand::from(&cmd);
    assert_eq!(w.destination, NO_DESTINATION);
}

#[test]
fn every_log_entry_round_trips_under_the_newest_version() {
    for entry in common::every_log_entry() {
        let (id, body) = encode_log_entry(&entry);
        assert_eq!(id, SchemaId(4), "LogEntry v2 is the newest");
        let back = decode_log_entry(id, &body).unwrap_or_else(|e| panic!("{}: {e}", entry.entry_id()));
        assert_eq!(back, entry);
        assert_eq!(common::appointment_offsets(&back), common::appointment_offsets(&entry));
        let (_, meta) = log_entry::decode_log_entry_with_meta(id, &body).expect("decodes");
        assert_eq!(meta.written_by.as_deref(), Some(log_entry::WRITTEN_BY));
    }
}

#[test]
fn decisions_keep_every_transition_usage_and_intent() {
    let decision = common::full_decision();
    let (id, body) = encode_log_entry(&LogEntry::Decision(decision.clone()));
    let Ok(LogEntry::Decision(back)) = decode_log_entry(id, &body) else { panic!("a decision") };
    assert_eq!(back.transitions.len(), 6);
    assert_eq!(back.llm_usage, decision.llm_usage);
    assert_eq!(back.intent, decision.intent);
    assert_eq!(back.contact_updates, decision.contact_updates);
    assert_eq!(back, decision);
}

/// The wire unions write their branch position as the union index: it must be the position
/// in the newest schema, found here by walking the parsed schema.
#[test]
fn wire_unions_are_in_schema_order() {
    let reg = EmbeddedRegistry::global();
    let inbound = &reg.latest(records::INBOUND_EVENT).expect("schema").schema;
    let command = &reg.latest(records::ACTION_COMMAND).expect("schema").schema;
    let log = &reg.latest(records::LOG_ENTRY).expect("schema").schema;
    assert_eq!(union_branches(inbound, &["payload"]), wire::EventPayload::BRANCHES);
    assert_eq!(union_branches(command, &["payload"]), wire::ActionBody::BRANCHES);
    assert_eq!(union_branches(log, &["entry"]), wire::LogEntryBody::BRANCHES);
    let decision = named(log, "DecisionRecord");
    assert_eq!(union_branches(decision, &["transitions"]), wire::AskTransition::BRANCHES);
    assert_eq!(union_branches(decision, &["contact_updates"]), wire::ContactUpdate::BRANCHES);
    assert_eq!(union_branches(named(log, "Action"), &["body"]), wire::ActionBody::BRANCHES);
    assert_eq!(union_branches(named(command, "PostSlack"), &["target"]), wire::SlackTarget::BRANCHES);
}

fn union_branches(record: &Schema, path: &[&str]) -> Vec<String> {
    let Schema::Record(r) = record else { panic!("not a record") };
    let field = r.fields.iter().find(|f| f.name == path[0]).expect("field");
    let union = match &field.schema {
        Schema::Union(u) => u,
        Schema::Array(a) => match a.items.as_ref() {
            Schema::Union(u) => u,
            other => panic!("array of {other:?}"),
        },
        other => panic!("{other:?}"),
    };
    union
        .variants()
        .iter()
        .map(|v| match v {
            Schema::Record(r) => r.name.name().to_owned(),
            Schema::Ref { name } => name.name().to_owned(),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// The definition of a named record anywhere inside `schema`.
fn named<'a>(schema: &'a Schema, name: &str) -> &'a Schema {
    fn walk<'a>(s: &'a Schema, name: &str) -> Option<&'a Schema> {
        match s {
            Schema::Record(r) if r.name.name() == name => Some(s),
            Schema::Record(r) => r.fields.iter().find_map(|f| walk(&f.schema, name)),
            Schema::Union(u) => u.variants().iter().find_map(|v| walk(v, name)),
            Schema::Array(a) => walk(&a.items, name),
            _ => None,
        }
    }
    walk(schema, name).unwrap_or_else(|| panic!("{name} not defined"))
}

/// The JSON form of an inbound event (HTTP) is the serde JSON of the domain type.
#[test]
fn json_form_of_every_event_round_trips() {
    for event in common::every_event_kind() {
        let json = serde_json::to_string(&event).expect("serializes");
        let back: InboundEvent = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, event);
        let value: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(value["type"], event.kind_str());
    }
}

#[test]
fn the_body_alone_decodes_with_the_embedded_schema() {
    let event = common::sms_event();
    let body = load_agent_avro::inbound::encode_inbound_body(&event);
    let framed = encode_inbound(&event);
    assert_eq!(&framed[5..], &body[..]);
    assert_eq!(load_agent_avro::inbound::decode_inbound_body(SchemaId(1), &body), Ok(event));
    let cmd_body =
        action_command::encode_action_command_body(&common::every_action()[0], "481207", 1, &Addresses::NONE);
    assert_eq!(
        &encode_action_command(&common::every_action()[0], "481207", 1, &Addresses::NONE)[5..],
        &cmd_body[..]
    );
}
