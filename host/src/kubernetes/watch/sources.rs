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
use crate::scheduler::{ClusterEvent, ObjectKey, WatchedKind};

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
        let name = info.resource.to_string();
        let target =
            WatchTarget { name: name.clone(), resource: info.qualified(), scope: scope.into(), switch_off: None };
        let task: Task<T> =
            Box::new(move |client, tx| reflect(Api::<Stripped<K>>::all(client), config, target, tx).boxed());
        Source { name, task }
    }

    /// Runs the watch until the scheduling loop is gone.
    pub async fn run(self, client: kube::Client, tx: Sender<T>) {
        (self.task)(client, tx).await
    }
}

async fn reflect<K, T>(api: Api<Stripped<K>>, config: watcher::Config, target: WatchTarget, tx: Sender<T>)
where
    K: WatchedKind + Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    T: From<Watched>,
{
    let name = target.name.clone();
    let mut changes = decode::watch(api, config, target).boxed();
    let send = |watched: Watched| tx.send(watched.into()).is_ok();
    // A resource this API server does not serve is synced with none, once:
    // the scheduler does not wait for it to be ready.
    let mut not_served_said = false;
    while let Some(change) = changes.next().await {
        let ok = match change {
            Ok(Observed::Applied(Stripped(o))) => send(Watched::Event(ClusterEvent::applied(o))),
            Ok(Observed::Deleted(Stripped(o))) => {
                let uid = o.meta().uid.clone();
                send(Watched::Event(ClusterEvent::deleted::<K>(ObjectKey::of(&o), uid)))
            }
            Ok(Observed::Listed { listed, .. }) => {
                tracing::info!(source = %name, objects = listed.len(), "listed");
                send(Watched::Event(ClusterEvent::listed::<K>(listed))) && send(Watched::Synced(name.clone()))
            }
            Err(e) if !not_served_said && classify(&e).0 == FailureKind::NotServed => {
                not_served_said = true;
                send(Watched::Event(ClusterEvent::listed::<K>(Default::default())))
                    && send(Watched::Synced(name.clone()))
            }
            // Logged and retried by `with_retry`.
            Err(_) => true,
        };
        if !ok {
            return;
        }
    }
}
