//! What the core does with the cluster's events: `apply` sends each
//! kind's objects added, updated, deleted and relisted where the kinds
//! table says. Kinds that are only stored go through `stores`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::Scheduler;
use super::stores::{KindStore, apply_to, gone_from};
use crate::cluster::convert::{bound_node, is_terminal, scheduler_name};
use crate::cluster::default_spread::DefaultSpread;
use crate::cluster::pod_groups::GroupObject;
use crate::cluster::{ClusterState, PodInfo, PodKey, Volumes};
use crate::scheduler::events::{Change, ClusterEvent, EventReport, InvalidPod, ObjectKey};
use crate::scheduler::plugins::dynamic_resources::Devices;
use crate::scheduler::plugins::queueing_hints::{AfterPodGone, Room};
use crate::scheduler::queue::QueueEvent;

/// Where a pod stands for this scheduler: the one place that decides
/// which pods are ours to place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodStanding {
    /// Succeeded or Failed: holds nothing.
    Terminal,
    /// Has a node (bound by us or anyone): counts as load.
    Bound,
    /// Pending, with the scheduler name of one of our profiles.
    Ours,
    /// Pending, for another scheduler: left alone.
    OtherScheduler,
}

/// `Scheduler::apply`, from the kinds table: each kind's change goes to
/// its own method, or into the model's store that holds it.
macro_rules! apply_by_kind {
    ($(
        $(#[$doc:meta])* $variant:ident($kind:ty) {
            api: $api:literal, resource: $resource:literal, kind: $name:literal, scope: $scope:ident,
            field: $field:ident, apply: $apply:ident $(($store:ident))?, $(watch: $watch:literal,)?
        },
    )*) => {
        impl Scheduler {
            /// Applies one cluster event; returns what the backend must
            /// report. A stored kind's change moves pods as `<Kind>Change`.
            pub fn apply(&mut self, event: ClusterEvent, now: Duration) -> EventReport {
                match event {
                    $(ClusterEvent::$variant(change) => {
                        self.$apply($($store, QueueEvent(concat!($name, "Change")),)? change, now)
                    })*
                }
            }
        }
    };
}

wasmsched_kinds::watched_kinds!(apply_by_kind);

/// The stores a kind can be `stored` in.
fn state(s: &mut Scheduler) -> &mut ClusterState {
    &mut s.state
}

fn default_spread(s: &mut Scheduler) -> &mut DefaultSpread {
    s.state.default_spread_mut()
}

fn volumes(s: &mut Scheduler) -> &mut Volumes {
    s.state.volumes_mut()
}

fn devices(s: &mut Scheduler) -> &mut Devices {
    s.state.devices_mut()
}

impl Scheduler {
    /// A claim made, or changed: the pods held for their claims look again
    /// (kube's queueing hint for claims).
    fn resource_claims_changed(&mut self, change: Change<ResourceClaim>, now: Duration) -> EventReport {
        let event = QueueEvent("ResourceClaimChange");
        for key in self.claim_waits.claim_changed() {
            self.queue.release(&key, event);
        }
        self.stored(devices, event, change, now)
    }

    /// A PodGroup made, changed or gone: the members held for it look
    /// again (each finds its group's quorum, or waits again).
    fn pod_groups_changed<G: GroupObject>(&mut self, change: Change<G>, now: Duration) -> EventReport {
        if apply_to(self.state.pod_groups_mut(), change) {
            self.release_gangs();
            self.queue.cluster_changed(now, QueueEvent::POD_GROUP_CHANGE);
        }
        EventReport::Nothing
    }

    /// Where `pod` stands for this scheduler (`PodStanding`).
    pub fn standing(&self, pod: &Pod) -> PodStanding {
        if is_terminal(pod) {
            PodStanding::Terminal
        } else if bound_node(pod).is_some() {
            PodStanding::Bound
        } else if self.profile(scheduler_name(pod)).is_some() {
            PodStanding::Ours
        } else {
            PodStanding::OtherScheduler
        }
    }

    /// A node added or updated. Unschedulable pods are retried only when
    /// something that can make room changed, not on status heartbeats.
    fn nodes_changed(&mut self, change: Change<Node>, now: Duration) -> EventReport {
        match change {
            Change::Applied(node) => match self.state.upsert_node(&node) {
                Ok((_, true)) => self.queue.cluster_changed(now, QueueEvent::NODE_CHANGE),
                Ok((_, false)) => {}
                Err(e) => return EventReport::Ignored(e),
            },
            Change::Deleted { key, .. } => {
                self.state.remove_node(&key.name);
            }
            Change::Listed(listed) => {
                let held = self.state.table().iter().map(|(_, n)| ObjectKey::cluster_scoped(&n.name));
                for key in gone_from(held, &listed) {
                    tracing::debug!(node = %key.name, "gone while not watching");
                    self.state.remove_node(&key.name);
                }
            }
        }
        EventReport::Nothing
    }

    fn pods_changed(&mut self, change: Change<Pod>, now: Duration) -> EventReport {
        match change {
            Change::Applied(pod) => self.pod_upserted(pod, now),
            Change::Deleted { key, uid } => {
                let key = key.pod();
                self.pod_deleted(&key, uid.as_deref(), now);
                EventReport::PodsGone(vec![key])
            }
            Change::Listed(listed) => {
                let listed: HashSet<PodKey> = listed.iter().map(ObjectKey::pod).collect();
                match self.reconcile_pods(&listed, now) {
                    gone if gone.is_empty() => EventReport::Nothing,
                    gone => EventReport::PodsGone(gone),
                }
            }
        }
    }

    /// A kind the core only stores: waiting pods are retried when the
    /// store says the change may let one in.
    fn stored<K, S: KindStore<K>>(
        &mut self,
        store: fn(&mut Self) -> &mut S,
        event: QueueEvent,
        change: Change<K>,
        now: Duration,
    ) -> EventReport {
        if apply_to(store(self), change) {
            self.queue.cluster_changed(now, event);
        }
        EventReport::Nothing
    }

    /// Any pod, ours or not: bound pods count as load, pending pods with our
    /// scheduler name are queued, terminal pods stop counting.
    fn pod_upserted(&mut self, pod: Arc<Pod>, now: Duration) -> EventReport {
        let key = PodKey::of(&pod);
        let info = match PodInfo::new(&pod) {
            Ok(info) => Arc::new(info),
            Err(e) => return self.pod_invalid(key, pod, e.to_string()),
        };
        self.invalid.retain(|i| i.key != key);
        if info.terminal {
            self.queue.remove(&key);
            self.state.unnominate(&key);
            self.placed_pod_gone(&key, now);
            return EventReport::Nothing;
        }
        if let Some(node) = info.node_name.clone() {
            // Bound (by us or anyone): count it, confirming an assumption.
            self.queue.remove(&key);
            self.state.unnominate(&key);
            let moved = self.state.placement(&key).is_none_or(|(placed_on, _)| placed_on != node);
            // An in-place resize that shrank what it holds may let a
            // waiting pod in.
            let shrank =
                self.state.placed_requests(&key).is_some_and(|before| shrinks(before, &info.requests.resources));
            self.state.place(&info, &node, false);
            if moved {
                self.queue.pod_placed(now);
            }
            if shrank {
                self.queue.cluster_changed(now, QueueEvent::ASSIGNED_POD_UPDATE);
            }
            return EventReport::Nothing;
        }
        if self.profile(&info.scheduler_name).is_some() {
            self.pending_pod_upserted(&pod, info);
        }
        EventReport::Nothing
    }

    /// A pod that cannot even be evaluated (an unparsable quantity, say).
    /// Ours and pending, it is kept, not dropped, and its owner hears why
    /// (once per message); anyone else's is no concern of ours.
    fn pod_invalid(&mut self, key: PodKey, pod: Arc<Pod>, error: String) -> EventReport {
        self.queue.remove(&key);
        let before = self.invalid.iter().position(|i| i.key == key).map(|i| self.invalid.swap_remove(i));
        if self.standing(&pod) != PodStanding::Ours {
            return EventReport::Nothing;
        }
        let invalid = InvalidPod { message: format!("invalid pod {key}: {error}"), key, pod };
        self.invalid.push(invalid.clone());
        match before {
            Some(before) if before.message == invalid.message => EventReport::Nothing,
            _ => EventReport::Invalid(invalid),
        }
    }

    /// A pending pod of one of our profiles: queued, unless it is being
    /// deleted or its binding is in flight.
    fn pending_pod_upserted(&mut self, pod: &Pod, info: Arc<PodInfo>) {
        let key = &info.key;
        if pod.metadata.deletion_timestamp.is_some() {
            // Being deleted: kube-scheduler skips such pods too.
            self.queue.remove(key);
            self.state.unnominate(key);
            return;
        }
        match self.state.placement_uid(key) {
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
            && self.state.nomination(key) != Some(node.as_str())
        {
            self.state.nominate(&info, node);
        }
        // A new gang member needs no held member released: its own pop
        // counts the quorum and takes the held members with it.
        self.queue.add_or_update(info);
    }

    /// A pod deleted, or finished. With `uid`, only the pod of that UID
    /// goes: a late deletion of an earlier pod of the same name (looked up
    /// while it was being recreated) must not remove its successor.
    pub(super) fn pod_deleted(&mut self, key: &PodKey, uid: Option<&str>, now: Duration) {
        if let Some(uid) = uid
            && self.known_uid(key).is_some_and(|known| known != uid)
        {
            return;
        }
        self.queue.remove(key);
        self.claim_waits.forget(key);
        self.invalid.retain(|i| &i.key != key);
        self.state.unnominate(key);
        self.placed_pod_gone(key, now);
    }

    /// A placed pod stops counting: the unschedulable pods its room (or
    /// its absence) may let in are retried.
    fn placed_pod_gone(&mut self, key: &PodKey, now: Duration) {
        let Some(gone) = self.state.pod_gone(key) else { return };
        let hint = AfterPodGone::new(&gone, &self.state);
        self.queue.cluster_changed_for(now, QueueEvent::ASSIGNED_POD_DELETE, |waiting, rejected_by| {
            hint.retry(waiting, rejected_by)
        });
        self.fill_room(&gone.node, true, now);
    }

    /// Offers the room on `node` to the unschedulable pods, as many as it
    /// holds (`SchedulingQueue::fill_room`); `reopen` when a pod just left
    /// it. A node the core does not know has no room.
    pub(super) fn fill_room(&mut self, node: &str, reopen: bool, now: Duration) {
        let mut room = Room::open(&self.state, node);
        if let Some(room) = room.as_mut() {
            self.queue.retried_for(node).for_each(|pod| room.hold(pod));
        }
        self.queue.fill_room(node, reopen, now, &mut room);
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

    /// A fresh list of every live pod, its contents applied just before.
    /// Every pod the core learnt of came through the same watch at an
    /// earlier resourceVersion, so one missing from the list was deleted
    /// (or finished) meanwhile: bound, queued, invalid or assumed, it goes.
    /// The binding of an assumed one then answers 404, or counts nothing.
    /// Returns the pods that went.
    fn reconcile_pods(&mut self, listed: &HashSet<PodKey>, now: Duration) -> Vec<PodKey> {
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
        gone.into_iter().collect()
    }
}

/// Whether `after` holds less of some resource than `before`.
fn shrinks(before: &wasmsched_runtime::Resources, after: &wasmsched_runtime::Resources) -> bool {
    let scalar =
        |r: &wasmsched_runtime::Resources, name: &str| r.scalar.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
    after.milli_cpu < before.milli_cpu
        || after.memory < before.memory
        || after.ephemeral_storage < before.ephemeral_storage
        || before.scalar.iter().any(|(name, v)| scalar(after, name) < *v)
}
