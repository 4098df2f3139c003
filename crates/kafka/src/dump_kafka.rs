//! `load-agent dump`: records a topic from Kafka as a dump (the file format is
//! `load_agent_ingest::dump`); [`read_topic`], the reader under it, also serves `load-agent dlq`.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use load_agent_ingest::{DumpRecord, InboundRecord};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};

use crate::config::KafkaConfig;

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("kafka: {0}")]
    Kafka(#[from] KafkaError),
    #[error("topic {0} does not exist or has no partitions")]
    UnknownTopic(String),
    #[error("cannot write the dump: {0}")]
    Output(#[from] std::io::Error),
    #[error("reading the topic's metadata: {0}")]
    Task(String),
}

/// What [`dump`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpSummary {
    pub records: u64,
    pub partitions: usize,
}

/// Records `topic` as a dump on `output`, one line per record, flushed line by line. Reads every
/// partition from its beginning (`from_beginning`) or from its end (new records only). With
/// `until_end` it stops at the end offsets it saw when it started; without, it follows the
/// topic until the future is dropped. It commits nothing.
pub async fn dump(
    brokers: &str,
    topic: &str,
    from_beginning: bool,
    until_end: bool,
    output: &mut dyn Write,
) -> Result<DumpSummary, DumpError> {
    let config = KafkaConfig::new(brokers);
    read_topic(&config, topic, from_beginning, until_end, &mut |record| {
        writeln!(output, "{}", DumpRecord::from_record(&record).to_line())?;
        output.flush()
    })
    .await
}

/// Reads `topic` with `config`'s client settings (security overrides included) and hands each
/// record to `on_record`, as [`dump`] describes. It commits nothing.
pub async fn read_topic(
    config: &KafkaConfig,
    topic: &str,
    from_beginning: bool,
    until_end: bool,
    on_record: &mut dyn FnMut(InboundRecord) -> std::io::Result<()>,
) -> Result<DumpSummary, DumpError> {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let group = format!("load-agent-dump-{}-{nanos}", std::process::id());
    let consumer: Arc<StreamConsumer> = Arc::new(config.reader_config(&group).create()?);
    let (name, meta_consumer) = (topic.to_owned(), consumer.clone());
    // Metadata and watermark calls block: off the runtime's worker threads.
    let ends = tokio::task::spawn_blocking(move || -> Result<Vec<(i32, i64, i64)>, KafkaError> {
        let timeout = Duration::from_secs(10);
        let metadata = meta_consumer.fetch_metadata(Some(&name), timeout)?;
        let mut ends = Vec::new();
        for t in metadata.topics().iter().filter(|t| t.name() == name && t.error().is_none()) {
            for p in t.partitions() {
                let (low, high) = meta_consumer.fetch_watermarks(&name, p.id(), timeout)?;
                ends.push((p.id(), low, high));
            }
        }
        Ok(ends)
    })
    .await
    .map_err(|e| DumpError::Task(e.to_string()))??;
    if ends.is_empty() {
        return Err(DumpError::UnknownTopic(topic.to_owned()));
    }
    let mut tpl = TopicPartitionList::new();
    let mut remaining: BTreeMap<i32, i64> = BTreeMap::new();
    for (p, low, high) in &ends {
        tpl.add_partition_offset(topic, *p, if from_beginning { Offset::Beginning } else { Offset::End })?;
        if from_beginning && high > low {
            remaining.insert(*p, *high);
        }
    }
    consumer.assign(&tpl)?;
    let mut summary = DumpSummary { records: 0, partitions: ends.len() };
    if until_end && remaining.is_empty() {
        return Ok(summary);
    }
    loop {
        let next = tokio::time::timeout(Duration::from_secs(1), consumer.recv()).await;
        match next {
            Ok(Ok(message)) => {
                let record = crate::record::from_message(&message);
                drop(message);
                let (partition, offset) = (record.partition, record.offset);
                on_record(record)?;
                summary.records += 1;
                if remaining.get(&partition).is_some_and(|end| offset + 1 >= *end) {
                    remaining.remove(&partition);
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "dump: consumer error"),
            Err(_) => {
                // Idle: a partition whose last offsets are control records never yields its end
                // offset; its position tells.
                if let Ok(positions) = consumer.position() {
                    for e in positions.elements() {
                        if let Offset::Offset(pos) = e.offset()
                            && remaining.get(&e.partition()).is_some_and(|end| pos >= *end)
                        {
                            remaining.remove(&e.partition());
                        }
                    }
                }
            }
        }
        if until_end && remaining.is_empty() {
            break;
        }
    }
    Ok(summary)
}
