//! The cluster's objects, watched and handed to the scheduling core as its
//! events: one watch per kind of the kinds table (`wasmsched-kinds`), with
//! the kind's field selector where it has one. Every non-terminal pod comes
//! through one watch, as kube-scheduler's single pod informer does; the
//! core decides which pods are pending and whose.
//!
//! kube-runtime's watcher relists on 410 Gone and reconnects with backoff;
//! a relist's end goes to the core as `Change::Listed`, and the core
//! drops what it holds beyond the list. The core's cluster state is the
//! store: keeping kube-runtime reflector stores as well would hold a
//! second copy of every pod.
//!
//! Objects come decoded without their managedFields (`strip`): nothing
//! reads them, and they were most of a pod's decoding.
//!
//! A kind of an API version that is not GA (PodGroups' `v1alpha2`) may be
//! off: such a watch first asks discovery whether the API server serves
//! it. Where it does not, it is said once, the watch counts as synced with
//! none (readiness does not wait for it), and discovery is asked again
//! every minute. A list refused then would read as a missing permission,
//! which it is not. Such a kind the API server serves but this identity
//! may not list (a CRD installed after deploy/'s role was applied) also
//! counts as synced with none: the retry's line says what to grant, and
//! the rest of the cluster is scheduled meanwhile.
//!
//! A `DELETED` event is read for its key and UID only. On a field-selector
//! watch it means "no longer matches" (a pod that finished), and the real
//! API server's watch cache sends the object's *previous* state with it.

use std::fmt::Debug;
use std::sync::mpsc::Sender;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::kubernetes::watch::decode::{self, Observed};
use crate::kubernetes::watch::retry::{FailureKind, WatchTarget, classify};
use crate::kubernetes::watch::strip::Stripped;
use crate::scheduler::{ClusterEvent, KindInfo, ObjectKey, WatchedKind};

type Task<T> = Box<dyn FnOnce(kube::Client, Sender<T>) -> BoxFuture<'static, ()> + Send>;

/// One watch, feeding its consumer (the scheduling loop) what it saw, as
/// the consumer's own input `T`.
pub struct Source<T> {
    pub name: String,
    task: Task<T>,
}

/// What a watch tells its consumer.
#[derive(Debug)]
pub enum Watched {
    /// A change, as the core's event.
    Event(ClusterEvent),
    /// The watch's list (or relist) is complete: the source named is in sync.
    Synced(String),
    /// Whether the API server serves the kind (one that may be off).
    Served(KindInfo, bool),
}

/// `Source::all`, from the kinds table: one watch per kind, with the
/// kind's field selector where it has one.
macro_rules! sources {
    ($(
        $(#[$doc:meta])* $variant:ident($kind:ty) {
            api: $api:literal, resource: $resource:literal, kind: $name:literal, scope: $scope:ident,
            field: $field:ident, apply: $apply:ident $(($store:ident))?, $(watch: $watch:literal,)?
        },
    )*) => {
        impl<T: From<Watched> + Send + 'static> Source<T> {
            /// Every watch the core needs, one per kind.
            pub fn all() -> Vec<Source<T>> {
                vec![$(Source::of::<$kind>(watcher::Config::default()$(.fields($watch))?),)*]
            }
        }
    };
}

wasmsched_kinds::watched_kinds!(sources);

impl<T: From<Watched> + Send + 'static> Source<T> {
    /// A watch of every `K` (in every namespace) that `config` selects,
    /// named in log lines as the kinds table names it.
    fn of<K>(config: watcher::Config) -> Source<T>
    where
        K: WatchedKind + Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        let info = K::INFO;
        let scope = if info.namespaced { "in all namespaces" } else { "(cluster-scoped)" };
        let name = info.source_name();
        let target =
            WatchTarget { name: name.clone(), resource: info.qualified(), scope: scope.into(), switch_off: None };
        let task: Task<T> = Box::new(move |client, tx| {
            async move {
                if info.optional() && !wait_until_served::<K, T>(&client, &target, &tx).await {
                    return;
                }
                reflect(Api::<Stripped<K>>::all(client), config, target, info.optional(), tx).await
            }
            .boxed()
        });
        Source { name, task }
    }

    /// Runs the watch until the scheduling loop is gone.
    pub async fn run(self, client: kube::Client, tx: Sender<T>) {
        (self.task)(client, tx).await
    }
}

/// How often discovery is asked again about a kind not served.
const NOT_SERVED_LOOK: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits until discovery lists `K`'s resource. Meanwhile, once, the kind
/// counts as synced with none and a line says so. `false` when the
/// scheduling loop is gone.
async fn wait_until_served<K, T>(client: &kube::Client, target: &WatchTarget, tx: &Sender<T>) -> bool
where
    K: WatchedKind,
    T: From<Watched>,
{
    let info = K::INFO;
    let mut said = false;
    loop {
        let served = match client.list_api_group_resources(info.api_version).await {
            Ok(list) => list.resources.iter().any(|r| r.name == info.resource),
            Err(kube::Error::Api(status)) if status.code == 404 => false,
            // Discovery failed otherwise: the watch finds out itself.
            Err(_) => true,
        };
        if served {
            tracing::info!(
                "{}: watching {} ({}), which this API server serves",
                target.name,
                info.resource,
                info.api_version
            );
            return tx.send(Watched::Served(info, true).into()).is_ok();
        }
        if !said {
            tracing::info!(
                "{}: this API server does not serve {} ({}); none are known through it. Looking again every {}s",
                target.name,
                info.resource,
                info.api_version,
                NOT_SERVED_LOOK.as_secs()
            );
            let listed = Watched::Event(ClusterEvent::listed::<K>(Default::default()));
            let sent = [listed, Watched::Synced(target.name.clone()), Watched::Served(info, false)];
            if !sent.into_iter().all(|watched| tx.send(watched.into()).is_ok()) {
                return false;
            }
            said = true;
        }
        tokio::time::sleep(NOT_SERVED_LOOK).await;
    }
}

async fn reflect<K, T>(
    api: Api<Stripped<K>>,
    config: watcher::Config,
    target: WatchTarget,
    optional: bool,
    tx: Sender<T>,
) where
    K: WatchedKind + Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    T: From<Watched>,
{
    let name = target.name.clone();
    let mut changes = decode::watch(api, config, target).boxed();
    let send = |watched: Watched| tx.send(watched.into()).is_ok();
    // A resource this API server does not serve is synced with none, once:
    // the scheduler does not wait for it to be ready. So is an optional
    // kind this identity may not list (a CRD installed after deploy/'s
    // role was applied): the retry's line says what to grant, and the
    // rest of the cluster is scheduled meanwhile.
    let mut not_served_said = false;
    let mut forbidden_synced = false;
    while let Some(change) = changes.next().await {
        let ok = match change {
            Ok(Observed::Applied(Stripped(o))) => send(Watched::Event(ClusterEvent::applied(o))),
            Ok(Observed::Deleted(Stripped(o))) => {
                let uid = o.meta().uid.clone();
                send(Watched::Event(ClusterEvent::deleted::<K>(ObjectKey::of(&o), uid)))
            }
            Ok(Observed::Listed { listed, .. }) => {
                tracing::info!(source = %name, objects = listed.len(), "listed");
                // Served again after a 404 (the gate turned back on).
                let served_again = std::mem::take(&mut not_served_said);
                send(Watched::Event(ClusterEvent::listed::<K>(listed)))
                    && send(Watched::Synced(name.clone()))
                    && (!served_again || send(Watched::Served(K::INFO, true)))
            }
            Err(e) if optional && !forbidden_synced && classify(&e).0 == FailureKind::Forbidden => {
                forbidden_synced = true;
                send(Watched::Event(ClusterEvent::listed::<K>(Default::default())))
                    && send(Watched::Synced(name.clone()))
            }
            Err(e) if !not_served_said && classify(&e).0 == FailureKind::NotServed => {
                not_served_said = true;
                send(Watched::Event(ClusterEvent::listed::<K>(Default::default())))
                    && send(Watched::Synced(name.clone()))
                    && send(Watched::Served(K::INFO, false))
            }
            // Logged and retried by `with_retry`.
            Err(_) => true,
        };
        if !ok {
            return;
        }
    }
}
