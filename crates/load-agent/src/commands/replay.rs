//! `load-agent replay`, `load-agent dump` (topics.md) and `load-agent demo`, the main job on the
//! embedded default: a bundled sample of recorded traffic replayed through the consumer code,
//! the worker, the relay and the timer pump on SQLite, shown as a timeline per load.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use load_agent_domain::LogEntry;
use load_agent_ingest::{InboundRecord, read_dump, replay, replay_records};
use load_agent_store::open_store;

use crate::commands::store_cmds::runtime;
use crate::error::{CliError, OrExit};
use crate::timeline::inspect_text;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A topic dump (JSON lines, topics.md); with --archive, the id of the load to re-project.
    #[arg(value_name = "DUMP|LOAD_ID")]
    pub dump: PathBuf,
    /// Re-project the load LOAD_ID from this archive (a directory or file:// URL holding a
    /// manifest.json) and print its state as JSON, instead of replaying a dump.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["record", "golden", "database_url"])]
    pub archive: Option<String>,
    /// Write the decisions as JSON lines to this file.
    #[arg(long, conflicts_with = "golden")]
    pub record: Option<PathBuf>,
    /// Compare the decisions with this file; exit 1 on any difference.
    #[arg(long)]
    pub golden: Option<PathBuf>,
    /// Replay on Postgres (a fresh schema) instead of a fresh SQLite file.
    #[arg(long)]
    pub database_url: Option<String>,
}

pub fn run_replay(args: ReplayArgs) -> Result<(), CliError> {
    let rt = runtime()?;
    if let Some(archive) = &args.archive {
        return rt.block_on(crate::commands::archive::replay(archive, &args.dump.to_string_lossy()));
    }
    let mut stdout = std::io::stdout();
    let result = rt.block_on(replay(
        &args.dump,
        args.record.as_deref(),
        args.golden.as_deref(),
        args.database_url.as_deref(),
        &mut stdout,
    ));
    let _ = stdout.flush();
    let summary = result.or_bad_input("load-agent replay")?;
    for d in summary.differences.iter().take(20) {
        println!("  differs: {d}");
    }
    // The differences (and the loads given up on) are in the output above.
    if summary.exit_code() == 0 { Ok(()) } else { Err(CliError::reported()) }
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The dumps to replay.
    #[arg(long = "dump", default_values = ["evals/dumps/481207.jsonl", "evals/dumps/sample.jsonl"])]
    pub dumps: Vec<PathBuf>,
    /// The SQLite file the demo writes (replaced on each run), for `load-agent inspect` after.
    #[arg(long, default_value = "load-agent-demo.db")]
    pub db: PathBuf,
    /// Print only the summary, not every load's timeline.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run_demo(args: DemoArgs) -> Result<(), CliError> {
    runtime()?.block_on(demo(&args))
}

async fn demo(args: &DemoArgs) -> Result<(), CliError> {
    let mut records = Vec::new();
    for dump in &args.dumps {
        records.extend(read_dump(dump).or_bad_input("load-agent demo")?);
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut p = args.db.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    let url = format!("sqlite://{}", args.db.display());
    let stores = open_store(&url).await.or_fail(format!("load-agent demo: {}", args.db.display()))?;
    // Loads are independent: replay each load's records in order, one load at a time.
    let mut by_load: BTreeMap<String, Vec<InboundRecord>> = BTreeMap::new();
    for r in records {
        by_load.entry(r.key_str().unwrap_or("(no key)").to_string()).or_default().push(r);
    }
    let bar = ProgressBar::new(by_load.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} replaying {pos}/{len} loads [{bar:30}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    let mut dead_letters = Vec::new();
    let (mut records_n, mut internal, mut timers) = (0usize, 0usize, 0usize);
    for (load_id, recs) in by_load {
        bar.set_message(load_id.clone());
        match replay_records(recs, stores.clone()).await {
            Ok(s) => {
                records_n += s.records;
                internal += s.internal_events;
                timers += s.timers_fired;
                dead_letters.extend(s.dead_letters.into_iter().map(|d| format!("{d:?}")));
            }
            Err(e) => {
                bar.abandon();
                return Err(CliError::failed(format!("load-agent demo: load {load_id}: {e}")));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let ids = stores.events.load_ids(10_000).await.or_fail("load-agent demo")?;
    let mut events: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut paths: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut actions: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut cost = 0.0;
    let mut out = std::io::stdout().lock();
    for id in &ids {
        if !args.quiet
            && let Ok(Some(text)) = inspect_text(&stores, id, None, false).await
        {
            let _ = writeln!(out, "{text}");
        }
        if let Ok((entries, _)) = stores.events.read(id).await {
            for e in &entries {
                match e {
                    LogEntry::Event(ev) => *events.entry(ev.kind_str()).or_default() += 1,
                    LogEntry::Decision(d) => {
                        *paths.entry(d.path.as_str()).or_default() += 1;
                        cost += d.total_cost_usd();
                        for a in d.effective_actions() {
                            *actions.entry(a.kind().as_str()).or_default() += 1;
                        }
                    }
                }
            }
        }
    }
    let line =
        |m: &BTreeMap<&str, usize>| m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
    let files: Vec<String> = args.dumps.iter().map(|d| d.display().to_string()).collect();
    let _ = writeln!(out, "== summary: {} loads from {}", ids.len(), files.join(", "));
    let _ = writeln!(
        out,
        "records {records_n} (+{internal} internal events: outcomes and {timers} timers), {} to the DLQ",
        dead_letters.len()
    );
    let _ = writeln!(out, "events:    {}", line(&events));
    let _ = writeln!(out, "decisions: {}", line(&paths));
    let _ = writeln!(out, "actions:   {}", line(&actions));
    let _ = writeln!(out, "LLM cost:  ${cost:.4}");
    let _ = writeln!(
        out,
        "inspect a load: LOAD_AGENT_DATABASE_URL=sqlite://{} load-agent inspect {}",
        args.db.display(),
        ids.first().map(String::as_str).unwrap_or("LOAD_ID")
    );
    Ok(())
}

#[cfg(feature = "kafka")]
#[derive(Debug, Args)]
pub struct DumpArgs {
    #[arg(long)]
    pub topic: String,
    #[arg(long)]
    pub from_beginning: bool,
    #[arg(long)]
    pub until_end: bool,
    #[arg(long)]
    pub output: Option<PathBuf>,
}

#[cfg(feature = "kafka")]
pub fn run_dump(settings: &crate::config::Settings, args: DumpArgs) -> Result<(), CliError> {
    if settings.kafka.brokers.is_empty() {
        return Err(CliError::bad_input("load-agent dump: kafka.brokers is not set"));
    }
    let rt = runtime()?;
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).or_bad_input(format!("load-agent dump: {}", p.display()))?,
        )),
        None => Box::new(std::io::stdout()),
    };
    let r = rt.block_on(load_agent_kafka::dump(
        &settings.kafka.brokers,
        &args.topic,
        args.from_beginning,
        args.until_end,
        &mut out,
    ));
    let s = r.or_fail("load-agent dump")?;
    eprintln!("dumped {} records from {} partitions", s.records, s.partitions);
    Ok(())
}
