//! Request round trips from librdkafka's statistics (every `statistics.interval.ms`), read the
//! same way for the consumer and the producers.

use std::sync::Arc;
use std::time::Duration;

use load_agent_runtime::stages::{self, RoundTrips};

/// One broker connection's window of round trips.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BrokerRoundTrips {
    /// librdkafka's name of the broker (`host:port/id`).
    pub broker: String,
    pub requests: u64,
    pub mean: Duration,
    pub p50: Duration,
    pub p99: Duration,
}

/// The windows of the connections to real brokers that answered requests: not the bootstrap
/// connections (no node id yet) nor the group coordinator's logical one.
pub(crate) fn broker_round_trips(statistics: &rdkafka::Statistics) -> Vec<BrokerRoundTrips> {
    let micros = |us: i64| Duration::from_micros(u64::try_from(us).unwrap_or(0));
    statistics
        .brokers
        .values()
        .filter(|b| b.nodeid >= 0 && b.source != "logical")
        .filter_map(|b| {
            let rtt = b.rtt.as_ref().filter(|w| w.cnt > 0)?;
            Some(BrokerRoundTrips {
                broker: b.name.clone(),
                requests: u64::try_from(rtt.cnt).unwrap_or(0),
                mean: micros(rtt.avg),
                p50: micros(rtt.p50),
                p99: micros(rtt.p99),
            })
        })
        .collect()
}

/// Sets `gauge` (if any) per broker and quantile, with `labels` before them, and hands each
/// window to the stage sink under `client`.
pub(crate) fn publish(
    statistics: &rdkafka::Statistics,
    gauge: Option<&'static str>,
    labels: &[(&'static str, String)],
    client: &str,
) {
    let client: Arc<str> = client.into();
    for b in broker_round_trips(statistics) {
        if let Some(gauge) = gauge {
            for (quantile, took) in [("0.5", b.p50), ("0.99", b.p99)] {
                let mut all: Vec<metrics::Label> =
                    labels.iter().map(|(k, v)| metrics::Label::new(*k, v.clone())).collect();
                all.push(metrics::Label::new("broker", b.broker.clone()));
                all.push(metrics::Label::new("quantile", quantile));
                metrics::gauge!(gauge, all).set(took.as_secs_f64());
            }
        }
        stages::observe_round_trips(RoundTrips {
            client: client.clone(),
            requests: b.requests,
            mean: b.mean,
            p99: b.p99,
        });
    }
}
