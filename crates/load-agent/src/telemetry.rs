//! Logs and metrics. Every metric name is a constant of the crate that emits it (the runtime's,
//! the ingest crate's and the Kafka crate's `metric_names`, and this module's for the binary's
//! own: the store gauges and the partition and retention jobs); [`METRICS`] lists the ones
//! described and made present from the start, and `KAFKA_METRICS` the Kafka consumer's (builds
//! with the `kafka` feature). What they mean: docs/operations.md.

use std::time::Duration;

use chrono::Utc;
#[cfg(feature = "kafka")]
use load_agent_kafka::metric_names as kafka;
use load_agent_runtime::metric_names as runtime;
use load_agent_store::Stores;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::config::LogSettings;

/// Installs the tracing subscriber: text or JSON, filtered by `log.level` (or `RUST_LOG`).
pub fn init_logs(settings: &LogSettings) {
    let parse = |spec: &str| tracing_subscriber::EnvFilter::try_new(log_filter(spec));
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|spec| parse(&spec).ok())
        .or_else(|| parse(&settings.level).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(log_filter("info")));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let _ = if settings.format == "json" { builder.json().try_init() } else { builder.try_init() };
}

/// The filter `spec` with apache-avro's schema parser quieted to errors, unless `spec` names
/// apache-avro itself. The parser warns at every start about the single-member unions of the
/// registered `LogEntry` and `ActionCommand` schemas (`contact_updates`); they are part of the
/// wire format (dropping the union changes the encoding), so the warning asks for nothing an
/// operator can do.
fn log_filter(spec: &str) -> String {
    if spec.contains("apache_avro") {
        spec.to_owned()
    } else if spec.trim().is_empty() {
        "apache_avro::schema=error".to_owned()
    } else {
        format!("{spec},apache_avro::schema=error")
    }
}

/// Installs the Prometheus recorder and describes every metric.
pub fn init_metrics() -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new().install_recorder().map_err(|e| format!("metrics recorder: {e}"))?;
    // Every named metric is present from the start (at zero), so dashboards and alerts see it
    // before the first event; labeled series appear as they are used.
    for (name, help) in described() {
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

/// Gauge: age of the oldest pending outbox row, in seconds (sampled from the store): the
/// backlog, rows deferred by a send limit included.
pub const OUTBOX_OLDEST_PENDING_SECONDS: &str = "load_agent_outbox_oldest_pending_seconds";
/// Gauge: the relay's lag, in seconds (`Outbox::relay_lag`): how long the longest-waiting
/// undelivered row has waited, leaving out a send limit's deferrals (sampled from the store).
pub const OUTBOX_RELAY_LAG_SECONDS: &str = "load_agent_outbox_relay_lag_seconds";
/// Gauge: outbox rows that died in the last hour (sampled from the store).
pub const OUTBOX_DEAD_ROWS_LAST_HOUR: &str = "load_agent_outbox_dead_rows_last_hour";
/// Gauge: how late the oldest due timer is now, in seconds (sampled from the store). How late
/// each timer fired is the runtime's histogram `load_agent_timer_fire_delay_seconds`.
pub const TIMER_LAG_SECONDS: &str = "load_agent_timer_lag_seconds";
/// Counter: runs that could not make the partitions ahead or retire the outbox's old days (Postgres).
pub const PARTITION_FAILURES_TOTAL: &str = "load_agent_partition_failures_total";
/// Counter: retention steps that failed.
pub const RETENTION_FAILURES_TOTAL: &str = "load_agent_retention_failures_total";

/// The metrics described and present (at zero) from the start, with their help (also in
/// docs/operations.md): a name ending in `_total` is a counter, any other a gauge. Histograms
/// and the other counters appear with their first observation.
pub const METRICS: &[(&str, &str)] = &[
    (OUTBOX_OLDEST_PENDING_SECONDS, "Age of the oldest pending outbox row, deferred rows included."),
    (
        OUTBOX_RELAY_LAG_SECONDS,
        "How long the longest-waiting undelivered outbox row has waited, send-limit deferrals left out.",
    ),
    (OUTBOX_DEAD_ROWS_LAST_HOUR, "Outbox rows that died in the last hour."),
    (runtime::DEAD_ROWS_TOTAL, "Outbox rows given up (dead), by destination."),
    (TIMER_LAG_SECONDS, "How late the oldest due timer is."),
    (runtime::TIMERS_FIRED_TOTAL, "Timers the pump fired."),
    (runtime::CONFLICTS_TOTAL, "Version conflicts on append (re-decided)."),
    (runtime::RUNS_TOTAL, "Worker runs, by outcome."),
    (runtime::DECISIONS_TOTAL, "Decisions committed, by path."),
    (runtime::LLM_CALLS_TOTAL, "LLM calls recorded in decisions, by method."),
    (runtime::LLM_COST_MICROUSD_TOTAL, "LLM cost recorded in decisions, in millionths of a USD."),
    (runtime::CACHE_HITS_TOTAL, "LoadState snapshot cache hits."),
    (runtime::CACHE_MISSES_TOTAL, "LoadState snapshot cache misses."),
    (runtime::INVALID_EVENTS_TOTAL, "Events refused as invalid (to the DLQ)."),
    (runtime::RELAY_SENDS_TOTAL, "Relay sends, by destination and result."),
    (runtime::DUPLICATE_ACTION_KEYS_TOTAL, "Decisions that reused a committed action key."),
    (runtime::OPS_ALERTS_TOTAL, "Ops alerts (Hero-channel and internal action failures)."),
    (
        PARTITION_FAILURES_TOTAL,
        "Runs that could not make the partitions ahead or retire old outbox days (Postgres).",
    ),
    (
        RETENTION_FAILURES_TOTAL,
        "Retention steps that failed (an archive that does not verify, a refused drop).",
    ),
];

/// The Kafka consumer's metrics, described and present from the start in a build with the
/// `kafka` feature (the embedded default has no consumer).
#[cfg(feature = "kafka")]
pub const KAFKA_METRICS: &[(&str, &str)] = &[
    (kafka::CONSUMER_LAG, "Kafka consumer lag, by partition."),
    (
        kafka::BROKER_ROUND_TRIP_SECONDS,
        "How long each broker took to answer the consumer's requests (nearly all fetches), by quantile, over librdkafka's last statistics window.",
    ),
    (
        kafka::PRODUCER_ROUND_TRIP_SECONDS,
        "How long each broker took to answer a producer's requests (nearly all produce requests), by producer and quantile, over librdkafka's last statistics window.",
    ),
    (kafka::DEAD_LETTERS_TOTAL, "Records sent to the DLQ."),
    (kafka::CONSUMER_CLOSE_TIMEOUTS_TOTAL, "Kafka consumer closes librdkafka did not complete in 30 s."),
];

/// Every metric this build describes: [`METRICS`], and `KAFKA_METRICS` with the `kafka` feature.
fn described() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    let kafka: &[(&str, &str)] = {
        #[cfg(feature = "kafka")]
        {
            KAFKA_METRICS
        }
        #[cfg(not(feature = "kafka"))]
        {
            &[]
        }
    };
    METRICS.iter().chain(kafka)
}

/// Samples the store-backed gauges every `every`.
pub async fn sample_store_gauges(
    stores: Stores,
    every: Duration,
    mut shutdown: load_agent_runtime::Shutdown,
) {
    loop {
        let now = Utc::now();
        if let Ok(age) = stores.outbox.oldest_pending_age(now).await {
            metrics::gauge!(OUTBOX_OLDEST_PENDING_SECONDS).set(age.map_or(0.0, |d| d.as_secs_f64()));
        }
        if let Ok(lag) = stores.outbox.relay_lag(now).await {
            metrics::gauge!(OUTBOX_RELAY_LAG_SECONDS).set(lag.map_or(0.0, |d| d.as_secs_f64()));
        }
        if let Ok(n) = stores.outbox.dead_since(now - chrono::Duration::hours(1)).await {
            metrics::gauge!(OUTBOX_DEAD_ROWS_LAST_HOUR).set(n as f64);
        }
        if let Ok(lag) = stores.timers.oldest_due_lag(now).await {
            metrics::gauge!(TIMER_LAG_SECONDS).set(lag.map_or(0.0, |d| d.as_secs_f64()));
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.recv() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every metric has one name, one constant and one kind: no `counter!`, `gauge!` or
    //! `histogram!` under crates/ names a metric with a string of its own, no two constants
    //! share a name, and no name is used as two kinds (a gauge and a histogram under one name
    //! would break the exposition and the alert rules); what deploy/ and the docs name is one of
    //! them.

    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use super::described;

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a source directory").flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The source of every crate under crates/ (its `src/`), without comment lines.
    fn sources() -> Vec<(PathBuf, String)> {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for krate in std::fs::read_dir(&crates).expect("crates/").flatten() {
            let src = krate.path().join("src");
            if src.is_dir() {
                rust_files(&src, &mut files);
            }
        }
        files
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(&f).expect("a source file");
                let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
                (f, code.join("\n"))
            })
            .collect()
    }

    #[test]
    fn apache_avros_schema_warning_is_quiet_unless_asked_for() {
        assert_eq!(super::log_filter("info"), "info,apache_avro::schema=error");
        assert_eq!(super::log_filter("debug,sqlx=warn"), "debug,sqlx=warn,apache_avro::schema=error");
        assert_eq!(super::log_filter("info,apache_avro=debug"), "info,apache_avro=debug");
        assert!(tracing_subscriber::EnvFilter::try_new(super::log_filter("warn")).is_ok());
    }

    #[test]
    fn every_metric_is_named_by_one_constant_and_used_as_one_kind() {
        let sources = sources();
        // The constants: `pub const NAME: &str = "load_agent_...";`.
        let mut value_of: BTreeMap<String, String> = BTreeMap::new();
        for (_, code) in &sources {
            for line in code.lines() {
                let Some(rest) = line.trim().strip_prefix("pub const ") else { continue };
                let Some((ident, value)) = rest.split_once(": &str = \"") else { continue };
                let Some(value) = value.strip_suffix("\";") else { continue };
                if value.starts_with("load_agent_")
                    && !value.contains(['.', ' '])
                    && value != "load_agent_console"
                {
                    let before = value_of.insert(ident.to_string(), value.to_string());
                    assert!(before.is_none() || before.as_deref() == Some(value), "{ident} is defined twice");
                }
            }
        }
        let names: BTreeSet<&String> = value_of.values().collect();
        assert_eq!(names.len(), value_of.len(), "two constants name one metric: {value_of:?}");

        // Every macro call: its first argument is a constant (resolved by its last path segment)
        // or a variable, never a string literal.
        let mut kinds: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for (file, code) in &sources {
            for kind in ["counter", "gauge", "histogram"] {
                let needle = format!("{kind}!(");
                for (at, _) in code.match_indices(&needle) {
                    let preceding = code[..at].chars().next_back();
                    if preceding.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue; // describe_counter!( and the like: checked through METRICS
                    }
                    let arg = code[at + needle.len()..].trim_start();
                    assert!(
                        !arg.starts_with('"'),
                        "{}: a {kind}! names its metric with a string literal, not a metric_names constant",
                        file.display()
                    );
                    let ident: String =
                        arg.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
                    let last = ident.rsplit("::").next().unwrap_or_default();
                    if let Some(name) = value_of.get(last) {
                        kinds.entry(name.clone()).or_default().insert(kind);
                    }
                }
            }
        }
        for (name, used_as) in &kinds {
            assert_eq!(used_as.len(), 1, "{name} is used as {used_as:?}");
        }
        assert_eq!(
            kinds.get("load_agent_timer_lag_seconds").map(|k| k.iter().copied().collect::<Vec<_>>()),
            Some(vec!["gauge"])
        );

        // What the alert rules, their tests, the dashboard and the docs name is a metric.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for file in [
            "deploy/prometheus/alerts.yml",
            "deploy/prometheus/alerts.test.yml",
            "deploy/grafana/load-agent.json",
            "docs/operations.md",
            "docs/runtime.md",
            "docs/kafka.md",
        ] {
            let text = std::fs::read_to_string(root.join(file)).expect("a committed file");
            let mut named = 0;
            for (at, _) in text.match_indices("load_agent_") {
                if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let tail = &text[at..];
                let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
                if tail[end..].starts_with("::") {
                    continue; // a crate's path, not a metric
                }
                let name = &tail[..end];
                let base =
                    ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
                assert!(
                    names.iter().any(|n| n.as_str() == name || n.as_str() == base),
                    "{file} names {name}, which no metric_names constant is"
                );
                named += 1;
            }
            assert!(named > 0, "{file} names no metric");
        }

        // What init_metrics describes: each once, as the kind it is used as.
        let all: Vec<&(&str, &str)> = described().collect();
        let unique: BTreeSet<&str> = all.iter().map(|(n, _)| *n).collect();
        assert_eq!(unique.len(), all.len(), "a metric is described twice");
        for (name, _) in all {
            let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
            assert!(names.iter().any(|n| n.as_str() == *name), "{name} is not a metric_names constant");
            if let Some(used_as) = kinds.get(*name) {
                assert!(used_as.contains(kind), "{name} is described as a {kind} and used as {used_as:?}");
            }
        }
    }
}
