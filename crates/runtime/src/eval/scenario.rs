//! The scenario file format of scenarios.md, parsed with `serde_yaml` into typed structs that
//! refuse unknown fields, then checked for what serde cannot see (required fields per event
//! type, ids, step order). Every refusal names the file and, where it can, the line.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, FixedOffset, Utc};
use load_agent_domain::{
    ActionKind, Contact, DocumentFields, EmailThread, Language, LoadRegistered, MessageChannel, Reefer,
    RiskBand, Role, Stage, Stop, StopKind, StopStatusKind,
};
use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use crate::delivery::{FailMode, FaultChange, FaultRule};

/// A scenario file that cannot be used: the file, the line when known, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

// ---------------------------------------------------------------------------------------------
// The file as written.

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: Option<String>,
    load: RawLoad,
    #[serde(deserialize_with = "rfc3339")]
    start: DateTime<FixedOffset>,
    #[serde(default)]
    steps: Vec<RawStep>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    load_id: String,
    client: String,
    #[serde(default)]
    sop_version: Option<u32>,
    #[serde(default)]
    contacts: Vec<RawContact>,
    stops: Vec<RawStop>,
    #[serde(default)]
    reefer: Option<RawReefer>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContact {
    id: String,
    role: Role,
    name: String,
    #[serde(default)]
    phone: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    slack: Option<String>,
    #[serde(default)]
    language: Language,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStop {
    sequence: u32,
    kind: StopKind,
    name: String,
    address: String,
    #[serde(deserialize_with = "rfc3339")]
    appointment: DateTime<FixedOffset>,
    #[serde(default)]
    po_numbers: Vec<String>,
    #[serde(default)]
    reference: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReefer {
    set_point_f: f64,
    tolerance_f: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(deserialize_with = "rfc3339")]
    at: DateTime<FixedOffset>,
    #[serde(default)]
    event: Option<RawEvent>,
    #[serde(default)]
    faults: Vec<RawFault>,
    #[serde(default)]
    expect: Option<Expect>,
    #[serde(default)]
    state: Option<StateCheck>,
}

load_agent_domain::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum RawEventType {
        Ping => "ping",
        Sms => "sms",
        Email => "email",
        Slack => "slack",
        Attachment => "attachment",
        StopStatus => "stop_status",
        Redeliver => "redeliver",
    }
}

/// One flat struct for every event type, so serde reports unknown fields with their line; the
/// fields each type needs are checked afterwards.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    #[serde(rename = "type")]
    kind: RawEventType,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    stop: Option<u32>,
    #[serde(default)]
    delay_risk: Option<RiskBand>,
    #[serde(default, deserialize_with = "rfc3339_opt")]
    recorded_at: Option<DateTime<FixedOffset>>,
    #[serde(default)]
    lat: Option<f64>,
    #[serde(default)]
    lon: Option<f64>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    thread: Option<EmailThread>,
    #[serde(default)]
    channel: Option<MessageChannel>,
    #[serde(default)]
    filename: Option<String>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    extracted: Option<DocumentFields>,
    #[serde(default)]
    status: Option<StopStatusKind>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    of: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    #[serde(default)]
    action: Option<ActionKind>,
    #[serde(default)]
    to: Option<String>,
    #[serde(default)]
    fail: Option<FailMode>,
    #[serde(default)]
    clear: Option<bool>,
}

// ---------------------------------------------------------------------------------------------
// Checks.

/// `expect:` of a step.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// The effective actions of the step, as a multiset.
    Actions(Vec<ExpectedAction>),
    /// At least one decision and none with an effective action.
    Noop,
    /// No decision at all.
    Duplicate,
}

impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Expect;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`noop`, `duplicate`, or a list of expected actions")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Expect, E> {
                match v {
                    "noop" => Ok(Expect::Noop),
                    "duplicate" => Ok(Expect::Duplicate),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Expect, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<ExpectedAction>()? {
                    items.push(item);
                }
                Ok(Expect::Actions(items))
            }
        }
        d.deserialize_any(V)
    }
}

/// One item of an `expect:` list; it matches an action when every field it gives is equal.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedAction {
    #[serde(default)]
    pub action: Option<ActionKind>,
    #[serde(default)]
    pub to: Option<String>,
    /// The ask type (`eta_request`, `reefer_temp`).
    #[serde(default)]
    pub ask: Option<String>,
    #[serde(default)]
    pub attempt: Option<u32>,
    #[serde(default)]
    pub urgent: Option<bool>,
    #[serde(default)]
    pub thread: Option<EmailThread>,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default, deserialize_with = "rfc3339_opt")]
    pub fire_at: Option<DateTime<FixedOffset>>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub body_contains: Vec<String>,
}

fn parse_time<E: de::Error>(s: &str) -> Result<DateTime<FixedOffset>, E> {
    DateTime::parse_from_rfc3339(s.trim()).map_err(|e| {
        E::custom(format!(
            "{s:?} is not an RFC 3339 time with an offset, like 2026-03-02T07:00:00-06:00 ({e})"
        ))
    })
}

fn rfc3339<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<FixedOffset>, D::Error> {
    let s = String::deserialize(d)?;
    parse_time(&s)
}

fn rfc3339_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<FixedOffset>>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(s) => parse_time(&s).map(Some),
        None => Ok(None),
    }
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or a list of strings")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(s) = seq.next_element::<String>()? {
                out.push(s);
            }
            Ok(out)
        }
    }
    d.deserialize_any(V)
}

impl fmt::Display for ExpectedAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(a) = self.action {
            parts.push(format!("action: {}", a.as_str()));
        }
        if let Some(v) = &self.to {
            parts.push(format!("to: {v}"));
        }
        if let Some(v) = &self.ask {
            parts.push(format!("ask: {v}"));
        }
        if let Some(v) = self.attempt {
            parts.push(format!("attempt: {v}"));
        }
        if let Some(v) = self.urgent {
            parts.push(format!("urgent: {v}"));
        }
        if let Some(v) = self.thread {
            parts.push(format!("thread: {}", v.as_str()));
        }
        if let Some(v) = &self.key {
            parts.push(format!("key: {v}"));
        }
        if let Some(v) = self.fire_at {
            parts.push(format!("fire_at: {}", super::report::utc(v.with_timezone(&Utc))));
        }
        if !self.body_contains.is_empty() {
            parts.push(format!("body_contains: {:?}", self.body_contains));
        }
        write!(f, "{{{}}}", parts.join(", "))
    }
}

/// `state:` of a step, checked after it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateCheck {
    #[serde(default)]
    pub stage: Option<Stage>,
    #[serde(default)]
    pub current_stop: Option<u32>,
    #[serde(default)]
    pub open_asks: Option<Vec<ExpectedAsk>>,
    #[serde(default)]
    pub sms_blocked: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedAsk {
    #[serde(default, rename = "type")]
    pub ask_type: Option<String>,
    #[serde(default)]
    pub stop: Option<u32>,
    #[serde(default)]
    pub attempts: Option<u32>,
    #[serde(default)]
    pub escalations_done: Option<u32>,
}

impl fmt::Display for ExpectedAsk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(v) = &self.ask_type {
            parts.push(format!("type: {v}"));
        }
        if let Some(v) = self.stop {
            parts.push(format!("stop: {v}"));
        }
        if let Some(v) = self.attempts {
            parts.push(format!("attempts: {v}"));
        }
        if let Some(v) = self.escalations_done {
            parts.push(format!("escalations_done: {v}"));
        }
        write!(f, "{{{}}}", parts.join(", "))
    }
}

// ---------------------------------------------------------------------------------------------
// The checked scenario.

/// A scenario ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: Option<String>,
    pub file: PathBuf,
    pub load: LoadRegistered,
    pub start: DateTime<Utc>,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub at: DateTime<Utc>,
    pub event: Option<StepEvent>,
    pub faults: Vec<FaultChange>,
    pub expect: Option<Expect>,
    pub state: Option<StateCheck>,
    /// The line of the step in its file, when found.
    pub line: Option<usize>,
}

/// The event a step publishes.
#[derive(Debug, Clone, PartialEq)]
pub enum StepEvent {
    New {
        id: String,
        kind: load_agent_domain::EventKind,
        occurred_at: DateTime<Utc>,
    },
    /// The earlier event with id `of`, published again unchanged (its record still carries `of`
    /// as its event id). `step_id` is the step's own id when the scenario gives one: every event
    /// of a scenario has a unique id (scenarios.md), and a later `redeliver` may name it in `of`.
    Redeliver {
        of: String,
        step_id: Option<String>,
    },
}

impl StepEvent {
    /// The event id on the wire: a redelivery carries the original event's id.
    pub fn id(&self) -> &str {
        match self {
            StepEvent::New { id, .. } => id,
            StepEvent::Redeliver { of, .. } => of,
        }
    }

    /// The id this step reserves among the scenario's ids.
    fn step_id(&self) -> Option<&str> {
        match self {
            StepEvent::New { id, .. } => Some(id),
            StepEvent::Redeliver { step_id, .. } => step_id.as_deref(),
        }
    }
}

/// Reads and checks one scenario file.
pub fn load_scenario(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: path.to_path_buf(),
        line: None,
        message: format!("cannot read the file: {e}"),
    })?;
    parse_scenario(path, &text)
}

/// Parses and checks a scenario from its text; `path` names it in errors.
pub fn parse_scenario(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let err =
        |line: Option<usize>, message: String| ScenarioError { file: path.to_path_buf(), line, message };
    let raw: RawScenario = serde_yaml::from_str(text).map_err(|e| {
        let line = e.location().map(|l| l.line());
        // serde_yaml's message ends with " at line L column C"; the line is given separately.
        let msg = e.to_string();
        let msg = match msg.find(" at line ") {
            Some(i) if line.is_some() => msg[..i].to_string(),
            _ => msg,
        };
        err(line, msg)
    })?;
    let step_lines = step_lines(text);
    let line_of_step = |i: usize| step_lines.get(i).copied();
    let line_of = |needle: &str| find_line(text, needle);

    if raw.name.trim().is_empty() {
        return Err(err(line_of("name:"), "name is empty".into()));
    }
    let load = LoadRegistered {
        load_id: raw.load.load_id.clone(),
        client: raw.load.client.clone(),
        sop_version: raw.load.sop_version,
        contacts: raw
            .load
            .contacts
            .iter()
            .map(|c| Contact {
                id: c.id.clone(),
                role: c.role,
                name: c.name.clone(),
                phone: c.phone.clone(),
                email: c.email.clone(),
                slack: c.slack.clone(),
                language: c.language,
            })
            .collect(),
        stops: raw
            .load
            .stops
            .iter()
            .map(|s| Stop {
                sequence: s.sequence,
                kind: s.kind,
                name: s.name.clone(),
                address: s.address.clone(),
                appointment: s.appointment,
                po_numbers: s.po_numbers.clone(),
                reference: s.reference.clone(),
            })
            .collect(),
        reefer: raw
            .load
            .reefer
            .as_ref()
            .map(|r| Reefer { set_point_f: r.set_point_f, tolerance_f: r.tolerance_f }),
    };
    load.validate().map_err(|e| err(line_of("load:"), format!("load: {e}")))?;
    let contact_ids: BTreeSet<&str> = load.contacts.iter().map(|c| c.id.as_str()).collect();
    let start = raw.start.with_timezone(&Utc);

    let mut steps = Vec::with_capacity(raw.steps.len());
    // Every id a step has used: its step index and the id of the event it publishes (a
    // redelivery's own id stands for the original event).
    let mut ids: HashMap<String, (usize, String)> = HashMap::new();
    let mut prev_at = start;
    for (i, s) in raw.steps.iter().enumerate() {
        let line = line_of_step(i);
        let at = s.at.with_timezone(&Utc);
        let serr = |m: String| err(line, format!("steps[{i}]: {m}"));
        if at < prev_at {
            return Err(serr(format!(
                "at {} is earlier than the previous step (or start) at {}; steps go forward in time",
                s.at.to_rfc3339(),
                prev_at.to_rfc3339()
            )));
        }
        prev_at = at;
        let event = match &s.event {
            None => None,
            Some(e) => Some(build_event(e, at, &ids).map_err(|m| serr(format!("event: {m}")))?),
        };
        if let Some(ev) = &event
            && let Some(id) = ev.step_id()
            && let Some((first, _)) = ids.insert(id.to_owned(), (i, ev.id().to_owned()))
        {
            return Err(serr(format!("event id {id:?} is already used by steps[{first}]; ids are unique")));
        }
        let mut faults = Vec::new();
        for (j, f) in s.faults.iter().enumerate() {
            faults.push(build_fault(f).map_err(|m| serr(format!("faults[{j}]: {m}")))?);
        }
        if let Some(Expect::Actions(items)) = &s.expect {
            for (j, item) in items.iter().enumerate() {
                if let Some(to) = &item.to
                    && !contact_ids.contains(to.as_str())
                {
                    return Err(serr(format!("expect[{j}].to: {to:?} is not a contact id of the load")));
                }
            }
        }
        if let Some(state) = &s.state
            && let Some(blocked) = &state.sms_blocked
        {
            for c in blocked {
                if !contact_ids.contains(c.as_str()) {
                    return Err(serr(format!("state.sms_blocked: {c:?} is not a contact id of the load")));
                }
            }
        }
        for (j, f) in s.faults.iter().enumerate() {
            if let Some(to) = &f.to
                && !contact_ids.contains(to.as_str())
            {
                return Err(serr(format!("faults[{j}].to: {to:?} is not a contact id of the load")));
            }
        }
        steps.push(Step { at, event, faults, expect: s.expect.clone(), state: s.state.clone(), line });
    }
    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        file: path.to_path_buf(),
        load,
        start,
        steps,
    })
}

fn build_fault(f: &RawFault) -> Result<FaultChange, String> {
    match (f.clear, f.fail) {
        (Some(true), None) if f.action.is_none() && f.to.is_none() => Ok(FaultChange::Clear),
        (Some(true), _) => Err("`clear: true` stands alone".into()),
        (Some(false), _) => Err("`clear` can only be `true`".into()),
        (None, Some(fail)) => Ok(FaultChange::Add(FaultRule { action: f.action, to: f.to.clone(), fail })),
        (None, None) => Err("a fault needs `fail: permanent|retryable` (or is `{clear: true}`)".into()),
    }
}

fn build_event(
    e: &RawEvent,
    at: DateTime<Utc>,
    earlier: &HashMap<String, (usize, String)>,
) -> Result<StepEvent, String> {
    use load_agent_domain::EventKind;
    let ty = e.kind.as_str();
    let need = |field: &str, v: bool| if v { Ok(()) } else { Err(format!("a `{ty}` event needs `{field}`")) };
    // Fields a type does not use are refused, so that a typo'd scenario cannot pass by accident.
    let allowed: &[&str] = match e.kind {
        RawEventType::Ping => &["stop", "delay_risk", "recorded_at", "lat", "lon"],
        RawEventType::Sms | RawEventType::Slack => &["from", "text"],
        RawEventType::Email => &["from", "subject", "text", "thread"],
        RawEventType::Attachment => &["from", "channel", "filename", "content_type", "extracted"],
        RawEventType::StopStatus => &["stop", "status", "source"],
        RawEventType::Redeliver => &["of"],
    };
    let present: [(&str, bool); 17] = [
        ("stop", e.stop.is_some()),
        ("delay_risk", e.delay_risk.is_some()),
        ("recorded_at", e.recorded_at.is_some()),
        ("lat", e.lat.is_some()),
        ("lon", e.lon.is_some()),
        ("from", e.from.is_some()),
        ("text", e.text.is_some()),
        ("subject", e.subject.is_some()),
        ("thread", e.thread.is_some()),
        ("channel", e.channel.is_some()),
        ("filename", e.filename.is_some()),
        ("content_type", e.content_type.is_some()),
        ("extracted", e.extracted.is_some()),
        ("status", e.status.is_some()),
        ("source", e.source.is_some()),
        ("of", e.of.is_some()),
        ("id", e.id.is_some()),
    ];
    for (field, is) in present {
        if is && field != "id" && !allowed.contains(&field) {
            return Err(format!("`{field}` is not a field of a `{ty}` event"));
        }
    }
    if e.kind == RawEventType::Redeliver {
        let of = e.of.clone().ok_or("a `redeliver` event needs `of` (the id of an earlier event)")?;
        let Some((_, original)) = earlier.get(&of) else {
            return Err(format!("redeliver of {of:?}: no earlier step published an event with that id"));
        };
        let step_id = match &e.id {
            Some(id) if id.trim().is_empty() => return Err("a `redeliver` event's `id` is empty".into()),
            other => other.clone(),
        };
        return Ok(StepEvent::Redeliver { of: original.clone(), step_id });
    }
    let id =
        e.id.clone()
            .filter(|i| !i.trim().is_empty())
            .ok_or_else(|| format!("a `{ty}` event needs an `id`"))?;
    let text = || e.text.clone().unwrap_or_default();
    let from = || e.from.clone().unwrap_or_default();
    let mut occurred_at = at;
    let kind = match e.kind {
        RawEventType::Ping => {
            need("stop", e.stop.is_some())?;
            need("delay_risk", e.delay_risk.is_some())?;
            let recorded_at = e.recorded_at.map(|t| t.with_timezone(&Utc)).unwrap_or(at);
            occurred_at = recorded_at;
            EventKind::Ping {
                stop: e.stop.unwrap_or_default(),
                delay_risk: e.delay_risk.unwrap_or(RiskBand::Low),
                recorded_at,
                lat: e.lat,
                lon: e.lon,
            }
        }
        RawEventType::Sms => {
            need("from", e.from.is_some())?;
            need("text", e.text.is_some())?;
            EventKind::Sms { from: from(), text: text() }
        }
        RawEventType::Slack => {
            need("from", e.from.is_some())?;
            need("text", e.text.is_some())?;
            EventKind::Slack { from: from(), text: text() }
        }
        RawEventType::Email => {
            need("from", e.from.is_some())?;
            need("text", e.text.is_some())?;
            EventKind::Email {
                from: from(),
                subject: e.subject.clone().unwrap_or_default(),
                text: text(),
                thread: e.thread,
            }
        }
        RawEventType::Attachment => {
            need("from", e.from.is_some())?;
            need("channel", e.channel.is_some())?;
            need("filename", e.filename.is_some())?;
            need("content_type", e.content_type.is_some())?;
            EventKind::Attachment {
                from: from(),
                channel: e.channel.unwrap_or(MessageChannel::Sms),
                filename: e.filename.clone().unwrap_or_default(),
                content_type: e.content_type.clone().unwrap_or_default(),
                content_ref: None,
                extracted: e.extracted.clone(),
            }
        }
        RawEventType::StopStatus => {
            need("stop", e.stop.is_some())?;
            need("status", e.status.is_some())?;
            EventKind::StopStatus {
                stop: e.stop.unwrap_or_default(),
                status: e.status.unwrap_or(StopStatusKind::Arrived),
                source: e.source.clone(),
            }
        }
        RawEventType::Redeliver => return Err("unreachable: handled above".into()),
    };
    Ok(StepEvent::New { id, kind, occurred_at })
}

/// The line (1-based) of each item of the top-level `steps:` block sequence, in order.
fn step_lines(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_steps = false;
    let mut item_indent: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if indent == 0 {
            in_steps = trimmed.starts_with("steps:");
            item_indent = None;
            continue;
        }
        if !in_steps || !(trimmed.starts_with("- ") || trimmed == "-") {
            continue;
        }
        match item_indent {
            None => {
                item_indent = Some(indent);
                out.push(i + 1);
            }
            Some(n) if n == indent => out.push(i + 1),
            _ => {}
        }
    }
    // `steps:` at column 0 with items at column 0 too (a valid YAML style).
    if out.is_empty() {
        let mut after = false;
        for (i, line) in text.lines().enumerate() {
            if line.starts_with("steps:") {
                after = true;
            } else if after && line.starts_with("- ") {
                out.push(i + 1);
            } else if after && !line.is_empty() && !line.starts_with(' ') && !line.starts_with('#') {
                after = false;
            }
        }
    }
    out
}

fn find_line(text: &str, needle: &str) -> Option<usize> {
    text.lines().position(|l| l.trim_start().starts_with(needle)).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name: t
load:
  load_id: "481207"
  client: client_a
  contacts:
    - {id: drv, role: driver, name: Luis, phone: "+13125550111"}
  stops:
    - {sequence: 1, kind: pickup, name: Acme DC, address: "1 Dock Rd", appointment: "2026-03-02T08:00:00-06:00", po_numbers: ["55821"]}
    - {sequence: 2, kind: delivery, name: Store 88, address: "88 Main St", appointment: "2026-03-02T16:00:00-05:00"}
start: "2026-03-02T06:50:00-06:00"
steps:
  - at: "2026-03-02T07:00:00-06:00"
    event: {type: ping, id: p1, stop: 1, delay_risk: high}
    expect:
      - {action: send_sms, to: drv, ask: eta_request, attempt: 1}
  - at: "2026-03-02T07:05:00-06:00"
    event: {type: redeliver, of: p1}
    expect: duplicate
  - at: "2026-03-02T07:30:00-06:00"
    expect: noop
    state: {stage: to_pickup, open_asks: [{type: eta_request, attempts: 1}], sms_blocked: []}
"#;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        parse_scenario(Path::new("s.yaml"), text)
    }

    /// The scenario files are read with serde; error messages name the type with `as_str`.
    #[test]
    fn event_types_read_by_serde_as_they_are_spelled() {
        for t in RawEventType::ALL {
            let read: Option<RawEventType> = serde_yaml::from_str(t.as_str()).ok();
            assert_eq!(read, Some(t));
        }
    }

    #[test]
    fn a_good_file_parses_with_step_lines() {
        let s = parse(GOOD).expect("valid");
        assert_eq!(s.steps.len(), 3);
        assert_eq!(s.steps[0].line, Some(13));
        assert_eq!(s.steps[1].event, Some(StepEvent::Redeliver { of: "p1".into(), step_id: None }));
        assert_eq!(s.steps[1].expect, Some(Expect::Duplicate));
        assert_eq!(s.steps[2].expect, Some(Expect::Noop));
        assert_eq!(s.start.to_rfc3339(), "2026-03-02T12:50:00+00:00");
    }

    #[test]
    fn an_unknown_field_is_refused_with_its_line() {
        let bad = GOOD.replace("attempt: 1}", "atempt: 1}");
        let e = parse(&bad).expect_err("typo");
        assert_eq!(e.line, Some(16), "{e}");
        assert!(e.message.contains("atempt"), "{e}");
    }

    #[test]
    fn a_missing_field_is_refused_with_the_step_line() {
        let bad =
            GOOD.replace("{type: ping, id: p1, stop: 1, delay_risk: high}", "{type: ping, id: p1, stop: 1}");
        let e = parse(&bad).expect_err("no band");
        assert_eq!(e.line, Some(13), "{e}");
        assert!(e.message.contains("delay_risk"), "{e}");
        assert!(e.to_string().starts_with("s.yaml:13: "), "{e}");
    }

    #[test]
    fn redelivery_of_an_unknown_event_is_refused() {
        let bad = GOOD.replace("of: p1", "of: p9");
        let e = parse(&bad).expect_err("unknown id");
        assert_eq!(e.line, Some(17));
        assert!(e.message.contains("p9"));
    }

    #[test]
    fn a_redelivery_may_carry_its_own_unique_id() {
        let with_id = GOOD.replace("{type: redeliver, of: p1}", "{type: redeliver, id: p1_again, of: p1}");
        let s = parse(&with_id).expect("a redeliver with its own id is accepted");
        // The record published is still the original event, under the original id.
        assert_eq!(
            s.steps[1].event,
            Some(StepEvent::Redeliver { of: "p1".into(), step_id: Some("p1_again".into()) })
        );
        assert_eq!(s.steps[1].event.as_ref().map(StepEvent::id), Some("p1"));

        // Its id is one of the scenario's ids: unique, and a later redeliver may name it.
        let reused = GOOD.replace("{type: redeliver, of: p1}", "{type: redeliver, id: p1, of: p1}");
        let e = parse(&reused).expect_err("p1 is already used");
        assert!(e.message.contains("already used"), "{e}");
        let chained = with_id.replace(
            "  - at: \"2026-03-02T07:30:00-06:00\"\n    expect: noop",
            "  - at: \"2026-03-02T07:30:00-06:00\"\n    event: {type: redeliver, of: p1_again}\n    expect: duplicate",
        );
        let s = parse(&chained).expect("a redeliver may name an earlier redeliver's id");
        assert_eq!(s.steps[2].event, Some(StepEvent::Redeliver { of: "p1".into(), step_id: None }));
        let empty = GOOD.replace("{type: redeliver, of: p1}", "{type: redeliver, id: \" \", of: p1}");
        assert!(parse(&empty).expect_err("empty id").message.contains("empty"));
    }

    #[test]
    fn a_bad_expect_keyword_and_a_bad_time_are_refused() {
        let e = parse(&GOOD.replace("expect: noop", "expect: nothing")).expect_err("keyword");
        assert!(e.message.contains("nothing"), "{e}");
        assert!(e.line.is_some());
        let e = parse(&GOOD.replace("\"2026-03-02T07:05:00-06:00\"", "\"yesterday\"")).expect_err("time");
        assert_eq!(e.line, Some(17), "{e}");
    }

    #[test]
    fn steps_going_back_in_time_and_unknown_contacts_are_refused() {
        let e = parse(&GOOD.replace("07:30:00-06:00", "07:01:00-06:00")).expect_err("order");
        assert!(e.message.contains("earlier"), "{e}");
        let e = parse(&GOOD.replace("to: drv", "to: driver")).expect_err("contact");
        assert!(e.message.contains("not a contact id"), "{e}");
    }
}
