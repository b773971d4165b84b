//! A metric family (one name, its labels, a value per label set) and the
//! text exposition format's rendering of counters, gauges and histograms.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

pub(super) type Labels = Vec<String>;

pub(super) struct Family<V> {
    pub(super) name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    pub(super) values: Mutex<BTreeMap<Labels, V>>,
}

impl<V: Default> Family<V> {
    pub(super) const fn new(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Family { name, help, labels, values: Mutex::new(BTreeMap::new()) }
    }

    /// Updates the value of one label set. Label strings are allocated only
    /// the first time a set is seen, since this runs for every attempt; a
    /// family holds a handful of sets, so a scan finds it.
    pub(super) fn with(&self, labels: &[&str], f: impl FnOnce(&mut V)) {
        debug_assert_eq!(labels.len(), self.labels.len(), "{}", self.name);
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let seen = values.iter_mut().find(|(k, _)| k.iter().map(String::as_str).eq(labels.iter().copied()));
        match seen {
            Some((_, value)) => f(value),
            None => f(values.entry(labels.iter().map(|s| s.to_string()).collect()).or_default()),
        }
    }

    /// Replaces every label set's value (a gauge read whole, such as the
    /// unschedulable pods by plugin): sets no longer there go.
    pub(super) fn replace(&self, values: impl IntoIterator<Item = (Labels, V)>) {
        *self.values.lock().unwrap_or_else(|e| e.into_inner()) = values.into_iter().collect();
    }

    fn label_text(&self, values: &[String], extra: Option<(&str, &str)>) -> String {
        let mut pairs: Vec<String> =
            self.labels.iter().zip(values).map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        if let Some((k, v)) = extra {
            pairs.push(format!("{k}=\"{v}\""));
        }
        if pairs.is_empty() { String::new() } else { format!("{{{}}}", pairs.join(",")) }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[derive(Default)]
pub(super) struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub(super) fn observe(&mut self, buckets: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; buckets.len()];
        }
        for (c, &b) in self.counts.iter_mut().zip(buckets) {
            if v <= b {
                *c += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

/// A family without labels has its one series from the start, zero until
/// observed, as client_golang renders it (a query for it finds it).
pub(super) fn render_scalar(out: &mut String, f: &Family<f64>, kind: &str) {
    let _ = writeln!(out, "# HELP {} {}\n# TYPE {} {kind}", f.name, f.help, f.name);
    let values = f.values.lock().unwrap_or_else(|e| e.into_inner());
    if f.labels.is_empty() && values.is_empty() {
        let _ = writeln!(out, "{} 0", f.name);
    }
    for (labels, v) in values.iter() {
        let _ = writeln!(out, "{}{} {v}", f.name, f.label_text(labels, None));
    }
}

pub(super) fn render_histogram(out: &mut String, f: &Family<Histogram>, buckets: &[f64]) {
    let _ = writeln!(out, "# HELP {} {}\n# TYPE {} histogram", f.name, f.help, f.name);
    let values = f.values.lock().unwrap_or_else(|e| e.into_inner());
    let unobserved = (f.labels.is_empty() && values.is_empty()).then(|| (Vec::new(), Histogram::default()));
    for (labels, h) in values.iter().chain(unobserved.iter().map(|(l, h)| (l, h))) {
        let zeros = vec![0; buckets.len()];
        let counts = if h.counts.is_empty() { &zeros } else { &h.counts };
        for (b, c) in buckets.iter().zip(counts) {
            let _ = writeln!(out, "{}_bucket{} {c}", f.name, f.label_text(labels, Some(("le", &b.to_string()))));
        }
        let _ = writeln!(out, "{}_bucket{} {}", f.name, f.label_text(labels, Some(("le", "+Inf"))), h.count);
        let _ = writeln!(out, "{}_sum{} {}", f.name, f.label_text(labels, None), h.sum);
        let _ = writeln!(out, "{}_count{} {}", f.name, f.label_text(labels, None), h.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let f: Family<f64> = Family::new("x", "h", &["a"]);
        assert_eq!(f.label_text(&["say \"hi\"\n".to_string()], None), "{a=\"say \\\"hi\\\"\\n\"}");
    }
}
