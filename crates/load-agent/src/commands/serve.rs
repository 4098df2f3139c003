//! `load-agent serve` (worker, relay and timer pump together) and the single roles.
//!
//! With no configuration: SQLite, the in-process queue, fake delivery services that log what
//! they would send, and `POST /events`. With `kafka.brokers` and a Postgres URL: production
//! mode (Kafka in and out).
//!
//! SIGTERM (or Ctrl-C): readiness goes false, fetching stops, in-flight runs finish, claims are
//! released, and the process exits within `shutdown.grace_secs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use load_agent_domain::pii;
use load_agent_runtime::{FakeServices, InProcessRuntime, LogDeadLetters, SystemClock, shutdown_channel};
use tracing::info;

use crate::commands::service::{Role, ServiceParts, drain, start_http, wait_for_signal};
use crate::commands::store_cmds::{open, runtime};
use crate::config::Settings;
use crate::error::{CliError, OrExit};
use crate::http::Publish;
use crate::telemetry;

pub fn run(settings: &Settings, role: Role) -> Result<(), CliError> {
    telemetry::init_logs(&settings.log);
    runtime()?.block_on(async {
        if settings.production() {
            return crate::commands::production::run(settings, role).await;
        }
        if role != Role::All {
            return Err(CliError::bad_input(format!(
                "load-agent {}: the single roles need Kafka (set kafka.brokers and a Postgres database.url); \
                 the embedded mode runs everything in one process: load-agent serve",
                role.name()
            )));
        }
        serve_embedded(settings).await
    })
}

async fn serve_embedded(settings: &Settings) -> Result<(), CliError> {
    let metrics = telemetry::init_metrics().or_fail("load-agent serve")?;
    let stores = open(settings).await?;
    let parts = ServiceParts::build(settings)?;
    // Phone numbers, addresses and message text go through `pii` (redacted unless log.debug_pii).
    let fakes = FakeServices::new().with_hook(move |d| {
        info!(
            destination = d.destination.as_str(),
            load_id = %d.load_id,
            key = %d.idempotency_key,
            to = %pii::contact(d.to.as_deref().unwrap_or("-")),
            text = %pii::text(d.text.as_deref().unwrap_or("")),
            "fake {} service delivered {}",
            d.destination.as_str(),
            d.kind.as_str()
        );
    });
    let clock: Arc<dyn load_agent_runtime::Clock> = Arc::new(SystemClock);
    let rt = embedded_runtime(settings, &stores, parts, clock, fakes);
    let (trigger, shutdown) = shutdown_channel();
    let mut tasks = rt.spawn_loops(settings.worker.concurrency, Arc::new(LogDeadLetters), shutdown.clone());
    crate::commands::retention::spawn_store_jobs(&mut tasks, &stores, settings, &shutdown);

    let publish_rt = rt.clone();
    let publish: Publish = Arc::new(move |event| {
        let rt = publish_rt.clone();
        Box::pin(async move { rt.publish(event).await.map_err(|e| e.to_string()) })
    });
    let http = start_http(settings, stores, metrics, Some(publish), &shutdown, "load-agent serve").await?;
    info!(addr = %settings.http.addr, database = %settings.database.url.masked(), "load-agent serving (embedded mode)");
    wait_for_signal().await;
    http.ready.store(false, Ordering::Relaxed);
    info!(grace_secs = settings.shutdown.grace_secs, "shutting down: finishing in-flight runs");
    trigger.shutdown();
    drain(settings, tasks, http.server).await
}

/// The embedded runtime on `stores`, as `serve` and `loadtest` run it: the per-contact send
/// limits in front of the outbox (an action over a limit waits there, never dropped) and the
/// fake delivery services `fakes`.
pub fn embedded_runtime(
    settings: &Settings,
    stores: &load_agent_store::Stores,
    parts: ServiceParts,
    clock: Arc<dyn load_agent_runtime::Clock>,
    fakes: FakeServices,
) -> Arc<InProcessRuntime> {
    let ServiceParts { agent, llm, limits } = parts;
    let limited = load_agent_store::Stores {
        outbox: Arc::new(load_agent_runtime::ContactLimitedOutbox::new(
            stores.outbox.clone(),
            &limits,
            clock.clone(),
        )),
        ..stores.clone()
    };
    Arc::new(InProcessRuntime::new(limited, agent, llm, clock, fakes, settings.runtime()))
}
