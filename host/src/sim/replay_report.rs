//! A replay's report on the terminal: how many attempts decided as
//! recorded, each that did not side by side, then what the replay left:
//! pods placed and waiting, and every node's utilisation.

use std::fmt::Write;

use super::replay::ReplayReport;
use crate::record::Attempted;

fn decision(a: Option<&Attempted>) -> String {
    match a {
        None => "(nothing to attempt)".into(),
        Some(Attempted { node: Some(node), .. }) => node.clone(),
        Some(Attempted { message, .. }) => format!("(unschedulable: {})", message.as_deref().unwrap_or("")),
    }
}

pub fn table(report: &ReplayReport, dir: &str, policies: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Replayed {dir} (profiles: {}; policies: {policies}): {} of {} attempts decided as recorded, {} otherwise.",
        report.profiles.join(", "),
        report.agreed,
        report.attempts,
        report.divergences.len()
    );
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if !report.divergences.is_empty() {
        let width = report.divergences.iter().map(|d| d.recorded.pod.len()).max().unwrap_or(3).max(3);
        let _ = writeln!(out, "\n{:<width$}  {:<24}  REPLAYED", "POD", "RECORDED");
        for d in &report.divergences {
            let replayed = match &d.replayed {
                Some(r) if r.pod != d.recorded.pod => format!("{} for {}", decision(Some(r)), r.pod),
                r => decision(r.as_ref()),
            };
            let _ = writeln!(out, "{:<width$}  {:<24}  {replayed}", d.recorded.pod, decision(Some(&d.recorded)));
        }
    }
    let _ = writeln!(
        out,
        "\nAt the recording's end: {} pods placed, {} waiting.",
        report.placed.len(),
        report.pending.len()
    );
    for p in &report.pending {
        let _ = writeln!(out, "  {}  {}: {}", p.pod, p.reason, p.message);
    }
    if !report.experiments.is_empty() {
        out.push('\n');
        out.push_str(&super::report::experiments(&report.experiments));
    }
    let _ = writeln!(out, "\n{:<24}  {:>9}  {:>9}  PODS", "NODE", "CPU", "MEMORY");
    for n in &report.utilisation {
        let _ = writeln!(
            out,
            "{:<24}  {:>8.0}%  {:>8.0}%  {}/{}",
            n.node,
            n.cpu_percent(),
            n.memory_percent(),
            n.pods,
            n.pods_allocatable
        );
    }
    out
}
