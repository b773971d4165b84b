//! kube-scheduler as the oracle for its own metrics: the same pods given
//! to kube-scheduler and to wasmsched (as deploy/'s ServiceAccount), then
//! each family the dashboards, recording rules and alerts written for
//! kube-scheduler read is compared as both export it: its type, its label
//! names, its buckets, and where the scenario fixes them, its label values.

use super::*;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// kube-scheduler's families wasmsched exports under kube's names.
const FAMILIES: &[&str] = &[
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_scheduling_algorithm_duration_seconds",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_pod_scheduling_attempts",
    "scheduler_pending_pods",
    "scheduler_queue_incoming_pods_total",
    "scheduler_unschedulable_pods",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims",
    "scheduler_framework_extension_point_duration_seconds",
    "rest_client_requests_total",
    "rest_client_request_duration_seconds",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
];

/// One family as exported: its type, its samples' label names (`le`
/// aside), the buckets of its first series, and each label's values.
#[derive(Debug, Default)]
struct Exported {
    kind: String,
    labels: BTreeSet<String>,
    buckets: Vec<String>,
    values: BTreeMap<String, BTreeSet<String>>,
}

/// Label pairs of a sample line's `{…}` (values hold no `",`).
fn label_pairs(braces: &str) -> Vec<(String, String)> {
    braces
        .split("\",")
        .filter_map(|pair| {
            let (k, v) = pair.split_once("=\"")?;
            Some((k.trim().to_string(), v.trim_end_matches('"').to_string()))
        })
        .collect()
}

fn exported(text: &str, family: &str) -> Option<Exported> {
    let kind = text.lines().find_map(|l| l.strip_prefix(&format!("# TYPE {family} ")))?;
    let mut found = Exported { kind: kind.to_string(), ..Exported::default() };
    let sample = if kind == "histogram" { format!("{family}_bucket") } else { family.to_string() };
    let mut first_series: Option<Vec<(String, String)>> = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(&sample) else { continue };
        let braces = match rest.strip_prefix('{') {
            Some(labelled) => labelled.rsplit_once("} ").map(|(l, _)| l).unwrap_or_default(),
            None if rest.starts_with(' ') => "",
            None => continue,
        };
        let pairs = label_pairs(braces);
        let series: Vec<(String, String)> = pairs.iter().filter(|(k, _)| k != "le").cloned().collect();
        for (k, v) in &series {
            found.labels.insert(k.clone());
            found.values.entry(k.clone()).or_default().insert(v.clone());
        }
        if first_series.get_or_insert_with(|| series.clone()) == &series
            && let Some((_, le)) = pairs.iter().find(|(k, _)| k == "le")
        {
            found.buckets.push(le.clone());
        }
    }
    Some(found)
}

/// kube-scheduler's `/metrics`, read with the admin's token.
fn scrape_kube_scheduler(real: &Real, url: &str) -> String {
    let curlrc = real.control_plane.state_dir.join("admin.curlrc");
    let out = Command::new("curl").args(["-sfk", "-K"]).arg(&curlrc).arg(format!("{url}/metrics")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Pods `{side}-fits` (placed) and `{side}-huge` (no node has room: an
/// unschedulable attempt, PostFilter run), for `scheduler`.
async fn scenario(real: &Real, side: &str, scheduler: &str) {
    let pod = |cpu: &str| {
        json!({"nodeSelector": {"wasmsched-class": "fam"},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}]})
    };
    let pods = [("fits".to_string(), pod("100m")), ("huge".to_string(), pod("64"))];
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler, Duration::ZERO).await;
    real.wait_bound(&names[0]).await;
}

#[test]
fn wasmsched_exports_kube_schedulers_families_as_kube_scheduler_does() {
    let Some(real) = Real::start("families") else { return };
    let url = real.start_oracle();
    real.block_on(async {
        for n in 0..2 {
            let shape = json!({"labels": {"wasmsched-class": "fam"}, "cpu": "2", "memory": "4Gi", "pods": "20"});
            real.add_node(&format!("fam-{n}"), &shape).await;
        }
        real.settle().await;
        scenario(&real, "k", "default-scheduler").await;
        let ours = start_default_wasmsched(&real, "wasmsched-families").await;
        scenario(&real, "w", "wasmsched-families").await;
        // The huge pods' attempts concluded and the queue gauges were read.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let (kube, wasmsched) = (scrape_kube_scheduler(&real, &url), ours.status.render_metrics());
        for family in FAMILIES {
            let k = exported(&kube, family).unwrap_or_else(|| panic!("kube-scheduler has no {family}"));
            let w = exported(&wasmsched, family).unwrap_or_else(|| panic!("wasmsched has no {family}:\n{wasmsched}"));
            assert_eq!(w.kind, k.kind, "{family}'s type");
            assert_eq!(w.labels, k.labels, "{family}'s labels");
            assert_eq!(w.buckets, k.buckets, "{family}'s buckets");
        }
        // Label values the scenario fixes, as kube-scheduler has them.
        let values = |text: &str, family: &str, label: &str| exported(text, family).unwrap().values[label].clone();
        for (family, label) in [
            ("scheduler_schedule_attempts_total", "result"),
            ("scheduler_pending_pods", "queue"),
            ("scheduler_unschedulable_pods", "plugin"),
            ("scheduler_queue_incoming_pods_total", "event"),
            ("rest_client_requests_total", "method"),
        ] {
            let (k, w) = (values(&kube, family, label), values(&wasmsched, family, label));
            assert!(k.is_subset(&w) || w.is_subset(&k), "{family}{{{label}}}: kube-scheduler {k:?}, wasmsched {w:?}");
            assert!(!w.is_empty(), "{family}{{{label}}}");
        }
        let points = values(&wasmsched, "scheduler_framework_extension_point_duration_seconds", "extension_point");
        let kube_points = values(&kube, "scheduler_framework_extension_point_duration_seconds", "extension_point");
        for point in ["Filter", "Score", "PostFilter", "Bind"] {
            assert!(points.contains(point), "wasmsched times {point}: {points:?}");
        }
        assert!(points.is_subset(&kube_points), "kube's extension points only: {points:?} of {kube_points:?}");
        ours.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;
    });
}
