//! Tenants' own policies: the labelled ConfigMaps they come from
//! (`configmaps`), one worker per namespace that validates them
//! (`namespace`) within its share of compile time (`compile_budget`),
//! and the threads tenant jobs run on (`workers`).

pub mod compile_budget;
pub mod configmaps;
pub mod namespace;
pub mod workers;
