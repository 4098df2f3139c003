//! The SQLite backend (the embedded default and the evals): one file, WAL, `synchronous=FULL`.
//!
//! SQLite has one writer at a time, so every write goes through one writer task that owns the
//! only write connection (`writer.rs`; the commands the table modules queue for it are in
//! `command.rs`). It takes the commands queued while the previous
//! transaction committed and runs them in one `BEGIN IMMEDIATE` transaction (group commit):
//! one fsync for many appends, each still all or nothing with its own version check, and every
//! caller answered only after the commit. Reads run on a small pool of reader connections.

mod attention;
mod command;
mod dead_letters;
mod log;
mod outbox;
mod timers;
mod writer;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;
use crate::lock::NoopLoadLock;
use crate::stores::{StoreOptions, Stores};

use command::WriteCmd;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// How many queued write commands the writer takes into one transaction at most.
const MAX_GROUP: usize = 256;

/// The SQLite store: [`EventStore`](crate::EventStore), [`Outbox`](crate::Outbox) and
/// [`TimerStore`](crate::TimerStore) on one file; its lease is the no-op
/// [`NoopLoadLock`].
#[derive(Clone)]
pub struct SqliteStore {
    readers: SqlitePool,
    writer: mpsc::Sender<WriteCmd>,
    lease: chrono::TimeDelta,
    path: PathBuf,
    /// Keeps the directory of a temporary store alive as long as any handle.
    _temp: Option<Arc<tempfile::TempDir>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).field("lease", &self.lease).finish()
    }
}

impl SqliteStore {
    /// Opens (creating it and its directory if missing) the store at `path` with default
    /// options, and applies the migrations. Must be called inside a tokio runtime (it starts
    /// the writer task).
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, &StoreOptions::default()).await
    }

    pub async fn open_with(path: impl AsRef<Path>, options: &StoreOptions) -> Result<Self, StoreError> {
        let connect = SqliteConnectOptions::new().filename(path.as_ref());
        Self::build(connect, options, None).await
    }

    /// A store in a fresh temporary file, deleted when the last handle is dropped (the
    /// `sqlite::memory:` URL). A real file, so the writer and the readers share it.
    pub async fn open_temporary(options: &StoreOptions) -> Result<Self, StoreError> {
        let dir = tempfile::Builder::new()
            .prefix("load-agent-store-")
            .tempdir()
            .map_err(|e| StoreError::InvalidRequest(format!("cannot create a temporary directory: {e}")))?;
        let connect = SqliteConnectOptions::new().filename(dir.path().join("store.db"));
        Self::build(connect, options, Some(Arc::new(dir))).await
    }

    /// Opens the store a `sqlite:` URL names (`sqlite://PATH`, `sqlite:PATH`; `sqlite::memory:`
    /// is a temporary file).
    pub async fn open_url(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        if matches!(url, "sqlite::memory:" | "sqlite://:memory:" | "sqlite:") {
            return Self::open_temporary(options).await;
        }
        let connect = SqliteConnectOptions::from_str(url)?;
        Self::build(connect, options, None).await
    }

    async fn build(
        connect: SqliteConnectOptions,
        options: &StoreOptions,
        temp: Option<Arc<tempfile::TempDir>>,
    ) -> Result<Self, StoreError> {
        let path = connect.get_filename().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::InvalidRequest(format!("cannot create directory {}: {e}", dir.display()))
            })?;
        }
        let connect = connect
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // Durable commits: WAL with synchronous=FULL syncs the WAL on every commit.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(options.busy_timeout)
            .foreign_keys(true)
            // 16 MiB of page cache per connection, and a checkpoint every 32 MiB of WAL rather
            // than every 4 MiB: fewer, better-coalesced checkpoint writes on the write path.
            .pragma("cache_size", "-16384")
            .pragma("wal_autocheckpoint", "8192")
            // Statement journals (one per multi-row INSERT in a group) stay in memory.
            .pragma("temp_store", "memory");
        // Migrate through the pool: `Migrator::run` on a bare connection makes this future
        // lose `Send` (a higher-ranked lifetime inference gap in sqlx).
        let readers = SqlitePoolOptions::new()
            .max_connections(options.sqlite_readers.max(1))
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect.clone())
            .await?;
        MIGRATOR.run(&readers).await?;
        let write_conn = connect.connect().await?;
        let (writer, commands) = mpsc::channel(4 * MAX_GROUP);
        tokio::spawn(writer::run(write_conn, commands));
        let lease = options.lease_delta()?;
        Ok(SqliteStore { readers, writer, lease, path, _temp: temp })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The reader pool, for queries outside the store traits (audits, tests).
    pub fn readers(&self) -> &SqlitePool {
        &self.readers
    }

    /// The store handles, all backed by this store.
    pub fn into_stores(self) -> Stores {
        let store = Arc::new(self);
        Stores {
            events: store.clone(),
            outbox: store.clone(),
            timers: store.clone(),
            dead_letters: store.clone(),
            lock: Arc::new(NoopLoadLock),
            lifecycle: store.clone(),
            index: store,
        }
    }

    /// Queues a write command and waits for its answer (sent after the commit).
    async fn write<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> WriteCmd) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || StoreError::Stopped { task: "sqlite writer" };
        self.writer.send(make(reply)).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())
    }
}

/// Applies the SQLite migrations to the file at `connect` (`load-agent migrate`).
pub(crate) async fn migrate(connect: SqliteConnectOptions) -> Result<(), StoreError> {
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(connect.create_if_missing(true).journal_mode(SqliteJournalMode::Wal))
        .await?;
    MIGRATOR.run(&pool).await?;
    pool.close().await;
    Ok(())
}

/// SQLite is not partitioned: nothing to make, nothing to list.
#[async_trait::async_trait]
impl crate::lifecycle::Lifecycle for SqliteStore {
    fn partitioned(&self) -> bool {
        false
    }

    async fn ensure_partitions(
        &self,
        _now: chrono::DateTime<chrono::Utc>,
        _plan: &crate::lifecycle::PartitionPlan,
    ) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    async fn retire_outbox_days(
        &self,
        _now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    async fn partitions(&self) -> Result<Vec<crate::lifecycle::PartitionInfo>, StoreError> {
        Ok(Vec::new())
    }

    async fn analyze_filled_partitions(&self) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    async fn drop_log_month(
        &self,
        _month: chrono::NaiveDate,
        _archived: &[(String, u64)],
    ) -> Result<u64, StoreError> {
        Err(StoreError::Refused("SQLite is not partitioned: its log is never dropped by retention".into()))
    }

    async fn drop_outbox_day(
        &self,
        _day: chrono::NaiveDate,
        _keep_dead_since: chrono::DateTime<chrono::Utc>,
    ) -> Result<crate::lifecycle::DroppedDay, StoreError> {
        Err(StoreError::Refused("SQLite is not partitioned: expired rows are deleted instead".into()))
    }

    async fn drop_timer_month(&self, _month: chrono::NaiveDate) -> Result<u64, StoreError> {
        Err(StoreError::Refused("SQLite is not partitioned: expired rows are deleted instead".into()))
    }

    async fn delete_expired_rows(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        windows: &crate::lifecycle::RetentionWindows,
    ) -> Result<crate::lifecycle::DeletedRows, StoreError> {
        self.delete_expired(now, windows).await
    }

    /// SQLite's retention only deletes expired rows (SQLite serializes the writers, and a row
    /// two runs both try to delete is deleted once): nothing to exclude.
    async fn try_lock_retention(&self) -> Result<Option<crate::lifecycle::RunLock>, StoreError> {
        Ok(Some(crate::lifecycle::RunLock::unshared()))
    }
}
