//! A validated policy version is warmed before it is swapped in: on a
//! thread of its own, its instance receives the node table as the
//! scheduling loop sees it, so the loop's first call with the new version
//! sends only the nodes changed meanwhile. Without this the loop itself
//! sent every node at that first call, a stall visible in HotSwap
//! (docs/benchmarks.md).

use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use crate::kubernetes::hot_swap::profile_updates::ProfilePolicies;
use wasmsched_runtime::PolicyContext;

/// Warms new versions and makes sure the last one offered for a profile is
/// the one that stays, whichever warms first.
pub struct PolicyWarmer<T> {
    tx: Sender<T>,
    /// Per profile, the number of the last version offered.
    latest: HashMap<String, u64>,
    offered: u64,
}

/// A set offered to [`PolicyWarmer::offer`], now synced with the node
/// table: to be swapped in if [`PolicyWarmer::is_latest`] says so.
#[derive(Debug)]
pub struct Warmed {
    pub ready: Box<ProfilePolicies>,
    pub version: u64,
}

impl<T: From<Warmed> + Send + 'static> PolicyWarmer<T> {
    /// Warmed sets come back on `tx`.
    pub fn new(tx: Sender<T>) -> Self {
        PolicyWarmer { tx, latest: HashMap::new(), offered: 0 }
    }

    /// Starts warming `set` against `ctx`, or returns it to be swapped in
    /// at once: when `warm` is false, when the set has no policy to warm,
    /// and when no thread can be started. Either way it supersedes every
    /// version offered before it.
    pub fn offer(&mut self, ready: ProfilePolicies, ctx: PolicyContext, warm: bool) -> Option<ProfilePolicies> {
        self.offered += 1;
        let version = self.offered;
        self.latest.insert(ready.profile.clone(), version);
        if !warm || ready.set.policies.is_empty() {
            return Some(ready);
        }
        let tx = self.tx.clone();
        // Shared with the thread so that, if it cannot start, the set is
        // taken back here rather than dropped with the closure.
        let slot = Arc::new(Mutex::new(Some(ready)));
        let theirs = slot.clone();
        let spawned = std::thread::Builder::new().name("policy-warm".into()).spawn(move || {
            let Some(ready) = theirs.lock().expect("warm slot").take() else { return };
            ready.set.warm(&ctx);
            let _ = tx.send(T::from(Warmed { ready: Box::new(ready), version }));
        });
        match spawned {
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a thread to warm the new policy version; swapping it in cold");
                slot.lock().expect("warm slot").take()
            }
        }
    }

    /// Whether `version` is still the last one offered for `profile`: an
    /// older version that finished warming late is dropped.
    pub fn is_latest(&self, profile: &str, version: u64) -> bool {
        self.latest.get(profile) == Some(&version)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::policy::bundle::{load_bundle, parse_bundle};
    use crate::policy::remote::Fetcher;
    use crate::scheduler::PolicySet;
    use wasmsched_runtime::NoMetrics;
    use wasmsched_runtime::{NodeFacts, NodeTable, PolicyEngine, PolicyLimits};

    fn ready(set: PolicySet) -> ProfilePolicies {
        ProfilePolicies { profile: "wasmsched".into(), set, active: vec![] }
    }

    #[test]
    fn a_set_comes_back_warmed_and_only_the_last_offered_is_swapped_in() {
        let engine = PolicyEngine::new().unwrap();
        let files =
            BTreeMap::from([("least-allocated.wasm".to_string(), crate::default_policy::DEFAULT_POLICY_WASM.to_vec())]);
        let entries = parse_bundle("test", &files, 32 << 20, &Fetcher::new(None)).unwrap();
        let set = load_bundle(&engine, &entries, &PolicyLimits::default(), None).unwrap().set;
        let policy = set.policies[0].policy.clone();
        let mut table = NodeTable::new();
        for i in 0..20 {
            table.upsert(NodeFacts { name: format!("n{i}"), ..Default::default() });
        }
        let ctx = PolicyContext { nodes: Arc::new(table), node_metrics: Arc::new(NoMetrics) };
        let sent_before = policy.node_records_sent();

        let (tx, rx) = std::sync::mpsc::channel();
        let mut warmer = PolicyWarmer::<Warmed>::new(tx);
        let cold = warmer.offer(ready(set.clone()), ctx.clone(), false).expect("not warmed when asked not to");
        assert_eq!(policy.node_records_sent(), sent_before, "a cold set is handed back untouched");
        let cold_version = warmer.offered;
        drop(cold);
        assert!(warmer.offer(ready(set), ctx.clone(), true).is_none(), "a set with a policy is warmed first");
        assert!(!warmer.is_latest("wasmsched", cold_version), "the later offer supersedes the cold one");
        let Ok(Warmed { ready: warmed, version }) = rx.recv_timeout(Duration::from_secs(30)) else {
            panic!("the warmed set did not come back");
        };
        assert_eq!(policy.node_records_sent() - sent_before, 20, "warmed with the whole table");
        assert!(warmer.is_latest(&warmed.profile, version));

        // A later version (here: none valid) is swapped in at once, and the
        // earlier one, had it warmed late, would no longer be.
        let unavailable = warmer.offer(ready(PolicySet::unavailable("no valid policy")), ctx, true);
        assert!(unavailable.is_some(), "nothing to warm: swap at once");
        assert!(!warmer.is_latest(&warmed.profile, version));
        assert!(!warmer.is_latest("another-profile", version));
    }
}
