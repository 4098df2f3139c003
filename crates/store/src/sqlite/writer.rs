//! The SQLite writer task: group commit of every write.
//!
//! Each command's checks run inside the group's `BEGIN IMMEDIATE` transaction, which holds the
//! database's only write lock, so they are exact: a refused append (conflict, duplicate) writes
//! nothing, and a command that does write cannot fail on a constraint. A database error aborts
//! the group: the failing command gets the error, the commands before it are rolled back and
//! run again in a fresh transaction. Callers are answered only after their commit.

use std::collections::VecDeque;

use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection, Executor};
use tokio::sync::mpsc;

use super::MAX_GROUP;
use super::attention::put_summary_in;
use super::command::WriteCmd;
use super::dead_letters::keep_in;
use super::log::append_in;
use super::outbox::{claim_in, mark_batch_in, mark_in};
use super::timers::timer_in;
use crate::codec::copy_refusal;
use crate::error::{AppendError, ClaimError, StaleClaimError, StoreError};
use crate::outbox::ClaimedRow;

/// What a command did inside the transaction, sent once the transaction commits.
enum Outcome {
    Append(Vec<Result<u64, AppendError>>),
    Claim(Vec<ClaimedRow>),
    Mark(Result<(), StaleClaimError>),
    MarkBatch(Vec<Result<(), StaleClaimError>>),
    Timer,
    Kept,
}

impl WriteCmd {
    async fn apply(&self, conn: &mut SqliteConnection) -> Result<Outcome, sqlx::Error> {
        Ok(match self {
            WriteCmd::Append { requests, .. } => {
                let mut results = Vec::with_capacity(requests.len());
                for req in requests {
                    results.push(match req {
                        Ok(req) => append_in(conn, req).await?,
                        Err(refused) => Err(copy_refusal(refused)),
                    });
                }
                Outcome::Append(results)
            }
            WriteCmd::Claim { limit, now, lease_until, .. } => {
                Outcome::Claim(claim_in(conn, *limit, now, lease_until).await?)
            }
            WriteCmd::Mark { id, token, change, .. } => {
                Outcome::Mark(mark_in(conn, id, *token, change).await?)
            }
            WriteCmd::MarkBatch { marks, .. } => Outcome::MarkBatch(mark_batch_in(conn, marks).await?),
            WriteCmd::Timer { op, .. } => {
                timer_in(conn, op).await?;
                Outcome::Timer
            }
            WriteCmd::KeepDeadLetter { letter, .. } => {
                keep_in(conn, letter).await?;
                Outcome::Kept
            }
            WriteCmd::PutSummary { load_id, summary, .. } => {
                put_summary_in(conn, load_id, summary).await?;
                Outcome::Kept
            }
        })
    }

    /// Answers with what the committed transaction did.
    fn answer(self, outcome: Outcome) {
        match (self, outcome) {
            (WriteCmd::Append { reply, .. }, Outcome::Append(r)) => {
                let _ = reply.send(r);
            }
            (WriteCmd::Claim { reply, .. }, Outcome::Claim(rows)) => {
                let _ = reply.send(Ok(rows));
            }
            (WriteCmd::Mark { reply, .. }, Outcome::Mark(r)) => {
                let _ = reply.send(r.map_err(ClaimError::from));
            }
            (WriteCmd::MarkBatch { reply, .. }, Outcome::MarkBatch(r)) => {
                let _ = reply.send(Ok(r));
            }
            (WriteCmd::Timer { reply, .. }, Outcome::Timer)
            | (WriteCmd::KeepDeadLetter { reply, .. }, Outcome::Kept)
            | (WriteCmd::PutSummary { reply, .. }, Outcome::Kept) => {
                let _ = reply.send(Ok(()));
            }
            (cmd, _) => cmd.fail("internal: a write command got another command's outcome"),
        }
    }

    /// Answers with a failure: nothing of the command was written.
    fn fail(self, message: &str) {
        let err = || StoreError::Commit(message.to_owned());
        match self {
            WriteCmd::Append { requests, reply } => {
                let _ = reply.send(requests.iter().map(|_| Err(AppendError::Store(err()))).collect());
            }
            WriteCmd::Claim { reply, .. } => {
                let _ = reply.send(Err(err()));
            }
            WriteCmd::Mark { reply, .. } => {
                let _ = reply.send(Err(ClaimError::Store(err())));
            }
            WriteCmd::MarkBatch { reply, .. } => {
                let _ = reply.send(Err(err()));
            }
            WriteCmd::Timer { reply, .. }
            | WriteCmd::KeepDeadLetter { reply, .. }
            | WriteCmd::PutSummary { reply, .. } => {
                let _ = reply.send(Err(err()));
            }
        }
    }
}

/// The writer loop: takes what is queued (up to [`MAX_GROUP`] commands) and commits it as one
/// transaction; ends when every store handle is dropped.
pub(crate) async fn run(mut conn: SqliteConnection, mut commands: mpsc::Receiver<WriteCmd>) {
    while let Some(first) = commands.recv().await {
        // Let the callers the last commit woke queue their next command first, so that they
        // join this group rather than split into two alternating half-size groups.
        tokio::task::yield_now().await;
        let mut group = VecDeque::with_capacity(MAX_GROUP);
        group.push_back(first);
        while group.len() < MAX_GROUP {
            match commands.try_recv() {
                Ok(cmd) => group.push_back(cmd),
                Err(_) => break,
            }
        }
        run_group(&mut conn, group).await;
    }
    let _ = conn.close().await;
}

/// Runs a group in one transaction, one command at a time (each append is one trip to SQLite's
/// connection thread with a statement that stays prepared; one query for the whole group was
/// measured slower, because its text changes with the group and must be prepared every time).
/// A command that fails gets its error and the ones before it run again in a fresh transaction.
async fn run_group(conn: &mut SqliteConnection, mut pending: VecDeque<WriteCmd>) {
    while !pending.is_empty() {
        if let Err(e) = conn.execute("BEGIN IMMEDIATE").await {
            let message = format!("cannot begin a write transaction: {e}");
            pending.into_iter().for_each(|cmd| cmd.fail(&message));
            return;
        }
        let mut applied: Vec<(WriteCmd, Outcome)> = Vec::with_capacity(pending.len());
        let mut failed = None;
        while let Some(cmd) = pending.pop_front() {
            if cmd.abandoned() {
                continue;
            }
            match cmd.apply(conn).await {
                Ok(outcome) => applied.push((cmd, outcome)),
                Err(e) => {
                    failed = Some((cmd, e));
                    break;
                }
            }
        }
        if let Some((cmd, e)) = failed {
            rollback(conn).await;
            tracing::warn!(error = %e, "sqlite writer: a write failed; its transaction group is retried without it");
            cmd.fail(&e.to_string());
            // The commands before it did nothing wrong: run them again, first.
            for (cmd, _) in applied.into_iter().rev() {
                pending.push_front(cmd);
            }
            continue;
        }
        commit_and_answer(conn, applied).await;
    }
}

/// Commits and answers every applied command, or fails them all when the commit fails.
async fn commit_and_answer(conn: &mut SqliteConnection, applied: Vec<(WriteCmd, Outcome)>) {
    match conn.execute("COMMIT").await {
        Ok(_) => applied.into_iter().for_each(|(cmd, outcome)| cmd.answer(outcome)),
        Err(e) => {
            rollback(conn).await;
            let message = format!("commit failed: {e}");
            applied.into_iter().for_each(|(cmd, _)| cmd.fail(&message));
        }
    }
}

async fn rollback(conn: &mut SqliteConnection) {
    // Fails only when SQLite already rolled the transaction back by itself.
    if let Err(e) = conn.execute("ROLLBACK").await {
        tracing::debug!(error = %e, "sqlite writer: rollback");
    }
}
