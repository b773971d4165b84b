//! NodeMetrics (`cargo bench -p wasmsched-bench --bench node_metrics`):
//! 1. refresh cost at 5,000 nodes with 3 Prometheus metrics: each refresh
//!    is one instant query answered by a local HTTP server with 5,000
//!    series (what Prometheus returns for `avg by (node) (...)`), parsed
//!    and swapped into the cache; time per refresh and memory held;
//! 2. scheduling throughput at 5,000 nodes / 10,000 pods with metrics off
//!    (wasm least-allocated) and on (wasm http-latency reading a cached
//!    metric for every candidate): `wasmsched-bench`'s SchedulingBasic and
//!    WithMetrics workloads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasmsched::node_metrics::prometheus;
use wasmsched::node_metrics::{MetricSource, MetricSpec, MetricsCache};
use wasmsched::sim::SimOptions;
use wasmsched_bench::scheduling_basic::{self, Scoring};

const NODES: usize = 5000;
const PODS: usize = 10000;
const METRICS: [&str; 3] = ["http_latency_seconds", "cpu_load", "price_per_hour"];

fn vector_body(nodes: usize, salt: f64) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let series: Vec<String> = (0..nodes)
        .map(|i| {
            format!(
                r#"{{"metric":{{"node":"node-{i:05}"}},"value":[{now},"{}"]}}"#,
                0.001 + ((i * 7919) % 1000) as f64 / 1000.0 + salt
            )
        })
        .collect();
    format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#, series.join(","))
}

async fn serve(body: Arc<String>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                // Keep-alive: answer every request on the connection.
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if stream.write_all(head.as_bytes()).await.is_err()
                        || stream.write_all(body.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

async fn refresh_cost() {
    let body = Arc::new(vector_body(NODES, 0.0));
    let addr = serve(body.clone()).await;
    let specs = METRICS
        .iter()
        .map(|m| {
            MetricSpec::new(
                m,
                MetricSource::Prometheus {
                    url: format!("http://{addr}"),
                    query: "q".into(),
                    node_label: "node".into(),
                },
                Duration::from_secs(15),
            )
        })
        .collect();
    let cache = Arc::new(MetricsCache::new(specs));
    let http = reqwest::Client::new();
    let rss_before = wasmsched_bench::peak_rss_mib();
    let mut took = Vec::new();
    for round in 0..20 {
        for metric in METRICS {
            let started = Instant::now();
            let fetched = prometheus::query(&http, &format!("http://{addr}"), "q", "node").await.unwrap();
            assert_eq!(fetched.values.len(), NODES);
            cache.update(metric, fetched.values, Instant::now());
            if round > 0 {
                took.push(started.elapsed());
            }
        }
    }
    took.sort();
    let mean = took.iter().sum::<Duration>() / took.len() as u32;
    println!(
        "Refresh at {NODES} nodes: one instant query ({:.0} KiB of JSON) → parse → cache swap: mean {:.2} ms, p99 {:.2} ms per metric; {} metrics every 15 s = {:.3} % of one core",
        body.len() as f64 / 1024.0,
        mean.as_secs_f64() * 1e3,
        took[took.len() * 99 / 100].as_secs_f64() * 1e3,
        METRICS.len(),
        mean.as_secs_f64() * METRICS.len() as f64 / 15.0 * 100.0,
    );
    println!(
        "  peak RSS {:.0} MiB → {:.0} MiB holding {} metrics × {NODES} nodes (plus the parse buffers of one refresh)",
        rss_before,
        wasmsched_bench::peak_rss_mib(),
        METRICS.len()
    );
}

/// Metrics off and on: the `SchedulingBasic` and `WithMetrics` workloads
/// of `wasmsched-bench`.
fn throughput() {
    let results = [
        scheduling_basic::run((NODES, PODS, 0), Scoring::Wasm, None, SimOptions::default()).unwrap(),
        scheduling_basic::run((NODES, PODS, 0), Scoring::WithMetrics, None, SimOptions::default()).unwrap(),
    ];
    println!();
    print!("{}", wasmsched_bench::table(&results));
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(refresh_cost());
    throughput();
}
