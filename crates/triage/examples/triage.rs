//! Stand-in for `load-agent triage` until the CLI wires the library functions:
//!
//! ```text
//! cargo run -p load-agent-triage --example triage -- train
//! cargo run -p load-agent-triage --example triage -- eval evals/triage/heldout.jsonl [--json]
//! ```
//!
//! Run from the workspace root. Exit codes follow the CLI's policy: 0 whatever
//! the accuracy, 2 on a malformed or unreadable corpus.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use load_agent_triage::{eval_command, train_command};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("train") => {
            match train_command(Path::new("evals/triage"), Path::new("crates/triage/model/weights.json")) {
                Ok(summary) => {
                    print!("{}", summary.to_text());
                    ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("error: {err}");
                    ExitCode::from(2)
                }
            }
        }
        Some("eval") => {
            let json = args.iter().any(|a| a == "--json");
            let files: Vec<PathBuf> =
                args[1..].iter().filter(|a| *a != "--json").map(PathBuf::from).collect();
            match eval_command(&files, json, &mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("error: {err}");
                    ExitCode::from(2)
                }
            }
        }
        _ => {
            eprintln!("usage: triage train | triage eval FILE... [--json]");
            ExitCode::from(2)
        }
    }
}
