//! Topic dumps (topics.md): one JSON object per record and line,
//!
//! ```json
//! {"topic": "load-agent.events", "partition": 3, "offset": 1742, "timestamp_ms": 1772456400000,
//!  "key": "481207", "headers": {"source": "sms-gateway"}, "value_b64": "AAAAAAE..."}
//! ```
//!
//! `key` is the UTF-8 key (`null` when absent; a key that is not UTF-8 goes to `key_b64`),
//! `headers` the UTF-8 header values (others go to `headers_b64`), `value_b64` the value in
//! standard base64 (`null` for a tombstone). `load_agent_kafka::dump` records a topic from
//! Kafka; reading and writing dump files needs no Kafka client.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

use crate::record::InboundRecord;

/// One line of a dump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_b64: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers_b64: BTreeMap<String, String>,
    pub value_b64: Option<String>,
}

impl DumpRecord {
    pub fn from_record(r: &InboundRecord) -> Self {
        let (key, key_b64) = match &r.key {
            None => (None, None),
            Some(k) => match std::str::from_utf8(k) {
                Ok(s) => (Some(s.to_owned()), None),
                Err(_) => (None, Some(B64.encode(k))),
            },
        };
        let mut headers = BTreeMap::new();
        let mut headers_b64 = BTreeMap::new();
        for (name, value) in &r.headers {
            match std::str::from_utf8(value) {
                Ok(s) => headers.insert(name.clone(), s.to_owned()),
                Err(_) => headers_b64.insert(name.clone(), B64.encode(value)),
            };
        }
        DumpRecord {
            topic: r.topic.clone(),
            partition: r.partition,
            offset: r.offset,
            timestamp_ms: r.timestamp_ms,
            key,
            key_b64,
            headers,
            headers_b64,
            value_b64: r.value.as_ref().map(|v| B64.encode(v)),
        }
    }

    pub fn to_record(&self) -> Result<InboundRecord, String> {
        let key = match (&self.key, &self.key_b64) {
            (Some(k), _) => Some(k.as_bytes().to_vec()),
            (None, Some(b)) => Some(B64.decode(b).map_err(|e| format!("key_b64: {e}"))?),
            (None, None) => None,
        };
        let mut headers: Vec<(String, Vec<u8>)> =
            self.headers.iter().map(|(k, v)| (k.clone(), v.as_bytes().to_vec())).collect();
        for (k, v) in &self.headers_b64 {
            headers.push((k.clone(), B64.decode(v).map_err(|e| format!("headers_b64.{k}: {e}"))?));
        }
        let value = match &self.value_b64 {
            None => None,
            Some(v) => Some(B64.decode(v).map_err(|e| format!("value_b64: {e}"))?),
        };
        Ok(InboundRecord {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: self.offset,
            timestamp_ms: self.timestamp_ms,
            key,
            headers,
            value,
        })
    }

    /// The JSON line (without the newline).
    pub fn to_line(&self) -> String {
        // A struct of strings, numbers and string maps always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A dump file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DumpFileError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}:{line}: {message}")]
    Line { path: String, line: usize, message: String },
}

/// Reads a dump file: every non-blank line is a [`DumpRecord`].
pub fn read_dump(path: &Path) -> Result<Vec<InboundRecord>, DumpFileError> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path)
        .map_err(|e| DumpFileError::Io { path: shown.clone(), message: e.to_string() })?;
    let mut records = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| DumpFileError::Io { path: shown.clone(), message: e.to_string() })?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| DumpFileError::Line { path: shown.clone(), line: i + 1, message };
        let dumped: DumpRecord = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        records.push(dumped.to_record().map_err(bad)?);
    }
    Ok(records)
}

/// Writes records as a dump.
pub fn write_dump(records: &[InboundRecord], out: &mut dyn Write) -> std::io::Result<()> {
    for r in records {
        writeln!(out, "{}", DumpRecord::from_record(r).to_line())?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_a_trip_through_a_dump_line() {
        let r = InboundRecord {
            topic: "load-agent.events".into(),
            partition: 3,
            offset: 1742,
            timestamp_ms: Some(1_772_456_400_000),
            key: Some(b"481207".to_vec()),
            headers: vec![("source".into(), b"sms-gateway".to_vec()), ("bin".into(), vec![0xff, 0x00])],
            value: Some(vec![0, 0, 0, 0, 1, 2, 3]),
        };
        let line = DumpRecord::from_record(&r).to_line();
        assert!(
            line.contains("\"key\":\"481207\"") && line.contains("\"value_b64\":\"AAAAAAECAw==\""),
            "{line}"
        );
        let back: DumpRecord = serde_json::from_str(&line).expect("json");
        let back = back.to_record().expect("record");
        assert_eq!(back.value, r.value);
        assert_eq!(back.key, r.key);
        assert_eq!(back.header("bin"), Some(&[0xff, 0x00][..]));
        assert_eq!(back.header("source"), Some(&b"sms-gateway"[..]));
    }

    #[test]
    fn a_line_of_topics_md_reads() {
        let line = r#"{"topic": "load-agent.events", "partition": 3, "offset": 1742, "timestamp_ms": 1772456400000,
 "key": "481207", "headers": {"source": "sms-gateway"}, "value_b64": "AAAAAAE="}"#;
        let d: DumpRecord = serde_json::from_str(line).expect("topics.md example");
        let r = d.to_record().expect("record");
        assert_eq!((r.partition, r.offset, r.value), (3, 1742, Some(vec![0, 0, 0, 0, 1])));
        let tombstone: DumpRecord = serde_json::from_str(
            r#"{"topic":"t","partition":0,"offset":0,"timestamp_ms":null,"key":null,"value_b64":null}"#,
        )
        .expect("minimal");
        assert_eq!(tombstone.to_record().map(|r| r.value), Ok(None));
    }
}
