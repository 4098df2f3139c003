//! The dead-letter record: the original key and value, the original headers, then headers that
//! name the error and the source record (topics.md). Pure code; [`crate::DlqProducer`] sends it.

use crate::process::DeadLetter;
use crate::record::InboundRecord;

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
/// Every header the DLQ adds starts with this.
pub const HEADER_PREFIX: &str = "dlq-";

/// The headers of a dead letter: the record's own headers (without `dlq-*` ones from an
/// earlier trip through the DLQ) followed by the `dlq-*` headers.
pub fn dead_letter_headers(record: &InboundRecord, dead: &DeadLetter) -> Vec<(String, Vec<u8>)> {
    let mut headers: Vec<(String, Vec<u8>)> =
        record.headers.iter().filter(|(name, _)| !name.starts_with(HEADER_PREFIX)).cloned().collect();
    let mut add = |name: &str, value: &str| headers.push((name.to_owned(), value.as_bytes().to_vec()));
    add(HEADER_ERROR, &dead.error);
    add(HEADER_REASON_KIND, dead.kind.as_str());
    add(HEADER_ERROR_CODE, dead.code);
    if let Some(field) = &dead.field {
        add(HEADER_ERROR_FIELD, field);
    }
    add(HEADER_SOURCE_TOPIC, &record.topic);
    add(HEADER_SOURCE_PARTITION, &record.partition.to_string());
    add(HEADER_SOURCE_OFFSET, &record.offset.to_string());
    headers
}

/// The headers to keep when a dead letter is sent back to the inbound topic after a fix: the
/// original ones, without the `dlq-*` headers.
pub fn redrive_headers(dead_letter: &InboundRecord) -> Vec<(String, Vec<u8>)> {
    dead_letter.headers.iter().filter(|(name, _)| !name.starts_with(HEADER_PREFIX)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::DeadLetterKind;

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
}
