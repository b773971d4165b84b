//! Binding for `wasmsched:policy@0.2.x`: 0.1's calls ([`super::binding`])
//! and `explain-score`, a policy's own breakdown of its raw scores.

super::binding::contract_binding!("../wit/0.2.0", "0.2.0", |_| false);
super::binding::number_columns!();

use crate::facts::ScorePart;

impl Bindings {
    /// Each candidate's parts, as the policy names them; an empty list
    /// where it does not say.
    pub(crate) fn explain_score(
        &self,
        store: &mut Store<HostState>,
        pod: &facts::PodFacts,
        candidates: &[facts::Candidate],
        seed: u64,
    ) -> wasmtime::Result<Result<Vec<Vec<ScorePart>>, String>> {
        let answer = with_columns(candidates, |c| self.guest().call_explain_score(store, &pod_info(pod), c, seed))?;
        Ok(answer.map(|per_node| {
            per_node
                .into_iter()
                .map(|parts| parts.into_iter().map(|p| ScorePart { name: p.name, value: p.value }).collect())
                .collect()
        }))
    }
}
