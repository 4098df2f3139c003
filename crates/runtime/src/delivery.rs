//! The channel contract of ADR 0001 and the in-process fakes of the delivery services.
//!
//! SMS, email, Slack, TMS, Hero tasks and load status are services of the integrations team.
//! The relay reaches them through [`Destinations`]: `send(destination, command)` with the
//! action's idempotency key, answered by a [`Receipt`] or a [`DeliveryError`] that says whether
//! trying again can help. Services dedupe on the key. Kafka producers implement [`Destinations`]
//! in the next issue; the fakes here implement it for `serve`'s embedded mode, the evals and
//! the tests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use load_agent_domain::{Action, ActionBody, ActionKind, Destination, OutcomeStatus, SlackTarget};
use load_agent_store::{ClaimedRow, NewOutboxRow};
use serde::{Deserialize, Serialize};

/// What the relay hands a service: the action as committed, with its key and the log version
/// it was committed at (topics.md `ActionCommand`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryCommand {
    pub idempotency_key: String,
    pub load_id: String,
    pub load_version: u64,
    pub action: Action,
}

impl DeliveryCommand {
    /// The command for an outbox row: its id is the idempotency key.
    fn for_row(id: &str, load_id: &str, load_version: u64, action: &Action) -> Self {
        DeliveryCommand {
            idempotency_key: id.to_owned(),
            load_id: load_id.to_owned(),
            load_version,
            action: action.clone(),
        }
    }

    pub fn kind(&self) -> ActionKind {
        self.action.kind()
    }

    /// The contact the action addresses, if any.
    pub fn contact_id(&self) -> Option<&str> {
        self.action.body.contact_id()
    }
}

/// The command the relay sends for a claimed row.
impl From<&ClaimedRow> for DeliveryCommand {
    fn from(row: &ClaimedRow) -> Self {
        DeliveryCommand::for_row(&row.id, &row.load_id, row.load_version, &row.action)
    }
}

/// The command a row will be sent as once claimed (benches and tests that send without a claim).
impl From<&NewOutboxRow> for DeliveryCommand {
    fn from(row: &NewOutboxRow) -> Self {
        DeliveryCommand::for_row(&row.id, &row.load_id, row.load_version, &row.action)
    }
}

/// A service's acknowledgement of a send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub id: String,
}

/// `RetryableDeliveryError` and `PermanentDeliveryError` of the channel contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    #[error("retryable delivery failure: {0}")]
    Retryable(String),
    #[error("permanent delivery failure: {0}")]
    Permanent(String),
}

impl DeliveryError {
    pub fn reason(&self) -> &str {
        match self {
            DeliveryError::Retryable(r) | DeliveryError::Permanent(r) => r,
        }
    }
}

/// Where the relay sends outbox rows that leave the agent (every destination but `timer`).
#[async_trait]
pub trait Destinations: Send + Sync + std::fmt::Debug {
    async fn send(
        &self,
        destination: Destination,
        command: &DeliveryCommand,
    ) -> Result<Receipt, DeliveryError>;

    /// What a successful [`Destinations::send`] means, the status of the relay's
    /// `action_outcome`: `delivered` when the destination is the delivery service itself (the
    /// default, as the in-process services are), `published` when it is a topic the service
    /// reads (Kafka): only the service can then say `delivered`.
    fn sent_status(&self) -> OutcomeStatus {
        OutcomeStatus::Delivered
    }
}

// ---------------------------------------------------------------------------------------------
// Fault injection (scenarios.md `faults:`).

/// How a faulted send answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    Permanent,
    Retryable,
}

/// Every send matching `action` (kind) and `to` (contact id), each when given, fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRule {
    pub action: Option<ActionKind>,
    pub to: Option<String>,
    pub fail: FailMode,
}

impl FaultRule {
    fn matches(&self, command: &DeliveryCommand) -> bool {
        self.action.is_none_or(|k| k == command.kind())
            && self.to.as_deref().is_none_or(|to| command.contact_id() == Some(to))
    }
}

/// One item of a step's `faults:` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultChange {
    Add(FaultRule),
    /// Back to delivering everything.
    Clear,
}

// ---------------------------------------------------------------------------------------------
// The fakes.

/// A message, task, note or status update a fake service delivered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivered {
    pub destination: Destination,
    pub idempotency_key: String,
    pub load_id: String,
    pub kind: ActionKind,
    pub to: Option<String>,
    pub text: Option<String>,
    pub receipt: String,
}

#[derive(Debug, Default)]
struct FakeState {
    faults: Vec<FaultRule>,
    /// Receipts by idempotency key: a second send with a key returns the first receipt.
    receipts: HashMap<String, String>,
    delivered: Vec<Delivered>,
    /// Sends of a key the service had already delivered ("the service saw the key again").
    duplicate_sends: HashMap<String, u32>,
    failed_sends: u64,
    next_receipt: u64,
}

type SendHook = dyn Fn(&Delivered) + Send + Sync;

/// In-process fakes of the six delivery services behind one [`Destinations`]. They dedupe on
/// the idempotency key (the contact gets one message however often the key is sent), record
/// what they delivered, and fail sends as the fault rules say.
#[derive(Clone, Default)]
pub struct FakeServices {
    state: Arc<Mutex<FakeState>>,
    on_deliver: Option<Arc<SendHook>>,
}

impl std::fmt::Debug for FakeServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("FakeServices")
            .field("delivered", &s.delivered.len())
            .field("faults", &s.faults)
            .finish_non_exhaustive()
    }
}

impl FakeServices {
    pub fn new() -> Self {
        FakeServices::default()
    }

    /// Calls `hook` with every first delivery (`serve`'s embedded mode prints them).
    pub fn with_hook(mut self, hook: impl Fn(&Delivered) + Send + Sync + 'static) -> Self {
        self.on_deliver = Some(Arc::new(hook));
        self
    }

    /// Logs every first delivery at `info` with what the service would send.
    pub fn logging(self) -> Self {
        self.with_hook(|d| {
            tracing::info!(
                destination = d.destination.as_str(),
                load_id = %d.load_id,
                key = %d.idempotency_key,
                to = %load_agent_domain::pii::contact(d.to.as_deref().unwrap_or("-")),
                text = %load_agent_domain::pii::text(d.text.as_deref().unwrap_or("")),
                "fake {} service delivered {}",
                d.destination.as_str(),
                d.kind.as_str()
            )
        })
    }

    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies a step's fault changes in order.
    pub fn apply_faults(&self, changes: &[FaultChange]) {
        let mut s = self.lock();
        for c in changes {
            match c {
                FaultChange::Add(rule) => s.faults.push(rule.clone()),
                FaultChange::Clear => s.faults.clear(),
            }
        }
    }

    pub fn add_fault(&self, rule: FaultRule) {
        self.lock().faults.push(rule);
    }

    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Every first delivery, in order.
    pub fn delivered(&self) -> Vec<Delivered> {
        self.lock().delivered.clone()
    }

    pub fn delivered_to(&self, destination: Destination) -> Vec<Delivered> {
        self.lock().delivered.iter().filter(|d| d.destination == destination).cloned().collect()
    }

    /// How many times a service saw an already delivered key again.
    pub fn duplicate_sends(&self, key: &str) -> u32 {
        self.lock().duplicate_sends.get(key).copied().unwrap_or(0)
    }

    pub fn total_duplicate_sends(&self) -> u32 {
        self.lock().duplicate_sends.values().sum()
    }

    /// Sends that failed by a fault rule.
    pub fn failed_sends(&self) -> u64 {
        self.lock().failed_sends
    }
}

fn text_of(body: &ActionBody) -> Option<String> {
    match body {
        ActionBody::CreateHeroTask { title, body, .. } => Some(format!("{title}: {body}")),
        ActionBody::UpdateStage { stage, current_stop } => {
            Some(format!("{} (stop {current_stop})", stage.as_str()))
        }
        ActionBody::PostSlack { target: SlackTarget::HeroChannel, text } => Some(text.clone()),
        other => other.text().map(str::to_string),
    }
}

impl FakeServices {
    /// The failure a fault rule injects for `command`, if one matches. The relay asks this for
    /// `set_timer` / `cancel_timer` rows, which never reach a service, so that scenarios can
    /// fail internal actions too.
    pub fn injected_failure(
        &self,
        destination: Destination,
        command: &DeliveryCommand,
    ) -> Option<DeliveryError> {
        injected(&mut self.lock(), destination, command)
    }
}

fn injected(s: &mut FakeState, destination: Destination, command: &DeliveryCommand) -> Option<DeliveryError> {
    let rule = s.faults.iter().find(|r| r.matches(command)).cloned()?;
    s.failed_sends += 1;
    let why = format!("fake {} service: injected {:?} failure", destination.as_str(), rule.fail);
    Some(match rule.fail {
        FailMode::Permanent => DeliveryError::Permanent(why),
        FailMode::Retryable => DeliveryError::Retryable(why),
    })
}

#[async_trait]
impl Destinations for FakeServices {
    async fn send(
        &self,
        destination: Destination,
        command: &DeliveryCommand,
    ) -> Result<Receipt, DeliveryError> {
        let key = &command.idempotency_key;
        let first = {
            let mut s = self.lock();
            if let Some(receipt) = s.receipts.get(key).cloned() {
                *s.duplicate_sends.entry(key.clone()).or_insert(0) += 1;
                return Ok(Receipt { id: receipt });
            }
            if let Some(e) = injected(&mut s, destination, command) {
                return Err(e);
            }
            s.next_receipt += 1;
            let receipt = format!("{}-{}", destination.as_str(), s.next_receipt);
            s.receipts.insert(key.clone(), receipt.clone());
            let d = Delivered {
                destination,
                idempotency_key: key.clone(),
                load_id: command.load_id.clone(),
                kind: command.kind(),
                to: command.contact_id().map(str::to_string),
                text: text_of(&command.action.body),
                receipt,
            };
            s.delivered.push(d.clone());
            d
        };
        if let Some(hook) = &self.on_deliver {
            hook(&first);
        }
        Ok(Receipt { id: first.receipt })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sms(key: &str, to: &str) -> DeliveryCommand {
        DeliveryCommand {
            idempotency_key: key.into(),
            load_id: "481207".into(),
            load_version: 3,
            action: Action {
                key: key.into(),
                ask: None,
                body: ActionBody::SendSms { to: to.into(), body: "hi".into() },
            },
        }
    }

    #[tokio::test]
    async fn a_key_sent_twice_is_delivered_once_and_counted_as_a_duplicate() {
        let fakes = FakeServices::new();
        let first = fakes.send(Destination::Sms, &sms("k1", "drv")).await.expect("delivered");
        let second = fakes.send(Destination::Sms, &sms("k1", "drv")).await.expect("deduped");
        assert_eq!(first, second);
        assert_eq!(fakes.delivered().len(), 1, "the contact got one message");
        assert_eq!(fakes.duplicate_sends("k1"), 1, "the service saw the key again");
    }

    #[tokio::test]
    async fn faults_match_by_action_and_contact_until_cleared() {
        let fakes = FakeServices::new();
        fakes.apply_faults(&[FaultChange::Add(FaultRule {
            action: Some(ActionKind::SendSms),
            to: Some("drv".into()),
            fail: FailMode::Permanent,
        })]);
        assert!(matches!(
            fakes.send(Destination::Sms, &sms("k1", "drv")).await,
            Err(DeliveryError::Permanent(_))
        ));
        assert!(fakes.send(Destination::Sms, &sms("k2", "other")).await.is_ok());
        fakes.apply_faults(&[FaultChange::Clear]);
        assert!(fakes.send(Destination::Sms, &sms("k1", "drv")).await.is_ok());
        assert_eq!(fakes.failed_sends(), 1);
    }
}
