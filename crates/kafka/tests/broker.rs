//! Integration tests against a real Kafka-protocol broker (Nisshi, started by
//! `scripts/kafka-broker.sh` from `scripts/test.sh`; never librdkafka's mock cluster) and
//! PostgreSQL. Events are produced as Avro with a plain rdkafka producer; decisions are read
//! from Postgres, actions from the action topics.
//!
//! Each test has its own topics (`it.<test>.*`), consumer group and Postgres schema, so the
//! tests run in parallel on one broker and one database.
//!
//! Needs `KAFKA_BROKERS` and `DATABASE_URL`: run `./scripts/test.sh`.
//!
//! Every wait has a deadline and names what it waited for, the runtime's shutdown included
//! ([`run`]): a hang is a failure, never a test that does not end. `RUST_LOG` shows the
//! service's logs (`--nocapture`); `RDKAFKA_DEBUG=cgrp` adds librdkafka's consumer-group debug
//! log under `RUST_LOG=librdkafka=debug`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chrono::Utc;
use load_agent_agent::Agent;
use load_agent_avro::{decode_action_command, encode_inbound};
use load_agent_domain::{EventKind, InboundEvent, LogEntry, RiskBand};
use load_agent_ingest::{DumpRecord, record_processor};
use load_agent_kafka::{
    ConsumeReport, ConsumerConfig, ConsumerError, KafkaConfig, KafkaEventPublisher, consume, dump,
    ensure_topics, relay_ends,
};
use load_agent_llm::{FakeLlm, LlmClient};
use load_agent_runtime::{
    CacheConfig, Clock, EventPublisher, GroupCommitConfig, Relay, RelayConfig, ShutdownTrigger, SystemClock,
    TimerPump, WorkerConfig, shutdown_channel,
};
use load_agent_store::{OutboxStatus, PgStore, Stores};
use load_agent_testkit::wait::{eventually, within};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders, ToBytes};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use tokio::task::JoinHandle;

// ------------------------------------------------------------------------------------------
// The harness.

/// Runs one test on a multi-threaded runtime (4 workers, or `BROKER_TEST_WORKERS`; with 1 the
/// consumers' timing is at its tightest), then shuts the runtime down within 30 s whatever
/// happened: a thread stuck in a blocking call would otherwise keep the test from ending (a
/// runtime's drop waits for its blocking threads).
fn run(test: impl Future<Output = ()>) {
    let workers = std::env::var("BROKER_TEST_WORKERS").ok().and_then(|w| w.parse().ok()).unwrap_or(4);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.block_on(test)));
    let started = std::time::Instant::now();
    runtime.shutdown_timeout(SHUTDOWN_DEADLINE);
    let shutdown_hung = started.elapsed() >= SHUTDOWN_DEADLINE;
    if let Err(panic) = outcome {
        if shutdown_hung {
            eprintln!(
                "and the runtime did not shut down within {SHUTDOWN_DEADLINE:?}: a thread is stuck in a blocking call"
            );
        }
        std::panic::resume_unwind(panic);
    }
    assert!(
        !shutdown_hung,
        "the runtime did not shut down within {SHUTDOWN_DEADLINE:?}: a thread is stuck in a blocking call"
    );
}

const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(30);

fn brokers() -> String {
    std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| {
        panic!("KAFKA_BROKERS is not set: run ./scripts/test.sh, which starts the test broker and exports it")
    })
}

fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| {
        panic!("DATABASE_URL is not set: run ./scripts/test.sh, which starts PostgreSQL and exports it")
    })
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// One test's deployment: its own topics, group and schema.
struct Env {
    kafka: KafkaConfig,
    pg: PgStore,
    stores: Stores,
    agent: Arc<Agent>,
    producer: FutureProducer,
}

/// `max.message.bytes` of a test's topics, set before `ensure_topics` creates the rest;
/// `None`: what `ensure_topics` gives.
#[derive(Default, Clone, Copy)]
struct TopicLimits {
    events: Option<usize>,
    /// `Some(None)`: the DLQ topic without the setting (the broker's default).
    dlq: Option<Option<usize>>,
}

impl Env {
    async fn new(name: &str, partitions: i32) -> Env {
        Env::with_limits(name, partitions, TopicLimits::default()).await
    }

    async fn with_limits(name: &str, partitions: i32, limits: TopicLimits) -> Env {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let id = format!("{name}_{}_{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let mut kafka = KafkaConfig::new(brokers());
        kafka.events_topic = format!("it.{id}.events");
        kafka.dlq_topic = format!("it.{id}.events.dlq");
        kafka.actions_topic_prefix = format!("it.{id}.actions");
        kafka.group_id = format!("it-{id}");
        kafka.send_timeout = Duration::from_secs(10);
        // Members learn of a rebalance at their next heartbeat: keep rebalances quick.
        kafka.client_overrides.push(("heartbeat.interval.ms".into(), "200".into()));
        if let Ok(debug) = std::env::var("RDKAFKA_DEBUG") {
            kafka.client_overrides.push(("debug".into(), debug));
        }
        let mut preset: Vec<(String, Option<usize>)> = Vec::new();
        if let Some(events) = limits.events {
            preset.push((kafka.events_topic.clone(), Some(events)));
        }
        if let Some(dlq) = limits.dlq {
            preset.push((kafka.dlq_topic.clone(), dlq));
        }
        if !preset.is_empty() {
            let admin: AdminClient<DefaultClientContext> =
                ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("admin");
            let values: Vec<Option<String>> = preset.iter().map(|(_, l)| l.map(|l| l.to_string())).collect();
            let topics: Vec<NewTopic<'_>> = preset
                .iter()
                .zip(&values)
                .map(|((name, _), limit)| {
                    let t = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
                    match limit {
                        Some(l) => t.set("max.message.bytes", l),
                        None => t,
                    }
                })
                .collect();
            let created = within(Duration::from_secs(60), "the topics with preset limits created", async {
                admin.create_topics(topics.iter(), &AdminOptions::new()).await.expect("create topics")
            })
            .await;
            for r in created {
                r.expect("topic created");
            }
        }
        within(
            Duration::from_secs(60),
            "the test topics created",
            ensure_topics(&kafka, &kafka.all_topics(), partitions, 1),
        )
        .await
        .expect("create the test topics");
        let pg = within(
            Duration::from_secs(60),
            "the test's Postgres schema",
            PgStore::connect_in_schema(&database_url(), &format!("it_{id}")),
        )
        .await
        .expect("postgres schema");
        let stores = pg.clone().into_stores();
        // A plain producer, as an integration service would have.
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", brokers())
            .set("partitioner", "murmur2_random")
            .set("message.timeout.ms", "10000")
            .set("message.max.bytes", "4000000")
            .create()
            .expect("producer");
        Env { kafka, pg, stores, agent: Arc::new(Agent::embedded().expect("agent")), producer }
    }

    fn consumer(
        &self,
        config: ConsumerConfig,
    ) -> (ShutdownTrigger, JoinHandle<Result<ConsumeReport, ConsumerError>>) {
        self.consumer_with(config, GroupCommitConfig::OFF)
    }

    /// A consumer whose load worker appends with `group_commit`.
    fn consumer_with(
        &self,
        config: ConsumerConfig,
        group_commit: GroupCommitConfig,
    ) -> (ShutdownTrigger, JoinHandle<Result<ConsumeReport, ConsumerError>>) {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let llm: Arc<dyn LlmClient> = Arc::new(FakeLlm::new());
        let (processor, _cache) = record_processor(
            &self.stores,
            self.agent.clone(),
            llm,
            clock,
            WorkerConfig::default(),
            CacheConfig::default(),
            group_commit,
        );
        let (trigger, shutdown) = shutdown_channel();
        let kafka = self.kafka.clone();
        let kept = self.stores.dead_letters.clone();
        (trigger, tokio::spawn(async move { consume(&kafka, config, processor, kept, shutdown).await }))
    }

    fn relay(&self) -> (ShutdownTrigger, JoinHandle<()>) {
        let config = RelayConfig { idle_poll: Duration::from_millis(50), ..RelayConfig::default() };
        // The relay's Kafka ends as the binary makes them; the binary's own wiring (with the
        // send limit in front of the outbox) is tested end to end by crates/load-agent/tests.
        let ends = relay_ends(self.stores.events.clone(), &self.kafka).expect("the relay's producers");
        let relay = Relay::new(
            self.stores.outbox.clone(),
            self.stores.timers.clone(),
            ends.destinations,
            ends.outcomes,
            Arc::new(SystemClock),
        )
        .with_config(config);
        let (trigger, shutdown) = shutdown_channel();
        (trigger, tokio::spawn(Arc::new(relay).run(shutdown)))
    }

    async fn produce(&self, event: &InboundEvent) {
        let value = encode_inbound(event);
        let headers = OwnedHeaders::new().insert(Header { key: "source", value: Some("integration-test") });
        let record = FutureRecord::to(&self.kafka.events_topic)
            .key(event.load_id.as_str())
            .payload(&value)
            .headers(headers);
        self.send(record).await;
    }

    /// Produces `record` and waits for its acknowledgement (30 s at the most).
    async fn send<K: ToBytes + ?Sized, P: ToBytes + ?Sized>(&self, record: FutureRecord<'_, K, P>) {
        within(
            Duration::from_secs(30),
            "a record produced",
            self.producer.send(record, Duration::from_secs(10)),
        )
        .await
        .map_err(|(e, _)| e)
        .expect("produce");
    }

    async fn produce_raw(&self, key: &str, value: &[u8], headers: &[(&str, &str)]) {
        let mut owned = OwnedHeaders::new();
        for (k, v) in headers {
            owned = owned.insert(Header { key: k, value: Some(*v) });
        }
        let record = FutureRecord::to(&self.kafka.events_topic).key(key).payload(value).headers(owned);
        self.send(record).await;
    }

    async fn log(&self, load: &str) -> Vec<LogEntry> {
        within(Duration::from_secs(60), "a load's log read", self.stores.events.read(load))
            .await
            .expect("read the log")
            .0
    }

    async fn event_ids(&self, load: &str) -> Vec<String> {
        self.log(load)
            .await
            .into_iter()
            .filter_map(|e| match e {
                LogEntry::Event(e) => Some(e.event_id),
                LogEntry::Decision(_) => None,
            })
            .collect()
    }

    /// Every record of a topic, through `load-agent dump`'s code.
    async fn topic(&self, topic: &str) -> Vec<DumpRecord> {
        let mut out = Vec::new();
        within(
            Duration::from_secs(60),
            "a topic dumped",
            dump(&self.kafka.brokers, topic, true, true, &mut out),
        )
        .await
        .expect("dump");
        String::from_utf8_lossy(&out).lines().map(|l| serde_json::from_str(l).expect("dump line")).collect()
    }

    /// The group's committed offsets (librdkafka's blocking calls, on a blocking thread).
    async fn committed(&self, partitions: i32) -> BTreeMap<i32, i64> {
        let (brokers, group, topic) =
            (self.kafka.brokers.clone(), self.kafka.group_id.clone(), self.kafka.events_topic.clone());
        let read = tokio::task::spawn_blocking(move || {
            let reader: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &brokers)
                .set("group.id", &group)
                .set("enable.auto.commit", "false")
                .create()
                .expect("reader");
            let mut tpl = TopicPartitionList::new();
            for p in 0..partitions {
                tpl.add_partition(&topic, p);
            }
            let committed =
                reader.committed_offsets(tpl, Duration::from_secs(10)).expect("committed offsets");
            committed
                .elements()
                .iter()
                .filter_map(|e| match e.offset() {
                    Offset::Offset(o) => Some((e.partition(), o)),
                    _ => None,
                })
                .collect()
        });
        within(Duration::from_secs(60), "the group's committed offsets", read)
            .await
            .expect("committed offsets task")
    }

    async fn close(self) {
        within(Duration::from_secs(60), "the test schema dropped", self.pg.drop_schema())
            .await
            .expect("drop the test schema");
    }
}

/// Waits until each load's log holds its registration and messages `<load>-m1..=m<messages>`,
/// then checks that each is there once, in the order produced.
async fn assert_messages_logged_in_order(env: &Env, loads: &[String], messages: usize) {
    eventually(Duration::from_secs(25), "every message in its log", || async {
        for load in loads {
            if env.event_ids(load).await.len() < 1 + messages {
                return false;
            }
        }
        true
    })
    .await;
    for load in loads {
        let mut expected = vec![format!("load_registered:{load}")];
        expected.extend((1..=messages).map(|m| format!("{load}-m{m}")));
        assert_eq!(env.event_ids(load).await, expected, "{load}: each event once, in the order produced");
    }
}

/// Stops a consumer or relay task and waits for it, at most 120 s (the consumer's own bounds:
/// a 30 s drain, 15 s to leave the group, 30 s to close).
async fn stop<T>(what: &str, trigger: ShutdownTrigger, handle: JoinHandle<T>) -> T {
    trigger.shutdown();
    within(Duration::from_secs(120), &format!("{what} to stop"), handle).await.expect("task")
}

// ------------------------------------------------------------------------------------------
// Events.

fn registration(load: &str) -> InboundEvent {
    let load_reg = load_agent_testkit::load::sample_load(load);
    InboundEvent {
        event_id: format!("load_registered:{load}"),
        load_id: load.into(),
        occurred_at: Utc::now(),
        kind: EventKind::LoadRegistered { load: load_reg },
    }
}

fn ping_high(load: &str, id: &str) -> InboundEvent {
    let now = Utc::now();
    InboundEvent {
        event_id: id.into(),
        load_id: load.into(),
        occurred_at: now,
        kind: EventKind::Ping { stop: 1, delay_risk: RiskBand::High, recorded_at: now, lat: None, lon: None },
    }
}

fn sms(load: &str, id: &str, text: &str) -> InboundEvent {
    InboundEvent {
        event_id: id.into(),
        load_id: load.into(),
        occurred_at: Utc::now(),
        kind: EventKind::Sms { from: "drv".into(), text: text.into() },
    }
}

fn header<'a>(r: &'a DumpRecord, name: &str) -> Option<&'a str> {
    r.headers.get(name).map(String::as_str)
}

// ------------------------------------------------------------------------------------------
// The tests.

#[test]
fn decisions_land_in_postgres_and_actions_on_the_action_topics() {
    run(async {
        let env = Env::new("flow", 3).await;
        let (consumer_stop, consumer) = env.consumer(ConsumerConfig::default());
        let (relay_stop, relay) = env.relay();

        env.produce(&registration("481207")).await;
        env.produce(&ping_high("481207", "ping_0700")).await;

        let sms_key = "481207/ask:eta_request:ping_0700/1/send_sms";
        let published = format!("out:published:{sms_key}");
        // The relay publishes the SMS, then its outcome comes back through the inbound topic: it
        // says `published` (the broker has the command), never `delivered`.
        eventually(Duration::from_secs(20), "the published outcome of the SMS in the log", || async {
            env.event_ids("481207").await.contains(&published)
        })
        .await;
        // Only timer rows, which the relay applies itself, are `delivered` by the relay.
        let delivered: Vec<String> =
            env.event_ids("481207").await.into_iter().filter(|id| id.starts_with("out:delivered:")).collect();
        assert!(delivered.iter().all(|id| id.ends_with("/set_timer")), "{delivered:?}");
        // Only the delivery service says `delivered`, on the same topic.
        let confirmed = InboundEvent {
            event_id: format!("out:delivered:{sms_key}"),
            load_id: "481207".into(),
            occurred_at: Utc::now(),
            kind: EventKind::ActionOutcome {
                idempotency_key: sms_key.into(),
                status: load_agent_domain::OutcomeStatus::Delivered,
                action_kind: load_agent_domain::ActionKind::SendSms,
                contact_id: Some("drv".into()),
                hero_channel: false,
                reason: None,
            },
        };
        env.produce(&confirmed).await;
        eventually(Duration::from_secs(20), "the SMS service's delivered outcome in the log", || async {
            env.event_ids("481207").await.contains(&confirmed.event_id)
        })
        .await;
        let confirmation = env.log("481207").await.into_iter().find_map(|e| match e {
            LogEntry::Decision(d) if d.trigger_event_id == confirmed.event_id => Some(d),
            _ => None,
        });
        let confirmation = confirmation.expect("a decision for the confirmation");
        assert!(
            confirmation.effective_actions().next().is_none(),
            "a confirmation changes nothing: {confirmation:?}"
        );
        assert!(confirmation.rationale.starts_with("delivered:"), "{}", confirmation.rationale);

        let log = env.log("481207").await;
        let decision = log
            .iter()
            .find_map(|e| match e {
                LogEntry::Decision(d) if d.trigger_event_id == "ping_0700" => Some(d),
                _ => None,
            })
            .expect("the ping's decision");
        let kinds: Vec<&str> = decision.actions.iter().map(|a| a.kind().as_str()).collect();
        assert_eq!(kinds, ["send_sms", "set_timer"]);

        let records = env.topic(&env.kafka.actions_topic(load_agent_domain::Destination::Sms)).await;
        assert_eq!(records.len(), 1, "one SMS on the sms topic: {records:?}");
        let r = &records[0];
        assert_eq!(r.key.as_deref(), Some("481207"));
        assert_eq!(header(r, "idempotency-key"), Some(sms_key));
        let value = r.to_record().expect("record").value.unwrap_or_default();
        let command = decode_action_command(&value).expect("an Avro ActionCommand");
        assert_eq!(command.idempotency_key, sms_key);
        assert_eq!(
            command.load_version, 4,
            "committed at version 4: registration and its decision, the ping and its"
        );
        assert_eq!(
            command.addresses.phone.as_deref(),
            Some("+13125550111"),
            "the driver's phone is resolved"
        );

        let rows =
            within(Duration::from_secs(60), "the outbox rows", env.stores.outbox.rows_for_load("481207"))
                .await
                .expect("outbox");
        let row = rows.iter().find(|row| row.id == sms_key).expect("the SMS row");
        assert_eq!(row.status, OutboxStatus::Dispatched);
        assert_eq!(
            row.receipt.as_deref(),
            Some(format!("{}/{}/{}", r.topic, r.partition, r.offset).as_str())
        );
        let timers =
            within(Duration::from_secs(60), "the timers", env.stores.timers.timers_for_load("481207"))
                .await
                .expect("timers");
        assert_eq!(timers.len(), 1, "the follow-up timer is scheduled");
        assert!(env.topic(&env.kafka.dlq_topic).await.is_empty(), "nothing dead-lettered");

        // The timer pump publishes `timer_fired` to the inbound topic (its pass is run 31 minutes
        // ahead): the consumer takes the ask's next step and the relay sends the second SMS.
        let publisher: Arc<dyn EventPublisher> = Arc::new(
            KafkaEventPublisher::new(&env.kafka, "load-agent-timer-pump").expect("the pump's producer"),
        );
        let pump = TimerPump::new(env.stores.timers.clone(), publisher, Arc::new(SystemClock));
        let pumped = within(
            Duration::from_secs(60),
            "a timer pump pass",
            pump.pump_once(Utc::now() + chrono::Duration::minutes(31)),
        )
        .await
        .expect("pump pass");
        assert_eq!(pumped.fired, 1);
        let second_sms = "481207/ask:eta_request:ping_0700/2/send_sms";
        let second_published = format!("out:published:{second_sms}");
        eventually(Duration::from_secs(20), "the timer's next step published", || async {
            env.event_ids("481207").await.contains(&second_published)
        })
        .await;
        assert!(
            env.event_ids("481207").await.contains(&"evt:tmr:481207:ask:eta_request:ping_0700:1".to_string())
        );
        let records = env.topic(&env.kafka.actions_topic(load_agent_domain::Destination::Sms)).await;
        let keys: Vec<&str> = records.iter().filter_map(|r| header(r, "idempotency-key")).collect();
        assert_eq!(keys, [sms_key, second_sms], "in order on the load's partition");

        stop("the relay", relay_stop, relay).await;
        let report = stop("the consumer", consumer_stop, consumer).await.expect("consumer");
        assert!(report.finished >= 4, "{report:?}");
        env.close().await;
    })
}

#[test]
fn a_malformed_record_goes_to_the_dlq_and_the_partition_goes_on() {
    run(async {
        let env = Env::new("dlq", 1).await;
        let (consumer_stop, consumer) = env.consumer(ConsumerConfig::default());

        env.produce(&registration("L1")).await; // offset 0
        env.produce_raw("L1", b"{\"not\": \"avro\"}", &[("source", "legacy-gateway")]).await; // offset 1
        env.produce(&sms("L1", "sms-1", "ok")).await; // offset 2
        let mut mismatched = sms("L2", "sms-2", "ok");
        mismatched.load_id = "L2".into();
        let value = encode_inbound(&mismatched);
        env.produce_raw("L1", &value, &[]).await; // offset 3: keyed L1, about L2
        env.produce(&sms("L1", "sms-3", "10-4")).await; // offset 4

        eventually(Duration::from_secs(20), "the records after the bad ones in the log", || async {
            env.event_ids("L1").await.contains(&"sms-3".to_string())
        })
        .await;
        assert_eq!(env.event_ids("L1").await, ["load_registered:L1", "sms-1", "sms-3"]);

        let dead = env.topic(&env.kafka.dlq_topic).await;
        assert_eq!(dead.len(), 2, "{dead:?}");
        let first = &dead[0];
        assert_eq!(first.key.as_deref(), Some("L1"), "the original key");
        let original = first.to_record().expect("record").value;
        assert_eq!(original.as_deref(), Some(&b"{\"not\": \"avro\"}"[..]), "the original bytes");
        assert_eq!(header(first, "dlq-reason-kind"), Some("decode"));
        assert_eq!(header(first, "dlq-error-code"), Some("bad_magic"));
        assert!(header(first, "dlq-error").is_some_and(|e| e.contains("magic")), "{first:?}");
        assert_eq!(header(first, "dlq-source-topic"), Some(env.kafka.events_topic.as_str()));
        assert_eq!(header(first, "dlq-source-partition"), Some("0"));
        assert_eq!(header(first, "dlq-source-offset"), Some("1"));
        assert_eq!(header(first, "source"), Some("legacy-gateway"), "the original headers are kept");
        let second = &dead[1];
        assert_eq!(header(second, "dlq-reason-kind"), Some("invalid_event"));
        assert_eq!(header(second, "dlq-error-code"), Some("key_mismatch"));
        assert_eq!(header(second, "dlq-source-offset"), Some("3"));

        let report = stop("the consumer", consumer_stop, consumer).await.expect("consumer");
        assert_eq!(report.dead_letters, 2, "{report:?}");
        assert_eq!(env.committed(1).await.get(&0), Some(&5), "the partition moved past every record");
        env.close().await;
    })
}

#[test]
fn a_consumer_stopped_mid_stream_and_restarted_loses_nothing_and_publishes_no_action_twice() {
    run(async {
        // Enough records that a one-at-a-time consumer cannot finish before it is stopped.
        const LOADS: usize = 120;
        let env = Env::new("restart", 4).await;
        let loads: Vec<String> = (0..LOADS).map(|i| format!("R{i:03}")).collect();
        let mut produced: HashMap<String, Vec<String>> = HashMap::new();
        for load in &loads {
            let events = [
                registration(load),
                ping_high(load, &format!("{load}-ping")),
                sms(load, &format!("{load}-po"), "whats the po# for this one"),
            ];
            for e in &events {
                env.produce(e).await;
            }
            produced.insert(load.clone(), events.iter().map(|e| e.event_id.clone()).collect());
        }

        // First run: stopped once a few loads are through, with records still in flight.
        let slow = ConsumerConfig { max_concurrent_runs: 1, ..ConsumerConfig::default() };
        let (consumer_stop, consumer) = env.consumer(slow);
        let (relay_stop, relay) = env.relay();
        eventually(Duration::from_secs(20), "a few loads decided", || async {
            let mut done = 0;
            // Watching a handful of loads keeps each check short, so the stop lands mid-stream.
            for load in loads.iter().take(12) {
                if env.event_ids(load).await.len() >= 2 {
                    done += 1;
                }
            }
            done >= 2
        })
        .await;
        let first = stop("the consumer", consumer_stop, consumer).await.expect("first consumer");
        stop("the relay", relay_stop, relay).await;

        // Second run: everything is finished, each event once, each action once.
        let (consumer_stop, consumer) = env.consumer(ConsumerConfig::default());
        let (relay_stop, relay) = env.relay();
        eventually(Duration::from_secs(60), "every event and every outcome in the logs", || async {
            for load in &loads {
                let ids = env.event_ids(load).await;
                // 3 events and the delivered outcomes of send_sms, set_timer and the PO reply.
                if ids.len() < 6 {
                    return false;
                }
            }
            true
        })
        .await;
        let second = stop("the consumer", consumer_stop, consumer).await.expect("second consumer");
        stop("the relay", relay_stop, relay).await;
        eprintln!("first run: {first:?}\nsecond run: {second:?}");
        assert!(first.finished > 0 && second.finished > 0, "both runs worked: {first:?} {second:?}");
        assert!(first.finished < (LOADS * 3) as u64, "the first run was stopped mid-stream: {first:?}");

        for load in &loads {
            let ids = env.event_ids(load).await;
            for id in &produced[load] {
                assert_eq!(ids.iter().filter(|x| *x == id).count(), 1, "{load}: {id} once in {ids:?}");
            }
            let unique: HashSet<&String> = ids.iter().collect();
            assert_eq!(unique.len(), ids.len(), "{load}: no event twice: {ids:?}");
        }
        let sms = env.topic(&env.kafka.actions_topic(load_agent_domain::Destination::Sms)).await;
        assert_eq!(sms.len(), LOADS * 2, "an ETA request and a PO reply per load");
        let mut keys = HashSet::new();
        for r in &sms {
            let key = header(r, "idempotency-key").expect("idempotency-key").to_owned();
            assert!(keys.insert(key.clone()), "{key} published twice");
        }
        env.close().await;
    })
}

#[test]
fn two_consumers_in_one_group_share_the_partitions_and_keep_each_loads_order() {
    run(members_share_the_partitions(GroupCommitConfig::OFF));
}

/// The same with group commit on: the revocation's drain waits (inside librdkafka's poll, on a
/// runtime worker) for runs whose appends a committer task answers (docs/runtime.md, "Why it is
/// off by default").
#[test]
fn two_consumers_share_the_partitions_with_group_commit_on() {
    run(members_share_the_partitions(GroupCommitConfig::default()));
}

async fn members_share_the_partitions(group_commit: GroupCommitConfig) {
    const LOADS: usize = 12;
    const MESSAGES: usize = 6;
    let env = Env::new("group", 4).await;
    let loads: Vec<String> = (0..LOADS).map(|i| format!("G{i:03}")).collect();
    // The first member runs one record at a time, so that it holds a backlog when it is revoked.
    let (stop_a, a) = env
        .consumer_with(ConsumerConfig { max_concurrent_runs: 1, ..ConsumerConfig::default() }, group_commit);
    for load in &loads {
        env.produce(&registration(load)).await;
    }
    eventually(Duration::from_secs(20), "the first member at work", || async {
        !env.event_ids(&loads[0]).await.is_empty()
    })
    .await;
    // The second member joins while records flow: the first one's partitions are revoked
    // (drained, committed) and the group's partitions are split between the two.
    let (stop_b, b) = env.consumer_with(ConsumerConfig::default(), group_commit);
    for m in 1..=MESSAGES {
        for load in &loads {
            env.produce(&sms(load, &format!("{load}-m{m}"), "ok")).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_messages_logged_in_order(&env, &loads, MESSAGES).await;
    let report_a = stop("consumer a", stop_a, a).await.expect("consumer a");
    let report_b = stop("consumer b", stop_b, b).await.expect("consumer b");
    eprintln!("member a: {report_a:?}\nmember b: {report_b:?}");
    assert!(
        report_a.revocations >= 1,
        "the first member gave partitions up when the second joined: {report_a:?}"
    );
    assert!(
        report_a.received > 0 && report_b.received > 0,
        "both members consumed: {report_a:?} {report_b:?}"
    );
    assert_eq!(
        env.committed(4).await.values().sum::<i64>(),
        (LOADS * (1 + MESSAGES)) as i64,
        "everything committed"
    );
    env.close().await;
}

#[test]
fn a_partition_holding_too_many_records_is_paused_and_resumed() {
    run(async {
        const LOADS: usize = 3;
        const MESSAGES: usize = 30;
        let env = Env::new("backpressure", 1).await;
        let loads: Vec<String> = (0..LOADS).map(|i| format!("B{i:03}")).collect();
        for load in &loads {
            env.produce(&registration(load)).await;
        }
        for m in 1..=MESSAGES {
            for load in &loads {
                env.produce(&sms(load, &format!("{load}-m{m}"), "ok")).await;
            }
        }
        let config = ConsumerConfig {
            max_buffered_per_partition: 8,
            max_concurrent_runs: 1,
            ..ConsumerConfig::default()
        };
        let (consumer_stop, consumer) = env.consumer(config);
        assert_messages_logged_in_order(&env, &loads, MESSAGES).await;
        let report = stop("the consumer", consumer_stop, consumer).await.expect("consumer");
        eprintln!("backpressure: {report:?}");
        assert!(report.pauses >= 1, "the partition was paused: {report:?}");
        // librdkafka drops what it prefetched for a paused partition; allow some slack all the same.
        assert!(report.max_buffered <= 16, "at most about the bound is held: {report:?}");
        assert_eq!(env.committed(1).await.get(&0), Some(&((LOADS * (1 + MESSAGES)) as i64)));
        env.close().await;
    })
}

/// A figure, not a check: records per second through the consumer (acknowledgement SMS, so
/// every run is a filtered noop: the cost is the consumer, the store and Kafka, not deciding).
/// `cargo test -p load-agent-kafka --release --test broker -- --ignored throughput --nocapture`
#[test]
#[ignore = "a measurement; run it by name"]
fn throughput() {
    run(async {
        const LOADS: usize = 200;
        const MESSAGES: usize = 10;
        let env = Env::new("throughput", 4).await;
        let loads: Vec<String> = (0..LOADS).map(|i| format!("T{i:04}")).collect();
        let registrations: Vec<InboundEvent> = loads.iter().map(|l| registration(l)).collect();
        let messages: Vec<InboundEvent> = (1..=MESSAGES)
            .flat_map(|m| loads.iter().map(move |l| sms(l, &format!("{l}-m{m}"), "ok")))
            .collect();
        let started = std::time::Instant::now();
        futures::future::join_all(registrations.iter().map(|e| env.produce(e))).await;
        // Ordered per load: each load's messages are queued in order on one partition.
        futures::future::join_all(messages.iter().map(|e| env.produce(e))).await;
        let produced = started.elapsed();
        let started = std::time::Instant::now();
        let (consumer_stop, consumer) = env.consumer(ConsumerConfig::default());
        let total = LOADS * (1 + MESSAGES);
        eventually(Duration::from_secs(300), "every record committed", || async {
            env.committed(4).await.values().sum::<i64>() == total as i64
        })
        .await;
        let consumed = started.elapsed();
        let report = stop("the consumer", consumer_stop, consumer).await.expect("consumer");
        eprintln!(
            "throughput: {total} records produced in {produced:?}, consumed and committed in {consumed:?} ({:.0} records/s); {report:?}",
            total as f64 / consumed.as_secs_f64()
        );
        env.close().await;
    })
}

/// A record the DLQ must hold: its source offset, `dlq-error-code`, `dlq-error-field`, a word of
/// `dlq-error`, and the original value.
type ExpectedDeadLetter = (i64, &'static str, Option<&'static str>, &'static str, Vec<u8>);

/// Issue 10: every kind of bad input on one partition, each between good records. Each bad
/// record is on the DLQ with its reason and its original bytes, every good record after it is
/// decided (the partition moved on), a message from an unknown sender is decided per
/// behavior.md §6 (a non-urgent Hero task, no reply; not a dead letter), and a true redelivery
/// changes nothing.
#[test]
fn every_kind_of_bad_input_is_dead_lettered_with_its_reason_and_the_partition_moves_on() {
    run(async {
        let env = Env::new("badinput", 1).await;
        let (consumer_stop, consumer) = env.consumer(ConsumerConfig::default());
        // Each record the DLQ must hold, in order.
        let mut expected_dead: Vec<ExpectedDeadLetter> = Vec::new();
        let mut offset = 0i64;

        // 0: the registration.
        env.produce(&registration("L1")).await;
        offset += 1;
        let m = |n: u32| sms("L1", &format!("L1-m{n}"), "ok");

        // 1: malformed Avro (a valid frame, the body cut short).
        let whole = encode_inbound(&sms("L1", "cut", "eta 2:30"));
        let cut = whole[..whole.len() - 6].to_vec();
        env.produce_raw("L1", &cut, &[("source", "sms-gateway")]).await;
        expected_dead.push((offset, "bad_avro_body", None, "Avro body", cut));
        offset += 1;
        env.produce(&m(1)).await; // 2
        offset += 1;

        // 3: an unknown schema id (999).
        let mut unknown_id = encode_inbound(&sms("L1", "sid", "ok"));
        unknown_id[1..5].copy_from_slice(&999u32.to_be_bytes());
        env.produce_raw("L1", &unknown_id, &[]).await;
        expected_dead.push((offset, "unknown_schema_id", None, "999", unknown_id));
        offset += 1;
        env.produce(&m(2)).await; // 4
        offset += 1;

        // 5: keyed L1, about L2.
        let mismatched = encode_inbound(&sms("L2", "other-load", "ok"));
        env.produce_raw("L1", &mismatched, &[]).await;
        expected_dead.push((offset, "key_mismatch", Some("load_id"), "L2", mismatched));
        offset += 1;
        env.produce(&m(3)).await; // 6
        offset += 1;

        // 7: a load that was never registered (another key on the same partition).
        let unknown_load = encode_inbound(&sms("L9", "L9-m1", "ok"));
        env.produce_raw("L9", &unknown_load, &[]).await;
        expected_dead.push((offset, "unknown_load", None, "L9", unknown_load));
        offset += 1;
        env.produce(&m(4)).await; // 8
        offset += 1;

        // 9: a message from a number that is no contact of the load: decided (behavior.md §6).
        let stranger = InboundEvent {
            kind: EventKind::Sms { from: "+15550009999".into(), text: "who is this".into() },
            ..sms("L1", "L1-stranger", "")
        };
        env.produce(&stranger).await;
        offset += 1;

        // 10: an SMS over the 16 KiB text limit.
        let oversized = encode_inbound(&sms("L1", "L1-long", &"x".repeat(20 * 1024)));
        env.produce_raw("L1", &oversized, &[]).await;
        expected_dead.push((offset, "oversized", Some("payload.text"), "20480 bytes", oversized));
        offset += 1;
        env.produce(&m(5)).await; // 11
        offset += 1;

        // 12: a string that is not UTF-8 inside the Avro body.
        let mut not_utf8 = encode_inbound(&sms("L1", "L1-utf8", "QQ"));
        let at = not_utf8.windows(2).position(|w| w == b"QQ").expect("the text");
        not_utf8[at..at + 2].copy_from_slice(&[0xc3, 0x28]);
        env.produce_raw("L1", &not_utf8, &[]).await;
        expected_dead.push((offset, "invalid_utf8", None, "utf-8", not_utf8));
        offset += 1;
        env.produce(&m(6)).await; // 13
        offset += 1;

        // 14, 15: times three days ahead of the worker's clock, and two years behind it.
        for (id, shift, word) in [
            ("L1-future", chrono::Duration::days(3), "future"),
            ("L1-past", chrono::Duration::days(-730), "past"),
        ] {
            let mut e = sms("L1", id, "eta 2:30");
            e.occurred_at += shift;
            let value = encode_inbound(&e);
            env.produce_raw("L1", &value, &[]).await;
            expected_dead.push((offset, "bad_timestamp", Some("occurred_at"), word, value));
            offset += 1;
        }
        env.produce(&m(7)).await; // 16
        offset += 1;

        // 17: the id of m1 again, for another message.
        let reused = encode_inbound(&sms("L1", "L1-m1", "running 2 hours late, flat tire"));
        env.produce_raw("L1", &reused, &[]).await;
        expected_dead.push((offset, "event_id_reused", Some("event_id"), "L1-m1", reused));
        offset += 1;
        // 18: m1 itself again (a redelivery): already processed, not a dead letter.
        env.produce(&m(1)).await;
        offset += 1;
        env.produce(&m(8)).await; // 19
        offset += 1;

        eventually(Duration::from_secs(30), "the last good record decided", || async {
            env.event_ids("L1").await.contains(&"L1-m8".to_string())
        })
        .await;
        let mut want = vec!["load_registered:L1".to_string()];
        want.extend((1..=4).map(|n| format!("L1-m{n}")));
        want.push("L1-stranger".into());
        want.extend((5..=8).map(|n| format!("L1-m{n}")));
        assert_eq!(env.event_ids("L1").await, want, "every good record decided once, in order");
        assert!(env.event_ids("L9").await.is_empty(), "nothing logged for the unknown load");

        // Each logged event has its decision; the stranger's is a non-urgent Hero task, no reply.
        let log = env.log("L1").await;
        let decisions: Vec<_> = log
            .iter()
            .filter_map(|e| match e {
                LogEntry::Decision(d) => Some(d),
                LogEntry::Event(_) => None,
            })
            .collect();
        assert_eq!(decisions.len(), want.len(), "one decision per event");
        let stranger_decision =
            decisions.iter().find(|d| d.trigger_event_id == "L1-stranger").expect("the stranger's decision");
        let actions: Vec<_> = stranger_decision.effective_actions().collect();
        assert_eq!(actions.len(), 1, "{actions:?}");
        match &actions[0].body {
            load_agent_domain::ActionBody::CreateHeroTask { title, body, urgent } => {
                assert!(!urgent, "not urgent");
                let text = format!("{title} {body}").to_lowercase();
                assert!(text.contains("unknown sender"), "{text}");
            }
            other => panic!("expected a Hero task, got {other:?}"),
        }

        // The DLQ: each bad record with its reason, its source and its original bytes.
        eventually(Duration::from_secs(10), "every bad record on the DLQ", || async {
            env.topic(&env.kafka.dlq_topic).await.len() >= expected_dead.len()
        })
        .await;
        let mut dead = env.topic(&env.kafka.dlq_topic).await;
        assert_eq!(dead.len(), expected_dead.len(), "{dead:#?}");
        // Loads run concurrently (L9 beside L1): the DLQ holds them in the order they finished.
        dead.sort_by_key(|r| header(r, "dlq-source-offset").and_then(|o| o.parse::<i64>().ok()));
        for (r, (offset, code, field, word, bytes)) in dead.iter().zip(&expected_dead) {
            let what = format!("DLQ record of offset {offset} ({code}): {r:?}");
            assert_eq!(header(r, "dlq-source-offset"), Some(offset.to_string().as_str()), "{what}");
            assert_eq!(header(r, "dlq-source-partition"), Some("0"), "{what}");
            assert_eq!(header(r, "dlq-source-topic"), Some(env.kafka.events_topic.as_str()), "{what}");
            assert_eq!(header(r, "dlq-error-code"), Some(*code), "{what}");
            let kind = if ["bad_avro_body", "unknown_schema_id", "invalid_utf8"].contains(code) {
                "decode"
            } else {
                "invalid_event"
            };
            assert_eq!(header(r, "dlq-reason-kind"), Some(kind), "{what}");
            assert_eq!(header(r, "dlq-error-field"), *field, "{what}");
            let error = header(r, "dlq-error").unwrap_or_default();
            assert!(
                error.to_lowercase().contains(&word.to_lowercase()),
                "the error names the problem: {what}"
            );
            let original = r.to_record().expect("record").value;
            assert_eq!(original.as_deref(), Some(bytes.as_slice()), "the original bytes: {what}");
        }
        assert_eq!(header(&dead[0], "source"), Some("sms-gateway"), "the original headers are kept");
        assert_eq!(dead[3].key.as_deref(), Some("L9"), "the original key");

        let report = stop("the consumer", consumer_stop, consumer).await.expect("consumer");
        assert_eq!(report.dead_letters, expected_dead.len() as u64, "{report:?}");
        assert_eq!(env.committed(1).await.get(&0), Some(&offset), "the partition moved past every record");
        assert_eq!(offset, 20);
        env.close().await;
    })
}

fn email(load: &str, id: &str, text: String) -> InboundEvent {
    InboundEvent {
        event_id: id.into(),
        load_id: load.into(),
        occurred_at: Utc::now(),
        kind: EventKind::Email {
            from: "dispatch@carrier.example".into(),
            subject: "update".into(),
            text,
            thread: None,
        },
    }
}

/// What one dead letter of [`dead_letters_of_every_size_reach_the_dlq_and_their_load_goes_on`]
/// must look like: whole (the original value in the DLQ) or reduced (the value in
/// `dead_letters`, the DLQ record pointing to it).
struct ExpectedLetter {
    offset: i64,
    value: Vec<u8>,
    code: &'static str,
    whole: bool,
}

async fn assert_dead_letters(env: &Env, expected: &[ExpectedLetter]) {
    let dead = env.topic(&env.kafka.dlq_topic).await;
    assert_eq!(dead.len(), expected.len(), "one DLQ record per dead letter");
    for (record, want) in dead.iter().zip(expected) {
        let what = format!("offset {} ({} bytes)", want.offset, want.value.len());
        assert_eq!(header(record, "dlq-source-offset"), Some(want.offset.to_string().as_str()), "{what}");
        assert_eq!(header(record, "dlq-error-code"), Some(want.code), "{what}");
        assert_eq!(record.key.as_deref(), Some("L1"), "{what}: the key is kept");
        assert_eq!(header(record, "source"), Some("sizes-test"), "{what}: the original headers are kept");
        let value = record.to_record().expect("record").value;
        if want.whole {
            assert_eq!(value.as_deref(), Some(want.value.as_slice()), "{what}: whole in the DLQ");
            assert_eq!(header(record, "dlq-reduced"), None, "{what}");
        } else {
            assert_eq!(value, None, "{what}: reduced");
            assert!(header(record, "dlq-reduced").is_some(), "{what}");
            assert_eq!(
                header(record, "dlq-original-size"),
                Some(want.value.len().to_string().as_str()),
                "{what}"
            );
            let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&want.value));
            assert_eq!(header(record, "dlq-original-sha256"), Some(sha.as_str()), "{what}");
            let reference = format!("{}/0/{}", env.kafka.events_topic, want.offset);
            assert_eq!(
                header(record, "dlq-body"),
                Some(format!("dead_letters:{reference}").as_str()),
                "{what}"
            );
            let kept = within(
                Duration::from_secs(60),
                "a kept dead letter read",
                env.stores.dead_letters.kept_dead_letter(&env.kafka.events_topic, 0, want.offset),
            )
            .await
            .expect("read dead_letters")
            .expect("kept");
            assert_eq!(kept.value.as_deref(), Some(want.value.as_slice()), "{what}: the whole value is kept");
            assert_eq!(kept.key.as_deref(), Some(&b"L1"[..]), "{what}");
            assert_eq!(kept.error_code, want.code, "{what}");
        }
    }
}

/// Produces `value` keyed L1 with a `source` header, then a good message: returns the dead
/// letter's offset and moves `offset` past both.
async fn produce_sized(env: &Env, offset: &mut i64, n: u32, value: &[u8]) -> i64 {
    env.produce_raw("L1", value, &[("source", "sizes-test")]).await;
    env.produce(&sms("L1", &format!("L1-m{n}"), "ok")).await;
    *offset += 2;
    *offset - 2
}

#[test]
fn dead_letters_of_every_size_reach_the_dlq_and_their_load_goes_on() {
    run(async {
        use load_agent_ingest::MAX_RECORD_BYTES;
        use load_agent_kafka::dlq::PRODUCER_MAX_BYTES;

        // The events topic takes records far larger than the service; the DLQ topic as
        // `ensure_topics` creates it (max.message.bytes = the producer's limit).
        let env = Env::with_limits("sizes", 1, TopicLimits { events: Some(3_000_000), dlq: None }).await;
        let (consumer_stop, consumer) = env.consumer(ConsumerConfig::default());
        env.produce(&registration("L1")).await;
        let mut offset = 1i64;
        let mut expected = Vec::new();
        // An email of about 1,000,150 bytes, invalid (its text is over 256 KiB): librdkafka's
        // default message.max.bytes (1,000,000) used to refuse its dead letter forever.
        let big_email = encode_inbound(&email("L1", "L1-big-email", "x".repeat(1_000_000)));
        assert!(big_email.len() > 1_000_000 && big_email.len() < MAX_RECORD_BYTES);
        let at = produce_sized(&env, &mut offset, 1, &big_email).await;
        expected.push(ExpectedLetter { offset: at, value: big_email, code: "oversized", whole: true });
        // Just under and just over the service's own record limit: decoded (a bad frame) vs not.
        for (n, len, code) in
            [(2, MAX_RECORD_BYTES, "bad_magic"), (3, MAX_RECORD_BYTES + 1, "record_too_large")]
        {
            let value = vec![b'x'; len];
            let at = produce_sized(&env, &mut offset, n, &value).await;
            expected.push(ExpectedLetter { offset: at, value, code, whole: true });
        }
        // Just under and just over what the DLQ topic and the producer take (a dead letter is the
        // value plus its headers), then far over it.
        for (n, len, whole) in [
            (4, PRODUCER_MAX_BYTES - 1024, true),
            (5, PRODUCER_MAX_BYTES - 100, false),
            (6, 2_500_000, false),
        ] {
            let value = vec![b'x'; len];
            let at = produce_sized(&env, &mut offset, n, &value).await;
            expected.push(ExpectedLetter { offset: at, value, code: "record_too_large", whole });
        }
        eventually(Duration::from_secs(60), "the message after the last dead letter decided", || async {
            env.event_ids("L1").await.contains(&"L1-m6".to_string())
        })
        .await;
        let mut want = vec!["load_registered:L1".to_string()];
        want.extend((1..=6).map(|n| format!("L1-m{n}")));
        assert_eq!(env.event_ids("L1").await, want, "no dead letter blocked its load");
        assert_dead_letters(&env, &expected).await;
        let report = stop("the consumer", consumer_stop, consumer).await.expect("consumer");
        assert_eq!(report.dead_letters, expected.len() as u64, "the count is what was written: {report:?}");
        assert_eq!(env.committed(1).await.get(&0), Some(&offset), "the partition moved past every record");
        env.close().await;
    })
}

#[test]
fn a_dlq_topic_at_the_brokers_default_limit_gets_reduced_dead_letters_for_the_largest_records() {
    run(async {
        use load_agent_ingest::MAX_RECORD_BYTES;

        let env =
            Env::with_limits("dlqdefault", 1, TopicLimits { events: Some(3_000_000), dlq: Some(None) }).await;
        let (consumer_stop, consumer) = env.consumer(ConsumerConfig::default());
        env.produce(&registration("L1")).await;
        let mut offset = 1i64;
        let mut expected = Vec::new();
        let big_email = encode_inbound(&email("L1", "L1-big-email", "x".repeat(1_000_000)));
        let at = produce_sized(&env, &mut offset, 1, &big_email).await;
        expected.push(ExpectedLetter { offset: at, value: big_email, code: "oversized", whole: true });
        // At the service's limit the dead letter (value + headers) is over Kafka's default 1 MiB + 12.
        let value = vec![b'x'; MAX_RECORD_BYTES];
        let at = produce_sized(&env, &mut offset, 2, &value).await;
        expected.push(ExpectedLetter { offset: at, value, code: "bad_magic", whole: false });
        eventually(Duration::from_secs(60), "the message after the last dead letter decided", || async {
            env.event_ids("L1").await.contains(&"L1-m2".to_string())
        })
        .await;
        assert_dead_letters(&env, &expected).await;
        let report = stop("the consumer", consumer_stop, consumer).await.expect("consumer");
        assert_eq!(report.dead_letters, 2, "{report:?}");
        assert_eq!(env.committed(1).await.get(&0), Some(&offset));
        env.close().await;
    })
}

#[test]
fn a_dlq_topic_too_small_for_a_reduced_dead_letter_stops_the_consumer_at_start_naming_both_limits() {
    run(async {
        let env = Env::with_limits("dlqtiny", 1, TopicLimits { events: None, dlq: Some(Some(1000)) }).await;
        let (_consumer_stop, consumer) = env.consumer(ConsumerConfig::default());
        let err = within(Duration::from_secs(60), "the consumer to stop at start", consumer)
            .await
            .expect("task")
            .expect_err("refused");
        let text = err.to_string();
        assert!(text.contains(&env.kafka.dlq_topic) && text.contains("1000 bytes"), "{text}");
        assert!(text.contains("max.message.bytes") && text.contains("32768"), "{text}");
        env.close().await;
    })
}

#[test]
fn a_dead_letter_the_broker_refuses_for_good_is_written_reduced() {
    run(async {
        use load_agent_ingest::{DeadLetter, DeadLetterKind, InboundRecord};
        use load_agent_kafka::dlq::PRODUCER_MAX_BYTES;
        use load_agent_kafka::{DlqProducer, DlqWritten};

        // The producer believes the topic takes its own limit; the broker refuses anything over
        // 100,000 bytes: a permanent error, so the record goes to dead_letters and a reduced record
        // to the DLQ.
        let env =
            Env::with_limits("dlqrefused", 1, TopicLimits { events: None, dlq: Some(Some(100_000)) }).await;
        let dlq = DlqProducer::new(&env.kafka, env.stores.dead_letters.clone())
            .expect("producer")
            .with_topic_limit(PRODUCER_MAX_BYTES);
        let record = InboundRecord {
            topic: env.kafka.events_topic.clone(),
            partition: 0,
            offset: 41,
            timestamp_ms: None,
            key: Some(b"L1".to_vec()),
            headers: vec![("source".into(), b"sizes-test".to_vec())],
            value: Some(vec![b'x'; 200_000]),
        };
        let dead = DeadLetter {
            kind: DeadLetterKind::Decode,
            code: "bad_magic",
            error: "bad magic".into(),
            field: None,
        };
        let written = within(Duration::from_secs(60), "the dead letter written", dlq.write(&record, &dead))
            .await
            .expect("written");
        assert!(
            matches!(&written, DlqWritten::Reduced { why, .. } if why.contains("refused")),
            "{written:?}"
        );
        assert_dead_letters(
            &env,
            &[ExpectedLetter { offset: 41, value: vec![b'x'; 200_000], code: "bad_magic", whole: false }],
        )
        .await;
        env.close().await;
    })
}
