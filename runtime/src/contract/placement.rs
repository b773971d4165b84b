//! What 0.4 added and every version since shares: a pod's group in
//! `pod-info` and the `place` phase's calls, stamped into each version's
//! module as `binding` stamps the rest.

/// 0.4's `place` phase and the pod's group, the same in every version
/// since: a gang's placement domains and the scores of its placements.
macro_rules! placement_calls {
    () => {
        fn group_info(p: &facts::PodFacts) -> Option<wit::GroupInfo> {
            let g = p.group.as_deref()?;
            Some(wit::GroupInfo {
                name: g.name.clone(),
                min_count: g.min_count,
                members: g.members,
                placed: g.placed.iter().map(member).collect(),
            })
        }

        fn member(m: &facts::MemberPlacement) -> wit::MemberPlacement {
            wit::MemberPlacement { pod: m.pod.clone(), node: m.node }
        }

        impl Bindings {
            pub(crate) fn placement_domains(
                &self,
                store: &mut Store<HostState>,
                pod: &facts::PodFacts,
            ) -> wasmtime::Result<Result<Option<facts::PlacementDomains>, String>> {
                let answer = self.guest().call_placement_domains(store, &pod_info(pod))?;
                Ok(answer.map(|d| d.map(|d| facts::PlacementDomains { key: d.key, required: d.required })))
            }

            pub(crate) fn score_placement(
                &self,
                store: &mut Store<HostState>,
                pod: &facts::PodFacts,
                placements: &[facts::Placement],
            ) -> wasmtime::Result<Result<Vec<f64>, Refusal>> {
                let placements: Vec<wit::Placement> = placements
                    .iter()
                    .map(|p| wit::Placement {
                        domain: p.domain.clone(),
                        members: p.members.iter().map(member).collect(),
                        unplaced: p.unplaced,
                    })
                    .collect();
                let answer = self.guest().call_score_placement(store, &pod_info(pod), &placements)?;
                Ok(answer
                    .map_err(Refusal::Declined)
                    .and_then(|bytes| super::binding::unpack(&bytes, "placement scores", "f64", f64::from_le_bytes)))
            }
        }
    };
}

pub(crate) use placement_calls;
