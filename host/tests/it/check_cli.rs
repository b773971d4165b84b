//! `wasmsched check` as a user runs it: exit codes and messages.

use std::path::Path;
use std::process::{Command, Output};

use wasmsched_test_support::policy_wasm;

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).arg("check").args(args).output().expect("run wasmsched")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_good_policy_prints_metadata_and_smoke_run() {
    let wasm = policy_wasm("least-allocated");
    let out = check(&[path(&wasm)]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("policy      least-allocated 0.1.0"), "{text}");
    assert!(text.contains("contract    wasmsched:policy@0.5.0"), "{text}");
    assert!(text.contains("phases      score (absolute 0..100, added as it is; higher is better)"), "{text}");
    assert!(text.contains("nodes       judged one by one: "), "{text}");
    assert!(
        text.contains(" CPU a node (256 synthetic nodes), within the 500 ns bound, so every node is evaluated"),
        "{text}"
    );
    let random = stdout(&check(&[path(&policy_wasm("random"))]));
    assert!(random.contains("nodes       judged together: every call sees every candidate"), "{random}");
    assert!(text.contains("compile     "), "{text}");
    for node in ["small", "medium", "large"] {
        assert!(text.lines().any(|l| l.trim_start().starts_with(node)), "{text}");
    }
    assert!(text.trim_end().ends_with("OK    least-allocated is ready to schedule"), "{text}");
}

#[test]
fn a_policy_for_another_contract_version_fails_with_the_fix() {
    let out = check(&[path(&policy_wasm("old-wit"))]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("built against wasmsched:policy@0.0.9; this scheduler supports 0.1.x, 0.2.x, 0.3.x, 0.4.x and 0.5.x. Rebuild it with a matching wasmsched-sdk"), "{text}");
}

#[test]
fn files_that_are_not_policies_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let text_file = dir.path().join("policy.wasm");
    std::fs::write(&text_file, "not wasm at all").unwrap();
    let out = check(&[path(&text_file)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("not a WebAssembly file"), "{}", stdout(&out));

    // An endless file is refused at the size limit, not read whole.
    let out = check(&["/dev/zero"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("longer than the 33554432-byte policy size limit"), "{stderr}");

    let missing = dir.path().join("missing.wasm");
    let out = check(&[path(&missing)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: reading") && stderr.contains("missing.wasm"), "{stderr}");
}

#[test]
fn configuration_problems_name_the_file_or_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "metric: [unclosed\n").unwrap();
    let out = check(&[path(&policy_wasm("http-latency")), "--config", path(&broken)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.yaml") && stderr.contains("line"), "{stderr}");

    let wrong = dir.path().join("wrong.yaml");
    std::fs::write(&wrong, "maxAgeSeconds: soon\n").unwrap();
    let out = check(&[path(&policy_wasm("http-latency")), "--config", path(&wrong)]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("http-latency: rejected its configuration: configuration field `maxAgeSeconds` must be a number, got \"soon\""),
        "{text}"
    );
}

#[test]
fn a_policy_that_declines_in_the_smoke_run_still_passes() {
    let out = check(&[path(&policy_wasm("http-latency"))]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("note: http-latency: declined to score"), "{text}");
}

#[test]
fn a_looping_policy_fails_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("loop.json");
    std::fs::write(&config, r#"{"mode": "loop-in-init"}"#).unwrap();
    let out = check(&[path(&policy_wasm("hostile")), "--config", path(&config), "--deadline", "50ms"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("FAIL  hostile: init exceeded its 50ms deadline"), "{}", stdout(&out));

    let out = check(&[path(&policy_wasm("least-allocated")), "--deadline", "soon"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--deadline"));
}

/// `wasmsched configmap` with every option a tenant or an operator uses:
/// the ConfigMap's name, namespace and label, the entry's name and
/// weight, the settings under `config:`; a policy too large for a
/// ConfigMap is refused with the command that ships it instead.
#[test]
fn configmap_writes_a_tenants_manifest_and_refuses_what_cannot_fit() {
    let wasm = policy_wasm("spot-first");
    let settings = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(settings.path(), "label: capacity\nvalue: spot\n").unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wasmsched")).arg("configmap").args(args).output().expect("run wasmsched")
    };
    let args =
        ["--config", path(settings.path()), "--tenant", "-n", "team-a", "--configmap", "mine", "--entry", "spot"];
    let out = run(&[&[path(&wasm)][..], &args[..], &["--weight", "3"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!((cm.metadata.name.as_deref(), cm.metadata.namespace.as_deref()), (Some("mine"), Some("team-a")));
    assert_eq!(cm.metadata.labels.unwrap()["wasmsched.io/policy"], "true");
    let entry: serde_yaml::Value = serde_yaml::from_str(&cm.data.unwrap()["spot.yaml"]).unwrap();
    assert_eq!(entry["weight"], 3);
    assert_eq!(entry["config"]["value"], "spot");
    assert!(cm.binary_data.unwrap().contains_key("spot.wasm.gz"));

    // Over 1 MiB gzipped: not a manifest, and what to do instead. The
    // policy still loads (it is loaded first), padded with a custom
    // section of noise, which does not compress.
    let big = tempfile::NamedTempFile::new().unwrap();
    let mut bytes = std::fs::read(&wasm).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..(1 << 20) + 4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    bytes.extend(custom_section("noise", &noise));
    std::fs::write(big.path(), &bytes).unwrap();
    let out = run(&[path(big.path())]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(said.contains("too large for a ConfigMap (1 MiB): push it"), "{said}");
    let tagged = run(&[path(big.path()), "--url", "oci://registry.example.com/p:v1"]);
    let said = String::from_utf8_lossy(&tagged.stderr);
    assert!(!tagged.status.success() && tagged.stdout.is_empty(), "a tag the scheduler would refuse");
    assert!(said.contains("--url oci://registry.example.com/p:v1: name it by digest"), "{said}");
    let pinned = format!("oci://registry.example.com/p@sha256:{}", "0123456789abcdef".repeat(4));
    let out = run(&[path(big.path()), "--url", &pinned]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_yaml::from_slice(&out.stdout).unwrap();
    assert!(cm.binary_data.is_none());
    let entry: serde_yaml::Value = serde_yaml::from_str(&cm.data.unwrap()["spot-first.yaml"]).unwrap();
    assert_eq!(entry["url"], pinned.as_str());
    assert_eq!(entry["sha256"].as_str().unwrap().len(), 64);
}

/// A custom section (id 0): its name and payload, sizes as LEB128.
fn custom_section(name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { byte } else { byte | 0x80 });
            if n == 0 {
                break;
            }
        }
    }
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut section = vec![0u8];
    leb(body.len(), &mut section);
    section.extend(body);
    section
}
