//! Creating the topics (`load-agent topics ensure`, `kafka.create_topics`, tests): brokers like Nisshi do not
//! create topics on first use.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::config::KafkaConfig;

/// Creates each topic that does not exist yet with `partitions` partitions; existing topics are
/// left as they are. Returns the topics it created.
pub async fn ensure_topics(
    config: &KafkaConfig,
    topics: &[String],
    partitions: i32,
    replication: i32,
) -> Result<Vec<String>, KafkaError> {
    let admin: AdminClient<DefaultClientContext> = config.admin_config().create()?;
    let new: Vec<NewTopic<'_>> =
        topics.iter().map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(replication))).collect();
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
