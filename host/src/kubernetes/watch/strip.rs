//! Watched objects decoded without `metadata.managedFields`. kube-scheduler
//! drops them from the pods its pod informer keeps (a transform run after
//! decoding); here they are skipped while decoding, for every kind.
//! Nothing of the scheduler reads them, and they are most of what a pod's
//! metadata costs to decode: a tree of JSON values per field manager,
//! built on the watch's thread and freed on the scheduling loop's.
//!
//! [`Stripped<K>`] decodes as `K` does, through a deserializer that skips
//! that one key of the object's top-level `metadata` unread (the JSON is
//! still scanned, nothing is built). Every other key, at any depth, passes
//! untouched: a label or a ConfigMap key named `managedFields` stays.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, forward_to_deserialize_any};

/// `K`, decoded without `metadata.managedFields` (always `None`).
#[derive(Debug, Clone)]
pub struct Stripped<K>(pub K);

impl<'de, K: Deserialize<'de>> Deserialize<'de> for Stripped<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Strip { inner: deserializer, in_metadata: false }).map(Stripped)
    }
}

/// The API calls of `K`: a watch of `Stripped<K>` is a watch of `K`.
impl<K: Resource> Resource for Stripped<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// The object (`in_metadata: false`) or its `metadata` (`true`).
struct Strip<D> {
    inner: D,
    in_metadata: bool,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strip<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(StripVisitor { inner: visitor, in_metadata: self.in_metadata })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_option(StripVisitor { inner: visitor, in_metadata: self.in_metadata })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(StripVisitor { inner: visitor, in_metadata: self.in_metadata })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(name, fields, StripVisitor { inner: visitor, in_metadata: self.in_metadata })
    }

    // An object and its metadata are maps (JSON is self-describing).
    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple tuple_struct
        enum identifier ignored_any
    }
}

struct StripVisitor<V> {
    inner: V,
    in_metadata: bool,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for StripVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(StripMap { inner: map, in_metadata: self.in_metadata, next_is_metadata: false })
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Strip { inner: deserializer, in_metadata: self.in_metadata })
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
}

struct StripMap<A> {
    inner: A,
    in_metadata: bool,
    /// The key just read is the object's `metadata`.
    next_is_metadata: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for StripMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else { return Ok(None) };
            if self.in_metadata && key.as_str() == "managedFields" {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.next_is_metadata = !self.in_metadata && key.as_str() == "metadata";
            return match key {
                Key::Borrowed(k) => seed.deserialize(BorrowedStrDeserializer::new(k)),
                Key::Owned(k) => seed.deserialize(StringDeserializer::new(k)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.next_is_metadata) {
            self.inner.next_value_seed(MetadataSeed(seed))
        } else {
            self.inner.next_value_seed(seed)
        }
    }
}

/// The object's `metadata`, decoded by `S` with its `managedFields` skipped.
struct MetadataSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strip { inner: deserializer, in_metadata: true })
    }
}

/// A map key, borrowed from the input where it has no escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(k) => k,
            Key::Owned(k) => k,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map key")
            }
            fn visit_borrowed_str<E>(self, k: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(k))
            }
            fn visit_str<E>(self, k: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(k.to_string()))
            }
            fn visit_string<E>(self, k: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(k))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::{ObjectList, WatchEvent};
    use serde_json::json;

    fn pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web",
                "namespace": "ns",
                "labels": {"managedFields": "kept", "app": "web"},
                "managedFields": [{
                    "manager": "kubectl",
                    "operation": "Update",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
                }],
                "resourceVersion": "7",
                "uid": "u-1"
            },
            "spec": {
                "containers": [{"name": "c", "image": "nginx",
                    "resources": {"requests": {"cpu": "100m"}}}],
                "schedulerName": "wasmsched"
            },
            "status": {"phase": "Pending"}
        })
    }

    #[test]
    fn a_pod_decodes_as_it_does_without_its_managed_fields() {
        let text = pod().to_string();
        let Stripped(stripped) = serde_json::from_str::<Stripped<Pod>>(&text).unwrap();
        let mut whole: Pod = serde_json::from_str(&text).unwrap();
        assert!(whole.metadata.managed_fields.is_some());
        whole.metadata.managed_fields = None;
        assert_eq!(stripped, whole);
        assert_eq!(stripped.metadata.labels.unwrap()["managedFields"], "kept");
    }

    #[test]
    fn only_the_metadatas_managed_fields_are_skipped() {
        let text = json!({
            "metadata": {"name": "c", "managedFields": [{"manager": "m"}],
                "annotations": {"managedFields": "a"}},
            "data": {"managedFields": "d", "metadata": "m"}
        })
        .to_string();
        let Stripped(cm) = serde_json::from_str::<Stripped<ConfigMap>>(&text).unwrap();
        assert_eq!(cm.metadata.managed_fields, None);
        assert_eq!(cm.metadata.annotations.unwrap()["managedFields"], "a");
        let data = cm.data.unwrap();
        assert_eq!((data["managedFields"].as_str(), data["metadata"].as_str()), ("d", "m"));
    }

    #[test]
    fn watch_events_and_lists_decode_stripped() {
        let event = json!({"type": "MODIFIED", "object": pod()}).to_string();
        let WatchEvent::Modified(Stripped(p)) = serde_json::from_str::<WatchEvent<Stripped<Pod>>>(&event).unwrap()
        else {
            panic!("not a modification")
        };
        assert_eq!((p.metadata.name.as_deref(), p.metadata.managed_fields), (Some("web"), None));
        let list = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "9"},
            "items": [pod(), pod()]})
        .to_string();
        let list: ObjectList<Stripped<Pod>> = serde_json::from_str(&list).unwrap();
        assert_eq!(list.items.len(), 2);
        assert!(list.items.iter().all(|Stripped(p)| p.metadata.managed_fields.is_none() && p.spec.is_some()));
    }

    #[test]
    fn a_malformed_object_still_fails_with_serdes_error() {
        let text = json!({"metadata": {"name": 5, "managedFields": []}}).to_string();
        let err = serde_json::from_str::<Stripped<Pod>>(&text).unwrap_err().to_string();
        assert!(err.contains("invalid type: integer `5`"), "{err}");
    }
}
