//! `load-agent eval [PATH ...] [--report FILE] [--database-url URL]` (scenarios.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::error::{CliError, OrExit};

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Scenario files or folders (all `*.yaml` below them); default `evals/scenarios`.
    paths: Vec<PathBuf>,
    /// Write the JSON report here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Run on Postgres (each scenario in a fresh schema) instead of a fresh SQLite file.
    #[arg(long)]
    database_url: Option<String>,
}

/// 0 all passed, 1 some failed, 2 a file could not be read or is not a valid scenario.
pub fn run(args: EvalArgs) -> Result<(), CliError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .or_bad_input("load-agent eval: cannot start the runtime")?;
    let mut stdout = std::io::stdout();
    let result = rt.block_on(load_agent_runtime::run_eval(
        &args.paths,
        args.report.as_deref(),
        args.database_url.as_deref(),
        &mut stdout,
    ));
    let _ = stdout.flush();
    // The failed scenarios are in the report printed above.
    if result.or_bad_input("load-agent eval")?.all_passed() { Ok(()) } else { Err(CliError::reported()) }
}
