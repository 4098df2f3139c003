//! Errors, one enum per boundary: [`StoreError`] for infrastructure failures, [`AppendError`] for
//! the outcomes of an append the caller must handle (ADR 0003), [`StaleClaimError`] /
//! [`ClaimError`] for outbox claims that no longer hold.

/// An infrastructure failure: the database is unreachable, a statement failed, a stored row
/// cannot be read back. The caller retries or gives up; it is never a business outcome.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The URL's scheme is neither `sqlite:` nor `postgres:`/`postgresql:`. Only the scheme is
    /// kept, so a password in the URL never reaches a log.
    #[error("unsupported database url scheme {scheme:?} (expected sqlite://PATH or postgres://...)")]
    UnsupportedUrl { scheme: String },
    /// A log entry's stored bytes do not decode under its writer schema.
    #[error("log entry {load_id}#{seq} (schema {schema_id}) does not decode: {message}")]
    Decode { load_id: String, seq: i64, schema_id: i64, message: String },
    /// A stored row breaks an invariant of the store (a gap in a log, an unknown status, an
    /// action that is not valid JSON).
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// The request itself is malformed (an entry of another load, an outbox row without
    /// entries, a version beyond i64). A caller bug, never retried.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The transaction that carried the request failed to commit; nothing of it was written.
    #[error("commit failed: {0}")]
    Commit(String),
    /// A retention step refused to drop a partition (rows still pending or scheduled, a log
    /// month that is not exactly what its archive holds, no such partition): nothing was dropped.
    #[error("refused: {0}")]
    Refused(String),
    /// A background task of the store (the SQLite writer, the Postgres lock connection) is
    /// gone: the store is shutting down.
    #[error("the store's {task} task has stopped")]
    Stopped { task: &'static str },
}

/// Why an append wrote nothing (ADR 0003). Each variant is a situation the load worker handles;
/// `Store` is an infrastructure failure.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The log is no longer at `expected` (another run appended first): re-read, re-project,
    /// re-decide (ConcurrencyConflictError).
    #[error("version conflict: expected version {expected}, the log is at {actual}")]
    Conflict { expected: u64, actual: u64 },
    /// An entry with this id is already in the load's log: the event was already processed
    /// (DuplicateEntryError).
    #[error("entry {entry_id} is already in the log (already processed)")]
    DuplicateEntry { entry_id: String },
    /// An outbox row with this idempotency key already exists: a decision bug
    /// (DuplicateActionKeyError).
    #[error("outbox key {key} already exists (a decision emitted a used idempotency key)")]
    DuplicateActionKey { key: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for AppendError {
    fn from(e: sqlx::Error) -> Self {
        AppendError::Store(StoreError::Database(e))
    }
}

/// The claim token no longer holds the outbox row: its lease expired and another relay took
/// it over, or the row was already marked. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the claim on outbox row {id} is no longer held")]
pub struct StaleClaimError {
    pub id: String,
}

/// The outcome of an operation on a claimed outbox row that did not apply.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(transparent)]
    Stale(#[from] StaleClaimError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ClaimError {
    pub fn is_stale(&self) -> bool {
        matches!(self, ClaimError::Stale(_))
    }
}

impl From<sqlx::Error> for ClaimError {
    fn from(e: sqlx::Error) -> Self {
        ClaimError::Store(StoreError::Database(e))
    }
}
