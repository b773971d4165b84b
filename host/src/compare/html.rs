//! `--html FILE`: the comparison as one self-contained page (no network,
//! no external file): the summary table, each variant's per-node
//! utilisation as inline SVG bars on one scale, so packing and spreading
//! show at a glance, the pods placed differently and the pods left
//! pending. The summary's cells hold the terminal table's very strings.

use std::fmt::Write;

use super::table::ROWS;
use super::{Comparison, Outcome};

/// Above this many nodes a variant's chart is a histogram of the nodes'
/// utilisation rather than a bar per node.
const BARS_UP_TO: usize = 60;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}\
th{background:#f3f3f3}.charts{display:flex;flex-wrap:wrap;gap:2em}figure{margin:0}\
figcaption{font-weight:600;margin-bottom:.4em}.cpu{fill:#3b7dd8}.mem{fill:#9cc3f5}\
.axis{stroke:#999;stroke-width:1}text{font-size:11px;fill:#333}#errors{color:#b00}";

pub fn html(c: &Comparison, title: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>",
        escape(title)
    );
    let _ = write!(out, "<h1>{}</h1>", escape(title));
    summary(&mut out, c);
    let _ = write!(
        out,
        "<h2>Requested per node, cpu (dark) and memory (light), as % of allocatable; over many nodes, how many nodes fall in each tenth</h2><div class=\"charts\">"
    );
    for o in &c.outcomes {
        chart(&mut out, o);
    }
    let _ = write!(out, "</div>");
    differences(&mut out, c);
    pending(&mut out, c);
    // Shows any script error on the page itself; the page needs no script.
    let _ = writeln!(
        out,
        "<pre id=\"errors\"></pre><script>window.addEventListener('error',function(e){{\
         document.getElementById('errors').textContent+=e.message+'\\n'}});\
         document.body.setAttribute('data-rendered','yes');</script></body></html>"
    );
    out
}

fn summary(out: &mut String, c: &Comparison) {
    let _ = write!(out, "<table id=\"summary\"><tr><th></th>");
    for s in &c.summaries {
        let _ = write!(out, "<th>{}<br><small>{}</small></th>", escape(&s.name), escape(&s.policies));
    }
    let _ = write!(out, "</tr>");
    for (key, label, value) in ROWS {
        let _ = write!(out, "<tr><th>{label}</th>");
        for s in &c.summaries {
            let _ = write!(
                out,
                "<td data-variant=\"{}\" data-metric=\"{key}\">{}</td>",
                escape(&s.name),
                escape(&value(s))
            );
        }
        let _ = write!(out, "</tr>");
    }
    let _ = write!(out, "</table>");
}

fn chart(out: &mut String, o: &Outcome) {
    let nodes: Vec<_> = o.utilisation.iter().filter(|n| n.ready).collect();
    let _ = write!(out, "<figure data-variant=\"{}\"><figcaption>{}</figcaption>", escape(&o.name), escape(&o.name));
    if nodes.len() <= BARS_UP_TO {
        bars(out, &nodes);
    } else {
        histogram(out, &nodes);
    }
    let _ = write!(out, "</figure>");
}

/// One row per node: its cpu and memory bars on a 0–100 % axis, and both
/// figures at the end of the row.
fn bars(out: &mut String, nodes: &[&crate::sim::utilisation::NodeUtilisation]) {
    let (label, bar, row) = (150.0, 300.0, 16.0);
    let height = row * nodes.len() as f64 + 4.0;
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">",
        label + bar + 130.0,
        height + 16.0
    );
    for (i, n) in nodes.iter().enumerate() {
        let y = i as f64 * row + 2.0;
        // A bar never runs past its axis, even over-committed.
        let (c, m) = (n.cpu_percent().min(100.0), n.memory_percent().min(100.0));
        let node = escape(&n.node);
        let _ = write!(
            out,
            "<text x=\"0\" y=\"{}\">{node}</text>\
             <rect class=\"cpu\" x=\"{label}\" y=\"{y}\" width=\"{:.1}\" height=\"7\"><title>{node}: cpu {c:.0}%</title></rect>\
             <rect class=\"mem\" x=\"{label}\" y=\"{}\" width=\"{:.1}\" height=\"6\"><title>{node}: memory {m:.0}%</title></rect>\
             <text x=\"{}\" y=\"{}\">cpu {c:.0}% · mem {m:.0}%</text>",
            y + 10.0,
            bar * c / 100.0,
            y + 7.0,
            bar * m / 100.0,
            label + bar + 4.0,
            y + 10.0
        );
    }
    let _ = write!(out, "<line class=\"axis\" x1=\"{label}\" y1=\"0\" x2=\"{label}\" y2=\"{height}\"/>");
    let _ = write!(out, "<line class=\"axis\" x1=\"{label}\" y1=\"{height}\" x2=\"{}\" y2=\"{height}\"/>", label + bar);
    for tick in [0, 25, 50, 75, 100] {
        let x = label + bar * f64::from(tick) / 100.0;
        let _ = write!(out, "<text x=\"{:.1}\" y=\"{}\">{tick}%</text>", x - 8.0, height + 13.0);
    }
    let _ = write!(out, "</svg>");
}

/// How many nodes fall in each tenth of cpu and of memory requested: two
/// bars a tenth, on a count axis.
fn histogram(out: &mut String, nodes: &[&crate::sim::utilisation::NodeUtilisation]) {
    let tenth = |percent: f64| ((percent / 10.0) as usize).min(9);
    let (mut cpu, mut mem) = ([0usize; 10], [0usize; 10]);
    for n in nodes {
        cpu[tenth(n.cpu_percent())] += 1;
        mem[tenth(n.memory_percent())] += 1;
    }
    let most = cpu.iter().chain(&mem).copied().max().unwrap_or(1).max(1);
    let (left, base, tall) = (40.0, 150.0, 140.0);
    let _ = write!(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"460\" height=\"180\">");
    for (i, (c, m)) in cpu.iter().zip(&mem).enumerate() {
        let x = left + 4.0 + i as f64 * 40.0;
        let range = format!("{}–{}%", i * 10, i * 10 + 10);
        for (class, count, dx, what) in [("cpu", c, 0.0, "cpu"), ("mem", m, 17.0, "memory")] {
            let h = tall * *count as f64 / most as f64;
            let _ = write!(
                out,
                "<rect class=\"{class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"16\" height=\"{h:.1}\"><title>{count} nodes at {range} {what}</title></rect>",
                x + dx,
                base - h
            );
        }
        let _ = write!(out, "<text x=\"{x}\" y=\"172\">{}%</text>", i * 10);
    }
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\"/>\
         <line class=\"axis\" x1=\"{left}\" y1=\"{}\" x2=\"{left}\" y2=\"{base}\"/>\
         <text x=\"0\" y=\"{}\">{most}</text><text x=\"0\" y=\"{base}\">0</text>\
         <text x=\"0\" y=\"{}\">nodes</text></svg>",
        left + 404.0,
        base - tall,
        base - tall + 4.0,
        base - tall / 2.0
    );
}

fn differences(out: &mut String, c: &Comparison) {
    let _ = write!(out, "<h2>Placed differently ({})</h2>", c.differences.len());
    if c.differences.is_empty() {
        let _ = write!(out, "<p>Every variant placed every pod alike.</p>");
        return;
    }
    let _ = write!(out, "<table id=\"differences\"><tr><th>pod</th>");
    for s in &c.summaries {
        let _ = write!(out, "<th>{}</th>", escape(&s.name));
    }
    let _ = write!(out, "</tr>");
    for d in &c.differences {
        let _ = write!(out, "<tr><td>{}</td>", escape(&d.pod));
        for node in &d.nodes {
            let _ = write!(out, "<td>{}</td>", escape(node.as_deref().unwrap_or("(pending)")));
        }
        let _ = write!(out, "</tr>");
    }
    let _ = write!(out, "</table>");
}

fn pending(out: &mut String, c: &Comparison) {
    let _ = write!(out, "<h2>Left pending</h2>");
    for o in &c.outcomes {
        let _ = write!(out, "<h3>{} ({})</h3>", escape(&o.name), o.pending.len());
        if o.pending.is_empty() {
            let _ = write!(out, "<p>Every pod placed.</p>");
            continue;
        }
        let _ = write!(
            out,
            "<table class=\"pending\" data-variant=\"{}\"><tr><th>pod</th><th>why</th></tr>",
            escape(&o.name)
        );
        for p in &o.pending {
            let _ = write!(out, "<tr><td>{}</td><td>{}</td></tr>", escape(&p.pod), escape(&p.message));
        }
        let _ = write!(out, "</table>");
    }
}
