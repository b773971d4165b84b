//! One policy instance (a store and its bindings) and what creates it: every
//! crossing into the guest goes through [`PolicyInstance::call`], with a
//! fresh deadline and the failure classified.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::{Engine, Store, Trap};

use crate::call_clock::{CallClock, Stopped};
use crate::contract::{Bindings, Template};
use crate::error::PolicyError;
use crate::host_state::HostState;
use crate::limits::PolicyLimits;
use crate::node_table::{NodeSync, NodeTable, SyncPoint};
use crate::source::Program;

/// Time a `sync-nodes` call may take per node record it carries, on top of
/// the call deadline: the first sync sends every node, and its cost grows
/// with the cluster, not with anything a deadline guards against (an
/// interpreted policy's first sync of a large cluster; docs/benchmarks.md,
/// policies in other languages).
pub const SYNC_TIME_PER_NODE: Duration = Duration::from_micros(200);

/// Creates instances of one compiled policy from its pre-instantiated
/// template.
pub(crate) struct InstanceFactory {
    engine: Engine,
    template: Template,
    config_json: Arc<str>,
    /// A source policy's files, handed to each instance's interpreter.
    program: Option<Program>,
    limits: PolicyLimits,
    created: AtomicU64,
    /// Its instances' log, a minute at a time.
    log_budget: Arc<crate::policy_log::MinuteBudget>,
}

impl InstanceFactory {
    pub(crate) fn new(
        engine: Engine,
        template: Template,
        config_json: Arc<str>,
        program: Option<Program>,
        limits: PolicyLimits,
    ) -> Self {
        let log_budget = Arc::new(crate::policy_log::MinuteBudget::new(limits.max_log_lines_per_call));
        InstanceFactory { engine, template, config_json, program, limits, created: AtomicU64::new(0), log_budget }
    }

    pub(crate) fn limits(&self) -> &PolicyLimits {
        &self.limits
    }

    /// Instances created so far, including replacements for poisoned ones.
    pub(crate) fn created(&self) -> u64 {
        self.created.load(Ordering::Relaxed)
    }

    /// A new instance, `init` run: ready to serve calls.
    pub(crate) fn instantiate(&self, name: &Arc<str>) -> Result<PolicyInstance, PolicyError> {
        let mut instance = self.instantiate_uninitialised(name)?;
        self.init(name, &mut instance)?;
        Ok(instance)
    }

    /// A new instance before `init`: only `describe` may be called on it.
    pub(crate) fn instantiate_uninitialised(&self, name: &Arc<str>) -> Result<PolicyInstance, PolicyError> {
        let mut state = HostState::new(
            name.clone(),
            self.config_json.clone(),
            self.limits.memory_bytes,
            self.limits.max_log_lines_per_call,
            self.log_budget.clone(),
        );
        state.program = self.program.clone();
        state.clock = CallClock::start(self.limits.call_deadline);
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        // Past its deadline in wall time, a call goes on while its CPU time
        // is under the deadline (`call_clock.rs`).
        store.epoch_deadline_callback(|mut store| Ok(store.data_mut().clock.decide()));
        store.set_epoch_deadline(store.data().clock.first_ticks());
        store.set_hostcall_fuel(self.limits.max_transfer_bytes);
        let bindings = self
            .template
            .instantiate(&mut store)
            .map_err(|e| classify(name, "instantiate", self.limits.call_deadline, &store, e))?;
        self.created.fetch_add(1, Ordering::Relaxed);
        Ok(PolicyInstance { store, bindings, synced: None })
    }

    pub(crate) fn init(&self, name: &Arc<str>, instance: &mut PolicyInstance) -> Result<(), PolicyError> {
        let init = instance.call(name, "init", self.limits.call_deadline, |store, b| b.init(store))?;
        init.map_err(|message| PolicyError::Config {
            policy: name.to_string(),
            message: crate::policy_log::clean(&message, 4096),
        })
    }
}

pub(crate) struct PolicyInstance {
    pub(crate) store: Store<HostState>,
    bindings: Bindings,
    synced: Option<SyncPoint>,
}

impl PolicyInstance {
    /// Brings the instance's node table up to date; returns how many node
    /// records were sent.
    pub(crate) fn sync(&mut self, name: &Arc<str>, deadline: Duration, table: &NodeTable) -> Result<u64, PolicyError> {
        let sync = table.changes_since(self.synced);
        let sent = match &sync {
            NodeSync::UpToDate => 0,
            NodeSync::Reset(nodes) => nodes.len(),
            NodeSync::Delta(changes) => changes.iter().filter(|(_, n)| n.is_some()).count(),
        } as u64;
        if !matches!(sync, NodeSync::UpToDate) {
            let deadline = deadline + SYNC_TIME_PER_NODE * sent as u32;
            self.call(name, "sync-nodes", deadline, |store, b| b.sync_nodes(store, sync))?;
        }
        self.synced = Some(table.sync_point());
        Ok(sent)
    }

    /// One guarded crossing: a fresh deadline in the CPU time of the
    /// calling thread, the failure classified.
    pub(crate) fn call<R>(
        &mut self,
        name: &Arc<str>,
        phase: &'static str,
        deadline: Duration,
        f: impl FnOnce(&mut Store<HostState>, &Bindings) -> wasmtime::Result<R>,
    ) -> Result<R, PolicyError> {
        let state = self.store.data_mut();
        state.begin_call();
        state.clock = CallClock::start(deadline);
        let first = state.clock.first_ticks();
        self.store.set_epoch_deadline(first);
        f(&mut self.store, &self.bindings).map_err(|e| classify(name, phase, deadline, &self.store, e))
    }
}

/// Names the failure: a denied memory growth explains whatever trap followed
/// it; an epoch interrupt is the deadline.
fn classify(
    name: &str,
    phase: &'static str,
    deadline: Duration,
    store: &Store<HostState>,
    e: wasmtime::Error,
) -> PolicyError {
    let policy = name.to_string();
    if let Some((grown, requested)) = store.data().limiter.denied_growth {
        let limit = store.data().limiter_cap();
        return PolicyError::OutOfMemory { policy, phase, what: grown.what(), requested, limit };
    }
    // wasmtime's error type for it is private: its words are not.
    if format!("{e:#}").contains("fuel allocated for hostcalls has been exhausted") {
        let cap = store.hostcall_fuel();
        let message =
            format!("it handed the host more than {cap} bytes in one crossing (its transfer cap); none was kept");
        // The crossing failed midway: the instance is not entered again.
        return PolicyError::Trap { policy, phase, message };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            let backstop = store.data().clock.stopped == Some(Stopped::Wall);
            PolicyError::DeadlineExceeded { policy, phase, deadline, backstop }
        }
        Some(trap) => {
            // What the policy said (a traceback) is the message; wasmtime's
            // wasm backtrace is the host's, shown only when asked for.
            let words = crate::guest_words::authors_words(&store.data().stderr_tail());
            let mut message = format!("{e:#}");
            if *trap == Trap::MemoryOutOfBounds {
                // A guest's own stack lives in its linear memory: running
                // off its end is an out-of-bounds access, not a host trap.
                message
                    .push_str(" (a guest that runs out of its own stack, by deep recursion or large locals, traps so)");
            }
            if !words.is_empty() {
                // Its traceback says it all: the trap it ended in is the
                // host's side, shown with `-v`.
                message = match crate::guest_words::host_frames_shown() {
                    true => format!("{message}; it said:\n{words}"),
                    false => words,
                };
            }
            PolicyError::Trap { policy, phase, message }
        }
        None => PolicyError::Host { policy, message: format!("{phase}: {e:#}") },
    }
}
