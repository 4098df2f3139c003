//! Where the worker gets a load's state from. The default reads the whole log and projects it;
//! a cache (the next issue's moka cache) keeps states and reads only the entries after its
//! cached version.

use std::sync::Arc;

use async_trait::async_trait;
use load_agent_domain::{LoadState, project_state};
use load_agent_store::{EventStore, StoreError};

/// The projected state of a load at its current version (`LoadState::version`).
#[async_trait]
pub trait SnapshotSource: Send + Sync {
    /// The state of `load_id` projected from its log; `state.version` is the log's version,
    /// the `expected_version` of the next append.
    async fn snapshot(&self, load_id: &str) -> Result<LoadState, StoreError>;

    /// A run appended entries and the log is now at `new_version`; `after` is the state it
    /// projected from them. A cache can keep it instead of reading the entries back.
    async fn committed(&self, _after: &LoadState, _new_version: u64) {}

    /// The cached state of `load_id` is behind the log (an append conflicted): drop it.
    async fn invalidate(&self, _load_id: &str) {}

    /// Other writers may have appended to any load since it was cached (this process was given
    /// loads it did not own a moment ago: a Kafka rebalance): a cache that trusts its snapshots
    /// verifies each against the log once before trusting it again.
    fn distrust(&self) {}
}

/// Reads the whole log and projects it, every time. No state is kept.
#[derive(Clone)]
pub struct LogProjection {
    events: Arc<dyn EventStore>,
}

impl LogProjection {
    pub fn new(events: Arc<dyn EventStore>) -> Self {
        LogProjection { events }
    }
}

impl std::fmt::Debug for LogProjection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogProjection").finish_non_exhaustive()
    }
}

#[async_trait]
impl SnapshotSource for LogProjection {
    async fn snapshot(&self, load_id: &str) -> Result<LoadState, StoreError> {
        let (entries, version) = self.events.read(load_id).await?;
        let state = project_state(load_id, &entries);
        if state.version != version {
            return Err(StoreError::Corrupt(format!(
                "load {load_id}: {} entries read but the log is at version {version}",
                state.version
            )));
        }
        Ok(state)
    }
}
