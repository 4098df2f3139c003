//! The store handles the runtime holds ([`Stores`]) and the options both backends open with
//! ([`StoreOptions`]): shared by the backends and by `open`, which picks one of them from a URL,
//! so neither imports the other.

use std::sync::Arc;
use std::time::Duration;

use crate::attention::LoadIndex;
use crate::dead_letters::DeadLetterStore;
use crate::error::StoreError;
use crate::event_store::EventStore;
use crate::lifecycle::Lifecycle;
use crate::lock::LoadLock;
use crate::outbox::{DEFAULT_LEASE, Outbox};
use crate::timers::TimerStore;

/// Options of a store; the defaults suit production and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// The claim lease of [`Outbox::pending`] (90 s, ADR 0003).
    pub lease: Duration,
    /// Postgres pool size.
    pub max_connections: u32,
    /// Postgres: the relay's own pool (the outbox's claims, marks and lag queries), besides
    /// `max_connections`.
    pub relay_connections: u32,
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
            relay_connections: 4,
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
