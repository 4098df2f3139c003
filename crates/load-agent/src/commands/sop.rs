//! `load-agent sop check` (docs/sops.md).

use std::path::PathBuf;

use clap::Subcommand;
use load_agent_agent::{SopRegistry, Templates};

#[derive(Debug, Subcommand)]
pub enum SopCommand {
    /// Validates every SOP spec under a folder (`<client>/v<N>.yaml`); names the file, the field
    /// and what is wrong for the first bad one.
    Check {
        #[arg(default_value = "sops")]
        dir: PathBuf,
    },
}

pub fn run(cmd: SopCommand) -> u8 {
    match cmd {
        SopCommand::Check { dir } => {
            let templates = match Templates::embedded() {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("load-agent sop check: {e}");
                    return 2;
                }
            };
            match SopRegistry::load_dir(&dir, &templates) {
                Ok(reg) => {
                    for sop in reg.iter() {
                        println!("ok  {} v{} ({} ask rules)", sop.spec.id, sop.spec.version, sop.spec.asks.len());
                    }
                    0
                }
                Err(e) => {
                    eprintln!("load-agent sop check: {e}");
                    2
                }
            }
        }
    }
}
