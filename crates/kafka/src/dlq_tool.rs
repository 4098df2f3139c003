//! `load-agent dlq`: reading the DLQ topic (`list`, `show`) and sending chosen dead letters
//! back to the events topic (`redrive`) once their cause is fixed.
//!
//! Redrive republishes each record with its original key, value and headers, without the
//! `dlq-*` headers. A reduced dead letter (docs/kafka.md, "Dead letters of any size") is
//! republished from its row in the store's `dead_letters` table, so redriving it needs the
//! store; without one it is skipped and reported. Redriving twice is harmless: the worker
//! recognizes an event already in the log by its event id and writes nothing.

use chrono::{DateTime, Utc};
use load_agent_ingest::InboundRecord;
use load_agent_store::DeadLetterStore;
use serde::Serialize;

use crate::config::KafkaConfig;
use crate::dlq::{
    HEADER_BODY, HEADER_ERROR, HEADER_ERROR_CODE, HEADER_ERROR_FIELD, HEADER_REASON_KIND, HEADER_REDUCED,
    HEADER_SOURCE_OFFSET, HEADER_SOURCE_PARTITION, HEADER_SOURCE_TOPIC, parse_body, redrive_headers,
};
use crate::dump_kafka::{DumpError, read_topic};
use crate::produce::Producer;

/// Which dead letters a command applies to; an empty filter takes them all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqFilter {
    /// `dlq-error-code` is one of these.
    pub codes: Vec<String>,
    /// The record key (the load id) is one of these.
    pub loads: Vec<String>,
    /// Written to the DLQ at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Written to the DLQ before this time.
    pub until: Option<DateTime<Utc>>,
    /// DLQ positions `partition:offset`; when given, only these.
    pub at: Vec<(i32, i64)>,
}

impl DlqFilter {
    pub fn matches(&self, r: &InboundRecord) -> bool {
        let header = |name| r.header(name).and_then(|v| std::str::from_utf8(v).ok());
        let time = r.timestamp_ms.and_then(DateTime::from_timestamp_millis);
        (self.codes.is_empty()
            || header(HEADER_ERROR_CODE).is_some_and(|c| self.codes.iter().any(|x| x == c)))
            && (self.loads.is_empty() || r.key_str().is_some_and(|k| self.loads.iter().any(|x| x == k)))
            && self.since.is_none_or(|since| time.is_some_and(|t| t >= since))
            && self.until.is_none_or(|until| time.is_some_and(|t| t < until))
            && (self.at.is_empty() || self.at.contains(&(r.partition, r.offset)))
    }
}

/// `partition:offset`, as `--at` takes it.
pub fn parse_position(s: &str) -> Result<(i32, i64), String> {
    let bad = || format!("{s:?} is not a DLQ position: expected PARTITION:OFFSET, e.g. 0:1742");
    let (p, o) = s.split_once(':').ok_or_else(bad)?;
    Ok((p.trim().parse().map_err(|_| bad())?, o.trim().parse().map_err(|_| bad())?))
}

/// One dead letter as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DlqEntry {
    /// `partition:offset` in the DLQ topic.
    pub at: String,
    pub time: Option<DateTime<Utc>>,
    pub load: Option<String>,
    pub kind: String,
    pub code: String,
    pub field: Option<String>,
    pub error: String,
    /// `topic/partition/offset` of the record that was dead-lettered.
    pub source: String,
    /// The value bytes in the DLQ record (0 for a reduced one).
    pub bytes: usize,
    /// Why the record is reduced (its body is in `dead_letters`), if it is.
    pub reduced: Option<String>,
}

impl DlqEntry {
    pub fn of(r: &InboundRecord) -> Self {
        let header = |name| r.header(name).map(|v| String::from_utf8_lossy(v).into_owned());
        DlqEntry {
            at: format!("{}:{}", r.partition, r.offset),
            time: r.timestamp_ms.and_then(DateTime::from_timestamp_millis),
            load: r.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()),
            kind: header(HEADER_REASON_KIND).unwrap_or_default(),
            code: header(HEADER_ERROR_CODE).unwrap_or_default(),
            field: header(HEADER_ERROR_FIELD),
            error: header(HEADER_ERROR).unwrap_or_default(),
            source: format!(
                "{}/{}/{}",
                header(HEADER_SOURCE_TOPIC).unwrap_or_default(),
                header(HEADER_SOURCE_PARTITION).unwrap_or_default(),
                header(HEADER_SOURCE_OFFSET).unwrap_or_default()
            ),
            bytes: r.value.as_ref().map_or(0, Vec::len),
            reduced: header(HEADER_REDUCED),
        }
    }
}

/// Every record of the DLQ topic that `filter` takes, in partition and offset order.
pub async fn read_dlq(config: &KafkaConfig, filter: &DlqFilter) -> Result<Vec<InboundRecord>, DumpError> {
    let mut records = Vec::new();
    read_topic(config, &config.dlq_topic, true, true, &mut |r| {
        if filter.matches(&r) {
            records.push(r);
        }
        Ok(())
    })
    .await?;
    records.sort_by_key(|r| (r.partition, r.offset));
    Ok(records)
}

/// What `redrive` did (or, with `dry_run`, would do) with each dead letter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedriveLine {
    pub at: String,
    pub load: Option<String>,
    pub code: String,
    /// `redriven` (or `would redrive`), `skipped`, `failed`.
    pub outcome: String,
    pub detail: Option<String>,
}

/// What `redrive` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RedriveReport {
    pub chosen: usize,
    pub redriven: usize,
    pub skipped: usize,
    pub failed: usize,
    pub dry_run: bool,
    pub lines: Vec<RedriveLine>,
}

/// The record to publish again for a dead letter: key, value and headers as the producer sent
/// them. A reduced dead letter comes from `kept`.
async fn original(
    r: &InboundRecord,
    kept: Option<&dyn DeadLetterStore>,
) -> Result<(Option<Vec<u8>>, Option<Vec<u8>>, Vec<(String, Vec<u8>)>), String> {
    let Some(body) = r.header(HEADER_BODY) else {
        return Ok((r.key.clone(), r.value.clone(), redrive_headers(r)));
    };
    let body = String::from_utf8_lossy(body);
    let Some((topic, partition, offset)) = parse_body(&body) else {
        return Err(format!("{HEADER_BODY} {body:?} names no dead_letters row"));
    };
    let reference = format!("{topic}/{partition}/{offset}");
    let Some(kept) = kept else {
        return Err(format!(
            "reduced: its body is in dead_letters ({reference}): set database.url (LOAD_AGENT_DATABASE_URL) to the service's database"
        ));
    };
    match kept.kept_dead_letter(topic, partition, offset).await {
        Ok(Some(k)) => Ok((k.key, k.value, k.headers)),
        Ok(None) => Err(format!("reduced, and dead_letters holds no row {reference}")),
        Err(e) => Err(format!("reading dead_letters {reference}: {e}")),
    }
}

/// Publishes `records` (DLQ records) again on `config.events_topic`, each as its producer sent
/// it, waiting for each acknowledgement. `dry_run` publishes nothing and says what it would do.
pub async fn redrive(
    config: &KafkaConfig,
    records: &[InboundRecord],
    kept: Option<&dyn DeadLetterStore>,
    dry_run: bool,
) -> Result<RedriveReport, rdkafka::error::KafkaError> {
    let producer = if dry_run { None } else { Some(Producer::new(config, "dlq-tool")?) };
    let mut report = RedriveReport { chosen: records.len(), dry_run, ..RedriveReport::default() };
    for r in records {
        let entry = DlqEntry::of(r);
        let line = |outcome: &str, detail: Option<String>| RedriveLine {
            at: entry.at.clone(),
            load: entry.load.clone(),
            code: entry.code.clone(),
            outcome: outcome.into(),
            detail,
        };
        let (key, value, headers) = match original(r, kept).await {
            Ok(o) => o,
            Err(why) => {
                report.skipped += 1;
                report.lines.push(line("skipped", Some(why)));
                continue;
            }
        };
        let Some(producer) = &producer else {
            report.redriven += 1;
            report.lines.push(line("would redrive", None));
            continue;
        };
        match producer.send(&config.events_topic, key.as_deref(), value.as_deref(), &headers).await {
            Ok(w) => {
                report.redriven += 1;
                report.lines.push(line("redriven", Some(format!("{}:{}", w.partition, w.offset))));
            }
            Err(e) => {
                report.failed += 1;
                report.lines.push(line("failed", Some(e.to_string())));
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead(partition: i32, offset: i64, key: &str, code: &str, at_ms: i64) -> InboundRecord {
        InboundRecord {
            topic: "load-agent.events.dlq".into(),
            partition,
            offset,
            timestamp_ms: Some(at_ms),
            key: Some(key.as_bytes().to_vec()),
            headers: vec![
                ("source".into(), b"sms-gateway".to_vec()),
                (HEADER_ERROR_CODE.into(), code.as_bytes().to_vec()),
                (HEADER_REASON_KIND.into(), b"decode".to_vec()),
                (HEADER_SOURCE_TOPIC.into(), b"load-agent.events".to_vec()),
                (HEADER_SOURCE_PARTITION.into(), b"3".to_vec()),
                (HEADER_SOURCE_OFFSET.into(), b"99".to_vec()),
            ],
            value: Some(vec![1, 2, 3]),
        }
    }

    #[test]
    fn filters_combine_code_load_time_and_position() {
        let r = dead(0, 7, "L1", "unknown_load", 1_000);
        assert!(DlqFilter::default().matches(&r));
        let f = |f: DlqFilter| f.matches(&r);
        assert!(f(DlqFilter {
            codes: vec!["bad_magic".into(), "unknown_load".into()],
            ..Default::default()
        }));
        assert!(!f(DlqFilter { codes: vec!["bad_magic".into()], ..Default::default() }));
        assert!(f(DlqFilter { loads: vec!["L1".into()], ..Default::default() }));
        assert!(!f(DlqFilter { loads: vec!["L2".into()], ..Default::default() }));
        let t = |ms| DateTime::from_timestamp_millis(ms);
        assert!(f(DlqFilter { since: t(1_000), until: t(1_001), ..Default::default() }));
        assert!(!f(DlqFilter { since: t(1_001), ..Default::default() }));
        assert!(!f(DlqFilter { until: t(1_000), ..Default::default() }));
        assert!(f(DlqFilter { at: vec![(0, 7)], ..Default::default() }));
        assert!(!f(DlqFilter { at: vec![(1, 7)], codes: vec!["unknown_load".into()], ..Default::default() }));
    }

    #[test]
    fn positions_parse_or_say_what_they_expect() {
        assert_eq!(parse_position("0:1742"), Ok((0, 1742)));
        assert!(parse_position("1742").is_err_and(|e| e.contains("PARTITION:OFFSET")));
        assert!(parse_position("a:b").is_err());
    }

    #[test]
    fn an_entry_names_the_error_and_the_source() {
        let e = DlqEntry::of(&dead(2, 5, "L1", "bad_magic", 0));
        assert_eq!((e.at.as_str(), e.code.as_str(), e.kind.as_str()), ("2:5", "bad_magic", "decode"));
        assert_eq!(e.source, "load-agent.events/3/99");
        assert_eq!((e.bytes, e.reduced), (3, None));
    }

    #[tokio::test]
    async fn a_whole_dead_letter_goes_back_without_its_dlq_headers_and_a_reduced_one_needs_the_store() {
        let r = dead(0, 1, "L1", "bad_magic", 0);
        let (key, value, headers) = original(&r, None).await.expect("whole");
        assert_eq!((key.as_deref(), value.as_deref()), (Some(&b"L1"[..]), Some(&[1u8, 2, 3][..])));
        assert_eq!(headers, vec![("source".to_string(), b"sms-gateway".to_vec())]);
        let mut reduced = r.clone();
        reduced.value = None;
        reduced.headers.push((HEADER_BODY.into(), b"dead_letters:load-agent.events/3/99".to_vec()));
        let err = original(&reduced, None).await.expect_err("needs the store");
        assert!(err.contains("database.url") && err.contains("load-agent.events/3/99"), "{err}");
    }
}
