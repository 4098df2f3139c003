//! The planner: a strong model, rare, for a message whose intent is not clear or is `other`.
//! It may only propose actions that do not face the carrier; unavailable, or with invalid
//! output, it becomes an urgent Hero task.

use load_agent_domain::{ActionBody, Contact, DecisionPath, Role, SlackTarget};
use load_agent_llm::{LlmOutput, PlanRequest, PlannedAction};

use super::Deps;
use super::decision::Decision;
use crate::context::Ctx;
use crate::validate::Proposal;

/// The planner (a strong model, rare). It may only propose non-carrier-facing actions; if it
/// is unavailable or its output is invalid, an urgent Hero task.
pub(super) async fn plan(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    deps: &Deps<'_>,
    contact: &Contact,
    text: &str,
    why: &str,
) {
    let req = PlanRequest {
        load_id: ctx.load.load_id.clone(),
        situation: why.to_string(),
        state_summary: state_summary(ctx),
        message: Some(text.to_string()),
        from_role: Some(contact.role.as_str().to_string()),
    };
    match deps.llm.plan(&req).await {
        Ok(LlmOutput { value, usage }) => {
            d.usage.push(usage);
            d.path = DecisionPath::Planner;
            d.rationale(format!("planner: {}", value.rationale));
            for a in value.actions {
                match a {
                    PlannedAction::CreateHeroTask { title, body, urgent } => {
                        d.propose(None, ActionBody::CreateHeroTask { title, body, urgent })
                    }
                    PlannedAction::TmsNote { text } => d.propose(None, ActionBody::TmsNote { text }),
                    PlannedAction::PostSlack { text } => match ctx.contact_with_role(Role::Broker) {
                        Some(b) => d.propose(
                            None,
                            ActionBody::PostSlack {
                                target: SlackTarget::Broker { contact_id: b.id.clone() },
                                text,
                            },
                        ),
                        None => d.proposals.push(Proposal::Rejected {
                            step: None,
                            what: "planner Slack post".into(),
                            reason: "the load has no broker contact".into(),
                        }),
                    },
                }
            }
        }
        Err(e) => {
            d.path = DecisionPath::HeroFallback;
            let mut f = ctx.fields(None, Some(contact));
            f.insert("contact_name", format!("{} ({})", contact.name, contact.role.as_str()));
            f.insert("text", text.to_string());
            f.insert("reason", format!("{why}; planner unavailable: {e}"));
            d.hero(ctx, "hero_needs_human", &f, true, None);
            d.rationale(format!("planner failed: {e}"));
        }
    }
}

fn state_summary(ctx: &Ctx<'_>) -> serde_json::Value {
    serde_json::json!({
        "stage": ctx.state.tracking.stage.as_str(),
        "current_stop": ctx.state.tracking.current_stop,
        "open_asks": ctx.state.open_asks.iter().map(|a| serde_json::json!({
            "type": a.ask_type, "stop": a.stop_sequence, "attempts": a.attempts,
            "escalations_done": a.escalations_done})).collect::<Vec<_>>(),
        "contacts": ctx.load.contacts.iter().map(|c| serde_json::json!({"id": c.id, "role": c.role.as_str()}))
            .collect::<Vec<_>>(),
    })
}
