//! Where a round left each pod, and what changed since the last good
//! round: the lines `wasmsched dev` prints after each build.

use std::collections::BTreeMap;
use std::fmt::Write;

use wasmsched::sim::SimReport;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Node(String),
    Pending(String),
}

/// Each pending pod of the cluster, and where the round left it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub pods: BTreeMap<String, Place>,
}

impl Outcome {
    pub fn of(report: &SimReport) -> Outcome {
        let placed = report.placements.iter().map(|p| (p.pod.clone(), Place::Node(p.node.clone())));
        let pending = report.unschedulable.iter().map(|u| (u.pod.clone(), Place::Pending(u.message.clone())));
        Outcome { pods: placed.chain(pending).collect() }
    }

    /// Every pod's place, for the first round.
    pub fn listing(&self) -> String {
        let width = self.pods.keys().map(String::len).max().unwrap_or(3).max(3);
        let mut out = String::new();
        for (pod, place) in &self.pods {
            let _ = match place {
                Place::Node(node) => writeln!(out, "  {pod:<width$}  {node}"),
                Place::Pending(message) => writeln!(out, "  {pod:<width$}  pending: {message}"),
            };
        }
        out
    }

    /// What changed from `before`: pods that moved, became pending or
    /// placeable, and pods that came or went with the cluster file.
    pub fn changes_since(&self, before: &Outcome) -> String {
        let mut out = String::new();
        for (pod, now) in &self.pods {
            let line = match (before.pods.get(pod), now) {
                (Some(was), now) if was == now => continue,
                (Some(Place::Node(a)), Place::Node(b)) => format!("moved    {pod}: {a} → {b}"),
                (Some(Place::Node(a)), Place::Pending(why)) => format!("pending  {pod} (was on {a}): {why}"),
                (Some(Place::Pending(_)), Place::Node(b)) => format!("placed   {pod} → {b} (was pending)"),
                (Some(Place::Pending(_)), Place::Pending(why)) => format!("pending  {pod}, now: {why}"),
                (None, Place::Node(b)) => format!("new      {pod} → {b}"),
                (None, Place::Pending(why)) => format!("new      {pod}, pending: {why}"),
            };
            let _ = writeln!(out, "  {line}");
        }
        for pod in before.pods.keys().filter(|p| !self.pods.contains_key(*p)) {
            let _ = writeln!(out, "  gone     {pod}");
        }
        if out.is_empty() {
            out.push_str("  no placement changed\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(pods: &[(&str, Place)]) -> Outcome {
        Outcome { pods: pods.iter().map(|(p, w)| (p.to_string(), w.clone())).collect() }
    }

    #[test]
    fn changes_name_each_pod_that_moved_came_or_went() {
        let node = |n: &str| Place::Node(n.into());
        let pending = |m: &str| Place::Pending(m.into());
        let before = outcome(&[("a", node("n1")), ("b", node("n1")), ("c", pending("full")), ("d", node("n2"))]);
        let after = outcome(&[("a", node("n1")), ("b", node("n2")), ("c", node("n3")), ("e", pending("full"))]);
        let text = after.changes_since(&before);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert_eq!(
            lines,
            ["moved    b: n1 → n2", "placed   c → n3 (was pending)", "new      e, pending: full", "gone     d"]
        );
        assert_eq!(after.changes_since(&after).trim(), "no placement changed");
    }
}
