//! SOPs are data: compiled specs under `sops/<client>/v<N>.yaml` (docs/sops.md).
//!
//! A load pins its SOP id and version at registration, and every version is kept, so a newer
//! version never changes a load registered under an older one. A malformed file is refused at
//! load time with the file, the field and what is wrong.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use load_agent_domain::{Role, SopRef, Stage, StopKind};
use serde::Deserialize;

use crate::templates::Templates;
use crate::yaml_error::split_yaml_error;

/// The trigger that opens an ask.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "trigger", rename_all = "snake_case", deny_unknown_fields)]
pub enum AskTrigger {
    /// `DelayRiskChanged(S, to)`: the ask is about stop S.
    DelayRiskChanged { to: String },
    /// `StageEntered(stage)`, optionally only after departing a stop of a kind and only on
    /// loads with a reefer: the ask is about the departed stop.
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
pub struct Target {
    pub role: String,
    pub channel: String,
}

/// One escalation step, taken in order after the contact attempts are spent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum EscalationStep {
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
    "main".into()
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskRule {
    pub on: AskTrigger,
    pub target: Target,
    /// Template of the question (first attempt).
    pub question: String,
    /// Template of later attempts; defaults to `{question}_followup` when that exists, else the
    /// question.
    #[serde(default)]
    pub followup: Option<String>,
    pub max_attempts: u32,
    pub retry_after_minutes: u32,
    #[serde(default)]
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

/// A compiled SOP spec, as written in a file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SopSpec {
    pub id: String,
    pub version: u32,
    #[serde(default)]
    pub description: String,
    /// Roles the agent must never contact under this SOP.
    #[serde(default)]
    pub forbidden_roles: Vec<String>,
    /// Ask rules by ask type.
    #[serde(default)]
    pub asks: BTreeMap<String, AskRule>,
    #[serde(default)]
    pub reefer_out_of_range: Option<OutOfRangeRule>,
}

/// A validated SOP.
#[derive(Debug, Clone, PartialEq)]
pub struct Sop {
    pub spec: SopSpec,
    pub forbidden_roles: Vec<Role>,
}

impl Sop {
    pub fn sop_ref(&self) -> SopRef {
        SopRef { id: self.spec.id.clone(), version: self.spec.version }
    }

    pub fn ask_rule(&self, ask_type: &str) -> Option<&AskRule> {
        self.spec.asks.get(ask_type)
    }

    pub fn forbids(&self, role: Role) -> bool {
        self.forbidden_roles.contains(&role)
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

impl SopSpec {
    /// Checks every field the executor relies on.
    pub fn validate(self, file: &str, templates: &Templates) -> Result<Sop, SopError> {
        let err = |field: String, problem: String| SopError { file: file.into(), field, problem };
        if self.id.trim().is_empty() {
            return Err(err("id".into(), "must not be empty".into()));
        }
        if self.version == 0 {
            return Err(err("version".into(), "must be 1 or more".into()));
        }
        let mut forbidden = Vec::new();
        for (i, r) in self.forbidden_roles.iter().enumerate() {
            let role = Role::parse(r)
                .ok_or_else(|| err(format!("forbidden_roles[{i}]"), format!("unknown role {r:?}")))?;
            forbidden.push(role);
        }
        let need_template = |field: String, id: &str| {
            if templates.get(id).is_some() {
                Ok(())
            } else {
                Err(err(field, format!("unknown template {id:?}")))
            }
        };
        for (ask_type, rule) in &self.asks {
            let f = |name: &str| format!("asks.{ask_type}.{name}");
            match &rule.on {
                AskTrigger::DelayRiskChanged { to } => {
                    if !["low", "medium", "high"].contains(&to.as_str()) {
                        return Err(err(f("on.to"), format!("unknown delay risk band {to:?}")));
                    }
                }
                AskTrigger::StageEntered { stage, after_departing, .. } => {
                    if Stage::parse(stage).is_none() {
                        return Err(err(f("on.stage"), format!("unknown stage {stage:?}")));
                    }
                    if let Some(k) = after_departing
                        && !["pickup", "delivery"].contains(&k.as_str())
                    {
                        return Err(err(f("on.after_departing"), format!("unknown stop kind {k:?}")));
                    }
                }
            }
            let role = Role::parse(&rule.target.role)
                .ok_or_else(|| err(f("target.role"), format!("unknown role {:?}", rule.target.role)))?;
            if forbidden.contains(&role) {
                return Err(err(
                    f("target.role"),
                    format!("role {:?} is forbidden by this SOP", rule.target.role),
                ));
            }
            if !["sms", "email"].contains(&rule.target.channel.as_str()) {
                return Err(err(
                    f("target.channel"),
                    format!("unsupported channel {:?} (sms or email)", rule.target.channel),
                ));
            }
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
            for (i, step) in rule.escalation.iter().enumerate() {
                let sf = |name: &str| f(&format!("escalation[{i}].{name}"));
                match step {
                    EscalationStep::SendEmail { role, thread, template } => {
                        Role::parse(role).ok_or_else(|| err(sf("role"), format!("unknown role {role:?}")))?;
                        if !["main", "new"].contains(&thread.as_str()) {
                            return Err(err(
                                sf("thread"),
                                format!("unknown thread {thread:?} (main or new)"),
                            ));
                        }
                        need_template(sf("template"), template)?;
                    }
                    EscalationStep::SendSms { role, template } => {
                        Role::parse(role).ok_or_else(|| err(sf("role"), format!("unknown role {role:?}")))?;
                        need_template(sf("template"), template)?;
                    }
                    EscalationStep::CreateHeroTask { template, .. }
                    | EscalationStep::PostSlack { template } => {
                        need_template(sf("template"), template)?;
                    }
                }
            }
        }
        if let Some(r) = &self.reefer_out_of_range {
            need_template("reefer_out_of_range.hero_task.template".into(), &r.hero_task.template)?;
            if let Some(s) = &r.post_slack_to_broker {
                need_template("reefer_out_of_range.post_slack_to_broker.template".into(), &s.template)?;
            }
        }
        Ok(Sop { spec: self, forbidden_roles: forbidden })
    }
}

/// Parses and validates one SOP file's text.
pub fn parse_sop(file: &str, text: &str, templates: &Templates) -> Result<Sop, SopError> {
    let spec: SopSpec = serde_yaml::from_str(text).map_err(|e| {
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

/// The stop kind named in a spec (`pickup` / `delivery`).
pub(crate) fn stop_kind(s: &str) -> Option<StopKind> {
    match s {
        "pickup" => Some(StopKind::Pickup),
        "delivery" => Some(StopKind::Delivery),
        _ => None,
    }
}

/// The JSON schema of a compiled SOP spec (format v1), given to the model that compiles an SOP
/// written in plain English (`load-agent sop compile`). The result is still checked by
/// [`SopSpec::validate`], which knows the templates.
pub fn spec_json_schema() -> serde_json::Value {
    let role = serde_json::json!({"type": "string", "enum": ["driver", "carrier_dispatcher", "broker", "shipper", "receiver"]});
    let escalation = serde_json::json!({
        "type": "object",
        "required": ["action", "template"],
        "properties": {
            "action": {"type": "string", "enum": ["send_email", "send_sms", "create_hero_task", "post_slack"]},
            "role": role, "thread": {"type": "string", "enum": ["main", "new"]},
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
                                "to": {"type": "string", "enum": ["low", "medium", "high"]},
                                "stage": {"type": "string", "enum": ["to_pickup", "at_pickup", "to_delivery", "at_delivery", "delivered"]},
                                "after_departing": {"type": "string", "enum": ["pickup", "delivery"]},
                                "requires_reefer": {"type": "boolean"}
                            },
                            "additionalProperties": false
                        },
                        "target": {
                            "type": "object", "required": ["role", "channel"],
                            "properties": {"role": role, "channel": {"type": "string", "enum": ["sms", "email"]}},
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
    let parsed: SopSpec = serde_json::from_value(spec.clone()).map_err(|e| {
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
