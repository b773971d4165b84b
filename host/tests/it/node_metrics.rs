//! Node metrics for policies, from live sources:
//! - a real Prometheus server (Debian's `prometheus`, started here on
//!   127.0.0.1 with a temporary config and data directory) scraping a tiny
//!   exporter this test runs; the scheduler (through the fake API server)
//!   places pods on the lowest-latency node, follows the exporter when it
//!   changes, and keeps placing pods when Prometheus is gone: on stale
//!   values, then, once they are absent, by the fallback;
//! - a misbehaving "Prometheus" (malformed, slow, partial answers) and
//!   metrics.k8s.io through the fake API server.
//!
//! Under `CI=true` a missing Prometheus binary fails the test.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wasmsched::kubernetes::RunningScheduler;
use wasmsched::kubernetes::config::ProfileConfig;
use wasmsched::node_metrics::refresher::Refresher;
use wasmsched::node_metrics::{MetricSource, MetricSpec, MetricsCache, Usage};
use wasmsched::scheduler::{PolicySet, WeightedPolicy};
use wasmsched_fake_apiserver::FakeApiServer;
use wasmsched_runtime::NodeMetrics;
use wasmsched_runtime::{NodeFacts, NodeTable, PolicyEngine, PolicyLimits, PolicySource};
use wasmsched_test_support::policy_wasm;

use crate::common;

const METRIC: &str = "http_latency_seconds";

/// What a tiny HTTP server answers: status, body, and a delay first.
type Handler = Arc<dyn Fn(&str) -> (u16, String, Duration) + Send + Sync>;

/// Serves `handler` on 127.0.0.1 (one request per connection).
async fn serve(handler: Handler) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let handler = handler.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (status, body, delay) = handler(&path);
                tokio::time::sleep(delay).await;
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

fn prometheus_binary() -> Option<PathBuf> {
    crate::common::prometheus::binary("prometheus")
}

/// Prometheus scraping `target` every second.
async fn start_prometheus(binary: &std::path::Path, target: SocketAddr) -> crate::common::prometheus::Server {
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n- job_name: exporter\n  static_configs: [{{targets: ['{target}']}}]\n"
    );
    crate::common::prometheus::Server::start(binary, &config, &[]).await
}

async fn http_latency() -> PolicySet {
    let engine = PolicyEngine::new().unwrap();
    let source = PolicySource::from_file(&policy_wasm("http-latency")).unwrap();
    let config = format!(r#"{{"metric":"{METRIC}","maxAgeSeconds":600}}"#);
    let policy = engine.load(&source, &config, PolicyLimits::default()).unwrap();
    PolicySet::new(vec![WeightedPolicy::new(Arc::new(policy), 1)])
}

struct Setup {
    fake: FakeApiServer,
    client: Client,
    scheduler: RunningScheduler,
}

async fn setup(metrics: Vec<MetricSpec>, policies: PolicySet) -> Setup {
    let fake = FakeApiServer::start();
    let client = common::client(&fake);
    for i in 0..3 {
        common::big_node(&fake, &format!("n{i}"), json!({}));
    }
    let mut config = common::single_replica(ProfileConfig::with_policies("wasmsched", policies));
    config.node_metrics = metrics;
    let scheduler = common::start_ready(client.clone(), config).await;
    Setup { fake, client, scheduler }
}

impl Setup {
    /// Creates a pod and returns the node it was bound to.
    async fn place(&self, name: &str) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"schedulerName": "wasmsched",
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m"}}}]}}))
            .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let deadline = crate::common::hang_guard();
        loop {
            if let Some(node) = pods.get(name).await.unwrap().spec.and_then(|s| s.node_name) {
                return node;
            }
            assert!(Instant::now() < deadline, "{name} was not placed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn metric_line(&self, family: &str) -> Option<f64> {
        let text = self.scheduler.status.render_metrics();
        let prefix = format!("{family}{{");
        text.lines()
            .find(|l| l.starts_with(&prefix) && l.contains(&format!("metric=\"{METRIC}\"")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    async fn wait_metric(&self, family: &str, ok: impl Fn(f64) -> bool) {
        let deadline = crate::common::hang_guard();
        while !self.metric_line(family).is_some_and(&ok) {
            assert!(Instant::now() < deadline, "{family} never got there: {:?}", self.metric_line(family));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_follow_prometheus_and_survive_it_going_away() {
    let Some(binary) = prometheus_binary() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true and no prometheus binary: .ci/run installs Debian's `prometheus` package");
        }
        eprintln!("SKIPPED: no prometheus binary (apt-get install prometheus); CI=true makes this a failure");
        return;
    };
    let latencies = Arc::new(Mutex::new(BTreeMap::from([("n0", 0.30), ("n1", 0.05), ("n2", 0.20)])));
    let exporter = {
        let latencies = latencies.clone();
        serve(Arc::new(move |_path: &str| {
            let mut body = String::from("# TYPE node_http_latency_seconds gauge\n");
            for (node, v) in latencies.lock().unwrap().iter() {
                body += &format!("node_http_latency_seconds{{node=\"{node}\"}} {v}\n");
            }
            (200, body, Duration::ZERO)
        }))
        .await
    };
    let mut prometheus = start_prometheus(&binary, exporter).await;
    let spec = MetricSpec {
        ttl: Duration::from_secs(2),
        max_staleness: Duration::from_secs(4),
        timeout: Duration::from_secs(1),
        ..MetricSpec::new(
            METRIC,
            MetricSource::Prometheus {
                url: prometheus.url.clone(),
                query: "max by (node) (node_http_latency_seconds)".into(),
                node_label: "node".into(),
            },
            Duration::from_millis(500),
        )
    };
    let s = setup(vec![spec], http_latency().await).await;
    // Prometheus scrapes every second: wait for the first values.
    s.wait_metric("wasmsched_metric_nodes", |n| n == 3.0).await;
    for i in 0..3 {
        assert_eq!(s.place(&format!("fast-{i}")).await, "n1", "n1 has the lowest latency");
    }

    // n2 becomes the fastest: after a scrape and a refresh, pods follow.
    latencies.lock().unwrap().insert("n2", 0.01);
    let deadline = crate::common::hang_guard();
    let mut i = 0;
    loop {
        let node = s.place(&format!("follow-{i}")).await;
        if node == "n2" {
            break;
        }
        assert!(Instant::now() < deadline, "placements never followed the exporter");
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Prometheus goes away: refreshes fail and are counted; pods are still
    // placed on the (stale) values, then by the fallback once they are absent.
    prometheus.stop();
    s.wait_metric("wasmsched_metric_source_errors_total", |n| n >= 1.0).await;
    assert_eq!(s.place("stale").await, "n2", "stale values are still used");
    s.wait_metric("wasmsched_metric_nodes", |n| n == 0.0).await;
    let age = s.metric_line("wasmsched_metric_age_seconds").unwrap();
    // A value ages from when it was observed, a moment before the refresh
    // that fetched it ended, which is what the age gauge counts from: the
    // values went absent only past maxStaleness (4 s), the gauge can read a
    // hair under it.
    assert!(age >= 3.9, "age {age}");
    s.place("absent").await;
    let events: Api<Event> = Api::namespaced(s.client.clone(), "default");
    let deadline = crate::common::hang_guard();
    let note = loop {
        let list = events.list(&ListParams::default()).await.unwrap();
        if let Some(e) = list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("PolicyFallback")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("absent")
        }) {
            break e.note.unwrap_or_default();
        }
        assert!(Instant::now() < deadline, "no PolicyFallback event for the pod placed without metrics");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(note.contains("has no sample younger than"), "{note}");
    let _ = &s.fake;
    s.scheduler.shutdown().await;
}

/// A source that answers garbage, holds its answer, or forgets nodes: each
/// refresh fails (or skips what it must) with a count, and reads never wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_answers_are_counted_and_reads_never_wait() {
    let mode = Arc::new(Mutex::new("partial"));
    let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = {
        let (mode, held) = (mode.clone(), held.clone());
        serve(Arc::new(move |_path: &str| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
            let vector = |series: &str| {
                format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{series}]}}}}"#)
            };
            match *mode.lock().unwrap() {
                "partial" => {
                    (200, vector(&format!(r#"{{"metric":{{"node":"a"}},"value":[{now},"0.5"]}}"#)), Duration::ZERO)
                }
                "malformed" => (200, "<html>oops</html>".into(), Duration::ZERO),
                "error" => (
                    400,
                    r#"{"status":"error","errorType":"bad_data","error":"1:5: parse error"}"#.into(),
                    Duration::ZERO,
                ),
                // Held past the end of the test: never answered while it reads.
                _ => {
                    held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    (200, vector(""), Duration::from_secs(24 * 3600))
                }
            }
        }))
        .await
    };
    let spec = MetricSpec {
        timeout: Duration::from_millis(300),
        ..MetricSpec::new(
            METRIC,
            MetricSource::Prometheus { url: format!("http://{server}"), query: "q".into(), node_label: "node".into() },
            Duration::from_millis(100),
        )
    };
    let cache = Arc::new(MetricsCache::new(vec![spec]));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    Refresher { cache: cache.clone(), http: reqwest::Client::new(), kube: None }.spawn(stop_rx);
    let mut table = NodeTable::new();
    let a = table.upsert(NodeFacts { name: "a".into(), ..Default::default() });
    let b = table.upsert(NodeFacts { name: "b".into(), ..Default::default() });

    let deadline = crate::common::hang_guard();
    while cache.samples(METRIC, &table, &[a])[0].is_none() {
        assert!(Instant::now() < deadline, "no value for a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cache.samples(METRIC, &table, &[b])[0], None, "b is missing from the answer");
    assert_eq!(cache.errors(METRIC), 0);

    for (bad, expected_errors) in [("malformed", 1), ("error", 1), ("held", 1)] {
        let before = cache.errors(METRIC);
        *mode.lock().unwrap() = bad;
        let deadline = crate::common::hang_guard();
        while cache.errors(METRIC) < before + expected_errors {
            let _ = cache.samples(METRIC, &table, &[a, b]);
            assert!(Instant::now() < deadline, "{bad}: no error counted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // The source now holds every request it gets and answers none while the
    // test runs; a refresh is waiting on it. A read that waited for the
    // source would never return, so returning at all shows it answers from
    // memory.
    assert!(held.load(std::sync::atomic::Ordering::SeqCst) > 0, "a refresh reached the held source");
    let read = {
        let (cache, table) = (cache.clone(), table.clone());
        crate::common::returns("a read while the source holds its answer", move || {
            cache.samples(METRIC, &table, &[a, b])
        })
    };
    assert_eq!(read.len(), 2);
    let text = cache.render();
    assert!(
        text.contains(&format!("wasmsched_metric_source_errors_total{{source=\"prometheus\",metric=\"{METRIC}\"}}"))
    );
    stop_tx.send_replace(true);
}

/// metrics.k8s.io NodeMetrics through the (fake) API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_usage_from_metrics_k8s_io() {
    let fake = FakeApiServer::start();
    let ts = jiff::Timestamp::now().to_string();
    for (node, cpu) in [("a", "250m"), ("b", "1500m")] {
        fake.create(
            "metrics.k8s.io/v1beta1",
            "nodes",
            "",
            json!({"metadata": {"name": node}, "timestamp": ts, "window": "10s", "usage": {"cpu": cpu, "memory": "1Gi"}}),
        );
    }
    let client = Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
    let cache = Arc::new(MetricsCache::new(vec![MetricSpec::new(
        "cpu",
        MetricSource::MetricsServer(Usage::Cpu),
        Duration::from_millis(100),
    )]));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    Refresher { cache: cache.clone(), http: reqwest::Client::new(), kube: Some(client) }.spawn(stop_rx);
    let mut table = NodeTable::new();
    let ids = [
        table.upsert(NodeFacts { name: "a".into(), ..Default::default() }),
        table.upsert(NodeFacts { name: "b".into(), ..Default::default() }),
    ];
    let deadline = crate::common::hang_guard();
    loop {
        let s = cache.samples("cpu", &table, &ids);
        if let [Some(a), Some(b)] = s[..] {
            assert_eq!((a.value, b.value), (250.0, 1500.0));
            break;
        }
        assert!(Instant::now() < deadline, "no usage: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_tx.send_replace(true);
}
