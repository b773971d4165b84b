//! The DRA objects of the SchedulingWithResourceClaims shape, for the
//! simulator and the real API server alike: one DeviceClass, one
//! ResourceSlice of eight devices per node, and one ResourceClaim per
//! measured pod (as the resource claim controller makes it from a
//! template) for one device whose model a CEL selector picks.

use serde_json::{Value, json};

pub const CLASS: &str = "gpu";
const DRIVER: &str = "gpu.example.com";

pub fn class() -> Value {
    let selector = format!("device.driver == \"{DRIVER}\"");
    json!({"metadata": {"name": CLASS}, "spec": {"selectors": [{"cel": {"expression": selector}}]}})
}

/// `node`'s slice: its own pool of eight devices.
pub fn slice(node: &str) -> Value {
    let devices: Vec<Value> = (0..8)
        .map(|d| {
            json!({"name": format!("gpu-{d}"), "attributes": {"model": {"string": "a100"}, "index": {"int": d}},
                "capacity": {"memory": {"value": "80Gi"}}})
        })
        .collect();
    json!({"metadata": {"name": format!("{node}-gpus")}, "spec": {"driver": DRIVER, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

/// The claim of pod `pod`: `POD-gpu`.
pub fn claim(pod: &str, namespace: &str) -> Value {
    let selector = format!("device.attributes[\"{DRIVER}\"].model == \"a100\"");
    json!({"metadata": {"name": format!("{pod}-gpu"), "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS,
            "selectors": [{"cel": {"expression": selector}}]}}]}}})
}
