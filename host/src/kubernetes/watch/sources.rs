//! The cluster's objects, watched and handed to the scheduling core as its
//! events: nodes; every non-terminal pod through one watch, as
//! kube-scheduler's single pod informer does (the core decides which pods
//! are pending and whose); namespaces, whose labels inter-pod affinity's
//! namespace selectors match; PodDisruptionBudgets for preemption; the
//! claims, volumes and storage classes the volume filters read; the
//! CSINodes that give nodes' attach limits; the CSI drivers' published
//! storage capacity; and DRA's ResourceSlices, DeviceClasses and
//! ResourceClaims.
//!
//! kube-runtime's watcher relists on 410 Gone and reconnects with backoff;
//! a relist's end goes to the core as `Change::Listed`, and the core
//! drops what it holds beyond the list. The core's cluster state is the
//! store: keeping kube-runtime reflector stores as well would hold a
//! second copy of every pod.
//!
//! A `DELETED` event is read for its key and UID only. On a field-selector
//! watch it means "no longer matches" (a pod that finished), and the real
//! API server's watch cache sends the object's *previous* state with it.

use std::fmt::Debug;
use std::sync::mpsc::Sender;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::kubernetes::scheduling_loop::Input;
use crate::kubernetes::watch::decode::{self, Change};
use crate::kubernetes::watch::retry::WatchTarget;
use crate::scheduler::{ClusterEvent, ObjectKey, WatchedKind};

const CLUSTER: &str = "(cluster-scoped)";
const ALL_NAMESPACES: &str = "in all namespaces";

type Task = Box<dyn FnOnce(kube::Client, Sender<Input>) -> BoxFuture<'static, ()> + Send>;

/// One watch, feeding the scheduling loop.
pub struct Source {
    pub name: String,
    task: Task,
}

impl Source {
    /// Every watch the core needs, one per kind.
    pub fn all() -> Vec<Source> {
        let every = watcher::Config::default;
        vec![
            Source::of::<Node>("nodes", "nodes", CLUSTER, every()),
            // Bound pods count as load, unbound ones of our profiles are
            // queued; finished ones leave the watch.
            Source::of::<Pod>(
                "pods",
                "pods",
                ALL_NAMESPACES,
                every().fields("status.phase!=Succeeded,status.phase!=Failed"),
            ),
            Source::of::<Namespace>("namespaces", "namespaces", CLUSTER, every()),
            Source::of::<PodDisruptionBudget>(
                "poddisruptionbudgets",
                "poddisruptionbudgets.policy",
                ALL_NAMESPACES,
                every(),
            ),
            Source::of::<PersistentVolumeClaim>(
                "persistentvolumeclaims",
                "persistentvolumeclaims",
                ALL_NAMESPACES,
                every(),
            ),
            Source::of::<PersistentVolume>("persistentvolumes", "persistentvolumes", CLUSTER, every()),
            Source::of::<StorageClass>("storageclasses", "storageclasses.storage.k8s.io", CLUSTER, every()),
            Source::of::<CSINode>("csinodes", "csinodes.storage.k8s.io", CLUSTER, every()),
            Source::of::<CSIDriver>("csidrivers", "csidrivers.storage.k8s.io", CLUSTER, every()),
            Source::of::<CSIStorageCapacity>(
                "csistoragecapacities",
                "csistoragecapacities.storage.k8s.io",
                ALL_NAMESPACES,
                every(),
            ),
            Source::of::<ResourceSlice>("resourceslices", "resourceslices.resource.k8s.io", CLUSTER, every()),
            Source::of::<DeviceClass>("deviceclasses", "deviceclasses.resource.k8s.io", CLUSTER, every()),
            Source::of::<ResourceClaim>("resourceclaims", "resourceclaims.resource.k8s.io", ALL_NAMESPACES, every()),
        ]
    }

    /// A watch of every `K` (in every namespace) that `config` selects;
    /// `resource` and `scope` name it in log lines.
    fn of<K>(name: &str, resource: &'static str, scope: &str, config: watcher::Config) -> Source
    where
        K: WatchedKind + Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        let target = WatchTarget { name: name.to_string(), resource, scope: scope.to_string(), switch_off: None };
        let task: Task = Box::new(move |client, tx| reflect(Api::<K>::all(client), config, target, tx).boxed());
        Source { name: name.to_string(), task }
    }

    /// Runs the watch until the scheduling loop is gone.
    pub async fn run(self, client: kube::Client, tx: Sender<Input>) {
        (self.task)(client, tx).await
    }
}

async fn reflect<K>(api: Api<K>, config: watcher::Config, target: WatchTarget, tx: Sender<Input>)
where
    K: WatchedKind + Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let name = target.name.clone();
    let mut changes = decode::watch(api, config, target).boxed();
    let send = |input: Input| tx.send(input).is_ok();
    while let Some(change) = changes.next().await {
        let ok = match change {
            Ok(Change::Applied(o)) => send(Input::Cluster(ClusterEvent::applied(o))),
            Ok(Change::Deleted(o)) => {
                let uid = o.meta().uid.clone();
                send(Input::Cluster(ClusterEvent::deleted::<K>(ObjectKey::of(&o), uid)))
            }
            Ok(Change::Listed { listed, .. }) => {
                tracing::info!(source = %name, objects = listed.len(), "listed");
                send(Input::Cluster(ClusterEvent::listed::<K>(listed))) && send(Input::Synced(name.clone()))
            }
            // Logged and retried by `with_retry`.
            Err(_) => true,
        };
        if !ok {
            return;
        }
    }
}
