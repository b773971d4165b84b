//! A cluster dump read as a stream (`simulate`): JSON, YAML, a multi-
//! document YAML stream and the same gzipped decide alike, and as the
//! same objects held whole would; the core takes each bound pod as it is
//! read. At Kubernetes' own limits (5,000 nodes, 150,000 pods) the dump
//! is simulated to its end: the result is asserted, the time and memory
//! are docs/benchmarks.md's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmsched::scheduler::PolicySet;
use wasmsched::sim::{Manifests, SimOptions, SimReport, Simulation, simulate};
use wasmsched_runtime::NoMetrics;

/// A dump as `kubectl get ... -o json` writes it: one `List` of nodes in
/// three zones, `bound` pods spread over them (two containers, a
/// ReplicaSet owner, a port), `pending` pods of ours, a PodDisruptionBudget
/// over the first app's pods and, after the pods that name it, a
/// PriorityClass.
fn write_dump(path: &Path, nodes: usize, bound: usize, pending: usize) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(out, r#"{{"apiVersion":"v1","kind":"List","items":["#).unwrap();
    for i in 0..nodes {
        write!(
            out,
            r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"node-{i:05}","labels":{{"kubernetes.io/hostname":"node-{i:05}","topology.kubernetes.io/zone":"zone-{z}"}}}},"status":{{"allocatable":{{"cpu":"64","memory":"256Gi","pods":"110"}}}}}},"#,
            z = i % 3
        )
        .unwrap();
    }
    for j in 0..bound + pending {
        let node = if j < bound { format!(r#""nodeName":"node-{:05}","#, j % nodes) } else { String::new() };
        // One bound pod in a thousand names the class that comes last.
        let class = if j % 1000 == 7 { r#""priorityClassName":"batch","# } else { r#""priority":0,"# };
        write!(
            out,
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"app-{a:05}-{j:06}","namespace":"ns-{n}","uid":"pod-{j}","labels":{{"app":"app-{a:05}"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-{a:05}","uid":"rs-{a}","controller":true}}]}},"spec":{{"schedulerName":"wasmsched",{node}{class}"containers":[{{"name":"main","image":"registry.example.com/app-{img}:v1","ports":[{{"containerPort":8080}}],"resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}}}}}},{{"name":"sidecar","image":"registry.example.com/proxy:v2","resources":{{"requests":{{"cpu":"50m","memory":"64Mi"}}}}}}]}}}},"#,
            a = j / 30,
            n = j % 50,
            img = j % 200
        )
        .unwrap();
    }
    write!(
        out,
        r#"{{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{{"name":"first","namespace":"ns-0"}},"spec":{{"minAvailable":1,"selector":{{"matchLabels":{{"app":"app-00000"}}}}}}}},"#
    )
    .unwrap();
    write!(
        out,
        r#"{{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{{"name":"batch"}},"value":0}}]}}"#
    )
    .unwrap();
}

/// The dump simulated as the CLI does: each bound pod taken by the core
/// as it is read.
fn streamed(path: &Path) -> SimReport {
    let options = SimOptions::default();
    let mut simulation = Simulation::new(PolicySet::default(), Arc::new(NoMetrics), &options);
    let mut manifests = Manifests::default();
    manifests.add_paths_taking(&[path.to_path_buf()], &mut |pod| simulation.take_bound(pod)).unwrap();
    manifests.admit_priorities();
    assert!(manifests.problems.is_empty(), "{:?}", manifests.problems);
    simulation.run(manifests, &options).unwrap()
}

/// The same dump held whole, then simulated.
fn held(path: &Path) -> SimReport {
    let mut manifests = Manifests::read_paths(&[path.to_path_buf()]).unwrap();
    manifests.admit_priorities();
    assert!(manifests.problems.is_empty(), "{:?}", manifests.problems);
    simulate(manifests, PolicySet::default(), Arc::new(NoMetrics), &SimOptions::default()).unwrap()
}

fn decisions(report: &SimReport) -> Vec<(String, String)> {
    let mut placed: Vec<(String, String)> = report.placements.iter().map(|p| (p.pod.clone(), p.node.clone())).collect();
    placed.sort();
    placed
}

/// `json` as YAML (one document), as a stream of documents, and both
/// JSON and the stream gzipped.
fn variants(dir: &Path, json: &Path) -> Vec<PathBuf> {
    let list: serde_yaml::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    let yaml = dir.join("cluster.yaml");
    std::fs::write(&yaml, serde_yaml::to_string(&list).unwrap()).unwrap();
    let items = list["items"].as_sequence().unwrap();
    let stream: String = items.iter().map(|i| format!("---\n{}", serde_yaml::to_string(i).unwrap())).collect();
    let multi = dir.join("multi.yaml");
    std::fs::write(&multi, &stream).unwrap();
    let gzip = |from: &Path, to: PathBuf| {
        let mut encoder = flate2::write::GzEncoder::new(std::fs::File::create(&to).unwrap(), Default::default());
        encoder.write_all(&std::fs::read(from).unwrap()).unwrap();
        encoder.finish().unwrap();
        to
    };
    let json_gz = gzip(json, dir.join("cluster.json.gz"));
    let multi_gz = gzip(&multi, dir.join("multi.yaml.gz"));
    vec![json.to_path_buf(), yaml, multi, json_gz, multi_gz]
}

#[test]
fn every_format_streamed_decides_as_the_dump_held_whole() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cluster.json");
    write_dump(&json, 60, 3_000, 120);
    let whole = held(&json);
    assert_eq!((whole.bound_before, whole.placements.len()), (3_000, 120), "{:?}", whole.unschedulable);
    for path in variants(dir.path(), &json) {
        let report = streamed(&path);
        assert_eq!(report.bound_before, whole.bound_before, "{}", path.display());
        assert_eq!(decisions(&report), decisions(&whole), "{}", path.display());
    }
}

/// Kubernetes' own limits: 5,000 nodes, 150,000 bound pods, 1,000 to
/// place. What is asserted is the result; the peak memory and the time
/// are measured in docs/benchmarks.md.
#[test]
fn a_dump_at_kubernetes_limits_is_simulated_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cluster.json");
    write_dump(&json, 5_000, 150_000, 1_000);
    let report = streamed(&json);
    assert_eq!(report.nodes, 5_000);
    assert_eq!(report.bound_before, 150_000);
    assert_eq!(report.placements.len(), 1_000, "{:?}", report.unschedulable.first());
}
