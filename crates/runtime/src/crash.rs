//! Crash points: places where a process can be made to die on purpose, for the crash tests
//! (issue 10). A crash is `std::process::abort()`: no destructor, no flush, no offset commit,
//! no claim release, the same as `kill -9` at that instruction.
//!
//! `LOAD_AGENT_CRASH_AT=<point>` aborts at the first pass through `<point>`;
//! `LOAD_AGENT_CRASH_AT=<point>:<n>` at the n-th. They are compiled only with the
//! `crash-points` feature (the test suite turns it on, `load-agent/crash-points`); a release
//! build leaves them out and `crash_point` is an empty inline function. The points:
//!
//! | point                    | where                                                              |
//! |--------------------------|--------------------------------------------------------------------|
//! | `worker.after_append`    | the consumer: the append committed, the offset not yet stored      |
//! | `worker.group_commit`    | a group commit of two or more loads committed, no run answered yet |
//! | `relay.after_send`       | the relay: the destination accepted the action, the row not marked |
//! | `relay.after_send_batch` | the relay: a claimed batch was sent, no outcome published, no mark |
//! | `pump.after_publish`     | the timer pump: `timer_fired` published, the timer not marked      |
//! | `retention.after_verify` | retention: a month's archive written and verified, nothing dropped |

#[cfg(feature = "crash-points")]
use std::sync::OnceLock;
#[cfg(feature = "crash-points")]
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms a crash point.
pub const CRASH_AT_ENV: &str = "LOAD_AGENT_CRASH_AT";

/// Every crash point the code passes through.
pub const CRASH_POINTS: [&str; 6] = [
    "worker.after_append",
    "worker.group_commit",
    "relay.after_send",
    "relay.after_send_batch",
    "pump.after_publish",
    "retention.after_verify",
];

#[cfg(feature = "crash-points")]
struct Armed {
    point: String,
    at_pass: u64,
    passes: AtomicU64,
}

#[cfg(feature = "crash-points")]
fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let spec = std::env::var(CRASH_AT_ENV).ok()?;
            let (point, at_pass) = parse(&spec)?;
            Some(Armed { point, at_pass, passes: AtomicU64::new(0) })
        })
        .as_ref()
}

/// `point` or `point:n` (n ≥ 1); anything else arms nothing (and says so on stderr).
#[cfg(feature = "crash-points")]
fn parse(spec: &str) -> Option<(String, u64)> {
    let (point, n) = match spec.split_once(':') {
        Some((p, n)) => (p, n.parse::<u64>().ok().filter(|n| *n >= 1)),
        None => (spec, Some(1)),
    };
    match n {
        Some(n) if CRASH_POINTS.contains(&point) => Some((point.to_owned(), n)),
        _ => {
            eprintln!(
                "{CRASH_AT_ENV}={spec:?} arms nothing: expected one of {CRASH_POINTS:?}, optionally followed by :N"
            );
            None
        }
    }
}

/// Aborts the process if `point` is armed and this is the pass it is armed for.
#[cfg(feature = "crash-points")]
pub fn crash_point(point: &'static str) {
    let Some(armed) = armed() else { return };
    if armed.point != point {
        return;
    }
    let pass = armed.passes.fetch_add(1, Ordering::SeqCst) + 1;
    if pass == armed.at_pass {
        eprintln!("load-agent: crash point {point} reached (pass {pass}): aborting");
        std::process::abort();
    }
}

/// Without the `crash-points` feature a crash point is nothing at all.
#[cfg(not(feature = "crash-points"))]
#[inline(always)]
pub fn crash_point(_point: &'static str) {}

#[cfg(all(test, feature = "crash-points"))]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_a_known_point_and_an_optional_pass() {
        assert_eq!(parse("relay.after_send"), Some(("relay.after_send".into(), 1)));
        assert_eq!(parse("worker.after_append:25"), Some(("worker.after_append".into(), 25)));
        assert_eq!(parse("relay.after_send_batch:2"), Some(("relay.after_send_batch".into(), 2)));
        assert_eq!(parse("worker.after_append:0"), None);
        assert_eq!(parse("worker.after_apend"), None);
        assert_eq!(parse("pump.after_publish:x"), None);
    }
}
