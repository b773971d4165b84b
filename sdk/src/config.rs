use std::cell::OnceCell;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A policy's configuration: the JSON document the operator supplied next to
/// the `.wasm` (as YAML or JSON; the host converts YAML to JSON).
///
/// Parsed on first use, so a policy that never reads its configuration does
/// pay for a JSON parser in size and compile time (docs/benchmarks.md).
#[derive(Debug, Clone)]
pub struct Config {
    text: String,
    parsed: OnceCell<Result<Value, String>>,
}

impl Config {
    /// Takes the document; an empty string counts as `{}`. Syntax errors are
    /// reported by the first getter that reads it.
    pub fn from_json(text: &str) -> Result<Config, String> {
        Ok(Config { text: text.to_string(), parsed: OnceCell::new() })
    }

    /// The parsed document.
    pub fn value(&self) -> Result<&Value, String> {
        self.parsed
            .get_or_init(|| {
                if self.text.trim().is_empty() {
                    return Ok(Value::Object(Default::default()));
                }
                serde_json::from_str(&self.text).map_err(|err| format!("configuration is not valid JSON: {err}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The whole document as a typed struct (use `#[serde(deny_unknown_fields)]`
    /// to catch operators' typos).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, String> {
        serde_json::from_value(self.value()?.clone()).map_err(|err| format!("invalid configuration: {err}"))
    }

    /// A top-level string field.
    pub fn str(&self, key: &str) -> Result<Option<&str>, String> {
        match self.value()?.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("configuration field `{key}` must be a string, got {other}")),
        }
    }

    /// A top-level numeric field (numbers, or strings that parse as numbers).
    pub fn f64(&self, key: &str) -> Result<Option<f64>, String> {
        match self.value()?.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(Value::String(s)) => s
                .trim()
                .parse::<f64>()
                .map(Some)
                .map_err(|_| format!("configuration field `{key}` must be a number, got {s:?}")),
            Some(other) => Err(format!("configuration field `{key}` must be a number, got {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_an_empty_object_and_fields_are_typed() {
        let empty = Config::from_json("  ").unwrap();
        assert_eq!(empty.str("metric").unwrap(), None);
        let cfg = Config::from_json(r#"{"metric":"latency","default":"2.5","bad":[1]}"#).unwrap();
        assert_eq!(cfg.str("metric").unwrap(), Some("latency"));
        assert_eq!(cfg.f64("default").unwrap(), Some(2.5));
        assert!(cfg.f64("bad").unwrap_err().contains("`bad` must be a number"));
        assert!(Config::from_json("{").unwrap().str("x").unwrap_err().contains("not valid JSON"));
    }
}
