//! Crash tests (issue 10): the process is killed, not stopped politely, at each crash point
//! (`LOAD_AGENT_CRASH_AT`, `std::process::abort`) and by `kill -9` in the middle of traffic,
//! then restarted. After each: every inbound event has exactly one decision, every committed
//! action reached the delivery services exactly once by key (redeliveries counted apart) or is
//! dead with a failed outcome, and no timer is lost (`common::assert_guarantees`).
//!
//! Needs `KAFKA_BROKERS` and `DATABASE_URL`: run `./scripts/test.sh`, which starts both. The
//! tests run one at a time (each starts `serve` twice on a 2-core machine).
#![cfg(all(feature = "kafka", feature = "crash-points"))]

mod common;

use std::time::Duration;

use common::{Db, ServeConfig, assert_guarantees, env, ping, produce, producer, registration, traffic};
use load_agent_domain::RiskBand;
use load_agent_testkit::wait::eventually;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn name(test: &str) -> String {
    format!("crash_{test}_{}", std::process::id())
}

/// One crash point: run with it armed until the process dies, restart, check.
async fn crash_and_recover(test: &str, point: &str, loads: usize) -> common::DedupingService {
    let _serial = SERIAL.lock().await;
    let brokers = env("KAFKA_BROKERS");
    let run = name(test);
    let db = Db::fresh(&run).await;
    let cfg = ServeConfig { brokers: &brokers, db_url: &db.url, prefix: &run, extra_env: vec![] };
    let mut serve = cfg.spawn(Some(point));
    serve.ready().await;
    let events = traffic(&run, loads);
    produce(&producer(&brokers), &cfg.events_topic(), &events).await;
    let status = serve.exited(Duration::from_secs(90)).await;
    assert!(!status.success(), "the crash point {point} killed the process ({status})");
    drop(serve);
    let mut again = cfg.spawn(None);
    again.ready().await;
    let service = assert_guarantees(&db, &cfg, &events).await;
    drop(again);
    db.drop_database().await;
    service
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_after_the_append_and_before_the_offset_decides_each_event_once() {
    // The 10th committed record: its offset is not stored, so the restarted consumer reads it
    // (and whatever followed) again and finds it already in the log.
    crash_and_recover("worker", "worker.after_append:10", 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_inside_a_group_commit_decides_each_event_once() {
    // The first transaction that committed two or more loads' appends: none of its runs has
    // been told, so no offset moved; the restarted consumer reads them all again and finds
    // each already in the log. A wide window makes the concurrent registrations share one.
    let _serial = SERIAL.lock().await;
    let brokers = env("KAFKA_BROKERS");
    let run = name("group_commit");
    let db = Db::fresh(&run).await;
    let window = vec![
        ("LOAD_AGENT_WORKER_GROUP_COMMIT_MAX_BATCH", "32".to_owned()),
        ("LOAD_AGENT_WORKER_GROUP_COMMIT_WINDOW_MS", "50".to_owned()),
    ];
    let cfg = ServeConfig { brokers: &brokers, db_url: &db.url, prefix: &run, extra_env: window };
    let mut serve = cfg.spawn(Some("worker.group_commit:1"));
    serve.ready().await;
    let events = traffic(&run, 8);
    produce(&producer(&brokers), &cfg.events_topic(), &events).await;
    let status = serve.exited(Duration::from_secs(90)).await;
    assert!(!status.success(), "the crash point killed the process ({status})");
    drop(serve);
    let committed = db.scalar("SELECT count(DISTINCT load_id) FROM log_entries").await;
    assert!(committed >= 2, "the crashed transaction committed several loads ({committed})");
    let mut again = cfg.spawn(None);
    again.ready().await;
    assert_guarantees(&db, &cfg, &events).await;
    drop(again);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_after_the_send_and_before_the_mark_sends_again_under_the_same_key() {
    let service = crash_and_recover("relay", "relay.after_send:3", 4).await;
    // The row sent before the crash was not marked: after its lease the restarted relay sent
    // it again, and the service recognised the key (the contact got one message).
    assert!(service.duplicates >= 1, "the crashed send was redelivered under its key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_after_sending_a_batch_and_before_its_outcomes_and_mark_loses_nothing() {
    // The first claimed batch is sent whole (the first rows committed are a ping's send_sms and
    // set_timer), then the process dies: no outcome published, no row marked.
    let _serial = SERIAL.lock().await;
    let brokers = env("KAFKA_BROKERS");
    let run = name("relay_batch");
    let db = Db::fresh(&run).await;
    let cfg = ServeConfig { brokers: &brokers, db_url: &db.url, prefix: &run, extra_env: vec![] };
    let mut serve = cfg.spawn(Some("relay.after_send_batch:1"));
    serve.ready().await;
    let events = traffic(&run, 4);
    produce(&producer(&brokers), &cfg.events_topic(), &events).await;
    let status = serve.exited(Duration::from_secs(90)).await;
    assert!(!status.success(), "the crash point killed the process ({status})");
    drop(serve);
    assert_eq!(
        db.scalar("SELECT count(*) FROM outbox WHERE status = 'dispatched'").await,
        0,
        "nothing was marked before the crash"
    );
    let mut again = cfg.spawn(None);
    again.ready().await;
    let service = assert_guarantees(&db, &cfg, &events).await;
    // The batch sent before the crash was sent again after its lease under the same keys (the
    // service saw them again and its contacts got one message each)...
    assert!(service.duplicates >= 1, "the crashed batch was redelivered under its keys");
    // ...and its outcomes, never published before the crash, reached the log once each.
    // (On Kafka the relay's outcome is `published`; timer rows, applied by the relay, `delivered`.)
    eventually(Duration::from_secs(60), "one successful outcome in the log per dispatched row", || async {
        let missing = db
            .scalar(
                "SELECT count(*) FROM outbox o WHERE o.status = 'dispatched' AND NOT EXISTS \
                 (SELECT 1 FROM log_entries l WHERE l.load_id = o.load_id \
                   AND l.entry_id IN ('out:published:' || o.id, 'out:delivered:' || o.id))",
            )
            .await;
        if missing == 0 { Ok(()) } else { Err(format!("{missing} dispatched rows without their outcome")) }
    })
    .await;
    drop(again);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_pump_killed_after_publishing_and_before_the_mark_loses_no_timer() {
    let _serial = SERIAL.lock().await;
    let brokers = env("KAFKA_BROKERS");
    let run = name("pump");
    let db = Db::fresh(&run).await;
    let cfg = ServeConfig { brokers: &brokers, db_url: &db.url, prefix: &run, extra_env: vec![] };
    let mut serve = cfg.spawn(Some("pump.after_publish:2"));
    serve.ready().await;
    let mut events = Vec::new();
    for i in 0..4 {
        let load = format!("{run}-L{i}");
        events.push(registration(&load));
        events.push(ping(&load, 1, RiskBand::High));
    }
    produce(&producer(&brokers), &cfg.events_topic(), &events).await;
    // Each ask scheduled its follow-up timer (30 minutes ahead).
    eventually(Duration::from_secs(60), "four timers scheduled", || async {
        match db.scalar("SELECT count(*) FROM timers WHERE status = 'scheduled'").await {
            4 => Ok(()),
            n => Err(format!("{n} scheduled")),
        }
    })
    .await;
    // Time passes: the timers come due, the pump publishes the first, then dies after the
    // second is published and before it is marked.
    sqlx::query("UPDATE timers SET fire_at = now() - interval '1 second' WHERE status = 'scheduled'")
        .execute(&db.pool)
        .await
        .expect("timers due");
    let status = serve.exited(Duration::from_secs(60)).await;
    assert!(!status.success(), "the pump crashed ({status})");
    drop(serve);
    let fired_before = db.scalar("SELECT count(*) FROM timers WHERE status = 'fired'").await;
    assert!(fired_before < 4, "the crash left a published timer unmarked");
    let mut again = cfg.spawn(None);
    again.ready().await;
    eventually(Duration::from_secs(60), "every due timer fired and decided once", || async {
        let fired = db.scalar("SELECT count(*) FROM timers WHERE status = 'fired'").await;
        let decided = db
            .scalar("SELECT count(*) FROM log_entries WHERE kind = 'decision' AND entry_id LIKE 'dec:evt:%'")
            .await;
        if fired >= 4 && decided >= 4 { Ok(()) } else { Err(format!("{fired} fired, {decided} decided")) }
    })
    .await;
    // The timer published twice is one `timer_fired` event in the log (its id is the timer's).
    let timer_events = db.scalar("SELECT count(*) FROM log_entries WHERE kind = 'timer_fired'").await;
    assert!(timer_events >= 4, "each fired timer is logged: {timer_events}");
    assert_guarantees(&db, &cfg, &events).await;
    drop(again);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_killed_with_sigkill_in_the_middle_of_traffic_loses_nothing_and_no_contact_hears_twice() {
    let _serial = SERIAL.lock().await;
    let brokers = env("KAFKA_BROKERS");
    let run = name("kill9");
    let db = Db::fresh(&run).await;
    let cfg = ServeConfig { brokers: &brokers, db_url: &db.url, prefix: &run, extra_env: vec![] };
    let mut serve = cfg.spawn(None);
    serve.ready().await;
    let events = traffic(&run, 40);
    let producer = producer(&brokers);
    let (first, rest) = events.split_at(events.len() / 2);
    produce(&producer, &cfg.events_topic(), first).await;
    // Mid-stream: some records decided, some not, actions in flight.
    eventually(Duration::from_secs(60), "some decisions committed", || async {
        match db.scalar("SELECT count(*) FROM log_entries WHERE kind = 'decision'").await {
            n if n >= 20 => Ok(()),
            n => Err(format!("{n} decisions")),
        }
    })
    .await;
    serve.kill9();
    drop(serve);
    produce(&producer, &cfg.events_topic(), rest).await;
    let mut again = cfg.spawn(None);
    again.ready().await;
    assert_guarantees(&db, &cfg, &events).await;
    drop(again);
    db.drop_database().await;
}
