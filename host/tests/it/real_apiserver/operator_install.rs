//! The README's operator commands, as an operator runs them, with the real
//! kubectl against the real API server: `./deploy/build-policies.sh &&
//! kubectl apply --server-side -k deploy/` installs everything (a
//! client-side apply fits too, the policies being gzipped: the
//! `last-applied-configuration` annotation it writes is capped at 256
//! KiB), and the hot-swap instruction (rebuild, apply again) swaps the new
//! policy into a running scheduler. The Deployment is stored but never
//! runs (no kubelet here); the scheduler is this test's own, configured as
//! deploy/'s `wasmsched` profile.

use super::*;

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// Runs an operator's command line in `dir`, against the test cluster;
/// its output, or a panic that shows it.
fn operator(real: &Real, dir: &Path, line: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", line])
        .current_dir(dir)
        .env("KUBECONFIG", &real.control_plane.admin_kubeconfig)
        .output()
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "`{line}` failed:\n{text}");
    text
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn the_readme_install_applies_and_a_rebuilt_policy_swaps_in() {
    let Some(real) = Real::start("install") else { return };
    let root = wasmsched_test_support::workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let install = "./deploy/build-policies.sh && kubectl apply --server-side -k deploy/";
    assert!(readme.contains("kubectl apply --server-side -k deploy/"), "the README says what this test runs");
    let applied = operator(&real, &root, install);
    for object in ["configmap/wasmsched-policies", "configmap/wasmsched-latency-policies", "deployment.apps/wasmsched"]
    {
        assert!(applied.contains(&format!("{object} serverside-applied")), "{object}:\n{applied}");
    }
    // The client-side apply an operator may be used to fits as well.
    operator(&real, &root, "kubectl apply -k deploy/ --dry-run=server");

    real.block_on(async {
        let cm = ConfigMapRef { namespace: "wasmsched".into(), name: "wasmsched-policies".into() };
        let mut config = common::single_replica(ProfileConfig {
            scheduler_name: "wasmsched-install".into(),
            origin: PolicyOrigin::ConfigMap(cm),
            sampling: Default::default(),
            scoring: Default::default(),
        });
        config.tenants.settings.enabled = false;
        let ours = common::start_ready(real.admin.clone(), config).await;
        real.wait_active(&ours, "least-allocated").await;
        let installed = ours.status.policies()[0].sha256.clone();

        // The hot-swap instruction: a rebuilt policy (here another one
        // under the same name), then the same apply.
        let copy = tempfile::tempdir().unwrap();
        operator(&real, copy.path(), &format!("cp -r {}/deploy .", root.display()));
        let rebuilt = real::wasm("spot-first");
        std::fs::write(copy.path().join("deploy/policies/least-allocated.wasm.gz"), gz(&rebuilt)).unwrap();
        let again = operator(&real, copy.path(), "kubectl apply --server-side -k deploy/");
        assert!(again.contains("configmap/wasmsched-policies serverside-applied"), "{again}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while ours.status.policies()[0].sha256 == installed {
            assert!(Instant::now() < deadline, "the rebuilt policy never swapped in: {:?}", ours.status.policies());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        use sha2::Digest;
        let expected = format!("{:x}", sha2::Sha256::digest(&rebuilt));
        assert_eq!(ours.status.policies()[0].sha256, expected, "the rebuilt policy is the one active");
        ours.shutdown().await;
    });
}
