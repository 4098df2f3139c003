//! An [`InboundRecord`] (load_agent_ingest: what the unit of work, the DLQ, dumps and replay
//! handle) copied out of an rdkafka message.

use load_agent_ingest::InboundRecord;
use rdkafka::Message;
use rdkafka::message::{BorrowedMessage, Headers};

/// Copies a record out of the consumer (the borrowed message can then be released).
pub fn from_message(m: &BorrowedMessage<'_>) -> InboundRecord {
    let headers = m
        .headers()
        .map(|hs| {
            hs.iter().map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec).unwrap_or_default())).collect()
        })
        .unwrap_or_default();
    InboundRecord {
        topic: m.topic().to_owned(),
        partition: m.partition(),
        offset: m.offset(),
        timestamp_ms: m.timestamp().to_millis(),
        key: m.key().map(<[u8]>::to_vec),
        headers,
        value: m.payload().map(<[u8]>::to_vec),
    }
}
