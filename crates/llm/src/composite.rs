//! Routing each method to a provider, and `LOAD_AGENT_LLM_PROVIDER`.
//!
//! This crate knows no HTTP provider; the remote provider comes in as a [`RemoteProvider`]
//! (already guarded), so `load-agent-llm-openai::build_llm_client` is a thin wrapper around
//! [`compose`]. Another vendor would be one more crate calling the same function.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;

use load_agent_domain::DocumentFields;

use crate::LlmClient;
use crate::fake::FakeLlm;
use crate::local::{LocalTriage, Unconfigured};
use crate::settings::{ConfigError, env};
use crate::types::{
    DocumentRequest, Draft, DraftRequest, ExtractedSop, LlmMethod, LlmResult, Plan, PlanRequest,
    SopExtractionRequest, TriageRequest, TriageResult,
};

#[derive(Clone)]
struct Route {
    provider: String,
    client: Arc<dyn LlmClient>,
}

/// Sends each method to the provider routed for it.
#[derive(Clone)]
pub struct Composite {
    routes: [Route; 5],
}

impl fmt::Debug for Composite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.routes().into_iter().map(|(m, p)| (m.as_str(), p))).finish()
    }
}

impl Composite {
    /// Every method to `client`, named `provider` (in logs and [`Composite::routes`]).
    pub fn new(provider: impl Into<String>, client: Arc<dyn LlmClient>) -> Self {
        let route = Route { provider: provider.into(), client };
        Composite { routes: std::array::from_fn(|_| route.clone()) }
    }

    /// Every method unavailable (`no provider configured for <method>`).
    pub fn unconfigured() -> Self {
        Composite::new("none", Arc::new(Unconfigured))
    }

    /// Routes `method` to `client`.
    pub fn route(
        mut self,
        method: LlmMethod,
        provider: impl Into<String>,
        client: Arc<dyn LlmClient>,
    ) -> Self {
        self.routes[method.index()] = Route { provider: provider.into(), client };
        self
    }

    /// The provider name answering each method, in [`LlmMethod::ALL`] order.
    pub fn routes(&self) -> Vec<(LlmMethod, &str)> {
        LlmMethod::ALL.into_iter().map(|m| (m, self.routes[m.index()].provider.as_str())).collect()
    }

    fn client(&self, method: LlmMethod) -> &dyn LlmClient {
        &*self.routes[method.index()].client
    }
}

#[async_trait]
impl LlmClient for Composite {
    async fn triage(&self, req: &TriageRequest) -> LlmResult<TriageResult> {
        self.client(LlmMethod::Triage).triage(req).await
    }
    async fn draft(&self, req: &DraftRequest) -> LlmResult<Draft> {
        self.client(LlmMethod::Draft).draft(req).await
    }
    async fn extract_document(&self, req: &DocumentRequest) -> LlmResult<DocumentFields> {
        self.client(LlmMethod::ExtractDocument).extract_document(req).await
    }
    async fn plan(&self, req: &PlanRequest) -> LlmResult<Plan> {
        self.client(LlmMethod::Plan).plan(req).await
    }
    async fn extract_sop(&self, req: &SopExtractionRequest) -> LlmResult<ExtractedSop> {
        self.client(LlmMethod::ExtractSop).extract_sop(req).await
    }
}

load_agent_domain::spelled_enum! {
    own FromStr;
    /// A value of `LOAD_AGENT_LLM_PROVIDER`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum ProviderSpec {
        /// `local` (the default, also for an empty value): triage on the local model, the other
        /// methods unavailable, so behavior.md's fallbacks apply (urgent Hero tasks).
        #[default]
        Local => "local" | "",
        /// `local+openai`: triage on the local model, draft, extract_document, plan and extract_sop
        /// on the OpenAI-compatible provider.
        LocalOpenAi => "local+openai",
        /// `openai`: every method on the OpenAI-compatible provider that has a model for it, except
        /// triage, which stays local unless a triage model is configured for the provider.
        OpenAi => "openai",
        /// `fake`: [`FakeLlm`] with nothing scripted (local triage, documents from the event).
        Fake => "fake",
    }
}

impl ProviderSpec {
    /// The values an error lists: [`ProviderSpec::SPELLINGS`], joined (a test checks it).
    pub const EXPECTED: &'static str = "local, local+openai, openai, fake";

    /// Whether this spec needs the OpenAI-compatible provider configured.
    pub fn needs_openai(self) -> bool {
        matches!(self, ProviderSpec::LocalOpenAi | ProviderSpec::OpenAi)
    }
}

impl FromStr for ProviderSpec {
    type Err = ConfigError;

    /// Case-insensitive; surrounding spaces and spaces around `+` are ignored; `openai+local`
    /// means `local+openai` (the parts are sorted before the spelling is looked up).
    fn from_str(value: &str) -> Result<Self, ConfigError> {
        let mut parts: Vec<String> = value.split('+').map(|p| p.trim().to_ascii_lowercase()).collect();
        parts.sort();
        ProviderSpec::parse(&parts.join("+")).ok_or_else(|| ConfigError::UnknownProvider {
            setting: env::PROVIDER,
            value: value.to_owned(),
            expected: ProviderSpec::EXPECTED,
        })
    }
}

/// A remote provider for [`compose`]: its name, the client (wrap it in [`crate::Guarded`]
/// first) and the methods it has a model for.
#[derive(Clone)]
pub struct RemoteProvider {
    pub name: String,
    pub client: Arc<dyn LlmClient>,
    pub methods: Vec<LlmMethod>,
}

impl fmt::Debug for RemoteProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteProvider").field("name", &self.name).field("methods", &self.methods).finish()
    }
}

/// Builds the client a spec asks for. `remote` is required by `local+openai` and `openai`
/// and ignored otherwise. A method the remote has no model for stays unavailable (or local, for
/// triage).
pub fn compose(spec: ProviderSpec, remote: Option<RemoteProvider>) -> Result<Composite, ConfigError> {
    let local: Arc<dyn LlmClient> = Arc::new(LocalTriage::embedded());
    let base = Composite::unconfigured().route(LlmMethod::Triage, "local-triage", local);
    match spec {
        ProviderSpec::Local => Ok(base),
        ProviderSpec::Fake => Ok(Composite::new("fake", Arc::new(FakeLlm::new()))),
        ProviderSpec::LocalOpenAi | ProviderSpec::OpenAi => {
            let remote = remote.ok_or_else(|| ConfigError::Missing {
                setting: "LOAD_AGENT_LLM_OPENAI_BASE_URL".to_owned(),
                why: format!("{}={spec} needs the OpenAI-compatible provider configured", env::PROVIDER),
            })?;
            let mut composite = base;
            for method in LlmMethod::ALL {
                let remote_triage = spec == ProviderSpec::OpenAi && method == LlmMethod::Triage;
                if (method != LlmMethod::Triage || remote_triage) && remote.methods.contains(&method) {
                    composite = composite.route(method, remote.name.clone(), remote.client.clone());
                }
            }
            Ok(composite)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_values_parse() {
        assert_eq!("".parse::<ProviderSpec>(), Ok(ProviderSpec::Local));
        assert_eq!("local".parse::<ProviderSpec>(), Ok(ProviderSpec::Local));
        assert_eq!(" Local + OpenAI ".parse::<ProviderSpec>(), Ok(ProviderSpec::LocalOpenAi));
        assert_eq!("openai+local".parse::<ProviderSpec>(), Ok(ProviderSpec::LocalOpenAi));
        assert_eq!("openai".parse::<ProviderSpec>(), Ok(ProviderSpec::OpenAi));
        assert_eq!("fake".parse::<ProviderSpec>(), Ok(ProviderSpec::Fake));
        for bad in ["typesafe+deepseek", "anthropic", "local+local", "fake+openai"] {
            let err = bad.parse::<ProviderSpec>().expect_err(bad).to_string();
            assert!(err.contains("LOAD_AGENT_LLM_PROVIDER") && err.contains(bad), "{err}");
            assert!(err.contains("local+openai"), "lists the valid values: {err}");
        }
        assert_eq!(ProviderSpec::EXPECTED, ProviderSpec::SPELLINGS.join(", "));
        for spec in ProviderSpec::ALL {
            assert_eq!(spec.as_str().parse::<ProviderSpec>(), Ok(spec));
        }
    }

    fn remote(methods: Vec<LlmMethod>) -> RemoteProvider {
        RemoteProvider { name: "openai".into(), client: Arc::new(FakeLlm::new()), methods }
    }

    #[test]
    fn compose_routes_each_method() {
        let routes = |c: Composite| {
            c.routes().into_iter().map(|(m, p)| (m.as_str(), p.to_owned())).collect::<Vec<_>>()
        };
        let local = compose(ProviderSpec::Local, None).expect("local");
        assert_eq!(
            routes(local),
            [
                ("triage", "local-triage"),
                ("draft", "none"),
                ("extract_document", "none"),
                ("plan", "none"),
                ("extract_sop", "none")
            ]
            .map(|(m, p)| (m, p.to_owned()))
        );

        let all = LlmMethod::ALL.to_vec();
        let lo = compose(ProviderSpec::LocalOpenAi, Some(remote(all.clone()))).expect("local+openai");
        assert_eq!(routes(lo)[0], ("triage", "local-triage".to_owned()));
        let o = compose(ProviderSpec::OpenAi, Some(remote(all))).expect("openai");
        assert!(routes(o).iter().all(|(_, p)| p == "openai"), "triage remote when configured for it");

        // No vision model configured: the document reader stays unavailable; no triage model: local.
        let o = compose(ProviderSpec::OpenAi, Some(remote(vec![LlmMethod::Plan, LlmMethod::Draft])))
            .expect("openai");
        let r = routes(o);
        assert_eq!(r[0].1, "local-triage");
        assert_eq!(r[2].1, "none");
        assert_eq!(r[3].1, "openai");

        let err = compose(ProviderSpec::OpenAi, None).expect_err("no remote");
        assert!(err.to_string().contains("LOAD_AGENT_LLM_OPENAI_BASE_URL"), "{err}");
    }
}
