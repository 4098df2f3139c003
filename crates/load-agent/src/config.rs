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

/// A secret value: `Debug`, `Display` and serialization print `***`. Read from text, or from a
/// TOML integer or boolean (`token = 12345` is the text `12345`); a configuration error about it
/// never quotes it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SecretVisitor;
        impl serde::de::Visitor<'_> for SecretVisitor {
            type Value = Secret;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a secret as text")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Secret, E> {
                Ok(Secret(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Secret, E> {
                Ok(Secret(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Secret, E> {
                Ok(Secret(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Secret, E> {
                Ok(Secret(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Secret, E> {
                Ok(Secret(v.to_string()))
            }
            fn visit_char<E: serde::de::Error>(self, v: char) -> Result<Secret, E> {
                Ok(Secret(v.to_string()))
            }
            // Serde's own messages quote the value: these never do.
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Secret, E> {
                Err(E::custom("a secret must be text (quote it); the value is not shown"))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Secret, E> {
                Ok(Secret::default())
            }
        }
        d.deserialize_any(SecretVisitor)
    }
}

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

/// `scheme://user:password@host/db?password=x&sslpassword=y` →
/// `scheme://user:***@host/db?password=***&sslpassword=***`. The user information ends at the
/// last `@`, so a password holding an unescaped `@`, `/` or `?` is masked whole (a URL this
/// cannot parse is masked more, never less).
pub fn mask_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let mut out = format!("{scheme}://");
    let after_userinfo = match rest.rsplit_once('@') {
        Some((userinfo, after)) => {
            match userinfo.split_once(':') {
                Some((user, _)) => out.push_str(&format!("{user}:***@")),
                None => out.push_str(&format!("{userinfo}@")),
            }
            after
        }
        None => rest,
    };
    let (host_path, query) = match after_userinfo.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (after_userinfo, None),
    };
    out.push_str(host_path);
    if let Some(query) = query {
        out.push('?');
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.to_ascii_lowercase().contains("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

/// `sslmode` values accepted for a Postgres server that is not on this machine: the two that
/// encrypt, and `disable`, a deliberate opt-out (a service mesh that encrypts on its own).
const POSTGRES_REMOTE_MODES: &[&str] = &["require", "verify-full", "disable"];

/// Why a Postgres URL is refused, if it is: a server that is not on this machine (a loopback
/// address or a Unix socket) must be reached over TLS, so `sslmode` must be `require` or
/// `verify-full`, or plaintext chosen explicitly with `disable`. No `sslmode` (sqlx's `prefer`),
/// `prefer` and `allow` are refused: they fall back to plaintext silently. `verify-ca` is refused
/// everywhere: sqlx 0.8.6 builds its verifier from rustls's process-wide crypto provider, which
/// panics in this build (rustls has both ring and aws-lc-rs), and it checks the host name anyway.
/// The message never quotes the URL.
fn postgres_tls_problem(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let param = |name: &str| {
        query.split('&').filter_map(|p| p.split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v)
    };
    let authority = before_query.rsplit_once('@').map_or(before_query, |(_, h)| h);
    let authority = authority.split('/').next().unwrap_or_default();
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    let host = param("host").unwrap_or(host);
    let local = host.is_empty()
        || host.starts_with('/')
        || host.starts_with("%2F")
        || host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let mode = param("sslmode").unwrap_or("prefer");
    if mode == "verify-ca" {
        return Some(
            "sslmode=verify-ca is not supported (sqlx 0.8.6 with rustls checks the host name anyway); \
             use sslmode=verify-full"
                .to_string(),
        );
    }
    if local || POSTGRES_REMOTE_MODES.contains(&mode) {
        return None;
    }
    Some(format!(
        "the server is not on this machine: add ?sslmode=verify-full (with sslrootcert=CA_FILE \
         unless the server's CA is a public one) or require; sslmode={mode} falls back to \
         plaintext silently (sslmode=disable chooses plaintext deliberately)"
    ))
}

/// A URL setting held as text, printed with its password masked.
fn serialize_masked_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&mask_url_password(url))
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
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 3_000,
            create_topics: false,
            partitions: 12,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSettings {
    /// `/events`, `/loads/{id}`, `/metrics`, `/openapi.json`, `/healthz`, `/readyz` (docs/http.md).
    /// Loopback by default; any other address requires `token`.
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
    #[serde(serialize_with = "serialize_masked_url")]
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
    /// Rows of one claimed batch sent at once (per-load order holds at any value).
    pub concurrency: usize,
    /// Relay passes running at once in one process (per-load order holds at any value).
    pub loops: usize,
}

impl Default for RelaySettings {
    fn default() -> Self {
        RelaySettings {
            lease_secs: 90,
            batch: 500,
            poll_ms: 250,
            retry_budget_secs: 150,
            backoff_base_ms: 5000,
            backoff_max_secs: 60,
            send_limits: "sms=6/1h".into(),
            concurrency: 500,
            loops: 2,
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
    /// Group commit (issue 15): appends of different loads ready within this many milliseconds
    /// share one transaction.
    pub group_commit_window_ms: u64,
    /// Loads per group-commit transaction at most; 1 turns group commit off.
    pub group_commit_max_batch: usize,
    /// Group-commit transactions in flight at once.
    pub group_commit_committers: usize,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            concurrency: 64,
            max_conflict_retries: 5,
            cache_capacity: 50_000,
            cache_idle_secs: 1800,
            group_commit_window_ms: 0,
            // Off by default for now: see docs/runtime.md ("Group commit") for the hazard.
            group_commit_max_batch: 1,
            group_commit_committers: 4,
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
    pub console: ConsoleSettings,
    pub lifecycle: LifecycleSettings,
}

/// Partitions made ahead of time (Postgres; docs/operations.md, "Partitions and retention").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LifecycleSettings {
    /// Monthly partitions of the log and the timers made this many months ahead.
    pub months_ahead: u32,
    /// Daily partitions of the outbox made this many days ahead.
    pub days_ahead: u32,
    /// How often the service makes the partitions ahead (also once at start).
    pub check_secs: u32,
    /// How often the service runs retention (0: never; `load-agent retention run` by hand).
    pub retention_secs: u32,
    /// Log months kept in the database (older ones are archived, verified and dropped).
    pub log_months: u32,
    /// Days delivered outbox rows are kept.
    pub dispatched_days: u32,
    /// Days dead outbox rows are kept.
    pub dead_days: u32,
    /// Days fired and cancelled timers are kept.
    pub timer_days: u32,
    /// Where retention archives a log month before it drops it (a directory or file:// URL; each
    /// month in `<archive_to>/YYYY-MM`). Empty: log months are never dropped.
    pub archive_to: String,
}

impl Default for LifecycleSettings {
    fn default() -> Self {
        let plan = load_agent_store::PartitionPlan::default();
        let w = load_agent_store::RetentionWindows::default();
        LifecycleSettings {
            months_ahead: plan.months_ahead,
            days_ahead: plan.days_ahead,
            check_secs: 3600,
            retention_secs: 86_400,
            log_months: w.log_months,
            dispatched_days: w.dispatched_days,
            dead_days: w.dead_days,
            timer_days: w.timer_days,
            archive_to: String::new(),
        }
    }
}

impl LifecycleSettings {
    pub fn plan(&self) -> load_agent_store::PartitionPlan {
        load_agent_store::PartitionPlan { months_ahead: self.months_ahead, days_ahead: self.days_ahead }
    }

    pub fn windows(&self) -> load_agent_store::RetentionWindows {
        load_agent_store::RetentionWindows {
            log_months: self.log_months,
            dispatched_days: self.dispatched_days,
            dead_days: self.dead_days,
            timer_days: self.timer_days,
        }
    }
}

/// The operations console (`/`, docs/console.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleSettings {
    /// Urgent Hero tasks and dead actions list a load for this many hours after they happen.
    pub window_hours: u32,
    /// A scheduled timer lists its load once it is this many seconds late.
    pub overdue_after_secs: u32,
    /// Loads per page.
    pub page_size: u32,
    /// The attention page reloads itself this often (0: never).
    pub refresh_secs: u32,
}

impl Default for ConsoleSettings {
    fn default() -> Self {
        let d = crate::console::ConsoleConfig::default();
        ConsoleSettings {
            window_hours: u32::try_from(d.window.num_hours()).unwrap_or(72),
            overdue_after_secs: u32::try_from(d.overdue_after.num_seconds()).unwrap_or(60),
            page_size: u32::try_from(d.page_size).unwrap_or(50),
            refresh_secs: d.refresh_secs,
        }
    }
}

impl ConsoleSettings {
    pub fn config(&self) -> crate::console::ConsoleConfig {
        crate::console::ConsoleConfig {
            window: chrono::TimeDelta::hours(i64::from(self.window_hours)),
            overdue_after: chrono::TimeDelta::seconds(i64::from(self.overdue_after_secs)),
            page_size: u64::from(self.page_size),
            refresh_secs: self.refresh_secs,
        }
    }
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

/// `kafka.security_protocol` values (librdkafka's `security.protocol`, upper case).
pub const KAFKA_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/// `kafka.sasl_mechanism` values (librdkafka's `sasl.mechanisms`).
pub const KAFKA_SASL_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// The settings that hold secrets (docs/security.md): never printed, never quoted in errors.
pub const SECRET_SETTINGS: &[&str] =
    &["database.url", "kafka.sasl_password", "llm.openai_api_key", "http.token"];

const SECTIONS: &[&str] = &[
    "database",
    "kafka",
    "http",
    "llm",
    "relay",
    "timers",
    "worker",
    "log",
    "shutdown",
    "console",
    "lifecycle",
];

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
            // The configuration file, and the crash tests' hook (load_agent_runtime::crash).
            if rest == "CONFIG" || rest == "CRASH_AT" {
                continue;
            }
            let lower = rest.to_ascii_lowercase();
            let Some((section, key)) = lower.split_once('_') else {
                return Err(bad(k, "not a setting (expected LOAD_AGENT_<SECTION>_<KEY>)"));
            };
            if !SECTIONS.contains(&section) {
                return Err(bad(k, format!("unknown section {section:?}")));
            }
            // Parsed as Figment parses environment values: numbers and booleans by their text;
            // secrets verbatim (a numeric password stays the text it is).
            let setting = format!("{section}.{key}");
            let value: Value = if SECRET_SETTINGS.contains(&setting.as_str()) {
                Value::from(v.clone())
            } else {
                v.parse().unwrap_or_else(|_| Value::from(v.clone()))
            };
            env_fig = env_fig.merge(Serialized::default(&setting, value));
        }
        let fig = fig.merge(env_fig);
        let settings: Settings = fig.extract().map_err(|e| {
            let setting = e.path.join(".");
            let setting = if setting.is_empty() { "(configuration)".to_string() } else { setting };
            bad(&setting, e.kind.to_string())
        })?;
        settings.validate()?;
        // The configuration loaded is the one applied: log lines format phone numbers, addresses
        // and message text through `load_agent_domain::pii`, redacted unless log.debug_pii.
        load_agent_domain::pii::set_reveal(settings.log.debug_pii);
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
        if db.is_postgres()
            && let Some(problem) = postgres_tls_problem(db.expose())
        {
            return Err(bad("database.url", problem));
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
        self.validate_kafka_security()?;
        if self.kafka.max_in_flight == 0 {
            return Err(bad("kafka.max_in_flight", "must be at least 1"));
        }
        if !(1_000..=3_600_000).contains(&self.kafka.session_timeout_ms) {
            return Err(bad("kafka.session_timeout_ms", "must be between 1000 and 3600000"));
        }
        if self.kafka.heartbeat_interval_ms == 0
            || self.kafka.heartbeat_interval_ms >= self.kafka.session_timeout_ms
        {
            return Err(bad(
                "kafka.heartbeat_interval_ms",
                format!(
                    "must be at least 1 and below kafka.session_timeout_ms ({}); a third of it or less is advised",
                    self.kafka.session_timeout_ms
                ),
            ));
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
        if self.console.window_hours == 0 || self.console.window_hours > 24 * 3660 {
            return Err(bad("console.window_hours", "must be between 1 and 87840 (ten years)"));
        }
        if !(1..=24).contains(&self.lifecycle.months_ahead) {
            return Err(bad("lifecycle.months_ahead", "must be between 1 and 24"));
        }
        if !(1..=90).contains(&self.lifecycle.days_ahead) {
            return Err(bad("lifecycle.days_ahead", "must be between 1 and 90"));
        }
        if !(60..=86_400).contains(&self.lifecycle.check_secs) {
            return Err(bad("lifecycle.check_secs", "must be between 60 and 86400"));
        }
        if self.lifecycle.retention_secs != 0 && !(60..=604_800).contains(&self.lifecycle.retention_secs) {
            return Err(bad("lifecycle.retention_secs", "must be 0 (never) or between 60 and 604800"));
        }
        if !(1..=1200).contains(&self.lifecycle.log_months) {
            return Err(bad("lifecycle.log_months", "must be between 1 and 1200"));
        }
        if !(1..=3650).contains(&self.lifecycle.dispatched_days) {
            return Err(bad("lifecycle.dispatched_days", "must be between 1 and 3650"));
        }
        if !(self.lifecycle.dispatched_days..=3650).contains(&self.lifecycle.dead_days) {
            return Err(bad("lifecycle.dead_days", "must be between lifecycle.dispatched_days and 3650"));
        }
        if !(1..=3650).contains(&self.lifecycle.timer_days) {
            return Err(bad("lifecycle.timer_days", "must be between 1 and 3650"));
        }
        if self.console.page_size == 0 || self.console.page_size > 1000 {
            return Err(bad("console.page_size", "must be between 1 and 1000"));
        }
        if self.relay.loops == 0 || self.relay.loops > 16 {
            return Err(bad("relay.loops", "must be between 1 and 16"));
        }
        if self.relay.lease_secs < 10 {
            return Err(bad("relay.lease_secs", "must be at least 10"));
        }
        load_agent_runtime::SendLimits::parse(&self.relay.send_limits)
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
        if self.worker.group_commit_max_batch == 0 {
            return Err(bad(
                "worker.group_commit_max_batch",
                "must be at least 1 (1 turns group commit off)",
            ));
        }
        if self.worker.group_commit_window_ms > 1_000 {
            return Err(bad(
                "worker.group_commit_window_ms",
                "must be at most 1000 (a few milliseconds is the point)",
            ));
        }
        if self.worker.group_commit_committers == 0 {
            return Err(bad("worker.group_commit_committers", "must be at least 1"));
        }
        Ok(())
    }

    /// `kafka.security_protocol` and what goes with it: SASL needs a known mechanism and both
    /// credentials; credentials or a CA bundle that the protocol would not use are refused, so a
    /// forgotten `security_protocol` never silently falls back to plaintext.
    fn validate_kafka_security(&self) -> Result<(), ConfigError> {
        let k = &self.kafka;
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
    fn every_section_takes_environment_overrides() {
        let s = Settings::load(
            None,
            &env(&[("LOAD_AGENT_CONSOLE_WINDOW_HOURS", "240"), ("LOAD_AGENT_CONSOLE_REFRESH_SECS", "0")]),
        )
        .expect("console settings from the environment");
        assert_eq!((s.console.window_hours, s.console.refresh_secs), (240, 0));
        let e =
            Settings::load(None, &env(&[("LOAD_AGENT_CONSOLE_PAGE_SIZE", "0")])).expect_err("page size 0");
        assert_eq!(e.setting, "console.page_size");
        let s = Settings::load(None, &env(&[("LOAD_AGENT_LIFECYCLE_DAYS_AHEAD", "14")])).expect("lifecycle");
        assert_eq!(s.lifecycle.plan().days_ahead, 14);
        let e =
            Settings::load(None, &env(&[("LOAD_AGENT_LIFECYCLE_MONTHS_AHEAD", "0")])).expect_err("0 months");
        assert_eq!(e.setting, "lifecycle.months_ahead");
        // Every section of the file is a section of the environment.
        let sections: Vec<String> = match toml::Value::try_from(Settings::default()) {
            Ok(toml::Value::Table(t)) => t.keys().cloned().collect(),
            other => panic!("settings as TOML: {other:?}"),
        };
        for section in sections {
            assert!(SECTIONS.contains(&section.as_str()), "{section} is missing from SECTIONS");
        }
    }

    #[test]
    fn environment_overrides_by_section_and_key() {
        let s = Settings::load(
            None,
            &env(&[
                ("LOAD_AGENT_DATABASE_URL", "postgres://app:hunter2@db:5432/la?sslmode=verify-full"),
                ("LOAD_AGENT_KAFKA_BROKERS", "k1:9092"),
                ("LOAD_AGENT_RELAY_LEASE_SECS", "120"),
                ("PATH", "/usr/bin"),
            ]),
        )
        .expect("valid");
        assert!(s.production());
        assert_eq!(s.relay.lease_secs, 120);
        assert_eq!(s.database.url.expose(), "postgres://app:hunter2@db:5432/la?sslmode=verify-full");
    }

    #[test]
    fn group_membership_timeouts_are_settings_checked_against_each_other() {
        let s = Settings::load(
            None,
            &env(&[
                ("LOAD_AGENT_KAFKA_SESSION_TIMEOUT_MS", "6000"),
                ("LOAD_AGENT_KAFKA_HEARTBEAT_INTERVAL_MS", "1000"),
            ]),
        )
        .expect("valid");
        assert_eq!((s.kafka.session_timeout_ms, s.kafka.heartbeat_interval_ms), (6000, 1000));
        let defaults = Settings::load(None, &env(&[])).expect("defaults");
        assert_eq!(
            (defaults.kafka.session_timeout_ms, defaults.kafka.heartbeat_interval_ms),
            (45_000, 3_000)
        );

        let e =
            Settings::load(None, &env(&[("LOAD_AGENT_KAFKA_HEARTBEAT_INTERVAL_MS", "45000")])).unwrap_err();
        assert_eq!(e.setting, "kafka.heartbeat_interval_ms");
        assert!(e.to_string().contains("kafka.session_timeout_ms"), "{e}");
        let e = Settings::load(None, &env(&[("LOAD_AGENT_KAFKA_SESSION_TIMEOUT_MS", "500")])).unwrap_err();
        assert_eq!(e.setting, "kafka.session_timeout_ms");
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
                ("LOAD_AGENT_DATABASE_URL", "postgres://app:hunter2@db:5432/la?sslmode=verify-full"),
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
        assert!(printed.contains("postgres://app:***@db:5432/la?sslmode=verify-full"));
    }

    const SASL_SSL: &[(&str, &str)] = &[
        ("LOAD_AGENT_KAFKA_SECURITY_PROTOCOL", "SASL_SSL"),
        ("LOAD_AGENT_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512"),
        ("LOAD_AGENT_KAFKA_SASL_USERNAME", "load-agent"),
        ("LOAD_AGENT_KAFKA_SASL_PASSWORD", "kafka-pw-7d1e"),
        ("LOAD_AGENT_KAFKA_SSL_CA_LOCATION", "/etc/load-agent/kafka-ca.pem"),
    ];

    fn overrides(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        Settings::load(None, &env(pairs)).expect("valid").kafka_client_overrides()
    }

    fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn kafka_security_settings_map_to_librdkafka_properties() {
        assert_eq!(
            overrides(SASL_SSL),
            props(&[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanisms", "SCRAM-SHA-512"),
                ("sasl.username", "load-agent"),
                ("sasl.password", "kafka-pw-7d1e"),
                ("ssl.ca.location", "/etc/load-agent/kafka-ca.pem"),
            ])
        );
        assert_eq!(
            overrides(&[
                ("LOAD_AGENT_KAFKA_SECURITY_PROTOCOL", "SSL"),
                ("LOAD_AGENT_KAFKA_SSL_CA_LOCATION", "/ca.pem"),
            ]),
            props(&[("security.protocol", "ssl"), ("ssl.ca.location", "/ca.pem")])
        );
        assert_eq!(
            overrides(&[
                ("LOAD_AGENT_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT"),
                ("LOAD_AGENT_KAFKA_SASL_MECHANISM", "PLAIN"),
                ("LOAD_AGENT_KAFKA_SASL_USERNAME", "u"),
                ("LOAD_AGENT_KAFKA_SASL_PASSWORD", "p"),
            ]),
            props(&[
                ("security.protocol", "sasl_plaintext"),
                ("sasl.mechanisms", "PLAIN"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
            ])
        );
        assert_eq!(overrides(&[]), props(&[("security.protocol", "plaintext")]));
    }

    #[test]
    fn invalid_kafka_security_is_refused_naming_the_setting() {
        let with = |change: &[(&str, &str)]| {
            let mut pairs: Vec<(&str, &str)> = SASL_SSL.to_vec();
            for (k, v) in change {
                pairs.retain(|(pk, _)| pk != k);
                if !v.is_empty() {
                    pairs.push((*k, *v));
                }
            }
            Settings::load(None, &env(&pairs)).map(|_| ()).unwrap_err()
        };
        let e = with(&[("LOAD_AGENT_KAFKA_SECURITY_PROTOCOL", "TLS")]);
        assert_eq!(e.setting, "kafka.security_protocol", "{e}");
        assert!(e.problem.contains("\"TLS\"") && e.problem.contains("SASL_SSL"), "{e}");
        let e = with(&[("LOAD_AGENT_KAFKA_SECURITY_PROTOCOL", "sasl_ssl")]);
        assert_eq!(e.setting, "kafka.security_protocol", "{e}");
        for mech in ["GSSAPI", "OAUTHBEARER", "scram-sha-512", ""] {
            let e = with(&[("LOAD_AGENT_KAFKA_SASL_MECHANISM", mech)]);
            assert_eq!(e.setting, "kafka.sasl_mechanism", "{mech}: {e}");
        }
        let e = with(&[("LOAD_AGENT_KAFKA_SASL_USERNAME", "")]);
        assert_eq!(e.setting, "kafka.sasl_username", "{e}");
        let e = with(&[("LOAD_AGENT_KAFKA_SASL_PASSWORD", "")]);
        assert_eq!(e.setting, "kafka.sasl_password", "{e}");
        // Credentials or a CA the protocol would not use: a forgotten protocol is not plaintext.
        let e = Settings::load(None, &env(&[("LOAD_AGENT_KAFKA_SASL_PASSWORD", "pw")])).unwrap_err();
        assert_eq!(e.setting, "kafka.sasl_password", "{e}");
        assert!(!e.to_string().contains("pw\""), "the secret is not echoed: {e}");
        let e = with(&[("LOAD_AGENT_KAFKA_SECURITY_PROTOCOL", "SSL")]);
        assert_eq!(e.setting, "kafka.sasl_mechanism", "{e}");
        let e = Settings::load(
            None,
            &env(&[
                ("LOAD_AGENT_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT"),
                ("LOAD_AGENT_KAFKA_SASL_MECHANISM", "PLAIN"),
                ("LOAD_AGENT_KAFKA_SASL_USERNAME", "u"),
                ("LOAD_AGENT_KAFKA_SASL_PASSWORD", "p"),
                ("LOAD_AGENT_KAFKA_SSL_CA_LOCATION", "/ca.pem"),
            ]),
        )
        .unwrap_err();
        assert_eq!(e.setting, "kafka.ssl_ca_location", "{e}");
    }

    /// The overrides reach every librdkafka client configuration, applied last.
    #[cfg(feature = "kafka")]
    #[test]
    fn kafka_security_reaches_every_client_config() {
        let settings = Settings::load(None, &env(SASL_SSL)).expect("valid");
        let mut kafka = load_agent_kafka::KafkaConfig::new("b:9093");
        kafka.client_overrides = settings.kafka_client_overrides();
        for config in
            [kafka.consumer_config(), kafka.producer_config(), kafka.admin_config(), kafka.reader_config("g")]
        {
            assert_eq!(config.get("security.protocol"), Some("sasl_ssl"));
            assert_eq!(config.get("sasl.mechanisms"), Some("SCRAM-SHA-512"));
            assert_eq!(config.get("sasl.username"), Some("load-agent"));
            assert_eq!(config.get("sasl.password"), Some("kafka-pw-7d1e"));
            assert_eq!(config.get("ssl.ca.location"), Some("/etc/load-agent/kafka-ca.pem"));
        }
    }

    #[test]
    fn numeric_secrets_are_text_and_never_quoted() {
        let s = Settings::load(
            None,
            &env(&[("LOAD_AGENT_HTTP_TOKEN", "20261202"), ("LOAD_AGENT_LLM_OPENAI_API_KEY", "1e5")]),
        )
        .expect("valid");
        assert_eq!(s.http.token.expose(), "20261202");
        assert_eq!(s.llm.openai_api_key.expose(), "1e5", "not read as the number 100000");
        let dir = std::env::temp_dir().join(format!("la-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let file = dir.join("c.toml");
        std::fs::write(&file, "[http]\ntoken = 73191\n").expect("write");
        let s = Settings::load(Some(&file), &[]).expect("an integer token is its text");
        assert_eq!(s.http.token.expose(), "73191");
        std::fs::write(&file, "[http]\ntoken = 7319.25\n").expect("write");
        let e = Settings::load(Some(&file), &[]).unwrap_err();
        assert_eq!(e.setting, "http.token", "{e}");
        assert!(!e.to_string().contains("7319"), "the secret is quoted: {e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_remote_postgres_needs_tls() {
        let load = |url: &str| Settings::load(None, &env(&[("LOAD_AGENT_DATABASE_URL", url)]));
        for ok in [
            "postgres://app:pw@db.internal/la?sslmode=verify-full",
            "postgres://app:pw@db.internal:5432/la?sslmode=verify-full&sslrootcert=/etc/ca.pem",
            "postgresql://app@10.0.0.5/la?sslmode=require",
            "postgres://app@db.internal/la?application_name=x&sslmode=require",
            "postgres://postgres@127.0.0.1:5432/test",
            "postgres://postgres@localhost/test?sslmode=disable",
            "postgres://postgres@[::1]:5432/test",
            "postgres://app:pw@10.0.0.5:5432/la?sslmode=disable",
            "postgres:///test?host=/var/run/postgresql",
            "sqlite://load-agent.db",
        ] {
            assert!(load(ok).is_ok(), "{ok}: {:?}", load(ok).err());
        }
        for refused in [
            "postgres://app:hunter2@db.internal/la",
            "postgres://app:hunter2@db.internal/la?sslmode=prefer",
            "postgres://app:hunter2@10.0.0.5:5432/la?sslmode=allow",
            "postgres://app:hunter2@[2001:db8::1]/la?sslmode=allow",
            "postgres://app:hunter2@127.0.0.1/la?host=db.internal",
            "postgres://app:hunter2@db.internal/la?sslmode=verify-ca",
            "postgres://app:hunter2@localhost/la?sslmode=verify-ca",
        ] {
            let e = load(refused).unwrap_err();
            assert_eq!(e.setting, "database.url", "{refused}: {e}");
            assert!(e.problem.contains("sslmode=verify-full"), "{e}");
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
    }

    /// librdkafka itself takes the settings: creating a client checks every property and loads
    /// the CA bundle. Needs librdkafka built with OpenSSL (rdkafka's `ssl` feature, root
    /// Cargo.toml), without which `SSL`, `SASL_SSL` and SCRAM are unavailable.
    #[cfg(feature = "kafka")]
    #[test]
    fn librdkafka_accepts_tls_and_scram() {
        use rdkafka::producer::BaseProducer;
        let mut pairs = SASL_SSL.to_vec();
        pairs.retain(|(k, _)| *k != "LOAD_AGENT_KAFKA_SSL_CA_LOCATION");
        pairs.push(("LOAD_AGENT_KAFKA_SSL_CA_LOCATION", "/etc/ssl/certs/ca-certificates.crt"));
        let settings = Settings::load(None, &env(&pairs)).expect("valid");
        let mut kafka = load_agent_kafka::KafkaConfig::new("127.0.0.1:9");
        kafka.client_overrides = settings.kafka_client_overrides();
        let created = kafka.producer_config().create::<BaseProducer>();
        assert!(created.is_ok(), "librdkafka refused the security settings: {:?}", created.err());
    }

    #[test]
    fn url_passwords_are_masked_wherever_they_are() {
        for (url, masked) in [
            ("postgres://app:hunter2@db:5432/la", "postgres://app:***@db:5432/la"),
            ("postgres://app:p@ss/w0rd@db/la?sslmode=require", "postgres://app:***@db/la?sslmode=require"),
            ("postgres://app:p?ss@db/la", "postgres://app:***@db/la"),
            ("postgres://db/la?application_name=a@b", "postgres://db/la?application_name=a@b"),
            (
                "postgres://app@db/la?sslmode=verify-full&password=hunter2&sslpassword=k3y",
                "postgres://app@db/la?sslmode=verify-full&password=***&sslpassword=***",
            ),
            ("postgres://db/la", "postgres://db/la"),
            ("sqlite://load-agent.db", "sqlite://load-agent.db"),
            ("https://reg:s3cr3t@registry:8081", "https://reg:***@registry:8081"),
        ] {
            assert_eq!(mask_url_password(url), masked, "{url}");
        }
        let s = Settings::load(
            None,
            &env(&[
                ("LOAD_AGENT_KAFKA_SCHEMA_REGISTRY_URL", "https://reg:s3cr3t@registry:8081"),
                ("LOAD_AGENT_DATABASE_URL", "postgres://app@db/la?sslmode=require&password=hunter2"),
            ]),
        )
        .expect("valid");
        let printed = s.to_masked_toml();
        assert!(!printed.contains("s3cr3t") && !printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("https://reg:***@registry:8081"), "{printed}");
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
