//! The README's commands for tenants, as a tenant runs them: the real
//! kubectl against the real API server, in the test's own namespace (for
//! `team-a`), with a scheduler whose operators opened one registry to
//! tenants (`tenants.allowedRegistries`).
//! - The ConfigMap route: the policy's ConfigMap created, labelled and
//!   described (`PolicyAccepted`), and the pods that opt in decided by it.
//! - The registry route, for a policy too large for a ConfigMap:
//!   `wasmsched push` to a real registry (Debian's docker-registry on a
//!   loopback port: its address for `registry.example.com`, and
//!   `--registry-plain-http`), the line it prints pasted into `NAME.yaml`,
//!   the ConfigMap made of it accepted, and the pods decided by the pulled
//!   policy.
//! - What a tenant may not name is refused on the ConfigMap, saying why: a
//!   tag alone, a registry the operators did not open, a plain URL.

use super::policies::{on_demand_and_spot, spot_node};
use super::*;

use std::path::Path;

/// The command lines of the `sh` blocks in the README section that
/// starts with `heading` (continued lines joined, comments left out).
pub(super) fn readme_blocks(heading: &str) -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(wasmsched_test_support::workspace_root().join("README.md")).unwrap();
    let section = readme.split_once(heading).unwrap_or_else(|| panic!("README.md has no {heading:?}")).1;
    let section = section.split("\n## ").next().unwrap();
    let mut blocks = Vec::new();
    for block in section.split("```sh\n").skip(1) {
        let body = block.split("```").next().unwrap();
        let joined = body.replace("\\\n", " ");
        let lines = joined.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
        blocks.push(lines.map(|l| l.split(" # ").next().unwrap().trim().to_string()).collect());
    }
    blocks
}

#[test]
fn the_readme_tenant_commands_work_as_written() {
    let Some(registry) = crate::oci_registry::Registry::start() else { return };
    let Some(real) = Real::start("tenant-readme") else { return };
    let blocks = readme_blocks("## For tenants");
    // The third, a candidate, is tenant_experiments'.
    assert_eq!(blocks.len(), 3, "the ConfigMap route, the registry route and a candidate: {blocks:?}");
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&built).unwrap();
    std::fs::write(built.join("spot_first.wasm"), real::wasm("spot-first")).unwrap();
    let ns = real.namespace.clone();
    let as_tenant = |line: &str| line.replace("team-a", &ns).replace("registry.example.com", &registry.host);
    real.block_on(async {
        on_demand_and_spot(&real, "readme").await;
        let mut config = common::single_replica(ProfileConfig::with_policies("wasmsched-readme", default_policies()));
        config.tenants.allowed_registries = vec![registry.host.clone()];
        config.registries.allow_plain_http(&registry.host).unwrap();
        let ours = real.start_wasmsched(config).await;

        for line in &blocks[0] {
            real.shell(dir.path(), &as_tenant(line));
        }
        let shown = described(&real, dir.path(), &ns, "my-policies", "PolicyAccepted").await;
        assert!(shown.contains("spot-first"), "{shown}");
        decided_by_spot_first(&real, "cm-").await;

        real.shell(dir.path(), &format!("kubectl -n {ns} delete configmap my-policies"));
        let mut pinned = String::new();
        for line in &blocks[1] {
            let line = as_tenant(line);
            if line.starts_with("wasmsched push") {
                let out = real.shell(dir.path(), &format!("{line} --registry-plain-http {}", registry.host));
                pinned = out.split("url: ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_string();
                assert!(pinned.starts_with(&format!("oci://{}/{ns}/spot-first@sha256:", registry.host)), "{out}");
            } else {
                let placeholder = format!("oci://{}/{ns}/spot-first@sha256:…", registry.host);
                assert!(!line.starts_with("echo") || line.contains(&placeholder), "{line}");
                real.shell(dir.path(), &line.replace(&placeholder, &pinned));
            }
        }
        let shown = described(&real, dir.path(), &ns, "my-oci-policies", "PolicyAccepted").await;
        assert!(shown.contains("spot-first"), "{shown}");
        decided_by_spot_first(&real, "oci-").await;

        refused_on_the_configmap(&real, &registry.host, &pinned).await;
        ours.shutdown().await;
    });
}

/// `kubectl describe configmap`, once it shows `reason`.
pub(super) async fn described(real: &Real, dir: &Path, ns: &str, name: &str, reason: &str) -> String {
    let deadline = crate::common::hang_guard();
    loop {
        let text = real.shell(dir, &format!("kubectl -n {ns} describe configmap {name}"));
        if text.contains(reason) {
            return text;
        }
        assert!(Instant::now() < deadline, "no {reason} in:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Pods that opt in to `spot-first` all go to the spot nodes (the
/// profile's least-allocated would spread them over all four).
async fn decided_by_spot_first(real: &Real, prefix: &str) {
    let spec = json!({"nodeSelector": {"wasmsched-class": "readme"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]});
    let annotated = real.create_annotated_pods(prefix, 6, &spec, "wasmsched-readme", "spot-first").await;
    let placed = real.wait_decided(&annotated).await;
    assert!(placed.iter().all(spot_node), "the tenant's spot-first decides its annotated pods");
}

async fn refused_on_the_configmap(real: &Real, host: &str, pinned: &str) {
    let digest = pinned.rsplit_once('@').unwrap().1;
    let tagged = pinned.replace(&format!("@{digest}"), ":v1");
    let cases = [
        ("tagged", format!("url: {tagged}\n"), "pin it by digest".to_string()),
        (
            "elsewhere",
            format!("url: oci://ghcr.io/team/spot-first@{digest}\n"),
            format!("tenants may not pull from registry ghcr.io (allowed: {host})"),
        ),
        (
            "plain-url",
            format!("url: http://{host}/spot.wasm\nsha256: {}\n", &digest["sha256:".len()..]),
            "tenant policies cannot name http(s) URLs".to_string(),
        ),
    ];
    for (name, yaml, why) in cases {
        real.put_configmap(name, &[(&format!("{name}.yaml"), yaml.into_bytes())], true).await;
        let note = real.wait_configmap_event(name, "PolicyRejected").await;
        assert!(note.contains(&why), "{name}: {note}");
    }
}
