//! Wire structs: an exact mirror of the Avro records of `schemas/avro/` (newest versions), kept
//! apart from the domain types (style habit 4). Enumerated values are `String`s, `u32`s are
//! `i64` (Avro `long`), instants are [`TimestampMicros`], the stop appointment is an RFC 3339
//! string. Conversions to and from the domain live in [`crate::convert`]: `From<&domain>` for
//! writing, `TryFrom<wire>` naming the bad field for reading.
//!
//! Field order is schema order. A `= default` is the reader's default for a field the writer
//! schema lacks; it must equal the `.avsc` default.

use crate::datum::{wire_record, wire_union};

pub use crate::datum::{TimestampMicros, WireRecord};

// ----- InboundEvent (topic load-agent.events) -----

wire_record! {
    /// `load_agent.InboundEvent`.
    InboundEvent {
        event_id: String,
        load_id: String,
        occurred_at: TimestampMicros,
        payload: EventPayload,
    }
}

wire_union! {
    /// The event kinds, in the order of the `payload` union.
    EventPayload {
        LoadRegistered, Sms, Email, Slack, Ping, TimerFired, Attachment, StopStatus, ActionOutcome,
    }
}

wire_record! {
    LoadRegistered {
        load_id: String,
        client: String,
        sop_version: Option<i64> = None,
        contacts: Vec<Contact>,
        stops: Vec<Stop>,
        reefer: Option<Reefer> = None,
    }
}

wire_record! {
    Contact {
        id: String,
        role: String,
        name: String,
        phone: Option<String> = None,
        email: Option<String> = None,
        slack: Option<String> = None,
        language: String = "en".to_owned(),
    }
}

wire_record! {
    Stop {
        sequence: i64,
        kind: String,
        name: String,
        address: String,
        /// RFC 3339 with the stop's offset.
        appointment: String,
        po_numbers: Vec<String> = Vec::new(),
        reference: Option<String> = None,
    }
}

wire_record! {
    Reefer {
        set_point_f: f64,
        tolerance_f: f64,
    }
}

wire_record! {
    Sms {
        from: String,
        text: String,
    }
}

wire_record! {
    Email {
        from: String,
        subject: String = String::new(),
        text: String,
        thread: Option<String> = None,
    }
}

wire_record! {
    Slack {
        from: String,
        text: String,
    }
}

wire_record! {
    Ping {
        stop: i64,
        delay_risk: String,
        recorded_at: TimestampMicros,
        lat: Option<f64> = None,
        lon: Option<f64> = None,
    }
}

wire_record! {
    TimerFired {
        timer_id: String,
        ask_id: String,
        attempt: i64,
        fire_at: TimestampMicros,
    }
}

wire_record! {
    DocumentFields {
        document_type: String = "other".to_owned(),
        signed: Option<bool> = None,
        exceptions_noted: Option<bool> = None,
        po_numbers: Vec<String> = Vec::new(),
        seal: Option<String> = None,
        pieces: Option<i64> = None,
        temperature_f: Option<f64> = None,
    }
}

wire_record! {
    Attachment {
        from: String,
        channel: String,
        filename: String,
        content_type: String,
        content_ref: Option<String> = None,
        extracted: Option<DocumentFields> = None,
    }
}

wire_record! {
    StopStatus {
        stop: i64,
        status: String,
        source: Option<String> = None,
    }
}

wire_record! {
    ActionOutcome {
        idempotency_key: String,
        status: String,
        action_kind: String,
        contact_id: Option<String> = None,
        hero_channel: bool = false,
        reason: Option<String> = None,
    }
}

// ----- Action bodies (ActionCommand.payload and Action.body) -----

wire_union! {
    /// The action bodies, in the order of the `payload`/`body` unions.
    ActionBody {
        SendSms, SendEmail, PostSlack, TmsNote, SetTimer, CancelTimer, CreateHeroTask, UpdateStage, Noop,
    }
}

wire_record! {
    SendSms {
        to: String,
        /// Resolved phone (ActionCommand only).
        to_phone: Option<String> = None,
        body: String,
    }
}

wire_record! {
    SendEmail {
        to: String,
        /// Resolved email (ActionCommand only).
        to_email: Option<String> = None,
        subject: String,
        body: String,
        thread: String,
    }
}

wire_union! {
    /// Where a Slack post goes.
    SlackTarget { SlackBroker, SlackHeroChannel }
}

wire_record! {
    SlackBroker {
        contact_id: String,
    }
}

wire_record! {
    SlackHeroChannel {}
}

wire_record! {
    PostSlack {
        target: SlackTarget,
        /// Resolved channel (ActionCommand only).
        channel: Option<String> = None,
        text: String,
    }
}

wire_record! {
    TmsNote {
        text: String,
    }
}

wire_record! {
    SetTimer {
        timer_id: String,
        ask_id: String,
        attempt: i64,
        fire_at: TimestampMicros,
    }
}

wire_record! {
    CancelTimer {
        timer_id: String,
    }
}

wire_record! {
    CreateHeroTask {
        title: String,
        body: String,
        urgent: bool,
    }
}

wire_record! {
    UpdateStage {
        stage: String,
        current_stop: i64,
    }
}

wire_record! {
    Noop {
        reason: String,
    }
}

// ----- ActionCommand (topics load-agent.actions.<service>) -----

wire_record! {
    /// `load_agent.ActionCommand`.
    ActionCommand {
        idempotency_key: String,
        action_kind: String,
        load_id: String,
        load_version: i64,
        destination: String,
        ask_id: Option<String> = None,
        ask_type: Option<String> = None,
        attempt: Option<i64> = None,
        contact_id: Option<String> = None,
        payload: ActionBody,
    }
}

// ----- LogEntry -----

wire_record! {
    /// `load_agent.LogEntry` (v2).
    LogEntry {
        entry_id: String,
        load_id: String,
        kind: String,
        recorded_at: TimestampMicros,
        entry: LogEntryBody,
        /// v2: the build that wrote the entry.
        written_by: Option<String> = None,
    }
}

wire_union! {
    /// An inbound event or a decision record.
    LogEntryBody { InboundEvent, DecisionRecord }
}

wire_record! {
    SopRef {
        id: String,
        version: i64,
    }
}

wire_record! {
    AskStepRef {
        ask_id: String,
        ask_type: String,
        attempt: i64,
    }
}

wire_record! {
    Action {
        key: String,
        ask: Option<AskStepRef> = None,
        body: ActionBody,
    }
}

wire_record! {
    TimerRef {
        timer_id: String,
        fire_at: TimestampMicros,
    }
}

wire_union! {
    /// The ask transitions.
    AskTransition { AskOpened, AskStepTaken, AskResolved, AskCancelled }
}

wire_record! {
    AskOpened {
        ask_id: String,
        ask_type: String,
        target_contact: String,
        sop: SopRef,
        opened_at: TimestampMicros,
        max_attempts: i64,
        stop_sequence: Option<i64> = None,
    }
}

wire_record! {
    AskStepTaken {
        ask_id: String,
        step: i64,
        step_kind: String,
        timer: Option<TimerRef> = None,
    }
}

wire_record! {
    AskResolved {
        ask_id: String,
        resolved_by: String,
        resolved_at: TimestampMicros,
    }
}

wire_record! {
    AskCancelled {
        ask_id: String,
        reason: String,
        cancelled_at: TimestampMicros,
    }
}

wire_union! {
    /// Contact updates.
    ContactUpdate { SmsBlocked }
}

wire_record! {
    SmsBlocked {
        contact_id: String,
        reason: String,
    }
}

wire_record! {
    IntentRecord {
        intent: String,
        probability: f64,
    }
}

wire_record! {
    LlmUsage {
        method: String,
        model_id: String,
        input_tokens: i64,
        output_tokens: i64,
        cost_usd: f64,
        latency_ms: i64,
    }
}

wire_record! {
    DecisionRecord {
        decision_id: String,
        load_id: String,
        trigger_event_id: String,
        trigger_kind: String,
        decided_at: TimestampMicros,
        sop: Option<SopRef> = None,
        path: String,
        transitions: Vec<AskTransition> = Vec::new(),
        contact_updates: Vec<ContactUpdate> = Vec::new(),
        actions: Vec<Action>,
        rationale: String,
        intent: Option<IntentRecord> = None,
        llm_usage: Vec<LlmUsage> = Vec::new(),
    }
}
