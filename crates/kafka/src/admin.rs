//! Creating the topics (`load-agent topics ensure`, `kafka.create_topics`, tests): brokers like Nisshi do not
//! create topics on first use. The DLQ topic is created with `max.message.bytes` at the
//! producer's limit ([`PRODUCER_MAX_BYTES`]) so a dead letter of any record the service accepts
//! fits whole; [`topic_max_message_bytes`] reads a topic's limit (the consumer checks the DLQ
//! topic's at start).

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use rdkafka::admin::{ConfigResource, ResourceSpecifier};

use crate::config::KafkaConfig;
use crate::dlq::PRODUCER_MAX_BYTES;

/// Creates each topic that does not exist yet with `partitions` partitions (the DLQ topic with
/// `max.message.bytes` = [`PRODUCER_MAX_BYTES`]); existing topics are left as they are. Returns
/// the topics it created.
pub async fn ensure_topics(
    config: &KafkaConfig,
    topics: &[String],
    partitions: i32,
    replication: i32,
) -> Result<Vec<String>, KafkaError> {
    let admin: AdminClient<DefaultClientContext> = config.admin_config().create()?;
    let dlq_limit = PRODUCER_MAX_BYTES.to_string();
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| {
            let topic = NewTopic::new(t, partitions, TopicReplication::Fixed(replication));
            if *t == config.dlq_topic { topic.set("max.message.bytes", &dlq_limit) } else { topic }
        })
        .collect();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(30)));
    let mut created = Vec::new();
    for result in admin.create_topics(new.iter(), &options).await? {
        match result {
            Ok(topic) => created.push(topic),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                tracing::error!(%topic, %code, "topic not created");
                return Err(KafkaError::AdminOp(code));
            }
        }
    }
    Ok(created)
}

/// A topic's `max.message.bytes`: `Ok(None)` when the broker reports no value for it (the
/// broker's default applies; Kafka's is 1 MiB + 12).
pub async fn topic_max_message_bytes(config: &KafkaConfig, topic: &str) -> Result<Option<usize>, KafkaError> {
    let admin: AdminClient<DefaultClientContext> = config.admin_config().create()?;
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(30)));
    let results = admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options).await?;
    let resource: ConfigResource = match results.into_iter().next() {
        Some(Ok(resource)) => resource,
        Some(Err(code)) => return Err(KafkaError::AdminOp(code)),
        None => return Ok(None),
    };
    Ok(resource
        .entries
        .iter()
        .find(|e| e.name == "max.message.bytes")
        .and_then(|e| e.value.as_deref())
        .and_then(|v| v.trim().parse().ok()))
}
