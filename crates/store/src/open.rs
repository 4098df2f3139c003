//! Opening a store from a URL: the scheme picks the backend (the handles and options it
//! returns are in `stores`, which the backends share).

use std::str::FromStr;

use sqlx::sqlite::SqliteConnectOptions;

use crate::error::StoreError;
use crate::postgres::PgStore;
use crate::sqlite::SqliteStore;
use crate::stores::{StoreOptions, Stores};

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
