//! Binding for `wasmsched:policy@0.2.x`: 0.1's calls ([`super::binding`])
//! and `explain-score`, a policy's own breakdown of its raw scores.

super::binding::contract_binding!("../wit/0.2.0", "0.2.0", |_| false);
super::binding::number_columns!();
super::binding::explain_score!();
