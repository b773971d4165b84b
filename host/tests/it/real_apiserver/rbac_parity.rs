//! deploy/rbac.yaml beside kube-scheduler's own roles, as a v1.36 API
//! server has them (`system:kube-scheduler`, `system:volume-scheduler`):
//! every verb on every resource they grant is granted by deploy/ or listed
//! there as deliberately not granted, with the reason; everything deploy/
//! grants beyond them is listed too. And `wasmsched auth check`, for the
//! configuration deploy/ ships, finds every permission granted.

use super::*;

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::Api;

/// (group, resource, verb); the core group is `core`, as rbac.yaml's
/// comments write it.
type Grant = (String, String, String);

fn grants(rules: &[PolicyRule]) -> BTreeSet<Grant> {
    let mut all = BTreeSet::new();
    for rule in rules {
        for group in rule.api_groups.iter().flatten() {
            let group = if group.is_empty() { "core" } else { group.as_str() };
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    all.insert((group.to_string(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    all
}

/// The differences rbac.yaml lists as deliberate: `# not granted: …` and
/// `# beyond: …`, each with a reason after `--`.
#[derive(Debug, Default)]
struct Deliberate {
    not_granted: BTreeSet<Grant>,
    beyond: BTreeSet<Grant>,
}

fn deliberate(text: &str) -> Deliberate {
    let mut found = Deliberate::default();
    for line in text.lines() {
        let (set, rest) = if let Some(rest) = line.strip_prefix("# not granted: ") {
            (&mut found.not_granted, rest)
        } else if let Some(rest) = line.strip_prefix("# beyond: ") {
            (&mut found.beyond, rest)
        } else {
            continue;
        };
        let (what, why) = rest.split_once(" -- ").unwrap_or_else(|| panic!("no reason given: {line}"));
        assert!(why.trim().len() > 10, "say why: {line}");
        let [group, resource, verbs] = what.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("not `GROUP RESOURCE VERB,...`: {line}")
        };
        for verb in verbs.split(',') {
            set.insert((group.to_string(), resource.to_string(), verb.to_string()));
        }
    }
    found
}

/// The rules of every Role and ClusterRole in a YAML text.
fn role_rules(text: &str) -> Vec<PolicyRule> {
    let mut rules = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let object = <Value as serde::Deserialize>::deserialize(doc).unwrap();
        if matches!(object["kind"].as_str(), Some("Role" | "ClusterRole")) {
            rules.extend(serde_json::from_value::<Vec<PolicyRule>>(object["rules"].clone()).unwrap());
        }
    }
    rules
}

/// Every difference between what kube grants and what deploy/ grants that
/// the list does not account for, and every listed one that is not a
/// difference.
fn problems(kube: &BTreeSet<Grant>, deploy: &BTreeSet<Grant>, listed: &Deliberate) -> Vec<String> {
    let mut problems = Vec::new();
    for g in kube.difference(deploy).filter(|g| !listed.not_granted.contains(*g)) {
        problems
            .push(format!("kube-scheduler's roles grant {g:?}; deploy/rbac.yaml neither grants it nor says why not"));
    }
    for g in deploy.difference(kube).filter(|g| !listed.beyond.contains(*g)) {
        problems.push(format!("deploy/rbac.yaml grants {g:?} beyond kube-scheduler's roles without saying why"));
    }
    for g in listed.not_granted.iter().filter(|g| deploy.contains(*g) || !kube.contains(*g)) {
        problems.push(format!("listed as not granted, but {g:?} is granted, or not kube-scheduler's"));
    }
    for g in listed.beyond.iter().filter(|g| !deploy.contains(*g) || kube.contains(*g)) {
        problems.push(format!("listed as beyond kube-scheduler's roles, but {g:?} is not granted, or is theirs too"));
    }
    problems
}

#[test]
fn deploy_grants_what_kube_scheduler_grants_or_says_why() {
    let Some(real) = Real::start("rbac-parity") else { return };
    real.block_on(async {
        let roles: Api<ClusterRole> = Api::all(real.admin.clone());
        let mut kube_rules = Vec::new();
        for name in ["system:kube-scheduler", "system:volume-scheduler"] {
            kube_rules.extend(roles.get(name).await.unwrap().rules.unwrap_or_default());
        }
        let kube = grants(&kube_rules);
        assert!(
            kube.contains(&("resource.k8s.io".into(), "resourceclaims/binding".into(), "patch".into())),
            "{kube:?}"
        );

        let path = wasmsched_test_support::workspace_root().join("deploy/rbac.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let listed = deliberate(&text);
        let rules = role_rules(&text);
        let found = problems(&kube, &grants(&rules), &listed);
        assert!(found.is_empty(), "deploy/rbac.yaml against kube-scheduler's roles:\n{}", found.join("\n"));

        // The check fails when any one rule is taken away.
        for (i, rule) in rules.iter().enumerate() {
            let mut fewer = rules.clone();
            fewer.remove(i);
            assert!(!problems(&kube, &grants(&fewer), &listed).is_empty(), "removing {rule:?} went unnoticed");
        }

        // What deploy/'s configuration makes `wasmsched run` use, reviewed
        // by the API server for deploy/'s identity: the README's command,
        // as written.
        real.deploy_identity().await;
        let root = wasmsched_test_support::workspace_root();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let line = readme.lines().find(|l| l.starts_with("wasmsched auth check")).expect("the README's command");
        let out = real.shell(&root, line);
        assert!(out.contains("identity: system:serviceaccount:wasmsched:wasmsched"), "{out}");
        assert!(out.contains("patch resourceclaims.resource.k8s.io/binding"), "{out}");
        assert!(out.lines().last().unwrap().starts_with("all ") && !out.contains("MISSING"), "{out}");
    });
}
