//! A classified message acted on: a sync function of the state and the classification. An
//! unknown sender, an acknowledgement, confusion with no ask open and a failed triage end here;
//! an intent triage is not confident of, or `other`, goes to the planner (`ToPlanner`); any
//! other intent resolves the ask it answers, replies, notes the TMS or opens a Hero task.

use load_agent_domain::{
    ActionBody, AskTransition, Contact, ContactUpdate, DecisionPath, IntentRecord, MessageChannel, OpenAsk,
    Role, SlackTarget, Stop,
};
use load_agent_llm::{ExtractedValues, LlmOutput};
use load_agent_triage::{Intent, resolve_eta};

use super::decision::Decision;
use super::fmt_temp;
use super::message::{Classification, Message, Triage};
use crate::context::{Ctx, format_local};
use crate::templates::Fields;

/// What `act` leaves to the planner: the sender and why.
pub(super) struct ToPlanner<'a> {
    pub contact: &'a Contact,
    pub why: &'static str,
}

/// Acts on a classified message: settles what the classification alone decides, else acts on
/// its intent. Returns what is left to the planner, if anything.
pub(super) fn act<'a>(
    ctx: &Ctx<'a>,
    d: &mut Decision,
    msg: &Message<'_>,
    classification: Classification<'a>,
) -> Option<ToPlanner<'a>> {
    let (contact, open_for_sender, triage) = match classification {
        Classification::UnknownSender => {
            let mut f = ctx.fields(None, None);
            f.insert("sender", msg.from.to_string());
            f.insert("text", msg.text.to_string());
            d.hero(ctx, "hero_unknown_sender", &f, false, None);
            d.rationale(format!("message from unknown sender {}; no reply", msg.from));
            return None;
        }
        Classification::Known { contact, open_ask, triage } => (contact, open_ask, triage),
    };
    let (intent, probability, values) = match triage {
        Triage::Quick(Intent::Ack) => {
            d.filtered();
            d.intent = Some(IntentRecord { intent: "ack".into(), probability: 1.0 });
            d.rationale("acknowledgement; an acknowledgement never resolves an ask");
            return None;
        }
        Triage::Quick(Intent::Confusion) if open_for_sender.is_none() => {
            d.filtered();
            d.intent = Some(IntentRecord { intent: "confusion".into(), probability: 1.0 });
            d.rationale("confusion with no ask open for the sender");
            return None;
        }
        Triage::Quick(quick) => (quick, 1.0, ExtractedValues::default()),
        Triage::Model(LlmOutput { value, usage }) => {
            d.usage.push(usage);
            if !value.confident {
                d.intent = Some(IntentRecord {
                    intent: value.intent.as_str().into(),
                    probability: value.probability,
                });
                let why = value.abstain.map_or_else(|| "not confident".to_owned(), |a| a.to_string());
                d.rationale(format!(
                    "triage not acted on ({} at {:.2}, {why}): planner",
                    value.intent.as_str(),
                    value.probability
                ));
                return Some(ToPlanner { contact, why: "triage was not confident" });
            }
            (value.intent, value.probability, value.values)
        }
        Triage::Failed(e) => {
            d.path = DecisionPath::HeroFallback;
            let mut f = ctx.fields(None, Some(contact));
            f.insert("text", msg.text.to_string());
            f.insert("reason", e.to_string());
            d.hero(ctx, "hero_needs_human", &f, true, None);
            d.rationale(format!("triage failed: {e}"));
            return None;
        }
    };
    d.intent = Some(IntentRecord { intent: intent.as_str().into(), probability });
    d.rationale(format!("intent {} ({probability:.2})", intent.as_str()));
    act_on_intent(ctx, d, msg, contact, open_for_sender, intent, values)
}

/// Acts on an intent of a known sender.
fn act_on_intent<'a>(
    ctx: &Ctx<'a>,
    d: &mut Decision,
    msg: &Message<'_>,
    contact: &'a Contact,
    open_for_sender: Option<&OpenAsk>,
    intent: Intent,
    values: ExtractedValues,
) -> Option<ToPlanner<'a>> {
    let reply = |d: &mut Decision, template: &str, stop: Option<&Stop>, extra: Fields| {
        let mut f = ctx.fields(stop, Some(contact));
        f.extend(extra);
        let r = ctx.render(template, contact.language, &f);
        let body = match (msg.channel, &msg.email) {
            (MessageChannel::Email, Some(e)) => ActionBody::SendEmail {
                to: contact.id.clone(),
                subject: if e.subject.is_empty() {
                    format!("Load {}", ctx.load.load_id)
                } else if e.subject.to_lowercase().starts_with("re:") {
                    e.subject.clone()
                } else {
                    format!("Re: {}", e.subject)
                },
                body: r.body,
                thread: e.thread,
            },
            (MessageChannel::Slack, _) => ActionBody::PostSlack {
                target: SlackTarget::Broker { contact_id: contact.id.clone() },
                text: r.body,
            },
            _ => ActionBody::SendSms { to: contact.id.clone(), body: r.body },
        };
        d.propose(None, body);
    };
    let note = |d: &mut Decision, template: &str, stop: Option<&Stop>, extra: Fields| {
        let mut f = ctx.fields(stop, Some(contact));
        f.insert("contact_name", format!("{} ({})", contact.name, contact.role.as_str()));
        f.insert("text", msg.text.to_string());
        f.extend(extra);
        let r = ctx.render(template, load_agent_domain::Language::En, &f);
        d.propose(None, ActionBody::TmsNote { text: r.body });
    };
    let cur = ctx.current_stop();
    match intent {
        Intent::EtaGiven => {
            let ask = ctx
                .state
                .open_asks_of_type(load_agent_domain::ask_types::ETA_REQUEST)
                .min_by_key(|a| a.stop_or(cur));
            let stop_seq = ask.map(|a| a.stop_or(cur));
            if let Some(ask) = ask {
                resolve_ask(d, ask);
            }
            let stop = stop_seq.and_then(|s| ctx.stop(s)).or_else(|| ctx.stop_for(values.stop));
            let eta = match (values.eta, stop) {
                (Some(v), Some(s)) => format_local(resolve_eta(&v, ctx.now, s.offset()), s.offset()),
                _ => "see message".to_string(),
            };
            note(d, "tms_eta", stop, Fields::from([("eta", eta)]));
        }
        Intent::ArrivalReport => {
            let stop = ctx.stop(cur);
            if let Some(ask) = ctx
                .state
                .open_asks_of_type(load_agent_domain::ask_types::ETA_REQUEST)
                .find(|a| a.stop_or(cur) == cur)
            {
                resolve_ask(d, ask);
            }
            note(d, "tms_arrival", stop, Fields::new());
        }
        Intent::DepartureReport => note(d, "tms_departure", ctx.stop(cur), Fields::new()),
        Intent::TemperatureReport => {
            if let Some(ask) = ctx.state.open_asks_of_type(load_agent_domain::ask_types::REEFER_TEMP).next() {
                resolve_ask(d, ask);
            }
            let reading = values.temperature_f;
            let shown = reading.map(fmt_temp).unwrap_or_else(|| "(unreadable)".into());
            note(d, "tms_temperature", None, Fields::from([("reading", shown.clone())]));
            if let (Some(reefer), Some(r)) = (ctx.load.reefer, reading)
                && !reefer.in_range(r)
            {
                let range = format!("{}±{}°F", fmt_temp(reefer.set_point_f), fmt_temp(reefer.tolerance_f));
                let mut f = ctx.fields(None, None);
                f.insert("reading", shown);
                f.insert("range", range);
                f.insert("sender", format!("{} ({})", contact.name, contact.role.as_str()));
                let rule = ctx.sop.and_then(|s| s.spec.reefer_out_of_range.clone());
                let (urgent, hero_t) = rule
                    .as_ref()
                    .map(|r| (r.hero_task.urgent, r.hero_task.template.clone()))
                    .unwrap_or((true, "hero_reefer_out_of_range".into()));
                d.hero(ctx, &hero_t, &f, urgent, None);
                if let Some(slack) = rule.and_then(|r| r.post_slack_to_broker)
                    && let Some(b) = ctx.contact_with_role(Role::Broker)
                {
                    let r = ctx.render(&slack.template, load_agent_domain::Language::En, &f);
                    d.propose(
                        None,
                        ActionBody::PostSlack {
                            target: SlackTarget::Broker { contact_id: b.id.clone() },
                            text: r.body,
                        },
                    );
                }
                d.rationale(format!("reading {r}°F is out of range"));
            }
        }
        Intent::QuestionPo => {
            let stop = ctx.stop_for(values.stop);
            match stop.filter(|s| !s.po_numbers.is_empty()) {
                Some(s) => reply(d, "reply_po", Some(s), Fields::new()),
                None => {
                    let mut f = ctx.fields(stop, Some(contact));
                    f.insert("text", msg.text.to_string());
                    d.hero(ctx, "hero_no_po", &f, false, None);
                }
            }
        }
        Intent::QuestionAppointment => {
            reply(d, "reply_appointment", ctx.stop_for(values.stop), Fields::new())
        }
        Intent::QuestionAddress => reply(d, "reply_address", ctx.stop_for(values.stop), Fields::new()),
        Intent::Confusion => match open_for_sender {
            Some(ask) => {
                let stop = ctx.stop(ask.stop_or(cur));
                let question = ctx
                    .sops
                    .get(&ask.sop.id, ask.sop.version)
                    .and_then(|s| s.ask_rule(&ask.ask_type))
                    .map(|r| r.question.clone())
                    .unwrap_or_else(|| ask.ask_type.clone());
                let q = ctx.render(&question, contact.language, &ctx.fields(stop, Some(contact)));
                reply(d, "restate", stop, Fields::from([("question", q.body)]));
                d.rationale(format!("restating {} (the ask does not advance)", ask.id));
            }
            None => d.rationale("confusion with no ask open for the sender"),
        },
        Intent::Ack => d.rationale("acknowledgement; an acknowledgement never resolves an ask"),
        Intent::OptOut | Intent::WrongNumber => {
            let (reason, template) = if intent == Intent::OptOut {
                ("opt_out", "hero_opt_out")
            } else {
                ("wrong_number", "hero_wrong_number")
            };
            d.contact_updates
                .push(ContactUpdate::SmsBlocked { contact_id: contact.id.clone(), reason: reason.into() });
            let mut f = ctx.fields(None, Some(contact));
            f.insert("contact_name", contact.name.clone());
            f.insert("sender", msg.from.to_string());
            f.insert("text", msg.text.to_string());
            d.hero(ctx, template, &f, false, None);
        }
        Intent::ProblemReport => {
            let mut f = ctx.fields(ctx.stop(cur), Some(contact));
            f.insert("contact_name", format!("{} ({})", contact.name, contact.role.as_str()));
            f.insert("text", msg.text.to_string());
            d.hero(ctx, "hero_problem_report", &f, true, None);
            note(d, "tms_problem", ctx.stop(cur), Fields::new());
        }
        Intent::Other => return Some(ToPlanner { contact, why: "intent other" }),
    }
    None
}

fn resolve_ask(d: &mut Decision, ask: &OpenAsk) {
    d.transitions.push(AskTransition::AskResolved {
        ask_id: ask.id.clone(),
        resolved_by: d.event_id.clone(),
        resolved_at: d.now,
    });
    d.cancel_timer_of(ask);
    d.rationale(format!("resolved {}", ask.id));
}
