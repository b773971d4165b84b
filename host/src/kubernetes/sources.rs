//! Watches reflected into the scheduling core: nodes, every non-terminal
//! pod through one watch, as kube-scheduler's single pod informer does (the
//! core decides which pods are pending and whose), namespaces, whose
//! labels inter-pod affinity's namespace selectors match,
//! PodDisruptionBudgets for preemption, and the claims, volumes and
//! storage classes VolumeBinding reads.
//!
//! kube-runtime's watcher relists on 410 Gone and reconnects with backoff;
//! what a relist implies (`watch_events`) is passed on: nodes missing from
//! the new list were deleted while we were not watching, and the pods' list
//! tells the core which pods it holds are gone. The core's cluster state is
//! the store: keeping kube-runtime reflector stores as well would hold a
//! second copy of every pod.
//!
//! A `DELETED` event is read for its key and UID only. On a field-selector
//! watch it means "no longer matches" (a pod that finished), and the real
//! API server's watch cache sends the object's *previous* state with it.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::watch_events::{self, Change};
use super::watch_retry::WatchTarget;
use crate::cluster::PodKey;

/// A change for the scheduling loop.
#[derive(Debug)]
pub enum ClusterChange {
    Node(Arc<Node>),
    NodeGone(String),
    Pod(Arc<Pod>),
    /// Deleted, or finished (left the live-pods selector). The UID, when
    /// known, keeps a late deletion from removing a recreated pod.
    PodGone {
        key: PodKey,
        uid: Option<String>,
    },
    /// A full list of live pods (initial or after a watch gap), applied
    /// just before: every pod the cache holds beyond it is gone.
    PodsListed(HashSet<PodKey>),
    Namespace(Arc<Namespace>),
    NamespaceGone(String),
    Budget(Arc<PodDisruptionBudget>),
    BudgetGone {
        namespace: String,
        name: String,
    },
    Claim(Arc<PersistentVolumeClaim>),
    ClaimGone {
        namespace: String,
        name: String,
    },
    Volume(Arc<PersistentVolume>),
    VolumeGone(String),
    StorageClass(Arc<StorageClass>),
    StorageClassGone(String),
    /// A source's initial list (or a relist) has been applied.
    Synced(String),
}

/// One watch: which objects, and what a deletion from it means.
pub struct Source {
    pub name: String,
    kind: SourceKind,
    config: watcher::Config,
}

#[derive(Clone, Copy)]
enum SourceKind {
    Nodes,
    /// Every pod that is not Succeeded or Failed: bound ones count as
    /// load, unbound ones of our profiles are queued.
    LivePods,
    Namespaces,
    /// PodDisruptionBudgets, which preemption respects.
    Budgets,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses, which
    /// VolumeBinding reads.
    Claims,
    Volumes,
    StorageClasses,
}

impl Source {
    pub fn nodes() -> Source {
        Source { name: "nodes".into(), kind: SourceKind::Nodes, config: watcher::Config::default() }
    }

    pub fn live_pods() -> Source {
        Source {
            name: "pods".into(),
            kind: SourceKind::LivePods,
            config: watcher::Config::default().fields("status.phase!=Succeeded,status.phase!=Failed"),
        }
    }

    pub fn namespaces() -> Source {
        Source { name: "namespaces".into(), kind: SourceKind::Namespaces, config: watcher::Config::default() }
    }

    pub fn disruption_budgets() -> Source {
        Source { name: "poddisruptionbudgets".into(), kind: SourceKind::Budgets, config: watcher::Config::default() }
    }

    pub fn claims() -> Source {
        Source { name: "persistentvolumeclaims".into(), kind: SourceKind::Claims, config: watcher::Config::default() }
    }

    pub fn volumes() -> Source {
        Source { name: "persistentvolumes".into(), kind: SourceKind::Volumes, config: watcher::Config::default() }
    }

    pub fn storage_classes() -> Source {
        Source { name: "storageclasses".into(), kind: SourceKind::StorageClasses, config: watcher::Config::default() }
    }

    /// Runs the watch until the receiver is gone, sending every change.
    pub async fn run<T: From<ClusterChange> + Send>(self, client: kube::Client, tx: std::sync::mpsc::Sender<T>) {
        match self.kind {
            SourceKind::Nodes => {
                reflect(
                    Api::<Node>::all(client),
                    self,
                    tx,
                    |n: Node| ClusterChange::Node(Arc::new(n)),
                    |n| ClusterChange::NodeGone(n.name_any()),
                )
                .await
            }
            SourceKind::LivePods => {
                let gone = |p: Pod| ClusterChange::PodGone { key: PodKey::of(&p), uid: p.metadata.uid };
                reflect(Api::<Pod>::all(client), self, tx, |p: Pod| ClusterChange::Pod(Arc::new(p)), gone).await
            }
            SourceKind::Namespaces => {
                reflect(
                    Api::<Namespace>::all(client),
                    self,
                    tx,
                    |n: Namespace| ClusterChange::Namespace(Arc::new(n)),
                    |n| ClusterChange::NamespaceGone(n.name_any()),
                )
                .await
            }
            SourceKind::Budgets => {
                let gone = |b: PodDisruptionBudget| ClusterChange::BudgetGone {
                    namespace: b.namespace().unwrap_or_default(),
                    name: b.name_any(),
                };
                let apply = |b: PodDisruptionBudget| ClusterChange::Budget(Arc::new(b));
                reflect(Api::<PodDisruptionBudget>::all(client), self, tx, apply, gone).await
            }
            SourceKind::Claims => {
                let gone = |c: PersistentVolumeClaim| ClusterChange::ClaimGone {
                    namespace: c.namespace().unwrap_or_default(),
                    name: c.name_any(),
                };
                let apply = |c: PersistentVolumeClaim| ClusterChange::Claim(Arc::new(c));
                reflect(Api::<PersistentVolumeClaim>::all(client), self, tx, apply, gone).await
            }
            SourceKind::Volumes => {
                let gone = |v: PersistentVolume| ClusterChange::VolumeGone(v.name_any());
                let apply = |v: PersistentVolume| ClusterChange::Volume(Arc::new(v));
                reflect(Api::<PersistentVolume>::all(client), self, tx, apply, gone).await
            }
            SourceKind::StorageClasses => {
                let gone = |c: StorageClass| ClusterChange::StorageClassGone(c.name_any());
                let apply = |c: StorageClass| ClusterChange::StorageClass(Arc::new(c));
                reflect(Api::<StorageClass>::all(client), self, tx, apply, gone).await
            }
        }
    }
}

async fn reflect<K, T: From<ClusterChange> + Send>(
    api: Api<K>,
    source: Source,
    tx: std::sync::mpsc::Sender<T>,
    apply: impl Fn(K) -> ClusterChange,
    gone: impl Fn(K) -> ClusterChange,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let (resource, scope) = match source.kind {
        SourceKind::Nodes => ("nodes", "(cluster-scoped)"),
        SourceKind::LivePods => ("pods", "in all namespaces"),
        SourceKind::Namespaces => ("namespaces", "(cluster-scoped)"),
        SourceKind::Budgets => ("poddisruptionbudgets.policy", "in all namespaces"),
        SourceKind::Claims => ("persistentvolumeclaims", "in all namespaces"),
        SourceKind::Volumes => ("persistentvolumes", "(cluster-scoped)"),
        SourceKind::StorageClasses => ("storageclasses.storage.k8s.io", "(cluster-scoped)"),
    };
    let target = WatchTarget { name: source.name.clone(), resource, scope: scope.into(), switch_off: None };
    let mut changes = watch_events::watch(api, source.config.clone(), target).boxed();
    let send = |c: ClusterChange| tx.send(T::from(c)).is_ok();
    while let Some(change) = changes.next().await {
        let ok = match change {
            Ok(Change::Applied(o)) => send(apply(o)),
            Ok(Change::Deleted(o)) => send(gone(o)),
            Ok(Change::Listed { listed, gone }) => {
                let mut ok = true;
                match source.kind {
                    SourceKind::Nodes => {
                        for key in gone {
                            tracing::debug!(source = %source.name, node = %key.name, "gone while not watching");
                            ok &= send(ClusterChange::NodeGone(key.name));
                        }
                    }
                    SourceKind::Namespaces => {
                        for key in gone {
                            ok &= send(ClusterChange::NamespaceGone(key.name));
                        }
                    }
                    SourceKind::Budgets => {
                        for key in gone {
                            ok &= send(ClusterChange::BudgetGone { namespace: key.namespace, name: key.name });
                        }
                    }
                    SourceKind::Claims => {
                        for key in gone {
                            ok &= send(ClusterChange::ClaimGone { namespace: key.namespace, name: key.name });
                        }
                    }
                    SourceKind::Volumes => {
                        for key in gone {
                            ok &= send(ClusterChange::VolumeGone(key.name));
                        }
                    }
                    SourceKind::StorageClasses => {
                        for key in gone {
                            ok &= send(ClusterChange::StorageClassGone(key.name));
                        }
                    }
                    SourceKind::LivePods => {
                        let keys =
                            listed.iter().map(|k| PodKey { namespace: k.namespace.clone(), name: k.name.clone() });
                        ok &= send(ClusterChange::PodsListed(keys.collect()));
                    }
                }
                tracing::info!(source = %source.name, objects = listed.len(), "listed");
                ok && send(ClusterChange::Synced(source.name.clone()))
            }
            // Logged and retried by `with_retry`.
            Err(_) => true,
        };
        if !ok {
            return;
        }
    }
}
