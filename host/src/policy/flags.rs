//! What the commands that load policies share: the sandbox limit flags and
//! reading a policy's configuration file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::policy::config_to_json;
use crate::policy::oci::{self, Registries};
use crate::policy::remote::Fetcher;
use crate::scheduler::policy_set::FailurePolicy;
use crate::scheduler::{PolicySet, WeightedPolicy};
use anyhow::{Context, bail};
use clap::Args;
use wasmsched_runtime::{Interpreters, PolicyEngine, PolicyLimits, PolicySource};

#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Memory cap per policy instance, as a Kubernetes quantity.
    #[arg(long, value_name = "QUANTITY", default_value = "256Mi")]
    pub memory_limit: String,
    /// Deadline of one policy call, e.g. 100ms or 2s.
    #[arg(long, value_name = "DURATION", default_value = "250ms")]
    pub deadline: String,
    /// Keep compiled policies, and policies fetched by URL, in this
    /// directory: a large policy (an interpreter inside, as Python and
    /// JavaScript policies have) then compiles once, not at every start.
    #[arg(long, value_name = "DIR", env = "WASMSCHED_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Speak plain HTTP, not HTTPS, to this registry of `oci://` policies
    /// (HOST:PORT; loopback only, such as a local test registry).
    #[arg(long, value_name = "HOST:PORT")]
    pub registry_plain_http: Vec<String>,
    /// Credentials for registries of `oci://` policies: a Docker
    /// `config.json` (as `docker login` writes it), or a directory holding
    /// one as `.dockerconfigjson` (a `kubernetes.io/dockerconfigjson`
    /// Secret mounted there) or `config.json`; an empty directory (an
    /// optional Secret not created) means none.
    #[arg(long, value_name = "FILE|DIR")]
    pub registry_config: Option<PathBuf>,
    /// Trust this CA certificate (PEM) for registries' TLS, beside the
    /// public roots.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Vec<PathBuf>,
    /// Where the interpreter components that run Python and JavaScript
    /// policies shipped as source are (`wasmsched-python.wasm`,
    /// `wasmsched-js.wasm`) [default: beside this executable:
    /// `interpreters/`, `../interpreters/`, `../share/wasmsched/interpreters/`].
    #[arg(long, value_name = "DIR", env = "WASMSCHED_INTERPRETERS")]
    pub interpreters: Option<PathBuf>,
}

impl LimitArgs {
    pub fn to_limits(&self) -> anyhow::Result<PolicyLimits> {
        let memory_bytes = wasmsched_rules::quantity::value(&self.memory_limit).context("--memory-limit")?;
        let call_deadline = parse_duration(&self.deadline).context("--deadline")?;
        Ok(PolicyLimits { memory_bytes: memory_bytes as usize, call_deadline, ..PolicyLimits::default() })
    }

    /// The registries `oci://` references are spoken to as asked.
    pub fn registries(&self) -> anyhow::Result<Registries> {
        let mut registries = Registries::default();
        for registry in &self.registry_plain_http {
            registries.allow_plain_http(registry).map_err(|e| anyhow::anyhow!("--registry-plain-http {e}"))?;
        }
        if let Some(path) = self.registry_config.as_deref().map(docker_config).transpose()?.flatten() {
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("--registry-config {}", path.display()))?;
            registries
                .add_docker_config(&text)
                .map_err(|e| anyhow::anyhow!("--registry-config {}: {e}", path.display()))?;
        }
        for path in &self.registry_ca {
            let pem = std::fs::read(path).with_context(|| format!("--registry-ca {}", path.display()))?;
            registries.ca_pem.push(pem);
        }
        Ok(registries)
    }

    /// What fetches `oci://` (and URL) policies for a command run by hand:
    /// through the cache directory, and a tag alone is resolved (`check`
    /// prints the digest to pin).
    pub fn fetcher(&self) -> anyhow::Result<Fetcher> {
        Ok(Fetcher::new(self.cache_dir.clone()).with_registries(self.registries()?).allowing_tags())
    }

    /// Where source policies' interpreters are looked for.
    pub fn interpreters(&self) -> Interpreters {
        match &self.interpreters {
            Some(dir) => Interpreters { dirs: vec![dir.clone()] },
            None => std::env::current_exe().map(|exe| Interpreters::beside(&exe)).unwrap_or_default(),
        }
    }

    /// An engine that uses the cache directory, if one is given.
    pub fn engine(&self) -> anyhow::Result<PolicyEngine> {
        let engine = PolicyEngine::new()?.with_interpreters(self.interpreters());
        Ok(match &self.cache_dir {
            Some(dir) => engine.with_cache_dir(dir),
            None => engine,
        })
    }
}

/// The user's cache directory for wasmsched, as the XDG base directories
/// say: `$XDG_CACHE_HOME/wasmsched`, else `$HOME/.cache/wasmsched`; `None`
/// with neither set (absolute). Bounded as any cache directory is.
pub fn user_cache_dir() -> Option<PathBuf> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|home| home.join(".cache")))?;
    Some(base.join("wasmsched"))
}

/// The Docker config `--registry-config` names: the file itself, or in a
/// directory `.dockerconfigjson` or `config.json`; `None` for a directory
/// with neither. A path that does not exist is an error.
fn docker_config(path: &Path) -> anyhow::Result<Option<PathBuf>> {
    if !path.is_dir() {
        anyhow::ensure!(path.exists(), "--registry-config {}: no such file or directory", path.display());
        return Ok(Some(path.to_path_buf()));
    }
    Ok([".dockerconfigjson", "config.json"].iter().map(|name| path.join(name)).find(|p| p.exists()))
}

/// A policy's configuration as JSON: from a YAML or JSON file, or `{}`.
/// Errors name the file (and the line, for syntax errors).
pub fn read_config(path: Option<&Path>) -> anyhow::Result<String> {
    let Some(path) = path else { return Ok("{}".to_string()) };
    let text = wasmsched_runtime::read_text_bounded(path, wasmsched_runtime::MAX_SETTINGS_BYTES, "settings size")
        .with_context(|| format!("reading {}", path.display()))?;
    config_to_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// `250ms`, `2s`, `1.5s`, `1m` (see `wasmsched::duration`).
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    crate::duration::parse_duration(text).map_err(anyhow::Error::msg)
}

/// `PATH[,weight=N][,config=FILE][,failurePolicy=Fail|Ignore]`
pub struct PolicySpec {
    pub path: PathBuf,
    pub weight: u32,
    pub config: Option<PathBuf>,
    pub failure_policy: FailurePolicy,
}

pub fn parse_policy_spec(spec: &str) -> anyhow::Result<PolicySpec> {
    let mut parts = spec.split(',');
    let path = PathBuf::from(parts.next().unwrap_or_default());
    let mut parsed = PolicySpec { path, weight: 1, config: None, failure_policy: FailurePolicy::default() };
    for part in parts {
        match part.split_once('=') {
            Some(("weight", w)) => {
                parsed.weight =
                    w.parse().with_context(|| format!("--policy {spec}: weight {w:?} is not a whole number"))?;
            }
            Some(("config", file)) => parsed.config = Some(PathBuf::from(file)),
            Some(("failurePolicy", value)) => {
                parsed.failure_policy = value.parse().map_err(|e| anyhow::anyhow!("--policy {spec}: {e}"))?
            }
            _ => bail!(
                "--policy {spec}: unknown option {part:?} (expected weight=N, config=FILE or failurePolicy=Fail|Ignore)"
            ),
        }
    }
    Ok(parsed)
}

/// `--tenant-policy NAMESPACE/NAME=PATH[,config=FILE]`: a tenant's policy,
/// loaded within the default tenant caps. Returns (namespace, name, policy).
pub fn load_tenant_policy(
    spec: &str,
    engine: &PolicyEngine,
) -> anyhow::Result<(String, String, Arc<wasmsched_runtime::LoadedPolicy>)> {
    let (owner, policy_spec) = spec
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("--tenant-policy {spec}: expected NAMESPACE/NAME=PATH[,config=FILE]"))?;
    let (namespace, name) = owner
        .split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty())
        .ok_or_else(|| anyhow::anyhow!("--tenant-policy {spec}: expected NAMESPACE/NAME=PATH[,config=FILE]"))?;
    let parsed = parse_policy_spec(policy_spec)?;
    if parsed.weight != 1 {
        bail!("--tenant-policy {spec}: a tenant policy decides alone; weight does not apply");
    }
    if parsed.failure_policy != FailurePolicy::Fail {
        bail!(
            "--tenant-policy {spec}: a tenant's failurePolicy is set in its ConfigMap's NAME.yaml; here its filter fails closed (Fail), the default"
        );
    }
    let source = PolicySource::from_file(&parsed.path).with_context(|| format!("reading {}", parsed.path.display()))?;
    let config = read_config(parsed.config.as_deref())?;
    let policy = engine
        .load(&source, &config, crate::scheduler::default_tenant_limits())
        .with_context(|| format!("--tenant-policy {owner}"))?;
    Ok((namespace.to_string(), name.to_string(), Arc::new(policy)))
}

/// The files `--tenant-policy` specs read.
pub fn tenant_policy_files(specs: &[String]) -> anyhow::Result<Vec<PathBuf>> {
    let policy_specs: Vec<String> =
        specs.iter().filter_map(|s| s.split_once('=').map(|(_, p)| p.to_string())).collect();
    policy_files(&policy_specs)
}

/// The files `--policy` specs read: the policies and their configs (a
/// policy from a registry is not a file).
pub fn policy_files(specs: &[String]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for spec in specs {
        let spec = parse_policy_spec(spec)?;
        if !spec.path.to_str().is_some_and(oci::is_oci) {
            files.push(spec.path);
        }
        files.extend(spec.config);
    }
    Ok(files)
}

/// A policy file, or the artifact an `oci://` reference names (with the
/// manifest digest that pins it), pulled only up to `limits`' size cap,
/// the one `run` applies to it too.
pub fn policy_source(
    location: &Path,
    fetcher: &Fetcher,
    limits: &PolicyLimits,
) -> anyhow::Result<(PolicySource, Option<String>)> {
    match location.to_str().filter(|l| oci::is_oci(l)) {
        Some(reference) => {
            let (wasm, digest) =
                fetcher.fetch_oci(reference, None, limits.max_wasm_bytes).map_err(anyhow::Error::msg)?;
            Ok((PolicySource::new(reference.to_string(), wasm), Some(digest)))
        }
        None => {
            let source = PolicySource::from_file_within(location, limits.max_wasm_bytes)
                .with_context(|| format!("reading {}", location.display()))?;
            Ok((source, None))
        }
    }
}

/// Policies this large carry their language's interpreter (Python's, or
/// JavaScript's): compiling one takes seconds, not milliseconds.
const LONG_COMPILE_BYTES: usize = 4 << 20;

/// Says on stderr, before it starts, that compiling `source` will take a
/// while, and whether the result will be kept: seconds of silence read as a
/// hang.
pub fn announce_long_compile(engine: &PolicyEngine, source: &PolicySource) {
    let Some(compiled) = engine.to_compile(source).filter(|c| c.bytes.len() >= LONG_COMPILE_BYTES) else {
        return;
    };
    let kept = match engine.kept_in(source) {
        Some(dir) if source.language.is_some() => format!("once: {} keeps it for every policy", dir.display()),
        Some(_) => "once: the cache directory keeps the result for the next run".to_string(),
        None => "at every run: --cache-dir DIR (or WASMSCHED_CACHE_DIR) keeps the result".to_string(),
    };
    let megabytes = compiled.bytes.len() as f64 / 1e6;
    let what = match source.language {
        Some(language) => format!("{}'s interpreter {} ({megabytes:.1} MB)", language.as_str(), compiled.origin),
        None => format!("{} ({megabytes:.1} MB, with its language's interpreter inside)", source.origin),
    };
    eprintln!("compiling {what} takes seconds, {kept}");
}

/// Loads `--policy` specs, or the embedded default policy when there are
/// none. Returns the set and a one-line label for it.
pub fn load_policies(
    specs: &[String],
    engine: &PolicyEngine,
    limits: &PolicyLimits,
    fetcher: &Fetcher,
) -> anyhow::Result<(PolicySet, String)> {
    if specs.is_empty() {
        let policy = engine.load(&crate::default_policy::source(), "{}", limits.clone())?;
        let label = format!("{} {} (embedded)", policy.info.name, policy.info.version);
        return Ok((PolicySet::new(vec![WeightedPolicy::new(Arc::new(policy), 1)]), label));
    }
    let mut policies = Vec::new();
    let mut labels = Vec::new();
    for spec in specs {
        let spec = parse_policy_spec(spec)?;
        let (source, _) = policy_source(&spec.path, fetcher, limits)?;
        let config = read_config(spec.config.as_deref())?;
        announce_long_compile(engine, &source);
        let policy = engine.load(&source, &config, limits.clone())?;
        // What a failed filter call does, for the policies that filter.
        let on_failure = match policy.info.phases.filter {
            true => format!(" (filter failurePolicy: {})", spec.failure_policy),
            false => String::new(),
        };
        labels.push(format!("{} {} ×{}{on_failure}", policy.info.name, policy.info.version, spec.weight));
        policies.push(WeightedPolicy::new(Arc::new(policy), spec.weight).with_failure_policy(spec.failure_policy));
    }
    Ok((PolicySet::new(policies), labels.join(", ")))
}

/// `--candidate PATH[,replaces=NAME][,weight=N][,config=FILE][,sample=RATE][,canary=PERCENT][,failurePolicy=Fail|Ignore]`:
/// a shadow candidate, tried beside the deciding policies and never
/// deciding. It replaces the deciding policy named `replaces` (taking its
/// weight), or is added with `weight`; it sees `sample` of the pods (0 to
/// 1, default all). With `canary`, it decides for that percentage of the
/// pods (by a stable hash), stopped after 5 failures within 10 minutes.
pub fn load_candidate(
    spec: &str,
    engine: &PolicyEngine,
    limits: &PolicyLimits,
    fetcher: &Fetcher,
) -> anyhow::Result<crate::scheduler::policy_set::ShadowCandidate> {
    let mut parts = spec.split(',');
    let path = PathBuf::from(parts.next().unwrap_or_default());
    let (mut replaces, mut weight, mut config, mut sample_rate) = (None, 1, None, 1.0);
    let (mut canary, mut failure_policy) = (None, FailurePolicy::default());
    for part in parts {
        match part.split_once('=') {
            Some(("replaces", name)) if !name.is_empty() => replaces = Some(name.to_string()),
            Some(("weight", w)) => {
                weight = w.parse().with_context(|| format!("--candidate {spec}: weight {w:?} is not a whole number"))?
            }
            Some(("config", file)) => config = Some(PathBuf::from(file)),
            Some(("failurePolicy", value)) => {
                failure_policy = value.parse().map_err(|e| anyhow::anyhow!("--candidate {spec}: {e}"))?
            }
            Some(("canary", percent)) => {
                let percent = percent.parse::<f64>().ok().filter(|p| (0.0..=100.0).contains(p)).with_context(|| {
                    format!("--candidate {spec}: canary {percent:?} is not a percentage from 0 to 100")
                })?;
                canary = Some(crate::scheduler::policy_set::Canary {
                    percent,
                    namespaces: Vec::new(),
                    match_labels: Vec::new(),
                    max_failures: 5,
                    window: Duration::from_secs(600),
                });
            }
            Some(("sample", rate)) => {
                sample_rate = rate
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .with_context(|| format!("--candidate {spec}: sample {rate:?} is not a share from 0 to 1"))?
            }
            _ => bail!(
                "--candidate {spec}: unknown option {part:?} (expected replaces=NAME, weight=N, config=FILE, sample=RATE, canary=PERCENT or failurePolicy=Fail|Ignore)"
            ),
        }
    }
    let (source, _) = policy_source(&path, fetcher, limits)?;
    let config = read_config(config.as_deref())?;
    announce_long_compile(engine, &source);
    let policy = engine.load(&source, &config, limits.clone()).with_context(|| format!("--candidate {spec}"))?;
    let name = format!("{} {}", policy.info.name, policy.info.version);
    let policy = Arc::new(policy);
    Ok(crate::scheduler::policy_set::ShadowCandidate {
        name,
        policy,
        replaces,
        weight,
        failure_policy,
        sample_rate,
        canary,
    })
}

/// `--tenant-candidate NAMESPACE=SPEC`: a tenant's shadow candidate, held
/// to the tenant caps, seeing only that namespace's pods. `replaces=NAME`
/// names one of the namespace's `--tenant-policy` policies (by the name
/// pods give in their annotation), as a tenant's ConfigMap names its own
/// entry; a tenant's candidate never decides (no `canary`).
pub fn load_tenant_candidate(
    spec: &str,
    engine: &PolicyEngine,
    fetcher: &Fetcher,
    tenants: &[(String, String, Arc<wasmsched_runtime::LoadedPolicy>)],
) -> anyhow::Result<(String, crate::scheduler::policy_set::ShadowCandidate)> {
    let usage = "expected NAMESPACE=PATH[,replaces=NAME][,weight=N][,config=FILE][,sample=RATE]";
    let (namespace, candidate_spec) = spec
        .split_once('=')
        .filter(|(ns, _)| !ns.is_empty() && !ns.contains(['/', ',']))
        .ok_or_else(|| anyhow::anyhow!("--tenant-candidate {spec}: {usage}"))?;
    let mut candidate = load_candidate(candidate_spec, engine, &crate::scheduler::default_tenant_limits(), fetcher)
        .map_err(|e| {
            anyhow::anyhow!(format!("{e:#}").replacen("--candidate ", &format!("--tenant-candidate {namespace}="), 1))
        })?;
    if candidate.canary.is_some() {
        bail!(
            "--tenant-candidate {spec}: a tenant's candidate never decides (a tenant hands pods to a policy by their annotation); drop canary="
        );
    }
    if let Some(name) = &candidate.replaces {
        let policy = tenants.iter().find(|(ns, n, _)| ns == namespace && n == name).ok_or_else(|| {
            anyhow::anyhow!(
                "--tenant-candidate {spec}: replaces {name:?}, which no --tenant-policy {namespace}/{name}=... supplies"
            )
        })?;
        candidate.replaces = Some(policy.2.name().to_string());
    }
    Ok((namespace.to_string(), candidate))
}
