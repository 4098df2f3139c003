//! `load-agent serve` in production mode against the real Kafka-protocol broker and Postgres:
//! Avro events in, decisions in Postgres, action records on the action topics, the named metrics
//! on `/metrics`, and a SIGTERM that stops it within the grace period.
//!
//! Needs `KAFKA_BROKERS` and `DATABASE_URL`: run `./scripts/test.sh`, which starts both.
#![cfg(feature = "kafka")]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{HEAVY_POLL, Serve, env, free_port, http_get, ping, registration};
use load_agent_domain::RiskBand;
use load_agent_testkit::wait::eventually_every;
use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_in_production_mode_decides_from_kafka_and_publishes_actions() {
    let brokers = env("KAFKA_BROKERS");
    let base_url = env("DATABASE_URL");
    let run = format!("prod{}", std::process::id());
    // A fresh database for this test.
    let admin = sqlx::PgPool::connect(&base_url).await.expect("Postgres is reachable");
    sqlx::query(&format!("DROP DATABASE IF EXISTS {run}")).execute(&admin).await.expect("drop");
    sqlx::query(&format!("CREATE DATABASE {run}")).execute(&admin).await.expect("create database");
    let db_url = match base_url.rsplit_once('/') {
        Some((prefix, _)) => format!("{prefix}/{run}"),
        None => panic!("DATABASE_URL has no database name"),
    };
    let port = free_port();
    let prefix = format!("{run}.");
    let child = Command::new(env!("CARGO_BIN_EXE_load-agent"))
        .arg("serve")
        .env("LOAD_AGENT_KAFKA_BROKERS", &brokers)
        .env("LOAD_AGENT_DATABASE_URL", &db_url)
        .env("LOAD_AGENT_KAFKA_EVENTS_TOPIC", format!("{prefix}events"))
        .env("LOAD_AGENT_KAFKA_DLQ_TOPIC", format!("{prefix}events.dlq"))
        .env("LOAD_AGENT_KAFKA_ACTIONS_TOPIC_PREFIX", format!("{prefix}actions"))
        .env("LOAD_AGENT_KAFKA_GROUP_ID", format!("{run}-group"))
        .env("LOAD_AGENT_KAFKA_CREATE_TOPICS", "true")
        .env("LOAD_AGENT_KAFKA_PARTITIONS", "3")
        .env("LOAD_AGENT_HTTP_ADDR", format!("127.0.0.1:{port}"))
        .env("LOAD_AGENT_SHUTDOWN_GRACE_SECS", "15")
        .env("LOAD_AGENT_TIMERS_POLL_SECS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start load-agent serve");
    let mut service = Serve { child, port };

    let deadline = Instant::now() + Duration::from_secs(60);
    while http_get(port, "/readyz").await.map(|r| r.0) != Some(200) {
        assert!(Instant::now() < deadline, "serve did not become ready");
        if let Ok(Some(status)) = service.child.try_wait() {
            panic!("serve exited early: {status}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A plain Kafka client publishes Avro events (Confluent framing), keyed by load_id.
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("partitioner", "murmur2_random")
        .create()
        .expect("producer");
    let load_id = format!("{run}-L1");
    let ping = ping(&load_id, 1, RiskBand::High);
    for event in [registration(&load_id), ping] {
        let bytes = load_agent_avro::encode_inbound(&event);
        producer
            .send(
                FutureRecord::to(&format!("{prefix}events")).key(&load_id).payload(&bytes),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .expect("produce");
    }

    // The decision lands in Postgres (read through GET /loads/{id}).
    let deadline = Instant::now() + Duration::from_secs(60);
    let view = loop {
        if let Some((200, body)) = http_get(port, &format!("/loads/{load_id}")).await
            && body.contains("send_sms")
        {
            break body;
        }
        assert!(Instant::now() < deadline, "no decision for {load_id}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let view: serde_json::Value = serde_json::from_str(&view).expect("json");
    assert_eq!(view["state"]["open_asks"][0]["ask_type"], "eta_request");

    // The SMS command is on the sms action topic with its idempotency key header.
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", format!("{run}-reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&[&format!("{prefix}actions.sms")]).expect("subscribe");
    let want = format!("{load_id}/ask:eta_request:{load_id}-ping-1/1/send_sms");
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let Ok(m) = consumer.recv().await else { continue };
            let key = m
                .headers()
                .and_then(|h| h.iter().find(|x| x.key == "idempotency-key").and_then(|x| x.value))
                .map(|v| String::from_utf8_lossy(v).into_owned());
            if key.as_deref() == Some(want.as_str()) {
                let cmd = load_agent_avro::decode_action_command(m.payload().unwrap_or_default())
                    .expect("ActionCommand");
                return cmd;
            }
        }
    })
    .await
    .expect("the SMS command reaches load-agent.actions.sms");
    assert_eq!(found.load_id, load_id);

    // The named metrics are on /metrics.
    let (status, metrics) = http_get(port, "/metrics").await.expect("metrics");
    assert_eq!(status, 200);
    for name in [
        "load_agent_outbox_oldest_pending_seconds",
        "load_agent_outbox_relay_lag_seconds",
        "load_agent_outbox_dead_rows_last_hour",
        "load_agent_timer_lag_seconds",
        "load_agent_conflicts_total",
        "load_agent_consumer_lag",
        "load_agent_consumer_broker_round_trip_seconds",
        "load_agent_producer_broker_round_trip_seconds",
        "load_agent_cache_hits_total",
        "load_agent_decisions_total",
        "load_agent_llm_calls_total",
        "load_agent_llm_cost_microusd_total",
    ] {
        assert!(metrics.contains(name), "/metrics lacks {name}");
    }
    assert!(metrics.contains("load_agent_decisions_total{path=\"sop\"}"), "decisions by path");
    // Every metric the alert rules and the dashboard of deploy/ query is one the service exports.
    let exported: std::collections::BTreeSet<&str> =
        metrics.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(['{', ' ']).next()).collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for file in ["deploy/prometheus/alerts.yml", "deploy/grafana/load-agent.json"] {
        let text = std::fs::read_to_string(root.join(file)).expect("the deploy file is committed");
        let named = metric_names(&text);
        assert!(named.len() >= 5, "{file} names {named:?}");
        for name in named {
            assert!(
                exported.contains(name.as_str()),
                "{file} queries {name}, which /metrics does not export"
            );
        }
    }

    // SIGTERM: it stops within the grace period.
    let pid = service.child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let stop_deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Ok(Some(s)) = service.child.try_wait() {
            break s;
        }
        assert!(Instant::now() < stop_deadline, "serve did not stop within the grace period");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "serve exited with {status}");
    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {run}")).execute(&admin).await;
    admin.close().await;
}

/// `load-agent topics ensure` against the broker: the first run creates every topic of the
/// configuration, a second finds them all; the broker then lists them with their partitions.
#[test]
fn topics_ensure_creates_the_missing_topics_and_leaves_existing_ones() {
    let brokers = env("KAFKA_BROKERS");
    let run = format!("topics{}", std::process::id());
    let ensure = || {
        let out = Command::new(env!("CARGO_BIN_EXE_load-agent"))
            .args(["topics", "ensure", "--partitions", "2"])
            .env("LOAD_AGENT_KAFKA_BROKERS", &brokers)
            .env("LOAD_AGENT_DATABASE_URL", env("DATABASE_URL"))
            .env("LOAD_AGENT_KAFKA_EVENTS_TOPIC", format!("{run}.events"))
            .env("LOAD_AGENT_KAFKA_DLQ_TOPIC", format!("{run}.events.dlq"))
            .env("LOAD_AGENT_KAFKA_ACTIONS_TOPIC_PREFIX", format!("{run}.actions"))
            .output()
            .expect("run load-agent topics ensure");
        assert!(out.status.success(), "topics ensure failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("UTF-8 output")
    };
    let first = ensure();
    for topic in ["events", "events.dlq", "actions.sms", "actions.hero", "actions.load_status"] {
        assert!(first.contains(&format!("{run}.{topic}\tcreated")), "{topic} not created:\n{first}");
    }
    assert!(first.contains("8 topics on") && first.ends_with("8 created\n"), "{first}");
    let second = ensure();
    assert!(second.contains(&format!("{run}.events\texists")), "{second}");
    assert!(second.ends_with("0 created\n"), "{second}");

    let consumer: rdkafka::consumer::BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", format!("{run}-meta"))
        .create()
        .expect("a metadata client");
    let topic = format!("{run}.actions.sms");
    let metadata = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10)).expect("metadata");
    assert_eq!(metadata.topics()[0].partitions().len(), 2, "created with --partitions 2");
    // The DLQ topic takes a dead letter of any record the service accepts, whole.
    let mut config = load_agent_kafka::KafkaConfig::new(brokers.clone());
    config.dlq_topic = format!("{run}.events.dlq");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let limit = runtime
        .block_on(load_agent_kafka::topic_max_message_bytes(&config, &config.dlq_topic))
        .expect("describe the DLQ topic");
    assert_eq!(limit, Some(load_agent_kafka::dlq::PRODUCER_MAX_BYTES));

    // Without brokers the command says so and exits 2.
    let out = Command::new(env!("CARGO_BIN_EXE_load-agent"))
        .args(["topics", "ensure"])
        .env_remove("LOAD_AGENT_KAFKA_BROKERS")
        .output()
        .expect("run load-agent topics ensure");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kafka.brokers"));
}

/// The `load_agent_*` metric names a PromQL text mentions.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("load_agent_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// A worker whose DLQ topic cannot hold even a reduced dead letter refuses to run: it exits
/// non-zero, naming the topic, its limit and the one it needs, instead of serving half.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_a_dlq_topic_too_small_for_any_dead_letter() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;

    let brokers = env("KAFKA_BROKERS");
    let run = format!("tinydlq{}", std::process::id());
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &brokers).create().expect("admin");
    let dlq = format!("{run}.events.dlq");
    let topic = NewTopic::new(&dlq, 1, TopicReplication::Fixed(1)).set("max.message.bytes", "1000");
    for r in admin.create_topics([&topic], &AdminOptions::new()).await.expect("create the DLQ topic") {
        r.expect("created");
    }
    let port = free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_load-agent"))
        .arg("worker")
        .env("LOAD_AGENT_KAFKA_BROKERS", &brokers)
        .env("LOAD_AGENT_DATABASE_URL", env("DATABASE_URL"))
        .env("LOAD_AGENT_KAFKA_EVENTS_TOPIC", format!("{run}.events"))
        .env("LOAD_AGENT_KAFKA_DLQ_TOPIC", &dlq)
        .env("LOAD_AGENT_KAFKA_ACTIONS_TOPIC_PREFIX", format!("{run}.actions"))
        .env("LOAD_AGENT_KAFKA_GROUP_ID", format!("{run}-group"))
        .env("LOAD_AGENT_KAFKA_CREATE_TOPICS", "true")
        .env("LOAD_AGENT_HTTP_ADDR", format!("127.0.0.1:{port}"))
        .env("LOAD_AGENT_LOG_FORMAT", "text")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start load-agent worker");
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the worker stopped by itself")
        .expect("exit status");
    assert!(!status.success(), "exited with {status}");
    let out = child.wait_with_output().await.expect("output");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains(&dlq) && text.contains("1000 bytes") && text.contains("max.message.bytes"),
        "{text}"
    );
}

/// `load-agent dlq` against the broker and a running worker: an event for a load not registered
/// yet is dead-lettered; `list` and `show` find it; `redrive --dry-run` publishes nothing; once
/// the load is registered, `redrive` sends it back and it is decided; a second redrive changes
/// nothing. A dead letter too large for the DLQ topic is redriven from `dead_letters`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_list_show_and_redrive_through_the_broker() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;

    let brokers = env("KAFKA_BROKERS");
    let run = format!("dlqcmd{}", std::process::id());
    let db = common::Db::fresh(&run).await;
    let (events_topic, dlq_topic) = (format!("{run}.events"), format!("{run}.events.dlq"));
    // One partition (positions are predictable); a DLQ topic that takes 40,000 bytes at most.
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &brokers).create().expect("admin");
    let topics = [
        NewTopic::new(&events_topic, 1, TopicReplication::Fixed(1)),
        NewTopic::new(&dlq_topic, 1, TopicReplication::Fixed(1)).set("max.message.bytes", "40000"),
    ];
    for r in admin.create_topics(topics.iter(), &AdminOptions::new()).await.expect("create topics") {
        r.expect("created");
    }
    let envs = [
        ("LOAD_AGENT_KAFKA_BROKERS", brokers.clone()),
        ("LOAD_AGENT_DATABASE_URL", db.url.clone()),
        ("LOAD_AGENT_KAFKA_EVENTS_TOPIC", events_topic.clone()),
        ("LOAD_AGENT_KAFKA_DLQ_TOPIC", dlq_topic.clone()),
        ("LOAD_AGENT_KAFKA_ACTIONS_TOPIC_PREFIX", format!("{run}.actions")),
        ("LOAD_AGENT_KAFKA_GROUP_ID", format!("{run}-group")),
        ("LOAD_AGENT_KAFKA_CREATE_TOPICS", "true".into()),
        ("LOAD_AGENT_HTTP_ADDR", format!("127.0.0.1:{}", free_port())),
        ("LOAD_AGENT_LOG_LEVEL", "warn".into()),
    ];
    let mut worker = tokio::process::Command::new(env!("CARGO_BIN_EXE_load-agent"));
    worker.arg("worker").envs(envs.iter().cloned()).stdout(Stdio::null()).kill_on_drop(true);
    let mut worker = worker.spawn().expect("start the worker");
    let dlq = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_load-agent"))
            .arg("dlq")
            .args(args)
            .envs(envs.iter().cloned())
            .output()
            .expect("run load-agent dlq");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let decisions = |id: String| {
        let db = &db;
        async move { db.scalar(&format!("SELECT count(*) FROM log_entries WHERE entry_id = 'dec:{id}'")).await }
    };
    let kafka = common::producer(&brokers);

    // An SMS for a load not registered yet, and an email far over the DLQ topic's limit for a
    // registered one.
    let (late, known) = (format!("{run}-L9"), format!("{run}-L1"));
    let early_sms = common::sms(&late, 1, "10-4");
    common::produce(&kafka, &events_topic, &[registration(&known), early_sms.clone()]).await;
    let mut huge = common::sms(&known, 2, "");
    huge.kind = load_agent_domain::EventKind::Email {
        from: "drv".into(),
        subject: "photos".into(),
        text: "x".repeat(300 * 1024),
        thread: None,
    };
    common::produce(&kafka, &events_topic, &[huge.clone()]).await;
    let mut listed = String::new();
    eventually_every(Duration::from_secs(60), HEAVY_POLL, "two dead letters listed", || {
        let l = dlq(&["list"]);
        listed = l.1.clone();
        async move { if l.1.lines().count() == 2 { Ok(()) } else { Err(format!("{l:?}")) } }
    })
    .await;
    assert!(listed.starts_with("0:0\t") && listed.contains("unknown_load"), "{listed}");
    assert!(listed.contains("oversized") && listed.contains("[reduced]"), "{listed}");
    let (code, only, _) = dlq(&["list", "--code", "unknown_load", "--json"]);
    assert_eq!(code, Some(0));
    let entry: serde_json::Value = serde_json::from_str(only.trim()).expect("one JSON line");
    assert_eq!(entry["load"], late.as_str());
    let (code, shown, _) = dlq(&["show", "0:0"]);
    assert_eq!(code, Some(0));
    assert!(shown.contains("dlq-error-code: unknown_load") && shown.contains(&early_sms.event_id), "{shown}");
    assert_eq!(dlq(&["show", "0:99"]).0, Some(1), "a position with no dead letter");
    assert_eq!(dlq(&["show", "nonsense"]).0, Some(2), "a bad position");

    // Dry run: nothing is published.
    let (code, out, err) = dlq(&["redrive", "--code", "unknown_load", "--dry-run"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("would redrive") && err.contains("1 chosen, 1 would redrive"), "{out}{err}");
    // Register the load, then redrive: the SMS is decided.
    common::produce(&kafka, &events_topic, &[common::registration(&late)]).await;
    let (code, out, err) = dlq(&["redrive", "--code", "unknown_load"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(err.contains("1 chosen, 1 redriven"), "{err}");
    eventually_every(Duration::from_secs(60), HEAVY_POLL, "the redriven SMS decided", || {
        let id = early_sms.event_id.clone();
        let decisions = &decisions;
        async move { if decisions(id).await == 1 { Ok(()) } else { Err("not yet".into()) } }
    })
    .await;
    // Again: published again, recognized, decided once still.
    assert_eq!(dlq(&["redrive", "--code", "unknown_load"]).0, Some(0));
    // The reduced one comes back whole from dead_letters (and, still oversized, is dead-lettered
    // again: a third DLQ record pointing at its new source offset).
    let (code, out, err) = dlq(&["redrive", "--code", "oversized"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(err.contains("1 chosen, 1 redriven"), "{out}{err}");
    eventually_every(Duration::from_secs(60), HEAVY_POLL, "the redriven email dead-lettered again", || {
        let l = dlq(&["list", "--code", "oversized"]);
        async move { if l.1.lines().count() == 2 { Ok(()) } else { Err(format!("{l:?}")) } }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(decisions(early_sms.event_id.clone()).await, 1, "a second redrive decides nothing twice");
    let _ = worker.kill().await;
    db.drop_database().await;
}
