//! `wasmsched simulate` as a user runs it.

use std::process::{Command, Output};

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).arg("simulate").args(args).output().expect("run wasmsched")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The table without its first line, which carries the wall time.
fn without_timing(table: &str) -> String {
    table.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n"
}

#[test]
fn the_bundled_scenario_runs_with_no_files_and_matches_its_golden_output() {
    let out = simulate(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("Scheduled 25 of 29 pending pods onto 10 nodes in "), "{text}");
    assert!(text.contains("policies: least-allocated 0.1.0 (embedded)"), "{text}");
    let golden = include_str!("golden/default-scenario.txt");
    assert_eq!(
        without_timing(&text),
        golden,
        "the bundled scenario's output changed; if on purpose, update host/tests/it/golden/default-scenario.txt"
    );
    // The same seed gives the same run; placements are data, not luck.
    assert_eq!(without_timing(&stdout(&simulate(&["--seed", "0"]))), golden);
}

#[test]
fn json_output_is_stable_for_a_seed() {
    let a: serde_json::Value = serde_json::from_slice(&simulate(&["--seed", "42", "--output", "json"]).stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&simulate(&["--seed", "42", "--output", "json"]).stdout).unwrap();
    assert_eq!(a["placements"], b["placements"]);
    assert_eq!(a["placements"].as_array().unwrap().len(), 25);
    let postgres = a["unschedulable"].as_array().unwrap().iter().find(|u| u["pod"] == "data/postgres-0").unwrap();
    assert!(postgres["message"].as_str().unwrap().starts_with("0/10 nodes are available: "));
}

#[test]
fn yaml_output_is_the_placed_pods_with_node_names() {
    let out = simulate(&["--output", "yaml"]);
    assert!(out.status.success());
    let text = stdout(&out);
    // kubectl's short flag says the same.
    assert_eq!(stdout(&simulate(&["-o", "yaml"])), text);
    let mut pods = 0;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let pod: k8s_openapi::api::core::v1::Pod = serde::Deserialize::deserialize(doc).unwrap();
        assert!(pod.spec.unwrap().node_name.is_some());
        pods += 1;
    }
    assert_eq!(pods, 25);
    assert!(text.contains("kind: Pod") && text.contains("apiVersion: v1"));
}

#[test]
fn explain_shows_every_node_and_why() {
    let out = simulate(&["--explain", "shop/api-1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.starts_with("Pod shop/api-1 — attempt 1: 10 nodes, 2 feasible after built-in filters"), "{text}");
    assert!(text.contains("rejected by built-in: node(s) didn't match Pod's node affinity/selector"), "{text}");
    for part in ["TaintToleration ×3", "NodeResourcesBalancedAllocation ×1", "ImageLocality ×1", "least-allocated ×1"]
    {
        assert!(text.contains(part), "the explanation lacks {part}: {text}");
    }
    let without = stdout(&simulate(&["--explain", "shop/api-1", "--disable-builtin-score", "*"]));
    assert!(!without.contains("TaintToleration") && without.contains("least-allocated ×1"), "{without}");
    let unknown = simulate(&["--disable-builtin-score", "Spreading"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("unknown built-in score \"Spreading\"; known: TaintToleration,"),
        "{}",
        stderr(&unknown)
    );
    let unplaced = stdout(&simulate(&["--explain", "postgres-0"]));
    assert!(unplaced.contains("Not placed: 0/10 nodes are available:"), "{unplaced}");
    let missing = simulate(&["--explain", "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("--explain nope: no pending pod"), "{}", stderr(&missing));
}

/// Several pods are explained in one run, in the order asked, each as
/// alone; the ones not attempted are named together.
#[test]
fn explain_takes_several_pods_in_the_order_asked() {
    // The attempt's own time differs from run to run.
    let untimed = |text: String| {
        let line =
            |l: &str| l.split_once(" in ").filter(|_| l.starts_with("Chosen: ")).map_or(l, |(c, _)| c).to_string();
        text.lines().map(line).collect::<Vec<_>>().join("\n")
    };
    let alone = |pod: &str| stdout(&simulate(&["--explain", pod]));
    let both = simulate(&["--explain", "postgres-0,shop/api-1"]);
    assert!(both.status.success(), "{}", stderr(&both));
    assert_eq!(untimed(stdout(&both)), untimed(format!("{}\n{}", alone("postgres-0"), alone("shop/api-1"))));
    let repeated = stdout(&simulate(&["--explain", "shop/api-1", "--explain", "postgres-0"]));
    assert!(repeated.starts_with("Pod shop/api-1 — ") && repeated.contains("\nPod "), "{repeated}");
    let missing = simulate(&["--explain", "nope,shop/api-1,gone"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("--explain nope,gone: no pending pod"), "{}", stderr(&missing));
}

#[test]
fn malformed_manifests_stop_before_scheduling_unless_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(
        &file,
        "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '10'}}\n---\nkind: Pod\nmetadata: {name: ok}\nspec: {schedulerName: wasmsched, containers: [{name: c}]}\n---\nkind: Pod\nmetadata: {name: broken}\nspec: {containers: 7}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let out = simulate(&[path]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty(), "nothing is scheduled: {}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("error: {path}: document 3: not a valid Pod")), "{err}");
    assert!(err.contains("1 invalid document(s); nothing was scheduled"), "{err}");

    let out = simulate(&[path, "--skip-invalid"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("skipping: {path}: document 3")));
    assert!(stdout(&out).starts_with("Scheduled 1 of 1 pending pods onto 1 nodes"), "{}", stdout(&out));
}

#[test]
fn bad_flags_and_policies_are_reported() {
    let out = simulate(&["--output", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("invalid value 'xml'"), "{}", stderr(&out));
    let out = simulate(&["--policy", "missing.wasm"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("reading missing.wasm"), "{}", stderr(&out));
    let out = simulate(&["--policy", "x.wasm,weigth=2"]);
    assert!(stderr(&out).contains("unknown option \"weigth=2\""), "{}", stderr(&out));
    let out = simulate(&["--percentage-of-nodes-to-score", "150"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("percentageOfNodesToScore: 150 is not in the valid range 0-100"), "{}", stderr(&out));
}

/// Nodes n0, n1 (on-demand) and n2, n3 (spot), 8 cpu each, as YAML.
fn two_on_demand_two_spot_nodes() -> String {
    let mut scenario = String::new();
    for (i, spot) in [false, false, true, true].into_iter().enumerate() {
        let capacity = if spot { ", karpenter.sh/capacity-type: spot" } else { "" };
        scenario += &format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{kubernetes.io/hostname: n{i}{capacity}}}}}\nstatus:\n  allocatable: {{cpu: \"8\", memory: 32Gi, pods: \"110\"}}\n"
        );
    }
    scenario
}

/// `simulate --watch`: the scenario runs again whenever the policy file is
/// rebuilt (written elsewhere and renamed into place, as builds do); a
/// broken build is reported and the watch goes on.
#[test]
fn watch_reruns_when_the_policy_changes_and_survives_a_broken_build() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::sync::mpsc;
    use wasmsched_test_support::policy_wasm;

    let dir = tempfile::tempdir().unwrap();
    let mut scenario = two_on_demand_two_spot_nodes();
    for i in 0..8 {
        scenario += &format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: t}}\nspec:\n  schedulerName: wasmsched\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: 500m}}}}\n"
        );
    }
    let scenario_path = dir.path().join("cluster.yaml");
    std::fs::write(&scenario_path, scenario).unwrap();
    let policy = dir.path().join("policy.wasm");
    let install = |bytes: &[u8]| {
        let tmp = dir.path().join(".policy.wasm.tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, &policy).unwrap();
    };
    install(&std::fs::read(policy_wasm("least-allocated")).unwrap());

    let mut child = wasmsched_test_support::process::spawn(
        Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .args(["simulate", "--watch", "--output", "json", "--policy"])
            .arg(&policy)
            .arg(&scenario_path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let (tx, lines) = mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    let (out_tx, outputs) = mpsc::channel::<serde_json::Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for value in serde_json::Deserializer::from_reader(stdout).into_iter::<serde_json::Value>() {
            let Ok(value) = value else { return };
            if out_tx.send(value).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let mut wait_for = |needle: &str| {
        loop {
            let line = lines
                .recv_timeout(crate::common::HANG_GUARD)
                .unwrap_or_else(|_| panic!("no {needle:?} on stderr; saw {seen:#?}"));
            seen.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    };
    let nodes = |report: &serde_json::Value| -> std::collections::BTreeSet<String> {
        report["placements"].as_array().unwrap().iter().map(|p| p["node"].as_str().unwrap().to_string()).collect()
    };

    wait_for("── watching");
    let first = outputs.recv_timeout(crate::common::HANG_GUARD).unwrap();
    assert_eq!(nodes(&first).len(), 4, "least-allocated spreads: {:?}", nodes(&first));

    install(&std::fs::read(policy_wasm("spot-first")).unwrap());
    let header = wait_for("── run 2");
    assert!(header.contains("policy.wasm changed"), "{header}");
    wait_for("── watching");
    let second = outputs.recv_timeout(crate::common::HANG_GUARD).unwrap();
    let on = nodes(&second);
    assert!(on.iter().all(|n| n == "n2" || n == "n3"), "spot-first after the rebuild: {on:?}");

    install(b"not wasm at all");
    wait_for("── run 3");
    let error = wait_for("error:");
    assert!(error.contains("policy.wasm"), "the error names the file: {error}");
    wait_for("── watching");
    assert!(child.try_wait().unwrap().is_none(), "a broken build must not end the watch");

    install(&std::fs::read(policy_wasm("least-allocated")).unwrap());
    wait_for("── run 4");
    wait_for("── watching");
    let fourth = outputs.recv_timeout(crate::common::HANG_GUARD).unwrap();
    assert_eq!(nodes(&fourth).len(), 4);
    child.kill_all();
}

/// `simulate --tenant-policy NS/NAME=PATH`: a tenant's policy decides for
/// the pods of its namespace that opt in, within the tenant caps; other
/// pods keep the profile's policy.
#[test]
fn tenant_policies_in_the_simulator() {
    use wasmsched_test_support::policy_wasm;
    let dir = tempfile::tempdir().unwrap();
    let mut scenario = two_on_demand_two_spot_nodes();
    for (ns, name, policy, hostile) in [
        ("team", "opted-0", Some("spot"), false),
        ("team", "opted-1", Some("spot"), false),
        ("team", "plain", None, false),
        ("other", "not-theirs", Some("spot"), false),
        ("team", "looping", Some("loop"), true),
    ] {
        let annotation = policy.map(|p| format!(", annotations: {{wasmsched.io/policy: {p}}}")).unwrap_or_default();
        let labels = if hostile { ", labels: {hostile: \"true\"}" } else { "" };
        scenario += &format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}{annotation}{labels}}}\nspec:\n  schedulerName: wasmsched\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: 500m}}}}\n"
        );
    }
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, scenario).unwrap();
    let loop_config = dir.path().join("loop.yaml");
    std::fs::write(&loop_config, "mode: loop\n").unwrap();
    let spot = format!("team/spot={}", policy_wasm("spot-first").display());
    let looping = format!("team/loop={},config={}", policy_wasm("hostile").display(), loop_config.display());
    let out =
        simulate(&[path.to_str().unwrap(), "--output", "json", "--tenant-policy", &spot, "--tenant-policy", &looping]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let placement = |pod: &str| {
        report["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pod"] == pod)
            .cloned()
            .unwrap_or_else(|| panic!("{pod} not placed: {report}"))
    };
    for pod in ["team/opted-0", "team/opted-1"] {
        let p = placement(pod);
        assert_eq!(p["tenant"], "team");
        assert!(p["node"] == "n2" || p["node"] == "n3", "{pod} on {}", p["node"]);
    }
    assert!(placement("team/plain").get("tenant").is_none());
    // Another namespace's pod cannot use team's policy: placed, saying so.
    let other = placement("other/not-theirs");
    assert!(other["fallback"].as_str().unwrap().contains("not found in namespace other"), "{other}");
    // The looping policy's filter runs to its (tenant) deadline: the pod
    // waits, as a profile's would (failurePolicy: Fail), saying why.
    let unplaced = report["unschedulable"].as_array().unwrap();
    let looping = unplaced.iter().find(|u| u["pod"] == "team/looping").unwrap_or_else(|| panic!("{report}"));
    let why = looping["message"].as_str().unwrap();
    assert_eq!(looping["reason"], "SchedulerError", "{looping}");
    assert!(why.starts_with("running \"hostile\" filter plugin: ") && why.contains("50ms"), "{why}");

    let bad = simulate(&[path.to_str().unwrap(), "--tenant-policy", "spot.wasm"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("expected NAMESPACE/NAME=PATH"), "{}", stderr(&bad));
}

/// Node metrics in the simulator: the bundled scenario ships its own
/// (http-latency picks the lowest fresh latency), `--node-metrics FILE`
/// replaces them (`--metrics`, its old name, too, with a warning), and a bad
/// file is an error naming the file and the entry.
#[test]
fn metrics_files_feed_policies() {
    use wasmsched_test_support::policy_wasm;
    let latency = policy_wasm("http-latency");
    let placed_on = |out: &Output, pod: &str| -> String {
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report["placements"].as_array().unwrap().iter().find(|p| p["pod"] == pod).unwrap()["node"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let out = simulate(&["--policy", latency.to_str().unwrap(), "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // worker-c1 reports less latency, but its sample is ten minutes old.
    assert_eq!(placed_on(&out, "shop/web-1"), "worker-b1");

    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("metrics.yaml");
    std::fs::write(&metrics, "worker-a2: {http_latency_seconds: 0.001}\nworker-b1: {http_latency_seconds: 0.5}\n")
        .unwrap();
    for flag in ["--node-metrics", "--metrics"] {
        let out =
            simulate(&["--policy", latency.to_str().unwrap(), flag, metrics.to_str().unwrap(), "--output", "json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(placed_on(&out, "shop/web-1"), "worker-a2", "{flag}");
        let warned = stderr(&out).contains("warning: --metrics is now called --node-metrics");
        assert_eq!(warned, flag == "--metrics", "{flag}: {}", stderr(&out));
    }

    std::fs::write(&metrics, "worker-a2: {http_latency_seconds: fast}\n").unwrap();
    let out = simulate(&["--node-metrics", metrics.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("metrics.yaml: worker-a2.http_latency_seconds: expected a number"), "{err}");
}

/// A policy's log cannot forge the host's lines or flood its stderr: its
/// text is escaped and quoted, cut to size, and held to per-call and
/// per-minute budgets, what goes over said once.
#[test]
fn a_policy_cannot_forge_or_flood_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("forge.yaml");
    std::fs::write(&config, "mode: forge-log\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["simulate", "--policy"])
        .arg(format!("{},config={}", wasmsched_test_support::policy_wasm("hostile").display(), config.display()))
        .env("WASMSCHED_LOG", "info")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.lines().any(|l| l.starts_with("2026-01-01T00:00:00Z")), "a forged line:\n{stderr}");
    assert!(!stderr.contains('\u{1b}'), "an escape reached the terminal");
    assert!(stderr.contains("forged log line"), "the text is kept, quoted: {}", &stderr[..stderr.len().min(2000)]);
    // 29 pods, each trying to log over 60 MiB: the minute's 64 KiB, the
    // lines' own prefixes, and the warnings.
    assert!(out.stderr.len() < 128 << 10, "{} bytes of log", out.stderr.len());
    // The host says so once, not per call.
    assert_eq!(stderr.matches("policy log over its budgets").count(), 1, "{stderr}");
}

/// A document nested 100,000 deep is refused at the 65th level, as the
/// parser streams it (no time spent in the square of the depth), with
/// where it is.
#[test]
fn a_deeply_nested_cluster_file_is_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.yaml");
    let deep = format!(
        "kind: Pod\nmetadata: {{name: p}}\nspec: {{containers: {}{}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    std::fs::write(&file, deep).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched")).arg("simulate").arg(&file).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("deep.yaml: document 1: nested more than 64 levels deep"), "{stderr}");
    assert!(stderr.contains(" at line 3, column "), "{stderr}");
}

/// A policy's failure policy, as `--policy` takes it: shown on the first
/// line (for a policy that filters) and in `--explain`; a value that is
/// neither Fail nor Ignore is refused, saying what to write.
#[test]
fn the_failure_policy_is_set_by_flag_and_shown() {
    let filter = wasmsched_test_support::policy_wasm("app-node-match");
    let spec = |value: &str| format!("{},failurePolicy={value}", filter.display());
    let table = stdout(&simulate(&["--policy", &spec("Ignore")]));
    let first = table.lines().next().unwrap_or_default();
    assert!(first.contains("app-node-match 0.1.0 ×1 (filter failurePolicy: Ignore)"), "{first}");
    let out = simulate(&["--policy", &spec("Ignore"), "--explain", "shop/web-1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Policy app-node-match 0.1.0 (weight 1, failurePolicy Ignore, sha256 "), "{text}");
    let default = stdout(&simulate(&["--policy", filter.to_str().unwrap()]));
    assert!(default.lines().next().unwrap_or_default().contains("(filter failurePolicy: Fail)"), "{default}");
    let bad = simulate(&["--policy", &spec("ignore")]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("failurePolicy \"ignore\" is neither Fail nor Ignore"), "{}", stderr(&bad));
}
