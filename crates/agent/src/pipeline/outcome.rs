//! Action outcomes: published and delivered are filtered (a step waits for its timer, not a
//! confirmation); a failed Hero task or internal action raised an ops alert and is filtered;
//! any other permanent failure is an urgent Hero task naming the contact and how to reach them.

use load_agent_domain::{ActionKind, Contact, DecisionPath, OutcomeStatus};

use super::decision::Decision;
use crate::context::{Ctx, first_name};

#[allow(clippy::too_many_arguments)]
pub(super) fn on_outcome(
    ctx: &Ctx<'_>,
    d: &mut Decision,
    key: &str,
    status: OutcomeStatus,
    kind: ActionKind,
    contact_id: Option<&str>,
    hero_channel: bool,
    reason: &Option<String>,
) {
    if matches!(status, OutcomeStatus::Published | OutcomeStatus::Delivered) {
        // The SOP does not wait for either: a step waits for its timer, not a confirmation.
        d.filtered();
        d.rationale(format!("{}: {key}", status.as_str()));
        return;
    }
    let internal = matches!(kind, ActionKind::SetTimer | ActionKind::CancelTimer | ActionKind::UpdateStage);
    if hero_channel || kind == ActionKind::CreateHeroTask || internal {
        d.filtered();
        d.rationale(format!(
            "{} failed ({}): an ops alert was raised; never another Hero task",
            kind.as_str(),
            if internal { "internal action" } else { "Hero channel" }
        ));
        return;
    }
    let contact = contact_id.and_then(|c| ctx.load.contact(c));
    let what = match kind {
        ActionKind::SendSms => "SMS",
        ActionKind::SendEmail => "Email",
        ActionKind::PostSlack => "Slack post",
        ActionKind::TmsNote => "TMS note",
        _ => kind.as_str(),
    };
    let to =
        contact.map(|c| format!(" to {} {}", c.role.as_str().replace('_', " "), c.name)).unwrap_or_default();
    let mut f = ctx.fields(None, contact);
    f.insert("action", format!("{what}{to}"));
    f.insert(
        "reason",
        format!("{}{}", reason.as_deref().unwrap_or("failed permanently"), contact_hint(contact)),
    );
    d.path = DecisionPath::Sop;
    d.hero(ctx, "hero_action_failed", &f, true, None);
    d.rationale(format!("{what}{to} failed permanently ({key})"));
}

fn contact_hint(c: Option<&Contact>) -> String {
    match c {
        Some(c) => {
            let how: Vec<&str> = [c.phone.as_deref(), c.email.as_deref()].into_iter().flatten().collect();
            if how.is_empty() {
                String::new()
            } else {
                format!(" (reach {} at {})", first_name(&c.name), how.join(" / "))
            }
        }
        None => String::new(),
    }
}
