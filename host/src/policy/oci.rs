//! Policies from OCI registries: `oci://REGISTRY/REPOSITORY[:TAG]@sha256:DIGEST`,
//! in the CNCF layout for wasm artifacts that Kubewarden, Spin and the
//! wasm-pkg tools push (config `application/vnd.wasm.config.v0+json`,
//! one `application/wasm` layer). The manifest is fetched by the digest
//! the reference pins and checked against it, the layer against the
//! manifest's digest and the size cap; anything else is refused before a
//! byte is compiled. The registry is spoken to by the ORAS project's
//! client (`oci-client`), over HTTPS unless plain HTTP was asked for a
//! loopback registry.

use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The wasm artifact's config media type (CNCF TAG Runtime's layout).
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// Its one layer's media type.
pub const WASM_LAYER: &str = "application/wasm";
/// How long one pull or push may take, end to end.
const PULL_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether a policy location names an OCI artifact.
pub fn is_oci(location: &str) -> bool {
    location.starts_with("oci://")
}

/// A parsed `oci://` reference.
#[derive(Debug, Clone)]
pub struct OciRef {
    /// As written, for messages.
    pub text: String,
    reference: Reference,
}

impl OciRef {
    pub fn parse(text: &str) -> Result<OciRef, String> {
        let rest = text.strip_prefix("oci://").ok_or_else(|| format!("{text}: expected oci://REGISTRY/REPOSITORY"))?;
        let reference: Reference = rest
            .parse()
            .map_err(|e| format!("{text}: {e} (expected oci://REGISTRY/REPOSITORY[:TAG]@sha256:DIGEST)"))?;
        Ok(OciRef { text: text.to_string(), reference })
    }

    /// The manifest digest the reference pins (`sha256:…`), if any.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    pub fn registry(&self) -> &str {
        self.reference.resolve_registry()
    }

    /// The registry as the reference names it (`docker.io`, not the
    /// host Docker Hub is served from): what operators list.
    pub fn registry_as_written(&self) -> &str {
        self.reference.registry()
    }

    /// `oci://REGISTRY/REPOSITORY`, without tag or digest.
    pub fn repository(&self) -> String {
        format!("oci://{}/{}", self.reference.registry(), self.reference.repository())
    }
}

/// How registries are spoken to.
#[derive(Clone, Default)]
pub struct Registries {
    /// Registries (`HOST:PORT`, loopback only) spoken to over plain HTTP.
    pub plain_http: Vec<String>,
    /// Extra CA certificates (PEM) trusted for registries' TLS.
    pub ca_pem: Vec<Vec<u8>>,
    /// Credentials by registry (`HOST[:PORT]`): user and password.
    credentials: Vec<(String, String, String)>,
}

impl std::fmt::Debug for Registries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let with: Vec<&str> = self.credentials.iter().map(|(r, _, _)| r.as_str()).collect();
        f.debug_struct("Registries")
            .field("plain_http", &self.plain_http)
            .field("ca_pem", &self.ca_pem.len())
            .field("credentials for", &with)
            .finish()
    }
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Registries {
    /// Credentials from a Docker `config.json` (`auths`: per registry,
    /// `auth` as base64 `user:password`, or `username` and `password`), as
    /// `docker login` writes it and a `kubernetes.io/dockerconfigjson`
    /// Secret holds it.
    pub fn add_docker_config(&mut self, text: &str) -> Result<(), String> {
        use base64::Engine;
        let config: DockerConfig = serde_json::from_str(text).map_err(|e| format!("not a Docker config.json: {e}"))?;
        for (registry, entry) in config.auths {
            let host = registry.trim_start_matches("https://").trim_start_matches("http://");
            let host = host.split('/').next().unwrap_or(host).to_string();
            let (user, password) = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|e| format!("{registry}: auth is not base64: {e}"))?;
                    let decoded = String::from_utf8(decoded).map_err(|_| format!("{registry}: auth is not text"))?;
                    let (user, password) =
                        decoded.split_once(':').ok_or_else(|| format!("{registry}: auth is not USER:PASSWORD"))?;
                    (user.to_string(), password.to_string())
                }
                (None, Some(user), Some(password)) => (user, password),
                _ => return Err(format!("{registry}: give auth, or username and password")),
            };
            self.credentials.push((host, user, password));
        }
        Ok(())
    }

    fn auth_for(&self, registry: &str) -> RegistryAuth {
        self.credentials
            .iter()
            .find(|(host, _, _)| host == registry)
            .map_or(RegistryAuth::Anonymous, |(_, user, password)| RegistryAuth::Basic(user.clone(), password.clone()))
    }

    /// Plain HTTP for `registry`, which must be on a loopback address:
    /// a registry elsewhere is only trusted over TLS.
    pub fn allow_plain_http(&mut self, registry: &str) -> Result<(), String> {
        let host = registry.rsplit_once(':').map_or(registry, |(host, _)| host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if !loopback {
            return Err(format!(
                "plain HTTP for registry {registry}: only a loopback registry (localhost, 127.0.0.1, [::1]) may be spoken to without TLS"
            ));
        }
        self.plain_http.push(registry.to_string());
        Ok(())
    }
}

/// A pulled wasm artifact.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub wasm: Vec<u8>,
    /// `sha256:…` of the manifest: what pins it.
    pub manifest_digest: String,
    /// Lowercase hex sha256 of the wasm.
    pub sha256: String,
}

/// Runs `work` on a thread of its own with its own runtime: the callers
/// are synchronous, and some of them are inside a runtime.
fn on_own_runtime<T: Send>(
    r: &OciRef,
    doing: &str,
    work: impl std::future::Future<Output = Result<T, String>> + Send,
) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("{}: starting the {doing}: {e}", r.text))?;
            runtime.block_on(async {
                tokio::time::timeout(PULL_TIMEOUT, work)
                    .await
                    .unwrap_or_else(|_| Err(format!("{}: the {doing} took longer than {PULL_TIMEOUT:?}", r.text)))
            })
        })
        .join()
        .unwrap_or_else(|_| Err(format!("{}: the {doing} panicked", r.text)))
    })
}

/// Pushes `wasm` as the artifact `r` names (a tag, not a digest), in the
/// wasm artifact layout; the digest of the manifest pushed, which pins it.
pub fn push(r: &OciRef, wasm: Vec<u8>, registries: &Registries) -> Result<String, String> {
    if r.digest().is_some() {
        return Err(format!("{}: push to a tag (REPOSITORY:TAG); the digest is what the push prints", r.text));
    }
    on_own_runtime(r, "push", push_async(r, wasm, registries))
}

async fn push_async(r: &OciRef, wasm: Vec<u8>, registries: &Registries) -> Result<String, String> {
    use oci_client::client::{Config, ImageLayer};
    let client = client(registries);
    let layer_digest = format!("sha256:{}", hex::encode(Sha256::digest(&wasm)));
    // The config the wasm OCI layout describes (TAG Runtime's).
    let config = serde_json::json!({"architecture": "wasm", "os": "wasip2", "layerDigests": [layer_digest]});
    let config = Config::new(config.to_string().into_bytes(), WASM_CONFIG.to_string(), None);
    let layers = [ImageLayer::new(wasm, WASM_LAYER.to_string(), None)];
    let auth = registries.auth_for(r.registry());
    let failed = |e: oci_client::errors::OciDistributionError| registry_error(r, &auth, &e);
    client.push(&r.reference, &layers, config, &auth, None).await.map_err(failed)?;
    client.fetch_manifest_digest(&r.reference, &auth).await.map_err(failed)
}

fn client(registries: &Registries) -> Client {
    use oci_client::client::{Certificate, CertificateEncoding};
    let protocol = match registries.plain_http.is_empty() {
        true => ClientProtocol::Https,
        false => ClientProtocol::HttpsExcept(registries.plain_http.clone()),
    };
    let extra_root_certificates = registries
        .ca_pem
        .iter()
        .map(|pem| Certificate { encoding: CertificateEncoding::Pem, data: pem.clone() })
        .collect();
    Client::new(ClientConfig { protocol, extra_root_certificates, ..ClientConfig::default() })
}

/// Pulls the artifact `r` names: its manifest (checked against the
/// reference's digest when it has one), then its one wasm layer, at most
/// `max_bytes`. On a thread of its own with its own runtime, as the
/// callers are synchronous and some are inside a runtime.
pub fn pull(r: &OciRef, registries: &Registries, max_bytes: usize) -> Result<Pulled, String> {
    on_own_runtime(r, "pull", pull_async(r, registries, max_bytes))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: i64,
}

async fn pull_async(r: &OciRef, registries: &Registries, max_bytes: usize) -> Result<Pulled, String> {
    let client = client(registries);
    let accepted = [OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE];
    let auth = registries.auth_for(r.registry());
    let (body, manifest_digest) =
        client.pull_manifest_raw(&r.reference, &auth, &accepted).await.map_err(|e| registry_error(r, &auth, &e))?;
    let manifest: Manifest = serde_json::from_slice(&body)
        .map_err(|e| format!("{}: the manifest is not an OCI image manifest ({e}); push a wasm artifact", r.text))?;
    let layer = wasm_layer(r, &manifest)?;
    if usize::try_from(layer.size).map_or(true, |size| size > max_bytes) {
        return Err(format!(
            "{}: its wasm layer is {} bytes, over the {max_bytes}-byte policy size limit",
            r.text, layer.size
        ));
    }
    let descriptor = OciDescriptor {
        media_type: layer.media_type.clone(),
        digest: layer.digest.clone(),
        size: layer.size,
        ..OciDescriptor::default()
    };
    let mut wasm = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
    client.pull_blob(&r.reference, &descriptor, &mut wasm).await.map_err(|e| registry_error(r, &auth, &e))?;
    if wasm.len() > max_bytes {
        return Err(format!("{}: larger than the {max_bytes}-byte policy size limit", r.text));
    }
    let sha256 = hex::encode(Sha256::digest(&wasm));
    if layer.digest != format!("sha256:{sha256}") {
        return Err(format!(
            "{}: the layer's bytes hash to sha256:{sha256}, the manifest says {}",
            r.text, layer.digest
        ));
    }
    Ok(Pulled { wasm, manifest_digest, sha256 })
}

/// The one `application/wasm` layer of a wasm artifact.
fn wasm_layer<'m>(r: &OciRef, manifest: &'m Manifest) -> Result<&'m Descriptor, String> {
    let not_wasm = |what: String| {
        format!("{}: not a wasm artifact ({what}); push the policy with `wasmsched push` or `wkg oci push`", r.text)
    };
    if manifest.config.media_type != WASM_CONFIG {
        return Err(not_wasm(format!("config media type {}, expected {WASM_CONFIG}", manifest.config.media_type)));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == WASM_LAYER => Ok(layer),
        [layer] => Err(not_wasm(format!("layer media type {}, expected {WASM_LAYER}", layer.media_type))),
        layers => Err(not_wasm(format!("{} layers, expected one {WASM_LAYER} layer", layers.len()))),
    }
}

/// One line: the reference, what the registry said, what to do.
fn registry_error(r: &OciRef, auth: &RegistryAuth, e: &oci_client::errors::OciDistributionError) -> String {
    use oci_client::errors::OciDistributionError as E;
    let text = e.to_string();
    let refused = matches!(e, E::UnauthorizedError { .. } | E::AuthenticationFailure(_))
        || matches!(e, E::ServerError { code: 401, .. })
        || matches!(e, E::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| matches!(e.code, oci_client::errors::OciErrorCode::Unauthorized)));
    match e {
        _ if refused && matches!(auth, RegistryAuth::Anonymous) => format!(
            "{}: the registry refused anonymous access ({text}); give credentials with --registry-config (a Docker config.json)",
            r.text
        ),
        _ if refused => format!(
            "{}: the registry refused the credentials given for {} ({text}); check them in --registry-config",
            r.text,
            r.registry()
        ),
        E::ImageManifestNotFoundError(_) => {
            format!("{}: the registry has no such manifest ({text}); check the repository, tag and digest", r.text)
        }
        E::RegistryError { envelope, .. } if envelope.errors.iter().any(|e| unknown(&e.code)) => {
            format!("{}: the registry has no such manifest ({text}); check the repository, tag and digest", r.text)
        }
        E::ServerError { code: 404, .. } => {
            format!("{}: the registry has no such manifest ({text}); check the repository, tag and digest", r.text)
        }
        E::DigestError(_) => format!("{}: {text}; the registry's content does not match the pinned digest", r.text),
        E::RequestError(cause) => {
            let chain = chain(cause);
            let hint = if chain.contains("certificate") {
                "; if it has a CA of its own, trust it with --registry-ca"
            } else {
                ""
            };
            format!("{}: cannot reach registry {} ({chain}){hint}", r.text, r.registry())
        }
        _ => format!("{}: {text}", r.text),
    }
}

fn unknown(code: &oci_client::errors::OciErrorCode) -> bool {
    use oci_client::errors::OciErrorCode as C;
    matches!(code, C::ManifestUnknown | C::NameUnknown | C::NotFound | C::BlobUnknown)
}

/// An error with its causes, which reqwest keeps out of its own message
/// (the TLS or connection failure that matters is among them).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}
