//! One module per subcommand; each returns `Result<(), CliError>` (error.rs), which `main` maps to
//! the exit code. `service` holds what `serve` (embedded) and `production` (Kafka) share.

pub mod archive;
#[cfg(feature = "kafka")]
pub mod dlq;
pub mod eval;
pub mod loadtest;
pub mod partitions;
pub mod production;
pub mod replay;
pub mod retention;
pub mod serve;
pub mod service;
pub mod sop;
pub mod sop_compile;
pub mod store_cmds;
pub mod triage;
