//! Checks an inbound event against the load before it is processed, and pins the SOP version
//! of a registration. An event that fails here is not decided on: the consumer sends it to the
//! DLQ with the reason.

use load_agent_domain::{EventKind, InboundEvent, LoadState};

use crate::pipeline::Agent;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidEvent {
    #[error("event_id is empty")]
    EmptyEventId,
    #[error("the event's load_id {payload:?} differs from the record key {key:?}")]
    KeyMismatch { key: String, payload: String },
    #[error("unknown load {0}: no load_registered event was processed for it")]
    UnknownLoad(String),
    #[error("load_registered: {0}")]
    BadRegistration(String),
    #[error("load_registered: unknown SOP {0:?}")]
    UnknownSop(String),
    #[error("load_registered: SOP {id:?} has no version {version}")]
    UnknownSopVersion { id: String, version: u32 },
    #[error("load_registered: load_id {inner:?} differs from the event's load_id {outer:?}")]
    RegistrationLoadIdMismatch { outer: String, inner: String },
    #[error("{field}: {problem}")]
    BadField { field: &'static str, problem: String },
}

/// Validates `event` for a load in `state` and returns the event as it is to be logged.
pub fn prepare_event(
    state: &LoadState,
    event: InboundEvent,
    agent: &Agent,
) -> Result<InboundEvent, InvalidEvent> {
    if event.event_id.trim().is_empty() {
        return Err(InvalidEvent::EmptyEventId);
    }
    if event.load_id != state.load_id {
        return Err(InvalidEvent::KeyMismatch { key: state.load_id.clone(), payload: event.load_id.clone() });
    }
    let mut event = event;
    match &mut event.kind {
        EventKind::LoadRegistered { load } => {
            if load.load_id != event.load_id {
                return Err(InvalidEvent::RegistrationLoadIdMismatch {
                    outer: event.load_id.clone(),
                    inner: load.load_id.clone(),
                });
            }
            load.validate().map_err(|e| InvalidEvent::BadRegistration(e.to_string()))?;
            match load.sop_version {
                Some(v) => {
                    if agent.sops.get(&load.client, v).is_none() {
                        if agent.sops.latest(&load.client).is_none() {
                            return Err(InvalidEvent::UnknownSop(load.client.clone()));
                        }
                        return Err(InvalidEvent::UnknownSopVersion { id: load.client.clone(), version: v });
                    }
                }
                None => {
                    let sop = agent
                        .sops
                        .latest(&load.client)
                        .ok_or_else(|| InvalidEvent::UnknownSop(load.client.clone()))?;
                    load.sop_version = Some(sop.spec.version);
                }
            }
        }
        _ if !state.is_registered() => return Err(InvalidEvent::UnknownLoad(state.load_id.clone())),
        EventKind::Sms { text, .. } | EventKind::Slack { text, .. } | EventKind::Email { text, .. }
            if text.len() > MAX_MESSAGE_BYTES =>
        {
            return Err(InvalidEvent::BadField {
                field: "text",
                problem: format!("{} bytes, over the {MAX_MESSAGE_BYTES}-byte limit", text.len()),
            });
        }
        _ => {}
    }
    Ok(event)
}

/// Messages longer than this are refused (to the DLQ), not truncated.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;
