//! The facts of one decision: the load, its SOP, the event and the clock, plus helpers that
//! fill template fields from load data.

use chrono::{DateTime, FixedOffset, Utc};
use load_agent_domain::{Contact, InboundEvent, Language, LoadRegistered, LoadState, Role, Stop, StopKind};
use load_agent_triage::StopRef;

use crate::sop::{Sop, SopRegistry};
use crate::templates::{Fields, Rendered, Templates};

pub(crate) struct Ctx<'a> {
    pub state: &'a LoadState,
    pub load: &'a LoadRegistered,
    pub sop: Option<&'a Sop>,
    pub sops: &'a SopRegistry,
    pub event: &'a InboundEvent,
    pub now: DateTime<Utc>,
    pub templates: &'a Templates,
}

impl<'a> Ctx<'a> {
    pub fn current_stop(&self) -> u32 {
        self.state.tracking.current_stop
    }

    pub fn stop(&self, seq: u32) -> Option<&'a Stop> {
        self.load.stop(seq)
    }

    /// The stop a message names, else the current stop.
    pub fn stop_for(&self, r: Option<StopRef>) -> Option<&'a Stop> {
        let cur = self.current_stop();
        let by_kind = |kind: StopKind| {
            self.load
                .stops
                .iter()
                .find(|s| s.kind == kind && s.sequence >= cur)
                .or_else(|| self.load.stops.iter().rev().find(|s| s.kind == kind))
        };
        let named = match r {
            Some(StopRef::Pickup) => by_kind(StopKind::Pickup),
            Some(StopRef::Delivery) => by_kind(StopKind::Delivery),
            Some(StopRef::Sequence(n)) => self.load.stop(n),
            None => None,
        };
        named.or_else(|| self.load.stop(cur))
    }

    pub fn contact_with_role(&self, role: Role) -> Option<&'a Contact> {
        self.load.first_contact_with_role(role)
    }

    /// Base fields: the load, the driver, and a stop when given.
    pub fn fields(&self, stop: Option<&Stop>, contact: Option<&Contact>) -> Fields {
        let mut f = Fields::new();
        f.insert("load_id", self.load.load_id.clone());
        if let Some(d) = self.contact_with_role(Role::Driver) {
            f.insert("driver_name", d.name.clone());
            f.insert("driver_phone", d.phone.clone().unwrap_or_else(|| "(no phone on file)".into()));
        } else {
            f.insert("driver_name", "the driver".into());
            f.insert("driver_phone", "(no driver on file)".into());
        }
        if let Some(c) = contact {
            f.insert("contact_name", first_name(&c.name).to_string());
        }
        if let Some(s) = stop {
            f.insert("stop_name", s.name.clone());
            f.insert("stop_address", s.address.clone());
            f.insert("stop_kind", s.kind.as_str().to_string());
            f.insert("appointment", format_local(s.appointment.with_timezone(&Utc), s.offset()));
            f.insert(
                "po_numbers",
                if s.po_numbers.is_empty() { "none on file".into() } else { s.po_numbers.join(", ") },
            );
        }
        f
    }

    pub fn render(&self, template: &str, lang: Language, fields: &Fields) -> Rendered {
        self.templates.render(template, lang, fields)
    }
}

pub(crate) fn first_name(name: &str) -> &str {
    name.split_whitespace().next().unwrap_or(name)
}

/// A time in a stop's zone, as people read it: `Mon Mar 2 08:00 (UTC-06:00)`.
pub(crate) fn format_local(t: DateTime<Utc>, offset: FixedOffset) -> String {
    let local = t.with_timezone(&offset);
    format!("{} (UTC{})", local.format("%a %b %-d %H:%M"), local.format("%:z"))
}
