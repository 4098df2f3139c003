//! The two backends the contract suite runs on. Every test gets a fresh store: a new SQLite
//! file, or a new schema on the Postgres server of `DATABASE_URL`.

use chrono::{DateTime, Utc};
use load_agent_store::{PgStore, SqliteStore, StoreOptions, StoredEntry, Stores};
use sqlx::Row;

/// A non-negative integer column as the store's type.
fn unsigned<T: TryFrom<i64>>(column: &str, v: i64) -> T {
    T::try_from(v).unwrap_or_else(|_| panic!("{column} {v} is negative or too large"))
}

/// The Postgres server the suite uses when `DATABASE_URL` is not set.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A fresh store for one contract test.
pub trait StoreHarness: Send + Sync + Sized + 'static {
    /// The store under test.
    fn stores(&self) -> &Stores;

    /// A second, independent handle on the same database: another process's connections (a
    /// second relay or worker).
    fn reopen(&self) -> impl Future<Output = Stores> + Send;

    /// A load's log rows as plain SQL sees them (not through the store's own reads).
    fn plain_columns(&self, load_id: &str) -> impl Future<Output = Vec<StoredEntry>> + Send;

    /// Removes what the test created.
    fn cleanup(self) -> impl Future<Output = ()> + Send;
}

pub struct SqliteHarness {
    stores: Stores,
    pool: sqlx::SqlitePool,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl SqliteHarness {
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("contract.db");
        let store = SqliteStore::open(&path).await.expect("open a fresh SQLite store");
        let pool = store.readers().clone();
        SqliteHarness { stores: store.into_stores(), pool, path, _dir: dir }
    }
}

impl StoreHarness for SqliteHarness {
    fn stores(&self) -> &Stores {
        &self.stores
    }

    async fn reopen(&self) -> Stores {
        SqliteStore::open(&self.path).await.expect("reopen the SQLite store").into_stores()
    }

    async fn plain_columns(&self, load_id: &str) -> Vec<StoredEntry> {
        let rows = sqlx::query(
            "SELECT seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body FROM log_entries \
             WHERE load_id = ?1 ORDER BY seq",
        )
        .bind(load_id)
        .fetch_all(&self.pool)
        .await
        .expect("select log rows");
        rows.iter()
            .map(|r| {
                let recorded_at: String = r.get("recorded_at");
                StoredEntry {
                    seq: unsigned("seq", r.get("seq")),
                    entry_id: r.get("entry_id"),
                    kind: r.get("kind"),
                    recorded_at: DateTime::parse_from_rfc3339(&recorded_at)
                        .expect("a stored time")
                        .with_timezone(&Utc),
                    llm_cost_usd: r.get("llm_cost_usd"),
                    schema_id: unsigned("schema_id", r.get("schema_id")),
                    body: r.get("body"),
                }
            })
            .collect()
    }

    async fn cleanup(self) {}
}

pub struct PgHarness {
    stores: Stores,
    store: PgStore,
    url: String,
}

impl PgHarness {
    /// A store in a fresh schema. Panics with instructions when the server is unreachable:
    /// the Postgres half of the suite fails, it never skips.
    pub async fn new() -> Self {
        let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned());
        let schema = format!("contract_{}", uuid::Uuid::new_v4().simple());
        let store = match PgStore::connect_in_schema(&url, &schema).await {
            Ok(store) => store,
            Err(e) => panic!(
                "the Postgres contract tests need a server at {url} (set DATABASE_URL, or start the local \
                 one with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`): {e}"
            ),
        };
        PgHarness { stores: store.clone().into_stores(), store, url }
    }

    /// The store itself, for Postgres-only checks (its pool, its schema).
    pub fn pg(&self) -> &PgStore {
        &self.store
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl StoreHarness for PgHarness {
    fn stores(&self) -> &Stores {
        &self.stores
    }

    async fn reopen(&self) -> Stores {
        let schema = self.store.schema().expect("the harness store has a schema");
        PgStore::connect_in_schema_with(&self.url, schema, &StoreOptions::default())
            .await
            .expect("reopen the Postgres store")
            .into_stores()
    }

    async fn plain_columns(&self, load_id: &str) -> Vec<StoredEntry> {
        let rows = sqlx::query(
            "SELECT seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body FROM log_entries \
             WHERE load_id = $1 ORDER BY seq",
        )
        .bind(load_id)
        .fetch_all(self.store.pool())
        .await
        .expect("select log rows");
        rows.iter()
            .map(|r| StoredEntry {
                seq: unsigned("seq", r.get("seq")),
                entry_id: r.get("entry_id"),
                kind: r.get("kind"),
                recorded_at: r.get("recorded_at"),
                llm_cost_usd: r.get("llm_cost_usd"),
                schema_id: unsigned("schema_id", i64::from(r.get::<i32, _>("schema_id"))),
                body: r.get("body"),
            })
            .collect()
    }

    async fn cleanup(self) {
        drop(self.stores);
        self.store.drop_schema().await.expect("drop the test schema");
    }
}
