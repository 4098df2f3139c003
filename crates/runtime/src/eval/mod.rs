//! `load-agent eval` (scenarios.md): replays scenario files with a fake clock through the same
//! worker, relay and timer pump code as production, with in-process fakes of the delivery
//! services, and checks every step.
//!
//! - [`scenario`]: the file format, parsed and checked (errors name the file and line).
//! - [`check`]: `expect` (a multiset), `noop`, `duplicate`, `state`.
//! - [`report`]: the JSON report.
//!
//! The binary calls [`run_eval`] and maps `Err(EvalError)` to exit 2, a summary with failures
//! to exit 1, and an all-passed summary to exit 0.

pub mod check;
pub mod report;
pub mod scenario;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use load_agent_agent::Agent;
use load_agent_domain::{EventKind, InboundEvent, LogEntry};
use load_agent_llm::{FakeLlm, LlmClient};
use load_agent_store::{PgStore, SqliteStore, StoreOptions, Stores};

use crate::clock::{Clock, FakeClock};
use crate::delivery::FakeServices;
use crate::harness::{InProcessRuntime, RuntimeConfig};

pub use report::{DecisionReport, EvalReport, ScenarioReport, StepReport};
pub use scenario::{
    Expect, ExpectedAction, Scenario, ScenarioError, Step, StepEvent, load_scenario, parse_scenario,
};

/// The folder `load-agent eval` reads when given no path.
pub const DEFAULT_SCENARIO_DIR: &str = "evals/scenarios";

/// Why an eval run could not run (exit 2): a file or folder that cannot be read, a scenario
/// that is not valid, a store that cannot be opened, a report that cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    #[error("{path}: {message}")]
    Path { path: PathBuf, message: String },
    #[error("scenario name {name:?} is used by both {first} and {second}; names are unique")]
    DuplicateName { name: String, first: PathBuf, second: PathBuf },
    #[error("no scenario file (*.yaml) under {0}")]
    NoScenarios(String),
    #[error("store: {0}")]
    Store(String),
    #[error("cannot set up the agent: {0}")]
    Agent(String),
    #[error("cannot write the report {path}: {message}")]
    Report { path: PathBuf, message: String },
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// What a run found.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalSummary {
    pub passed: usize,
    pub failed: usize,
    pub report: EvalReport,
}

impl EvalSummary {
    pub fn all_passed(&self) -> bool {
        self.failed == 0
    }

    /// 0 all passed, 1 some failed (a run error is 2, from [`EvalError`]).
    pub fn exit_code(&self) -> i32 {
        if self.all_passed() { 0 } else { 1 }
    }
}

/// Where each scenario's store comes from.
#[derive(Debug, Clone)]
pub enum EvalStore {
    /// A fresh SQLite file per scenario (the default).
    Sqlite,
    /// A fresh schema per scenario on this Postgres database, dropped afterwards.
    Postgres { url: String },
}

impl EvalStore {
    /// `None` or a `sqlite:` URL: SQLite (always a fresh file per scenario); `postgres://`:
    /// Postgres.
    pub fn from_url(url: Option<&str>) -> Result<Self, EvalError> {
        match url {
            None => Ok(EvalStore::Sqlite),
            Some(u) if u.starts_with("sqlite:") => Ok(EvalStore::Sqlite),
            Some(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
                Ok(EvalStore::Postgres { url: u.to_string() })
            }
            Some(u) => {
                let scheme = u.split(':').next().unwrap_or_default();
                Err(EvalError::Store(format!(
                    "unsupported database url scheme {scheme:?} (expected sqlite: or postgres://)"
                )))
            }
        }
    }
}

/// Runs the scenarios under `paths` (files, or folders searched for `*.yaml`; default
/// `evals/scenarios`), prints one line per scenario and the closing `N passed, M failed` to
/// `out`, and writes the JSON report to `report` when given. Every file is read and checked
/// before any scenario runs.
pub async fn run_eval(
    paths: &[PathBuf],
    report: Option<&Path>,
    database_url: Option<&str>,
    out: &mut dyn Write,
) -> Result<EvalSummary, EvalError> {
    let store = EvalStore::from_url(database_url)?;
    let scenarios = load_scenarios(paths)?;
    let agent = Arc::new(Agent::embedded().map_err(EvalError::Agent)?);
    let mut eval_report = EvalReport::default();
    for scenario in &scenarios {
        let r = run_scenario(scenario, &agent, &store).await?;
        writeln!(out, "{}", scenario_line(&r))?;
        out.flush()?;
        if r.passed {
            eval_report.passed += 1;
        } else {
            eval_report.failed += 1;
        }
        eval_report.scenarios.push(r);
    }
    writeln!(out, "{} passed, {} failed", eval_report.passed, eval_report.failed)?;
    if let Some(path) = report {
        let json = serde_json::to_string_pretty(&eval_report)
            .map_err(|e| EvalError::Report { path: path.to_path_buf(), message: e.to_string() })?;
        std::fs::write(path, json + "\n")
            .map_err(|e| EvalError::Report { path: path.to_path_buf(), message: e.to_string() })?;
    }
    Ok(EvalSummary { passed: eval_report.passed, failed: eval_report.failed, report: eval_report })
}

/// The line printed for a scenario: `PASS name (file)` or `FAIL name (file): where: what`.
pub fn scenario_line(r: &ScenarioReport) -> String {
    if r.passed {
        return format!("PASS {} ({})", r.name, r.file);
    }
    let why = match (&r.error, r.steps.iter().find(|s| !s.passed)) {
        (Some(e), _) => e.clone(),
        (None, Some(s)) => format!(
            "step {} at {}{}: {}",
            s.index,
            s.at,
            s.event_id.as_deref().map(|id| format!(" ({id})")).unwrap_or_default(),
            s.failures.join("; ")
        ),
        (None, None) => "failed".into(),
    };
    format!("FAIL {} ({}): {why}", r.name, r.file)
}

/// Every scenario file under `paths`, parsed and checked, in path order; names must be unique.
pub fn load_scenarios(paths: &[PathBuf]) -> Result<Vec<Scenario>, EvalError> {
    let default = [PathBuf::from(DEFAULT_SCENARIO_DIR)];
    let roots: &[PathBuf] = if paths.is_empty() { &default } else { paths };
    let mut files = Vec::new();
    for root in roots {
        let meta = std::fs::metadata(root)
            .map_err(|e| EvalError::Path { path: root.clone(), message: format!("cannot read: {e}") })?;
        if meta.is_dir() {
            let before = files.len();
            collect_yaml(root, &mut files)?;
            if files.len() == before {
                return Err(EvalError::NoScenarios(root.display().to_string()));
            }
        } else {
            files.push(root.clone());
        }
    }
    let mut scenarios = Vec::with_capacity(files.len());
    let mut names: HashMap<String, PathBuf> = HashMap::new();
    for f in files {
        let s = load_scenario(&f)?;
        if let Some(first) = names.insert(s.name.clone(), f.clone()) {
            return Err(EvalError::DuplicateName { name: s.name, first, second: f });
        }
        scenarios.push(s);
    }
    Ok(scenarios)
}

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), EvalError> {
    let read = std::fs::read_dir(dir).map_err(|e| EvalError::Path {
        path: dir.to_path_buf(),
        message: format!("cannot read the folder: {e}"),
    })?;
    let mut entries: Vec<PathBuf> = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| EvalError::Path { path: dir.to_path_buf(), message: e.to_string() })?;
        entries.push(entry.path());
    }
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_yaml(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
    Ok(())
}

static SCHEMA_SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh store for one scenario, and what to do with it afterwards.
enum OpenedStore {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

impl OpenedStore {
    async fn open(store: &EvalStore) -> Result<Self, EvalError> {
        match store {
            EvalStore::Sqlite => SqliteStore::open_temporary(&StoreOptions::default())
                .await
                .map(OpenedStore::Sqlite)
                .map_err(|e| EvalError::Store(format!("cannot open a temporary SQLite store: {e}"))),
            EvalStore::Postgres { url } => {
                let n = SCHEMA_SEQ.fetch_add(1, Ordering::Relaxed);
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() % 1_000_000_000_000)
                    .unwrap_or_default();
                let schema = format!("eval_{}_{nanos}_{n}", std::process::id());
                PgStore::connect_in_schema(url, &schema)
                    .await
                    .map(OpenedStore::Postgres)
                    // Only the error: the URL may carry a password.
                    .map_err(|e| EvalError::Store(format!("cannot open Postgres schema {schema}: {e}")))
            }
        }
    }

    fn stores(&self) -> Stores {
        match self {
            OpenedStore::Sqlite(s) => s.clone().into_stores(),
            OpenedStore::Postgres(p) => p.clone().into_stores(),
        }
    }

    async fn close(self) {
        if let OpenedStore::Postgres(p) = self
            && let Err(e) = p.drop_schema().await
        {
            tracing::warn!(error = %e, "could not drop an eval schema");
        }
    }
}

/// The event id of the registration a scenario's `load:` becomes.
pub fn registration_event_id(load_id: &str) -> String {
    format!("load_registered:{load_id}")
}

/// Runs one scenario on a fresh store: registration at `start`, then every step.
pub async fn run_scenario(
    scenario: &Scenario,
    agent: &Arc<Agent>,
    store: &EvalStore,
) -> Result<ScenarioReport, EvalError> {
    let opened = OpenedStore::open(store).await?;
    let result = run_on(scenario, agent, opened.stores()).await;
    opened.close().await;
    Ok(result)
}

/// Runs one scenario on the given stores (fresh ones: the scenario's load must not exist).
pub async fn run_on(scenario: &Scenario, agent: &Arc<Agent>, stores: Stores) -> ScenarioReport {
    let clock = FakeClock::new(scenario.start);
    let llm: Arc<dyn LlmClient> = Arc::new(FakeLlm::new());
    let rt = InProcessRuntime::new(
        stores,
        agent.clone(),
        llm,
        Arc::new(clock.clone()),
        FakeServices::new(),
        RuntimeConfig::default(),
    );
    let mut report = ScenarioReport {
        name: scenario.name.clone(),
        file: scenario.file.display().to_string(),
        passed: true,
        error: None,
        steps: Vec::new(),
    };
    let load_id = scenario.load.load_id.clone();
    let registration = InboundEvent {
        event_id: registration_event_id(&load_id),
        load_id: load_id.clone(),
        occurred_at: scenario.start,
        kind: EventKind::LoadRegistered { load: scenario.load.clone() },
    };
    if let Err(e) = rt.publish(registration).await {
        report.passed = false;
        report.error = Some(format!("registration: {e}"));
        return report;
    }
    match rt.settle(scenario.start).await {
        Ok(s) if !s.invalid.is_empty() || !s.given_back.is_empty() => {
            report.passed = false;
            report.error = Some(format!("registration refused: {}", settle_problems(&s).join("; ")));
            return report;
        }
        Ok(_) => {}
        Err(e) => {
            report.passed = false;
            report.error = Some(format!("registration: {e}"));
            return report;
        }
    }
    let mut published: HashMap<String, InboundEvent> = HashMap::new();
    for (index, step) in scenario.steps.iter().enumerate() {
        let r = run_step(&rt, &clock, &load_id, index, step, &mut published).await;
        if !r.passed {
            report.passed = false;
        }
        report.steps.push(r);
    }
    report
}

fn settle_problems(s: &crate::harness::SettleReport) -> Vec<String> {
    let mut out = Vec::new();
    for (id, why) in &s.invalid {
        out.push(format!("event {id} was refused as invalid: {why}"));
    }
    for (id, why) in &s.given_back {
        out.push(format!("the run for {id} gave up: {why}"));
    }
    out
}

async fn run_step(
    rt: &InProcessRuntime,
    clock: &FakeClock,
    load_id: &str,
    index: usize,
    step: &Step,
    published: &mut HashMap<String, InboundEvent>,
) -> StepReport {
    let mut failures = Vec::new();
    let before = match rt.events.read(load_id).await {
        Ok((_, v)) => v,
        Err(e) => {
            return step_report(index, step, vec![format!("store: {e}")], vec![]);
        }
    };
    // 1. The clock is set to `at`; faults apply from this step on.
    clock.set(step.at);
    rt.fakes.apply_faults(&step.faults);
    let now = clock.now();
    // 2. Due timers are pumped, then the step's event is published.
    if let Err(e) = rt.pump.pump_once(now).await {
        failures.push(format!("timer pump: {e}"));
    }
    if let Some(ev) = &step.event {
        let event = match ev {
            StepEvent::New { id, kind, occurred_at } => {
                let e = InboundEvent {
                    event_id: id.clone(),
                    load_id: load_id.to_string(),
                    occurred_at: *occurred_at,
                    kind: kind.clone(),
                };
                published.insert(id.clone(), e.clone());
                Some(e)
            }
            StepEvent::Redeliver { of, .. } => published.get(of).cloned(),
        };
        match event {
            Some(e) => {
                if let Err(err) = rt.publish(e).await {
                    failures.push(format!("publishing the event: {err}"));
                }
            }
            None => failures.push(format!("redeliver: event {} was never published", ev.id())),
        }
    }
    // 3. Until nothing is left: queue, relay, pump.
    match rt.settle(now).await {
        Ok(s) => failures.extend(settle_problems(&s)),
        Err(e) => failures.push(e.to_string()),
    }
    let decisions: Vec<_> = match rt.events.read_since(load_id, before).await {
        Ok((entries, _)) => entries
            .into_iter()
            .filter_map(|e| match e {
                LogEntry::Decision(d) => Some(d),
                LogEntry::Event(_) => None,
            })
            .collect(),
        Err(e) => {
            failures.push(format!("store: {e}"));
            Vec::new()
        }
    };
    if let Some(expect) = &step.expect {
        failures.extend(check::check_expect(expect, &decisions));
    }
    if let Some(want) = &step.state {
        match rt.snapshots.snapshot(load_id).await {
            Ok(state) => failures.extend(check::check_state(want, &state)),
            Err(e) => failures.push(format!("store: {e}")),
        }
    }
    step_report(index, step, failures, decisions.iter().map(DecisionReport::from_record).collect())
}

fn step_report(
    index: usize,
    step: &Step,
    failures: Vec<String>,
    decisions: Vec<DecisionReport>,
) -> StepReport {
    StepReport {
        index,
        at: report::utc(step.at),
        event_id: step.event.as_ref().map(|e| e.id().to_string()),
        passed: failures.is_empty(),
        failures,
        decisions,
    }
}
