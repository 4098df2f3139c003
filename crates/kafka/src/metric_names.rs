//! The name of every metric this crate emits, in one place: each `metrics::counter!` and
//! `gauge!` of this crate names one of these constants, never a string of its own. Each name is
//! one metric of one kind (the kind is in each constant's doc); docs/kafka.md and
//! docs/operations.md say what they mean.

// The consumer (consumer.rs).

/// Counter, labels `kind`, `code`, `form`: dead letters written (counted after the write).
pub const DEAD_LETTERS_TOTAL: &str = "load_agent_dead_letters_total";
/// Gauge, labels `topic`, `partition`: Kafka consumer lag.
pub const CONSUMER_LAG: &str = "load_agent_consumer_lag";
/// Counter: runs retried after a give-back or a failed DLQ write.
pub const CONSUMER_RETRIES_TOTAL: &str = "load_agent_consumer_retries_total";
/// Counter, label `kind` (`assign`, `revoke`): rebalances.
pub const CONSUMER_REBALANCES_TOTAL: &str = "load_agent_consumer_rebalances_total";
/// Counter: runs still going when a revocation's drain timed out.
pub const CONSUMER_ABANDONED_TOTAL: &str = "load_agent_consumer_abandoned_total";
/// Counter: consumer closes librdkafka did not complete in 30 s.
pub const CONSUMER_CLOSE_TIMEOUTS_TOTAL: &str = "load_agent_consumer_close_timeouts_total";
/// Counter, label `action` (`pause`, `resume`): backpressure.
pub const CONSUMER_PAUSES_TOTAL: &str = "load_agent_consumer_pauses_total";
/// Gauge, labels `broker`, `quantile` (`0.5`, `0.99`): the consumer's request round trip to
/// each broker it fetches from, over librdkafka's last statistics window (seconds).
pub const BROKER_ROUND_TRIP_SECONDS: &str = "load_agent_consumer_broker_round_trip_seconds";
/// Gauge, labels `client` (`actions`, `load-agent-relay`, `load-agent-timer-pump`, `dlq`, ...),
/// `broker`, `quantile`: one producer's request round trip (nearly all produce requests) to
/// each broker, over librdkafka's last statistics window (seconds).
pub const PRODUCER_ROUND_TRIP_SECONDS: &str = "load_agent_producer_broker_round_trip_seconds";
/// Counter, label `result`: offset commits.
pub const CONSUMER_COMMITS_TOTAL: &str = "load_agent_consumer_commits_total";
/// Counter: consumer errors (the loop backs off).
pub const CONSUMER_ERRORS_TOTAL: &str = "load_agent_consumer_errors_total";
