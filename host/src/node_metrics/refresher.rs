//! Background refresh: one task per polled metric, on its own interval,
//! each refresh bounded by the metric's timeout. A scheduling attempt never
//! waits for any of this. A failing source is logged when it starts
//! failing, then once a minute while it keeps failing, and when it
//! recovers; every failure counts in
//! `wasmsched_metric_source_errors_total`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::cache::MetricsCache;
use super::metrics_server;
use super::prometheus::{self, Fetched};
use super::spec::{MetricSource, MetricSpec};

/// How often a source that keeps failing is logged again.
const REPEAT_LOG: Duration = Duration::from_secs(60);

pub struct Refresher {
    pub cache: Arc<MetricsCache>,
    pub http: reqwest::Client,
    /// For metrics.k8s.io sources.
    pub kube: Option<kube::Client>,
}

impl Refresher {
    /// Starts one task per polled metric; they stop when `shutdown` turns
    /// true.
    pub fn spawn(self, shutdown: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let specs: Vec<MetricSpec> = self.cache.specs().iter().filter(|s| s.source.refreshes()).cloned().collect();
        specs
            .into_iter()
            .map(|spec| {
                let task = RefreshTask {
                    spec,
                    cache: self.cache.clone(),
                    http: self.http.clone(),
                    kube: self.kube.clone(),
                    failing_since: None,
                    last_logged: None,
                    last_warnings: Vec::new(),
                };
                tokio::spawn(task.run(shutdown.clone()))
            })
            .collect()
    }
}

struct RefreshTask {
    spec: MetricSpec,
    cache: Arc<MetricsCache>,
    http: reqwest::Client,
    kube: Option<kube::Client>,
    failing_since: Option<Instant>,
    last_logged: Option<Instant>,
    last_warnings: Vec<String>,
}

impl RefreshTask {
    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(self.spec.refresh);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let result = match tokio::time::timeout(self.spec.timeout, self.fetch()).await {
                Ok(result) => result,
                Err(_) => Err(format!("no answer within the {:?} timeout", self.spec.timeout)),
            };
            self.apply(result);
            self.cache.refresh_attempted(&self.spec.name);
        }
    }

    async fn fetch(&self) -> Result<Fetched, String> {
        match &self.spec.source {
            MetricSource::Prometheus { url, query, node_label } => {
                prometheus::query(&self.http, url, query, node_label).await
            }
            MetricSource::MetricsServer(usage) => match &self.kube {
                Some(client) => metrics_server::node_usage(client, *usage).await,
                None => Err("metrics.k8s.io needs a Kubernetes client".into()),
            },
            MetricSource::Annotation(_) | MetricSource::Label(_) => Ok(Fetched::default()),
        }
    }

    fn apply(&mut self, result: Result<Fetched, String>) {
        let (metric, source) = (&self.spec.name, self.spec.source.kind());
        let now = Instant::now();
        match result {
            Ok(fetched) => {
                if let Some(since) = self.failing_since.take() {
                    tracing::info!(%metric, %source, after = ?since.elapsed(), "metric source recovered");
                }
                // The same skipped series every refresh: say it once.
                if fetched.warnings != self.last_warnings {
                    for w in &fetched.warnings {
                        tracing::warn!(%metric, %source, "{w}");
                    }
                    self.last_warnings = fetched.warnings;
                }
                self.cache.update(metric, fetched.values, now);
            }
            Err(error) => {
                self.cache.refresh_failed(metric);
                let first = self.failing_since.is_none();
                let since = *self.failing_since.get_or_insert(now);
                if first || self.last_logged.is_none_or(|at| at.elapsed() >= REPEAT_LOG) {
                    self.last_logged = Some(now);
                    tracing::warn!(
                        %metric, %source, %error, failing_for = ?since.elapsed(),
                        "refreshing a node metric failed; its values age: stale after {:?}, absent after {:?}",
                        self.spec.ttl, self.spec.max_staleness
                    );
                }
            }
        }
    }
}
