//! `ActionCommand` on topics `load-agent.actions.<service>`: what the outbox relay publishes
//! and the delivery services read (topics.md). Confluent-framed Avro.

use apache_avro::Schema;
use load_agent_domain::{Action, ActionBody, ActionKind, AskStepRef, Destination};

use crate::codec;
use crate::confluent;
use crate::convert::{
    ACTION_KINDS, Addresses, DESTINATIONS, body_from_wire, body_to_wire, symbol, u32_of, u64_of,
};
use crate::error::{DecodeError, FieldError, FieldProblem};
use crate::registry::{SchemaId, records};
use crate::wire;

/// The record header that carries the idempotency key next to the value (topics.md).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// The value `destination` takes for a noop (kept with the destination symbols it extends).
pub use crate::convert::NO_DESTINATION;

/// The decoded, validated form of the Avro `ActionCommand` record ([`wire::ActionCommand`]):
/// what a delivery service acts on. (The relay's in-process request is the runtime's
/// `DeliveryCommand`.)
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedActionCommand {
    /// The action's idempotency key; delivery services dedupe on it.
    pub idempotency_key: String,
    /// Always `body.kind()`.
    pub action_kind: ActionKind,
    pub load_id: String,
    /// The version of the load's log the action was committed at.
    pub load_version: u64,
    /// Always `body.destination()`; `None` only for a noop.
    pub destination: Option<Destination>,
    /// The ask step the action takes, if any.
    pub ask: Option<AskStepRef>,
    /// Always `body.contact_id()`.
    pub contact_id: Option<String>,
    pub body: ActionBody,
    /// Resolved addresses of the contact (phone for SMS, email, Slack channel).
    pub addresses: Addresses,
}

impl DecodedActionCommand {
    pub fn new(action: &Action, load_id: &str, load_version: u64, addresses: &Addresses) -> Self {
        DecodedActionCommand {
            idempotency_key: action.key.clone(),
            action_kind: action.kind(),
            load_id: load_id.to_owned(),
            load_version,
            destination: action.body.destination(),
            ask: action.ask.clone(),
            contact_id: action.body.contact_id().map(str::to_owned),
            body: action.body.clone(),
            addresses: addresses.clone(),
        }
    }

    /// The domain action the command carries.
    pub fn to_action(&self) -> Action {
        Action { key: self.idempotency_key.clone(), ask: self.ask.clone(), body: self.body.clone() }
    }

    pub fn into_action(self) -> Action {
        Action { key: self.idempotency_key, ask: self.ask, body: self.body }
    }
}

fn to_wire(action: &Action, load_id: &str, load_version: u64, addresses: &Addresses) -> wire::ActionCommand {
    wire::ActionCommand {
        idempotency_key: action.key.clone(),
        action_kind: action.kind().as_str().to_owned(),
        load_id: load_id.to_owned(),
        load_version: i64::try_from(load_version).unwrap_or(i64::MAX),
        destination: action.body.destination().map_or(NO_DESTINATION, Destination::as_str).to_owned(),
        ask_id: action.ask.as_ref().map(|a| a.ask_id.clone()),
        ask_type: action.ask.as_ref().map(|a| a.ask_type.clone()),
        attempt: action.ask.as_ref().map(|a| i64::from(a.attempt)),
        contact_id: action.body.contact_id().map(str::to_owned),
        payload: body_to_wire(&action.body, addresses),
    }
}

impl From<&DecodedActionCommand> for wire::ActionCommand {
    fn from(c: &DecodedActionCommand) -> Self {
        to_wire(&c.to_action(), &c.load_id, c.load_version, &c.addresses)
    }
}

fn inconsistent(field: &str, what: String) -> FieldError {
    FieldError::new(field, FieldProblem::Inconsistent(what))
}

impl TryFrom<wire::ActionCommand> for DecodedActionCommand {
    type Error = FieldError;

    fn try_from(w: wire::ActionCommand) -> Result<Self, FieldError> {
        let action_kind = symbol(w.action_kind, "action_kind", ActionKind::parse, ACTION_KINDS)?;
        let destination = symbol(
            w.destination,
            "destination",
            |s| if s == NO_DESTINATION { Some(None) } else { Destination::parse(s).map(Some) },
            DESTINATIONS,
        )?;
        let (body, addresses) = body_from_wire(w.payload).map_err(|e| e.under("payload"))?;
        if body.kind() != action_kind {
            return Err(inconsistent(
                "action_kind",
                format!("is {} but the payload is {}", action_kind.as_str(), body.kind().as_str()),
            ));
        }
        if body.destination() != destination {
            return Err(inconsistent(
                "destination",
                format!(
                    "is {} but a {} goes to {}",
                    destination.map_or(NO_DESTINATION, Destination::as_str),
                    action_kind.as_str(),
                    body.destination().map_or(NO_DESTINATION, Destination::as_str)
                ),
            ));
        }
        if w.contact_id.as_deref() != body.contact_id() {
            return Err(inconsistent(
                "contact_id",
                format!("is {:?} but the payload addresses {:?}", w.contact_id, body.contact_id()),
            ));
        }
        let ask = match (w.ask_id, w.ask_type, w.attempt) {
            (None, None, None) => None,
            (Some(ask_id), Some(ask_type), Some(attempt)) => {
                Some(AskStepRef { ask_id, ask_type, attempt: u32_of(attempt, "attempt")? })
            }
            _ => {
                return Err(inconsistent(
                    "ask_id",
                    "ask_id, ask_type and attempt must be all set or all null".into(),
                ));
            }
        };
        Ok(DecodedActionCommand {
            idempotency_key: w.idempotency_key,
            action_kind,
            load_id: w.load_id,
            load_version: u64_of(w.load_version, "load_version")?,
            destination,
            ask,
            contact_id: w.contact_id,
            body,
            addresses,
        })
    }
}

/// The Confluent-framed `ActionCommand` for an outbox row: the action, its load, the log
/// version it was committed at and the resolved addresses of its contact (`Addresses::NONE`
/// when it addresses none). The relay also sets the record header [`IDEMPOTENCY_KEY_HEADER`] to
/// `action.key`.
pub fn encode_action_command(
    action: &Action,
    load_id: &str,
    load_version: u64,
    addresses: &Addresses,
) -> Vec<u8> {
    encode_action_command_with_id(latest_action_command_schema_id(), action, load_id, load_version, addresses)
}

/// As [`encode_action_command`], framed with an id given by a schema registry for the newest
/// `ActionCommand` schema.
pub fn encode_action_command_with_id(
    schema_id: SchemaId,
    action: &Action,
    load_id: &str,
    load_version: u64,
    addresses: &Addresses,
) -> Vec<u8> {
    let mut out = codec::framed_buffer(schema_id, 192);
    codec::latest(records::ACTION_COMMAND).write(&mut out, to_wire(action, load_id, load_version, addresses));
    out
}

/// The unframed Avro body (for a schema registry encoder).
pub fn encode_action_command_body(
    action: &Action,
    load_id: &str,
    load_version: u64,
    addresses: &Addresses,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(192);
    codec::latest(records::ACTION_COMMAND).write(&mut out, to_wire(action, load_id, load_version, addresses));
    out
}

pub fn latest_action_command_schema_id() -> SchemaId {
    codec::latest(records::ACTION_COMMAND).entry.id
}

/// Decodes and validates a Confluent-framed `ActionCommand` (the delivery side).
pub fn decode_action_command(bytes: &[u8]) -> Result<DecodedActionCommand, DecodeError> {
    let (id, body) = confluent::unframe(bytes)?;
    let wire: wire::ActionCommand = codec::for_record(id, records::ACTION_COMMAND)?.read(body)?;
    DecodedActionCommand::try_from(wire).map_err(codec::field_error::<wire::ActionCommand>(id))
}

/// Decodes an unframed body written with `writer_schema` (fetched from a schema registry).
pub fn decode_action_command_with_schema(
    id: SchemaId,
    writer_schema: &Schema,
    body: &[u8],
) -> Result<DecodedActionCommand, DecodeError> {
    let wire: wire::ActionCommand = codec::read_with_schema(id, writer_schema, body)?;
    DecodedActionCommand::try_from(wire).map_err(codec::field_error::<wire::ActionCommand>(id))
}

/// Frames a wire struct as it is, without the domain's checks (tools and tests).
pub fn encode_action_command_wire(command: wire::ActionCommand) -> Vec<u8> {
    let codec = codec::latest(records::ACTION_COMMAND);
    let mut out = codec::framed_buffer(codec.entry.id, 192);
    codec.write(&mut out, command);
    out
}

/// Decodes a framed record into the wire struct only, without the domain's checks.
pub fn decode_action_command_wire(bytes: &[u8]) -> Result<wire::ActionCommand, DecodeError> {
    let (id, body) = confluent::unframe(bytes)?;
    codec::for_record(id, records::ACTION_COMMAND)?.read(body)
}
