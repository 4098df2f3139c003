//! [`InboundRecord`]: an owned Kafka record, detached from the consumer, so that the unit of work
//! (process.rs), the DLQ, topic dumps and replay all handle the same type. The Kafka crate copies
//! one out of an rdkafka message (`load_agent_kafka::record::from_message`); nothing here knows a
//! Kafka client.

/// One record of a topic, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the epoch (the record's create or log-append time), when it has one.
    pub timestamp_ms: Option<i64>,
    pub key: Option<Vec<u8>>,
    /// Headers in record order (Kafka allows repeated names).
    pub headers: Vec<(String, Vec<u8>)>,
    /// `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// The header naming who published a record (`source`).
pub const HEADER_SOURCE: &str = "source";

impl InboundRecord {
    /// The key as UTF-8, if it is present and valid UTF-8.
    pub fn key_str(&self) -> Option<&str> {
        self.key.as_deref().and_then(|k| std::str::from_utf8(k).ok())
    }

    /// What orders the record inside its partition: records with the same ordering key run one
    /// at a time. The key itself; records without a usable key share one empty ordering key.
    pub fn ordering_key(&self) -> String {
        match &self.key {
            Some(k) => String::from_utf8_lossy(k).into_owned(),
            None => String::new(),
        }
    }

    /// The first header with this name.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }
}
