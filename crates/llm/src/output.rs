//! Strict parsing of provider output into the typed results, the semantic checks each result
//! must pass, and the JSON schema of each method's output (sent as the structured-output
//! schema). Pure functions over `serde_json::Value`; any provider that gets JSON back uses them.
//!
//! Every failure is [`LlmError::InvalidOutput`]: nothing is parsed leniently, dropped or guessed.

use serde::Deserialize;
use serde_json::{Value, json};

use load_agent_domain::{ActionKind, DocumentFields, DocumentType};
use load_agent_triage::{ExtractedValues, Intent, TriageModel};

use crate::types::{Draft, ExtractedSop, LlmError, LlmMethod, Plan, PlannedAction, TriageResult};

/// A plan with more actions than this is refused: the planner handles one uncovered situation,
/// and a long list is a sign it is improvising a procedure.
pub const MAX_PLANNED_ACTIONS: usize = 5;

/// Longest text accepted in a planned action, a draft body or a rationale.
const MAX_TEXT_CHARS: usize = 2_000;

/// Reefer readings outside this range (°F) are not a temperature a document can carry.
const PLAUSIBLE_TEMPERATURE_F: std::ops::RangeInclusive<f64> = -100.0..=200.0;

fn strict<T: for<'de> Deserialize<'de>>(method: LlmMethod, value: &Value) -> Result<T, LlmError> {
    T::deserialize(value).map_err(|e| LlmError::invalid(method, format!("does not match the schema: {e}")))
}

fn non_empty(method: LlmMethod, what: &str, text: &str) -> Result<(), LlmError> {
    if text.trim().is_empty() {
        return Err(LlmError::invalid(method, format!("{what} is empty")));
    }
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(LlmError::invalid(
            method,
            format!("{what} is {chars} characters, more than {MAX_TEXT_CHARS}"),
        ));
    }
    Ok(())
}

/// Parses the planner's output. An action whose `kind` is not one the planner may propose
/// (`send_sms`, `send_email`, `set_timer`, or anything unknown) is refused, naming the kind;
/// it is never dropped silently.
pub fn parse_plan(value: &Value) -> Result<Plan, LlmError> {
    let method = LlmMethod::Plan;
    if let Some(actions) = value.get("actions").and_then(Value::as_array) {
        for (i, action) in actions.iter().enumerate() {
            let kind = action.get("kind").and_then(Value::as_str);
            let allowed =
                kind.and_then(ActionKind::parse).is_some_and(|k| PlannedAction::ALLOWED_KINDS.contains(&k));
            if !allowed {
                let shown = match kind {
                    Some(k) => format!("`{k}`"),
                    None => "no kind".to_owned(),
                };
                return Err(LlmError::invalid(
                    method,
                    format!(
                        "action {} proposes {shown}, which the planner may not propose (allowed: {})",
                        i + 1,
                        allowed_kinds()
                    ),
                ));
            }
        }
    }
    validate_plan(strict(method, value)?)
}

fn allowed_kinds() -> String {
    PlannedAction::ALLOWED_KINDS.map(ActionKind::as_str).join(", ")
}

/// The planner's semantic checks: at most [`MAX_PLANNED_ACTIONS`] actions, every text present and
/// bounded, a rationale. The action kinds themselves are guaranteed by [`PlannedAction`] being a
/// closed enum of non-carrier-facing actions (a Hero task, a TMS note, a Slack post to the broker).
pub fn validate_plan(plan: Plan) -> Result<Plan, LlmError> {
    let method = LlmMethod::Plan;
    if plan.actions.len() > MAX_PLANNED_ACTIONS {
        return Err(LlmError::invalid(
            method,
            format!("{} actions proposed, at most {MAX_PLANNED_ACTIONS} allowed", plan.actions.len()),
        ));
    }
    for (i, action) in plan.actions.iter().enumerate() {
        let n = i + 1;
        match action {
            PlannedAction::CreateHeroTask { title, body, .. } => {
                non_empty(method, &format!("action {n} (create_hero_task) title"), title)?;
                non_empty(method, &format!("action {n} (create_hero_task) body"), body)?;
            }
            PlannedAction::TmsNote { text } => {
                non_empty(method, &format!("action {n} (tms_note) text"), text)?
            }
            PlannedAction::PostSlack { text } => {
                non_empty(method, &format!("action {n} (post_slack) text"), text)?
            }
        }
    }
    non_empty(method, "rationale", &plan.rationale)?;
    Ok(plan)
}

/// Parses a drafted message body.
pub fn parse_draft(value: &Value) -> Result<Draft, LlmError> {
    validate_draft(strict(LlmMethod::Draft, value)?)
}

/// A draft's body must be present and bounded.
pub fn validate_draft(draft: Draft) -> Result<Draft, LlmError> {
    non_empty(LlmMethod::Draft, "body", &draft.body)?;
    Ok(draft)
}

/// The document reader's output, every field present (null when the document does not show it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentFieldsOutput {
    document_type: DocumentType,
    signed: Option<bool>,
    exceptions_noted: Option<bool>,
    po_numbers: Vec<String>,
    seal: Option<String>,
    pieces: Option<u32>,
    temperature_f: Option<f64>,
}

/// Parses the document reader's output into the typed fields of behavior.md §6.
pub fn parse_document_fields(value: &Value) -> Result<DocumentFields, LlmError> {
    let out: DocumentFieldsOutput = strict(LlmMethod::ExtractDocument, value)?;
    validate_document_fields(DocumentFields {
        document_type: out.document_type,
        signed: out.signed,
        exceptions_noted: out.exceptions_noted,
        po_numbers: out.po_numbers,
        seal: out.seal,
        pieces: out.pieces,
        temperature_f: out.temperature_f,
    })
}

/// PO numbers and a seal, when given, are non-empty; a temperature is a plausible reading.
pub fn validate_document_fields(fields: DocumentFields) -> Result<DocumentFields, LlmError> {
    let method = LlmMethod::ExtractDocument;
    if fields.po_numbers.iter().any(|po| po.trim().is_empty()) {
        return Err(LlmError::invalid(method, "po_numbers holds an empty PO number"));
    }
    if fields.seal.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return Err(LlmError::invalid(method, "seal is empty (use null when there is none)"));
    }
    if let Some(t) = fields.temperature_f
        && !(t.is_finite() && PLAUSIBLE_TEMPERATURE_F.contains(&t))
    {
        return Err(LlmError::invalid(method, format!("temperature_f {t} is not a plausible reading")));
    }
    Ok(fields)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriageOutput {
    intent: Intent,
    probability: f64,
    lang: String,
    values: ExtractedValues,
}

/// Parses a remote provider's triage (the default triage is the local model, which needs no
/// parsing). `confident` is decided here, by code, from the probability and the local model's
/// threshold for that intent, so both providers route the same way (a remote provider gives no
/// distribution, so only the threshold and the stop-request check of `text`, the message it
/// read, apply).
pub fn parse_triage(value: &Value, text: &str) -> Result<TriageResult, LlmError> {
    let method = LlmMethod::Triage;
    let out: TriageOutput = strict(method, value)?;
    if !(0.0..=1.0).contains(&out.probability) {
        return Err(LlmError::invalid(method, format!("probability {} is outside [0, 1]", out.probability)));
    }
    if out.lang != "en" && out.lang != "es" {
        return Err(LlmError::invalid(method, format!("lang {:?} is not en or es", out.lang)));
    }
    let abstain = TriageModel::embedded().abstain(
        out.intent,
        out.probability,
        &[],
        load_agent_triage::asks_to_stop(text),
    );
    Ok(TriageResult {
        intent: out.intent,
        probability: out.probability,
        confident: abstain.is_none(),
        abstain,
        values: out.values,
        lang: out.lang,
        distribution: Vec::new(),
    })
}

/// Parses a compiled SOP: an object holding a `spec` object. Validating the spec against the
/// request's `spec_schema` is the provider's job (it has the JSON-schema validator).
pub fn parse_extracted_sop(value: &Value) -> Result<ExtractedSop, LlmError> {
    let out: ExtractedSop = strict(LlmMethod::ExtractSop, value)?;
    if !out.spec.is_object() {
        return Err(LlmError::invalid(LlmMethod::ExtractSop, "spec is not a JSON object"));
    }
    Ok(out)
}

/// The JSON schema each method's output must satisfy, written for strict structured output
/// (every property required, nullable ones typed `[T, "null"]`, no additional properties).
/// For `extract_sop` the `spec` property is a placeholder object: use [`sop_output_schema`] with
/// the request's `spec_schema`.
pub fn output_schema(method: LlmMethod) -> Value {
    match method {
        LlmMethod::Triage => triage_schema(),
        LlmMethod::Draft => json!({
            "type": "object",
            "properties": { "body": { "type": "string", "minLength": 1 } },
            "required": ["body"],
            "additionalProperties": false
        }),
        LlmMethod::ExtractDocument => json!({
            "type": "object",
            "properties": {
                "document_type": { "type": "string", "enum": ["bol", "pod", "lumper_receipt", "other"] },
                "signed": { "type": ["boolean", "null"] },
                "exceptions_noted": { "type": ["boolean", "null"] },
                "po_numbers": { "type": "array", "items": { "type": "string" } },
                "seal": { "type": ["string", "null"] },
                "pieces": { "type": ["integer", "null"], "minimum": 0 },
                "temperature_f": { "type": ["number", "null"] }
            },
            "required": ["document_type", "signed", "exceptions_noted", "po_numbers", "seal", "pieces", "temperature_f"],
            "additionalProperties": false
        }),
        LlmMethod::Plan => json!({
            "type": "object",
            "properties": {
                "actions": {
                    "type": "array",
                    "maxItems": MAX_PLANNED_ACTIONS,
                    "items": { "anyOf": [
                        {
                            "type": "object",
                            "properties": {
                                "kind": { "type": "string", "enum": ["create_hero_task"] },
                                "title": { "type": "string" },
                                "body": { "type": "string" },
                                "urgent": { "type": "boolean" }
                            },
                            "required": ["kind", "title", "body", "urgent"],
                            "additionalProperties": false
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": { "type": "string", "enum": ["tms_note"] },
                                "text": { "type": "string" }
                            },
                            "required": ["kind", "text"],
                            "additionalProperties": false
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": { "type": "string", "enum": ["post_slack"] },
                                "text": { "type": "string" }
                            },
                            "required": ["kind", "text"],
                            "additionalProperties": false
                        }
                    ] }
                },
                "rationale": { "type": "string" }
            },
            "required": ["actions", "rationale"],
            "additionalProperties": false
        }),
        LlmMethod::ExtractSop => sop_output_schema(&json!({ "type": "object" })),
    }
}

/// The output schema of `extract_sop` for a request's compiled-spec schema.
pub fn sop_output_schema(spec_schema: &Value) -> Value {
    json!({
        "type": "object",
        "properties": { "spec": spec_schema },
        "required": ["spec"],
        "additionalProperties": false
    })
}

fn triage_schema() -> Value {
    let intents: Vec<&str> = Intent::ALL.iter().map(|i| i.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "intent": { "type": "string", "enum": intents },
            "probability": { "type": "number", "minimum": 0, "maximum": 1 },
            "lang": { "type": "string", "enum": ["en", "es"] },
            "values": {
                "type": "object",
                "properties": {
                    "eta": { "anyOf": [
                        { "type": "null" },
                        {
                            "type": "object",
                            "properties": { "kind": { "type": "string", "enum": ["now"] } },
                            "required": ["kind"],
                            "additionalProperties": false
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": { "type": "string", "enum": ["in"] },
                                "minutes": { "type": "integer", "minimum": 1 }
                            },
                            "required": ["kind", "minutes"],
                            "additionalProperties": false
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": { "type": "string", "enum": ["at"] },
                                "hour": { "type": "integer", "minimum": 0, "maximum": 23 },
                                "minute": { "type": "integer", "minimum": 0, "maximum": 59 },
                                "meridiem": { "type": ["string", "null"], "enum": ["am", "pm", null] },
                                "tomorrow": { "type": "boolean" }
                            },
                            "required": ["kind", "hour", "minute", "meridiem", "tomorrow"],
                            "additionalProperties": false
                        }
                    ] },
                    "temperature_f": { "type": ["number", "null"] },
                    "stop": { "anyOf": [
                        { "type": "null" },
                        { "type": "string", "enum": ["pickup", "delivery"] },
                        {
                            "type": "object",
                            "properties": { "sequence": { "type": "integer", "minimum": 1 } },
                            "required": ["sequence"],
                            "additionalProperties": false
                        }
                    ] }
                },
                "required": ["eta", "temperature_f", "stop"],
                "additionalProperties": false
            }
        },
        "required": ["intent", "probability", "lang", "values"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_invalid(result: Result<impl std::fmt::Debug, LlmError>, needle: &str) {
        match result {
            Err(e @ LlmError::InvalidOutput { .. }) => {
                assert!(e.to_string().contains(needle), "{e} should mention {needle:?}")
            }
            other => panic!("expected InvalidOutput mentioning {needle:?}, got {other:?}"),
        }
    }

    #[test]
    fn plan_with_allowed_actions_parses() {
        let plan = parse_plan(&json!({
            "actions": [
                { "kind": "create_hero_task", "title": "Check the load", "body": "Driver asks about parking", "urgent": false },
                { "kind": "tms_note", "text": "Driver asked about overnight parking" },
                { "kind": "post_slack", "text": "FYI: driver asked about parking" }
            ],
            "rationale": "No SOP covers parking questions"
        }))
        .expect("valid plan");
        assert_eq!(plan.actions.len(), 3);
        assert_eq!(plan.actions[0].kind(), ActionKind::CreateHeroTask);
    }

    #[test]
    fn plan_proposing_a_carrier_facing_action_is_refused_naming_the_kind() {
        let result = parse_plan(&json!({
            "actions": [
                { "kind": "tms_note", "text": "noted" },
                { "kind": "send_sms", "contact_id": "drv", "body": "hi" }
            ],
            "rationale": "reply to the driver"
        }));
        check_invalid(result, "`send_sms`");
        for kind in ["send_email", "set_timer", "update_stage", "call_driver"] {
            check_invalid(
                parse_plan(&json!({ "actions": [{ "kind": kind }], "rationale": "r" })),
                &format!("`{kind}`"),
            );
        }
        check_invalid(parse_plan(&json!({ "actions": [{ "text": "x" }], "rationale": "r" })), "no kind");
    }

    #[test]
    fn plan_with_unknown_fields_or_empty_text_is_invalid() {
        check_invalid(
            parse_plan(
                &json!({ "actions": [{ "kind": "tms_note", "text": "x", "contact_id": "drv" }], "rationale": "r" }),
            ),
            "contact_id",
        );
        check_invalid(
            parse_plan(&json!({ "actions": [], "rationale": "r", "confidence": 0.9 })),
            "confidence",
        );
        check_invalid(
            parse_plan(&json!({ "actions": [{ "kind": "tms_note", "text": "  " }], "rationale": "r" })),
            "empty",
        );
        check_invalid(parse_plan(&json!({ "actions": [], "rationale": "" })), "rationale");
        check_invalid(parse_plan(&json!({ "rationale": "r" })), "actions");
        check_invalid(parse_plan(&json!("just text")), "schema");
        let many: Vec<Value> =
            (0..6).map(|i| json!({ "kind": "tms_note", "text": format!("n{i}") })).collect();
        check_invalid(parse_plan(&json!({ "actions": many, "rationale": "r" })), "at most 5");
    }

    #[test]
    fn empty_plan_is_a_decision_to_do_nothing() {
        let plan =
            parse_plan(&json!({ "actions": [], "rationale": "a thank-you needs nothing" })).expect("valid");
        assert!(plan.actions.is_empty());
    }

    #[test]
    fn document_fields_parse_strictly() {
        let fields = parse_document_fields(&json!({
            "document_type": "pod", "signed": true, "exceptions_noted": false,
            "po_numbers": ["55821"], "seal": "SL-1", "pieces": 22, "temperature_f": 34.5
        }))
        .expect("valid");
        assert_eq!(fields.document_type, DocumentType::Pod);
        assert_eq!(fields.pieces, Some(22));

        check_invalid(
            parse_document_fields(&json!({
                "document_type": "invoice", "signed": null, "exceptions_noted": null,
                "po_numbers": [], "seal": null, "pieces": null, "temperature_f": null
            })),
            "invoice",
        );
        check_invalid(
            parse_document_fields(&json!({
                "document_type": "bol", "signed": null, "exceptions_noted": null,
                "po_numbers": [], "seal": null, "pieces": -3, "temperature_f": null
            })),
            "schema",
        );
        check_invalid(
            parse_document_fields(&json!({
                "document_type": "bol", "signed": null, "exceptions_noted": null,
                "po_numbers": [], "seal": null, "pieces": null, "temperature_f": 900.0
            })),
            "plausible",
        );
        check_invalid(
            parse_document_fields(&json!({
                "document_type": "bol", "signed": null, "exceptions_noted": null, "po_numbers": [],
                "seal": null, "pieces": null, "temperature_f": null, "carrier": "ACME"
            })),
            "carrier",
        );
    }

    #[test]
    fn remote_triage_parses_and_decides_confidence_in_code() {
        let t = parse_triage(&json!({
            "intent": "eta_given", "probability": 0.99, "lang": "en",
            "values": { "eta": { "kind": "in", "minutes": 45 }, "temperature_f": null, "stop": { "sequence": 2 } }
        }), "45 min out")
        .expect("valid");
        assert_eq!(t.intent, Intent::EtaGiven);
        assert!(t.confident);
        // The same reading of a message that also asks to stop the texts is not acted on.
        let held = parse_triage(
            &json!({
                "intent": "eta_given", "probability": 0.99, "lang": "en",
                "values": { "eta": { "kind": "in", "minutes": 45 }, "temperature_f": null, "stop": null }
            }),
            "45 min out. stop texting me",
        )
        .expect("valid");
        assert!(!held.confident);
        check_invalid(
            parse_triage(
                &json!({ "intent": "ack", "probability": 1.5, "lang": "en",
                "values": { "eta": null, "temperature_f": null, "stop": null } }),
                "ok",
            ),
            "probability",
        );
        check_invalid(
            parse_triage(
                &json!({ "intent": "gossip", "probability": 0.5, "lang": "en",
                "values": { "eta": null, "temperature_f": null, "stop": null } }),
                "ok",
            ),
            "gossip",
        );
    }

    #[test]
    fn drafts_and_sops_are_checked() {
        assert_eq!(parse_draft(&json!({ "body": "Hi" })).expect("valid").body, "Hi");
        check_invalid(parse_draft(&json!({ "body": "" })), "empty");
        check_invalid(parse_draft(&json!({ "text": "Hi" })), "schema");
        assert!(parse_extracted_sop(&json!({ "spec": { "id": "client_c" } })).is_ok());
        check_invalid(parse_extracted_sop(&json!({ "spec": "client_c" })), "object");
    }

    #[test]
    fn every_schema_is_a_strict_object_schema() {
        for method in LlmMethod::ALL {
            let schema = output_schema(method);
            assert_eq!(schema["type"], "object", "{method}");
            assert_eq!(schema["additionalProperties"], false, "{method}");
            let props = schema["properties"].as_object().expect("properties");
            let required: Vec<&str> =
                schema["required"].as_array().expect("required").iter().filter_map(Value::as_str).collect();
            for key in props.keys() {
                assert!(required.contains(&key.as_str()), "{method}: {key} must be required in strict mode");
            }
        }
    }
}
