//! Group commit across loads (issue 15): the worker's appends of different loads that are ready
//! within a few milliseconds of each other go to the store in one transaction
//! ([`EventStore::append_batch`]), so a burst of runs pays one durable commit instead of one
//! each.
//!
//! [`GroupCommit`] is an [`EventStore`] in front of the real one. Reads go straight through;
//! [`append`](EventStore::append) queues the request and waits for its own result:
//!
//! - A committer takes the queued requests once `window` has passed since it started waiting
//!   (default zero: at once), or as soon as `max_batch` are queued, and appends them with
//!   `append_batch` (on Postgres one statement for the batch). Requests that arrive while a
//!   batch commits form the next batch, so batches grow with the load without a timer. Up to
//!   `committers` batches are in flight at once (each on its own connection), but a second one
//!   starts only once [`GroupCommitConfig::parallel_from`] requests wait: a batch's statement and
//!   commit have a fixed cost (on Postgres about 0.4 ms of the 0.9 ms of a batch of eight), so a
//!   few requests are better served by the running committer's next batch than by a batch of
//!   their own beside it.
//! - Each request keeps its own version check and its own result: a conflict, a duplicate event
//!   or a reused action key fails only that load, which re-decides exactly as without grouping.
//!   A store error fails the whole batch, and every run in it gives its event back.
//! - A run learns that its append committed only after the batch's transaction committed, so
//!   the consumer stores an offset only after the commit (nothing changes for the callers).
//! - `max_batch` ≤ 1 turns grouping off: each append goes to the store directly, as before.
//!
//! Committers are tasks spawned on demand (none while nothing is queued), so a run that is
//! cancelled while it waits never stalls the others' batch. A committer that dies in the middle
//! of a batch (a panic in the store) leaves its batch without answers (those runs give their
//! events back) and a successor for the requests queued behind it.
//!
//! Metrics: `load_agent_group_commit_batch_size` (requests per transaction) and
//! `load_agent_group_commit_wait_seconds` (queued → batch taken).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use load_agent_domain::{LoadSummary, LogEntry};
use load_agent_store::{AppendError, AppendRequest, EventStore, NewOutboxRow, StoreError, StoredEntry};
use tokio::sync::{Notify, oneshot};

use crate::metric_names as names;

/// How appends are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommitConfig {
    /// How long a committer waits for more requests before it commits a batch that is not full.
    /// Zero (the default) takes what queued while the previous batches committed: no added
    /// latency when idle, batches as large as the load makes them when busy.
    pub window: Duration,
    /// Requests per transaction at most; ≤ 1 turns grouping off.
    pub max_batch: usize,
    /// Batches in flight at once.
    pub committers: usize,
}

impl Default for GroupCommitConfig {
    fn default() -> Self {
        GroupCommitConfig { window: Duration::ZERO, max_batch: 32, committers: 4 }
    }
}

impl GroupCommitConfig {
    /// Grouping off: every append is its own transaction.
    pub const OFF: GroupCommitConfig =
        GroupCommitConfig { window: Duration::ZERO, max_batch: 1, committers: 1 };

    pub fn is_on(&self) -> bool {
        self.max_batch > 1
    }

    /// How many queued requests start a batch beside one that is running: a quarter of
    /// `max_batch`, at least 2 (8 with the defaults). Fewer wait for the running batch.
    pub fn parallel_from(&self) -> usize {
        (self.max_batch / 4).max(2)
    }
}

struct Pending {
    request: AppendRequest,
    reply: oneshot::Sender<Result<u64, AppendError>>,
    queued: Instant,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Pending>,
    /// Committer tasks alive (running a batch, or about to take one).
    committers: usize,
    /// Committers running a batch right now.
    busy: usize,
}

impl Queue {
    /// Whether a committer may take the queued requests now: always when no batch is running;
    /// beside a running batch only once `parallel_from` requests wait. Fewer than that are left
    /// to the running committer, which takes them when its batch is done: a batch of one or two
    /// loads beside a running one pays a whole statement and commit for them and shares the
    /// cores with it, where waiting for the running batch costs less (docs/capacity.md).
    fn may_take(&self, parallel_from: usize) -> bool {
        !self.pending.is_empty() && (self.busy == 0 || self.pending.len() >= parallel_from)
    }
}

struct Inner {
    store: Arc<dyn EventStore>,
    config: GroupCommitConfig,
    queue: Mutex<Queue>,
    /// Notified when the queue holds a full batch.
    full: Notify,
}

impl Inner {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // A poisoned lock only means a committer panicked between two statements that leave the
        // queue consistent; go on with it.
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The event store with grouped appends; see the module documentation.
#[derive(Clone)]
pub struct GroupCommit {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

impl GroupCommit {
    pub fn new(store: Arc<dyn EventStore>, mut config: GroupCommitConfig) -> Self {
        config.committers = config.committers.max(1);
        GroupCommit {
            inner: Arc::new(Inner {
                store,
                config,
                queue: Mutex::new(Queue::default()),
                full: Notify::new(),
            }),
        }
    }

    /// `store` itself when `config` turns grouping off or the store groups its commits on its
    /// own ([`EventStore::commits_grouped`]: SQLite's one writer, before which a queue would only
    /// add a hop; docs/runtime.md), else the store behind a [`GroupCommit`].
    pub fn wrap(store: Arc<dyn EventStore>, config: GroupCommitConfig) -> Arc<dyn EventStore> {
        if config.is_on() && !store.commits_grouped() {
            Arc::new(GroupCommit::new(store, config))
        } else {
            store
        }
    }

    pub fn config(&self) -> GroupCommitConfig {
        self.inner.config
    }
}

/// A committer's place in the counts, given back however the committer ends (a panic in the
/// store included), so a later request starts a new one.
struct CommitterSlot {
    inner: Arc<Inner>,
    /// Still counted in `committers` (a committer that left the queue under its lock is not).
    alive: bool,
    /// Counted in `busy` (from taking a batch until it takes the next or leaves).
    busy: bool,
}

impl Drop for CommitterSlot {
    fn drop(&mut self) {
        if self.alive || self.busy {
            let mut queue = self.inner.queue();
            if self.alive {
                queue.committers -= 1;
            }
            if self.busy {
                queue.busy -= 1;
            }
            // Still counted alive: the committer did not leave by finding nothing to take, it
            // ended in the middle (a panic in the store, its task dropped). Requests that queued
            // meanwhile counted on it; without a successor they would wait for the next append,
            // which may never come. A runtime that is shutting down drops the successor.
            if self.alive
                && queue.committers < self.inner.config.committers
                && queue.may_take(self.inner.config.parallel_from())
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                queue.committers += 1;
                drop(queue);
                runtime.spawn(commit_batches(self.inner.clone()));
            }
        }
    }
}

/// A committer: takes batches until nothing is left for it to take. It leaves the queue in the
/// same critical section in which it finds it so, so a request queued just after is never left
/// without a committer: the request that finds none alive starts one.
async fn commit_batches(inner: Arc<Inner>) {
    let mut slot = CommitterSlot { inner: inner.clone(), alive: true, busy: false };
    let max = inner.config.max_batch;
    let parallel_from = inner.config.parallel_from();
    loop {
        // No window: take what is queued now. (A timer set to "now" is not "no wait": tokio's
        // timer wheel rounds a deadline up to its next millisecond tick, so a zero window waited
        // a millisecond or more before every batch; docs/capacity.md.)
        if !inner.config.window.is_zero() {
            let deadline = tokio::time::Instant::now() + inner.config.window;
            loop {
                if inner.queue().pending.len() >= max {
                    break;
                }
                if tokio::time::timeout_at(deadline, inner.full.notified()).await.is_err() {
                    break;
                }
            }
        }
        let batch: Vec<Pending> = {
            let mut queue = inner.queue();
            // The previous batch ends here, in the same critical section as the next is taken:
            // a request queued in between must not see no batch running and start a committer
            // beside this one.
            if slot.busy {
                queue.busy -= 1;
                slot.busy = false;
            }
            if !queue.may_take(parallel_from) {
                queue.committers -= 1;
                slot.alive = false;
                return;
            }
            let n = queue.pending.len().min(max);
            queue.busy += 1;
            slot.busy = true;
            queue.pending.drain(..n).collect()
        };
        let now = Instant::now();
        let mut requests = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        for p in batch {
            metrics::histogram!(names::GROUP_COMMIT_WAIT_SECONDS)
                .record(now.duration_since(p.queued).as_secs_f64());
            requests.push(p.request);
            replies.push(p.reply);
        }
        metrics::histogram!(names::GROUP_COMMIT_BATCH_SIZE).record(requests.len() as f64);
        let results = inner.store.append_batch(requests).await;
        if results.iter().filter(|r| r.is_ok()).count() > 1 {
            crate::crash::crash_point("worker.group_commit");
        }
        let n = replies.len();
        let mut results = results.into_iter();
        for reply in replies {
            let result = results.next().unwrap_or_else(|| {
                Err(AppendError::Store(StoreError::Commit(format!(
                    "the store answered fewer results than the {n} requests of a batch"
                ))))
            });
            // A run that stopped waiting (cancelled) drops its receiver; its append stands.
            let _ = reply.send(result);
        }
    }
}

#[async_trait]
impl EventStore for GroupCommit {
    async fn read(&self, load_id: &str) -> Result<(Vec<LogEntry>, u64), StoreError> {
        self.inner.store.read(load_id).await
    }

    /// Grouping is what it does (so wrapping it again adds nothing).
    fn commits_grouped(&self) -> bool {
        true
    }

    async fn read_since(&self, load_id: &str, version: u64) -> Result<(Vec<LogEntry>, u64), StoreError> {
        self.inner.store.read_since(load_id, version).await
    }

    async fn read_entry(&self, load_id: &str, entry_id: &str) -> Result<Option<LogEntry>, StoreError> {
        self.inner.store.read_entry(load_id, entry_id).await
    }

    async fn read_stored(&self, load_id: &str) -> Result<Vec<StoredEntry>, StoreError> {
        self.inner.store.read_stored(load_id).await
    }

    async fn load_ids_started_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.store.load_ids_started_between(from, until, limit).await
    }

    async fn append_summarized(
        &self,
        load_id: &str,
        entries: &[LogEntry],
        expected_version: u64,
        outbox: &[NewOutboxRow],
        summary: Option<&LoadSummary>,
    ) -> Result<u64, AppendError> {
        let config = self.inner.config;
        if !config.is_on() {
            return self
                .inner
                .store
                .append_summarized(load_id, entries, expected_version, outbox, summary)
                .await;
        }
        let (reply, answer) = oneshot::channel();
        let request = AppendRequest {
            load_id: load_id.to_owned(),
            entries: entries.to_vec(),
            expected_version,
            outbox: outbox.to_vec(),
            summary: summary.cloned(),
        };
        let start_committer = {
            let mut queue = self.inner.queue();
            queue.pending.push_back(Pending { request, reply, queued: Instant::now() });
            if queue.pending.len() >= config.max_batch {
                self.inner.full.notify_one();
            }
            // With no committer alive no batch runs, so `may_take` holds for the request just
            // queued: the first request always starts one.
            let start = queue.committers < config.committers && queue.may_take(config.parallel_from());
            if start {
                queue.committers += 1;
            }
            start
        };
        if start_committer {
            tokio::spawn(commit_batches(self.inner.clone()));
        }
        answer.await.unwrap_or_else(|_| {
            Err(AppendError::Store(StoreError::Commit(
                "the group commit ended without an answer for this append".into(),
            )))
        })
    }

    async fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<u64, AppendError>> {
        self.inner.store.append_batch(requests).await
    }

    async fn llm_cost(&self, load_id: &str) -> Result<f64, StoreError> {
        self.inner.store.llm_cost(load_id).await
    }

    async fn load_ids(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        self.inner.store.load_ids(limit).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use chrono::{TimeZone, Utc};
    use load_agent_domain::{EventKind, InboundEvent};
    use load_agent_store::{SqliteStore, StoreOptions};

    use super::*;

    /// The SQLite store, counting the batches (recorded as they start) and single appends that
    /// reach it; with a gate, each batch then waits for a permit.
    struct Counting {
        store: SqliteStore,
        batches: Mutex<Vec<usize>>,
        singles: AtomicUsize,
        gate: Option<tokio::sync::Semaphore>,
        /// Batches still to fail by a panic (after the gate).
        panics: AtomicUsize,
    }

    #[async_trait]
    impl EventStore for Counting {
        async fn read(&self, load_id: &str) -> Result<(Vec<LogEntry>, u64), StoreError> {
            self.store.read(load_id).await
        }
        async fn read_since(&self, load_id: &str, v: u64) -> Result<(Vec<LogEntry>, u64), StoreError> {
            self.store.read_since(load_id, v).await
        }
        async fn append_summarized(
            &self,
            load_id: &str,
            entries: &[LogEntry],
            expected_version: u64,
            outbox: &[NewOutboxRow],
            summary: Option<&LoadSummary>,
        ) -> Result<u64, AppendError> {
            self.singles.fetch_add(1, Ordering::SeqCst);
            self.store.append_summarized(load_id, entries, expected_version, outbox, summary).await
        }
        async fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<u64, AppendError>> {
            self.batches.lock().expect("batches").push(requests.len());
            if let Some(gate) = &self.gate {
                match gate.acquire().await {
                    Ok(permit) => permit.forget(),
                    Err(_) => return Vec::new(),
                }
            }
            if self.panics.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                panic!("the store failed in the middle of a batch (a test's panic)");
            }
            self.store.append_batch(requests).await
        }
        async fn llm_cost(&self, load_id: &str) -> Result<f64, StoreError> {
            self.store.llm_cost(load_id).await
        }
        async fn load_ids(&self, limit: usize) -> Result<Vec<String>, StoreError> {
            self.store.load_ids(limit).await
        }
    }

    async fn counting() -> Arc<Counting> {
        counting_with(None).await
    }

    async fn counting_with(gate: Option<tokio::sync::Semaphore>) -> Arc<Counting> {
        let store = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite");
        Arc::new(Counting {
            store,
            batches: Mutex::new(Vec::new()),
            singles: AtomicUsize::new(0),
            gate,
            panics: AtomicUsize::new(0),
        })
    }

    fn sms(load: &str, id: &str) -> LogEntry {
        LogEntry::Event(InboundEvent {
            event_id: id.into(),
            load_id: load.into(),
            occurred_at: Utc.timestamp_opt(1_772_456_400, 0).single().unwrap_or_default(),
            kind: EventKind::Sms { from: "drv".into(), text: format!("{id}: eta 2:30") },
        })
    }

    /// Appends one entry to each load at once, at the given expected versions.
    async fn append_all(store: &GroupCommit, appends: &[(&str, &str, u64)]) -> Vec<Result<u64, AppendError>> {
        let runs = appends.iter().map(|(load, id, expected)| {
            let entries = [sms(load, id)];
            async move { store.append(load, &entries, *expected, &[]).await }
        });
        futures::future::join_all(runs).await
    }

    fn versions(results: &[Result<u64, AppendError>]) -> Vec<Option<u64>> {
        results.iter().map(|r| r.as_ref().ok().copied()).collect()
    }

    fn config(max_batch: usize) -> GroupCommitConfig {
        GroupCommitConfig { window: Duration::from_millis(20), max_batch, committers: 1 }
    }

    #[tokio::test]
    async fn appends_of_different_loads_ready_together_share_one_transaction() {
        let inner = counting().await;
        let store = GroupCommit::new(inner.clone(), config(32));
        let results = append_all(&store, &[("A", "a1", 0), ("B", "b1", 0), ("C", "c1", 0)]).await;
        assert_eq!(versions(&results), [Some(1); 3], "{results:?}");
        assert_eq!(*inner.batches.lock().expect("batches"), vec![3], "one transaction for the three");
        assert_eq!(inner.singles.load(Ordering::SeqCst), 0);
        for load in ["A", "B", "C"] {
            assert_eq!(store.read(load).await.expect("read").1, 1, "{load} is logged");
        }
    }

    #[tokio::test]
    async fn a_conflict_or_a_duplicate_fails_only_its_own_load() {
        let inner = counting().await;
        let store = GroupCommit::new(inner.clone(), config(32));
        assert_eq!(versions(&append_all(&store, &[("A", "a1", 0), ("B", "b1", 0)]).await), [Some(1); 2]);
        // A expects a stale version, B repeats a logged event id, C and D are fine.
        let results =
            append_all(&store, &[("A", "a2", 0), ("B", "b1", 1), ("C", "c1", 0), ("D", "d1", 0)]).await;
        assert!(matches!(results[0], Err(AppendError::Conflict { expected: 0, actual: 1 })), "{results:?}");
        assert!(
            matches!(&results[1], Err(AppendError::DuplicateEntry { entry_id }) if entry_id == "b1"),
            "{results:?}"
        );
        assert_eq!(versions(&results[2..]), [Some(1); 2]);
        assert_eq!(store.read("A").await.expect("read").1, 1, "A's stale append wrote nothing");
        assert_eq!(store.read("B").await.expect("read").1, 1, "B's duplicate wrote nothing");
    }

    #[tokio::test]
    async fn a_full_batch_commits_without_waiting_out_the_window_and_the_rest_follows() {
        let inner = counting().await;
        let store = GroupCommit::new(
            inner.clone(),
            GroupCommitConfig { window: Duration::from_secs(30), max_batch: 2, committers: 1 },
        );
        let results = tokio::time::timeout(
            Duration::from_secs(10),
            append_all(&store, &[("A", "a1", 0), ("B", "b1", 0), ("C", "c1", 0), ("D", "d1", 0)]),
        )
        .await
        .expect("full batches do not wait for the 30 s window");
        assert_eq!(versions(&results), [Some(1); 4], "{results:?}");
        assert_eq!(*inner.batches.lock().expect("batches"), vec![2, 2]);
    }

    #[tokio::test]
    async fn beside_a_running_batch_a_second_starts_only_once_enough_requests_wait() {
        let inner = counting_with(Some(tokio::sync::Semaphore::new(0))).await;
        let gate = inner.gate.as_ref().expect("a gate");
        let config = GroupCommitConfig { window: Duration::ZERO, max_batch: 8, committers: 4 };
        assert_eq!(config.parallel_from(), 2);
        let group = GroupCommit::new(inner.clone(), config);
        let append = |load: &'static str| {
            let group = group.clone();
            tokio::spawn(async move { group.append(load, &[sms(load, &format!("{load}1"))], 0, &[]).await })
        };
        let settle = || tokio::time::sleep(Duration::from_millis(50));
        let a = append("A");
        settle().await;
        assert_eq!(*inner.batches.lock().expect("batches"), vec![1], "A's batch runs (held at the gate)");
        let b = append("B");
        settle().await;
        assert_eq!(
            *inner.batches.lock().expect("batches"),
            vec![1],
            "one request waits for the running batch instead of a batch of its own beside it"
        );
        let c = append("C");
        settle().await;
        assert_eq!(*inner.batches.lock().expect("batches"), vec![1, 2], "two waiting: B and C go together");
        gate.add_permits(2);
        for run in [a, b, c] {
            assert_eq!(run.await.expect("run").expect("append"), 1);
        }
        // All committers have left; a later request starts one again and is answered.
        gate.add_permits(1);
        assert_eq!(append("D").await.expect("run").expect("append"), 1);
        assert_eq!(*inner.batches.lock().expect("batches"), vec![1, 2, 1]);
    }

    /// A committer that dies in the middle of a batch (a panic in the store) answers its own
    /// batch with an error, and the requests that queued behind it are still committed, without
    /// waiting for another append to start a committer.
    #[tokio::test]
    async fn requests_queued_behind_a_committer_that_died_are_still_committed() {
        let inner = counting_with(Some(tokio::sync::Semaphore::new(0))).await;
        inner.panics.store(1, Ordering::SeqCst);
        let gate = inner.gate.as_ref().expect("a gate");
        let config = GroupCommitConfig { window: Duration::ZERO, max_batch: 8, committers: 4 };
        let group = GroupCommit::new(inner.clone(), config);
        let append = |load: &'static str| {
            let group = group.clone();
            tokio::spawn(async move { group.append(load, &[sms(load, &format!("{load}1"))], 0, &[]).await })
        };
        let a = append("A");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let b = append("B");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(*inner.batches.lock().expect("batches"), vec![1], "B waits for A's batch");
        gate.add_permits(2);
        let a = tokio::time::timeout(Duration::from_secs(5), a).await.expect("A is answered").expect("run");
        assert!(matches!(a, Err(AppendError::Store(_))), "the batch that died fails: {a:?}");
        let b = tokio::time::timeout(Duration::from_secs(5), b).await.expect("B is not left waiting");
        assert_eq!(b.expect("run").expect("append"), 1);
        assert_eq!(*inner.batches.lock().expect("batches"), vec![1, 1]);
    }

    #[tokio::test]
    async fn off_sends_each_append_to_the_store_as_before() {
        let inner = counting().await;
        let store = GroupCommit::new(inner.clone(), GroupCommitConfig::OFF);
        assert_eq!(versions(&append_all(&store, &[("A", "a1", 0), ("B", "b1", 0)]).await), [Some(1); 2]);
        assert!(inner.batches.lock().expect("batches").is_empty());
        assert_eq!(inner.singles.load(Ordering::SeqCst), 2);
        // `wrap` with grouping off is the store itself.
        let plain: Arc<dyn EventStore> = inner.clone();
        assert!(Arc::ptr_eq(&GroupCommit::wrap(plain.clone(), GroupCommitConfig::OFF), &plain));
    }

    #[tokio::test]
    async fn a_store_that_groups_its_own_commits_is_not_wrapped() {
        // SQLite's one writer already commits what queued together in one transaction.
        let sqlite: Arc<dyn EventStore> =
            Arc::new(SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite"));
        assert!(sqlite.commits_grouped());
        assert!(Arc::ptr_eq(&GroupCommit::wrap(sqlite.clone(), GroupCommitConfig::default()), &sqlite));
        // A store that does not (Postgres, here a double) gets the queue, which says it groups.
        let plain: Arc<dyn EventStore> = counting().await;
        assert!(!plain.commits_grouped());
        let wrapped = GroupCommit::wrap(plain.clone(), GroupCommitConfig::default());
        assert!(!Arc::ptr_eq(&wrapped, &plain) && wrapped.commits_grouped());
        assert!(Arc::ptr_eq(&GroupCommit::wrap(wrapped.clone(), GroupCommitConfig::default()), &wrapped));
    }
}
