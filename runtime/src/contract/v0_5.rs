//! Binding for `wasmsched:policy@0.5.x`: 0.4's calls, and `policy-info`'s
//! `score-scale`, by which a policy's scores may be absolute (0..100,
//! added as they are) as a kube Score plugin's are.

super::binding::contract_binding!(
    "../wit/0.5.0",
    "0.5.0",
    |info| info.independent_nodes,
    |info| info.phases.place,
    |info| match info.score_scale {
        wit::ScoreScale::Normalised => facts::ScoreScale::Normalised,
        wit::ScoreScale::Absolute => facts::ScoreScale::Absolute,
    },
    pod: [group: group_info]
);
super::binding::explain_score!();
super::binding::packed_columns!();
super::placement::placement_calls!();
