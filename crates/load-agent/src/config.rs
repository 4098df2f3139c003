//! Typed, layered configuration: defaults, then a TOML file (`--config FILE` or
//! `LOAD_AGENT_CONFIG`), then environment variables `LOAD_AGENT_<SECTION>_<KEY>` (for example
//! `LOAD_AGENT_DATABASE_URL`, `LOAD_AGENT_KAFKA_BROKERS`). Validated at start with errors that
//! name the setting; secrets are wrapped and never printed (docs/configuration.md).
//!
//! Each crate owns its sections (type, defaults, checks): `[database]` and `[lifecycle]` the
//! store, `[kafka]` the ingest crate (read in every build; the kafka crate builds its clients'
//! configuration from it), `[llm]` the llm crates, `[relay]`, `[timers]`, `[worker]` and
//! `[shutdown]` the runtime. This file composes them with figment, owns `[http]`, `[log]` and
//! `[console]`, and checks what spans sections (production mode needs Postgres).

use std::net::SocketAddr;
use std::path::Path;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use figment::value::Value;
use load_agent_ingest::KafkaSettings;
use load_agent_llm::LlmConfig;
use load_agent_runtime::{RelaySettings, RuntimeConfig, ShutdownSettings, TimerSettings, WorkerSettings};
use load_agent_store::{DatabaseSettings, LifecycleSettings, StoreOptions};
use serde::{Deserialize, Serialize};

#[cfg(test)]
use load_agent_domain::settings::mask_url_password;
pub use load_agent_domain::settings::{Secret, SettingError as ConfigError};

fn bad(setting: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError::new(setting, problem)
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

    /// Checks what a type cannot: each section's own checks (in its crate), and what spans
    /// sections.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.database.validate()?;
        if self.production() && !self.database.url.is_postgres() {
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
        self.kafka.validate()?;
        load_agent_llm_openai::validate_llm_config(&self.llm)?;
        self.timers.validate()?;
        if self.console.window_hours == 0 || self.console.window_hours > 24 * 3660 {
            return Err(bad("console.window_hours", "must be between 1 and 87840 (ten years)"));
        }
        self.lifecycle.validate()?;
        if self.console.page_size == 0 || self.console.page_size > 1000 {
            return Err(bad("console.page_size", "must be between 1 and 1000"));
        }
        self.relay.validate()?;
        if !["text", "json"].contains(&self.log.format.as_str()) {
            return Err(bad("log.format", "text or json"));
        }
        self.worker.validate()?;
        Ok(())
    }

    /// Production mode: Kafka in and out, Postgres. Otherwise the embedded default.
    pub fn production(&self) -> bool {
        !self.kafka.brokers.trim().is_empty()
    }

    /// librdkafka security properties from the `kafka.*` settings (the clients take them from
    /// [`Settings::kafka_config`]).
    #[cfg(test)]
    pub fn kafka_client_overrides(&self) -> Vec<(String, String)> {
        self.kafka.client_overrides()
    }

    /// The runtime of the service: `[relay]`, `[timers]`, `[worker]` and `llm.run_deadline_ms`.
    pub fn runtime(&self) -> RuntimeConfig {
        RuntimeConfig::from_settings(&self.relay, &self.timers, &self.worker, self.llm.run_deadline())
    }

    /// The store's options: `database.max_connections`, `database.relay_connections` and the
    /// relay's claim lease (`relay.lease_secs`).
    pub fn store_options(&self) -> StoreOptions {
        self.database.options(self.relay.lease())
    }

    /// The Kafka clients' configuration of the `[kafka]` section.
    #[cfg(feature = "kafka")]
    pub fn kafka_config(&self) -> load_agent_kafka::KafkaConfig {
        load_agent_kafka::KafkaConfig::from_settings(&self.kafka)
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

    #[test]
    fn a_token_limit_from_the_environment_is_read_as_its_number() {
        let s = Settings::load(None, &env(&[("LOAD_AGENT_LLM_OPENAI_MAX_OUTPUT_TOKENS", "2048")]))
            .expect("digits in the environment are a valid token limit");
        assert_eq!(s.llm.openai_max_output_tokens, "2048");
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

    /// docs/configuration.md's table and the types cannot drift: every setting of
    /// `Settings::default()` is in the table with its default, and every setting the table names
    /// exists. A row may name several settings (`a`, `b` or `llm.openai_model_{draft,plan}`) with
    /// one default each (`1, 2` or `x` / `y`) or one default for all of them.
    #[test]
    fn the_documentation_lists_every_setting_with_its_default() {
        let doc = include_str!("../../../docs/configuration.md");
        let mut documented: std::collections::BTreeMap<String, String> = Default::default();
        // The table of settings: from its header to the first line that is not a row.
        let table = doc.split_once("| setting | default | meaning |\n|---|---|---|\n").expect("the table").1;
        for row in table.lines().take_while(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
            let (names_cell, defaults_cell) = (cells[0], cells[1]);
            let mut names = Vec::new();
            for token in names_cell.split('`').skip(1).step_by(2).filter(|t| t.contains('.')) {
                match token.split_once('{') {
                    Some((prefix, rest)) => {
                        let (alternatives, suffix) = rest.split_once('}').expect("a closed brace");
                        names.extend(alternatives.split(',').map(|a| format!("{prefix}{a}{suffix}")));
                    }
                    None => names.push(token.to_string()),
                }
            }
            let separator = if defaults_cell.contains(" / ") { " / " } else { ", " };
            let defaults: Vec<String> = defaults_cell
                .split(separator)
                .map(|d| {
                    let d = d.replace(['`', '*'], "");
                    let d = d.split(" (").next().unwrap_or_default().trim().to_string();
                    if d == "empty" { String::new() } else { d }
                })
                .collect();
            assert!(
                defaults.len() == names.len() || defaults.len() == 1,
                "{row}: {} settings, {} defaults",
                names.len(),
                defaults.len()
            );
            for (i, name) in names.into_iter().enumerate() {
                let default = defaults.get(i).unwrap_or(&defaults[0]).clone();
                assert!(documented.insert(name.clone(), default).is_none(), "{name} is documented twice");
            }
        }
        let mut typed: std::collections::BTreeMap<String, String> = Default::default();
        let Ok(toml::Value::Table(sections)) = toml::Value::try_from(Settings::default()) else {
            panic!("the settings are a table of sections")
        };
        for (section, keys) in sections {
            let toml::Value::Table(keys) = keys else { panic!("{section} is a table") };
            for (key, value) in keys {
                let value = match value {
                    toml::Value::String(s) => s,
                    other => other.to_string(),
                };
                typed.insert(format!("{section}.{key}"), value);
            }
        }
        for (name, default) in &typed {
            match documented.get(name) {
                Some(documented) => {
                    assert_eq!(documented, default, "docs/configuration.md: {name}'s default")
                }
                None => panic!("docs/configuration.md does not list {name} (default {default:?})"),
            }
        }
        for name in documented.keys() {
            assert!(typed.contains_key(name), "docs/configuration.md lists {name}, which is not a setting");
        }
    }
}
