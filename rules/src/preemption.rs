//! DefaultPreemption's two choices, as kube-scheduler v1.36 makes them:
//! which pods of one node to evict for a preemptor (`select_victims`), and
//! which candidate node to preempt on (`pick_candidate`). Whether the
//! preemptor fits once some pods are gone is the caller's filters' answer,
//! asked through a callback, as kube runs its filter plugins.

use std::cmp::Ordering;

/// What preemption reads of a pod.
pub trait PreemptionPod {
    fn priority(&self) -> i32;
    /// `status.startTime` in seconds since the epoch; `None` for a pod that
    /// has not started, which kube takes as "now": later than any start.
    fn start_time(&self) -> Option<i64>;
}

fn start(pod: &impl PreemptionPod) -> i64 {
    pod.start_time().unwrap_or(i64::MAX)
}

/// kube's `MoreImportantPod` as an ordering: higher priority first, then
/// the earlier start.
pub fn importance(a: &impl PreemptionPod, b: &impl PreemptionPod) -> Ordering {
    b.priority().cmp(&a.priority()).then(start(a).cmp(&start(b)))
}

/// The pods to evict from one node, by index, most important first, and
/// how many of them break a PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victims {
    pub pods: Vec<usize>,
    pub budget_violations: usize,
}

/// The pods a preemptor of `priority` would evict from a node holding
/// `pods`, or `None` when preemption cannot help there (no pod of lower
/// priority, or the preemptor does not fit even without all of them).
///
/// - `fits(removed)`: whether the preemptor fits with the pods marked
///   `true` gone and the others in place.
/// - `budgets`: each PodDisruptionBudget's `disruptionsAllowed`;
///   `matches(pod, budget)` whether the budget covers the pod (same
///   namespace, a non-empty selector that selects it, the pod not already
///   in its `disruptedPods`).
///
/// All lower-priority pods are removed; then, most important first, each
/// is given back while the preemptor still fits: first the pods whose
/// eviction would break a budget, then the others.
pub fn select_victims<P: PreemptionPod>(
    priority: i32,
    pods: &[P],
    budgets: &[i32],
    matches: impl Fn(usize, usize) -> bool,
    mut fits: impl FnMut(&[bool]) -> bool,
) -> Option<Victims> {
    let mut potential: Vec<usize> = (0..pods.len()).filter(|&i| pods[i].priority() < priority).collect();
    if potential.is_empty() {
        return None;
    }
    let mut removed = vec![false; pods.len()];
    for &i in &potential {
        removed[i] = true;
    }
    if !fits(&removed) {
        return None;
    }
    potential.sort_by(|&a, &b| importance(&pods[a], &pods[b]));
    let violating = budget_violations(&potential, budgets, &matches);
    // (pod, whether its eviction breaks a budget), in importance order.
    type Evictions = Vec<(usize, bool)>;
    let (breaking, others): (Evictions, Evictions) = potential.iter().copied().zip(violating).partition(|(_, v)| *v);
    let mut victims = Victims { pods: Vec::new(), budget_violations: 0 };
    for &(i, breaks_budget) in breaking.iter().chain(&others) {
        removed[i] = false;
        if !fits(&removed) {
            removed[i] = true;
            victims.pods.push(i);
            victims.budget_violations += usize::from(breaks_budget);
        }
    }
    if !breaking.is_empty() && !others.is_empty() {
        victims.pods.sort_by(|&a, &b| importance(&pods[a], &pods[b]));
    }
    Some(victims)
}

/// kube's `filterPodsWithPDBViolation`: for the pods in the order given,
/// whether evicting each (after the ones before it) takes a budget that
/// covers it below zero.
fn budget_violations(pods: &[usize], budgets: &[i32], matches: &impl Fn(usize, usize) -> bool) -> Vec<bool> {
    let mut allowed = budgets.to_vec();
    pods.iter()
        .map(|&pod| {
            let mut violated = false;
            for (budget, left) in allowed.iter_mut().enumerate() {
                if matches(pod, budget) {
                    *left -= 1;
                    violated |= *left < 0;
                }
            }
            violated
        })
        .collect()
}

/// The node kube preempts on, by index into `candidates` (each: its
/// victims, most important first, and their budget violations). A node
/// with no victim wins at once; otherwise, in turn, until one node is
/// left: the fewest budget violations, the lowest highest victim priority,
/// the smallest sum of priorities, the fewest victims, the latest start of
/// the highest-priority victims. Still tied: the first.
pub fn pick_candidate<P: PreemptionPod>(candidates: &[(&[P], usize)]) -> Option<usize> {
    if let Some(free) = candidates.iter().position(|(victims, _)| victims.is_empty()) {
        return Some(free);
    }
    // Each criterion as a score, higher better: a node's victims and their
    // budget violations to a number.
    type Score<'a, P> = &'a dyn Fn(&[P], usize) -> i64;
    let scores: [Score<P>; 5] = [
        &|_, violations| -(violations as i64),
        &|victims, _| -i64::from(victims[0].priority()),
        // Offset so that every term is non-negative, as kube sums them.
        &|victims, _| -victims.iter().map(|p| i64::from(p.priority()) + i64::from(i32::MAX) + 1).sum::<i64>(),
        &|victims, _| -(victims.len() as i64),
        &|victims, _| earliest_start_of_highest(victims),
    ];
    let mut left: Vec<usize> = (0..candidates.len()).collect();
    for score in scores {
        let best = left.iter().map(|&i| score(candidates[i].0, candidates[i].1)).max()?;
        left.retain(|&i| score(candidates[i].0, candidates[i].1) == best);
        if left.len() == 1 {
            break;
        }
    }
    left.first().copied()
}

/// kube's `GetEarliestPodStartTime`: the earliest start among the victims
/// of the highest priority.
fn earliest_start_of_highest(victims: &[impl PreemptionPod]) -> i64 {
    let highest = victims.iter().map(|p| p.priority()).max().unwrap_or(i32::MIN);
    victims.iter().filter(|p| p.priority() == highest).map(start).min().unwrap_or(i64::MIN)
}
