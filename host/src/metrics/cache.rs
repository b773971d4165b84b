//! The freshness-aware cache between metric sources and policies.
//!
//! Every value carries the time it was observed. A refresh replaces the
//! values it returned and leaves the others to age: a node missing from a
//! result, or every node while a source is down, goes from fresh (younger
//! than the ttl) to stale (still given to policies, with its age) to absent
//! (older than `maxStaleness`). Policies get value and age and decide; the
//! SDK's `metric_fresh_or` helps. Reads never block on a source: a refresh
//! swaps in a new column under a short write lock.
//!
//! Annotation and label metrics are not refreshed: they are read from the
//! node table the policy call already has (as current as the node watch),
//! parsed once per table version.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::NodeMetrics;
use super::spec::{MetricSource, MetricSpec};
use crate::policy::{MetricSample, NodeId, NodeTable, SyncPoint};

#[derive(Debug, Default)]
struct Column {
    /// Node name → value and when it was observed.
    values: HashMap<String, (f64, Instant)>,
    last_success: Option<Instant>,
}

/// A refreshed column, indexed by node id for one version of the table: a
/// call asks for thousands of nodes, and hashing each name every call
/// would cost more than the policy itself.
struct Resolved {
    at: SyncPoint,
    column: Arc<Column>,
    by_id: Vec<Option<(f64, Instant)>>,
}

/// An annotation or label metric, parsed for one version of the table.
struct Derived {
    at: SyncPoint,
    /// By node id.
    values: Vec<Option<f64>>,
}

pub struct MetricsCache {
    specs: Vec<MetricSpec>,
    columns: RwLock<HashMap<String, Arc<Column>>>,
    derived: Mutex<HashMap<String, Arc<Derived>>>,
    resolved: Mutex<HashMap<String, Arc<Resolved>>>,
    /// Refreshes attempted, by metric: readiness waits for one each.
    attempted: Mutex<HashSet<String>>,
    /// (source kind, metric) → failed refreshes.
    errors: Mutex<BTreeMap<(String, String), u64>>,
    /// (metric, node, text) already reported as not a number.
    reported: Mutex<HashSet<(String, String, String)>>,
}

impl MetricsCache {
    pub fn new(specs: Vec<MetricSpec>) -> MetricsCache {
        MetricsCache {
            specs,
            columns: RwLock::new(HashMap::new()),
            derived: Mutex::new(HashMap::new()),
            resolved: Mutex::new(HashMap::new()),
            attempted: Mutex::new(HashSet::new()),
            errors: Mutex::new(BTreeMap::new()),
            reported: Mutex::new(HashSet::new()),
        }
    }

    pub fn specs(&self) -> &[MetricSpec] {
        &self.specs
    }

    fn spec(&self, metric: &str) -> Option<&MetricSpec> {
        self.specs.iter().find(|s| s.name == metric)
    }

    /// Values a refresh returned, observed at the given instants. Others
    /// keep theirs (and age); values past `maxStaleness` are dropped.
    pub fn update(&self, metric: &str, values: Vec<(String, f64, Instant)>, now: Instant) {
        let Some(spec) = self.spec(metric) else { return };
        let old = self.columns.read().unwrap_or_else(|e| e.into_inner()).get(metric).cloned();
        let mut column = Column { values: HashMap::with_capacity(values.len()), last_success: Some(now) };
        if let Some(old) = old {
            column.values.extend(
                old.values
                    .iter()
                    .filter(|(_, (_, at))| now.saturating_duration_since(*at) <= spec.max_staleness)
                    .map(|(k, v)| (k.clone(), *v)),
            );
        }
        for (node, value, at) in values {
            column.values.insert(node, (value, at));
        }
        self.columns.write().unwrap_or_else(|e| e.into_inner()).insert(metric.to_string(), Arc::new(column));
    }

    pub fn refresh_failed(&self, metric: &str) {
        if let Some(spec) = self.spec(metric) {
            let key = (spec.source.kind().to_string(), metric.to_string());
            *self.errors.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_insert(0) += 1;
        }
    }

    pub fn refresh_attempted(&self, metric: &str) {
        self.attempted.lock().unwrap_or_else(|e| e.into_inner()).insert(metric.to_string());
    }

    /// Every refreshing metric has been tried once (successfully or not):
    /// scheduling before that would decide without data that is on its way.
    pub fn first_refresh_done(&self) -> bool {
        let attempted = self.attempted.lock().unwrap_or_else(|e| e.into_inner());
        self.specs.iter().filter(|s| s.source.refreshes()).all(|s| attempted.contains(&s.name))
    }

    /// Failed refreshes of `metric` so far.
    pub fn errors(&self, metric: &str) -> u64 {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|((_, m), _)| m == metric)
            .map(|(_, n)| n)
            .sum()
    }

    /// Time since the last successful refresh of `metric`.
    pub fn age(&self, metric: &str, now: Instant) -> Option<Duration> {
        let columns = self.columns.read().unwrap_or_else(|e| e.into_inner());
        columns.get(metric)?.last_success.map(|at| now.saturating_duration_since(at))
    }

    fn resolved(&self, metric: &str, column: Arc<Column>, table: &NodeTable) -> Arc<Resolved> {
        let at = table.sync_point();
        if let Some(r) = self.resolved.lock().unwrap_or_else(|e| e.into_inner()).get(metric)
            && r.at == at
            && Arc::ptr_eq(&r.column, &column)
        {
            return r.clone();
        }
        let mut by_id = Vec::new();
        for (id, node) in table.iter() {
            if let Some(v) = column.values.get(&node.name) {
                if by_id.len() <= id as usize {
                    by_id.resize(id as usize + 1, None);
                }
                by_id[id as usize] = Some(*v);
            }
        }
        let resolved = Arc::new(Resolved { at, column, by_id });
        self.resolved.lock().unwrap_or_else(|e| e.into_inner()).insert(metric.to_string(), resolved.clone());
        resolved
    }

    fn derived(&self, spec: &MetricSpec, table: &NodeTable) -> Arc<Derived> {
        let at = table.sync_point();
        if let Some(d) = self.derived.lock().unwrap_or_else(|e| e.into_inner()).get(&spec.name)
            && d.at == at
        {
            return d.clone();
        }
        let (key, from_labels) = match &spec.source {
            MetricSource::Annotation(k) => (k.as_str(), false),
            MetricSource::Label(k) => (k.as_str(), true),
            _ => ("", false),
        };
        let mut values = Vec::new();
        for (id, node) in table.iter() {
            let pairs = if from_labels { &node.labels } else { &node.annotations };
            let Some((_, text)) = pairs.iter().find(|(k, _)| k == key) else { continue };
            let parsed = text.trim().parse::<f64>().ok().filter(|v| v.is_finite());
            if parsed.is_none() {
                let report = (spec.name.clone(), node.name.clone(), text.clone());
                if self.reported.lock().unwrap_or_else(|e| e.into_inner()).insert(report) {
                    tracing::warn!(metric = %spec.name, node = %node.name, value = %text, "{} {key} is not a number; the metric is absent for this node", spec.source.kind());
                }
            }
            if values.len() <= id as usize {
                values.resize(id as usize + 1, None);
            }
            values[id as usize] = parsed;
        }
        let derived = Arc::new(Derived { at, values });
        self.derived.lock().unwrap_or_else(|e| e.into_inner()).insert(spec.name.clone(), derived.clone());
        derived
    }

    /// `wasmsched_metric_source_errors_total{source,metric}`,
    /// `wasmsched_metric_age_seconds{metric}` (since the last successful
    /// refresh; +Inf before the first) and `wasmsched_metric_nodes{metric}`
    /// (nodes with a usable value), in the Prometheus text format.
    pub fn render(&self) -> String {
        let now = Instant::now();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP wasmsched_metric_source_errors_total Failed refreshes of node metrics (error, timeout, malformed answer), by source and metric.\n# TYPE wasmsched_metric_source_errors_total counter"
        );
        let errors = self.errors.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for spec in self.specs.iter().filter(|s| s.source.refreshes()) {
            let kind = spec.source.kind();
            let n = errors.get(&(kind.to_string(), spec.name.clone())).copied().unwrap_or(0);
            let _ =
                writeln!(out, "wasmsched_metric_source_errors_total{{source=\"{kind}\",metric=\"{}\"}} {n}", spec.name);
        }
        let _ = writeln!(
            out,
            "# HELP wasmsched_metric_age_seconds Seconds since the last successful refresh of a node metric.\n# TYPE wasmsched_metric_age_seconds gauge"
        );
        let columns = self.columns.read().unwrap_or_else(|e| e.into_inner()).clone();
        for spec in self.specs.iter().filter(|s| s.source.refreshes()) {
            let age = columns
                .get(&spec.name)
                .and_then(|c| c.last_success)
                .map_or("+Inf".to_string(), |at| format!("{}", now.saturating_duration_since(at).as_secs_f64()));
            let _ = writeln!(out, "wasmsched_metric_age_seconds{{metric=\"{}\"}} {age}", spec.name);
        }
        let _ = writeln!(
            out,
            "# HELP wasmsched_metric_nodes Nodes with a usable (not too stale) value of a refreshed node metric.\n# TYPE wasmsched_metric_nodes gauge"
        );
        for spec in self.specs.iter().filter(|s| s.source.refreshes()) {
            let usable = columns.get(&spec.name).map_or(0, |c| {
                c.values.values().filter(|(_, at)| now.saturating_duration_since(*at) <= spec.max_staleness).count()
            });
            let _ = writeln!(out, "wasmsched_metric_nodes{{metric=\"{}\"}} {usable}", spec.name);
        }
        out
    }
}

impl NodeMetrics for MetricsCache {
    fn samples(&self, metric: &str, table: &NodeTable, nodes: &[NodeId]) -> Vec<Option<MetricSample>> {
        let Some(spec) = self.spec(metric) else { return vec![None; nodes.len()] };
        if !spec.source.refreshes() {
            let derived = self.derived(spec, table);
            return nodes
                .iter()
                .map(|id| {
                    derived
                        .values
                        .get(*id as usize)
                        .copied()
                        .flatten()
                        .map(|value| MetricSample { value, age: Duration::ZERO })
                })
                .collect();
        }
        let Some(column) = self.columns.read().unwrap_or_else(|e| e.into_inner()).get(metric).cloned() else {
            return vec![None; nodes.len()];
        };
        let resolved = self.resolved(metric, column, table);
        let now = Instant::now();
        nodes
            .iter()
            .map(|id| {
                let (value, at) = resolved.by_id.get(*id as usize).copied().flatten()?;
                let age = now.saturating_duration_since(at);
                (age <= spec.max_staleness).then_some(MetricSample { value, age })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::spec::MetricSource;
    use crate::policy::NodeFacts;

    fn table(nodes: &[(&str, &str)]) -> NodeTable {
        let mut t = NodeTable::new();
        for (name, price) in nodes {
            t.upsert(NodeFacts {
                name: name.to_string(),
                annotations: vec![("price".into(), price.to_string())],
                ..Default::default()
            });
        }
        t
    }

    #[test]
    fn values_go_stale_then_absent_and_missing_nodes_age() {
        let spec = MetricSpec {
            ttl: Duration::from_secs(2),
            max_staleness: Duration::from_secs(5),
            ..MetricSpec::new(
                "lat",
                MetricSource::Prometheus { url: "http://p".into(), query: "q".into(), node_label: "node".into() },
                Duration::from_secs(1),
            )
        };
        let cache = MetricsCache::new(vec![spec]);
        let t = table(&[("a", "1"), ("b", "1")]);
        let ids = [t.id_of("a").unwrap(), t.id_of("b").unwrap()];
        assert_eq!(cache.samples("lat", &t, &ids), vec![None, None]);
        assert!(!cache.first_refresh_done());

        let now = Instant::now();
        let old = now - Duration::from_secs(4);
        cache.update("lat", vec![("a".into(), 0.3, old), ("b".into(), 0.1, old)], now);
        cache.refresh_attempted("lat");
        assert!(cache.first_refresh_done());
        let s = cache.samples("lat", &t, &ids);
        assert_eq!(s[0].unwrap().value, 0.3);
        assert!(s[1].unwrap().age >= Duration::from_secs(4), "stale but usable, with its age");

        // The next refresh only knows a: b keeps aging, then is absent.
        let later = now + Duration::from_secs(2);
        cache.update("lat", vec![("a".into(), 0.2, later)], later);
        let s = cache.samples("lat", &t, &ids);
        assert_eq!(s[0].unwrap().value, 0.2);
        assert_eq!(s[1], None, "b's value is 6 s old, over maxStaleness");
        assert_eq!(cache.samples("nope", &t, &ids), vec![None, None]);

        cache.refresh_failed("lat");
        let text = cache.render();
        assert!(
            text.contains("wasmsched_metric_source_errors_total{source=\"prometheus\",metric=\"lat\"} 1"),
            "{text}"
        );
        assert!(text.contains("wasmsched_metric_nodes{metric=\"lat\"} 1"), "{text}");
    }

    #[test]
    fn annotations_are_read_as_numbers_from_the_node_table() {
        let cache = MetricsCache::new(vec![MetricSpec::new(
            "price",
            MetricSource::Annotation("price".into()),
            Duration::from_secs(1),
        )]);
        let mut t = table(&[("a", " 0.25 "), ("b", "cheap"), ("c", "NaN")]);
        let ids: Vec<NodeId> = ["a", "b", "c"].iter().map(|n| t.id_of(n).unwrap()).collect();
        let s = cache.samples("price", &t, &ids);
        assert_eq!(s[0], Some(MetricSample { value: 0.25, age: Duration::ZERO }));
        assert_eq!((s[1], s[2]), (None, None), "not numbers: absent");
        // A new table version is parsed again.
        t.upsert(NodeFacts { name: "b".into(), annotations: vec![("price".into(), "1".into())], ..Default::default() });
        assert_eq!(cache.samples("price", &t, &ids)[1].map(|s| s.value), Some(1.0));
        assert!(cache.first_refresh_done(), "nothing to refresh");
    }
}
