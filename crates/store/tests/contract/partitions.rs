//! Postgres partitions (migration 0004, issue 18): a load's log and timers stay in its first
//! month's partition, the outbox goes by day, partitions are made ahead idempotently, rows that
//! arrive before their partition wait in the default one and move in when it is made, two first
//! appends of one load in different months still have one winner, and the migration moves an
//! existing database's rows without changing what the store reads back.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use load_agent_domain::Destination;
use load_agent_store::{AppendError, AppendRequest, PartitionPlan, PgStore, StoreOptions, TimerRow};
use load_agent_testkit::wait::eventually_every;
use sqlx::PgPool;

use crate::fixtures::{row, sms, step, t};
use crate::harness::{PgHarness, StoreHarness};

fn at(y: i32, m: u32, d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, 0, 0).single().expect("a time")
}

/// The partition each of a load's log rows is stored in.
async fn log_partitions(pool: &PgPool, load: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT tableoid::regclass::text FROM log_entries WHERE load_id = $1 ORDER BY seq")
        .bind(load)
        .fetch_all(pool)
        .await
        .expect("log partitions")
}

async fn scalar_text(pool: &PgPool, sql: &str, load: &str) -> Vec<String> {
    sqlx::query_scalar(sql).bind(load).fetch_all(pool).await.expect(sql)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loads_rows_go_to_its_months_partitions_made_ahead_once() {
    let h = PgHarness::new().await;
    let pool = h.pg().pool().clone();
    let lifecycle = &h.stores().lifecycle;
    assert!(lifecycle.partitioned());
    let now = at(2026, 3, 30, 12);
    let made = lifecycle.ensure_partitions(now, &PartitionPlan::default()).await.expect("ensure");
    for name in [
        "log_entries_p2026_02",
        "log_entries_p2026_04",
        "timers_p2026_03",
        "outbox_p2026_03_29",
        "outbox_p2026_03_31",
    ] {
        assert!(made.iter().any(|m| m == name), "{name} made: {made:?}");
    }
    assert!(
        lifecycle.ensure_partitions(now, &PartitionPlan::default()).await.expect("again").is_empty(),
        "a second run makes nothing"
    );
    let listed = lifecycle.partitions().await.expect("partitions");
    assert!(
        listed.iter().any(|p| p.name == "log_entries_p2026_03" && p.bounds.contains("2026-03-01")),
        "{listed:?}"
    );
    assert!(listed.iter().any(|p| p.name == "outbox_default" && p.bounds == "DEFAULT"), "{listed:?}");

    // Registered on the last evening of March; its later entries, in April, stay with it.
    let events = &h.stores().events;
    events.append("L1", &[sms("L1", "e1", at(2026, 3, 31, 23))], 0, &[]).await.expect("first append");
    let rows = [row("L1", "k1", Destination::Sms, 2)];
    events.append("L1", &[sms("L1", "e2", at(2026, 4, 1, 8))], 1, &rows).await.expect("append in April");
    assert_eq!(log_partitions(&pool, "L1").await, ["log_entries_p2026_03", "log_entries_p2026_03"]);
    assert_eq!(events.read("L1").await.expect("read").1, 2);
    assert!(events.read_entry("L1", "e2").await.expect("read_entry").is_some());
    assert_eq!(events.load_ids(10).await.expect("load ids"), ["L1"]);
    let in_march =
        events.load_ids_started_between(at(2026, 3, 1, 0), at(2026, 4, 1, 0), 10).await.expect("march");
    assert_eq!(in_march, ["L1"]);
    assert!(
        events
            .load_ids_started_between(at(2026, 4, 1, 0), at(2026, 5, 1, 0), 10)
            .await
            .expect("april")
            .is_empty()
    );
    // The outbox row goes by its own day (the append's decision time is `created_at`).
    let outbox_part =
        scalar_text(&pool, "SELECT tableoid::regclass::text FROM outbox WHERE load_id = $1", "L1").await;
    assert_eq!(outbox_part.len(), 1);
    assert!(
        outbox_part[0].starts_with("outbox_p2026_0") || outbox_part[0] == "outbox_default",
        "{outbox_part:?}"
    );

    // Its timers live with its log; schedule and cancel of one id meet there.
    let timer = TimerRow {
        timer_id: "tmr:L1:ask:eta_request:e1:1".into(),
        load_id: "L1".into(),
        ask_id: "ask:eta_request:e1".into(),
        attempt: 1,
        fire_at: at(2026, 4, 1, 9),
    };
    let timers = &h.stores().timers;
    timers.cancel("L1", &timer.timer_id, at(2026, 4, 1, 8)).await.expect("cancel before schedule");
    timers.schedule(&timer).await.expect("schedule");
    assert!(
        timers.due(at(2026, 4, 2, 0), 10).await.expect("due").is_empty(),
        "cancelled first: stays cancelled"
    );
    let timer_parts = scalar_text(
        &pool,
        "SELECT tableoid::regclass::text || ':' || status FROM timers WHERE load_id = $1",
        "L1",
    )
    .await;
    assert_eq!(timer_parts, ["timers_p2026_03:cancelled"]);
    h.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_without_a_partition_wait_in_the_default_one_and_move_in_when_it_is_made() {
    let h = PgHarness::new().await;
    let pool = h.pg().pool().clone();
    let events = &h.stores().events;
    // Far ahead of every partition the migration made.
    let when = at(2031, 7, 4, 12);
    events.append("L9", &[sms("L9", "e1", when)], 0, &[]).await.expect("append without a partition");
    assert_eq!(log_partitions(&pool, "L9").await, ["log_entries_default"]);
    let made = h.stores().lifecycle.ensure_partitions(when, &PartitionPlan::default()).await.expect("ensure");
    assert!(made.iter().any(|m| m == "log_entries_p2031_07"), "{made:?}");
    assert_eq!(log_partitions(&pool, "L9").await, ["log_entries_p2031_07"], "moved into its partition");
    events.append("L9", &[sms("L9", "e2", when)], 1, &[]).await.expect("the log goes on");
    assert_eq!(events.read("L9").await.expect("read").0.len(), 2);
    h.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_first_appends_of_one_load_in_different_months_have_one_winner() {
    let h = PgHarness::new().await;
    let other = h.reopen().await;
    h.stores()
        .lifecycle
        .ensure_partitions(at(2026, 3, 15, 0), &PartitionPlan::default())
        .await
        .expect("ensure");
    for i in 0..20 {
        let load = format!("R{i}");
        let march = [sms(&load, "a", at(2026, 3, 31, 23))];
        let april = [sms(&load, "b", at(2026, 4, 1, 1))];
        let (a, b) = tokio::join!(
            h.stores().events.append(&load, &march, 0, &[]),
            other.events.append(&load, &april, 0, &[]),
        );
        let wins = [&a, &b].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "{load}: one winner: {a:?} {b:?}");
        let loser = if a.is_ok() { &b } else { &a };
        assert!(matches!(loser, Err(AppendError::Conflict { expected: 0, actual: 1 })), "{load}: {loser:?}");
        assert_eq!(h.stores().events.read(&load).await.expect("read").0.len(), 1);
    }
    drop(other);
    h.cleanup().await;
}

/// A store with the partitions of mid-April 2026, a second store of the same schema (which
/// remembers no load's month), and the pool.
async fn two_stores_in_april() -> (PgHarness, load_agent_store::Stores, PgPool) {
    let h = PgHarness::new().await;
    let other = h.reopen().await;
    let pool = h.pg().pool().clone();
    h.stores()
        .lifecycle
        .ensure_partitions(at(2026, 4, 15, 0), &PartitionPlan::default())
        .await
        .expect("ensure");
    (h, other, pool)
}

/// An append names its load's partition from the store's memory of the load's month, or guesses
/// the month of its first entry: a store that never saw the load, or one that remembers a month
/// the load no longer has (dropped by retention and registered again), still appends at the right
/// version in the right partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_find_their_loads_month_whatever_the_store_remembers() {
    let (h, other, pool) = two_stores_in_april().await;
    let events = &h.stores().events;
    events.append("M1", &[sms("M1", "e1", at(2026, 3, 20, 9))], 0, &[]).await.expect("registered in March");
    // `other` has never seen M1 and guesses April from the entry: the statement corrects it.
    let v = other.events.append("M1", &[sms("M1", "e2", at(2026, 4, 2, 9))], 1, &[]).await;
    assert_eq!(v.expect("append in April through another store"), 2);
    assert_eq!(log_partitions(&pool, "M1").await, ["log_entries_p2026_03", "log_entries_p2026_03"]);
    // A stale version is still a conflict, and a duplicate still a duplicate.
    let stale = other.events.append("M1", &[sms("M1", "e3", at(2026, 4, 2, 9))], 1, &[]).await;
    assert!(matches!(stale, Err(AppendError::Conflict { expected: 1, actual: 2 })), "{stale:?}");
    let dup = events.append("M1", &[sms("M1", "e2", at(2026, 4, 3, 9))], 2, &[]).await;
    assert!(matches!(dup, Err(AppendError::DuplicateEntry { .. })), "{dup:?}");

    // Retention drops the load (its rows and its directory row); it is registered again in May
    // through `other`, while `h` still remembers March.
    for sql in ["DELETE FROM log_entries WHERE load_id = $1", "DELETE FROM load_months WHERE load_id = $1"] {
        sqlx::query(sql).bind("M1").execute(&pool).await.expect(sql);
    }
    let again = other.events.append("M1", &[sms("M1", "n1", at(2026, 5, 2, 9))], 0, &[]).await;
    assert_eq!(again.expect("registered again"), 1);
    let next = events.append("M1", &[sms("M1", "n2", at(2026, 5, 3, 9))], 1, &[]).await;
    assert_eq!(next.expect("append through the store that remembered March"), 2);
    assert_eq!(log_partitions(&pool, "M1").await, ["log_entries_p2026_05", "log_entries_p2026_05"]);
    let (entries, version) = events.read("M1").await.expect("read");
    assert_eq!((entries.len(), version), (2, 2));
    drop(other);
    h.cleanup().await;
}

/// The same through a batch of several loads (one statement): a load the store has never seen,
/// whose log is in an earlier month than its entries', keeps its month, its version check and its
/// duplicate check beside a new load of the same batch, whatever each store remembers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_appends_a_load_of_a_month_the_store_did_not_expect() {
    let (h, other, pool) = two_stores_in_april().await;
    h.stores().events.append("B1", &[sms("B1", "e1", at(2026, 3, 20, 9))], 0, &[]).await.expect("in March");
    let req = |load: &str, id: &str, day: u32, expected: u64| AppendRequest {
        load_id: load.into(),
        entries: vec![sms(load, id, at(2026, 4, day, 9))],
        expected_version: expected,
        outbox: Vec::new(),
        summary: None,
    };
    // `other` has never seen B1 and guesses April for it, as for the new load B2.
    let out = other.events.append_batch(vec![req("B1", "e2", 2, 1), req("B2", "f1", 2, 0)]).await;
    assert!(matches!(out.as_slice(), [Ok(2), Ok(1)]), "{out:?}");
    assert_eq!(log_partitions(&pool, "B1").await, ["log_entries_p2026_03", "log_entries_p2026_03"]);
    assert_eq!(log_partitions(&pool, "B2").await, ["log_entries_p2026_04"]);
    // Refusals keep their kind: a stale version, a duplicate entry.
    let third = h.reopen().await;
    let out = third.events.append_batch(vec![req("B1", "e3", 3, 1), req("B2", "f2", 3, 1)]).await;
    assert!(
        matches!(out.as_slice(), [Err(AppendError::Conflict { expected: 1, actual: 2 }), Ok(2)]),
        "{out:?}"
    );
    let fourth = h.reopen().await;
    let out = fourth.events.append_batch(vec![req("B1", "e2", 4, 2), req("B2", "f3", 4, 2)]).await;
    assert!(matches!(out.as_slice(), [Err(AppendError::DuplicateEntry { .. }), Ok(3)]), "{out:?}");
    // Remembered now: the next batch through `other` takes one statement and lands right.
    let out = other.events.append_batch(vec![req("B1", "e4", 5, 2), req("B2", "f4", 5, 3)]).await;
    assert!(matches!(out.as_slice(), [Ok(3), Ok(4)]), "{out:?}");
    assert_eq!(h.stores().events.read("B1").await.expect("read").1, 3);
    drop((other, third, fourth));
    h.cleanup().await;
}

/// An append names its month's partition directly once the store has seen it attached; when
/// retention drops that month afterwards, the next appends of the month (one load alone, or a
/// batch of several) fail on the missing table only inside the store, which runs them again
/// through the parent: they land in the default partition, nothing is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_of_a_month_dropped_since_the_store_named_it_go_through_the_parent() {
    let (h, _other, pool) = two_stores_in_april().await;
    let events = &h.stores().events;
    let req = |load: &str, id: &str, expected: u64| AppendRequest {
        load_id: load.into(),
        entries: vec![sms(load, id, at(2026, 4, 20, 9))],
        expected_version: expected,
        outbox: Vec::new(),
        summary: None,
    };
    assert_eq!(events.append("L1", &[sms("L1", "e1", at(2026, 4, 20, 9))], 0, &[]).await.expect("L1"), 1);
    let out = events.append_batch(vec![req("L2", "e1", 0), req("L3", "e1", 0)]).await;
    assert!(matches!(out.as_slice(), [Ok(1), Ok(1)]), "{out:?}");
    for load in ["L1", "L2", "L3"] {
        assert_eq!(log_partitions(&pool, load).await, ["log_entries_p2026_04"], "{load}");
    }
    let dropped: i64 = sqlx::query_scalar(
        "SELECT load_agent_drop_log_month('2026-04-01', ARRAY['L1', 'L2', 'L3'], ARRAY[1, 1, 1]::int8[])",
    )
    .fetch_one(&pool)
    .await
    .expect("drop April");
    assert_eq!(dropped, 3);

    assert_eq!(events.append("L4", &[sms("L4", "e1", at(2026, 4, 21, 9))], 0, &[]).await.expect("L4"), 1);
    let out = events.append_batch(vec![req("L5", "e1", 0), req("L6", "e1", 0)]).await;
    assert!(matches!(out.as_slice(), [Ok(1), Ok(1)]), "{out:?}");
    for load in ["L4", "L5", "L6"] {
        assert_eq!(log_partitions(&pool, load).await, ["log_entries_default"], "{load}");
    }
    // The dropped load's log is gone with its month: its next append is a conflict.
    let gone = events.append("L1", &[sms("L1", "e2", at(2026, 4, 22, 9))], 1, &[]).await;
    assert!(matches!(gone, Err(AppendError::Conflict { expected: 1, actual: 0 })), "{gone:?}");
    assert_eq!(events.read("L5").await.expect("read L5").1, 1);
    h.cleanup().await;
}

/// A mark names its row's day partition once the store has seen it attached. When that table is
/// gone before the mark (dropped by hand: retention never drops a day with a claimed row), the
/// mark runs through the parent and reports the row stale, as for any claim that no longer
/// holds its row; a store error would make the relay retry forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_whose_day_was_dropped_since_reports_its_row_stale() {
    let h = PgHarness::new().await;
    let pool = h.pg().pool().clone();
    let s = h.stores();
    two_loads_on_9_march(s).await;
    let claimed = s.outbox.pending(10, at(2026, 3, 9, 11)).await.expect("claim");
    assert_eq!(claimed.len(), 4);
    let (first, rest) = claimed.split_first().expect("four rows");
    s.outbox.mark_dispatched(&first.id, first.claim_token, "r", at(2026, 3, 9, 11)).await.expect("mark");
    sqlx::query("DROP TABLE outbox_p2026_03_09").execute(&pool).await.expect("drop the day by hand");
    let single = s.outbox.mark_dispatched(&rest[0].id, rest[0].claim_token, "r", at(2026, 3, 9, 12)).await;
    assert!(matches!(single, Err(load_agent_store::ClaimError::Stale(_))), "{single:?}");
    let marks: Vec<load_agent_store::DispatchedMark> = rest[1..]
        .iter()
        .map(|c| load_agent_store::DispatchedMark {
            id: c.id.clone(),
            token: c.claim_token,
            receipt: "r".into(),
        })
        .collect();
    let batch = s.outbox.mark_dispatched_batch(&marks, at(2026, 3, 9, 12)).await.expect("batch mark");
    assert!(batch.iter().all(|m| m.is_err()), "{batch:?}");
    h.cleanup().await;
}

/// Migrations 0001–0003, then the rows of a store written through the current code copied into
/// the old tables, then 0004: the store reads back the same logs, outbox rows and timers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_moves_an_existing_database_into_partitions() {
    // The source: a current store with a few loads, outbox rows and timers.
    let src = PgHarness::new().await;
    for (i, load) in ["M1", "M2", "M3"].iter().enumerate() {
        let (entries, rows) = step(load, 0);
        src.stores().events.append(load, &entries, 0, &rows).await.expect("append");
        if i == 0 {
            let (entries, rows) = step(load, 1);
            src.stores().events.append(load, &entries, 2, &rows).await.expect("append again");
        }
        let timer = TimerRow {
            timer_id: format!("tmr:{load}:ask:eta_request:sms_0:1"),
            load_id: (*load).into(),
            ask_id: "ask:eta_request:sms_0".into(),
            attempt: 1,
            fire_at: t(600),
        };
        src.stores().timers.schedule(&timer).await.expect("schedule");
    }
    src.stores().timers.cancel("M2", "tmr:M2:ask:eta_request:sms_0:1", t(300)).await.expect("cancel");
    let claimed = src.stores().outbox.pending(1, t(100)).await.expect("claim");
    src.stores()
        .outbox
        .mark_dispatched(&claimed[0].id, claimed[0].claim_token, "r1", t(101))
        .await
        .expect("mark");

    // The target: a schema at migration 0003.
    let schema = format!("migrate_{}", uuid::Uuid::new_v4().simple());
    let old = load_agent_testkit::pg::schema_at_migration(src.url(), &schema, 3).await;
    let admin = PgPool::connect(src.url()).await.expect("connect");
    let from = src.pg().schema().expect("a schema");
    for sql in [
        format!(
            "INSERT INTO log_entries SELECT load_id, seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body \
             FROM \"{from}\".log_entries"
        ),
        format!(
            "INSERT INTO outbox (id, load_id, load_version, destination, action, status, claim_token, lease_until, \
             retry_at, attempts, first_attempt_at, last_failure, receipt, created_at, dispatched_at, dead_at) \
             OVERRIDING SYSTEM VALUE SELECT id, load_id, load_version, destination, action, status, claim_token, \
             lease_until, retry_at, attempts, first_attempt_at, last_failure, receipt, created_at, dispatched_at, \
             dead_at FROM \"{from}\".outbox ORDER BY position"
        ),
        format!(
            "INSERT INTO timers SELECT timer_id, load_id, ask_id, attempt, fire_at, status, fired_at, cancelled_at \
             FROM \"{from}\".timers"
        ),
    ] {
        sqlx::query(&sql).execute(&old).await.expect(&sql);
    }
    old.close().await;

    // Opening the store applies 0004.
    let migrated = PgStore::connect_in_schema_with(src.url(), &schema, &StoreOptions::default())
        .await
        .expect("open and migrate")
        .into_stores();
    for load in ["M1", "M2", "M3"] {
        assert_eq!(
            migrated.events.read(load).await.expect("read"),
            src.stores().events.read(load).await.expect("read"),
            "{load}: the same log"
        );
        assert_eq!(
            migrated.outbox.rows_for_load(load).await.expect("rows"),
            src.stores().outbox.rows_for_load(load).await.expect("rows"),
            "{load}: the same outbox rows"
        );
        assert_eq!(
            migrated.timers.timers_for_load(load).await.expect("timers"),
            src.stores().timers.timers_for_load(load).await.expect("timers"),
            "{load}: the same timers"
        );
    }
    // The migrated store goes on: the next append, claim and timer work.
    let (entries, rows) = step("M2", 1);
    migrated.events.append("M2", &entries, 2, &rows).await.expect("append after the migration");
    assert!(!migrated.outbox.pending(10, t(200)).await.expect("claim").is_empty());
    migrated.timers.cancel("M3", "tmr:M3:ask:eta_request:sms_0:1", t(300)).await.expect("cancel");
    assert!(migrated.timers.due(t(10_000), 10).await.expect("due").iter().all(|r| r.load_id == "M1"));
    drop(migrated);
    sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE")).execute(&admin).await.expect("drop schema");
    src.cleanup().await;
}

/// Partitions around 10 March 2026, and two loads, A and B, registered on 9 March with two
/// outbox rows each, created that day.
async fn two_loads_on_9_march(s: &load_agent_store::Stores) {
    s.lifecycle.ensure_partitions(at(2026, 3, 10, 0), &PartitionPlan::default()).await.expect("ensure");
    for load in ["A", "B"] {
        let rows = [
            row(load, &format!("{load}-sms"), Destination::Sms, 1),
            row(load, &format!("{load}-tms"), Destination::Tms, 1),
        ];
        s.events.append(load, &[sms(load, "e1", at(2026, 3, 9, 10))], 0, &rows).await.expect("append");
    }
}

/// Claims the four rows of [`two_loads_on_9_march`]; A's are delivered, B's die.
async fn deliver_a_bury_b(s: &load_agent_store::Stores) {
    let claimed = s.outbox.pending(10, at(2026, 3, 9, 11)).await.expect("claim");
    assert_eq!(claimed.len(), 4);
    for c in &claimed {
        if c.load_id == "A" {
            s.outbox.mark_dispatched(&c.id, c.claim_token, "r", at(2026, 3, 9, 11)).await.expect("mark");
        } else {
            let dead = load_agent_store::NextAttempt::Dead;
            s.outbox
                .mark_failed(&c.id, c.claim_token, "permanent", dead, at(2026, 3, 9, 11))
                .await
                .expect("bury");
        }
    }
}

/// Retention drops an outbox day once nothing in it is pending, keeping its recent dead rows;
/// a timers month once none is scheduled; and a log month only when it holds exactly what the
/// archive holds, with its directory and summary rows. A refusal drops nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_drops_only_what_may_go_and_refuses_the_rest() {
    use load_agent_store::{RetentionWindows, StoreError};
    let h = PgHarness::new().await;
    let pool = h.pg().pool().clone();
    let s = h.stores();
    two_loads_on_9_march(s).await;
    let day = NaiveDate::from_ymd_opt(2026, 3, 9).expect("a day");
    let march = NaiveDate::from_ymd_opt(2026, 3, 1).expect("a month");
    // A pending row: the day is refused, nothing dropped.
    let refused = s.lifecycle.drop_outbox_day(day, at(2026, 1, 1, 0)).await;
    assert!(matches!(refused, Err(StoreError::Refused(ref m)) if m.contains("pending")), "{refused:?}");
    // Deliver A's rows, kill B's: the day goes, B's dead rows (recent) are kept.
    deliver_a_bury_b(s).await;
    let dropped = s.lifecycle.drop_outbox_day(day, at(2026, 1, 1, 0)).await.expect("drop the day");
    assert_eq!((dropped.dropped, dropped.kept_dead), (2, 2));
    let left = scalar_text(
        &pool,
        "SELECT tableoid::regclass::text || ':' || status FROM outbox WHERE load_id = $1",
        "B",
    )
    .await;
    assert_eq!(left, ["outbox_default:dead", "outbox_default:dead"], "the dead rows are kept");
    assert!(s.outbox.rows_for_load("A").await.expect("rows").is_empty());
    // Past the dead window they go with the default partition's expired rows.
    let deleted = s
        .lifecycle
        .delete_expired_rows(at(2026, 9, 1, 0), &RetentionWindows::default())
        .await
        .expect("delete");
    assert_eq!(deleted.outbox, 2);
    assert!(s.outbox.rows_for_load("B").await.expect("rows").is_empty());

    // Timers: a scheduled one holds the month.
    let timer = TimerRow {
        timer_id: "tmr:A:ask:eta_request:e1:1".into(),
        load_id: "A".into(),
        ask_id: "ask:eta_request:e1".into(),
        attempt: 1,
        fire_at: at(2026, 3, 9, 12),
    };
    s.timers.schedule(&timer).await.expect("schedule");
    let refused = s.lifecycle.drop_timer_month(march).await;
    assert!(matches!(refused, Err(StoreError::Refused(ref m)) if m.contains("scheduled")), "{refused:?}");
    s.timers.mark_fired(std::slice::from_ref(&timer.timer_id), at(2026, 3, 9, 12)).await.expect("fire");
    assert_eq!(s.lifecycle.drop_timer_month(march).await.expect("drop the timers month"), 1);

    // The log: refused unless the archive holds exactly the month's loads at their versions.
    s.events.append("A", &[sms("A", "e2", at(2026, 3, 20, 0))], 1, &[]).await.expect("a later entry");
    for archived in [
        vec![("A".to_owned(), 1), ("B".to_owned(), 1)], // A's later entry is not archived
        vec![("A".to_owned(), 2)],                      // B is missing
        vec![("A".to_owned(), 2), ("B".to_owned(), 1), ("C".to_owned(), 1)], // C is not in the store
    ] {
        let refused = s.lifecycle.drop_log_month(march, &archived).await;
        assert!(matches!(refused, Err(StoreError::Refused(_))), "{archived:?}: {refused:?}");
        assert_eq!(s.events.read("A").await.expect("read").1, 2, "nothing dropped");
    }
    let archived = vec![("A".to_owned(), 2), ("B".to_owned(), 1)];
    assert_eq!(s.lifecycle.drop_log_month(march, &archived).await.expect("drop the month"), 3);
    assert_eq!(s.events.read("A").await.expect("read").1, 0, "gone from the store");
    assert!(s.events.load_ids(10).await.expect("ids").is_empty(), "the directory rows went too");
    let refused = s.lifecycle.drop_log_month(march, &archived).await;
    assert!(matches!(refused, Err(StoreError::Refused(ref m)) if m.contains("no partition")), "{refused:?}");
    h.cleanup().await;
}

/// An outbox day before yesterday leaves the live outbox once none of its rows is pending
/// (migration 0006): the claim no longer sees it, a load's rows are still read from it, its
/// dead rows stay live (default partition), and retention drops it where it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_outbox_days_are_retired_read_back_and_dropped() {
    let h = PgHarness::new().await;
    let pool = h.pg().pool().clone();
    let s = h.stores();
    two_loads_on_9_march(s).await;
    // Yesterday stays live whatever its rows; the day before it is held by its pending rows.
    assert!(s.lifecycle.retire_outbox_days(at(2026, 3, 10, 12)).await.expect("retire").is_empty());
    assert!(s.lifecycle.retire_outbox_days(at(2026, 3, 11, 12)).await.expect("retire").is_empty());
    deliver_a_bury_b(s).await;
    let retired = s.lifecycle.retire_outbox_days(at(2026, 3, 11, 12)).await.expect("retire");
    assert_eq!(retired, ["outbox_p2026_03_09"]);
    assert!(s.lifecycle.retire_outbox_days(at(2026, 3, 11, 13)).await.expect("again").is_empty());
    // Another service's run that listed the day before it was retired finds nothing to do.
    let again: bool = sqlx::query_scalar("SELECT load_agent_retire_outbox_day('2026-03-09')")
        .fetch_one(&pool)
        .await
        .expect("retire a retired day");
    assert!(!again);

    let listed = s.lifecycle.partitions().await.expect("partitions");
    assert!(
        listed.iter().any(|p| p.table == "outbox_retired" && p.name == "outbox_p2026_03_09"),
        "{listed:?}"
    );
    let live =
        scalar_text(&pool, "SELECT tableoid::regclass::text FROM outbox WHERE load_id = $1", "A").await;
    assert!(live.is_empty(), "A's delivered rows left the live outbox: {live:?}");
    let a_rows = s.outbox.rows_for_load("A").await.expect("rows");
    assert_eq!(a_rows.len(), 2, "{a_rows:?}");
    assert!(a_rows.iter().all(|r| r.receipt.as_deref() == Some("r")), "{a_rows:?}");
    let b_live = scalar_text(
        &pool,
        "SELECT tableoid::regclass::text || ':' || status FROM outbox WHERE load_id = $1",
        "B",
    )
    .await;
    assert_eq!(b_live, ["outbox_default:dead", "outbox_default:dead"], "dead rows stay live");
    assert_eq!(s.outbox.rows_for_load("B").await.expect("rows").len(), 2);
    assert!(s.outbox.pending(10, at(2026, 3, 11, 12)).await.expect("claim").is_empty());

    let day = NaiveDate::from_ymd_opt(2026, 3, 9).expect("a day");
    let dropped = s.lifecycle.drop_outbox_day(day, at(2026, 1, 1, 0)).await.expect("drop the retired day");
    assert_eq!((dropped.dropped, dropped.kept_dead), (2, 0));
    assert!(s.outbox.rows_for_load("A").await.expect("rows").is_empty());
    assert_eq!(s.outbox.rows_for_load("B").await.expect("rows").len(), 2, "B's dead rows are not the day's");
}

/// The id columns compare bytewise (`COLLATE "C"`, migration 0008) in every table that holds
/// them: the parents, the partitions made by `ensure`, the default partitions and a day retired
/// to `outbox_retired` (whose move by `ATTACH` needs the same collation on both parents). Under
/// the database's collation each b-tree comparison of two ids is a locale comparison.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_compare_bytewise_in_every_partition() {
    let h = PgHarness::new().await;
    let pool = h.pg().pool().clone();
    let s = h.stores();
    two_loads_on_9_march(s).await;
    deliver_a_bury_b(s).await;
    let retired = s.lifecycle.retire_outbox_days(at(2026, 3, 11, 12)).await.expect("retire");
    assert_eq!(retired, ["outbox_p2026_03_09"]);
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.relname::text, a.attname::text, coalesce(l.collname::text, '') \
         FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid \
         LEFT JOIN pg_collation l ON l.oid = a.attcollation \
         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') \
           AND ((c.relname ~ '^(log_entries|outbox|timers|load_months|load_summary)' \
                 AND a.attname IN ('load_id', 'entry_id', 'timer_id')) \
                OR (c.relname ~ '^outbox' AND a.attname IN ('id', 'destination'))) \
         ORDER BY 1, 2",
    )
    .fetch_all(&pool)
    .await
    .expect("the id columns");
    let tables: std::collections::BTreeSet<&str> = columns.iter().map(|(t, _, _)| t.as_str()).collect();
    for table in [
        "log_entries",
        "log_entries_default",
        "log_entries_p2026_03",
        "outbox",
        "outbox_retired",
        "outbox_p2026_03_09",
        "outbox_p2026_03_10",
        "timers_p2026_03",
        "load_months",
        "load_summary",
    ] {
        assert!(tables.contains(table), "{table} is among {tables:?}");
    }
    let not_bytewise: Vec<_> = columns.iter().filter(|(_, _, collation)| collation != "C").collect();
    assert!(not_bytewise.is_empty(), "not bytewise: {not_bytewise:?}");
    h.cleanup().await;
}

/// The plan a session made while `log_entries_p2026_04` was analyzed empty reads it how?
async fn april_scan(conn: &mut sqlx::PgConnection) -> String {
    let plan: Vec<String> = sqlx::query_scalar("EXPLAIN EXECUTE april_version('L-42', '2026-04-01')")
        .fetch_all(&mut *conn)
        .await
        .expect("explain");
    plan.iter().find(|line| line.contains("log_entries_p2026_04")).cloned().unwrap_or_else(|| plan.join("\n"))
}

/// A database-wide `ANALYZE` that reaches next month's partition while it is empty leaves
/// statistics that say "empty"; a session's generic plan made then reads the partition by a
/// sequential scan, and goes on doing so once the month comes and the partition fills. The
/// lifecycle's `analyze_filled_partitions` finds such a partition once rows were written to it,
/// analyzes it, and every session plans again: the same prepared statement now uses an index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_analyzed_empty_is_analyzed_again_once_it_fills() {
    let h = PgHarness::new().await;
    let pool = h.pg().pool().clone();
    let lifecycle = &h.stores().lifecycle;
    lifecycle.ensure_partitions(at(2026, 3, 30, 12), &PartitionPlan::default()).await.expect("ensure");
    sqlx::query("ANALYZE log_entries").execute(&pool).await.expect("analyze, as a nightly vacuumdb would");
    assert!(lifecycle.analyze_filled_partitions().await.expect("nothing filled yet").is_empty());

    let mut session = pool.acquire().await.expect("a connection");
    sqlx::query("PREPARE april_version(text, date) AS SELECT max(seq) FROM log_entries WHERE load_id = $1 AND load_month = $2")
        .execute(&mut *session)
        .await
        .expect("prepare");
    assert!(april_scan(&mut session).await.contains("Seq Scan"), "planned while analyzed empty");

    // April comes: 20,000 entries of 2,000 loads.
    sqlx::query(
        "INSERT INTO log_entries (load_id, seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body, load_month) \
         SELECT 'L-' || (g / 10), g % 10 + 1, 'e' || g, 'event', '2026-04-01 08:00+00', 0, 1, '\\x00'::bytea, '2026-04-01' \
         FROM generate_series(0, 19999) AS g",
    )
    .execute(&pool)
    .await
    .expect("April's entries");
    // The session keeps its plan until something invalidates it: an `ANALYZE` of the partition,
    // or (not for this test to rely on) a reset of its caches when other sessions' catalogue
    // changes overflow its queue, as the suite's parallel tests can. What stays, whatever other
    // sessions do, is the statistics: they still say empty.
    let estimate: f32 =
        sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE oid = 'log_entries_p2026_04'::regclass")
            .fetch_one(&pool)
            .await
            .expect("reltuples");
    assert_eq!(estimate, 0.0, "still empty by its statistics, until something analyzes it");

    // The writers' statistics reach the server within about a second.
    let analyzed = eventually_every(
        Duration::from_secs(10),
        Duration::from_millis(200),
        "a filled partition",
        || async {
            let analyzed = lifecycle.analyze_filled_partitions().await.expect("analyze filled");
            (!analyzed.is_empty()).then_some(analyzed)
        },
    )
    .await;
    assert_eq!(analyzed, ["log_entries_p2026_04"]);
    let scan = april_scan(&mut session).await;
    assert!(
        scan.contains("Index") && !scan.contains("Seq Scan"),
        "planned again from the new statistics: {scan}"
    );
    assert!(lifecycle.analyze_filled_partitions().await.expect("again").is_empty(), "analyzed once");
    sqlx::query("DEALLOCATE april_version").execute(&mut *session).await.expect("deallocate");
    drop(session);
    h.cleanup().await;
}
