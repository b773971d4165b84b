//! Tenants' own policies: the labelled ConfigMaps they come from
//! (`configmaps`), one worker per namespace that validates them
//! (`namespace`), and the threads tenant jobs run on (`workers`).

pub mod configmaps;
pub mod namespace;
pub mod workers;
