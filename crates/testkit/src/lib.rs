//! The fixtures the workspace's tests and benches share, so each is written once: load 481207 of
//! ADR 0001 and the sample loads built from it ([`load`]), events ([`events`]), the decision that
//! opens the ETA ask ([`ask`]), times ([`at`],
//! [`t0`]), the decision harnesses that process events the way the worker does without a store
//! (`agent` feature: `decide`), Postgres for tests (`postgres` feature: `pg`), and store
//! fixtures: appends of the agent's shape, the benches' Postgres schema, an `EventStore` wrapper
//! a test steps into (`store` feature: `store`), and waits in async tests: a bounded await, a
//! polled check (`wait` feature: `wait`).
//!
//! For tests and benches only: a crate lists it under `[dev-dependencies]` (and `benches/`, a
//! bench package, under its dependencies), never as a normal dependency of production code.
//! Use it from integration tests (`tests/`) and benches: a crate's own `#[cfg(test)]` unit tests
//! would see this kit's copy of that crate's types, a different crate to the compiler.

pub mod ask;
pub mod events;
pub mod load;

#[cfg(feature = "agent")]
pub mod decide;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "store")]
pub mod store;
#[cfg(feature = "wait")]
pub mod wait;

use chrono::{DateTime, TimeZone, Utc};

pub use load::LOAD;

/// An RFC 3339 time in UTC; panics on a malformed literal (a fixture bug).
pub fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("a valid fixture time").with_timezone(&Utc)
}

/// The time most fixtures start from: 2026-03-02 13:00 UTC, the morning of load 481207's pickup day.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 13, 0, 0).single().expect("a valid fixture time")
}
