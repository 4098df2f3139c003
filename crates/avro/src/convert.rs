//! Conversions between the domain types and the wire structs: `From<&domain>` (infallible) for
//! writing, `TryFrom<wire>` for reading, which checks what Avro cannot express (documented
//! string values, `u32` ranges, RFC 3339 appointments) and names the bad field.

use chrono::{DateTime, SecondsFormat, Utc};
use load_agent_domain as d;

use crate::error::{FieldError, FieldProblem};
use crate::wire::{self as w, TimestampMicros};

// ----- scalar helpers -----

pub(crate) fn ts(t: &DateTime<Utc>) -> TimestampMicros {
    TimestampMicros(t.timestamp_micros())
}

pub(crate) fn utc(t: TimestampMicros, field: &'static str) -> Result<DateTime<Utc>, FieldError> {
    DateTime::from_timestamp_micros(t.0).ok_or_else(|| {
        FieldError::new(
            field,
            FieldProblem::BadTimestamp {
                found: t.0.to_string(),
                reason: "microseconds outside the supported range".into(),
            },
        )
    })
}

fn long(v: u32) -> i64 {
    i64::from(v)
}

/// `u64` counters saturate at `i64::MAX` on the wire (no token count comes near it).
fn long_u64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn u32_of(v: i64, field: &'static str) -> Result<u32, FieldError> {
    u32::try_from(v).map_err(|_| {
        FieldError::new(field, FieldProblem::OutOfRange { found: v, expected: "0..=4294967295" })
    })
}

fn opt_u32(v: Option<i64>, field: &'static str) -> Result<Option<u32>, FieldError> {
    v.map(|v| u32_of(v, field)).transpose()
}

pub(crate) fn u64_of(v: i64, field: &'static str) -> Result<u64, FieldError> {
    u64::try_from(v).map_err(|_| {
        FieldError::new(field, FieldProblem::OutOfRange { found: v, expected: "a non-negative long" })
    })
}

pub(crate) fn symbol<T>(
    value: String,
    field: &'static str,
    parse: impl FnOnce(&str) -> Option<T>,
    expected: &'static str,
) -> Result<T, FieldError> {
    parse(&value)
        .ok_or_else(|| FieldError::new(field, FieldProblem::UnknownSymbol { found: value, expected }))
}

fn list<W, D>(
    items: Vec<W>,
    field: &'static str,
    f: impl Fn(W) -> Result<D, FieldError>,
) -> Result<Vec<D>, FieldError> {
    items.into_iter().enumerate().map(|(i, x)| f(x).map_err(|e| e.at(i).under(field))).collect()
}

fn nested<W, D>(
    value: W,
    field: &'static str,
    f: impl FnOnce(W) -> Result<D, FieldError>,
) -> Result<D, FieldError> {
    f(value).map_err(|e| e.under(field))
}

// ----- the documented symbols of each enum (`FieldProblem::UnknownSymbol`'s `expected`) -----
// The domain's `spelled_enum!` owns the spellings; a test checks each list against them.

pub(crate) const ROLES: &str = "driver|carrier_dispatcher|broker|shipper|receiver";
pub(crate) const LANGUAGES: &str = "en|es";
pub(crate) const STOP_KINDS: &str = "pickup|delivery";
pub(crate) const RISK_BANDS: &str = "low|medium|high";
pub(crate) const THREADS: &str = "main|new";
pub(crate) const CHANNELS: &str = "sms|email|slack";
pub(crate) const DOCUMENT_TYPES: &str = "bol|pod|lumper_receipt|other";
pub(crate) const STOP_STATUSES: &str = "arrived|departed|delivered";
pub(crate) const OUTCOME_STATUSES: &str = "published|delivered|failed_permanent|failed";
pub(crate) const ACTION_KINDS: &str =
    "send_sms|send_email|post_slack|tms_note|set_timer|cancel_timer|create_hero_task|update_stage|noop";
pub(crate) const DESTINATIONS: &str = "sms|email|slack|tms|hero|load_status|timer|none";
/// The value an `ActionCommand`'s `destination` takes for a noop, which has no destination and
/// is never published: the one wire-only symbol of [`DESTINATIONS`].
pub const NO_DESTINATION: &str = "none";
pub(crate) const STAGES: &str = "to_pickup|at_pickup|to_delivery|at_delivery|delivered";
pub(crate) const STEP_KINDS: &str = "attempt|escalation";
pub(crate) const PATHS: &str = "filtered|sop|triage|planner|hero_fallback|validation";

// ----- InboundEvent -----

impl From<&d::InboundEvent> for w::InboundEvent {
    fn from(e: &d::InboundEvent) -> Self {
        w::InboundEvent {
            event_id: e.event_id.clone(),
            load_id: e.load_id.clone(),
            occurred_at: ts(&e.occurred_at),
            payload: w::EventPayload::from(&e.kind),
        }
    }
}

impl TryFrom<w::InboundEvent> for d::InboundEvent {
    type Error = FieldError;

    fn try_from(e: w::InboundEvent) -> Result<Self, FieldError> {
        Ok(d::InboundEvent {
            occurred_at: utc(e.occurred_at, "occurred_at")?,
            kind: nested(e.payload, "payload", d::EventKind::try_from)?,
            event_id: e.event_id,
            load_id: e.load_id,
        })
    }
}

impl From<&d::EventKind> for w::EventPayload {
    fn from(k: &d::EventKind) -> Self {
        use d::EventKind as K;
        match k {
            K::LoadRegistered { load } => w::EventPayload::LoadRegistered(w::LoadRegistered::from(load)),
            K::Sms { from, text } => w::EventPayload::Sms(w::Sms { from: from.clone(), text: text.clone() }),
            K::Email { from, subject, text, thread } => w::EventPayload::Email(w::Email {
                from: from.clone(),
                subject: subject.clone(),
                text: text.clone(),
                thread: thread.map(|t| t.as_str().to_owned()),
            }),
            K::Slack { from, text } => {
                w::EventPayload::Slack(w::Slack { from: from.clone(), text: text.clone() })
            }
            K::Ping { stop, delay_risk, recorded_at, lat, lon } => w::EventPayload::Ping(w::Ping {
                stop: long(*stop),
                delay_risk: delay_risk.as_str().to_owned(),
                recorded_at: ts(recorded_at),
                lat: *lat,
                lon: *lon,
            }),
            K::TimerFired { timer_id, ask_id, attempt, fire_at } => {
                w::EventPayload::TimerFired(w::TimerFired {
                    timer_id: timer_id.clone(),
                    ask_id: ask_id.clone(),
                    attempt: long(*attempt),
                    fire_at: ts(fire_at),
                })
            }
            K::Attachment { from, channel, filename, content_type, content_ref, extracted } => {
                w::EventPayload::Attachment(w::Attachment {
                    from: from.clone(),
                    channel: channel.as_str().to_owned(),
                    filename: filename.clone(),
                    content_type: content_type.clone(),
                    content_ref: content_ref.clone(),
                    extracted: extracted.as_ref().map(w::DocumentFields::from),
                })
            }
            K::StopStatus { stop, status, source } => w::EventPayload::StopStatus(w::StopStatus {
                stop: long(*stop),
                status: status.as_str().to_owned(),
                source: source.clone(),
            }),
            K::ActionOutcome { idempotency_key, status, action_kind, contact_id, hero_channel, reason } => {
                w::EventPayload::ActionOutcome(w::ActionOutcome {
                    idempotency_key: idempotency_key.clone(),
                    status: status.as_str().to_owned(),
                    action_kind: action_kind.as_str().to_owned(),
                    contact_id: contact_id.clone(),
                    hero_channel: *hero_channel,
                    reason: reason.clone(),
                })
            }
        }
    }
}

impl TryFrom<w::EventPayload> for d::EventKind {
    type Error = FieldError;

    fn try_from(p: w::EventPayload) -> Result<Self, FieldError> {
        use d::EventKind as K;
        Ok(match p {
            w::EventPayload::LoadRegistered(l) => K::LoadRegistered { load: d::LoadRegistered::try_from(l)? },
            w::EventPayload::Sms(m) => K::Sms { from: m.from, text: m.text },
            w::EventPayload::Email(m) => K::Email {
                from: m.from,
                subject: m.subject,
                text: m.text,
                thread: m.thread.map(|t| symbol(t, "thread", d::EmailThread::parse, THREADS)).transpose()?,
            },
            w::EventPayload::Slack(m) => K::Slack { from: m.from, text: m.text },
            w::EventPayload::Ping(p) => K::Ping {
                stop: u32_of(p.stop, "stop")?,
                delay_risk: symbol(p.delay_risk, "delay_risk", d::RiskBand::parse, RISK_BANDS)?,
                recorded_at: utc(p.recorded_at, "recorded_at")?,
                lat: p.lat,
                lon: p.lon,
            },
            w::EventPayload::TimerFired(t) => K::TimerFired {
                attempt: u32_of(t.attempt, "attempt")?,
                fire_at: utc(t.fire_at, "fire_at")?,
                timer_id: t.timer_id,
                ask_id: t.ask_id,
            },
            w::EventPayload::Attachment(a) => K::Attachment {
                channel: symbol(a.channel, "channel", d::MessageChannel::parse, CHANNELS)?,
                extracted: a
                    .extracted
                    .map(|x| nested(x, "extracted", d::DocumentFields::try_from))
                    .transpose()?,
                from: a.from,
                filename: a.filename,
                content_type: a.content_type,
                content_ref: a.content_ref,
            },
            w::EventPayload::StopStatus(s) => K::StopStatus {
                stop: u32_of(s.stop, "stop")?,
                status: symbol(s.status, "status", d::StopStatusKind::parse, STOP_STATUSES)?,
                source: s.source,
            },
            w::EventPayload::ActionOutcome(o) => K::ActionOutcome {
                status: symbol(o.status, "status", d::OutcomeStatus::parse, OUTCOME_STATUSES)?,
                action_kind: symbol(o.action_kind, "action_kind", d::ActionKind::parse, ACTION_KINDS)?,
                idempotency_key: o.idempotency_key,
                contact_id: o.contact_id,
                hero_channel: o.hero_channel,
                reason: o.reason,
            },
        })
    }
}

impl From<&d::LoadRegistered> for w::LoadRegistered {
    fn from(l: &d::LoadRegistered) -> Self {
        w::LoadRegistered {
            load_id: l.load_id.clone(),
            client: l.client.clone(),
            sop_version: l.sop_version.map(long),
            contacts: l.contacts.iter().map(w::Contact::from).collect(),
            stops: l.stops.iter().map(w::Stop::from).collect(),
            reefer: l.reefer.map(|r| w::Reefer { set_point_f: r.set_point_f, tolerance_f: r.tolerance_f }),
        }
    }
}

impl TryFrom<w::LoadRegistered> for d::LoadRegistered {
    type Error = FieldError;

    fn try_from(l: w::LoadRegistered) -> Result<Self, FieldError> {
        Ok(d::LoadRegistered {
            sop_version: opt_u32(l.sop_version, "sop_version")?,
            contacts: list(l.contacts, "contacts", d::Contact::try_from)?,
            stops: list(l.stops, "stops", d::Stop::try_from)?,
            reefer: l.reefer.map(|r| d::Reefer { set_point_f: r.set_point_f, tolerance_f: r.tolerance_f }),
            load_id: l.load_id,
            client: l.client,
        })
    }
}

impl From<&d::Contact> for w::Contact {
    fn from(c: &d::Contact) -> Self {
        w::Contact {
            id: c.id.clone(),
            role: c.role.as_str().to_owned(),
            name: c.name.clone(),
            phone: c.phone.clone(),
            email: c.email.clone(),
            slack: c.slack.clone(),
            language: c.language.as_str().to_owned(),
        }
    }
}

impl TryFrom<w::Contact> for d::Contact {
    type Error = FieldError;

    fn try_from(c: w::Contact) -> Result<Self, FieldError> {
        Ok(d::Contact {
            role: symbol(c.role, "role", d::Role::parse, ROLES)?,
            language: symbol(c.language, "language", d::Language::parse, LANGUAGES)?,
            id: c.id,
            name: c.name,
            phone: c.phone,
            email: c.email,
            slack: c.slack,
        })
    }
}

impl From<&d::Stop> for w::Stop {
    fn from(s: &d::Stop) -> Self {
        w::Stop {
            sequence: long(s.sequence),
            kind: s.kind.as_str().to_owned(),
            name: s.name.clone(),
            address: s.address.clone(),
            appointment: s.appointment.to_rfc3339_opts(SecondsFormat::AutoSi, false),
            po_numbers: s.po_numbers.clone(),
            reference: s.reference.clone(),
        }
    }
}

impl TryFrom<w::Stop> for d::Stop {
    type Error = FieldError;

    fn try_from(s: w::Stop) -> Result<Self, FieldError> {
        let appointment = DateTime::parse_from_rfc3339(&s.appointment).map_err(|e| {
            FieldError::new(
                "appointment",
                FieldProblem::BadTimestamp {
                    reason: format!("not an RFC 3339 timestamp with offset ({e})"),
                    found: s.appointment.clone(),
                },
            )
        })?;
        Ok(d::Stop {
            sequence: u32_of(s.sequence, "sequence")?,
            kind: symbol(s.kind, "kind", d::StopKind::parse, STOP_KINDS)?,
            appointment,
            name: s.name,
            address: s.address,
            po_numbers: s.po_numbers,
            reference: s.reference,
        })
    }
}

impl From<&d::DocumentFields> for w::DocumentFields {
    fn from(f: &d::DocumentFields) -> Self {
        w::DocumentFields {
            document_type: f.document_type.as_str().to_owned(),
            signed: f.signed,
            exceptions_noted: f.exceptions_noted,
            po_numbers: f.po_numbers.clone(),
            seal: f.seal.clone(),
            pieces: f.pieces.map(long),
            temperature_f: f.temperature_f,
        }
    }
}

impl TryFrom<w::DocumentFields> for d::DocumentFields {
    type Error = FieldError;

    fn try_from(f: w::DocumentFields) -> Result<Self, FieldError> {
        Ok(d::DocumentFields {
            document_type: symbol(f.document_type, "document_type", d::DocumentType::parse, DOCUMENT_TYPES)?,
            pieces: opt_u32(f.pieces, "pieces")?,
            signed: f.signed,
            exceptions_noted: f.exceptions_noted,
            po_numbers: f.po_numbers,
            seal: f.seal,
            temperature_f: f.temperature_f,
        })
    }
}

// ----- Action bodies -----

/// Resolved addresses of the contact an action addresses, filled into the `ActionCommand`
/// bodies so that delivery services need not look contacts up. Empty in the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addresses {
    /// For `send_sms`: the contact's phone.
    pub phone: Option<String>,
    /// For `send_email`: the contact's email.
    pub email: Option<String>,
    /// For `post_slack` to a broker: the contact's Slack channel or handle.
    pub slack_channel: Option<String>,
}

impl Addresses {
    pub const NONE: Addresses = Addresses { phone: None, email: None, slack_channel: None };

    /// The addresses of a contact of the load.
    pub fn of_contact(contact: &d::Contact) -> Self {
        Addresses {
            phone: contact.phone.clone(),
            email: contact.email.clone(),
            slack_channel: contact.slack.clone(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.phone.is_none() && self.email.is_none() && self.slack_channel.is_none()
    }
}

pub(crate) fn body_to_wire(b: &d::ActionBody, addresses: &Addresses) -> w::ActionBody {
    use d::ActionBody as B;
    match b {
        B::SendSms { to, body } => w::ActionBody::SendSms(w::SendSms {
            to: to.clone(),
            to_phone: addresses.phone.clone(),
            body: body.clone(),
        }),
        B::SendEmail { to, subject, body, thread } => w::ActionBody::SendEmail(w::SendEmail {
            to: to.clone(),
            to_email: addresses.email.clone(),
            subject: subject.clone(),
            body: body.clone(),
            thread: thread.as_str().to_owned(),
        }),
        B::PostSlack { target, text } => w::ActionBody::PostSlack(w::PostSlack {
            target: match target {
                d::SlackTarget::Broker { contact_id } => {
                    w::SlackTarget::SlackBroker(w::SlackBroker { contact_id: contact_id.clone() })
                }
                d::SlackTarget::HeroChannel => w::SlackTarget::SlackHeroChannel(w::SlackHeroChannel {}),
            },
            channel: addresses.slack_channel.clone(),
            text: text.clone(),
        }),
        B::TmsNote { text } => w::ActionBody::TmsNote(w::TmsNote { text: text.clone() }),
        B::SetTimer { timer_id, ask_id, attempt, fire_at } => w::ActionBody::SetTimer(w::SetTimer {
            timer_id: timer_id.clone(),
            ask_id: ask_id.clone(),
            attempt: long(*attempt),
            fire_at: ts(fire_at),
        }),
        B::CancelTimer { timer_id } => {
            w::ActionBody::CancelTimer(w::CancelTimer { timer_id: timer_id.clone() })
        }
        B::CreateHeroTask { title, body, urgent } => w::ActionBody::CreateHeroTask(w::CreateHeroTask {
            title: title.clone(),
            body: body.clone(),
            urgent: *urgent,
        }),
        B::UpdateStage { stage, current_stop } => w::ActionBody::UpdateStage(w::UpdateStage {
            stage: stage.as_str().to_owned(),
            current_stop: long(*current_stop),
        }),
        B::Noop { reason } => w::ActionBody::Noop(w::Noop { reason: reason.clone() }),
    }
}

/// The domain body and the resolved addresses it carried.
pub(crate) fn body_from_wire(b: w::ActionBody) -> Result<(d::ActionBody, Addresses), FieldError> {
    use d::ActionBody as B;
    let mut addresses = Addresses::default();
    let body = match b {
        w::ActionBody::SendSms(s) => {
            addresses.phone = s.to_phone;
            B::SendSms { to: s.to, body: s.body }
        }
        w::ActionBody::SendEmail(e) => {
            addresses.email = e.to_email;
            B::SendEmail {
                thread: symbol(e.thread, "thread", d::EmailThread::parse, THREADS)?,
                to: e.to,
                subject: e.subject,
                body: e.body,
            }
        }
        w::ActionBody::PostSlack(p) => {
            addresses.slack_channel = p.channel;
            B::PostSlack {
                target: match p.target {
                    w::SlackTarget::SlackBroker(b) => d::SlackTarget::Broker { contact_id: b.contact_id },
                    w::SlackTarget::SlackHeroChannel(_) => d::SlackTarget::HeroChannel,
                },
                text: p.text,
            }
        }
        w::ActionBody::TmsNote(n) => B::TmsNote { text: n.text },
        w::ActionBody::SetTimer(t) => B::SetTimer {
            attempt: u32_of(t.attempt, "attempt")?,
            fire_at: utc(t.fire_at, "fire_at")?,
            timer_id: t.timer_id,
            ask_id: t.ask_id,
        },
        w::ActionBody::CancelTimer(c) => B::CancelTimer { timer_id: c.timer_id },
        w::ActionBody::CreateHeroTask(h) => {
            B::CreateHeroTask { title: h.title, body: h.body, urgent: h.urgent }
        }
        w::ActionBody::UpdateStage(u) => B::UpdateStage {
            stage: symbol(u.stage, "stage", d::Stage::parse, STAGES)?,
            current_stop: u32_of(u.current_stop, "current_stop")?,
        },
        w::ActionBody::Noop(n) => B::Noop { reason: n.reason },
    };
    Ok((body, addresses))
}

impl From<&d::Action> for w::Action {
    fn from(a: &d::Action) -> Self {
        w::Action {
            key: a.key.clone(),
            ask: a.ask.as_ref().map(|s| w::AskStepRef {
                ask_id: s.ask_id.clone(),
                ask_type: s.ask_type.clone(),
                attempt: long(s.attempt),
            }),
            body: body_to_wire(&a.body, &Addresses::NONE),
        }
    }
}

impl TryFrom<w::Action> for d::Action {
    type Error = FieldError;

    fn try_from(a: w::Action) -> Result<Self, FieldError> {
        Ok(d::Action {
            ask: a
                .ask
                .map(|s| {
                    Ok::<_, FieldError>(d::AskStepRef {
                        attempt: u32_of(s.attempt, "attempt").map_err(|e| e.under("ask"))?,
                        ask_id: s.ask_id,
                        ask_type: s.ask_type,
                    })
                })
                .transpose()?,
            body: nested(a.body, "body", |b| body_from_wire(b).map(|(body, _)| body))?,
            key: a.key,
        })
    }
}

// ----- DecisionRecord -----

impl From<&d::SopRef> for w::SopRef {
    fn from(s: &d::SopRef) -> Self {
        w::SopRef { id: s.id.clone(), version: long(s.version) }
    }
}

impl TryFrom<w::SopRef> for d::SopRef {
    type Error = FieldError;

    fn try_from(s: w::SopRef) -> Result<Self, FieldError> {
        Ok(d::SopRef { version: u32_of(s.version, "version")?, id: s.id })
    }
}

impl From<&d::AskTransition> for w::AskTransition {
    fn from(t: &d::AskTransition) -> Self {
        use d::AskTransition as T;
        match t {
            T::AskOpened {
                ask_id,
                ask_type,
                target_contact,
                sop,
                opened_at,
                max_attempts,
                stop_sequence,
            } => w::AskTransition::AskOpened(w::AskOpened {
                ask_id: ask_id.clone(),
                ask_type: ask_type.clone(),
                target_contact: target_contact.clone(),
                sop: w::SopRef::from(sop),
                opened_at: ts(opened_at),
                max_attempts: long(*max_attempts),
                stop_sequence: stop_sequence.map(long),
            }),
            T::AskStepTaken { ask_id, step, step_kind, timer } => {
                w::AskTransition::AskStepTaken(w::AskStepTaken {
                    ask_id: ask_id.clone(),
                    step: long(*step),
                    step_kind: d::StepKind::as_str(*step_kind).to_owned(),
                    timer: timer
                        .as_ref()
                        .map(|t| w::TimerRef { timer_id: t.timer_id.clone(), fire_at: ts(&t.fire_at) }),
                })
            }
            T::AskResolved { ask_id, resolved_by, resolved_at } => {
                w::AskTransition::AskResolved(w::AskResolved {
                    ask_id: ask_id.clone(),
                    resolved_by: resolved_by.clone(),
                    resolved_at: ts(resolved_at),
                })
            }
            T::AskCancelled { ask_id, reason, cancelled_at } => {
                w::AskTransition::AskCancelled(w::AskCancelled {
                    ask_id: ask_id.clone(),
                    reason: reason.clone(),
                    cancelled_at: ts(cancelled_at),
                })
            }
        }
    }
}

impl TryFrom<w::AskTransition> for d::AskTransition {
    type Error = FieldError;

    fn try_from(t: w::AskTransition) -> Result<Self, FieldError> {
        use d::AskTransition as T;
        Ok(match t {
            w::AskTransition::AskOpened(o) => T::AskOpened {
                sop: nested(o.sop, "sop", d::SopRef::try_from)?,
                opened_at: utc(o.opened_at, "opened_at")?,
                max_attempts: u32_of(o.max_attempts, "max_attempts")?,
                stop_sequence: opt_u32(o.stop_sequence, "stop_sequence")?,
                ask_id: o.ask_id,
                ask_type: o.ask_type,
                target_contact: o.target_contact,
            },
            w::AskTransition::AskStepTaken(s) => T::AskStepTaken {
                step: u32_of(s.step, "step")?,
                step_kind: symbol(s.step_kind, "step_kind", d::StepKind::parse, STEP_KINDS)?,
                timer: s
                    .timer
                    .map(|t| {
                        Ok::<_, FieldError>(d::TimerRef {
                            fire_at: utc(t.fire_at, "fire_at").map_err(|e| e.under("timer"))?,
                            timer_id: t.timer_id,
                        })
                    })
                    .transpose()?,
                ask_id: s.ask_id,
            },
            w::AskTransition::AskResolved(r) => T::AskResolved {
                resolved_at: utc(r.resolved_at, "resolved_at")?,
                ask_id: r.ask_id,
                resolved_by: r.resolved_by,
            },
            w::AskTransition::AskCancelled(c) => T::AskCancelled {
                cancelled_at: utc(c.cancelled_at, "cancelled_at")?,
                ask_id: c.ask_id,
                reason: c.reason,
            },
        })
    }
}

impl From<&d::ContactUpdate> for w::ContactUpdate {
    fn from(u: &d::ContactUpdate) -> Self {
        match u {
            d::ContactUpdate::SmsBlocked { contact_id, reason } => {
                w::ContactUpdate::SmsBlocked(w::SmsBlocked {
                    contact_id: contact_id.clone(),
                    reason: reason.clone(),
                })
            }
        }
    }
}

impl From<w::ContactUpdate> for d::ContactUpdate {
    fn from(u: w::ContactUpdate) -> Self {
        match u {
            w::ContactUpdate::SmsBlocked(b) => {
                d::ContactUpdate::SmsBlocked { contact_id: b.contact_id, reason: b.reason }
            }
        }
    }
}

impl From<&d::LlmUsage> for w::LlmUsage {
    fn from(u: &d::LlmUsage) -> Self {
        w::LlmUsage {
            method: u.method.clone(),
            model_id: u.model_id.clone(),
            input_tokens: long_u64(u.input_tokens),
            output_tokens: long_u64(u.output_tokens),
            cost_usd: u.cost_usd,
            latency_ms: long_u64(u.latency_ms),
        }
    }
}

impl TryFrom<w::LlmUsage> for d::LlmUsage {
    type Error = FieldError;

    fn try_from(u: w::LlmUsage) -> Result<Self, FieldError> {
        Ok(d::LlmUsage {
            input_tokens: u64_of(u.input_tokens, "input_tokens")?,
            output_tokens: u64_of(u.output_tokens, "output_tokens")?,
            latency_ms: u64_of(u.latency_ms, "latency_ms")?,
            method: u.method,
            model_id: u.model_id,
            cost_usd: u.cost_usd,
        })
    }
}

impl From<&d::DecisionRecord> for w::DecisionRecord {
    fn from(r: &d::DecisionRecord) -> Self {
        w::DecisionRecord {
            decision_id: r.decision_id.clone(),
            load_id: r.load_id.clone(),
            trigger_event_id: r.trigger_event_id.clone(),
            trigger_kind: r.trigger_kind.clone(),
            decided_at: ts(&r.decided_at),
            sop: r.sop.as_ref().map(w::SopRef::from),
            path: r.path.as_str().to_owned(),
            transitions: r.transitions.iter().map(w::AskTransition::from).collect(),
            contact_updates: r.contact_updates.iter().map(w::ContactUpdate::from).collect(),
            actions: r.actions.iter().map(w::Action::from).collect(),
            rationale: r.rationale.clone(),
            intent: r
                .intent
                .as_ref()
                .map(|i| w::IntentRecord { intent: i.intent.clone(), probability: i.probability }),
            llm_usage: r.llm_usage.iter().map(w::LlmUsage::from).collect(),
        }
    }
}

impl TryFrom<w::DecisionRecord> for d::DecisionRecord {
    type Error = FieldError;

    fn try_from(r: w::DecisionRecord) -> Result<Self, FieldError> {
        Ok(d::DecisionRecord {
            decided_at: utc(r.decided_at, "decided_at")?,
            sop: r.sop.map(|s| nested(s, "sop", d::SopRef::try_from)).transpose()?,
            path: symbol(r.path, "path", d::DecisionPath::parse, PATHS)?,
            transitions: list(r.transitions, "transitions", d::AskTransition::try_from)?,
            contact_updates: r.contact_updates.into_iter().map(d::ContactUpdate::from).collect(),
            actions: list(r.actions, "actions", d::Action::try_from)?,
            intent: r.intent.map(|i| d::IntentRecord { intent: i.intent, probability: i.probability }),
            llm_usage: list(r.llm_usage, "llm_usage", d::LlmUsage::try_from)?,
            decision_id: r.decision_id,
            load_id: r.load_id,
            trigger_event_id: r.trigger_event_id,
            trigger_kind: r.trigger_kind,
            rationale: r.rationale,
        })
    }
}

#[cfg(test)]
mod spelling_tests {
    use super::*;

    /// Each documented symbol list is the domain's spellings (plus the wire-only extras: the
    /// legacy `failed` alias and the `none` destination), so an error's `expected` cannot drift.
    #[test]
    fn symbol_lists_are_the_domain_spellings() {
        let cases: [(&str, &[&str], &[&str]); 14] = [
            (ROLES, &d::Role::SPELLINGS, &[]),
            (LANGUAGES, &d::Language::SPELLINGS, &[]),
            (STOP_KINDS, &d::StopKind::SPELLINGS, &[]),
            (RISK_BANDS, &d::RiskBand::SPELLINGS, &[]),
            (THREADS, &d::EmailThread::SPELLINGS, &[]),
            (CHANNELS, &d::MessageChannel::SPELLINGS, &[]),
            (DOCUMENT_TYPES, &d::DocumentType::SPELLINGS, &[]),
            (STOP_STATUSES, &d::StopStatusKind::SPELLINGS, &[]),
            (OUTCOME_STATUSES, &d::OutcomeStatus::SPELLINGS, &["failed"]),
            (ACTION_KINDS, &d::ActionKind::SPELLINGS, &[]),
            (DESTINATIONS, &d::Destination::SPELLINGS, &[NO_DESTINATION]),
            (STAGES, &d::Stage::SPELLINGS, &[]),
            (STEP_KINDS, &d::StepKind::SPELLINGS, &[]),
            (PATHS, &d::DecisionPath::SPELLINGS, &[]),
        ];
        for (list, spellings, extra) in cases {
            let want: Vec<&str> = spellings.iter().chain(extra).copied().collect();
            assert_eq!(list, want.join("|"));
        }
    }
}
