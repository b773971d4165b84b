//! Policy configuration as operators write it (YAML or JSON) turned into the
//! JSON document the `config` import hands to the policy. The one path for
//! every place a configuration is written: a `config=FILE` of `--policy`, a
//! `config:` field of the scheduler configuration or of a bundle's
//! `NAME.yaml`.

/// Converts YAML or JSON text to compact JSON. Empty text is `{}`. The error
/// says where the problem is (`line 3 column 7: ...`).
pub fn config_to_json(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Ok("{}".to_string());
    }
    crate::nesting::check_nesting(text)?;
    let value: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    value_to_json(&value)
}

/// A configuration already parsed as YAML (a `config:` field) as JSON: it
/// must be a mapping.
pub fn value_to_json(value: &serde_yaml::Value) -> Result<String, String> {
    let value: serde_json::Value = serde_json::to_value(value).map_err(|e| e.to_string())?;
    if !value.is_object() {
        return Err(format!("a policy configuration must be a mapping of fields, got {}", kind(&value)));
    }
    Ok(value.to_string())
}

fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "nothing",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_json_become_json() {
        assert_eq!(config_to_json("").unwrap(), "{}");
        assert_eq!(
            config_to_json("metric: latency\nmaxAgeSeconds: 30\n").unwrap(),
            r#"{"maxAgeSeconds":30,"metric":"latency"}"#
        );
        assert_eq!(config_to_json(r#"{"metric": "x"}"#).unwrap(), r#"{"metric":"x"}"#);
        let err = config_to_json("metric: [unclosed\n").unwrap_err();
        assert!(err.contains("line"), "{err}");
        assert_eq!(
            config_to_json("- a\n- b\n").unwrap_err(),
            "a policy configuration must be a mapping of fields, got a list"
        );
        let field: serde_yaml::Value = serde_yaml::from_str("3").unwrap();
        assert_eq!(
            value_to_json(&field).unwrap_err(),
            "a policy configuration must be a mapping of fields, got a number"
        );
        let field: serde_yaml::Value = serde_yaml::from_str("{x: [1]}").unwrap();
        assert_eq!(value_to_json(&field).unwrap(), r#"{"x":[1]}"#);
    }
}
