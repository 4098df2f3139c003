//! One test per projection and trigger rule (behavior.md §2–§4, ADR 0001).

mod common;
use common::*;
use load_agent_domain::*;

fn tracking_after(log: &[LogEntry]) -> Tracking {
    project_state("481207", log).tracking
}

fn triggers_of(log: &[LogEntry], next: LogEntry) -> Vec<Trigger> {
    let before = tracking_after(log);
    let mut all = log.to_vec();
    all.push(next);
    detect_triggers(&before, &tracking_after(&all))
}

fn base() -> Vec<LogEntry> {
    vec![registered(at("2026-03-02T12:50:00Z"))]
}

#[test]
fn registration_starts_to_pickup_at_stop_one() {
    let s = project_state("481207", &base());
    assert!(s.is_registered());
    assert_eq!((s.tracking.stage, s.tracking.current_stop, s.version), (Stage::ToPickup, 1, 1));
    assert_eq!(s.sop(), Some(SopRef { id: "client_a".into(), version: 1 }));
}

#[test]
fn events_before_registration_change_nothing() {
    let log = vec![ping("p", at("2026-03-02T13:00:00Z"), 1, RiskBand::High)];
    let s = project_state("481207", &log);
    assert!(!s.is_registered());
    assert!(s.tracking.delay_risk.is_empty());
}

#[test]
fn a_band_change_is_a_trigger_and_the_same_band_is_not() {
    let mut log = base();
    let t = triggers_of(&log, ping("p1", at("2026-03-02T13:00:00Z"), 1, RiskBand::High));
    assert_eq!(t, [Trigger::DelayRiskChanged { stop: 1, from: RiskBand::Low, to: RiskBand::High }]);
    log.push(ping("p1", at("2026-03-02T13:00:00Z"), 1, RiskBand::High));
    assert!(triggers_of(&log, ping("p2", at("2026-03-02T13:05:00Z"), 1, RiskBand::High)).is_empty());
}

#[test]
fn the_first_low_ping_is_not_a_band_change() {
    assert!(triggers_of(&base(), ping("p1", at("2026-03-02T13:00:00Z"), 1, RiskBand::Low)).is_empty());
}

#[test]
fn risk_is_tracked_per_stop() {
    let mut log = base();
    log.push(ping("p1", at("2026-03-02T13:00:00Z"), 1, RiskBand::High));
    let t = triggers_of(&log, ping("p2", at("2026-03-02T13:05:00Z"), 2, RiskBand::High));
    assert_eq!(t, [Trigger::DelayRiskChanged { stop: 2, from: RiskBand::Low, to: RiskBand::High }]);
}

#[test]
fn a_ping_recorded_before_the_last_applied_one_is_stale() {
    let mut log = base();
    log.push(ping("p1", at("2026-03-02T13:10:00Z"), 1, RiskBand::Medium));
    let t = triggers_of(&log, ping("p0", at("2026-03-02T13:00:00Z"), 1, RiskBand::High));
    assert!(t.is_empty());
    log.push(ping("p0", at("2026-03-02T13:00:00Z"), 1, RiskBand::High));
    let s = project_state("481207", &log);
    assert_eq!(s.tracking.risk(1), RiskBand::Medium);
    assert_eq!(s.tracking.last_ping_at, Some(at("2026-03-02T13:10:00Z")));
}

#[test]
fn a_ping_for_a_stop_reached_or_passed_is_ignored() {
    let mut log = base();
    log.push(stop_status("a1", at("2026-03-02T13:00:00Z"), 1, StopStatusKind::Arrived));
    assert!(triggers_of(&log, ping("p1", at("2026-03-02T13:05:00Z"), 1, RiskBand::High)).is_empty());
    log.push(stop_status("d1", at("2026-03-02T13:30:00Z"), 1, StopStatusKind::Departed));
    assert!(triggers_of(&log, ping("p2", at("2026-03-02T13:35:00Z"), 1, RiskBand::High)).is_empty());
    assert_eq!(triggers_of(&log, ping("p3", at("2026-03-02T13:35:00Z"), 2, RiskBand::High)).len(), 1);
}

#[test]
fn a_ping_for_an_unknown_stop_is_ignored() {
    assert!(triggers_of(&base(), ping("p1", at("2026-03-02T13:00:00Z"), 9, RiskBand::High)).is_empty());
}

#[test]
fn arriving_at_a_pickup_enters_at_pickup() {
    let t = triggers_of(&base(), stop_status("a1", at("2026-03-02T13:00:00Z"), 1, StopStatusKind::Arrived));
    assert_eq!(
        t,
        [Trigger::StageEntered {
            stage: Stage::AtPickup,
            from: Stage::ToPickup,
            stop: 1,
            departed_stop: None
        }]
    );
}

#[test]
fn departing_the_pickup_enters_to_delivery_naming_the_departed_stop() {
    let mut log = base();
    log.push(stop_status("a1", at("2026-03-02T13:00:00Z"), 1, StopStatusKind::Arrived));
    let t = triggers_of(&log, stop_status("d1", at("2026-03-02T14:00:00Z"), 1, StopStatusKind::Departed));
    assert_eq!(
        t,
        [Trigger::StageEntered {
            stage: Stage::ToDelivery,
            from: Stage::AtPickup,
            stop: 2,
            departed_stop: Some(1)
        }]
    );
}

#[test]
fn delivered_at_the_last_stop_is_terminal() {
    let mut log = base();
    log.push(stop_status("a2", at("2026-03-02T20:00:00Z"), 2, StopStatusKind::Arrived));
    let t = triggers_of(&log, stop_status("dl", at("2026-03-02T21:00:00Z"), 2, StopStatusKind::Delivered));
    assert!(matches!(t.as_slice(), [Trigger::StageEntered { stage: Stage::Delivered, .. }]));
    log.push(stop_status("dl", at("2026-03-02T21:00:00Z"), 2, StopStatusKind::Delivered));
    assert!(
        triggers_of(&log, stop_status("a2b", at("2026-03-02T21:05:00Z"), 2, StopStatusKind::Arrived))
            .is_empty()
    );
}

#[test]
fn stale_stop_statuses_produce_nothing() {
    let mut log = base();
    log.push(stop_status("a2", at("2026-03-02T20:00:00Z"), 2, StopStatusKind::Arrived));
    // behind the current stop
    assert!(
        triggers_of(&log, stop_status("a1", at("2026-03-02T20:05:00Z"), 1, StopStatusKind::Arrived))
            .is_empty()
    );
    // does not change the stage
    assert!(
        triggers_of(&log, stop_status("a2b", at("2026-03-02T20:06:00Z"), 2, StopStatusKind::Arrived))
            .is_empty()
    );
    // departing the last stop, delivered at a stop that is not the last
    assert!(
        triggers_of(&log, stop_status("d2", at("2026-03-02T20:07:00Z"), 2, StopStatusKind::Departed))
            .is_empty()
    );
    assert!(
        triggers_of(&base(), stop_status("x", at("2026-03-02T20:07:00Z"), 1, StopStatusKind::Delivered))
            .is_empty()
    );
}

#[test]
fn asks_change_only_through_decision_transitions_and_closed_asks_are_kept() {
    let mut log = base();
    let ask_id = ask_id_for("ping_0700", "eta_request");
    let opened = AskTransition::AskOpened {
        ask_id: ask_id.clone(),
        ask_type: "eta_request".into(),
        target_contact: "drv".into(),
        sop: SopRef { id: "client_a".into(), version: 1 },
        opened_at: at("2026-03-02T13:00:00Z"),
        max_attempts: 2,
        stop_sequence: Some(1),
    };
    log.push(LogEntry::Decision(decision("ping_0700", at("2026-03-02T13:00:00Z"), vec![opened], vec![])));
    assert_eq!(project_state("481207", &log).open_asks_of_type("eta_request").count(), 1);
    let resolved = AskTransition::AskResolved {
        ask_id: ask_id.clone(),
        resolved_by: "sms_0710".into(),
        resolved_at: at("2026-03-02T13:10:00Z"),
    };
    log.push(LogEntry::Decision(decision("sms_0710", at("2026-03-02T13:10:00Z"), vec![resolved], vec![])));
    let s = project_state("481207", &log);
    assert_eq!(s.open_asks.len(), 0);
    let closed = s.ask(&ask_id).expect("kept as closed");
    assert_eq!(closed.status, AskStatus::Resolved);
    assert_eq!(closed.resolved_by.as_deref(), Some("sms_0710"));
    assert!(!closed.is_timer_current(0), "a timer for a resolved ask is never current");
}

#[test]
fn sms_blocked_comes_from_decisions_and_removes_sms_support() {
    let mut log = base();
    let mut d = decision("sms_stop", at("2026-03-02T13:00:00Z"), vec![], vec![]);
    d.contact_updates.push(ContactUpdate::SmsBlocked { contact_id: "drv".into(), reason: "opt_out".into() });
    log.push(LogEntry::Decision(d));
    let s = project_state("481207", &log);
    let drv = s.load.as_ref().and_then(|l| l.contact("drv")).expect("driver");
    assert!(!s.supports(drv, MessageChannel::Sms));
    assert!(!s.supports(drv, MessageChannel::Email), "the driver has no email");
}

#[test]
fn committed_keys_are_the_effective_actions_of_decisions() {
    let mut log = base();
    let mut keys = ActionKeys::new("481207", "sms_1");
    keys.by_event(ActionBody::TmsNote { text: "eta".into() });
    log.push(LogEntry::Decision(decision("sms_1", at("2026-03-02T13:00:00Z"), vec![], keys.into_actions())));
    log.push(LogEntry::Decision(decision("sms_2", at("2026-03-02T13:01:00Z"), vec![], vec![])));
    let s = project_state("481207", &log);
    assert_eq!(s.committed_action_keys.len(), 1);
    assert!(s.committed_action_keys.contains("481207/evt:sms_1/tms_note"));
    assert_eq!(s.decisions, 2);
}
