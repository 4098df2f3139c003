//! `load-agent retention run [--dry-run]` and the service's retention job (docs/operations.md,
//! "Retention"): partitions past their window are dropped whole, the default partitions' expired
//! rows deleted in batches; a log month goes only after its archive, at
//! `<lifecycle.archive_to>/YYYY-MM`, was written and verified against the database, and the store
//! checks under lock that the month holds exactly what the archive holds.
//!
//! Exit codes: 0 done (a partition kept for a reason, such as pending rows, is not a failure);
//! 1 a step failed (an archive that does not verify, a refused drop, the database); 2 bad input.

use chrono::{DateTime, Datelike, Utc};
use clap::Args;
use load_agent_archive::{
    Archive, ArchiveError, ArchiveLocation, ExportOptions, Month, Selection, export, select_loads,
};
use load_agent_store::{ExpiredPartition, PartitionedTable, RetentionWindows, StoreError, Stores, expired};

use crate::commands::store_cmds::with_store;
use crate::config::Settings;
use crate::error::CliError;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Print what would be archived, dropped and deleted; change nothing, write no archive.
    #[arg(long)]
    pub dry_run: bool,
}

/// What happened to one partition or one kind of row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub what: String,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done (or, in a dry run, would be done): what it did.
    Done(String),
    /// Left for a later run, and why (pending rows, no archive location): not a failure.
    Kept(String),
    /// A step that failed: the run exits 1.
    Failed(String),
}

/// The steps of one retention run, in order.
#[derive(Debug, Clone, Default)]
pub struct RetentionReport {
    pub steps: Vec<Step>,
}

impl RetentionReport {
    pub fn failed(&self) -> bool {
        self.steps.iter().any(|s| matches!(s.outcome, Outcome::Failed(_)))
    }

    fn push(&mut self, what: impl Into<String>, outcome: Outcome) {
        self.steps.push(Step { what: what.into(), outcome });
    }
}

/// What a run needs from the settings.
#[derive(Debug, Clone)]
pub struct RetentionConfig {
    pub windows: RetentionWindows,
    /// `lifecycle.archive_to`; empty keeps every log month.
    pub archive_to: String,
    pub dry_run: bool,
}

impl RetentionConfig {
    pub fn from_settings(settings: &Settings, dry_run: bool) -> Self {
        RetentionConfig {
            windows: settings.lifecycle.windows(),
            archive_to: settings.lifecycle.archive_to.clone(),
            dry_run,
        }
    }
}

/// One retention run at `now`, under the store's retention lock: when another run holds it (a
/// second worker's job, or a run by hand), this one does nothing and says so.
pub async fn run_retention(stores: &Stores, config: &RetentionConfig, now: DateTime<Utc>) -> RetentionReport {
    let lock = match stores.lifecycle.try_lock_retention().await {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            let mut report = RetentionReport::default();
            report.push(
                "retention",
                Outcome::Kept("another retention run holds the lock: nothing done".into()),
            );
            return report;
        }
        Err(e) => {
            let mut report = RetentionReport::default();
            report.push("retention lock", Outcome::Failed(e.to_string()));
            return report;
        }
    };
    let report = run_locked(stores, config, now).await;
    lock.release().await;
    report
}

async fn run_locked(stores: &Stores, config: &RetentionConfig, now: DateTime<Utc>) -> RetentionReport {
    let mut report = RetentionReport::default();
    let lifecycle = &stores.lifecycle;
    if lifecycle.partitioned() {
        match lifecycle.partitions().await {
            Ok(parts) => {
                for part in expired(&parts, now, &config.windows) {
                    let outcome = drop_partition(stores, config, &part, now).await;
                    report.push(part.name.clone(), outcome);
                }
            }
            Err(e) => report.push("partitions", Outcome::Failed(e.to_string())),
        }
    } else {
        report.push(
            "log",
            Outcome::Kept("SQLite is not partitioned: the log is kept (archive it by hand)".into()),
        );
    }
    let rows = if lifecycle.partitioned() { "default partitions" } else { "outbox and timers" };
    if config.dry_run {
        report.push(rows, Outcome::Done("would delete the rows past their windows".into()));
    } else {
        match lifecycle.delete_expired_rows(now, &config.windows).await {
            Ok(d) => report.push(
                rows,
                Outcome::Done(format!(
                    "deleted {} outbox row(s) and {} timer(s) past their windows",
                    d.outbox, d.timers
                )),
            ),
            Err(e) => report.push(rows, Outcome::Failed(e.to_string())),
        }
    }
    report
}

async fn drop_partition(
    stores: &Stores,
    config: &RetentionConfig,
    part: &ExpiredPartition,
    now: DateTime<Utc>,
) -> Outcome {
    let lifecycle = &stores.lifecycle;
    let dropped = match part.table {
        PartitionedTable::LogEntries => return drop_log_month(stores, config, part, now).await,
        _ if config.dry_run => return Outcome::Done("would drop it".into()),
        PartitionedTable::Outbox => {
            let keep_dead_since = now - chrono::TimeDelta::days(i64::from(config.windows.dead_days));
            lifecycle.drop_outbox_day(part.first_day, keep_dead_since).await.map(|d| {
                format!("dropped {} row(s); kept {} dead row(s) in outbox_default", d.dropped, d.kept_dead)
            })
        }
        PartitionedTable::Timers => {
            lifecycle.drop_timer_month(part.first_day).await.map(|n| format!("dropped {n} timer(s)"))
        }
    };
    match dropped {
        Ok(done) => Outcome::Done(done),
        // Pending rows or scheduled timers: the next run tries again.
        Err(StoreError::Refused(why)) => Outcome::Kept(why),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// A log month: export it unless its archive exists, verify the archive against the database,
/// then drop the month if the store holds exactly what the archive holds.
async fn drop_log_month(
    stores: &Stores,
    config: &RetentionConfig,
    part: &ExpiredPartition,
    now: DateTime<Utc>,
) -> Outcome {
    if config.archive_to.is_empty() {
        return Outcome::Kept("no archive location (lifecycle.archive_to): log months are kept".into());
    }
    let month = Month { year: part.first_day.year(), month: part.first_day.month() };
    let path = format!("{}/{month}", config.archive_to.trim_end_matches('/'));
    let archived = match archive_and_verify(stores, &path, month, config.dry_run, now).await {
        Ok(Some(archived)) => archived,
        Ok(None) => return Outcome::Done(format!("would archive it to {path}, verify it and drop it")),
        Err(e) => return Outcome::Failed(e),
    };
    match stores.lifecycle.drop_log_month(part.first_day, &archived).await {
        Ok(_) if archived.is_empty() => Outcome::Done("held no load: dropped (nothing to archive)".into()),
        Ok(rows) => Outcome::Done(format!(
            "archived to {path}, verified, dropped {rows} log row(s) of {} load(s)",
            archived.len()
        )),
        Err(e) => Outcome::Failed(format!("archived to {path} and verified, but not dropped: {e}")),
    }
}

/// The loads and last seqs a verified archive of `month` at `path` holds; `None` in a dry run
/// (nothing is written).
async fn archive_and_verify(
    stores: &Stores,
    path: &str,
    month: Month,
    dry_run: bool,
    now: DateTime<Utc>,
) -> Result<Option<Vec<(String, u64)>>, String> {
    let location = match ArchiveLocation::parse(path, !dry_run) {
        Ok(l) => l,
        Err(_) if dry_run => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let archive = match Archive::open(location.clone()).await {
        Ok(a) => a,
        Err(ArchiveError::NoManifest { .. }) if dry_run => return Ok(None),
        Err(ArchiveError::NoManifest { .. }) => {
            let selection = Selection { month: Some(month), load_ids: Vec::new(), closed_only: false };
            let ids = select_loads(stores.events.as_ref(), stores.index.as_ref(), &selection)
                .await
                .map_err(|e| format!("selecting the loads of {month}: {e}"))?;
            if ids.is_empty() {
                // A month made ahead and never used: nothing to archive; the store checks that
                // the partition is indeed empty before it drops it.
                return Ok(Some(Vec::new()));
            }
            let options = ExportOptions::new(selection.to_string(), now);
            export(stores.events.as_ref(), &ids, &location, &options)
                .await
                .map_err(|e| format!("archiving {month} to {path}: {e}"))?;
            Archive::open(location).await.map_err(|e| format!("reading back {path}: {e}"))?
        }
        Err(e) => return Err(format!("{path}: {e}")),
    };
    if dry_run {
        return Ok(None);
    }
    let report =
        archive.verify(Some(stores.events.as_ref())).await.map_err(|e| format!("verifying {path}: {e}"))?;
    if !report.is_ok() {
        let first = report.findings.first().map(ToString::to_string).unwrap_or_default();
        return Err(format!(
            "{path} does not verify against the database ({} finding(s), first: {first}); nothing dropped",
            report.findings.len()
        ));
    }
    load_agent_runtime::crash_point("retention.after_verify");
    Ok(Some(archive.manifest().load_versions()))
}

pub fn run(settings: &Settings, args: RunArgs) -> Result<(), CliError> {
    with_store(settings, |stores| async move {
        let config = RetentionConfig::from_settings(settings, args.dry_run);
        let report = run_retention(&stores, &config, Utc::now()).await;
        print_report(&report, args.dry_run);
        // The failed steps are in the report printed above.
        if report.failed() { Err(CliError::reported()) } else { Ok(()) }
    })
}

pub fn print_report(report: &RetentionReport, dry_run: bool) {
    for step in &report.steps {
        let (tag, text) = match &step.outcome {
            Outcome::Done(t) => (if dry_run { "plan" } else { "done" }, t),
            Outcome::Kept(t) => ("kept", t),
            Outcome::Failed(t) => ("FAILED", t),
        };
        println!("{tag:<6} {}: {text}", step.what);
    }
}

/// The service's retention job: a run every `every` (the first one `every` after start, so a
/// restart loop does not archive in a loop), its steps logged.
pub async fn keep_retention(
    stores: Stores,
    config: RetentionConfig,
    every: std::time::Duration,
    mut shutdown: load_agent_runtime::Shutdown,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.recv() => return,
        }
        let report = run_retention(&stores, &config, Utc::now()).await;
        for step in &report.steps {
            match &step.outcome {
                Outcome::Done(t) => tracing::info!(what = %step.what, "retention: {t}"),
                Outcome::Kept(t) => tracing::debug!(what = %step.what, "retention kept: {t}"),
                Outcome::Failed(t) => {
                    metrics::counter!(crate::telemetry::RETENTION_FAILURES_TOTAL).increment(1);
                    tracing::warn!(what = %step.what, "retention failed: {t}");
                }
            }
        }
    }
}

/// The store's background jobs of every service process: the store gauges every 10 s, the
/// partitions ahead every `lifecycle.check_secs`, retention every `lifecycle.retention_secs`.
pub fn spawn_store_jobs(
    tasks: &mut tokio::task::JoinSet<()>,
    stores: &Stores,
    settings: &Settings,
    shutdown: &load_agent_runtime::Shutdown,
) {
    use std::time::Duration;
    tasks.spawn(crate::telemetry::sample_store_gauges(
        stores.clone(),
        Duration::from_secs(10),
        shutdown.clone(),
    ));
    tasks.spawn(crate::commands::partitions::keep_partitions(
        stores.clone(),
        settings.lifecycle.plan(),
        Duration::from_secs(u64::from(settings.lifecycle.check_secs)),
        shutdown.clone(),
    ));
    if settings.lifecycle.retention_secs > 0 {
        tasks.spawn(keep_retention(
            stores.clone(),
            RetentionConfig::from_settings(settings, false),
            Duration::from_secs(u64::from(settings.lifecycle.retention_secs)),
            shutdown.clone(),
        ));
    }
}
