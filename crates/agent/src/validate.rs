//! Validation before commit (behavior.md §8): the contact belongs to the load, the channel is
//! supported by the contact now, the role is not forbidden by the SOP, the key is not already
//! committed. A rejected action becomes a non-urgent Hero task saying what could not be sent
//! and why; if it took an ask step the replacement keeps the step (its `set_timer` stands).

use load_agent_domain::{
    Action, ActionBody, ActionKeys, AskStepRef, ContactUpdate, MessageChannel, SlackTarget,
};

use crate::context::Ctx;

/// An action a decision proposes, or one it already knows it cannot send.
#[derive(Debug, Clone)]
pub(crate) enum Proposal {
    Ready { step: Option<AskStepRef>, body: ActionBody },
    Rejected { step: Option<AskStepRef>, what: String, reason: String },
}

/// Why an action cannot be sent, or `None` when it can.
fn check(ctx: &Ctx<'_>, blocked_now: &[&str], body: &ActionBody) -> Option<String> {
    let (contact_id, channel) = match body {
        ActionBody::SendSms { to, .. } => (to.as_str(), MessageChannel::Sms),
        ActionBody::SendEmail { to, .. } => (to.as_str(), MessageChannel::Email),
        ActionBody::PostSlack { target: SlackTarget::Broker { contact_id }, .. } => {
            (contact_id.as_str(), MessageChannel::Slack)
        }
        _ => return None,
    };
    let Some(contact) = ctx.load.contact(contact_id) else {
        return Some(format!("{contact_id:?} is not a contact of this load"));
    };
    if let Some(sop) = ctx.sop
        && sop.forbids(contact.role)
    {
        return Some(format!("the SOP forbids contacting the {}", contact.role.as_str()));
    }
    let blocked = channel == MessageChannel::Sms && blocked_now.contains(&contact.id.as_str());
    if blocked || !ctx.state.supports(contact, channel) {
        let why = match (channel, ctx.state.sms_blocked.get(&contact.id).map(String::as_str)) {
            (MessageChannel::Sms, Some(reason)) => {
                format!("{} can no longer get SMS ({reason})", contact.name)
            }
            (MessageChannel::Sms, None) if blocked => format!("{} can no longer get SMS", contact.name),
            (MessageChannel::Sms, None) => format!("{} has no phone number", contact.name),
            (MessageChannel::Email, _) => format!("{} has no email address", contact.name),
            (MessageChannel::Slack, _) => format!("{} has no Slack handle", contact.name),
        };
        return Some(why);
    }
    None
}

fn describe(body: &ActionBody) -> String {
    match body {
        ActionBody::SendSms { to, .. } => format!("SMS to {to}"),
        ActionBody::SendEmail { to, .. } => format!("email to {to}"),
        ActionBody::PostSlack { .. } => "Slack post".to_string(),
        other => other.kind().as_str().to_string(),
    }
}

fn replacement(ctx: &Ctx<'_>, what: &str, reason: &str, original: Option<&str>) -> ActionBody {
    let mut body = format!("Could not send {what}: {reason}. Please reach out by hand.");
    if let Some(text) = original {
        body.push_str(&format!(" The message was: \"{text}\""));
    }
    ActionBody::CreateHeroTask {
        title: format!("Could not send {what} (load {})", ctx.load.load_id),
        body,
        urgent: false,
    }
}

/// Validates the proposals, replaces rejected ones, and assigns idempotency keys.
pub(crate) fn finish_actions(
    ctx: &Ctx<'_>,
    load_id: &str,
    event_id: &str,
    contact_updates: &[ContactUpdate],
    proposals: Vec<Proposal>,
) -> (Vec<Action>, Vec<String>) {
    let blocked_now: Vec<&str> = contact_updates
        .iter()
        .map(|u| match u {
            ContactUpdate::SmsBlocked { contact_id, .. } => contact_id.as_str(),
        })
        .collect();
    let mut rejections = Vec::new();
    let mut checked: Vec<(Option<AskStepRef>, ActionBody)> = Vec::with_capacity(proposals.len());
    for p in proposals {
        match p {
            Proposal::Ready { step, body } => match check(ctx, &blocked_now, &body) {
                None => checked.push((step, body)),
                Some(reason) => {
                    let what = describe(&body);
                    rejections.push(format!("{what}: {reason}"));
                    checked.push((step, replacement(ctx, &what, &reason, body.text())));
                }
            },
            Proposal::Rejected { step, what, reason } => {
                rejections.push(format!("{what}: {reason}"));
                checked.push((step, replacement(ctx, &what, &reason, None)));
            }
        }
    }
    let mut actions = assign_keys(load_id, event_id, &checked);
    // A key already committed is a decision bug: replace the action, keep the step.
    let mut replaced = false;
    for (i, a) in actions.iter().enumerate() {
        if ctx.state.committed_action_keys.contains(a.key.as_str()) {
            let reason = format!("its key {} was already committed", a.key);
            rejections.push(format!("{}: {reason}", describe(&a.body)));
            checked[i].1 = replacement(ctx, &describe(&a.body), &reason, None);
            replaced = true;
        }
    }
    if replaced {
        actions = assign_keys(load_id, event_id, &checked);
        actions.retain(|a| !ctx.state.committed_action_keys.contains(a.key.as_str()));
    }
    (actions, rejections)
}

fn assign_keys(load_id: &str, event_id: &str, checked: &[(Option<AskStepRef>, ActionBody)]) -> Vec<Action> {
    let mut keys = ActionKeys::new(load_id, event_id);
    for (step, body) in checked {
        match step {
            Some(s) => keys.step(s.clone(), body.clone()),
            None => keys.by_event(body.clone()),
        };
    }
    keys.into_actions()
}
