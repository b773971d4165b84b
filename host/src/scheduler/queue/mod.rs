//! The scheduling queue with kube-scheduler's semantics:
//! - active: highest `spec.priority` first, then the earliest enqueued;
//! - backoff: after a failed attempt, 1 s doubling per attempt up to 10 s;
//!   entries move to active when their backoff expires. As kube-scheduler's
//!   `SchedulerPopFromBackoffQ` (on by default since v1.33) has it, when
//!   nothing is active the pod a cluster event moved back goes at once,
//!   earliest backoff first; a pod backing off after an error (a failed
//!   binding) waits its backoff out;
//! - unschedulable: pods no node could take wait here until a cluster change
//!   that may help (see [`SchedulingQueue::cluster_changed`]; for pods with
//!   constraints on other pods, also a pod placed: [`SchedulingQueue::pod_placed`])
//!   or at most five minutes;
//! - gated: pods with `schedulingGates` wait until the gates are removed,
//!   and pods whose ResourceClaims cannot be used yet (kube's PreEnqueue)
//!   until a claim changes.
//!
//! A pod leaving a node opens a room there: of the unschedulable pods it
//! may let in, only as many as it holds are retried, in queue order
//! ([`SchedulingQueue::fill_room`]); once those were attempted, a room
//! still free is offered to the next ones.
//!
//! Time is passed in (`now` since an arbitrary origin) so the simulator can
//! run on virtual time and tests need no sleeps.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{PodInfo, PodKey};

mod incoming;
mod members;
mod order;
mod rooms;
mod sizes;

pub use incoming::{Incoming, QueueEvent};
use order::{ActiveKey, MovedKey};
use rooms::OpenRoom;
pub use rooms::{Offer, RoomOffer};
pub use sizes::QueueSizes;

pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
pub const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Active,
    Backoff {
        until: Duration,
    },
    Unschedulable {
        since: Duration,
    },
    Gated,
    /// Popped and being scheduled or bound; not in any queue.
    InFlight,
    /// Ready, but its tenant has as many policy jobs in flight as allowed:
    /// waits for one of them to answer (`unpark`).
    Parked,
}

#[derive(Debug)]
struct Entry {
    info: Arc<PodInfo>,
    attempts: u32,
    location: Location,
    /// Matches the live heap entry; older heap entries are stale.
    seq: u64,
    last_attempt: Duration,
    /// In backoff because an attempt failed with an error, not because a
    /// cluster event moved it back: kube's error backoff queue, which is
    /// never popped early.
    error_backoff: bool,
    /// When its last attempt began, in attempts begun by the queue.
    taken_at: u64,
    /// The node whose room it was retried for, until it is attempted.
    room: Option<String>,
    /// When its first attempt began (kube's `InitialAttemptTimestamp`).
    first_attempt: Option<Duration>,
    /// The plugins (and policies) that rejected it, while unschedulable.
    rejected_by: Vec<String>,
}

#[derive(Debug, Default)]
pub struct SchedulingQueue {
    entries: HashMap<PodKey, Entry>,
    active: BinaryHeap<ActiveKey>,
    next_seq: u64,
    /// No backoff or unschedulable entry is due before this, so `pop` skips
    /// the scan until then (without it every pop walks every queued pod).
    /// May be early after removals: that only costs one extra scan.
    earliest_due: Option<Duration>,
    /// Unschedulable pods with topology spread or inter-pod affinity
    /// constraints; may hold keys that have moved on since.
    waiting_on_pods: HashSet<PodKey>,
    /// Pods a cluster event moved to backoff, which `pop` may take early;
    /// entries whose pod has moved on since are stale (checked by `seq`,
    /// as in `active`).
    moved_to_backoff: BinaryHeap<MovedKey>,
    /// Attempts begun (`taken_at`).
    takes: u64,
    /// Rooms with pods retried for them, or waiting to be offered again.
    rooms: HashMap<String, OpenRoom>,
    /// Rooms whose retried pods were all attempted: offered again by
    /// `fill_room` (`settled_rooms`).
    settled: Vec<String>,
    /// Pods moved into each part, by what moved them.
    incoming: Incoming,
}

/// Backoff after `attempts` failed attempts: 1 s, 2 s, 4 s, 8 s, 10 s, …
pub fn backoff_for(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(8);
    (INITIAL_BACKOFF * (1u32 << exp)).min(MAX_BACKOFF)
}

impl SchedulingQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Into active; counted as incoming when `event` moved it (a parked
    /// pod's turn is no move: it never left active).
    fn push_active(&mut self, key: &PodKey, event: Option<QueueEvent>) {
        if let Some(event) = event {
            self.incoming.add(event, "active");
        }
        self.next_seq += 1;
        let seq = self.next_seq;
        if let Some(e) = self.entries.get_mut(key) {
            e.location = Location::Active;
            e.seq = seq;
            self.active.push(ActiveKey { priority: e.info.facts.priority, seq: Reverse(seq), key: key.clone() });
        }
    }

    /// A new pending pod, or a newer version of one already queued.
    pub fn add_or_update(&mut self, info: Arc<PodInfo>) {
        let key = info.key.clone();
        let gated = info.gated;
        match self.entries.get_mut(&key) {
            Some(e) => {
                let was_gated = e.location == Location::Gated;
                let priority_changed = e.info.facts.priority != info.facts.priority;
                e.info = info;
                match (was_gated, gated) {
                    (true, false) => self.push_active(&key, Some(QueueEvent::POD_UPDATE)),
                    (false, true) if e.location != Location::InFlight => {
                        e.location = Location::Gated;
                        self.leave_room(&key);
                    }
                    _ if priority_changed && e.location == Location::Active => self.push_active(&key, None),
                    _ => {}
                }
            }
            None => {
                self.entries.insert(
                    key.clone(),
                    Entry {
                        info,
                        attempts: 0,
                        location: Location::Gated,
                        seq: 0,
                        last_attempt: Duration::ZERO,
                        error_backoff: false,
                        taken_at: 0,
                        room: None,
                        first_attempt: None,
                        rejected_by: Vec::new(),
                    },
                );
                if gated {
                    self.incoming.add(QueueEvent::POD_ADD, "gated");
                } else {
                    self.push_active(&key, Some(QueueEvent::POD_ADD));
                }
            }
        }
    }

    pub fn remove(&mut self, key: &PodKey) -> bool {
        self.leave_room(key);
        self.entries.remove(key).is_some()
    }

    /// Every queued pod, wherever it waits.
    pub fn keys(&self) -> impl Iterator<Item = &PodKey> {
        self.entries.keys()
    }

    pub fn contains(&self, key: &PodKey) -> bool {
        self.entries.contains_key(key)
    }

    /// The queued version of a pod.
    pub fn get(&self, key: &PodKey) -> Option<&Arc<PodInfo>> {
        self.entries.get(key).map(|e| &e.info)
    }

    /// An in-flight pod that must wait for its turn (see `Location::Parked`).
    pub fn park(&mut self, key: &PodKey) {
        if let Some(e) = self.entries.get_mut(key)
            && e.location == Location::InFlight
        {
            e.location = Location::Parked;
        }
    }

    /// A parked pod's turn: back to active. False if it is not parked any
    /// more (deleted, or bound by someone else).
    pub fn unpark(&mut self, key: &PodKey) -> bool {
        if self.entries.get(key).is_some_and(|e| e.location == Location::Parked) {
            self.push_active(key, None);
            return true;
        }
        false
    }

    /// An in-flight attempt that must be made again without penalty (its
    /// answer arrived too late to use): straight back to active.
    pub fn retry_now(&mut self, key: &PodKey) {
        if self.entries.get(key).is_some_and(|e| e.location == Location::InFlight) {
            self.push_active(key, Some(QueueEvent::FORCE_ACTIVATE));
        }
    }

    /// For a pod being bound: its attempts, this one included, and when
    /// the first began (kube's SLI counts from there).
    pub fn attempts_of(&self, key: &PodKey) -> Option<(u32, Duration)> {
        let e = self.entries.get(key)?;
        Some((e.attempts + 1, e.first_attempt?))
    }

    /// Pods moved into each part, by what moved them.
    pub fn incoming(&self) -> &Incoming {
        &self.incoming
    }

    pub fn location(&self, key: &PodKey) -> Option<Location> {
        self.entries.get(key).map(|e| e.location)
    }

    fn due_at(location: Location) -> Option<Duration> {
        match location {
            Location::Backoff { until } => Some(until),
            Location::Unschedulable { since } => Some(since + UNSCHEDULABLE_FLUSH),
            _ => None,
        }
    }

    fn note_due(&mut self, location: Location) {
        if let Some(due) = Self::due_at(location) {
            self.earliest_due = Some(self.earliest_due.map_or(due, |e| e.min(due)));
        }
    }

    fn flush(&mut self, now: Duration) {
        if self.earliest_due.is_none_or(|due| due > now) {
            return;
        }
        let mut due: Vec<(Duration, PodKey, QueueEvent)> = self
            .entries
            .iter()
            .filter_map(|(k, e)| {
                let event = match e.location {
                    Location::Backoff { .. } => QueueEvent::BACKOFF_COMPLETE,
                    _ => QueueEvent::UNSCHEDULABLE_TIMEOUT,
                };
                Self::due_at(e.location).filter(|d| *d <= now).map(|d| (d, k.clone(), event))
            })
            .collect();
        // The first due first, then by name: the same on every run.
        due.sort();
        for (_, key, event) in due {
            self.push_active(&key, Some(event));
        }
        self.earliest_due = self.scan_due();
    }

    /// The next pod to schedule and how many attempts it had; it stays
    /// tracked (in flight) until `done`, `backoff` or `unschedulable`.
    pub fn pop(&mut self, now: Duration) -> Option<(Arc<PodInfo>, u32)> {
        self.flush(now);
        while let Some(top) = self.active.pop() {
            if self.entries.get(&top.key).is_some_and(|e| e.location == Location::Active && e.seq == top.seq.0) {
                return self.take(&top.key, now);
            }
        }
        let key = self.first_moved_to_backoff()?;
        self.take(&key, now)
    }

    /// An attempt of `key` begins: it is in flight. A room it was
    /// retried for stays held for it until the attempt concludes
    /// (`attempted`): a tenant pod's attempt is decided on another thread,
    /// or waits parked for its turn, and a room let go at the pop would
    /// look free to the next pods, each of which would be retried for it.
    fn take(&mut self, key: &PodKey, now: Duration) -> Option<(Arc<PodInfo>, u32)> {
        self.takes += 1;
        let e = self.entries.get_mut(key)?;
        e.location = Location::InFlight;
        e.last_attempt = now;
        e.first_attempt.get_or_insert(now);
        e.taken_at = self.takes;
        Some((e.info.clone(), e.attempts))
    }

    /// An attempt of `key` concluded (a node chosen, or none): it no
    /// longer waits for the room it was retried for.
    pub fn attempted(&mut self, key: &PodKey) {
        self.leave_room(key);
    }

    /// The pod moved to backoff by a cluster event that is next out of it,
    /// in kube's backoff order (`MovedKey`).
    fn first_moved_to_backoff(&mut self) -> Option<PodKey> {
        while let Some(top) = self.moved_to_backoff.pop() {
            let live = self.entries.get(&top.key).is_some_and(|e| {
                matches!(e.location, Location::Backoff { .. }) && !e.error_backoff && e.seq == top.seq
            });
            if live {
                return Some(top.key);
            }
        }
        None
    }

    /// The pod was placed and bound: it leaves the queue.
    /// A popped pod that may not be attempted yet (kube's PreEnqueue):
    /// it waits, without an attempt, until `release`d or updated.
    pub fn hold(&mut self, key: &PodKey) {
        if let Some(e) = self.entries.get_mut(key) {
            e.location = Location::Gated;
            self.leave_room(key);
        }
    }

    /// A held pod may be attempted again (`event` let it); one gated by
    /// its own `schedulingGates` stays.
    pub fn release(&mut self, key: &PodKey, event: QueueEvent) {
        if self.entries.get(key).is_some_and(|e| e.location == Location::Gated && !e.info.gated) {
            self.push_active(key, Some(event));
        }
    }

    pub fn done(&mut self, key: &PodKey) {
        self.remove(key);
    }

    /// A retriable failure (binding error): back off, then try again.
    pub fn backoff(&mut self, key: &PodKey, now: Duration) {
        self.leave_room(key);
        if let Some(e) = self.entries.get_mut(key) {
            e.attempts += 1;
            e.location = Location::Backoff { until: now + backoff_for(e.attempts) };
            e.error_backoff = true;
            let location = e.location;
            self.incoming.add(QueueEvent::ATTEMPT_FAILURE, "backoff");
            self.note_due(location);
        }
    }

    /// No node could take the pod: wait for a cluster change.
    /// `rejected_by`: the plugins and policies that turned nodes down.
    pub fn unschedulable(&mut self, key: &PodKey, now: Duration, rejected_by: Vec<String>) {
        self.leave_room(key);
        if let Some(e) = self.entries.get_mut(key) {
            e.attempts += 1;
            e.location = Location::Unschedulable { since: now };
            e.rejected_by = rejected_by;
            self.incoming.add(QueueEvent::ATTEMPT_FAILURE, "unschedulable");
            if filters_on_pods(&e.info, &e.rejected_by) {
                self.waiting_on_pods.insert(key.clone());
            }
            self.note_due(Location::Unschedulable { since: now });
        }
    }

    /// A change that may make unschedulable pods fit (a node added or
    /// updated, a pod deleted): they go back to active, or to backoff if
    /// their backoff has not expired yet, as kube moves them.
    pub fn cluster_changed(&mut self, now: Duration, event: QueueEvent) {
        self.cluster_changed_for(now, event, |_, _| true);
        self.waiting_on_pods.clear();
    }

    /// As `cluster_changed`, for the unschedulable pods that `may_fit`
    /// says the change may let in (`queueing_hints.rs`).
    /// `may_fit` reads the pod and the plugins that rejected it.
    pub fn cluster_changed_for(
        &mut self,
        now: Duration,
        event: QueueEvent,
        may_fit: impl Fn(&PodInfo, &[String]) -> bool,
    ) {
        let waiting: Vec<(Duration, PodKey)> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.location, Location::Unschedulable { .. }) && may_fit(&e.info, &e.rejected_by))
            .map(|(k, e)| (e.last_attempt, k.clone()))
            .collect();
        self.requeue_in_order(waiting, now, event);
    }

    /// Requeues `waiting` (each with its last attempt) in a fixed order,
    /// the longest waiting first, then by name, so that the same inputs
    /// always give the same queue: a replay depends on it, and a hash
    /// map's order differs by process.
    fn requeue_in_order(&mut self, mut waiting: Vec<(Duration, PodKey)>, now: Duration, event: QueueEvent) {
        waiting.sort_unstable();
        for (_, key) in waiting {
            self.requeue(&key, now, event);
        }
    }

    /// A pod was placed somewhere (assumed or bound): unschedulable pods
    /// with constraints on other pods may fit now (an affinity satisfied, a
    /// spread minimum raised), as kube-scheduler moves them on an assigned
    /// pod's arrival. Other unschedulable pods stay: a placement only
    /// takes room.
    pub fn pod_placed(&mut self, now: Duration) {
        let waiting = std::mem::take(&mut self.waiting_on_pods)
            .into_iter()
            .filter_map(|k| Some((self.entries.get(&k)?.last_attempt, k)))
            .collect();
        self.requeue_in_order(waiting, now, QueueEvent::ASSIGNED_POD_ADD);
    }

    /// An unschedulable pod back to active, or to backoff if its backoff
    /// has not expired yet; a pod elsewhere stays where it is.
    pub fn requeue(&mut self, key: &PodKey, now: Duration, event: QueueEvent) {
        let Some(e) = self.entries.get_mut(key) else { return };
        if !matches!(e.location, Location::Unschedulable { .. }) {
            return;
        }
        e.rejected_by.clear();
        let until = e.last_attempt + backoff_for(e.attempts);
        if until <= now {
            self.push_active(key, Some(event));
        } else {
            self.incoming.add(event, "backoff");
            let Some(e) = self.entries.get_mut(key) else { return };
            e.location = Location::Backoff { until };
            e.error_backoff = false;
            self.next_seq += 1;
            e.seq = self.next_seq;
            self.moved_to_backoff.push(MovedKey {
                until_secs: until.as_secs(),
                priority: e.info.facts.priority,
                seq: e.seq,
                key: key.clone(),
            });
            self.note_due(Location::Backoff { until });
        }
    }

    /// When something next becomes due without any cluster change: at
    /// the latest then, perhaps earlier (after a removal). Waking early
    /// costs the one scan `pop` makes; scanning here instead would walk
    /// every queued pod, in-flight ones included, at every wake of the
    /// scheduling loop.
    pub fn next_due(&self) -> Option<Duration> {
        self.earliest_due
    }

    /// The exact time something next becomes due (a scan).
    fn scan_due(&self) -> Option<Duration> {
        self.entries.values().filter_map(|e| Self::due_at(e.location)).min()
    }

    /// Whether any pod is active or backing off (not just waiting for a
    /// cluster change or a gate).
    pub fn has_work(&self) -> bool {
        self.entries.values().any(|e| matches!(e.location, Location::Active | Location::Backoff { .. }))
    }

    /// Whether any pod is active, or backing off after anything but an
    /// error (`backoff`).
    pub fn has_work_besides_errors(&self) -> bool {
        self.entries.values().any(|e| match e.location {
            Location::Active => true,
            Location::Backoff { .. } => !e.error_backoff,
            _ => false,
        })
    }
}

/// Whether another pod's change may let `pod` in through its filters on
/// pods: it has required terms or `DoNotSchedule` constraints of its own,
/// or PodTopologySpread rejected it (its profile's default constraints).
pub fn filters_on_pods(pod: &PodInfo, rejected_by: &[String]) -> bool {
    pod.constraints.as_deref().is_some_and(|c| c.filters_on_pods())
        || rejected_by.iter().any(|p| p == "PodTopologySpread")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, priority: i32, gated: bool) -> Arc<PodInfo> {
        let gates = if gated { "\n  schedulingGates: [{name: example.com/wait}]" } else { "" };
        let p: k8s_openapi::api::core::v1::Pod = serde_yaml::from_str(&format!(
            "metadata: {{name: {name}, namespace: ns}}\nspec:\n  priority: {priority}\n  containers: [{{name: c}}]{gates}\n"
        ))
        .unwrap();
        Arc::new(PodInfo::new(&p).unwrap())
    }

    fn key(name: &str) -> PodKey {
        PodKey { namespace: "ns".into(), name: name.into() }
    }

    const T0: Duration = Duration::ZERO;

    #[test]
    fn priority_then_age() {
        let mut q = SchedulingQueue::new();
        q.add_or_update(pod("low-old", 0, false));
        q.add_or_update(pod("high", 100, false));
        q.add_or_update(pod("low-new", 0, false));
        let order: Vec<String> = std::iter::from_fn(|| q.pop(T0).map(|(p, _)| p.key.name.clone())).collect();
        assert_eq!(order, ["high", "low-old", "low-new"]);
    }

    /// A pod that PodTopologySpread rejected (by its profile's default
    /// constraints: it has none of its own) waits on other pods, and an
    /// assigned pod's arrival retries it; one rejected for room does not.
    #[test]
    fn a_pod_rejected_by_spread_is_retried_when_a_pod_is_placed() {
        let mut q = SchedulingQueue::new();
        q.add_or_update(pod("spread", 0, false));
        q.add_or_update(pod("full", 0, false));
        q.pop(T0).unwrap();
        q.pop(T0).unwrap();
        q.unschedulable(&key("spread"), T0, vec!["PodTopologySpread".into()]);
        q.unschedulable(&key("full"), T0, vec!["NodeResourcesFit".into()]);
        q.pod_placed(Duration::from_secs(60));
        let popped: Vec<String> =
            std::iter::from_fn(|| q.pop(Duration::from_secs(60)).map(|(p, _)| p.key.name.clone())).collect();
        assert_eq!(popped, ["spread"]);
    }

    /// What the metrics read: pods moved in by event and part, the
    /// unschedulable ones by the plugins that turned them down, a pod's
    /// attempts and when the first began.
    #[test]
    fn moves_are_counted_by_event_and_rejections_by_plugin() {
        let mut q = SchedulingQueue::new();
        q.add_or_update(pod("p", 0, false));
        q.add_or_update(pod("g", 0, true));
        q.pop(Duration::from_secs(2)).unwrap();
        q.unschedulable(&key("p"), Duration::from_secs(3), vec!["NodeResourcesFit".into(), "spot-only".into()]);
        let by_plugin = q.unschedulable_by_plugin();
        assert_eq!(by_plugin.get(&("default-scheduler".into(), "NodeResourcesFit".into())), Some(&1));
        assert_eq!(by_plugin.len(), 2);
        q.cluster_changed(Duration::from_secs(10), QueueEvent::NODE_CHANGE);
        assert!(q.unschedulable_by_plugin().is_empty());
        q.pop(Duration::from_secs(11)).unwrap();
        assert_eq!(q.attempts_of(&key("p")), Some((2, Duration::from_secs(2))), "from the first attempt");
        let totals: Vec<_> = q.incoming().totals().collect();
        assert_eq!(
            totals,
            [
                ("UnschedulablePodAdd", "active", 1),
                ("UnschedulablePodAdd", "gated", 1),
                ("ScheduleAttemptFailure", "unschedulable", 1),
                ("NodeChange", "active", 1),
            ]
        );
    }

    #[test]
    fn backoff_doubles_to_ten_seconds() {
        assert_eq!(
            (1..=6).map(backoff_for).collect::<Vec<_>>(),
            [1, 2, 4, 8, 10, 10].map(Duration::from_secs).to_vec()
        );
        let mut q = SchedulingQueue::new();
        q.add_or_update(pod("p", 0, false));
        q.pop(T0).unwrap();
        q.backoff(&key("p"), T0);
        assert!(q.pop(Duration::from_millis(999)).is_none());
        let (_, attempts) = q.pop(Duration::from_secs(1)).unwrap();
        assert_eq!(attempts, 1);
        q.backoff(&key("p"), Duration::from_secs(1));
        assert_eq!(q.next_due(), Some(Duration::from_secs(3)));
    }

    #[test]
    fn next_due_may_be_early_but_never_late() {
        let mut q = SchedulingQueue::new();
        for name in ["a", "b"] {
            q.add_or_update(pod(name, 0, false));
            q.pop(T0).unwrap();
        }
        q.backoff(&key("a"), T0);
        q.backoff(&key("b"), Duration::from_secs(1));
        assert_eq!(q.next_due(), Some(Duration::from_secs(1)));
        // Gone before it was due: the loop may wake for nothing once, and
        // the pop at that time finds when the next pod really is due.
        q.remove(&key("a"));
        assert_eq!(q.next_due(), Some(Duration::from_secs(1)));
        assert!(q.pop(Duration::from_secs(1)).is_none());
        assert_eq!(q.next_due(), Some(Duration::from_secs(2)));
        assert!(q.pop(Duration::from_secs(2)).is_some());
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn unschedulable_pods_wait_for_a_change_or_five_minutes() {
        let mut q = SchedulingQueue::new();
        q.add_or_update(pod("p", 0, false));
        q.pop(T0).unwrap();
        q.unschedulable(&key("p"), T0, Vec::new());
        assert!(!q.has_work());
        assert!(q.pop(Duration::from_secs(299)).is_none());
        assert!(q.pop(Duration::from_secs(300)).is_some(), "flushed after five minutes");
        q.unschedulable(&key("p"), Duration::from_secs(300), Vec::new());
        // A node appears 5 s later: attempt 2 backs off 2 s, already over.
        q.cluster_changed(Duration::from_secs(305), QueueEvent::NODE_CHANGE);
        assert!(q.pop(Duration::from_secs(305)).is_some());
        // A change right after an attempt: back off first.
        q.unschedulable(&key("p"), Duration::from_secs(305), Vec::new());
        q.cluster_changed(Duration::from_secs(305), QueueEvent::NODE_CHANGE);
        assert_eq!(q.location(&key("p")), Some(Location::Backoff { until: Duration::from_secs(309) }));
    }

    #[test]
    fn with_nothing_active_a_pod_moved_to_backoff_goes_at_once() {
        let mut q = SchedulingQueue::new();
        for name in ["low", "high", "erred"] {
            q.add_or_update(pod(name, if name == "high" { 10 } else { 0 }, false));
        }
        for _ in 0..3 {
            q.pop(T0).unwrap();
        }
        q.unschedulable(&key("low"), T0, Vec::new());
        q.unschedulable(&key("high"), T0, Vec::new());
        q.backoff(&key("erred"), T0);
        // A change right after the attempts: both back off until 1 s...
        q.cluster_changed(Duration::from_millis(100), QueueEvent::NODE_CHANGE);
        // ...but nothing is active, so they go now, the higher priority
        // first; the pod whose binding failed waits its backoff out.
        let popped = |q: &mut SchedulingQueue, at| q.pop(at).map(|(p, _)| p.key.name.clone());
        assert_eq!(popped(&mut q, Duration::from_millis(100)).as_deref(), Some("high"));
        assert_eq!(popped(&mut q, Duration::from_millis(100)).as_deref(), Some("low"));
        assert_eq!(popped(&mut q, Duration::from_millis(100)), None);
        assert_eq!(popped(&mut q, Duration::from_secs(1)).as_deref(), Some("erred"));
        // An active pod still goes before any in backoff.
        q.unschedulable(&key("low"), Duration::from_secs(1), Vec::new());
        q.cluster_changed(Duration::from_secs(1), QueueEvent::NODE_CHANGE);
        q.add_or_update(pod("new", 0, false));
        assert_eq!(popped(&mut q, Duration::from_secs(1)).as_deref(), Some("new"));
        assert_eq!(popped(&mut q, Duration::from_secs(1)).as_deref(), Some("low"));
    }

    #[test]
    fn gated_pods_wait_until_their_gates_are_removed() {
        let mut q = SchedulingQueue::new();
        q.add_or_update(pod("g", 0, true));
        assert!(q.pop(T0).is_none());
        assert_eq!(q.sizes().gated, 1);
        q.add_or_update(pod("g", 0, false));
        assert_eq!(q.pop(T0).unwrap().0.key.name, "g");
    }

    /// Pods `names` (priority from the name's `hiN`), each attempted once
    /// at 1 s apart in that order and found unschedulable.
    fn waiting(names: &[&str]) -> SchedulingQueue {
        let mut q = SchedulingQueue::new();
        for (i, name) in names.iter().enumerate() {
            let priority = if name.starts_with("hi") { 10 } else { 0 };
            q.add_or_update(pod(name, priority, false));
            let at = Duration::from_secs(i as u64);
            q.pop(at).unwrap();
            q.unschedulable(&key(name), at, Vec::new());
        }
        q
    }

    /// A room that takes `holds` pods, then is full; it may fit pods
    /// whose name is not `big`.
    struct Takes(usize);

    impl RoomOffer for Takes {
        fn may_fit(&self, pod: &PodInfo) -> bool {
            pod.key.name != "big"
        }

        fn offer(&mut self, _: &PodInfo) -> Offer {
            if self.0 == 0 {
                return Offer::Full;
            }
            self.0 -= 1;
            Offer::Taken
        }
    }

    /// A room that records what it was offered, and refuses all.
    struct Refuses(Vec<String>);

    impl RoomOffer for Refuses {
        fn may_fit(&self, _: &PodInfo) -> bool {
            true
        }

        fn offer(&mut self, pod: &PodInfo) -> Offer {
            self.0.push(pod.key.name.clone());
            Offer::Refused
        }
    }

    fn retried(q: &SchedulingQueue) -> Vec<String> {
        let mut names: Vec<String> = q
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.location, Location::Active | Location::Backoff { .. }))
            .map(|(k, _)| k.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_room_retries_as_many_pods_as_it_holds_the_first_in_queue_order() {
        let mut q = waiting(&["a", "big", "b", "hi", "c"]);
        let now = Duration::from_secs(60);
        q.fill_room("n1", true, now, &mut Takes(2));
        assert_eq!(retried(&q), ["a", "hi"], "the higher priority, then the longest waiting that may fit");
        assert_eq!(q.retried_for("n1").count(), 2);
        assert!(q.settled_rooms().is_empty());
    }

    #[test]
    fn a_room_left_free_goes_to_the_next_pods() {
        let mut q = waiting(&["a", "b", "c", "d"]);
        let now = Duration::from_secs(60);
        q.fill_room("n1", true, now, &mut Takes(2));
        // Both are attempted and go elsewhere or nowhere: the room is
        // settled, and offered again to those that did not see it.
        let (first, _) = q.pop(now).unwrap();
        q.unschedulable(&first.key, now, Vec::new());
        assert!(q.settled_rooms().is_empty(), "one retried pod still holds its share");
        let (second, _) = q.pop(now).unwrap();
        q.unschedulable(&second.key, now, Vec::new());
        assert_eq!(q.settled_rooms(), ["n1"]);
        assert!(q.settled_rooms().is_empty(), "said once");
        let mut offered = Refuses(Vec::new());
        q.fill_room("n1", false, now, &mut offered);
        assert_eq!(offered.0, ["c", "d"], "a and b saw the room in their attempts");
        assert!(q.rooms.is_empty(), "nothing taken: the room closes");
        // A pod leaving the node again reopens it to all.
        let mut offered = Refuses(Vec::new());
        q.fill_room("n1", true, now, &mut offered);
        assert_eq!(offered.0.len(), 4);
    }

    #[test]
    fn a_retried_pod_holds_its_share_until_its_attempt_concludes() {
        let mut q = waiting(&["a", "b"]);
        let now = Duration::from_secs(60);
        q.fill_room("n1", true, now, &mut Takes(1));
        // Taken, then parked for its tenant's turn, then taken again: not
        // attempted yet, so the room is not offered to b.
        let (first, _) = q.pop(now).unwrap();
        q.park(&first.key);
        assert!(q.settled_rooms().is_empty(), "parked, not attempted");
        assert!(q.unpark(&first.key));
        let (again, _) = q.pop(now).unwrap();
        assert_eq!(again.key, first.key);
        assert!(q.settled_rooms().is_empty(), "in flight, not attempted");
        assert_eq!(q.retried_for("n1").count(), 1, "its share is held");
        q.attempted(&again.key);
        assert_eq!(q.settled_rooms(), ["n1"]);
    }

    #[test]
    fn a_retried_pod_deleted_or_gated_settles_its_room() {
        let mut q = waiting(&["a", "b"]);
        q.fill_room("n1", true, Duration::from_secs(60), &mut Takes(2));
        q.remove(&key("a"));
        assert!(q.settled_rooms().is_empty(), "b still holds its share");
        q.add_or_update(pod("b", 0, true));
        assert_eq!(q.settled_rooms(), ["n1"]);
    }
}
