//! Coscheduling's `minResources`: a gang is tried only when the cluster
//! has that much room free, summed over its nodes (its plugin's
//! PreFilter). The gang's own placed members' requests count as free, as
//! the plugin counts them; `pods` is at least `minMember`.

use std::collections::BTreeMap;

use super::Gang;
use crate::cluster::PodKey;
use crate::scheduler::Scheduler;

/// Room summed over the nodes, by resource, as `minResources` names it.
#[derive(Debug, Default)]
struct Free {
    milli_cpu: u64,
    memory: u64,
    ephemeral_storage: u64,
    pods: u64,
    scalar: BTreeMap<String, u64>,
}

impl Scheduler {
    /// What the cluster lacks of `gang`'s `minResources`, in words for its
    /// members; `None` where it has them or the PodGroup names none.
    pub(super) fn min_resources_gap(&self, gang: &Gang) -> Option<String> {
        let wanted = self.state.pod_groups().min_resources(&gang.namespace, &gang.name)?;
        let free = self.free_for(gang);
        let mut short = Vec::new();
        let mut compare = |name: &str, want: u64, have: u64, unit: &str| {
            if want > have {
                short.push(format!("{name} {}{unit}", want - have));
            }
        };
        compare("cpu", wanted.milli_cpu, free.milli_cpu, "m");
        compare("memory", wanted.memory, free.memory, "");
        compare("ephemeral-storage", wanted.ephemeral_storage, free.ephemeral_storage, "");
        compare("pods", wanted.pods.into(), free.pods, "");
        for (name, want) in &wanted.scalar {
            compare(name, *want, free.scalar.get(name).copied().unwrap_or(0), "");
        }
        (!short.is_empty()).then(|| {
            format!(
                "pod group {}/{} is unschedulable: the cluster lacks its minResources (short by {})",
                gang.namespace,
                gang.name,
                short.join(", ")
            )
        })
    }

    /// The room free over every node, the gang's placed members' own
    /// counting as free.
    fn free_for(&self, gang: &Gang) -> Free {
        let mut free = Free::default();
        for (id, facts) in self.state.table().iter() {
            let Some(node) = self.state.node(id) else { continue };
            let (have, used) = (&facts.allocatable, &node.usage);
            free.milli_cpu += have.milli_cpu.saturating_sub(used.milli_cpu);
            free.memory += have.memory.saturating_sub(used.memory);
            free.ephemeral_storage += have.ephemeral_storage.saturating_sub(used.ephemeral_storage);
            free.pods += u64::from(have.pods.saturating_sub(used.pods));
            for (name, amount) in &have.scalar {
                *free.scalar.entry(name.clone()).or_default() += amount.saturating_sub(used.scalar(name));
            }
        }
        for (pod, _) in self.state.group_placements(&gang.namespace, &gang.name) {
            let key = PodKey { namespace: gang.namespace.clone(), name: pod.to_string() };
            let Some(requests) = self.state.placed_requests(&key) else { continue };
            free.milli_cpu += requests.milli_cpu;
            free.memory += requests.memory;
            free.ephemeral_storage += requests.ephemeral_storage;
            free.pods += 1;
            for (name, amount) in &requests.scalar {
                *free.scalar.entry(name.clone()).or_default() += amount;
            }
        }
        free
    }
}
