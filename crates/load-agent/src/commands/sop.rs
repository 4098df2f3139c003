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
    /// Compiles an SOP written in plain English into a spec through the model (`extract_sop`;
    /// needs an LLM provider), validates it and writes it for a person to review.
    Compile {
        file: PathBuf,
        /// Where to write the spec; default FILE.compiled.yaml.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The SOP id; default the file's stem.
        #[arg(long)]
        id: Option<String>,
    },
}

pub fn run(cmd: SopCommand, settings: impl FnOnce() -> Result<crate::config::Settings, u8>) -> u8 {
    match cmd {
        SopCommand::Compile { file, out, id } => {
            let settings = match settings() {
                Ok(s) => s,
                Err(c) => return c,
            };
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("load-agent sop compile: {}: {e}", file.display());
                    return 2;
                }
            };
            let (templates, llm) = match (Templates::embedded(), settings.llm.client()) {
                (Ok(t), Ok(l)) => (t, l),
                (Err(e), _) => {
                    eprintln!("load-agent sop compile: {e}");
                    return 2;
                }
                (_, Err(e)) => {
                    eprintln!("load-agent sop compile: {e}");
                    return 2;
                }
            };
            let id = id.unwrap_or_else(|| super::sop_compile::sop_id_of(&file));
            let out = out.unwrap_or_else(|| super::sop_compile::default_out(&file));
            let rt = match super::store_cmds::runtime() {
                Ok(rt) => rt,
                Err(c) => return c,
            };
            let source = file.display().to_string();
            match rt.block_on(super::sop_compile::compile(llm.as_ref(), &templates, &id, &source, &text)) {
                Ok(yaml) => match std::fs::write(&out, yaml) {
                    Ok(()) => {
                        println!("wrote {} for review", out.display());
                        0
                    }
                    Err(e) => {
                        eprintln!("load-agent sop compile: {}: {e}", out.display());
                        1
                    }
                },
                Err(e) => {
                    eprintln!("load-agent sop compile: {e}");
                    1
                }
            }
        }
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
                        println!(
                            "ok  {} v{} ({} ask rules)",
                            sop.spec.id,
                            sop.spec.version,
                            sop.spec.asks.len()
                        );
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
