//! The `[kafka]` section of the configuration: brokers, topics, group membership, security,
//! with its defaults (topics.md) and checks; `load_agent_kafka::KafkaConfig::from_settings` is
//! the clients' configuration built from it. The binary composes the sections
//! (docs/configuration.md); the section lives here, out of the Kafka crate, so that the embedded
//! default (built without Kafka) reads and checks the same configuration.

use load_agent_domain::settings::{Secret, SettingError, serialize_masked_url};
use serde::{Deserialize, Serialize};

use crate::topics::{ACTIONS_TOPIC_PREFIX, DLQ_TOPIC, EVENTS_TOPIC, GROUP_ID};

fn bad(setting: &str, problem: impl Into<String>) -> SettingError {
    SettingError::new(setting, problem)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaSettings {
    /// Comma-separated bootstrap servers; empty means the in-process queue (embedded mode).
    pub brokers: String,
    pub group_id: String,
    pub events_topic: String,
    pub dlq_topic: String,
    /// Action topics are `<actions_topic_prefix>.<service>`.
    pub actions_topic_prefix: String,
    /// A Confluent-compatible schema registry; empty means the embedded registry. A password in
    /// it (`https://user:pass@registry`) is masked when printed.
    #[serde(serialize_with = "serialize_masked_url")]
    pub schema_registry_url: String,
    /// `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub security_protocol: String,
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`, with SASL.
    pub sasl_mechanism: String,
    pub sasl_username: String,
    pub sasl_password: Secret,
    /// A CA bundle for TLS to the brokers.
    pub ssl_ca_location: String,
    /// Records in flight per consumer (backpressure bound).
    pub max_in_flight: usize,
    /// `session.timeout.ms`: how long the group waits for a silent worker before its
    /// partitions move to the others.
    pub session_timeout_ms: u64,
    /// `heartbeat.interval.ms`: how often a worker tells the group it is alive.
    pub heartbeat_interval_ms: u64,
    /// Lanes of the relay's and the timer pump's producers: each an idempotent producer with its
    /// own connection to every broker, a record's key always through the same lane (1..=16).
    pub producer_lanes: usize,
    /// `linger.ms` of every producer: how long a record may wait for others to share its
    /// produce request (0..=1000).
    pub linger_ms: u64,
    /// Create missing topics at start (development and tests; production creates them ahead).
    pub create_topics: bool,
    /// Partitions of topics created with `create_topics`.
    pub partitions: i32,
}

impl Default for KafkaSettings {
    fn default() -> Self {
        KafkaSettings {
            brokers: String::new(),
            group_id: GROUP_ID.into(),
            events_topic: EVENTS_TOPIC.into(),
            dlq_topic: DLQ_TOPIC.into(),
            actions_topic_prefix: ACTIONS_TOPIC_PREFIX.into(),
            schema_registry_url: String::new(),
            security_protocol: "PLAINTEXT".into(),
            sasl_mechanism: String::new(),
            sasl_username: String::new(),
            sasl_password: Secret::default(),
            ssl_ca_location: String::new(),
            max_in_flight: 1000,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 3_000,
            producer_lanes: DEFAULT_PRODUCER_LANES,
            linger_ms: DEFAULT_LINGER_MS,
            create_topics: false,
            partitions: 12,
        }
    }
}

/// `kafka.producer_lanes`'s default: half of the default 12 partitions per lane, so each lane
/// writes whole partitions of its own (docs/kafka.md, "Producer lanes").
pub const DEFAULT_PRODUCER_LANES: usize = 2;

/// `kafka.linger_ms`'s default: a record waits at most 5 ms for others to share its produce
/// request (docs/kafka.md, "Producer lanes": what a longer linger buys and costs).
pub const DEFAULT_LINGER_MS: u64 = 5;

/// `kafka.security_protocol` values (librdkafka's `security.protocol`, upper case).
pub const KAFKA_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/// `kafka.sasl_mechanism` values (librdkafka's `sasl.mechanisms`).
pub const KAFKA_SASL_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

impl KafkaSettings {
    /// Security, the consumer's bound, group membership timeouts and the partitions of created
    /// topics.
    pub fn validate(&self) -> Result<(), SettingError> {
        self.validate_security()?;
        if self.max_in_flight == 0 {
            return Err(bad("kafka.max_in_flight", "must be at least 1"));
        }
        if !(1_000..=3_600_000).contains(&self.session_timeout_ms) {
            return Err(bad("kafka.session_timeout_ms", "must be between 1000 and 3600000"));
        }
        if self.heartbeat_interval_ms == 0 || self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err(bad(
                "kafka.heartbeat_interval_ms",
                format!(
                    "must be at least 1 and below kafka.session_timeout_ms ({}); a third of it or less is advised",
                    self.session_timeout_ms
                ),
            ));
        }
        if !(1..=16).contains(&self.producer_lanes) {
            return Err(bad("kafka.producer_lanes", "must be between 1 and 16"));
        }
        if self.linger_ms > 1_000 {
            return Err(bad("kafka.linger_ms", "must be between 0 and 1000"));
        }
        if self.partitions <= 0 {
            return Err(bad("kafka.partitions", "must be at least 1"));
        }
        Ok(())
    }

    /// `kafka.security_protocol` and what goes with it: SASL needs a known mechanism and both
    /// credentials; credentials or a CA bundle that the protocol would not use are refused, so a
    /// forgotten `security_protocol` never silently falls back to plaintext.
    fn validate_security(&self) -> Result<(), SettingError> {
        let k = self;
        let protocol = k.security_protocol.as_str();
        if !KAFKA_PROTOCOLS.contains(&protocol) {
            return Err(bad(
                "kafka.security_protocol",
                format!("{protocol:?} is not one of {}", KAFKA_PROTOCOLS.join(", ")),
            ));
        }
        let sasl = protocol.starts_with("SASL_");
        let tls = protocol.ends_with("SSL");
        if sasl {
            if !KAFKA_SASL_MECHANISMS.contains(&k.sasl_mechanism.as_str()) {
                return Err(bad(
                    "kafka.sasl_mechanism",
                    format!(
                        "{:?} is not one of {} (required with kafka.security_protocol {protocol})",
                        k.sasl_mechanism,
                        KAFKA_SASL_MECHANISMS.join(", ")
                    ),
                ));
            }
            if k.sasl_username.is_empty() {
                return Err(bad(
                    "kafka.sasl_username",
                    format!("required with kafka.security_protocol {protocol}"),
                ));
            }
            if k.sasl_password.is_empty() {
                return Err(bad(
                    "kafka.sasl_password",
                    format!("required with kafka.security_protocol {protocol}"),
                ));
            }
        } else {
            let set = [
                ("kafka.sasl_mechanism", k.sasl_mechanism.is_empty()),
                ("kafka.sasl_username", k.sasl_username.is_empty()),
                ("kafka.sasl_password", k.sasl_password.is_empty()),
            ];
            if let Some((name, _)) = set.iter().find(|(_, empty)| !empty) {
                return Err(bad(
                    name,
                    format!(
                        "set, but kafka.security_protocol {protocol} does not use SASL (SASL_SSL or SASL_PLAINTEXT)"
                    ),
                ));
            }
        }
        if !tls && !k.ssl_ca_location.is_empty() {
            return Err(bad(
                "kafka.ssl_ca_location",
                format!("set, but kafka.security_protocol {protocol} does not use TLS (SSL or SASL_SSL)"),
            ));
        }
        Ok(())
    }

    /// librdkafka security properties from the `kafka.*` settings.
    pub fn client_overrides(&self) -> Vec<(String, String)> {
        let k = self;
        let mut o = vec![("security.protocol".to_string(), k.security_protocol.to_ascii_lowercase())];
        if k.security_protocol.starts_with("SASL") {
            o.push(("sasl.mechanisms".into(), k.sasl_mechanism.clone()));
            o.push(("sasl.username".into(), k.sasl_username.clone()));
            o.push(("sasl.password".into(), k.sasl_password.expose().to_string()));
        }
        if !k.ssl_ca_location.is_empty() {
            o.push(("ssl.ca.location".into(), k.ssl_ca_location.clone()));
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        KafkaSettings::default().validate().expect("valid");
    }

    #[test]
    fn bad_values_name_the_setting() {
        let e = KafkaSettings { partitions: 0, ..KafkaSettings::default() }.validate().expect_err("0");
        assert_eq!(e.setting, "kafka.partitions");
        let e = KafkaSettings { security_protocol: "TLS".into(), ..KafkaSettings::default() }
            .validate()
            .expect_err("TLS");
        assert_eq!(e.setting, "kafka.security_protocol");
        for lanes in [0, 17] {
            let e = KafkaSettings { producer_lanes: lanes, ..KafkaSettings::default() }
                .validate()
                .expect_err("lanes out of range");
            assert_eq!(e.setting, "kafka.producer_lanes");
        }
        for linger in [0, 1_000] {
            KafkaSettings { linger_ms: linger, ..KafkaSettings::default() }.validate().expect("in range");
        }
        let e = KafkaSettings { linger_ms: 1_001, ..KafkaSettings::default() }.validate().expect_err("1001");
        assert_eq!(e.setting, "kafka.linger_ms");
    }
}
