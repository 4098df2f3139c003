//! The store contract suite (ADR 0003): every test is written once, as a generic async fn over
//! [`harness::StoreHarness`], and instantiated by [`contract!`] for SQLite (a fresh file per
//! test) and Postgres (a fresh schema per test on `DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`). The Postgres half fails, never skips, when the
//! server is unreachable.

mod attention;
mod dead_letters;
mod fixtures;
mod harness;
mod lock;
mod log;
mod outbox;
mod partitions;
mod postgres_only;
mod timers;

/// Instantiates each listed contract test for both backends: `sqlite::<test>` and
/// `postgres::<test>`.
macro_rules! contract {
    ($($module:ident :: $test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    let h = crate::harness::SqliteHarness::new().await;
                    crate::$module::$test(&h).await;
                    crate::harness::StoreHarness::cleanup(h).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    let h = crate::harness::PgHarness::new().await;
                    crate::$module::$test(&h).await;
                    crate::harness::StoreHarness::cleanup(h).await;
                }
            )*
        }
    };
}

contract!(
    attention::the_summary_is_written_with_the_append_and_only_with_it,
    attention::the_attention_list_finds_orders_filters_and_pages,
    dead_letters::dead_letters_are_kept_whole_once_per_source,
    log::entries_round_trip_exactly,
    log::plain_columns_sit_beside_the_avro_body,
    log::version_conflicts_write_nothing,
    log::duplicate_entry_ids_are_refused,
    log::an_entry_is_read_by_its_id,
    log::duplicate_outbox_keys_are_refused,
    log::refused_appends_leave_no_row,
    log::concurrent_appends_have_one_winner_per_version,
    log::read_since_is_the_suffix_of_read,
    log::append_batch_is_all_or_nothing_per_load,
    log::append_batch_of_different_loads_checks_each_load,
    log::cost_and_load_listing_are_sql,
    log::long_logs_read_back_whole_and_in_order,
    log::stored_rows_and_loads_of_a_month_are_read_as_written,
    outbox::claims_hand_out_due_rows_once,
    outbox::two_relays_never_hold_the_same_row,
    outbox::an_expired_lease_hands_the_row_over,
    outbox::failed_attempts_count_and_retry_at_is_respected,
    outbox::deferral_does_not_count_an_attempt,
    outbox::rows_of_a_load_go_out_in_commit_order_per_destination,
    outbox::monitoring_queries_and_rows_for_load,
    outbox::the_relay_lag_leaves_out_chosen_waits,
    outbox::a_batch_mark_marks_the_held_rows_and_reports_a_lost_claim_stale,
    outbox::an_empty_or_repeating_batch_mark_marks_nothing,
    outbox::a_failed_batch_mark_retries_buries_and_reports_a_lost_claim_stale,
    outbox::a_deferred_batch_mark_releases_the_held_rows_and_reports_a_lost_claim_stale,
    timers::schedule_is_idempotent,
    timers::cancel_is_idempotent_and_sticks,
    timers::mark_fired_is_idempotent,
    timers::mark_fired_marks_a_batch_in_one_call,
    timers::due_is_oldest_first_with_a_limit_and_lag,
    lock::a_lease_is_granted_and_released,
);
