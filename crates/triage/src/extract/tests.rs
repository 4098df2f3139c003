use chrono::{DateTime, FixedOffset, Utc};

use super::*;

fn at(hour: u8, minute: u8, meridiem: Option<Meridiem>) -> Option<EtaValue> {
    Some(EtaValue::At { hour, minute, meridiem, tomorrow: false })
}

fn mins(minutes: u32) -> Option<EtaValue> {
    Some(EtaValue::In { minutes })
}

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("test timestamps are valid RFC 3339").with_timezone(&Utc)
}

fn offset(hours: i32) -> FixedOffset {
    FixedOffset::east_opt(hours * 3600).expect("test offsets are in range")
}

#[test]
fn eta_now_in_english_and_spanish() {
    for text in [
        "here",
        "Im here",
        "im at the dock",
        "checked in at the shipper",
        "ya llegue",
        "Ya llegué a la entrega",
        "estoy aqui",
        "here at receiver door 12",
    ] {
        assert_eq!(extract_eta(text), Some(EtaValue::Now), "{text}");
    }
    for text in ["not here yet", "will be here soon", "here is the po", "cuando llegue te aviso", "ok"] {
        assert_eq!(extract_eta(text), None, "{text}");
    }
}

#[test]
fn eta_durations() {
    assert_eq!(extract_eta("45 min out"), mins(45));
    assert_eq!(extract_eta("bout an hour"), mins(60));
    assert_eq!(extract_eta("1.5 hrs"), mins(90));
    assert_eq!(extract_eta("2 horas"), mins(120));
    assert_eq!(extract_eta("20 mins away"), mins(20));
    assert_eq!(extract_eta("llego en 20 min"), mins(20));
    assert_eq!(extract_eta("llego en 20"), mins(20));
    assert_eq!(extract_eta("about an hour and a half out"), mins(90));
    assert_eq!(extract_eta("1 hora y media"), mins(90));
    assert_eq!(extract_eta("1hr 30min"), mins(90));
    assert_eq!(extract_eta("1h30"), mins(90));
    assert_eq!(extract_eta("half hour"), mins(30));
    assert_eq!(extract_eta("media hora"), mins(30));
    assert_eq!(extract_eta("couple hours out"), mins(120));
    assert_eq!(extract_eta("ETA 45"), mins(45));
    assert_eq!(extract_eta("eta bout 45"), mins(45));
    assert_eq!(extract_eta("forty five minutes"), mins(45));
    assert_eq!(extract_eta("eta 10-15 min"), mins(15));
    assert_eq!(extract_eta("be there in 15"), mins(15));
}

#[test]
fn delays_and_waits_are_not_etas() {
    assert_eq!(extract_eta("running 45 min late"), None);
    assert_eq!(extract_eta("been waiting 3 hrs"), None);
    // At the stop: the two hours are a wait, not an ETA.
    assert_eq!(extract_eta("sitting here for 2 hours no door"), Some(EtaValue::Now));
    assert_eq!(extract_eta("running 30 min behind, eta 3:15"), at(3, 15, None));
}

#[test]
fn eta_clock_times() {
    assert_eq!(extract_eta("eta 2:30"), at(2, 30, None));
    assert_eq!(extract_eta("230pm"), at(2, 30, Some(Meridiem::Pm)));
    assert_eq!(extract_eta("by 14:15"), at(14, 15, None));
    assert_eq!(extract_eta("a las 3"), at(3, 0, None));
    assert_eq!(extract_eta("around 4"), at(4, 0, None));
    assert_eq!(extract_eta("2 pm"), at(2, 0, Some(Meridiem::Pm)));
    assert_eq!(extract_eta("should be there 11am"), at(11, 0, Some(Meridiem::Am)));
    assert_eq!(extract_eta("ETA 2.30"), at(2, 30, None));
    assert_eq!(extract_eta("230"), at(2, 30, None));
    assert_eq!(extract_eta("3ish"), at(3, 0, None));
    assert_eq!(extract_eta("llego a las 4 de la tarde"), at(4, 0, Some(Meridiem::Pm)));
    assert_eq!(extract_eta("around 8 tonight"), at(8, 0, Some(Meridiem::Pm)));
    assert_eq!(extract_eta("noon"), at(12, 0, Some(Meridiem::Pm)));
    assert_eq!(extract_eta("eta 1:45 a.m."), at(1, 45, Some(Meridiem::Am)));
    assert_eq!(
        extract_eta("tomorrow at 7am"),
        Some(EtaValue::At { hour: 7, minute: 0, meridiem: Some(Meridiem::Am), tomorrow: true })
    );
    assert_eq!(
        extract_eta("mañana a las 6 de la mañana"),
        Some(EtaValue::At { hour: 6, minute: 0, meridiem: Some(Meridiem::Am), tomorrow: true })
    );
}

#[test]
fn numbers_that_are_not_times() {
    assert_eq!(extract_eta("reefer at 34"), None);
    assert_eq!(extract_eta("po 4512873"), None);
    assert_eq!(extract_eta("stop 2"), None);
    assert_eq!(extract_eta("10-4"), None);
    assert_eq!(extract_eta("34"), None);
    assert_eq!(extract_eta("99999999999:99"), None);
    assert_eq!(extract_eta("at 3 stops"), None);
}

#[test]
fn resolve_now_and_durations() {
    let now = utc("2025-03-10T15:00:00Z");
    assert_eq!(resolve_eta(&EtaValue::Now, now, offset(-6)), now);
    assert_eq!(resolve_eta(&EtaValue::In { minutes: 45 }, now, offset(-6)), utc("2025-03-10T15:45:00Z"));
}

#[test]
fn resolve_clock_time_in_the_stop_zone() {
    // 09:00 at a -06:00 stop; "eta 2:30" means 14:30 local (08:30 is more than 30 min ago).
    let now = utc("2025-03-10T15:00:00Z");
    let eta = at(2, 30, None).expect("literal");
    assert_eq!(resolve_eta(&eta, now, offset(-6)), utc("2025-03-10T20:30:00Z"));
    // The same message at a -05:00 stop (10:00 local) is 14:30 local too.
    assert_eq!(resolve_eta(&eta, now, offset(-5)), utc("2025-03-10T19:30:00Z"));
    // "eta 8:45" at 09:00 local (-06:00): 15 minutes ago is within the 30 minute grace.
    let late = at(8, 45, None).expect("literal");
    assert_eq!(resolve_eta(&late, now, offset(-6)), utc("2025-03-10T14:45:00Z"));
    // "eta 8:15" at 09:00 local is 45 minutes ago: tonight at 20:15.
    let earlier = at(8, 15, None).expect("literal");
    assert_eq!(resolve_eta(&earlier, now, offset(-6)), utc("2025-03-11T02:15:00Z"));
    // 24-hour times mean themselves.
    let h24 = at(14, 15, None).expect("literal");
    assert_eq!(resolve_eta(&h24, now, offset(-5)), utc("2025-03-10T19:15:00Z"));
}

#[test]
fn resolve_am_pm_across_midnight() {
    // 23:50 local at a -05:00 stop (04:50Z next day).
    let now = utc("2025-03-11T04:50:00Z");
    // "eta 12:30" without am/pm: 00:30 local, just after midnight.
    let half_past = at(12, 30, None).expect("literal");
    assert_eq!(resolve_eta(&half_past, now, offset(-5)), utc("2025-03-11T05:30:00Z"));
    // "1:15am": tomorrow morning local.
    let am = at(1, 15, Some(Meridiem::Am)).expect("literal");
    assert_eq!(resolve_eta(&am, now, offset(-5)), utc("2025-03-11T06:15:00Z"));
    // "11pm" at 23:50: 50 minutes ago, so the next 11pm.
    let pm = at(11, 0, Some(Meridiem::Pm)).expect("literal");
    assert_eq!(resolve_eta(&pm, now, offset(-5)), utc("2025-03-12T04:00:00Z"));
    // At 00:10 local (-06:00), "eta 11:55" is 15 minutes ago, still yesterday's 23:55.
    let now = utc("2025-03-11T06:10:00Z");
    let just_late = at(11, 55, None).expect("literal");
    assert_eq!(resolve_eta(&just_late, now, offset(-6)), utc("2025-03-11T05:55:00Z"));
}

#[test]
fn resolve_tomorrow_uses_the_next_local_day() {
    // 22:00 local at -06:00; "mañana a las 8" is 08:00 the next local day, not 20:00.
    let now = utc("2025-03-11T04:00:00Z");
    let eta = EtaValue::At { hour: 8, minute: 0, meridiem: None, tomorrow: true };
    assert_eq!(resolve_eta(&eta, now, offset(-6)), utc("2025-03-11T14:00:00Z"));
}

#[test]
fn temperatures() {
    assert_eq!(extract_temperature("-10"), Some(-10.0));
    assert_eq!(extract_temperature("temp is 34.5"), Some(34.5));
    assert_eq!(extract_temperature("reefer at 34F"), Some(34.0));
    assert_eq!(extract_temperature("esta a 35 grados"), Some(35.0));
    assert_eq!(extract_temperature("el reefer esta a 36"), Some(36.0));
    assert_eq!(extract_temperature("temp -10"), Some(-10.0));
    assert_eq!(extract_temperature("34"), Some(34.0));
    assert_eq!(extract_temperature("34?"), Some(34.0));
    assert_eq!(extract_temperature("box at 2c"), Some(35.6));
    assert_eq!(extract_temperature("set at 34 running 36"), Some(36.0));
    assert_eq!(extract_temperature("reefer set to 34"), Some(34.0));
    assert_eq!(extract_temperature("running 34 degrees"), Some(34.0));
}

#[test]
fn numbers_that_are_not_temperatures() {
    assert_eq!(extract_temperature("10-4"), None);
    assert_eq!(extract_temperature("running 45 min late"), None);
    assert_eq!(extract_temperature("unit 5312"), None);
    assert_eq!(extract_temperature("eta 2:30"), None);
    assert_eq!(extract_temperature("po 4512873"), None);
    assert_eq!(extract_temperature("stop 2"), None);
    assert_eq!(extract_temperature("99999999999"), None);
    assert_eq!(extract_temperature("ok"), None);
}

#[test]
fn stop_refs() {
    assert_eq!(extract_stop_ref("at the shipper"), Some(StopRef::Pickup));
    assert_eq!(extract_stop_ref("whats the pickup #"), Some(StopRef::Pickup));
    assert_eq!(extract_stop_ref("what time do i pick up"), Some(StopRef::Pickup));
    assert_eq!(extract_stop_ref("po for the receiver?"), Some(StopRef::Delivery));
    assert_eq!(extract_stop_ref("consignee address"), Some(StopRef::Delivery));
    assert_eq!(extract_stop_ref("cual es la direccion de entrega"), Some(StopRef::Delivery));
    assert_eq!(extract_stop_ref("appt for stop 2"), Some(StopRef::Sequence(2)));
    assert_eq!(extract_stop_ref("stop #3 po"), Some(StopRef::Sequence(3)));
    assert_eq!(extract_stop_ref("2nd stop address"), Some(StopRef::Sequence(2)));
    assert_eq!(extract_stop_ref("second stop"), Some(StopRef::Sequence(2)));
    assert_eq!(extract_stop_ref("segunda parada"), Some(StopRef::Sequence(2)));
    assert_eq!(extract_stop_ref("last stop"), Some(StopRef::Delivery));
    assert_eq!(extract_stop_ref("stop texting me"), None);
    assert_eq!(extract_stop_ref("stop 0"), None);
    assert_eq!(extract_stop_ref("ok"), None);
}
