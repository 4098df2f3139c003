//! The name of every metric the runtime emits, in one place: each `metrics::counter!`,
//! `gauge!` and `histogram!` of this crate names one of these constants, never a string of its
//! own. Each name is one metric of one kind (the kind is in each constant's doc), and the
//! binary's `telemetry` describes them; docs/operations.md and docs/runtime.md say what they
//! mean and how to alert on them.

// The worker (worker.rs).

/// Counter, label `outcome`: worker runs.
pub const RUNS_TOTAL: &str = "load_agent_runs_total";
/// Counter: version conflicts on append (each one re-decides).
pub const CONFLICTS_TOTAL: &str = "load_agent_conflicts_total";
/// Counter: decisions that reused a committed action key.
pub const DUPLICATE_ACTION_KEYS_TOTAL: &str = "load_agent_duplicate_action_keys_total";
/// Counter: events dead-lettered by the loop as invalid.
pub const INVALID_EVENTS_TOTAL: &str = "load_agent_invalid_events_total";
/// Counter, label `path`: decisions committed.
pub const DECISIONS_TOTAL: &str = "load_agent_decisions_total";
/// Counter, label `method`: LLM calls recorded in decisions.
pub const LLM_CALLS_TOTAL: &str = "load_agent_llm_calls_total";
/// Counter: LLM cost recorded in decisions, in millionths of a USD.
pub const LLM_COST_MICROUSD_TOTAL: &str = "load_agent_llm_cost_microusd_total";

// The snapshot cache (cache.rs).

/// Counter: LoadState snapshot cache hits.
pub const CACHE_HITS_TOTAL: &str = "load_agent_cache_hits_total";
/// Counter: LoadState snapshot cache misses.
pub const CACHE_MISSES_TOTAL: &str = "load_agent_cache_misses_total";
/// Counter: LoadState snapshots dropped from the cache (a version conflict).
pub const CACHE_INVALIDATIONS_TOTAL: &str = "load_agent_cache_invalidations_total";
/// Counter: cache hits served without reading the log (a trusting cache, the worker's).
pub const CACHE_TRUSTED_HITS_TOTAL: &str = "load_agent_cache_trusted_hits_total";

// Group commit (group_commit.rs).

/// Histogram: how long an append waited in its group, in seconds.
pub const GROUP_COMMIT_WAIT_SECONDS: &str = "load_agent_group_commit_wait_seconds";
/// Histogram: appends per group transaction.
pub const GROUP_COMMIT_BATCH_SIZE: &str = "load_agent_group_commit_batch_size";

// The relay (relay.rs), the per-contact send limit (limit.rs) and ops alerts (alerts.rs).

/// Counter, labels `destination`, `result`: relay sends.
pub const RELAY_SENDS_TOTAL: &str = "load_agent_relay_sends_total";
/// Counter, label `destination`: outbox rows given up (dead).
pub const DEAD_ROWS_TOTAL: &str = "load_agent_dead_rows_total";
/// Counter, label `destination`: rows deferred by the per-contact send limit.
pub const SEND_LIMIT_DEFERRALS_TOTAL: &str = "load_agent_send_limit_deferrals_total";
/// Counter, labels `class`, `action`: ops alerts (Hero-channel and internal action failures).
pub const OPS_ALERTS_TOTAL: &str = "load_agent_ops_alerts_total";

// The timer pump (pump.rs).

/// Counter: timers the pump fired.
pub const TIMERS_FIRED_TOTAL: &str = "load_agent_timers_fired_total";
/// Histogram: how late after `fire_at` each timer fired, in seconds. (How late the oldest due
/// timer is now is the binary's gauge `load_agent_timer_lag_seconds`, a different metric.)
pub const TIMER_FIRE_DELAY_SECONDS: &str = "load_agent_timer_fire_delay_seconds";

// Stage timings (stages.rs).

/// Histogram, label `stage`: how long each stage of the pipeline took, in seconds.
pub const STAGE_SECONDS: &str = "load_agent_stage_seconds";
