//! What a recording leaves out of an object: the values of environment
//! variables (secrets are often put there), last-applied annotations
//! (a whole earlier object, env included) and managed fields (bulk).

use serde_json::Value;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

pub fn redact(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove(LAST_APPLIED);
        }
    }
    strip_env_values(object);
}

/// Every `env: [{name, value}]` list anywhere in the object keeps its
/// names and references (`valueFrom`), not its values.
fn strip_env_values(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(env)) = map.get_mut("env") {
                for var in env.iter_mut().filter_map(Value::as_object_mut) {
                    if var.remove("value").is_some() {
                        var.insert("value".into(), Value::String("(not recorded)".into()));
                    }
                }
            }
            map.values_mut().for_each(strip_env_values);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_env_values),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn env_values_and_last_applied_are_not_kept() {
        let mut pod = json!({
            "metadata": {"name": "p", "annotations": {LAST_APPLIED: "{\"secret\":1}", "team": "a"},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"containers": [{"name": "c", "env": [
                {"name": "TOKEN", "value": "hunter2"},
                {"name": "FROM", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}
        });
        redact(&mut pod);
        let text = pod.to_string();
        assert!(
            !text.contains("hunter2") && !text.contains("secret\\\":1") && !text.contains("managedFields"),
            "{text}"
        );
        assert_eq!(pod["metadata"]["annotations"]["team"], "a");
        assert_eq!(pod["spec"]["containers"][0]["env"][1]["valueFrom"]["secretKeyRef"]["key"], "k");
    }
}
