//! Fuzzing that stays: property tests over arbitrary input, one target per
//! kind of outside input, each a short run in every test run (raise
//! `PROPTEST_CASES` for a long one: docs/security.md). Every target holds
//! the same promise: no panic, and what is refused is refused with a
//! message.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use proptest::prelude::*;
use wasmsched::policy::bundle::parse_bundle;
use wasmsched::policy::config_to_json;
use wasmsched::policy::remote::Fetcher;
use wasmsched::sim::Manifests;
use wasmsched_runtime::{PolicyEngine, PolicyLimits, PolicySource};

/// This many cases unless `PROPTEST_CASES` says otherwise.
fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(default);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

fn engine() -> &'static PolicyEngine {
    static ENGINE: OnceLock<PolicyEngine> = OnceLock::new();
    ENGINE.get_or_init(|| PolicyEngine::new().expect("engine"))
}

/// `core` as the only item of a component.
fn component_of(core: &[u8]) -> Vec<u8> {
    let mut component = wasm_encoder::Component::new();
    component.section(&wasm_encoder::RawSection { id: wasm_encoder::ComponentSectionId::CoreModule as u8, data: core });
    component.finish()
}

/// YAML-ish text: the tokens that steer a YAML parser, in any order.
fn yamlish() -> impl Strategy<Value = String> {
    const TOKENS: &[&str] = &[
        "[",
        "]",
        "{",
        "}",
        ": ",
        ", ",
        "- ",
        "\n",
        "  ",
        "\"",
        "'",
        "# ",
        "| \n",
        "kind: Pod\n",
        "kind: Node\n",
        "metadata: {name: p}\n",
        "---\n",
        "cpu: 1e2147483647\n",
    ];
    // Owned strings: a case's tokens are freed with it, so an hour-long
    // run's memory is the code under test's, not the generator's.
    let token = prop_oneof![
        18 => proptest::sample::select(TOKENS).prop_map(String::from),
        1 => "[a-z0-9.]{1,8}",
    ];
    proptest::collection::vec(token, 0..300).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(cases(32))]

    /// Generated core modules, as components: loaded or refused (none
    /// exports the policy interface), never a panic.
    #[test]
    fn the_loader_refuses_generated_components(seed in proptest::collection::vec(any::<u8>(), 16..2048)) {
        let mut u = arbitrary::Unstructured::new(&seed);
        let config = wasm_smith::Config {
            max_funcs: 20,
            max_instructions: 50,
            // What a policy's engine accepts: past the parser, into the
            // compiler and the contract checks.
            gc_enabled: false,
            reference_types_enabled: false,
            exceptions_enabled: false,
            threads_enabled: false,
            tail_call_enabled: false,
            relaxed_simd_enabled: false,
            ..wasm_smith::Config::default()
        };
        if let Ok(module) = wasm_smith::Module::new(config, &mut u) {
            let source = PolicySource::new("fuzz.wasm", component_of(&module.to_bytes()));
            let limits = PolicyLimits { memory_bytes: 16 << 20, ..PolicyLimits::default() };
            let refused = engine().load(&source, "{}", limits).err();
            prop_assert!(refused.is_some_and(|e| e.to_string().starts_with("fuzz.wasm")));
        }
    }

    /// Bytes after a component's preamble: refused, never a panic.
    #[test]
    fn the_loader_refuses_garbage_after_a_preamble(tail in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
        bytes.extend(tail);
        let loaded = engine().load(&PolicySource::new("junk.wasm", bytes), "{}", PolicyLimits::default());
        prop_assert!(loaded.is_err());
    }

    /// Cluster files: every problem names its file.
    #[test]
    fn cluster_files_are_read_or_refused_with_where(text in yamlish()) {
        let mut manifests = Manifests::default();
        manifests.add_text("fuzz.yaml", &text);
        prop_assert!(manifests.problems.iter().all(|p| p.starts_with("fuzz.yaml")), "{:?}", manifests.problems);
    }

    /// Settings and bundles (a policy's file beside its settings).
    #[test]
    fn settings_and_bundles_are_read_or_refused(text in yamlish(), wasm in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = config_to_json(&text);
        let _ = wasmsched::kubernetes::config::ConfigurationFile::parse(&text);
        let files = BTreeMap::from([("p.wasm".to_string(), wasm), ("p.yaml".to_string(), text.into_bytes())]);
        if let Err(e) = parse_bundle("fuzz", &files, 1 << 20, &Fetcher::new(None)) {
            prop_assert!(!e.is_empty());
        }
    }

    /// Quantities: parsed or refused; a plain number is itself.
    #[test]
    fn quantities_parse_or_are_refused(text in "[0-9.eE+-]{0,6}[mkMGTPEinu]{0,2}[0-9]{0,12}", n in 0u64..1_000_000_000_000) {
        let _ = wasmsched_rules::quantity::milli_value(&text);
        let _ = wasmsched_rules::quantity::value(&text);
        prop_assert_eq!(wasmsched_rules::quantity::value(&n.to_string()), Ok(n));
    }

    /// What a policy answers, as the host decodes it: used with as many
    /// verdicts or scores as candidates, each reason within its cap, or
    /// refused as malformed (or declined) with a bounded message; the next
    /// call works either way.
    #[test]
    fn policy_answers_are_used_or_refused(
        verdicts in proptest::collection::vec(prop_oneof![0u32..4, any::<u32>()], 0..6),
        reasons in proptest::collection::vec(prop_oneof!["[^\u{1e}]{0,40}", "[a-z]{1000,1100}"], 0..5),
        scores in proptest::collection::vec(any::<f64>(), 0..6),
        error in proptest::option::of("[^\u{1e}]{0,64}|[a-z]{4090,4200}"),
    ) {
        let policy = echo_policy();
        let (ctx, candidates) = crate::policy_runtime::three_nodes();
        let joined = |items: Vec<String>| items.join(",");
        let verdicts = joined(verdicts.iter().map(u32::to_string).collect());
        let scores = joined(scores.iter().map(f64::to_string).collect());
        let reasons = reasons.join("\u{1e}");
        let mut labels = vec![("hostile", "true"), ("echo-verdicts", verdicts.as_str()), ("echo-scores", scores.as_str())];
        labels.push(("echo-reasons", reasons.as_str()));
        if let Some(error) = &error {
            labels.push(("echo-error", error.as_str()));
        }
        let pod = crate::policy_runtime::pod("fuzz", &labels);
        match policy.filter(&ctx, &pod, &candidates) {
            Ok(out) => {
                prop_assert_eq!(out.verdicts.len(), candidates.len());
                for i in 0..candidates.len() {
                    prop_assert!(out.rejection(i).is_none_or(|r| r.len() <= 1024));
                }
            }
            Err(e) => refused(&e)?,
        }
        match policy.score(&ctx, &pod, &candidates, 0) {
            Ok(s) => prop_assert!(s.len() == candidates.len() && s.iter().all(|v| v.is_finite())),
            Err(e) => refused(&e)?,
        }
        prop_assert!(policy.score(&ctx, &crate::policy_runtime::pod("calm", &[]), &candidates, 0).is_ok());
    }

    /// A recording's files: read or refused with the file and line.
    #[test]
    fn recordings_are_read_or_refused_with_where(lines in proptest::collection::vec(yamlish(), 0..8)) {
        let dir = tempfile::tempdir().unwrap();
        let header = r#"{"format":"wasmsched-journal/1","segment":1,"started":"x","profiles":["w"],"seed":0,"snapshotLines":0}"#;
        std::fs::write(dir.path().join("journal-000001.jsonl"), format!("{header}\n{}", lines.join("\n"))).unwrap();
        let journal = wasmsched::record::read_journal(dir.path()).unwrap();
        for line in journal.lines() {
            if let Err(e) = line {
                prop_assert!(e.contains("journal-000001.jsonl: line "), "{e}");
            }
        }
    }
}

/// The hostile fixture in `echo` mode: it answers what its pod's labels say.
fn echo_policy() -> &'static wasmsched_runtime::LoadedPolicy {
    static POLICY: OnceLock<wasmsched_runtime::LoadedPolicy> = OnceLock::new();
    POLICY.get_or_init(|| {
        let source = PolicySource::from_file(&wasmsched_test_support::policy_wasm("hostile")).unwrap();
        engine().load(&source, r#"{"mode":"echo"}"#, PolicyLimits::default()).expect("the echo fixture")
    })
}

/// A refusal as the host must make it: named, and short.
fn refused(e: &wasmsched_runtime::PolicyError) -> Result<(), TestCaseError> {
    prop_assert!(matches!(e.kind(), "malformed_result" | "declined"), "{e}");
    prop_assert!(e.to_string().len() <= 4096 + 200, "{} bytes", e.to_string().len());
    Ok(())
}
