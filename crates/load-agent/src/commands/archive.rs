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

use crate::commands::store_cmds::{InspectArgs, open, runtime, with_store};
use crate::config::Settings;
use crate::error::{CliError, OrExit};
use crate::timeline::log_text;

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

/// An archive error as the command's error: exit 2 when the input is at fault, else 1.
fn cli_error(context: &str, e: &ArchiveError) -> CliError {
    let message = format!("{context}: {e}");
    match e {
        ArchiveError::BadLocation { .. }
        | ArchiveError::BadMonth { .. }
        | ArchiveError::NoManifest { .. }
        | ArchiveError::Manifest { .. }
        | ArchiveError::ManifestExists { .. }
        | ArchiveError::EmptySelection => CliError::bad_input(message),
        _ => CliError::failed(message),
    }
}

pub fn run(settings: &Settings, command: ArchiveCommand) -> Result<(), CliError> {
    match command {
        ArchiveCommand::Export(a) => run_export(settings, a),
        ArchiveCommand::Verify(a) => run_verify(settings, a),
    }
}

fn run_export(settings: &Settings, args: ExportArgs) -> Result<(), CliError> {
    let fail = |e: ArchiveError| cli_error("load-agent archive export", &e);
    // The arguments are checked before the database is opened.
    let month = args.month.as_deref().map(Month::parse).transpose().map_err(fail)?;
    let location = ArchiveLocation::parse(&args.to, true).map_err(fail)?;
    with_store(settings, |stores| async move {
        let selection = Selection { month, load_ids: args.load, closed_only: args.closed };
        let ids =
            select_loads(stores.events.as_ref(), stores.index.as_ref(), &selection).await.map_err(fail)?;
        let mut options = ExportOptions::new(selection.to_string(), Utc::now());
        options.loads_per_file = args.loads_per_file as usize;
        let m = export(stores.events.as_ref(), &ids, &location, &options).await.map_err(fail)?;
        println!(
            "exported {} load(s), {} entries in {} file(s), {} bytes to {location} (from {}; manifest.json written last)",
            m.totals.loads,
            m.totals.entries,
            m.totals.files,
            m.totals.bytes,
            settings.database.url.masked()
        );
        Ok(())
    })
}

fn run_verify(settings: &Settings, args: VerifyArgs) -> Result<(), CliError> {
    runtime()?.block_on(verify(settings, args))
}

/// Not through `with_store`: the archive is read first, and the database opened only to compare
/// with it (not at all with --archive-only), so checking files never creates a database.
async fn verify(settings: &Settings, args: VerifyArgs) -> Result<(), CliError> {
    let fail = |e: ArchiveError| cli_error("load-agent archive verify", &e);
    let archive = open_archive(&args.path).await.map_err(fail)?;
    let stores = if args.archive_only { None } else { Some(open(settings).await?) };
    let report = archive.verify(stores.as_ref().map(|s| s.events.as_ref())).await.map_err(fail)?;
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
        Ok(())
    } else {
        println!("FAILED: {} finding(s) in {} ({against})", report.findings.len(), report.location);
        Err(CliError::reported())
    }
}

async fn open_archive(path: &str) -> Result<Archive, ArchiveError> {
    Archive::open(ArchiveLocation::parse(path, false)?).await
}

/// `load-agent inspect --archive PATH LOAD_ID`: the load's timeline from the archive, rendered
/// by the same code as the live log's (an archive holds no outbox rows: each action shows what
/// the live log shows once its outbox row has been pruned).
pub fn run_inspect(path: &str, args: &InspectArgs) -> Result<(), CliError> {
    runtime()?.block_on(inspect(path, &args.load_id, args.at, args.json))
}

async fn inspect(path: &str, load_id: &str, at: Option<u64>, json: bool) -> Result<(), CliError> {
    let entries = read(path, load_id, "load-agent inspect").await?;
    print!("{}", log_text(load_id, &entries, &[], at, json));
    Ok(())
}

/// `load-agent replay --archive PATH LOAD_ID`: the load's state re-projected from the archive
/// (the fold the worker runs), printed as JSON with its version.
pub async fn replay(path: &str, load_id: &str) -> Result<(), CliError> {
    let entries = read(path, load_id, "load-agent replay").await?;
    let state = load_agent_domain::project_state(load_id, &entries);
    let out = serde_json::json!({ "load_id": load_id, "version": entries.len(), "state": state });
    let text = serde_json::to_string_pretty(&out)
        .or_fail(format!("load-agent replay: the state of {load_id} does not serialize"))?;
    println!("{text}");
    Ok(())
}

/// A load's entries from the archive at `path`; an unknown load fails (exit 1), `context`
/// prefixes the messages.
async fn read(
    path: &str,
    load_id: &str,
    context: &str,
) -> Result<Vec<load_agent_domain::LogEntry>, CliError> {
    let read = async {
        let archive = open_archive(path).await?;
        archive.read_load(load_id).await
    };
    let (entries, _) = read.await.map_err(|e| cli_error(context, &e))?;
    if entries.is_empty() {
        return Err(CliError::failed(format!("{context}: no load {load_id:?} in the archive {path}")));
    }
    Ok(entries)
}
