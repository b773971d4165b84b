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
}

/// How registries are spoken to.
#[derive(Debug, Clone, Default)]
pub struct Registries {
    /// Registries (`HOST:PORT`, loopback only) spoken to over plain HTTP.
    pub plain_http: Vec<String>,
}

impl Registries {
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
    let auth = RegistryAuth::Anonymous;
    client.push(&r.reference, &layers, config, &auth, None).await.map_err(|e| registry_error(r, &e))?;
    client.fetch_manifest_digest(&r.reference, &auth).await.map_err(|e| registry_error(r, &e))
}

fn client(registries: &Registries) -> Client {
    let protocol = match registries.plain_http.is_empty() {
        true => ClientProtocol::Https,
        false => ClientProtocol::HttpsExcept(registries.plain_http.clone()),
    };
    Client::new(ClientConfig { protocol, ..ClientConfig::default() })
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
    let (body, manifest_digest) = client
        .pull_manifest_raw(&r.reference, &RegistryAuth::Anonymous, &accepted)
        .await
        .map_err(|e| registry_error(r, &e))?;
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
    client.pull_blob(&r.reference, &descriptor, &mut wasm).await.map_err(|e| registry_error(r, &e))?;
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
fn registry_error(r: &OciRef, e: &oci_client::errors::OciDistributionError) -> String {
    use oci_client::errors::OciDistributionError as E;
    let text = e.to_string();
    match e {
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => {
            format!("{}: the registry refused anonymous access ({text}); give it credentials", r.text)
        }
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
        E::RequestError(_) => format!("{}: cannot reach registry {} ({text})", r.text, r.registry()),
        _ => format!("{}: {text}", r.text),
    }
}

fn unknown(code: &oci_client::errors::OciErrorCode) -> bool {
    use oci_client::errors::OciErrorCode as C;
    matches!(code, C::ManifestUnknown | C::NameUnknown | C::NotFound | C::BlobUnknown)
}
