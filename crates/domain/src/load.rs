//! The load's metadata (`LoadRegistered`, behavior.md §1): contacts, stops, reefer settings and
//! the SOP the load is pinned to; the stages a load moves through (`Stage`, which the fold in
//! `state` tracks and an `update_stage` action mirrors) and its email threads (`EmailThread`).

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

/// The SOP a load (and every ask opened for it) is pinned to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SopRef {
    pub id: String,
    pub version: u32,
}

crate::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
    #[serde(rename_all = "snake_case")]
    pub enum Role {
        Driver => "driver",
        CarrierDispatcher => "carrier_dispatcher",
        Broker => "broker",
        Shipper => "shipper",
        Receiver => "receiver",
    }
}

crate::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum Language {
        #[default]
        En => "en",
        Es => "es",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contact {
    pub id: String,
    pub role: Role,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<String>,
    #[serde(default)]
    pub language: Language,
}

crate::spelled_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum StopKind {
        Pickup => "pickup",
        Delivery => "delivery",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    pub sequence: u32,
    pub kind: StopKind,
    pub name: String,
    pub address: String,
    /// The appointment with the stop's UTC offset: the offset is the stop's time zone.
    pub appointment: DateTime<FixedOffset>,
    #[serde(default)]
    pub po_numbers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

impl Stop {
    /// The stop's time zone, taken from its appointment.
    pub fn offset(&self) -> FixedOffset {
        *self.appointment.offset()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reefer {
    pub set_point_f: f64,
    pub tolerance_f: f64,
}

impl Reefer {
    /// A reading is in range when it is within `set_point_f ± tolerance_f` (inclusive).
    pub fn in_range(&self, reading_f: f64) -> bool {
        (reading_f - self.set_point_f).abs() <= self.tolerance_f
    }
}

/// The metadata of a load at registration: the first entry of its log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRegistered {
    pub load_id: String,
    /// The SOP id (`client_a`, `client_b`, ...).
    pub client: String,
    /// The SOP version in force at registration. `None` in an inbound event means "the latest
    /// version"; the worker pins the concrete version before the entry is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sop_version: Option<u32>,
    pub contacts: Vec<Contact>,
    pub stops: Vec<Stop>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reefer: Option<Reefer>,
}

/// What is wrong with a registration, named by field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadValidationError {
    #[error("load_id is empty")]
    EmptyLoadId,
    #[error("client (the SOP id) is empty")]
    EmptyClient,
    #[error("stops: a load needs at least one pickup and one delivery")]
    TooFewStops,
    #[error("stops[{index}].sequence is {found}, expected {expected} (sequences are 1, 2, ... in order)")]
    BadSequence { index: usize, found: u32, expected: u32 },
    #[error("stops: the first stop must be a pickup and the last a delivery")]
    BadStopKinds,
    #[error("contacts[{index}].id {id:?} is duplicated or empty")]
    BadContactId { index: usize, id: String },
    #[error("reefer.tolerance_f must be a non-negative number")]
    BadReefer,
}

impl LoadRegistered {
    pub fn validate(&self) -> Result<(), LoadValidationError> {
        if self.load_id.trim().is_empty() {
            return Err(LoadValidationError::EmptyLoadId);
        }
        if self.client.trim().is_empty() {
            return Err(LoadValidationError::EmptyClient);
        }
        if self.stops.len() < 2 {
            return Err(LoadValidationError::TooFewStops);
        }
        for (i, s) in self.stops.iter().enumerate() {
            let expected = i as u32 + 1;
            if s.sequence != expected {
                return Err(LoadValidationError::BadSequence { index: i, found: s.sequence, expected });
            }
        }
        let first_is_pickup = self.stops.first().is_some_and(|s| s.kind == StopKind::Pickup);
        let last_is_delivery = self.stops.last().is_some_and(|s| s.kind == StopKind::Delivery);
        if !first_is_pickup || !last_is_delivery {
            return Err(LoadValidationError::BadStopKinds);
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in self.contacts.iter().enumerate() {
            if c.id.trim().is_empty() || !seen.insert(c.id.as_str()) {
                return Err(LoadValidationError::BadContactId { index: i, id: c.id.clone() });
            }
        }
        if let Some(r) = &self.reefer
            && !(r.tolerance_f >= 0.0 && r.set_point_f.is_finite() && r.tolerance_f.is_finite())
        {
            return Err(LoadValidationError::BadReefer);
        }
        Ok(())
    }

    pub fn contact(&self, id: &str) -> Option<&Contact> {
        self.contacts.iter().find(|c| c.id == id)
    }

    /// Finds the contact a message came from: by contact id, phone, email or Slack handle.
    pub fn resolve_sender(&self, from: &str) -> Option<&Contact> {
        let from = from.trim();
        self.contact(from).or_else(|| {
            self.contacts.iter().find(|c| {
                c.phone.as_deref() == Some(from)
                    || c.email.as_deref().is_some_and(|e| e.eq_ignore_ascii_case(from))
                    || c.slack.as_deref() == Some(from)
            })
        })
    }

    pub fn first_contact_with_role(&self, role: Role) -> Option<&Contact> {
        self.contacts.iter().find(|c| c.role == role)
    }

    pub fn stop(&self, sequence: u32) -> Option<&Stop> {
        self.stops.iter().find(|s| s.sequence == sequence)
    }

    pub fn last_stop_sequence(&self) -> u32 {
        self.stops.last().map_or(0, |s| s.sequence)
    }

    pub fn first_stop_of_kind(&self, kind: StopKind) -> Option<&Stop> {
        self.stops.iter().find(|s| s.kind == kind)
    }
}

crate::spelled_enum! {
    /// Where the load is between its stops; only `stop_status` events move it (see `state`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum Stage {
        #[default]
        ToPickup => "to_pickup",
        AtPickup => "at_pickup",
        ToDelivery => "to_delivery",
        AtDelivery => "at_delivery",
        Delivered => "delivered",
    }
}

impl Stage {
    pub fn approaching(kind: StopKind) -> Stage {
        match kind {
            StopKind::Pickup => Stage::ToPickup,
            StopKind::Delivery => Stage::ToDelivery,
        }
    }

    pub fn at(kind: StopKind) -> Stage {
        match kind {
            StopKind::Pickup => Stage::AtPickup,
            StopKind::Delivery => Stage::AtDelivery,
        }
    }

    /// At a stop (arrived, not yet departed).
    pub fn is_at_stop(self) -> bool {
        matches!(self, Stage::AtPickup | Stage::AtDelivery)
    }
}

crate::spelled_enum! {
    /// The email thread a message was received on or is sent to: the load's main thread or a
    /// new one.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum EmailThread {
        Main => "main",
        New => "new",
    }
}
