//! `load-agent dlq list | show | redrive`: the DLQ topic without SQL or a Kafka client
//! (docs/kafka.md, "The DLQ"). Exit codes: 0 done, 1 the broker or the store failed (or a
//! record could not be redriven), 2 a bad argument or configuration.

use std::io::Write;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};

use crate::config::Settings;
use crate::error::{CliError, OrExit};

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Lists the dead letters, oldest first per partition: position, time, load, code, error.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        /// One JSON object per line instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Shows dead letters in full: every header, and the value (as the decoded event when it
    /// decodes, else its first bytes in hex).
    Show {
        /// DLQ positions `PARTITION:OFFSET` (as `list` prints them).
        #[arg(required = true, value_name = "PARTITION:OFFSET")]
        at: Vec<String>,
    },
    /// Publishes the chosen dead letters again on the events topic, each with its original key,
    /// value and headers (no `dlq-*` header); a reduced one from the `dead_letters` table of
    /// `database.url`. Events already in a load's log are recognized and change nothing, so a
    /// second redrive is harmless.
    Redrive {
        #[command(flatten)]
        filter: FilterArgs,
        /// Say what would be redriven; publish nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Which dead letters: all of them unless narrowed.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only this `dlq-error-code` (repeatable): `unknown_load`, `bad_magic`, ...
    #[arg(long = "code")]
    codes: Vec<String>,
    /// Only this load id (the record key; repeatable).
    #[arg(long = "load")]
    loads: Vec<String>,
    /// Only dead letters written at or after this time (RFC 3339).
    #[arg(long, value_parser = parse_time)]
    since: Option<DateTime<Utc>>,
    /// Only dead letters written before this time (RFC 3339).
    #[arg(long, value_parser = parse_time)]
    until: Option<DateTime<Utc>>,
    /// Only these DLQ positions `PARTITION:OFFSET` (repeatable).
    #[arg(long = "at", value_parser = load_agent_kafka::dlq_tool::parse_position)]
    at: Vec<(i32, i64)>,
}

fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{s:?} is not an RFC 3339 time (2026-12-03T06:00:00Z): {e}"))
}

impl FilterArgs {
    fn filter(self) -> load_agent_kafka::dlq_tool::DlqFilter {
        load_agent_kafka::dlq_tool::DlqFilter {
            codes: self.codes,
            loads: self.loads,
            since: self.since,
            until: self.until,
            at: self.at,
        }
    }
}

pub fn run(settings: &Settings, cmd: DlqCommand) -> Result<(), CliError> {
    use load_agent_kafka::dlq_tool::{DlqEntry, DlqFilter, parse_position, read_dlq, redrive};

    if settings.kafka.brokers.is_empty() {
        return Err(CliError::bad_input(
            "load-agent dlq: kafka.brokers is empty (set LOAD_AGENT_KAFKA_BROKERS)",
        ));
    }
    let kafka = settings.kafka_config();
    let rt = crate::commands::store_cmds::runtime()?;
    let read = |filter: DlqFilter| {
        rt.block_on(read_dlq(&kafka, &filter))
            .or_fail(format!("load-agent dlq: reading {} on {}", kafka.dlq_topic, kafka.brokers))
    };
    let mut out = std::io::stdout().lock();
    match cmd {
        DlqCommand::List { filter, json } => {
            let records = read(filter.filter())?;
            for r in &records {
                let e = DlqEntry::of(r);
                let line = if json {
                    serde_json::to_string(&e).unwrap_or_default()
                } else {
                    let time = e.time.map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string()).unwrap_or_default();
                    let reduced = if e.reduced.is_some() { " [reduced]" } else { "" };
                    let error: String = e.error.chars().take(100).collect();
                    format!(
                        "{}\t{time}\t{}\t{}\t{}{reduced}",
                        e.at,
                        e.load.as_deref().unwrap_or("-"),
                        e.code,
                        error.replace(['\n', '\t'], " ")
                    )
                };
                let _ = writeln!(out, "{line}");
            }
            eprintln!("{} dead letters in {}", records.len(), kafka.dlq_topic);
            Ok(())
        }
        DlqCommand::Show { at } => {
            let mut positions = Vec::new();
            for a in &at {
                positions.push(parse_position(a).or_bad_input("load-agent dlq show")?);
            }
            let records = read(DlqFilter { at: positions.clone(), ..DlqFilter::default() })?;
            for r in &records {
                let _ = writeln!(out, "{}", show(r));
            }
            let missing: Vec<String> = positions
                .iter()
                .filter(|(p, o)| !records.iter().any(|r| (r.partition, r.offset) == (*p, *o)))
                .map(|(p, o)| format!("{p}:{o}"))
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(CliError::failed(format!(
                    "load-agent dlq show: no dead letter at {}",
                    missing.join(", ")
                )))
            }
        }
        DlqCommand::Redrive { filter, dry_run } => {
            let records = read(filter.filter())?;
            let reduced = records.iter().any(|r| r.header(load_agent_kafka::dlq::HEADER_BODY).is_some());
            // The store holds the bodies of reduced dead letters only: opened when one is chosen.
            let stores =
                if reduced { Some(rt.block_on(crate::commands::store_cmds::open(settings))?) } else { None };
            let kept = stores.as_ref().map(|s| &*s.dead_letters);
            let report =
                rt.block_on(redrive(&kafka, &records, kept, dry_run)).or_fail("load-agent dlq redrive")?;
            for l in &report.lines {
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}\t{}{}",
                    l.at,
                    l.load.as_deref().unwrap_or("-"),
                    l.code,
                    l.outcome,
                    l.detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default()
                );
            }
            let verb = if dry_run { "would redrive" } else { "redriven" };
            eprintln!(
                "{} chosen, {} {verb} to {}, {} skipped, {} failed",
                report.chosen, report.redriven, kafka.events_topic, report.skipped, report.failed
            );
            // The failed records are in the lines above.
            if report.failed > 0 { Err(CliError::reported()) } else { Ok(()) }
        }
    }
}

/// Every header and the value of one dead letter.
fn show(r: &load_agent_ingest::InboundRecord) -> String {
    let mut s = format!(
        "== {}:{}  key {}\n",
        r.partition,
        r.offset,
        r.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()).unwrap_or_else(|| "-".into())
    );
    for (name, value) in &r.headers {
        s.push_str(&format!("   {name}: {}\n", String::from_utf8_lossy(value)));
    }
    match r.value.as_deref() {
        None => s.push_str("   value: none\n"),
        Some(v) => match load_agent_avro::decode_inbound(v) {
            Ok(event) => {
                let json = serde_json::to_string_pretty(&event).unwrap_or_default();
                s.push_str(&format!("   value ({} bytes, decodes):\n{json}\n", v.len()));
            }
            Err(e) => {
                let head: String = v.iter().take(64).map(|b| format!("{b:02x}")).collect();
                s.push_str(&format!("   value ({} bytes, does not decode: {e}): {head}…\n", v.len()));
            }
        },
    }
    s
}
