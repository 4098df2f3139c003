//! The intents triage tells apart (behavior.md §6).

use serde::{Deserialize, Serialize};

load_agent_domain::spelled_enum! {
    /// What a message from a load contact means for the agent.
    ///
    /// The ids (`as_str`, serde) are the intent ids of behavior.md §6 and of the
    /// labeled corpus; the declaration order (`ALL`) is the model's class order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Intent {
        /// An ETA: "eta 2:30", "bout 45 min out", a dispatcher email with an ETA.
        EtaGiven => "eta_given",
        /// The sender is at the stop: "here", "checked in", "ya llegue".
        ArrivalReport => "arrival_report",
        /// The sender left a stop: "loaded and rolling", "empty heading out".
        DepartureReport => "departure_report",
        /// A reefer reading: "reefer at 34", "temp -10", a bare number while a `reefer_temp` ask is open.
        TemperatureReport => "temperature_report",
        /// Asks for the PO number(s).
        QuestionPo => "question_po",
        /// Asks for an appointment time.
        QuestionAppointment => "question_appointment",
        /// Asks for an address.
        QuestionAddress => "question_address",
        /// Did not understand us: "?", "huh", "no entiendo".
        Confusion => "confusion",
        /// An acknowledgement: "ok", "10-4", "👍".
        Ack => "ack",
        /// Asks to stop SMS: "STOP", "stop texting me".
        OptOut => "opt_out",
        /// Not the right person: "wrong number", "this isnt mike".
        WrongNumber => "wrong_number",
        /// Breakdown, accident, closed road, reefer alarm, anything that needs a human now.
        ProblemReport => "problem_report",
        /// Anything else; goes to the planner.
        Other => "other",
    }
}

impl Intent {
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
        let err = "eta".parse::<Intent>().expect_err("not an intent id");
        assert_eq!(err.value, "eta");
        assert_eq!(err.allowed, Intent::SPELLINGS);
    }
}
