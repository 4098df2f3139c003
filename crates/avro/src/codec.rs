//! One reader and one writer per embedded schema, built once, and the generic encode/decode
//! steps shared by the record modules.

use std::sync::LazyLock;

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::ResolvedSchema;
use apache_avro::writer::datum::GenericDatumWriter;

use crate::datum::{Ctx, FromDatum, ToDatum, WireRecord};
use crate::error::{DecodeError, FieldError};
use crate::registry::{EmbeddedRegistry, RegisteredSchema, SchemaId, short_name};

pub(crate) struct Codec {
    pub(crate) entry: &'static RegisteredSchema,
    names: ResolvedSchema<'static>,
    reader: GenericDatumReader<'static>,
    writer: GenericDatumWriter<'static>,
}

static CODECS: LazyLock<Vec<Codec>> = LazyLock::new(|| {
    EmbeddedRegistry::global()
        .schemas()
        .iter()
        .map(|entry| {
            // Compile-time inputs checked by the tests: a failure is a build defect.
            Codec::new(entry).unwrap_or_else(|e| panic!("embedded schema {} is unusable: {e}", entry.file))
        })
        .collect()
});

impl Codec {
    fn new(entry: &'static RegisteredSchema) -> Result<Self, apache_avro::Error> {
        Ok(Codec {
            entry,
            names: ResolvedSchema::try_from(&entry.schema)?,
            reader: GenericDatumReader::builder(&entry.schema).build()?,
            writer: GenericDatumWriter::builder(&entry.schema).build()?,
        })
    }

    /// Appends the Avro body of `wire` to `out`.
    ///
    /// The wire structs mirror the newest schemas and the tests encode every record, body and
    /// transition through here, so a value that does not match its schema is a build defect,
    /// not a runtime condition: it panics rather than writing unreadable bytes.
    pub(crate) fn write<W: ToDatum + WireRecord>(&self, out: &mut Vec<u8>, wire: W) {
        if let Err(e) = self.writer.write_value(out, wire.to_datum()) {
            panic!("{} does not match schema {}: {e}", W::NAME, self.entry.label());
        }
    }

    pub(crate) fn read<W: FromDatum + WireRecord>(&self, body: &[u8]) -> Result<W, DecodeError> {
        read_body(&self.reader, &self.entry.schema, &self.names, self.entry.id, body)
    }
}

/// The codec of an embedded schema id.
pub(crate) fn by_id(id: SchemaId) -> Option<&'static Codec> {
    CODECS.iter().find(|c| c.entry.id == id)
}

/// The codec of the newest version of an embedded record.
pub(crate) fn latest(record: &'static str) -> &'static Codec {
    CODECS
        .iter()
        .filter(|c| c.entry.record == record)
        .max_by_key(|c| c.entry.version)
        .unwrap_or_else(|| panic!("no embedded schema for {record}"))
}

/// The codec of `id`, checking that it is a version of `record`.
pub(crate) fn for_record(id: SchemaId, record: &'static str) -> Result<&'static Codec, DecodeError> {
    let codec = by_id(id).ok_or(DecodeError::UnknownSchemaId(id))?;
    if codec.entry.record != record {
        return Err(DecodeError::WrongRecord { id, expected: record, found: codec.entry.record.clone() });
    }
    Ok(codec)
}

fn read_body<W: FromDatum + WireRecord>(
    reader: &GenericDatumReader<'_>,
    schema: &Schema,
    names: &ResolvedSchema<'_>,
    id: SchemaId,
    body: &[u8],
) -> Result<W, DecodeError> {
    let mut input = BodyReader { rest: body, read_past_end: false };
    let value = reader.read_value(&mut input);
    if input.read_past_end {
        return Err(DecodeError::Body {
            id,
            record: record_name(schema),
            reason: "truncated: the body ends inside the record".into(),
        });
    }
    let value =
        value.map_err(|e| DecodeError::Body { id, record: record_name(schema), reason: e.to_string() })?;
    if !input.rest.is_empty() {
        return Err(DecodeError::TrailingBytes { id, record: record_name(schema), count: input.rest.len() });
    }
    W::from_datum(value, schema, Ctx { names: names.get_names() }).map_err(field_error::<W>(id))
}

/// The body being decoded. `apache_avro` reads a union index at end of input as `null`, so a
/// body cut just before a trailing optional field would decode "successfully"; a complete body
/// is never read past its end, so any such read marks the body as truncated.
///
/// A read past the end is also an error, and not `UnexpectedEof`: `apache_avro` turns that kind
/// (and only that kind) into the `null` union, so with it an array of unions whose block count
/// says millions of items, at the end of a body of a few bytes, decoded millions of nulls before
/// failing (about 1 s and 0.9 GB for 80 bytes; found by fuzzing, docs/fuzzing.md).
struct BodyReader<'b> {
    rest: &'b [u8],
    read_past_end: bool,
}

impl std::io::Read for BodyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.rest.is_empty() && !buf.is_empty() {
            self.read_past_end = true;
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "read past the end of the body",
            ));
        }
        self.rest.read(buf)
    }
}

/// Decodes a body written with a schema that is not embedded (one fetched from a schema
/// registry by id). The top-level record must be named like `W`.
pub(crate) fn read_with_schema<W: FromDatum + WireRecord>(
    id: SchemaId,
    schema: &Schema,
    body: &[u8],
) -> Result<W, DecodeError> {
    let found = record_name(schema);
    if short_name(&found) != W::NAME {
        return Err(DecodeError::WrongRecord { id, expected: W::NAME, found });
    }
    let invalid =
        |e: apache_avro::Error| DecodeError::Body { id, record: found.clone(), reason: e.to_string() };
    let names = ResolvedSchema::try_from(schema).map_err(invalid)?;
    let reader = GenericDatumReader::builder(schema).build().map_err(invalid)?;
    read_body(&reader, schema, &names, id, body)
}

pub(crate) fn field_error<W: WireRecord>(id: SchemaId) -> impl Fn(FieldError) -> DecodeError {
    move |error| DecodeError::Field { id, record: W::NAME, error }
}

fn record_name(schema: &Schema) -> String {
    match schema {
        Schema::Record(r) => r.name.fullname(None),
        other => format!("non-record schema {}", other.canonical_form()),
    }
}

/// Starts a Confluent-framed value: magic byte and schema id.
pub(crate) fn framed_buffer(id: SchemaId, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(crate::confluent::HEADER_LEN + capacity);
    out.push(crate::confluent::MAGIC);
    out.extend_from_slice(&id.0.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_read_past_the_end_is_an_error_that_apache_avro_does_not_read_as_null() {
        let mut input = BodyReader { rest: &[7], read_past_end: false };
        let mut one = [0u8; 1];
        assert_eq!(input.read(&mut one).expect("in the body"), 1);
        let err = input.read(&mut one).expect_err("past the end");
        assert_ne!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(input.read_past_end);
        assert_eq!(input.read(&mut []).expect("an empty read is no read"), 0);
    }
}
