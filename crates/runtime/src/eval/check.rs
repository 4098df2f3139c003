//! The checks of a step (scenarios.md "Checks"): `expect` as a multiset, `noop`, `duplicate`,
//! and `state`.

use chrono::Utc;
use load_agent_domain::{Action, ActionBody, DecisionRecord, LoadState};

use super::scenario::{Expect, ExpectedAction, ExpectedAsk, StateCheck};

/// The text `body_contains` looks in: the message body, with an email's subject and a Hero
/// task's title.
pub fn searchable_text(body: &ActionBody) -> String {
    match body {
        ActionBody::SendEmail { subject, body, .. } => format!("{subject}\n{body}"),
        ActionBody::CreateHeroTask { title, body, .. } => format!("{title}\n{body}"),
        other => other.text().unwrap_or_default().to_string(),
    }
}

/// Whether `action` has every field `want` gives.
pub fn matches(want: &ExpectedAction, action: &Action) -> bool {
    if want.action.is_some_and(|k| k != action.kind()) {
        return false;
    }
    if let Some(to) = &want.to
        && action.body.contact_id() != Some(to.as_str())
    {
        return false;
    }
    if let Some(ask) = &want.ask
        && action.ask.as_ref().map(|a| a.ask_type.as_str()) != Some(ask.as_str())
    {
        return false;
    }
    if let Some(attempt) = want.attempt
        && action.ask.as_ref().map(|a| a.attempt) != Some(attempt)
    {
        return false;
    }
    if let Some(urgent) = want.urgent {
        match &action.body {
            ActionBody::CreateHeroTask { urgent: u, .. } if *u == urgent => {}
            _ => return false,
        }
    }
    if let Some(thread) = want.thread {
        match &action.body {
            ActionBody::SendEmail { thread: t, .. } if *t == thread => {}
            _ => return false,
        }
    }
    if let Some(key) = &want.key
        && &action.key != key
    {
        return false;
    }
    if let Some(fire_at) = want.fire_at {
        match &action.body {
            ActionBody::SetTimer { fire_at: f, .. } if *f == fire_at.with_timezone(&Utc) => {}
            _ => return false,
        }
    }
    if !want.body_contains.is_empty() {
        let text = searchable_text(&action.body).to_lowercase();
        if !want.body_contains.iter().all(|s| text.contains(&s.to_lowercase())) {
            return false;
        }
    }
    true
}

/// A maximum matching of expected items to actions (Kuhn's algorithm): `assigned[action]` is
/// the expected item it matched.
fn max_matching<T, U>(wants: &[T], haves: &[U], ok: impl Fn(&T, &U) -> bool) -> Vec<Option<usize>> {
    fn try_assign<T, U>(
        w: usize,
        wants: &[T],
        haves: &[U],
        ok: &impl Fn(&T, &U) -> bool,
        seen: &mut [bool],
        assigned: &mut [Option<usize>],
    ) -> bool {
        for h in 0..haves.len() {
            if seen[h] || !ok(&wants[w], &haves[h]) {
                continue;
            }
            seen[h] = true;
            let free = match assigned[h] {
                None => true,
                Some(other) => try_assign(other, wants, haves, ok, seen, assigned),
            };
            if free {
                assigned[h] = Some(w);
                return true;
            }
        }
        false
    }
    let mut assigned = vec![None; haves.len()];
    for w in 0..wants.len() {
        let mut seen = vec![false; haves.len()];
        try_assign(w, wants, haves, &ok, &mut seen, &mut assigned);
    }
    assigned
}

/// A short description of an action for failure messages.
pub fn describe(action: &Action) -> String {
    let mut s = action.kind().as_str().to_string();
    if let Some(to) = action.body.contact_id() {
        s.push_str(&format!(" to {to}"));
    }
    if let Some(ask) = &action.ask {
        s.push_str(&format!(" ({} attempt {})", ask.ask_type, ask.attempt));
    }
    match &action.body {
        ActionBody::CreateHeroTask { urgent, title, .. } => {
            s.push_str(&format!(" [{}] {title:?}", if *urgent { "urgent" } else { "not urgent" }))
        }
        ActionBody::SendEmail { thread, .. } => s.push_str(&format!(" thread {}", thread.as_str())),
        ActionBody::SetTimer { fire_at, .. } => {
            s.push_str(&format!(" fire_at {}", super::report::utc(*fire_at)))
        }
        _ => {}
    }
    s.push_str(&format!(" key {}", action.key));
    s
}

/// Checks `expect` against the step's decisions; every problem is one string.
pub fn check_expect(expect: &Expect, decisions: &[DecisionRecord]) -> Vec<String> {
    let actions: Vec<&Action> = decisions.iter().flat_map(|d| d.effective_actions()).collect();
    match expect {
        Expect::Duplicate => {
            if decisions.is_empty() {
                vec![]
            } else {
                vec![format!(
                    "expected no decision (duplicate), got {}: {}",
                    decisions.len(),
                    decisions.iter().map(|d| d.decision_id.as_str()).collect::<Vec<_>>().join(", ")
                )]
            }
        }
        Expect::Noop => {
            if decisions.is_empty() {
                vec!["expected a noop decision, got no decision at all".into()]
            } else if actions.is_empty() {
                vec![]
            } else {
                vec![format!(
                    "expected noop, got actions: {}",
                    actions.iter().map(|a| describe(a)).collect::<Vec<_>>().join("; ")
                )]
            }
        }
        Expect::Actions(wants) => {
            let assigned = max_matching(wants, &actions, |w, a| matches(w, a));
            let mut out = Vec::new();
            for (i, w) in wants.iter().enumerate() {
                if !assigned.contains(&Some(i)) {
                    out.push(format!("expected {w}, not found"));
                }
            }
            for (j, a) in actions.iter().enumerate() {
                if assigned[j].is_none() {
                    out.push(format!("unexpected {}", describe(a)));
                }
            }
            if !out.is_empty() && decisions.is_empty() {
                out.push("no decision was recorded in the step".into());
            }
            out
        }
    }
}

fn ask_matches(want: &ExpectedAsk, ask: &load_agent_domain::OpenAsk, current_stop: u32) -> bool {
    want.ask_type.as_deref().is_none_or(|t| t == ask.ask_type)
        && want.stop.is_none_or(|s| s == ask.stop_or(current_stop))
        && want.attempts.is_none_or(|n| n == ask.attempts)
        && want.escalations_done.is_none_or(|n| n == ask.escalations_done)
}

/// Checks `state:` against the projected state after the step.
pub fn check_state(want: &StateCheck, state: &LoadState) -> Vec<String> {
    let mut out = Vec::new();
    let t = &state.tracking;
    if let Some(stage) = want.stage
        && stage != t.stage
    {
        out.push(format!("state.stage: expected {}, got {}", stage.as_str(), t.stage.as_str()));
    }
    if let Some(stop) = want.current_stop
        && stop != t.current_stop
    {
        out.push(format!("state.current_stop: expected {stop}, got {}", t.current_stop));
    }
    if let Some(wants) = &want.open_asks {
        let asks: Vec<_> = state.open_asks.iter().collect();
        let assigned = max_matching(wants, &asks, |w, a| ask_matches(w, a, t.current_stop));
        let describe_ask = |a: &load_agent_domain::OpenAsk| {
            format!(
                "{{type: {}, stop: {}, attempts: {}, escalations_done: {}}}",
                a.ask_type,
                a.stop_or(t.current_stop),
                a.attempts,
                a.escalations_done
            )
        };
        for (i, w) in wants.iter().enumerate() {
            if !assigned.contains(&Some(i)) {
                out.push(format!("state.open_asks: expected {w}, not found"));
            }
        }
        for (j, a) in asks.iter().enumerate() {
            if assigned[j].is_none() {
                out.push(format!("state.open_asks: unexpected open ask {}", describe_ask(a)));
            }
        }
    }
    if let Some(blocked) = &want.sms_blocked {
        let mut want_ids: Vec<&str> = blocked.iter().map(String::as_str).collect();
        want_ids.sort_unstable();
        want_ids.dedup();
        let got: Vec<&str> = state.sms_blocked.keys().map(String::as_str).collect();
        if want_ids != got {
            out.push(format!("state.sms_blocked: expected {want_ids:?}, got {got:?}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use load_agent_domain::{ActionKind, AskStepRef};

    use super::*;

    fn sms(attempt: Option<u32>, key: &str) -> Action {
        Action {
            key: key.into(),
            ask: attempt.map(|attempt| AskStepRef {
                ask_id: "ask:eta_request:p".into(),
                ask_type: "eta_request".into(),
                attempt,
            }),
            body: ActionBody::SendSms { to: "drv".into(), body: "What is your ETA to Acme DC?".into() },
        }
    }

    fn want(action: ActionKind) -> ExpectedAction {
        ExpectedAction {
            action: Some(action),
            to: None,
            ask: None,
            attempt: None,
            urgent: None,
            thread: None,
            key: None,
            fire_at: None,
            body_contains: vec![],
        }
    }

    #[test]
    fn matching_is_a_multiset_that_finds_the_right_assignment() {
        // A greedy match would pair the loose item with attempt 1 and fail the strict one.
        let loose = want(ActionKind::SendSms);
        let strict = ExpectedAction { attempt: Some(1), ..want(ActionKind::SendSms) };
        let actions = [sms(Some(1), "k1"), sms(None, "k2")];
        let refs: Vec<&Action> = actions.iter().collect();
        let assigned = max_matching(&[loose, strict], &refs, |w, a| matches(w, a));
        assert!(assigned.iter().all(Option::is_some));
    }

    #[test]
    fn body_contains_is_case_insensitive() {
        let w = ExpectedAction {
            body_contains: vec!["acme dc".into(), "ETA".into()],
            ..want(ActionKind::SendSms)
        };
        assert!(matches(&w, &sms(Some(1), "k")));
        let w = ExpectedAction { body_contains: vec!["55821".into()], ..want(ActionKind::SendSms) };
        assert!(!matches(&w, &sms(Some(1), "k")));
    }
}
