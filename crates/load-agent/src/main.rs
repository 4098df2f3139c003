//! `load-agent`: one binary for every role and operator command.
//!
//! Exit codes: 0 success; 1 the command ran and found failures (an eval or golden replay that
//! differs); 2 bad input (a bad argument prints usage, a malformed file names the file).
//! Commands return a [`CliError`] (error.rs), which `main` prints once and maps to the code.

use std::process::ExitCode;

/// mimalloc, not glibc's malloc: the service allocates and frees many small, short-lived values
/// per event across threads, and at saturation glibc's malloc, free and chunk consolidation took
/// about a third of the service's CPU (docs/capacity.md, "The relay's lag, the queue's walk and
/// the test's own vacuum").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use error::{CliError, OrExit};

mod access;
mod commands;
mod config;
mod console;
mod error;
mod http;
mod telemetry;
mod timeline;

#[derive(Debug, Parser)]
#[command(name = "load-agent", version, about = "Runs every freight load after it is booked.")]
struct Cli {
    /// A TOML configuration file (also `LOAD_AGENT_CONFIG`); environment variables
    /// `LOAD_AGENT_<SECTION>_<KEY>` override it.
    #[arg(long, global = true, env = "LOAD_AGENT_CONFIG")]
    config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The main job on the embedded default: replays a bundled sample of recorded traffic through
    /// the consumer code, worker, relay and timer pump on SQLite and shows what the agent decided.
    Demo(commands::replay::DemoArgs),
    /// Replays a topic dump through the consumer code against a fresh store (topics.md); with
    /// `--archive PATH LOAD_ID`, re-projects one archived load and prints its state.
    Replay(commands::replay::ReplayArgs),
    /// Records a topic from Kafka as a dump (topics.md).
    #[cfg(feature = "kafka")]
    Dump(commands::replay::DumpArgs),
    /// The DLQ topic: `list` and `show` the dead letters, `redrive` them to the events topic
    /// once their cause is fixed.
    #[cfg(feature = "kafka")]
    #[command(subcommand)]
    Dlq(commands::dlq::DlqCommand),
    /// Kafka topics: `ensure` creates the events, DLQ and action topics that do not exist yet.
    #[cfg(feature = "kafka")]
    #[command(subcommand)]
    Topics(commands::production::TopicsCommand),
    /// Runs the worker, relay and timer pump together. With no configuration: SQLite, the
    /// in-process queue, fake delivery services and `POST /events` on 127.0.0.1:8080.
    Serve,
    /// Runs only the load worker (production mode: consumes Kafka).
    Worker,
    /// Runs only the outbox relay (production mode: publishes to Kafka).
    Relay,
    /// Runs only the timer pump (production mode: publishes timer_fired to Kafka).
    TimerPump,
    /// The local triage model: retrain the committed weights, or evaluate labeled messages.
    #[command(subcommand)]
    Triage(commands::triage::TriageCommand),
    /// Runs scenario evals (evals/scenarios by default) through the worker, relay and timer pump
    /// with a fake clock, on a fresh SQLite store per scenario or on Postgres.
    Eval(commands::eval::EvalArgs),
    /// SOP specs: check the files under a directory.
    #[command(subcommand)]
    Sop(commands::sop::SopCommand),
    /// Generates realistic traffic through the whole service (embedded, or Kafka with
    /// `--brokers`), measures throughput and latencies, runs pgbench on Postgres for the raw
    /// ceiling, and writes a JSON report (docs/capacity.md).
    Loadtest(commands::loadtest::LoadtestArgs),
    /// Applies the database migrations not applied yet (also done when the service starts).
    Migrate,
    /// The LLM cost of a load, from its log.
    Cost(commands::store_cmds::CostArgs),
    /// A load's timeline (events, decisions, actions and their delivery, asks) and its state at
    /// any version.
    Inspect(commands::store_cmds::InspectArgs),
    /// Archives of load logs (docs/archive.md): `export` the logs of a month's or listed loads
    /// to a directory as Avro files with a manifest, `verify` an archive against the database.
    #[command(subcommand)]
    Archive(commands::archive::ArchiveCommand),
    /// Postgres partitions of the log, the outbox and the timers (docs/operations.md): `ensure`
    /// makes the ones ahead (the service does it too), `list` shows them.
    #[command(subcommand)]
    Partitions(commands::partitions::PartitionsCommand),
    /// Retention (docs/operations.md): drops partitions past their windows and deletes expired
    /// rows; a log month only after its archive (lifecycle.archive_to) is written and verified.
    #[command(subcommand)]
    Retention(RetentionCommand),
    /// The operations console (served by `serve` and the worker at `/`): `rebuild` writes its
    /// load summaries from the logs.
    #[command(subcommand)]
    Console(commands::store_cmds::ConsoleCommand),
    /// Validates the configuration; `--print` shows the effective configuration, secrets masked.
    Config {
        #[arg(long)]
        print: bool,
    },
}

#[derive(Debug, clap::Subcommand)]
enum RetentionCommand {
    /// One retention run now (the service runs one every lifecycle.retention_secs).
    Run(commands::retention::RunArgs),
}

/// Loads and validates the configuration; an error names the setting (exit 2).
fn load_settings(file: Option<&std::path::Path>) -> Result<config::Settings, CliError> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    config::Settings::load(file, &env).or_bad_input("load-agent")
}

fn run(cli: Cli) -> Result<(), CliError> {
    use commands::service::Role;
    let file = cli.config.as_deref();
    match cli.command {
        Command::Triage(c) => commands::triage::run(c),
        Command::Sop(c) => commands::sop::run(c, || load_settings(file)),
        Command::Eval(a) => commands::eval::run(a),
        Command::Serve => commands::serve::run(&load_settings(file)?, Role::All),
        Command::Worker => commands::serve::run(&load_settings(file)?, Role::Worker),
        Command::Relay => commands::serve::run(&load_settings(file)?, Role::Relay),
        Command::TimerPump => commands::serve::run(&load_settings(file)?, Role::TimerPump),
        Command::Demo(a) => commands::replay::run_demo(a),
        Command::Replay(a) => commands::replay::run_replay(a),
        #[cfg(feature = "kafka")]
        Command::Dump(a) => commands::replay::run_dump(&load_settings(file)?, a),
        #[cfg(feature = "kafka")]
        Command::Dlq(c) => commands::dlq::run(&load_settings(file)?, c),
        #[cfg(feature = "kafka")]
        Command::Topics(c) => commands::production::run_topics(&load_settings(file)?, c),
        Command::Loadtest(a) => commands::loadtest::run(&load_settings(file)?, a),
        Command::Migrate => commands::store_cmds::run_migrate(&load_settings(file)?),
        Command::Console(c) => commands::store_cmds::run_console(&load_settings(file)?, c),
        Command::Archive(c) => commands::archive::run(&load_settings(file)?, c),
        Command::Partitions(c) => commands::partitions::run(&load_settings(file)?, c),
        Command::Retention(RetentionCommand::Run(a)) => commands::retention::run(&load_settings(file)?, a),
        Command::Cost(a) => commands::store_cmds::run_cost(&load_settings(file)?, a),
        Command::Inspect(a) => {
            let settings = load_settings(file)?;
            match a.archive.as_deref() {
                Some(path) => commands::archive::run_inspect(path, &a),
                None => commands::store_cmds::run_inspect(&settings, a),
            }
        }
        Command::Config { print } => {
            let s = load_settings(file)?;
            if print {
                print!("{}", s.to_masked_toml());
            } else {
                println!(
                    "configuration ok ({} mode)",
                    if s.production() { "production" } else { "embedded" }
                );
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        // The one place an error is printed: commands return it, with its exit code.
        Err(e) => {
            if let Some(message) = e.message() {
                eprintln!("{message}");
            }
            ExitCode::from(e.code())
        }
    }
}
