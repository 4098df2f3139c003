//! One module per subcommand; each returns the process exit code.

pub mod eval;
pub mod sop;
pub mod triage;
