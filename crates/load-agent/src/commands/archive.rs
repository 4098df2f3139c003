//! `load-agent archive export|verify`, and reading a load back from an archive for
//! `inspect --archive` and `replay --archive` (docs/archive.md, docs/operations.md).
//!
//! Exit codes as everywhere: 0 done; 1 the command ran and found a failure (an export that
//! could not be written, a verification with findings, an unknown load); 2 bad input (a bad
//! argument, a month that is not YYYY-MM, a location that is not a directory, no manifest).

use chrono::Utc;
use clap::{ArgGroup, Args, Subcommand};
use load_agent_archive::{
    Archive, ArchiveError, ArchiveLocation, ExportOptions, Month, Selection, export, select_loads,
};

use crate::commands::store_cmds::{log_text, open, runtime};
use crate::config::Settings;

#[derive(Debug, Subcommand)]
pub enum ArchiveCommand {
    /// Writes the logs of the chosen loads from `database.url` to PATH as Avro object container
    /// files and a manifest.json of checksums (written last).
    Export(ExportArgs),
    /// Re-reads every file an archive's manifest names: size, SHA-256, contents, and (unless
    /// --archive-only) each load's rows against `database.url`. Exit 1 on any finding.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).multiple(true).args(["month", "load"])))]
pub struct ExportArgs {
    /// The archive's location: a directory (created if missing) or a file:// URL.
    #[arg(long, value_name = "PATH")]
    pub to: String,
    /// The loads whose log started in this month (UTC), YYYY-MM.
    #[arg(long, value_name = "YYYY-MM")]
    pub month: Option<String>,
    /// These loads (with --month: those of them that started in the month).
    #[arg(long = "load", value_name = "ID", num_args = 1..)]
    pub load: Vec<String>,
    /// Only delivered loads (their load_summary stage).
    #[arg(long)]
    pub closed: bool,
    /// Loads per archive file.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub loads_per_file: u32,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The archive's location (a directory or file:// URL holding a manifest.json).
    pub path: String,
    /// Check the files against the manifest only, without comparing with the database.
    #[arg(long)]
    pub archive_only: bool,
}

/// The exit code of an archive error: 2 when the input is at fault.
fn code(e: &ArchiveError) -> u8 {
    match e {
        ArchiveError::BadLocation { .. }
        | ArchiveError::BadMonth { .. }
        | ArchiveError::NoManifest { .. }
        | ArchiveError::Manifest { .. }
        | ArchiveError::ManifestExists { .. }
        | ArchiveError::EmptySelection => 2,
        _ => 1,
    }
}

pub fn run(settings: &Settings, command: ArchiveCommand) -> u8 {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(c) => return c,
    };
    match command {
        ArchiveCommand::Export(a) => rt.block_on(run_export(settings, a)),
        ArchiveCommand::Verify(a) => rt.block_on(run_verify(settings, a)),
    }
}

async fn run_export(settings: &Settings, args: ExportArgs) -> u8 {
    let fail = |e: ArchiveError| {
        eprintln!("load-agent archive export: {e}");
        code(&e)
    };
    let month = match args.month.as_deref().map(Month::parse).transpose() {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let location = match ArchiveLocation::parse(&args.to, true) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let stores = match open(settings).await {
        Ok(s) => s,
        Err(c) => return c,
    };
    let selection = Selection { month, load_ids: args.load, closed_only: args.closed };
    let ids = match select_loads(stores.events.as_ref(), stores.index.as_ref(), &selection).await {
        Ok(ids) => ids,
        Err(e) => return fail(e),
    };
    let mut options = ExportOptions::new(selection.to_string(), Utc::now());
    options.loads_per_file = args.loads_per_file as usize;
    match export(stores.events.as_ref(), &ids, &location, &options).await {
        Ok(m) => {
            println!(
                "exported {} load(s), {} entries in {} file(s), {} bytes to {location} (from {}; manifest.json written last)",
                m.totals.loads,
                m.totals.entries,
                m.totals.files,
                m.totals.bytes,
                settings.database.url.masked()
            );
            0
        }
        Err(e) => fail(e),
    }
}

async fn run_verify(settings: &Settings, args: VerifyArgs) -> u8 {
    let fail = |e: ArchiveError| {
        eprintln!("load-agent archive verify: {e}");
        code(&e)
    };
    let archive = match open_archive(&args.path).await {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let stores = if args.archive_only {
        None
    } else {
        match open(settings).await {
            Ok(s) => Some(s),
            Err(c) => return c,
        }
    };
    let report = match archive.verify(stores.as_ref().map(|s| s.events.as_ref())).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    for f in &report.findings {
        println!("  {f}");
    }
    for s in &report.stray_files {
        println!("  note: {s} is not in the manifest (ignored)");
    }
    let against = if report.compared_with_store {
        format!("checked against {}", settings.database.url.masked())
    } else {
        "not compared with a database".to_owned()
    };
    if report.is_ok() {
        println!(
            "ok: {} file(s), {} load(s), {} entries in {} ({against})",
            report.files, report.loads, report.entries, report.location
        );
        0
    } else {
        println!("FAILED: {} finding(s) in {} ({against})", report.findings.len(), report.location);
        1
    }
}

async fn open_archive(path: &str) -> Result<Archive, ArchiveError> {
    Archive::open(ArchiveLocation::parse(path, false)?).await
}

/// `load-agent inspect --archive PATH LOAD_ID`: the load's timeline from the archive, rendered
/// by the same code as the live log's (an archive holds no outbox rows: each action shows what
/// the live log shows once its outbox row has been pruned).
pub async fn inspect(path: &str, load_id: &str, at: Option<u64>, json: bool) -> u8 {
    match read(path, load_id).await {
        Ok(Some(entries)) => {
            print!("{}", log_text(load_id, &entries, &[], at, json));
            0
        }
        Ok(None) => {
            eprintln!("load-agent inspect: no load {load_id:?} in the archive {path}");
            1
        }
        Err(e) => {
            eprintln!("load-agent inspect: {e}");
            code(&e)
        }
    }
}

/// `load-agent replay --archive PATH LOAD_ID`: the load's state re-projected from the archive
/// (the fold the worker runs), printed as JSON with its version.
pub async fn replay(path: &str, load_id: &str) -> u8 {
    match read(path, load_id).await {
        Ok(Some(entries)) => {
            let state = load_agent_domain::project_state(load_id, &entries);
            let out = serde_json::json!({ "load_id": load_id, "version": entries.len(), "state": state });
            match serde_json::to_string_pretty(&out) {
                Ok(s) => {
                    println!("{s}");
                    0
                }
                Err(e) => {
                    eprintln!("load-agent replay: the state of {load_id} does not serialize: {e}");
                    1
                }
            }
        }
        Ok(None) => {
            eprintln!("load-agent replay: no load {load_id:?} in the archive {path}");
            1
        }
        Err(e) => {
            eprintln!("load-agent replay: {e}");
            code(&e)
        }
    }
}

async fn read(path: &str, load_id: &str) -> Result<Option<Vec<load_agent_domain::LogEntry>>, ArchiveError> {
    let archive = open_archive(path).await?;
    let (entries, _) = archive.read_load(load_id).await?;
    Ok((!entries.is_empty()).then_some(entries))
}
