//! Outages during traffic (issue 10): Postgres restarted, and the Kafka broker restarted, while
//! `serve` is taking events. The service recovers without an operator (the process never
//! exits), and afterwards ADR 0003's guarantees hold (`common::assert_guarantees`).
//!
//! These tests restart shared services, so they are `#[ignore]`d in the normal run and
//! `./scripts/test.sh` runs them on their own, one at a time, after every other test:
//! `cargo test -p load-agent --features kafka --test outage -- --ignored --test-threads=1`.
//! The broker test starts its own Nisshi with durable (SQLite) storage on a port of its own,
//! so that a restart keeps topics and committed offsets as a Kafka cluster would.
#![cfg(feature = "kafka")]

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Db, ServeConfig, assert_guarantees, env, free_port, produce, producer, traffic};
use load_agent_domain::InboundEvent;

/// Publishes `events` over about `secs` seconds from a task of its own.
fn trickle(
    brokers: String,
    topic: String,
    events: Vec<InboundEvent>,
    secs: f64,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let producer = producer(&brokers);
        let pause = Duration::from_secs_f64(secs / events.len().max(1) as f64);
        for chunk in events.chunks(4) {
            produce(&producer, &topic, chunk).await;
            tokio::time::sleep(pause * 4).await;
        }
    })
}

fn assert_alive(serve: &mut common::Serve) {
    if let Ok(Some(status)) = serve.child.try_wait() {
        panic!("serve exited during the outage ({status}): an operator would have had to restart it");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "restarts the shared Postgres: run by scripts/test.sh on its own"]
async fn postgres_restarted_during_traffic_the_service_recovers_and_loses_nothing() {
    let brokers = env("KAFKA_BROKERS");
    let run = format!("outage_pg_{}", std::process::id());
    let db = Db::fresh(&run).await;
    let cfg = ServeConfig { brokers: &brokers, db_url: &db.url, prefix: &run, extra_env: vec![] };
    let mut serve = cfg.spawn(None);
    serve.ready().await;
    let events = traffic(&run, 40);
    let sender = trickle(brokers.clone(), cfg.events_topic(), events.clone(), 8.0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let version = std::fs::read_dir("/etc/postgresql")
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .expect("a PostgreSQL cluster under /etc/postgresql");
    let status = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .expect("pg_ctlcluster");
    assert!(status.success(), "Postgres restarted");
    sender.await.expect("traffic sent");
    assert_alive(&mut serve);
    // The test's own pool lost its connections too; sqlx reconnects on the next query.
    assert_guarantees(&db, &cfg, &events).await;
    assert_alive(&mut serve);
    drop(serve);
    db.drop_database().await;
}

/// A Nisshi broker with SQLite storage in `dir`, on `port`.
struct Broker {
    child: Child,
}

impl Broker {
    fn start(dir: &std::path::Path, port: u16) -> Broker {
        let bin = std::env::var("NISSHI_BIN").map(PathBuf::from).unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/nisshi/bin/nisshi")
        });
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&bin)
            .current_dir(dir)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "sqlite://broker.db", "--group-initial-rebalance-delay", "100ms"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e} (scripts/kafka-broker.sh start unpacks it)", bin.display()));
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nisshi did not start on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Broker { child }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "restarts a broker: run by scripts/test.sh on its own"]
async fn the_broker_restarted_during_traffic_the_service_recovers_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("broker folder");
    let port = free_port();
    let mut broker = Broker::start(dir.path(), port);
    let brokers = format!("127.0.0.1:{port}");
    let run = format!("outage_kafka_{}", std::process::id());
    let db = Db::fresh(&run).await;
    let cfg = ServeConfig { brokers: &brokers, db_url: &db.url, prefix: &run, extra_env: vec![] };
    let mut serve = cfg.spawn(None);
    serve.ready().await;
    let events = traffic(&run, 40);
    let sender = trickle(brokers.clone(), cfg.events_topic(), events.clone(), 8.0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    broker.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _broker = Broker::start(dir.path(), port);
    sender.await.expect("traffic sent (the producer retries while the broker is down)");
    assert_alive(&mut serve);
    assert_guarantees(&db, &cfg, &events).await;
    assert_alive(&mut serve);
    drop(serve);
    db.drop_database().await;
}
