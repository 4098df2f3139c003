//! `load-agent triage train|eval` (behavior.md §10, docs/triage.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use crate::error::{CliError, OrExit};

#[derive(Debug, Subcommand)]
pub enum TriageCommand {
    /// Retrains the model on `train/*.jsonl` and writes the weights (reproduces the committed
    /// file); prints the leave-one-writer-out figures and the thresholds it chose.
    Train {
        /// The corpus folder holding `train/` (the frozen `test/` is never read).
        #[arg(long, default_value = "evals/triage")]
        corpus: PathBuf,
        /// Where to write the weights.
        #[arg(long, default_value = "crates/triage/model/weights.json")]
        out: PathBuf,
        /// Also write the messages the out-of-fold models got wrong here (JSON Lines), for a
        /// review of their labels.
        #[arg(long)]
        errors: Option<PathBuf>,
    },
    /// Removes from the training files every line that nearly repeats a line of the frozen test
    /// set (`test/*.jsonl`, never changed); prints what it removed.
    Dedupe {
        /// The corpus folder holding `train/` and `test/`.
        #[arg(long, default_value = "evals/triage")]
        corpus: PathBuf,
        /// Only report the lines that would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Classifies labeled messages and prints accuracy, per-intent precision and recall, ECE and
    /// the misclassified lines. Exits 0 whatever the accuracy, 2 on a malformed file.
    Eval {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn write_errors(path: &std::path::Path, errors: &[load_agent_triage::Misclassified]) -> Result<(), String> {
    let mut text = String::new();
    for e in errors {
        let line = serde_json::to_string(e).map_err(|e| format!("cannot encode an error: {e}"))?;
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

pub fn run(cmd: TriageCommand) -> Result<(), CliError> {
    match cmd {
        TriageCommand::Train { corpus, out, errors } => {
            let summary =
                load_agent_triage::train_command(&corpus, &out).or_bad_input("load-agent triage train")?;
            print!("{}", summary.to_text());
            println!("wrote {}", out.display());
            if let Some(path) = errors {
                write_errors(&path, &summary.oof_errors).or_bad_input("load-agent triage train")?;
                println!("wrote {} out-of-fold errors to {}", summary.oof_errors.len(), path.display());
            }
        }
        TriageCommand::Dedupe { corpus, dry_run } => {
            let report = load_agent_triage::dedupe_command(&corpus, dry_run)
                .or_bad_input("load-agent triage dedupe")?;
            for (file, lines) in &report.removed {
                println!(
                    "{file}: {} line(s) {}: {lines:?}",
                    lines.len(),
                    if dry_run { "to remove" } else { "removed" }
                );
            }
            println!(
                "{} training lines near-duplicating {} test lines ({} training lines read)",
                report.removed_lines(),
                report.test_messages,
                report.training_messages
            );
        }
        TriageCommand::Eval { files, json } => {
            let mut stdout = std::io::stdout().lock();
            load_agent_triage::eval_command(&files, json, &mut stdout)
                .or_bad_input("load-agent triage eval")?;
            let _ = stdout.flush();
        }
    }
    Ok(())
}
