//! Decoding errors. They are descriptive on purpose: the consumer copies them into the headers
//! of the DLQ record (`DecodeError::code` for a stable short code, `Display` for the text).

use std::fmt;

use crate::registry::SchemaId;

/// The Confluent wire framing is broken (see [`crate::confluent`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error(
        "empty record value: expected the Confluent wire format (magic byte 0, 4-byte schema id, Avro body)"
    )]
    Empty,
    #[error(
        "record value too short for the Confluent wire format: {len} byte(s), need at least 5 (magic byte 0 and a 4-byte schema id)"
    )]
    TooShort { len: usize },
    #[error("bad magic byte {found:#04x}: the Confluent wire format starts with 0x00")]
    BadMagic { found: u8 },
}

/// Why a record could not be decoded into a domain value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error(
        "unknown schema id {0}: not a schema this build knows (embedded registry or configured schema registry)"
    )]
    UnknownSchemaId(SchemaId),
    #[error("schema id {id} is a {found} schema, expected {expected}")]
    WrongRecord { id: SchemaId, expected: &'static str, found: String },
    #[error("Avro body does not decode with writer schema {record} (id {id}): {reason}")]
    Body { id: SchemaId, record: String, reason: String },
    #[error("Avro body has {count} trailing byte(s) after the {record} record (schema id {id})")]
    TrailingBytes { id: SchemaId, record: String, count: usize },
    #[error("invalid {record} (schema id {id}): {error}")]
    Field { id: SchemaId, record: &'static str, error: FieldError },
}

impl DecodeError {
    /// A stable short code for DLQ headers and metrics labels.
    pub fn code(&self) -> &'static str {
        match self {
            DecodeError::Wire(WireError::Empty) => "empty",
            DecodeError::Wire(WireError::TooShort { .. }) => "too_short",
            DecodeError::Wire(WireError::BadMagic { .. }) => "bad_magic",
            DecodeError::UnknownSchemaId(_) => "unknown_schema_id",
            DecodeError::WrongRecord { .. } => "wrong_record",
            DecodeError::Body { .. } => "bad_avro_body",
            DecodeError::TrailingBytes { .. } => "trailing_bytes",
            DecodeError::Field { .. } => "invalid_field",
        }
    }

    /// The dotted path of the offending field (`payload.stops[1].appointment`), if a field is
    /// to blame.
    pub fn field_path(&self) -> Option<&str> {
        match self {
            DecodeError::Field { error, .. } => Some(error.path()),
            _ => None,
        }
    }
}

/// A field that is missing, of the wrong Avro type, or holds a value the domain rejects. The
/// path is built while the error travels up, so the success path never formats it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    path: String,
    problem: FieldProblem,
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldProblem {
    /// Required by the reader, absent from the writer schema and without a default.
    Missing,
    /// The writer's Avro type cannot be read as the reader's type.
    Type { expected: &'static str, found: &'static str },
    /// A union branch (an event kind, an action body, a transition) this reader does not know.
    UnknownBranch { found: String, expected: &'static [&'static str] },
    /// A string field holding a value outside its documented set.
    UnknownSymbol { found: String, expected: &'static str },
    /// A timestamp that is not RFC 3339 or out of range.
    BadTimestamp { found: String, reason: String },
    /// A number outside the domain's range (e.g. a negative `attempt`).
    OutOfRange { found: i64, expected: &'static str },
    /// Fields that contradict each other (e.g. `action_kind` vs the payload branch).
    Inconsistent(String),
}

impl FieldError {
    pub(crate) fn new(field: &str, problem: FieldProblem) -> Self {
        FieldError { path: field.to_owned(), problem }
    }

    /// An error about the value itself, before the caller names the field.
    pub(crate) fn here(problem: FieldProblem) -> Self {
        FieldError { path: String::new(), problem }
    }

    /// Prefixes the path with the name of the enclosing field.
    pub(crate) fn under(mut self, field: &str) -> Self {
        self.path = if self.path.is_empty() {
            field.to_owned()
        } else if self.path.starts_with('[') {
            format!("{field}{}", self.path)
        } else {
            format!("{field}.{}", self.path)
        };
        self
    }

    /// Prefixes the path with an array index.
    pub(crate) fn at(mut self, index: usize) -> Self {
        self.path = if self.path.is_empty() || self.path.starts_with('[') {
            format!("[{index}]{}", self.path)
        } else {
            format!("[{index}].{}", self.path)
        };
        self
    }

    /// The dotted path of the field, e.g. `payload.contacts[0].role`.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn problem(&self) -> &FieldProblem {
        &self.problem
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() { "<record>" } else { &self.path };
        write!(f, "field `{path}`: ")?;
        match &self.problem {
            FieldProblem::Missing => write!(f, "missing (absent from the writer schema, no default)"),
            FieldProblem::Type { expected, found } => write!(f, "expected Avro {expected}, found {found}"),
            FieldProblem::UnknownBranch { found, expected } => {
                write!(f, "unknown type {found:?}, expected one of {}", expected.join("|"))
            }
            FieldProblem::UnknownSymbol { found, expected } => {
                write!(f, "unknown value {found:?}, expected one of {expected}")
            }
            FieldProblem::BadTimestamp { found, reason } => write!(f, "bad timestamp {found:?}: {reason}"),
            FieldProblem::OutOfRange { found, expected } => {
                write!(f, "{found} is out of range, expected {expected}")
            }
            FieldProblem::Inconsistent(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for FieldError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_compose_from_the_inside_out() {
        let e = FieldError::new("role", FieldProblem::Missing).at(1).under("contacts").under("payload");
        assert_eq!(e.path(), "payload.contacts[1].role");
        let e = FieldError::here(FieldProblem::Missing).at(0).under("stops");
        assert_eq!(e.path(), "stops[0]");
        let e = FieldError::here(FieldProblem::Missing).at(2).at(0).under("m");
        assert_eq!(e.path(), "m[0][2]");
    }
}
