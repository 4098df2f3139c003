//! The tests of load-agent-kafka that need no broker, in one binary: the schema registry client,
//! and the recorded dumps of `evals/dumps/` replayed to their goldens.

mod dumps;
mod registry;
