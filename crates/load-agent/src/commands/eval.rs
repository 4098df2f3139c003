//! `load-agent eval [PATH ...] [--report FILE] [--database-url URL]` (scenarios.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

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
pub fn run(args: EvalArgs) -> u8 {
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("load-agent eval: cannot start the runtime: {e}");
            return 2;
        }
    };
    let mut stdout = std::io::stdout();
    let result = rt.block_on(load_agent_runtime::run_eval(
        &args.paths,
        args.report.as_deref(),
        args.database_url.as_deref(),
        &mut stdout,
    ));
    let _ = stdout.flush();
    match result {
        Ok(summary) => summary.exit_code() as u8,
        Err(e) => {
            eprintln!("load-agent eval: {e}");
            2
        }
    }
}
