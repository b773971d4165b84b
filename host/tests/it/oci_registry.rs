//! Policies from an OCI registry: a real one (Debian's `docker-registry`,
//! the CNCF distribution registry, on a loopback port), the artifact pushed
//! by a plain client written here after the distribution spec (config
//! `application/vnd.wasm.config.v0+json`, one `application/wasm` layer),
//! then loaded by `wasmsched check` and `simulate` and from a bundle's
//! `url:`; and each way a reference goes wrong said in one line that names
//! it. Without the registry the tests are skipped, except under `CI=true`.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmsched::policy::oci::{Registries, WASM_CONFIG, WASM_LAYER};
use wasmsched::policy::remote::Fetcher;
use wasmsched_test_support::policy_wasm;
use wasmsched_test_support::process::{self, Guarded};

const REGISTRY: &str = "/usr/bin/docker-registry";
/// bcrypt of `pushing-policies` (the registry's htpasswd takes bcrypt only).
const PASSWORD_BCRYPT: &str = "$2b$05$eVSgTHrOjmApCFT28PYHCuOZ3EEal/kr7WPumNv9gc9sSMK6vkZVK";

/// A registry serving on a loopback port, stopped on drop.
pub(crate) struct Registry {
    /// Stopped (with its group) on drop.
    _child: Guarded,
    pub(crate) host: String,
    dir: tempfile::TempDir,
}

impl Registry {
    /// `None` (skipped) without the package, except under `CI=true`.
    pub(crate) fn start() -> Option<Registry> {
        Registry::start_with("")
    }

    /// Over TLS with a certificate from a CA of its own (`ca.pem` in its
    /// directory), and basic auth: `user` / `pushing-policies`.
    fn start_secured() -> Option<Registry> {
        Registry::start_with("secured")
    }

    fn start_with(secured: &str) -> Option<Registry> {
        if !std::path::Path::new(REGISTRY).exists() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{REGISTRY} is missing: .ci/run installs Debian's docker-registry"
            );
            eprintln!("skipped: {REGISTRY} is missing (apt-get install docker-registry)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let host = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        let storage = dir.path().join("data");
        let mut http = format!("addr: {host}");
        let mut auth = String::new();
        if !secured.is_empty() {
            let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
            make_certificates(dir.path());
            http += &format!(", tls: {{certificate: {}, key: {}}}", cert.display(), key.display());
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("user:{PASSWORD_BCRYPT}\n")).unwrap();
            auth = format!("auth: {{htpasswd: {{realm: wasmsched, path: {}}}}}\n", htpasswd.display());
        }
        let text = format!(
            "version: 0.1\nlog: {{level: error, accesslog: {{disabled: true}}}}\nstorage: {{filesystem: {{rootdirectory: {}}}}}\nhttp: {{{http}}}\n{auth}",
            storage.display()
        );
        std::fs::write(&config, text).unwrap();
        let child = process::spawn(
            Command::new(REGISTRY)
                .arg("serve")
                .arg(&config)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        )
        .unwrap();
        let registry = Registry { _child: child, host, dir };
        let deadline = crate::common::hang_guard();
        while std::net::TcpStream::connect(&registry.host).is_err() {
            assert!(Instant::now() < deadline, "the registry did not start on {}", registry.host);
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(registry)
    }

    fn base(&self) -> String {
        format!("http://{}/v2", self.host)
    }

    /// Pushes `layer` (and an empty config) as `repository:tag` with the
    /// given media types, as the distribution spec's monolithic upload
    /// does; the manifest's digest.
    fn push(&self, repository: &str, tag: &str, (config_type, layer_type): (&str, &str), layer: &[u8]) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(self.push_async(repository, tag, (config_type, layer_type), layer))
    }

    async fn push_async(&self, repository: &str, tag: &str, types: (&str, &str), layer: &[u8]) -> String {
        let client = reqwest::Client::new();
        let (config_digest, config_size) = self.blob(&client, repository, b"{}").await;
        let (layer_digest, layer_size) = self.blob(&client, repository, layer).await;
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": types.0, "digest": config_digest, "size": config_size},
            "layers": [{"mediaType": types.1, "digest": layer_digest, "size": layer_size}],
        });
        let body = serde_json::to_vec(&manifest).unwrap();
        let put = client
            .put(format!("{}/{repository}/manifests/{tag}", self.base()))
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(put.status().as_u16(), 201, "{:?}", put.text().await);
        format!("sha256:{}", hex::encode(Sha256::digest(&body)))
    }

    /// One blob, uploaded whole (POST for a location, then PUT with its
    /// digest); its digest and size.
    async fn blob(&self, client: &reqwest::Client, repository: &str, bytes: &[u8]) -> (String, usize) {
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(bytes)));
        let started = client.post(format!("{}/{repository}/blobs/uploads/", self.base())).send().await.unwrap();
        assert_eq!(started.status().as_u16(), 202);
        let location = started.headers()["location"].to_str().unwrap().to_string();
        let location = if location.starts_with("http") { location } else { format!("http://{}{location}", self.host) };
        let separator = if location.contains('?') { '&' } else { '?' };
        let put = client
            .put(format!("{location}{separator}digest={digest}"))
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(put.status().as_u16(), 201, "{:?}", put.text().await);
        (digest, bytes.len())
    }

    pub(crate) fn push_wasm(&self, repository: &str, tag: &str, wasm: &[u8]) -> String {
        self.push(repository, tag, (WASM_CONFIG, WASM_LAYER), wasm)
    }

    fn fetcher(&self) -> Fetcher {
        let mut registries = Registries::default();
        registries.allow_plain_http(&self.host).unwrap();
        Fetcher::new(None).with_registries(registries)
    }
}

/// A CA (`ca.pem`) and the registry's certificate from it (`cert.pem`,
/// `key.pem`, for 127.0.0.1), with openssl.
fn make_certificates(dir: &std::path::Path) {
    std::fs::write(dir.join("leaf.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
    let steps: [&[&str]; 3] = [
        &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=wasmsched test CA"],
        &["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "key.pem", "-out", "leaf.csr"],
        &["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1"],
    ];
    let outputs: [&[&str]; 3] =
        [&["-keyout", "ca.key", "-out", "ca.pem"], &[], &["-extfile", "leaf.ext", "-out", "cert.pem"]];
    for (step, out) in steps.iter().zip(outputs) {
        let made = Command::new("openssl")
            .args(*step)
            .args(out)
            .current_dir(dir)
            .output()
            .expect("openssl (.ci/run installs it)");
        assert!(made.status.success(), "openssl {step:?}: {}", String::from_utf8_lossy(&made.stderr));
    }
}

fn wasmsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched")).args(args).output().expect("run wasmsched")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn wasm(name: &str) -> Vec<u8> {
    std::fs::read(policy_wasm(name)).unwrap()
}

#[test]
fn check_and_simulate_load_a_policy_from_the_registry_and_print_its_pin() {
    let Some(registry) = Registry::start() else { return };
    let digest = registry.push_wasm("policies/spot-first", "v1", &wasm("spot-first"));
    let by_tag = format!("oci://{}/policies/spot-first:v1", registry.host);
    let out = wasmsched(&["check", &by_tag, "--registry-plain-http", &registry.host]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("policy      spot-first"), "{said}");
    assert!(said.contains(&format!("pinned      {by_tag}@{digest}")), "{said}");

    let pinned = format!("oci://{}/policies/spot-first@{digest}", registry.host);
    let out = wasmsched(&["simulate", "--policy", &pinned, "--registry-plain-http", &registry.host]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("policies: spot-first"), "{said}");
}

#[test]
fn a_bundle_names_a_pinned_artifact_and_a_tag_alone_is_refused() {
    let Some(registry) = Registry::start() else { return };
    let digest = registry.push_wasm("policies/spot-first", "v1", &wasm("spot-first"));
    let fetcher = registry.fetcher();
    let pinned = format!("oci://{}/policies/spot-first@{digest}", registry.host);
    let files = std::collections::BTreeMap::from([("spot.yaml".to_string(), format!("url: {pinned}\n").into_bytes())]);
    let entries = wasmsched::policy::bundle::parse_bundle("configmap ns/p", &files, 32 << 20, &fetcher).unwrap();
    assert_eq!(&entries[0].source.bytes[..], &wasm("spot-first")[..]);
    let tagged = format!("oci://{}/policies/spot-first:v1", registry.host);
    let files = std::collections::BTreeMap::from([("spot.yaml".to_string(), format!("url: {tagged}\n").into_bytes())]);
    let e = wasmsched::policy::bundle::parse_bundle("configmap ns/p", &files, 32 << 20, &fetcher).unwrap_err();
    assert!(e.contains(&tagged) && e.contains("pin it by digest"), "{e}");
}

#[test]
fn each_bad_reference_is_said_in_one_line_that_names_it() {
    let Some(registry) = Registry::start() else { return };
    let fetcher = registry.fetcher();
    let good = registry.push_wasm("policies/spot-first", "v1", &wasm("spot-first"));
    let image = registry.push("policies/image", "v1", ("application/vnd.oci.image.config.v1+json", WASM_LAYER), b"x");
    let at = |repository: &str, digest: &str| format!("oci://{}/{repository}@{digest}", registry.host);
    let fails = |reference: &str, max: usize| -> String {
        let e = fetcher.fetch(reference, None, max).unwrap_err();
        assert!(e.starts_with(reference) && !e.contains('\n'), "one line that names {reference}: {e}");
        e
    };
    let wrong = format!("sha256:{}", hex::encode(Sha256::digest(b"another manifest")));
    assert!(fails(&at("policies/spot-first", &wrong), 32 << 20).contains("no such manifest"));
    let tag_fetcher = registry.fetcher().allowing_tags();
    let missing = format!("oci://{}/policies/spot-first:v9", registry.host);
    let e = tag_fetcher.fetch(&missing, None, 32 << 20).unwrap_err();
    assert!(e.starts_with(&missing) && e.contains("no such manifest"), "{e}");
    assert!(fails(&at("policies/image", &image), 32 << 20).contains("not a wasm artifact"));
    assert!(fails(&at("policies/spot-first", &good), 1024).contains("over the 1024-byte policy size limit"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut registries = Registries::default();
    registries.allow_plain_http(&closed.to_string()).unwrap();
    let unreachable = format!("oci://{closed}/policies/spot-first@{good}");
    let e = Fetcher::new(None).with_registries(registries).fetch(&unreachable, None, 32 << 20).unwrap_err();
    assert!(e.contains("cannot reach registry"), "{e}");
    let e = Registries::default().allow_plain_http("registry.example.com:5000").unwrap_err();
    assert!(e.contains("only a loopback registry"), "{e}");
}

#[test]
fn push_writes_the_wasm_layout_and_prints_the_pin_check_then_loads() {
    let Some(registry) = Registry::start() else { return };
    let file = policy_wasm("spot-first");
    let target = format!("oci://{}/policies/pushed:v1", registry.host);
    let out = wasmsched(&["push", file.to_str().unwrap(), &target, "--registry-plain-http", &registry.host]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let pinned = said
        .lines()
        .find_map(|l| l.strip_prefix("use it as   url: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no pinned reference printed:\n{said}"))
        .to_string();
    assert!(said.contains(&format!("pushed      {target}@sha256:")), "{said}");
    // Another client reads the layout: the manifest as the spec says.
    let digest = pinned.rsplit_once('@').unwrap().1.to_string();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let manifest: serde_json::Value = runtime.block_on(async {
        let url = format!("{}/policies/pushed/manifests/{digest}", registry.base());
        let accept = "application/vnd.oci.image.manifest.v1+json";
        reqwest::Client::new().get(url).header("accept", accept).send().await.unwrap().json().await.unwrap()
    });
    assert_eq!(manifest["config"]["mediaType"], WASM_CONFIG, "{manifest}");
    assert_eq!(manifest["layers"][0]["mediaType"], WASM_LAYER, "{manifest}");
    assert_eq!(manifest["layers"].as_array().map(Vec::len), Some(1), "{manifest}");
    // And wasmsched loads what it pushed, by the printed pin.
    let out = wasmsched(&["check", &pinned, "--registry-plain-http", &registry.host]);
    assert!(out.status.success() && text(&out).contains("policy      spot-first"), "{}", text(&out));

    // A file that is not a policy is not pushed.
    let junk = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(junk.path(), b"not a policy").unwrap();
    let junk_target = format!("oci://{}/policies/junk:v1", registry.host);
    let out =
        wasmsched(&["push", junk.path().to_str().unwrap(), &junk_target, "--registry-plain-http", &registry.host]);
    assert!(!out.status.success() && text(&out).contains("not pushed"), "{}", text(&out));
    let e = registry.fetcher().allowing_tags().fetch(&junk_target, None, 1 << 20).unwrap_err();
    assert!(e.contains("no such manifest"), "{e}");
}

#[test]
fn a_registry_with_tls_and_credentials_takes_a_docker_config_and_says_a_401() {
    let Some(registry) = Registry::start_secured() else { return };
    let ca = registry.dir.path().join("ca.pem");
    let ca = ca.to_str().unwrap();
    let config = |user: &str, password: &str| {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let path = registry.dir.path().join(format!("config-{password}.json"));
        std::fs::write(&path, format!("{{\"auths\": {{\"{}\": {{\"auth\": \"{auth}\"}}}}}}", registry.host)).unwrap();
        path.to_str().unwrap().to_string()
    };
    let good = config("user", "pushing-policies");
    let file = policy_wasm("spot-first");
    let target = format!("oci://{}/policies/secured:v1", registry.host);
    let out = wasmsched(&["push", file.to_str().unwrap(), &target, "--registry-ca", ca, "--registry-config", &good]);
    assert!(out.status.success(), "{}", text(&out));
    let out = wasmsched(&["check", &target, "--registry-ca", ca, "--registry-config", &good]);
    assert!(out.status.success() && text(&out).contains("policy      spot-first"), "{}", text(&out));

    let out = wasmsched(&["check", &target, "--registry-ca", ca]);
    let said = text(&out);
    assert!(!out.status.success() && said.contains("refused anonymous access") && said.contains(&target), "{said}");
    let wrong = config("user", "guessed");
    let out = wasmsched(&["check", &target, "--registry-ca", ca, "--registry-config", &wrong]);
    let said = text(&out);
    assert!(!out.status.success() && said.contains("refused the credentials"), "{said}");
    // The directory form, as deploy/ mounts the optional Secret: its
    // `.dockerconfigjson`, or nothing when the Secret is not there.
    let secret = registry.dir.path().join("secret");
    std::fs::create_dir(&secret).unwrap();
    let empty = secret.to_str().unwrap();
    let out = wasmsched(&["check", &target, "--registry-ca", ca, "--registry-config", empty]);
    assert!(!out.status.success() && text(&out).contains("refused anonymous access"), "{}", text(&out));
    std::fs::copy(&good, secret.join(".dockerconfigjson")).unwrap();
    let out = wasmsched(&["check", &target, "--registry-ca", ca, "--registry-config", empty]);
    assert!(out.status.success(), "{}", text(&out));
    let out = wasmsched(&["check", &target, "--registry-config", "/no/such/place"]);
    assert!(!out.status.success() && text(&out).contains("no such file or directory"), "{}", text(&out));
    // Its certificate is not trusted unless asked for.
    let out = wasmsched(&["check", &target, "--registry-config", &good]);
    let said = text(&out);
    assert!(
        !out.status.success() && said.contains("cannot reach registry") && said.contains("--registry-ca"),
        "{said}"
    );
}

/// The ORAS project's Python client (PyPI `oras`, installed beside
/// componentize-py by policies/install-toolchains.sh), or `None` (skipped)
/// outside CI.
fn oras_python() -> Option<std::path::PathBuf> {
    let python = wasmsched_test_support::workspace_root().join("target/toolchains/python/bin/python");
    let found = Command::new(&python).args(["-c", "import oras.client"]).output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "ORAS's Python client is missing from {}: run policies/install-toolchains.sh",
            python.display()
        );
        eprintln!("skipped: no ORAS client (policies/install-toolchains.sh installs it)");
        return None;
    }
    Some(python)
}

/// Runs `script` with ORAS's client in `dir`; `argv[1..]` are `args`.
fn oras(python: &std::path::Path, dir: &std::path::Path, script: &str, args: &[&str]) -> String {
    let out = Command::new(python).arg("-c").arg(script).args(args).current_dir(dir).output().unwrap();
    let said = text(&out);
    assert!(out.status.success(), "ORAS's client failed:\n{said}");
    said
}

/// Interoperability with another client of the same layout, both ways: an
/// artifact ORAS pushes (its own manifest, with its title annotation and
/// the wasm config) is loaded by `wasmsched check` and `simulate`; one
/// `wasmsched push` pushed is pulled by ORAS byte for byte.
#[test]
fn artifacts_pushed_by_oras_load_and_oras_pulls_what_push_pushed() {
    let Some(registry) = Registry::start() else { return };
    let Some(python) = oras_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.wasm"), wasm("spot-first")).unwrap();
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let push = "import sys, oras.client\n\
        c = oras.client.OrasClient(hostname=sys.argv[1], insecure=True)\n\
        c.push(target=sys.argv[2], files=['policy.wasm:application/wasm'], \
               manifest_config='config.json:application/vnd.wasm.config.v0+json')\n";
    let target = format!("{}/policies/by-oras:v1", registry.host);
    oras(&python, dir.path(), push, &[&registry.host, &target]);
    let out = wasmsched(&["check", &format!("oci://{target}"), "--registry-plain-http", &registry.host]);
    let said = text(&out);
    assert!(out.status.success() && said.contains("policy      spot-first"), "{said}");
    let pinned = said.lines().find_map(|l| l.strip_prefix("pinned      ")).unwrap().trim().to_string();
    let out = wasmsched(&["simulate", "--policy", &pinned, "--registry-plain-http", &registry.host]);
    assert!(out.status.success() && text(&out).contains("policies: spot-first"), "{}", text(&out));

    let pushed = format!("oci://{}/policies/by-wasmsched:v1", registry.host);
    let file = policy_wasm("least-allocated");
    let out = wasmsched(&["push", file.to_str().unwrap(), &pushed, "--registry-plain-http", &registry.host]);
    assert!(out.status.success(), "{}", text(&out));
    let pull = "import sys, oras.client\n\
        c = oras.client.OrasClient(hostname=sys.argv[1], insecure=True)\n\
        print('\\n'.join(c.pull(target=sys.argv[2], outdir='pulled')))\n";
    let files = oras(&python, dir.path(), pull, &[&registry.host, &pushed["oci://".len()..]]);
    let pulled = files.lines().map(str::trim).find(|l| l.contains("pulled")).unwrap_or_else(|| panic!("{files}"));
    assert_eq!(std::fs::read(dir.path().join(pulled)).unwrap(), std::fs::read(&file).unwrap(), "{files}");
}
