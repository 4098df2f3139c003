//! Load 481207 of ADR 0001 and its parts: client_a's load from Acme DC (Joliet) to Store 88
//! (Dayton), with a driver reached by SMS and a carrier dispatcher by email. Tests that need a
//! variant change fields of [`load_481207`] or [`sample_load`] with struct update syntax.

use chrono::{DateTime, FixedOffset};
use load_agent_domain::{Contact, Language, LoadRegistered, Role, Stop, StopKind};

/// The load every fixture is about unless a test needs several.
pub const LOAD: &str = "481207";

fn local(s: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(s).expect("a valid fixture time")
}

/// A contact with no channel and English as its language.
pub fn contact(id: &str, role: Role, name: &str) -> Contact {
    Contact {
        id: id.into(),
        role,
        name: name.into(),
        phone: None,
        email: None,
        slack: None,
        language: Language::En,
    }
}

/// The driver, `drv`, reached by SMS.
pub fn driver(name: &str) -> Contact {
    Contact { phone: Some("+13125550111".into()), ..contact("drv", Role::Driver, name) }
}

/// The carrier dispatcher, `disp` (Dana), reached by email.
pub fn dispatcher() -> Contact {
    Contact { email: Some("dana@carrier.example".into()), ..contact("disp", Role::CarrierDispatcher, "Dana") }
}

/// The broker's desk, `brk`, reached on Slack.
pub fn broker() -> Contact {
    Contact { slack: Some("#acme-loads".into()), ..contact("brk", Role::Broker, "Acme desk") }
}

/// The pickup (stop 1): Acme DC, 08:00 Central, PO 55821.
pub fn pickup() -> Stop {
    Stop {
        sequence: 1,
        kind: StopKind::Pickup,
        name: "Acme DC".into(),
        address: "1 Dock Rd, Joliet, IL".into(),
        appointment: local("2026-03-02T08:00:00-06:00"),
        po_numbers: vec!["55821".into()],
        reference: None,
    }
}

/// The delivery (stop 2): Store 88, 16:00 Eastern the same day.
pub fn delivery() -> Stop {
    Stop {
        sequence: 2,
        kind: StopKind::Delivery,
        name: "Store 88".into(),
        address: "88 Main St, Dayton, OH".into(),
        appointment: local("2026-03-02T16:00:00-05:00"),
        po_numbers: vec![],
        reference: None,
    }
}

/// Load 481207's registration under another id: client_a (no SOP version pinned), the driver
/// Luis and the dispatcher Dana, [`pickup`] and [`delivery`], no reefer.
pub fn sample_load(load_id: &str) -> LoadRegistered {
    LoadRegistered {
        load_id: load_id.into(),
        client: "client_a".into(),
        sop_version: None,
        contacts: vec![driver("Luis"), dispatcher()],
        stops: vec![pickup(), delivery()],
        reefer: None,
    }
}

/// Load 481207 of ADR 0001 (see [`sample_load`]).
pub fn load_481207() -> LoadRegistered {
    sample_load(LOAD)
}

/// Load 481207 with every optional field set, for round trips that must cover the whole
/// registration: client_b on SOP version 3, a Spanish-speaking driver, the broker's desk, two POs
/// and a reference at the pickup, a delivery appointment with a fraction of a second in a
/// half-hour offset, and a reefer.
pub fn full_load() -> LoadRegistered {
    LoadRegistered {
        client: "client_b".into(),
        sop_version: Some(3),
        contacts: vec![Contact { language: Language::Es, ..driver("Luis") }, dispatcher(), broker()],
        stops: vec![
            Stop {
                po_numbers: vec!["55821".into(), "55822".into()],
                reference: Some("PU-7".into()),
                ..pickup()
            },
            Stop { appointment: local("2026-03-02T16:30:15.250+05:30"), ..delivery() },
        ],
        reefer: Some(load_agent_domain::Reefer { set_point_f: 34.0, tolerance_f: 2.5 }),
        ..load_481207()
    }
}
