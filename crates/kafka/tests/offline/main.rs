//! The tests of load-agent-kafka that need no broker, in one binary: the snapshot cache over a
//! real event store, the per-contact send limit over a real outbox, and the recorded dumps of
//! `evals/dumps/` replayed to their goldens.

mod dumps;
mod registry;
mod send_limit;
