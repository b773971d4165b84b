//! Binding for `wasmsched:policy@0.4.x`: 0.3's calls and packed columns,
//! the pod's group in `pod-info`, and the `place` phase: a gang's
//! placement domains and the scores of its feasible placements.

super::binding::contract_binding!(
    "../wit/0.4.0",
    "0.4.0",
    |info| info.independent_nodes,
    |info| info.phases.place,
    pod: [group: group_info]
);
super::binding::explain_score!();
super::binding::packed_columns!();
super::placement::placement_calls!();
