//! The embedded schema registry: the `.avsc` files of `schemas/avro/` with the fixed ids of
//! `schemas/avro/ids.json`, compiled into the binary (`include_str!`). A producer without a
//! Confluent-compatible registry frames records with these ids; the log store keeps them in its
//! own column. See `schemas/avro/README.md` for the id table and the evolution rules.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

use apache_avro::Schema;
use serde::{Deserialize, Serialize};

/// A schema id: the 4 bytes after the magic byte of a framed record, or the id column of a log
/// entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SchemaId(pub u32);

impl fmt::Display for SchemaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Full names of the top-level records.
pub mod records {
    pub const INBOUND_EVENT: &str = "load_agent.InboundEvent";
    pub const ACTION_COMMAND: &str = "load_agent.ActionCommand";
    pub const LOG_ENTRY: &str = "load_agent.LogEntry";
}

/// `schemas/avro/ids.json`, the source of truth for the ids.
pub const IDS_JSON: &str = include_str!("../../../schemas/avro/ids.json");

/// Every schema file, by file name. A test checks this list against the directory.
pub const SCHEMA_FILES: &[(&str, &str)] = &[
    ("InboundEvent.v1.avsc", include_str!("../../../schemas/avro/InboundEvent.v1.avsc")),
    ("ActionCommand.v1.avsc", include_str!("../../../schemas/avro/ActionCommand.v1.avsc")),
    ("LogEntry.v1.avsc", include_str!("../../../schemas/avro/LogEntry.v1.avsc")),
    ("LogEntry.v2.avsc", include_str!("../../../schemas/avro/LogEntry.v2.avsc")),
];

/// A schema of the embedded registry.
#[derive(Debug)]
pub struct RegisteredSchema {
    pub id: SchemaId,
    /// Full name of the top-level record, e.g. `load_agent.LogEntry`.
    pub record: String,
    /// 1, 2, ... per record.
    pub version: u32,
    /// File name in `schemas/avro/`.
    pub file: &'static str,
    /// The schema text as registered (what a Confluent registry is sent).
    pub text: &'static str,
    pub schema: Schema,
}

impl RegisteredSchema {
    /// `InboundEvent.v1`.
    pub fn label(&self) -> String {
        format!("{}.v{}", short_name(&self.record), self.version)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("ids.json is not valid: {0}")]
    IdsJson(#[from] serde_json::Error),
    #[error("ids.json names {0}, which is not embedded (add it to registry::SCHEMA_FILES)")]
    MissingFile(String),
    #[error("{file} is embedded but not listed in ids.json")]
    Unlisted { file: &'static str },
    #[error("{file} does not parse: {reason}")]
    Parse { file: &'static str, reason: String },
    #[error("{file} defines {found}, ids.json says {expected}")]
    RecordName { file: &'static str, found: String, expected: String },
    #[error("duplicate id {0} or record version in ids.json")]
    Duplicate(SchemaId),
    #[error("subject {subject} names {record}, which has no schema")]
    Subject { subject: String, record: String },
}

#[derive(Deserialize)]
struct IdsFile {
    schemas: Vec<IdsEntry>,
    subjects: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct IdsEntry {
    id: u32,
    record: String,
    version: u32,
    file: String,
}

/// The schemas of `schemas/avro/` with their fixed ids.
#[derive(Debug)]
pub struct EmbeddedRegistry {
    schemas: Vec<RegisteredSchema>,
    subjects: BTreeMap<String, String>,
}

static GLOBAL: LazyLock<EmbeddedRegistry> = LazyLock::new(|| {
    // The inputs are compile-time constants checked by the test suite; a failure here is a
    // build defect, never a runtime condition.
    EmbeddedRegistry::load().unwrap_or_else(|e| panic!("embedded Avro schemas are broken: {e}"))
});

impl EmbeddedRegistry {
    /// The process-wide registry, parsed once.
    pub fn global() -> &'static EmbeddedRegistry {
        &GLOBAL
    }

    /// Parses and cross-checks the embedded files.
    pub fn load() -> Result<Self, RegistryError> {
        let ids: IdsFile = serde_json::from_str(IDS_JSON)?;
        let mut schemas: Vec<RegisteredSchema> = Vec::with_capacity(ids.schemas.len());
        for entry in ids.schemas {
            let (file, text) = SCHEMA_FILES
                .iter()
                .find(|(name, _)| *name == entry.file)
                .copied()
                .ok_or_else(|| RegistryError::MissingFile(entry.file.clone()))?;
            let schema =
                Schema::parse_str(text).map_err(|e| RegistryError::Parse { file, reason: e.to_string() })?;
            let found = match &schema {
                Schema::Record(r) => r.name.fullname(None),
                other => format!("{:?}", other.canonical_form()),
            };
            if found != entry.record {
                return Err(RegistryError::RecordName { file, found, expected: entry.record });
            }
            let id = SchemaId(entry.id);
            if schemas.iter().any(|s| s.id == id || (s.record == entry.record && s.version == entry.version))
            {
                return Err(RegistryError::Duplicate(id));
            }
            schemas.push(RegisteredSchema {
                id,
                record: entry.record,
                version: entry.version,
                file,
                text,
                schema,
            });
        }
        if let Some((file, _)) = SCHEMA_FILES.iter().find(|(f, _)| !schemas.iter().any(|s| s.file == *f)) {
            return Err(RegistryError::Unlisted { file });
        }
        for (subject, record) in &ids.subjects {
            if !schemas.iter().any(|s| &s.record == record) {
                return Err(RegistryError::Subject { subject: subject.clone(), record: record.clone() });
            }
        }
        Ok(EmbeddedRegistry { schemas, subjects: ids.subjects })
    }

    pub fn schema_by_id(&self, id: SchemaId) -> Option<&RegisteredSchema> {
        self.schemas.iter().find(|s| s.id == id)
    }

    /// The newest version for a subject (`load-agent.events-value`), a full record name
    /// (`load_agent.InboundEvent`) or a short one (`InboundEvent`).
    pub fn latest(&self, subject_or_record: &str) -> Option<&RegisteredSchema> {
        let record = self.subjects.get(subject_or_record).map_or(subject_or_record, String::as_str);
        self.schemas
            .iter()
            .filter(|s| s.record == record || short_name(&s.record) == record)
            .max_by_key(|s| s.version)
    }

    /// Every version of a record, oldest first.
    pub fn versions(&self, record: &str) -> Vec<&RegisteredSchema> {
        let mut v: Vec<_> =
            self.schemas.iter().filter(|s| s.record == record || short_name(&s.record) == record).collect();
        v.sort_by_key(|s| s.version);
        v
    }

    pub fn schemas(&self) -> &[RegisteredSchema] {
        &self.schemas
    }

    /// The default subjects (topic name strategy) and the record each carries.
    pub fn subjects(&self) -> impl Iterator<Item = (&str, &str)> {
        self.subjects.iter().map(|(s, r)| (s.as_str(), r.as_str()))
    }
}

pub(crate) fn short_name(full: &str) -> &str {
    full.rsplit('.').next().unwrap_or(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_registry_loads_with_fixed_ids() {
        let reg = EmbeddedRegistry::load().expect("embedded schemas");
        let label = |id| reg.schema_by_id(SchemaId(id)).map(RegisteredSchema::label);
        assert_eq!(label(1).as_deref(), Some("InboundEvent.v1"));
        assert_eq!(label(2).as_deref(), Some("ActionCommand.v1"));
        assert_eq!(label(3).as_deref(), Some("LogEntry.v1"));
        assert_eq!(label(4).as_deref(), Some("LogEntry.v2"));
        assert!(reg.schema_by_id(SchemaId(99)).is_none());
        assert_eq!(reg.latest("load-agent.events-value").map(|s| s.id), Some(SchemaId(1)));
        assert_eq!(reg.latest("LogEntry").map(|s| s.id), Some(SchemaId(4)));
        assert_eq!(reg.latest("load_agent.LogEntry").map(|s| s.id), Some(SchemaId(4)));
        assert_eq!(reg.latest("load-agent.actions.sms-value").map(|s| s.id), Some(SchemaId(2)));
        assert!(reg.latest("nope").is_none());
        assert_eq!(reg.versions("LogEntry").iter().map(|s| s.version).collect::<Vec<_>>(), [1, 2]);
    }
}
