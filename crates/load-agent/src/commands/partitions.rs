//! `load-agent partitions ensure|list` (docs/operations.md, "Partitions and retention"): make
//! the Postgres partitions ahead by hand (the service does it at start and every
//! `lifecycle.check_secs`), and list every partition with its bounds and size.
//!
//! Exit codes: 0 done (nothing to do on SQLite, which is not partitioned); 1 the database
//! refused; 2 bad input.

use chrono::Utc;
use clap::{Args, Subcommand};

use crate::commands::store_cmds::with_store;
use crate::config::Settings;
use crate::error::{CliError, OrExit};

#[derive(Debug, Subcommand)]
pub enum PartitionsCommand {
    /// Makes the partitions of this month and day and of the months and days ahead
    /// (`lifecycle.months_ahead`, `lifecycle.days_ahead`) that do not exist yet, retires the
    /// outbox's delivered days before yesterday (`outbox_retired`), analyzes the partitions whose
    /// statistics say empty while they filled, and prints what it did.
    Ensure(EnsureArgs),
    /// Lists every partition of the log, the outbox and the timers: bounds, rows (estimated), size.
    List,
}

#[derive(Debug, Args)]
pub struct EnsureArgs {
    /// Months ahead, instead of `lifecycle.months_ahead`.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=24))]
    pub months_ahead: Option<u32>,
    /// Days ahead, instead of `lifecycle.days_ahead`.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=90))]
    pub days_ahead: Option<u32>,
}

pub fn run(settings: &Settings, command: PartitionsCommand) -> Result<(), CliError> {
    with_store(settings, |stores| async move {
        if !stores.lifecycle.partitioned() {
            println!("{} is not partitioned (SQLite): nothing to do", settings.database.url.masked());
            return Ok(());
        }
        match command {
            PartitionsCommand::Ensure(args) => {
                let mut plan = settings.lifecycle.plan();
                plan.months_ahead = args.months_ahead.unwrap_or(plan.months_ahead);
                plan.days_ahead = args.days_ahead.unwrap_or(plan.days_ahead);
                let made = stores
                    .lifecycle
                    .ensure_partitions(Utc::now(), &plan)
                    .await
                    .or_fail("load-agent partitions ensure")?;
                for name in &made {
                    println!("made {name}");
                }
                let retired = stores
                    .lifecycle
                    .retire_outbox_days(Utc::now())
                    .await
                    .or_fail("load-agent partitions ensure (retiring outbox days)")?;
                for name in &retired {
                    println!("retired {name}");
                }
                let analyzed = stores
                    .lifecycle
                    .analyze_filled_partitions()
                    .await
                    .or_fail("load-agent partitions ensure (analyzing filled partitions)")?;
                for name in &analyzed {
                    println!("analyzed {name} (its statistics said empty)");
                }
                println!(
                    "{} partitions made, {} outbox days retired; {} months and {} days ahead are present",
                    made.len(),
                    retired.len(),
                    plan.months_ahead,
                    plan.days_ahead
                );
            }
            PartitionsCommand::List => {
                let parts = stores.lifecycle.partitions().await.or_fail("load-agent partitions list")?;
                println!("{:<14} {:<24} {:>12} {:>12}  bounds", "table", "partition", "rows (est.)", "bytes");
                for p in parts {
                    println!(
                        "{:<14} {:<24} {:>12} {:>12}  {}",
                        p.table,
                        p.name,
                        p.rows_estimate.max(0),
                        p.bytes,
                        p.bounds
                    );
                }
            }
        }
        Ok(())
    })
}

/// How often the service looks for partitions analyzed while empty that have filled since
/// ([`load_agent_store::Lifecycle::analyze_filled_partitions`]): the day's outbox partition and
/// the month's log partition fill from midnight on, and until they are analyzed again a plan made
/// from "empty" statistics reads them by a sequential scan.
const FILLED_PARTITIONS_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Makes the store's partitions ahead (`lifecycle.*`, docs/operations.md) and retires the
/// outbox's delivered days before yesterday, now and every `every`, and analyzes the partitions
/// whose statistics say empty while they filled, every minute:
/// a failure is logged and counted (`load_agent_partition_failures_total`) and tried again at the
/// next run; with the default plan a day of failures still leaves no row without its partition
/// (and a row without one waits in the default partition, never refused; a day not retired
/// stays in the live outbox, only costing its appends and claims a little). No-op on SQLite.
pub async fn keep_partitions(
    stores: load_agent_store::Stores,
    plan: load_agent_store::PartitionPlan,
    every: std::time::Duration,
    mut shutdown: load_agent_runtime::Shutdown,
) {
    if !stores.lifecycle.partitioned() {
        return;
    }
    let mut next_ensure = tokio::time::Instant::now();
    loop {
        let now = tokio::time::Instant::now();
        if now >= next_ensure {
            next_ensure = now + every;
            ensure_and_retire(&stores, &plan).await;
        }
        match stores.lifecycle.analyze_filled_partitions().await {
            Ok(analyzed) if analyzed.is_empty() => {}
            Ok(analyzed) => {
                tracing::info!(partitions = ?analyzed, "analyzed partitions whose statistics said empty")
            }
            Err(e) => {
                metrics::counter!(crate::telemetry::PARTITION_FAILURES_TOTAL).increment(1);
                tracing::warn!(error = %e, "analyzing filled partitions failed; trying again at the next run");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(FILLED_PARTITIONS_EVERY.min(every)) => {}
            _ = shutdown.recv() => return,
        }
    }
}

/// One run of `ensure` and of the outbox days' retirement, each failure logged and counted.
async fn ensure_and_retire(stores: &load_agent_store::Stores, plan: &load_agent_store::PartitionPlan) {
    match stores.lifecycle.ensure_partitions(Utc::now(), plan).await {
        Ok(made) if made.is_empty() => tracing::debug!("partitions ahead: all present"),
        Ok(made) => tracing::info!(partitions = ?made, "made partitions ahead"),
        Err(e) => {
            metrics::counter!(crate::telemetry::PARTITION_FAILURES_TOTAL).increment(1);
            tracing::warn!(error = %e, "making partitions ahead failed; trying again at the next run");
        }
    }
    match stores.lifecycle.retire_outbox_days(Utc::now()).await {
        Ok(retired) if retired.is_empty() => {}
        Ok(retired) => tracing::info!(partitions = ?retired, "retired delivered outbox days"),
        Err(e) => {
            metrics::counter!(crate::telemetry::PARTITION_FAILURES_TOTAL).increment(1);
            tracing::warn!(error = %e, "retiring outbox days failed; trying again at the next run");
        }
    }
}
