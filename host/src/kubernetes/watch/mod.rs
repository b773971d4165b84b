//! Watches of the API server: how each is decoded (`decode`: lists,
//! relists, dedupe by resourceVersion), retried and logged (`retry`), and
//! the cluster's objects turned into the core's events (`sources`),
//! decoded without their managedFields (`strip`).

pub mod decode;
pub mod retry;
pub mod sources;
pub mod strip;
