//! Where the topics are and how the clients are configured (topics.md: names are defaults,
//! every one is configurable); [`KafkaConfig::from_settings`] builds it from the `[kafka]` section
//! (`load_agent_ingest::settings`, where the topic names' defaults live too).

use std::time::Duration;

use load_agent_domain::Destination;
use load_agent_ingest::KafkaSettings;
pub use load_agent_ingest::topics::{ACTIONS_TOPIC_PREFIX, DLQ_TOPIC, EVENTS_TOPIC, GROUP_ID};
use rdkafka::ClientConfig;

/// The destinations that have an action topic (every one but `timer`, which never leaves the
/// agent).
pub const ACTION_DESTINATIONS: [Destination; 6] = [
    Destination::Sms,
    Destination::Email,
    Destination::Slack,
    Destination::Tms,
    Destination::Hero,
    Destination::LoadStatus,
];

/// Brokers, topic names and client settings shared by the consumer and the producers.
/// `Debug` masks the values of secret client properties (`*password*`, `*secret*`).
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaConfig {
    /// `bootstrap.servers`: `host:port[,host:port...]`.
    pub brokers: String,
    pub events_topic: String,
    pub dlq_topic: String,
    pub actions_topic_prefix: String,
    pub group_id: String,
    /// How long a produce waits for the broker's acknowledgement (`message.timeout.ms`).
    pub send_timeout: Duration,
    /// How long the group coordinator waits for a worker's heartbeat before it hands the
    /// worker's partitions to the others (`session.timeout.ms`): the time a killed worker's
    /// loads wait.
    pub session_timeout: Duration,
    /// How often a worker heartbeats to the coordinator (`heartbeat.interval.ms`); below the
    /// session timeout (a third of it or less is librdkafka's advice).
    pub heartbeat_interval: Duration,
    /// Lanes of the relay's and the timer pump's producers ([`crate::Producer::with_lanes`]):
    /// each its own connection to every broker, a key always through the same one.
    pub producer_lanes: usize,
    /// `linger.ms` of every producer: how long a record may wait for others to share its
    /// produce request.
    pub linger: Duration,
    /// Extra librdkafka properties applied last, to every client (e.g. security settings).
    pub client_overrides: Vec<(String, String)>,
    /// The schema ids producers frame records with: the embedded registry's fixed ids, or the
    /// ids a Confluent-compatible registry gave (`registry::register_schemas`).
    pub schema_ids: SchemaIds,
}

impl std::fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let overrides: Vec<(&str, &str)> = self
            .client_overrides
            .iter()
            .map(|(k, v)| {
                let secret = k.contains("password") || k.contains("secret");
                (k.as_str(), if secret { "***" } else { v.as_str() })
            })
            .collect();
        f.debug_struct("KafkaConfig")
            .field("brokers", &self.brokers)
            .field("events_topic", &self.events_topic)
            .field("dlq_topic", &self.dlq_topic)
            .field("actions_topic_prefix", &self.actions_topic_prefix)
            .field("group_id", &self.group_id)
            .field("send_timeout", &self.send_timeout)
            .field("session_timeout", &self.session_timeout)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("producer_lanes", &self.producer_lanes)
            .field("linger", &self.linger)
            .field("client_overrides", &overrides)
            .field("schema_ids", &self.schema_ids)
            .finish()
    }
}

#[cfg(test)]
mod debug_tests {
    use super::*;

    #[test]
    fn debug_masks_secret_client_properties() {
        let mut c = KafkaConfig::new("127.0.0.1:9092");
        c.client_overrides = vec![
            ("sasl.username".into(), "svc".into()),
            ("sasl.password".into(), "hunter2-secret".into()),
            ("ssl.key.password".into(), "k3y".into()),
        ];
        let shown = format!("{c:?}");
        assert!(shown.contains("svc") && shown.contains("***"), "{shown}");
        assert!(!shown.contains("hunter2-secret") && !shown.contains("k3y"), "{shown}");
    }
}

/// The writer schema ids of the records load-agent produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaIds {
    pub inbound_event: load_agent_avro::SchemaId,
    pub action_command: load_agent_avro::SchemaId,
}

impl SchemaIds {
    /// The fixed ids of `schemas/avro/ids.json`.
    pub fn embedded() -> Self {
        SchemaIds {
            inbound_event: load_agent_avro::inbound::latest_inbound_schema_id(),
            action_command: load_agent_avro::action_command::latest_action_command_schema_id(),
        }
    }
}

impl Default for SchemaIds {
    fn default() -> Self {
        Self::embedded()
    }
}

impl KafkaConfig {
    /// The defaults of topics.md with these brokers.
    pub fn new(brokers: impl Into<String>) -> Self {
        KafkaConfig {
            brokers: brokers.into(),
            events_topic: EVENTS_TOPIC.into(),
            dlq_topic: DLQ_TOPIC.into(),
            actions_topic_prefix: ACTIONS_TOPIC_PREFIX.into(),
            group_id: GROUP_ID.into(),
            send_timeout: Duration::from_secs(30),
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            producer_lanes: load_agent_ingest::settings::DEFAULT_PRODUCER_LANES,
            linger: Duration::from_millis(load_agent_ingest::settings::DEFAULT_LINGER_MS),
            client_overrides: Vec::new(),
            schema_ids: SchemaIds::embedded(),
        }
    }

    /// `load-agent.actions.<service>`.
    pub fn actions_topic(&self, destination: Destination) -> String {
        format!("{}.{}", self.actions_topic_prefix, destination.as_str())
    }

    /// The inbound topic, its DLQ and every action topic: what a deployment must create.
    pub fn all_topics(&self) -> Vec<String> {
        let mut topics = vec![self.events_topic.clone(), self.dlq_topic.clone()];
        topics.extend(ACTION_DESTINATIONS.iter().map(|d| self.actions_topic(*d)));
        topics
    }
}

impl KafkaConfig {
    /// The clients' configuration of the `[kafka]` section: brokers, topics, group, timeouts and
    /// the security properties (applied last to every client). The send timeout keeps its
    /// default; the schema ids are the embedded registry's until a registry gives others.
    pub fn from_settings(settings: &KafkaSettings) -> Self {
        KafkaConfig {
            events_topic: settings.events_topic.clone(),
            dlq_topic: settings.dlq_topic.clone(),
            actions_topic_prefix: settings.actions_topic_prefix.clone(),
            group_id: settings.group_id.clone(),
            session_timeout: Duration::from_millis(settings.session_timeout_ms),
            heartbeat_interval: Duration::from_millis(settings.heartbeat_interval_ms),
            producer_lanes: settings.producer_lanes,
            linger: Duration::from_millis(settings.linger_ms),
            client_overrides: settings.client_overrides(),
            ..KafkaConfig::new(settings.brokers.clone())
        }
    }
}

impl KafkaConfig {
    fn base(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        c
    }

    fn with_overrides(&self, mut c: ClientConfig) -> ClientConfig {
        for (k, v) in &self.client_overrides {
            c.set(k, v);
        }
        c
    }

    /// An idempotent producer: `enable.idempotence` (hence `acks=all` and ordered retries per
    /// partition), keys on the same partitions as Java clients (`murmur2_random`).
    pub fn producer_config(&self) -> ClientConfig {
        let mut c = self.base();
        c.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("partitioner", "murmur2_random")
            .set("linger.ms", self.linger.as_millis().to_string())
            // Derived from the service's own record limit (dlq.rs): a dead letter of a record
            // at that limit is never refused by librdkafka itself (its default is 1,000,000).
            .set("message.max.bytes", crate::dlq::PRODUCER_MAX_BYTES.to_string())
            .set("message.timeout.ms", self.send_timeout.as_millis().to_string())
            // Statistics every 10 s feed the producer's round-trip metric.
            .set("statistics.interval.ms", "10000");
        self.with_overrides(c)
    }

    /// The load workers' consumer: one group, offsets stored by the application only after a
    /// record is done (`enable.auto.offset.store=false`) and committed by the auto-commit timer
    /// and explicitly on revocation and shutdown.
    pub fn consumer_config(&self) -> ClientConfig {
        let mut c = self.base();
        c.set("group.id", &self.group_id)
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", "1000")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false")
            .set("session.timeout.ms", self.session_timeout.as_millis().to_string())
            .set("heartbeat.interval.ms", self.heartbeat_interval.as_millis().to_string())
            // A fetch waits at most 50 ms for data (librdkafka's 500 ms default is most of the
            // event-to-commit budget of 100 ms at p99 on a quiet partition).
            .set("fetch.wait.max.ms", "50")
            // Statistics every 10 s feed the consumer-lag metric.
            .set("statistics.interval.ms", "10000")
            // Bounds what librdkafka prefetches per partition; the consumer bounds the rest.
            .set("queued.max.messages.kbytes", "16384");
        self.with_overrides(c)
    }

    /// A consumer outside the group's offsets (dumps): it never commits.
    pub fn reader_config(&self, group_id: &str) -> ClientConfig {
        let mut c = self.base();
        c.set("group.id", group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false");
        self.with_overrides(c)
    }

    pub fn admin_config(&self) -> ClientConfig {
        self.with_overrides(self.base())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_follow_topics_md() {
        let c = KafkaConfig::new("127.0.0.1:9092");
        assert_eq!(c.actions_topic(Destination::LoadStatus), "load-agent.actions.load_status");
        assert_eq!(c.all_topics().len(), 8);
        assert!(c.all_topics().contains(&"load-agent.events.dlq".to_string()));
    }

    #[test]
    fn the_producer_is_idempotent_and_partitions_like_java() {
        let c = KafkaConfig::new("b:1").producer_config();
        assert_eq!(c.get("enable.idempotence"), Some("true"));
        assert_eq!(c.get("acks"), Some("all"));
        assert_eq!(c.get("partitioner"), Some("murmur2_random"));
    }

    #[test]
    fn overrides_apply_last() {
        let mut k = KafkaConfig::new("b:1");
        k.client_overrides.push(("auto.commit.interval.ms".into(), "250".into()));
        let c = k.consumer_config();
        assert_eq!(c.get("auto.commit.interval.ms"), Some("250"));
        assert_eq!(c.get("enable.auto.offset.store"), Some("false"));
    }

    #[test]
    fn the_defaults_are_valid_and_the_clients_configuration_is_built_from_them() {
        let settings = KafkaSettings::default();
        settings.validate().expect("valid");
        let mut config = KafkaConfig::from_settings(&settings);
        let overrides = std::mem::take(&mut config.client_overrides);
        assert_eq!(config, KafkaConfig::new(""), "the section's defaults are KafkaConfig::new's");
        assert_eq!(overrides, vec![("security.protocol".to_string(), "plaintext".to_string())]);
    }

    #[test]
    fn every_setting_reaches_the_clients_configuration() {
        let settings = KafkaSettings {
            brokers: "k1:9092,k2:9092".into(),
            group_id: "g".into(),
            events_topic: "e".into(),
            dlq_topic: "d".into(),
            actions_topic_prefix: "a".into(),
            security_protocol: "SASL_SSL".into(),
            sasl_mechanism: "PLAIN".into(),
            sasl_username: "u".into(),
            sasl_password: load_agent_domain::settings::Secret::new("p"),
            session_timeout_ms: 6_000,
            heartbeat_interval_ms: 1_000,
            producer_lanes: 3,
            linger_ms: 20,
            ..KafkaSettings::default()
        };
        settings.validate().expect("valid");
        let c = KafkaConfig::from_settings(&settings);
        assert_eq!((c.brokers.as_str(), c.group_id.as_str()), ("k1:9092,k2:9092", "g"));
        assert_eq!(
            (c.events_topic.as_str(), c.dlq_topic.as_str(), c.actions_topic_prefix.as_str()),
            ("e", "d", "a")
        );
        assert_eq!(
            (c.session_timeout, c.heartbeat_interval),
            (Duration::from_secs(6), Duration::from_secs(1))
        );
        assert_eq!(c.producer_lanes, 3);
        assert_eq!(c.producer_config().get("linger.ms"), Some("20"));
        assert!(c.client_overrides.contains(&("sasl.password".to_string(), "p".to_string())));
        assert!(!format!("{c:?}").contains("\"p\""), "the password is masked in Debug");
    }
}
