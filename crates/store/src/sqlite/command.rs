//! The write commands of the SQLite backend: what a table module ([`super::log`],
//! [`super::outbox`], [`super::timers`], ...) queues for the writer task and what the writer
//! ([`super::writer`]) runs inside its transaction. Their own module, so that the table modules
//! and the writer both use it without using each other's.

use tokio::sync::oneshot;
use uuid::Uuid;

use crate::codec::{EncodedAppend, EncodedSummary};
use crate::dead_letters::KeptDeadLetter;
use crate::error::{AppendError, ClaimError, StaleClaimError, StoreError};
use crate::outbox::ClaimedRow;

/// One write, with the channel its caller waits on for the result.
pub(crate) enum WriteCmd {
    Append {
        requests: Vec<Result<EncodedAppend, AppendError>>,
        reply: oneshot::Sender<Vec<Result<u64, AppendError>>>,
    },
    Claim {
        limit: i64,
        now: String,
        lease_until: String,
        reply: oneshot::Sender<Result<Vec<ClaimedRow>, StoreError>>,
    },
    Mark {
        id: String,
        token: Uuid,
        change: MarkChange,
        reply: oneshot::Sender<Result<(), ClaimError>>,
    },
    /// Several rows' marks in the one transaction (the batch marks).
    MarkBatch {
        marks: Vec<(String, Uuid, MarkChange)>,
        reply: oneshot::Sender<Result<Vec<Result<(), StaleClaimError>>, StoreError>>,
    },
    Timer {
        op: TimerOp,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    KeepDeadLetter {
        letter: Box<KeptDeadLetter>,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    PutSummary {
        load_id: String,
        summary: Box<EncodedSummary>,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
}

impl WriteCmd {
    /// The caller stopped waiting (its future was dropped): skip the command.
    pub(super) fn abandoned(&self) -> bool {
        match self {
            WriteCmd::Append { reply, .. } => reply.is_closed(),
            WriteCmd::Claim { reply, .. } => reply.is_closed(),
            WriteCmd::Mark { reply, .. } => reply.is_closed(),
            WriteCmd::MarkBatch { reply, .. } => reply.is_closed(),
            WriteCmd::Timer { reply, .. } => reply.is_closed(),
            WriteCmd::KeepDeadLetter { reply, .. } => reply.is_closed(),
            WriteCmd::PutSummary { reply, .. } => reply.is_closed(),
        }
    }
}

/// How a claimed row changes when it is marked.
pub(crate) enum MarkChange {
    Dispatched { receipt: String, now: String },
    Retry { failure: String, at: String },
    Dead { failure: String, now: String },
    Deferred { until: String },
}

/// A write to the timers (and the retention of outbox rows and timers).
pub(crate) enum TimerOp {
    Schedule {
        timer_id: String,
        load_id: String,
        ask_id: String,
        attempt: i64,
        fire_at: String,
    },
    Cancel {
        timer_id: String,
        now: String,
    },
    /// The ids as a JSON array, read with `json_each`, so any number is one statement.
    Fired {
        timer_ids: String,
        now: String,
    },
    /// Retention (SQLite is not partitioned): delivered outbox rows dispatched before
    /// `dispatched_before`, dead ones dead before `dead_before`, fired and cancelled timers
    /// before `timers_before`.
    DeleteExpired {
        dispatched_before: String,
        dead_before: String,
        timers_before: String,
    },
}
