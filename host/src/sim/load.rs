//! Reading cluster objects from Kubernetes YAML or JSON: files or
//! directories, multi-document files, `List` objects (what `kubectl get
//! nodes,pods -A -o yaml` prints). Every problem names the file and the
//! document (and the list item) it is in.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::scheduler::WATCHED_KINDS;
use crate::sim::objects::{ClusterObjects, ObjectReader};

/// The kinds only the simulator reads: what the API server's admission
/// and the claim controller make of pods.
const SIMULATOR_KINDS: [&str; 2] = ["PriorityClass", "ResourceClaimTemplate"];

/// The kinds the simulator reads, for messages.
fn kinds() -> String {
    let mut kinds: Vec<&str> = Vec::new();
    // A kind watched in several versions is named once.
    for kind in WATCHED_KINDS.iter().map(|k| k.kind).chain(SIMULATOR_KINDS) {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds.join(", ")
}

/// What takes a bound pod as soon as it is read (a simulation's core, so
/// that the `Pod` is not kept); it gives back a pod it does not take.
pub type TakeBound<'a> = &'a mut dyn FnMut(Pod) -> Option<Pod>;

#[derive(Debug, Default)]
pub struct Manifests {
    /// The objects of every kind the scheduling core watches.
    pub objects: ClusterObjects,
    /// Resolve pods' `priorityClassName`, as the Priority admission plugin
    /// does when a pod is created.
    pub priority_classes: Vec<PriorityClass>,
    /// What pods' claims are made from (`claim_templates`).
    pub claim_templates: Vec<ResourceClaimTemplate>,
    /// Kinds that were read but are not simulated (Deployments, Services…).
    pub ignored_kinds: BTreeMap<String, usize>,
    /// Documents that could not be used, with where they are.
    pub problems: Vec<String>,
    /// Every object read, as written (List items one by one), when asked
    /// for (`keeping_documents`, for `simulate --write-cluster`); `None`
    /// otherwise, so a simulation holds each object once.
    pub documents: Option<Vec<serde_yaml::Value>>,
    /// Where each object was first read, by kind, namespace and name.
    first_at: HashMap<(String, String, String), String>,
    /// Bound pods read and taken as they were read (not in `objects`).
    pub bound_taken: usize,
}

impl Manifests {
    /// Manifests that also keep every object as it was written.
    pub fn keeping_documents() -> Self {
        Manifests { documents: Some(Vec::new()), ..Manifests::default() }
    }

    /// Reads YAML text; `origin` names it in messages.
    pub fn add_text(&mut self, origin: &str, text: &str) {
        if let Err(e) = crate::nesting::check_nesting(text) {
            return self.problems.push(format!("{origin}: {e}"));
        }
        for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let at = format!("{origin}: document {}", index + 1);
            match serde_yaml::Value::deserialize(document) {
                Ok(serde_yaml::Value::Null) => {}
                Ok(value) => self.add_value(&at, value, &mut Some),
                Err(e) => {
                    self.problems.push(format!("{at}: {e}"));
                    // The YAML stream cannot be resumed after a syntax error.
                    break;
                }
            }
        }
    }

    fn add_value(&mut self, at: &str, mut value: serde_yaml::Value, take: TakeBound<'_>) {
        let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or_default().to_string();
        let api_version = value.get("apiVersion").and_then(|k| k.as_str()).unwrap_or_default().to_string();
        if kind == "List" || kind.ends_with("List") {
            let items = value.get_mut("items").and_then(|i| i.as_sequence_mut()).map(std::mem::take);
            for (i, item) in items.unwrap_or_default().into_iter().enumerate() {
                self.add_value(&format!("{at}, item {}", i + 1), item, take);
            }
            return;
        }
        if kind.is_empty() {
            return self.problems.push(format!("{at}: no `kind` (expected {} or List)", kinds()));
        }
        let Manifests {
            objects, priority_classes, claim_templates, problems, documents, first_at, bound_taken, ..
        } = self;
        let mut reader = Reader { at, value: Some(value), problems, documents, first_at };
        match kind.as_str() {
            "Pod" if api_version == "v1" => {
                let Some(pod) = reader.read::<Pod>(&kind, true) else { return };
                let kept = if Self::bound_and_admitted(&pod, priority_classes) { take(pod) } else { Some(pod) };
                match kept {
                    Some(pod) => objects.pods.push(pod),
                    None => *bound_taken += 1,
                }
            }
            "PriorityClass" => priority_classes.extend(reader.read(&kind, false)),
            "ResourceClaimTemplate" => claim_templates.extend(reader.read(&kind, true)),
            _ if objects.read(&api_version, &kind, &mut reader) => {}
            _ => *self.ignored_kinds.entry(kind).or_default() += 1,
        }
    }

    /// Gives each pod without `spec.priority` the value (and preemption
    /// policy) of its PriorityClass, or of the global default class, as the
    /// API server's Priority admission does; a class that is not there is
    /// a problem, as the API server would refuse the pod.
    pub fn admit_priorities(&mut self) {
        let default = self.priority_classes.iter().find(|c| c.global_default == Some(true));
        for pod in &mut self.objects.pods {
            let Some(spec) = pod.spec.as_mut() else { continue };
            if spec.priority.is_some() {
                continue;
            }
            let class = match spec.priority_class_name.as_deref() {
                Some(name) => match self.priority_classes.iter().find(|c| c.metadata.name.as_deref() == Some(name)) {
                    Some(class) => Some(class),
                    // kube's built-in classes.
                    None if name == "system-cluster-critical" => {
                        spec.priority = Some(2_000_000_000);
                        continue;
                    }
                    None if name == "system-node-critical" => {
                        spec.priority = Some(2_000_001_000);
                        continue;
                    }
                    None => {
                        let pod_name = pod.metadata.name.clone().unwrap_or_default();
                        self.problems.push(format!(
                            "pod {pod_name}: no PriorityClass named {name:?} (add it to the manifests, or set spec.priority)"
                        ));
                        continue;
                    }
                },
                None => default,
            };
            if let Some(class) = class {
                // An absent value is Go's zero, as the Priority admission plugin reads it.
                spec.priority = Some(class.value.unwrap_or(0));
                if spec.preemption_policy.is_none() {
                    spec.preemption_policy = class.preemption_policy.clone();
                }
            }
        }
    }

    /// Whether `pod` is bound and needs nothing of what is read later: a
    /// priority given, or its class's known (a pod the Priority admission
    /// still has to resolve waits for every class to be read).
    fn bound_and_admitted(pod: &Pod, classes: &[PriorityClass]) -> bool {
        let Some(spec) = pod.spec.as_ref().filter(|s| s.node_name.is_some()) else { return false };
        match (&spec.priority, &spec.priority_class_name) {
            (Some(_), _) => true,
            (None, Some(name)) => classes.iter().any(|c| c.metadata.name.as_ref() == Some(name)),
            (None, None) => !classes.iter().any(|c| c.global_default == Some(true)),
        }
    }

    /// Reads files and directories (recursively: `*.yaml`, `*.yml`, `*.json`).
    pub fn read_paths(paths: &[PathBuf]) -> Result<Manifests, String> {
        let mut manifests = Manifests::default();
        manifests.add_paths(paths)?;
        Ok(manifests)
    }

    /// Reads files and directories (their `.yaml`, `.yml` and `.json`
    /// files, gzipped or not, sorted) into these manifests.
    pub fn add_paths(&mut self, paths: &[PathBuf]) -> Result<(), String> {
        self.add_paths_taking(paths, &mut Some)
    }

    /// As `add_paths`, each bound pod handed to `take` as it is read
    /// (a simulation's core keeps what it needs of it, not the `Pod`).
    pub fn add_paths_taking(&mut self, paths: &[PathBuf], take: TakeBound<'_>) -> Result<(), String> {
        let mut files = Vec::new();
        for path in paths {
            collect(path, &mut files).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        for file in files {
            let problem = super::stream::read_objects(&file, &mut |at, value| self.add_value(&at, value, take));
            if let Err(problem) = problem {
                // The rest of that file cannot be read past a syntax error.
                self.problems.push(problem);
            }
        }
        Ok(())
    }
}

/// Reads the one document at `at`: a kind's object, unless it is
/// malformed, has no name, or one of its kind and name was read before (a
/// cluster holds one; a second is never silently merged).
struct Reader<'a> {
    at: &'a str,
    /// The document, taken by the one read (kept as written when asked).
    value: Option<serde_yaml::Value>,
    problems: &'a mut Vec<String>,
    documents: &'a mut Option<Vec<serde_yaml::Value>>,
    first_at: &'a mut HashMap<(String, String, String), String>,
}

impl ObjectReader for Reader<'_> {
    fn read<K: DeserializeOwned + Metadata<Ty = ObjectMeta>>(&mut self, kind: &str, namespaced: bool) -> Option<K> {
        let at = self.at;
        let value = self.value.take()?;
        let object = match K::deserialize(&value) {
            Ok(object) if object.metadata().name.as_deref().is_some_and(|n| !n.is_empty()) => object,
            Ok(_) => {
                self.problems.push(format!("{at}: {kind} without metadata.name"));
                return None;
            }
            Err(e) => {
                self.problems.push(format!("{at}: not a valid {kind}: {e}"));
                return None;
            }
        };
        let meta = object.metadata();
        let namespace = match &meta.namespace {
            Some(namespace) => namespace.clone(),
            // Where `kubectl apply` would create it.
            None if namespaced => "default".into(),
            None => String::new(),
        };
        let name = meta.name.clone().unwrap_or_default();
        let key = (kind.to_string(), namespace.clone(), name.clone());
        if let Some(first) = self.first_at.get(&key) {
            let shown = if namespace.is_empty() { name } else { format!("{namespace}/{name}") };
            self.problems.push(format!(
                "{at}: a second {kind} {shown} (the first is at {first}); a cluster holds one of each name"
            ));
            return None;
        }
        self.first_at.insert(key, at.to_string());
        if let Some(documents) = self.documents.as_mut() {
            documents.push(value);
        }
        Some(object)
    }
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(path)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
        entries.sort();
        for entry in entries {
            let name = entry.to_string_lossy();
            let name = name.trim_end_matches(".gz");
            let manifest = [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e));
            if entry.is_dir() || manifest {
                collect(&entry, files)?;
            }
        }
        Ok(())
    } else {
        std::fs::metadata(path)?;
        files.push(path.to_path_buf());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_lists_and_problems_with_positions() {
        let mut m = Manifests::default();
        m.add_text(
            "a.yaml",
            r#"
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p1}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: p2}, spec: {containers: "not a list"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---
metadata: {name: mystery}
"#,
        );
        assert_eq!(m.objects.nodes.len(), 1);
        assert_eq!(m.objects.pods.len(), 1);
        assert_eq!(m.ignored_kinds.get("Deployment"), Some(&1));
        assert_eq!(m.problems.len(), 2, "{:?}", m.problems);
        assert!(m.problems[0].starts_with("a.yaml: document 2, item 2: not a valid Pod:"), "{}", m.problems[0]);
        assert_eq!(m.problems[1], format!("a.yaml: document 4: no `kind` (expected {} or List)", kinds()));
    }

    #[test]
    fn a_second_node_or_pod_of_one_name_is_a_problem_not_a_merge() {
        let mut m = Manifests::default();
        let pod = "kind: Pod\nmetadata: {name: p, namespace: t}\nspec: {containers: [{name: c}]}\n";
        m.add_text("a.yaml", &format!("kind: Node\nmetadata: {{name: n}}\n---\n{pod}"));
        m.add_text("b.yaml", &format!("kind: Node\nmetadata: {{name: n}}\n---\n{pod}---\nkind: Pod\nmetadata: {{name: p, namespace: u}}\nspec: {{containers: [{{name: c}}]}}\n"));
        assert_eq!((m.objects.nodes.len(), m.objects.pods.len()), (1, 2));
        assert_eq!(
            m.problems,
            [
                "b.yaml: document 1: a second Node n (the first is at a.yaml: document 1); a cluster holds one of each name",
                "b.yaml: document 2: a second Pod t/p (the first is at a.yaml: document 2); a cluster holds one of each name",
            ]
        );
    }

    #[test]
    fn a_syntax_error_names_the_document() {
        let mut m = Manifests::default();
        m.add_text("b.yaml", "kind: Node\nmetadata: {name: ok}\n---\nkind: Pod\nmetadata: {name: [unclosed\n");
        assert_eq!(m.objects.nodes.len(), 1);
        assert!(m.problems[0].starts_with("b.yaml: document 2: "), "{:?}", m.problems);
    }
}
