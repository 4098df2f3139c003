//! The store's sections of the configuration: `[database]` (where the store is, the pool) and
//! `[lifecycle]` (partitions made ahead, retention windows, the service's jobs), with their
//! defaults and checks; the binary composes them (docs/configuration.md).

use std::fmt;
use std::time::Duration;

use load_agent_domain::settings::{SettingError, mask_url_password};
use serde::{Deserialize, Serialize, Serializer};

use crate::stores::StoreOptions;

fn bad(setting: &str, problem: impl Into<String>) -> SettingError {
    SettingError::new(setting, problem)
}

/// A database URL may carry a password: shown with the password masked.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        DatabaseUrl(url.into())
    }

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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// `sqlite://FILE` (the embedded default) or `postgres://...` (production).
    pub url: DatabaseUrl,
    /// Postgres: the pool of workers, timers, the console and every other caller.
    pub max_connections: u32,
    /// Postgres: the relay's own pool (claims, marks, lag), besides `max_connections`.
    pub relay_connections: u32,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        DatabaseSettings {
            url: DatabaseUrl("sqlite://load-agent.db".into()),
            max_connections: 16,
            relay_connections: StoreOptions::default().relay_connections,
        }
    }
}

impl DatabaseSettings {
    /// The URL's scheme, and TLS to a Postgres server that is not on this machine.
    pub fn validate(&self) -> Result<(), SettingError> {
        let db = &self.url;
        if !db.is_sqlite() && !db.is_postgres() {
            return Err(bad("database.url", "must start with sqlite:// or postgres://"));
        }
        if self.max_connections == 0 {
            return Err(bad("database.max_connections", "must be at least 1"));
        }
        if self.relay_connections == 0 {
            return Err(bad("database.relay_connections", "must be at least 1"));
        }
        if db.is_postgres()
            && let Some(problem) = postgres_tls_problem(db.expose())
        {
            return Err(bad("database.url", problem));
        }
        Ok(())
    }

    /// The store's options: these pool sizes, and the relay's claim lease (`relay.lease_secs`).
    pub fn options(&self, lease: Duration) -> StoreOptions {
        StoreOptions {
            lease,
            max_connections: self.max_connections,
            relay_connections: self.relay_connections,
            ..StoreOptions::default()
        }
    }
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
    /// Where retention archives a log month before it drops it (a directory or file:// URL, or an
    /// object store URL in a `cloud` build; each month in `<archive_to>/YYYY-MM`). Empty: log
    /// months are never dropped.
    pub archive_to: String,
}

impl Default for LifecycleSettings {
    fn default() -> Self {
        let plan = crate::lifecycle::PartitionPlan::default();
        let w = crate::lifecycle::RetentionWindows::default();
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
    pub fn plan(&self) -> crate::lifecycle::PartitionPlan {
        crate::lifecycle::PartitionPlan { months_ahead: self.months_ahead, days_ahead: self.days_ahead }
    }

    pub fn windows(&self) -> crate::lifecycle::RetentionWindows {
        crate::lifecycle::RetentionWindows {
            log_months: self.log_months,
            dispatched_days: self.dispatched_days,
            dead_days: self.dead_days,
            timer_days: self.timer_days,
        }
    }
}

impl LifecycleSettings {
    pub fn validate(&self) -> Result<(), SettingError> {
        if !(1..=24).contains(&self.months_ahead) {
            return Err(bad("lifecycle.months_ahead", "must be between 1 and 24"));
        }
        if !(1..=90).contains(&self.days_ahead) {
            return Err(bad("lifecycle.days_ahead", "must be between 1 and 90"));
        }
        if !(60..=86_400).contains(&self.check_secs) {
            return Err(bad("lifecycle.check_secs", "must be between 60 and 86400"));
        }
        if self.retention_secs != 0 && !(60..=604_800).contains(&self.retention_secs) {
            return Err(bad("lifecycle.retention_secs", "must be 0 (never) or between 60 and 604800"));
        }
        if !(1..=1200).contains(&self.log_months) {
            return Err(bad("lifecycle.log_months", "must be between 1 and 1200"));
        }
        if !(1..=3650).contains(&self.dispatched_days) {
            return Err(bad("lifecycle.dispatched_days", "must be between 1 and 3650"));
        }
        if !(self.dispatched_days..=3650).contains(&self.dead_days) {
            return Err(bad("lifecycle.dead_days", "must be between lifecycle.dispatched_days and 3650"));
        }
        if !(1..=3650).contains(&self.timer_days) {
            return Err(bad("lifecycle.timer_days", "must be between 1 and 3650"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_the_store_options_take_the_pool_and_the_lease() {
        let db = DatabaseSettings::default();
        db.validate().expect("sqlite is valid");
        assert!(db.url.is_sqlite());
        let options = db.options(Duration::from_secs(120));
        assert_eq!(
            (options.lease, options.max_connections, options.relay_connections),
            (Duration::from_secs(120), 16, 4)
        );
        let life = LifecycleSettings::default();
        life.validate().expect("valid");
        assert_eq!(life.plan(), crate::lifecycle::PartitionPlan::default());
        assert_eq!(life.windows(), crate::lifecycle::RetentionWindows::default());
    }

    #[test]
    fn a_remote_postgres_needs_tls_and_the_error_never_quotes_the_url() {
        let check = |url: &str| {
            DatabaseSettings { url: DatabaseUrl::new(url), ..DatabaseSettings::default() }.validate()
        };
        check("postgres://app:pw@db.internal/la?sslmode=verify-full").expect("tls");
        check("postgres://postgres@127.0.0.1:5432/test").expect("local");
        let e = check("postgres://app:hunter2@db.internal/la").expect_err("plaintext");
        assert_eq!(e.setting, "database.url");
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert_eq!(check("mysql://x").expect_err("scheme").setting, "database.url");
        assert_eq!(format!("{:?}", DatabaseUrl::new("postgres://a:b@h/d")), "\"postgres://a:***@h/d\"");
    }

    #[test]
    fn an_empty_pool_names_its_setting() {
        for (setting, db) in [
            (
                "database.max_connections",
                DatabaseSettings { max_connections: 0, ..DatabaseSettings::default() },
            ),
            (
                "database.relay_connections",
                DatabaseSettings { relay_connections: 0, ..DatabaseSettings::default() },
            ),
        ] {
            assert_eq!(db.validate().expect_err(setting).setting, setting);
        }
    }

    #[test]
    fn lifecycle_ranges_name_the_setting() {
        let e =
            LifecycleSettings { dead_days: 1, ..LifecycleSettings::default() }.validate().expect_err("dead");
        assert_eq!(e.setting, "lifecycle.dead_days");
        let e = LifecycleSettings { retention_secs: 10, ..LifecycleSettings::default() }
            .validate()
            .expect_err("10 s");
        assert_eq!(e.setting, "lifecycle.retention_secs");
    }
}
