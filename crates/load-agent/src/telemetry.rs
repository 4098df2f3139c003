//! Logs and metrics. Metric names are fixed and documented in one place: docs/operations.md.

use std::time::Duration;

use chrono::Utc;
use load_agent_store::Stores;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::config::LogSettings;

/// Installs the tracing subscriber: text or JSON, filtered by `log.level` (or `RUST_LOG`).
pub fn init_logs(settings: &LogSettings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&settings.level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let _ = if settings.format == "json" { builder.json().try_init() } else { builder.try_init() };
}

/// Installs the Prometheus recorder and describes every metric.
pub fn init_metrics() -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new().install_recorder().map_err(|e| format!("metrics recorder: {e}"))?;
    // Every named metric is present from the start (at zero), so dashboards and alerts see it
    // before the first event; labeled series appear as they are used.
    for (name, help) in METRICS {
        if name.ends_with("_total") {
            metrics::describe_counter!(*name, *help);
            metrics::counter!(*name).increment(0);
        } else {
            metrics::describe_gauge!(*name, *help);
            metrics::gauge!(*name).set(0.0);
        }
    }
    Ok(handle)
}

/// Every metric load-agent exports (also in docs/operations.md).
pub const METRICS: &[(&str, &str)] = &[
    ("load_agent_outbox_oldest_pending_seconds", "Age of the oldest pending outbox row."),
    ("load_agent_outbox_dead_rows_last_hour", "Outbox rows that died in the last hour."),
    ("load_agent_dead_rows_total", "Outbox rows given up (dead), by destination."),
    ("load_agent_timer_lag_seconds", "How late the oldest due timer is."),
    ("load_agent_timers_fired_total", "Timers the pump fired."),
    ("load_agent_conflicts_total", "Version conflicts on append (re-decided)."),
    ("load_agent_runs_total", "Worker runs, by outcome."),
    ("load_agent_decisions_total", "Decisions committed, by path."),
    ("load_agent_llm_calls_total", "LLM calls recorded in decisions, by method."),
    ("load_agent_llm_cost_microusd_total", "LLM cost recorded in decisions, in millionths of a USD."),
    ("load_agent_consumer_lag", "Kafka consumer lag, by partition."),
    ("load_agent_cache_hits_total", "LoadState snapshot cache hits."),
    ("load_agent_cache_misses_total", "LoadState snapshot cache misses."),
    ("load_agent_invalid_events_total", "Events refused as invalid (to the DLQ)."),
    ("load_agent_dead_letters_total", "Records sent to the DLQ."),
    ("load_agent_relay_sends_total", "Relay sends, by destination and result."),
    ("load_agent_duplicate_action_keys_total", "Decisions that reused a committed action key."),
    ("load_agent_ops_alerts_total", "Ops alerts (Hero-channel and internal action failures)."),
    (
        "load_agent_consumer_close_timeouts_total",
        "Kafka consumer closes librdkafka did not complete in 30 s.",
    ),
    ("load_agent_partition_failures_total", "Runs that could not make the partitions ahead (Postgres)."),
    (
        "load_agent_retention_failures_total",
        "Retention steps that failed (an archive that does not verify, a refused drop).",
    ),
];

/// Samples the store-backed gauges every `every`.
pub async fn sample_store_gauges(
    stores: Stores,
    every: Duration,
    mut shutdown: load_agent_runtime::Shutdown,
) {
    loop {
        let now = Utc::now();
        if let Ok(age) = stores.outbox.oldest_pending_age(now).await {
            metrics::gauge!("load_agent_outbox_oldest_pending_seconds")
                .set(age.map_or(0.0, |d| d.as_secs_f64()));
        }
        if let Ok(n) = stores.outbox.dead_since(now - chrono::Duration::hours(1)).await {
            metrics::gauge!("load_agent_outbox_dead_rows_last_hour").set(n as f64);
        }
        if let Ok(lag) = stores.timers.oldest_due_lag(now).await {
            metrics::gauge!("load_agent_timer_lag_seconds").set(lag.map_or(0.0, |d| d.as_secs_f64()));
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.recv() => return,
        }
    }
}
