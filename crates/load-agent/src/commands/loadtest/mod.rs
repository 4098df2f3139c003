//! `load-agent loadtest`: realistic traffic through the whole service, measured, then a JSON
//! report (issue 9, docs/capacity.md).
//!
//! 1. With a Postgres database, pgbench first measures the raw ceiling: the transaction shape
//!    of one append on the same server ([`pgbench`]).
//! 2. The service starts in this process on the chosen store, exactly as `serve` wires it: the
//!    in-process queue and fake delivery services (embedded), or Kafka in and out
//!    (`--brokers`, production mode on its own topics `load-agent-loadtest-<run>.*`).
//! 3. N loads are registered, then generated traffic ([`traffic`]) runs at `--rate` events per
//!    second (or as fast as the service takes it, `--rate 0`) for `--warmup` + `--duration`
//!    seconds. Timers and delivery outcomes follow by themselves; agent time runs
//!    `--time-scale` times faster than real time so that the SOP's waits fire during the run.
//! 4. The generator stops, the service drains, and the figures of the measured window
//!    ([`probe`]) are printed and written as JSON.

mod pgbench;
mod probe;
mod server;
mod traffic;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use clap::Args;
use load_agent_domain::InboundEvent;
use load_agent_runtime::{Clock, EventPublisher, shutdown_channel};
use load_agent_store::{Stores, migrate, open_store_with};
use serde::Serialize;
use tokio::task::JoinSet;

use self::probe::{Latency, Probe, WindowFigures};
use self::traffic::{Mix, Traffic};
use crate::commands::service::ServiceParts;
use crate::commands::store_cmds::runtime;
use crate::config::Settings;
use crate::error::{CliError, OrExit};

#[derive(Debug, Args)]
pub struct LoadtestArgs {
    /// Loads in the test; each is registered before the measured traffic starts.
    #[arg(long, default_value_t = 20_000)]
    pub loads: usize,
    /// Generated events per second after registration; 0 runs as fast as the service takes
    /// them (at most --max-backlog generated events uncommitted).
    #[arg(long, default_value_t = 400.0)]
    pub rate: f64,
    /// Seconds of measured traffic.
    #[arg(long, default_value_t = 300)]
    pub duration: u64,
    /// Seconds of traffic before the measurement starts.
    #[arg(long, default_value_t = 15)]
    pub warmup: u64,
    /// Agent time runs this many times faster than real time (SOP waits of 30 minutes fire
    /// after 3 real minutes at 10). Latencies are real time.
    #[arg(long, default_value_t = 10.0)]
    pub time_scale: f64,
    /// Generated events published and not yet committed, at most (`--rate 0` and registration).
    #[arg(long, default_value_t = 2_000)]
    pub max_backlog: usize,
    /// The store: a Postgres or SQLite URL. Default: a fresh SQLite file in a temporary folder.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Kafka bootstrap servers: run in production mode (Kafka in and out). Needs a build with
    /// `--features kafka`. Default: the in-process queue.
    #[arg(long)]
    pub brokers: Option<String>,
    /// Kafka mode: records per second of the broker floor probe (the service's client settings
    /// on a topic of their own). At the generator's `--rate` it pays the same producer queueing
    /// as the generated events do.
    #[arg(long, default_value_t = 20.0)]
    pub floor_rate: f64,
    /// Kafka mode: producers the generator spreads its loads over (each load always through
    /// the same one). Integration services are separate clients; one producer carrying the
    /// whole rate queues behind librdkafka's five requests in flight of an idempotent producer.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub producers: u16,
    /// Seconds of pgbench per client count before the test (Postgres only); 0 skips it.
    #[arg(long, default_value_t = 20)]
    pub pgbench_secs: u32,
    /// pgbench client counts.
    #[arg(long, value_delimiter = ',', default_value = "16")]
    pub pgbench_clients: Vec<u32>,
    /// Seconds to wait after the traffic for in-flight work to finish.
    #[arg(long, default_value_t = 60)]
    pub drain: u64,
    /// Seed of the traffic generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where the JSON report goes.
    #[arg(long, default_value = "target/loadtest.json")]
    pub out: PathBuf,
}

/// Agent time: starts at the wall clock and runs `scale` times faster.
#[derive(Debug)]
struct ScaledClock {
    origin_real: Instant,
    origin: DateTime<Utc>,
    scale: f64,
}

impl Clock for ScaledClock {
    fn now(&self) -> DateTime<Utc> {
        let real = self.origin_real.elapsed().as_secs_f64() * self.scale;
        self.origin + chrono::Duration::microseconds((real * 1e6) as i64)
    }

    fn real_duration(&self, span: chrono::TimeDelta) -> Duration {
        span.to_std().unwrap_or_default().div_f64(self.scale.max(1e-9))
    }
}

/// The service's latency over the broker's floor.
#[derive(Debug, Clone, Serialize)]
pub struct AddedLatency {
    pub p50: f64,
    pub p99: f64,
    pub p99_ratio: f64,
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub mode: &'static str,
    pub store: &'static str,
    pub loads: usize,
    pub target_rate: f64,
    pub time_scale: f64,
    pub mix: Mix,
    pub started_at: DateTime<Utc>,
    pub registration_secs: f64,
    pub window: WindowFigures,
    /// The relay's lag (`Outbox::relay_lag`: the longest wait of an undelivered row, a send
    /// limit's deferrals left out), sampled each second (real ms).
    pub relay_lag_ms: Latency,
    /// Age of the oldest pending outbox row, deferred rows included (the backlog), sampled each
    /// second (real ms).
    pub oldest_pending_ms: Latency,
    /// Kafka mode: the broker's own produce → consume latency with the service's client
    /// settings, measured beside the service in the same window (`load_agent_kafka::floor`).
    pub broker_floor_ms: Option<Latency>,
    /// Kafka mode: what the service adds over the broker's floor (event → commit minus the
    /// floor, at p50 and p99), and event → commit p99 ÷ the floor's p99 (target ≤ 2).
    pub service_added_ms: Option<AddedLatency>,
    /// How late the most overdue scheduled timer was, sampled each second (real ms).
    pub timer_due_lag_ms: Latency,
    pub pgbench: Vec<pgbench::PgbenchFigure>,
    /// Postgres: the server settings the commit-bound figures depend on (`shared_buffers`,
    /// `max_wal_size`, `checkpoint_timeout`, `wal_compression`, …), as the run found them.
    pub server_settings: std::collections::BTreeMap<String, String>,
    /// All committed events per second ÷ pgbench appends per second at the most clients.
    pub fraction_of_raw: Option<f64>,
    /// Generated events not committed and actions not published when the drain ended.
    pub unfinished_events: usize,
    pub unpublished_actions: usize,
    /// Of `unpublished_actions`, those the per-contact send limit deferred: they wait for their
    /// limit by design (an SMS held for the rest of its hour), not for a relay behind.
    pub unpublished_deferred_actions: usize,
    /// How long the oldest of those (deferred actions aside) had waited when the drain ended:
    /// milliseconds for work still in flight (timers fire through the drain in agent time and
    /// decide new actions), the whole drain for work left behind.
    pub oldest_unfinished_ms: Option<f64>,
    pub peak_rss_mib: Option<f64>,
    /// The measured window minute by minute: the service's rate and, on Postgres, what the
    /// server wrote for each committed event (`server`).
    pub minutes: Vec<server::Minute>,
    /// What the minutes say the server lacks for this rate (checkpoints too close together, a
    /// buffer pool smaller than the pages written), in words; empty when nothing.
    pub server_shortfalls: Vec<String>,
    /// CPU seconds this process (the whole service) used in the measured window, and the
    /// committed events per CPU second: the service's events per second per core. Postgres and
    /// the broker are not included.
    pub service_cpu_secs: Option<f64>,
    pub events_per_service_cpu_sec: Option<f64>,
}

pub fn run(settings: &Settings, args: LoadtestArgs) -> Result<(), CliError> {
    let scale_ok = args.time_scale.is_finite() && args.time_scale >= 1.0;
    let rate_ok = args.rate.is_finite() && args.rate >= 0.0;
    if args.loads == 0 || args.duration == 0 || !scale_ok || !rate_ok {
        return Err(CliError::bad_input(
            "load-agent loadtest: --loads and --duration must be positive, --time-scale at least 1, --rate not negative",
        ));
    }
    // The service logs every decision at info; under load only warnings are worth reading
    // unless the log level is set explicitly.
    let mut log = settings.log.clone();
    if std::env::var_os("LOAD_AGENT_LOG_LEVEL").is_none() && std::env::var_os("RUST_LOG").is_none() {
        log.level = "warn".into();
    }
    crate::telemetry::init_logs(&log);
    runtime()?.block_on(run_async(settings, args))
}

async fn run_async(settings: &Settings, args: LoadtestArgs) -> Result<(), CliError> {
    let tmp = tempfile::tempdir().or_fail("load-agent loadtest: temporary folder")?;
    let url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", tmp.path().join("loadtest.db").display()));
    let postgres = url.starts_with("postgres");
    migrate(&url).await.or_fail("load-agent loadtest: --database-url")?;
    let mut pg = Vec::new();
    if postgres && args.pgbench_secs > 0 {
        eprintln!("loadtest: pgbench, {} s per client count {:?}", args.pgbench_secs, args.pgbench_clients);
        let (u, c, s) = (url.clone(), args.pgbench_clients.clone(), args.pgbench_secs);
        pg = tokio::task::spawn_blocking(move || pgbench::run(&u, &c, s))
            .await
            .or_fail("load-agent loadtest: pgbench task")?
            .or_fail("load-agent loadtest")?;
        for f in &pg {
            eprintln!("loadtest: pgbench {} clients: {:.0} appends/s", f.clients, f.appends_per_sec);
        }
    }
    let server_settings = if postgres { server::settings(&url).await } else { Default::default() };
    let stores = open_store_with(&url, &settings.store_options())
        .await
        .or_fail("load-agent loadtest: --database-url")?;
    let parts = ServiceParts::build(settings)?;
    let probe = Probe::new(args.time_scale);
    load_agent_runtime::stages::install_sink(probe.clone());
    let probed = probe.wrap(&stores);
    let clock: Arc<dyn Clock> =
        Arc::new(ScaledClock { origin_real: Instant::now(), origin: Utc::now(), scale: args.time_scale });
    let run_id = format!("lt{}", Utc::now().format("%m%d%H%M%S"));
    let (trigger, shutdown) = shutdown_channel();
    let mut tasks = JoinSet::new();
    let started =
        start_service(settings, &args, &run_id, &probed, parts, clock.clone(), &mut tasks, &shutdown).await?;
    let mode = started.mode;
    let queue = started.queue;
    let floor = started.floor;

    // Registration.
    let mut traffic = Traffic::new(&run_id, args.loads, args.seed, Mix::default());
    let reg_start = Instant::now();
    let mut publishing = JoinSet::new();
    for i in 0..traffic.loads() {
        while probe.backlog() >= args.max_backlog {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        publish(&queue, &probe, &mut publishing, traffic.registration(i, clock.now())).await;
    }
    let registered = wait_until(Duration::from_secs(args.drain.max(60)), || probe.backlog() == 0).await;
    let registration_secs = reg_start.elapsed().as_secs_f64();
    eprintln!(
        "loadtest: {} loads registered in {registration_secs:.1} s{}",
        args.loads,
        if registered { "" } else { " (not all committed: the service is behind)" }
    );

    // Traffic, with the lag sampler (and statistics kept fresh when autovacuum is off).
    let sampler = tokio::spawn(sample_lags(stores.clone(), clock.clone(), args.time_scale, shutdown.clone()));
    if postgres {
        tokio::spawn(vacuum_without_autovacuum(url.clone(), shutdown.clone()));
    }
    let start = Instant::now();
    let warm_end = start + Duration::from_secs(args.warmup);
    let end = warm_end + Duration::from_secs(args.duration);
    let server_samples = postgres.then(|| tokio::spawn(server::sample_minutes(url.clone(), warm_end, end)));
    let mut sent: u64 = 0;
    let mut last_report = start;
    let mut cpu_at_warm_end = None;
    while Instant::now() < end {
        if cpu_at_warm_end.is_none() && Instant::now() >= warm_end {
            cpu_at_warm_end = cpu_secs();
        }
        let now = Instant::now();
        let due = if args.rate > 0.0 {
            ((now - start).as_secs_f64() * args.rate) as u64
        } else {
            sent + (args.max_backlog.saturating_sub(probe.backlog())) as u64
        };
        while sent < due {
            publish(&queue, &probe, &mut publishing, traffic.next(clock.now())).await;
            sent += 1;
        }
        if now - last_report >= Duration::from_secs(10) {
            last_report = now;
            let w = probe.window(now - Duration::from_secs(10), now);
            eprintln!(
                "loadtest: {:>4.0} s  {:>6.0} events/s committed ({:>6.0} generated)  p99 event→commit {:>7.1} ms  backlog {}",
                (now - start).as_secs_f64(),
                w.events_per_sec,
                w.generated_events_per_sec,
                w.event_to_commit_ms.p99,
                probe.backlog()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let service_cpu_secs = cpu_secs().zip(cpu_at_warm_end).map(|(b, a)| b - a);
    while publishing.join_next().await.is_some() {}
    eprintln!("loadtest: traffic stopped after {sent} events; draining (at most {} s)", args.drain);
    // Rows the send limit holds wait for their limit's window, not for the service: the drain
    // does not wait for them (the report counts them apart).
    wait_until(Duration::from_secs(args.drain), || {
        let (events, actions) = probe.unfinished();
        events == 0 && actions == probe.unpublished_deferred()
    })
    .await;
    trigger.shutdown();
    let lags = sampler.await.unwrap_or_default();
    let _ =
        tokio::time::timeout(settings.shutdown.grace(), async { while tasks.join_next().await.is_some() {} })
            .await;

    let window = probe.window(warm_end, end);
    let server_samples = match server_samples {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    let floor_samples = match floor {
        Some(task) => Some(task.await.unwrap_or_default()),
        None => None,
    };
    let minutes =
        server::minutes(&probe, warm_end, end, floor_samples.as_deref().unwrap_or_default(), &server_samples);
    let broker_floor_ms = floor_samples.map(|samples| {
        let in_window = samples.into_iter().filter(|(at, _)| *at >= warm_end && *at < end);
        Latency::of(in_window.map(|(_, v)| v).collect())
    });
    let service_added_ms = broker_floor_ms.as_ref().filter(|f| f.count > 0).map(|f| AddedLatency {
        p50: window.event_to_commit_ms.p50 - f.p50,
        p99: window.event_to_commit_ms.p99 - f.p99,
        p99_ratio: window.event_to_commit_ms.p99 / f.p99.max(1e-9),
    });
    let (unfinished_events, unpublished_actions) = probe.unfinished();
    let unpublished_deferred_actions = probe.unpublished_deferred();
    let oldest_unfinished_ms = probe.oldest_unfinished_ms();
    let fraction_of_raw =
        pg.iter().max_by_key(|f| f.clients).map(|f| window.events_per_sec / f.appends_per_sec.max(1e-9));
    let report = Report {
        mode,
        store: if postgres { "postgres" } else { "sqlite" },
        loads: args.loads,
        target_rate: args.rate,
        time_scale: args.time_scale,
        mix: Mix::default(),
        started_at: Utc::now(),
        registration_secs,
        window: window.clone(),
        relay_lag_ms: Latency::of(lags.relay_ms),
        oldest_pending_ms: Latency::of(lags.pending_ms),
        broker_floor_ms,
        service_added_ms,
        timer_due_lag_ms: Latency::of(lags.timer_ms),
        pgbench: pg,
        server_settings,
        fraction_of_raw,
        unfinished_events,
        unpublished_actions,
        unpublished_deferred_actions,
        oldest_unfinished_ms,
        peak_rss_mib: peak_rss_mib(),
        server_shortfalls: server::shortfalls(&minutes),
        minutes,
        events_per_service_cpu_sec: service_cpu_secs
            .filter(|c| *c > 0.0)
            .map(|c| window.events_per_sec * window.seconds / c),
        service_cpu_secs,
    };
    print_summary(&report);
    let json = serde_json::to_string_pretty(&report).or_fail("load-agent loadtest: report")?;
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&args.out, json + "\n").or_fail(format!("load-agent loadtest: {}", args.out.display()))?;
    println!("report written to {}", args.out.display());
    Ok(())
}

/// The running service: how events get in.
struct Started {
    mode: &'static str,
    queue: Arc<dyn EventPublisher>,
    /// Kafka mode: the broker floor probe, ending at shutdown with its samples.
    floor: Option<tokio::task::JoinHandle<Vec<(Instant, f64)>>>,
}

#[allow(clippy::too_many_arguments)]
async fn start_service(
    settings: &Settings,
    args: &LoadtestArgs,
    run_id: &str,
    stores: &Stores,
    parts: ServiceParts,
    clock: Arc<dyn Clock>,
    tasks: &mut JoinSet<()>,
    shutdown: &load_agent_runtime::Shutdown,
) -> Result<Started, CliError> {
    match &args.brokers {
        None => {
            let fakes = load_agent_runtime::FakeServices::new();
            let rt = crate::commands::serve::embedded_runtime(settings, stores, parts, clock, fakes);
            let loops = rt.spawn_loops(
                settings.worker.concurrency,
                Arc::new(load_agent_runtime::LogDeadLetters),
                shutdown.clone(),
            );
            tasks.spawn(async move {
                let mut loops = loops;
                while loops.join_next().await.is_some() {}
            });
            Ok(Started { mode: "embedded", queue: rt.queue.clone(), floor: None })
        }
        Some(brokers) => {
            let generator = Generator { floor_rate: args.floor_rate, producers: args.producers.into() };
            kafka::start(settings, brokers, generator, run_id, stores, parts, clock, tasks, shutdown).await
        }
    }
}

/// Hands one event over without waiting for it (at most 512 hand-overs in flight).
async fn publish(
    queue: &Arc<dyn EventPublisher>,
    probe: &Arc<Probe>,
    set: &mut JoinSet<()>,
    event: InboundEvent,
) {
    while set.len() >= 512 {
        let _ = set.join_next().await;
    }
    probe.published(&event.event_id);
    let (q, probe) = (queue.clone(), probe.clone());
    set.spawn(async move {
        let id = event.event_id.clone();
        let started = Instant::now();
        match q.publish(event).await {
            Ok(()) => probe.handed_over(started),
            Err(e) => tracing::warn!(event_id = %id, error = %e, "loadtest: event not published"),
        }
    });
}

async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    done()
}

#[derive(Debug, Default)]
struct Lags {
    relay_ms: Vec<f64>,
    pending_ms: Vec<f64>,
    timer_ms: Vec<f64>,
}

/// Each second: the relay's lag, the age of the oldest pending outbox row and how late the most
/// overdue timer is.
async fn sample_lags(
    stores: Stores,
    clock: Arc<dyn Clock>,
    scale: f64,
    mut shutdown: load_agent_runtime::Shutdown,
) -> Lags {
    let mut lags = Lags::default();
    loop {
        tokio::select! {
            _ = shutdown.recv() => return lags,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let now = clock.now();
        if let Ok(lag) = stores.outbox.relay_lag(now).await {
            lags.relay_ms.push(lag.map_or(0.0, |d| d.as_secs_f64() * 1000.0 / scale));
        }
        if let Ok(age) = stores.outbox.oldest_pending_age(now).await {
            lags.pending_ms.push(age.map_or(0.0, |d| d.as_secs_f64() * 1000.0 / scale));
        }
        if let Ok(lag) = stores.timers.oldest_due_lag(now).await {
            lags.timer_ms.push(lag.map_or(0.0, |d| d.as_secs_f64() * 1000.0 / scale));
        }
    }
}

/// The store's leaf tables in the current schema (a partitioned parent holds no rows), as a
/// condition on `pg_class c`: the tables the autovacuum stand-in looks after and the server
/// sampler weighs.
macro_rules! store_leaf_tables {
    () => {
        r#"c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND (c.relname IN ('load_summary', 'load_months') OR c.relname LIKE 'log\_entries\_%'
       OR c.relname LIKE 'outbox\_%' OR c.relname LIKE 'timers\_%')"#
    };
}
use store_leaf_tables;

/// The store's tables autovacuum would vacuum or analyze now, by its default triggers (Postgres
/// 15: vacuum when more than 50 + 20 % of a table's rows are dead, or 1,000 + 20 % were inserted
/// since its last vacuum; analyze when 50 + 10 % changed since the last analyze). Leaf tables
/// only: autovacuum never processes a partitioned parent.
const AUTOVACUUM_DUE: &str = concat!(
    r#"
SELECT format('%I.%I', s.schemaname, s.relname) AS name,
       (s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0)
        OR s.n_ins_since_vacuum > 1000 + 0.2 * greatest(c.reltuples, 0)) AS vacuum,
       s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0) AS analyze
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE "#,
    store_leaf_tables!()
);

/// A server with `autovacuum = off` (some test servers) never refreshes the planner's
/// statistics, and the outbox claim, planned for the few rows of a fresh table, then scans
/// every pending row (0.7 ms becomes 250 ms at 57,000 pending rows); nor does it reclaim the
/// dead rows every claim and mark leaves in the outbox (78,000 dead beside 69,000 live after
/// 300 s at 400 events/s). Production runs autovacuum; here the test does what it would do,
/// every 5 s: each of the store's tables that autovacuum's default triggers would pick
/// ([`AUTOVACUUM_DUE`]) is vacuumed or analyzed. (Until 4 December 2026 it ran `VACUUM
/// (ANALYZE)` over every table every 30 s: work that grew with the tables at a fixed rate, 1.9 s
/// of each 30 s at the start of a 10-minute saturation run and 5.9 s at its end, a decline of the
/// test's own making; autovacuum's triggers grow with the table instead.) Its vacuums are
/// throttled as autovacuum's are (`vacuum_cost_delay` 2 ms per 200 units): a manual VACUUM of a
/// growing log partition otherwise takes a core from the appends for seconds at a time.
async fn vacuum_without_autovacuum(url: String, mut shutdown: load_agent_runtime::Shutdown) {
    use sqlx::ConnectOptions as _;
    // Autovacuum's cost-based delay (Postgres 15 defaults: 2 ms after each 200 cost units): a
    // worker yields to the foreground as it goes, where a manual VACUUM runs flat out.
    let Ok(options) = url.parse::<sqlx::postgres::PgConnectOptions>() else { return };
    // A throttled vacuum of a big table takes seconds, as autovacuum's do: not a slow statement
    // of the service's to warn about (sqlx logs any statement over a second at WARN).
    let options = options
        .options([("vacuum_cost_delay", "2ms"), ("vacuum_cost_limit", "200")])
        .disable_statement_logging();
    let Ok(pool) = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect_with(options).await else {
        return;
    };
    let on: Option<String> = sqlx::query_scalar("SHOW autovacuum").fetch_one(&pool).await.ok();
    if on.as_deref() != Some("off") {
        return;
    }
    eprintln!(
        "loadtest: this server runs with autovacuum = off: vacuuming the store's tables as autovacuum would"
    );
    loop {
        tokio::select! {
            _ = shutdown.recv() => return,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        let due: Vec<(String, bool, bool)> =
            sqlx::query_as(AUTOVACUUM_DUE).fetch_all(&pool).await.unwrap_or_default();
        for (table, vacuum, analyze) in due {
            let command = match (vacuum, analyze) {
                (true, true) => format!("VACUUM (ANALYZE) {table}"),
                (true, false) => format!("VACUUM {table}"),
                (false, true) => format!("ANALYZE {table}"),
                (false, false) => continue,
            };
            let _ = sqlx::query(&command).execute(&pool).await;
        }
    }
}

/// CPU seconds (user + system) this process has used so far (Linux `/proc/self/stat`, in the
/// usual 100 ticks per second).
fn cpu_secs() -> Option<f64> {
    stat_cpu_secs(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// User + system CPU seconds from a `/proc/PID/stat` line.
fn stat_cpu_secs(stat: &str) -> Option<f64> {
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// The process's peak resident memory (Linux `VmHWM`).
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn print_summary(r: &Report) {
    let w = &r.window;
    println!("load test: {} mode on {}, {} loads, {:.0} s measured", r.mode, r.store, r.loads, w.seconds);
    println!(
        "  committed events/s: {:.0} (generated {:.0}/s, target {})",
        w.events_per_sec,
        w.generated_events_per_sec,
        if r.target_rate > 0.0 { format!("{:.0}/s", r.target_rate) } else { "max".into() }
    );
    let l = |name: &str, x: &Latency| {
        println!(
            "  {name:<28} n={:<7} p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms",
            x.count, x.p50, x.p99, x.max
        )
    };
    l("event → commit", &w.event_to_commit_ms);
    l("commit → published", &w.commit_to_published_ms);
    l("(send-limited) → published", &w.deferred_commit_to_published_ms);
    l("timer lag (at fire)", &w.timer_lag_ms);
    l("relay lag (sampled)", &r.relay_lag_ms);
    l("oldest pending (sampled)", &r.oldest_pending_ms);
    l("generator hand-over (ack)", &w.handover_ms);
    if let Some(f) = &r.broker_floor_ms {
        l("broker floor (same settings)", f);
    }
    if let Some(t) = &w.fetch_round_trip_ms {
        println!(
            "  consumer's broker round trip  {:.0}/s  mean {:>7.1} ms  p99 {:>8.1} ms (worst 10 s window; librdkafka)",
            t.requests_per_sec, t.mean, t.worst_window_p99
        );
    }
    for (client, t) in &w.round_trips_ms {
        println!(
            "    {client:<26} round trip  {:.0}/s  mean {:>7.1} ms  p99 {:>8.1} ms",
            t.requests_per_sec, t.mean, t.worst_window_p99
        );
    }
    if let Some(a) = &r.service_added_ms {
        println!(
            "  service over the broker floor: +{:.1} ms at p50, +{:.1} ms at p99 (p99 {:.2}× the floor's)",
            a.p50, a.p99, a.p99_ratio
        );
    }
    for (stage, x) in &w.stages_ms {
        l(&format!("  stage {stage}"), x);
    }
    for f in &r.pgbench {
        println!("  pgbench, {} clients: {:.0} appends/s", f.clients, f.appends_per_sec);
    }
    if !r.server_settings.is_empty() {
        let s: Vec<String> = r.server_settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  server: {}", s.join(" "));
    }
    if let Some(x) = r.fraction_of_raw {
        println!("  end to end ÷ raw one-commit rate: {:.0} %", x * 100.0);
    }
    if let (Some(c), Some(e)) = (r.service_cpu_secs, r.events_per_service_cpu_sec) {
        println!("  service CPU: {c:.1} s in the window, {e:.0} events per CPU second");
    }
    for m in &r.minutes {
        let server = m.server.as_ref().map_or(String::new(), |s| {
            format!(
                "  WAL {:>6.0} B/event, {:.2} FPI/event, {:>5.0} flushes/s ({:.1} events each), {} checkpoints, {:.2} backend writes/event, {:.2} reads/event, hit {:.3}, store {:.0} MiB{}",
                s.wal_bytes_per_event,
                s.full_page_images_per_event,
                s.wal_flushes_per_sec,
                s.events_per_wal_flush,
                s.checkpoints,
                s.backend_writes_per_event,
                s.blocks_read_per_event,
                s.buffer_hit_ratio,
                s.store_mib,
                s.server_cpu_us_per_event
                    .zip(s.server_cores)
                    .map_or(String::new(), |(us, cores)| format!(", server CPU {us:.0} µs/event ({cores:.2} cores)"))
            )
        });
        let broker = match (m.broker_floor_p99_ms, m.fetch_p99_ms, m.handover_p99_ms) {
            (Some(floor), fetch, Some(handover)) => format!(
                " (floor {floor:.1}, fetch {}, hand-over {handover:.1})",
                fetch.map_or("-".to_string(), |f| format!("{f:.1}"))
            ),
            _ => String::new(),
        };
        println!(
            "  minute {:>3.0}: {:>6.0} events/s, p99 event → commit {:>7.1} ms{broker}{server}",
            m.from_secs / 60.0,
            m.committed_events_per_sec,
            m.event_to_commit_p99_ms
        );
        for st in m.server.iter().flat_map(|s| &s.statements) {
            println!(
                "      {:>3.0} % of statement time, {:>7} calls, {:>7.2} ms/call{}  {}",
                st.share_of_exec * 100.0,
                st.calls,
                st.ms_per_call,
                st.us_per_row.map_or(String::new(), |us| format!(", {us:>6.0} µs/row")),
                st.query
            );
        }
    }
    for s in &r.server_shortfalls {
        println!("  the server: {s}");
    }
    if let Some(m) = r.peak_rss_mib {
        println!("  peak resident memory: {m:.0} MiB");
    }
    if r.unfinished_events + r.unpublished_actions > 0 {
        let oldest = match r.oldest_unfinished_ms {
            Some(ms) => format!("; the oldest of the rest waiting {ms:.0} ms"),
            None => String::new(),
        };
        println!(
            "  unfinished after the drain: {} events, {} actions ({} of them held by the send limit{oldest})",
            r.unfinished_events, r.unpublished_actions, r.unpublished_deferred_actions
        );
    }
}

/// Kafka mode: the generator's side of the broker, the floor probe's rate and how many
/// producers carry the generated events.
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
struct Generator {
    floor_rate: f64,
    producers: usize,
}

#[cfg(not(feature = "kafka"))]
mod kafka {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        _settings: &Settings,
        _brokers: &str,
        _generator: super::Generator,
        _run_id: &str,
        _stores: &Stores,
        _parts: ServiceParts,
        _clock: Arc<dyn Clock>,
        _tasks: &mut JoinSet<()>,
        _shutdown: &load_agent_runtime::Shutdown,
    ) -> Result<Started, CliError> {
        Err(CliError::bad_input(
            "load-agent loadtest: --brokers needs Kafka support; build with `cargo build --release -p load-agent --features kafka`",
        ))
    }
}

#[cfg(feature = "kafka")]
mod kafka {
    use load_agent_kafka::{KafkaEventPublisher, ensure_topics};

    use super::*;
    use crate::commands::production::Pipeline;
    use crate::commands::service::Role;

    /// The generated events over several producers, a load always through the same one (so
    /// its events keep their order, as from one integration service). The producer is picked
    /// as the partition is (Kafka's murmur2 of the key), so with a count that divides the
    /// topic's partitions each producer writes whole partitions of its own.
    #[derive(Debug)]
    struct Publishers(Vec<KafkaEventPublisher>);

    impl Publishers {
        fn of(&self, load_id: &str) -> &KafkaEventPublisher {
            &self.0[load_agent_kafka::produce::key_slot(load_id.as_bytes(), self.0.len())]
        }
    }

    #[async_trait::async_trait]
    impl EventPublisher for Publishers {
        async fn publish(&self, event: InboundEvent) -> Result<(), load_agent_runtime::QueueError> {
            self.of(&event.load_id).publish(event).await
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        settings: &Settings,
        brokers: &str,
        generator: super::Generator,
        run_id: &str,
        stores: &Stores,
        parts: ServiceParts,
        clock: Arc<dyn Clock>,
        tasks: &mut JoinSet<()>,
        shutdown: &load_agent_runtime::Shutdown,
    ) -> Result<Started, CliError> {
        let mut s = settings.clone();
        s.kafka.brokers = brokers.to_owned();
        let mut kafka = s.kafka_config();
        // Its own topics and group: a load test never writes to the service's topics.
        let prefix = format!("load-agent-loadtest-{run_id}");
        kafka.events_topic = format!("{prefix}.events");
        kafka.dlq_topic = format!("{prefix}.events.dlq");
        kafka.actions_topic_prefix = format!("{prefix}.actions");
        kafka.group_id = prefix.clone();
        let floor_topic = format!("{prefix}.floor");
        let mut topics = kafka.all_topics();
        topics.push(floor_topic.clone());
        ensure_topics(&kafka, &topics, s.kafka.partitions, 1)
            .await
            .or_fail(format!("load-agent loadtest: creating topics on {brokers}"))?;
        let pipeline = Pipeline { settings: &s, stores, kafka: &kafka, registry: None, parts, clock };
        pipeline.spawn(Role::All, tasks, shutdown)?;
        // Each generated producer is one client of one lane, as an integration service's
        // producer is: `--producers` says how many there are, not the service's lanes.
        let one_lane = load_agent_kafka::KafkaConfig { producer_lanes: 1, ..kafka.clone() };
        let publishers = (1..=generator.producers.max(1))
            .map(|i| match generator.producers {
                1 => KafkaEventPublisher::new(&one_lane, "load-agent-loadtest"),
                _ => KafkaEventPublisher::new(&one_lane, &format!("load-agent-loadtest-{i}")),
            })
            .collect::<Result<Vec<_>, _>>()
            .or_fail("load-agent loadtest: producer")?;
        let floor_rate = generator.floor_rate;
        // The broker's floor, with the same client settings (20 records a second by default).
        let (k, stop) = (kafka.clone(), shutdown.clone());
        let floor = tokio::spawn(async move {
            match load_agent_kafka::floor::broker_floor(&k, &floor_topic, floor_rate, stop).await {
                Ok(samples) => samples,
                Err(e) => {
                    eprintln!("load-agent loadtest: broker floor probe: {e}");
                    Vec::new()
                }
            }
        });
        Ok(Started { mode: "kafka", queue: Arc::new(Publishers(publishers)), floor: Some(floor) })
    }

    #[cfg(test)]
    mod tests {
        use load_agent_kafka::KafkaConfig;

        use super::*;

        #[test]
        fn a_load_always_goes_through_the_same_producer_and_loads_use_them_all() {
            // Producers connect only at their first send: nothing listens on port 9.
            let kafka = KafkaConfig::new("127.0.0.1:9");
            let publishers = (1..=4)
                .map(|i| KafkaEventPublisher::new(&kafka, &format!("test-{i}")))
                .collect::<Result<Vec<_>, _>>()
                .expect("producers");
            let p = Publishers(publishers);
            let mut used = std::collections::HashSet::new();
            for n in 0..200 {
                let load = format!("L-{n}");
                let first = p.of(&load) as *const KafkaEventPublisher;
                assert!(std::ptr::eq(first, p.of(&load)), "{load} moved to another producer");
                used.insert(first as usize);
            }
            assert_eq!(used.len(), 4, "200 loads spread over every producer");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_reads_its_own_cpu_time_and_peak_memory() {
        assert!(cpu_secs().is_some_and(|c| c >= 0.0));
        assert!(peak_rss_mib().is_some_and(|m| m > 0.0));
    }

    #[test]
    fn agent_time_runs_faster_by_the_scale() {
        let clock = ScaledClock { origin_real: Instant::now(), origin: Utc::now(), scale: 10.0 };
        let a = clock.now();
        std::thread::sleep(Duration::from_millis(50));
        let agent_ms = (clock.now() - a).num_milliseconds();
        assert!(agent_ms >= 500, "50 real ms are at least 500 agent ms, got {agent_ms}");
    }
}
