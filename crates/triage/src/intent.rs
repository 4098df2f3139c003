//! The intents triage tells apart (behavior.md §6).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a message from a load contact means for the agent.
///
/// The ids (`as_str`, serde) are the intent ids of behavior.md §6 and of the
/// labeled corpus; the declaration order is the model's class order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// An ETA: "eta 2:30", "bout 45 min out", a dispatcher email with an ETA.
    EtaGiven,
    /// The sender is at the stop: "here", "checked in", "ya llegue".
    ArrivalReport,
    /// The sender left a stop: "loaded and rolling", "empty heading out".
    DepartureReport,
    /// A reefer reading: "reefer at 34", "temp -10", a bare number while a `reefer_temp` ask is open.
    TemperatureReport,
    /// Asks for the PO number(s).
    QuestionPo,
    /// Asks for an appointment time.
    QuestionAppointment,
    /// Asks for an address.
    QuestionAddress,
    /// Did not understand us: "?", "huh", "no entiendo".
    Confusion,
    /// An acknowledgement: "ok", "10-4", "👍".
    Ack,
    /// Asks to stop SMS: "STOP", "stop texting me".
    OptOut,
    /// Not the right person: "wrong number", "this isnt mike".
    WrongNumber,
    /// Breakdown, accident, closed road, reefer alarm, anything that needs a human now.
    ProblemReport,
    /// Anything else; goes to the planner.
    Other,
}

impl Intent {
    /// Every intent, in class order.
    pub const ALL: [Intent; 13] = [
        Intent::EtaGiven,
        Intent::ArrivalReport,
        Intent::DepartureReport,
        Intent::TemperatureReport,
        Intent::QuestionPo,
        Intent::QuestionAppointment,
        Intent::QuestionAddress,
        Intent::Confusion,
        Intent::Ack,
        Intent::OptOut,
        Intent::WrongNumber,
        Intent::ProblemReport,
        Intent::Other,
    ];

    /// The intent id (`eta_given`, `ack`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Intent::EtaGiven => "eta_given",
            Intent::ArrivalReport => "arrival_report",
            Intent::DepartureReport => "departure_report",
            Intent::TemperatureReport => "temperature_report",
            Intent::QuestionPo => "question_po",
            Intent::QuestionAppointment => "question_appointment",
            Intent::QuestionAddress => "question_address",
            Intent::Confusion => "confusion",
            Intent::Ack => "ack",
            Intent::OptOut => "opt_out",
            Intent::WrongNumber => "wrong_number",
            Intent::ProblemReport => "problem_report",
            Intent::Other => "other",
        }
    }

    /// `opt_out` or `wrong_number`: after either the contact gets no more SMS, so reading either
    /// as anything else is the costly mistake (docs/triage.md, the opt-out guard).
    pub const fn is_opt_out_like(self) -> bool {
        matches!(self, Intent::OptOut | Intent::WrongNumber)
    }

    /// Position in [`Intent::ALL`], the model's class index.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Intent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The string is not an intent id of §6.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown intent {0:?}")]
pub struct UnknownIntent(pub String);

impl FromStr for Intent {
    type Err = UnknownIntent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Intent::ALL.into_iter().find(|intent| intent.as_str() == s).ok_or_else(|| UnknownIntent(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_str_and_serde() {
        for (i, intent) in Intent::ALL.into_iter().enumerate() {
            assert_eq!(intent.index(), i);
            assert_eq!(intent.as_str().parse::<Intent>(), Ok(intent));
            let json = serde_json::to_string(&intent).expect("a unit variant serializes");
            assert_eq!(json, format!("\"{}\"", intent.as_str()));
        }
        assert_eq!("eta".parse::<Intent>(), Err(UnknownIntent("eta".to_owned())));
    }
}
