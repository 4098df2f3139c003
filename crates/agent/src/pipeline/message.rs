//! Messages (SMS, email, Slack) classified: who sent one (a contact of the load or not) and
//! what it means, from words that need no model (an acknowledgement, a sign of confusion), else
//! from triage. What is done about it is `intent::act`'s.

use load_agent_domain::{Contact, EmailThread, MessageChannel, OpenAsk};
use load_agent_llm::{LlmError, LlmOutput, TriageRequest, TriageResult};
use load_agent_triage::Intent;

use super::Deps;
use crate::context::Ctx;

/// One message event: its channel, sender and text.
pub(super) struct Message<'e> {
    pub channel: MessageChannel,
    pub from: &'e str,
    pub text: &'e str,
    /// How to answer an email: its subject and thread (`None` for SMS and Slack).
    pub email: Option<EmailReply>,
}

pub(super) struct EmailReply {
    pub subject: String,
    pub thread: EmailThread,
}

/// What a message is, before anything is decided about it.
pub(super) enum Classification<'a> {
    /// The sender is not a contact of the load.
    UnknownSender,
    Known {
        contact: &'a Contact,
        /// The ask open for the sender, if any (the first one).
        open_ask: Option<&'a OpenAsk>,
        triage: Triage,
    },
}

/// What the message means.
pub(super) enum Triage {
    /// Words that need no model to tell (`quick_intent`).
    Quick(Intent),
    /// The triage model's answer (acted on only when confident) and its usage.
    Model(LlmOutput<TriageResult>),
    /// Triage failed.
    Failed(LlmError),
}

/// The sender, the ask open for them and the intent; triage (the model) is called only when
/// the sender is known and the words alone do not tell.
pub(super) async fn classify<'a>(ctx: &Ctx<'a>, deps: &Deps<'_>, msg: &Message<'_>) -> Classification<'a> {
    let Some(contact) = ctx.load.resolve_sender(msg.from) else {
        return Classification::UnknownSender;
    };
    let open_ask = ctx.state.open_asks.iter().find(|a| a.target_contact == contact.id);
    let triage = match quick_intent(msg.text) {
        Some(quick) => Triage::Quick(quick),
        None => {
            let req = TriageRequest {
                text: msg.text.to_string(),
                lang: Some(contact.language.as_str().to_string()),
                from_role: Some(contact.role.as_str().to_string()),
                open_ask: open_ask.map(|a| a.ask_type.clone()),
            };
            match deps.llm.triage(&req).await {
                Ok(out) => Triage::Model(out),
                Err(e) => Triage::Failed(e),
            }
        }
    };
    Classification::Known { contact, open_ask, triage }
}

/// Words that need no model to tell: an acknowledgement or a sign of confusion.
fn quick_intent(text: &str) -> Option<Intent> {
    let t: String = text.trim().to_lowercase();
    let t = t.trim_end_matches(['.', '!']).trim();
    const ACKS: &[&str] = &[
        "ok",
        "okay",
        "k",
        "kk",
        "ok thanks",
        "ok thx",
        "10-4",
        "10 4",
        "104",
        "👍",
        "👌",
        "thanks",
        "thank you",
        "thx",
        "ty",
        "got it",
        "roger",
        "roger that",
        "copy",
        "copy that",
        "sounds good",
        "will do",
        "gracias",
        "ok gracias",
        "va",
        "vale",
        "sale",
        "entendido",
        "de acuerdo",
        "okey",
    ];
    const CONFUSED: &[&str] = &[
        "?",
        "??",
        "???",
        "huh",
        "huh?",
        "what?",
        "que?",
        "qué?",
        "¿?",
        "no entiendo",
        "no entendí",
        "??? what",
    ];
    if ACKS.contains(&t) {
        Some(Intent::Ack)
    } else if CONFUSED.contains(&t) {
        Some(Intent::Confusion)
    } else {
        None
    }
}
