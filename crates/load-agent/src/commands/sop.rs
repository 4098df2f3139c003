//! `load-agent sop check` (docs/sops.md).

use std::path::PathBuf;

use clap::Subcommand;
use load_agent_agent::{SopRegistry, Templates};

use crate::error::{CliError, OrExit};

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

pub fn run(
    cmd: SopCommand,
    settings: impl FnOnce() -> Result<crate::config::Settings, CliError>,
) -> Result<(), CliError> {
    match cmd {
        SopCommand::Compile { file, out, id } => {
            let settings = settings()?;
            let text = std::fs::read_to_string(&file)
                .or_bad_input(format!("load-agent sop compile: {}", file.display()))?;
            let templates = Templates::embedded().or_bad_input("load-agent sop compile")?;
            let llm = load_agent_llm_openai::client_from_config(&settings.llm)
                .or_bad_input("load-agent sop compile")?;
            let id = id.unwrap_or_else(|| super::sop_compile::sop_id_of(&file));
            let out = out.unwrap_or_else(|| super::sop_compile::default_out(&file));
            let rt = super::store_cmds::runtime()?;
            let source = file.display().to_string();
            let yaml = rt
                .block_on(super::sop_compile::compile(llm.as_ref(), &templates, &id, &source, &text))
                .or_fail("load-agent sop compile")?;
            std::fs::write(&out, yaml).or_fail(format!("load-agent sop compile: {}", out.display()))?;
            println!("wrote {} for review", out.display());
            Ok(())
        }
        SopCommand::Check { dir } => {
            let templates = Templates::embedded().or_bad_input("load-agent sop check")?;
            let reg = SopRegistry::load_dir(&dir, &templates).or_bad_input("load-agent sop check")?;
            for sop in reg.iter() {
                println!("ok  {} v{} ({} ask rules)", sop.spec.id, sop.spec.version, sop.spec.asks.len());
            }
            Ok(())
        }
    }
}
