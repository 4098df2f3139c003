//! Opening a store from a URL, and the options both backends share.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;

use crate::attention::LoadIndex;
use crate::dead_letters::DeadLetterStore;
use crate::error::StoreError;
use crate::event_store::EventStore;
use crate::lifecycle::Lifecycle;
use crate::lock::LoadLock;
use crate::outbox::{DEFAULT_LEASE, Outbox};
use crate::postgres::PgStore;
use crate::sqlite::SqliteStore;
use crate::timers::TimerStore;

/// Options of a store; the defaults suit production and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// The claim lease of [`Outbox::pending`] (90 s, ADR 0003).
    pub lease: Duration,
    /// Postgres pool size.
    pub max_connections: u32,
    /// How long to wait for a pooled connection.
    pub acquire_timeout: Duration,
    /// SQLite: how long a write waits for another process's write lock.
    pub busy_timeout: Duration,
    /// SQLite: reader connections (writes go through one writer connection).
    pub sqlite_readers: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            lease: DEFAULT_LEASE,
            max_connections: 20,
            acquire_timeout: Duration::from_secs(30),
            busy_timeout: Duration::from_secs(5),
            sqlite_readers: 4,
        }
    }
}

impl StoreOptions {
    pub(crate) fn lease_delta(&self) -> Result<chrono::TimeDelta, StoreError> {
        chrono::TimeDelta::from_std(self.lease)
            .map_err(|_| StoreError::InvalidRequest(format!("lease {:?} is out of range", self.lease)))
    }
}

/// The store handles the runtime holds, all backed by one database.
#[derive(Clone)]
pub struct Stores {
    pub events: Arc<dyn EventStore>,
    pub outbox: Arc<dyn Outbox>,
    pub timers: Arc<dyn TimerStore>,
    /// Bodies of dead letters the DLQ topic cannot hold as they are.
    pub dead_letters: Arc<dyn DeadLetterStore>,
    pub lock: Arc<dyn LoadLock>,
    /// The console's attention list over the `load_summary` projection.
    pub index: Arc<dyn LoadIndex>,
    /// Partitions (Postgres) and retention.
    pub lifecycle: Arc<dyn Lifecycle>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stores { .. }")
    }
}

enum Backend {
    Sqlite,
    Postgres,
}

fn backend(url: &str) -> Result<Backend, StoreError> {
    let scheme = url.split_once(':').map_or(url, |(scheme, _)| scheme);
    match scheme {
        "sqlite" => Ok(Backend::Sqlite),
        "postgres" | "postgresql" => Ok(Backend::Postgres),
        other => Err(StoreError::UnsupportedUrl { scheme: other.chars().take(32).collect() }),
    }
}

/// Opens the store a URL names and applies its migrations: `sqlite://PATH` (created if
/// missing; `sqlite::memory:` is a temporary file) or `postgres://...`. Must be called inside a
/// tokio runtime.
pub async fn open_store(url: &str) -> Result<Stores, StoreError> {
    open_store_with(url, &StoreOptions::default()).await
}

pub async fn open_store_with(url: &str, options: &StoreOptions) -> Result<Stores, StoreError> {
    Ok(match backend(url)? {
        Backend::Sqlite => SqliteStore::open_url(url, options).await?.into_stores(),
        Backend::Postgres => PgStore::connect_with(url, options).await?.into_stores(),
    })
}

/// Applies the migrations that are not applied yet to the database a URL names
/// (`load-agent migrate`).
pub async fn migrate(url: &str) -> Result<(), StoreError> {
    match backend(url)? {
        Backend::Sqlite => crate::sqlite::migrate(SqliteConnectOptions::from_str(url)?).await,
        Backend::Postgres => {
            let options = StoreOptions { max_connections: 1, ..StoreOptions::default() };
            let store = PgStore::connect_with(url, &options).await?;
            store.pool().close().await;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_pick_a_backend_and_errors_hide_the_rest_of_the_url() {
        assert!(matches!(backend("sqlite://x.db"), Ok(Backend::Sqlite)));
        assert!(matches!(backend("sqlite::memory:"), Ok(Backend::Sqlite)));
        assert!(matches!(backend("postgres://u@h/db"), Ok(Backend::Postgres)));
        assert!(matches!(backend("postgresql://u@h/db"), Ok(Backend::Postgres)));
        let err = backend("mysql://user:secret@h/db").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("\"mysql\"") && !err.contains("secret"), "{err}");
    }
}
