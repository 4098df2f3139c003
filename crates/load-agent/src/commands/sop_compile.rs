//! `load-agent sop compile FILE.md`: an SOP written in plain English goes through the model's
//! `extract_sop` to a compiled spec, validated, and written for a person to review. Edit time
//! only, never on the load path.

use std::path::{Path, PathBuf};

use load_agent_agent::Templates;
use load_agent_agent::sop::{spec_from_json, spec_json_schema};
use load_agent_llm::{LlmClient, SopExtractionRequest};

/// Compiles `text` (the SOP `sop_id` in plain English) into reviewed-ready YAML.
pub async fn compile(
    llm: &dyn LlmClient,
    templates: &Templates,
    sop_id: &str,
    source: &str,
    text: &str,
) -> Result<String, String> {
    let req = SopExtractionRequest {
        sop_id: sop_id.to_string(),
        text: text.to_string(),
        spec_schema: spec_json_schema(),
    };
    let out =
        llm.extract_sop(&req).await.map_err(|e| format!("{source}: the model could not compile it: {e}"))?;
    let (sop, yaml) = spec_from_json(source, out.value.spec, templates).map_err(|e| e.to_string())?;
    Ok(format!(
        "# Compiled from {source} by `load-agent sop compile` (model {}, ${:.4}).\n\
         # Review every rule before saving it as sops/{}/v{}.yaml.\n{yaml}",
        out.usage.model_id, out.usage.cost_usd, sop.spec.id, sop.spec.version
    ))
}

/// The SOP id a file names: its stem (`client_c.md` → `client_c`).
pub fn sop_id_of(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "sop".into())
}

pub fn default_out(path: &Path) -> PathBuf {
    path.with_extension("compiled.yaml")
}

#[cfg(test)]
mod tests {
    use super::*;
    use load_agent_llm::{ExtractedSop, FakeLlm, LlmMethod};

    #[tokio::test]
    async fn a_compiled_spec_is_validated_and_rendered_for_review() {
        let templates = Templates::embedded().expect("templates");
        let llm = FakeLlm::new();
        let spec = serde_json::json!({
            "id": "client_c", "version": 1, "forbidden_roles": ["shipper"],
            "asks": {"eta_request": {
                "on": {"trigger": "delay_risk_changed", "to": "high"},
                "target": {"role": "driver", "channel": "sms"},
                "question": "eta_request", "max_attempts": 3, "retry_after_minutes": 15,
                "escalation": [{"action": "create_hero_task", "urgent": true, "template": "hero_call_driver_eta"}]}}
        });
        llm.script_extract_sop(FakeLlm::answer(LlmMethod::ExtractSop, ExtractedSop { spec }));
        let yaml = compile(
            &llm,
            &templates,
            "client_c",
            "client_c.md",
            "Ask the driver 3 times every 15 minutes...",
        )
        .await
        .expect("compiles");
        assert!(yaml.contains("retry_after_minutes: 15") && yaml.contains("Review every rule"));
        let body: String = yaml.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n");
        load_agent_agent::parse_sop("check", &body, &templates).expect("the output parses back as an SOP");
    }

    #[tokio::test]
    async fn an_invalid_spec_from_the_model_is_refused_naming_the_field() {
        let templates = Templates::embedded().expect("templates");
        let llm = FakeLlm::new();
        let spec = serde_json::json!({"id": "client_c", "version": 1, "asks": {"eta_request": {
            "on": {"trigger": "delay_risk_changed", "to": "high"}, "target": {"role": "driver", "channel": "sms"},
            "question": "no_such_template", "max_attempts": 2, "retry_after_minutes": 30}}});
        llm.script_extract_sop(FakeLlm::answer(LlmMethod::ExtractSop, ExtractedSop { spec }));
        let err = compile(&llm, &templates, "client_c", "c.md", "...").await.expect_err("refused");
        assert!(err.contains("asks.eta_request.question") && err.contains("no_such_template"), "{err}");
    }

    #[tokio::test]
    async fn no_provider_is_a_clear_error() {
        let templates = Templates::embedded().expect("templates");
        let err = compile(&FakeLlm::new(), &templates, "c", "c.md", "...").await.expect_err("unavailable");
        assert!(err.contains("could not compile"), "{err}");
    }
}
