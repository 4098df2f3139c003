//! The JSON form of an inbound event: the request body of `POST /events`, version 1 (docs/http.md).
//!
//! [`InboundEventV1`] is a wire type of its own, kept apart from the domain's
//! [`load_agent_domain::InboundEvent`] like the Avro structs of [`crate::wire`]: renaming a
//! domain field changes nothing here, and changing this type is a change of the public API
//! (additive only within V1; docs/http.md says what a breaking change takes).
//!
//! Shape: the event's envelope (`event_id`, `load_id`, `occurred_at`) and the event kind as a
//! `type` tag, with the kind's fields next to them. The field names are those of the Avro
//! `InboundEvent` record (schemas/avro/InboundEvent.v1.avsc) and its `payload` branches; two
//! differences, both of the JSON form since it was first served: the payload's fields sit at the
//! top level instead of under `payload`, and a `load_registered` event keeps the load's fields
//! under `load`. Instants are RFC 3339 strings (the stop appointment with the stop's own offset)
//! instead of `timestamp-micros`; enumerated values are JSON strings from a closed set; unknown
//! fields are ignored.
//!
//! Reading: [`decode_inbound_json`] parses the body into the wire type and converts it to the
//! domain event; a body that does not parse is a [`JsonError`] naming the field at fault by its
//! JSON path (`load.stops[1].sequence`, `stop`, `event_id`). Writing: [`encode_inbound_json`]
//! (for examples, tools and tests). The documented example bodies are [`EXAMPLES`], compiled in
//! from `docs/http-examples/`, so the docs, the tests and the OpenAPI document use one copy.
//!
//! The OpenAPI schemas of these types come from their `ToSchema` derives (utoipa; the binary
//! assembles the document). No IO here: parsing is a sync function over bytes.

use std::fmt;

use chrono::{DateTime, FixedOffset, Utc};
use load_agent_domain as d;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

// ----- the body -----

/// One event for one load, as `POST /events` takes it (version 1). The event kind is the
/// `type` field; its fields sit next to it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct InboundEventV1 {
    /// Unique per load: the id of the event's log entry. An event whose id is already in the
    /// load's log is dropped as a redelivery, so a client may retry with the same id.
    #[schema(example = "sms_0713")]
    pub event_id: String,
    /// The load the event is about (the Kafka key in production mode).
    #[schema(example = "481207")]
    pub load_id: String,
    /// When the event happened at its source (RFC 3339, any offset; stored as UTC).
    #[schema(value_type = String, format = DateTime, example = "2026-03-02T13:13:00Z")]
    pub occurred_at: DateTime<Utc>,
    #[serde(flatten)]
    pub payload: EventPayloadV1,
}

/// The event kind (`type`) and its fields: one branch of the Avro `payload` union each.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventPayloadV1 {
    LoadRegistered(LoadRegisteredPayload),
    Sms(SmsPayload),
    Email(EmailPayload),
    Slack(SlackPayload),
    Ping(PingPayload),
    TimerFired(TimerFiredPayload),
    Attachment(AttachmentPayload),
    StopStatus(StopStatusPayload),
    ActionOutcome(ActionOutcomePayload),
}

/// Every value of `type`, in the order of the Avro `payload` union.
pub const KINDS: [&str; 9] = [
    "load_registered",
    "sms",
    "email",
    "slack",
    "ping",
    "timer_fired",
    "attachment",
    "stop_status",
    "action_outcome",
];

impl EventPayloadV1 {
    /// The value of `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            EventPayloadV1::LoadRegistered(_) => "load_registered",
            EventPayloadV1::Sms(_) => "sms",
            EventPayloadV1::Email(_) => "email",
            EventPayloadV1::Slack(_) => "slack",
            EventPayloadV1::Ping(_) => "ping",
            EventPayloadV1::TimerFired(_) => "timer_fired",
            EventPayloadV1::Attachment(_) => "attachment",
            EventPayloadV1::StopStatus(_) => "stop_status",
            EventPayloadV1::ActionOutcome(_) => "action_outcome",
        }
    }
}

/// `load_registered`: the load's metadata, the first entry of its log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LoadRegisteredPayload {
    pub load: Load,
}

/// The load's metadata (the Avro `LoadRegistered` record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Load {
    /// Equal to the event's `load_id`.
    #[schema(example = "481207")]
    pub load_id: String,
    /// The client's SOP id.
    #[schema(example = "client_a")]
    pub client: String,
    /// The SOP version in force; absent or null means the latest version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sop_version: Option<u32>,
    pub contacts: Vec<Contact>,
    /// In route order: a pickup first, a delivery last, sequences 1, 2, ...
    pub stops: Vec<Stop>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reefer: Option<Reefer>,
}

/// A contact of the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Contact {
    /// Unique within the load; messages name their sender by it (or by an address below).
    #[schema(example = "drv")]
    pub id: String,
    pub role: Role,
    pub name: String,
    /// E.164 phone number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "+13125550111")]
    pub phone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Slack channel or handle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<String>,
    #[serde(default)]
    pub language: Language,
}

/// A stop of the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stop {
    /// 1, 2, ... in route order.
    pub sequence: u32,
    pub kind: StopKind,
    pub name: String,
    pub address: String,
    /// RFC 3339 WITH the stop's UTC offset: the offset is the stop's time zone.
    #[schema(value_type = String, format = DateTime, example = "2026-03-02T08:00:00-06:00")]
    pub appointment: DateTime<FixedOffset>,
    #[serde(default)]
    pub po_numbers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// Reefer settings in degrees Fahrenheit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Reefer {
    pub set_point_f: f64,
    /// Non-negative.
    pub tolerance_f: f64,
}

/// `sms`: an SMS from a contact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SmsPayload {
    /// A contact id or the sender's raw phone number.
    pub from: String,
    pub text: String,
}

/// `email`: an email from a contact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EmailPayload {
    /// A contact id or the sender's address.
    pub from: String,
    #[serde(default)]
    pub subject: String,
    /// The message's text (the new text; quoted history may follow).
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<EmailThread>,
}

/// `slack`: a Slack message from a contact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SlackPayload {
    /// A contact id or the sender's Slack channel or handle.
    pub from: String,
    pub text: String,
}

/// `ping`: a tracking ping with the delay risk for a stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PingPayload {
    /// The stop's sequence.
    pub stop: u32,
    pub delay_risk: RiskBand,
    /// When the tracker measured it (RFC 3339); pings recorded before the last applied one are
    /// stale.
    #[schema(value_type = String, format = DateTime)]
    pub recorded_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lon: Option<f64>,
}

/// `timer_fired`: a durable timer came due (published by the timer pump).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TimerFiredPayload {
    /// `tmr:{load_id}:{ask_id}:{attempt}`.
    pub timer_id: String,
    pub ask_id: String,
    pub attempt: u32,
    #[schema(value_type = String, format = DateTime)]
    pub fire_at: DateTime<Utc>,
}

/// `attachment`: a document sent by a contact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AttachmentPayload {
    pub from: String,
    pub channel: Channel,
    pub filename: String,
    pub content_type: String,
    /// Where the document reader can fetch the bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_ref: Option<String>,
    /// Fields already extracted upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted: Option<DocumentFields>,
}

/// Typed fields a document reader extracted from an attachment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DocumentFields {
    #[serde(default)]
    pub document_type: DocumentType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exceptions_noted: Option<bool>,
    #[serde(default)]
    pub po_numbers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pieces: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_f: Option<f64>,
}

/// `stop_status`: arrived at, departed from or delivered at a stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StopStatusPayload {
    /// The stop's sequence.
    pub stop: u32,
    pub status: StopStatus,
    /// Who reported it: geofence, tms, hero, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// `action_outcome`: the delivery result of one action (one outbox row), reported by a delivery
/// service under the action's idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActionOutcomePayload {
    pub idempotency_key: String,
    pub status: OutcomeStatus,
    pub action_kind: ActionKind,
    /// The contact the action addressed, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_id: Option<String>,
    /// True for Hero-channel actions (`create_hero_task`, a Slack post to the Hero channel).
    #[serde(default)]
    pub hero_channel: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

// ----- enumerated values: wire enums of their own, mapped one to one onto the domain's -----

/// A wire enum with its snake_case spelling and its mapping to and from a domain enum. Both
/// mappings are exhaustive matches, so a new domain value fails to compile until the API says
/// how it is spelled.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident => $domain:path { $( $(#[$vmeta:meta])* $variant:ident => $dvariant:ident ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl From<$name> for $domain {
            fn from(v: $name) -> Self {
                use $domain as D;
                match v {
                    $( $name::$variant => D::$dvariant, )+
                }
            }
        }

        impl From<$domain> for $name {
            fn from(v: $domain) -> Self {
                use $domain as D;
                match v {
                    $( D::$dvariant => $name::$variant, )+
                }
            }
        }
    };
}

wire_enum! {
    /// A contact's role.
    Role => d::Role {
        Driver => Driver,
        CarrierDispatcher => CarrierDispatcher,
        Broker => Broker,
        Shipper => Shipper,
        Receiver => Receiver,
    }
}

wire_enum! {
    /// The language the agent writes to a contact in.
    #[derive(Default)]
    Language => d::Language {
        #[default]
        En => En,
        Es => Es,
    }
}

wire_enum! {
    StopKind => d::StopKind { Pickup => Pickup, Delivery => Delivery }
}

wire_enum! {
    /// A tracking ping's delay risk for a stop.
    RiskBand => d::RiskBand { Low => Low, Medium => Medium, High => High }
}

wire_enum! {
    /// The email thread a message belongs to.
    EmailThread => d::EmailThread { Main => Main, New => New }
}

wire_enum! {
    /// The message channel an attachment came on.
    Channel => d::MessageChannel { Sms => Sms, Email => Email, Slack => Slack }
}

wire_enum! {
    #[derive(Default)]
    DocumentType => d::DocumentType {
        Bol => Bol,
        Pod => Pod,
        LumperReceipt => LumperReceipt,
        #[default]
        Other => Other,
    }
}

wire_enum! {
    StopStatus => d::StopStatusKind { Arrived => Arrived, Departed => Departed, Delivered => Delivered }
}

wire_enum! {
    /// `published`: the broker took the action's record (the relay); `delivered`: the delivery
    /// service confirmed it; `failed_permanent` (also spelled `failed`): it will not be delivered.
    OutcomeStatus => d::OutcomeStatus {
        Published => Published,
        Delivered => Delivered,
        #[serde(alias = "failed")]
        FailedPermanent => FailedPermanent,
    }
}

wire_enum! {
    /// The kind of the action an outcome is about.
    ActionKind => d::ActionKind {
        SendSms => SendSms,
        SendEmail => SendEmail,
        PostSlack => PostSlack,
        TmsNote => TmsNote,
        SetTimer => SetTimer,
        CancelTimer => CancelTimer,
        CreateHeroTask => CreateHeroTask,
        UpdateStage => UpdateStage,
        Noop => Noop,
    }
}

// ----- errors -----

/// Why a body is not a valid [`InboundEventV1`]: the message, and the JSON path of the field at
/// fault when one is (`event_id`, `load.stops[1].sequence`); `None` for a body that is not JSON
/// or not an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "field `{field}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for JsonError {}

impl JsonError {
    fn new(field: Option<String>, message: impl Into<String>) -> Self {
        JsonError { field, message: message.into() }
    }

    /// A `serde_path_to_error` error: its path, completed with the missing field's name (serde
    /// reports a missing field at the struct that lacks it).
    fn from_path(e: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        let base = if path == "." { String::new() } else { path };
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(name, _)| name.to_owned());
        let field = match missing {
            Some(name) if base.is_empty() => Some(name),
            Some(name) => Some(format!("{base}.{name}")),
            None if base.is_empty() => None,
            None => Some(base),
        };
        JsonError { field, message }
    }
}

// ----- reading -----

/// The envelope of every event: what sits next to the kind's fields.
#[derive(Deserialize)]
struct Envelope {
    event_id: String,
    load_id: String,
    occurred_at: DateTime<Utc>,
    #[serde(rename = "type")]
    kind: String,
}

fn field<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, JsonError> {
    serde_path_to_error::deserialize(value).map_err(JsonError::from_path)
}

impl InboundEventV1 {
    /// Parses a request body. The envelope and then the kind's fields are read each with its
    /// own path tracking (serde's own internally tagged enums lose the path inside the kind).
    pub fn from_json(body: &[u8]) -> Result<Self, JsonError> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| JsonError::new(None, format!("not JSON: {e}")))?;
        Self::from_value(&value)
    }

    /// Reads a parsed JSON value; see [`InboundEventV1::from_json`].
    pub fn from_value(value: &serde_json::Value) -> Result<Self, JsonError> {
        if !value.is_object() {
            return Err(JsonError::new(None, "expected a JSON object (an InboundEvent)"));
        }
        let envelope: Envelope = field(value)?;
        let payload = match envelope.kind.as_str() {
            "load_registered" => EventPayloadV1::LoadRegistered(field(value)?),
            "sms" => EventPayloadV1::Sms(field(value)?),
            "email" => EventPayloadV1::Email(field(value)?),
            "slack" => EventPayloadV1::Slack(field(value)?),
            "ping" => EventPayloadV1::Ping(field(value)?),
            "timer_fired" => EventPayloadV1::TimerFired(field(value)?),
            "attachment" => EventPayloadV1::Attachment(field(value)?),
            "stop_status" => EventPayloadV1::StopStatus(field(value)?),
            "action_outcome" => EventPayloadV1::ActionOutcome(field(value)?),
            other => {
                return Err(JsonError::new(
                    Some("type".into()),
                    format!("unknown event type {other:?}, expected one of {}", KINDS.join("|")),
                ));
            }
        };
        Ok(InboundEventV1 {
            event_id: envelope.event_id,
            load_id: envelope.load_id,
            occurred_at: envelope.occurred_at,
            payload,
        })
    }
}

/// Deserializes through [`InboundEventV1::from_value`], so that every reader of the JSON form
/// has the same rules (the error loses the field path; use `from_json` to keep it).
impl<'de> Deserialize<'de> for InboundEventV1 {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        InboundEventV1::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// Parses a `POST /events` body into the domain event.
pub fn decode_inbound_json(body: &[u8]) -> Result<d::InboundEvent, JsonError> {
    InboundEventV1::from_json(body).map(d::InboundEvent::from)
}

/// The JSON form of a domain event (what `POST /events` takes).
pub fn encode_inbound_json(event: &d::InboundEvent) -> serde_json::Value {
    // A struct of strings, numbers, booleans and string-keyed maps always serializes.
    serde_json::to_value(InboundEventV1::from(event)).unwrap_or(serde_json::Value::Null)
}

// ----- conversions -----

impl From<InboundEventV1> for d::InboundEvent {
    fn from(e: InboundEventV1) -> Self {
        d::InboundEvent {
            event_id: e.event_id,
            load_id: e.load_id,
            occurred_at: e.occurred_at,
            kind: d::EventKind::from(e.payload),
        }
    }
}

impl From<&d::InboundEvent> for InboundEventV1 {
    fn from(e: &d::InboundEvent) -> Self {
        InboundEventV1 {
            event_id: e.event_id.clone(),
            load_id: e.load_id.clone(),
            occurred_at: e.occurred_at,
            payload: EventPayloadV1::from(&e.kind),
        }
    }
}

impl From<EventPayloadV1> for d::EventKind {
    fn from(p: EventPayloadV1) -> Self {
        use d::EventKind as K;
        match p {
            EventPayloadV1::LoadRegistered(p) => K::LoadRegistered { load: d::LoadRegistered::from(p.load) },
            EventPayloadV1::Sms(m) => K::Sms { from: m.from, text: m.text },
            EventPayloadV1::Email(m) => {
                K::Email { from: m.from, subject: m.subject, text: m.text, thread: m.thread.map(Into::into) }
            }
            EventPayloadV1::Slack(m) => K::Slack { from: m.from, text: m.text },
            EventPayloadV1::Ping(p) => K::Ping {
                stop: p.stop,
                delay_risk: p.delay_risk.into(),
                recorded_at: p.recorded_at,
                lat: p.lat,
                lon: p.lon,
            },
            EventPayloadV1::TimerFired(t) => K::TimerFired {
                timer_id: t.timer_id,
                ask_id: t.ask_id,
                attempt: t.attempt,
                fire_at: t.fire_at,
            },
            EventPayloadV1::Attachment(a) => K::Attachment {
                from: a.from,
                channel: a.channel.into(),
                filename: a.filename,
                content_type: a.content_type,
                content_ref: a.content_ref,
                extracted: a.extracted.map(d::DocumentFields::from),
            },
            EventPayloadV1::StopStatus(s) => {
                K::StopStatus { stop: s.stop, status: s.status.into(), source: s.source }
            }
            EventPayloadV1::ActionOutcome(o) => K::ActionOutcome {
                idempotency_key: o.idempotency_key,
                status: o.status.into(),
                action_kind: o.action_kind.into(),
                contact_id: o.contact_id,
                hero_channel: o.hero_channel,
                reason: o.reason,
            },
        }
    }
}

impl From<&d::EventKind> for EventPayloadV1 {
    fn from(k: &d::EventKind) -> Self {
        use d::EventKind as K;
        match k {
            K::LoadRegistered { load } => {
                EventPayloadV1::LoadRegistered(LoadRegisteredPayload { load: Load::from(load) })
            }
            K::Sms { from, text } => {
                EventPayloadV1::Sms(SmsPayload { from: from.clone(), text: text.clone() })
            }
            K::Email { from, subject, text, thread } => EventPayloadV1::Email(EmailPayload {
                from: from.clone(),
                subject: subject.clone(),
                text: text.clone(),
                thread: thread.map(Into::into),
            }),
            K::Slack { from, text } => {
                EventPayloadV1::Slack(SlackPayload { from: from.clone(), text: text.clone() })
            }
            K::Ping { stop, delay_risk, recorded_at, lat, lon } => EventPayloadV1::Ping(PingPayload {
                stop: *stop,
                delay_risk: (*delay_risk).into(),
                recorded_at: *recorded_at,
                lat: *lat,
                lon: *lon,
            }),
            K::TimerFired { timer_id, ask_id, attempt, fire_at } => {
                EventPayloadV1::TimerFired(TimerFiredPayload {
                    timer_id: timer_id.clone(),
                    ask_id: ask_id.clone(),
                    attempt: *attempt,
                    fire_at: *fire_at,
                })
            }
            K::Attachment { from, channel, filename, content_type, content_ref, extracted } => {
                EventPayloadV1::Attachment(AttachmentPayload {
                    from: from.clone(),
                    channel: (*channel).into(),
                    filename: filename.clone(),
                    content_type: content_type.clone(),
                    content_ref: content_ref.clone(),
                    extracted: extracted.as_ref().map(DocumentFields::from),
                })
            }
            K::StopStatus { stop, status, source } => EventPayloadV1::StopStatus(StopStatusPayload {
                stop: *stop,
                status: (*status).into(),
                source: source.clone(),
            }),
            K::ActionOutcome { idempotency_key, status, action_kind, contact_id, hero_channel, reason } => {
                EventPayloadV1::ActionOutcome(ActionOutcomePayload {
                    idempotency_key: idempotency_key.clone(),
                    status: (*status).into(),
                    action_kind: (*action_kind).into(),
                    contact_id: contact_id.clone(),
                    hero_channel: *hero_channel,
                    reason: reason.clone(),
                })
            }
        }
    }
}

impl From<Load> for d::LoadRegistered {
    fn from(l: Load) -> Self {
        d::LoadRegistered {
            load_id: l.load_id,
            client: l.client,
            sop_version: l.sop_version,
            contacts: l.contacts.into_iter().map(d::Contact::from).collect(),
            stops: l.stops.into_iter().map(d::Stop::from).collect(),
            reefer: l.reefer.map(|r| d::Reefer { set_point_f: r.set_point_f, tolerance_f: r.tolerance_f }),
        }
    }
}

impl From<&d::LoadRegistered> for Load {
    fn from(l: &d::LoadRegistered) -> Self {
        Load {
            load_id: l.load_id.clone(),
            client: l.client.clone(),
            sop_version: l.sop_version,
            contacts: l.contacts.iter().map(Contact::from).collect(),
            stops: l.stops.iter().map(Stop::from).collect(),
            reefer: l.reefer.map(|r| Reefer { set_point_f: r.set_point_f, tolerance_f: r.tolerance_f }),
        }
    }
}

impl From<Contact> for d::Contact {
    fn from(c: Contact) -> Self {
        d::Contact {
            id: c.id,
            role: c.role.into(),
            name: c.name,
            phone: c.phone,
            email: c.email,
            slack: c.slack,
            language: c.language.into(),
        }
    }
}

impl From<&d::Contact> for Contact {
    fn from(c: &d::Contact) -> Self {
        Contact {
            id: c.id.clone(),
            role: c.role.into(),
            name: c.name.clone(),
            phone: c.phone.clone(),
            email: c.email.clone(),
            slack: c.slack.clone(),
            language: c.language.into(),
        }
    }
}

impl From<Stop> for d::Stop {
    fn from(s: Stop) -> Self {
        d::Stop {
            sequence: s.sequence,
            kind: s.kind.into(),
            name: s.name,
            address: s.address,
            appointment: s.appointment,
            po_numbers: s.po_numbers,
            reference: s.reference,
        }
    }
}

impl From<&d::Stop> for Stop {
    fn from(s: &d::Stop) -> Self {
        Stop {
            sequence: s.sequence,
            kind: s.kind.into(),
            name: s.name.clone(),
            address: s.address.clone(),
            appointment: s.appointment,
            po_numbers: s.po_numbers.clone(),
            reference: s.reference.clone(),
        }
    }
}

impl From<DocumentFields> for d::DocumentFields {
    fn from(f: DocumentFields) -> Self {
        d::DocumentFields {
            document_type: f.document_type.into(),
            signed: f.signed,
            exceptions_noted: f.exceptions_noted,
            po_numbers: f.po_numbers,
            seal: f.seal,
            pieces: f.pieces,
            temperature_f: f.temperature_f,
        }
    }
}

impl From<&d::DocumentFields> for DocumentFields {
    fn from(f: &d::DocumentFields) -> Self {
        DocumentFields {
            document_type: f.document_type.into(),
            signed: f.signed,
            exceptions_noted: f.exceptions_noted,
            po_numbers: f.po_numbers.clone(),
            seal: f.seal.clone(),
            pieces: f.pieces,
            temperature_f: f.temperature_f,
        }
    }
}

// ----- responses -----

/// The body of a `202 Accepted` answer to `POST /events`: the event is queued (it is checked
/// against the load's log and decided on later, in order with the load's other events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AcceptedV1 {
    /// The `event_id` of the queued event.
    #[schema(example = "sms_0713")]
    pub accepted: String,
}

/// The body of every error answer of the HTTP API (4xx and 5xx, the probes excepted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorV1 {
    /// What is wrong, for a person.
    #[schema(example = "invalid InboundEvent: field `stop`: invalid type: string \"two\", expected u32")]
    pub error: String,
    /// The JSON path of the request field at fault (`event_id`, `load.stops[1].sequence`), or
    /// null when no single field is.
    #[schema(example = "stop")]
    pub field: Option<String>,
}

impl From<JsonError> for ErrorV1 {
    fn from(e: JsonError) -> Self {
        ErrorV1 { error: e.message, field: e.field }
    }
}

// ----- the documented examples -----

/// The documented example body of every event kind, as `(type, body)`: the files of
/// `docs/http-examples/`, which docs/http.md shows and its curl commands post. Tests post each
/// one, convert it, and validate it against the OpenAPI document.
pub const EXAMPLES: [(&str, &str); 9] = [
    ("load_registered", include_str!("../../../docs/http-examples/load_registered.json")),
    ("sms", include_str!("../../../docs/http-examples/sms.json")),
    ("email", include_str!("../../../docs/http-examples/email.json")),
    ("slack", include_str!("../../../docs/http-examples/slack.json")),
    ("ping", include_str!("../../../docs/http-examples/ping.json")),
    ("timer_fired", include_str!("../../../docs/http-examples/timer_fired.json")),
    ("attachment", include_str!("../../../docs/http-examples/attachment.json")),
    ("stop_status", include_str!("../../../docs/http-examples/stop_status.json")),
    ("action_outcome", include_str!("../../../docs/http-examples/action_outcome.json")),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn example(kind: &str) -> Value {
        let (_, body) = EXAMPLES.iter().find(|(k, _)| *k == kind).expect("an example of the kind");
        serde_json::from_str(body).expect("example JSON")
    }

    fn error_of(body: &Value) -> JsonError {
        match InboundEventV1::from_value(body) {
            Ok(e) => panic!("accepted {body}: {e:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn every_kind_has_one_example_that_parses_into_its_kind_and_round_trips() {
        assert_eq!(EXAMPLES.map(|(k, _)| k), KINDS);
        for (kind, body) in EXAMPLES {
            let wire = InboundEventV1::from_json(body.as_bytes()).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(wire.payload.kind(), kind);
            let domain = d::InboundEvent::from(wire.clone());
            assert_eq!(domain.kind_str(), kind);
            // Domain to JSON and back is the identity, and so is JSON to wire to JSON.
            let encoded = encode_inbound_json(&domain);
            assert_eq!(decode_inbound_json(encoded.to_string().as_bytes()), Ok(domain.clone()), "{kind}");
            assert_eq!(InboundEventV1::from_value(&encoded), Ok(wire), "{kind}");
            // serde's own entry point follows the same rules.
            let via_serde: InboundEventV1 = serde_json::from_str(body).expect("serde");
            assert_eq!(d::InboundEvent::from(via_serde), domain);
        }
    }

    #[test]
    fn v1_is_the_json_form_clients_posted_before_it_had_a_type_of_its_own() {
        // Before V1, `POST /events` read the domain event's serde JSON: V1 reads that JSON into
        // the same event (the example files pin the shape from now on).
        for (kind, _) in EXAMPLES {
            let event = decode_inbound_json(example(kind).to_string().as_bytes()).expect("example");
            let legacy = serde_json::to_vec(&event).expect("domain JSON");
            assert_eq!(decode_inbound_json(&legacy), Ok(event), "{kind}");
        }
    }

    #[test]
    fn the_examples_are_the_files_of_docs_http_examples_and_docs_http_md_shows_each() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files: Vec<String> = std::fs::read_dir(root.join("docs/http-examples"))
            .expect("docs/http-examples")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        files.sort();
        let mut listed: Vec<String> = EXAMPLES.iter().map(|(k, _)| format!("{k}.json")).collect();
        listed.sort();
        assert_eq!(files, listed, "every file of docs/http-examples is in EXAMPLES, and only those");

        let doc = std::fs::read_to_string(root.join("docs/http.md")).expect("docs/http.md");
        let blocks: Vec<Value> = doc
            .split("```json\n")
            .skip(1)
            .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
            .filter_map(|block| serde_json::from_str(block).ok())
            .collect();
        for (kind, _) in EXAMPLES {
            assert!(
                doc.contains(&format!("--data-binary @docs/http-examples/{kind}.json")),
                "docs/http.md has no curl command posting the {kind} example"
            );
            assert!(
                blocks.contains(&example(kind)),
                "docs/http.md does not show the {kind} example as it is"
            );
        }
    }

    #[test]
    fn errors_name_the_field_by_its_json_path() {
        let cases: Vec<(&str, Value, Option<&str>, &str)> = vec![
            ("missing event_id", drop_key(example("sms"), "event_id"), Some("event_id"), "missing field"),
            ("missing type", drop_key(example("sms"), "type"), Some("type"), "missing field `type`"),
            ("unknown type", with(example("sms"), "type", json!("fax")), Some("type"), "\"fax\""),
            ("missing text", drop_key(example("sms"), "text"), Some("text"), "missing field `text`"),
            ("stop as text", with(example("ping"), "stop", json!("two")), Some("stop"), "invalid type"),
            ("negative attempt", with(example("timer_fired"), "attempt", json!(-1)), Some("attempt"), "-1"),
            (
                "unknown band",
                with(example("ping"), "delay_risk", json!("extreme")),
                Some("delay_risk"),
                "extreme",
            ),
            ("bad instant", with(example("sms"), "occurred_at", json!("yesterday")), Some("occurred_at"), ""),
            ("not JSON", Value::Null, None, "expected a JSON object"),
            ("an array", json!([1, 2]), None, "expected a JSON object"),
        ];
        for (what, body, field, message) in cases {
            let e = error_of(&body);
            assert_eq!(e.field.as_deref(), field, "{what}: {e}");
            assert!(e.message.contains(message), "{what}: {e}");
        }

        let mut reg = example("load_registered");
        reg["load"]["stops"][1]["sequence"] = json!(-2);
        assert_eq!(error_of(&reg).field.as_deref(), Some("load.stops[1].sequence"));
        let mut reg = example("load_registered");
        reg["load"]["contacts"][0]["role"] = json!("captain");
        let e = error_of(&reg);
        assert_eq!(e.field.as_deref(), Some("load.contacts[0].role"));
        assert!(e.message.contains("carrier_dispatcher"), "the values are listed: {e}");
        let mut reg = example("load_registered");
        reg["load"]["stops"][0].as_object_mut().map(|s| s.remove("appointment"));
        assert_eq!(error_of(&reg).field.as_deref(), Some("load.stops[0].appointment"));
        let mut reg = example("load_registered");
        reg["load"]["stops"][0]["appointment"] = json!("2026-03-02 08:00");
        assert_eq!(error_of(&reg).field.as_deref(), Some("load.stops[0].appointment"));

        let e = InboundEventV1::from_json(b"{\"event_id\": ").expect_err("truncated");
        assert_eq!(e.field, None);
        assert!(e.message.starts_with("not JSON"), "{e}");
    }

    #[test]
    fn defaults_aliases_and_unknown_fields() {
        // `failed` is read as `failed_permanent` (topics.md); unknown fields are ignored.
        let mut body = with(example("action_outcome"), "status", json!("failed"));
        body["added_by_a_newer_client"] = json!(true);
        let e = decode_inbound_json(body.to_string().as_bytes()).expect("accepted");
        assert!(matches!(
            e.kind,
            d::EventKind::ActionOutcome { status: d::OutcomeStatus::FailedPermanent, .. }
        ));
        // Optional fields may be left out.
        let body = json!({
            "event_id": "e1", "load_id": "L1", "occurred_at": "2026-03-02T08:00:00-06:00",
            "type": "email", "from": "dana@carrier.example", "text": "ok"
        });
        let e = decode_inbound_json(body.to_string().as_bytes()).expect("accepted");
        assert_eq!(e.occurred_at.to_rfc3339(), "2026-03-02T14:00:00+00:00");
        assert_eq!(
            e.kind,
            d::EventKind::Email {
                from: "dana@carrier.example".into(),
                subject: String::new(),
                text: "ok".into(),
                thread: None
            }
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 500, ..Default::default() })]

        /// No body makes the reader panic: arbitrary bytes, and examples with bytes changed.
        #[test]
        fn no_body_panics(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            sample in 0usize..9,
            edits in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..6),
        ) {
            let _ = decode_inbound_json(&bytes);
            let mut body = EXAMPLES[sample].1.as_bytes().to_vec();
            for (at, byte) in edits {
                let at = at % body.len();
                body[at] = byte;
            }
            if let Err(e) = decode_inbound_json(&body) {
                proptest::prop_assert!(!e.message.is_empty());
            }
        }
    }

    fn drop_key(mut v: Value, key: &str) -> Value {
        v.as_object_mut().map(|o| o.remove(key));
        v
    }

    fn with(mut v: Value, key: &str, value: Value) -> Value {
        v[key] = value;
        v
    }
}
