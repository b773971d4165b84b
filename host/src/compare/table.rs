//! The comparison on the terminal: one column per variant.

use std::fmt::Write;

use super::{Comparison, Spread, Summary};

fn cpu(milli: u64) -> String {
    if milli.is_multiple_of(1000) { format!("{}", milli / 1000) } else { format!("{milli}m") }
}

fn memory(bytes: u64) -> String {
    format!("{:.1}Gi", bytes as f64 / f64::from(1u32 << 30))
}

pub type Row = (&'static str, &'static str, fn(&Summary) -> String);

fn spread(s: &Spread) -> String {
    format!("{:.0}% ±{:.0} ({:.0}–{:.0}%)", s.mean, s.stddev, s.min, s.max)
}

/// The summary's rows: key (the HTML's `data-metric`), label, and what
/// each says of a variant.
pub const ROWS: [Row; 8] = [
    ("placed", "pods placed", |s| s.placed.to_string()),
    ("pending", "pods pending", |s| s.pending.to_string()),
    ("nodesUsed", "nodes used", |s| format!("{} of {}", s.nodes_used, s.nodes)),
    ("cpu", "cpu requested per node", |s| spread(&s.cpu)),
    ("memory", "memory requested per node", |s| spread(&s.memory)),
    ("largestFreeCpu", "largest cpu request that fits", |s| cpu(s.largest_free_milli_cpu)),
    ("largestFreeMemory", "largest memory request that fits", |s| memory(s.largest_free_memory)),
    ("placedDifferently", "placed otherwise than the first", |s| s.placed_differently.to_string()),
];

pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let label_width = ROWS.iter().map(|(_, label, _)| label.len()).max().unwrap_or(0);
    let cells: Vec<Vec<String>> = c.summaries.iter().map(|s| ROWS.iter().map(|(_, _, f)| f(s)).collect()).collect();
    let widths: Vec<usize> = c
        .summaries
        .iter()
        .zip(&cells)
        .map(|(s, column)| column.iter().map(|v| v.chars().count()).chain([s.name.len()]).max().unwrap_or(0))
        .collect();
    let _ = write!(out, "{:label_width$}", "");
    for (s, w) in c.summaries.iter().zip(&widths) {
        let _ = write!(out, "  {:<w$}", s.name);
    }
    let _ = writeln!(out);
    for (row, (_, label, _)) in ROWS.iter().enumerate() {
        let _ = write!(out, "{label:<label_width$}");
        for (column, w) in cells.iter().zip(&widths) {
            let _ = write!(out, "  {:<w$}", column[row]);
        }
        let _ = writeln!(out);
    }
    if c.summaries.iter().any(|s| s.gangs > 0) {
        let _ = write!(out, "{:label_width$}", "gangs placed whole");
        for (s, w) in c.summaries.iter().zip(&widths) {
            let _ = write!(out, "  {:<w$}", format!("{} of {}", s.gangs_placed, s.gangs));
        }
        let _ = writeln!(out);
    }
    for s in &c.summaries {
        let _ = writeln!(out, "\n{} ({}):", s.name, s.policies);
        if s.pending_reasons.is_empty() {
            let _ = writeln!(out, "  every pod placed");
        }
        for (message, n) in &s.pending_reasons {
            let _ = writeln!(out, "  {n} pending: {message}");
        }
    }
    if !c.differences.is_empty() {
        let names: Vec<&str> = c.summaries.iter().map(|s| s.name.as_str()).collect();
        let _ = writeln!(out, "\nPlaced differently (POD  {}):", names.join("  "));
        for d in &c.differences {
            let nodes: Vec<&str> = d.nodes.iter().map(|n| n.as_deref().unwrap_or("(pending)")).collect();
            let _ = writeln!(out, "  {}  {}", d.pod, nodes.join("  "));
        }
    }
    out
}
