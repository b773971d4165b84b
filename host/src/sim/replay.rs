//! `wasmsched simulate --replay DIR`: a recording's inputs fed through the
//! core again, at their recorded times, with the recorded policies or
//! others. Where the replay decides as the recording did, the recording's
//! binding results follow; where it decides otherwise, its own placement
//! stands: the pod is taken as bound where the replay put it (or left
//! pending), and the recording's later copies of that pod are rewritten to
//! say so. Everything else (nodes, other pods, deletions, evictions) comes
//! as it came.
//!
//! Replayed with the recorded policies, every attempt decides as recorded:
//! that is the test that a recording is complete.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use super::run::{SimOptions, Unplaced};
use super::utilisation::{NodeUtilisation, utilisation};
use crate::cluster::{PodInfo, PodKey};
use crate::record::{Attempted, BindingRecord, Entry, read_journal};
use crate::scheduler::POLICY_ANNOTATION;
use crate::scheduler::experiments::{CandidateCounts, Experiments};
use crate::scheduler::policy_set::{ShadowCandidate, WeightedPolicy};
use crate::scheduler::{Attempt, Change, ClusterEvent, PolicySet, Profile, Scheduler, SchedulerConfig, TenantJob};
use wasmsched_runtime::LoadedPolicy;

/// One attempt the replay decided otherwise than the recording.
#[derive(Debug, Clone, Serialize)]
pub struct Divergence {
    pub recorded: Attempted,
    /// `None`: the replay had no pod to attempt at that moment.
    pub replayed: Option<Attempted>,
}

#[derive(Debug, Serialize)]
pub struct ReplayReport {
    /// The scheduler names the recording's profiles had.
    pub profiles: Vec<String>,
    /// Attempts in the recording, and how many the replay decided alike
    /// (the same pod, the same node or none).
    pub attempts: usize,
    pub agreed: usize,
    pub divergences: Vec<Divergence>,
    /// Pods the replay left on a node, and where, at the recording's end.
    pub placed: Vec<(String, String)>,
    /// Pods of ours still waiting at the recording's end.
    pub pending: Vec<Unplaced>,
    pub utilisation: Vec<NodeUtilisation>,
    /// What each shadow candidate would have done on the recorded
    /// attempts (the policies' own `candidates`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub experiments: Vec<CandidateCounts>,
    /// What the replay could not make as it was: a tenant's policy the
    /// recording used and `--tenant-policy` did not supply, or supplied
    /// other bytes of.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Replays the recording in `dir` with `policies` deciding for its first
/// profile (its other profiles decide by the built-in scoring).
pub fn replay(dir: &Path, policies: PolicySet, options: &SimOptions) -> Result<ReplayReport, String> {
    let journal = read_journal(dir)?;
    let header = journal.header.clone();
    let first = header.profiles.first().cloned().unwrap_or_else(|| options.scheduler_name.clone());
    let config = SchedulerConfig {
        scheduler_name: first,
        seed: header.seed,
        sampling: options.sampling,
        scoring: options.scoring,
        plugin_args: options.plugin_args.clone(),
    };
    let mut scheduler = Scheduler::new(config, policies).with_workers(options.workers.clone());
    for name in header.profiles.iter().skip(1) {
        let policies = PolicySet::default();
        let (sampling, scoring, plugin_args) = (options.sampling, options.scoring, options.plugin_args.clone());
        scheduler.add_profile(Profile { scheduler_name: name.clone(), policies, sampling, scoring, plugin_args });
    }
    let mut run = Replay::new(scheduler, Tenants::of(options));
    run.tenants.apply_all(&mut run.scheduler);
    for (n, line) in journal.lines().enumerate() {
        let line = line?;
        run.step(Duration::from_nanos(line.t), line.entry)?;
        if n + 1 == header.snapshot_lines {
            // Started from a snapshot: how long its waiting pods had
            // waited is not known, so each waits for its recorded attempt.
            run.fresh = run.scheduler.set_aside_waiting().into_iter().collect();
            run.scheduler.node_layout_restored();
        }
    }
    Ok(run.report(header.profiles))
}

struct Replay {
    scheduler: Scheduler,
    /// Where the replay has each pod it decided: a node, or none.
    decided: HashMap<PodKey, Option<String>>,
    /// Pods the recording placed: their later copies carry its node.
    recorded_placed: HashSet<PodKey>,
    /// Placements awaiting the recording's binding result (the replay
    /// decided as it did).
    in_flight: HashMap<PodKey, (Arc<PodInfo>, String)>,
    last_message: HashMap<PodKey, String>,
    /// Pods waiting when the recording's snapshot was taken, not attempted
    /// since: each is attempted when, and as which attempt, recorded.
    fresh: HashSet<PodKey>,
    tenants: Tenants,
    /// Tenant pods handed to their policy, decided when the recording's
    /// verdict comes.
    jobs: HashMap<PodKey, Box<TenantJob>>,
    /// The job each handed-out pod waits on, by the job's first pod.
    job_of: HashMap<PodKey, PodKey>,
    /// Pods the recording handed to a tenant's policy and the replay
    /// decided at once: compared when the recording's decision comes.
    early: HashMap<PodKey, Attempted>,
    experiments: Experiments,
    attempts: usize,
    agreed: usize,
    divergences: Vec<Divergence>,
}

impl Replay {
    fn new(scheduler: Scheduler, tenants: Tenants) -> Replay {
        Replay {
            scheduler,
            decided: HashMap::new(),
            recorded_placed: HashSet::new(),
            in_flight: HashMap::new(),
            last_message: HashMap::new(),
            fresh: HashSet::new(),
            tenants,
            jobs: HashMap::new(),
            job_of: HashMap::new(),
            early: HashMap::new(),
            experiments: Experiments::default(),
            attempts: 0,
            agreed: 0,
            divergences: Vec::new(),
        }
    }

    fn step(&mut self, now: Duration, entry: Entry) -> Result<(), String> {
        match entry {
            Entry::Event(record) => {
                let event = self.rewritten(ClusterEvent::from_record(record)?);
                let _ = self.scheduler.apply(event, now);
            }
            Entry::Attempt(recorded) => self.attempt(now, recorded),
            Entry::Binding(binding) => self.binding(now, binding),
            Entry::Permissions(denied) => self.scheduler.set_denied_writes(denied, now),
            Entry::Policies { .. } => {}
            Entry::TenantPolicies { tenant, active } => self.tenants.apply(&mut self.scheduler, &tenant, &active),
            Entry::Evaluate { pod, attempt } => self.evaluate(now, pod, attempt),
            Entry::Assumed { pod, node, bound } => self.assumed(now, &pod, node, bound),
            Entry::Layout(layout) => self.scheduler.restore_node_layout(layout),
        }
        Ok(())
    }

    /// The recording handed a tenant pod to its policy here: so does the
    /// replay, or it decides the pod at once (its policy was not supplied).
    fn evaluate(&mut self, now: Duration, pod: String, attempt: u32) {
        match self.next_attempt(&key_of(&pod), attempt, now) {
            Some(Attempt::Evaluate(job)) => {
                // A gang's job answers whichever member's attempt comes first.
                for key in job.pods() {
                    self.job_of.insert(key, job.pod.key.clone());
                }
                self.jobs.insert(job.pod.key.clone(), job);
            }
            Some(other) => {
                let handed = Attempted { pod, node: None, message: None, canary: None, attempt };
                if let Some(replayed) = self.conclude(other, &handed, now) {
                    self.early.insert(key_of(&replayed.pod), replayed);
                }
            }
            None => {}
        }
        let work = self.scheduler.take_shadow_work();
        self.experiments.run_inline(work);
    }

    /// The snapshot's pod placed on `node` before its copy said so: placed
    /// there, bound if its binding had answered, else waiting for it.
    fn assumed(&mut self, now: Duration, pod: &str, node: String, bound: bool) {
        let key = key_of(pod);
        let Some(info) = self.scheduler.assume_recorded(&key, &node, now) else { return };
        self.fresh.remove(&key);
        self.recorded_placed.insert(key.clone());
        self.decided.insert(key.clone(), Some(node.clone()));
        if bound {
            self.scheduler.binding_succeeded(&info, &node);
        } else {
            self.in_flight.insert(key, (info, node));
        }
    }

    /// The next attempt, at the moment the recording made its `attempt`-th
    /// of `key`: the queue's next, or that pod if it waited since the
    /// snapshot.
    fn next_attempt(&mut self, key: &PodKey, attempt: u32, now: Duration) -> Option<Attempt> {
        if self.fresh.remove(key) {
            return self.scheduler.schedule_recorded(key, attempt, now);
        }
        self.scheduler.schedule_next(now)
    }

    /// A pod the recording placed, as the replay has it: on the replay's
    /// node, or unbound.
    fn rewritten(&self, event: ClusterEvent) -> ClusterEvent {
        let ClusterEvent::Pod(Change::Applied(pod)) = &event else { return event };
        let key = PodKey::of(pod);
        if !self.recorded_placed.contains(&key) {
            return event;
        }
        let replayed = self.decided.get(&key).cloned().flatten();
        if pod.spec.as_ref().and_then(|s| s.node_name.clone()) == replayed {
            return event;
        }
        let mut pod: Pod = (**pod).clone();
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = replayed;
        }
        ClusterEvent::applied(pod)
    }

    fn attempt(&mut self, now: Duration, recorded: Attempted) {
        self.attempts += 1;
        if recorded.node.is_some() {
            self.recorded_placed.insert(key_of(&recorded.pod));
        }
        let key = key_of(&recorded.pod);
        let job = self.job_of.remove(&key).and_then(|first| self.jobs.remove(&first));
        let replayed = if let Some(job) = job {
            // The tenant's verdict, on the cluster as it is when it came.
            let verdict = job.run();
            self.scheduler.tenant_verdict(verdict, now).and_then(|a| self.conclude(a, &recorded, now))
        } else if let Some(early) = self.early.remove(&key) {
            Some(early)
        } else {
            self.next_attempt(&key, recorded.attempt, now).and_then(|attempt| self.conclude(attempt, &recorded, now))
        };
        // After the decision, as the live loop hands it to its worker.
        let work = self.scheduler.take_shadow_work();
        self.experiments.run_inline(work);
        let alike = replayed.as_ref().is_some_and(|r| r.pod == recorded.pod && r.node == recorded.node);
        if alike {
            self.agreed += 1;
        } else {
            self.divergences.push(Divergence { recorded, replayed });
        }
    }

    /// Takes the replay's decision: a placement like the recording's waits
    /// for its binding result; any other is bound at once.
    fn conclude(&mut self, attempt: Attempt, recorded: &Attempted, now: Duration) -> Option<Attempted> {
        match attempt {
            // Handed out where the recording decided at once: decided here.
            Attempt::Evaluate(job) => {
                let verdict = job.run();
                let attempt = self.scheduler.tenant_verdict(verdict, now)?;
                self.conclude(attempt, recorded, now)
            }
            Attempt::Placed { pod, node, record, .. } => {
                self.tenants.decided(&pod);
                self.decided.insert(pod.key.clone(), Some(node.clone()));
                let attempted = Attempted {
                    pod: pod.key.to_string(),
                    node: Some(node.clone()),
                    message: None,
                    canary: record.canary,
                    attempt: record.attempt,
                };
                if attempted.pod == recorded.pod && attempted.node == recorded.node {
                    self.in_flight.insert(pod.key.clone(), (pod, node));
                } else {
                    self.scheduler.binding_succeeded(&pod, &node);
                }
                Some(attempted)
            }
            // A claim deallocated for the pod comes back as the
            // recording's claim update, as it came to the live core.
            Attempt::Unschedulable { pod, record, .. } => {
                self.tenants.decided(&pod);
                self.decided.insert(pod.key.clone(), None);
                let message = record.message.clone();
                self.last_message.insert(pod.key.clone(), message.clone().unwrap_or_default());
                let (canary, attempt) = (record.canary, record.attempt);
                Some(Attempted { pod: pod.key.to_string(), node: None, message, canary, attempt })
            }
        }
    }

    fn binding(&mut self, now: Duration, binding: BindingRecord) {
        let key = key_of(&binding.pod);
        let Some((pod, node)) = self.in_flight.remove(&key) else { return };
        match binding.outcome.as_str() {
            "bound" => self.scheduler.binding_succeeded(&pod, &node),
            outcome => {
                self.decided.insert(key, None);
                self.scheduler.binding_failed(&pod, outcome != "dropped", now);
            }
        }
    }

    fn report(self, profiles: Vec<String>) -> ReplayReport {
        // Where the pods it decided are at the end (deleted ones are not).
        let state = self.scheduler.state();
        let mut placed: Vec<(String, String)> =
            self.decided.keys().filter_map(|k| Some((k.to_string(), state.placement(k)?.0.to_string()))).collect();
        placed.sort();
        // A pod the recording never attempted (a gang's member held below
        // its quorum, say) is pending too, though the replay never popped it.
        let mut pending: Vec<Unplaced> = self
            .scheduler
            .queued()
            .map(|pod| {
                let message = self.last_message.get(&pod.key).cloned();
                let reason = match (pod.gated, &message) {
                    (true, _) => "SchedulingGated",
                    (false, Some(_)) => "Unschedulable",
                    (false, None) => "NotAttempted",
                };
                let message = message.unwrap_or_else(|| "the recording has no attempt of it".into());
                Unplaced { pod: pod.key.to_string(), reason: reason.into(), message }
            })
            .collect();
        pending.sort_by(|a, b| a.pod.cmp(&b.pod));
        ReplayReport {
            profiles,
            attempts: self.attempts,
            agreed: self.agreed,
            divergences: self.divergences,
            placed,
            pending,
            utilisation: utilisation(self.scheduler.state()),
            experiments: self.experiments.candidates().cloned().collect(),
            notes: self.tenants.notes.into_iter().collect(),
        }
    }
}

/// The tenants' policies a replay is given (`--tenant-policy`,
/// `--tenant-candidate`), applied as the recording's tenants had them.
struct Tenants {
    supplied: HashMap<(String, String), Arc<LoadedPolicy>>,
    candidates: HashMap<String, Vec<ShadowCandidate>>,
    /// Policies the recording's tenants had that were not supplied.
    unsupplied: BTreeSet<(String, String)>,
    notes: BTreeSet<String>,
}

impl Tenants {
    fn of(options: &SimOptions) -> Tenants {
        let supplied = options.tenants.iter().map(|(ns, name, p)| ((ns.clone(), name.clone()), p.clone())).collect();
        let mut candidates: HashMap<String, Vec<ShadowCandidate>> = HashMap::new();
        for (ns, c) in &options.tenant_candidates {
            candidates.entry(ns.clone()).or_default().push(c.clone());
        }
        Tenants { supplied, candidates, unsupplied: BTreeSet::new(), notes: BTreeSet::new() }
    }

    /// `pod` was decided: if it opted in to a policy that was not
    /// supplied, the report says so.
    fn decided(&mut self, pod: &PodInfo) {
        let Some(name) = pod.annotation(POLICY_ANNOTATION) else { return };
        let key = (pod.key.namespace.clone(), name.trim().to_string());
        if self.unsupplied.contains(&key) {
            let (tenant, name) = key;
            self.notes.insert(format!(
                "tenant policy {tenant}/{name} was not supplied (--tenant-policy {tenant}/{name}=PATH): \
                 its pods were decided by the built-in scoring"
            ));
        }
    }

    /// Everything supplied, for a recording that starts without its
    /// tenants' policies (they came before its first file).
    fn apply_all(&self, scheduler: &mut Scheduler) {
        let mut namespaces: BTreeSet<&String> = self.supplied.keys().map(|(ns, _)| ns).collect();
        namespaces.extend(self.candidates.keys());
        for ns in namespaces {
            let policies = self.supplied.iter().filter(|((n, _), _)| n == ns);
            let policies = policies.map(|((_, name), p)| (name.clone(), WeightedPolicy::new(p.clone(), 1))).collect();
            scheduler.set_tenant_policies(ns, policies, self.candidates.get(ns).cloned().unwrap_or_default());
        }
    }

    /// The recording's tenant had `active` (`NAME sha256:HEX`) from here on.
    fn apply(&mut self, scheduler: &mut Scheduler, tenant: &str, active: &[String]) {
        let mut policies = Vec::new();
        for entry in active {
            let (name, sha) = entry.split_once(" sha256:").unwrap_or((entry, ""));
            match self.supplied.get(&(tenant.to_string(), name.to_string())) {
                Some(p) => {
                    if !sha.is_empty() && p.provenance.sha256 != sha {
                        self.notes.insert(format!(
                            "tenant policy {tenant}/{name}: the recording ran sha256:{}, --tenant-policy gave sha256:{}",
                            &sha[..12.min(sha.len())],
                            &p.provenance.sha256[..12.min(p.provenance.sha256.len())]
                        ));
                    }
                    policies.push((name.to_string(), WeightedPolicy::new(p.clone(), 1)));
                }
                None => {
                    self.unsupplied.insert((tenant.to_string(), name.to_string()));
                }
            }
        }
        scheduler.set_tenant_policies(tenant, policies, self.candidates.get(tenant).cloned().unwrap_or_default());
    }
}

fn key_of(pod: &str) -> PodKey {
    let (namespace, name) = pod.split_once('/').unwrap_or(("default", pod));
    PodKey { namespace: namespace.to_string(), name: name.to_string() }
}
