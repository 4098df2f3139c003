//! `load-agent replay DUMP [--record GOLDEN | --golden GOLDEN] [--database-url URL]`
//! (topics.md): a dump replayed through the consumer's code against a fresh store, with no
//! broker.
//!
//! Every record goes through [`RecordProcessor::process`], the consumer's unit of work (decode,
//! key check, worker with `prepare_event`, append), with the [`SnapshotCache`] as the worker's
//! snapshot source; dead letters are listed instead of written to a DLQ topic. The relay sends
//! to the in-process fake services (through the send limit), the timer pump fires due timers,
//! and the events they publish (`action_outcome`, `timer_fired`) are framed as Avro records and
//! run through the same unit of work, as they would come back from the inbound topic.
//!
//! Time: a [`FakeClock`] follows the record timestamps. Records are taken in timestamp order
//! across partitions and in offset order within each; before a record, every timer due by its
//! time fires at its own `fire_at` (the clock stops there), and after the last record the
//! remaining timers fire in turn until none is scheduled.
//!
//! The decisions are read back from each load's log, loads in the order of their first
//! commit: one JSON line per decision (`load_id`, `trigger_event_id`, `path`, `actions` with
//! `kind` and `key`), then one line per dead letter (`{"dead_letter": {...}}`).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, TimeDelta, Utc};
use load_agent_agent::Agent;
use load_agent_avro::encode_inbound;
use load_agent_domain::{DecisionRecord, InboundEvent, LogEntry};
use load_agent_llm::{FakeLlm, LlmClient};
use load_agent_runtime::{
    CacheConfig, Clock, FakeClock, FakeServices, InProcessQueue, LoadQueue, Relay, SnapshotCache,
    SnapshotSource, TimerPump, Worker,
};
use load_agent_store::{EventStore, Outbox, PgStore, SqliteStore, StoreOptions, Stores, TimerStore};
use serde::{Deserialize, Serialize};

use crate::dump::{DumpFileError, read_dump};
use crate::process::{RecordOutcome, RecordProcessor};
use crate::record::{HEADER_SOURCE, InboundRecord};
use crate::topics::EVENTS_TOPIC;
use load_agent_runtime::{ContactLimitedOutbox, SendLimits};

/// Rounds of queue, relay and pump before a settle is declared stuck.
const MAX_SETTLE_ROUNDS: usize = 1_000;
/// Timer firings after the last record before the replay is declared stuck.
const MAX_TAIL_TIMERS: usize = 100_000;
/// Runs given back in a row before a record is reported and skipped.
const MAX_RETRIES: u32 = 3;
/// Differences printed at most.
const SHOWN_DIFFERENCES: usize = 10;

/// One decision of a replay (a line of `--record`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionLine {
    pub load_id: String,
    pub trigger_event_id: String,
    pub path: String,
    pub actions: Vec<ActionLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionLine {
    pub kind: String,
    pub key: String,
}

impl DecisionLine {
    pub fn of(d: &DecisionRecord) -> Self {
        DecisionLine {
            load_id: d.load_id.clone(),
            trigger_event_id: d.trigger_event_id.clone(),
            path: d.path.as_str().to_owned(),
            actions: d
                .actions
                .iter()
                .map(|a| ActionLine { kind: a.kind().as_str().to_owned(), key: a.key.clone() })
                .collect(),
        }
    }
}

/// A record of the dump that went to the DLQ (a line `{"dead_letter": {...}}` of `--record`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterLine {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    pub kind: String,
    pub code: String,
}

#[derive(Debug, Serialize)]
struct DeadLetterWrapper<'a> {
    dead_letter: &'a DeadLetterLine,
}

/// What a replay did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplaySummary {
    /// Records of the dump.
    pub records: usize,
    /// Events the relay and the pump published and the replay ran.
    pub internal_events: usize,
    pub timers_fired: usize,
    pub decisions: Vec<DecisionLine>,
    pub dead_letters: Vec<DeadLetterLine>,
    /// Records whose runs kept giving up (reported, then skipped).
    pub gave_up: Vec<String>,
    /// Differences from the golden file (empty when none or when not compared).
    pub differences: Vec<String>,
}

impl ReplaySummary {
    /// 0 when the replay matched its golden (or recorded) and every record was run; 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.differences.is_empty() && self.gave_up.is_empty() { 0 } else { 1 }
    }

    /// The `--record` lines: the decisions, then the dead letters.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> =
            self.decisions.iter().map(|d| serde_json::to_string(d).unwrap_or_default()).collect();
        lines.extend(
            self.dead_letters
                .iter()
                .map(|d| serde_json::to_string(&DeadLetterWrapper { dead_letter: d }).unwrap_or_default()),
        );
        lines
    }
}

/// Why a replay could not run (the binary's exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{0}")]
    Dump(#[from] DumpFileError),
    #[error("cannot read the golden file {path}: {message}")]
    Golden { path: PathBuf, message: String },
    #[error("cannot write the record file {path}: {message}")]
    Record { path: PathBuf, message: String },
    #[error("store: {0}")]
    Store(String),
    #[error("cannot set up the agent: {0}")]
    Agent(String),
    #[error("the replay did not settle: {0}")]
    Stuck(String),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Replays `dump_path`; writes the decisions to `record` and compares them with `golden` when
/// given; prints a summary (and the first differences) to `out`. `database_url`: a fresh
/// schema on that Postgres database (dropped afterwards), else a temporary SQLite store.
pub async fn replay(
    dump_path: &Path,
    record: Option<&Path>,
    golden: Option<&Path>,
    database_url: Option<&str>,
    out: &mut dyn Write,
) -> Result<ReplaySummary, ReplayError> {
    let records = read_dump(dump_path)?;
    let golden_lines = match golden {
        Some(path) => Some(read_golden(path)?),
        None => None,
    };
    let store = FreshStore::open(database_url).await?;
    let result = replay_records(records, store.stores()).await;
    store.close().await;
    let mut summary = result?;
    let lines = summary.lines();
    if let Some(path) = record {
        let mut text = lines.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        std::fs::write(path, text)
            .map_err(|e| ReplayError::Record { path: path.to_path_buf(), message: e.to_string() })?;
    }
    if let Some(expected) = &golden_lines {
        summary.differences = compare_lines(expected, &lines);
    }
    writeln!(
        out,
        "replayed {} records ({} internal events, {} timers fired): {} decisions, {} dead letters",
        summary.records,
        summary.internal_events,
        summary.timers_fired,
        summary.decisions.len(),
        summary.dead_letters.len()
    )?;
    for g in &summary.gave_up {
        writeln!(out, "gave up: {g}")?;
    }
    if let Some(path) = record {
        writeln!(out, "recorded {} lines to {}", lines.len(), path.display())?;
    }
    if let Some(path) = golden {
        if summary.differences.is_empty() {
            writeln!(out, "golden {}: no difference", path.display())?;
        } else {
            writeln!(out, "golden {}: {} difference(s)", path.display(), summary.differences.len())?;
            for d in summary.differences.iter().take(SHOWN_DIFFERENCES) {
                writeln!(out, "  {d}")?;
            }
        }
    }
    out.flush()?;
    Ok(summary)
}

/// Replays records on `stores` (fresh ones) and returns what happened.
pub async fn replay_records(
    records: Vec<InboundRecord>,
    stores: Stores,
) -> Result<ReplaySummary, ReplayError> {
    let ordered = in_time_order(records);
    let start = ordered
        .first()
        .and_then(|r| r.timestamp_ms)
        .and_then(DateTime::from_timestamp_millis)
        .unwrap_or_default();
    let agent = Arc::new(Agent::embedded().map_err(ReplayError::Agent)?);
    let replayer = Replayer::new(stores, agent, FakeClock::new(start));
    let mut summary = ReplaySummary { records: ordered.len(), ..ReplaySummary::default() };
    for record in ordered {
        let at = record
            .timestamp_ms
            .and_then(DateTime::from_timestamp_millis)
            .unwrap_or_else(|| replayer.clock.now());
        replayer.fire_timers_until(at, &mut summary, usize::MAX).await?;
        replayer.move_clock(at);
        replayer.run(record, true, &mut summary).await;
        replayer.settle(&mut summary).await?;
    }
    let horizon = replayer.clock.now() + TimeDelta::days(3650);
    replayer.fire_timers_until(horizon, &mut summary, MAX_TAIL_TIMERS).await?;
    summary.decisions = replayer.decisions().await?;
    Ok(summary)
}

struct Replayer {
    processor: RecordProcessor,
    relay: Relay,
    pump: TimerPump,
    queue: Arc<InProcessQueue>,
    timers: Arc<dyn TimerStore>,
    events: Arc<dyn EventStore>,
    clock: FakeClock,
    internal_offset: AtomicU64,
    loads: std::sync::Mutex<(Vec<String>, HashSet<String>)>,
}

impl Replayer {
    fn new(stores: Stores, agent: Arc<Agent>, clock: FakeClock) -> Self {
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let llm: Arc<dyn LlmClient> = Arc::new(FakeLlm::new());
        let snapshots: Arc<dyn SnapshotSource> =
            Arc::new(SnapshotCache::new(stores.events.clone(), CacheConfig::default()));
        let worker = Worker::new(stores.events.clone(), snapshots, agent, llm, shared_clock.clone());
        let queue = Arc::new(InProcessQueue::default());
        let publish: Arc<dyn LoadQueue> = queue.clone();
        let outbox: Arc<dyn Outbox> = Arc::new(ContactLimitedOutbox::new(
            stores.outbox.clone(),
            &SendLimits::default(),
            shared_clock.clone(),
        ));
        let relay = Relay::new(
            outbox,
            stores.timers.clone(),
            Arc::new(FakeServices::new()),
            publish.clone(),
            shared_clock.clone(),
        );
        let pump = TimerPump::new(stores.timers.clone(), publish, shared_clock);
        Replayer {
            processor: RecordProcessor::new(Arc::new(worker)),
            relay,
            pump,
            queue,
            timers: stores.timers,
            events: stores.events,
            clock,
            internal_offset: AtomicU64::new(0),
            loads: std::sync::Mutex::new((Vec::new(), HashSet::new())),
        }
    }

    /// The clock never goes back (a record stamped earlier than the clock runs at the clock).
    fn move_clock(&self, to: DateTime<Utc>) {
        if to > self.clock.now() {
            self.clock.set(to);
        }
    }

    /// Fires, one fire time after the other, every timer due by `until`, settling after each.
    async fn fire_timers_until(
        &self,
        until: DateTime<Utc>,
        summary: &mut ReplaySummary,
        max: usize,
    ) -> Result<(), ReplayError> {
        for _ in 0..max {
            let due = self.timers.due(until, 1).await.map_err(|e| ReplayError::Store(e.to_string()))?;
            let Some(first) = due.first() else { return Ok(()) };
            self.move_clock(first.fire_at);
            self.settle(summary).await?;
        }
        Err(ReplayError::Stuck(format!("timers kept firing ({max} fire times) after the last record")))
    }

    /// Until nothing is left at the current time: run published events, relay, pump.
    async fn settle(&self, summary: &mut ReplaySummary) -> Result<(), ReplayError> {
        for _ in 0..MAX_SETTLE_ROUNDS {
            let now = self.clock.now();
            let mut busy = false;
            while let Some(delivery) = self.queue.try_receive().await {
                busy = true;
                summary.internal_events += 1;
                let record = self.internal_record(&delivery.event, now);
                self.run(record, false, summary).await;
                self.queue.ack(&delivery).await;
            }
            let relayed = self.relay.relay_once(now).await.map_err(|e| ReplayError::Store(e.to_string()))?;
            let pumped = self.pump.pump_once(now).await.map_err(|e| ReplayError::Store(e.to_string()))?;
            summary.timers_fired += pumped.fired;
            if !busy && !relayed.did_work() && pumped.fired == 0 && self.queue.is_empty() {
                return Ok(());
            }
        }
        Err(ReplayError::Stuck(format!(
            "the queue, relay and pump did not settle after {MAX_SETTLE_ROUNDS} rounds"
        )))
    }

    /// An event the relay or the pump published, as the record it becomes on the inbound topic.
    fn internal_record(&self, event: &InboundEvent, now: DateTime<Utc>) -> InboundRecord {
        InboundRecord {
            topic: EVENTS_TOPIC.into(),
            partition: -1,
            offset: self.internal_offset.fetch_add(1, Ordering::Relaxed) as i64,
            timestamp_ms: Some(now.timestamp_millis()),
            key: Some(event.load_id.as_bytes().to_vec()),
            headers: vec![(HEADER_SOURCE.into(), event.kind_str().as_bytes().to_vec())],
            value: Some(encode_inbound(event)),
        }
    }

    /// The unit of work, as the consumer runs it (a give-back is retried a few times).
    async fn run(&self, record: InboundRecord, from_dump: bool, summary: &mut ReplaySummary) {
        for _ in 0..MAX_RETRIES {
            match self.processor.process(&record).await {
                RecordOutcome::Committed { decision, .. } => {
                    let mut loads = self.loads.lock().unwrap_or_else(|p| p.into_inner());
                    if loads.1.insert(decision.load_id.clone()) {
                        loads.0.push(decision.load_id);
                    }
                    return;
                }
                RecordOutcome::AlreadyProcessed => return,
                RecordOutcome::DeadLetter(dead) => {
                    if from_dump {
                        summary.dead_letters.push(DeadLetterLine {
                            partition: record.partition,
                            offset: record.offset,
                            key: record.key_str().map(str::to_owned),
                            kind: dead.kind.as_str().to_owned(),
                            code: dead.code.to_owned(),
                        });
                    } else {
                        summary
                            .gave_up
                            .push(format!("an event the agent published was dead-lettered: {}", dead.error));
                    }
                    return;
                }
                RecordOutcome::Retry { .. } => {}
            }
        }
        summary.gave_up.push(format!(
            "record {}/{}/{} (key {:?}): the run gave up {MAX_RETRIES} times",
            record.topic,
            record.partition,
            record.offset,
            record.key_str().unwrap_or("")
        ));
    }

    async fn decisions(&self) -> Result<Vec<DecisionLine>, ReplayError> {
        let loads = self.loads.lock().unwrap_or_else(|p| p.into_inner()).0.clone();
        let mut lines = Vec::new();
        for load in loads {
            let (entries, _) =
                self.events.read(&load).await.map_err(|e| ReplayError::Store(e.to_string()))?;
            lines.extend(entries.iter().filter_map(|e| match e {
                LogEntry::Decision(d) => Some(DecisionLine::of(d)),
                LogEntry::Event(_) => None,
            }));
        }
        Ok(lines)
    }
}

/// Records in the order the clock meets them: by timestamp across partitions, by offset within
/// each partition (the order a consumer sees them in). A record without a timestamp takes its
/// predecessor's in its partition.
pub fn in_time_order(records: Vec<InboundRecord>) -> Vec<InboundRecord> {
    let mut partitions: BTreeMap<(String, i32), VecDeque<InboundRecord>> = BTreeMap::new();
    for r in records {
        partitions.entry((r.topic.clone(), r.partition)).or_default().push_back(r);
    }
    for queue in partitions.values_mut() {
        queue.make_contiguous().sort_by_key(|r| r.offset);
        let mut last = i64::MIN;
        for r in queue.iter_mut() {
            match r.timestamp_ms {
                Some(t) => last = t,
                None if last != i64::MIN => r.timestamp_ms = Some(last),
                None => {}
            }
        }
    }
    let mut ordered = Vec::new();
    loop {
        let next = partitions
            .iter()
            .filter_map(|(tp, q)| q.front().map(|r| (r.timestamp_ms.unwrap_or(i64::MIN), tp.clone())))
            .min();
        let Some((_, tp)) = next else { break };
        if let Some(r) = partitions.get_mut(&tp).and_then(VecDeque::pop_front) {
            ordered.push(r);
        }
    }
    ordered
}

fn read_golden(path: &Path) -> Result<Vec<String>, ReplayError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ReplayError::Golden { path: path.to_path_buf(), message: e.to_string() })?;
    Ok(text.lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect())
}

/// Compares line by line as JSON values (formatting and key order do not matter).
pub fn compare_lines(expected: &[String], actual: &[String]) -> Vec<String> {
    let parse = |s: &str| {
        serde_json::from_str::<serde_json::Value>(s).unwrap_or(serde_json::Value::String(s.to_owned()))
    };
    let mut differences = Vec::new();
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if parse(e) != parse(a) {
            differences.push(format!("line {}: expected {e}\n    got      {a}", i + 1));
        }
    }
    if expected.len() != actual.len() {
        let n = expected.len().min(actual.len());
        let (which, extra) = if expected.len() > actual.len() {
            ("missing", &expected[n..])
        } else {
            ("unexpected", &actual[n..])
        };
        differences.push(format!(
            "the golden has {} lines, the replay made {}; first {which} line {}: {}",
            expected.len(),
            actual.len(),
            n + 1,
            extra.first().map(String::as_str).unwrap_or("")
        ));
    }
    differences
}

static SCHEMA_SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh store for one replay.
enum FreshStore {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

impl FreshStore {
    async fn open(database_url: Option<&str>) -> Result<Self, ReplayError> {
        match database_url {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                let n = SCHEMA_SEQ.fetch_add(1, Ordering::Relaxed);
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() % 1_000_000_000_000)
                    .unwrap_or_default();
                let schema = format!("replay_{}_{nanos}_{n}", std::process::id());
                PgStore::connect_in_schema(url, &schema)
                    .await
                    .map(FreshStore::Postgres)
                    // Only the error: the URL may carry a password.
                    .map_err(|e| ReplayError::Store(format!("cannot open Postgres schema {schema}: {e}")))
            }
            Some(url) if !url.starts_with("sqlite:") => {
                let scheme = url.split(':').next().unwrap_or_default();
                Err(ReplayError::Store(format!(
                    "unsupported database url scheme {scheme:?} (expected sqlite: or postgres://)"
                )))
            }
            _ => SqliteStore::open_temporary(&StoreOptions::default())
                .await
                .map(FreshStore::Sqlite)
                .map_err(|e| ReplayError::Store(format!("cannot open a temporary SQLite store: {e}"))),
        }
    }

    fn stores(&self) -> Stores {
        match self {
            FreshStore::Sqlite(s) => s.clone().into_stores(),
            FreshStore::Postgres(p) => p.clone().into_stores(),
        }
    }

    async fn close(self) {
        if let FreshStore::Postgres(p) = self
            && let Err(e) = p.drop_schema().await
        {
            tracing::warn!(error = %e, "could not drop a replay schema");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(partition: i32, offset: i64, ts: Option<i64>) -> InboundRecord {
        InboundRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp_ms: ts,
            key: None,
            headers: vec![],
            value: None,
        }
    }

    #[test]
    fn records_are_merged_by_time_and_keep_partition_order() {
        let ordered = in_time_order(vec![
            rec(0, 1, Some(30)),
            rec(1, 0, Some(20)),
            rec(0, 0, Some(10)),
            rec(1, 1, Some(5)), // stamped earlier than its predecessor: stays behind it
            rec(0, 2, None),
        ]);
        let seen: Vec<(i32, i64)> = ordered.iter().map(|r| (r.partition, r.offset)).collect();
        assert_eq!(seen, [(0, 0), (1, 0), (1, 1), (0, 1), (0, 2)]);
        assert_eq!(ordered[4].timestamp_ms, Some(30), "no timestamp: the predecessor's");
    }

    #[test]
    fn goldens_compare_as_json_and_name_the_first_differences() {
        let golden = vec![r#"{"a": 1, "b": 2}"#.to_string(), r#"{"c": 3}"#.to_string()];
        assert!(
            compare_lines(&golden, &[r#"{"b":2,"a":1}"#.to_string(), r#"{"c":3}"#.to_string()]).is_empty()
        );
        let d = compare_lines(&golden, &[r#"{"a":1,"b":2}"#.to_string()]);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("missing line 2"), "{d:?}");
        let d = compare_lines(&golden, &[r#"{"a":1,"b":9}"#.to_string(), r#"{"c":3}"#.to_string()]);
        assert!(d[0].starts_with("line 1:"), "{d:?}");
    }
}
