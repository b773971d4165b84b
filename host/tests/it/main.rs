//! Every integration test of `wasmsched`, in one test binary: wasmtime and
//! kube are linked once rather than once per file, which is most of the
//! time and disk a test run takes. One module per area; `common` and `real`
//! are the helpers (a fake API server, the real control plane).
//!
//! Filter by module: `cargo test -p wasmsched --test it kube_backend::`.

mod common;
mod real;

mod call_deadlines;
mod check_cli;
mod code_map;
mod compare_cli;
mod deploy_manifests;
mod dev_cli;
mod docs_match;
mod dump_reading;
mod first_policy;
mod fuzzing;
mod group_parity;
mod helpers_parity;
mod hostile_components;
mod hostile_tenant;
mod krew_manifest;
mod kube_backend;
mod layering;
mod monitoring_manifests;
mod new_cli;
mod node_metrics;
mod oci_registry;
mod one_rack;
mod policy_reload;
mod policy_runtime;
mod polyglot;
mod properties;
mod real_apiserver;
mod run_cli;
mod scheduling;
mod sdk_docs;
mod sdk_reference;
mod shadow;
mod simulate_cli;
mod sizes;
mod source_policies;
mod storage_properties;
mod team_fit;
mod tenant_gangs;
mod tenant_interpreters;
mod tenants;
mod toolkit_parity;
mod topology_properties;
