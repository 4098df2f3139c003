//! The optional per-load lease (ADR 0003): it saves the LLM calls a concurrency conflict would
//! waste, and correctness never depends on it (the append's version check does).

use async_trait::async_trait;

use crate::error::StoreError;

/// Tries to take a per-load lease.
#[async_trait]
pub trait LoadLock: Send + Sync {
    /// The lease on `load_id`, or `None` when another holder has it. The lease is released
    /// when the returned guard is dropped.
    async fn try_lock(&self, load_id: &str) -> Result<Option<LoadLease>, StoreError>;
}

/// A held lease; dropping it releases the lease.
#[must_use = "the lease is released when this guard is dropped"]
pub struct LoadLease {
    release: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl LoadLease {
    /// A lease that guards nothing (the SQLite no-op).
    pub fn noop() -> Self {
        LoadLease { release: None }
    }

    /// A lease that runs `release` (synchronously, without blocking) when dropped.
    pub(crate) fn with_release(release: impl FnOnce() + Send + Sync + 'static) -> Self {
        LoadLease { release: Some(Box::new(release)) }
    }

    /// Releases the lease now (the same as dropping it).
    pub fn release(self) {}
}

impl Drop for LoadLease {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl std::fmt::Debug for LoadLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadLease").field("held", &self.release.is_some()).finish()
    }
}

/// The SQLite lease: always granted, guards nothing (one process, and the version check is the
/// correctness mechanism anyway).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopLoadLock;

#[async_trait]
impl LoadLock for NoopLoadLock {
    async fn try_lock(&self, _load_id: &str) -> Result<Option<LoadLease>, StoreError> {
        Ok(Some(LoadLease::noop()))
    }
}
