//! Postgres behavior beyond the shared contract: the advisory-lock lease and the retention run
//! lock exclude other holders (SQLite's are no-ops by design), and schemas isolate stores.

use std::time::Duration;

use load_agent_store::{DispatchedMark, PgStore, StoreOptions};
use load_agent_testkit::wait::eventually_every;

use crate::fixtures::{step, t};
use crate::harness::{PgHarness, StoreHarness};

/// How often a test looks for an unlock another connection runs (it lands within milliseconds).
const UNLOCK_POLL: Duration = Duration::from_millis(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lease_excludes_other_holders() {
    let h = PgHarness::new().await;
    let other = h.reopen().await;
    let lock = &h.stores().lock;
    let lease = lock.try_lock("L1").await.expect("try_lock").expect("granted");
    assert!(lock.try_lock("L1").await.expect("try_lock").is_none(), "same process: excluded");
    assert!(other.lock.try_lock("L1").await.expect("try_lock").is_none(), "another session: excluded");
    assert!(lock.try_lock("L2").await.expect("try_lock").is_some(), "another load: granted");
    lease.release();
    // The release queues the unlock on this store's lock connection; another session sees it
    // once that connection ran it.
    let again = eventually_every(
        Duration::from_secs(5),
        UNLOCK_POLL,
        "released: another session can take it",
        || async { other.lock.try_lock("L1").await.expect("try_lock") },
    )
    .await;
    assert!(lock.try_lock("L1").await.expect("try_lock").is_none(), "now held by the other session");
    drop(again);
    drop(other);
    h.cleanup().await;
}

/// The lease's keys follow the schema the store really uses: a store opened by a URL whose
/// `search_path` names a schema shares leases with the store opened in that schema by name, and
/// not with a store of another schema opened the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_follow_the_schema_a_url_search_path_names() {
    let a = PgHarness::new().await;
    let b = PgHarness::new().await;
    let by_search_path = |h: &PgHarness| {
        let schema = h.pg().schema().expect("the harness store has a schema");
        let separator = if h.url().contains('?') { '&' } else { '?' };
        format!("{}{separator}options=-c%20search_path%3D{schema}", h.url())
    };
    let a_url = PgStore::connect(&by_search_path(&a)).await.expect("open by search_path").into_stores();
    let b_url = PgStore::connect(&by_search_path(&b)).await.expect("open by search_path").into_stores();
    let lease = a_url.lock.try_lock("L1").await.expect("try_lock").expect("granted");
    assert!(
        a.stores().lock.try_lock("L1").await.expect("try_lock").is_none(),
        "the same schema, opened by name: excluded"
    );
    let other = b_url.lock.try_lock("L1").await.expect("try_lock");
    assert!(other.is_some(), "another schema, opened by its search_path: granted");
    drop((lease, other));
    a.cleanup().await;
    b.cleanup().await;
}

/// One retention run at a time per store, whichever process asks; a store in another schema
/// runs its own. A holder that dies without releasing (its connection closed) frees it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retention_lock_admits_one_run_per_store_at_a_time() {
    let h = PgHarness::new().await;
    let other = h.reopen().await;
    let elsewhere = PgHarness::new().await;
    let lifecycle = &h.stores().lifecycle;
    let held = lifecycle.try_lock_retention().await.expect("try").expect("granted");
    assert!(lifecycle.try_lock_retention().await.expect("try").is_none(), "same store: excluded");
    assert!(other.lifecycle.try_lock_retention().await.expect("try").is_none(), "another process: excluded");
    let apart = elsewhere.stores().lifecycle.try_lock_retention().await.expect("try");
    assert!(apart.is_some(), "a store in another schema: granted");
    held.release().await;
    let taken = other.lifecycle.try_lock_retention().await.expect("try").expect("released: granted");
    assert!(lifecycle.try_lock_retention().await.expect("try").is_none(), "now held by the other");
    // Dropped without a release, as by a process that died: the server ends the session.
    drop(taken);
    let again = eventually_every(
        Duration::from_secs(5),
        UNLOCK_POLL,
        "a holder's closed session frees the lock",
        || async { lifecycle.try_lock_retention().await.expect("try") },
    )
    .await;
    again.release().await;
    if let Some(lock) = apart {
        lock.release().await;
    }
    drop(other);
    elsewhere.cleanup().await;
    h.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_isolate_stores() {
    let a = PgHarness::new().await;
    let b = PgHarness::new().await;
    let (entries, rows) = step("L1", 0);
    a.stores().events.append("L1", &entries, 0, &rows).await.expect("append in a");
    assert_eq!(b.stores().events.read("L1").await.expect("read b").1, 0);
    assert!(b.stores().outbox.pending(10, t(100)).await.expect("claim b").is_empty());
    assert_eq!(a.stores().outbox.pending(10, t(100)).await.expect("claim a").len(), 2);
    a.cleanup().await;
    b.cleanup().await;
}

/// The relay claims, marks and reads its lag on its own pool: with every connection of the
/// store's main pool taken (a burst of appends, a long console query), deliveries go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_goes_on_while_the_main_pool_is_taken() {
    let h = PgHarness::new().await;
    let schema = h.pg().schema().expect("the harness store has a schema");
    let options = StoreOptions {
        max_connections: 1,
        relay_connections: 1,
        acquire_timeout: Duration::from_secs(2),
        ..StoreOptions::default()
    };
    let store = PgStore::connect_in_schema_with(h.url(), schema, &options).await.expect("open");
    let stores = store.clone().into_stores();
    let (entries, rows) = step("L1", 0);
    stores.events.append("L1", &entries, 0, &rows).await.expect("append");

    let taken = store.pool().acquire().await.expect("the main pool's one connection");
    let append = stores.events.append("L1", &step("L1", 1).0, 2, &[]).await;
    assert!(append.is_err(), "the main pool is taken: an append waits out the acquire timeout");
    let claimed = stores.outbox.pending(10, t(100)).await.expect("claimed on the relay's pool");
    assert_eq!(claimed.len(), rows.len());
    let marks: Vec<_> = claimed
        .iter()
        .map(|r| DispatchedMark { id: r.id.clone(), token: r.claim_token, receipt: "r".into() })
        .collect();
    let marked =
        stores.outbox.mark_dispatched_batch(&marks, t(101)).await.expect("marked on the relay's pool");
    assert!(marked.iter().all(Result::is_ok), "{marked:?}");
    assert_eq!(stores.outbox.relay_lag(t(102)).await.expect("lag on the relay's pool"), None);
    drop(taken);
    drop((stores, store));
    h.cleanup().await;
}

#[tokio::test]
async fn a_bad_schema_name_is_refused_before_any_sql() {
    let err = PgStore::connect_in_schema("postgres://nobody@127.0.0.1:1/none", "x; drop table y").await;
    assert!(err.is_err());
}

/// Every connection of the store plans its statements once, generically (a custom plan over the
/// partitioned tables is planned again at each execution, over every partition), and never
/// compiles one with JIT (a generic plan whose estimate crossed `jit_above_cost` paid tens of
/// milliseconds of compilation per execution); whatever the server's own defaults are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_s_connections_plan_generically_and_never_jit() {
    let h = PgHarness::new().await;
    let pool = h.pg().pool();
    // Held together, so that three different connections answer (one lent and returned three
    // times could be the same one).
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(pool.acquire().await.expect("a connection"));
    }
    for conn in &mut conns {
        let jit: String = sqlx::query_scalar("SHOW jit").fetch_one(&mut **conn).await.expect("show jit");
        let plans: String = sqlx::query_scalar("SHOW plan_cache_mode")
            .fetch_one(&mut **conn)
            .await
            .expect("show plan_cache_mode");
        assert_eq!((jit.as_str(), plans.as_str()), ("off", "force_generic_plan"));
    }
    drop(conns);
    h.cleanup().await;
}
