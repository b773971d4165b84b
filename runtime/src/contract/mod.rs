//! The `wasmsched:policy` contract versions this runtime speaks, and the one
//! place that dispatches over them. Each version is a module generated from
//! its frozen `wit/<version>` directory and converts from the
//! version-independent [`crate::facts`]; everything outside this directory
//! sees [`Template`] and [`Bindings`] and never a version's types. A new
//! version adds a module, one variant to each enum below, and one arm to
//! each match in this file.

mod binding;
mod placement;
mod v0_1;
mod v0_2;
mod v0_3;
mod v0_4;
mod v0_5;

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use crate::error::PolicyError;
use crate::facts::{Candidate, Placement, PlacementDomains, PodFacts, PolicyInfo, ScorePart};
use crate::host_state::HostState;
use crate::node_table::NodeSync;

const POLICY_INTERFACE: &str = "wasmsched:policy/policy";

/// The versions accepted, as `wasmsched check` and errors print them.
pub const SUPPORTED: &str = "0.1.x, 0.2.x, 0.3.x, 0.4.x and 0.5.x";

/// A filter answer as the guest gave it: distinct reasons, one code per
/// candidate (0 = passes, n = the n-th reason).
pub(crate) type RawVerdicts = (Vec<String>, Vec<u32>);

/// Why a filter or score call gave no answer the runtime can read, short
/// of a trap: the policy's own error, or an answer the contract cannot
/// even carry (0.3's packed numbers with bytes left over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    Declined(String),
    Malformed(String),
}

/// A supported contract version, read from the component's exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContractVersion {
    V0_1,
    V0_2,
    V0_3,
    V0_4,
    V0_5,
}

impl ContractVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            ContractVersion::V0_1 => v0_1::VERSION,
            ContractVersion::V0_2 => v0_2::VERSION,
            ContractVersion::V0_3 => v0_3::VERSION,
            ContractVersion::V0_4 => v0_4::VERSION,
            ContractVersion::V0_5 => v0_5::VERSION,
        }
    }

    /// The version of the `policy` interface `component` exports, before
    /// anything is instantiated.
    pub(crate) fn detect(engine: &Engine, origin: &str, component: &Component) -> Result<Self, PolicyError> {
        let ty = component.component_type();
        let exports: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
        let Some(found) = exports.iter().find_map(|name| {
            let rest = name.strip_prefix(POLICY_INTERFACE)?;
            Some(rest.strip_prefix('@').unwrap_or(""))
        }) else {
            return Err(PolicyError::MissingExport {
                source_name: origin.to_string(),
                exports: if exports.is_empty() { "none".into() } else { exports.join(", ") },
            });
        };
        let mut parts = found.split('.');
        match (parts.next(), parts.next()) {
            (Some("0"), Some("1")) => Ok(ContractVersion::V0_1),
            (Some("0"), Some("2")) => Ok(ContractVersion::V0_2),
            (Some("0"), Some("3")) => Ok(ContractVersion::V0_3),
            (Some("0"), Some("4")) => Ok(ContractVersion::V0_4),
            (Some("0"), Some("5")) => Ok(ContractVersion::V0_5),
            _ => Err(PolicyError::IncompatibleVersion {
                source_name: origin.to_string(),
                found: if found.is_empty() { "(unversioned)".into() } else { found.to_string() },
                supported: SUPPORTED.to_string(),
            }),
        }
    }
}

/// `\0asm` then a 4-byte version/layer: `1 0 0 0` is a core module,
/// `0x0d 0 1 0` a component.
pub(crate) fn check_header(origin: &str, bytes: &[u8]) -> Result<(), PolicyError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(PolicyError::NotWasm { source_name: origin.to_string() });
    }
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(PolicyError::CoreModule { source_name: origin.to_string() });
    }
    Ok(())
}

/// The host imports of every version, so one linker serves them all.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    v0_1::add_to_linker(linker)?;
    v0_2::add_to_linker(linker)?;
    v0_3::add_to_linker(linker)?;
    v0_4::add_to_linker(linker)?;
    v0_5::add_to_linker(linker)
}

/// A component pre-instantiated against its contract version.
pub(crate) enum Template {
    V0_1(v0_1::SchedulerPolicyPre<HostState>),
    V0_2(v0_2::SchedulerPolicyPre<HostState>),
    V0_3(v0_3::SchedulerPolicyPre<HostState>),
    V0_4(v0_4::SchedulerPolicyPre<HostState>),
    V0_5(v0_5::SchedulerPolicyPre<HostState>),
}

impl Template {
    pub(crate) fn new(
        linker: &Linker<HostState>,
        origin: &str,
        component: &Component,
        version: ContractVersion,
    ) -> Result<Self, PolicyError> {
        let unsupported = |e: wasmtime::Error| PolicyError::UnsupportedImport {
            source_name: origin.to_string(),
            message: format!("{e:#}"),
        };
        let missing = |e: wasmtime::Error| PolicyError::MissingExport {
            source_name: origin.to_string(),
            exports: format!("{e:#}"),
        };
        let pre = linker.instantiate_pre(component).map_err(unsupported)?;
        match version {
            ContractVersion::V0_1 => Ok(Template::V0_1(v0_1::SchedulerPolicyPre::new(pre).map_err(missing)?)),
            ContractVersion::V0_2 => Ok(Template::V0_2(v0_2::SchedulerPolicyPre::new(pre).map_err(missing)?)),
            ContractVersion::V0_3 => Ok(Template::V0_3(v0_3::SchedulerPolicyPre::new(pre).map_err(missing)?)),
            ContractVersion::V0_4 => Ok(Template::V0_4(v0_4::SchedulerPolicyPre::new(pre).map_err(missing)?)),
            ContractVersion::V0_5 => Ok(Template::V0_5(v0_5::SchedulerPolicyPre::new(pre).map_err(missing)?)),
        }
    }

    pub(crate) fn instantiate(&self, store: &mut Store<HostState>) -> wasmtime::Result<Bindings> {
        match self {
            Template::V0_1(pre) => v0_1::Bindings::instantiate(pre, store).map(Bindings::V0_1),
            Template::V0_2(pre) => v0_2::Bindings::instantiate(pre, store).map(Bindings::V0_2),
            Template::V0_3(pre) => v0_3::Bindings::instantiate(pre, store).map(Bindings::V0_3),
            Template::V0_4(pre) => v0_4::Bindings::instantiate(pre, store).map(Bindings::V0_4),
            Template::V0_5(pre) => v0_5::Bindings::instantiate(pre, store).map(Bindings::V0_5),
        }
    }
}

/// An instantiated policy of some contract version: the calls the runtime
/// makes, in version-independent types.
pub(crate) enum Bindings {
    V0_1(v0_1::Bindings),
    V0_2(v0_2::Bindings),
    V0_3(v0_3::Bindings),
    V0_4(v0_4::Bindings),
    V0_5(v0_5::Bindings),
}

impl Bindings {
    pub(crate) fn describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<PolicyInfo> {
        match self {
            Bindings::V0_1(b) => b.describe(store),
            Bindings::V0_2(b) => b.describe(store),
            Bindings::V0_3(b) => b.describe(store),
            Bindings::V0_4(b) => b.describe(store),
            Bindings::V0_5(b) => b.describe(store),
        }
    }

    pub(crate) fn init(&self, store: &mut Store<HostState>) -> wasmtime::Result<Result<(), String>> {
        match self {
            Bindings::V0_1(b) => b.init(store),
            Bindings::V0_2(b) => b.init(store),
            Bindings::V0_3(b) => b.init(store),
            Bindings::V0_4(b) => b.init(store),
            Bindings::V0_5(b) => b.init(store),
        }
    }

    pub(crate) fn sync_nodes(&self, store: &mut Store<HostState>, sync: NodeSync<'_>) -> wasmtime::Result<()> {
        match self {
            Bindings::V0_1(b) => b.sync_nodes(store, sync),
            Bindings::V0_2(b) => b.sync_nodes(store, sync),
            Bindings::V0_3(b) => b.sync_nodes(store, sync),
            Bindings::V0_4(b) => b.sync_nodes(store, sync),
            Bindings::V0_5(b) => b.sync_nodes(store, sync),
        }
    }

    pub(crate) fn filter(
        &self,
        store: &mut Store<HostState>,
        pod: &PodFacts,
        candidates: &[Candidate],
    ) -> wasmtime::Result<Result<RawVerdicts, Refusal>> {
        match self {
            Bindings::V0_1(b) => b.filter(store, pod, candidates),
            Bindings::V0_2(b) => b.filter(store, pod, candidates),
            Bindings::V0_3(b) => b.filter(store, pod, candidates),
            Bindings::V0_4(b) => b.filter(store, pod, candidates),
            Bindings::V0_5(b) => b.filter(store, pod, candidates),
        }
    }

    pub(crate) fn score(
        &self,
        store: &mut Store<HostState>,
        pod: &PodFacts,
        candidates: &[Candidate],
        seed: u64,
    ) -> wasmtime::Result<Result<Vec<f64>, Refusal>> {
        match self {
            Bindings::V0_1(b) => b.score(store, pod, candidates, seed),
            Bindings::V0_2(b) => b.score(store, pod, candidates, seed),
            Bindings::V0_3(b) => b.score(store, pod, candidates, seed),
            Bindings::V0_4(b) => b.score(store, pod, candidates, seed),
            Bindings::V0_5(b) => b.score(store, pod, candidates, seed),
        }
    }

    /// Each candidate's score parts (contract 0.2 on); `None` for a policy
    /// whose contract has no breakdown.
    pub(crate) fn explain_score(
        &self,
        store: &mut Store<HostState>,
        pod: &PodFacts,
        candidates: &[Candidate],
        seed: u64,
    ) -> wasmtime::Result<Option<Result<Vec<Vec<ScorePart>>, String>>> {
        match self {
            Bindings::V0_1(_) => Ok(None),
            Bindings::V0_2(b) => b.explain_score(store, pod, candidates, seed).map(Some),
            Bindings::V0_3(b) => b.explain_score(store, pod, candidates, seed).map(Some),
            Bindings::V0_4(b) => b.explain_score(store, pod, candidates, seed).map(Some),
            Bindings::V0_5(b) => b.explain_score(store, pod, candidates, seed).map(Some),
        }
    }

    /// A gang's placement domains (contract 0.4's `place` phase); `None`
    /// from a policy whose contract has no such phase.
    pub(crate) fn placement_domains(
        &self,
        store: &mut Store<HostState>,
        pod: &PodFacts,
    ) -> wasmtime::Result<Result<Option<PlacementDomains>, String>> {
        match self {
            Bindings::V0_4(b) => b.placement_domains(store, pod),
            Bindings::V0_5(b) => b.placement_domains(store, pod),
            _ => Ok(Ok(None)),
        }
    }

    /// The raw scores of a gang's feasible placements (contract 0.4).
    pub(crate) fn score_placement(
        &self,
        store: &mut Store<HostState>,
        pod: &PodFacts,
        placements: &[Placement],
    ) -> wasmtime::Result<Result<Vec<f64>, Refusal>> {
        match self {
            Bindings::V0_4(b) => b.score_placement(store, pod, placements),
            Bindings::V0_5(b) => b.score_placement(store, pod, placements),
            _ => Ok(Err(Refusal::Declined("its contract has no score-placement (0.4 on)".into()))),
        }
    }
}
