//! Merge patches as kube-apiserver applies them to the fields wasmsched
//! patches.

use serde_json::{Map, Value};

/// RFC 7386 merge patch; with `strategic`, lists of objects that carry a
/// merge key (`type` for conditions, `name` for containers and the like)
/// are merged by that key, as the strategic merge patch does for the
/// fields wasmsched patches.
pub fn merge_patch(target: &mut Value, patch: &Value, strategic: bool) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target_map = target.as_object_mut().expect("object");
    for (k, v) in patch_map {
        if v.is_null() {
            target_map.remove(k);
            continue;
        }
        match (target_map.get_mut(k), v) {
            (Some(Value::Array(existing)), Value::Array(items)) if strategic => {
                let merge_key = ["type", "name"]
                    .into_iter()
                    .find(|mk| items.iter().all(|i| i.get(mk).is_some()) && !items.is_empty());
                match merge_key {
                    Some(mk) => {
                        for item in items {
                            match existing.iter_mut().find(|e| e.get(mk) == item.get(mk)) {
                                Some(e) => merge_patch(e, item, true),
                                None => existing.push(item.clone()),
                            }
                        }
                    }
                    None => *existing = items.clone(),
                }
            }
            (Some(existing), Value::Object(_)) => merge_patch(existing, v, strategic),
            _ => {
                target_map.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_patch_merges_conditions_by_type() {
        let mut pod = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let patch =
            json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
        merge_patch(&mut pod, &patch, true);
        assert_eq!(pod["status"]["conditions"].as_array().unwrap().len(), 2);
        merge_patch(&mut pod, &patch, false);
        assert_eq!(pod["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
