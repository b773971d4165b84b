//! Rooms: a pod leaving a node opens room there, offered to the
//! unschedulable pods it may let in, as many as it holds, in queue order;
//! once those were attempted, what is left goes to the next ones.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::time::Duration;

use super::{Location, QueueEvent, SchedulingQueue};
use crate::cluster::{PodInfo, PodKey};

/// Room a pod left on a node, and the pods retried for it.
#[derive(Debug, Default)]
pub(super) struct OpenRoom {
    /// Attempts begun when it opened: pods attempted later saw the room.
    pub(super) opened: u64,
    /// Retried for it and not attempted yet.
    pub(super) retried: HashSet<PodKey>,
}

/// A node's room, as `fill_room` offers it to waiting pods.
pub trait RoomOffer {
    /// Whether `pod` may fit in what is left now: `false` only where it
    /// surely does not. A cheap check, before the order is settled.
    fn may_fit(&self, pod: &PodInfo) -> bool;
    /// Offers what is left to `pod`.
    fn offer(&mut self, pod: &PodInfo) -> Offer;
}

/// What a room says of a pod offered to it (`fill_room`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// It may fit, and its share is now held for it: retry it.
    Taken,
    /// It does not fit there.
    Refused,
    /// Nothing more fits: offer no other pod.
    Full,
}

impl SchedulingQueue {
    /// Offers the room on `node` to the unschedulable pods attempted
    /// before it opened, in queue order (highest priority, then the
    /// longest waiting), and retries those `offer` takes until it answers
    /// `Full`. `reopen`: a pod just left the node, so the room opens anew
    /// and every unschedulable pod is offered it; otherwise the pods
    /// attempted since it opened saw it and are passed over.
    ///
    /// The pods left waiting are not forgotten: once the retried ones were
    /// all attempted (`settled_rooms`), the room, if anything is left of
    /// it, goes to the next.
    pub fn fill_room(&mut self, node: &str, reopen: bool, now: Duration, room: &mut impl RoomOffer) {
        let takes = self.takes;
        let open =
            self.rooms.entry(node.to_string()).or_insert_with(|| OpenRoom { opened: takes, ..OpenRoom::default() });
        if reopen {
            open.opened = takes;
        }
        let opened = open.opened;
        // Only the pods that may fit are put in order: a backlog is mostly
        // pods larger than the room, and sorting all of them at every
        // deletion cost more than the retries it saved.
        let mut offered: Vec<(Reverse<i32>, Duration, &PodKey)> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                matches!(e.location, Location::Unschedulable { .. }) && e.taken_at <= opened && room.may_fit(&e.info)
            })
            .map(|(k, e)| (Reverse(e.info.facts.priority), e.last_attempt, k))
            .collect();
        offered.sort_unstable();
        let mut taken = Vec::new();
        for (_, _, key) in offered {
            match room.offer(&self.entries[key].info) {
                Offer::Taken => taken.push(key.clone()),
                Offer::Refused => {}
                Offer::Full => break,
            }
        }
        for key in &taken {
            self.requeue(key, now, QueueEvent::ASSIGNED_POD_DELETE);
            if let Some(e) = self.entries.get_mut(key) {
                e.room = Some(node.to_string());
            }
        }
        let room = self.rooms.get_mut(node).expect("opened above");
        room.retried.extend(taken);
        if room.retried.is_empty() {
            self.rooms.remove(node);
        }
    }

    /// The pods retried for the room on `node` and not attempted yet:
    /// their shares of it are held.
    pub fn retried_for(&self, node: &str) -> impl Iterator<Item = &PodInfo> {
        self.rooms
            .get(node)
            .into_iter()
            .flat_map(|r| r.retried.iter())
            .filter_map(|k| Some(&*self.entries.get(k)?.info))
    }

    /// The rooms whose retried pods were all attempted since the last
    /// call: each is to be offered again (`fill_room`, not reopened).
    pub fn settled_rooms(&mut self) -> Vec<String> {
        let mut settled = std::mem::take(&mut self.settled);
        settled.retain(|node| self.rooms.get(node).is_some_and(|r| r.retried.is_empty()));
        settled
    }

    /// `key` no longer waits for the room it was retried for: attempted,
    /// gone or held back. The last one to go settles the room.
    pub(super) fn leave_room(&mut self, key: &PodKey) {
        let Some(node) = self.entries.get_mut(key).and_then(|e| e.room.take()) else { return };
        let Some(room) = self.rooms.get_mut(&node) else { return };
        room.retried.remove(key);
        if room.retried.is_empty() && !self.settled.contains(&node) {
            self.settled.push(node);
        }
    }
}
