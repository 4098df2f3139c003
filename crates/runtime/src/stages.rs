//! Where the time of one event goes (issue 15: attribute before optimizing). The pipeline calls
//! [`observe`] at each stage boundary; each observation goes to the histogram
//! `load_agent_stage_seconds{stage}` and, when a load test installed one, to a [`StageSink`]
//! that keeps raw samples for exact percentiles.
//!
//! Event → commit: `fetch` (the producer's send to the consumer's receipt: the broker and both
//! clients), `queue` (received to the run's start: waiting behind the load's earlier records
//! and for a run permit), `snapshot`, `decide` (validation, triage, the SOP, the LLM if any),
//! `append` (the log, the decision and the outbox rows in one transaction).
//! Commit → published: `claim`, `send` (the destination's acknowledgement), `outcome` (the
//! `action_outcome` published), `mark` (the row marked dispatched).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::metric_names as names;

load_agent_domain::spelled_enum! {
    /// A stage of the event → commit or commit → published path.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Stage {
        Fetch => "fetch",
        Queue => "queue",
        Snapshot => "snapshot",
        Decide => "decide",
        Append => "append",
        Claim => "claim",
        Send => "send",
        Outcome => "outcome",
        Mark => "mark",
    }
}

/// What one queue client's library measured of its own requests to the queue over one window
/// (Kafka: librdkafka's statistics of one client's connection to one broker, every
/// `statistics.interval.ms`). On the consumer's connection nearly all requests are fetches: a
/// record's `fetch` stage holds part of one such round trip, or more than one when the record
/// reached the broker after a fetch in flight had read its partition; the floor probe pays the
/// same. On a producer's they are produce requests: a send's acknowledgement waits for one after
/// the producer's linger. The broker's answer time is the queue's, not the service's.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundTrips {
    /// Which client: `consumer`, or the producer's name (`actions`, `load-agent-relay`, ...).
    pub client: Arc<str>,
    /// Requests answered in the window.
    pub requests: u64,
    pub mean: Duration,
    pub p99: Duration,
}

/// Receives every observation (the load test's probe).
pub trait StageSink: Send + Sync {
    fn observe(&self, stage: Stage, took: Duration);

    /// One window of a queue client's round trips; a sink that does not keep them ignores it.
    fn round_trips(&self, _window: RoundTrips) {}
}

static SINK: OnceLock<Arc<dyn StageSink>> = OnceLock::new();

/// Installs the process's sink; only the first call counts (false after).
pub fn install_sink(sink: Arc<dyn StageSink>) -> bool {
    SINK.set(sink).is_ok()
}

/// Records that `stage` took `took`.
pub fn observe(stage: Stage, took: Duration) {
    metrics::histogram!(names::STAGE_SECONDS, "stage" => stage.as_str()).record(took.as_secs_f64());
    if let Some(sink) = SINK.get() {
        sink.observe(stage, took);
    }
}

/// Hands a window of a queue client's round trips to the installed sink (the client library
/// publishes its own figures as metrics, where it knows their labels).
pub fn observe_round_trips(window: RoundTrips) {
    if let Some(sink) = SINK.get() {
        sink.round_trips(window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Keep(Mutex<Vec<(Stage, Duration)>>, Mutex<Vec<RoundTrips>>);

    impl StageSink for Keep {
        fn observe(&self, stage: Stage, took: Duration) {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).push((stage, took));
        }

        fn round_trips(&self, window: RoundTrips) {
            self.1.lock().unwrap_or_else(|p| p.into_inner()).push(window);
        }
    }

    #[test]
    fn an_installed_sink_sees_every_observation_and_names_are_stable() {
        let keep = Arc::new(Keep(Mutex::new(Vec::new()), Mutex::new(Vec::new())));
        assert!(install_sink(keep.clone()));
        assert!(!install_sink(keep.clone()), "one sink per process");
        observe(Stage::Append, Duration::from_millis(3));
        let seen = keep.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert!(seen.contains(&(Stage::Append, Duration::from_millis(3))), "{seen:?}");
        let window = RoundTrips {
            client: "consumer".into(),
            requests: 250,
            mean: Duration::from_millis(40),
            p99: Duration::from_millis(61),
        };
        observe_round_trips(window.clone());
        assert_eq!(*keep.1.lock().unwrap_or_else(|p| p.into_inner()), [window]);
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            ["fetch", "queue", "snapshot", "decide", "append", "claim", "send", "outcome", "mark"]
        );
    }
}
