//! One module per subcommand; each returns the process exit code.

pub mod sop;
pub mod triage;
