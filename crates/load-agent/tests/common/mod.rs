//! What the production-mode tests share: a fresh Postgres database, `load-agent serve` as a
//! child process on its own topics, Avro events produced with a plain rdkafka producer, and
//! the checks of ADR 0003's guarantees read back from Postgres and the action topics.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use chrono::Utc;
use load_agent_domain::{Contact, EventKind, InboundEvent, LoadRegistered, RiskBand};
use load_agent_store::PgStore;
use load_agent_testkit::events::event;
use load_agent_testkit::load::{driver, sample_load};
use load_agent_testkit::wait::eventually;
use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sqlx::PgPool;

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run ./scripts/test.sh"))
}

/// A port free now, for a child service to bind. Chosen below Linux's ephemeral range
/// (32768–60999): a port the kernel handed out for `bind(0)` is soon handed out again as the
/// local port of an outgoing connection (the Kafka clients open many), and the child then fails
/// with "address already in use". Each call moves on, so concurrent tests get different ports.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::process::id() % 1000 * 11;
    for _ in 0..2000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + (base + n * 7) % 12_000;
        let Ok(port) = u16::try_from(port) else { continue };
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between 20000 and 32000")
}

/// A client_a load ([`sample_load`]) with one driver (SMS, a phone of its own) whose appointments
/// are `now`-relative.
pub fn registration(load_id: &str) -> InboundEvent {
    let now = Utc::now();
    let phone = format!("+1312555{:04}", load_id.len() * 37 % 10_000);
    let mut load = LoadRegistered {
        contacts: vec![Contact { phone: Some(phone), ..driver("Luis") }],
        ..sample_load(load_id)
    };
    for (stop, hours) in load.stops.iter_mut().zip([3, 12]) {
        stop.appointment = (now + chrono::Duration::hours(hours)).fixed_offset();
    }
    event(load_id, &format!("reg-{load_id}"), now, EventKind::LoadRegistered { load })
}

pub fn ping(load_id: &str, n: u32, band: RiskBand) -> InboundEvent {
    let now = Utc::now();
    InboundEvent {
        event_id: format!("{load_id}-ping-{n}"),
        load_id: load_id.into(),
        occurred_at: now,
        kind: EventKind::Ping { stop: 1, delay_risk: band, recorded_at: now, lat: None, lon: None },
    }
}

pub fn sms(load_id: &str, n: u32, text: &str) -> InboundEvent {
    InboundEvent {
        event_id: format!("{load_id}-sms-{n}"),
        load_id: load_id.into(),
        occurred_at: Utc::now(),
        kind: EventKind::Sms { from: "drv".into(), text: text.into() },
    }
}

/// `loads` loads: registration, a high-risk ping (an ETA ask by SMS and a timer), a driver
/// question and an ETA reply.
pub fn traffic(run: &str, loads: usize) -> Vec<InboundEvent> {
    let mut events = Vec::new();
    for i in 0..loads {
        let load = format!("{run}-L{i}");
        events.push(registration(&load));
        events.push(ping(&load, 1, RiskBand::High));
        events.push(sms(&load, 1, "whats the po# for this one"));
        events.push(sms(&load, 2, "running late, there by 3pm"));
    }
    events
}

/// A fresh database, dropped at the end of the test.
pub struct Db {
    pub admin: PgPool,
    pub name: String,
    pub url: String,
    pub pool: PgPool,
}

impl Db {
    pub async fn fresh(name: &str) -> Db {
        let base = env("DATABASE_URL");
        let admin = PgPool::connect(&base).await.expect("Postgres is reachable");
        sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&admin)
            .await
            .expect("drop");
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.expect("create database");
        let url = match base.rsplit_once('/') {
            Some((prefix, _)) => format!("{prefix}/{name}"),
            None => panic!("DATABASE_URL has no database name"),
        };
        load_agent_store::migrate(&url).await.expect("migrate");
        let pool = PgPool::connect(&url).await.expect("connect to the fresh database");
        Db { admin, name: name.into(), url, pool }
    }

    pub async fn drop_database(self) {
        self.pool.close().await;
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name))
            .execute(&self.admin)
            .await;
        self.admin.close().await;
    }

    pub async fn scalar(&self, sql: &str) -> i64 {
        sqlx::query_scalar::<_, i64>(sql).fetch_one(&self.pool).await.unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Ids of the inbound events in the log with how many decisions each has.
    pub async fn decisions_per_event(&self) -> BTreeMap<String, i64> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT e.entry_id, (SELECT count(*) FROM log_entries d \
               WHERE d.load_id = e.load_id AND d.entry_id = 'dec:' || e.entry_id) \
             FROM log_entries e WHERE e.kind <> 'decision'",
        )
        .fetch_all(&self.pool)
        .await
        .expect("decisions per event");
        rows.into_iter().collect()
    }
}

/// `load-agent serve` in production mode on topics `<prefix>.*`.
pub struct Serve {
    pub child: Child,
    pub port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct ServeConfig<'a> {
    pub brokers: &'a str,
    pub db_url: &'a str,
    pub prefix: &'a str,
    pub extra_env: Vec<(&'a str, String)>,
}

impl ServeConfig<'_> {
    pub fn events_topic(&self) -> String {
        format!("{}.events", self.prefix)
    }

    pub fn action_topics(&self) -> Vec<String> {
        // The destinations with an action topic (load_agent_kafka::ACTION_DESTINATIONS): every
        // one but `timer`. Named here so that the default build's tests need no Kafka crate.
        load_agent_domain::Destination::ALL
            .iter()
            .filter(|d| **d != load_agent_domain::Destination::Timer)
            .map(|d| format!("{}.actions.{}", self.prefix, d.as_str()))
            .collect()
    }

    /// Starts serve; `crash_at` arms a crash point (`LOAD_AGENT_CRASH_AT`).
    pub fn spawn(&self, crash_at: Option<&str>) -> Serve {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_load-agent"));
        cmd.arg("serve")
            .env("LOAD_AGENT_KAFKA_BROKERS", self.brokers)
            .env("LOAD_AGENT_DATABASE_URL", self.db_url)
            .env("LOAD_AGENT_KAFKA_EVENTS_TOPIC", self.events_topic())
            .env("LOAD_AGENT_KAFKA_DLQ_TOPIC", format!("{}.events.dlq", self.prefix))
            .env("LOAD_AGENT_KAFKA_ACTIONS_TOPIC_PREFIX", format!("{}.actions", self.prefix))
            .env("LOAD_AGENT_KAFKA_GROUP_ID", format!("{}-group", self.prefix))
            .env("LOAD_AGENT_KAFKA_CREATE_TOPICS", "true")
            .env("LOAD_AGENT_KAFKA_PARTITIONS", "3")
            // A killed serve's partitions move to the next one after 6 s, not 45.
            .env("LOAD_AGENT_KAFKA_SESSION_TIMEOUT_MS", "6000")
            .env("LOAD_AGENT_KAFKA_HEARTBEAT_INTERVAL_MS", "1000")
            .env("LOAD_AGENT_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("LOAD_AGENT_SHUTDOWN_GRACE_SECS", "15")
            .env("LOAD_AGENT_TIMERS_POLL_SECS", "1")
            .env("LOAD_AGENT_RELAY_LEASE_SECS", "10")
            .env("LOAD_AGENT_RELAY_POLL_MS", "100")
            .env("LOAD_AGENT_LOG_LEVEL", "warn")
            .env_remove("LOAD_AGENT_CRASH_AT")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        if let Some(point) = crash_at {
            cmd.env("LOAD_AGENT_CRASH_AT", point);
        }
        Serve { child: cmd.spawn().expect("start load-agent serve"), port }
    }
}

impl Serve {
    pub async fn ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some((200, _)) = http_get(self.port, "/readyz").await {
                return;
            }
            assert!(Instant::now() < deadline, "serve did not become ready");
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("serve exited early: {status}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits for the process to end by itself (a crash point).
    pub async fn exited(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(Instant::now() < deadline, "serve did not crash within {within:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        let _ = Command::new("kill").args(["-KILL", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let resp = reqwest::get(format!("http://127.0.0.1:{port}{path}")).await.ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.text().await.ok()?))
}

pub fn producer(brokers: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("partitioner", "murmur2_random")
        .set("enable.idempotence", "true")
        .create()
        .expect("producer")
}

/// Produces Avro events (Confluent framing) keyed by load_id.
pub async fn produce(producer: &FutureProducer, topic: &str, events: &[InboundEvent]) {
    for event in events {
        let bytes = load_agent_avro::encode_inbound(event);
        producer
            .send(FutureRecord::to(topic).key(&event.load_id).payload(&bytes), Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .expect("produce");
    }
}

/// How often a test polls a check that runs the CLI or reads a topic from its start (lighter
/// checks poll at the testkit's default).
pub const HEAVY_POLL: Duration = Duration::from_millis(250);

/// A delivery service downstream of the action topics, deduplicating by idempotency key as
/// the integration contract asks: it counts the records it saw again separately from the
/// messages its contacts got.
#[derive(Debug, Default)]
pub struct DedupingService {
    pub delivered: BTreeSet<String>,
    /// Records whose key the service had already seen (redeliveries after a crash).
    pub duplicates: usize,
}

impl DedupingService {
    /// Reads every action topic from the start until no record arrives for `idle`.
    pub async fn read_all(brokers: &str, topics: &[String], group: &str, idle: Duration) -> DedupingService {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", group)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer.subscribe(&names).expect("subscribe");
        let mut service = DedupingService::default();
        while let Ok(Ok(m)) = tokio::time::timeout(idle, consumer.recv()).await {
            let key = m
                .headers()
                .and_then(|h| h.iter().find(|x| x.key == "idempotency-key").and_then(|x| x.value))
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .expect("every action record carries its idempotency key");
            if !service.delivered.insert(key) {
                service.duplicates += 1;
            }
        }
        service
    }
}

/// ADR 0003 after a crash and a restart: every inbound event has exactly one decision; every
/// committed action left the outbox (dispatched, or dead with a failed outcome) and reached
/// the delivery services exactly once by key; no timer is lost. Returns the service's view.
pub async fn assert_guarantees(
    db: &Db,
    cfg: &ServeConfig<'_>,
    published: &[InboundEvent],
) -> DedupingService {
    eventually(
        Duration::from_secs(120),
        "every published event decided, every action out of the outbox",
        || async {
            let decided = db.decisions_per_event().await;
            let missing: Vec<&str> = published
                .iter()
                .map(|e| e.event_id.as_str())
                .filter(|id| !decided.contains_key(*id))
                .collect();
            if !missing.is_empty() {
                return Err(format!("{} events not in the log yet, e.g. {:?}", missing.len(), &missing[..1]));
            }
            if let Some((id, n)) = decided.iter().find(|(_, n)| **n != 1) {
                return Err(format!("event {id} has {n} decisions"));
            }
            let pending = db.scalar("SELECT count(*) FROM outbox WHERE status = 'pending'").await;
            if pending > 0 {
                return Err(format!("{pending} outbox rows still pending"));
            }
            Ok(())
        },
    )
    .await;
    // Exactly one decision per event: the unique (load_id, entry_id) index would refuse a
    // second, and none is missing.
    let decided = db.decisions_per_event().await;
    assert!(decided.values().all(|n| *n == 1), "one decision per inbound event");
    // Dead rows have a failed outcome in their load's log.
    let dead_without_outcome = db
        .scalar(
            "SELECT count(*) FROM outbox o WHERE o.status = 'dead' AND NOT EXISTS \
             (SELECT 1 FROM log_entries l WHERE l.load_id = o.load_id AND l.entry_id = 'out:failed_permanent:' || o.id)",
        )
        .await;
    assert_eq!(dead_without_outcome, 0, "every dead row has a failed outcome");
    // No timer lost: every scheduled timer is in the future; due ones fired.
    let overdue = db
        .scalar("SELECT count(*) FROM timers WHERE status = 'scheduled' AND fire_at < now() - interval '30 seconds'")
        .await;
    assert_eq!(overdue, 0, "a due timer was not fired");
    // Each dispatched action reached the services exactly once by key.
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM outbox WHERE status = 'dispatched' AND destination <> 'timer' ORDER BY id",
    )
    .fetch_all(&db.pool)
    .await
    .expect("dispatched rows");
    let group = format!("{}-reader-{}", cfg.prefix, Utc::now().timestamp_micros());
    let service =
        DedupingService::read_all(cfg.brokers, &cfg.action_topics(), &group, Duration::from_secs(5)).await;
    let rows: BTreeSet<String> = rows.into_iter().collect();
    assert_eq!(service.delivered, rows, "the services got every dispatched action once, and nothing else");
    service
}

/// A finished `load-agent` run's stdout and stderr, for assertion messages.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A fresh store in its own schema (`{prefix}_{uuid}`) of `DATABASE_URL`'s database, and the URL
/// whose connections use that schema: what a CLI run gets as `LOAD_AGENT_DATABASE_URL`.
pub async fn schema_store(prefix: &str) -> (PgStore, String) {
    let base =
        std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let store = PgStore::connect_in_schema(&base, &schema).await.expect("a Postgres schema (DATABASE_URL)");
    let sep = if base.contains('?') { '&' } else { '?' };
    (store, format!("{base}{sep}options=-c%20search_path%3D{schema}"))
}
