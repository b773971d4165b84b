//! kube-runtime's watcher events decoded into what a source acts on, as
//! a stream adaptor (in the manner of kube-runtime's `event_decode`).
//! Every watch of the backend (the cluster's objects, the policy ConfigMap,
//! tenants' ConfigMaps) reads its events through this one place:
//! - **list and relist**: objects of a (re)list come out as they arrive;
//!   when the list is complete, [`Observed::Listed`] names every object in
//!   it and those known before that are missing from it (deleted while
//!   nobody was watching);
//! - **dedupe**: an object whose resourceVersion is the one last seen (a
//!   relist after a watch gap, say) does not come out again.
//!
//! A `DELETED` event passes through with the state the server sent. On a
//! selector watch it means "no longer matches", and the real API server's
//! watch cache sends the object's *previous* state with it.

use std::collections::{HashMap, HashSet};

use std::fmt::Debug;

use futures::{Stream, StreamExt, future};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::kubernetes::watch::retry::{WatchTarget, with_retry};
pub use crate::scheduler::ObjectKey;

/// What a watch observed, as a source acts on it.
#[derive(Debug, PartialEq)]
pub enum Observed<K> {
    /// New, or changed since it was last seen: from the watch or a list.
    Applied(K),
    /// Deleted, or no longer matching the watch's selector.
    Deleted(K),
    /// A list (the first, or a relist) is complete. Its objects came out
    /// before as `Applied` (unless unchanged).
    Listed {
        /// Every object in the list.
        listed: HashSet<ObjectKey>,
        /// Known before, missing from the list: gone while not watching.
        gone: Vec<ObjectKey>,
    },
}

/// What the decoder remembers between events.
#[derive(Default)]
struct Seen {
    /// resourceVersion of every object known now.
    versions: HashMap<ObjectKey, Option<String>>,
    /// The list in progress, if any.
    listing: Option<HashSet<ObjectKey>>,
}

impl Seen {
    /// Whether `o`, under `key`, differs from what was last seen of it
    /// (and remembers it).
    fn is_new<K: Resource>(&mut self, key: ObjectKey, o: &K) -> bool {
        let version = o.meta().resource_version.clone();
        match self.versions.insert(key, version.clone()) {
            Some(previous) => version.is_none() || previous != version,
            None => true,
        }
    }

    fn decode<K: Resource>(&mut self, event: Event<K>) -> Option<Observed<K>> {
        match event {
            Event::Init => {
                self.listing = Some(HashSet::new());
                None
            }
            Event::InitApply(o) => {
                let key = ObjectKey::of(&o);
                self.listing.get_or_insert_default().insert(key.clone());
                self.is_new(key, &o).then_some(Observed::Applied(o))
            }
            Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                let gone: Vec<ObjectKey> = self.versions.keys().filter(|k| !listed.contains(*k)).cloned().collect();
                for key in &gone {
                    self.versions.remove(key);
                }
                Some(Observed::Listed { listed, gone })
            }
            Event::Apply(o) => self.is_new(ObjectKey::of(&o), &o).then_some(Observed::Applied(o)),
            Event::Delete(o) => {
                self.versions.remove(&ObjectKey::of(&o));
                Some(Observed::Deleted(o))
            }
        }
    }
}

/// Watches `api` with `config`: kube-runtime's watcher, retried as
/// `retry` says for `target`, decoded.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    target: WatchTarget,
) -> impl Stream<Item = Result<Observed<K>, watcher::Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    decode(with_retry(watcher::watcher(api, config), target))
}

/// Decodes a watcher's events; errors pass through unchanged (the watcher
/// retries, and a 410 has already reset it to relist).
pub fn decode<K, S>(events: S) -> impl Stream<Item = Result<Observed<K>, watcher::Error>>
where
    K: Resource,
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    events
        .scan(Seen::default(), |seen, event| {
            let decoded = match event {
                Ok(event) => seen.decode(event).map(Ok),
                Err(e) => Some(Err(e)),
            };
            future::ready(Some(decoded))
        })
        .filter_map(future::ready)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: "ns".into(), name: name.into() }
    }

    fn run(events: Vec<Event<ConfigMap>>) -> Vec<Observed<ConfigMap>> {
        let stream = decode(futures::stream::iter(events.into_iter().map(Ok)));
        block_on(stream.map(Result::unwrap).collect())
    }

    #[test]
    fn a_list_applies_its_objects_then_says_it_is_complete() {
        let changes =
            run(vec![Event::Init, Event::InitApply(cm("a", "1")), Event::InitApply(cm("b", "1")), Event::InitDone]);
        assert_eq!(
            changes,
            vec![
                Observed::Applied(cm("a", "1")),
                Observed::Applied(cm("b", "1")),
                Observed::Listed { listed: [key("a"), key("b")].into(), gone: vec![] },
            ]
        );
    }

    #[test]
    fn a_relist_names_what_went_missing_and_skips_what_did_not_change() {
        let changes = run(vec![
            Event::Init,
            Event::InitApply(cm("a", "1")),
            Event::InitApply(cm("b", "1")),
            Event::InitDone,
            // The watch broke; meanwhile a changed and b was deleted.
            Event::Init,
            Event::InitApply(cm("a", "2")),
            Event::InitDone,
            // The next relist: a unchanged.
            Event::Init,
            Event::InitApply(cm("a", "2")),
            Event::InitDone,
        ]);
        assert_eq!(
            changes[3..],
            [
                Observed::Applied(cm("a", "2")),
                Observed::Listed { listed: [key("a")].into(), gone: vec![key("b")] },
                Observed::Listed { listed: [key("a")].into(), gone: vec![] },
            ]
        );
    }

    #[test]
    fn watch_events_dedupe_by_version_and_deletions_pass_with_their_state() {
        let changes = run(vec![
            Event::Apply(cm("a", "1")),
            Event::Apply(cm("a", "1")),
            Event::Apply(cm("a", "2")),
            Event::Delete(cm("a", "2")),
            // Recreated with a version seen before it was deleted.
            Event::Apply(cm("a", "2")),
        ]);
        assert_eq!(
            changes,
            vec![
                Observed::Applied(cm("a", "1")),
                Observed::Applied(cm("a", "2")),
                Observed::Deleted(cm("a", "2")),
                Observed::Applied(cm("a", "2")),
            ]
        );
    }

    #[test]
    fn a_deleted_object_is_not_reported_gone_by_the_next_list() {
        let changes = run(vec![Event::Apply(cm("a", "1")), Event::Delete(cm("a", "1")), Event::Init, Event::InitDone]);
        assert_eq!(changes[2], Observed::Listed { listed: HashSet::new(), gone: vec![] });
    }

    #[test]
    fn errors_pass_through() {
        let events = vec![Err(watcher::Error::NoResourceVersion), Ok(Event::Apply(cm("a", "1")))];
        let out: Vec<_> = block_on(decode(futures::stream::iter(events)).collect());
        assert!(matches!(out[0], Err(watcher::Error::NoResourceVersion)));
        assert!(matches!(out[1], Ok(Observed::Applied(_))));
    }
}
