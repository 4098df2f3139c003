//! Relay throughput through a broker (issue 15): outbox rows per second through the relay as the
//! service runs it on Postgres, with the Kafka ends of a deployment: `KafkaDestinations` (the
//! action topics) and `KafkaEventPublisher` (each row's `action_outcome` to the inbound topic).
//! `benches/relay.rs` measures the same relay on in-process fakes; this one needs librdkafka and
//! a broker, so it is behind the bench crate's `kafka` feature.
//!
//! The rows are the agent's shape (`prepare_rows`: per append a `send_sms` row, which goes to
//! `<prefix>.sms`, and a `set_timer` row, which the relay applies to the TimerStore; both publish
//! their outcome). The relay runs with the service's `[relay]` defaults (`RelaySettings`: batch,
//! in-flight rows, loops) and `kafka.producer_lanes` at 1, 2 and 4.
//!
//! Two arms per lane count, in the same run on the same broker:
//! - `relay/lanes_N`: `Relay::relay_once` in `relay.loops` loops until every row is marked:
//!   claim, send, publish the outcomes, one batch mark;
//! - `broker_only/lanes_N`: the same records without Postgres: each row's command (but the
//!   timer's) then its outcome, with as many rows in flight as the relay's loops hold. The
//!   broker's share of the relay's work, the ceiling the `relay` arm is read against.
//!
//! Broker: `KAFKA_BROKERS` (`host:port`), for example the test broker:
//! `export KAFKA_BROKERS=127.0.0.1:$(KAFKA_BROKER_NAME=bench KAFKA_BROKER_STORAGE=sqlite
//! ./scripts/kafka-broker.sh start)`. Each run creates its own topics (`bench-relay-<uuid>.*`,
//! `kafka.partitions` partitions) and leaves them (a test broker is emptied at its next start).
//! `BENCH_KAFKA_PROPERTIES=k=v[,k=v...]` sets librdkafka properties over the service's on every
//! client (`linger.ms=20`, say). Postgres: `BENCH_DATABASE_URL`, else `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/bench`), one fresh schema per run, dropped at the end.
//! Run with `cargo bench -p load-agent-benches --features kafka --bench relay_kafka`; figures in
//! `docs/capacity.md`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use load_agent_domain::{Destination, OutcomeStatus};
use load_agent_ingest::KafkaSettings;
use load_agent_kafka::{KafkaConfig, KafkaDestinations, KafkaEventPublisher, RelayEnds, ensure_topics};
use load_agent_runtime::{
    DeliveryCommand, FakeClock, Relay, RelayConfig, RelaySettings, RuntimeConfig, TimerSettings,
    WorkerSettings, outcome_event,
};
use load_agent_store::{PgStore, StoreOptions, Stores};
use load_agent_testkit::store::{agent_append, base_time, bench_postgres, bench_runtime, prepare_rows};

fn now() -> DateTime<Utc> {
    base_time() + TimeDelta::days(1)
}

/// The service's relay: `[relay]`'s defaults as the binary turns them into a `RelayConfig`.
fn service_relay() -> RelayConfig {
    RuntimeConfig::from_settings(
        &RelaySettings::default(),
        &TimerSettings::default(),
        &WorkerSettings::default(),
        Duration::from_secs(30),
    )
    .relay
}

/// The broker from `KAFKA_BROKERS`, and this run's topics created on it.
async fn kafka() -> (KafkaConfig, i32) {
    let brokers = std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| {
        panic!(
            "the relay_kafka bench needs a broker in KAFKA_BROKERS (host:port), for example \
             `export KAFKA_BROKERS=127.0.0.1:$(KAFKA_BROKER_STORAGE=sqlite ./scripts/kafka-broker.sh start)`"
        )
    });
    let run = uuid::Uuid::new_v4().simple().to_string();
    let mut config = KafkaConfig::new(brokers.clone());
    config.events_topic = format!("bench-relay-{run}.events");
    config.dlq_topic = format!("bench-relay-{run}.dlq");
    config.actions_topic_prefix = format!("bench-relay-{run}.actions");
    // BENCH_KAFKA_PROPERTIES=k=v,k=v: librdkafka properties over the service's, on every client.
    if let Ok(props) = std::env::var("BENCH_KAFKA_PROPERTIES") {
        for kv in props.split(',').filter(|kv| !kv.is_empty()) {
            let (k, v) =
                kv.split_once('=').unwrap_or_else(|| panic!("BENCH_KAFKA_PROPERTIES: `{kv}` is not k=v"));
            config.client_overrides.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let partitions = KafkaSettings::default().partitions;
    ensure_topics(&config, &config.all_topics(), partitions, 1)
        .await
        .unwrap_or_else(|e| panic!("creating the bench's topics on {brokers}: {e}"));
    (config, partitions)
}

/// The relay's two Kafka ends at `lanes` producer lanes (commands carry the contact id only:
/// the bench's loads have no registration to read addresses from).
fn ends(config: &KafkaConfig, lanes: usize) -> RelayEnds {
    let config = KafkaConfig { producer_lanes: lanes, ..config.clone() };
    let destinations = KafkaDestinations::new(&config, None).expect("the action producer");
    let outcomes = KafkaEventPublisher::new(&config, "load-agent-relay").expect("the outcome publisher");
    RelayEnds { destinations: Arc::new(destinations), outcomes: Arc::new(outcomes) }
}

/// The relay as the service runs it, `loops` loops of passes, until `rows` rows are marked.
async fn relay_rows(stores: &Stores, ends: &RelayEnds, rows: u64) -> Duration {
    prepare_rows(stores, rows, "relay-kafka").await;
    let config = service_relay();
    let relay = Arc::new(
        Relay::new(
            stores.outbox.clone(),
            stores.timers.clone(),
            ends.destinations.clone(),
            ends.outcomes.clone(),
            Arc::new(FakeClock::new(now())),
        )
        .with_config(config),
    );
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..config.loops.max(1) {
        let (relay, done) = (relay.clone(), done.clone());
        loops.spawn(async move {
            while done.load(Ordering::Relaxed) < rows {
                let pass = relay.relay_once(now()).await.expect("relay pass");
                assert_eq!(pass.delivered, pass.claimed, "every row delivered: {pass:?}");
                if pass.claimed == 0 {
                    // The other loop holds what is left.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                done.fetch_add(pass.delivered as u64, Ordering::Relaxed);
            }
        });
    }
    while let Some(joined) = loops.join_next().await {
        joined.expect("a relay loop");
    }
    start.elapsed()
}

/// The same records straight to the broker: per row its command (a timer row has none) and its
/// outcome, as many rows in flight as the relay's loops hold.
async fn broker_only(ends: &RelayEnds, rows: u64) -> Duration {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let outbox: Vec<_> = (0..rows.div_ceil(2))
        .flat_map(|i| agent_append(&format!("broker-{run}-{i}"), 0, 0).1)
        .take(usize::try_from(rows).unwrap_or(usize::MAX))
        .collect();
    let config = service_relay();
    let in_flight = config.concurrency.max(1) * config.loops.max(1);
    let start = Instant::now();
    futures::stream::iter(outbox)
        .map(|row| async move {
            if row.destination != Destination::Timer {
                ends.destinations.send(row.destination, &DeliveryCommand::from(&row)).await.expect("send");
            }
            let outcome =
                outcome_event(&row.id, &row.load_id, &row.action, OutcomeStatus::Published, None, now());
            ends.outcomes.publish(outcome).await.expect("publish");
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<()>>()
        .await;
    start.elapsed()
}

async fn open() -> (Stores, PgStore) {
    let pg =
        bench_postgres("relay_kafka", &StoreOptions { max_connections: 24, ..StoreOptions::default() }).await;
    (pg.clone().into_stores(), pg)
}

fn relay_kafka(c: &mut Criterion) {
    let rt = bench_runtime();
    let (stores, pg) = rt.block_on(open());
    let (config, partitions) = rt.block_on(kafka());
    eprintln!(
        "relay_kafka: broker {}, {partitions} partitions per topic, relay {:?}",
        config.brokers,
        service_relay()
    );
    let mut group = c.benchmark_group("relay_kafka_rows");
    group.sample_size(10).measurement_time(Duration::from_secs(15)).warm_up_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(1));
    for lanes in [1usize, 2, 4] {
        let ends = ends(&config, lanes);
        let label = format!("lanes_{lanes}");
        group.bench_function(BenchmarkId::new("relay", &label), |b| {
            b.to_async(&rt).iter_custom(|rows| relay_rows(&stores, &ends, rows));
        });
        group.bench_function(BenchmarkId::new("broker_only", &label), |b| {
            b.to_async(&rt).iter_custom(|rows| broker_only(&ends, rows));
        });
    }
    group.finish();
    drop(stores);
    if let Err(e) = rt.block_on(pg.drop_schema()) {
        eprintln!("could not drop the bench schema: {e}");
    }
}

criterion_group!(benches, relay_kafka);
criterion_main!(benches);
