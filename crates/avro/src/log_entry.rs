//! Stored log entries: unframed Avro plus the id of the writer schema, which the store keeps in
//! its own column (topics.md: "entries written by older versions stay readable"). Encoding
//! always uses the newest `LogEntry` version; decoding reads every known version.

use load_agent_domain::LogEntry;

use crate::codec;
use crate::datum::ToDatum;
use crate::error::{DecodeError, FieldError, FieldProblem};
use crate::registry::{EmbeddedRegistry, SchemaId, records};
use crate::wire;

/// What `written_by` (LogEntry v2) holds for entries this build writes.
pub const WRITTEN_BY: &str = concat!("load-agent-avro/", env!("CARGO_PKG_VERSION"));

/// Facts about a stored entry that the domain `LogEntry` does not carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntryMeta {
    pub schema_id: SchemaId,
    /// The build that wrote it; `None` for entries written with v1.
    pub written_by: Option<String>,
}

impl From<&LogEntry> for wire::LogEntry {
    fn from(e: &LogEntry) -> Self {
        wire::LogEntry {
            entry_id: e.entry_id().to_owned(),
            load_id: e.load_id().to_owned(),
            kind: e.kind_str().to_owned(),
            recorded_at: crate::convert::ts(&e.recorded_at()),
            entry: match e {
                LogEntry::Event(ev) => wire::LogEntryBody::InboundEvent(wire::InboundEvent::from(ev)),
                LogEntry::Decision(d) => wire::LogEntryBody::DecisionRecord(wire::DecisionRecord::from(d)),
            },
            written_by: Some(WRITTEN_BY.to_owned()),
        }
    }
}

impl TryFrom<wire::LogEntry> for LogEntry {
    type Error = FieldError;

    /// Also checks that the envelope columns agree with the entry they index.
    fn try_from(w: wire::LogEntry) -> Result<Self, FieldError> {
        let entry = match w.entry {
            wire::LogEntryBody::InboundEvent(e) => {
                LogEntry::Event(load_agent_domain::InboundEvent::try_from(e).map_err(|e| e.under("entry"))?)
            }
            wire::LogEntryBody::DecisionRecord(d) => LogEntry::Decision(
                load_agent_domain::DecisionRecord::try_from(d).map_err(|e| e.under("entry"))?,
            ),
        };
        let recorded_at = crate::convert::utc(w.recorded_at, "recorded_at")?;
        let mismatch = |field: &str, envelope: &str, inner: &str| {
            FieldError::new(
                field,
                FieldProblem::Inconsistent(format!("is {envelope:?} but the entry says {inner:?}")),
            )
        };
        if w.entry_id != entry.entry_id() {
            return Err(mismatch("entry_id", &w.entry_id, entry.entry_id()));
        }
        if w.load_id != entry.load_id() {
            return Err(mismatch("load_id", &w.load_id, entry.load_id()));
        }
        if w.kind != entry.kind_str() {
            return Err(mismatch("kind", &w.kind, entry.kind_str()));
        }
        if recorded_at != entry.recorded_at() {
            return Err(mismatch(
                "recorded_at",
                &recorded_at.to_rfc3339(),
                &entry.recorded_at().to_rfc3339(),
            ));
        }
        Ok(entry)
    }
}

/// The Avro body of `entry` under the newest `LogEntry` schema, and that schema's id.
pub fn encode_log_entry(entry: &LogEntry) -> (SchemaId, Vec<u8>) {
    let codec = codec::latest(records::LOG_ENTRY);
    let mut out = Vec::with_capacity(256);
    codec.write(&mut out, wire::LogEntry::from(entry));
    (codec.entry.id, out)
}

/// Decodes an entry written with any known `LogEntry` version.
pub fn decode_log_entry(schema_id: SchemaId, body: &[u8]) -> Result<LogEntry, DecodeError> {
    decode_log_entry_with_meta(schema_id, body).map(|(entry, _)| entry)
}

/// As [`decode_log_entry`], with the facts the domain type does not carry.
pub fn decode_log_entry_with_meta(
    schema_id: SchemaId,
    body: &[u8],
) -> Result<(LogEntry, LogEntryMeta), DecodeError> {
    let mut wire: wire::LogEntry = codec::for_record(schema_id, records::LOG_ENTRY)?.read(body)?;
    let written_by = wire.written_by.take();
    let entry = LogEntry::try_from(wire).map_err(codec::field_error::<wire::LogEntry>(schema_id))?;
    Ok((entry, LogEntryMeta { schema_id, written_by }))
}

/// Why an entry cannot be written with an older version.
#[derive(Debug, thiserror::Error)]
#[error("cannot write a LogEntry with schema id {id}: {reason}")]
pub struct EncodeAsError {
    pub id: SchemaId,
    pub reason: String,
}

/// Writes `entry` with an OLDER embedded `LogEntry` version, dropping the top-level fields that
/// version does not have. Only for fixtures and evolution tests: production always writes the
/// newest version with [`encode_log_entry`].
#[doc(hidden)]
pub fn encode_log_entry_as(schema_id: SchemaId, entry: &LogEntry) -> Result<Vec<u8>, EncodeAsError> {
    let err = |reason: String| EncodeAsError { id: schema_id, reason };
    let registered = EmbeddedRegistry::global()
        .schema_by_id(schema_id)
        .filter(|s| s.record == records::LOG_ENTRY)
        .ok_or_else(|| err("not a LogEntry schema".into()))?;
    let apache_avro::Schema::Record(record) = &registered.schema else {
        return Err(err("not a record".into()));
    };
    let apache_avro::types::Value::Record(fields) = wire::LogEntry::from(entry).to_datum() else {
        return Err(err("wire LogEntry is not a record".into()));
    };
    let fields = fields.into_iter().filter(|(name, _)| record.lookup.contains_key(name)).collect();
    apache_avro::writer::datum::GenericDatumWriter::builder(&registered.schema)
        .build()
        .and_then(|w| w.write_value_to_vec(apache_avro::types::Value::Record(fields)))
        .map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fuzz regression (fuzz/regressions/avro_decode/timeout-log-entry-v1-union-array-at-eof,
    /// without its mode byte): a LogEntry v1 body of 80 bytes whose decision's `transitions`
    /// array (items: a union) has a block count of millions and nothing after it. Before the fix
    /// the decoder read each missing item as a `null` union, millions of them, before failing.
    #[test]
    fn a_huge_array_of_unions_at_the_end_of_a_short_body_fails_at_once() {
        const BODY: &[u8] = b"\x22dec\x1ahero_\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x13\x02*\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x00\x00\x00\x00\xff\xff\xff\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02ll\x02\x02\x04";
        let started = std::time::Instant::now();
        let err = decode_log_entry(SchemaId(3), BODY).expect_err("truncated");
        assert!(matches!(&err, DecodeError::Body { reason, .. } if reason.starts_with("truncated")), "{err}");
        // Generous for a loaded CI machine; the unfixed decoder took about 1 s in release and
        // far longer in a debug build.
        assert!(started.elapsed() < std::time::Duration::from_millis(500), "{:?}", started.elapsed());
    }
}
