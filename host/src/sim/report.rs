//! Rendering a simulation: a readable table, JSON, or the placed pods as
//! YAML ready for `kubectl apply`; and one pod's attempt record.

use std::fmt::Write;

use super::run::SimReport;
use crate::scheduler::attempt::record::{GroupCycle, ScorePart};
use crate::scheduler::experiments::CandidateCounts;
use crate::scheduler::{AttemptRecord, NodeRecord, Verdict};

fn cpu(milli: u64) -> String {
    if milli.is_multiple_of(1000) { format!("{}", milli / 1000) } else { format!("{milli}m") }
}

fn memory(bytes: u64) -> String {
    const GI: u64 = 1 << 30;
    const MI: u64 = 1 << 20;
    if bytes >= GI { format!("{:.1}Gi", bytes as f64 / GI as f64) } else { format!("{}Mi", bytes / MI) }
}

fn percent(used: u64, total: u64) -> String {
    if total == 0 { "-".into() } else { format!("{:.0}%", used as f64 * 100.0 / total as f64) }
}

/// The PodGroups, when there are any: each gang's quorum, its members
/// placed and waiting, and its last group cycle.
fn groups(out: &mut String, report: &SimReport) {
    if report.groups.is_empty() {
        return;
    }
    let width = report.groups.iter().map(|g| g.group.len()).max().unwrap_or(8).max(8);
    let _ = writeln!(
        out,
        "\n{:<width$}  {:>9}  {:>6}  {:>7}  LAST GROUP CYCLE",
        "PODGROUP", "MINCOUNT", "PLACED", "WAITING"
    );
    for g in &report.groups {
        let min_count = if g.min_count == 0 { "basic".to_string() } else { g.min_count.to_string() };
        let last = match g.last_cycle {
            _ if g.min_count == 0 => "none (basic: each member on its own)",
            Some(true) => "placed",
            Some(false) => "not placed (all or nothing)",
            None => "none (members held)",
        };
        let _ = writeln!(out, "{:<width$}  {:>9}  {:>6}  {:>7}  {last}", g.group, min_count, g.placed, g.waiting);
    }
}

pub fn table(report: &SimReport, policies: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Scheduled {} of {} pending pods onto {} nodes in {:.1} ms ({} attempts; {} already bound; policies: {}).",
        report.placements.len(),
        report.pending,
        report.nodes,
        report.wall_time.as_secs_f64() * 1e3,
        report.attempts,
        report.bound_before,
        policies
    );
    if report.fallbacks > 0 {
        let _ =
            writeln!(out, "{} attempts used the built-in fallback scoring because a policy failed.", report.fallbacks);
    }
    let ignoring: Vec<&str> =
        report.placements.iter().filter(|p| !p.ignored_constraints.is_empty()).map(|p| p.pod.as_str()).collect();
    if !ignoring.is_empty() {
        let _ = writeln!(
            out,
            "warning: {} placed pods use constraints wasmsched does not evaluate yet (marked ⚠ below; see --explain).",
            ignoring.len()
        );
    }
    if report.other_schedulers > 0 {
        let _ =
            writeln!(out, "{} pending pods belong to other schedulers and were left alone.", report.other_schedulers);
    }
    groups(&mut out, report);
    let width = report.placements.iter().map(|p| p.pod.len()).max().unwrap_or(3).max(3);
    let _ = writeln!(out, "\n{:<width$}  NODE", "POD");
    for p in &report.placements {
        let mut note = if p.fallback.is_some() { "  (fallback scoring)".to_string() } else { String::new() };
        if let Some(canary) = &p.canary {
            note.push_str(&format!("  (canary: {canary})"));
        }
        if !p.ignored_constraints.is_empty() {
            note.push_str(&format!("  ⚠ ignored: {}", p.ignored_constraints.join(", ")));
        }
        if !p.reserved.is_empty() {
            note.push_str(&format!("  reserved: {}", p.reserved.join(", ")));
        }
        let _ = writeln!(out, "{:<width$}  {}{note}", p.pod, p.node);
    }
    let nwidth = report.utilisation.iter().map(|u| u.node.len()).max().unwrap_or(4).max(4);
    let _ = writeln!(out, "\n{:<nwidth$}  {:>16}  {:>20}  {:>9}", "NODE", "CPU REQUESTED", "MEMORY REQUESTED", "PODS");
    for u in &report.utilisation {
        let ready = if u.ready { "" } else { "  (NotReady)" };
        let _ = writeln!(
            out,
            "{:<nwidth$}  {:>16}  {:>20}  {:>9}{ready}",
            u.node,
            format!(
                "{}/{} {}",
                cpu(u.milli_cpu_requested),
                cpu(u.milli_cpu_allocatable),
                percent(u.milli_cpu_requested, u.milli_cpu_allocatable)
            ),
            format!(
                "{}/{} {}",
                memory(u.memory_requested),
                memory(u.memory_allocatable),
                percent(u.memory_requested, u.memory_allocatable)
            ),
            format!("{}/{}", u.pods, u.pods_allocatable),
        );
    }
    if !report.unschedulable.is_empty() {
        let _ = writeln!(out, "\nNOT PLACED");
        for u in &report.unschedulable {
            let _ = writeln!(out, "{}  {}: {}", u.pod, u.reason, u.message);
        }
    }
    if !report.experiments.is_empty() {
        out.push_str(&experiments(&report.experiments));
    }
    out
}

/// What each shadow candidate would have done: its counts, then its
/// divergent decisions, each with its best nodes by its own totals.
pub fn experiments(candidates: &[CandidateCounts]) -> String {
    let mut out = String::from("\nSHADOW CANDIDATES (never deciding)\n");
    let _ = writeln!(
        out,
        "{:<24}  {:>5}  {:>5}  {:>4}  {:>6}  {:>11}  {:>10}  {:>8}  {:>8}  {:>7}",
        "CANDIDATE", "SEEN", "AGREE", "TIES", "DIFFER", "MEAN RANK", "MEAN REGRET", "PENDING", "FAILURES", "DROPPED"
    );
    for c in candidates {
        let mean = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            out,
            "{:<24}  {:>5}  {:>5}  {:>4}  {:>6}  {:>11}  {:>10}  {:>8}  {:>8}  {:>7}",
            c.display_name(),
            c.seen,
            c.agree,
            c.ties,
            c.differ,
            mean(c.mean_rank()),
            mean(c.mean_regret()),
            format!("{}/{}", c.would_leave_pending, c.would_place),
            c.failures,
            c.dropped
        );
    }
    let _ = writeln!(
        out,
        "(SEEN = AGREE + TIES + DIFFER + FAILURES + DROPPED. TIES: it would choose another node that scores as \
                           high as the node decided; FAILURES: a call failed, and nothing else is counted of it; \
                           MEAN RANK: the candidate's rank of the node decided, 1 best; MEAN REGRET: the points its \
                           best node leads that node by; PENDING: pods it would leave pending / pods it would place)"
    );
    for c in candidates.iter().filter(|c| !c.last_divergent.is_empty()) {
        let _ = writeln!(out, "\n{} differs on:", c.display_name());
        for d in &c.last_divergent {
            let best: Vec<String> = d.top.iter().map(|(node, total)| format!("{node} {total:.1}")).collect();
            let _ = writeln!(
                out,
                "  {}: decided {}, would choose {} (its best: {})",
                d.pod,
                d.decided.as_deref().unwrap_or("none"),
                d.would_choose.as_deref().unwrap_or("none"),
                best.join(", ")
            );
            for (node, parts) in &d.parts {
                let raw: f64 = parts.iter().map(|p| p.value).sum();
                let _ = writeln!(out, "    {node}: {} = {}", sum_of(parts), trim_float(raw));
            }
            for m in d.group.iter().flat_map(|g| &g.members) {
                let (decided, would) =
                    (m.decided.as_deref().unwrap_or("none"), m.would_choose.as_deref().unwrap_or("none"));
                let _ = writeln!(out, "    {}: decided {decided}, would choose {would}", m.pod);
            }
        }
    }
    out
}

pub fn json(report: &SimReport) -> String {
    serde_json::to_string_pretty(report).expect("the report serialises")
}

/// The placed pods with `spec.nodeName` set, as YAML documents; server-set
/// fields are dropped so `kubectl apply` takes them.
pub fn yaml(report: &SimReport) -> String {
    let by_key: std::collections::HashMap<String, &k8s_openapi::api::core::v1::Pod> =
        report.input_pods.iter().map(|p| (crate::cluster::PodKey::of(p).to_string(), p.as_ref())).collect();
    let mut out = String::new();
    for placement in &report.placements {
        let Some(pod) = by_key.get(&placement.pod) else { continue };
        let mut pod = (**pod).clone();
        pod.status = None;
        pod.metadata.resource_version = None;
        pod.metadata.uid = None;
        pod.metadata.managed_fields = None;
        pod.metadata.creation_timestamp = None;
        if pod.metadata.namespace.is_none() {
            pod.metadata.namespace = Some("default".into());
        }
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(placement.node.clone());
        }
        let mut value = serde_yaml::to_value(&pod).expect("a pod serialises");
        if let serde_yaml::Value::Mapping(m) = &mut value {
            // k8s-openapi omits apiVersion/kind on the struct; kubectl needs them.
            let mut with_kind = serde_yaml::Mapping::new();
            with_kind.insert("apiVersion".into(), "v1".into());
            with_kind.insert("kind".into(), "Pod".into());
            for (k, v) in m.iter() {
                with_kind.insert(k.clone(), v.clone());
            }
            *m = with_kind;
        }
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&value).expect("yaml"));
    }
    out
}

/// One attempt as a readable table.
/// A gang member's group cycle, in a line.
fn group_cycle(c: &GroupCycle) -> String {
    let before = match c.already_placed {
        0 => String::new(),
        n => format!(" (and {n} placed before)"),
    };
    let decided = match c.placed {
        true => "placed together".to_string(),
        false => "not placed: every placement of the cycle undone (all or nothing)".to_string(),
    };
    let placement = match &c.placement {
        Some(p) => format!(" Placement: {p}."),
        None => String::new(),
    };
    format!(
        "Group cycle: PodGroup {} (minCount {}): {} members attempted together, {} fit{before}: {decided}.{placement}",
        c.group, c.min_count, c.members, c.fit
    )
}

pub fn explain(record: &AttemptRecord) -> String {
    let mut out = explain_head(record);
    let width = record.node_records.iter().map(|n| n.node.len()).max().unwrap_or(4).max(4);
    let columns = score_columns(record);
    if !columns.is_empty() {
        let _ = writeln!(
            out,
            "Score: the sum of weight × normalised score (0-100) over the built-in parts and the policies; \
             each column shows raw → normalised"
        );
    }
    let mut header = format!("\n{:<width$}  {:<10}", "NODE", "VERDICT");
    for (heading, w) in &columns {
        let _ = write!(header, "  {heading:>w$}");
    }
    header.push_str("     TOTAL");
    let _ = writeln!(out, "{header}");
    let mut rows: Vec<&NodeRecord> = record.node_records.iter().collect();
    rows.sort_by(|a, b| {
        b.total.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.total.unwrap_or(f64::NEG_INFINITY)).then(a.node.cmp(&b.node))
    });
    for n in &rows {
        out.push_str(&node_row(record, n, &columns, width));
    }
    out.push_str(&breakdowns(&rows, width));
    out
}

/// What the attempt saw, the policies it called and how it ended.
fn explain_head(record: &AttemptRecord) -> String {
    let mut out = String::new();
    let sampled = if record.evaluated < record.nodes {
        let why = record.sampled_because.as_deref().unwrap_or("node sampling");
        format!(" ({} evaluated: {why})", record.evaluated)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "Pod {} — attempt {}: {} nodes{sampled}, {} feasible after built-in filters, {} after policy filters.",
        record.pod, record.attempt, record.nodes, record.feasible_builtin, record.feasible
    );
    for p in &record.policies {
        let _ = writeln!(
            out,
            "Policy {} {} (weight {}, failurePolicy {}, sha256 {})",
            p.name,
            p.version,
            p.weight,
            p.failure_policy,
            &p.sha256[..12.min(p.sha256.len())]
        );
        for phase in ["filter", "score"] {
            let calls = record.policy_calls.iter().filter(|c| c.policy == p.name && c.phase == phase).count();
            if calls > 1 {
                let _ = writeln!(
                    out,
                    "  {phase}: {calls} calls in parallel, the candidates split over the attempt workers"
                );
            }
        }
    }
    out.push_str(&outcome(record));
    out
}

/// The attempt's end: the node, or why none, and what else was said.
fn outcome(record: &AttemptRecord) -> String {
    let mut out = String::new();
    match (&record.chosen, &record.message) {
        (Some(node), _) => {
            let _ = writeln!(out, "Chosen: {node} in {:.2} ms", record.duration.as_secs_f64() * 1e3);
        }
        (None, Some(message)) if record.error.is_some() => {
            let _ = writeln!(out, "Not placed, an error (retried with backoff): {message}");
        }
        (None, Some(message)) => {
            let _ = writeln!(out, "Not placed: {message}");
        }
        (None, None) => {}
    }
    if let Some(fallback) = &record.fallback {
        let _ = writeln!(out, "Fallback: built-in least-allocated scoring, because {fallback}");
    }
    if let Some(cycle) = &record.group {
        let _ = writeln!(out, "{}", group_cycle(cycle));
    }
    if !record.ignored_constraints.is_empty() {
        let _ = writeln!(out, "Not evaluated (not implemented yet): {}", record.ignored_constraints.join(", "));
    }
    out
}

/// One column per score part (built-in parts, then the policies), as wide
/// as its heading.
fn score_columns(record: &AttemptRecord) -> Vec<(String, usize)> {
    record
        .node_records
        .iter()
        .find(|n| !n.scores.is_empty())
        .map(|n| {
            n.scores
                .iter()
                .map(|s| {
                    let heading = format!("{} ×{}", s.policy.trim_end_matches(" (built-in)"), s.weight);
                    let width = heading.chars().count().max(14);
                    (heading, width)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A node's line: its scores and total, or what rejected it.
fn node_row(record: &AttemptRecord, n: &NodeRecord, columns: &[(String, usize)], width: usize) -> String {
    let marker = if record.chosen.as_deref() == Some(n.node.as_str()) { " *" } else { "" };
    match &n.verdict {
        Verdict::Feasible => {
            let mut line = format!("{:<width$}  {:<10}", n.node, "feasible");
            for (s, (_, w)) in n.scores.iter().zip(columns) {
                let _ = write!(line, "  {:>w$}", format!("{} → {:.1}", trim_float(s.raw), s.normalized));
            }
            let _ = write!(line, "  {:>8.1}{marker}", n.total.unwrap_or_default());
            format!("{line}\n")
        }
        Verdict::Rejected { by, reasons } => format!("{:<width$}  rejected by {by}: {}\n", n.node, reasons.join(", ")),
    }
}

/// The policies' own breakdowns of their raw scores (contract 0.2), a line
/// per node and policy, in the table's order: `free cpu 40 + zone bonus 50
/// = 90`. Empty when no policy gives one.
fn breakdowns(rows: &[&NodeRecord], width: usize) -> String {
    let mut out = String::new();
    for n in rows {
        for s in n.scores.iter().filter(|s| !s.parts.is_empty()) {
            let _ = writeln!(out, "{:<width$}  {}: {} = {}", n.node, s.policy, sum_of(&s.parts), trim_float(s.raw));
        }
    }
    if out.is_empty() {
        return out;
    }
    format!("\nWhat the policies' raw scores are made of, as each policy says:\n{out}")
}

/// Named parts as a sum: `free cpu 40 + zone bonus 50 - rack load 20`. A
/// negative part is subtracted, not added as `+ rack load -20`.
fn sum_of(parts: &[ScorePart]) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        let (sign, value) = if p.value < 0.0 { ("-", -p.value) } else { ("+", p.value) };
        match (i, sign) {
            (0, "+") => {}
            (0, _) => out.push_str("- "),
            _ => out.push_str(&format!(" {sign} ")),
        }
        out.push_str(&format!("{} {}", p.name, trim_float(value)));
    }
    out
}

fn trim_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{v:.0}") } else { format!("{v:.4}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(name: &str, value: f64) -> ScorePart {
        ScorePart { name: name.into(), value }
    }

    #[test]
    fn negative_parts_are_subtracted() {
        let parts = [part("free memory", 40.0), part("gpu bonus", 50.0), part("rack load / 4", -20.0)];
        assert_eq!(sum_of(&parts), "free memory 40 + gpu bonus 50 - rack load / 4 20");
        assert_eq!(sum_of(&[part("rack load", -2.5), part("zone", 10.0)]), "- rack load 2.5000 + zone 10");
        assert_eq!(sum_of(&[]), "");
    }
}
