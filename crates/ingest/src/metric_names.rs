//! The name of every metric this crate emits, in one place: each `metrics::counter!` of this
//! crate names one of these constants, never a string of its own. Each name is one metric of one
//! kind (the kind is in each constant's doc); docs/kafka.md and docs/operations.md say what they
//! mean. The binary's telemetry test checks every crate's names (one constant each, one kind).

// The unit of work (process.rs).

/// Counter, label `outcome`: records through the unit of work.
pub const RECORDS_TOTAL: &str = "load_agent_records_total";
