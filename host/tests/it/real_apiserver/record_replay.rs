//! Record and replay on the real API server: wasmsched, as deploy/'s
//! ServiceAccount, records a run (`RunConfig.record`, as `--record` sets
//! it); `wasmsched simulate --replay` of that recording with the same
//! policy decides every attempt as recorded and ends where the cluster
//! ended, pod for pod; with another policy it reports where it differs.

use super::*;
use wasmsched::record::RecordSettings;

/// A single replica of `profile` recording into `dir`, within `max_bytes`.
fn recording(
    profile: &str,
    policies: PolicySet,
    dir: &std::path::Path,
    max_bytes: u64,
) -> wasmsched::kubernetes::RunConfig {
    let mut config = common::single_replica(ProfileConfig::with_policies(profile, policies));
    config.tenants.settings.enabled = false;
    config.record = Some(RecordSettings { dir: dir.to_path_buf(), max_bytes, profiles: vec![profile.into()], seed: 0 });
    // A candidate's live counts are compared with a replay's, which drops
    // nothing.
    common::every_shadow_attempt(&mut config);
    config
}

/// A pod for the nodes of `class`, asking for `cpu`.
fn class_pod(class: &str, cpu: &str) -> Value {
    json!({"nodeSelector": {"wasmsched-class": class},
           "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}]})
}

/// Four nodes with prices for `cheapest`; a stream of pods of mixed
/// sizes (two too large for any node), some deleted halfway.
async fn recorded_run(real: &Real, dir: &std::path::Path, policies: PolicySet) -> (Vec<(String, String)>, Value) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::api::DeleteParams;
    for (n, cpu, cost) in [("a", "6", "3"), ("b", "6", "1"), ("c", "8", "2"), ("d", "4", "4")] {
        let shape =
            json!({"labels": {"wasmsched-class": "rec"}, "spec": {}, "cpu": cpu, "memory": "16Gi", "pods": "110"});
        real.add_node(n, &shape).await;
        real.annotate_node(n, "hightower.com/cost", cost).await;
    }
    let scheduler = real.start_wasmsched(recording("wasmsched-rec", policies, dir, 1 << 30)).await;
    let pod = |cpu: &str| class_pod("rec", cpu);
    let sizes = ["500m", "1", "250m", "2", "750m", "9", "1500m", "100m", "1", "300m"];
    let first: Vec<(String, Value)> = (0..20).map(|i| (format!("p{i:02}"), pod(sizes[i % sizes.len()]))).collect();
    // Spaced, as a cluster's pods arrive.
    let names = real.create_pods("rec-", &first, "wasmsched-rec", Duration::from_millis(100)).await;
    real.wait_decided(&names).await;
    let api: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    for name in names.iter().step_by(4) {
        api.delete(name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    }
    let second: Vec<(String, Value)> = (20..30).map(|i| (format!("p{i:02}"), pod(sizes[i % sizes.len()]))).collect();
    let more = real.create_pods("rec-", &second, "wasmsched-rec", Duration::from_millis(100)).await;
    real.wait_decided(&more).await;
    let experiments = settled_experiments(&scheduler).await;
    scheduler.shutdown().await;
    (cluster_end(real).await, experiments)
}

/// Where the cluster's pods ended (`namespace/pod`, node), sorted; then
/// the pods and nodes go.
async fn cluster_end(real: &Real) -> Vec<(String, String)> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::api::ListParams;
    let api: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
    let mut placed: Vec<(String, String)> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| Some((format!("{}/{}", real.namespace, p.metadata.name?), p.spec?.node_name?)))
        .collect();
    placed.sort();
    real.delete_pods().await;
    real.delete_nodes().await;
    placed
}

/// The live shadow counts once the shadow worker has caught up (they
/// stay the same for a second).
async fn settled_experiments(scheduler: &wasmsched::kubernetes::RunningScheduler) -> Value {
    let counts =
        || serde_json::to_value(scheduler.status.experiments().candidates().cloned().collect::<Vec<_>>()).unwrap();
    let deadline = crate::common::hang_guard();
    let mut last = counts();
    let mut since = std::time::Instant::now();
    while since.elapsed() < Duration::from_secs(1) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = counts();
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        }
    }
    last
}

fn replay(dir: &std::path::Path, policy: Option<&std::path::Path>) -> Value {
    replay_with(dir, policy.map(|p| ("--policy", p.display().to_string())))
}

fn replay_with(dir: &std::path::Path, flag: Option<(&str, String)>) -> Value {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"));
    command.args(["simulate", "--replay"]).arg(dir).args(["--output", "json"]);
    if let Some((flag, value)) = flag {
        command.arg(flag).arg(value);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_recorded_run_replays_to_the_same_decisions_and_another_policy_shows_its_divergence() {
    let Some(real) = Real::start("record") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (cluster_end, _) = real.block_on(recorded_run(&real, dir.path(), default_policies()));
    assert_eq!(cluster_end.len(), 22, "15 of the first 20 left, 10 more, 3 too large: {cluster_end:?}");

    let same = replay(dir.path(), None);
    let attempts = same["attempts"].as_u64().unwrap();
    assert!(attempts >= 30, "every pod was attempted at least once: {same}");
    assert_eq!(same["agreed"].as_u64(), Some(attempts), "{}", same["divergences"]);
    let placed: Vec<(String, String)> = serde_json::from_value(same["placed"].clone()).unwrap();
    assert_eq!(placed, cluster_end, "the replay ends where the cluster ended");

    let cheapest = wasmsched_test_support::policy_wasm("cheapest");
    let other = replay(dir.path(), Some(&cheapest));
    let divergences = other["divergences"].as_array().unwrap();
    assert!(!divergences.is_empty() && other["agreed"].as_u64() < Some(attempts), "{other}");
    let placed: Vec<(String, String)> = serde_json::from_value(other["placed"].clone()).unwrap();
    // `compare` on the recording reports the same divergence: the pods
    // whose place at the end differs between the two replays.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"));
    command.args(["compare", "--replay"]).arg(dir.path()).args(["--variant", "recorded=embedded", "--variant"]);
    let out = command.arg(format!("cheapest={}", cheapest.display())).args(["--output", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let compared: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ends = |report: &Value| -> std::collections::BTreeMap<String, String> {
        serde_json::from_value::<Vec<(String, String)>>(report["placed"].clone()).unwrap().into_iter().collect()
    };
    let (recorded, other_ends) = (ends(&same), ends(&other));
    let pods: std::collections::BTreeSet<&String> = recorded.keys().chain(other_ends.keys()).collect();
    let moved = pods.into_iter().filter(|p| recorded.get(*p) != other_ends.get(*p)).count();
    assert!(moved > 0);
    assert_eq!(compared["summaries"][1]["placedDifferently"].as_u64(), Some(moved as u64), "{compared}");
    // The costliest node, d, is cheapest's last resort: the pods fit
    // elsewhere, where least-allocated spread some onto it.
    let on_d = |placed: &[(String, String)]| placed.iter().filter(|(_, node)| node.ends_with("-d")).count();
    assert!(on_d(&placed) == 0 && on_d(&cluster_end) > 0, "{placed:?} against {cluster_end:?}");
}

/// A shadow candidate's live counts (`/experiments`) are what a replay of
/// the run's recording with the same candidate counts.
#[test]
fn a_candidates_live_counts_are_what_the_replay_of_its_recording_counts() {
    let Some(real) = Real::start("record-shadow") else { return };
    let dir = tempfile::tempdir().unwrap();
    let cheapest = wasmsched_test_support::policy_wasm("cheapest");
    let spec = format!("{},replaces=least-allocated", cheapest.display());
    let mut policies = default_policies();
    let engine = wasmsched_runtime::PolicyEngine::new().unwrap();
    let fetcher = wasmsched::policy::remote::Fetcher::new(None);
    let candidate =
        wasmsched::policy::flags::load_candidate(&spec, &engine, &PolicyLimits::default(), &fetcher).unwrap();
    policies.candidates = vec![candidate];
    let (_, live) = real.block_on(recorded_run(&real, dir.path(), policies));
    let live = &live[0];
    assert_eq!(live["dropped"], 0, "the shadow worker kept up: {live}");
    assert!(live["differ"].as_u64() > Some(0) && live["agree"].as_u64() > Some(0), "{live}");

    let replayed = replay_with(dir.path(), Some(("--candidate", spec)));
    let counts = &replayed["experiments"][0];
    for field in ["seen", "agree", "ties", "differ", "wouldLeavePending", "wouldPlace", "failures", "ranked", "rankSum"]
    {
        assert_eq!(counts[field], live[field], "{field}: replayed {counts} against live {live}");
    }
}

/// A tenant's pods in a recording: handed to the tenant's policy and
/// decided by its verdict. Replayed with that policy (`--tenant-policy`),
/// every attempt decides as recorded; without it, the report says which
/// policy was missing, and the pods it decided are decided otherwise.
#[test]
fn a_tenants_pods_replay_to_their_policys_decisions() {
    let Some(real) = Real::start("record-tenant") else { return };
    let dir = tempfile::tempdir().unwrap();
    let ns = real.namespace.clone();
    let cluster_end = real.block_on(async {
        super::policies::on_demand_and_spot(&real, "rect").await;
        let mut config = recording("wasmsched-rect", default_policies(), dir.path(), 1 << 30);
        config.tenants.settings.enabled = true;
        let scheduler = real.start_wasmsched(config).await;
        real.put_configmap("mine", &[("spot-first.wasm", real::wasm("spot-first"))], true).await;
        real.wait_configmap_event("mine", "PolicyAccepted").await;
        let spec = class_pod("rect", "1");
        let mut names = Vec::new();
        for round in 0..4 {
            let plain: Vec<(String, Value)> = (0..3).map(|i| (format!("p{round}{i}"), spec.clone())).collect();
            names.extend(real.create_pods("", &plain, "wasmsched-rect", Duration::ZERO).await);
            let prefix = format!("t{round}");
            names.extend(real.create_annotated_pods(&prefix, 3, &spec, "wasmsched-rect", "spot-first").await);
        }
        let placed = real.wait_decided(&names).await;
        scheduler.shutdown().await;
        let mut end: Vec<(String, String)> = placed
            .into_iter()
            .filter_map(|p| Some((format!("{ns}/{}", p.metadata.name?), p.spec?.node_name?)))
            .collect();
        end.sort();
        real.delete_pods().await;
        real.delete_nodes().await;
        end
    });
    assert_eq!(cluster_end.len(), 24, "{cluster_end:?}");
    let journal = std::fs::read_to_string(dir.path().join("journal-000001.jsonl")).unwrap();
    assert!(journal.contains("\"tenantPolicies\"") && journal.contains("\"evaluate\""), "no tenant entries recorded");

    let tenant_policy = format!("{ns}/spot-first={}", wasmsched_test_support::policy_wasm("spot-first").display());
    let same = replay_args(dir.path(), &["--tenant-policy", &tenant_policy]);
    let attempts = same["attempts"].as_u64().unwrap();
    assert!(attempts >= 24, "{same}");
    assert_eq!(same["agreed"].as_u64(), Some(attempts), "{}", same["divergences"]);
    let placed: Vec<(String, String)> = serde_json::from_value(same["placed"].clone()).unwrap();
    assert_eq!(placed, cluster_end, "the replay ends where the cluster ended");
    assert!(same["notes"].is_null(), "{}", same["notes"]);

    let without = replay_args(dir.path(), &[]);
    let notes = without["notes"].to_string();
    assert!(notes.contains(&format!("tenant policy {ns}/spot-first was not supplied")), "{notes}");
    assert!(!without["divergences"].as_array().unwrap().is_empty(), "{without}");
}

/// Whether the recording, as a replay reads it now, attempts a pod whose
/// name holds `marker` after its opening snapshot.
fn attempted_after_snapshot(dir: &std::path::Path, marker: &str) -> bool {
    let Ok(journal) = wasmsched::record::read_journal(dir) else { return false };
    let skip = journal.header.snapshot_lines;
    journal.header.segment > 1
        && journal
            .lines()
            .skip(skip)
            .filter_map(Result::ok)
            .any(|line| matches!(line.entry, wasmsched::record::Entry::Attempt(a) if a.pod.contains(marker)))
}

fn replay_args(dir: &std::path::Path, args: &[&str]) -> Value {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"));
    let out = command.args(["simulate", "--replay"]).arg(dir).args(["--output", "json"]).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A recording past its bound has lost its first files and starts from a
/// snapshot, with pods then waiting whose waits it never saw (two too
/// large for any node: new pods are decided before them, and they are
/// tried again when pods are deleted), and with nodes whose ids are not
/// the order of their names. Replayed with the recorded policy, from its
/// first file kept or from any later file's snapshot, every attempt still
/// decides as recorded.
#[test]
fn a_recording_that_lost_its_first_files_replays_exactly_from_its_snapshot() {
    let Some(real) = Real::start("record-pruned") else { return };
    // Kept when an assertion fails: the recording is what says why.
    let dir = tempfile::tempdir().unwrap().keep();
    real.block_on(async {
        use k8s_openapi::api::core::v1::Pod;
        use kube::Api;
        use kube::api::DeleteParams;
        let config = recording("wasmsched-prune", default_policies(), &dir, 2 << 20);
        let scheduler = real.start_wasmsched(config).await;
        // Created while it watches, out of their names' order: the core's
        // node ids are not the order the snapshot lists the nodes in (a
        // list is sorted by name), and equal nodes tie.
        for n in ["c", "a", "b"] {
            let shape = json!({"labels": {"wasmsched-class": "prune"}, "spec": {}, "cpu": "16", "memory": "16Gi", "pods": "1000"});
            real.add_node(n, &shape).await;
        }
        let pod = |cpu: &str| class_pod("prune", cpu);
        let big: Vec<(String, Value)> = (0..2).map(|i| (format!("big{i}"), pod("64"))).collect();
        real.create_pods("", &big, "wasmsched-prune", Duration::ZERO).await;
        // Until the first file is gone: how many pods that takes depends
        // on what else the cluster holds (every object is in a snapshot).
        let mut names = Vec::new();
        for round in 0.. {
            assert!(round < 12, "the first file outlived 12 rounds in {}", dir.display());
            let batch: Vec<(String, Value)> = (0..120).map(|i| (format!("r{round}-{i:03}"), pod("10m"))).collect();
            names.extend(real.create_pods("", &batch, "wasmsched-prune", Duration::ZERO).await);
            real.wait_decided(&names).await;
            tokio::time::sleep(Duration::from_millis(600)).await;
            if !dir.join("journal-000001.jsonl").exists() {
                break;
            }
        }
        // New pods decided after the snapshot the recording now starts
        // from, while the large pods wait: the replay must not try those
        // first. (A batch the writer rotated past is followed by another.)
        for k in 0.. {
            assert!(k < 5, "no batch landed after the recording's snapshot in {}", dir.display());
            let batch: Vec<(String, Value)> = (0..10).map(|i| (format!("z{k}-{i}"), pod("10m"))).collect();
            names.extend(real.create_pods("", &batch, "wasmsched-prune", Duration::ZERO).await);
            real.wait_decided(&names).await;
            tokio::time::sleep(Duration::from_millis(1200)).await;
            if attempted_after_snapshot(&dir, &format!("/z{k}-")) {
                break;
            }
        }
        // Deletions: the large pods are tried again, as the snapshot's
        // waiting pods.
        let api: Api<Pod> = Api::namespaced(real.admin.clone(), &real.namespace);
        let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
        for name in names.iter().step_by(60) {
            api.delete(name, &now).await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        real.settle().await;
        scheduler.shutdown().await;
        real.delete_pods().await;
        real.delete_nodes().await;
    });
    // From the first file kept, and from each later file's snapshot.
    let files = std::fs::read_dir(&dir).unwrap().count();
    for k in 0..files {
        let from = replay_from(&dir, k);
        let same = replay(&from, None);
        let attempts = same["attempts"].as_u64().unwrap();
        assert!(k > 0 || attempts > 0, "{files} files in {}: {same}", dir.display());
        let divergences = same["divergences"].as_array().unwrap();
        let first: Vec<&Value> = divergences.iter().take(3).collect();
        let kept = dir.display();
        assert_eq!(
            same["agreed"].as_u64(),
            Some(attempts),
            "{kept}, from file {k} of {files}: {} divergences, the first: {first:?}",
            divergences.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The recording in `dir` without its first `skip` files, as a recording
/// past a smaller bound would be.
fn replay_from(dir: &std::path::Path, skip: usize) -> std::path::PathBuf {
    if skip == 0 {
        return dir.to_path_buf();
    }
    let mut files: Vec<_> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    files.sort();
    let from = dir.join(format!("from-{skip}"));
    std::fs::create_dir(&from).unwrap();
    for file in &files[skip..] {
        std::fs::copy(file, from.join(file.file_name().unwrap())).unwrap();
    }
    from
}

/// Gangs in a recording (on the kit with the gang gates on): a gang that
/// fits, one that does not, and one held below its quorum. The replay
/// runs the same group cycles, member by member as recorded, and ends
/// where the cluster ended.
#[test]
fn a_recording_with_gangs_replays_their_group_cycles() {
    let Some(real) = Real::start_gated("record-gangs") else { return };
    let dir = tempfile::tempdir().unwrap();
    let cluster_end = real.block_on(async {
        for n in ["a", "b", "c"] {
            let shape = json!({"labels": {"wasmsched-class": "recg"}, "cpu": "4", "memory": "8Gi", "pods": "110"});
            real.add_node(n, &shape).await;
        }
        let scheduler =
            real.start_wasmsched(recording("wasmsched-recg", default_policies(), dir.path(), 1 << 30)).await;
        let mut decided = Vec::new();
        for (group, min_count, members) in [("fits", 3, 3), ("too-big", 2, 2), ("held", 3, 1)] {
            super::gangs::group(&real, group, min_count).await;
            let member = super::gangs::member("recg", group);
            let pods: Vec<(String, Value)> = (1..=members).map(|i| (format!("{group}-{i}"), member.clone())).collect();
            let names = real.create_pods("", &pods, "wasmsched-recg", Duration::from_millis(50)).await;
            if group != "held" {
                real.wait_decided(&names).await;
                decided.extend(names);
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        scheduler.shutdown().await;
        cluster_end(&real).await
    });
    assert_eq!(cluster_end.len(), 3, "the gang that fits, alone: {cluster_end:?}");
    let same = replay(dir.path(), None);
    let attempts = same["attempts"].as_u64().unwrap();
    assert!(attempts >= 5, "the two gangs' members, once each at least: {same}");
    assert_eq!(same["agreed"].as_u64(), Some(attempts), "{}", same["divergences"]);
    let placed: Vec<(String, String)> = serde_json::from_value(same["placed"].clone()).unwrap();
    assert_eq!(placed, cluster_end, "the replay ends where the cluster ended");
    let pending: Vec<String> =
        same["pending"].as_array().unwrap().iter().map(|p| p["pod"].as_str().unwrap().to_string()).collect();
    assert_eq!(pending.len(), 3, "the gang too big, and the held member: {pending:?}");
}
