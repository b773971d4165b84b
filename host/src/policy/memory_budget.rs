//! One memory budget for every tenant together: what their policies can
//! reach (each instance's cap, as many instances as a policy may have, and
//! its own compiled code) and the interpreters' compiled code, once per
//! language. Each tenant is capped on its own (`tenants.memoryLimit`,
//! `maxPolicies`); this caps all of them, so that however many namespaces
//! ship policies the scheduler stays within its container's memory.
//!
//! A ConfigMap whose policies would pass the budget is refused; what is
//! held is never taken back, so no newcomer evicts a tenant already
//! running. At start, the ConfigMaps listed are decided oldest first
//! (by creation time), whichever compiles first: a restart keeps the
//! tenants that were running.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ConfigMap;
use serde::Serialize;
use tokio::sync::Notify;
use wasmsched_runtime::Language;

/// A tenant's ConfigMap, as the budget knows it.
pub type BundleKey = (String, String);

/// Where a ConfigMap stands in the order of the first list: its creation
/// time, then its namespace and name ([`TenantMemory::ticket`]).
pub type Age = (Option<jiff::Timestamp>, BundleKey);

/// What a bundle's policies can reach, and the interpreters they run on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Need {
    pub own: u64,
    /// By language: the compiled interpreter's size.
    pub interpreters: Vec<(Language, u64)>,
}

/// The budget, shared by every tenant's worker and the status endpoints.
pub struct TenantMemory {
    ledger: Mutex<Ledger>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct Ledger {
    total: u64,
    /// Compiled once and kept for good: counted from the first tenant
    /// policy that runs on it.
    interpreters: BTreeMap<&'static str, u64>,
    /// What each ConfigMap's accepted version holds.
    held: BTreeMap<BundleKey, u64>,
    /// The first list's ConfigMaps not yet decided: a claim waits for
    /// those older than it, and any later one for all of them.
    startup: BTreeSet<Age>,
    started: bool,
}

/// What `/policies/memory` and the metrics show of the budget.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryView {
    pub total_bytes: u64,
    pub held_bytes: u64,
    pub left_bytes: u64,
    /// `NAMESPACE` for a tenant (its ConfigMaps together), or
    /// `interpreter LANGUAGE`.
    pub holders: Vec<Holder>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Holder {
    pub holder: String,
    pub bytes: u64,
}

impl TenantMemory {
    pub fn new(total: u64) -> Self {
        TenantMemory { ledger: Mutex::new(Ledger { total, ..Ledger::default() }), changed: Notify::new() }
    }

    /// A budget whose first list was empty: claims go as they come.
    #[cfg(test)]
    pub fn listed(total: u64) -> Self {
        let budget = Self::new(total);
        budget.first_list(&[]);
        budget
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ConfigMaps of the first list: they are decided in this order
    /// (oldest first), each when the older ones are.
    pub fn first_list(&self, listed: &[ConfigMap]) {
        let mut ledger = self.ledger();
        ledger.startup.extend(listed.iter().map(age));
        ledger.started = true;
        drop(ledger);
        self.changed.notify_waiters();
    }

    /// Where `cm` stands in the first list's order, kept while it is
    /// decided (its data may be moved on meanwhile).
    pub fn ticket(cm: &ConfigMap) -> Age {
        age(cm)
    }

    /// The ConfigMap of `ticket` is decided (accepted, refused, or
    /// ignored): the ones after it may go.
    pub fn decided(&self, ticket: &Age) {
        let removed = self.ledger().startup.remove(ticket);
        if removed {
            self.changed.notify_waiters();
        }
    }

    /// Takes what `cm`'s new version needs in place of what its accepted
    /// version held, or says why not. Waits, first, for the ConfigMaps of
    /// the first list that are older than it.
    pub async fn claim(&self, me: &Age, need: &Need) -> Result<(), String> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.ledger().may_decide(me) {
                break;
            }
            notified.await;
        }
        self.ledger().claim(me.1.clone(), need)
    }

    /// `key`'s ConfigMap is gone: what it held is free.
    pub fn release(&self, key: &BundleKey) {
        self.ledger().held.remove(key);
    }

    pub fn view(&self) -> MemoryView {
        self.ledger().view()
    }
}

fn age(cm: &ConfigMap) -> Age {
    let key = (cm.metadata.namespace.clone().unwrap_or_default(), cm.metadata.name.clone().unwrap_or_default());
    (cm.metadata.creation_timestamp.as_ref().map(|t| t.0), key)
}

impl Ledger {
    /// Whether a claim of `me` may be decided now: every older ConfigMap
    /// of the first list is.
    fn may_decide(&self, me: &Age) -> bool {
        if !self.started {
            return false;
        }
        match self.startup.contains(me) {
            true => self.startup.range(..me).next().is_none(),
            false => self.startup.is_empty(),
        }
    }

    fn claim(&mut self, key: BundleKey, need: &Need) -> Result<(), String> {
        // The interpreters are held whether or not this bundle fits:
        // compiling it for the validation made them.
        for (language, bytes) in &need.interpreters {
            self.interpreters.entry(language.as_str()).or_insert(*bytes);
        }
        let before = self.view();
        let replaced = self.held.get(&key).copied().unwrap_or(0);
        let others = before.held_bytes - replaced;
        if others.saturating_add(need.own) > self.total {
            return Err(refusal(&before, &key, need.own, replaced));
        }
        self.held.insert(key, need.own);
        Ok(())
    }

    fn view(&self) -> MemoryView {
        let mut by_tenant: BTreeMap<&str, u64> = BTreeMap::new();
        for ((namespace, _), bytes) in &self.held {
            *by_tenant.entry(namespace).or_default() += bytes;
        }
        let interpreters =
            self.interpreters.iter().map(|(language, bytes)| (format!("interpreter {language}"), *bytes));
        let holders: Vec<Holder> = interpreters
            .chain(by_tenant.into_iter().map(|(ns, bytes)| (ns.to_string(), bytes)))
            .map(|(holder, bytes)| Holder { holder, bytes })
            .collect();
        let held_bytes = holders.iter().map(|h| h.bytes).sum::<u64>();
        MemoryView { total_bytes: self.total, held_bytes, left_bytes: self.total.saturating_sub(held_bytes), holders }
    }
}

/// Why a bundle does not fit: the budget, what holds it, what is left and
/// what the bundle needs.
fn refusal(view: &MemoryView, (namespace, name): &BundleKey, need: u64, replaced: u64) -> String {
    let holders: Vec<String> = view.holders.iter().map(|h| format!("{} {}", h.holder, mib(h.bytes))).collect();
    let holding = if holders.is_empty() { "nothing".to_string() } else { holders.join(", ") };
    let left = view.left_bytes.saturating_add(replaced);
    let replacing = match replaced {
        0 => String::new(),
        r => format!(" in place of the {} its active version holds", mib(r)),
    };
    format!(
        "the tenants' policies together may reach at most {} of memory (the operator's tenants.memoryTotal), \
         {} are held ({holding}) and {} are left; configmap {namespace}/{name} needs {}{replacing} (each \
         instance's memoryLimit, and its own compiled code): ask the cluster's operator for more, or lower its \
         policies' memoryLimit",
        mib(view.total_bytes),
        mib(view.held_bytes),
        mib(left),
        mib(need),
    )
}

/// Bytes as MiB, to a tenth.
pub fn mib(bytes: u64) -> String {
    format!("{:.1}MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// The share of the container's memory limit that the tenants' policies
/// may reach together, unless the operator says otherwise: the rest is
/// the scheduler's own (its cluster cache, the operator's policies) and a
/// margin.
pub const SHARE_OF_CONTAINER_LIMIT: u64 = 4;

/// Without a container memory limit: as in a container of 4 GiB.
pub const WITHOUT_A_LIMIT: u64 = 1 << 30;

/// The budget when the operator set none: a quarter of the container's
/// memory limit (cgroup v2's `memory.max`, or v1's
/// `memory.limit_in_bytes`), and where it says why.
pub fn default_total() -> (u64, String) {
    match container_limit(std::path::Path::new("/sys/fs/cgroup")) {
        Some((limit, file)) => (
            limit / SHARE_OF_CONTAINER_LIMIT,
            format!("a quarter of the container's memory limit, {} ({file})", mib(limit)),
        ),
        None => (WITHOUT_A_LIMIT, "no container memory limit was found".to_string()),
    }
}

/// The memory limit of this process's cgroup under `root`, and the file
/// that says it; `None` when there is none.
fn container_limit(root: &std::path::Path) -> Option<(u64, String)> {
    // Past this, cgroup v1's "no limit" (a page-rounded i64::MAX).
    const UNLIMITED: u64 = 1 << 60;
    ["memory.max", "memory/memory.limit_in_bytes"].iter().find_map(|file| {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).ok()?;
        let limit: u64 = text.trim().parse().ok()?;
        (limit < UNLIMITED).then(|| (limit, path.display().to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::api::ObjectMeta;

    fn cm(namespace: &str, created: i64) -> ConfigMap {
        let at = jiff::Timestamp::from_second(1_800_000_000 + created).unwrap();
        let metadata = ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some("my-policies".into()),
            creation_timestamp: Some(Time(at)),
            ..Default::default()
        };
        ConfigMap { metadata, ..Default::default() }
    }

    fn ticket(namespace: &str, created: i64) -> Age {
        TenantMemory::ticket(&cm(namespace, created))
    }

    fn need(mib: u64) -> Need {
        Need { own: mib << 20, interpreters: vec![] }
    }

    #[tokio::test]
    async fn the_budget_holds_for_all_tenants_and_a_refusal_says_what_holds_it() {
        let budget = TenantMemory::new(100 << 20);
        budget.first_list(&[]);
        let python = Need { own: 32 << 20, interpreters: vec![(Language::Python, 30 << 20)] };
        budget.claim(&ticket("a", 1), &python).await.unwrap();
        budget.claim(&ticket("b", 2), &need(32)).await.unwrap();
        let refused = budget.claim(&ticket("c", 3), &python).await.unwrap_err();
        assert!(
            refused.contains("may reach at most 100.0MiB")
                && refused.contains("94.0MiB are held (interpreter Python 30.0MiB, a 32.0MiB, b 32.0MiB)")
                && refused.contains("6.0MiB are left; configmap c/my-policies needs 32.0MiB"),
            "{refused}"
        );
        assert_eq!(budget.view().left_bytes, 6 << 20, "the interpreter is counted once");
        // An update takes its old version's place; a larger one must fit.
        budget.claim(&ticket("b", 2), &need(38)).await.unwrap();
        let larger = budget.claim(&ticket("b", 2), &need(39)).await.unwrap_err();
        assert!(larger.contains("38.0MiB are left") && larger.contains("in place of the 38.0MiB"), "{larger}");
        budget.release(&("a".into(), "my-policies".into()));
        budget.claim(&ticket("c", 3), &python).await.unwrap();
        let holders: Vec<_> = budget.view().holders.into_iter().map(|h| h.holder).collect();
        assert_eq!(holders, ["interpreter Python", "b", "c"]);
    }

    /// Whichever compiles first, the first list is decided oldest first:
    /// a restart keeps the tenants that were running.
    #[tokio::test]
    async fn the_first_list_is_decided_oldest_first() {
        let budget = std::sync::Arc::new(TenantMemory::new(64 << 20));
        budget.first_list(&[cm("young", 2), cm("old", 1)]);
        let (old, young) = (ticket("old", 1), ticket("young", 2));
        let early = {
            let budget = budget.clone();
            let young = young.clone();
            tokio::spawn(async move { budget.claim(&young, &need(40)).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!early.is_finished(), "the younger waits for the older");
        budget.claim(&old, &need(40)).await.unwrap();
        budget.decided(&old);
        assert!(early.await.unwrap().is_err(), "the older took the room first");
        budget.decided(&young);
        let later = budget.claim(&ticket("later", 0), &need(10)).await;
        assert!(later.is_ok(), "after the first list, claims go as they come");
    }

    #[test]
    fn the_default_is_a_quarter_of_the_cgroup_limit() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(container_limit(dir.path()), None);
        std::fs::write(dir.path().join("memory.max"), "max\n").unwrap();
        assert_eq!(container_limit(dir.path()), None, "cgroup v2 without a limit");
        std::fs::write(dir.path().join("memory.max"), "536870912\n").unwrap();
        assert_eq!(container_limit(dir.path()).map(|(l, _)| l), Some(512 << 20));
        let v1 = tempfile::tempdir().unwrap();
        std::fs::create_dir(v1.path().join("memory")).unwrap();
        std::fs::write(v1.path().join("memory/memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(container_limit(v1.path()), None, "cgroup v1 without a limit");
    }
}
