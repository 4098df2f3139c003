//! `LoadLock` on Postgres: session advisory locks held on one dedicated connection.
//!
//! Holding a pooled connection per lease would drain the pool while runs wait on LLM calls, so
//! one background task owns one connection and takes and releases every lease of this process
//! on it. Session advisory locks are re-entrant within a session, so the task's callers are
//! also excluded in-process (`held`). If the connection drops, the server releases its locks;
//! that is acceptable for a lease that correctness never depends on (ADR 0003), and the next
//! request reconnects.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;
use crate::lock::{LoadLease, LoadLock};

enum LockCmd {
    TryLock { key: i64, reply: oneshot::Sender<Result<bool, StoreError>> },
    Unlock { key: i64 },
}

pub(crate) struct PgLoadLock {
    commands: mpsc::UnboundedSender<LockCmd>,
    held: Arc<Mutex<HashSet<i64>>>,
    namespace: String,
}

impl PgLoadLock {
    /// Starts the lock task; it connects on first use and stops when this handle is dropped.
    pub(crate) fn spawn(connect: PgConnectOptions, namespace: String) -> Self {
        let (commands, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(connect, rx));
        PgLoadLock { commands, held: Arc::default(), namespace }
    }
}

/// The advisory lock key of a load: FNV-1a (64 bit) of `namespace NUL load_id`, stable across
/// processes and versions. The namespace (the store's schema) keeps stores that share a database
/// apart.
pub(crate) fn lock_key(namespace: &str, load_id: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in namespace.bytes().chain(std::iter::once(0)).chain(load_id.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

fn unpoisoned<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn run(connect: PgConnectOptions, mut rx: mpsc::UnboundedReceiver<LockCmd>) {
    let mut conn: Option<PgConnection> = None;
    while let Some(cmd) = rx.recv().await {
        match cmd {
            LockCmd::TryLock { key, reply } => {
                let result = try_lock_on(&connect, &mut conn, key).await;
                if result.is_err() {
                    conn = None;
                }
                let _ = reply.send(result);
            }
            LockCmd::Unlock { key } => {
                if let Some(c) = conn.as_mut() {
                    let unlocked = sqlx::query_scalar::<_, bool>("SELECT pg_advisory_unlock($1)")
                        .bind(key)
                        .fetch_one(c)
                        .await;
                    if let Err(e) = unlocked {
                        tracing::warn!(error = %e, "load lock: unlock failed; dropping the lock connection");
                        conn = None;
                    }
                }
            }
        }
    }
    if let Some(c) = conn {
        let _ = c.close().await;
    }
}

async fn try_lock_on(
    connect: &PgConnectOptions,
    conn: &mut Option<PgConnection>,
    key: i64,
) -> Result<bool, StoreError> {
    if conn.is_none() {
        *conn = Some(connect.connect().await?);
    }
    let Some(c) = conn.as_mut() else { return Ok(false) };
    let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(key).fetch_one(c).await?;
    Ok(got)
}

/// Undoes a lease request that did not complete (an error, a refusal, or the caller's future
/// dropped while waiting), so that neither `held` nor the server keeps a lock nobody owns.
struct PendingLease {
    key: i64,
    held: Arc<Mutex<HashSet<i64>>>,
    commands: mpsc::UnboundedSender<LockCmd>,
    armed: bool,
}

impl PendingLease {
    /// The server refused or failed: free the key in-process only.
    fn forget(mut self) {
        self.armed = false;
        unpoisoned(&self.held).remove(&self.key);
    }

    fn into_lease(mut self) -> LoadLease {
        self.armed = false;
        let (key, held, commands) = (self.key, self.held.clone(), self.commands.clone());
        LoadLease::with_release(move || release(key, &held, &commands))
    }
}

impl Drop for PendingLease {
    fn drop(&mut self) {
        if self.armed {
            // Unlocking a key this session does not hold only makes the server warn.
            release(self.key, &self.held, &self.commands);
        }
    }
}

fn release(key: i64, held: &Mutex<HashSet<i64>>, commands: &mpsc::UnboundedSender<LockCmd>) {
    // Queue the unlock before freeing the key in-process: a new holder's lock request then
    // reaches the server after this unlock.
    let _ = commands.send(LockCmd::Unlock { key });
    unpoisoned(held).remove(&key);
}

#[async_trait]
impl LoadLock for PgLoadLock {
    async fn try_lock(&self, load_id: &str) -> Result<Option<LoadLease>, StoreError> {
        let key = lock_key(&self.namespace, load_id);
        if !unpoisoned(&self.held).insert(key) {
            return Ok(None);
        }
        let pending =
            PendingLease { key, held: self.held.clone(), commands: self.commands.clone(), armed: true };
        let (reply, answer) = oneshot::channel();
        let stopped = || StoreError::Stopped { task: "load lock" };
        self.commands.send(LockCmd::TryLock { key, reply }).map_err(|_| stopped())?;
        match answer.await.map_err(|_| stopped())? {
            Ok(true) => Ok(Some(pending.into_lease())),
            Ok(false) => {
                pending.forget();
                Ok(None)
            }
            Err(e) => {
                pending.forget();
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::lock_key;

    #[test]
    fn lock_keys_are_stable_and_namespaced() {
        assert_eq!(lock_key("", "481207"), lock_key("", "481207"));
        assert_ne!(lock_key("", "481207"), lock_key("", "481208"));
        assert_ne!(lock_key("a", "481207"), lock_key("b", "481207"));
        assert_ne!(lock_key("ab", "c"), lock_key("a", "bc"));
    }
}
