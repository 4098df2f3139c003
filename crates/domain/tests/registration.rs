//! A load's registration: how a sender is matched to a contact, what `validate` refuses (naming
//! the field), and the reefer's range (behavior.md §1, §2).

use load_agent_domain::*;
use load_agent_testkit::load::{broker, dispatcher, driver, load_481207};

/// Load 481207 with the broker's desk as a third contact (reached on Slack).
fn with_broker() -> LoadRegistered {
    LoadRegistered { contacts: vec![driver("Luis"), dispatcher(), broker()], ..load_481207() }
}

#[test]
fn senders_resolve_by_id_phone_email_and_slack() {
    let load = with_broker();
    assert_eq!(load.resolve_sender("drv").map(|c| c.id.as_str()), Some("drv"));
    assert_eq!(load.resolve_sender("+13125550111").map(|c| c.id.as_str()), Some("drv"));
    assert_eq!(load.resolve_sender("DANA@carrier.example").map(|c| c.id.as_str()), Some("disp"));
    assert_eq!(load.resolve_sender("#acme-loads").map(|c| c.id.as_str()), Some("brk"));
    assert!(load.resolve_sender("+19995550000").is_none());
}

#[test]
fn validation_names_the_field() {
    let mut load = with_broker();
    assert_eq!(load.validate(), Ok(()));
    load.stops[1].sequence = 3;
    assert_eq!(load.validate(), Err(LoadValidationError::BadSequence { index: 1, found: 3, expected: 2 }));
    let mut load = with_broker();
    load.contacts[1].id = "drv".into();
    assert!(load.validate().unwrap_err().to_string().contains("contacts[1].id"));
}

#[test]
fn reefer_range_is_inclusive() {
    let r = Reefer { set_point_f: 34.0, tolerance_f: 2.0 };
    assert!(r.in_range(36.0) && r.in_range(32.0) && r.in_range(34.5));
    assert!(!r.in_range(36.1) && !r.in_range(31.9));
}
