//! Policies fetched over HTTP(S), pinned by sha256: the path for policies
//! too large for a ConfigMap (interpreter-based components, CPython or
//! SpiderMonkey inside, are tens of MB; a ConfigMap holds 1 MiB).
//!
//! A bundle's `NAME.yaml` (or a configuration file's policy entry) names
//! `url` and `sha256` instead of carrying `NAME.wasm`. The bytes are
//! fetched with a size cap, verified against the pin before anything
//! compiles them, and kept in the cache directory by their sha256, so a
//! restart or a re-applied bundle does not fetch again and a server that
//! is down does not stop a policy already fetched once. What follows is
//! the same as for any bundle entry: validation, smoke run, swap.
//!
//! `oci://REGISTRY/REPOSITORY@sha256:DIGEST` names a wasm artifact in an
//! OCI registry instead (`oci.rs`): the digest pins it, and the cache
//! keeps it as any fetched policy, with the manifest digest pointing at it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::oci::{self, OciRef, Registries};

/// How long one download may take, end to end.
const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// Fetches pinned policies, through a cache directory if one is set.
#[derive(Debug, Clone)]
pub struct Fetcher {
    cache_dir: Option<PathBuf>,
    /// What it may be asked to fetch.
    access: Access,
    registries: Registries,
    /// An `oci://` reference may name a tag alone (commands run by hand,
    /// which print the digest to pin); what runs in a cluster needs the
    /// digest, as a tag can move under it.
    allow_tags: bool,
}

/// What a fetcher may be asked to fetch.
#[derive(Debug, Clone)]
enum Access {
    /// Any http(s) URL or `oci://` reference: operators' own sources.
    Any,
    /// `oci://` references from these registries (`HOST[:PORT]`) only
    /// (none: nothing at all): tenants. A namespace must not point the
    /// scheduler at any address it can reach, so plain URLs stay refused,
    /// and a registry is one the operators named.
    OciFrom(Vec<String>),
}

/// Why a tenant may name no URL when the operators opened no registry.
const NO_REGISTRY_FOR_TENANTS: &str = "tenant policies cannot name URLs here: the operators allow tenants no \
     registry (tenants.allowedRegistries); put the .wasm (or .wasm.gz) in the ConfigMap";

impl Fetcher {
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        Fetcher { cache_dir, access: Access::Any, registries: Registries::default(), allow_tags: false }
    }

    /// This fetcher (its cache, its registries' settings) confined to what
    /// tenants may name: pinned `oci://` references from `registries`
    /// (none: nothing at all).
    pub fn for_tenants(self, registries: &[String]) -> Self {
        let access = Access::OciFrom(registries.iter().map(|r| r.to_ascii_lowercase()).collect());
        Fetcher { access, allow_tags: false, ..self }
    }

    /// Refuses what this fetcher may not be asked for, saying why and what
    /// to do instead.
    fn admit(&self, url: &str) -> Result<(), String> {
        match &self.access {
            Access::Any => Ok(()),
            Access::OciFrom(allowed) if allowed.is_empty() => Err(format!("url {url}: {NO_REGISTRY_FOR_TENANTS}")),
            Access::OciFrom(allowed) => {
                let listed = allowed.join(", ");
                if !oci::is_oci(url) {
                    return Err(format!(
                        "url {url}: tenant policies cannot name http(s) URLs; name a wasm artifact pinned by digest \
                         (oci://REGISTRY/REPOSITORY@sha256:DIGEST) from a registry the operators allow ({listed})"
                    ));
                }
                let registry = OciRef::parse(url)?.registry_as_written().to_ascii_lowercase();
                if allowed.contains(&registry) {
                    return Ok(());
                }
                Err(format!(
                    "{url}: tenants may not pull from registry {registry} (allowed: {listed}); push the policy \
                     there, or ask the operators to add {registry} to tenants.allowedRegistries"
                ))
            }
        }
    }

    pub fn with_registries(mut self, registries: Registries) -> Self {
        self.registries = registries;
        self
    }

    /// `oci://` references may name a tag alone.
    pub fn allowing_tags(mut self) -> Self {
        self.allow_tags = true;
        self
    }

    fn cached_path(&self, sha256: &str) -> Option<PathBuf> {
        self.cache_dir.as_ref().map(|d| d.join("fetched").join(format!("{sha256}.wasm")))
    }

    /// The bytes at `url`, which must hash to `sha256` (lowercase or
    /// uppercase hex; required) and be at most `max_bytes` long. Errors say
    /// which.
    pub fn fetch(&self, url: &str, sha256: Option<&str>, max_bytes: usize) -> Result<Vec<u8>, String> {
        self.admit(url)?;
        if oci::is_oci(url) {
            return self.fetch_oci(url, sha256, max_bytes).map(|(bytes, _)| bytes);
        }
        let Some(sha256) = sha256 else {
            return Err(format!("url {url}: a url needs its sha256 (the policy is verified before it is compiled)"));
        };
        let want = sha256.trim().to_ascii_lowercase();
        if want.len() != 64 || !want.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("sha256 {sha256:?} is not 64 hexadecimal digits"));
        }
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("url {url:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("url {url}: only http and https are fetched"));
        }
        if let Some(path) = self.cached_path(&want) {
            match std::fs::read(&path) {
                Ok(bytes) if hex::encode(Sha256::digest(&bytes)) == want => return Ok(bytes),
                Ok(_) => {
                    tracing::warn!(path = %path.display(), "cached policy does not match its sha256; fetching again");
                    let _ = std::fs::remove_file(&path);
                }
                Err(_) => {}
            }
        }
        let bytes = download(url, max_bytes)?;
        let got = hex::encode(Sha256::digest(&bytes));
        if got != want {
            return Err(format!(
                "url {url}: sha256 is {got}, the pin says {want} (the file changed, or the pin is wrong); not loaded"
            ));
        }
        if let Some(path) = self.cached_path(&want)
            && let Err(e) = store(&path, &bytes)
        {
            tracing::warn!(path = %path.display(), error = %e, "could not cache the fetched policy");
        }
        Ok(bytes)
    }
}

/// OCI registries.
impl Fetcher {
    /// The wasm artifact `location` names, and the manifest digest that
    /// pins it. `sha256`, if given too, must be the wasm's.
    pub fn fetch_oci(
        &self,
        location: &str,
        sha256: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Vec<u8>, String), String> {
        self.admit(location)?;
        let reference = OciRef::parse(location)?;
        if reference.digest().is_none() && !self.allow_tags {
            return Err(format!(
                "{location}: pin it by digest (…@sha256:DIGEST): a tag can move under a running scheduler; `wasmsched check {location}` prints the digest to pin"
            ));
        }
        if let Some(digest) = reference.digest()
            && let Some(bytes) = self.cached_oci(digest)
        {
            return Ok((bytes, digest.to_string()));
        }
        let pulled = oci::pull(&reference, &self.registries, max_bytes)?;
        if let Some(pin) = sha256
            && pin.trim().to_ascii_lowercase() != pulled.sha256
        {
            return Err(format!("{location}: the wasm's sha256 is {}, the pin says {pin}; not loaded", pulled.sha256));
        }
        self.cache_oci(&pulled);
        Ok((pulled.wasm, pulled.manifest_digest))
    }

    /// `oci/DIGEST` names the sha256 of the wasm the manifest holds, kept
    /// as any fetched policy (and checked against it when read).
    fn oci_index(&self, manifest_digest: &str) -> Option<PathBuf> {
        let hex = manifest_digest.strip_prefix("sha256:")?;
        let safe = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        self.cache_dir.as_ref().filter(|_| safe).map(|d| d.join("oci").join(hex))
    }

    fn cached_oci(&self, manifest_digest: &str) -> Option<Vec<u8>> {
        let sha256 = std::fs::read_to_string(self.oci_index(manifest_digest)?).ok()?;
        let bytes = std::fs::read(self.cached_path(sha256.trim())?).ok()?;
        (hex::encode(Sha256::digest(&bytes)) == sha256.trim()).then_some(bytes)
    }

    fn cache_oci(&self, pulled: &oci::Pulled) {
        let (Some(index), Some(path)) = (self.oci_index(&pulled.manifest_digest), self.cached_path(&pulled.sha256))
        else {
            return;
        };
        if let Err(e) = store(&path, &pulled.wasm).and_then(|()| store(&index, pulled.sha256.as_bytes())) {
            tracing::warn!(path = %path.display(), error = %e, "could not cache the pulled policy");
        }
    }
}

/// Write then rename, so a concurrent reader never sees half a file.
fn store(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::File::create(&tmp)?.write_all(bytes)?;
    std::fs::rename(&tmp, path)
}

/// GET with a size cap, on a thread of its own with its own runtime: the
/// callers are synchronous (bundle loading), some of them inside a tokio
/// runtime, where blocking on another runtime would panic.
fn download(url: &str, max_bytes: usize) -> Result<Vec<u8>, String> {
    let url = url.to_string();
    std::thread::scope(|s| {
        s.spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("starting the download: {e}"))?;
            runtime.block_on(get_capped(&url, max_bytes))
        })
        .join()
        .unwrap_or_else(|_| Err("the download thread panicked".into()))
    })
}

async fn get_capped(url: &str, max_bytes: usize) -> Result<Vec<u8>, String> {
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .build()
        .map_err(|e| format!("url {url}: building the HTTP client: {e}"))?;
    let mut response = client.get(url).send().await.map_err(|e| format!("url {url}: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("url {url}: the server answered {status}"));
    }
    let too_large = || format!("url {url}: larger than the {max_bytes}-byte policy size limit");
    if response.content_length().is_some_and(|n| n > max_bytes as u64) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("url {url}: {e}"))? {
        if bytes.len() + chunk.len() > max_bytes {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use wasmsched_test_support::serve_file as serve;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn fetches_verifies_and_caches_by_sha256() {
        let body = b"\0asm not really a policy".to_vec();
        let (base, served) = serve(body.clone());
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(Some(cache.path().to_path_buf()));
        let url = format!("{base}/policy.wasm");
        assert_eq!(fetcher.fetch(&url, Some(&sha(&body).to_uppercase()), 1024).unwrap(), body);
        assert_eq!(served.load(Ordering::SeqCst), 1);
        // Second time from the cache: the server is not asked.
        assert_eq!(fetcher.fetch(&url, Some(&sha(&body)), 1024).unwrap(), body);
        assert_eq!(served.load(Ordering::SeqCst), 1);
        // A corrupted cache entry is noticed and replaced.
        std::fs::write(cache.path().join("fetched").join(format!("{}.wasm", sha(&body))), b"garbage").unwrap();
        assert_eq!(fetcher.fetch(&url, Some(&sha(&body)), 1024).unwrap(), body);
        assert_eq!(served.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn refuses_a_wrong_pin_a_missing_file_an_oversized_one_and_bad_input() {
        let body = vec![7u8; 2048];
        let (base, _) = serve(body.clone());
        let fetcher = Fetcher::new(None);
        let url = format!("{base}/policy.wasm");
        let wrong = sha(b"something else");
        let e = fetcher.fetch(&url, Some(&wrong), 1 << 20).unwrap_err();
        assert!(e.contains(&format!("sha256 is {}, the pin says {wrong}", sha(&body))), "{e}");
        let e = fetcher.fetch(&format!("{base}/gone.wasm"), Some(&sha(&body)), 1 << 20).unwrap_err();
        assert!(e.contains("the server answered 404 Not Found"), "{e}");
        let e = fetcher.fetch(&url, Some(&sha(&body)), 1024).unwrap_err();
        assert!(e.contains("larger than the 1024-byte policy size limit"), "{e}");
        let e = fetcher.fetch(&url, Some("abc"), 1 << 20).unwrap_err();
        assert!(e.contains("is not 64 hexadecimal digits"), "{e}");
        let e = fetcher.fetch("file:///etc/passwd", Some(&sha(&body)), 1 << 20).unwrap_err();
        assert!(e.contains("only http and https"), "{e}");
        let e = Fetcher::new(None).for_tenants(&[]).fetch(&url, Some(&sha(&body)), 1 << 20).unwrap_err();
        assert!(e.contains("tenant policies cannot name URLs here"), "{e}");
    }
}
