//! load-agent's Postgres event store against postgres-es (issue 15), on the same server in one
//! run, so that the comparison can be rerun instead of quoted.
//!
//! [postgres-es] is the Postgres event repository of cqrs-es, a widely used Rust event-sourcing
//! framework: the nearest off-the-shelf thing to what `load-agent-store` does. Three runs, one
//! after the other, each in a fresh schema that it creates and drops, each with the same
//! `--writers` concurrent writers on aggregates (loads) of their own, a warm-up and then a
//! measured window:
//!
//! 1. `postgres-es`: `PostgresEventRepository::persist` of two serialized events per commit (an
//!    inbound SMS and its decision, as JSON: the serde JSON of the same entries the other runs
//!    append) with its version check (the primary key on the sequence numbers; a conflict is its
//!    `OptimisticLock`). One transaction each: `BEGIN`, one `INSERT` per event, `COMMIT`. No outbox.
//! 2. `load-agent PgStore`: `EventStore::append` of the same event + decision (stored as Avro) AND
//!    the decision's two outbox rows (a `send_sms` and a `set_timer`), at the expected version:
//!    one statement, one commit per append.
//! 3. `load-agent GroupCommit`: the same appends through `load_agent_runtime::GroupCommit` with
//!    `GroupCommitConfig::default()` (no window, up to 32 loads per transaction, 4 committers;
//!    `--group-window-ms`, `--group-max-batch`, `--group-committers` change it):
//!    appends of different loads share one `append_batch` transaction, each with its own version
//!    check and result.
//!
//! Each writer fills a load with [`APPENDS_PER_LOAD`] appends (20 entries), then moves on to a
//! new one. The figures are appends per second (one commit each for runs 1 and 2), events per
//! second (two per append, the same for all three) and the latency of one append call, p50 and
//! p99, over the appends that started and finished inside the measured window. The GroupCommit
//! run also prints its batches: how many, loads per batch, and the time of one batch's statement
//! and commit as the committer sees it. Each run prints the server's WAL written in its window
//! per append: records, KiB and full-page images (the whole server's counters, so nothing else
//! may run; docs/capacity.md, "An eleventh machine", reads the records one by one).
//!
//! Payloads are built before the timing: postgres-es's two JSON payloads once per writer (only
//! the aggregate id and the sequence change between appends); load-agent's entries and outbox
//! rows, whose ids must be new in every append, just before each append's clock starts (a few
//! µs; inside the window, which can only favour postgres-es).
//!
//! ```sh
//! cd benches/compare-postgres-es
//! nice -n 19 cargo run --release -- --database-url postgres://postgres@127.0.0.1:5432/test \
//!     --writers 16 --seconds 20 --warmup 5
//! ```
//!
//! `--database-url` defaults to `DATABASE_URL`, else `postgres://postgres@127.0.0.1:5432/test`.
//! Results go to stdout; `docs/capacity.md` ("Against postgres-es") keeps them.
//!
//! [postgres-es]: https://docs.rs/postgres-es

use std::convert::Infallible;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cqrs_es::event_sink::EventSink;
use cqrs_es::persist::{PersistedEventRepository, SerializedEvent};
use cqrs_es::{Aggregate, DomainEvent};
use load_agent_domain::LogEntry;
use load_agent_runtime::{GroupCommit, GroupCommitConfig};
use load_agent_store::{AppendError, AppendRequest, EventStore, PgStore, StoreOptions};
use load_agent_testkit::store::{Intercept, Intercepted, agent_append, base_time, partitions_at};
use postgres_es::PostgresEventRepository;
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, Row};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Appends per load (two entries each) before a writer moves on to a new load.
const APPENDS_PER_LOAD: u64 = 10;

/// postgres-es's events table, as in its repository's `db/init.sql` (snapshots are not used).
const EVENTS_DDL: &str = "CREATE TABLE events (
    aggregate_type text NOT NULL,
    aggregate_id text NOT NULL,
    sequence bigint CHECK (sequence >= 0) NOT NULL,
    event_type text NOT NULL,
    event_version text NOT NULL,
    payload json NOT NULL,
    metadata json NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id, sequence))";

const USAGE: &str =
    "usage: load-agent-compare-postgres-es [--database-url URL] [--writers N] [--seconds S] [--warmup S] [--group-* N]
  --database-url  default: DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test
  --writers       concurrent writers (16)
  --seconds       measured window of each run (20)
  --warmup        warm-up before each window (5)
  --group-window-ms, --group-max-batch, --group-committers
                  GroupCommit's configuration (GroupCommitConfig::default(): 0, 32, 4)
  --log-months-kept
                  older monthly log partitions made before the run (0), as retention keeps
                  them in production (13 months): what each costs the appends' plans";

#[derive(Debug, Clone)]
struct Args {
    url: String,
    writers: usize,
    seconds: u64,
    warmup: u64,
    group: GroupCommitConfig,
    log_months_kept: u32,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        url: std::env::var("DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned()),
        writers: 16,
        seconds: 20,
        warmup: 5,
        group: GroupCommitConfig::default(),
        log_months_kept: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        if flag == "--help" || flag == "-h" {
            return Err(String::new());
        }
        let value = inline.or_else(|| it.next()).ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<u64>().map_err(|_| format!("{flag}: {v:?} is not a whole number"));
        match flag.as_str() {
            "--database-url" => args.url = value,
            "--writers" => args.writers = usize::try_from(number(&value)?.max(1)).unwrap_or(1),
            "--seconds" => args.seconds = number(&value)?.max(1),
            "--warmup" => args.warmup = number(&value)?,
            "--group-window-ms" => args.group.window = Duration::from_millis(number(&value)?),
            "--group-max-batch" => {
                args.group.max_batch = usize::try_from(number(&value)?.max(1)).unwrap_or(1)
            }
            "--log-months-kept" => {
                args.log_months_kept = u32::try_from(number(&value)?.min(120)).unwrap_or(0)
            }
            "--group-committers" => {
                args.group.committers = usize::try_from(number(&value)?.max(1)).unwrap_or(1)
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(args)
}

/// The measured window of a run: appends that start at or after `from` and finish by `to` count.
#[derive(Debug, Clone, Copy)]
struct Window {
    from: Instant,
    to: Instant,
}

impl Window {
    fn record(&self, started: Instant, latencies_us: &mut Vec<u32>) {
        let done = Instant::now();
        if started >= self.from && done <= self.to {
            latencies_us.push(u32::try_from(done.duration_since(started).as_micros()).unwrap_or(u32::MAX));
        }
    }
}

/// The load a writer's `n`-th append goes to and the append's step within that load.
fn load_and_step(writer: usize, n: u64) -> (String, u64) {
    (format!("w{writer}-l{}", n / APPENDS_PER_LOAD), n % APPENDS_PER_LOAD)
}

/// What one run measured.
struct Report {
    name: &'static str,
    appends_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// The server's WAL written during the measured window, per append measured.
    wal: WalPerAppend,
}

/// The server's WAL counters at one instant: its position in bytes (exact) and `pg_stat_wal`'s
/// records and full-page images (each backend reports these at most once a second, so a window
/// of 20 s reads them to within a few per cent). The whole server's: nothing else may run.
#[derive(Debug, Clone, Copy)]
struct WalMark {
    bytes: f64,
    records: f64,
    fpi: f64,
}

/// WAL records, bytes and full-page images per append in a measured window.
#[derive(Debug, Clone, Copy)]
struct WalPerAppend {
    records: f64,
    kib: f64,
    fpi: f64,
}

async fn wal_mark(url: &str) -> Result<WalMark, Error> {
    let mut conn = PgConnectOptions::from_str(url)?.connect().await?;
    let row = conn
        .fetch_one(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8, wal_records::float8, \
             wal_fpi::float8 FROM pg_stat_wal",
        )
        .await?;
    let mark = WalMark { bytes: row.try_get(0)?, records: row.try_get(1)?, fpi: row.try_get(2)? };
    conn.close().await?;
    Ok(mark)
}

/// Reads the WAL counters at the window's start and end (a task of its own beside the writers).
async fn wal_in_window(url: String, window: Window) -> Result<(WalMark, WalMark), Error> {
    tokio::time::sleep_until(tokio::time::Instant::from_std(window.from)).await;
    let start = wal_mark(&url).await?;
    tokio::time::sleep_until(tokio::time::Instant::from_std(window.to)).await;
    Ok((start, wal_mark(&url).await?))
}

/// Runs `writer` on `args.writers` tasks through a warm-up and a measured window.
async fn measure<F, Fut>(name: &'static str, args: &Args, writer: F) -> Result<Report, Error>
where
    F: Fn(usize, Window) -> Fut,
    Fut: Future<Output = Result<Vec<u32>, Error>> + Send + 'static,
{
    let from = Instant::now() + Duration::from_secs(args.warmup);
    let window = Window { from, to: from + Duration::from_secs(args.seconds) };
    let wal = tokio::spawn(wal_in_window(args.url.clone(), window));
    let tasks: Vec<_> = (0..args.writers).map(|w| tokio::spawn(writer(w, window))).collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.map_err(|e| format!("{name}: a writer panicked: {e}"))??);
    }
    let (start, end) = wal.await.map_err(|e| format!("{name}: the WAL reader panicked: {e}"))??;
    let appends = latencies.len().max(1) as f64;
    let wal = WalPerAppend {
        records: (end.records - start.records) / appends,
        kib: (end.bytes - start.bytes) / 1024.0 / appends,
        fpi: (end.fpi - start.fpi) / appends,
    };
    latencies.sort_unstable();
    let quantile = |q: f64| {
        let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len().max(1)) - 1;
        latencies.get(i).map_or(f64::NAN, |us| f64::from(*us) / 1000.0)
    };
    let report = Report {
        name,
        appends_per_s: latencies.len() as f64 / args.seconds as f64,
        p50_ms: quantile(0.50),
        p99_ms: quantile(0.99),
        wal,
    };
    println!(
        "  {name}: {} appends/s, {} events/s, p50 {:.2} ms, p99 {:.2} ms ({} appends measured); \
         WAL per append {:.1} records, {:.2} KiB, {:.2} full-page images",
        thousands(report.appends_per_s),
        thousands(2.0 * report.appends_per_s),
        report.p50_ms,
        report.p99_ms,
        latencies.len(),
        wal.records,
        wal.kib,
        wal.fpi
    );
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// postgres-es

/// The aggregate postgres-es files the events under. Only its `TYPE` is used: the bench calls
/// the repository's `persist` directly, as cqrs-es's event store does once a command is handled.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Load;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct LoadEvent(serde_json::Value);

impl DomainEvent for LoadEvent {
    fn event_type(&self) -> String {
        "load_event".into()
    }
    fn event_version(&self) -> String {
        "1.0".into()
    }
}

impl Aggregate for Load {
    const TYPE: &'static str = "load";
    type Command = ();
    type Event = LoadEvent;
    type Error = Infallible;
    type Services = ();

    async fn handle(&mut self, _: (), _: &(), _: &EventSink<Self>) -> Result<(), Infallible> {
        Ok(())
    }

    fn apply(&mut self, _: LoadEvent) {}
}

/// A writer's two serialized events: the JSON of an append's inbound SMS and decision.
fn serialized_pair(writer: usize) -> Result<[SerializedEvent; 2], Error> {
    let (entries, _) = agent_append(&format!("w{writer}"), 0, 0);
    let json = |entry: &LogEntry, event_type: &str| -> Result<SerializedEvent, Error> {
        Ok(SerializedEvent::new(
            String::new(),
            0,
            Load::TYPE.into(),
            event_type.into(),
            "1.0".into(),
            serde_json::to_value(entry)?,
            serde_json::json!({}),
        ))
    };
    Ok([json(&entries[0], "sms_received")?, json(&entries[1], "decision_recorded")?])
}

async fn postgres_es_writer(
    repo: Arc<PostgresEventRepository>,
    writer: usize,
    window: Window,
) -> Result<Vec<u32>, Error> {
    let mut events = serialized_pair(writer)?;
    let mut latencies = Vec::new();
    for n in 0.. {
        if Instant::now() >= window.to {
            break;
        }
        let (load, step) = load_and_step(writer, n);
        for (i, event) in (1..).zip(events.iter_mut()) {
            event.aggregate_id.clone_from(&load);
            event.sequence = usize::try_from(2 * step + i)?;
        }
        let started = Instant::now();
        repo.persist::<Load>(&events, None)
            .await
            .map_err(|e| format!("postgres-es: append to {load}: {e}"))?;
        window.record(started, &mut latencies);
    }
    Ok(latencies)
}

async fn run_postgres_es(args: &Args, schema: &str) -> Result<Report, Error> {
    let connect = PgConnectOptions::from_str(&args.url)?.options([("search_path", schema)]);
    let pool =
        PgPoolOptions::new().max_connections(u32::try_from(args.writers)?).connect_with(connect).await?;
    pool.execute(EVENTS_DDL).await?;
    let repo = Arc::new(PostgresEventRepository::new(pool.clone()));
    let report = measure("postgres-es", args, |w, window| postgres_es_writer(repo.clone(), w, window)).await;
    pool.close().await;
    report
}

// ---------------------------------------------------------------------------------------------
// load-agent

/// The store under GroupCommit, timing what reaches it: batches, loads per batch and the time
/// of each `append_batch` (one statement and its commit), so a run shows where an append's
/// latency goes (the batch's statement, or waiting for a committer).
#[derive(Default)]
struct Timed {
    batches: AtomicU64,
    loads: AtomicU64,
    busy_us: AtomicU64,
}

#[async_trait::async_trait]
impl Intercept for Timed {
    async fn append_batch(
        &self,
        inner: &dyn EventStore,
        requests: Vec<AppendRequest>,
    ) -> Vec<Result<u64, AppendError>> {
        let started = Instant::now();
        let n = requests.len() as u64;
        let results = inner.append_batch(requests).await;
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.loads.fetch_add(n, Ordering::Relaxed);
        self.busy_us.fetch_add(us, Ordering::Relaxed);
        results
    }
}

async fn store_writer(store: Arc<dyn EventStore>, writer: usize, window: Window) -> Result<Vec<u32>, Error> {
    let mut latencies = Vec::new();
    for n in 0.. {
        if Instant::now() >= window.to {
            break;
        }
        let (load, step) = load_and_step(writer, n);
        let (entries, rows) = agent_append(&load, step, 2 * step);
        let started = Instant::now();
        store
            .append(&load, &entries, 2 * step, &rows)
            .await
            .map_err(|e| format!("load-agent: append to {load}: {e}"))?;
        window.record(started, &mut latencies);
    }
    Ok(latencies)
}

async fn run_load_agent(args: &Args, schema: &str, grouped: bool) -> Result<Report, Error> {
    let options =
        StoreOptions { max_connections: u32::try_from(args.writers)?.max(2), ..StoreOptions::default() };
    let pg = PgStore::connect_in_schema_with(&args.url, schema, &options).await?;
    // The appends' clock is the testkit's `base_time()`: give the store the partitions a service
    // running then has (that month's and day's, so that rows do not all land in the default
    // partitions, and no outbox days around the real clock).
    partitions_at(&pg, base_time()).await?;
    if args.log_months_kept > 0 {
        // The months before the previous one (which `ensure` makes), back as far as asked.
        let this_month =
            chrono::Datelike::with_day(&base_time().date_naive(), 1).ok_or("base_time has no first day")?;
        let months =
            |n: u32| this_month.checked_sub_months(chrono::Months::new(n)).ok_or("months out of range");
        let made: i64 =
            sqlx::query_scalar("SELECT count(*) FROM load_agent_ensure_months('log_entries', $1, $2)")
                .bind(months(args.log_months_kept + 1)?)
                .bind(months(2)?)
                .fetch_one(pg.pool())
                .await?;
        println!("    {made} older monthly log partitions made (--log-months-kept {})", args.log_months_kept);
    }
    let timed = Arc::new(Intercepted::new(Arc::new(pg.clone()), Timed::default()));
    let (name, store): (_, Arc<dyn EventStore>) = if grouped {
        ("load-agent GroupCommit", Arc::new(GroupCommit::new(timed.clone(), args.group)))
    } else {
        ("load-agent PgStore", Arc::new(pg.clone()))
    };
    let report = measure(name, args, |w, window| store_writer(store.clone(), w, window)).await;
    let timed = &timed.hook;
    let batches = timed.batches.load(Ordering::Relaxed);
    if batches > 0 {
        let loads = timed.loads.load(Ordering::Relaxed) as f64;
        let busy_ms = timed.busy_us.load(Ordering::Relaxed) as f64 / 1000.0;
        println!(
            "    {batches} batches (warm-up included), {:.1} loads each, {:.2} ms per batch statement + commit, {:.0} ms of statements per s of run",
            loads / batches as f64,
            busy_ms / batches as f64,
            busy_ms / (args.warmup + args.seconds) as f64
        );
    }
    drop(store);
    pg.drop_schema().await?;
    report
}

// ---------------------------------------------------------------------------------------------

fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A schema name no other run uses.
fn fresh_schema(run: &str) -> String {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    format!("cmp_{run}_{}_{ms}", std::process::id())
}

async fn run(args: &Args) -> Result<(), Error> {
    let mut admin = PgConnectOptions::from_str(&args.url)?.connect().await?;
    let setting = |row: sqlx::postgres::PgRow| row.try_get::<String, _>(0).unwrap_or_default();
    let version = setting(admin.fetch_one("SHOW server_version").await?);
    let sync = setting(admin.fetch_one("SHOW synchronous_commit").await?);
    let fsync = setting(admin.fetch_one("SHOW fsync").await?);
    let [event, decision] = serialized_pair(0)?;
    let built = Instant::now();
    for n in 0..1_000 {
        std::hint::black_box(agent_append("w0-l0", n, 2 * n));
    }
    let build_us = built.elapsed().as_secs_f64() * 1e6 / 1_000.0;
    println!(
        "Postgres {version} (synchronous_commit={sync}, fsync={fsync}); {} writers, {} s warm-up + {} s measured per run",
        args.writers, args.warmup, args.seconds
    );
    println!(
        "GroupCommit: window {} ms, max_batch {}, committers {}",
        args.group.window.as_millis(),
        args.group.max_batch,
        args.group.committers
    );
    println!(
        "postgres-es payloads: event {} B, decision {} B of JSON; load-agent appends the same entries (Avro) + 2 outbox rows, each append built in {build_us:.1} µs",
        event.payload.to_string().len(),
        decision.payload.to_string().len()
    );

    let schema = fresh_schema("pges");
    admin.execute(format!("CREATE SCHEMA \"{schema}\"").as_str()).await?;
    let pges = run_postgres_es(args, &schema).await;
    admin.execute(format!("DROP SCHEMA \"{schema}\" CASCADE").as_str()).await?;
    let pges = pges?;
    let single = run_load_agent(args, &fresh_schema("store"), false).await?;
    let grouped = run_load_agent(args, &fresh_schema("group"), true).await?;
    admin.close().await?;

    println!(
        "\n| store ({} writers, {} s) | appends/s | events/s | p50 ms | p99 ms | WAL records / KiB per append | × postgres-es |",
        args.writers, args.seconds
    );
    println!("|---|---|---|---|---|---|---|");
    for r in [&pges, &single, &grouped] {
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.1} / {:.2} | {:.2} |",
            r.name,
            thousands(r.appends_per_s),
            thousands(2.0 * r.appends_per_s),
            r.p50_ms,
            r.p99_ms,
            r.wal.records,
            r.wal.kib,
            r.appends_per_s / pges.appends_per_s
        );
    }
    println!(
        "\nratios: PgStore / postgres-es = {:.2}×, GroupCommit / postgres-es = {:.2}× (target ≥ 2×, outbox rows included)",
        single.appends_per_s / pges.appends_per_s,
        grouped.appends_per_s / pges.appends_per_s
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("{USAGE}");
            return if e.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(2) };
        }
    };
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
