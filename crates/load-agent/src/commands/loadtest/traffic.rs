//! The load test's traffic: N loads registered, then pings with risk changes, driver SMS and
//! dispatcher emails from the triage corpus, and stop arrivals and departures, picked at random
//! (seeded, so two runs with one seed send the same events in the same order). Timers and
//! delivery outcomes are not generated: the service makes them itself.

use chrono::{DateTime, Duration, Utc};
use load_agent_domain::{EventKind, InboundEvent, RiskBand, StopStatusKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use serde_json::json;

/// Labeled messages of the triage corpus (the first training file): realistic texts by role.
const CORPUS: &str = include_str!("../../../../../evals/triage/train/s00_original.jsonl");

#[derive(Debug, Deserialize)]
struct CorpusLine {
    text: String,
    #[serde(default)]
    from_role: Option<String>,
    #[serde(default)]
    lang: Option<String>,
}

/// Texts by who writes them.
#[derive(Debug, Default)]
struct Texts {
    driver_en: Vec<String>,
    driver_es: Vec<String>,
    dispatcher: Vec<String>,
}

impl Texts {
    fn from_corpus() -> Texts {
        let mut t = Texts::default();
        for line in CORPUS.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(m) = serde_json::from_str::<CorpusLine>(line) else { continue };
            match (m.from_role.as_deref(), m.lang.as_deref()) {
                (Some("carrier_dispatcher"), _) => t.dispatcher.push(m.text),
                (Some("driver") | None, Some("es")) => t.driver_es.push(m.text),
                (Some("driver") | None, _) => t.driver_en.push(m.text),
                _ => {}
            }
        }
        for (list, fallback) in [
            (&mut t.driver_en, "running about 20 min behind, traffic"),
            (&mut t.driver_es, "voy llegando en 30 minutos"),
            (&mut t.dispatcher, "Driver is on schedule, will confirm at pickup."),
        ] {
            if list.is_empty() {
                list.push(fallback.to_owned());
            }
        }
        t
    }
}

/// What the generator knows about one load.
#[derive(Debug, Clone)]
struct SimLoad {
    id: String,
    spanish: bool,
    phone: String,
    band: RiskBand,
    /// The stop the truck is heading to (1 pickup, 2 delivery).
    stop: u32,
    /// Arrived at `stop` and not departed yet.
    at_stop: bool,
}

/// The mix of the traffic after registration, in percent.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Mix {
    pub ping: u32,
    pub driver_sms: u32,
    pub dispatcher_email: u32,
    pub stop_status: u32,
    /// Of the pings, how many change the risk band (the rest repeat it and are filtered).
    pub ping_band_change: u32,
}

impl Default for Mix {
    fn default() -> Self {
        Mix { ping: 50, driver_sms: 35, dispatcher_email: 10, stop_status: 5, ping_band_change: 15 }
    }
}

/// Generates the events of a load test.
#[derive(Debug)]
pub struct Traffic {
    rng: StdRng,
    run: String,
    loads: Vec<SimLoad>,
    texts: Texts,
    mix: Mix,
    next_event: u64,
}

impl Traffic {
    /// `run` prefixes every load id, so that runs against one database never share a load.
    pub fn new(run: &str, loads: usize, seed: u64, mix: Mix) -> Traffic {
        let loads = (0..loads)
            .map(|i| SimLoad {
                id: format!("{run}-{i:06}"),
                spanish: i % 5 == 4,
                phone: format!("+1312{:07}", i % 10_000_000),
                band: RiskBand::Low,
                stop: 1,
                at_stop: false,
            })
            .collect();
        Traffic {
            rng: StdRng::seed_from_u64(seed),
            run: run.to_owned(),
            loads,
            texts: Texts::from_corpus(),
            mix,
            next_event: 0,
        }
    }

    pub fn loads(&self) -> usize {
        self.loads.len()
    }

    fn event_id(&mut self, kind: &str) -> String {
        self.next_event += 1;
        format!("{}-{kind}-{}", self.run, self.next_event)
    }

    /// The registration of load `i`, at `now`: client_a (English or Spanish driver) or client_b
    /// (reefer), appointments a few hours ahead.
    pub fn registration(&self, i: usize, now: DateTime<Utc>) -> InboundEvent {
        let load = &self.loads[i];
        let reefer = i % 3 == 2;
        let pickup = (now + Duration::hours(3)).to_rfc3339();
        let delivery = (now + Duration::hours(12)).to_rfc3339();
        let mut body = json!({
            "load_id": load.id,
            "client": if reefer { "client_b" } else { "client_a" },
            "contacts": [
                {"id": "drv", "role": "driver", "name": if load.spanish { "José" } else { "Luis" },
                 "phone": load.phone, "language": if load.spanish { "es" } else { "en" }},
                {"id": "disp", "role": "carrier_dispatcher", "name": "Dana", "email": "dana@carrier.example"},
                {"id": "brk", "role": "broker", "name": "Acme desk", "slack": "#acme-loads"}
            ],
            "stops": [
                {"sequence": 1, "kind": "pickup", "name": "Acme DC", "address": "1 Dock Rd, Joliet, IL",
                 "appointment": pickup, "po_numbers": ["55821"]},
                {"sequence": 2, "kind": "delivery", "name": "Store 88", "address": "88 Main St, Dayton, OH",
                 "appointment": delivery}
            ]
        });
        if reefer && let Some(o) = body.as_object_mut() {
            o.insert("reefer".into(), json!({"set_point_f": 34, "tolerance_f": 2}));
        }
        let value = json!({
            "event_id": format!("load_registered:{}", load.id),
            "load_id": load.id,
            "occurred_at": now.to_rfc3339(),
            "type": "load_registered",
            "load": body,
        });
        // The JSON above is this module's own: a failure is a bug here, caught by the unit test.
        serde_json::from_value(value).unwrap_or_else(|e| panic!("load test registration: {e}"))
    }

    /// The next event of the traffic after registration, at `now`.
    pub fn next(&mut self, now: DateTime<Utc>) -> InboundEvent {
        let i = self.rng.random_range(0..self.loads.len());
        let roll = self.rng.random_range(0..100u32);
        let mix = self.mix;
        let kind = if roll < mix.ping {
            let change = self.rng.random_range(0..100u32) < mix.ping_band_change;
            let load = &mut self.loads[i];
            if change {
                load.band = match (load.band, self.rng.random_bool(0.5)) {
                    (RiskBand::Low, _) => RiskBand::Medium,
                    (RiskBand::Medium, true) => RiskBand::High,
                    (RiskBand::Medium, false) => RiskBand::Low,
                    (RiskBand::High, _) => RiskBand::Medium,
                };
            }
            EventKind::Ping { stop: load.stop, delay_risk: load.band, recorded_at: now, lat: None, lon: None }
        } else if roll < mix.ping + mix.driver_sms {
            let list = if self.loads[i].spanish { &self.texts.driver_es } else { &self.texts.driver_en };
            let text = list[self.rng.random_range(0..list.len())].clone();
            EventKind::Sms { from: self.loads[i].phone.clone(), text }
        } else if roll < mix.ping + mix.driver_sms + mix.dispatcher_email {
            let text = self.texts.dispatcher[self.rng.random_range(0..self.texts.dispatcher.len())].clone();
            EventKind::Email {
                from: "dana@carrier.example".into(),
                subject: format!("Load {}", self.loads[i].id),
                text,
                thread: None,
            }
        } else {
            // Arrive at the pickup, depart it, arrive at the delivery; never depart the delivery
            // (a delivered load takes no more traffic), so the test keeps every load live.
            let load = &mut self.loads[i];
            if load.stop == 2 && load.at_stop {
                EventKind::Ping { stop: 2, delay_risk: load.band, recorded_at: now, lat: None, lon: None }
            } else {
                let (stop, status) = (
                    load.stop,
                    if load.at_stop { StopStatusKind::Departed } else { StopStatusKind::Arrived },
                );
                if load.at_stop {
                    load.at_stop = false;
                    load.stop = 2;
                } else {
                    load.at_stop = true;
                }
                EventKind::StopStatus { stop, status, source: Some("tracking".into()) }
            }
        };
        let load_id = self.loads[i].id.clone();
        let event_id = self.event_id(kind.kind_str());
        InboundEvent { event_id, load_id, occurred_at: now, kind }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_are_valid_loads_and_the_traffic_is_seeded() {
        let now = Utc::now();
        let t = Traffic::new("lt", 6, 7, Mix::default());
        for i in 0..6 {
            let e = t.registration(i, now);
            assert!(matches!(e.kind, EventKind::LoadRegistered { ref load } if load.load_id == e.load_id));
        }
        let (mut a, mut b) =
            (Traffic::new("lt", 6, 7, Mix::default()), Traffic::new("lt", 6, 7, Mix::default()));
        let xs: Vec<_> = (0..200).map(|_| a.next(now)).collect();
        let ys: Vec<_> = (0..200).map(|_| b.next(now)).collect();
        assert_eq!(xs, ys, "one seed, one traffic");
        for kind in ["ping", "sms", "email", "stop_status"] {
            assert!(xs.iter().any(|e| e.kind.kind_str() == kind), "no {kind} in 200 events");
        }
        assert!(!Texts::from_corpus().driver_en.is_empty());
    }
}
