//! Waiting in async tests for something another task, process or server does: [`within`] bounds
//! one future, [`eventually`] polls a check until it holds. Either fails with what it waited for,
//! so a hang reads as a failure naming its cause, not as CI's time limit.
//!
//! A check answers with a [`Check`]: `bool` (held or not), `Option<T>` (the value once there),
//! or `Result<T, String>` (the value, or why not yet; the last reason is in the failure).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often [`eventually`] polls unless told otherwise ([`eventually_every`]).
pub const POLL: Duration = Duration::from_millis(50);

/// What a polled check answers: the value once it holds, or why not yet.
pub trait Check {
    type Value;
    fn ready(self) -> Result<Self::Value, String>;
}

impl Check for bool {
    type Value = ();
    fn ready(self) -> Result<(), String> {
        if self { Ok(()) } else { Err("the check never held".to_string()) }
    }
}

impl<T> Check for Option<T> {
    type Value = T;
    fn ready(self) -> Result<T, String> {
        self.ok_or_else(|| "nothing came".to_string())
    }
}

impl<T> Check for Result<T, String> {
    type Value = T;
    fn ready(self) -> Result<T, String> {
        self
    }
}

/// Awaits `fut` for at most `limit`: past it, panics naming `what`.
pub async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?} waiting for: {what}"),
    }
}

/// Polls `check` every [`POLL`] until it holds and returns its value; past `limit` (a check
/// that hangs included), panics naming `what` and the check's last reason.
pub async fn eventually<C, F, Fut>(limit: Duration, what: &str, check: F) -> C::Value
where
    C: Check,
    F: FnMut() -> Fut,
    Fut: Future<Output = C>,
{
    eventually_every(limit, POLL, what, check).await
}

/// [`eventually`], polling every `every` (a heavy check, or a fast one worth catching early).
pub async fn eventually_every<C, F, Fut>(
    limit: Duration,
    every: Duration,
    what: &str,
    mut check: F,
) -> C::Value
where
    C: Check,
    F: FnMut() -> Fut,
    Fut: Future<Output = C>,
{
    let deadline = Instant::now() + limit;
    let mut last = String::from("the check never answered");
    loop {
        match tokio::time::timeout_at(deadline, check()).await {
            Ok(answer) => match answer.ready() {
                Ok(value) => return value,
                Err(why) => last = why,
            },
            Err(_) => break,
        }
        if Instant::now() + every > deadline {
            break;
        }
        tokio::time::sleep(every).await;
    }
    panic!("timed out after {limit:?} waiting for: {what} ({last})")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_check_that_comes_to_hold_returns_its_value() {
        let polls = AtomicU32::new(0);
        let value = eventually(Duration::from_secs(5), "the third poll", || async {
            let n = polls.fetch_add(1, Ordering::SeqCst) + 1;
            (n >= 3).then_some(n)
        })
        .await;
        assert_eq!(value, 3);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "waiting for: the queue drained (2 rows left)")]
    async fn a_check_that_never_holds_fails_with_its_last_reason() {
        eventually(Duration::from_secs(1), "the queue drained", || async {
            Err::<(), _>("2 rows left".to_string())
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "waiting for: a check that hangs (the check never answered)")]
    async fn a_check_that_hangs_fails_at_the_limit() {
        eventually(Duration::from_secs(1), "a check that hangs", std::future::pending::<bool>).await;
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "timed out after 2s waiting for: the reply")]
    async fn within_names_what_it_waited_for() {
        within(Duration::from_secs(2), "the reply", std::future::pending::<()>()).await;
    }
}
