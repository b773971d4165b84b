//! deploy/krew/: the krew plugin manifest a release renders, checked as
//! krew's validation and naming guide have it: the plugin named as its
//! command (`kubectl wasmsched`: `wasmsched`, lowercase, no `kubectl-`
//! prefix), a `v`-prefixed semantic version, one entry per platform with a
//! selector, an https URI of this version, the archive's sha256 and the
//! binary krew links as `kubectl-wasmsched`. Rendered by `render.sh` from
//! archives made here of this build's binary, named as a plugin.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn krew_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/krew")
}

/// `kubectl-wasmsched_vVERSION_linux_ARCH.tar.gz` for each platform in
/// `dist`, holding this build's binary as `kubectl-wasmsched`.
fn archives(dist: &Path, version: &str) {
    let staging = tempfile::tempdir().unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_wasmsched"), staging.path().join("kubectl-wasmsched")).unwrap();
    for arch in ["amd64", "arm64"] {
        let archive = dist.join(format!("kubectl-wasmsched_v{version}_linux_{arch}.tar.gz"));
        let status = Command::new("tar")
            .arg("czf")
            .arg(&archive)
            .arg("-C")
            .arg(staging.path())
            .arg("kubectl-wasmsched")
            .status();
        assert!(status.unwrap().success());
    }
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8(out.stdout).unwrap().split(' ').next().unwrap().to_string()
}

fn render(args: &[&str]) -> std::process::Output {
    Command::new(krew_dir().join("render.sh")).args(args).output().unwrap()
}

#[test]
fn the_rendered_manifest_is_one_krew_installs() {
    let dist = tempfile::tempdir().unwrap();
    let version = env!("CARGO_PKG_VERSION");
    archives(dist.path(), version);
    let release = format!("https://example.org/wasmsched/releases/v{version}");
    let out = render(&[version, &release, "https://example.org/wasmsched", dist.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("${"), "every placeholder filled:\n{text}");
    let manifest: Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(manifest["apiVersion"], "krew.googlecontainertools.github.com/v1alpha2");
    assert_eq!(manifest["kind"], "Plugin");

    let name = manifest["metadata"]["name"].as_str().unwrap();
    assert_eq!(name, "wasmsched", "named as the command, `kubectl wasmsched`");
    assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    assert!(!name.starts_with("kubectl-") && !name.starts_with("kube-"), "{name}");

    let spec = &manifest["spec"];
    assert_eq!(spec["version"], format!("v{version}"));
    assert!(spec["homepage"].as_str().unwrap().starts_with("https://"));
    let short = spec["shortDescription"].as_str().unwrap();
    assert!(short.len() <= 50 && !short.ends_with('.'), "{short}");
    // The commands the description names are the binary's.
    let description = spec["description"].as_str().unwrap();
    for command in ["experiments", "auth check", "simulate", "configmap"] {
        assert!(description.contains(&format!("kubectl wasmsched {command}")), "{command}");
        let mut help = Command::new(env!("CARGO_BIN_EXE_wasmsched"));
        help.args(command.split(' ')).arg("--help");
        assert!(help.output().unwrap().status.success(), "wasmsched {command} --help");
    }

    let platforms = spec["platforms"].as_array().unwrap();
    let mut seen = Vec::new();
    for platform in platforms {
        let labels = &platform["selector"]["matchLabels"];
        let (os, arch) = (labels["os"].as_str().unwrap(), labels["arch"].as_str().unwrap());
        assert!(!seen.contains(&(os, arch)), "one entry per platform");
        seen.push((os, arch));
        let archive = format!("kubectl-wasmsched_v{version}_{os}_{arch}.tar.gz");
        assert_eq!(platform["uri"], format!("{release}/{archive}"));
        assert_eq!(platform["sha256"], sha256(&dist.path().join(&archive)), "{archive}");
        assert_eq!(platform["bin"], "kubectl-wasmsched");
    }
    assert_eq!(seen, [("linux", "amd64"), ("linux", "arm64")]);
}

#[test]
fn render_says_what_is_missing() {
    let dist = tempfile::tempdir().unwrap();
    let out = render(&["0.4.0", "https://example.org/r", "https://example.org", dist.path().to_str().unwrap()]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("missing") && said.contains("kubectl-wasmsched_v0.4.0_linux_amd64.tar.gz"), "{said}");
    let out = render(&["v0.4.0", "https://example.org/r", "https://example.org", "."]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("without its v"));
    let out = render(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("usage:"));
}
