//! Field and label selectors, as kube-apiserver evaluates them.

use serde_json::Value;

/// `a=b`, `a==b`, `a!=b` terms joined by commas; all must hold.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

/// Fields kube-apiserver accepts in a field selector, per resource
/// (`GetAttrs` of each registry); anything else is a 400.
fn supported_fields(resource: &str) -> &'static [&'static str] {
    match resource {
        "pods" => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "nodes" => &["metadata.name", "spec.unschedulable"],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

impl FieldSelector {
    pub fn parse(resource: &str, text: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!("invalid selector: '{text}'; can't understand '{term}'"));
            };
            let field = field.trim();
            if !supported_fields(resource).contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, value)| (field_value(object, field) == *value) == *equal)
    }
}

/// A field's value as the selector sees it: strings as-is, booleans as
/// `true`/`false`, absent as the empty string.
fn field_value(object: &Value, path: &str) -> String {
    let mut v = object;
    for part in path.split('.') {
        match v.get(part) {
            Some(next) => v = next,
            None => return String::new(),
        }
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[derive(Debug, Clone)]
enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// Equality- and set-based label selectors.
#[derive(Debug, Clone, Default)]
pub struct LabelSelector {
    terms: Vec<LabelTerm>,
}

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut terms = Vec::new();
        for term in split_top_level(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let set = |rest: &str| -> Result<Vec<String>, String> {
                let inner = rest.trim().strip_prefix('(').and_then(|r| r.strip_suffix(')'));
                let inner = inner.ok_or_else(|| format!("unable to parse requirement: {term}"))?;
                Ok(inner.split(',').map(|s| s.trim().to_string()).collect())
            };
            let parsed = if let Some(key) = term.strip_prefix('!') {
                LabelTerm::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = term.split_once(" notin ") {
                LabelTerm::NotIn(k.trim().to_string(), set(v)?)
            } else if let Some((k, v)) = term.split_once(" in ") {
                LabelTerm::In(k.trim().to_string(), set(v)?)
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelTerm::NotEquals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                LabelTerm::Equals(k.trim().to_string(), v.trim().to_string())
            } else {
                LabelTerm::Exists(term.to_string())
            };
            terms.push(parsed);
        }
        Ok(LabelSelector { terms })
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.terms.iter().all(|t| match t {
            LabelTerm::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelTerm::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelTerm::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelTerm::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelTerm::Exists(k) => get(k).is_some(),
            LabelTerm::NotExists(k) => get(k).is_none(),
        })
    }
}

/// Splits on commas outside parentheses (`a in (x,y),b`).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scheduler_selectors_match_like_the_apiserver() {
        let pending =
            json!({"metadata": {"name": "a"}, "spec": {"schedulerName": "wasmsched"}, "status": {"phase": "Pending"}});
        let bound = json!({"metadata": {"name": "b"}, "spec": {"schedulerName": "wasmsched", "nodeName": "n1"}, "status": {"phase": "Running"}});
        let unbound = FieldSelector::parse("pods", "spec.schedulerName=wasmsched,spec.nodeName=").unwrap();
        assert!(unbound.matches(&pending));
        assert!(!unbound.matches(&bound));
        let live = FieldSelector::parse("pods", "status.phase!=Succeeded,status.phase!=Failed").unwrap();
        assert!(live.matches(&pending) && live.matches(&bound));
        assert!(!live.matches(&json!({"status": {"phase": "Failed"}})));
        assert!(FieldSelector::parse("pods", "spec.containers=x").unwrap_err().contains("not supported"));
    }

    #[test]
    fn label_selectors() {
        let o = json!({"metadata": {"labels": {"wasmsched.io/policy": "true", "tier": "web"}}});
        assert!(LabelSelector::parse("wasmsched.io/policy=true").unwrap().matches(&o));
        assert!(LabelSelector::parse("tier in (web,db),!missing").unwrap().matches(&o));
        assert!(!LabelSelector::parse("tier notin (web)").unwrap().matches(&o));
    }
}
