//! `InboundEvent` on topic `load-agent.events`: Confluent-framed Avro.
//!
//! JSON form (HTTP): [`crate::json`], a wire type of its own with the same field names.

use apache_avro::Schema;
use load_agent_domain::InboundEvent;

use crate::codec;
use crate::confluent;
use crate::error::DecodeError;
use crate::registry::{SchemaId, records};
use crate::wire;

/// The Confluent-framed value of `event` under the newest embedded `InboundEvent` schema.
pub fn encode_inbound(event: &InboundEvent) -> Vec<u8> {
    encode_inbound_with_id(latest_inbound_schema_id(), event)
}

/// Frames `event` with an id given by a schema registry for the newest `InboundEvent` schema
/// (the body is the same; only the id differs).
pub fn encode_inbound_with_id(schema_id: SchemaId, event: &InboundEvent) -> Vec<u8> {
    let mut out = codec::framed_buffer(schema_id, 128);
    codec::latest(records::INBOUND_EVENT).write(&mut out, wire::InboundEvent::from(event));
    out
}

/// The unframed Avro body of `event` under the newest schema.
pub fn encode_inbound_body(event: &InboundEvent) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    codec::latest(records::INBOUND_EVENT).write(&mut out, wire::InboundEvent::from(event));
    out
}

/// The id of the newest embedded `InboundEvent` schema.
pub fn latest_inbound_schema_id() -> SchemaId {
    codec::latest(records::INBOUND_EVENT).entry.id
}

/// Decodes a Confluent-framed record value: reads the writer schema by id from the embedded
/// registry, reads the body by name into the newest wire struct and validates it into the
/// domain type. Never panics on any input.
pub fn decode_inbound(bytes: &[u8]) -> Result<InboundEvent, DecodeError> {
    let (id, body) = confluent::unframe(bytes)?;
    decode_inbound_body(id, body)
}

/// Decodes an unframed body written with embedded schema `id`.
pub fn decode_inbound_body(id: SchemaId, body: &[u8]) -> Result<InboundEvent, DecodeError> {
    let wire: wire::InboundEvent = codec::for_record(id, records::INBOUND_EVENT)?.read(body)?;
    InboundEvent::try_from(wire).map_err(codec::field_error::<wire::InboundEvent>(id))
}

/// Decodes an unframed body written with `writer_schema` (fetched from a schema registry by
/// `id`), resolving it by name to the newest reader.
pub fn decode_inbound_with_schema(
    id: SchemaId,
    writer_schema: &Schema,
    body: &[u8],
) -> Result<InboundEvent, DecodeError> {
    let wire: wire::InboundEvent = codec::read_with_schema(id, writer_schema, body)?;
    InboundEvent::try_from(wire).map_err(codec::field_error::<wire::InboundEvent>(id))
}

/// Frames a wire struct as it is, without the domain's checks: for tools and tests that need
/// to produce records the domain would never write (e.g. an unknown symbol).
pub fn encode_inbound_wire(event: wire::InboundEvent) -> Vec<u8> {
    let codec = codec::latest(records::INBOUND_EVENT);
    let mut out = codec::framed_buffer(codec.entry.id, 128);
    codec.write(&mut out, event);
    out
}

/// Decodes a framed record into the wire struct only, without the domain's checks (for
/// inspecting a DLQ record).
pub fn decode_inbound_wire(bytes: &[u8]) -> Result<wire::InboundEvent, DecodeError> {
    let (id, body) = confluent::unframe(bytes)?;
    codec::for_record(id, records::INBOUND_EVENT)?.read(body)
}
