//! Commands over the store: `migrate`, `cost LOAD_ID`, `inspect LOAD_ID` (also `--archive PATH`),
//! `console rebuild`; and [`with_store`], through which every one-shot command opens the store.

use clap::Args;
use load_agent_store::{Stores, migrate, open_store_with};

use crate::config::Settings;
use crate::error::{CliError, OrExit};
use crate::timeline::inspect_text;

/// A tokio runtime for a one-shot command.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .or_bad_input("load-agent: cannot start the runtime")
}

/// Opens the settings' store; the error names `database.url`, masked (exit 1).
pub async fn open(settings: &Settings) -> Result<Stores, CliError> {
    open_store_with(settings.database.url.expose(), &settings.store_options())
        .await
        .or_fail(format!("load-agent: database.url ({})", settings.database.url.masked()))
}

/// Runs a one-shot command on the settings' store: a runtime, the store opened (exit 1 when it
/// cannot be), then `command`.
pub fn with_store<F, Fut>(settings: &Settings, command: F) -> Result<(), CliError>
where
    F: FnOnce(Stores) -> Fut,
    Fut: std::future::Future<Output = Result<(), CliError>>,
{
    runtime()?.block_on(async { command(open(settings).await?).await })
}

/// `load-agent migrate`: applies the migrations not applied yet.
pub fn run_migrate(settings: &Settings) -> Result<(), CliError> {
    runtime()?.block_on(migrate(settings.database.url.expose())).or_fail("load-agent migrate")?;
    println!("migrations applied to {}", settings.database.url.masked());
    Ok(())
}

#[derive(Debug, Args)]
pub struct CostArgs {
    pub load_id: String,
    #[arg(long)]
    pub json: bool,
}

/// `load-agent cost LOAD_ID`: the LLM cost of a load, a SQL sum over its log.
pub fn run_cost(settings: &Settings, args: CostArgs) -> Result<(), CliError> {
    with_store(settings, |stores| async move {
        let (entries, _) = stores.events.read(&args.load_id).await.or_fail("load-agent cost")?;
        if entries.is_empty() {
            return Err(CliError::failed(format!(
                "load-agent cost: no load {:?} in {}",
                args.load_id,
                settings.database.url.masked()
            )));
        }
        let cost = stores.events.llm_cost(&args.load_id).await.or_fail("load-agent cost")?;
        let mut calls = 0usize;
        let mut tokens = (0u64, 0u64);
        let mut by_method: std::collections::BTreeMap<String, (usize, f64)> = Default::default();
        for e in &entries {
            if let load_agent_domain::LogEntry::Decision(d) = e {
                for u in &d.llm_usage {
                    calls += 1;
                    tokens.0 += u.input_tokens;
                    tokens.1 += u.output_tokens;
                    let m = by_method.entry(u.method.clone()).or_default();
                    m.0 += 1;
                    m.1 += u.cost_usd;
                }
            }
        }
        if args.json {
            let v = serde_json::json!({
                "load_id": args.load_id, "cost_usd": cost, "calls": calls,
                "input_tokens": tokens.0, "output_tokens": tokens.1,
                "by_method": by_method.iter().map(|(k, (n, c))| (k.clone(), serde_json::json!({"calls": n, "cost_usd": c})))
                    .collect::<serde_json::Map<_, _>>(),
            });
            println!("{v}");
        } else {
            println!(
                "load {}: LLM cost ${cost:.6} over {calls} call(s), {} input / {} output tokens",
                args.load_id, tokens.0, tokens.1
            );
            for (m, (n, c)) in by_method {
                println!("  {m:<18} {n:>5} call(s)  ${c:.6}");
            }
        }
        Ok(())
    })
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    pub load_id: String,
    /// Read the load from this archive (a directory or file:// URL holding a manifest.json)
    /// instead of the database; prints what inspect prints of the live log (docs/archive.md).
    #[arg(long, value_name = "PATH")]
    pub archive: Option<String>,
    /// Show the state and timeline as of this log version.
    #[arg(long)]
    pub at: Option<u64>,
    #[arg(long)]
    pub json: bool,
}

/// `load-agent inspect LOAD_ID [--at VERSION] [--json]` on the live log (with `--archive PATH`,
/// `main` sends it to `archive::run_inspect`, which reads no database).
pub fn run_inspect(settings: &Settings, args: InspectArgs) -> Result<(), CliError> {
    with_store(settings, |stores| async move {
        let text =
            inspect_text(&stores, &args.load_id, args.at, args.json).await.or_fail("load-agent inspect")?;
        let Some(text) = text else {
            return Err(CliError::failed(format!(
                "load-agent inspect: no load {:?} in {}",
                args.load_id,
                settings.database.url.masked()
            )));
        };
        print!("{text}");
        Ok(())
    })
}

/// `load-agent console ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ConsoleCommand {
    /// Writes every load's `load_summary` row from its log (for logs written before the console
    /// existed; the worker keeps the rows current from then on). Safe to run while the service
    /// runs: a row newer than the one rebuilt is kept.
    Rebuild {
        /// Loads to rebuild at most (all by default).
        #[arg(long, default_value_t = usize::MAX)]
        limit: usize,
    },
}

/// `load-agent console rebuild`.
pub fn run_console(settings: &Settings, command: ConsoleCommand) -> Result<(), CliError> {
    let ConsoleCommand::Rebuild { limit } = command;
    with_store(settings, |stores| async move {
        let n = rebuild_summaries(&stores, limit).await.or_fail("load-agent console rebuild")?;
        println!("load_summary rebuilt for {n} load(s) in {}", settings.database.url.masked());
        Ok(())
    })
}

/// Folds each load's log and writes its summary; returns how many loads it wrote.
pub async fn rebuild_summaries(stores: &Stores, limit: usize) -> Result<usize, load_agent_store::StoreError> {
    let ids = stores.events.load_ids(limit).await?;
    for load_id in &ids {
        let (entries, _) = stores.events.read(load_id).await?;
        let Some(updated_at) = entries.iter().map(load_agent_domain::LogEntry::recorded_at).max() else {
            continue;
        };
        let state = load_agent_domain::project_state(load_id, &entries);
        stores.index.put_summary(load_id, &load_agent_domain::LoadSummary::of(&state, updated_at)).await?;
    }
    Ok(ids.len())
}

#[cfg(test)]
mod console_tests {
    use chrono::{TimeZone, Utc};
    use load_agent_domain::{EventKind, InboundEvent, LoadSummary, LogEntry, Stage};

    use super::rebuild_summaries;

    fn sms(load: &str, id: &str, minute: u32) -> LogEntry {
        LogEntry::Event(InboundEvent {
            event_id: id.into(),
            load_id: load.into(),
            occurred_at: Utc.with_ymd_and_hms(2026, 3, 2, 13, minute, 0).single().expect("a time"),
            kind: EventKind::Sms { from: "driver".into(), text: "on my way".into() },
        })
    }

    #[tokio::test]
    async fn rebuild_writes_a_summary_per_logged_load_and_keeps_newer_rows() {
        let stores = load_agent_store::open_store("sqlite::memory:").await.expect("a SQLite store");
        // Logs written without summaries, as before the console existed.
        stores.events.append("A", &[sms("A", "a1", 1), sms("A", "a2", 2)], 0, &[]).await.expect("append");
        stores.events.append("B", &[sms("B", "b1", 3)], 0, &[]).await.expect("append");
        assert_eq!(stores.index.summary("A").await.expect("read"), None);
        // B's row is newer than its log says (the worker wrote it after the rebuild read the log).
        let newer = LoadSummary {
            client: Some("client_b".into()),
            stage: Stage::AtPickup,
            version: 7,
            open_asks: 1,
            escalated_asks: 1,
            escalated_since: None,
            urgent_task_at: None,
            updated_at: Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().expect("a time"),
        };
        stores.index.put_summary("B", &newer).await.expect("put");

        assert_eq!(rebuild_summaries(&stores, usize::MAX).await.expect("rebuild"), 2);
        let a = stores.index.summary("A").await.expect("read").expect("A rebuilt");
        assert_eq!((a.version, a.stage, a.client), (2, Stage::ToPickup, None));
        assert_eq!(a.updated_at, Utc.with_ymd_and_hms(2026, 3, 2, 13, 2, 0).single().expect("a time"));
        assert_eq!(stores.index.summary("B").await.expect("read"), Some(newer), "the newer row stays");
    }
}
