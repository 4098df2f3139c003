//! EventStore contract: versions, conflicts, duplicates, atomicity, concurrency, suffix reads,
//! batches and round trips.

use std::sync::Arc;

use load_agent_domain::{Destination, LogEntry};
use load_agent_store::{AppendError, AppendRequest, EventStore, StoreError};
use tokio::sync::Barrier;

use crate::fixtures::{decision, every_kind, row, rows_of, sms, step, t};
use crate::harness::StoreHarness;

pub async fn entries_round_trip_exactly<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    assert_eq!(events.read("L1").await.expect("read"), (vec![], 0), "an unknown load has an empty log");
    let entries = every_kind("L1");
    let rows = rows_of(&entries[2], 3);
    let v = events.append("L1", &entries[..3], 0, &rows).await.expect("append");
    assert_eq!(v, 3);
    let v = events.append("L1", &entries[3..], 3, &[]).await.expect("append");
    assert_eq!(v, entries.len() as u64);
    let (read, version) = events.read("L1").await.expect("read");
    assert_eq!(version, entries.len() as u64);
    assert_eq!(read, entries, "entries come back exactly as appended");
    let rows_back = h.stores().outbox.rows_for_load("L1").await.expect("rows");
    assert_eq!(
        rows_back.iter().map(|r| r.action.clone()).collect::<Vec<_>>(),
        rows.iter().map(|r| r.action.clone()).collect::<Vec<_>>(),
        "actions come back exactly"
    );
}

pub async fn version_conflicts_write_nothing<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let (entries, rows) = step("L1", 0);
    assert_eq!(events.append("L1", &entries, 0, &rows).await.expect("first append"), 2);

    let (entries2, rows2) = step("L1", 1);
    for stale in [0, 1, 3, 7] {
        match events.append("L1", &entries2, stale, &rows2).await {
            Err(AppendError::Conflict { expected, actual }) => assert_eq!((expected, actual), (stale, 2)),
            other => panic!("append at {stale} on a log at 2: expected a conflict, got {other:?}"),
        }
    }
    assert_eq!(events.read("L1").await.expect("read"), (entries.clone(), 2), "the log is unchanged");
    let keys: Vec<_> =
        h.stores().outbox.rows_for_load("L1").await.expect("rows").into_iter().map(|r| r.id).collect();
    assert_eq!(
        keys,
        rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        "no outbox row of a refused append"
    );
    assert_eq!(events.append("L1", &entries2, 2, &rows2).await.expect("append at the current version"), 4);
}

pub async fn duplicate_entry_ids_are_refused<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let (entries, rows) = step("L1", 0);
    events.append("L1", &entries, 0, &rows).await.expect("append");

    // The same inbound event again (a redelivery), with a fresh decision id: already processed.
    let again = vec![entries[0].clone(), sms("L1", "other", t(5))];
    match events.append("L1", &again, 2, &[]).await {
        Err(AppendError::DuplicateEntry { entry_id }) => assert_eq!(entry_id, "sms_0"),
        other => panic!("expected DuplicateEntry, got {other:?}"),
    }
    // A duplicate inside one request.
    let twice = vec![sms("L1", "x", t(1)), sms("L1", "x", t(2))];
    match events.append("L1", &twice, 2, &[]).await {
        Err(AppendError::DuplicateEntry { entry_id }) => assert_eq!(entry_id, "x"),
        other => panic!("expected DuplicateEntry, got {other:?}"),
    }
    assert_eq!(events.read("L1").await.expect("read").1, 2, "nothing was written");
    // Entry ids are unique per load: another load may use the same id.
    events.append("L2", &[sms("L2", "sms_0", t(0))], 0, &[]).await.expect("same id in another load");
}

/// `read_entry` finds an event or a decision by its entry id in its own load only, exactly as
/// `read` returns it.
pub async fn an_entry_is_read_by_its_id<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    assert_eq!(events.read_entry("L1", "sms_0").await.expect("read_entry"), None, "an unknown load");
    let entries = every_kind("L1");
    events.append("L1", &entries, 0, &[]).await.expect("append");
    events.append("L2", &[sms("L2", "only_in_l2", t(0))], 0, &[]).await.expect("append L2");
    for entry in &entries {
        let found = events.read_entry("L1", entry.entry_id()).await.expect("read_entry");
        assert_eq!(found.as_ref(), Some(entry), "{}", entry.entry_id());
    }
    assert_eq!(events.read_entry("L1", "nope").await.expect("read_entry"), None);
    assert_eq!(events.read_entry("L1", "only_in_l2").await.expect("read_entry"), None, "ids are per load");
    assert!(events.read_entry("L2", "only_in_l2").await.expect("read_entry").is_some());
}

pub async fn duplicate_outbox_keys_are_refused<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let (entries, rows) = step("L1", 0);
    events.append("L1", &entries, 0, &rows).await.expect("append");

    let (entries2, _) = step("L1", 1);
    let reused = vec![rows[0].clone()];
    match events.append("L1", &entries2, 2, &reused).await {
        Err(AppendError::DuplicateActionKey { key }) => assert_eq!(key, rows[0].id),
        other => panic!("expected DuplicateActionKey, got {other:?}"),
    }
    let twice = vec![row("L1", "k", Destination::Sms, 4), row("L1", "k", Destination::Sms, 4)];
    match events.append("L1", &entries2, 2, &twice).await {
        Err(AppendError::DuplicateActionKey { key }) => assert_eq!(key, "k"),
        other => panic!("expected DuplicateActionKey, got {other:?}"),
    }
    // Keys are unique across the whole outbox, not per load.
    let (entries3, _) = step("L2", 0);
    let mut other_load = rows[1].clone();
    other_load.load_id = "L2".into();
    assert!(matches!(
        events.append("L2", &entries3, 0, &[other_load]).await,
        Err(AppendError::DuplicateActionKey { .. })
    ));
    assert_eq!(events.read("L1").await.expect("read"), (entries, 2), "no log row of a refused append");
    assert_eq!(events.read("L2").await.expect("read").1, 0);
    assert_eq!(h.stores().outbox.rows_for_load("L1").await.expect("rows").len(), 2);
    assert!(h.stores().outbox.rows_for_load("L2").await.expect("rows").is_empty());
}

pub async fn refused_appends_leave_no_row<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let outbox = &h.stores().outbox;
    let (entries, rows) = step("L1", 0);
    events.append("L1", &entries, 0, &rows).await.expect("append");
    let (entries2, rows2) = step("L1", 1);

    // A conflict with outbox rows: neither the entries nor the rows.
    assert!(matches!(events.append("L1", &entries2, 1, &rows2).await, Err(AppendError::Conflict { .. })));
    // A duplicate key in the last row: not even the new entries or the first rows.
    let mut mixed = rows2.clone();
    mixed.push(rows[1].clone());
    assert!(matches!(
        events.append("L1", &entries2, 2, &mixed).await,
        Err(AppendError::DuplicateActionKey { .. })
    ));
    // A duplicate entry in the last position: not the first entry nor any row.
    let mut dup_last = entries2.clone();
    dup_last.push(entries[0].clone());
    assert!(matches!(
        events.append("L1", &dup_last, 2, &rows2).await,
        Err(AppendError::DuplicateEntry { .. })
    ));
    assert_eq!(events.read("L1").await.expect("read"), (entries, 2));
    let ids: Vec<_> = outbox.rows_for_load("L1").await.expect("rows").into_iter().map(|r| r.id).collect();
    assert_eq!(ids, rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>());
    // Invalid requests are refused as a whole too.
    assert!(matches!(
        events.append("L1", &[], 2, &rows2).await,
        Err(AppendError::Store(StoreError::InvalidRequest(_)))
    ));
    assert!(matches!(
        events.append("L1", &[sms("L9", "e", t(0))], 2, &[]).await,
        Err(AppendError::Store(StoreError::InvalidRequest(_)))
    ));
    assert_eq!(events.read("L1").await.expect("read").1, 2);
    // An empty append only checks the version.
    assert_eq!(events.append("L1", &[], 2, &[]).await.expect("empty append"), 2);
    assert!(matches!(
        events.append("L1", &[], 1, &[]).await,
        Err(AppendError::Conflict { expected: 1, actual: 2 })
    ));
}

pub async fn concurrent_appends_have_one_winner_per_version<H: StoreHarness>(h: &H) {
    const TASKS: usize = 16;
    const ROUNDS: usize = 3;
    let other = h.reopen().await;
    let barrier = Arc::new(Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        // Half the tasks go through a second handle (another process's connections).
        let events: Arc<dyn EventStore> =
            if task % 2 == 0 { h.stores().events.clone() } else { other.events.clone() };
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            let mut conflicts = 0usize;
            for round in 0..ROUNDS {
                let id = format!("t{task}_r{round}");
                let entries = vec![sms("L1", &id, t(0)), sms("L1", &format!("dec:{id}"), t(1))];
                let rows = vec![crate::fixtures::row("L1", &format!("L1/{id}"), Destination::Sms, 0)];
                let (_, mut version) = events.read("L1").await.expect("read");
                if round == 0 {
                    // Everyone appends at version 0 at once: exactly one may win.
                    barrier.wait().await;
                }
                loop {
                    match events.append("L1", &entries, version, &rows).await {
                        Ok(v) => {
                            assert_eq!(v, version + 2);
                            won.push(version);
                            break;
                        }
                        Err(AppendError::Conflict { expected, actual }) => {
                            assert_eq!(expected, version);
                            assert!(actual > version, "a conflict reports a newer version");
                            conflicts += 1;
                            version = events.read("L1").await.expect("re-read").1;
                        }
                        Err(e) => panic!("unexpected append error: {e}"),
                    }
                }
            }
            (won, conflicts)
        }));
    }
    let mut won_versions = Vec::new();
    let mut conflicts = 0;
    for task in tasks {
        let (won, c) = task.await.expect("task");
        won_versions.extend(won);
        conflicts += c;
    }
    won_versions.sort_unstable();
    let expected: Vec<u64> = (0..(TASKS * ROUNDS) as u64).map(|i| 2 * i).collect();
    assert_eq!(won_versions, expected, "exactly one winner per version");
    assert!(conflicts >= TASKS - 1, "the first round alone makes {} conflicts, saw {conflicts}", TASKS - 1);
    let (log, version) = h.stores().events.read("L1").await.expect("read");
    assert_eq!(version, (2 * TASKS * ROUNDS) as u64);
    assert_eq!(log.len() as u64, version, "no gap in the log");
    let mut ids: Vec<_> = log.iter().map(LogEntry::entry_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), log.len(), "every entry once");
    assert_eq!(h.stores().outbox.rows_for_load("L1").await.expect("rows").len(), TASKS * ROUNDS);
}

pub async fn read_since_is_the_suffix_of_read<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let mut version = 0;
    for n in 0..6 {
        let (entries, rows) = step("L1", n);
        version = events.append("L1", &entries, version, &rows).await.expect("append");
    }
    let (all, v) = events.read("L1").await.expect("read");
    assert_eq!((all.len(), v), (12, 12));
    for since in 0..=12u64 {
        let (suffix, v) = events.read_since("L1", since).await.expect("read_since");
        assert_eq!(v, 12, "read_since reports the current version");
        assert_eq!(suffix, all[since as usize..].to_vec(), "read_since({since}) is the suffix of read");
    }
    assert_eq!(
        events.read_since("L1", 20).await.expect("read_since"),
        (vec![], 12),
        "a cache ahead sees the truth"
    );
    assert_eq!(events.read_since("nope", 0).await.expect("read_since"), (vec![], 0));
}

pub async fn append_batch_is_all_or_nothing_per_load<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let (seed, seed_rows) = step("B", 0);
    events.append("B", &seed, 0, &seed_rows).await.expect("seed B");
    let (seed_c, seed_c_rows) = step("C", 0);
    events.append("C", &seed_c, 0, &seed_c_rows).await.expect("seed C");

    let req = |load: &str, n: u64, expected: u64| {
        let (entries, outbox) = step(load, n);
        AppendRequest { load_id: load.into(), entries, expected_version: expected, outbox, summary: None }
    };
    let (c_entries, _) = step("C", 1);
    let batch = vec![
        req("A", 0, 0),
        req("B", 1, 0), // stale: B is at 2
        AppendRequest {
            load_id: "C".into(),
            entries: c_entries,
            expected_version: 2,
            outbox: vec![seed_c_rows[0].clone()], // key already used
            summary: None,
        },
        req("D", 0, 0),
        req("E", 0, 0),
        req("E", 1, 2), // the same load again, after the previous request of the batch
        req("F", 0, 0),
        req("F", 1, 0), // the same load, stale after the previous request
        AppendRequest {
            load_id: "G".into(),
            entries: vec![],
            expected_version: 0,
            outbox: vec![row("G", "g", Destination::Sms, 0)],
            summary: None,
        },
    ];
    let results = events.append_batch(batch).await;
    assert_eq!(results.len(), 9);
    assert_eq!(results[0].as_ref().ok(), Some(&2));
    assert!(matches!(results[1], Err(AppendError::Conflict { expected: 0, actual: 2 })), "{:?}", results[1]);
    assert!(matches!(results[2], Err(AppendError::DuplicateActionKey { .. })), "{:?}", results[2]);
    assert_eq!(results[3].as_ref().ok(), Some(&2));
    assert_eq!(results[4].as_ref().ok(), Some(&2));
    assert_eq!(results[5].as_ref().ok(), Some(&4));
    assert_eq!(results[6].as_ref().ok(), Some(&2));
    assert!(matches!(results[7], Err(AppendError::Conflict { expected: 0, actual: 2 })), "{:?}", results[7]);
    assert!(matches!(results[8], Err(AppendError::Store(StoreError::InvalidRequest(_)))), "{:?}", results[8]);

    let version = |load: &'static str| async move { events.read(load).await.expect("read").1 };
    assert_eq!(
        (
            version("A").await,
            version("B").await,
            version("C").await,
            version("D").await,
            version("E").await,
            version("F").await
        ),
        (2, 2, 2, 2, 4, 2)
    );
    let outbox = &h.stores().outbox;
    assert_eq!(outbox.rows_for_load("C").await.expect("rows").len(), 2, "C's refused request wrote no row");
    assert_eq!(outbox.rows_for_load("E").await.expect("rows").len(), 4);
    assert!(outbox.rows_for_load("G").await.expect("rows").is_empty());
    assert!(events.append_batch(vec![]).await.is_empty());
}

/// A batch of different loads only (what the group commit sends; on Postgres one statement):
/// each load keeps its own version and duplicate checks.
pub async fn append_batch_of_different_loads_checks_each_load<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let mut seed_rows = Vec::new();
    for load in ["B", "C", "D"] {
        let (entries, rows) = step(load, 0);
        events.append(load, &entries, 0, &rows).await.expect("seed");
        seed_rows.push(rows);
    }
    let req = |load: &str, n: u64, expected: u64| {
        let (entries, outbox) = step(load, n);
        AppendRequest { load_id: load.into(), entries, expected_version: expected, outbox, summary: None }
    };
    let batch = vec![
        req("A", 0, 0),
        req("B", 1, 0), // stale: B is at 2
        AppendRequest {
            load_id: "C".into(),
            entries: step("C", 1).0,
            expected_version: 2,
            outbox: vec![seed_rows[1][0].clone()], // key already used
            summary: None,
        },
        AppendRequest {
            load_id: "D".into(),
            entries: step("D", 0).0, // entry ids already logged
            expected_version: 2,
            outbox: vec![],
            summary: None,
        },
        AppendRequest {
            load_id: "G".into(),
            entries: vec![],
            expected_version: 0,
            outbox: vec![row("G", "g", Destination::Sms, 0)], // rows without entries
            summary: None,
        },
        AppendRequest {
            load_id: "H".into(),
            entries: vec![],
            expected_version: 0,
            outbox: vec![],
            summary: None,
        },
        req("I", 0, 0),
    ];
    let results = events.append_batch(batch).await;
    assert_eq!(results.len(), 7);
    assert_eq!(results[0].as_ref().ok(), Some(&2));
    assert!(matches!(results[1], Err(AppendError::Conflict { expected: 0, actual: 2 })), "{:?}", results[1]);
    assert!(matches!(results[2], Err(AppendError::DuplicateActionKey { .. })), "{:?}", results[2]);
    assert!(
        matches!(&results[3], Err(AppendError::DuplicateEntry { entry_id }) if entry_id == "sms_0"),
        "{:?}",
        results[3]
    );
    assert!(matches!(results[4], Err(AppendError::Store(StoreError::InvalidRequest(_)))), "{:?}", results[4]);
    assert_eq!(results[5].as_ref().ok(), Some(&0), "no entries: a version check only");
    assert_eq!(results[6].as_ref().ok(), Some(&2));
    for (load, version) in [("A", 2), ("B", 2), ("C", 2), ("D", 2), ("H", 0), ("I", 2)] {
        assert_eq!(events.read(load).await.expect("read").1, version, "{load}");
    }
    let outbox = &h.stores().outbox;
    assert_eq!(outbox.rows_for_load("A").await.expect("rows").len(), 2);
    assert_eq!(outbox.rows_for_load("C").await.expect("rows").len(), 2, "C's refused request wrote no row");

    // Two loads whose rows carry the same action key in one batch: the first writes, the
    // second is refused as a reused key and writes nothing.
    let (j_entries, j_rows) = step("J", 0);
    let mut k_rows = j_rows.clone();
    for r in &mut k_rows {
        r.load_id = "K".into();
    }
    let results = events
        .append_batch(vec![
            AppendRequest {
                load_id: "J".into(),
                entries: j_entries,
                expected_version: 0,
                outbox: j_rows,
                summary: None,
            },
            AppendRequest {
                load_id: "K".into(),
                entries: step("K", 0).0,
                expected_version: 0,
                outbox: k_rows,
                summary: None,
            },
        ])
        .await;
    assert_eq!(results[0].as_ref().ok(), Some(&2));
    assert!(matches!(results[1], Err(AppendError::DuplicateActionKey { .. })), "{:?}", results[1]);
    assert_eq!(events.read("K").await.expect("read").1, 0, "K wrote nothing");
}

pub async fn cost_and_load_listing_are_sql<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    let d1 = decision("L2", "e1", t(0), 0.0125);
    let d2 = decision("L2", "e2", t(1), 0.0031);
    events.append("L2", &[sms("L2", "e1", t(0)), d1], 0, &[]).await.expect("append");
    events.append("L2", &[sms("L2", "e2", t(1)), d2], 2, &[]).await.expect("append");
    events.append("L1", &[sms("L1", "e1", t(0))], 0, &[]).await.expect("append");
    let cost = events.llm_cost("L2").await.expect("cost");
    assert!((cost - 0.0156).abs() < 1e-12, "cost {cost}");
    assert_eq!(events.llm_cost("L1").await.expect("cost"), 0.0);
    assert_eq!(events.llm_cost("none").await.expect("cost"), 0.0);
    assert_eq!(events.load_ids(10).await.expect("ids"), vec!["L1".to_owned(), "L2".to_owned()]);
    assert_eq!(events.load_ids(1).await.expect("ids"), vec!["L1".to_owned()]);
}

pub async fn plain_columns_sit_beside_the_avro_body<H: StoreHarness>(h: &H) {
    let entries = every_kind("L1");
    h.stores().events.append("L1", &entries, 0, &[]).await.expect("append");
    let rows = h.plain_columns("L1").await;
    assert_eq!(rows.len(), entries.len());
    for (i, (row, entry)) in rows.iter().zip(&entries).enumerate() {
        assert_eq!(row.seq, i as u64 + 1, "seqs are 1..n");
        assert_eq!(row.entry_id, entry.entry_id());
        assert_eq!(row.kind, entry.kind_str());
        assert_eq!(row.recorded_at, entry.recorded_at());
        assert_eq!(row.llm_cost_usd, entry.llm_cost_usd());
        let (schema_id, body) = load_agent_avro::log_entry::encode_log_entry(entry);
        assert_eq!(row.schema_id, schema_id.0, "the writer schema id has its own column");
        assert_eq!(row.body, body, "the body is the entry's Avro encoding");
    }
    assert_eq!(rows[2].kind, "decision");
    assert!(rows[2].llm_cost_usd > 0.0);
}

pub async fn long_logs_read_back_whole_and_in_order<H: StoreHarness>(h: &H) {
    // Longer than the decoder's chunks, so that reads decode in pieces and reassemble.
    let events = &h.stores().events;
    let all: Vec<LogEntry> = (0..700).map(|i| sms("L1", &format!("e{i}"), t(i))).collect();
    let mut version = 0;
    for part in all.chunks(250) {
        version = events.append("L1", part, version, &[]).await.expect("append");
    }
    assert_eq!(events.read("L1").await.expect("read"), (all.clone(), 700));
    for since in [1u64, 127, 128, 129, 300, 699] {
        let (suffix, v) = events.read_since("L1", since).await.expect("read_since");
        assert_eq!((suffix.as_slice(), v), (&all[since as usize..], 700), "read_since({since})");
    }
}

pub async fn stored_rows_and_loads_of_a_month_are_read_as_written<H: StoreHarness>(h: &H) {
    let events = &h.stores().events;
    // L1 starts at t(0); L2 starts an hour later; L3 a day later.
    events
        .append("L1", &[sms("L1", "e1", t(0)), decision("L1", "e1", t(1), 0.25)], 0, &[])
        .await
        .expect("append");
    events.append("L1", &[sms("L1", "e2", t(90_000))], 2, &[]).await.expect("append");
    events.append("L2", &[sms("L2", "e1", t(3_600))], 0, &[]).await.expect("append");
    events.append("L3", &[sms("L3", "e1", t(86_400))], 0, &[]).await.expect("append");

    let stored = events.read_stored("L1").await.expect("read stored");
    assert_eq!(stored.len(), 3);
    assert_eq!(stored, h.plain_columns("L1").await, "every column, and the bytes as stored");
    let (entries, _) = events.read("L1").await.expect("read");
    for (s, e) in stored.iter().zip(&entries) {
        let decoded =
            load_agent_avro::log_entry::decode_log_entry(load_agent_avro::SchemaId(s.schema_id), &s.body)
                .expect("decode");
        assert_eq!(&decoded, e);
    }
    assert!(events.read_stored("none").await.expect("read stored").is_empty());

    let ids = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // The first entry decides; L1's later entry (a day on) does not put it in the next day.
    assert_eq!(events.load_ids_started_between(t(0), t(86_400), 10).await.expect("ids"), ids(&["L1", "L2"]));
    assert_eq!(events.load_ids_started_between(t(1), t(86_400), 10).await.expect("ids"), ids(&["L2"]));
    assert_eq!(events.load_ids_started_between(t(0), t(86_401), 1).await.expect("ids"), ids(&["L1"]));
    assert_eq!(events.load_ids_started_between(t(86_400), t(200_000), 10).await.expect("ids"), ids(&["L3"]));
}
