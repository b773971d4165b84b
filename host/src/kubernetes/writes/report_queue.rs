//! The reports waiting for the reporter, folded per pod. The scheduling
//! loop may decide far faster than the API server takes writes: a backlog
//! of pods that do not fit is retried thousands of times a second, each
//! retry a report. A queue of every report grows for as long as that
//! lasts, and holds each pod's newest condition behind its stale ones.
//! Here a pod's newer plain report (unschedulable, nothing to carry out)
//! replaces the one still waiting, so what waits is bounded by the pods,
//! not by time; a report that carries something out (a preemption, a
//! nomination cleared, a claim deallocated, a failed binding) is never
//! dropped, and one that ends the pod (bound, gone) drops its plain
//! reports still waiting. A pod not yet told anything goes before pods
//! whose report is an update: when the writes fall behind, every pending
//! pod still says why it waits before any says it again.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::cluster::PodKey;
use crate::kubernetes::writes::report::Report;
use crate::scheduler::Nomination;

/// A report and how many reports of the same message it stands for
/// besides itself (a `FailedScheduling` series counts them).
#[derive(Debug)]
pub struct Waiting {
    pub report: Report,
    pub repeats: u32,
}

#[derive(Default)]
struct Pending {
    /// Reports about no pod (a canary stopped), in order.
    other: VecDeque<Report>,
    /// Each pod's waiting reports, in order.
    by_pod: HashMap<PodKey, VecDeque<Waiting>>,
    /// Pods with reports waiting that were never told anything, in the
    /// order they came.
    fresh: VecDeque<PodKey>,
    /// The other pods with reports waiting, in the order they are served:
    /// a pod served with more left goes to the back.
    order: VecDeque<PodKey>,
    /// Pods served a report, until one that ends them (bound, gone).
    told: HashSet<PodKey>,
    len: usize,
    closed: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    ready: Notify,
}

/// The scheduling loop's end: never blocks.
pub struct ReportSender {
    shared: Arc<Shared>,
}

/// The reporter's end.
pub struct ReportReceiver {
    shared: Arc<Shared>,
}

pub fn channel() -> (ReportSender, ReportReceiver) {
    let shared = Arc::new(Shared { pending: Mutex::new(Pending::default()), ready: Notify::new() });
    (ReportSender { shared: shared.clone() }, ReportReceiver { shared })
}

impl ReportSender {
    pub fn send(&self, report: Report) {
        lock(&self.shared).push(report);
        self.shared.ready.notify_one();
    }

    /// Reports waiting now (`wasmsched_pending_reports`).
    pub fn len(&self) -> usize {
        lock(&self.shared).len
    }
}

impl Drop for ReportSender {
    fn drop(&mut self) {
        lock(&self.shared).closed = true;
        self.shared.ready.notify_one();
    }
}

impl ReportReceiver {
    /// The next report; `None` once the sender is gone and nothing waits.
    pub async fn recv(&mut self) -> Option<Waiting> {
        loop {
            {
                let mut pending = lock(&self.shared);
                if let Some(next) = pending.pop() {
                    return Some(next);
                }
                if pending.closed {
                    return None;
                }
            }
            self.shared.ready.notified().await;
        }
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Pending> {
    shared.pending.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a report only says something (it may be replaced by a newer
/// one): an unschedulable attempt that changes no nomination and
/// deallocates no claim.
fn plain(report: &Report) -> bool {
    matches!(report, Report::Unschedulable { nomination: Nomination::Unchanged, deallocate: None, .. })
}

fn message(report: &Report) -> Option<&str> {
    match report {
        Report::Unschedulable { message, .. } => Some(message),
        _ => None,
    }
}

impl Pending {
    fn push(&mut self, report: Report) {
        let key = match &report {
            Report::Scheduled { pod, .. } | Report::Unschedulable { pod, .. } | Report::Failed { pod, .. } => {
                pod.key.clone()
            }
            Report::Forget(key) => key.clone(),
            Report::CanaryStopped(_) | Report::GroupDecided(_) | Report::Waiting { .. } => {
                self.other.push_back(report);
                self.len += 1;
                return;
            }
        };
        let queue = self.by_pod.entry(key.clone()).or_default();
        if queue.is_empty() {
            match self.told.contains(&key) {
                true => self.order.push_back(key),
                false => self.fresh.push_back(key),
            }
        }
        let before = queue.len();
        if matches!(report, Report::Scheduled { .. } | Report::Forget(_)) {
            // The pod is bound or gone: what it was told before is stale.
            queue.retain(|w| !plain(&w.report));
        }
        match queue.back_mut() {
            Some(last) if plain(&last.report) && plain(&report) => {
                let same = message(&last.report) == message(&report);
                *last = Waiting { repeats: if same { last.repeats + 1 } else { 0 }, report };
            }
            _ => queue.push_back(Waiting { report, repeats: 0 }),
        }
        self.len = self.len + queue.len() - before;
    }

    fn pop(&mut self) -> Option<Waiting> {
        if let Some(report) = self.other.pop_front() {
            self.len -= 1;
            return Some(Waiting { report, repeats: 0 });
        }
        let key = self.fresh.pop_front().or_else(|| self.order.pop_front())?;
        let queue = self.by_pod.get_mut(&key)?;
        let next = queue.pop_front()?;
        self.len -= 1;
        let more = !queue.is_empty();
        if !more {
            self.by_pod.remove(&key);
        }
        match next.report {
            Report::Scheduled { .. } | Report::Forget(_) => self.told.remove(&key),
            _ => self.told.insert(key.clone()),
        };
        if more {
            self.order.push_back(key);
        }
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::writes::report::PodRef;

    fn pod(name: &str) -> PodRef {
        PodRef {
            key: PodKey { namespace: "default".into(), name: name.into() },
            uid: format!("uid-{name}"),
            resource_version: String::new(),
            scheduler_name: "wasmsched".into(),
        }
    }

    fn unschedulable(name: &str, message: &str, nomination: Nomination) -> Report {
        let (pod, message) = (pod(name), message.to_string());
        Report::Unschedulable { pod, message, error: false, fallback: None, nomination, deallocate: None }
    }

    fn drain(rx: &mut ReportReceiver) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        while let Some(w) = lock(&rx.shared).pop() {
            let what = match &w.report {
                Report::Unschedulable { pod, message, nomination, .. } => {
                    format!(
                        "{} {message}{}",
                        pod.key.name,
                        if *nomination == Nomination::Cleared { " (cleared)" } else { "" }
                    )
                }
                Report::Scheduled { pod, node, .. } => format!("{} on {node}", pod.key.name),
                Report::Forget(key) => format!("{} gone", key.name),
                other => format!("{other:?}"),
            };
            out.push((what, w.repeats));
        }
        out
    }

    #[test]
    fn a_pods_newer_plain_report_replaces_the_waiting_one_and_counts_repeats() {
        let (tx, mut rx) = channel();
        for _ in 0..1000 {
            tx.send(unschedulable("a", "0/3 nodes are available: 3 Insufficient cpu.", Nomination::Unchanged));
        }
        tx.send(unschedulable("b", "0/3 nodes are available: 3 Insufficient memory.", Nomination::Unchanged));
        tx.send(unschedulable("a", "0/3 nodes are available: 2 Insufficient cpu.", Nomination::Unchanged));
        tx.send(unschedulable("a", "0/3 nodes are available: 2 Insufficient cpu.", Nomination::Unchanged));
        assert_eq!(tx.len(), 2, "one report a pod, however many attempts");
        assert_eq!(
            drain(&mut rx),
            [
                ("a 0/3 nodes are available: 2 Insufficient cpu.".to_string(), 1),
                ("b 0/3 nodes are available: 3 Insufficient memory.".to_string(), 0),
            ]
        );
        assert_eq!(tx.len(), 0);
    }

    #[test]
    fn reports_that_carry_something_out_are_never_dropped() {
        let (tx, mut rx) = channel();
        tx.send(unschedulable("a", "first", Nomination::Unchanged));
        tx.send(unschedulable("a", "cleared", Nomination::Cleared));
        tx.send(unschedulable("a", "later", Nomination::Unchanged));
        tx.send(unschedulable("a", "latest", Nomination::Unchanged));
        let got: Vec<String> = drain(&mut rx).into_iter().map(|(w, _)| w).collect();
        assert_eq!(got, ["a first", "a cleared (cleared)", "a latest"]);
    }

    #[test]
    fn a_bound_or_gone_pod_drops_what_it_was_still_to_be_told() {
        let (tx, mut rx) = channel();
        tx.send(unschedulable("a", "no room", Nomination::Unchanged));
        tx.send(unschedulable("b", "no room", Nomination::Unchanged));
        let scheduled = Report::Scheduled { pod: pod("a"), node: "n1".into(), fallback: None, canary: None };
        tx.send(scheduled);
        tx.send(Report::Forget(pod("b").key));
        let got: Vec<String> = drain(&mut rx).into_iter().map(|(w, _)| w).collect();
        assert_eq!(got, ["a on n1", "b gone"]);
    }

    #[test]
    fn a_pod_not_yet_told_goes_before_the_updates_of_pods_told_already() {
        let (tx, mut rx) = channel();
        tx.send(unschedulable("a", "first", Nomination::Unchanged));
        tx.send(unschedulable("b", "first", Nomination::Unchanged));
        assert_eq!(drain(&mut rx).len(), 2);
        tx.send(unschedulable("a", "second", Nomination::Unchanged));
        tx.send(unschedulable("b", "second", Nomination::Unchanged));
        tx.send(unschedulable("c", "first", Nomination::Unchanged));
        let got: Vec<String> = drain(&mut rx).into_iter().map(|(w, _)| w).collect();
        assert_eq!(got, ["c first", "a second", "b second"]);
        // Bound, then recreated under its name: told nothing yet.
        tx.send(Report::Scheduled { pod: pod("a"), node: "n1".into(), fallback: None, canary: None });
        assert_eq!(drain(&mut rx).len(), 1);
        tx.send(unschedulable("b", "third", Nomination::Unchanged));
        tx.send(unschedulable("a", "first", Nomination::Unchanged));
        let got: Vec<String> = drain(&mut rx).into_iter().map(|(w, _)| w).collect();
        assert_eq!(got, ["a first", "b third"]);
    }

    #[tokio::test]
    async fn the_receiver_ends_once_the_sender_is_gone_and_nothing_waits() {
        let (tx, mut rx) = channel();
        let waiter = tokio::spawn(async move {
            let mut seen = 0;
            while rx.recv().await.is_some() {
                seen += 1;
            }
            seen
        });
        tx.send(unschedulable("a", "no room", Nomination::Unchanged));
        tx.send(unschedulable("b", "no room", Nomination::Unchanged));
        drop(tx);
        assert_eq!(waiter.await.unwrap(), 2);
    }
}
