//! Triage and every extractor are total: arbitrary text (garbage unicode,
//! huge numbers, clock-like noise) never panics, and the distribution is
//! always a probability distribution.

use chrono::{DateTime, FixedOffset, Utc};
use load_agent_triage::{
    CONFIDENCE_THRESHOLD, Intent, TriageInput, TriageModel, extract_eta, extract_stop_ref,
    extract_temperature, resolve_eta,
};
use proptest::prelude::*;

/// Text that looks like what the extractors parse, to reach their corners.
fn messy_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9:.\\- ]{0,24}",
        "(eta|at|by|temp|reefer|stop|a las|en|in|around|-)? ?[-+]?[0-9]{1,14}([:.][0-9]{1,6})? ?(am|pm|p|a m|min|mins|hrs|h|horas|f|°|c|grados|nd|ish|oclock)?",
        "(stop|parada|2nd|second|last) ?#?[0-9]{0,12}",
        "[a-zA-Z0-9ñé👍?!#@°/ -]{0,80}",
        Just("99999999999:99".to_owned()),
        Just("-99999999999999999999999.5 degrees".to_owned()),
    ]
}

fn context() -> impl Strategy<Value = (Option<&'static str>, Option<&'static str>, Option<&'static str>)> {
    (
        prop::option::of(prop_oneof![Just("en"), Just("es"), Just("fr")]),
        prop::option::of(prop_oneof![Just("driver"), Just("carrier_dispatcher"), Just("broker")]),
        prop::option::of(prop_oneof![Just("eta_request"), Just("reefer_temp"), Just("other")]),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn classify_never_panics_and_gives_a_distribution(text in messy_text(), ctx in context()) {
        let (lang, from_role, open_ask) = ctx;
        let t = TriageModel::embedded().classify(&TriageInput { text: &text, lang, from_role, open_ask });
        prop_assert_eq!(t.distribution.len(), Intent::ALL.len());
        let sum: f64 = t.distribution.iter().map(|(_, p)| p).sum();
        prop_assert!((sum - 1.0).abs() < 1e-9, "sum {}", sum);
        prop_assert!(t.distribution.iter().all(|(_, p)| p.is_finite() && (0.0..=1.0).contains(p)));
        prop_assert_eq!((t.intent, t.probability), t.distribution[0]);
        prop_assert_eq!(t.confident, t.abstain.is_none());
        prop_assert!(!t.confident || t.probability >= CONFIDENCE_THRESHOLD);
        if let Some(f) = t.values.temperature_f {
            prop_assert!(f.is_finite() && (-60.0..=130.0).contains(&f));
        }
    }

    #[test]
    fn extractors_never_panic(text in messy_text(), now_secs in -5_000_000_000i64..5_000_000_000i64, offset_h in -12i32..=14) {
        let eta = extract_eta(&text);
        let _ = extract_stop_ref(&text);
        if let Some(f) = extract_temperature(&text) {
            prop_assert!(f.is_finite());
        }
        if let Some(eta) = eta {
            let now = DateTime::<Utc>::from_timestamp(now_secs, 0).unwrap_or_default();
            let offset = FixedOffset::east_opt(offset_h * 3600).expect("offsets within -12..=+14 h are valid");
            let at = resolve_eta(&eta, now, offset);
            // Resolution never goes back more than the 30 minute grace, nor past three days.
            prop_assert!(at >= now - chrono::Duration::minutes(30));
            prop_assert!(at <= now + chrono::Duration::days(3));
        }
    }
}
