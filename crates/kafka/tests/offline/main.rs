//! The tests of load-agent-kafka that need no broker, in one binary: the schema registry client
//! and the relay's address book (the recorded dumps' replays are load-agent-ingest's tests).

mod addresses;
mod registry;
