//! `load-agent serve` (worker, relay and timer pump together) and the single roles.
//!
//! With no configuration: SQLite, the in-process queue, fake delivery services that log what
//! they would send, and `POST /events`. With `kafka.brokers` and a Postgres URL: production
//! mode (Kafka in and out).
//!
//! SIGTERM (or Ctrl-C): readiness goes false, fetching stops, in-flight runs finish, claims are
//! released, and the process exits within `shutdown.grace_secs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use load_agent_agent::Agent;
use load_agent_domain::pii;
use load_agent_runtime::{
    CacheConfig, FakeServices, GroupCommitConfig, InProcessRuntime, LogDeadLetters, PumpConfig, RelayConfig,
    RetryPolicy, RuntimeConfig, SystemClock, WorkerConfig, shutdown_channel,
};
use tracing::{error, info, warn};

use crate::commands::store_cmds::{open, runtime};
use crate::config::Settings;
use crate::http::{HttpState, Publish, router};
use crate::telemetry;

/// Which loops a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    All,
    Worker,
    Relay,
    TimerPump,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::All => "serve",
            Role::Worker => "worker",
            Role::Relay => "relay",
            Role::TimerPump => "timer-pump",
        }
    }
}

/// What every mode and role builds from the settings: the SOPs, the LLM client and the send
/// limits. Errors are printed (they name the setting) and become exit code 2.
pub struct ServiceParts {
    pub agent: Arc<Agent>,
    pub llm: Arc<dyn load_agent_llm::LlmClient>,
    pub limits: load_agent_kafka::SendLimits,
}

impl ServiceParts {
    pub fn build(settings: &Settings) -> Result<Self, u8> {
        let fail = |e: String| {
            eprintln!("load-agent: {e}");
            2
        };
        let agent = Agent::embedded().map_err(|e| fail(format!("SOPs: {e}")))?;
        let llm = settings.llm.client().map_err(|e| fail(e.to_string()))?;
        let limits = load_agent_kafka::SendLimits::parse(&settings.relay.send_limits)
            .map_err(|e| fail(format!("relay.send_limits: {e}")))?;
        Ok(ServiceParts { agent: Arc::new(agent), llm, limits })
    }
}

pub fn runtime_config(settings: &Settings) -> RuntimeConfig {
    let r = &settings.relay;
    RuntimeConfig {
        worker: WorkerConfig {
            max_conflict_retries: settings.worker.max_conflict_retries,
            run_deadline: Duration::from_millis(settings.llm.run_deadline_ms),
            ..WorkerConfig::default()
        },
        relay: RelayConfig {
            batch: r.batch as usize,
            idle_poll: Duration::from_millis(r.poll_ms),
            concurrency: r.concurrency.max(1),
            loops: r.loops.max(1),
            retry: RetryPolicy {
                budget: Duration::from_secs(r.retry_budget_secs),
                base: Duration::from_millis(r.backoff_base_ms),
                cap: Duration::from_secs(r.backoff_max_secs),
                ..RetryPolicy::default()
            },
        },
        pump: PumpConfig {
            batch: settings.timers.batch as usize,
            poll_interval: Duration::from_secs(settings.timers.poll_secs),
        },
        queue_capacity: None,
        // Both modes keep the same snapshot cache (issue 15).
        cache: Some(CacheConfig {
            max_capacity: settings.worker.cache_capacity,
            time_to_idle: Duration::from_secs(settings.worker.cache_idle_secs),
            ..CacheConfig::default()
        }),
        group_commit: GroupCommitConfig {
            window: Duration::from_millis(settings.worker.group_commit_window_ms),
            max_batch: settings.worker.group_commit_max_batch,
            committers: settings.worker.group_commit_committers,
        },
    }
}

pub fn run(settings: &Settings, role: Role) -> u8 {
    telemetry::init_logs(&settings.log);
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(c) => return c,
    };
    rt.block_on(async {
        if settings.production() {
            return crate::commands::production::run(settings, role).await;
        }
        if role != Role::All {
            eprintln!(
                "load-agent {}: the single roles need Kafka (set kafka.brokers and a Postgres database.url); \
                 the embedded mode runs everything in one process: load-agent serve",
                role.name()
            );
            return 2;
        }
        serve_embedded(settings).await
    })
}

async fn serve_embedded(settings: &Settings) -> u8 {
    let metrics = match telemetry::init_metrics() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("load-agent serve: {e}");
            return 1;
        }
    };
    let stores = match open(settings).await {
        Ok(s) => s,
        Err(c) => return c,
    };
    let parts = match ServiceParts::build(settings) {
        Ok(p) => p,
        Err(c) => return c,
    };
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
    let ready = Arc::new(AtomicBool::new(true));
    let token = Some(settings.http.token.expose().to_string()).filter(|t| !t.is_empty());
    let state = HttpState {
        stores,
        metrics,
        publish: Some(publish),
        token,
        ready: ready.clone(),
        console: settings.console.config(),
    };
    let listener = match tokio::net::TcpListener::bind(&settings.http.addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("load-agent serve: http.addr {}: {e}", settings.http.addr);
            return 1;
        }
    };
    info!(addr = %settings.http.addr, database = %settings.database.url.masked(), "load-agent serving (embedded mode)");
    let mut http_shutdown = shutdown.clone();
    let http = tokio::spawn(async move {
        let server = axum::serve(listener, router(state))
            .with_graceful_shutdown(async move { http_shutdown.recv().await });
        if let Err(e) = server.await {
            error!(error = %e, "http server failed");
        }
    });
    wait_for_signal().await;
    ready.store(false, Ordering::Relaxed);
    info!(grace_secs = settings.shutdown.grace_secs, "shutting down: finishing in-flight runs");
    trigger.shutdown();
    let grace = Duration::from_secs(settings.shutdown.grace_secs);
    let drained = tokio::time::timeout(grace, async {
        while tasks.join_next().await.is_some() {}
        let _ = http.await;
    })
    .await;
    if drained.is_err() {
        warn!("grace period passed with work still running; exiting");
        return 1;
    }
    info!("stopped");
    0
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
        outbox: Arc::new(load_agent_kafka::ContactLimitedOutbox::new(
            stores.outbox.clone(),
            &limits,
            clock.clone(),
        )),
        ..stores.clone()
    };
    Arc::new(InProcessRuntime::new(limited, agent, llm, clock, fakes, runtime_config(settings)))
}

/// SIGTERM or Ctrl-C.
pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
