//! Typed, layered configuration: defaults, then a TOML file (`--config FILE` or
//! `LOAD_AGENT_CONFIG`), then environment variables `LOAD_AGENT_<SECTION>_<KEY>` (for example
//! `LOAD_AGENT_DATABASE_URL`, `LOAD_AGENT_KAFKA_BROKERS`). Validated at start with errors that
//! name the setting; secrets are wrapped and never printed (docs/configuration.md).

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use figment::value::Value;
use serde::{Deserialize, Serialize, Serializer};

/// A secret value: `Debug`, `Display` and serialization print `***`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

#[allow(dead_code)] // used by the service wiring
impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The value, for the one place that must use it (a client constructor).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "\"\"" } else { "***" })
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if self.0.is_empty() { "" } else { "***" })
    }
}

/// A database URL may carry a password: shown with the password masked.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct DatabaseUrl(String);

#[allow(dead_code)] // used by the service wiring
impl DatabaseUrl {
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn masked(&self) -> String {
        mask_url_password(&self.0)
    }

    pub fn is_postgres(&self) -> bool {
        self.0.starts_with("postgres://") || self.0.starts_with("postgresql://")
    }

    pub fn is_sqlite(&self) -> bool {
        self.0.starts_with("sqlite:")
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.masked())
    }
}

impl Serialize for DatabaseUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.masked())
    }
}

/// `scheme://user:password@host` → `scheme://user:***@host`.
pub fn mask_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let Some((auth, host)) = rest.split_once('@') else { return url.to_string() };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// `sqlite://FILE` (the embedded default) or `postgres://...` (production).
    pub url: DatabaseUrl,
    pub max_connections: u32,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        DatabaseSettings { url: DatabaseUrl("sqlite://load-agent.db".into()), max_connections: 16 }
    }
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
    /// A Confluent-compatible schema registry; empty means the embedded registry.
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
    /// Create missing topics at start (development and tests; production creates them ahead).
    pub create_topics: bool,
    /// Partitions of topics created with `create_topics`.
    pub partitions: i32,
}

impl Default for KafkaSettings {
    fn default() -> Self {
        KafkaSettings {
            brokers: String::new(),
            group_id: "load-agent".into(),
            events_topic: "load-agent.events".into(),
            dlq_topic: "load-agent.events.dlq".into(),
            actions_topic_prefix: "load-agent.actions".into(),
            schema_registry_url: String::new(),
            security_protocol: "PLAINTEXT".into(),
            sasl_mechanism: String::new(),
            sasl_username: String::new(),
            sasl_password: Secret::default(),
            ssl_ca_location: String::new(),
            max_in_flight: 1000,
            create_topics: false,
            partitions: 12,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSettings {
    /// `/events`, `/loads/{id}`, `/metrics`, `/healthz`, `/readyz`. Loopback by default; any
    /// other address requires `token`.
    pub addr: String,
    /// Bearer token required on every endpoint except the probes when set.
    pub token: Secret,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings { addr: "127.0.0.1:8080".into(), token: Secret::default() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// `local` (triage only; the planner and document reader are unavailable and behavior.md's
    /// fallbacks apply), `local+openai`, `openai`, `fake`.
    pub provider: String,
    pub call_timeout_ms: u64,
    pub max_retries: u32,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// One run's deadline, conflict re-decides included; after it the run commits an urgent
    /// Hero task.
    pub run_deadline_ms: u64,
    pub calls_per_second: u32,
    /// An OpenAI-compatible endpoint (DeepSeek, llama.cpp server, vLLM); empty means none.
    pub openai_base_url: String,
    pub openai_api_key: Secret,
    /// The default model for draft, plan and extract_sop.
    pub openai_model: String,
    pub openai_model_draft: String,
    pub openai_model_plan: String,
    pub openai_model_extract_sop: String,
    /// A vision model for documents.
    pub openai_model_extract_document: String,
    /// Only when triage should not run locally.
    pub openai_model_triage: String,
    /// `json_schema` or `json_object` (DeepSeek).
    pub openai_response_format: String,
    /// `model=input/output;...` in USD per million tokens.
    pub openai_prices: String,
    pub openai_max_output_tokens: String,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            provider: "local".into(),
            call_timeout_ms: 20_000,
            max_retries: 2,
            backoff_base_ms: 500,
            backoff_max_ms: 8_000,
            run_deadline_ms: 120_000,
            calls_per_second: 20,
            openai_base_url: String::new(),
            openai_api_key: Secret::default(),
            openai_model: String::new(),
            openai_model_draft: String::new(),
            openai_model_plan: String::new(),
            openai_model_extract_sop: String::new(),
            openai_model_extract_document: String::new(),
            openai_model_triage: String::new(),
            openai_response_format: String::new(),
            openai_prices: String::new(),
            openai_max_output_tokens: String::new(),
        }
    }
}

impl LlmConfig {
    /// The value of a `LOAD_AGENT_LLM_*` name, as the LLM crates read their settings.
    pub fn lookup(&self, name: &str) -> Option<String> {
        let key = name.strip_prefix("LOAD_AGENT_LLM_")?.to_ascii_lowercase();
        let v = match key.as_str() {
            "provider" => self.provider.clone(),
            "call_timeout_ms" => self.call_timeout_ms.to_string(),
            "max_retries" => self.max_retries.to_string(),
            "backoff_base_ms" => self.backoff_base_ms.to_string(),
            "backoff_max_ms" => self.backoff_max_ms.to_string(),
            "run_deadline_ms" => self.run_deadline_ms.to_string(),
            "calls_per_second" => self.calls_per_second.to_string(),
            "openai_base_url" => self.openai_base_url.clone(),
            "openai_api_key" => self.openai_api_key.expose().to_string(),
            "openai_model" => self.openai_model.clone(),
            "openai_model_draft" => self.openai_model_draft.clone(),
            "openai_model_plan" => self.openai_model_plan.clone(),
            "openai_model_extract_sop" => self.openai_model_extract_sop.clone(),
            "openai_model_extract_document" => self.openai_model_extract_document.clone(),
            "openai_model_triage" => self.openai_model_triage.clone(),
            "openai_response_format" => self.openai_response_format.clone(),
            "openai_prices" => self.openai_prices.clone(),
            "openai_max_output_tokens" => self.openai_max_output_tokens.clone(),
            _ => return None,
        };
        Some(v).filter(|v| !v.is_empty())
    }

    pub fn settings(&self) -> Result<load_agent_llm::LlmSettings, ConfigError> {
        load_agent_llm::LlmSettings::from_lookup(|n| self.lookup(n))
            .map_err(|e| bad(&llm_setting(&e.to_string()), e.to_string()))
    }

    pub fn openai(&self) -> Result<Option<load_agent_llm_openai::OpenAiConfig>, ConfigError> {
        load_agent_llm_openai::OpenAiConfig::from_lookup(|n| self.lookup(n))
            .map_err(|e| bad(&llm_setting(&e.to_string()), e.to_string()))
    }

    /// The composed client: local triage, and the OpenAI-compatible provider where configured.
    pub fn client(&self) -> Result<std::sync::Arc<dyn load_agent_llm::LlmClient>, ConfigError> {
        load_agent_llm_openai::build_llm_client(&self.provider, &self.settings()?, self.openai()?)
            .map_err(|e| bad(&llm_setting(&e.to_string()), e.to_string()))
    }
}

/// The setting an LLM configuration error names (`LOAD_AGENT_LLM_X` → `llm.x`).
fn llm_setting(msg: &str) -> String {
    msg.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find_map(|w| w.strip_prefix("LOAD_AGENT_LLM_"))
        .map(|k| format!("llm.{}", k.to_ascii_lowercase()))
        .unwrap_or_else(|| "llm".to_string())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelaySettings {
    pub lease_secs: u64,
    pub batch: u32,
    pub poll_ms: u64,
    pub retry_budget_secs: u64,
    pub backoff_base_ms: u64,
    pub backoff_max_secs: u64,
    /// Per-contact send limits, `dest=N/PERIOD[,...]` (e.g. `sms=6/1h`); an action over the
    /// limit waits in the outbox (never dropped, no retry budget spent).
    pub send_limits: String,
}

impl Default for RelaySettings {
    fn default() -> Self {
        RelaySettings {
            lease_secs: 90,
            batch: 100,
            poll_ms: 250,
            retry_budget_secs: 150,
            backoff_base_ms: 5000,
            backoff_max_secs: 60,
            send_limits: "sms=6/1h".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimerSettings {
    /// How often the pump polls for due timers; at most 30 s (timers fire within a minute).
    pub poll_secs: u64,
    pub batch: u32,
}

impl Default for TimerSettings {
    fn default() -> Self {
        TimerSettings { poll_secs: 5, batch: 500 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkerSettings {
    /// Loads processed at once.
    pub concurrency: usize,
    pub max_conflict_retries: u32,
    /// LoadState snapshots kept in the cache.
    pub cache_capacity: u64,
    pub cache_idle_secs: u64,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            concurrency: 64,
            max_conflict_retries: 5,
            cache_capacity: 50_000,
            cache_idle_secs: 1800,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    /// `text` or `json`.
    pub format: String,
    /// A tracing filter, e.g. `info,load_agent_runtime=debug`.
    pub level: String,
    /// Phone numbers and message text are redacted in logs unless this is true.
    pub debug_pii: bool,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings { format: "text".into(), level: "info".into(), debug_pii: false }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownSettings {
    /// After SIGTERM: stop fetching, finish in-flight runs, store offsets, release claims, and
    /// exit within this many seconds.
    pub grace_secs: u64,
}

impl Default for ShutdownSettings {
    fn default() -> Self {
        ShutdownSettings { grace_secs: 25 }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub database: DatabaseSettings,
    pub kafka: KafkaSettings,
    pub http: HttpSettings,
    pub llm: LlmConfig,
    pub relay: RelaySettings,
    pub timers: TimerSettings,
    pub worker: WorkerSettings,
    pub log: LogSettings,
    pub shutdown: ShutdownSettings,
}

/// A setting that is missing or wrong, by name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configuration: {setting}: {problem}")]
pub struct ConfigError {
    pub setting: String,
    pub problem: String,
}

fn bad(setting: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError { setting: setting.into(), problem: problem.into() }
}

const SECTIONS: &[&str] =
    &["database", "kafka", "http", "llm", "relay", "timers", "worker", "log", "shutdown"];

impl Settings {
    /// Defaults, then `file` (if any), then `LOAD_AGENT_*` from `env`.
    pub fn load(file: Option<&Path>, env: &[(String, String)]) -> Result<Settings, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(Settings::default()));
        if let Some(path) = file {
            if !path.exists() {
                return Err(bad("--config", format!("{} does not exist", path.display())));
            }
            fig = fig.merge(Toml::file(path));
        }
        // Environment: LOAD_AGENT_<SECTION>_<KEY>, the section being the text up to the first `_`.
        let mut env_fig = Figment::new();
        for (k, v) in env {
            let Some(rest) = k.strip_prefix("LOAD_AGENT_") else { continue };
            if rest == "CONFIG" {
                continue;
            }
            let lower = rest.to_ascii_lowercase();
            let Some((section, key)) = lower.split_once('_') else {
                return Err(bad(k, "not a setting (expected LOAD_AGENT_<SECTION>_<KEY>)"));
            };
            if !SECTIONS.contains(&section) {
                return Err(bad(k, format!("unknown section {section:?}")));
            }
            // Parsed as Figment parses environment values: numbers and booleans by their text.
            let value: Value = v.parse().unwrap_or_else(|_| Value::from(v.clone()));
            env_fig = env_fig.merge(Serialized::default(&format!("{section}.{key}"), value));
        }
        let fig = fig.merge(env_fig);
        let settings: Settings = fig.extract().map_err(|e| {
            let setting = e.path.join(".");
            let setting = if setting.is_empty() { "(configuration)".to_string() } else { setting };
            bad(&setting, e.kind.to_string())
        })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Checks what a type cannot: formats, ranges and combinations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let db = &self.database.url;
        if !db.is_sqlite() && !db.is_postgres() {
            return Err(bad("database.url", "must start with sqlite:// or postgres://"));
        }
        if self.production() && !db.is_postgres() {
            return Err(bad(
                "database.url",
                "kafka.brokers is set (production mode): the store must be Postgres",
            ));
        }
        let addr: SocketAddr = self
            .http
            .addr
            .parse()
            .map_err(|e| bad("http.addr", format!("{:?} is not host:port ({e})", self.http.addr)))?;
        if !addr.ip().is_loopback() && self.http.token.is_empty() {
            return Err(bad(
                "http.token",
                format!("required when http.addr ({addr}) is not a loopback address"),
            ));
        }
        let protocols = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];
        if !protocols.contains(&self.kafka.security_protocol.as_str()) {
            return Err(bad("kafka.security_protocol", format!("one of {}", protocols.join(", "))));
        }
        if self.kafka.security_protocol.starts_with("SASL") {
            let mechs = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];
            if !mechs.contains(&self.kafka.sasl_mechanism.as_str()) {
                return Err(bad("kafka.sasl_mechanism", format!("one of {} with SASL", mechs.join(", "))));
            }
            if self.kafka.sasl_username.is_empty() || self.kafka.sasl_password.is_empty() {
                return Err(bad(
                    "kafka.sasl_username",
                    "SASL needs kafka.sasl_username and kafka.sasl_password",
                ));
            }
        }
        if self.kafka.max_in_flight == 0 {
            return Err(bad("kafka.max_in_flight", "must be at least 1"));
        }
        self.llm
            .provider
            .parse::<load_agent_llm::ProviderSpec>()
            .map_err(|e| bad("llm.provider", e.to_string()))?;
        self.llm.settings()?;
        let openai = self.llm.openai()?;
        if self.llm.provider.contains("openai") && openai.is_none() {
            return Err(bad("llm.openai_base_url", "required by llm.provider with openai"));
        }
        if self.timers.poll_secs == 0 || self.timers.poll_secs > 30 {
            return Err(bad("timers.poll_secs", "must be between 1 and 30 (timers fire within a minute)"));
        }
        if self.relay.lease_secs < 10 {
            return Err(bad("relay.lease_secs", "must be at least 10"));
        }
        load_agent_kafka::SendLimits::parse(&self.relay.send_limits)
            .map_err(|e| bad("relay.send_limits", e))?;
        if self.kafka.partitions <= 0 {
            return Err(bad("kafka.partitions", "must be at least 1"));
        }
        if !["text", "json"].contains(&self.log.format.as_str()) {
            return Err(bad("log.format", "text or json"));
        }
        if self.worker.concurrency == 0 || self.worker.cache_capacity == 0 {
            return Err(bad(
                "worker.concurrency",
                "worker.concurrency and worker.cache_capacity must be positive",
            ));
        }
        Ok(())
    }

    /// Production mode: Kafka in and out, Postgres. Otherwise the embedded default.
    pub fn production(&self) -> bool {
        !self.kafka.brokers.trim().is_empty()
    }

    /// librdkafka security properties from the `kafka.*` settings.
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub fn kafka_client_overrides(&self) -> Vec<(String, String)> {
        let k = &self.kafka;
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

    /// The effective configuration with secrets masked, as TOML.
    pub fn to_masked_toml(&self) -> String {
        match toml::to_string_pretty(self) {
            Ok(s) => s,
            Err(e) => format!("# could not render the configuration: {e}\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_are_the_embedded_mode() {
        let s = Settings::load(None, &[]).expect("defaults are valid");
        assert!(!s.production());
        assert!(s.database.url.is_sqlite());
        assert_eq!(s.http.addr, "127.0.0.1:8080");
    }

    #[test]
    fn environment_overrides_by_section_and_key() {
        let s = Settings::load(
            None,
            &env(&[
                ("LOAD_AGENT_DATABASE_URL", "postgres://app:hunter2@db:5432/la"),
                ("LOAD_AGENT_KAFKA_BROKERS", "k1:9092"),
                ("LOAD_AGENT_RELAY_LEASE_SECS", "120"),
                ("PATH", "/usr/bin"),
            ]),
        )
        .expect("valid");
        assert!(s.production());
        assert_eq!(s.relay.lease_secs, 120);
        assert_eq!(s.database.url.expose(), "postgres://app:hunter2@db:5432/la");
    }

    #[test]
    fn errors_name_the_setting() {
        let e = Settings::load(None, &env(&[("LOAD_AGENT_RELAY_LEASE_SECS", "soon")])).unwrap_err();
        assert_eq!(e.setting, "relay.lease_secs");
        let e = Settings::load(None, &env(&[("LOAD_AGENT_KAFKA_BROKERS", "k:9092")])).unwrap_err();
        assert_eq!(e.setting, "database.url");
        let e = Settings::load(None, &env(&[("LOAD_AGENT_HTTP_ADDR", "0.0.0.0:8080")])).unwrap_err();
        assert_eq!(e.setting, "http.token");
        let e = Settings::load(None, &env(&[("LOAD_AGENT_BOGUS_THING", "1")])).unwrap_err();
        assert_eq!(e.setting, "LOAD_AGENT_BOGUS_THING");
        let e = Settings::load(None, &env(&[("LOAD_AGENT_TIMERS_POLL_SECS", "90")])).unwrap_err();
        assert_eq!(e.setting, "timers.poll_secs");
        let e = Settings::load(None, &env(&[("LOAD_AGENT_LLM_PROVIDER", "gpt9")])).unwrap_err();
        assert_eq!(e.setting, "llm.provider", "{e}");
        let e = Settings::load(None, &env(&[("LOAD_AGENT_LLM_PROVIDER", "local+openai")])).unwrap_err();
        assert_eq!(e.setting, "llm.openai_base_url", "{e}");
    }

    #[test]
    fn secrets_are_masked_in_print_and_debug() {
        let s = Settings::load(
            None,
            &env(&[
                ("LOAD_AGENT_DATABASE_URL", "postgres://app:hunter2@db:5432/la"),
                ("LOAD_AGENT_LLM_PROVIDER", "local+openai"),
                ("LOAD_AGENT_LLM_OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
                ("LOAD_AGENT_LLM_OPENAI_MODEL", "deepseek-chat"),
                ("LOAD_AGENT_LLM_OPENAI_API_KEY", "sk-very-secret"),
                ("LOAD_AGENT_HTTP_TOKEN", "tok-secret"),
            ]),
        )
        .expect("valid");
        let printed = s.to_masked_toml();
        let debugged = format!("{s:?}");
        for leak in ["hunter2", "sk-very-secret", "tok-secret"] {
            assert!(!printed.contains(leak), "{leak} printed");
            assert!(!debugged.contains(leak), "{leak} in Debug");
        }
        assert!(printed.contains("postgres://app:***@db:5432/la"));
    }

    #[test]
    fn a_config_file_is_layered_between_defaults_and_env() {
        let dir = std::env::temp_dir().join(format!("la-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let file = dir.join("c.toml");
        std::fs::write(&file, "[relay]\nlease_secs = 60\nbatch = 7\n").expect("write");
        let s = Settings::load(Some(&file), &env(&[("LOAD_AGENT_RELAY_BATCH", "9")])).expect("valid");
        assert_eq!((s.relay.lease_secs, s.relay.batch), (60, 9));
        std::fs::write(&file, "[relay]\nleese_secs = 60\n").expect("write");
        let e = Settings::load(Some(&file), &[]).unwrap_err();
        assert!(e.to_string().contains("leese_secs"), "{e}");
    }
}
