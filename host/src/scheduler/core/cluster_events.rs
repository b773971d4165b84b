//! What the core does with the cluster's changes: nodes and pods added,
//! updated and deleted, and the relist that says which pods are still
//! there.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;

use super::{InvalidPod, Scheduler};
use crate::cluster::{DisruptionBudget, PodInfo, PodKey};
use crate::scheduler::queueing_hints::may_fit_after_pod_gone;

impl Scheduler {
    /// A node added or updated. Unschedulable pods are retried only when
    /// something that can make room changed, not on status heartbeats.
    pub fn node_upserted(&mut self, node: &Node, now: Duration) -> Result<(), String> {
        let (_, changed) = self.state.upsert_node(node)?;
        if changed {
            self.queue.cluster_changed(now);
        }
        Ok(())
    }

    pub fn node_deleted(&mut self, name: &str) {
        self.state.remove_node(name);
    }

    /// A namespace added or updated: its labels are what inter-pod
    /// affinity's namespace selectors match. A change of labels may let a
    /// waiting pod in (or keep it out), so unschedulable pods are retried.
    pub fn namespace_upserted(&mut self, namespace: &Namespace, now: Duration) {
        let name = namespace.metadata.name.as_deref().unwrap_or_default();
        let labels: Vec<(String, String)> = namespace.metadata.labels.clone().unwrap_or_default().into_iter().collect();
        if self.state.namespace_labels(name) != labels.as_slice() {
            self.state.namespace_upserted(name, labels);
            self.queue.cluster_changed(now);
        }
    }

    pub fn namespace_deleted(&mut self, name: &str) {
        self.state.namespace_deleted(name);
    }

    /// A PodDisruptionBudget added or updated: preemption reads it.
    pub fn budget_upserted(&mut self, budget: &PodDisruptionBudget) {
        self.state.budget_upserted(DisruptionBudget::of(budget));
    }

    pub fn budget_deleted(&mut self, namespace: &str, name: &str) {
        self.state.budget_deleted(namespace, name);
    }

    /// A PersistentVolumeClaim added or updated (bound, say): pods waiting
    /// for it are retried.
    pub fn claim_upserted(&mut self, claim: &PersistentVolumeClaim, now: Duration) {
        self.state.volumes_mut().claim_upserted(claim);
        self.queue.cluster_changed(now);
    }

    pub fn claim_deleted(&mut self, namespace: &str, name: &str) {
        self.state.volumes_mut().claim_deleted(namespace, name);
    }

    /// A PersistentVolume added or updated: pods whose claims are bound
    /// to it are retried.
    pub fn volume_upserted(&mut self, volume: &PersistentVolume, now: Duration) {
        self.state.volumes_mut().volume_upserted(volume);
        self.queue.cluster_changed(now);
    }

    pub fn volume_deleted(&mut self, name: &str) {
        self.state.volumes_mut().volume_deleted(name);
    }

    /// A StorageClass added or updated: pods whose claims name it are
    /// retried.
    pub fn storage_class_upserted(&mut self, class: &StorageClass, now: Duration) {
        self.state.volumes_mut().class_upserted(class);
        self.queue.cluster_changed(now);
    }

    pub fn storage_class_deleted(&mut self, name: &str) {
        self.state.volumes_mut().class_deleted(name);
    }

    /// Any pod, ours or not: bound pods count as load, pending pods with our
    /// scheduler name are queued, terminal pods stop counting.
    pub fn pod_upserted(&mut self, pod: Arc<Pod>, now: Duration) {
        let key = PodKey::of(&pod);
        let info = match PodInfo::new(&pod) {
            Ok(info) => Arc::new(info),
            Err(e) => {
                self.queue.remove(&key);
                self.invalid.retain(|i| i.key != key);
                self.invalid.push(InvalidPod { message: format!("invalid pod {key}: {e}"), key, pod });
                return;
            }
        };
        self.invalid.retain(|i| i.key != key);
        if info.terminal {
            self.queue.remove(&key);
            self.state.unnominate(&key);
            self.placed_pod_gone(&key, now);
            return;
        }
        if let Some(node) = info.node_name.clone() {
            // Bound (by us or anyone): count it, confirming an assumption.
            self.queue.remove(&key);
            self.state.unnominate(&key);
            let moved = self.state.placement(&key).is_none_or(|(placed_on, _)| placed_on != node);
            self.state.place(&info, &node, false);
            if moved {
                self.queue.pod_placed(now);
            }
            return;
        }
        if self.profile(&info.scheduler_name).is_none() {
            return;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            // Being deleted: kube-scheduler skips such pods too.
            self.queue.remove(&key);
            self.state.unnominate(&key);
            return;
        }
        match self.state.placement_uid(&key) {
            // Assumed and being bound: the binding result decides.
            Some((_, true, _)) => return,
            // Bound by us and confirmed, but this copy predates the binding
            // (another watch stream can lag): nodeName never goes back to
            // empty, so it is stale. A recreated pod has a new UID.
            Some((_, false, uid)) if uid == info.uid => return,
            _ => {}
        }
        // Nominated before we saw it (by an earlier leader, say): its room
        // is held as the nomination says. Our own nomination stays while
        // the copy that carries it is on its way.
        if let Some(node) = &info.nominated_node
            && self.state.nomination(&key) != Some(node.as_str())
        {
            self.state.nominate(&info, node);
        }
        self.queue.add_or_update(info);
    }

    /// A pod deleted, or finished. With `uid`, only the pod of that UID
    /// goes: a late deletion of an earlier pod of the same name (looked up
    /// while it was being recreated) must not remove its successor.
    pub fn pod_deleted(&mut self, key: &PodKey, uid: Option<&str>, now: Duration) {
        if let Some(uid) = uid
            && self.known_uid(key).is_some_and(|known| known != uid)
        {
            return;
        }
        self.queue.remove(key);
        self.invalid.retain(|i| &i.key != key);
        self.state.unnominate(key);
        self.placed_pod_gone(key, now);
    }

    /// A placed pod stops counting: the unschedulable pods its room (or
    /// its absence) may let in are retried.
    fn placed_pod_gone(&mut self, key: &PodKey, now: Duration) {
        let Some(gone) = self.state.pod_gone(key) else { return };
        let state = &self.state;
        self.queue.cluster_changed_for(now, |waiting| may_fit_after_pod_gone(waiting, &gone, state));
    }

    /// The UID of the pod the core holds under `key`, placed, queued or
    /// invalid.
    fn known_uid(&self, key: &PodKey) -> Option<&str> {
        self.state
            .placement_uid(key)
            .map(|(_, _, uid)| uid)
            .or_else(|| self.queue.get(key).map(|p| p.uid.as_str()))
            .or_else(|| self.invalid.iter().find(|i| &i.key == key).and_then(|i| i.pod.metadata.uid.as_deref()))
    }

    /// A fresh list of every live pod (the first list, or a relist after a
    /// watch gap), its contents applied just before. Every pod the core
    /// learnt of came through the same watch at an earlier
    /// resourceVersion, so one missing from the list was deleted (or
    /// finished) meanwhile: bound, queued, invalid or assumed, it goes. The
    /// binding of an assumed one then answers 404, or counts nothing.
    /// Returns how many pods went.
    pub fn reconcile_pods(&mut self, listed: &HashSet<PodKey>, now: Duration) -> usize {
        let gone: HashSet<PodKey> = self
            .state
            .placed()
            .map(|(k, _)| k)
            .chain(self.queue.keys())
            .chain(self.invalid.iter().map(|i| &i.key))
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        for key in &gone {
            self.pod_deleted(key, None, now);
        }
        gone.len()
    }
}
