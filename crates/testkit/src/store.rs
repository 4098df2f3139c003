//! Store fixtures: appends of the agent's shape ([`agent_append`], [`prepare_rows`]), where the
//! Postgres benches run ([`bench_database_url`], [`bench_postgres`]) and on what
//! ([`bench_runtime`]), and [`Intercepted`], an
//! `EventStore` that forwards to a real one except where a test steps in.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use load_agent_domain::{
    DecisionRecord, EventKind, InboundEvent, IntentRecord, LlmUsage, LoadSummary, LogEntry, SopRef,
};
use load_agent_store::{
    AppendError, AppendRequest, EventStore, NewOutboxRow, PgStore, StoreError, StoreOptions, Stores,
};

/// The time the store and relay fixtures start from: [`crate::t0`].
pub fn base_time() -> DateTime<Utc> {
    crate::t0()
}

/// The runtime of the benches that drive a store or a broker: two workers, as on the 2-core
/// machines their figures come from.
pub fn bench_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Where the Postgres benches run: `BENCH_DATABASE_URL`, else `DATABASE_URL`, else
/// `postgres://postgres@127.0.0.1:5432/bench`.
pub fn bench_database_url() -> String {
    std::env::var("BENCH_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/bench".to_owned())
}

/// A Postgres store for a bench in a fresh schema `bench_{name}_{uuid}` on
/// [`bench_database_url`]; panics, saying how to create the database, when it cannot connect.
/// Drop the schema at the end with `PgStore::drop_schema`.
pub async fn bench_postgres(name: &str, options: &StoreOptions) -> PgStore {
    let url = bench_database_url();
    let schema = format!("bench_{name}_{}", uuid::Uuid::new_v4().simple());
    let store = PgStore::connect_in_schema_with(&url, &schema, options).await.unwrap_or_else(|e| {
        panic!(
            "the {name} bench needs Postgres at {url} (set BENCH_DATABASE_URL or DATABASE_URL; \
             create it with `createdb -h 127.0.0.1 -U postgres bench`): {e}"
        )
    });
    // The benches' clock is `base_time()`: their rows go to that month's and day's partitions,
    // as a running service's go to today's, not to the default partitions.
    partitions_at(&store, base_time())
        .await
        .unwrap_or_else(|e| panic!("the {name} bench's partitions around its clock: {e}"));
    store
}

/// Gives `store` the outbox and timer partitions a service running at `clock` has in steady
/// state: those of [`PartitionPlan::default`]'s span around `clock` (made when missing) and the
/// default partitions, no others. A fresh schema also holds the days and months made around
/// the real clock when it was created; left there, a bench whose clock is [`base_time`] would
/// plan, lock and probe two outbox days and two timer months more than a service does at every
/// claim, mark and key probe (docs/performance.md, "An eighth machine"). The days and months
/// outside the span are dropped: empty in a fresh schema (the store refuses anyway to drop a day
/// with a pending row or a month with a scheduled timer). The log's months are left: a service
/// keeps thirteen of them, more than any fresh schema holds.
///
/// [`PartitionPlan::default`]: load_agent_store::PartitionPlan
pub async fn partitions_at(store: &PgStore, clock: DateTime<Utc>) -> Result<(), StoreError> {
    use load_agent_store::{Lifecycle, PartitionPlan, PartitionedTable};

    let plan = PartitionPlan::default();
    store.ensure_partitions(clock, &plan).await?;
    let span = plan.span(clock)?;
    for part in store.partitions().await? {
        match (part.table.as_str(), part.range()) {
            ("outbox", Some((PartitionedTable::Outbox, day, _)))
                if day < span.first_day || day > span.last_day =>
            {
                store.drop_outbox_day(day, clock).await?;
            }
            ("timers", Some((PartitionedTable::Timers, month, _)))
                if month < span.first_month || month > span.last_month =>
            {
                store.drop_timer_month(month).await?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// One append of the agent's shape: an inbound SMS (about 300 bytes of text), its decision
/// (taking a step of an ask: an SMS and a timer, about 700 bytes encoded) and the decision's
/// two outbox rows. `n` numbers the append within its load; the log is at `version` before it.
pub fn agent_append(load: &str, n: u64, version: u64) -> (Vec<LogEntry>, Vec<NewOutboxRow>) {
    let at = base_time() + TimeDelta::seconds(i64::try_from(n).unwrap_or(0) * 60 + 60);
    let event_id = format!("sms_{n}");
    let inbound = LogEntry::Event(InboundEvent {
        event_id: event_id.clone(),
        load_id: load.into(),
        occurred_at: at,
        kind: EventKind::Sms {
            from: "drv".into(),
            text: format!(
                "{n}: {}",
                "running about twenty minutes late, traffic on I-80 near the Joliet exit; ".repeat(4)
            ),
        },
    });
    let decision = DecisionRecord {
        decided_at: at + TimeDelta::seconds(1),
        rationale:
            "The driver reports a delay without an ETA; client_a's SOP asks for one and waits 30 minutes."
                .into(),
        intent: Some(IntentRecord { intent: "delay_report".into(), probability: 0.91 }),
        llm_usage: vec![LlmUsage {
            method: "triage".into(),
            model_id: "typesafe-decision-1".into(),
            input_tokens: 640,
            output_tokens: 12,
            cost_usd: 0.0004,
            latency_ms: 38,
        }],
        ..crate::ask::eta_ask_opened(
            load,
            &event_id,
            at,
            SopRef { id: "client_a".into(), version: 1 },
            "Hi Luis, what is your ETA to Acme DC? Reply with a time.",
        )
    };
    let rows = load_agent_runtime::outbox_rows(&decision, version + 2);
    (vec![inbound, LogEntry::Decision(decision)], rows)
}

/// Commits `rows` due outbox rows (an [`agent_append`] per load: a `send_sms` and a `set_timer`,
/// both heads of their queues) with batched appends, on loads named `{prefix}-{run}-{i}`;
/// untimed preparation.
pub async fn prepare_rows(stores: &Stores, rows: u64, prefix: &str) {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let loads = rows.div_ceil(2);
    let requests: Vec<AppendRequest> = (0..loads)
        .map(|i| {
            let load = format!("{prefix}-{run}-{i}");
            let (entries, mut outbox) = agent_append(&load, 0, 0);
            if i == loads - 1 && rows % 2 == 1 {
                outbox.truncate(1);
            }
            AppendRequest { load_id: load, entries, expected_version: 0, outbox, summary: None }
        })
        .collect();
    for chunk in requests.chunks(50) {
        for result in stores.events.append_batch(chunk.to_vec()).await {
            result.expect("prepare outbox rows");
        }
    }
}

/// Where a test steps into an [`Intercepted`] event store; every method defaults to passing the
/// call through, so a test overrides only what it watches or changes.
#[async_trait]
pub trait Intercept: Send + Sync {
    /// Before each whole-log read of `load_id`.
    fn on_read(&self, _load_id: &str) {}

    /// Before each read of the entries after `version`.
    fn on_read_since(&self, _load_id: &str, _version: u64) {}

    /// The append of one load's entries; `inner` is the wrapped store.
    async fn append_summarized(
        &self,
        inner: &dyn EventStore,
        load_id: &str,
        entries: &[LogEntry],
        expected_version: u64,
        outbox: &[NewOutboxRow],
        summary: Option<&LoadSummary>,
    ) -> Result<u64, AppendError> {
        inner.append_summarized(load_id, entries, expected_version, outbox, summary).await
    }

    /// A batch of appends (the group commit's); `inner` is the wrapped store.
    async fn append_batch(
        &self,
        inner: &dyn EventStore,
        requests: Vec<AppendRequest>,
    ) -> Vec<Result<u64, AppendError>> {
        inner.append_batch(requests).await
    }
}

/// An event store that forwards every call to `inner`, letting `hook` ([`Intercept`]) count
/// reads or change appends: a test double for races, conflicts and cache reads over a real store.
pub struct Intercepted<I> {
    pub inner: Arc<dyn EventStore>,
    pub hook: I,
}

impl<I: Intercept> Intercepted<I> {
    pub fn new(inner: Arc<dyn EventStore>, hook: I) -> Self {
        Intercepted { inner, hook }
    }
}

#[async_trait]
impl<I: Intercept> EventStore for Intercepted<I> {
    async fn read(&self, load_id: &str) -> Result<(Vec<LogEntry>, u64), StoreError> {
        self.hook.on_read(load_id);
        self.inner.read(load_id).await
    }
    async fn read_since(&self, load_id: &str, version: u64) -> Result<(Vec<LogEntry>, u64), StoreError> {
        self.hook.on_read_since(load_id, version);
        self.inner.read_since(load_id, version).await
    }
    async fn read_entry(&self, load_id: &str, entry_id: &str) -> Result<Option<LogEntry>, StoreError> {
        self.inner.read_entry(load_id, entry_id).await
    }
    async fn append_summarized(
        &self,
        load_id: &str,
        entries: &[LogEntry],
        expected_version: u64,
        outbox: &[NewOutboxRow],
        summary: Option<&LoadSummary>,
    ) -> Result<u64, AppendError> {
        self.hook
            .append_summarized(self.inner.as_ref(), load_id, entries, expected_version, outbox, summary)
            .await
    }
    async fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<u64, AppendError>> {
        self.hook.append_batch(self.inner.as_ref(), requests).await
    }
    async fn llm_cost(&self, load_id: &str) -> Result<f64, StoreError> {
        self.inner.llm_cost(load_id).await
    }
    async fn load_ids(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        self.inner.load_ids(limit).await
    }
}
