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
        "<h2>Requested per node (cpu dark, memory light; 0–100 % of allocatable)</h2><div class=\"charts\">"
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
        let (label, bar, row) = (150.0, 300.0, 16.0);
        let height = row * nodes.len() as f64 + 4.0;
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\">",
            label + bar + 50.0
        );
        for (i, n) in nodes.iter().enumerate() {
            let y = i as f64 * row + 2.0;
            // A bar never runs past its axis, even over-committed.
            let (c, m) = (n.cpu_percent().min(100.0), n.memory_percent().min(100.0));
            let _ = write!(
                out,
                "<text x=\"0\" y=\"{}\">{}</text>\
                 <rect class=\"cpu\" x=\"{label}\" y=\"{y}\" width=\"{:.1}\" height=\"7\"><title>{}: cpu {c:.0}%</title></rect>\
                 <rect class=\"mem\" x=\"{label}\" y=\"{}\" width=\"{:.1}\" height=\"6\"><title>{}: memory {m:.0}%</title></rect>\
                 <text x=\"{}\" y=\"{}\">{c:.0}%</text>",
                y + 10.0,
                escape(&n.node),
                bar * c / 100.0,
                escape(&n.node),
                y + 7.0,
                bar * m / 100.0,
                escape(&n.node),
                label + bar + 4.0,
                y + 10.0
            );
        }
        let _ = write!(out, "<line class=\"axis\" x1=\"{label}\" y1=\"0\" x2=\"{label}\" y2=\"{height}\"/></svg>");
    } else {
        histogram(out, &nodes);
    }
    let _ = write!(out, "</figure>");
}

/// How many nodes fall in each tenth of cpu utilisation.
fn histogram(out: &mut String, nodes: &[&crate::sim::run::NodeUtilisation]) {
    let mut buckets = [0usize; 10];
    for n in nodes {
        let c = n.cpu_percent();
        buckets[((c / 10.0) as usize).min(9)] += 1;
    }
    let most = buckets.iter().copied().max().unwrap_or(1).max(1) as f64;
    let _ = write!(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"420\" height=\"180\">");
    for (i, count) in buckets.iter().enumerate() {
        let h = 140.0 * *count as f64 / most;
        let x = 10.0 + i as f64 * 40.0;
        let _ = write!(
            out,
            "<rect class=\"cpu\" x=\"{x}\" y=\"{:.1}\" width=\"34\" height=\"{h:.1}\"><title>{count} nodes at {}–{}% cpu</title></rect>\
             <text x=\"{x}\" y=\"172\">{}%</text>",
            150.0 - h,
            i * 10,
            i * 10 + 10,
            i * 10
        );
    }
    let _ = write!(out, "<line class=\"axis\" x1=\"0\" y1=\"150\" x2=\"420\" y2=\"150\"/></svg>");
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
