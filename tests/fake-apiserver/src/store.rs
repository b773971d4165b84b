//! The object store: what etcd plus the registry strategies do in
//! kube-apiserver, for the resources wasmsched uses. One global
//! resourceVersion counter; every change is appended to a bounded log that
//! watches replay from, and broadcast to live watches in order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::patch::merge_patch;
use crate::resources::ResourceType;
use crate::status::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One committed change, as watches see it.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub resource: ResourceType,
    pub kind: ChangeType,
    /// The object before (for selector transitions), if it existed.
    pub before: Option<Arc<Value>>,
    /// The object after; for a deletion, its last state.
    pub object: Arc<Value>,
}

pub type Key = (ResourceType, String, String);

pub struct Store {
    pub rv: u64,
    objects: BTreeMap<Key, Arc<Value>>,
    log: VecDeque<Arc<Change>>,
    log_capacity: usize,
    /// The oldest resourceVersion a watch may start from.
    pub oldest_watchable: u64,
    uid_counter: u64,
    pub changes: broadcast::Sender<Arc<Change>>,
    /// Successful bindings per `ns/name`, to prove no double binding.
    pub bindings: HashMap<String, u32>,
    pub binding_conflicts: u32,
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl Store {
    pub fn new(log_capacity: usize) -> Store {
        let (changes, _) = broadcast::channel(65_536);
        Store {
            rv: 1,
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            log_capacity,
            oldest_watchable: 1,
            uid_counter: 0,
            changes,
            bindings: HashMap::new(),
            binding_conflicts: 0,
        }
    }

    pub fn list(&self, resource: ResourceType, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.objects
            .iter()
            .filter(|((r, ns, _), _)| *r == resource && namespace.is_none_or(|n| n == ns))
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn get(&self, resource: ResourceType, namespace: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        self.objects
            .get(&(resource, namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&resource.qualified(), name))
    }

    /// Changes after `rv`, or 410 if the log no longer reaches back there.
    pub fn changes_since(&self, rv: u64) -> Result<Vec<Arc<Change>>, ApiError> {
        if rv + 1 < self.oldest_watchable {
            return Err(ApiError::gone(format!("too old resource version: {rv} ({})", self.oldest_watchable - 1)));
        }
        Ok(self.log.iter().filter(|c| c.rv > rv).cloned().collect())
    }

    /// Forgets the change log, as etcd compaction does: watches from any
    /// earlier resourceVersion now get 410 Gone.
    pub fn compact(&mut self) {
        self.log.clear();
        self.oldest_watchable = self.rv + 1;
    }

    fn commit(&mut self, resource: ResourceType, kind: ChangeType, before: Option<Arc<Value>>, object: Arc<Value>) {
        let change = Arc::new(Change { rv: self.rv, resource, kind, before, object });
        self.log.push_back(change.clone());
        while self.log.len() > self.log_capacity {
            if let Some(dropped) = self.log.pop_front() {
                self.oldest_watchable = dropped.rv + 1;
            }
        }
        let _ = self.changes.send(change);
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub fn create(
        &mut self,
        resource: ResourceType,
        namespace: &str,
        mut object: Value,
    ) -> Result<Arc<Value>, ApiError> {
        let meta = object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| ApiError::bad_request("metadata is required"))?;
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) => format!("{prefix}{:05x}", self.uid_counter + 1),
                None => return Err(ApiError::bad_request("name or generateName is required")),
            },
        };
        if let Some(ns) = meta.get("namespace").and_then(Value::as_str)
            && resource.namespaced
            && ns != namespace
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let key = (resource, if resource.namespaced { namespace.to_string() } else { String::new() }, name.clone());
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&resource.qualified(), &name));
        }
        self.uid_counter += 1;
        let rv = self.next_rv();
        meta.insert("name".into(), json!(name));
        if resource.namespaced {
            meta.insert("namespace".into(), json!(namespace));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(format!("00000000-0000-4000-8000-{:012x}", self.uid_counter)));
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        meta.remove("deletionTimestamp");
        object["apiVersion"] = json!(resource.api_version);
        object["kind"] = json!(resource.kind);
        if resource.plural == "pods" && resource.api_version == "v1" {
            // The pod strategy resets status on create: a new pod is Pending.
            object["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            if object.pointer("/spec/schedulerName").is_none() {
                object["spec"]["schedulerName"] = json!("default-scheduler");
            }
        }
        let object = Arc::new(object);
        self.objects.insert(key, object.clone());
        self.commit(resource, ChangeType::Added, None, object.clone());
        Ok(object)
    }

    /// PUT semantics: a resourceVersion in the body must match (409
    /// otherwise); without one the update is unconditional.
    pub fn update(
        &mut self,
        resource: ResourceType,
        namespace: &str,
        name: &str,
        mut object: Value,
        status_only: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let key = (resource, namespace.to_string(), name.to_string());
        let current =
            self.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(&resource.qualified(), name))?;
        let given_rv = object.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
        let current_rv = current.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
        if !given_rv.is_empty() && given_rv != current_rv {
            return Err(ApiError::conflict(
                &resource.qualified(),
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        if let Some(uid) = object.pointer("/metadata/uid").and_then(Value::as_str)
            && !uid.is_empty()
            && Some(uid) != current.pointer("/metadata/uid").and_then(Value::as_str)
        {
            return Err(ApiError::conflict(&resource.qualified(), name, "Precondition failed: UID mismatch"));
        }
        if resource.has_status() {
            if status_only {
                let status = object.get("status").cloned().unwrap_or(Value::Null);
                object = (*current).clone();
                object["status"] = status;
            } else {
                object["status"] = current.get("status").cloned().unwrap_or(Value::Null);
            }
        }
        // Fields the server owns.
        let rv = self.next_rv();
        let meta = object.get_mut("metadata").and_then(Value::as_object_mut);
        let meta = meta.ok_or_else(|| ApiError::bad_request("metadata is required"))?;
        for field in ["uid", "creationTimestamp", "deletionTimestamp", "namespace", "name"] {
            match current.pointer(&format!("/metadata/{field}")) {
                Some(v) => meta.insert(field.into(), v.clone()),
                None => meta.remove(field),
            };
        }
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        object["apiVersion"] = json!(resource.api_version);
        object["kind"] = json!(resource.kind);
        let object = Arc::new(object);
        self.objects.insert(key, object.clone());
        self.commit(resource, ChangeType::Modified, Some(current), object.clone());
        Ok(object)
    }

    pub fn patch(
        &mut self,
        resource: ResourceType,
        namespace: &str,
        name: &str,
        patch: &Value,
        strategic: bool,
        status_only: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let current = self.get(resource, namespace, name)?;
        let mut merged = (*current).clone();
        merge_patch(&mut merged, patch, strategic);
        // The merged object carries the current resourceVersion unless the
        // patch set one, which is then a precondition (as in kube).
        self.update(resource, namespace, name, merged, status_only)
    }

    /// DELETE: a bound pod with a grace period only gets a
    /// deletionTimestamp (its kubelet would finish the job); everything else
    /// goes at once.
    pub fn delete(
        &mut self,
        resource: ResourceType,
        namespace: &str,
        name: &str,
        grace_seconds: Option<i64>,
        uid_precondition: Option<&str>,
    ) -> Result<Arc<Value>, ApiError> {
        let key = (resource, namespace.to_string(), name.to_string());
        let current =
            self.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(&resource.qualified(), name))?;
        let uid = current.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        if let Some(want) = uid_precondition.filter(|want| *want != uid) {
            let why = format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}");
            return Err(ApiError::conflict(&resource.qualified(), name, &why));
        }
        let bound = current.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        let grace = grace_seconds.unwrap_or(30);
        let terminal = matches!(current.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
        if resource.plural == "pods" && bound && grace > 0 && !terminal {
            if current.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(current);
            }
            let mut marked = (*current).clone();
            marked["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            let rv = self.next_rv();
            marked["metadata"]["resourceVersion"] = json!(rv.to_string());
            let marked = Arc::new(marked);
            self.objects.insert(key, marked.clone());
            self.commit(resource, ChangeType::Modified, Some(current), marked.clone());
            return Ok(marked);
        }
        self.objects.remove(&key);
        let rv = self.next_rv();
        let mut last = (*current).clone();
        last["metadata"]["resourceVersion"] = json!(rv.to_string());
        let last = Arc::new(last);
        self.commit(resource, ChangeType::Deleted, Some(current), last.clone());
        Ok(last)
    }

    /// `POST pods/{name}/binding`, with the checks `BindingREST` makes.
    pub fn bind(&mut self, namespace: &str, name: &str, binding: &Value) -> Result<(), ApiError> {
        let pods = ResourceType::find("v1", "pods").expect("pods");
        let binding_name = binding.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(name);
        if binding_name != name {
            return Err(ApiError::bad_request("name in URL does not match name in Binding object"));
        }
        let Some(node) = binding.pointer("/target/name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            return Err(ApiError::bad_request("target.name: Required value"));
        };
        let current = self.get(pods, namespace, name)?;
        let qualified = "pods/binding";
        if let Some(uid) = binding.pointer("/metadata/uid").and_then(Value::as_str).filter(|u| !u.is_empty()) {
            let actual = current.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
            if uid != actual {
                self.binding_conflicts += 1;
                return Err(ApiError::conflict(
                    qualified,
                    name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                ));
            }
        }
        if current.pointer("/metadata/deletionTimestamp").is_some() {
            self.binding_conflicts += 1;
            return Err(ApiError {
                code: 409,
                reason: "Conflict",
                message: format!("pod {name} is being deleted, cannot be assigned to a host"),
                details: Some((name.into(), "pods/binding".into())),
            });
        }
        if let Some(existing) = current.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            self.binding_conflicts += 1;
            return Err(ApiError {
                code: 409,
                reason: "Conflict",
                message: format!("pod {name} is already assigned to node \"{existing}\""),
                details: Some((name.into(), "pods/binding".into())),
            });
        }
        let mut bound = (*current).clone();
        bound["spec"]["nodeName"] = json!(node);
        let conditions = bound["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let mut conditions: Vec<Value> =
            conditions.into_iter().filter(|c| c.get("type") != Some(&json!("PodScheduled"))).collect();
        conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now_rfc3339()}));
        bound["status"]["conditions"] = json!(conditions);
        let rv = self.next_rv();
        bound["metadata"]["resourceVersion"] = json!(rv.to_string());
        let bound = Arc::new(bound);
        self.objects.insert((pods, namespace.to_string(), name.to_string()), bound.clone());
        self.commit(pods, ChangeType::Modified, Some(current), bound);
        *self.bindings.entry(format!("{namespace}/{name}")).or_default() += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> ResourceType {
        ResourceType::find("v1", "pods").unwrap()
    }

    #[test]
    fn second_binding_conflicts_and_uid_is_a_precondition() {
        let mut s = Store::new(100);
        let pod = s.create(pods(), "default", json!({"metadata": {"name": "p"}, "spec": {}})).unwrap();
        let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
        let wrong = json!({"metadata": {"name": "p", "uid": "other"}, "target": {"name": "n1"}});
        let e = s.bind("default", "p", &wrong).unwrap_err();
        assert_eq!(e.code, 409);
        assert!(e.message.contains("Precondition failed: UID in precondition: other"), "{}", e.message);
        let ok = json!({"metadata": {"name": "p", "uid": uid}, "target": {"name": "n1"}});
        s.bind("default", "p", &ok).unwrap();
        let e = s.bind("default", "p", &ok).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (409, "pod p is already assigned to node \"n1\""));
        let gone = json!({"metadata": {"name": "gone"}, "target": {"name": "n1"}});
        assert_eq!(s.bind("default", "gone", &gone).unwrap_err().code, 404);
        assert_eq!(s.bindings["default/p"], 1);
    }

    #[test]
    fn stale_update_conflicts_and_compaction_expires_old_versions() {
        let mut s = Store::new(100);
        let leases = ResourceType::find("coordination.k8s.io/v1", "leases").unwrap();
        let l = s.create(leases, "kube-system", json!({"metadata": {"name": "l"}, "spec": {}})).unwrap();
        let mut first = (*l).clone();
        first["spec"]["holderIdentity"] = json!("a");
        s.update(leases, "kube-system", "l", first.clone(), false).unwrap();
        first["spec"]["holderIdentity"] = json!("b");
        let e = s.update(leases, "kube-system", "l", first, false).unwrap_err();
        assert_eq!(e.code, 409);
        assert!(e.message.starts_with("Operation cannot be fulfilled on leases.coordination.k8s.io \"l\""));
        assert!(s.changes_since(1).is_ok());
        s.compact();
        assert_eq!(s.changes_since(1).unwrap_err().code, 410);
        assert!(s.changes_since(s.rv).unwrap().is_empty());
    }

    #[test]
    fn status_is_a_subresource() {
        let mut s = Store::new(100);
        s.create(pods(), "d", json!({"metadata": {"name": "p"}, "spec": {}})).unwrap();
        let p = s.patch(pods(), "d", "p", &json!({"status": {"phase": "Running"}}), false, false).unwrap();
        assert_eq!(p["status"]["phase"], "Pending");
        let p = s.patch(pods(), "d", "p", &json!({"status": {"phase": "Running"}}), false, true).unwrap();
        assert_eq!(p["status"]["phase"], "Running");
    }
}
