//! The dead-letter record: the original key and value, the original headers, then headers that
//! name the error and the source record (topics.md). Pure code; [`crate::DlqProducer`] sends it.
//!
//! A record the DLQ topic cannot hold as it is (larger than the topic's `max.message.bytes`, or
//! refused for good by the broker) is written in a **reduced form** that always fits (under
//! [`REDUCED_MAX_BYTES`]): no value; the key and the original headers when they are small;
//! the `dlq-*` headers; and `dlq-reduced` (why), `dlq-original-size`, `dlq-original-sha256`
//! and `dlq-body`, which names the row of the store's `dead_letters` table that keeps the whole
//! record (`dead_letters:topic/partition/offset`). So the partition moves on and nothing is lost.

use load_agent_ingest::{DeadLetter, InboundRecord, MAX_RECORD_BYTES};
use sha2::{Digest, Sha256};

/// The error text.
pub const HEADER_ERROR: &str = "dlq-error";
/// `decode` or `invalid_event`.
pub const HEADER_REASON_KIND: &str = "dlq-reason-kind";
/// A stable short code (`bad_magic`, `key_mismatch`, `unknown_load`, ...).
pub const HEADER_ERROR_CODE: &str = "dlq-error-code";
/// The path of the offending field, when a field is to blame.
pub const HEADER_ERROR_FIELD: &str = "dlq-error-field";
pub const HEADER_SOURCE_TOPIC: &str = "dlq-source-topic";
pub const HEADER_SOURCE_PARTITION: &str = "dlq-source-partition";
pub const HEADER_SOURCE_OFFSET: &str = "dlq-source-offset";
/// A record's headers, in order (Kafka allows repeated names).
pub type Headers = Vec<(String, Vec<u8>)>;

/// Every header the DLQ adds starts with this.
pub const HEADER_PREFIX: &str = "dlq-";
/// Reduced form only: why the record is not whole.
pub const HEADER_REDUCED: &str = "dlq-reduced";
/// Reduced form only: the original value's length in bytes.
pub const HEADER_ORIGINAL_SIZE: &str = "dlq-original-size";
/// Reduced form only: the SHA-256 of the original value, in hex.
pub const HEADER_ORIGINAL_SHA256: &str = "dlq-original-sha256";
/// Reduced form only: where the whole record is kept, `dead_letters:topic/partition/offset`.
pub const HEADER_BODY: &str = "dlq-body";
/// Reduced form only: the original key or headers were too large to keep here (`key`,
/// `headers`, `key,headers`); they are in `dead_letters`.
pub const HEADER_DROPPED: &str = "dlq-dropped";

/// The largest record the service writes: an inbound record at the service's own limit
/// ([`MAX_RECORD_BYTES`]) with its `dlq-*` headers and room for its key and own headers. The
/// producers' `message.max.bytes` is set to it, so librdkafka never refuses a dead letter the
/// topic would take.
pub const PRODUCER_MAX_BYTES: usize = MAX_RECORD_BYTES + 64 * 1024;
/// A reduced dead letter never takes more than this; a DLQ topic must accept at least this much
/// (checked at start).
pub const REDUCED_MAX_BYTES: usize = 32 * 1024;
/// Kafka's `max.message.bytes` when a topic does not set it (1 MiB + 12).
pub const KAFKA_DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;
/// The `dlq-error` header keeps this many bytes of the error text at most.
pub const MAX_ERROR_HEADER_BYTES: usize = 2048;
/// The reduced form keeps the original key up to this length...
const REDUCED_KEY_BYTES: usize = 1024;
/// ...and the original headers up to this total.
const REDUCED_HEADER_BYTES: usize = 8 * 1024;

/// An upper bound of the bytes a record takes on the broker (Kafka's record batch v2: 61 bytes
/// of batch header, then the record's varints, key, value and headers), which is what the
/// broker compares with `max.message.bytes`.
pub fn record_size_estimate(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(String, Vec<u8>)],
) -> usize {
    const BATCH_HEADER: usize = 61;
    const RECORD_VARINTS: usize = 5 + 1 + 10 + 5 + 5 + 5 + 5;
    const HEADER_VARINTS: usize = 10;
    let headers: usize = headers.iter().map(|(n, v)| n.len() + v.len() + HEADER_VARINTS).sum();
    BATCH_HEADER + RECORD_VARINTS + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len) + headers
}

/// At most `max` bytes of `s`, cut on a character boundary.
fn truncated(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// The headers of a dead letter: the record's own headers (without `dlq-*` ones from an
/// earlier trip through the DLQ) followed by the `dlq-*` headers.
pub fn dead_letter_headers(record: &InboundRecord, dead: &DeadLetter) -> Vec<(String, Vec<u8>)> {
    let mut headers = own_headers(record);
    push_dlq_headers(&mut headers, record, dead);
    headers
}

fn push_dlq_headers(headers: &mut Vec<(String, Vec<u8>)>, record: &InboundRecord, dead: &DeadLetter) {
    let mut add = |name: &str, value: &str| headers.push((name.to_owned(), value.as_bytes().to_vec()));
    add(HEADER_ERROR, truncated(&dead.error, MAX_ERROR_HEADER_BYTES));
    add(HEADER_REASON_KIND, dead.kind.as_str());
    add(HEADER_ERROR_CODE, dead.code);
    if let Some(field) = &dead.field {
        add(HEADER_ERROR_FIELD, truncated(field, 256));
    }
    add(HEADER_SOURCE_TOPIC, truncated(&record.topic, 256));
    add(HEADER_SOURCE_PARTITION, &record.partition.to_string());
    add(HEADER_SOURCE_OFFSET, &record.offset.to_string());
}

/// The reduced form of a dead letter: its key and headers (no value), never over
/// [`REDUCED_MAX_BYTES`]. `why` goes to `dlq-reduced`; the whole record must be kept in
/// `dead_letters` under [`kept_reference`] before this is written.
pub fn reduced_dead_letter(
    record: &InboundRecord,
    dead: &DeadLetter,
    why: &str,
) -> (Option<Vec<u8>>, Headers) {
    let own = own_headers(record);
    let own_bytes: usize = own.iter().map(|(n, v)| n.len() + v.len()).sum();
    let key = record.key.clone().filter(|k| k.len() <= REDUCED_KEY_BYTES);
    let mut dropped = Vec::new();
    if key.is_none() && record.key.is_some() {
        dropped.push("key");
    }
    let mut headers = if own_bytes <= REDUCED_HEADER_BYTES {
        own
    } else {
        dropped.push("headers");
        Vec::new()
    };
    push_dlq_headers(&mut headers, record, dead);
    let value = record.value.as_deref().unwrap_or_default();
    let mut add = |name: &str, value: &str| headers.push((name.to_owned(), value.as_bytes().to_vec()));
    add(HEADER_REDUCED, truncated(why, MAX_ERROR_HEADER_BYTES));
    add(HEADER_ORIGINAL_SIZE, &value.len().to_string());
    add(HEADER_ORIGINAL_SHA256, &hex::encode(Sha256::digest(value)));
    add(HEADER_BODY, &format!("{BODY_PREFIX}{}", kept_reference(record)));
    if !dropped.is_empty() {
        add(HEADER_DROPPED, &dropped.join(","));
    }
    (key, headers)
}

/// `topic/partition/offset` of the source record: the key of its row in `dead_letters`.
pub fn kept_reference(record: &InboundRecord) -> String {
    format!("{}/{}/{}", record.topic, record.partition, record.offset)
}

/// What a `dlq-body` header starts with.
const BODY_PREFIX: &str = "dead_letters:";

/// The row a `dlq-body` header names, `(topic, partition, offset)`; `None` when it names none.
pub fn parse_body(value: &str) -> Option<(&str, i32, i64)> {
    let reference = value.strip_prefix(BODY_PREFIX).unwrap_or(value);
    let (rest, offset) = reference.rsplit_once('/')?;
    let (topic, partition) = rest.rsplit_once('/')?;
    Some((topic, partition.parse().ok()?, offset.parse().ok()?))
}

/// The headers to keep when a dead letter is sent back to the inbound topic after a fix: the
/// original ones, without the `dlq-*` headers.
pub fn redrive_headers(dead_letter: &InboundRecord) -> Vec<(String, Vec<u8>)> {
    own_headers(dead_letter)
}

/// A record's headers without the `dlq-*` ones an earlier trip through the DLQ added.
fn own_headers(record: &InboundRecord) -> Headers {
    record.headers.iter().filter(|(name, _)| !name.starts_with(HEADER_PREFIX)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use load_agent_ingest::DeadLetterKind;

    fn header<'a>(h: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a str> {
        h.iter().find(|(n, _)| n == name).and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    #[test]
    fn a_dead_letter_names_its_error_and_source_and_keeps_the_original_headers() {
        let record = InboundRecord {
            topic: "load-agent.events".into(),
            partition: 3,
            offset: 1742,
            timestamp_ms: Some(1),
            key: Some(b"481207".to_vec()),
            headers: vec![("source".into(), b"sms-gateway".to_vec()), ("dlq-error".into(), b"old".to_vec())],
            value: Some(vec![1, 2, 3]),
        };
        let dead = DeadLetter {
            kind: DeadLetterKind::Decode,
            code: "bad_magic",
            error: "bad magic byte 0x01".into(),
            field: None,
        };
        let h = dead_letter_headers(&record, &dead);
        assert_eq!(header(&h, "source"), Some("sms-gateway"));
        assert_eq!(header(&h, HEADER_ERROR), Some("bad magic byte 0x01"), "the old dlq-error is replaced");
        assert_eq!(h.iter().filter(|(n, _)| n == HEADER_ERROR).count(), 1);
        assert_eq!(header(&h, HEADER_REASON_KIND), Some("decode"));
        assert_eq!(header(&h, HEADER_ERROR_CODE), Some("bad_magic"));
        assert_eq!(header(&h, HEADER_SOURCE_TOPIC), Some("load-agent.events"));
        assert_eq!(header(&h, HEADER_SOURCE_PARTITION), Some("3"));
        assert_eq!(header(&h, HEADER_SOURCE_OFFSET), Some("1742"));
        assert_eq!(header(&h, HEADER_ERROR_FIELD), None);
        let back = InboundRecord { headers: h, ..record };
        assert_eq!(redrive_headers(&back), vec![("source".to_string(), b"sms-gateway".to_vec())]);
    }

    fn big(value: usize, key: usize, header: usize) -> InboundRecord {
        InboundRecord {
            topic: "load-agent.events".into(),
            partition: 0,
            offset: 7,
            timestamp_ms: None,
            key: Some(vec![b'k'; key]),
            headers: vec![("source".into(), vec![b'h'; header])],
            value: Some(vec![b'v'; value]),
        }
    }

    fn dead(error_len: usize) -> DeadLetter {
        DeadLetter {
            kind: DeadLetterKind::Decode,
            code: "record_too_large",
            error: "é".repeat(error_len),
            field: None,
        }
    }

    #[test]
    fn a_reduced_dead_letter_always_fits_and_points_to_the_kept_record() {
        for (value, key, header_len, error) in [(2_000_000, 10, 10, 10), (5, 50_000, 50_000, 100_000)] {
            let record = big(value, key, header_len);
            let (k, h) = reduced_dead_letter(&record, &dead(error), "too large");
            let size = record_size_estimate(k.as_deref(), None, &h);
            assert!(size <= REDUCED_MAX_BYTES, "{size}");
            assert_eq!(header(&h, HEADER_BODY), Some("dead_letters:load-agent.events/0/7"));
            assert_eq!(parse_body("dead_letters:load-agent.events/0/7"), Some(("load-agent.events", 0, 7)));
            assert_eq!(header(&h, HEADER_ORIGINAL_SIZE), Some(value.to_string().as_str()));
            assert_eq!(header(&h, HEADER_ORIGINAL_SHA256).map(str::len), Some(64));
            assert_eq!(header(&h, HEADER_ERROR_CODE), Some("record_too_large"));
            assert!(header(&h, HEADER_ERROR).is_some_and(|e| e.len() <= MAX_ERROR_HEADER_BYTES));
        }
        let (k, h) = reduced_dead_letter(&big(2_000_000, 10, 10), &dead(1), "x");
        assert_eq!(k.as_deref(), Some(&b"kkkkkkkkkk"[..]), "a small key is kept");
        assert_eq!(header(&h, "source"), Some("hhhhhhhhhh"), "small headers are kept");
        assert_eq!(header(&h, HEADER_DROPPED), None);
        let (k, h) = reduced_dead_letter(&big(1, 50_000, 50_000), &dead(1), "x");
        assert_eq!(k, None);
        assert_eq!(header(&h, "source"), None);
        assert_eq!(header(&h, HEADER_DROPPED), Some("key,headers"));
    }

    #[test]
    fn the_size_estimate_bounds_what_the_record_takes() {
        let h = vec![("a".to_string(), vec![0u8; 100])];
        let size = record_size_estimate(Some(b"481207"), Some(&[0u8; 1000]), &h);
        assert!((1000 + 100 + 6 + 1 + 61..1000 + 100 + 6 + 1 + 61 + 64).contains(&size), "{size}");
        const { assert!(PRODUCER_MAX_BYTES > MAX_RECORD_BYTES + REDUCED_MAX_BYTES) };
    }
}
