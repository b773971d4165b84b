//! What every contract version's binding has in common: the generated
//! types, the host imports and the conversions from the
//! version-independent [`crate::facts`] are the same code over each
//! version's own generated types, written once here and stamped into
//! `v0_1`, `v0_2` and `v0_3` (versions share their pod and node records'
//! shapes). The per-node columns come in two shapes, each with its
//! `fill_columns`, `verdicts` and `scores`: lists of numbers (0.1, 0.2:
//! [`number_columns`]) and packed bytes (0.3, in its module).
//! Only [`super`] calls into the bindings.

/// One version's binding, in the module that invokes it: `$wit` is the
/// frozen directory, `$version` the version it names, `$independent`
/// whether a `describe` answer declares independent nodes (0.3 says so in
/// `policy-info`; earlier versions only in a custom section,
/// `declarations`); `$place` whether it takes the `place` phase (0.4) and
/// `$scale` its score scale (0.5; earlier versions normalise).
macro_rules! contract_binding {
    ($wit:literal, $version:literal, $independent:expr) => {
        super::binding::contract_binding!($wit, $version, $independent, |_| false, pod: []);
    };
    ($wit:literal, $version:literal, $independent:expr, $place:expr, pod: [$($field:ident: $conv:path),*]) => {
        super::binding::contract_binding!(
            $wit, $version, $independent, $place, |_| crate::facts::ScoreScale::Normalised,
            pod: [$($field: $conv),*]
        );
    };
    (
        $wit:literal, $version:literal, $independent:expr, $place:expr, $scale:expr,
        pod: [$($field:ident: $conv:path),*]
    ) => {
        use wasmtime::Store;
        use wasmtime::component::{HasSelf, Linker};

        use crate::contract::{RawVerdicts, Refusal};
        use crate::facts;
        use crate::host_state::HostState;
        use crate::node_table::NodeSync;

        wasmtime::component::bindgen!({
            path: $wit,
            world: "scheduler-policy",
        });

        use self::wasmsched::policy::types as wit;
        use exports::wasmsched::policy::policy as guest;

        pub const VERSION: &str = $version;

        pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
            SchedulerPolicy::add_to_linker::<HostState, HasSelf<HostState>>(linker, |state| state)
        }

        impl wit::Host for HostState {}

        impl self::wasmsched::policy::host::Host for HostState {
            fn log(&mut self, level: wit::LogLevel, message: String, fields: Vec<(String, String)>) {
                let level = match level {
                    wit::LogLevel::Trace => tracing::Level::TRACE,
                    wit::LogLevel::Debug => tracing::Level::DEBUG,
                    wit::LogLevel::Info => tracing::Level::INFO,
                    wit::LogLevel::Warn => tracing::Level::WARN,
                    wit::LogLevel::Error => tracing::Level::ERROR,
                };
                self.policy_log(level, message, fields);
            }

            fn config(&mut self) -> String {
                self.config_json.to_string()
            }

            fn node_metrics(&mut self, metric: String, nodes: Vec<u32>) -> Vec<Option<wit::MetricSample>> {
                self.lookup_metrics(&metric, &nodes)
                    .into_iter()
                    .map(|s| s.map(|s| wit::MetricSample { value: s.value, age_ms: s.age.as_millis() as u64 }))
                    .collect()
            }
        }

        /// An instantiated 0.1 policy.
        pub(crate) struct Bindings(SchedulerPolicy);

        impl Bindings {
            pub(crate) fn instantiate(
                pre: &SchedulerPolicyPre<HostState>,
                store: &mut Store<HostState>,
            ) -> wasmtime::Result<Self> {
                pre.instantiate(store).map(Bindings)
            }

            fn guest(&self) -> &guest::Guest {
                self.0.wasmsched_policy_policy()
            }

            pub(crate) fn describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<facts::PolicyInfo> {
                let info = self.guest().call_describe(store)?;
                let independent: fn(&wit::PolicyInfo) -> bool = $independent;
                let independent_nodes = independent(&info);
                let place: fn(&wit::PolicyInfo) -> bool = $place;
                let place = place(&info);
                let scale: fn(&wit::PolicyInfo) -> facts::ScoreScale = $scale;
                let score_scale = scale(&info);
                Ok(facts::PolicyInfo {
                    name: info.name,
                    version: info.version,
                    description: info.description,
                    phases: facts::Phases { filter: info.phases.filter, score: info.phases.score, place },
                    score_order: match info.score_order {
                        wit::ScoreOrder::HigherIsBetter => facts::ScoreOrder::HigherIsBetter,
                        wit::ScoreOrder::LowerIsBetter => facts::ScoreOrder::LowerIsBetter,
                    },
                    independent_nodes,
                    score_scale,
                })
            }

            pub(crate) fn init(&self, store: &mut Store<HostState>) -> wasmtime::Result<Result<(), String>> {
                self.guest().call_init(store)
            }

            /// Sends what the instance's node table is missing.
            pub(crate) fn sync_nodes(&self, store: &mut Store<HostState>, sync: NodeSync<'_>) -> wasmtime::Result<()> {
                let (reset, changes): (bool, Vec<wit::NodeChange>) = match sync {
                    NodeSync::UpToDate => return Ok(()),
                    NodeSync::Reset(nodes) => {
                        (true, nodes.into_iter().map(|(id, n)| wit::NodeChange::Upsert(node_info(id, n))).collect())
                    }
                    NodeSync::Delta(changes) => (
                        false,
                        changes
                            .into_iter()
                            .map(|(id, n)| match n {
                                Some(n) => wit::NodeChange::Upsert(node_info(id, n)),
                                None => wit::NodeChange::Remove(id),
                            })
                            .collect(),
                    ),
                };
                self.guest().call_sync_nodes(store, reset, &changes)
            }

            pub(crate) fn filter(
                &self,
                store: &mut Store<HostState>,
                pod: &facts::PodFacts,
                candidates: &[facts::Candidate],
            ) -> wasmtime::Result<Result<RawVerdicts, Refusal>> {
                let answer = with_columns(candidates, |c| self.guest().call_filter(store, &pod_info(pod), c))?;
                Ok(answer.map_err(Refusal::Declined).and_then(verdicts))
            }

            pub(crate) fn score(
                &self,
                store: &mut Store<HostState>,
                pod: &facts::PodFacts,
                candidates: &[facts::Candidate],
                seed: u64,
            ) -> wasmtime::Result<Result<Vec<f64>, Refusal>> {
                let answer = with_columns(candidates, |c| self.guest().call_score(store, &pod_info(pod), c, seed))?;
                Ok(answer.map_err(Refusal::Declined).and_then(scores))
            }
        }

        /// Annotations that can be large and that no policy needs.
        const SKIPPED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

        fn node_info(id: facts::NodeId, n: &facts::NodeFacts) -> wit::NodeInfo {
            wit::NodeInfo {
                id,
                name: n.name.clone(),
                labels: n.labels.clone(),
                annotations: n
                    .annotations
                    .iter()
                    .filter(|(k, _)| !SKIPPED_ANNOTATIONS.contains(&k.as_str()))
                    .cloned()
                    .collect(),
                taints: n.taints.iter().map(taint).collect(),
                allocatable: resources(&n.allocatable),
                unschedulable: n.unschedulable,
            }
        }

        fn resources(r: &facts::Resources) -> wit::Resources {
            wit::Resources {
                milli_cpu: r.milli_cpu,
                memory: r.memory,
                ephemeral_storage: r.ephemeral_storage,
                pods: r.pods,
                scalar: r.scalar.clone(),
            }
        }

        fn effect(e: facts::TaintEffect) -> wit::TaintEffect {
            match e {
                facts::TaintEffect::NoSchedule => wit::TaintEffect::NoSchedule,
                facts::TaintEffect::PreferNoSchedule => wit::TaintEffect::PreferNoSchedule,
                facts::TaintEffect::NoExecute => wit::TaintEffect::NoExecute,
            }
        }

        fn taint(t: &facts::Taint) -> wit::Taint {
            wit::Taint { key: t.key.clone(), value: t.value.clone(), effect: effect(t.effect) }
        }

        fn requirement(r: &facts::SelectorRequirement) -> wit::SelectorRequirement {
            wit::SelectorRequirement {
                key: r.key.clone(),
                operator: match r.operator {
                    facts::SelectorOperator::In => wit::SelectorOperator::In,
                    facts::SelectorOperator::NotIn => wit::SelectorOperator::NotIn,
                    facts::SelectorOperator::Exists => wit::SelectorOperator::Exists,
                    facts::SelectorOperator::DoesNotExist => wit::SelectorOperator::DoesNotExist,
                    facts::SelectorOperator::Gt => wit::SelectorOperator::Gt,
                    facts::SelectorOperator::Lt => wit::SelectorOperator::Lt,
                },
                values: r.values.clone(),
            }
        }

        fn pod_info(p: &facts::PodFacts) -> wit::PodInfo {
            wit::PodInfo {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                uid: p.uid.clone(),
                labels: p.labels.clone(),
                annotations: p
                    .annotations
                    .iter()
                    .filter(|(k, _)| !SKIPPED_ANNOTATIONS.contains(&k.as_str()))
                    .cloned()
                    .collect(),
                priority: p.priority,
                requests: resources(&p.requests),
                nonzero_milli_cpu: p.nonzero_milli_cpu,
                nonzero_memory: p.nonzero_memory,
                node_selector: p.node_selector.clone(),
                required_node_affinity: p
                    .required_node_affinity
                    .iter()
                    .map(|t| wit::NodeSelectorTerm {
                        match_expressions: t.match_expressions.iter().map(requirement).collect(),
                        match_fields: t.match_fields.iter().map(requirement).collect(),
                    })
                    .collect(),
                tolerations: p
                    .tolerations
                    .iter()
                    .map(|t| wit::Toleration {
                        key: t.key.clone(),
                        operator: match t.operator {
                            facts::TolerationOperator::Exists => wit::TolerationOperator::Exists,
                            facts::TolerationOperator::Equal => wit::TolerationOperator::Equal,
                        },
                        value: t.value.clone(),
                        effect: t.effect.map(effect),
                    })
                    .collect(),
                $($field: $conv(p),)*
            }
        }

        thread_local! {
            /// The columns of this thread's last call, refilled for its
            /// next (by the version's `fill_columns`): no allocation but
            /// where a call has more candidates than any before it.
            /// Holds one attempt's columns (48-56 bytes a candidate) per
            /// thread that calls policies.
            static COLUMNS: std::cell::RefCell<wit::Candidates> = std::cell::RefCell::new(no_columns());
        }

        fn no_columns() -> wit::Candidates {
            wit::Candidates {
                nodes: Vec::new(),
                requested_milli_cpu: Vec::new(),
                requested_memory: Vec::new(),
                requested_ephemeral_storage: Vec::new(),
                nonzero_requested_milli_cpu: Vec::new(),
                nonzero_requested_memory: Vec::new(),
                pod_count: Vec::new(),
            }
        }

        /// `call` with `candidates` as the contract's columns.
        fn with_columns<R>(candidates: &[facts::Candidate], call: impl FnOnce(&wit::Candidates) -> R) -> R {
            COLUMNS.with(|cell| match cell.try_borrow_mut() {
                Ok(mut columns) => {
                    fill_columns(&mut columns, candidates);
                    call(&columns)
                }
                // A call made within a call (the host makes none) gets
                // columns of its own.
                Err(_) => {
                    let mut columns = no_columns();
                    fill_columns(&mut columns, candidates);
                    call(&columns)
                }
            })
        }
    };
}

/// The per-node columns as packed little-endian bytes (contract 0.3 on):
/// how they are filled, and how the answers are read.
macro_rules! packed_columns {
    () => {
        /// Verdicts as the runtime reads them: u32s, packed.
        fn verdicts(answer: wit::FilterVerdicts) -> Result<RawVerdicts, Refusal> {
            Ok((answer.reasons, super::binding::unpack(&answer.verdicts, "verdicts", "u32", u32::from_le_bytes)?))
        }

        /// Scores as the runtime reads them: f64s, packed.
        fn scores(answer: Vec<u8>) -> Result<Vec<f64>, Refusal> {
            super::binding::unpack(&answer, "scores", "f64", f64::from_le_bytes)
        }

        /// Rows to packed columns, in one pass over the rows, each column
        /// sized first and written by index as arrays of bytes (pushing
        /// byte slices checked seven capacities a row, and copying into
        /// chunks was not inlined: 2.5 and 2.2 times the instructions).
        fn fill_columns(out: &mut wit::Candidates, candidates: &[facts::Candidate]) {
            use super::binding::packed;
            let n = candidates.len();
            let (nodes, cpu, memory, storage) = (
                packed::<4>(&mut out.nodes, n),
                packed::<8>(&mut out.requested_milli_cpu, n),
                packed::<8>(&mut out.requested_memory, n),
                packed::<8>(&mut out.requested_ephemeral_storage, n),
            );
            let (nonzero_cpu, nonzero_memory, pods) = (
                packed::<8>(&mut out.nonzero_requested_milli_cpu, n),
                packed::<8>(&mut out.nonzero_requested_memory, n),
                packed::<4>(&mut out.pod_count, n),
            );
            for (i, c) in candidates.iter().enumerate() {
                nodes[i] = c.node.to_le_bytes();
                cpu[i] = c.requested_milli_cpu.to_le_bytes();
                memory[i] = c.requested_memory.to_le_bytes();
                storage[i] = c.requested_ephemeral_storage.to_le_bytes();
                nonzero_cpu[i] = c.nonzero_requested_milli_cpu.to_le_bytes();
                nonzero_memory[i] = c.nonzero_requested_memory.to_le_bytes();
                pods[i] = c.pod_count.to_le_bytes();
            }
        }
    };
}

/// `column` sized for `n` entries of `N` bytes, as arrays to write them
/// into; cut to `n` so that the writes by index need no bounds check.
pub(crate) fn packed<const N: usize>(column: &mut Vec<u8>, n: usize) -> &mut [[u8; N]] {
    column.resize(n * N, 0);
    &mut column.as_chunks_mut::<N>().0[..n]
}

/// Packed little-endian numbers of `N` bytes each; bytes left over are
/// an answer the contract cannot carry.
pub(crate) fn unpack<T, const N: usize>(
    bytes: &[u8],
    what: &str,
    kind: &str,
    from: fn([u8; N]) -> T,
) -> Result<Vec<T>, super::Refusal> {
    let chunks = bytes.chunks_exact(N);
    if !chunks.remainder().is_empty() {
        return Err(super::Refusal::Malformed(format!(
            "the {what} are {} bytes, not a whole number of {kind}s ({N} bytes each, little-endian)",
            bytes.len()
        )));
    }
    Ok(chunks.map(|c| from(c.try_into().expect("chunks_exact gives N bytes"))).collect())
}

/// The per-node columns as lists of numbers (contracts 0.1 and 0.2): how
/// they are filled, and how the answers are read.
macro_rules! number_columns {
    () => {
        /// Verdicts as the runtime reads them: 0.1 and 0.2 send numbers.
        fn verdicts(answer: wit::FilterVerdicts) -> Result<RawVerdicts, Refusal> {
            Ok((answer.reasons, answer.verdicts))
        }

        /// Scores as the runtime reads them: 0.1 and 0.2 send numbers.
        fn scores(answer: Vec<f64>) -> Result<Vec<f64>, Refusal> {
            Ok(answer)
        }

        /// Rows to columns: each column crosses as one block copy. One
        /// pass over the rows, writing every column by index (seven
        /// passes read each row seven times; pushing checks seven
        /// capacities a row and does not vectorise).
        fn fill_columns(out: &mut wit::Candidates, candidates: &[facts::Candidate]) {
            let n = candidates.len();
            let (nodes, cpu, memory, storage) = (
                sized(&mut out.nodes, n),
                sized(&mut out.requested_milli_cpu, n),
                sized(&mut out.requested_memory, n),
                sized(&mut out.requested_ephemeral_storage, n),
            );
            let (nonzero_cpu, nonzero_memory, pods) = (
                sized(&mut out.nonzero_requested_milli_cpu, n),
                sized(&mut out.nonzero_requested_memory, n),
                sized(&mut out.pod_count, n),
            );
            for (i, c) in candidates.iter().enumerate() {
                nodes[i] = c.node;
                cpu[i] = c.requested_milli_cpu;
                memory[i] = c.requested_memory;
                storage[i] = c.requested_ephemeral_storage;
                nonzero_cpu[i] = c.nonzero_requested_milli_cpu;
                nonzero_memory[i] = c.nonzero_requested_memory;
                pods[i] = c.pod_count;
            }
        }

        /// `column` at length `n`, its old values left to be overwritten.
        /// Sliced to `n` so that the compiler knows the length, and drops
        /// the bounds checks of the writes by index.
        fn sized<T: Copy + Default>(column: &mut Vec<T>, n: usize) -> &mut [T] {
            column.resize(n, T::default());
            &mut column[..n]
        }
    };
}

/// `explain-score` (contract 0.2 on): a policy's own breakdown of its
/// raw scores, in the columns of the version that stamps it.
macro_rules! explain_score {
    () => {
        impl Bindings {
            /// Each candidate's parts, as the policy names them; an empty
            /// list where it does not say.
            pub(crate) fn explain_score(
                &self,
                store: &mut Store<HostState>,
                pod: &facts::PodFacts,
                candidates: &[facts::Candidate],
                seed: u64,
            ) -> wasmtime::Result<Result<Vec<Vec<crate::facts::ScorePart>>, String>> {
                let answer =
                    with_columns(candidates, |c| self.guest().call_explain_score(store, &pod_info(pod), c, seed))?;
                Ok(answer.map(|per_node| {
                    per_node
                        .into_iter()
                        .map(|parts| {
                            parts
                                .into_iter()
                                .map(|p| crate::facts::ScorePart { name: p.name, value: p.value })
                                .collect()
                        })
                        .collect()
                }))
            }
        }
    };
}

pub(crate) use {contract_binding, explain_score, number_columns, packed_columns};
