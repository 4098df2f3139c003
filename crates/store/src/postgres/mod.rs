//! The PostgreSQL backend (production): row-level transactions for log plus outbox,
//! `FOR UPDATE SKIP LOCKED` claims, advisory-lock leases.
//!
//! An append is one statement (a data-modifying CTE: version check, duplicate checks, both
//! inserts), so it costs one round trip and one commit; `append_batch` runs those statements
//! for several loads in one transaction.

mod attention;
mod dead_letters;
mod lifecycle;
mod lock;
mod log;
mod outbox;
mod parts;
mod timers;

/// The console's candidate query as the store runs it (for `EXPLAIN` in the console bench).
pub use attention::CANDIDATES as ATTENTION_CANDIDATES_SQL;

use std::str::FromStr;
use std::sync::Arc;

use sqlx::Executor;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::error::StoreError;
use crate::stores::{StoreOptions, Stores};

pub(crate) use lock::PgLoadLock;

/// How many loads' months a store remembers (about 100 bytes each).
const MONTHS_CACHED: u64 = 200_000;

/// The schema the store's tables are in, as the server resolves it (`''` when none is).
const CURRENT_SCHEMA: &str = "SELECT coalesce(current_schema(), '')";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// The Postgres store: [`EventStore`](crate::EventStore), [`Outbox`](crate::Outbox),
/// [`TimerStore`](crate::TimerStore) and [`LoadLock`](crate::LoadLock): one pool, and the relay's own
/// for the outbox's claims and marks.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The relay's own pool, for the outbox's claims, marks and lag queries
    /// (`StoreOptions::relay_connections`): the relay's statements stay planned on a few
    /// backends that run them all the time, and appends that take every connection of `pool`
    /// never hold up a delivery (docs/performance.md, "The relay's pool").
    relay_pool: PgPool,
    lease: chrono::TimeDelta,
    lock: Arc<PgLoadLock>,
    schema: Option<String>,
    /// Each recently appended load's month (`load_months`), so that an append names its
    /// partition as a parameter (`log.rs`, `APPEND`). Only a hint: the statement checks it.
    months: moka::sync::Cache<String, chrono::NaiveDate>,
    /// Which partitions are attached, checked once a minute, so that an append or a mark names
    /// its partition itself instead of the parent (`parts.rs`).
    parts: parts::AttachedParts,
    /// The `created_at` (so the day partition) of each row under a claim of this store, by
    /// claim token (`outbox.rs`, `HELD`).
    claim_days: outbox::ClaimDays,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("schema", &self.schema).field("lease", &self.lease).finish()
    }
}

impl PgStore {
    /// Connects with default options and applies the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, &StoreOptions::default()).await
    }

    /// Connects and applies the migrations.
    pub async fn connect_with(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        let connect = PgConnectOptions::from_str(url)?;
        Self::build(connect, options, None).await
    }

    /// Creates `schema` if it does not exist, points `search_path` of every pooled connection at
    /// it and applies the migrations there: a fresh store per eval run or per test on one
    /// database. `schema` must be a plain identifier (`[a-z_][a-z0-9_]*`, at most 63 bytes).
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        Self::connect_in_schema_with(url, schema, &StoreOptions::default()).await
    }

    pub async fn connect_in_schema_with(
        url: &str,
        schema: &str,
        options: &StoreOptions,
    ) -> Result<Self, StoreError> {
        check_schema_name(schema)?;
        let connect = PgConnectOptions::from_str(url)?;
        {
            let mut conn = sqlx::ConnectOptions::connect(&connect).await?;
            // An identifier cannot be a bound parameter; `schema` is checked to be a plain one.
            conn.execute(format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"").as_str()).await?;
            sqlx::Connection::close(conn).await?;
        }
        let connect = connect.options([("search_path", schema)]);
        Self::build(connect, options, Some(schema.to_owned())).await
    }

    async fn build(
        connect: PgConnectOptions,
        options: &StoreOptions,
        schema: Option<String>,
    ) -> Result<Self, StoreError> {
        // Generic plans: a custom plan of a statement over partitioned tables is planned again at
        // every execution, over every partition (2-3 ms for the claim); a generic plan is planned
        // once per connection and prunes partitions when it runs (docs/performance.md,
        // "Partitioned store"). No JIT: the store's statements are short, and a plan whose
        // estimate crossed `jit_above_cost` (a generic plan's guesses over a long outbox) paid
        // tens of milliseconds of compilation at every execution (docs/performance.md, "JIT").
        let session = connect.clone().options([("plan_cache_mode", "force_generic_plan"), ("jit", "off")]);
        let pool = pool_options(options.max_connections, options).connect_with(session.clone()).await?;
        // Opened on first use: a one-shot command that never claims opens no relay connection.
        let relay_pool = pool_options(options.relay_connections, options).connect_lazy_with(session);
        MIGRATOR.run(&pool).await?;
        let lease = options.lease_delta()?;
        // The load lease's keys are namespaced by the schema the store really uses: the one it
        // was opened in, or the first of the URL's `search_path` (two stores of one database
        // told apart only by their URLs' search paths must not share leases).
        let namespace: String = sqlx::query_scalar(CURRENT_SCHEMA).fetch_one(&pool).await?;
        let lock = Arc::new(PgLoadLock::spawn(connect, namespace));
        let months = moka::sync::Cache::new(MONTHS_CACHED);
        let parts = parts::AttachedParts::new();
        Ok(PgStore {
            pool,
            relay_pool,
            lease,
            lock,
            schema,
            months,
            parts,
            claim_days: outbox::ClaimDays::new(),
        })
    }

    /// Applies the migrations that are not applied yet (`load-agent migrate`).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    /// Drops the store's schema with everything in it (tests and eval runs clean up with this)
    /// and closes the pool. A store opened without a schema is refused.
    pub async fn drop_schema(self) -> Result<(), StoreError> {
        let Some(schema) = self.schema.clone() else {
            return Err(StoreError::InvalidRequest("drop_schema on a store opened without a schema".into()));
        };
        self.relay_pool.close().await;
        self.pool.execute(format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE").as_str()).await?;
        self.pool.close().await;
        Ok(())
    }

    /// The schema the store lives in, if it was opened with [`connect_in_schema`](Self::connect_in_schema).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The pool, for queries outside the store traits (audits, tests).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The store handles, all backed by this store.
    pub fn into_stores(self) -> Stores {
        let store = Arc::new(self);
        Stores {
            events: store.clone(),
            outbox: store.clone(),
            timers: store.clone(),
            dead_letters: store.clone(),
            lock: store.lock.clone(),
            lifecycle: store.clone(),
            index: store,
        }
    }
}

/// A pool of at most `size` connections (at least one) with the store's acquire timeout.
fn pool_options(size: u32, options: &StoreOptions) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(size.max(1))
        .acquire_timeout(options.acquire_timeout)
        // No ping before each use: it cost every statement a second round trip. A connection
        // that broke (Postgres restarted) fails its next statement instead, is closed by the
        // pool, and the caller's retry gets a new one (tests/outage.rs).
        .test_before_acquire(false)
}

fn check_schema_name(schema: &str) -> Result<(), StoreError> {
    let mut chars = schema.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if first_ok && rest_ok && schema.len() <= 63 {
        Ok(())
    } else {
        Err(StoreError::InvalidRequest(format!(
            "schema name {schema:?} is not a plain identifier ([a-z_][a-z0-9_]*, at most 63 bytes)"
        )))
    }
}

/// Whether a statement failed on a unique constraint; returns its name.
pub(crate) fn unique_violation(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(db) if db.kind() == sqlx::error::ErrorKind::UniqueViolation => {
            Some(db.constraint().unwrap_or_default().to_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_schema_name("contract_0f3a").is_ok());
        assert!(check_schema_name("_x1").is_ok());
        for bad in ["", "1abc", "Abc", "a-b", "a\"; drop", "a b"] {
            assert!(check_schema_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_schema_name(&"a".repeat(64)).is_err());
    }
}
