use std::cell::{Cell, OnceCell, RefCell};

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A policy's configuration: the JSON document the operator supplied next to
/// the `.wasm` (as YAML or JSON; the host converts YAML to JSON).
///
/// Parsed on first use, so a policy that never reads its configuration does
/// pay for a JSON parser in size and compile time (docs/benchmarks.md).
///
/// It remembers which keys the policy asked for: a key in the document that
/// `Policy::new` never asked for is refused when the policy loads (see
/// [`Config::unread_error`]), so a misspelled setting cannot be ignored
/// silently.
#[derive(Debug, Clone)]
pub struct Config {
    text: String,
    parsed: OnceCell<Result<Value, String>>,
    /// The keys asked for by `str` and `f64`, present or not.
    asked: RefCell<Vec<String>>,
    /// The whole document was handed out (`value`, `parse`): what the
    /// policy does with it is its own to check.
    whole: Cell<bool>,
}

impl Config {
    /// Takes the document; an empty string counts as `{}`. Syntax errors are
    /// reported by the first getter that reads it.
    pub fn from_json(text: &str) -> Result<Config, String> {
        Ok(Config {
            text: text.to_string(),
            parsed: OnceCell::new(),
            asked: RefCell::default(),
            whole: Cell::new(false),
        })
    }

    /// The parsed document. The policy then checks its keys itself (the
    /// SDK no longer refuses keys it never asked for).
    pub fn value(&self) -> Result<&Value, String> {
        self.whole.set(true);
        self.document()
    }

    fn document(&self) -> Result<&Value, String> {
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
    /// to catch operators' typos: the SDK leaves the keys to serde here).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, String> {
        serde_json::from_value(self.value()?.clone()).map_err(|err| format!("invalid configuration: {err}"))
    }

    /// The top-level field `key`, remembered as one the policy reads.
    fn field(&self, key: &str) -> Result<Option<&Value>, String> {
        let mut asked = self.asked.borrow_mut();
        if !asked.iter().any(|k| k == key) {
            asked.push(key.to_string());
        }
        Ok(self.document()?.get(key))
    }

    /// A top-level string field.
    pub fn str(&self, key: &str) -> Result<Option<&str>, String> {
        match self.field(key)? {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("configuration field `{key}` must be a string, got {other}")),
        }
    }

    /// A top-level numeric field (numbers, or strings that parse as numbers).
    pub fn f64(&self, key: &str) -> Result<Option<f64>, String> {
        match self.field(key)? {
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

    /// A top-level true/false field.
    pub fn flag(&self, key: &str) -> Result<Option<bool>, String> {
        match self.field(key)? {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!("configuration field `{key}` must be true or false, got {other}")),
        }
    }
}

impl Config {
    /// After `Policy::new`: the settings the document holds that the policy
    /// never asked for, refused with the nearest name it did ask for (a
    /// misspelling: `preferedDisk` for `preferredDisk`). `None` when every
    /// key was asked for, or the policy took the whole document.
    pub fn unread_error(&self) -> Option<String> {
        if self.whole.get() {
            return None;
        }
        let Ok(Value::Object(map)) = self.document() else { return None };
        let asked = self.asked.borrow();
        let unread: Vec<&String> = map.keys().filter(|k| !asked.contains(k)).collect();
        if unread.is_empty() {
            return None;
        }
        let mut known: Vec<&str> = asked.iter().map(String::as_str).collect();
        known.sort_unstable();
        let named: Vec<String> = unread
            .iter()
            .map(|k| match nearest(k, &known) {
                Some(near) => format!("`{k}` (did you mean `{near}`?)"),
                None => format!("`{k}`"),
            })
            .collect();
        let plural = if unread.len() == 1 { "" } else { "s" };
        let reads = if known.is_empty() { "no settings".to_string() } else { known.join(", ") };
        Some(format!("unknown setting{plural} {}; this policy reads {reads}", named.join(", ")))
    }
}

/// The name in `known` closest to `typed` by edit distance, if it is close
/// enough to be a misspelling: at most a third of its letters differ.
pub fn nearest<'k>(typed: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = typed.chars().count().div_ceil(3).max(1);
    known
        .iter()
        .map(|k| (edit_distance(&typed.to_lowercase(), &k.to_lowercase()), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance: insertions, deletions and substitutions.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
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
        let flags = Config::from_json(r#"{"strict":true,"loose":"yes"}"#).unwrap();
        assert_eq!(flags.flag("strict").unwrap(), Some(true));
        assert_eq!(flags.flag("absent").unwrap(), None);
        assert!(flags.flag("loose").unwrap_err().contains("`loose` must be true or false"));
        assert!(Config::from_json("{").unwrap().str("x").unwrap_err().contains("not valid JSON"));
    }

    #[test]
    fn a_setting_never_asked_for_is_refused_with_the_nearest_name() {
        let cfg = Config::from_json(r#"{"preferedDisk":"nvme","diskBonus":5,"extra":1}"#).unwrap();
        assert_eq!(cfg.str("preferredDisk").unwrap(), None);
        assert_eq!(cfg.f64("diskBonus").unwrap(), Some(5.0));
        let _ = cfg.str("avoidLabel");
        let e = cfg.unread_error().unwrap();
        assert_eq!(
            e,
            "unknown settings `extra`, `preferedDisk` (did you mean `preferredDisk`?); this policy reads avoidLabel, diskBonus, preferredDisk"
        );
        let one = Config::from_json(r#"{"preferedDisk":"nvme"}"#).unwrap();
        let _ = one.str("preferredDisk");
        assert_eq!(
            one.unread_error().unwrap(),
            "unknown setting `preferedDisk` (did you mean `preferredDisk`?); this policy reads preferredDisk"
        );
        assert!(Config::from_json(r#"{"x":1}"#).unwrap().unread_error().unwrap().ends_with("reads no settings"));
        // Every key read, or the whole document taken: nothing to say.
        assert_eq!(one.str("preferedDisk").map(|_| one.unread_error()), Ok(None));
        let whole = Config::from_json(r#"{"anything":1}"#).unwrap();
        let _ = whole.value();
        assert_eq!(whole.unread_error(), None);
        assert_eq!(Config::from_json("").unwrap().unread_error(), None);
    }

    #[test]
    fn nearest_names_are_close_ones_only() {
        assert_eq!(nearest("zoneBonsu", &["preferredZone", "zoneBonus"]), Some("zoneBonus"));
        assert_eq!(nearest("ZONEBONUS", &["zoneBonus"]), Some("zoneBonus"));
        assert_eq!(nearest("weight", &["preferredZone", "zoneBonus"]), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
