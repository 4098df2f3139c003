//! SOPs are data: compiled specs under `sops/<client>/v<N>.yaml` (docs/sops.md).
//!
//! A load pins its SOP id and version at registration, and every version is kept, so a newer
//! version never changes a load registered under an older one. A malformed file is refused at
//! load time with the file, the field and what is wrong.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use load_agent_domain::{ActionKind, EmailThread, MessageChannel, RiskBand, Role, SopRef, Stage, StopKind};
use serde::Deserialize;

use crate::templates::Templates;
use crate::yaml_error::split_yaml_error;

/// The trigger that opens an ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskTrigger {
    /// `DelayRiskChanged(S, to)`: the ask is about stop S.
    DelayRiskChanged { to: RiskBand },
    /// `StageEntered(stage)`, optionally only after departing a stop of a kind and only on
    /// loads with a reefer: the ask is about the departed stop.
    StageEntered { stage: Stage, after_departing: Option<StopKind>, requires_reefer: bool },
}

/// Who an ask asks, and on which channel (SMS or email).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub role: Role,
    pub channel: MessageChannel,
}

/// One escalation step, taken in order after the contact attempts are spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EscalationStep {
    SendEmail { role: Role, thread: EmailThread, template: String },
    SendSms { role: Role, template: String },
    CreateHeroTask { urgent: bool, template: String },
    PostSlack { template: String },
}

impl EscalationStep {
    /// The kind of the action the step proposes.
    pub fn action_kind(&self) -> ActionKind {
        match self {
            EscalationStep::SendEmail { .. } => ActionKind::SendEmail,
            EscalationStep::SendSms { .. } => ActionKind::SendSms,
            EscalationStep::CreateHeroTask { .. } => ActionKind::CreateHeroTask,
            EscalationStep::PostSlack { .. } => ActionKind::PostSlack,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRule {
    pub on: AskTrigger,
    pub target: Target,
    /// Template of the question (first attempt).
    pub question: String,
    /// Template of later attempts; defaults to `{question}_followup` when that exists, else the
    /// question.
    pub followup: Option<String>,
    pub max_attempts: u32,
    pub retry_after_minutes: u32,
    pub escalation: Vec<EscalationStep>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeroTaskSpec {
    pub urgent: bool,
    pub template: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSpec {
    pub template: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutOfRangeRule {
    pub hero_task: HeroTaskSpec,
    #[serde(default)]
    pub post_slack_to_broker: Option<SlackSpec>,
}

/// A compiled SOP spec, typed: every role, stage, risk band, stop kind, channel and thread was
/// parsed with the domain's enums when the file was loaded ([`parse_sop`]), so a misspelling is
/// refused there, naming the file and the field, and never reaches the executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SopSpec {
    pub id: String,
    pub version: u32,
    pub description: String,
    /// Roles the agent must never contact under this SOP.
    pub forbidden_roles: Vec<Role>,
    /// Ask rules by ask type.
    pub asks: BTreeMap<String, AskRule>,
    pub reefer_out_of_range: Option<OutOfRangeRule>,
}

/// A validated SOP.
#[derive(Debug, Clone, PartialEq)]
pub struct Sop {
    pub spec: SopSpec,
}

impl Sop {
    pub fn sop_ref(&self) -> SopRef {
        SopRef { id: self.spec.id.clone(), version: self.spec.version }
    }

    pub fn ask_rule(&self, ask_type: &str) -> Option<&AskRule> {
        self.spec.asks.get(ask_type)
    }

    pub fn forbids(&self, role: Role) -> bool {
        self.spec.forbidden_roles.contains(&role)
    }
}

/// Why an SOP file was refused: the file, the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {problem}")]
pub struct SopError {
    pub file: String,
    pub field: String,
    pub problem: String,
}

// ----- the file as written: strings, typed by `RawSopSpec::validate` -----
// serde reads the strings and the validation parses them, rather than serde parsing the enums
// directly: serde's error for a tagged enum names the enclosing object, not the field
// (`asks.x.on`, not `asks.x.on.to`), and the messages below are what users and tests rely on.

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "trigger", rename_all = "snake_case", deny_unknown_fields)]
enum RawAskTrigger {
    DelayRiskChanged {
        to: String,
    },
    StageEntered {
        stage: String,
        #[serde(default)]
        after_departing: Option<String>,
        #[serde(default)]
        requires_reefer: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    role: String,
    channel: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
enum RawEscalationStep {
    SendEmail {
        role: String,
        #[serde(default = "main_thread")]
        thread: String,
        template: String,
    },
    SendSms {
        role: String,
        template: String,
    },
    CreateHeroTask {
        urgent: bool,
        template: String,
    },
    PostSlack {
        template: String,
    },
}

fn main_thread() -> String {
    EmailThread::Main.as_str().into()
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAskRule {
    on: RawAskTrigger,
    target: RawTarget,
    question: String,
    #[serde(default)]
    followup: Option<String>,
    max_attempts: u32,
    retry_after_minutes: u32,
    #[serde(default)]
    escalation: Vec<RawEscalationStep>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSopSpec {
    id: String,
    version: u32,
    #[serde(default)]
    description: String,
    #[serde(default)]
    forbidden_roles: Vec<String>,
    #[serde(default)]
    asks: BTreeMap<String, RawAskRule>,
    #[serde(default)]
    reefer_out_of_range: Option<OutOfRangeRule>,
}

/// The channels an ask can use (a Slack ask is not supported).
const ASK_CHANNELS: [MessageChannel; 2] = [MessageChannel::Sms, MessageChannel::Email];

impl RawSopSpec {
    /// Parses every spelled value with the domain's enums and checks every field the executor
    /// relies on.
    fn validate(self, file: &str, templates: &Templates) -> Result<Sop, SopError> {
        let err = |field: String, problem: String| SopError { file: file.into(), field, problem };
        if self.id.trim().is_empty() {
            return Err(err("id".into(), "must not be empty".into()));
        }
        if self.version == 0 {
            return Err(err("version".into(), "must be 1 or more".into()));
        }
        let role =
            |field: String, r: &str| Role::parse(r).ok_or_else(|| err(field, format!("unknown role {r:?}")));
        let mut forbidden = Vec::new();
        for (i, r) in self.forbidden_roles.iter().enumerate() {
            forbidden.push(role(format!("forbidden_roles[{i}]"), r)?);
        }
        let need_template = |field: String, id: &str| {
            if templates.get(id).is_some() {
                Ok(())
            } else {
                Err(err(field, format!("unknown template {id:?}")))
            }
        };
        let mut asks = BTreeMap::new();
        for (ask_type, rule) in self.asks {
            let f = |name: &str| format!("asks.{ask_type}.{name}");
            let on = match rule.on {
                RawAskTrigger::DelayRiskChanged { to } => AskTrigger::DelayRiskChanged {
                    to: RiskBand::parse(&to)
                        .ok_or_else(|| err(f("on.to"), format!("unknown delay risk band {to:?}")))?,
                },
                RawAskTrigger::StageEntered { stage, after_departing, requires_reefer } => {
                    AskTrigger::StageEntered {
                        stage: Stage::parse(&stage)
                            .ok_or_else(|| err(f("on.stage"), format!("unknown stage {stage:?}")))?,
                        after_departing: after_departing
                            .map(|k| {
                                StopKind::parse(&k).ok_or_else(|| {
                                    err(f("on.after_departing"), format!("unknown stop kind {k:?}"))
                                })
                            })
                            .transpose()?,
                        requires_reefer,
                    }
                }
            };
            let target_role = role(f("target.role"), &rule.target.role)?;
            if forbidden.contains(&target_role) {
                return Err(err(
                    f("target.role"),
                    format!("role {:?} is forbidden by this SOP", rule.target.role),
                ));
            }
            let channel = MessageChannel::parse(&rule.target.channel)
                .filter(|c| ASK_CHANNELS.contains(c))
                .ok_or_else(|| {
                    err(
                        f("target.channel"),
                        format!("unsupported channel {:?} (sms or email)", rule.target.channel),
                    )
                })?;
            need_template(f("question"), &rule.question)?;
            if let Some(t) = &rule.followup {
                need_template(f("followup"), t)?;
            }
            if rule.max_attempts == 0 || rule.max_attempts > 10 {
                return Err(err(f("max_attempts"), "must be between 1 and 10".into()));
            }
            if rule.retry_after_minutes == 0 || rule.retry_after_minutes > 24 * 60 {
                return Err(err(f("retry_after_minutes"), "must be between 1 and 1440".into()));
            }
            let mut escalation = Vec::with_capacity(rule.escalation.len());
            for (i, step) in rule.escalation.into_iter().enumerate() {
                let sf = |name: &str| f(&format!("escalation[{i}].{name}"));
                let step = match step {
                    RawEscalationStep::SendEmail { role: r, thread, template } => {
                        let role = role(sf("role"), &r)?;
                        let thread = EmailThread::parse(&thread).ok_or_else(|| {
                            err(sf("thread"), format!("unknown thread {thread:?} (main or new)"))
                        })?;
                        EscalationStep::SendEmail { role, thread, template }
                    }
                    RawEscalationStep::SendSms { role: r, template } => {
                        EscalationStep::SendSms { role: role(sf("role"), &r)?, template }
                    }
                    RawEscalationStep::CreateHeroTask { urgent, template } => {
                        EscalationStep::CreateHeroTask { urgent, template }
                    }
                    RawEscalationStep::PostSlack { template } => EscalationStep::PostSlack { template },
                };
                let (EscalationStep::SendEmail { template, .. }
                | EscalationStep::SendSms { template, .. }
                | EscalationStep::CreateHeroTask { template, .. }
                | EscalationStep::PostSlack { template }) = &step;
                need_template(sf("template"), template)?;
                escalation.push(step);
            }
            let rule = AskRule {
                on,
                target: Target { role: target_role, channel },
                question: rule.question,
                followup: rule.followup,
                max_attempts: rule.max_attempts,
                retry_after_minutes: rule.retry_after_minutes,
                escalation,
            };
            asks.insert(ask_type, rule);
        }
        if let Some(r) = &self.reefer_out_of_range {
            need_template("reefer_out_of_range.hero_task.template".into(), &r.hero_task.template)?;
            if let Some(s) = &r.post_slack_to_broker {
                need_template("reefer_out_of_range.post_slack_to_broker.template".into(), &s.template)?;
            }
        }
        let spec = SopSpec {
            id: self.id,
            version: self.version,
            description: self.description,
            forbidden_roles: forbidden,
            asks,
            reefer_out_of_range: self.reefer_out_of_range,
        };
        Ok(Sop { spec })
    }
}

/// Parses and validates one SOP file's text.
pub fn parse_sop(file: &str, text: &str, templates: &Templates) -> Result<Sop, SopError> {
    let spec: RawSopSpec = serde_yaml::from_str(text).map_err(|e| {
        let (field, problem) = split_yaml_error(&e.to_string());
        let at =
            e.location().map(|l| format!(" (line {}, column {})", l.line(), l.column())).unwrap_or_default();
        SopError { file: file.into(), field, problem: format!("{problem}{at}") }
    })?;
    spec.validate(file, templates)
}

/// Every SOP version the agent knows, by id and version.
#[derive(Debug, Clone, Default)]
pub struct SopRegistry {
    sops: BTreeMap<(String, u32), Sop>,
}

const EMBEDDED: &[(&str, &str)] = &[
    ("sops/client_a/v1.yaml", include_str!("../../../sops/client_a/v1.yaml")),
    ("sops/client_b/v1.yaml", include_str!("../../../sops/client_b/v1.yaml")),
];

impl SopRegistry {
    /// The SOPs shipped in the binary (the files under `sops/`).
    pub fn embedded(templates: &Templates) -> Result<Self, SopError> {
        let mut reg = SopRegistry::default();
        for (file, text) in EMBEDDED {
            reg.insert(file, parse_sop(file, text, templates)?)?;
        }
        Ok(reg)
    }

    /// Loads every `<client>/v<N>.yaml` below a directory.
    pub fn load_dir(dir: &Path, templates: &Templates) -> Result<Self, SopError> {
        let mut reg = SopRegistry::default();
        let io = |file: &Path, e: std::io::Error| SopError {
            file: file.display().to_string(),
            field: "(file)".into(),
            problem: e.to_string(),
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for client in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let client = client.map_err(|e| io(dir, e))?.path();
            if !client.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(&client).map_err(|e| io(&client, e))? {
                let f = f.map_err(|e| io(&client, e))?.path();
                if f.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                    files.push(f);
                }
            }
        }
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| io(&f, e))?;
            let name = f.display().to_string();
            let sop = parse_sop(&name, &text, templates)?;
            reg.insert(&name, sop)?;
        }
        Ok(reg)
    }

    pub fn insert(&mut self, file: &str, sop: Sop) -> Result<(), SopError> {
        let key = (sop.spec.id.clone(), sop.spec.version);
        if self.sops.contains_key(&key) {
            return Err(SopError {
                file: file.into(),
                field: "version".into(),
                problem: format!("{} v{} is defined twice", key.0, key.1),
            });
        }
        self.sops.insert(key, sop);
        Ok(())
    }

    pub fn get(&self, id: &str, version: u32) -> Option<&Sop> {
        self.sops.get(&(id.to_string(), version))
    }

    /// The newest version of an SOP: what a new load is pinned to.
    pub fn latest(&self, id: &str) -> Option<&Sop> {
        self.sops.range((id.to_string(), 0)..=(id.to_string(), u32::MAX)).next_back().map(|(_, s)| s)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Sop> {
        self.sops.values()
    }
}

/// The JSON schema of a compiled SOP spec (format v1), given to the model that compiles an SOP
/// written in plain English (`load-agent sop compile`). The result is still checked by
/// the validation [`parse_sop`] runs, which knows the templates.
pub fn spec_json_schema() -> serde_json::Value {
    let role = serde_json::json!({"type": "string", "enum": Role::SPELLINGS});
    let escalation = serde_json::json!({
        "type": "object",
        "required": ["action", "template"],
        "properties": {
            "action": {"type": "string", "enum": ["send_email", "send_sms", "create_hero_task", "post_slack"]},
            "role": role, "thread": {"type": "string", "enum": EmailThread::SPELLINGS},
            "urgent": {"type": "boolean"}, "template": {"type": "string"}
        },
        "additionalProperties": false
    });
    serde_json::json!({
        "type": "object",
        "required": ["id", "version", "asks"],
        "properties": {
            "id": {"type": "string"},
            "version": {"type": "integer", "minimum": 1},
            "description": {"type": "string"},
            "forbidden_roles": {"type": "array", "items": role},
            "asks": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["on", "target", "question", "max_attempts", "retry_after_minutes"],
                    "properties": {
                        "on": {
                            "type": "object",
                            "required": ["trigger"],
                            "properties": {
                                "trigger": {"type": "string", "enum": ["delay_risk_changed", "stage_entered"]},
                                "to": {"type": "string", "enum": RiskBand::SPELLINGS},
                                "stage": {"type": "string", "enum": Stage::SPELLINGS},
                                "after_departing": {"type": "string", "enum": StopKind::SPELLINGS},
                                "requires_reefer": {"type": "boolean"}
                            },
                            "additionalProperties": false
                        },
                        "target": {
                            "type": "object", "required": ["role", "channel"],
                            "properties": {"role": role, "channel": {"type": "string", "enum": ASK_CHANNELS.map(MessageChannel::as_str)}},
                            "additionalProperties": false
                        },
                        "question": {"type": "string"},
                        "followup": {"type": "string"},
                        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 10},
                        "retry_after_minutes": {"type": "integer", "minimum": 1, "maximum": 1440},
                        "escalation": {"type": "array", "items": escalation}
                    },
                    "additionalProperties": false
                }
            },
            "reefer_out_of_range": {
                "type": "object",
                "required": ["hero_task"],
                "properties": {
                    "hero_task": {"type": "object", "required": ["urgent", "template"],
                        "properties": {"urgent": {"type": "boolean"}, "template": {"type": "string"}}, "additionalProperties": false},
                    "post_slack_to_broker": {"type": "object", "required": ["template"],
                        "properties": {"template": {"type": "string"}}, "additionalProperties": false}
                },
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    })
}

/// Checks a spec produced by a model (JSON) and renders it as the YAML a person reviews.
pub fn spec_from_json(
    file: &str,
    spec: serde_json::Value,
    templates: &Templates,
) -> Result<(Sop, String), SopError> {
    let parsed: RawSopSpec = serde_json::from_value(spec.clone()).map_err(|e| {
        let (field, problem) = split_yaml_error(&e.to_string());
        SopError { file: file.into(), field, problem }
    })?;
    let sop = parsed.validate(file, templates)?;
    let yaml = serde_yaml::to_string(&spec).map_err(|e| SopError {
        file: file.into(),
        field: "(document)".into(),
        problem: e.to_string(),
    })?;
    Ok((sop, yaml))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An escalation step's `action` is spelled as the domain's `ActionKind` of what it proposes.
    #[test]
    fn escalation_actions_are_spelled_as_their_action_kinds() {
        let text = r#"
id: c
version: 1
asks:
  eta_request:
    on: {trigger: delay_risk_changed, to: high}
    target: {role: driver, channel: email}
    question: eta_request
    max_attempts: 1
    retry_after_minutes: 30
    escalation:
      - {action: send_email, role: carrier_dispatcher, template: eta_escalation_email}
      - {action: send_sms, role: driver, template: eta_request}
      - {action: create_hero_task, urgent: true, template: hero_call_driver_eta}
      - {action: post_slack, template: eta_request}
"#;
        let templates = Templates::embedded().expect("templates");
        let sop = parse_sop("c.yaml", text, &templates).expect("valid");
        let rule = sop.ask_rule("eta_request").expect("rule");
        assert_eq!(rule.target.channel, MessageChannel::Email);
        let kinds: Vec<&str> = rule.escalation.iter().map(|s| s.action_kind().as_str()).collect();
        assert_eq!(kinds, ["send_email", "send_sms", "create_hero_task", "post_slack"]);
        assert!(matches!(rule.escalation[0], EscalationStep::SendEmail { thread: EmailThread::Main, .. }));
    }
}
