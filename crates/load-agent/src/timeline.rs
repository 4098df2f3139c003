//! A load's timeline for people (`load-agent inspect`, `GET /loads/{id}`, the demo): events,
//! decisions with their path and rationale, actions with their delivery status, asks over time.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use load_agent_domain::{ActionBody, EventKind, LoadState, LogEntry, OutcomeStatus, project_state};
use load_agent_store::{OutboxRowView, Stores};
use serde::Serialize;

/// The timeline (or its JSON) of a load; `None` when the load has no log.
pub async fn inspect_text(
    stores: &Stores,
    load_id: &str,
    at: Option<u64>,
    json: bool,
) -> Result<Option<String>, load_agent_store::StoreError> {
    let (entries, _) = stores.events.read(load_id).await?;
    if entries.is_empty() {
        return Ok(None);
    }
    let rows = stores.outbox.rows_for_load(load_id).await?;
    Ok(Some(log_text(load_id, &entries, &rows, at, json)))
}

/// The timeline (or its JSON) of a load's log and its outbox rows: what `inspect` prints, from
/// the live log or from an archive (which holds no outbox rows).
pub fn log_text(
    load_id: &str,
    entries: &[LogEntry],
    rows: &[OutboxRowView],
    at: Option<u64>,
    json: bool,
) -> String {
    let view = view(load_id, entries, at, rows);
    if json {
        let mut s = serde_json::to_string_pretty(&view).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        s.push('\n');
        s
    } else {
        render(&view)
    }
}

/// What `inspect --json` and `GET /loads/{id}` return.
#[derive(Debug, Serialize)]
pub struct LoadView<'a> {
    pub load_id: &'a str,
    /// The version shown (the whole log unless `--at`).
    pub version: u64,
    pub latest_version: u64,
    pub state: LoadState,
    pub entries: &'a [LogEntry],
    pub actions: Vec<ActionStatus>,
}

/// The delivery status of one action (an outbox row).
#[derive(Debug, Clone, Serialize)]
pub struct ActionStatus {
    pub key: String,
    pub kind: &'static str,
    pub destination: &'static str,
    pub load_version: u64,
    pub status: &'static str,
    pub attempts: u32,
    pub last_failure: Option<String>,
    pub receipt: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub dispatched_at: Option<chrono::DateTime<chrono::Utc>>,
    pub dead_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl From<&OutboxRowView> for ActionStatus {
    fn from(r: &OutboxRowView) -> Self {
        ActionStatus {
            key: r.id.clone(),
            kind: r.action.kind().as_str(),
            destination: r.destination.as_str(),
            load_version: r.load_version,
            status: r.status.as_str(),
            attempts: r.attempts,
            last_failure: r.last_failure.clone(),
            receipt: r.receipt.clone(),
            created_at: r.created_at,
            dispatched_at: r.dispatched_at,
            dead_at: r.dead_at,
        }
    }
}

pub fn view<'a>(
    load_id: &'a str,
    log: &'a [LogEntry],
    at: Option<u64>,
    rows: &'a [OutboxRowView],
) -> LoadView<'a> {
    let n = at.map_or(log.len(), |v| (v as usize).min(log.len()));
    let entries = &log[..n];
    LoadView {
        load_id,
        version: n as u64,
        latest_version: log.len() as u64,
        state: project_state(load_id, entries),
        entries,
        actions: rows.iter().filter(|r| r.load_version <= n as u64).map(ActionStatus::from).collect(),
    }
}

/// A time as the timeline and the console show it.
pub fn short_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%SZ").to_string()
}

fn clip(s: &str, n: usize) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() <= n {
        one_line
    } else {
        let cut: String = one_line.chars().take(n).collect();
        format!("{cut}…")
    }
}

/// One line describing an event.
pub fn describe_event(kind: &EventKind) -> String {
    match kind {
        EventKind::LoadRegistered { load } => format!(
            "load_registered client {} v{} ({} stops, {} contacts{})",
            load.client,
            load.sop_version.unwrap_or(0),
            load.stops.len(),
            load.contacts.len(),
            if load.reefer.is_some() { ", reefer" } else { "" }
        ),
        EventKind::Sms { from, text } => format!("sms from {from}: \"{}\"", clip(text, 70)),
        EventKind::Email { from, subject, text, .. } => {
            format!("email from {from} [{}]: \"{}\"", clip(subject, 30), clip(text, 60))
        }
        EventKind::Slack { from, text } => format!("slack from {from}: \"{}\"", clip(text, 70)),
        EventKind::Ping { stop, delay_risk, .. } => {
            format!("ping stop {stop} delay risk {}", delay_risk.as_str())
        }
        EventKind::TimerFired { ask_id, attempt, .. } => {
            format!("timer fired for {ask_id} attempt {attempt}")
        }
        EventKind::Attachment { from, filename, .. } => format!("attachment {filename} from {from}"),
        EventKind::StopStatus { stop, status, .. } => format!("stop {stop} {}", status.as_str()),
        EventKind::ActionOutcome { idempotency_key, status, .. } => {
            format!("outcome {} for {idempotency_key}", status.as_str())
        }
    }
}

/// One line describing an action.
pub fn describe_action(body: &ActionBody) -> String {
    match body {
        ActionBody::SendSms { to, body } => format!("send_sms to {to}: \"{}\"", clip(body, 70)),
        ActionBody::SendEmail { to, subject, thread, .. } => {
            format!("send_email to {to} ({} thread): \"{}\"", thread.as_str(), clip(subject, 60))
        }
        ActionBody::PostSlack { text, .. } => format!("post_slack: \"{}\"", clip(text, 70)),
        ActionBody::TmsNote { text } => format!("tms_note: \"{}\"", clip(text, 70)),
        ActionBody::SetTimer { fire_at, .. } => format!("set_timer at {}", short_time(*fire_at)),
        ActionBody::CancelTimer { timer_id } => format!("cancel_timer {timer_id}"),
        ActionBody::CreateHeroTask { title, urgent, .. } => {
            format!("create_hero_task{}: \"{}\"", if *urgent { " URGENT" } else { "" }, clip(title, 70))
        }
        ActionBody::UpdateStage { stage, current_stop } => {
            format!("update_stage {} (stop {current_stop})", stage.as_str())
        }
        ActionBody::Noop { .. } => "noop".to_string(),
    }
}

/// Per action key, the furthest a success got: `delivered` (a delivery service confirmed it)
/// over `published` (the broker has the command).
fn confirmed_outcomes(entries: &[LogEntry]) -> BTreeMap<&str, OutcomeStatus> {
    let mut out: BTreeMap<&str, OutcomeStatus> = BTreeMap::new();
    for entry in entries {
        if let LogEntry::Event(e) = entry
            && let EventKind::ActionOutcome { idempotency_key, status, .. } = &e.kind
            && matches!(status, OutcomeStatus::Published | OutcomeStatus::Delivered)
        {
            let seen = out.entry(idempotency_key.as_str()).or_insert(*status);
            if *status == OutcomeStatus::Delivered {
                *seen = OutcomeStatus::Delivered;
            }
        }
    }
    out
}

/// The readable timeline.
pub fn render(view: &LoadView<'_>) -> String {
    let mut out = String::new();
    let status: BTreeMap<&str, &ActionStatus> = view.actions.iter().map(|r| (r.key.as_str(), r)).collect();
    let s = &view.state;
    let _ = writeln!(
        out,
        "load {} — version {}{}",
        view.load_id,
        view.version,
        if view.version < view.latest_version {
            format!(" of {}", view.latest_version)
        } else {
            String::new()
        }
    );
    // Published and delivered outcomes show as the action's status (`published`: the broker has
    // the command; `delivered`: the delivery service confirmed it); their events and filtered
    // decisions are left out of the text (the JSON view keeps every entry).
    let outcomes = confirmed_outcomes(view.entries);
    let mut skip_decision = false;
    let (mut published, mut delivered) = (0usize, 0usize);
    for entry in view.entries {
        match entry {
            LogEntry::Event(e)
                if matches!(
                    e.kind,
                    EventKind::ActionOutcome {
                        status: OutcomeStatus::Published | OutcomeStatus::Delivered,
                        ..
                    }
                ) =>
            {
                if matches!(e.kind, EventKind::ActionOutcome { status: OutcomeStatus::Published, .. }) {
                    published += 1;
                } else {
                    delivered += 1;
                }
                skip_decision = true;
            }
            LogEntry::Decision(_) if skip_decision => skip_decision = false,
            LogEntry::Event(e) => {
                let _ = writeln!(out, "  {}  {}", short_time(e.occurred_at), describe_event(&e.kind));
            }
            LogEntry::Decision(d) => {
                let intent = d
                    .intent
                    .as_ref()
                    .map(|i| format!(" intent {} {:.2}", i.intent, i.probability))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "      decision [{}]{intent}: {}",
                    d.path.as_str(),
                    clip(&d.rationale, 110)
                );
                for t in &d.transitions {
                    let step = t.step().map(|s| format!(" step {s}")).unwrap_or_default();
                    let _ = writeln!(out, "        {} {}{step}", t.kind_str(), t.ask_id());
                }
                for a in d.effective_actions() {
                    let delivery = match status.get(a.key.as_str()) {
                        Some(r) => {
                            let mut s = r.status.to_string();
                            if r.attempts > 1 {
                                s.push_str(&format!(", {} attempts", r.attempts));
                            }
                            if let Some(f) = &r.last_failure
                                && r.status != "dispatched"
                            {
                                s.push_str(&format!(": {}", clip(f, 50)));
                            }
                            if let Some(outcome) = outcomes.get(a.key.as_str()) {
                                s.push_str(&format!(", {}", outcome.as_str()));
                            }
                            s
                        }
                        None => "not in outbox".to_string(),
                    };
                    let attempt =
                        a.ask.as_ref().map(|s| format!(" (attempt {})", s.attempt)).unwrap_or_default();
                    let _ = writeln!(out, "        → {}{attempt}  [{delivery}]", describe_action(&a.body));
                }
            }
        }
    }
    if published + delivered > 0 {
        let _ = writeln!(out, "  ({published} published and {delivered} delivered outcomes not shown)");
    }
    let _ = writeln!(
        out,
        "  state: stage {}, current stop {}, {} open ask(s), {} decision(s), LLM cost ${:.4}",
        s.tracking.stage.as_str(),
        s.tracking.current_stop,
        s.open_asks.len(),
        s.decisions,
        s.llm_cost_usd
    );
    for a in &s.open_asks {
        let timer = a
            .next_timer
            .as_ref()
            .map(|t| format!(", next timer {}", short_time(t.fire_at)))
            .unwrap_or_else(|| ", no timer".into());
        let _ = writeln!(
            out,
            "    open {} to {} about stop {}: attempts {}/{}, escalations {}{timer}",
            a.id,
            a.target_contact,
            a.stop_sequence.map_or("-".into(), |s| s.to_string()),
            a.attempts,
            a.max_attempts,
            a.escalations_done
        );
    }
    if !s.sms_blocked.is_empty() {
        let blocked: Vec<String> = s.sms_blocked.iter().map(|(c, r)| format!("{c} ({r})")).collect();
        let _ = writeln!(out, "    no SMS to: {}", blocked.join(", "));
    }
    out
}
