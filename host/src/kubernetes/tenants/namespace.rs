//! One tenant's worker: validates its namespace's policy ConfigMaps in the
//! order they changed, within the tenant caps, off the scheduling path,
//! and publishes every valid policy of the namespace to the scheduling
//! loop. The tenant hears the result on its ConfigMap: a Normal
//! `PolicyAccepted` or a Warning `PolicyRejected` Event (the previous
//! version stays), or `TenantPoliciesDisabled` when operators switched
//! tenant policies off for the namespace.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::compile_budget::{BudgetSettings, CompileBudget};
use crate::kubernetes::hot_swap::configmap::files_of;
use crate::kubernetes::scheduler_status::ActivePolicy;
use crate::policy::memory_budget::{Age, Need, TenantMemory};
use crate::policy::validator::{BundleValidator, ValidBundle};
use crate::scheduler::policy_set::{ShadowCandidate, WeightedPolicy};
use crate::scheduler::{POLICY_ANNOTATION, TenantSettings};
use crate::scheduler_metrics::SchedulerMetrics;
use wasmsched_runtime::cpu_time::measure;
use wasmsched_runtime::failure_lines::{FailureLines, cut};

/// Every valid policy of one tenant now (empty: none), for the
/// scheduling loop.
#[derive(Debug)]
pub struct TenantPolicies {
    pub namespace: String,
    /// By the name pods give in their annotation.
    pub policies: Vec<(String, WeightedPolicy)>,
    /// Tried on the namespace's pods, never deciding.
    pub candidates: Vec<ShadowCandidate>,
    pub active: Vec<ActivePolicy>,
}

/// How a bundle is judged (`BundleValidator`; a stand-in in tests).
pub trait Validate: Send + Sync + 'static {
    fn validate(
        &self,
        origin: &str,
        files: &BTreeMap<String, Vec<u8>>,
        taken: &[String],
    ) -> Result<ValidBundle, String>;
}

impl Validate for BundleValidator {
    fn validate(
        &self,
        origin: &str,
        files: &BTreeMap<String, Vec<u8>>,
        taken: &[String],
    ) -> Result<ValidBundle, String> {
        BundleValidator::validate(self, origin, files, taken)
    }
}

/// What every tenant's worker shares.
pub struct TenantContext<V, T> {
    pub settings: TenantSettings,
    pub validator: Arc<V>,
    pub tx: std::sync::mpsc::Sender<T>,
    pub metrics: Arc<SchedulerMetrics>,
    pub notes: mpsc::UnboundedSender<Note>,
    /// Compiles in flight over every tenant: enough that one tenant's slow
    /// compile leaves room for another's ([`compile_slots`]), few enough
    /// that a burst of updates (every tenant's ConfigMap listed at start)
    /// does not take every core from the scheduling thread.
    pub compiles: Semaphore,
    /// The CPU each tenant's validations may use per window.
    pub compile_budget: BudgetSettings,
    /// The memory every tenant's policies together may reach.
    pub memory: Arc<TenantMemory>,
}

/// How many tenant compiles may run at once: half the cores, and never
/// fewer than two, so one slow tenant cannot hold up the rest.
pub fn compile_slots() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores / 2).max(2)
}

/// A change for a tenant's worker, in watch order.
pub enum Work {
    Apply(Box<ConfigMap>),
    /// The ConfigMap of this name is gone (or unlabelled).
    Forget(String),
    /// Answer once everything queued before is done.
    Barrier(oneshot::Sender<()>),
}

/// What a validated bundle's policies and candidates can reach, and the
/// interpreters they run on.
fn need_of(bundle: &ValidBundle) -> Need {
    let policies = bundle.set.policies.iter().map(|wp| &wp.policy);
    let all: Vec<_> = policies.chain(bundle.set.candidates.iter().map(|c| &c.policy)).collect();
    let interpreters = all.iter().filter_map(|p| p.shared_code()).collect();
    Need { own: all.iter().map(|p| p.reachable_bytes()).sum(), interpreters }
}

/// An Event to post on a ConfigMap.
pub struct Note {
    pub configmap: ConfigMap,
    pub type_: &'static str,
    pub reason: &'static str,
    pub text: String,
}

/// The valid version of one ConfigMap.
struct Accepted {
    policies: Vec<(String, WeightedPolicy)>,
    candidates: Vec<ShadowCandidate>,
    active: Vec<ActivePolicy>,
}

pub struct Tenant<V, T> {
    namespace: String,
    context: Arc<TenantContext<V, T>>,
    /// By ConfigMap name.
    accepted: BTreeMap<String, Accepted>,
    budget: CompileBudget,
    /// Its refusals' log lines, a few a minute: each carries what the
    /// tenant sent (docs/security.md); every one still gets its Event.
    lines: FailureLines,
}

impl<V: Validate, T: From<TenantPolicies> + Send + 'static> Tenant<V, T> {
    pub fn new(namespace: &str, context: Arc<TenantContext<V, T>>) -> Self {
        let budget = CompileBudget::new(context.compile_budget);
        let lines = FailureLines::default();
        Tenant { namespace: namespace.to_string(), context, accepted: BTreeMap::new(), budget, lines }
    }

    /// Runs until the queue closes.
    pub async fn run(mut self, mut work: mpsc::UnboundedReceiver<Work>) {
        while let Some(w) = work.recv().await {
            match w {
                Work::Apply(cm) => self.apply(*cm).await,
                Work::Forget(name) => self.forget(&name),
                Work::Barrier(done) => {
                    let _ = done.send(());
                }
            }
        }
    }

    /// Decides one version of a ConfigMap, and says it is decided: the
    /// budget's first list waits for it.
    async fn apply(&mut self, cm: ConfigMap) {
        let ticket = TenantMemory::ticket(&cm);
        self.decide(cm, &ticket).await;
        self.context.memory.decided(&ticket);
    }

    async fn decide(&mut self, cm: ConfigMap, ticket: &Age) {
        let namespace = self.namespace.clone();
        let name = cm.metadata.name.clone().unwrap_or_default();
        let settings = &self.context.settings;
        if !settings.allows(&namespace) {
            let why = if settings.enabled {
                format!("tenant policies are disabled for namespace {namespace} by the scheduler's configuration")
            } else {
                "tenant policies are disabled by the scheduler's configuration".to_string()
            };
            tracing::info!(configmap = %format!("{namespace}/{name}"), "{why}; ignoring it");
            self.context.metrics.tenant_reload(&namespace, "disabled");
            self.note(cm, "Warning", "TenantPoliciesDisabled", format!("{why}; this ConfigMap is ignored"));
            return;
        }

        let valid = match self.validate(&name, &cm).await {
            // Within the budget of every tenant together, or not at all.
            Ok(bundle) => self.context.memory.claim(ticket, &need_of(&bundle)).await.map(|()| bundle),
            Err(why) => Err(why),
        };
        match valid {
            Ok(bundle) => self.accept(name, cm, bundle),
            Err(why) => self.reject(name, cm, why),
        }
    }

    fn reject(&mut self, name: String, cm: ConfigMap, why: String) {
        let namespace = &self.namespace;
        let consequence = if self.accepted.contains_key(&name) {
            "the active version stays"
        } else {
            "no version of it is active: pods that opt in to its policies are placed by the built-in scoring"
        };
        match self.lines.hear("rejected", "update") {
            Some(held_back) => {
                let error = cut(&why);
                tracing::warn!(tenant = %namespace, configmap = %name, %error, held_back, "tenant policy update rejected; {consequence}; the next rejections of this namespace are counted and written once a minute");
            }
            None => tracing::debug!(tenant = %namespace, configmap = %name, "tenant policy update rejected again"),
        }
        self.context.metrics.tenant_reload(namespace, "rejected");
        self.note(cm, "Warning", "PolicyRejected", format!("policy update rejected: {why}; {consequence}"));
    }

    /// Validates the ConfigMap's bundle within the namespace's compile
    /// budget: the policies the namespace's other ConfigMaps supply are
    /// taken.
    async fn validate(&mut self, name: &str, cm: &ConfigMap) -> Result<ValidBundle, String> {
        // What the namespace's other ConfigMaps already supply.
        let taken: Vec<String> = self
            .accepted
            .iter()
            .filter(|(n, _)| n.as_str() != name)
            .flat_map(|(_, a)| a.policies.iter().map(|(p, _)| p.clone()))
            .collect();
        let origin = format!("configmap {}/{name}", self.namespace);
        let files = files_of(cm);
        let validator = self.context.validator.clone();
        match self.budget.refusal(std::time::Instant::now()) {
            Some(refused) => Err(refused),
            None => {
                let slot = self.context.compiles.acquire().await;
                // The CPU it used, the compile child's included: never the
                // wait for a core on a busy machine.
                let validated =
                    tokio::task::spawn_blocking(move || measure(|| validator.validate(&origin, &files, &taken)));
                let (valid, cpu) = validated
                    .await
                    .unwrap_or_else(|e| (Err(format!("loading panicked: {e}")), std::time::Duration::ZERO));
                drop(slot);
                self.budget.spend(std::time::Instant::now(), cpu);
                valid
            }
        }
    }

    /// Makes a validated bundle live and says so on its ConfigMap.
    fn accept(&mut self, name: String, cm: ConfigMap, ValidBundle { names, set, refused_candidates }: ValidBundle) {
        let namespace = self.namespace.clone();
        let candidates = set.candidates;
        let policies: Vec<(String, WeightedPolicy)> = names.into_iter().zip(set.policies).collect();
        let active = ActivePolicy::of_tenant(&namespace, &policies, &candidates);
        let summary = active
            .iter()
            .map(|a| {
                let shadow = a.shadow.as_ref().map(|s| format!(", shadow candidate: {s}")).unwrap_or_default();
                format!("{} ({} sha256:{}{shadow})", a.name, a.version, a.sha256.get(..12).unwrap_or(""))
            })
            .collect::<Vec<_>>()
            .join(", ");
        tracing::info!(tenant = %namespace, configmap = %name, policies = %summary, "tenant policies accepted");
        self.context.metrics.tenant_reload(&namespace, "accepted");
        for why in refused_candidates {
            tracing::warn!(tenant = %namespace, configmap = %name, error = %why, "tenant candidate refused; the rest is live");
            let text = format!("candidate refused: {why}; it is not tried, and the rest of this ConfigMap is live");
            self.note(cm.clone(), "Warning", "CandidateRejected", text);
        }
        self.accepted.insert(name, Accepted { policies, candidates, active });
        self.publish();
        let text = format!("policies loaded: {summary}; pods opt in with the annotation {POLICY_ANNOTATION}: NAME");
        self.note(cm, "Normal", "PolicyAccepted", text);
    }

    fn forget(&mut self, name: &str) {
        if self.accepted.remove(name).is_some() {
            self.context.memory.release(&(self.namespace.clone(), name.to_string()));
            tracing::info!(tenant = %self.namespace, configmap = %name, "tenant policy configmap removed; its policies stop");
            self.publish();
        }
    }

    /// Sends every valid policy of the namespace to the scheduling loop.
    fn publish(&self) {
        let policies = self.accepted.values().flat_map(|a| a.policies.iter().cloned()).collect();
        let candidates = self.accepted.values().flat_map(|a| a.candidates.iter().cloned()).collect();
        let active = self.accepted.values().flat_map(|a| a.active.iter().cloned()).collect();
        let namespace = self.namespace.clone();
        let _ = self.context.tx.send(T::from(TenantPolicies { namespace, policies, candidates, active }));
    }

    fn note(&self, configmap: ConfigMap, type_: &'static str, reason: &'static str, text: String) {
        let _ = self.context.notes.send(Note { configmap, type_, reason, text });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::api::ObjectMeta;

    use super::*;
    use crate::scheduler::PolicySet;

    /// A stand-in validator: each validation waits `wait` (a busy
    /// machine's queue for a core) and its compile child uses `cpu`,
    /// charged as the compile worker charges its child's usage.
    struct Compiles {
        wait: Duration,
        cpu: Duration,
    }

    impl Validate for Compiles {
        fn validate(&self, _: &str, _: &BTreeMap<String, Vec<u8>>, _: &[String]) -> Result<ValidBundle, String> {
            std::thread::sleep(self.wait);
            wasmsched_runtime::cpu_time::charge(self.cpu);
            Ok(ValidBundle { names: vec![], set: PolicySet::new(vec![]), refused_candidates: vec![] })
        }
    }

    /// The Events (reason, text) that `updates` updates of one tenant's
    /// ConfigMap got, in order.
    async fn events(
        validator: Compiles,
        compile_budget: BudgetSettings,
        updates: usize,
    ) -> Vec<(&'static str, String)> {
        let (tx, _published) = std::sync::mpsc::channel::<TenantPolicies>();
        let (notes, mut posted) = mpsc::unbounded_channel();
        let context = Arc::new(TenantContext {
            settings: TenantSettings::default(),
            validator: Arc::new(validator),
            tx,
            metrics: Arc::new(SchedulerMetrics::new()),
            notes,
            compiles: Semaphore::new(2),
            compile_budget,
            memory: Arc::new(TenantMemory::listed(u64::MAX)),
        });
        let (work, queue) = mpsc::unbounded_channel();
        for version in 0..updates {
            let metadata = ObjectMeta {
                namespace: Some("team".into()),
                name: Some("policies".into()),
                resource_version: Some(version.to_string()),
                ..Default::default()
            };
            let _ = work.send(Work::Apply(Box::new(ConfigMap { metadata, ..Default::default() })));
        }
        drop(work);
        Tenant::new("team", context).run(queue).await;
        std::iter::from_fn(|| posted.try_recv().ok()).map(|n| (n.reason, n.text)).collect()
    }

    #[tokio::test]
    async fn a_tenant_whose_compiles_waited_long_but_worked_little_is_not_refused() {
        let waiting = Compiles { wait: Duration::from_millis(100), cpu: Duration::from_millis(1) };
        let budget = BudgetSettings { cpu: Duration::from_millis(50), window: Duration::from_secs(600) };
        let got = events(waiting, budget, 5).await;
        assert_eq!(got.len(), 5, "{got:?}");
        assert!(got.iter().all(|(reason, _)| *reason == "PolicyAccepted"), "half a second of waiting: {got:?}");
    }

    #[tokio::test]
    async fn a_tenant_whose_compiles_burned_its_budget_is_refused() {
        let burning = Compiles { wait: Duration::ZERO, cpu: Duration::from_secs(40) };
        let got = events(burning, BudgetSettings::default(), 3).await;
        let reasons: Vec<&str> = got.iter().map(|(reason, _)| *reason).collect();
        assert_eq!(reasons, ["PolicyAccepted", "PolicyAccepted", "PolicyRejected"], "{got:?}");
        assert!(got[2].1.contains("used 80s of CPU to compile within the last 600s"), "{}", got[2].1);
    }
}
