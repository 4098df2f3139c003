//! `load-agent triage train|eval` (behavior.md §10, docs/triage.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum TriageCommand {
    /// Retrains the model on `train.jsonl` and writes the weights (reproduces the committed file).
    Train {
        /// The corpus folder holding train.jsonl.
        #[arg(long, default_value = "evals/triage")]
        corpus: PathBuf,
        /// Where to write the weights.
        #[arg(long, default_value = "crates/triage/model/weights.json")]
        out: PathBuf,
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

pub fn run(cmd: TriageCommand) -> u8 {
    match cmd {
        TriageCommand::Train { corpus, out } => match load_agent_triage::train_command(&corpus, &out) {
            Ok(summary) => {
                println!("wrote {} ({summary:?})", out.display());
                0
            }
            Err(e) => {
                eprintln!("load-agent triage train: {e}");
                2
            }
        },
        TriageCommand::Eval { files, json } => {
            let mut stdout = std::io::stdout().lock();
            match load_agent_triage::eval_command(&files, json, &mut stdout) {
                Ok(()) => {
                    let _ = stdout.flush();
                    0
                }
                Err(e) => {
                    eprintln!("load-agent triage eval: {e}");
                    2
                }
            }
        }
    }
}
