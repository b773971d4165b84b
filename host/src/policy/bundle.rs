//! A bundle of policies as files: what a policy ConfigMap (or, later, a
//! directory) holds. `NAME.wasm` or gzip-compressed `NAME.wasm.gz` (so a
//! policy fits a ConfigMap's 1 MiB), or a Python or JavaScript policy
//! shipped as source, `NAME.py` or `NAME.js` (run by that language's
//! interpreter component), and optionally `NAME.yaml` with that
//! policy's weight, config and limits:
//!
//! ```yaml
//! weight: 2
//! failurePolicy: Fail   # a failed filter call fails the attempt; Ignore: skipped
//! memoryLimit: 32Mi
//! deadline: 50ms
//! config: {metric: http_latency_seconds}
//! ```
//!
//! A policy too large for a ConfigMap is named by `url` and `sha256` in
//! its `NAME.yaml`, without a `NAME.wasm` (see [`super::remote`]).
//!
//! An entry whose settings have `shadow` is a candidate: tried beside the
//! deciding entries on the attempts it sees, never deciding
//! (`scheduler::experiments`). It replaces the deciding entry it names, or is
//! added with its weight:
//!
//! ```yaml
//! shadow: {replaces: least-allocated, sampleRate: 0.5}
//! ```
//!
//! With `canary`, it decides for some pods (by a stable hash of their UID,
//! and optionally their namespaces and labels) and stops deciding when
//! more than `maxFailures` of its attempts fail within `window`:
//!
//! ```yaml
//! shadow:
//!   replaces: least-allocated
//!   canary: {percent: 10, namespaces: [team-a], podSelector: {matchLabels: {tier: web}}, maxFailures: 5, window: 10m}
//! ```
//!
//! The deciding entries are all or nothing: one bad deciding entry rejects
//! the whole update, so a profile never runs half of a new set. A candidate
//! fails alone: one that cannot load, fails its smoke run or names no
//! deciding entry is refused by itself (the caller says so on the source),
//! and never keeps the deciding entries from going live.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use serde::Deserialize;

use wasmsched_runtime::smoke::smoke_run;
use wasmsched_runtime::{LoadedPolicy, PolicyEngine, PolicyLimits, PolicySource};

use super::remote::Fetcher;
use crate::scheduler::policy_set::{Canary, FailurePolicy, ShadowCandidate};
use crate::scheduler::{PolicySet, WeightedPolicy};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EntrySettings {
    pub weight: Option<u32>,
    /// What a failed filter call does: `Fail` (the default) or `Ignore`.
    pub failure_policy: Option<FailurePolicy>,
    pub memory_limit: Option<String>,
    pub deadline: Option<String>,
    pub config: Option<serde_yaml::Value>,
    /// Fetch the policy from here instead of a `NAME.wasm` entry...
    pub url: Option<String>,
    /// ...and accept it only with this sha256.
    pub sha256: Option<String>,
    /// A shadow candidate, not a deciding policy.
    pub shadow: Option<ShadowSettings>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShadowSettings {
    /// The deciding entry (its NAME) it would replace; unset: it would be
    /// added, with the entry's weight.
    pub replaces: Option<String>,
    /// The share of pods it sees, 0 to 1 (default 1).
    pub sample_rate: Option<f64>,
    /// It decides for some pods (a canary) instead of only shadowing.
    pub canary: Option<CanarySettings>,
}

/// `canary:` of a candidate's `shadow` settings.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CanarySettings {
    /// Of the pods, 0 to 100, by a stable hash of their UID.
    pub percent: f64,
    #[serde(default)]
    pub namespaces: Vec<String>,
    pub pod_selector: Option<PodSelector>,
    /// Failures (a policy call failed, or it left unschedulable a pod the
    /// deciding policies place)
    /// within `window` past which it stops deciding (default 5).
    pub max_failures: Option<u32>,
    /// Default 10m.
    pub window: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl ShadowSettings {
    /// The sample rate and canary, checked.
    pub fn resolve(&self) -> Result<(f64, Option<Canary>), String> {
        let sample_rate = self.sample_rate.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&sample_rate) {
            return Err(format!("sampleRate {sample_rate} is not a share from 0 to 1"));
        }
        let Some(c) = &self.canary else { return Ok((sample_rate, None)) };
        if !(0.0..=100.0).contains(&c.percent) {
            return Err(format!("canary: percent {} is not from 0 to 100", c.percent));
        }
        let window = match &c.window {
            Some(w) => crate::duration::parse_duration(w).map_err(|e| format!("canary: window: {e}"))?,
            None => std::time::Duration::from_secs(600),
        };
        let match_labels = c.pod_selector.iter().flat_map(|s| s.match_labels.clone()).collect();
        let max_failures = c.max_failures.unwrap_or(5);
        Ok((
            sample_rate,
            Some(Canary { percent: c.percent, namespaces: c.namespaces.clone(), match_labels, max_failures, window }),
        ))
    }
}

#[derive(Debug)]
pub struct BundleEntry {
    pub name: String,
    pub source: PolicySource,
    pub settings: EntrySettings,
}

/// Inflates at most `limit` bytes: a bigger output is refused, however
/// small the input (a decompression bomb).
fn gunzip(name: &str, bytes: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut reader = flate2::read::GzDecoder::new(bytes).take(limit as u64 + 1);
    reader.read_to_end(&mut out).map_err(|e| format!("{name}: not valid gzip: {e}"))?;
    if out.len() > limit {
        return Err(format!("{name}: decompresses to more than the {limit}-byte policy size limit"));
    }
    Ok(out)
}

fn read_settings(files: &BTreeMap<String, Vec<u8>>, name: &str) -> Result<EntrySettings, String> {
    match files.get(&format!("{name}.yaml")).or_else(|| files.get(&format!("{name}.yml"))) {
        Some(yaml) => {
            let text = std::str::from_utf8(yaml).map_err(|_| format!("{name}.yaml: not UTF-8"))?;
            crate::nesting::check_nesting(text).map_err(|e| format!("{name}.yaml: {e}"))?;
            serde_yaml::from_str(text).map_err(|e| format!("{name}.yaml: {e}"))
        }
        None => Ok(EntrySettings::default()),
    }
}

/// The entries of a bundle, by policy name (sorted). `origin` prefixes
/// each policy's source (e.g. `configmap wasmsched/policies`). Entries
/// named by URL are fetched (or taken from the cache) and verified here.
pub fn parse_bundle(
    origin: &str,
    files: &BTreeMap<String, Vec<u8>>,
    max_wasm_bytes: usize,
    fetcher: &Fetcher,
) -> Result<Vec<BundleEntry>, String> {
    let mut entries = Vec::new();
    for (file, bytes) in files {
        let (name, wasm) = if let Some(name) = file.strip_suffix(".wasm.gz") {
            (name, gunzip(file, bytes, max_wasm_bytes)?)
        } else if let Some(name) = file.strip_suffix(".wasm") {
            (name, bytes.clone())
        } else if let Some(name) = file.strip_suffix(".py").or_else(|| file.strip_suffix(".js")) {
            // A policy shipped as source, run by its language's interpreter.
            (name, bytes.clone())
        } else if file.ends_with(".yaml") || file.ends_with(".yml") {
            continue;
        } else {
            return Err(format!("{file}: expected NAME.wasm, NAME.wasm.gz, NAME.py, NAME.js or NAME.yaml"));
        };
        if let Some(other) = entries.iter().find(|e: &&BundleEntry| e.name == name) {
            let first = other.source.file_name();
            return Err(format!("{name}: given twice, as {first} and as {file}; keep one"));
        }
        let settings = read_settings(files, name)?;
        if settings.url.is_some() {
            return Err(format!("{name}: give {file} or a url in {name}.yaml, not both"));
        }
        entries.push(BundleEntry {
            name: name.to_string(),
            source: PolicySource::new(format!("{origin}: {file}"), wasm),
            settings,
        });
    }
    for file in files.keys() {
        let Some(stem) = file.strip_suffix(".yaml").or_else(|| file.strip_suffix(".yml")) else { continue };
        if entries.iter().any(|e| e.name == stem) {
            continue;
        }
        let settings = read_settings(files, stem)?;
        let Some(url) = &settings.url else {
            return Err(format!(
                "{file}: settings for a policy that is not in the bundle (add {stem}.wasm, or url and sha256)"
            ));
        };
        let wasm =
            fetcher.fetch(url, settings.sha256.as_deref(), max_wasm_bytes).map_err(|e| format!("{stem}: {e}"))?;
        let source = PolicySource::new(format!("{origin}: {stem} from {url}"), wasm);
        entries.push(BundleEntry { name: stem.to_string(), source, settings });
    }
    if entries.is_empty() {
        return Err("no policy in it (expected NAME.wasm, NAME.wasm.gz, NAME.py or NAME.js entries)".into());
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// A policy's limits (its own over `base`) and its config as JSON, from the
/// settings operators write (here and in the scheduler configuration).
pub fn resolve_settings(
    base: &PolicyLimits,
    memory_limit: Option<&str>,
    deadline: Option<&str>,
    config: Option<&serde_yaml::Value>,
) -> Result<(PolicyLimits, String), String> {
    let mut limits = base.clone();
    if let Some(m) = memory_limit {
        limits.memory_bytes = wasmsched_rules::quantity::value(m).map_err(|e| format!("memoryLimit: {e}"))? as usize;
    }
    if let Some(d) = deadline {
        limits.call_deadline = crate::duration::parse_duration(d).map_err(|e| format!("deadline: {e}"))?;
    }
    let config = match config {
        Some(v) => super::config::value_to_json(v).map_err(|e| format!("config: {e}"))?,
        None => "{}".to_string(),
    };
    Ok((limits, config))
}

/// A bundle compiled: the set to go live, and the candidates refused
/// alone (`NAME: why`), for the caller to say on the source.
#[derive(Debug)]
pub struct LoadedBundle {
    pub set: PolicySet,
    pub refused_candidates: Vec<String>,
}

/// Compiles and validates every entry (contract version, exports, `init`
/// with its config, a smoke run); off the scheduling path. Errors name the
/// entry. A deciding entry's error refuses the bundle; a candidate's
/// refuses that candidate alone. With a `ceiling` (a tenant's caps), an
/// entry may ask for less memory or a shorter deadline than `base`, never
/// more.
pub fn load_bundle(
    engine: &PolicyEngine,
    entries: &[BundleEntry],
    base: &PolicyLimits,
    ceiling: Option<&PolicyLimits>,
) -> Result<LoadedBundle, String> {
    let mut set = PolicySet::default();
    let (deciding, candidates): (Vec<&BundleEntry>, Vec<&BundleEntry>) =
        entries.iter().partition(|e| e.settings.shadow.is_none());
    let mut names = Vec::new();
    for entry in deciding {
        let policy = load_entry(engine, entry, base, ceiling)?;
        names.push((entry.name.as_str(), policy.name().to_string()));
        let (weight, failure_policy) = (entry.settings.weight.unwrap_or(1), entry.settings.failure_policy);
        set.policies.push(WeightedPolicy::new(policy, weight).with_failure_policy(failure_policy.unwrap_or_default()));
    }
    let mut refused_candidates = Vec::new();
    for entry in candidates {
        let shadow = entry.settings.shadow.as_ref().expect("partitioned on shadow");
        let loaded = load_entry(engine, entry, base, ceiling);
        match loaded.and_then(|policy| candidate(&names, entry, shadow, policy)) {
            Ok(candidate) => set.candidates.push(candidate),
            Err(why) => refused_candidates.push(why),
        }
    }
    Ok(LoadedBundle { set, refused_candidates })
}

/// One entry compiled, initialised with its config and smoke-run, within
/// the tenant `ceiling` if any. Errors name the entry.
fn load_entry(
    engine: &PolicyEngine,
    entry: &BundleEntry,
    base: &PolicyLimits,
    ceiling: Option<&PolicyLimits>,
) -> Result<Arc<LoadedPolicy>, String> {
    let at = |e: String| format!("{}: {e}", entry.name);
    let s = &entry.settings;
    let (limits, config) =
        resolve_settings(base, s.memory_limit.as_deref(), s.deadline.as_deref(), s.config.as_ref()).map_err(at)?;
    if let Some(cap) = ceiling {
        if limits.memory_bytes > cap.memory_bytes {
            return Err(at(format!(
                "memoryLimit {} bytes exceeds the tenant cap of {} bytes",
                limits.memory_bytes, cap.memory_bytes
            )));
        }
        if limits.call_deadline > cap.call_deadline {
            return Err(at(format!(
                "deadline {:?} exceeds the tenant cap of {:?}",
                limits.call_deadline, cap.call_deadline
            )));
        }
    }
    let policy = engine.load(&entry.source, &config, limits).map_err(|e| at(e.to_string()))?;
    if let Some(e) = smoke_run(&policy).failure() {
        return Err(at(format!("failed its smoke run: {e}")));
    }
    Ok(Arc::new(policy))
}

/// The candidate `entry` describes; `replaces` names a deciding entry of
/// the bundle (`deciding`: each entry's name and its policy's), which the
/// candidate knows by its policy's name.
fn candidate(
    deciding: &[(&str, String)],
    entry: &BundleEntry,
    shadow: &ShadowSettings,
    policy: Arc<LoadedPolicy>,
) -> Result<ShadowCandidate, String> {
    let at = |e: String| format!("{}: shadow: {e}", entry.name);
    let (sample_rate, canary) = shadow.resolve().map_err(at)?;
    let replaces = match &shadow.replaces {
        None => None,
        Some(name) => {
            let found = deciding.iter().find(|(entry, _)| entry == name).map(|(_, policy)| policy.clone());
            let names: Vec<&str> = deciding.iter().map(|(entry, _)| *entry).collect();
            Some(found.ok_or_else(|| {
                at(format!(
                    "replaces {name:?}, which is no deciding entry of this bundle (they are: {})",
                    names.join(", ")
                ))
            })?)
        }
    };
    Ok(ShadowCandidate {
        name: entry.name.clone(),
        policy,
        replaces,
        weight: entry.settings.weight.unwrap_or(1),
        failure_policy: entry.settings.failure_policy.unwrap_or_default(),
        sample_rate,
        canary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn entries_settings_and_compression() {
        let files = BTreeMap::from([
            ("a.wasm".to_string(), b"\0asm-a".to_vec()),
            ("b.wasm.gz".to_string(), gz(b"\0asm-b")),
            ("b.yaml".to_string(), b"weight: 3\nconfig: {x: 1}\n".to_vec()),
        ]);
        let entries = parse_bundle("configmap ns/p", &files, 1024, &Fetcher::new(None)).unwrap();
        assert_eq!(entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(&*entries[1].source.bytes, b"\0asm-b");
        assert_eq!(entries[1].settings.weight, Some(3));
        assert_eq!(entries[1].source.origin, "configmap ns/p: b.wasm.gz");
    }

    #[test]
    fn bombs_strays_and_typos_are_refused() {
        let bomb = gz(&vec![0u8; 4 << 20]);
        assert!(bomb.len() < 64 << 10);
        let files = BTreeMap::from([("x.wasm.gz".to_string(), bomb)]);
        assert!(
            parse_bundle("o", &files, 1 << 20, &Fetcher::new(None)).unwrap_err().contains("decompresses to more than")
        );
        let files = BTreeMap::from([("x.txt".to_string(), vec![])]);
        assert!(parse_bundle("o", &files, 1 << 20, &Fetcher::new(None)).unwrap_err().contains("expected NAME.wasm"));
        let files = BTreeMap::from([("x.wasm".to_string(), vec![]), ("x.yaml".to_string(), b"wieght: 2".to_vec())]);
        assert!(
            parse_bundle("o", &files, 1 << 20, &Fetcher::new(None)).unwrap_err().contains("unknown field `wieght`")
        );
        let files = BTreeMap::from([("x.wasm".to_string(), vec![]), ("y.yaml".to_string(), vec![])]);
        assert!(parse_bundle("o", &files, 1 << 20, &Fetcher::new(None)).unwrap_err().contains("not in the bundle"));
        assert!(parse_bundle("o", &BTreeMap::new(), 1 << 20, &Fetcher::new(None)).unwrap_err().contains("no policy"));
        let files = BTreeMap::from([("x.wasm.gz".to_string(), b"not gzip".to_vec())]);
        assert!(parse_bundle("o", &files, 1 << 20, &Fetcher::new(None)).unwrap_err().contains("not valid gzip"));
    }

    #[test]
    fn entries_named_by_url_are_fetched_verified_and_loaded() {
        let wasm = crate::default_policy::DEFAULT_POLICY_WASM.to_vec();
        let sha = PolicySource::new("x", wasm.clone()).sha256();
        let (base, _) = wasmsched_test_support::serve_file(wasm.clone());
        let yaml = format!("url: {base}/policy.wasm\nsha256: {sha}\nweight: 2\n");
        let files = BTreeMap::from([("big.yaml".to_string(), yaml.into_bytes())]);
        let entries = parse_bundle("configmap ns/p", &files, 32 << 20, &Fetcher::new(None)).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(&entries[0].source.bytes[..], &wasm[..]);
        assert_eq!(entries[0].source.origin, format!("configmap ns/p: big from {base}/policy.wasm"));
        let engine = PolicyEngine::new().unwrap();
        let set = load_bundle(&engine, &entries, &PolicyLimits::default(), None).unwrap().set;
        assert_eq!(set.policies[0].weight, 2);

        let with_wasm = BTreeMap::from([
            ("big.wasm".to_string(), wasm.clone()),
            ("big.yaml".to_string(), format!("url: {base}/policy.wasm\nsha256: {sha}\n").into_bytes()),
        ]);
        let e = parse_bundle("o", &with_wasm, 32 << 20, &Fetcher::new(None)).unwrap_err();
        assert!(e.contains("give big.wasm or a url in big.yaml, not both"), "{e}");
        let unpinned = BTreeMap::from([("big.yaml".to_string(), format!("url: {base}/policy.wasm\n").into_bytes())]);
        let e = parse_bundle("o", &unpinned, 32 << 20, &Fetcher::new(None)).unwrap_err();
        assert!(e.contains("a url needs its sha256"), "{e}");
        let e = parse_bundle("o", &files, 32 << 20, &Fetcher::new(None).for_tenants(&[])).unwrap_err();
        assert!(e.starts_with("big: url ") && e.contains("the operators allow tenants no registry"), "{e}");
    }

    /// A candidate that cannot load, or names no deciding entry, is
    /// refused alone; the deciding entries go live. A deciding entry that
    /// cannot load refuses the bundle.
    #[test]
    fn a_broken_candidate_is_refused_alone() {
        let deciding = crate::default_policy::DEFAULT_POLICY_WASM.to_vec();
        let files = BTreeMap::from([
            ("least-allocated.wasm".to_string(), deciding.clone()),
            ("broken.wasm".to_string(), b"\0asm-not-really".to_vec()),
            ("broken.yaml".to_string(), b"shadow: {replaces: least-allocated}\n".to_vec()),
            ("astray.wasm".to_string(), deciding.clone()),
            ("astray.yaml".to_string(), b"shadow: {replaces: nothing}\n".to_vec()),
        ]);
        let entries = parse_bundle("configmap ns/p", &files, 32 << 20, &Fetcher::new(None)).unwrap();
        let engine = PolicyEngine::new().unwrap();
        let loaded = load_bundle(&engine, &entries, &PolicyLimits::default(), None).unwrap();
        assert_eq!(loaded.set.policies.len(), 1);
        assert!(loaded.set.candidates.is_empty());
        let refused = &loaded.refused_candidates;
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused[0].starts_with("astray: shadow: replaces \"nothing\""), "{refused:?}");
        assert!(refused[1].starts_with("broken: "), "{refused:?}");

        let files = BTreeMap::from([("least-allocated.wasm".to_string(), b"\0asm-not-really".to_vec())]);
        let entries = parse_bundle("configmap ns/p", &files, 32 << 20, &Fetcher::new(None)).unwrap();
        let e = load_bundle(&engine, &entries, &PolicyLimits::default(), None).unwrap_err();
        assert!(e.starts_with("least-allocated: "), "{e}");
    }

    #[test]
    fn the_failure_policy_is_read_from_the_settings() {
        let wasm = crate::default_policy::DEFAULT_POLICY_WASM.to_vec();
        let files = BTreeMap::from([
            ("a.wasm".to_string(), wasm.clone()),
            ("a.yaml".to_string(), b"failurePolicy: Ignore\n".to_vec()),
            ("b.wasm".to_string(), wasm.clone()),
        ]);
        let entries = parse_bundle("o", &files, 32 << 20, &Fetcher::new(None)).unwrap();
        let set = load_bundle(&PolicyEngine::new().unwrap(), &entries, &PolicyLimits::default(), None).unwrap().set;
        let policies: Vec<FailurePolicy> = set.policies.iter().map(|wp| wp.failure_policy).collect();
        assert_eq!(policies, [FailurePolicy::Ignore, FailurePolicy::Fail]);
        let typo =
            BTreeMap::from([("a.wasm".to_string(), wasm), ("a.yaml".to_string(), b"failurePolicy: fail\n".to_vec())]);
        let e = parse_bundle("o", &typo, 32 << 20, &Fetcher::new(None)).unwrap_err();
        assert!(e.starts_with("a.yaml: ") && e.contains("unknown variant `fail`, expected `Fail` or `Ignore`"), "{e}");
    }
}
