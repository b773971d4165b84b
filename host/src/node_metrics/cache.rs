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

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::spec::{MetricSource, MetricSpec};
use wasmsched_runtime::NodeMetrics;
use wasmsched_runtime::{MetricSample, NodeId, NodeTable, SyncPoint};

#[derive(Debug, Default)]
struct Column {
    /// Node name → value and when it was observed.
    values: HashMap<String, (f64, Instant)>,
    last_success: Option<Instant>,
}

/// A metric's values indexed by node id for one version of the table (and,
/// for a polled metric, one refresh): a call asks for thousands of nodes,
/// and hashing each name on every call would cost more than the policy
/// itself. `None` as the time: as current as the node (annotations).
struct ByNode {
    at: SyncPoint,
    column: Option<Arc<Column>>,
    values: Vec<Option<(f64, Option<Instant>)>>,
}

pub struct MetricsCache {
    specs: Vec<MetricSpec>,
    columns: RwLock<HashMap<String, Arc<Column>>>,
    by_node: Mutex<HashMap<String, Arc<ByNode>>>,
    /// Refreshes attempted, by metric: readiness waits for one each.
    attempted: Mutex<HashSet<String>>,
    /// Failed refreshes, by metric.
    errors: Mutex<HashMap<String, u64>>,
    /// (metric, node, text) already reported as not a number.
    reported: Mutex<HashSet<(String, String, String)>>,
}

impl MetricsCache {
    pub fn new(specs: Vec<MetricSpec>) -> MetricsCache {
        MetricsCache {
            specs,
            columns: RwLock::new(HashMap::new()),
            by_node: Mutex::new(HashMap::new()),
            attempted: Mutex::new(HashSet::new()),
            errors: Mutex::new(HashMap::new()),
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
        *self.errors.lock().unwrap_or_else(|e| e.into_inner()).entry(metric.to_string()).or_insert(0) += 1;
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
        self.errors.lock().unwrap_or_else(|e| e.into_inner()).get(metric).copied().unwrap_or(0)
    }

    /// `spec`'s values by node id for `table`, built once per table version
    /// and refresh. `None` before a polled metric's first refresh.
    fn by_node(&self, spec: &MetricSpec, table: &NodeTable) -> Option<Arc<ByNode>> {
        let at = table.sync_point();
        let column = if spec.source.refreshes() {
            Some(self.columns.read().unwrap_or_else(|e| e.into_inner()).get(&spec.name).cloned()?)
        } else {
            None
        };
        if let Some(cached) = self.by_node.lock().unwrap_or_else(|e| e.into_inner()).get(&spec.name)
            && cached.at == at
            && match (&cached.column, &column) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
        {
            return Some(cached.clone());
        }
        let mut values = Vec::new();
        for (id, node) in table.iter() {
            let value = match (&spec.source, &column) {
                (_, Some(column)) => column.values.get(&node.name).map(|(v, at)| (*v, Some(*at))),
                (MetricSource::Annotation(key), None) => self.parse(spec, &node.name, &node.annotations, key),
                (MetricSource::Label(key), None) => self.parse(spec, &node.name, &node.labels, key),
                _ => None,
            };
            if let Some(value) = value {
                if values.len() <= id as usize {
                    values.resize(id as usize + 1, None);
                }
                values[id as usize] = Some(value);
            }
        }
        let by_node = Arc::new(ByNode { at, column, values });
        self.by_node.lock().unwrap_or_else(|e| e.into_inner()).insert(spec.name.clone(), by_node.clone());
        Some(by_node)
    }

    /// An annotation or label read as a number; one warning per bad value.
    fn parse(
        &self,
        spec: &MetricSpec,
        node: &str,
        pairs: &[(String, String)],
        key: &str,
    ) -> Option<(f64, Option<Instant>)> {
        let (_, text) = pairs.iter().find(|(k, _)| k == key)?;
        let parsed = text.trim().parse::<f64>().ok().filter(|v| v.is_finite());
        if parsed.is_none()
            && self.reported.lock().unwrap_or_else(|e| e.into_inner()).insert((
                spec.name.clone(),
                node.to_string(),
                text.clone(),
            ))
        {
            tracing::warn!(metric = %spec.name, %node, value = %text, "{} {key} is not a number; the metric is absent for this node", spec.source.kind());
        }
        parsed.map(|v| (v, None))
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
            let n = errors.get(&spec.name).copied().unwrap_or(0);
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
        let Some(by_node) = self.by_node(spec, table) else { return vec![None; nodes.len()] };
        let now = Instant::now();
        nodes
            .iter()
            .map(|id| {
                let (value, observed) = by_node.values.get(*id as usize).copied().flatten()?;
                let age = observed.map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
                (age <= spec.max_staleness).then_some(MetricSample { value, age })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_metrics::spec::MetricSource;
    use wasmsched_runtime::NodeFacts;

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
