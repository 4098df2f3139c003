//! What `serve`, the single roles and `loadtest` share, in both modes: the [`Role`] a process
//! runs, the [`ServiceParts`] built from the settings, the HTTP server, the drain and the
//! shutdown signal. Both `serve` (embedded) and `production` (Kafka) import it, neither the other.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use load_agent_agent::Agent;
use load_agent_runtime::Shutdown;
use load_agent_store::Stores;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::task::{JoinHandle, JoinSet};
use tracing::{error, info, warn};

use crate::config::Settings;
use crate::error::CliError;
use crate::http::{HttpState, Publish, router};

/// Which loops a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    All,
    Worker,
    Relay,
    TimerPump,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::All => "serve",
            Role::Worker => "worker",
            Role::Relay => "relay",
            Role::TimerPump => "timer-pump",
        }
    }
}

/// What every mode and role builds from the settings: the SOPs, the LLM client and the send
/// limits. An error names the setting (exit 2).
pub struct ServiceParts {
    pub agent: Arc<Agent>,
    pub llm: Arc<dyn load_agent_llm::LlmClient>,
    pub limits: load_agent_runtime::SendLimits,
}

impl ServiceParts {
    pub fn build(settings: &Settings) -> Result<Self, CliError> {
        let fail = |e: String| CliError::bad_input(format!("load-agent: {e}"));
        let agent = Agent::embedded().map_err(|e| fail(format!("SOPs: {e}")))?;
        let llm =
            load_agent_llm_openai::client_from_config(&settings.llm).map_err(|e| fail(e.to_string()))?;
        // Parsed when the configuration was read.
        let limits = settings.relay.send_limits.limits().clone();
        Ok(ServiceParts { agent: Arc::new(agent), llm, limits })
    }
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

/// The HTTP server of a running service and its readiness flag (false once shutdown starts).
pub struct Http {
    pub ready: Arc<AtomicBool>,
    pub server: JoinHandle<()>,
}

/// Binds `http.addr` and serves the HTTP API there until `shutdown`; `publish` is `None` where
/// the process accepts no events over HTTP. A bind error is prefixed by `context` (exit 1).
pub async fn start_http(
    settings: &Settings,
    stores: Stores,
    metrics: PrometheusHandle,
    publish: Option<Publish>,
    shutdown: &Shutdown,
    context: &str,
) -> Result<Http, CliError> {
    let ready = Arc::new(AtomicBool::new(true));
    let token = Some(settings.http.token.expose().to_string()).filter(|t| !t.is_empty());
    let state = HttpState {
        stores,
        metrics,
        publish,
        token,
        ready: ready.clone(),
        console: settings.console.config(),
    };
    let listener = tokio::net::TcpListener::bind(&settings.http.addr)
        .await
        .map_err(|e| CliError::failed(format!("{context}: http.addr {}: {e}", settings.http.addr)))?;
    let mut http_shutdown = shutdown.clone();
    let server = tokio::spawn(async move {
        let server = axum::serve(listener, router(state))
            .with_graceful_shutdown(async move { http_shutdown.recv().await });
        if let Err(e) = server.await {
            error!(error = %e, "http server failed");
        }
    });
    Ok(Http { ready, server })
}

/// Waits, after shutdown was triggered, for the loops and the HTTP server to stop, at most
/// `shutdown.grace_secs`; work still running then fails the process (exit 1, logged).
pub async fn drain(
    settings: &Settings,
    mut tasks: JoinSet<()>,
    server: JoinHandle<()>,
) -> Result<(), CliError> {
    let drained = tokio::time::timeout(settings.shutdown.grace(), async {
        while tasks.join_next().await.is_some() {}
        let _ = server.await;
    })
    .await;
    if drained.is_err() {
        warn!("grace period passed with work still running; exiting");
        return Err(CliError::reported());
    }
    info!("stopped");
    Ok(())
}
