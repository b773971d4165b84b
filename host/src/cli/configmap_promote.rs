//! `wasmsched configmap --promote NAME`: a policy ConfigMap, read as
//! `kubectl get -o yaml` prints it, with its candidate NAME made a deciding
//! policy, for `kubectl replace -f -`. The deciding entry it replaced goes
//! (its `.wasm`, `.wasm.gz` and settings), and its settings lose `shadow`
//! and take the replaced entry's weight, as it held it while a candidate.
//! One command whatever made the bundle (deploy/'s kustomization, or
//! `wasmsched configmap`, which writes every entry's `NAME.yaml`), where a
//! JSON patch must know which files exist. `resourceVersion` is kept: the
//! replace fails, rather than loses an edit, if the ConfigMap changed since.

use serde_yaml::{Mapping, Value};

/// The ConfigMap `manifest` with candidate `name` promoted; errors say what
/// is missing and which entries there are.
pub fn promote(manifest: &str, name: &str) -> Result<String, String> {
    let mut object: Mapping = serde_yaml::from_str(manifest).map_err(|e| format!("not a ConfigMap: {e}"))?;
    if object.get("kind").and_then(Value::as_str) != Some("ConfigMap") {
        return Err("not a ConfigMap (pipe `kubectl -n NS get configmap NAME -o yaml` in)".into());
    }
    if let Some(Value::Mapping(metadata)) = object.get_mut("metadata") {
        // The server recomputes them; sent back, they would be taken as set.
        metadata.remove("managedFields");
    }
    let mut data = take_mapping(&mut object, "data");
    let mut binary = take_mapping(&mut object, "binaryData");
    let (key, mut settings) = settings_of(&data, name).ok_or_else(|| no_candidate(name, &data, &binary))?;
    let Some(Value::Mapping(shadow)) = settings.remove("shadow") else {
        return Err(format!("{name} is a deciding entry already (its {key} has no `shadow`)"));
    };
    if let Some(replaced) = shadow.get("replaces").and_then(Value::as_str) {
        let weight = settings_of(&data, replaced).and_then(|(_, s)| s.get("weight").cloned());
        settings.insert("weight".into(), weight.unwrap_or(Value::from(1)));
        for suffix in [".wasm", ".wasm.gz", ".yaml", ".yml"] {
            let file = Value::from(format!("{replaced}{suffix}"));
            data.remove(&file);
            binary.remove(&file);
        }
    }
    let text = serde_yaml::to_string(&settings).map_err(|e| e.to_string())?;
    data.insert(Value::from(key), Value::from(text));
    object.insert("data".into(), data.into());
    if !binary.is_empty() {
        object.insert("binaryData".into(), binary.into());
    }
    serde_yaml::to_string(&object).map_err(|e| e.to_string())
}

fn take_mapping(object: &mut Mapping, field: &str) -> Mapping {
    match object.remove(field) {
        Some(Value::Mapping(m)) => m,
        _ => Mapping::new(),
    }
}

/// The entry's settings file and its settings, if it has one.
fn settings_of(data: &Mapping, name: &str) -> Option<(String, Mapping)> {
    [format!("{name}.yaml"), format!("{name}.yml")].into_iter().find_map(|key| {
        let text = data.get(key.as_str())?.as_str()?;
        let settings = serde_yaml::from_str::<Option<Mapping>>(text).ok()?.unwrap_or_default();
        Some((key, settings))
    })
}

fn no_candidate(name: &str, data: &Mapping, binary: &Mapping) -> String {
    let mut files: Vec<&str> = data.keys().chain(binary.keys()).filter_map(Value::as_str).collect();
    files.sort_unstable();
    format!("{name}: no settings of a candidate named so in this ConfigMap (its files: {})", files.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wasmsched-policies\n  namespace: wasmsched\n  resourceVersion: \"42\"\n  managedFields: [{manager: kubectl}]\nbinaryData:\n  least-allocated.wasm.gz: AAAA\n  spot-first.wasm.gz: BBBB\n";

    fn promoted(manifest: &str) -> Mapping {
        serde_yaml::from_str(&promote(manifest, "spot-first").unwrap()).unwrap()
    }

    fn settings(object: &Mapping) -> Mapping {
        let text = object["data"]["spot-first.yaml"].as_str().unwrap();
        serde_yaml::from_str(text).unwrap()
    }

    #[test]
    fn from_a_deployed_bundle_and_from_one_with_every_entrys_settings() {
        let candidate = "data:\n  spot-first.yaml: \"weight: 1\\nshadow: {replaces: least-allocated}\\n\"\n";
        let object = promoted(&format!("{DEPLOYED}{candidate}"));
        let binary: Vec<&str> = object["binaryData"].as_mapping().unwrap().keys().filter_map(Value::as_str).collect();
        assert_eq!(binary, ["spot-first.wasm.gz"]);
        assert_eq!(settings(&object), serde_yaml::from_str::<Mapping>("weight: 1").unwrap());
        assert_eq!(object["metadata"]["resourceVersion"], Value::from("42"));
        assert!(object["metadata"].get("managedFields").is_none());

        // `wasmsched configmap` wrote the deciding entry's settings too: they
        // go with it, and its weight passes to the candidate.
        let both = "data:\n  least-allocated.yaml: \"weight: 3\\n\"\n  spot-first.yaml: \"weight: 1\\nshadow: {replaces: least-allocated, canary: {percent: 10}}\\n\"\n";
        let object = promoted(&format!("{DEPLOYED}{both}"));
        let data: Vec<&str> = object["data"].as_mapping().unwrap().keys().filter_map(Value::as_str).collect();
        assert_eq!(data, ["spot-first.yaml"]);
        assert_eq!(settings(&object), serde_yaml::from_str::<Mapping>("weight: 3").unwrap());
    }

    #[test]
    fn what_cannot_be_promoted_says_why() {
        let e = promote(DEPLOYED, "spot-first").unwrap_err();
        assert!(e.contains("no settings of a candidate") && e.contains("least-allocated.wasm.gz"), "{e}");
        let deciding = format!("{DEPLOYED}data:\n  spot-first.yaml: \"weight: 2\\n\"\n");
        assert!(promote(&deciding, "spot-first").unwrap_err().contains("a deciding entry already"));
        assert!(promote("kind: Pod\n", "x").unwrap_err().contains("not a ConfigMap"));
    }
}
