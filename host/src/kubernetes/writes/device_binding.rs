//! DynamicResources' wait for binding conditions (DRADeviceBindingConditions,
//! on by default in v1.36): a device that needs preparing before a pod can
//! use it (one attached over a fabric, say) names conditions its driver
//! sets on the claim's `status.devices` entry. After the claims are written,
//! PreBind polls once a second until every such device has all its binding
//! conditions true, fails at once when any of its failure conditions is
//! true, and gives up after kube's default binding timeout.

use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;

use crate::kubernetes::writes::prebind::PreBindError;
use crate::scheduler::plugins::dynamic_resources::{Allocated, DeviceReservation};

/// kube's DynamicResources `bindingTimeout` default.
pub const BINDING_TIMEOUT: Duration = Duration::from_secs(600);

/// Whether any device the reservation allocates has binding conditions.
pub fn waits(reservation: &DeviceReservation) -> bool {
    reservation.claims.iter().flat_map(|c| c.allocation.iter()).flat_map(|a| &a.devices).any(|d| !d.binding.is_empty())
}

/// Waits until every device with binding conditions is ready, at most
/// `timeout`.
pub async fn wait_ready(
    client: &kube::Client,
    reservation: &DeviceReservation,
    timeout: Duration,
) -> Result<(), PreBindError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        tokio::time::sleep(Duration::from_secs(1).min(timeout)).await;
        if ready(client, reservation).await.map_err(PreBindError::Failed)? {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(PreBindError::Failed("binding timed out waiting for the devices' binding conditions".into()));
        }
    }
}

/// One look: `Ok(true)` once all are ready, `Err` when a device failed.
async fn ready(client: &kube::Client, reservation: &DeviceReservation) -> Result<bool, String> {
    let mut all = true;
    for c in &reservation.claims {
        let Some(allocation) = &c.allocation else { continue };
        let waiting: Vec<&Allocated> = allocation.devices.iter().filter(|d| !d.binding.is_empty()).collect();
        if waiting.is_empty() {
            continue;
        }
        let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &c.namespace);
        let claim = claims.get(&c.claim).await.map_err(|e| format!("claim {}/{}: {e}", c.namespace, c.claim))?;
        let statuses = claim.status.and_then(|s| s.devices).unwrap_or_default();
        for d in waiting {
            let status = statuses.iter().find(|s| (&s.driver, &s.pool, &s.device) == (&d.driver, &d.pool, &d.device));
            let conditions = status.and_then(|s| s.conditions.as_ref());
            let is_true = |kind: &str| conditions.into_iter().flatten().any(|c| c.type_ == kind && c.status == "True");
            if let Some(failed) = d.binding.failed.iter().find(|kind| is_true(kind)) {
                let device = format!("{}/{}/{}", d.driver, d.pool, d.device);
                return Err(format!("claim {}/{}: binding failed for device {device}: {failed}", c.namespace, c.claim));
            }
            all &= d.binding.ready.iter().all(|kind| is_true(kind));
        }
    }
    Ok(all)
}
