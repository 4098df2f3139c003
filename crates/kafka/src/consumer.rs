//! The consumer of `load-agent.events` (consumer group `load-agent`): it fetches records and
//! hands each, owned, to the unit of work ([`RecordProcessor::process`]); everything else here
//! is scheduling and offsets.
//!
//! - **Order.** Inside a partition, the records of one load (one key) run one at a time in
//!   offset order, and different loads run concurrently: per partition, a FIFO of waiting records
//!   per key and at most one running task per key ([`PartitionWork`]). At most
//!   `max_concurrent_runs` runs are in progress at once (a semaphore).
//! - **Offsets.** `enable.auto.offset.store=false`: an offset is stored only when its record's
//!   append committed, was recognized as already processed, or the record is in the DLQ, and
//!   never past an unfinished record (the stored offset is the lowest unfinished one). The
//!   auto-commit timer commits stored offsets; revocation and shutdown commit synchronously.
//! - **Retries.** A run that gives its record back (conflicts exhausted, store down) is retried
//!   in place with a capped backoff, so its load's later records wait behind it and the
//!   partition's offset does not pass it; other loads go on.
//! - **Rebalance.** On revocation, the revoked partitions' waiting records are dropped (the new
//!   owner gets them again from the committed offset), their running records are drained for at
//!   most `drain_timeout`, then their offsets are stored and committed before the partitions
//!   are released. A run still going after the timeout is abandoned: its offset is not
//!   committed, so the new owner runs it again and the event store recognizes the duplicate.
//! - **Shutdown.** Drain (bounded), commit, then leave the group while its handler is alive
//!   (unsubscribe, serve the revocation) before librdkafka's close, which runs on a thread of
//!   its own with a deadline (`leave_group`, `close`): a revocation still queued at the close
//!   could hang it forever.
//! - **Backpressure.** A partition holding `max_buffered_per_partition` records (waiting or
//!   running) is paused and resumed below half of that; the consumer keeps polling (group
//!   membership and rebalances go on), so memory stays bounded by partitions × the bound plus
//!   librdkafka's prefetch (`queued.max.messages.kbytes`).
//!
//! The rebalance callback runs inside the consumer's poll and waits for runs on other worker
//! threads, so `consume` needs a multi-threaded tokio runtime to drain; on a current-thread
//! runtime it cannot wait and relies on redelivery.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use load_agent_ingest::{InboundRecord, RecordOutcome, RecordProcessor};
use load_agent_runtime::Shutdown;
use load_agent_runtime::stages::{self, Stage};
use load_agent_store::DeadLetterStore;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{Notify, Semaphore};
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::config::KafkaConfig;
use crate::dlq::{KAFKA_DEFAULT_MAX_MESSAGE_BYTES, PRODUCER_MAX_BYTES, REDUCED_MAX_BYTES};
use crate::metric_names as names;
use crate::partition::PartitionWork;
use crate::produce::{DlqProducer, DlqWritten};

/// Bounds and timings of the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// A partition holding this many records (waiting or running) is paused.
    pub max_buffered_per_partition: usize,
    /// Runs in progress at once, over all partitions.
    pub max_concurrent_runs: usize,
    /// How long revocation and shutdown wait for running records.
    pub drain_timeout: Duration,
    /// First pause before a record is run again; doubles up to `max_retry_backoff`.
    pub retry_backoff: Duration,
    pub max_retry_backoff: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            max_buffered_per_partition: 1_000,
            max_concurrent_runs: 32,
            drain_timeout: Duration::from_secs(30),
            retry_backoff: Duration::from_millis(200),
            max_retry_backoff: Duration::from_secs(10),
        }
    }
}

impl ConsumerConfig {
    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
        self.retry_backoff.saturating_mul(factor).min(self.max_retry_backoff)
    }
}

/// Why the consumer could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error("kafka: {0}")]
    Kafka(#[from] KafkaError),
    /// A topic's settings cannot work with the service's (named in the message).
    #[error("kafka: {0}")]
    Topic(String),
}

/// What a consumer did until it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumeReport {
    pub received: u64,
    /// Records done: committed, already processed or dead-lettered.
    pub finished: u64,
    pub dead_letters: u64,
    /// Runs retried after a give-back or a failed DLQ write.
    pub retries: u64,
    /// Records dropped or abandoned at a revocation or at shutdown (redelivered later).
    pub released: u64,
    pub revocations: u64,
    /// Times a partition was paused for holding too many records.
    pub pauses: u64,
    /// The most records one partition held at once (waiting or running).
    pub max_buffered: u64,
}

#[derive(Debug, Default)]
struct Counters {
    received: AtomicU64,
    finished: AtomicU64,
    dead_letters: AtomicU64,
    retries: AtomicU64,
    released: AtomicU64,
    revocations: AtomicU64,
    pauses: AtomicU64,
    max_buffered: AtomicU64,
}

impl Counters {
    fn report(&self) -> ConsumeReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ConsumeReport {
            received: get(&self.received),
            finished: get(&self.finished),
            dead_letters: get(&self.dead_letters),
            retries: get(&self.retries),
            released: get(&self.released),
            revocations: get(&self.revocations),
            pauses: get(&self.pauses),
            max_buffered: get(&self.max_buffered),
        }
    }
}

type Tp = (String, i32);

struct Assigned {
    generation: u64,
    work: PartitionWork<Admitted>,
    paused: bool,
}

#[derive(Default)]
struct State {
    partitions: HashMap<Tp, Assigned>,
    next_generation: u64,
}

impl State {
    fn assign(&mut self, tp: Tp) -> &mut Assigned {
        self.next_generation += 1;
        let fresh = Assigned { generation: self.next_generation, work: PartitionWork::new(), paused: false };
        match self.partitions.entry(tp) {
            Entry::Occupied(mut o) => {
                o.insert(fresh);
                o.into_mut()
            }
            Entry::Vacant(v) => v.insert(fresh),
        }
    }

    fn live(&self, tp: &Tp, generation: u64) -> Option<&Assigned> {
        self.partitions.get(tp).filter(|a| a.generation == generation && !a.work.is_closing())
    }

    fn running(&self, tps: Option<&[Tp]>) -> usize {
        match tps {
            None => self.partitions.values().map(|a| a.work.running()).sum(),
            Some(tps) => tps.iter().filter_map(|tp| self.partitions.get(tp)).map(|a| a.work.running()).sum(),
        }
    }
}

type KafkaConsumer = StreamConsumer<PartitionContext>;

/// What the scheduler, the runs and the rebalance callback share.
struct Shared {
    state: Mutex<State>,
    /// Signalled whenever a run ends (the rebalance callback waits on it).
    run_ended: Condvar,
    /// Wakes runs sleeping before a retry when their partition closes.
    closed: Notify,
    config: ConsumerConfig,
    consumer: OnceLock<Weak<KafkaConsumer>>,
    counters: Counters,
    /// Set when shutdown starts: its drain has had `drain_timeout`, so the revocations of
    /// leaving the group do not wait for the same runs again.
    stopping: AtomicBool,
    /// The unit of work: runs each record, and is told of every assignment (the worker then
    /// verifies its cached snapshots again).
    processor: RecordProcessor,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn consumer(&self) -> Option<Arc<KafkaConsumer>> {
        self.consumer.get().and_then(Weak::upgrade)
    }

    fn is_live(&self, tp: &Tp, generation: u64) -> bool {
        self.lock().live(tp, generation).is_some()
    }

    /// Sleeps before a retry; false when the partition was closed meanwhile (give up).
    async fn pause_before_retry(&self, tp: &Tp, generation: u64, attempt: u32) -> bool {
        self.counters.retries.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(names::CONSUMER_RETRIES_TOTAL).increment(1);
        let closed = self.closed.notified();
        tokio::select! {
            _ = tokio::time::sleep(self.config.backoff(attempt)) => {}
            _ = closed => {}
        }
        self.is_live(tp, generation)
    }

    /// A run of `key` ended: `done` when its record is finished, false when it was given up.
    /// Stores the offset if it moved and returns the load's next record to run.
    fn end_run(&self, tp: &Tp, generation: u64, key: &str, offset: i64, done: bool) -> Option<Admitted> {
        let mut resume = false;
        let next = {
            let mut st = self.lock();
            let next = match st.partitions.get_mut(tp).filter(|a| a.generation == generation) {
                None => None,
                Some(a) if !done => {
                    a.work.abandon(key);
                    None
                }
                Some(a) => {
                    let finished = a.work.finish(key, offset);
                    if let Some(store) = finished.store {
                        // Under the lock, so that stores of one partition never go backwards.
                        self.store_offset(tp, store);
                    }
                    if a.paused && a.work.buffered() <= self.config.max_buffered_per_partition / 2 {
                        a.paused = false;
                        resume = true;
                    }
                    finished.next
                }
            };
            if done {
                self.counters.finished.fetch_add(1, Ordering::Relaxed);
            } else {
                self.counters.released.fetch_add(1, Ordering::Relaxed);
            }
            next
        };
        self.run_ended.notify_all();
        if resume {
            self.pause_or_resume(tp, false);
        }
        next
    }

    fn store_offset(&self, tp: &Tp, offset: i64) {
        let Some(consumer) = self.consumer() else { return };
        let mut tpl = TopicPartitionList::new();
        if tpl.add_partition_offset(&tp.0, tp.1, Offset::Offset(offset)).is_err() {
            return;
        }
        if let Err(e) = consumer.store_offsets(&tpl) {
            // The partition was released meanwhile: its new owner runs from the committed offset.
            debug!(topic = %tp.0, partition = tp.1, offset, error = %e, "offset not stored");
        }
    }

    fn pause_or_resume(&self, tp: &Tp, pause: bool) {
        let Some(consumer) = self.consumer() else { return };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&tp.0, tp.1);
        let result = if pause { consumer.pause(&tpl) } else { consumer.resume(&tpl) };
        match result {
            Ok(()) => {
                metrics::counter!(names::CONSUMER_PAUSES_TOTAL, "action" => if pause { "pause" } else { "resume" })
                    .increment(1);
                debug!(topic = %tp.0, partition = tp.1, pause, "backpressure");
            }
            Err(e) => warn!(topic = %tp.0, partition = tp.1, pause, error = %e, "pause/resume failed"),
        }
    }

    /// Revocation (and close): drop waiting records, drain running ones (bounded), store and
    /// commit the partitions' offsets, forget the partitions.
    fn revoke(&self, consumer: &BaseConsumer<PartitionContext>, tpl: &TopicPartitionList) {
        let tps: Vec<Tp> = tpl.elements().iter().map(|e| (e.topic().to_owned(), e.partition())).collect();
        self.counters.revocations.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(names::CONSUMER_REBALANCES_TOTAL, "kind" => "revoke").increment(1);
        let mut st = self.lock();
        let mut dropped = 0;
        for tp in &tps {
            if let Some(a) = st.partitions.get_mut(tp) {
                dropped += a.work.close();
            }
        }
        self.counters.released.fetch_add(dropped as u64, Ordering::Relaxed);
        self.closed.notify_waiters();
        let started = Instant::now();
        // Waiting blocks this thread (the callback runs inside the poll); the runs are on other
        // worker threads. A current-thread runtime cannot run them meanwhile: do not wait there.
        // At shutdown the drain already had its time (`stop`): do not wait for the same runs again.
        let (timeout, can_block) = match tokio::runtime::Handle::try_current() {
            _ if self.stopping.load(Ordering::Relaxed) => (Duration::ZERO, false),
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread => {
                (Duration::ZERO, false)
            }
            Ok(_) => (self.config.drain_timeout, true),
            Err(_) => (self.config.drain_timeout, false),
        };
        let (mut st, still_running) = if can_block {
            tokio::task::block_in_place(|| self.wait_for_runs(st, &tps, started, timeout))
        } else {
            self.wait_for_runs(st, &tps, started, timeout)
        };
        let mut offsets = TopicPartitionList::new();
        for tp in &tps {
            if let Some(a) = st.partitions.remove(tp)
                && let Some(next) = a.work.committable()
            {
                let _ = offsets.add_partition_offset(&tp.0, tp.1, Offset::Offset(next));
            }
        }
        drop(st);
        if still_running > 0 {
            metrics::counter!(names::CONSUMER_ABANDONED_TOTAL).increment(still_running as u64);
            warn!(
                still_running,
                waited_ms = started.elapsed().as_millis() as u64,
                "revocation: runs still going after the drain timeout are abandoned (their records are redelivered)"
            );
        }
        info!(
            partitions = tps.len(),
            dropped,
            waited_ms = started.elapsed().as_millis() as u64,
            "partitions revoked"
        );
        if offsets.count() > 0 {
            if let Err(e) = consumer.store_offsets(&offsets) {
                debug!(error = %e, "storing offsets at revocation");
            }
            if let Err(e) = consumer.commit(&offsets, CommitMode::Sync) {
                warn!(error = %e, "committing offsets at revocation failed; the next owner may run some records again");
            }
        }
    }

    /// Waits until the partitions have no running record, at most `timeout` after `started`;
    /// returns how many still run.
    fn wait_for_runs<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        tps: &[Tp],
        started: Instant,
        timeout: Duration,
    ) -> (MutexGuard<'a, State>, usize) {
        loop {
            let running = st.running(Some(tps));
            let elapsed = started.elapsed();
            if running == 0 || elapsed >= timeout {
                return (st, running);
            }
            let step = (timeout - elapsed).min(Duration::from_millis(100));
            st = match self.run_ended.wait_timeout(st, step) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    fn assign(&self, tpl: &TopicPartitionList) {
        metrics::counter!(names::CONSUMER_REBALANCES_TOTAL, "kind" => "assign").increment(1);
        if tpl.count() > 0 {
            // Before any record of the new partitions runs: their loads may have been written
            // by the member that held them.
            self.processor.partitions_assigned();
        }
        let mut st = self.lock();
        for e in tpl.elements() {
            st.assign((e.topic().to_owned(), e.partition()));
        }
        info!(partitions = tpl.count(), "partitions assigned");
    }
}

/// The consumer's context: the rebalance callbacks.
pub struct PartitionContext {
    shared: Arc<Shared>,
}

impl ClientContext for PartitionContext {
    /// librdkafka's statistics (every `statistics.interval.ms`): the consumer lag per partition,
    /// and the round trip of the requests (nearly all fetches) to each broker the consumer
    /// fetches from, for the metric and the load test's probe.
    fn stats(&self, statistics: rdkafka::Statistics) {
        crate::stats::publish(&statistics, Some(names::BROKER_ROUND_TRIP_SECONDS), &[], "consumer");
        for (topic, t) in &statistics.topics {
            for (partition, p) in &t.partitions {
                // -1 marks an internal partition or one with no committed position yet.
                if *partition >= 0 && p.consumer_lag >= 0 {
                    metrics::gauge!(
                        names::CONSUMER_LAG,
                        "topic" => topic.clone(),
                        "partition" => partition.to_string()
                    )
                    .set(p.consumer_lag as f64);
                }
            }
        }
    }
}

impl ConsumerContext for PartitionContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => self.shared.revoke(consumer, tpl),
            Rebalance::Assign(tpl) => self.shared.assign(tpl),
            Rebalance::Error(e) => error!(error = %e, "rebalance error"),
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // A partition paused before an earlier revocation must not stay paused.
        if let Rebalance::Assign(tpl) = rebalance
            && tpl.count() > 0
            && let Err(e) = consumer.resume(tpl)
        {
            debug!(error = %e, "resuming newly assigned partitions");
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, _offsets: &TopicPartitionList) {
        match result {
            Ok(()) => metrics::counter!(names::CONSUMER_COMMITS_TOTAL, "result" => "ok").increment(1),
            Err(KafkaError::ConsumerCommit(rdkafka::types::RDKafkaErrorCode::NoOffset)) => {}
            Err(e) => {
                metrics::counter!(names::CONSUMER_COMMITS_TOTAL, "result" => "error").increment(1);
                warn!(error = %e, "offset commit failed");
            }
        }
    }
}

/// The DLQ topic's `max.message.bytes`, checked against what the service writes there.
async fn dlq_topic_limit(kafka: &KafkaConfig) -> Result<usize, ConsumerError> {
    let topic = &kafka.dlq_topic;
    let limit = match crate::admin::topic_max_message_bytes(kafka, topic).await {
        Ok(Some(limit)) => limit,
        Ok(None) => KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
        Err(e) => {
            warn!(%topic, error = %e, default = KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
                "cannot read the DLQ topic's max.message.bytes; assuming Kafka's default");
            KAFKA_DEFAULT_MAX_MESSAGE_BYTES
        }
    };
    if limit < REDUCED_MAX_BYTES {
        return Err(ConsumerError::Topic(format!(
            "the DLQ topic {topic} takes records of at most {limit} bytes (its max.message.bytes), \
             less than the {REDUCED_MAX_BYTES} bytes a reduced dead letter may take; set its \
             max.message.bytes to {PRODUCER_MAX_BYTES} (the service's record limit plus headers)"
        )));
    }
    if limit < PRODUCER_MAX_BYTES {
        info!(%topic, max_message_bytes = limit, service_limit = PRODUCER_MAX_BYTES,
            "dead letters larger than the DLQ topic's max.message.bytes are kept in dead_letters and written reduced; \
             set the topic's max.message.bytes to the service limit to keep them whole in the DLQ");
    }
    Ok(limit)
}

/// Consumes `kafka.events_topic` in group `kafka.group_id` until `shutdown`, running each record
/// through `processor` and dead letters to `kafka.dlq_topic` (records the DLQ topic cannot hold
/// whole are kept in `dead_letters` and written reduced). Then drains the running records
/// (bounded), commits, and leaves the group. Needs a multi-threaded tokio runtime.
///
/// At start it reads the DLQ topic's `max.message.bytes` and fails if the topic cannot hold even
/// a reduced dead letter.
pub async fn consume(
    kafka: &KafkaConfig,
    config: ConsumerConfig,
    processor: RecordProcessor,
    dead_letters: Arc<dyn DeadLetterStore>,
    mut shutdown: Shutdown,
) -> Result<ConsumeReport, ConsumerError> {
    let dlq = DlqProducer::new(kafka, dead_letters)?.with_topic_limit(dlq_topic_limit(kafka).await?);
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        run_ended: Condvar::new(),
        closed: Notify::new(),
        config,
        consumer: OnceLock::new(),
        counters: Counters::default(),
        stopping: AtomicBool::new(false),
        processor,
    });
    let consumer: Arc<KafkaConsumer> =
        Arc::new(kafka.consumer_config().create_with_context(PartitionContext { shared: shared.clone() })?);
    let _ = shared.consumer.set(Arc::downgrade(&consumer));
    consumer.subscribe(&[kafka.events_topic.as_str()])?;
    info!(topic = %kafka.events_topic, group = %kafka.group_id, "consuming");
    let runner = Arc::new(Runner {
        shared: shared.clone(),
        dlq,
        permits: Semaphore::new(config.max_concurrent_runs.max(1)),
    });
    let mut errors_in_a_row = 0u32;
    loop {
        tokio::select! {
            biased;
            _ = shutdown.recv() => break,
            received = consumer.recv() => match received {
                Ok(message) => {
                    errors_in_a_row = 0;
                    let record = crate::record::from_message(&message);
                    drop(message);
                    runner.admit(record);
                }
                Err(e) => {
                    errors_in_a_row += 1;
                    metrics::counter!(names::CONSUMER_ERRORS_TOTAL).increment(1);
                    warn!(error = %e, "consumer error");
                    let pause = Duration::from_millis(100).saturating_mul(errors_in_a_row.min(50));
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
    stop(&shared, &consumer).await;
    let report = shared.counters.report();
    leave_group(&consumer).await;
    close(consumer).await;
    info!(?report, "consumer stopped");
    Ok(report)
}

/// How long leaving the group may take (unsubscribing and serving the revocation that follows).
const LEAVE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long librdkafka's close may take before the consumer is left behind.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Leaves the group while the group handler is alive: unsubscribes, then serves what the
/// consumer queue holds (records are dropped: their partitions are closing) until the
/// assignment is empty and the queue is quiet, for at most [`LEAVE_TIMEOUT`].
///
/// The loop stops polling when shutdown starts, so a revocation that a rebalance delivered
/// meanwhile (another member left or joined while this one drained) is still queued. Closing
/// the consumer with it queued is what hung: librdkafka's close clears that assignment itself
/// and may finish terminating the group before the close loop hands the stale revocation to
/// the rebalance callback, whose `rd_kafka_rebalance_protocol()` / `rd_kafka_assign()` then
/// wait forever for a group handler that no longer answers (librdkafka issue 4041). After an
/// unsubscribe the group handler stays alive, so every such call is answered, and the close
/// that follows finds nothing assigned and nothing to revoke.
async fn leave_group(consumer: &Arc<KafkaConsumer>) {
    // A synchronous request to the group handler, which is alive until the close.
    consumer.unsubscribe();
    let deadline = tokio::time::Instant::now() + LEAVE_TIMEOUT;
    let mut dropped = 0u64;
    loop {
        if tokio::time::Instant::now() >= deadline {
            warn!(
                timeout_s = LEAVE_TIMEOUT.as_secs(),
                "leaving the group: partitions still assigned at the deadline; closing anyway"
            );
            break;
        }
        match tokio::time::timeout(Duration::from_millis(100), consumer.recv()).await {
            // A record of a partition being given up: its next owner reads it again.
            Ok(Ok(_)) => dropped += 1,
            Ok(Err(e)) => debug!(error = %e, "consumer error while leaving the group"),
            // Quiet: done once nothing is assigned any more.
            Err(_) => match consumer.assignment() {
                Ok(assigned) if assigned.count() == 0 => break,
                Ok(_) => {}
                Err(e) => {
                    debug!(error = %e, "reading the assignment while leaving the group");
                    break;
                }
            },
        }
    }
    debug!(dropped, "left the group");
}

/// Closes the consumer (librdkafka's close: leave the group, stop the fetchers) on a thread of
/// its own, waiting for it at most [`CLOSE_TIMEOUT`]: a close that librdkafka never completes
/// leaves that thread behind with an error, rather than a consumer that never returns. The
/// thread takes the last reference first, so the close never runs inside a run that was
/// storing an offset under the state lock (the close's revocation takes that lock).
async fn close(consumer: Arc<KafkaConsumer>) {
    let (done, closed) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("kafka-consumer-close".into()).spawn(move || {
        let mut consumer = consumer;
        // Runs upgrade their weak reference only for a moment (storing an offset, pausing).
        let consumer = loop {
            match Arc::try_unwrap(consumer) {
                Ok(last) => break last,
                Err(shared) => {
                    consumer = shared;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        };
        drop(consumer);
        let _ = done.send(());
    });
    if let Err(e) = spawned {
        // The closure, and with it the consumer, was dropped here.
        warn!(error = %e, "no thread for closing the consumer: closed on this one");
        return;
    }
    if tokio::time::timeout(CLOSE_TIMEOUT, closed).await.is_err() {
        metrics::counter!(names::CONSUMER_CLOSE_TIMEOUTS_TOTAL).increment(1);
        error!(
            timeout_s = CLOSE_TIMEOUT.as_secs(),
            "the Kafka consumer did not close in time; left behind (the group drops it after session.timeout.ms)"
        );
    }
}

/// Shutdown: start nothing new, drain the running records (bounded), store and commit.
async fn stop(shared: &Arc<Shared>, consumer: &Arc<KafkaConsumer>) {
    shared.stopping.store(true, Ordering::Relaxed);
    let dropped: usize = shared.lock().partitions.values_mut().map(|a| a.work.close()).sum();
    shared.counters.released.fetch_add(dropped as u64, Ordering::Relaxed);
    shared.closed.notify_waiters();
    let deadline = tokio::time::Instant::now() + shared.config.drain_timeout;
    while shared.lock().running(None) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut offsets = TopicPartitionList::new();
    {
        let st = shared.lock();
        for (tp, a) in &st.partitions {
            if let Some(next) = a.work.committable() {
                let _ = offsets.add_partition_offset(&tp.0, tp.1, Offset::Offset(next));
            }
        }
        let running = st.running(None);
        if running > 0 {
            warn!(running, "shutdown: runs still going after the drain timeout are abandoned");
        }
    }
    if offsets.count() > 0 {
        if let Err(e) = consumer.store_offsets(&offsets) {
            debug!(error = %e, "storing offsets at shutdown");
        }
        if let Err(e) = consumer.commit(&offsets, CommitMode::Sync) {
            warn!(error = %e, "committing offsets at shutdown failed");
        }
    }
}

/// Starts and runs records.
/// A record received, with when: the `queue` stage runs from then to its run's start.
struct Admitted {
    record: InboundRecord,
    at: Instant,
}

impl crate::partition::Offsetted for Admitted {
    fn offset(&self) -> i64 {
        self.record.offset
    }
}

struct Runner {
    shared: Arc<Shared>,
    dlq: DlqProducer,
    permits: Semaphore,
}

impl Runner {
    /// A record arrived: queue it behind its load, start it if its load is idle, pause its
    /// partition when full.
    fn admit(self: &Arc<Self>, record: InboundRecord) {
        self.shared.counters.received.fetch_add(1, Ordering::Relaxed);
        // `fetch`: from the producer's send (the record's create time) to here.
        if let Some(sent_ms) = record.timestamp_ms {
            let now_ms = chrono::Utc::now().timestamp_millis();
            if let Ok(ms) = u64::try_from(now_ms - sent_ms) {
                stages::observe(Stage::Fetch, Duration::from_millis(ms));
            }
        }
        let tp: Tp = (record.topic.clone(), record.partition);
        let key = record.ordering_key();
        let (start, generation, pause) = {
            let mut st = self.shared.lock();
            if !st.partitions.contains_key(&tp) {
                st.assign(tp.clone());
            }
            let Some(a) = st.partitions.get_mut(&tp) else { return };
            let start = a.work.push(&key, Admitted { record, at: Instant::now() });
            let buffered = a.work.buffered();
            self.shared.counters.max_buffered.fetch_max(buffered as u64, Ordering::Relaxed);
            let pause = !a.paused && buffered >= self.shared.config.max_buffered_per_partition;
            if pause {
                a.paused = true;
                self.shared.counters.pauses.fetch_add(1, Ordering::Relaxed);
            }
            (start, a.generation, pause)
        };
        if pause {
            self.shared.pause_or_resume(&tp, true);
        }
        if let Some(record) = start {
            let runner = self.clone();
            tokio::spawn(async move { runner.run_load(tp, generation, key, record).await });
        }
    }

    /// Runs the records of one load of one partition, one after the other, until none waits.
    async fn run_load(self: Arc<Self>, tp: Tp, generation: u64, key: String, first: Admitted) {
        let mut next = first;
        loop {
            let Admitted { record, at } = next;
            let span =
                info_span!("record", topic = %tp.0, partition = tp.1, offset = record.offset, key = %key);
            let done = self.run_record(&tp, generation, &record, at).instrument(span).await;
            match self.shared.end_run(&tp, generation, &key, record.offset, done) {
                Some(n) => next = n,
                None => return,
            }
        }
    }

    /// Runs one record until it is finished (true) or its partition is closed (false).
    async fn run_record(&self, tp: &Tp, generation: u64, record: &InboundRecord, admitted: Instant) -> bool {
        let mut attempt = 0u32;
        loop {
            if !self.shared.is_live(tp, generation) {
                return false;
            }
            let outcome = {
                let Ok(_permit) = self.permits.acquire().await else { return false };
                if attempt == 0 {
                    stages::observe(Stage::Queue, admitted.elapsed());
                }
                self.shared.processor.process(record).await
            };
            match outcome {
                RecordOutcome::Committed { .. } => {
                    load_agent_runtime::crash_point("worker.after_append");
                    return true;
                }
                RecordOutcome::AlreadyProcessed => return true,
                RecordOutcome::DeadLetter(dead) => loop {
                    match self.dlq.write(record, &dead).await {
                        Ok(written) => {
                            self.shared.counters.dead_letters.fetch_add(1, Ordering::Relaxed);
                            metrics::counter!(names::DEAD_LETTERS_TOTAL,
                                "kind" => dead.kind.as_str(), "code" => dead.code, "form" => written.form())
                            .increment(1);
                            match &written {
                                DlqWritten::Whole(w) => {
                                    info!(
                                        dlq_partition = w.partition,
                                        dlq_offset = w.offset,
                                        code = dead.code,
                                        "record in the DLQ"
                                    );
                                }
                                DlqWritten::Reduced { written: w, why } => {
                                    warn!(dlq_partition = w.partition, dlq_offset = w.offset, code = dead.code, %why,
                                        "record kept in dead_letters, a reduced dead letter in the DLQ");
                                }
                                DlqWritten::KeptOnly { error } => {
                                    error!(code = dead.code, %error,
                                        "the DLQ topic refused even a reduced dead letter: the record is kept in dead_letters only");
                                }
                            }
                            return true;
                        }
                        Err(e) => {
                            attempt += 1;
                            warn!(error = %e, attempt, "writing the dead letter failed; retrying");
                            if !self.shared.pause_before_retry(tp, generation, attempt).await {
                                return false;
                            }
                        }
                    }
                },
                RecordOutcome::Retry { reason } => {
                    attempt += 1;
                    warn!(%reason, attempt, "run gave the record back; retrying");
                    if !self.shared.pause_before_retry(tp, generation, attempt).await {
                        return false;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_backoff_doubles_up_to_its_cap() {
        let c = ConsumerConfig::default();
        assert_eq!(c.backoff(1), Duration::from_millis(200));
        assert_eq!(c.backoff(2), Duration::from_millis(400));
        assert_eq!(c.backoff(10), Duration::from_secs(10));
        assert_eq!(c.backoff(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn a_partition_assigned_again_gets_a_new_generation() {
        let mut st = State::default();
        let tp: Tp = ("t".into(), 0);
        let first = st.assign(tp.clone()).generation;
        assert!(st.live(&tp, first).is_some());
        let second = st.assign(tp.clone()).generation;
        assert_ne!(first, second);
        assert!(st.live(&tp, first).is_none(), "runs of the old assignment are stale");
    }
}
