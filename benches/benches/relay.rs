//! Relay throughput (issue 15): outbox rows per second through `Relay::relay_once` on Postgres,
//! one loop claiming batches of 100 with 64 rows in flight (the service's settings when the
//! pipelined relay was first measured; `relay_kafka.rs` runs today's `[relay]` defaults through
//! a broker) and the in-process fake delivery services, each row committed beforehand in the agent's shape (a `send_sms` row
//! for the fakes and a `set_timer` row for the TimerStore, two loads' heads per append).
//!
//! Two flows on the same rows, store and fakes:
//! - `pipelined`: the relay as it is: claim, send the whole batch, publish the batch's outcomes,
//!   one batch mark;
//! - `per_row`: the flow before issue 15, emulated here with the same calls: per row (64 rows
//!   in flight), re-check the claim, send, publish the outcome, mark the row.
//!
//! Each at two acknowledgement delays of the fake services: `ack_0ms` (they answer at once: the
//! store's round trips are all there is) and `ack_5ms` (a broker's acknowledgement on a quiet
//! network). Nothing goes through Kafka here: `relay_kafka.rs` (feature `kafka`) does.
//!
//! Postgres: `BENCH_DATABASE_URL`, else `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/bench`), one fresh schema per run, dropped at the end.
//! Run with `cargo bench -p load-agent-benches --bench relay`; figures in `docs/capacity.md`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use load_agent_domain::{ActionBody, Destination, OutcomeStatus};
use load_agent_runtime::{
    DeliveryCommand, DeliveryError, Destinations, FakeClock, FakeServices, InProcessQueue, LoadQueue,
    Receipt, Relay, RelayConfig, outcome_event,
};
use load_agent_store::{ClaimedRow, PgStore, StoreOptions, Stores, TimerRow};
use load_agent_testkit::store::{base_time, bench_postgres, bench_runtime, prepare_rows};

/// Rows claimed per pass and rows in flight.
const BATCH: usize = 100;
const CONCURRENCY: usize = 64;

fn now() -> DateTime<Utc> {
    base_time() + TimeDelta::days(1)
}

async fn open() -> (Stores, PgStore) {
    let pg = bench_postgres("relay", &StoreOptions { max_connections: 24, ..StoreOptions::default() }).await;
    (pg.clone().into_stores(), pg)
}

/// The in-process fakes, answering after `ack`.
#[derive(Debug, Clone)]
struct AckedFakes {
    fakes: FakeServices,
    ack: Duration,
}

#[async_trait]
impl Destinations for AckedFakes {
    async fn send(
        &self,
        destination: Destination,
        command: &DeliveryCommand,
    ) -> Result<Receipt, DeliveryError> {
        if !self.ack.is_zero() {
            tokio::time::sleep(self.ack).await;
        }
        self.fakes.send(destination, command).await
    }
}

/// The relay as it is, until `rows` rows are delivered.
async fn pipelined(stores: &Stores, rows: u64, ack: Duration) -> Duration {
    prepare_rows(stores, rows, "relay").await;
    let queue: Arc<dyn LoadQueue> = Arc::new(InProcessQueue::new(rows as usize + BATCH));
    let destinations = Arc::new(AckedFakes { fakes: FakeServices::new(), ack });
    let relay = Relay::new(
        stores.outbox.clone(),
        stores.timers.clone(),
        destinations,
        queue,
        Arc::new(FakeClock::new(now())),
    )
    .with_config(RelayConfig { batch: BATCH, concurrency: CONCURRENCY, ..RelayConfig::default() });
    let start = Instant::now();
    let mut done = 0u64;
    while done < rows {
        let pass = relay.relay_once(now()).await.expect("relay pass");
        if pass.claimed == 0 {
            break;
        }
        assert_eq!(pass.delivered, pass.claimed, "every row delivered: {pass:?}");
        done += pass.delivered as u64;
    }
    start.elapsed()
}

/// One row the way the relay handled it before issue 15: re-check, send, publish, mark.
async fn per_row_one(stores: &Stores, destinations: &AckedFakes, queue: &dyn LoadQueue, row: ClaimedRow) {
    let now = now();
    stores.outbox.recheck_claim(&row.id, row.claim_token, now).await.expect("re-check");
    let receipt = match &row.action.body {
        ActionBody::SetTimer { timer_id, ask_id, attempt, fire_at } => {
            let timer = TimerRow {
                timer_id: timer_id.clone(),
                load_id: row.load_id.clone(),
                ask_id: ask_id.clone(),
                attempt: *attempt,
                fire_at: *fire_at,
            };
            stores.timers.schedule(&timer).await.expect("schedule");
            format!("scheduled {timer_id}")
        }
        _ => destinations.send(row.destination, &DeliveryCommand::from(&row)).await.expect("send").id,
    };
    let outcome = outcome_event(&row.id, &row.load_id, &row.action, OutcomeStatus::Delivered, None, now);
    queue.publish(outcome).await.expect("publish");
    stores.outbox.mark_dispatched(&row.id, row.claim_token, &receipt, now).await.expect("mark");
}

/// The flow before issue 15, emulated, until `rows` rows are delivered.
async fn per_row(stores: &Stores, rows: u64, ack: Duration) -> Duration {
    prepare_rows(stores, rows, "relay").await;
    let queue = InProcessQueue::new(rows as usize + BATCH);
    let destinations = AckedFakes { fakes: FakeServices::new(), ack };
    let start = Instant::now();
    let mut done = 0u64;
    while done < rows {
        let claimed = stores.outbox.pending(BATCH, now()).await.expect("claim");
        if claimed.is_empty() {
            break;
        }
        done += claimed.len() as u64;
        futures::stream::iter(claimed)
            .map(|row| per_row_one(stores, &destinations, &queue, row))
            .buffered(CONCURRENCY)
            .collect::<Vec<()>>()
            .await;
    }
    start.elapsed()
}

fn relay(c: &mut Criterion) {
    let rt = bench_runtime();
    let (stores, pg) = rt.block_on(open());
    let mut group = c.benchmark_group("relay_rows");
    group.sample_size(10).measurement_time(Duration::from_secs(10)).warm_up_time(Duration::from_secs(2));
    group.throughput(Throughput::Elements(1));
    for (label, ack) in [("ack_0ms", Duration::ZERO), ("ack_5ms", Duration::from_millis(5))] {
        group.bench_function(BenchmarkId::new("postgres/pipelined", label), |b| {
            b.to_async(&rt).iter_custom(|rows| pipelined(&stores, rows, ack));
        });
        group.bench_function(BenchmarkId::new("postgres/per_row", label), |b| {
            b.to_async(&rt).iter_custom(|rows| per_row(&stores, rows, ack));
        });
    }
    group.finish();
    drop(stores);
    if let Err(e) = rt.block_on(pg.drop_schema()) {
        eprintln!("could not drop the bench schema: {e}");
    }
}

criterion_group!(benches, relay);
criterion_main!(benches);
