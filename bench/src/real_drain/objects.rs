//! The drain's objects on the API server: made in bulk, waited for,
//! released and deleted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Service};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::api::scheduling::v1alpha2::PodGroup;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{Value, json};

use super::processes::Scheduler;
use crate::pod_needs::Need;
use crate::topology::Shape;

/// Requests in flight while the cluster is filled.
pub(super) const CREATE_CONCURRENCY: usize = 32;

/// The PriorityClass of PreemptionBasic's measured pods: the API server's
/// Priority admission refuses a pod that sets `spec.priority` itself.
pub(super) const HIGH_PRIORITY_CLASS: &str = "wasmsched-drain-high";

/// Creates every object of `bodies`, `CREATE_CONCURRENCY` at a time.
pub(super) async fn create_all<K>(api: &Api<K>, bodies: impl Iterator<Item = Value>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let objects: Vec<K> = bodies.map(serde_json::from_value).collect::<Result<_, _>>()?;
    let params = PostParams::default();
    futures::stream::iter(objects.iter().map(|o| api.create(&params, o)))
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(())
}

/// The measured pod number `i` of `scheduler`, labelled `drain-run:
/// label`.
pub(super) fn measured_pod(shape: Shape, scheduler: Scheduler, i: usize, label: &str) -> Value {
    let name = format!("{}-{i:06}", scheduler.name());
    let mut pod = for_apiserver(shape.pod(name, shape.namespaces().1, None, true, scheduler.scheduler_name()));
    pod["metadata"]["labels"]["drain-run"] = json!(label);
    pod
}

/// A shape's pod as the API server takes it: a priority given by its
/// class, not by `spec.priority` (priority 0 needs no class).
pub(super) fn for_apiserver(mut pod: Value) -> Value {
    let Some(spec) = pod["spec"].as_object_mut() else { return pod };
    if let Some(priority) = spec.remove("priority")
        && priority.as_i64().is_some_and(|p| p > 0)
    {
        spec.insert("priorityClassName".into(), json!(HIGH_PRIORITY_CLASS));
    }
    pod
}

pub(super) async fn create_if_missing<K>(api: &Api<K>, object: &K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The kubelet's part in a preemption, for the pods of `run`: a bound pod
/// deleted gracefully is deleted for good at once (grace period 0), as if
/// its containers had stopped, so the preemptor's room is freed. `first`
/// gets the moment the first such deletion was seen.
pub(super) async fn finish_deletions(
    client: Client,
    namespace: &'static str,
    run: String,
    first: Arc<OnceLock<Instant>>,
) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().labels(&format!("drain-run={run}"));
    let mut events = watcher(api.clone(), config).boxed();
    while let Some(event) = events.try_next().await? {
        let (watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event else { continue };
        if pod.metadata.deletion_timestamp.is_none() {
            continue;
        }
        first.get_or_init(Instant::now);
        let (api, name) = (api.clone(), pod.metadata.name.unwrap_or_default());
        tokio::spawn(async move {
            let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
            if let Err(e) = api.delete(&name, &now).await
                && !matches!(&e, kube::Error::Api(status) if status.code == 404)
            {
                eprintln!("finishing the deletion of {name}: {e}");
            }
        });
    }
    Ok(())
}

/// When the first and the last of `pods` were seen bound, and how many
/// went to each node.
pub(super) async fn wait_bound(
    client: &Client,
    namespace: &str,
    pods: &HashSet<String>,
    first_bound: tokio::sync::oneshot::Sender<Instant>,
) -> anyhow::Result<(Instant, Instant, HashMap<String, usize>)> {
    let mut first_bound = Some(first_bound);
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields("spec.nodeName!=");
    let mut events = watcher(api, config).boxed();
    let mut bound = HashSet::new();
    let mut per_node = HashMap::new();
    let mut first = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    while bound.len() < pods.len() {
        let next = tokio::time::timeout_at(deadline.into(), events.next()).await;
        let event = match next {
            Ok(Some(event)) => event.context("watching the measured pods")?,
            Ok(None) => bail!("the watch ended"),
            Err(_) => bail!("{} of {} pods bound after 600 s", bound.len(), pods.len()),
        };
        if let watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) = event {
            let name = pod.metadata.name.unwrap_or_default();
            if pods.contains(&name) && bound.insert(name) {
                let at = *first.get_or_insert_with(Instant::now);
                if let Some(tell) = first_bound.take() {
                    let _ = tell.send(at);
                }
                let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
                *per_node.entry(node).or_default() += 1;
            }
        }
    }
    Ok((first.unwrap_or_else(Instant::now), Instant::now(), per_node))
}

pub(super) async fn delete_pods(client: &Client, namespace: &str, selector: &str) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    let listed = ListParams::default().labels(selector);
    api.delete_collection(&now, &listed).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !api.list(&listed).await?.items.is_empty() {
        if Instant::now() > deadline {
            bail!("pods {selector} not deleted after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Creates `needs` (the namespaced ones in `namespace`), labelled with
/// `run` as `drain-run`.
pub(super) async fn create_needs(client: &Client, namespace: &str, needs: Vec<Need>, run: &str) -> anyhow::Result<()> {
    let labelled = |mut v: Value| {
        v["metadata"]["labels"] = json!({"drain-run": run});
        v
    };
    let (mut classes, mut slices, mut resource_claims, mut csi_nodes, mut volumes, mut claims) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut templates, mut groups, mut services) = (vec![], vec![], vec![]);
    for need in needs {
        match need {
            Need::DeviceClass(v) => classes.push(labelled(v)),
            Need::ResourceSlice(v) => slices.push(labelled(v)),
            Need::ResourceClaim(v) => resource_claims.push(labelled(v)),
            Need::ClaimTemplate(v) => templates.push(labelled(v)),
            Need::CsiNode(v) => csi_nodes.push(labelled(v)),
            Need::Volume(v) => volumes.push(labelled(v)),
            Need::Claim(v) => claims.push(labelled(v)),
            Need::PodGroup(v) => groups.push(labelled(v)),
            Need::Service(v) => services.push(labelled(v)),
        }
    }
    for class in classes {
        create_if_missing(&Api::<DeviceClass>::all(client.clone()), &serde_json::from_value(class)?).await?;
    }
    create_all(&Api::<ResourceSlice>::all(client.clone()), slices.into_iter()).await?;
    create_all(&Api::<CSINode>::all(client.clone()), csi_nodes.into_iter()).await?;
    create_all(&Api::<PersistentVolume>::all(client.clone()), volumes.into_iter()).await?;
    if !namespace.is_empty() {
        create_all(&Api::<ResourceClaim>::namespaced(client.clone(), namespace), resource_claims.into_iter()).await?;
        let template_api = Api::<ResourceClaimTemplate>::namespaced(client.clone(), namespace);
        create_all(&template_api, templates.into_iter()).await?;
        create_all(&Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace), claims.into_iter()).await?;
        create_all(&Api::<Service>::namespaced(client.clone(), namespace), services.into_iter()).await?;
        if !groups.is_empty() {
            let api = Api::<PodGroup>::namespaced(client.clone(), namespace);
            create_all(&api, groups.into_iter()).await.context(
                "creating PodGroups: gangs need a kit with the gates on (KCP_APISERVER_EXTRA_ARGS and \
                 KCP_SCHEDULER_EXTRA_ARGS, docs/benchmarks.md)",
            )?;
        }
    }
    Ok(())
}

/// What the pods of `run` had made for them, released and deleted: the
/// controllers' part once the pods are gone (they remove the finalizers:
/// the scheduler's delete-protection on a ResourceClaim, the
/// storage-object-in-use protection on claims and volumes).
pub(super) async fn release(client: &Client, namespace: &str, run: &str) -> anyhow::Result<()> {
    let ours = ListParams::default().labels(&format!("drain-run={run}"));
    release_kind(&Api::<ResourceClaim>::namespaced(client.clone(), namespace), &ours).await?;
    release_kind(&Api::<ResourceClaimTemplate>::namespaced(client.clone(), namespace), &ours).await?;
    release_kind(&Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace), &ours).await?;
    release_kind(&Api::<PersistentVolume>::all(client.clone()), &ours).await?;
    Api::<Service>::namespaced(client.clone(), namespace).delete_collection(&DeleteParams::default(), &ours).await?;
    // The PodGroups' protection is the controller-manager's to lift; on an
    // API server that serves none, there are none.
    match release_kind(&Api::<PodGroup>::namespaced(client.clone(), namespace), &ours).await {
        Err(e) if matches!(e.downcast_ref(), Some(kube::Error::Api(s)) if s.code == 404) => Ok(()),
        other => other,
    }
}

pub(super) async fn release_kind<K>(api: &Api<K>, ours: &ListParams) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let names: Vec<String> = api.list(ours).await?.items.into_iter().filter_map(|o| o.meta().name.clone()).collect();
    futures::stream::iter(names.iter().map(|name| unprotect(api, name)))
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    api.delete_collection(&DeleteParams::default(), ours).await?;
    Ok(())
}

/// Removes the finalizers of `name`; gone already is fine (a controller
/// still running may delete it meanwhile).
pub(super) async fn unprotect<K>(api: &Api<K>, name: &str) -> kube::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}}));
    match api.patch(name, &kube::api::PatchParams::default(), &patch).await {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}
