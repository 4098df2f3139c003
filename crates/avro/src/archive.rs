//! Archive files (docs/archive.md): Avro object container files of log rows, one
//! [`ArchivedLogEntry`] record per row (`schemas/avro/archive/ArchivedLogEntry.v1.avsc`, the
//! file's embedded writer schema), deflate-compressed. The LogEntry body of each row is kept
//! exactly as the log stored it, under its own writer schema id; every LogEntry schema the file's
//! bodies use is embedded in the file's metadata (`load_agent.log_entry_schemas`, a JSON object
//! from schema id to schema), so a file names every schema needed to read it.
//!
//! Sync functions over bytes, like the rest of the crate: the IO (object storage, manifests,
//! checksums) is `load-agent-archive`'s.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::LazyLock;

use apache_avro::types::Value;
use apache_avro::{Codec, DeflateSettings, Reader, Schema, Writer};

use crate::registry::{EmbeddedRegistry, SchemaId, records};

/// The writer schema of archive files, as committed.
pub const ARCHIVE_SCHEMA_TEXT: &str = include_str!("../../../schemas/avro/archive/ArchivedLogEntry.v1.avsc");

/// The file metadata key holding the LogEntry schemas of the file's bodies.
pub const LOG_ENTRY_SCHEMAS_KEY: &str = "load_agent.log_entry_schemas";

/// The codec archive files are written with (`avro.codec` in each file's header).
pub const ARCHIVE_CODEC: &str = "deflate";

static ARCHIVE_SCHEMA: LazyLock<Result<Schema, String>> =
    LazyLock::new(|| Schema::parse_str(ARCHIVE_SCHEMA_TEXT).map_err(|e| e.to_string()));

/// One row of a load's log as archived: the log's plain columns and its stored body.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedLogEntry {
    pub load_id: String,
    pub seq: u64,
    pub entry_id: String,
    pub kind: String,
    /// Microseconds since the epoch (the store keeps microseconds).
    pub recorded_at_micros: i64,
    pub llm_cost_usd: f64,
    pub schema_id: u32,
    pub body: Vec<u8>,
}

/// Why an archive file cannot be written or read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArchiveFileError {
    /// The committed archive schema does not parse (a build defect, caught by the tests).
    #[error("the archive schema ArchivedLogEntry.v1.avsc does not parse: {0}")]
    Schema(String),
    /// A row's body names a schema id that is not a LogEntry schema this build knows.
    #[error("row {load_id}#{seq}: schema id {schema_id} is not a known LogEntry schema")]
    UnknownLogEntrySchema { load_id: String, seq: u64, schema_id: u32 },
    #[error("writing the archive file: {0}")]
    Write(String),
    /// The bytes are not an Avro object container file, or a block does not decode.
    #[error("not a readable Avro object container file: {0}")]
    Container(String),
    /// The file's writer schema cannot be read as `ArchivedLogEntry`.
    #[error("record {index}: {reason}")]
    Record { index: usize, reason: String },
}

fn schema() -> Result<&'static Schema, ArchiveFileError> {
    ARCHIVE_SCHEMA.as_ref().map_err(|e| ArchiveFileError::Schema(e.clone()))
}

/// The Parsing Canonical Form of the archive schema (its SHA-256 is the schema fingerprint the
/// manifest records).
pub fn archive_schema_canonical_form() -> Result<String, ArchiveFileError> {
    Ok(schema()?.canonical_form())
}

/// An Avro object container file holding `rows` in order, deflate-compressed, with the LogEntry
/// schemas of their bodies in its metadata. `marker` is the file's sync marker: the same rows
/// and marker give the same bytes (the archive derives it from the file's contents, so that a
/// repeated export writes identical files).
pub fn write_archive_file(rows: &[ArchivedLogEntry], marker: [u8; 16]) -> Result<Vec<u8>, ArchiveFileError> {
    let schema = schema()?;
    let registry = EmbeddedRegistry::global();
    let mut schemas: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for id in rows.iter().map(|r| (r.schema_id, r)).collect::<BTreeMap<_, _>>().into_values() {
        let registered = registry
            .schema_by_id(SchemaId(id.schema_id))
            .filter(|s| s.record == records::LOG_ENTRY)
            .ok_or_else(|| ArchiveFileError::UnknownLogEntrySchema {
                load_id: id.load_id.clone(),
                seq: id.seq,
                schema_id: id.schema_id,
            })?;
        let text: serde_json::Value = serde_json::from_str(registered.text)
            .map_err(|e| ArchiveFileError::Write(format!("LogEntry schema {}: {e}", registered.file)))?;
        schemas.insert(id.schema_id.to_string(), text);
    }
    let metadata = serde_json::to_vec(&schemas).map_err(|e| ArchiveFileError::Write(e.to_string()))?;
    let write_error = |e: apache_avro::Error| ArchiveFileError::Write(e.to_string());
    // The header is written here, not by apache_avro, whose metadata map is a HashMap written in
    // a random order: the same rows must give the same bytes.
    let head = header(
        &[
            ("avro.schema", ARCHIVE_SCHEMA_TEXT.as_bytes()),
            ("avro.codec", ARCHIVE_CODEC.as_bytes()),
            (LOG_ENTRY_SCHEMAS_KEY, &metadata),
        ],
        marker,
    );
    let mut writer = Writer::builder()
        .schema(schema)
        .writer(head)
        .codec(Codec::Deflate(DeflateSettings::default()))
        .marker(marker)
        .has_header(true)
        .build()
        .map_err(write_error)?;
    for row in rows {
        let seq = i64::try_from(row.seq).map_err(|_| {
            ArchiveFileError::Write(format!("row {}#{}: seq exceeds i64", row.load_id, row.seq))
        })?;
        let schema_id =
            i32::try_from(row.schema_id).map_err(|_| ArchiveFileError::UnknownLogEntrySchema {
                load_id: row.load_id.clone(),
                seq: row.seq,
                schema_id: row.schema_id,
            })?;
        writer
            .append_value(Value::Record(vec![
                ("load_id".into(), Value::String(row.load_id.clone())),
                ("seq".into(), Value::Long(seq)),
                ("entry_id".into(), Value::String(row.entry_id.clone())),
                ("kind".into(), Value::String(row.kind.clone())),
                ("recorded_at".into(), Value::TimestampMicros(row.recorded_at_micros)),
                ("llm_cost_usd".into(), Value::Double(row.llm_cost_usd)),
                ("schema_id".into(), Value::Int(schema_id)),
                ("body".into(), Value::Bytes(row.body.clone())),
            ]))
            .map_err(write_error)?;
    }
    writer.into_inner().map_err(write_error)
}

/// An object container file header (Avro spec, "Object Container Files"): the magic, the
/// metadata map in the given order (one block), the sync marker.
fn header(metadata: &[(&str, &[u8])], marker: [u8; 16]) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    zigzag(&mut out, metadata.len() as i64);
    for (key, value) in metadata {
        zigzag(&mut out, key.len() as i64);
        out.extend_from_slice(key.as_bytes());
        zigzag(&mut out, value.len() as i64);
        out.extend_from_slice(value);
    }
    zigzag(&mut out, 0);
    out.extend_from_slice(&marker);
    out
}

/// An Avro `long`: zig-zag, then base-128 varint.
fn zigzag(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// What an archive file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveFile {
    pub rows: Vec<ArchivedLogEntry>,
    /// The LogEntry schema ids whose schemas the file's metadata embeds.
    pub embedded_log_entry_schemas: BTreeSet<u32>,
}

/// Reads an archive file written by any version of [`write_archive_file`]: the file's own writer
/// schema is resolved against this build's `ArchivedLogEntry` (Avro schema resolution: fields
/// added later with defaults read as their defaults).
pub fn read_archive_file(bytes: &[u8]) -> Result<ArchiveFile, ArchiveFileError> {
    let schema = schema()?;
    let container = |e: apache_avro::Error| ArchiveFileError::Container(e.to_string());
    let reader = Reader::builder(bytes).reader_schema(schema).build().map_err(container)?;
    let embedded = embedded_schema_ids(reader.user_metadata())?;
    let mut rows = Vec::new();
    for (index, value) in reader.enumerate() {
        let value = value.map_err(container)?;
        rows.push(row_of(value).map_err(|reason| ArchiveFileError::Record { index, reason })?);
    }
    Ok(ArchiveFile { rows, embedded_log_entry_schemas: embedded })
}

fn embedded_schema_ids(metadata: &HashMap<String, Vec<u8>>) -> Result<BTreeSet<u32>, ArchiveFileError> {
    let Some(raw) = metadata.get(LOG_ENTRY_SCHEMAS_KEY) else {
        return Err(ArchiveFileError::Container(format!(
            "no {LOG_ENTRY_SCHEMAS_KEY} in the file's metadata"
        )));
    };
    let map: BTreeMap<String, serde_json::Value> = serde_json::from_slice(raw)
        .map_err(|e| ArchiveFileError::Container(format!("{LOG_ENTRY_SCHEMAS_KEY}: {e}")))?;
    map.keys()
        .map(|k| {
            k.parse::<u32>().map_err(|_| {
                ArchiveFileError::Container(format!("{LOG_ENTRY_SCHEMAS_KEY}: {k:?} is not a schema id"))
            })
        })
        .collect()
}

fn row_of(value: Value) -> Result<ArchivedLogEntry, String> {
    let Value::Record(fields) = value else {
        return Err("not a record".into());
    };
    let mut fields: HashMap<String, Value> = fields.into_iter().collect();
    let mut take = |name: &str| fields.remove(name).ok_or_else(|| format!("field {name} is missing"));
    let string = |name: &str, v: Value| match v {
        Value::String(s) => Ok(s),
        other => Err(format!("field {name}: expected a string, found {other:?}")),
    };
    let load_id = string("load_id", take("load_id")?)?;
    let seq = match take("seq")? {
        Value::Long(n) => u64::try_from(n).map_err(|_| format!("field seq: {n} is negative"))?,
        other => return Err(format!("field seq: expected a long, found {other:?}")),
    };
    let entry_id = string("entry_id", take("entry_id")?)?;
    let kind = string("kind", take("kind")?)?;
    let recorded_at_micros = match take("recorded_at")? {
        Value::TimestampMicros(n) | Value::Long(n) => n,
        other => return Err(format!("field recorded_at: expected timestamp-micros, found {other:?}")),
    };
    let llm_cost_usd = match take("llm_cost_usd")? {
        Value::Double(x) => x,
        other => return Err(format!("field llm_cost_usd: expected a double, found {other:?}")),
    };
    let schema_id = match take("schema_id")? {
        Value::Int(n) => u32::try_from(n).map_err(|_| format!("field schema_id: {n} is negative"))?,
        other => return Err(format!("field schema_id: expected an int, found {other:?}")),
    };
    let body = match take("body")? {
        Value::Bytes(b) => b,
        other => return Err(format!("field body: expected bytes, found {other:?}")),
    };
    Ok(ArchivedLogEntry { load_id, seq, entry_id, kind, recorded_at_micros, llm_cost_usd, schema_id, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(load: &str, seq: u64, schema_id: u32) -> ArchivedLogEntry {
        ArchivedLogEntry {
            load_id: load.into(),
            seq,
            entry_id: format!("e{seq}"),
            kind: "sms".into(),
            recorded_at_micros: 1_772_000_000_000_000 + seq as i64,
            llm_cost_usd: 0.5,
            schema_id,
            body: vec![1, 2, 3, seq as u8],
        }
    }

    #[test]
    fn rows_round_trip_and_the_same_rows_give_the_same_bytes() {
        let rows = vec![row("L1", 1, 3), row("L1", 2, 4), row("L2", 1, 4)];
        let bytes = write_archive_file(&rows, [7; 16]).expect("write");
        assert!(write_archive_file(&rows, [7; 16]).expect("write") == bytes, "deterministic");
        assert!(write_archive_file(&rows, [8; 16]).expect("write") != bytes, "the marker is the caller's");
        let file = read_archive_file(&bytes).expect("read");
        assert_eq!(file.rows, rows);
        assert_eq!(file.embedded_log_entry_schemas, BTreeSet::from([3, 4]));
        let header = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).into_owned();
        assert!(header.contains("deflate") && header.contains("ArchivedLogEntry"), "{header}");
    }

    #[test]
    fn a_body_of_an_unknown_schema_is_refused_and_garbage_does_not_read() {
        let err = write_archive_file(&[row("L1", 1, 1)], [0; 16]).expect_err("schema 1 is InboundEvent");
        assert!(err.to_string().contains("L1#1"), "{err}");
        assert!(matches!(read_archive_file(b"not avro"), Err(ArchiveFileError::Container(_))));
        assert!(archive_schema_canonical_form().expect("parses").contains("ArchivedLogEntry"));
    }
}
