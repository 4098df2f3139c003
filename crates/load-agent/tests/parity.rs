//! One decision path: the same records decided by the live service (`load-agent serve` in
//! production mode, the default `local` LLM provider, Kafka and Postgres) and by `load-agent
//! replay` of the events topic it consumed must give identical decisions, for every event kind
//! (issue 19: an attachment with fields extracted upstream once decided differently).
//!
//! Needs `KAFKA_BROKERS` and `DATABASE_URL`: run `./scripts/test.sh`.
#![cfg(feature = "kafka")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::Utc;
use common::{Db, HEAVY_POLL, ServeConfig, env, ping, produce, producer, registration, sms};
use load_agent_domain::{
    ActionBody, ActionKind, Contact, DocumentFields, DocumentType, EventKind, InboundEvent, Language,
    LogEntry, MessageChannel, OutcomeStatus, RiskBand, Role, StopStatusKind,
};
use load_agent_ingest::replay::DecisionLine;
use load_agent_store::{EventStore, PgStore};
use load_agent_testkit::wait::eventually_every;

fn event(load: &str, id: &str, kind: EventKind) -> InboundEvent {
    InboundEvent { event_id: format!("{load}-{id}"), load_id: load.into(), occurred_at: Utc::now(), kind }
}

/// `common::registration` plus a carrier dispatcher reachable by email and Slack.
fn registration_with_dispatcher(load: &str) -> InboundEvent {
    let mut e = registration(load);
    if let EventKind::LoadRegistered { load } = &mut e.kind {
        load.contacts.push(Contact {
            id: "disp".into(),
            role: Role::CarrierDispatcher,
            name: "Dana".into(),
            phone: None,
            email: Some("dana@carrier.example".into()),
            slack: Some("U0DANA".into()),
            language: Language::En,
        });
    }
    e
}

async fn live_log(store: &PgStore, load: &str) -> Vec<LogEntry> {
    store.read(load).await.expect("read the live log").0
}

/// The live decisions of `loads`, by (load, trigger event id).
async fn live_decisions(store: &PgStore, loads: &[String]) -> BTreeMap<(String, String), DecisionLine> {
    let mut out = BTreeMap::new();
    for load in loads {
        for entry in live_log(store, load).await {
            if let LogEntry::Decision(d) = entry {
                out.insert((d.load_id.clone(), d.trigger_event_id.clone()), DecisionLine::of(&d));
            }
        }
    }
    out
}

/// The events on the topic, decoded (with their Avro bytes the replay reads).
async fn topic_events(brokers: &str, topic: &str) -> (Vec<u8>, Vec<InboundEvent>) {
    let mut out = Vec::new();
    load_agent_kafka::dump(brokers, topic, true, true, &mut out).await.expect("dump the events topic");
    let events = String::from_utf8_lossy(&out)
        .lines()
        .map(|l| serde_json::from_str::<load_agent_ingest::DumpRecord>(l).expect("a dump line"))
        .map(|r| {
            let value = r.to_record().expect("record").value.expect("a value");
            load_agent_avro::decode_inbound(&value).expect("an event")
        })
        .collect();
    (out, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_service_and_a_replay_of_its_topic_decide_alike_for_every_event_kind() {
    let brokers = env("KAFKA_BROKERS");
    let run = format!("parity{}", std::process::id());
    let db = Db::fresh(&run).await;
    let config = ServeConfig { brokers: &brokers, db_url: &db.url, prefix: &run, extra_env: Vec::new() };
    let mut serve = config.spawn(None);
    serve.ready().await;
    let store = PgStore::connect(&db.url).await.expect("connect");
    let kafka = producer(&brokers);
    let topic = config.events_topic();
    let (a, b) = (format!("{run}-A"), format!("{run}-B"));
    let loads = vec![a.clone(), b.clone()];

    // A high-risk ping opens an ETA ask: an SMS and a timer.
    produce(
        &kafka,
        &topic,
        &[registration_with_dispatcher(&a), ping(&a, 1, RiskBand::High), registration(&b)],
    )
    .await;
    eventually_every(Duration::from_secs(60), HEAVY_POLL, "the ETA ask of load A", || async {
        let asked = live_log(&store, &a).await.iter().any(|e| match e {
            LogEntry::Decision(d) => d.actions.iter().any(|x| x.kind() == ActionKind::SetTimer),
            LogEntry::Event(_) => false,
        });
        if asked { Ok(()) } else { Err("no timer yet".into()) }
    })
    .await;
    let actions: Vec<_> = live_log(&store, &a)
        .await
        .into_iter()
        .filter_map(|e| match e {
            LogEntry::Decision(d) => Some(d.actions),
            LogEntry::Event(_) => None,
        })
        .flatten()
        .collect();
    let (timer_id, ask_id, attempt, fire_at) = actions
        .iter()
        .find_map(|x| match &x.body {
            ActionBody::SetTimer { timer_id, ask_id, attempt, fire_at } => {
                Some((timer_id.clone(), ask_id.clone(), *attempt, *fire_at))
            }
            _ => None,
        })
        .expect("a set_timer");
    let sms_key =
        actions.iter().find(|x| x.kind() == ActionKind::SendSms).map(|x| x.key.clone()).expect("an SMS");

    let pod = DocumentFields {
        document_type: DocumentType::Pod,
        signed: Some(true),
        exceptions_noted: Some(false),
        po_numbers: vec!["55821".into()],
        seal: None,
        pieces: Some(24),
        temperature_f: None,
    };
    let attachment = |id: &str, filename: &str, extracted: Option<DocumentFields>| {
        event(
            &a,
            id,
            EventKind::Attachment {
                from: "drv".into(),
                channel: MessageChannel::Sms,
                filename: filename.into(),
                content_type: "image/jpeg".into(),
                content_ref: Some(format!("https://files.example/{filename}")),
                extracted,
            },
        )
    };
    let status = |id: &str, status| event(&a, id, EventKind::StopStatus { stop: 1, status, source: None });
    let rest = vec![
        event(&a, "timer", EventKind::TimerFired { timer_id, ask_id, attempt, fire_at }),
        event(
            &a,
            "outcome",
            EventKind::ActionOutcome {
                idempotency_key: sms_key,
                status: OutcomeStatus::FailedPermanent,
                action_kind: ActionKind::SendSms,
                contact_id: Some("drv".into()),
                hero_channel: false,
                reason: Some("carrier rejected the number".into()),
            },
        ),
        sms(&a, 1, "running late, there by 3pm"),
        event(
            &a,
            "email",
            EventKind::Email {
                from: "disp".into(),
                subject: "Re: load update".into(),
                text: "Driver is about 30 min out.\n\nThanks,\nDana\n\n> On Tue, broker wrote:\n> any eta?"
                    .into(),
                thread: None,
            },
        ),
        event(
            &a,
            "slack",
            EventKind::Slack { from: "disp".into(), text: "what's the PO for pickup?".into() },
        ),
        status("arrived", StopStatusKind::Arrived),
        status("departed", StopStatusKind::Departed),
        attachment("pod", "pod.jpg", Some(pod)),
        attachment("bol", "bol.jpg", None),
        sms(&a, 2, "stop texting me"),
        sms(&b, 1, "whats the po# for this one"),
        event(&b, "stranger", EventKind::Sms { from: "+15550009999".into(), text: "who is this".into() }),
        ping(&b, 1, RiskBand::Low),
        status("delivered", StopStatusKind::Delivered),
    ];
    produce(&kafka, &topic, &rest).await;

    // Quiet: every record on the topic (the relay's outcomes included) has its decision, and
    // nothing is left to send.
    let seen = AtomicUsize::new(0);
    eventually_every(
        Duration::from_secs(120),
        HEAVY_POLL,
        "every record on the topic decided and the outbox empty",
        || {
            let (store, db, brokers, topic, loads, seen) = (&store, &db, &brokers, &topic, &loads, &seen);
            async move {
                let (_, events) = topic_events(brokers, topic).await;
                let decided = live_decisions(store, loads).await;
                let undecided: Vec<&str> = events
                    .iter()
                    .filter(|e| !decided.contains_key(&(e.load_id.clone(), e.event_id.clone())))
                    .map(|e| e.event_id.as_str())
                    .collect();
                let pending = db.scalar("SELECT count(*) FROM outbox WHERE status = 'pending'").await;
                let grew = seen.swap(events.len(), Ordering::Relaxed) != events.len();
                if undecided.is_empty() && pending == 0 && !grew {
                    Ok(())
                } else {
                    Err(format!("undecided {undecided:?}, {pending} pending, topic grew: {grew}"))
                }
            }
        },
    )
    .await;
    serve.kill9();

    let (dump, events) = topic_events(&brokers, &topic).await;
    let kinds: BTreeSet<&str> = events.iter().map(|e| e.kind.kind_str()).collect();
    let every = [
        "load_registered",
        "sms",
        "email",
        "slack",
        "ping",
        "timer_fired",
        "attachment",
        "stop_status",
        "action_outcome",
    ];
    assert_eq!(kinds, every.into_iter().collect(), "the topic holds every event kind");
    let on_topic: BTreeSet<(String, String)> =
        events.iter().map(|e| (e.load_id.clone(), e.event_id.clone())).collect();

    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(&run);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let (dump_path, record_path) = (dir.join("events.jsonl"), dir.join("replayed.jsonl"));
    std::fs::write(&dump_path, &dump).expect("write the dump");
    let out = Command::new(env!("CARGO_BIN_EXE_load-agent"))
        .arg("replay")
        .arg(&dump_path)
        .arg("--record")
        .arg(&record_path)
        .output()
        .expect("run load-agent replay");
    assert!(out.status.success(), "replay failed: {}", String::from_utf8_lossy(&out.stderr));
    let replayed: BTreeMap<(String, String), DecisionLine> = std::fs::read_to_string(&record_path)
        .expect("the replay's decisions")
        .lines()
        .filter(|l| !l.contains("\"dead_letter\""))
        .map(|l| serde_json::from_str::<DecisionLine>(l).expect("a decision line"))
        .map(|d| ((d.load_id.clone(), d.trigger_event_id.clone()), d))
        .filter(|(k, _)| on_topic.contains(k))
        .collect();
    let live = live_decisions(&store, &loads).await;
    assert_eq!(live.len(), on_topic.len(), "one live decision per record");
    for (key, decision) in &live {
        assert_eq!(replayed.get(key), Some(decision), "{key:?}: live and replay decide alike");
    }
    assert_eq!(replayed.len(), live.len());

    // `inspect` says what the relay knows of each sent action: `published` (the broker has the
    // command), not `delivered` (no delivery service confirmed anything here).
    let out = Command::new(env!("CARGO_BIN_EXE_load-agent"))
        .args(["inspect", &a])
        .env("LOAD_AGENT_DATABASE_URL", &db.url)
        .output()
        .expect("run load-agent inspect");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "inspect failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("send_sms") && text.contains("[dispatched, published]"), "{text}");
    assert!(
        text.contains("set_timer") && text.contains("[dispatched, delivered]"),
        "timers the relay applied itself: {text}"
    );
    assert!(text.contains(" published and ") && text.contains(" delivered outcomes not shown"), "{text}");
    store.pool().close().await;
    db.drop_database().await;
}
