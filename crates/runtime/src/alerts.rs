//! Ops alerts (ADR 0003): raised for permanent failures of Hero-channel and internal actions,
//! independent of the Hero tooling, so a Hero outage never loops into more Hero tasks. Each
//! alert is a `load_agent_ops_alerts_total` counter increment and an `error!` log line; the
//! in-memory record serves tests and the evals.

use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use load_agent_domain::{ActionClass, ActionKind};
use serde::Serialize;

use crate::metric_names as names;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpsAlert {
    pub load_id: String,
    pub idempotency_key: String,
    pub action_kind: ActionKind,
    /// `hero_channel` or `internal`.
    pub class: &'static str,
    pub reason: String,
    pub at: DateTime<Utc>,
}

/// Raises ops alerts. Clones share the record.
#[derive(Debug, Clone, Default)]
pub struct OpsAlerts {
    raised: Arc<Mutex<Vec<OpsAlert>>>,
}

impl OpsAlerts {
    pub fn new() -> Self {
        OpsAlerts::default()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<OpsAlert>> {
        self.raised.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn raise(&self, alert: OpsAlert) {
        metrics::counter!(
            names::OPS_ALERTS_TOTAL,
            "class" => alert.class,
            "action" => alert.action_kind.as_str()
        )
        .increment(1);
        tracing::error!(
            load_id = %alert.load_id,
            key = %alert.idempotency_key,
            action = alert.action_kind.as_str(),
            class = alert.class,
            reason = %load_agent_domain::pii::scrub(&alert.reason),
            "OPS ALERT: a {} action failed permanently",
            alert.class
        );
        self.lock().push(alert);
    }

    /// Every alert raised so far, in order.
    pub fn raised(&self) -> Vec<OpsAlert> {
        self.lock().clone()
    }
}

pub(crate) fn class_label(class: ActionClass) -> Option<&'static str> {
    match class {
        ActionClass::External => None,
        ActionClass::HeroChannel => Some("hero_channel"),
        ActionClass::Internal => Some("internal"),
    }
}
