//! Why nodes were rejected, counted over an attempt and rendered as
//! kube-scheduler's FitError renders them.

use std::collections::HashMap;

/// Counts of rejection reasons over nodes, rendered as kube-scheduler does.
#[derive(Debug, Default, Clone)]
pub struct ReasonHistogram {
    counts: Vec<(String, usize)>,
    /// Reason → its entry in `counts`, once there are more than
    /// [`ReasonHistogram::SCANNED`] (policies may give a reason per node).
    index: HashMap<String, usize>,
}

impl ReasonHistogram {
    /// An attempt usually sees a handful of distinct reasons, one per
    /// rejected node: comparing a few short strings costs less than
    /// hashing each (an unschedulable attempt adds one per node).
    const SCANNED: usize = 16;

    pub fn add(&mut self, reason: &str) {
        self.add_count(reason, 1);
    }

    /// `count` nodes rejected for one reason.
    pub fn add_many(&mut self, reason: &str, count: usize) {
        self.add_count(reason, count);
    }

    /// Adds the counts of another slice of the nodes.
    pub fn merge(&mut self, other: ReasonHistogram) {
        for (reason, count) in &other.counts {
            self.add_count(reason, *count);
        }
    }

    fn add_count(&mut self, reason: &str, count: usize) {
        let found = if self.index.is_empty() {
            self.counts.iter().position(|(r, _)| r == reason)
        } else {
            self.index.get(reason).copied()
        };
        match found {
            Some(i) => self.counts[i].1 += count,
            None => {
                self.counts.push((reason.to_string(), count));
                if self.counts.len() > Self::SCANNED {
                    let last = self.counts.len() - 1;
                    if self.index.is_empty() {
                        self.index = self.counts.iter().enumerate().map(|(i, (r, _))| (r.clone(), i)).collect();
                    } else {
                        self.index.insert(reason.to_string(), last);
                    }
                }
            }
        }
    }

    /// Every reason counted, once each.
    pub fn reasons(&self) -> impl Iterator<Item = &str> {
        self.counts.iter().map(|(r, _)| r.as_str())
    }

    /// `0/5 nodes are available: 1 node(s) had untolerated taint(s), 4
    /// Insufficient cpu.` — entries `"<count> <reason>"` sorted as strings,
    /// as kube-scheduler's FitError does.
    pub fn message(&self, nodes: usize) -> String {
        if nodes == 0 {
            return "no nodes available to schedule pods".to_string();
        }
        let mut entries: Vec<String> = self.counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
        entries.sort();
        format!("0/{nodes} nodes are available: {}.", entries.join(", "))
    }
}

/// One reason, as a failing filter reports it.
pub fn reject(reason: &str) -> Result<(), Vec<String>> {
    Err(vec![reason.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_in_kube_form_sorted_as_strings() {
        let mut h = ReasonHistogram::default();
        for _ in 0..4 {
            h.add("Insufficient cpu");
        }
        h.add("node(s) had untolerated taint(s)");
        assert_eq!(h.message(5), "0/5 nodes are available: 1 node(s) had untolerated taint(s), 4 Insufficient cpu.");
        assert_eq!(ReasonHistogram::default().message(0), "no nodes available to schedule pods");
    }

    #[test]
    fn many_distinct_reasons_are_counted_alike() {
        let mut h = ReasonHistogram::default();
        for round in 0..3 {
            for i in 0..40 {
                h.add(&format!("reason {i:02}"));
            }
            h.add("Insufficient cpu");
            assert_eq!(h.counts.len(), 41, "round {round}");
        }
        let message = h.message(123);
        assert!(
            message.starts_with("0/123 nodes are available: 3 Insufficient cpu, 3 reason 00, 3 reason 01,"),
            "{message}"
        );
        assert!(message.ends_with(", 3 reason 39."), "{message}");
        let mut merged = ReasonHistogram::default();
        merged.add("Insufficient cpu");
        merged.merge(h);
        let merged = merged.message(123);
        assert!(merged.starts_with("0/123 nodes are available: 3 reason 00,"), "{merged}");
        assert!(merged.ends_with(", 3 reason 39, 4 Insufficient cpu."), "{merged}");
    }
}
