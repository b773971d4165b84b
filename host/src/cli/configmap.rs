//! `wasmsched configmap POLICY.wasm [--config FILE]`: the policy ConfigMap
//! made from the files a policy author has (the built `.wasm` and its
//! settings file), ready for `kubectl apply --server-side -f -`. The
//! policy is loaded with its settings first, as the scheduler will load
//! it: a policy that fails (a misspelled setting included) gives no
//! manifest. One too large for a ConfigMap is named by `--url` instead (a
//! registry or an HTTP server), pinned to this very file by its sha256.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use base64::Engine as _;
use clap::Args;
use serde_yaml::{Mapping, Value};
use wasmsched_runtime::PolicySource;

use wasmsched::policy::config_to_json;
use wasmsched::policy::flags::LimitArgs;
use wasmsched::scheduler::{FailurePolicy, POLICY_CONFIGMAP_LABEL};

/// What kube-apiserver accepts in one ConfigMap's `data` and `binaryData`.
const CONFIGMAP_LIMIT: usize = 1 << 20;
/// A client-side `kubectl apply` copies the object into an annotation the
/// API server caps at 256 KiB; base64 takes 4/3 of the bytes.
const CLIENT_SIDE_APPLY_LIMIT: usize = (256 << 10) * 3 / 4;

#[derive(Args, Debug)]
pub struct ConfigMapArgs {
    /// The built policy component (.wasm), or a Python or JavaScript
    /// policy's source (.py, .js), which the ConfigMap carries as text.
    #[arg(required_unless_present = "promote")]
    pub policy: Option<PathBuf>,
    /// Instead: read a policy ConfigMap on stdin (`kubectl -n wasmsched get
    /// configmap wasmsched-policies -o yaml`) and write it with candidate
    /// NAME made a deciding policy, in the place of the entry it replaces,
    /// for `kubectl replace -f -`.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["policy", "config", "entry", "weight", "failure_policy", "url", "candidate", "replaces", "canary"])]
    pub promote: Option<String>,
    /// Its settings file (YAML or JSON): the entry's `config:`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The entry's name, as pods and `/policies` name the policy (default:
    /// the name the policy declares).
    #[arg(long, value_name = "NAME")]
    pub entry: Option<String>,
    /// The policy's weight among the profile's policies.
    #[arg(long, value_name = "N")]
    pub weight: Option<u32>,
    /// What a failed filter call does: Fail (the default: the pod waits,
    /// retried with backoff) or Ignore (the filter is skipped).
    #[arg(long, value_name = "Fail|Ignore")]
    pub failure_policy: Option<FailurePolicy>,
    /// Name it by URL instead of carrying it (`oci://REGISTRY/REPOSITORY@sha256:…`
    /// from `wasmsched push`, or an https:// URL): for policies too large
    /// for a ConfigMap. The entry pins this file's sha256.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The ConfigMap's name.
    #[arg(long, value_name = "NAME", default_value = "wasmsched-policies")]
    pub configmap: String,
    /// Its namespace (deploy/ installs the scheduler in `wasmsched`).
    #[arg(long, short = 'n', value_name = "NS", default_value = "wasmsched")]
    pub namespace: String,
    /// A tenant's ConfigMap: labelled `wasmsched.io/policy=true`, for the
    /// pods of its namespace that opt in. With --candidate or --replaces,
    /// a tenant's candidate, tried on its namespace's pods only (a tenant's
    /// candidate never decides: no --canary; annotate pods instead).
    #[arg(long, conflicts_with = "canary")]
    pub tenant: bool,
    /// A shadow candidate: tried beside the deciding policies on the same
    /// attempts, never deciding (`wasmsched experiments` shows what it
    /// would have done). Applied server-side with a field manager of its
    /// own, the entry joins the ConfigMap's others.
    #[arg(long)]
    pub candidate: bool,
    /// The deciding entry the candidate would replace (else it is added
    /// with --weight); implies --candidate.
    #[arg(long, value_name = "ENTRY")]
    pub replaces: Option<String>,
    /// Let the candidate decide for this percentage of the pods (a stable
    /// hash of their UID), stopped when more than 5 of its attempts fail
    /// within 10 minutes; implies --candidate.
    #[arg(long, value_name = "PERCENT")]
    pub canary: Option<f64>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn run(args: ConfigMapArgs) -> anyhow::Result<ExitCode> {
    let Some(path) = args.policy.clone() else {
        let name = args.promote.as_deref().unwrap_or_default();
        let mut manifest = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut manifest).context("reading stdin")?;
        let promoted =
            super::configmap_promote::promote(&manifest, name).map_err(|e| anyhow::anyhow!("--promote {name}: {e}"))?;
        std::io::stdout().write_all(promoted.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    };
    let source = PolicySource::from_file(&path).with_context(|| format!("reading {}", path.display()))?;
    let (config, settings) = read_settings(args.config.as_deref())?;
    let engine = super::compile_worker::engine(&args.limits)?;
    wasmsched::policy::flags::announce_long_compile(&engine, &source);
    let policy = match engine.load(&source, &config, args.limits.to_limits()?) {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("FAIL  {e}");
            eprintln!("      no manifest written: `wasmsched check {}` says more", path.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    let name = args.entry.clone().unwrap_or_else(|| policy.name().to_string());
    let (data, binary) = entries(&args, &path, &name, &source, settings)?;
    let header = format!(
        "# The policy {name} ({}, sha256 {}), made by `wasmsched configmap`.\n# Apply: kubectl apply --server-side -f FILE (or pipe it: -f -).\n",
        path.display(),
        &source.sha256()[..12]
    );
    let manifest = header + &serde_yaml::to_string(&configmap(&args, data, binary))?;
    std::io::stdout().write_all(manifest.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The settings file, read once: as the JSON the policy is loaded with,
/// and as the YAML of the entry's `config:` (`None` without one).
fn read_settings(path: Option<&std::path::Path>) -> anyhow::Result<(String, Option<Value>)> {
    let Some(path) = path else { return Ok(("{}".to_string(), None)) };
    let text = wasmsched_runtime::read_text_bounded(path, wasmsched_runtime::MAX_SETTINGS_BYTES, "settings size")
        .with_context(|| format!("reading {}", path.display()))?;
    let json = config_to_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let value: Value = serde_yaml::from_str(&text).with_context(|| path.display().to_string())?;
    Ok((json, (!value.is_null()).then_some(value)))
}

/// `NAME.yaml` (`data`) and `NAME.wasm.gz` (`binaryData`, unless the
/// policy is named by `--url`).
fn entries(
    args: &ConfigMapArgs,
    path: &std::path::Path,
    name: &str,
    source: &PolicySource,
    settings: Option<Value>,
) -> anyhow::Result<(Mapping, Mapping)> {
    let mut entry = Mapping::new();
    entry.insert("weight".into(), args.weight.unwrap_or(1).into());
    if let Some(failure_policy) = args.failure_policy {
        entry.insert("failurePolicy".into(), failure_policy.as_str().into());
    }
    if let Some(settings) = settings {
        entry.insert("config".into(), settings);
    }
    if let Some(shadow) = shadow(args)? {
        entry.insert("shadow".into(), shadow);
    }
    let mut binary = Mapping::new();
    let mut data = Mapping::new();
    match &args.url {
        Some(_) if source.language.is_some() => {
            bail!("--url names a component; {} is source, carried in the ConfigMap itself", path.display())
        }
        None if source.language.is_some() => {
            // A policy shipped as source is text: the entry carries it as
            // written, for `kubectl get -o yaml` and a review to read.
            let text = std::str::from_utf8(&source.bytes).with_context(|| format!("{}", path.display()))?;
            if text.len() > CONFIGMAP_LIMIT - 4096 {
                bail!("{} is {} bytes, too large for a ConfigMap (1 MiB)", path.display(), text.len());
            }
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("py");
            data.insert(format!("{name}.{extension}").into(), text.into());
        }
        Some(url) => {
            refuse_a_tag(url)?;
            entry.insert("url".into(), url.clone().into());
            entry.insert("sha256".into(), source.sha256().into());
        }
        None => {
            let gz = gzip(&source.bytes)?;
            if gz.len() > CONFIGMAP_LIMIT - 4096 {
                bail!(
                    "{} is {} bytes gzipped, too large for a ConfigMap (1 MiB): push it (`wasmsched push {} oci://REGISTRY/REPOSITORY:TAG`) and name it with --url oci://…@sha256:…",
                    path.display(),
                    gz.len(),
                    path.display()
                );
            }
            if gz.len() > CLIENT_SIDE_APPLY_LIMIT {
                eprintln!(
                    "note: {} bytes gzipped: apply it with `kubectl apply --server-side -f -` (a client-side apply's annotation is capped at 256 KiB)",
                    gz.len()
                );
            }
            let encoded = base64::engine::general_purpose::STANDARD.encode(&gz);
            binary.insert(format!("{name}.wasm.gz").into(), encoded.into());
        }
    }
    data.insert(format!("{name}.yaml").into(), serde_yaml::to_string(&entry)?.into());
    Ok((data, binary))
}

/// The entry's `shadow:` settings, for a candidate.
fn shadow(args: &ConfigMapArgs) -> anyhow::Result<Option<Value>> {
    if !args.candidate && args.replaces.is_none() && args.canary.is_none() {
        return Ok(None);
    }
    let mut shadow = Mapping::new();
    if let Some(name) = &args.replaces {
        shadow.insert("replaces".into(), name.clone().into());
    }
    if let Some(percent) = args.canary {
        if !(0.0..=100.0).contains(&percent) {
            bail!("--canary {percent}: a percentage from 0 to 100");
        }
        shadow.insert("canary".into(), Mapping::from_iter([(Value::from("percent"), Value::from(percent))]).into());
    }
    Ok(Some(shadow.into()))
}

/// The ConfigMap object around the entries.
fn configmap(args: &ConfigMapArgs, data: Mapping, binary: Mapping) -> Mapping {
    let mut metadata = Mapping::new();
    metadata.insert("name".into(), args.configmap.clone().into());
    metadata.insert("namespace".into(), args.namespace.clone().into());
    if args.tenant {
        let labels = Mapping::from_iter([(Value::from(POLICY_CONFIGMAP_LABEL), Value::from("true"))]);
        metadata.insert("labels".into(), labels.into());
    }
    let mut object = Mapping::new();
    object.insert("apiVersion".into(), "v1".into());
    object.insert("kind".into(), "ConfigMap".into());
    object.insert("metadata".into(), metadata.into());
    object.insert("data".into(), data.into());
    if !binary.is_empty() {
        object.insert("binaryData".into(), binary.into());
    }
    object
}

fn gzip(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes)?;
    Ok(encoder.finish()?)
}

/// An `oci://` URL must be pinned by digest: the scheduler refuses a tag
/// (it can move under a running scheduler), so a manifest naming one
/// would only fail once applied.
fn refuse_a_tag(url: &str) -> anyhow::Result<()> {
    if !url.starts_with("oci://") {
        return Ok(());
    }
    let reference = wasmsched::policy::oci::OciRef::parse(url).map_err(|e| anyhow::anyhow!("--url {e}"))?;
    if reference.digest().is_none() {
        bail!(
            "--url {url}: name it by digest (oci://REGISTRY/REPOSITORY@sha256:DIGEST): the scheduler refuses a tag, \
             which can move under it; `wasmsched check {url}` prints the digest to pin"
        );
    }
    Ok(())
}
