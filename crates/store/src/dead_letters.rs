//! Bodies of dead letters the DLQ topic cannot hold as they are (issue 19): a record too large
//! for the DLQ topic, or one the broker refuses for good, is written to the DLQ in a reduced
//! form that points here, so the partition moves on and nothing is lost.
//!
//! A row is keyed by its source record (`topic`, `partition`, `offset`): keeping the same record
//! twice (a worker crashed between keeping it and moving on) keeps the first copy.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::StoreError;

/// A record kept whole, with why it was dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptDeadLetter {
    pub source_topic: String,
    pub source_partition: i32,
    pub source_offset: i64,
    pub key: Option<Vec<u8>>,
    /// The record's own headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    pub value: Option<Vec<u8>>,
    /// The dead letter's code (`record_too_large`, `invalid_event`, ...).
    pub error_code: String,
    pub error: String,
    /// The caller's clock.
    pub kept_at: DateTime<Utc>,
}

impl KeptDeadLetter {
    /// `topic/partition/offset`: what the reduced DLQ record's `dlq-body` header names.
    pub fn reference(&self) -> String {
        format!("{}/{}/{}", self.source_topic, self.source_partition, self.source_offset)
    }
}

#[async_trait]
pub trait DeadLetterStore: Send + Sync {
    /// Keeps the record; a record already kept (same source) is left as it is.
    async fn keep_dead_letter(&self, letter: &KeptDeadLetter) -> Result<(), StoreError>;

    /// The kept record of a source, if any.
    async fn kept_dead_letter(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Option<KeptDeadLetter>, StoreError>;
}

/// Headers as one blob: for each header, the name's length (u32, big-endian), the name, the
/// value's length, the value.
pub(crate) fn encode_headers(headers: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        for part in [name.as_bytes(), value.as_slice()] {
            out.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_be_bytes());
            out.extend_from_slice(part);
        }
    }
    out
}

pub(crate) fn decode_headers(mut bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    let corrupt = || StoreError::Corrupt("dead_letters.headers: truncated".into());
    let take = |bytes: &mut &[u8]| -> Result<Vec<u8>, StoreError> {
        let (len, rest) = bytes.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let len = u32::from_be_bytes(*len) as usize;
        if rest.len() < len {
            return Err(corrupt());
        }
        let (part, rest) = rest.split_at(len);
        *bytes = rest;
        Ok(part.to_vec())
    };
    let mut headers = Vec::new();
    while !bytes.is_empty() {
        let name = take(&mut bytes)?;
        let value = take(&mut bytes)?;
        let name = String::from_utf8(name)
            .map_err(|_| StoreError::Corrupt("dead_letters.headers: a name is not UTF-8".into()))?;
        headers.push((name, value));
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_including_empty_ones() {
        let headers = vec![
            ("source".to_string(), b"sms-gateway".to_vec()),
            (String::new(), Vec::new()),
            ("bin".to_string(), vec![0, 255, 7]),
        ];
        assert_eq!(decode_headers(&encode_headers(&headers)).ok(), Some(headers));
        assert!(decode_headers(&[0, 0, 0, 9, b'x']).is_err());
    }
}
