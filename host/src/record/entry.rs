//! One line of a recording.

use serde::{Deserialize, Serialize};

use crate::scheduler::{DeniedWrites, EventRecord, NodeLayout};

/// The format's name, in every file's header.
pub const FORMAT: &str = "wasmsched-journal/1";

/// A file's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub format: String,
    /// Counts from 1 over the recording's life.
    pub segment: u64,
    /// When the recording (not this file) started, RFC 3339.
    pub started: String,
    /// The profiles' scheduler names, the first one's first.
    pub profiles: Vec<String>,
    pub seed: u64,
    /// This file opens with this many lines that apply the objects alive
    /// at its start (0 for the first file, which opens with the run's
    /// first lists): a replay that starts here starts from that state,
    /// with the pods then waiting taken afresh; one that comes from the
    /// file before skips them.
    pub snapshot_lines: usize,
}

/// What the core decided for one pod in one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempted {
    /// `namespace/name`.
    pub pod: String,
    /// The node it was placed on, or none (its message says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The canary that decided instead of the profile's policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<String>,
    /// Which attempt of the pod it was, 1 the first (0: not recorded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempt: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A binding cycle's end, as the binder reported it to the core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingRecord {
    pub pod: String,
    pub node: String,
    /// `bound`; `dropped` (the pod is forgotten); `error` or `abandoned`
    /// (tried again after its backoff).
    pub outcome: String,
}

/// One input to the core, or one decision, in the order the core saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Entry {
    Event(EventRecord),
    Attempt(Attempted),
    Binding(BindingRecord),
    /// A profile's deciding policies changed (names, as `/policies` shows).
    Policies {
        profile: String,
        active: Vec<String>,
    },
    /// A tenant's policies changed: the names its pods opt in with, each
    /// with the sha256 of what runs (`NAME sha256:HEX`).
    TenantPolicies {
        tenant: String,
        active: Vec<String>,
    },
    /// In a snapshot: a pod the core had placed on `node` whose copy did
    /// not carry the node yet (its binding `bound`, or still in flight).
    Assumed {
        pod: String,
        node: String,
        bound: bool,
    },
    /// A tenant pod's attempt was handed to its tenant's policy (`pod`:
    /// `namespace/name`); its decision is the `Attempt` the verdict makes.
    Evaluate {
        pod: String,
        /// Which attempt of the pod it is (0: not recorded).
        #[serde(default, skip_serializing_if = "is_zero")]
        attempt: u32,
    },
    /// The permission preflight's verdict: the writes this identity may
    /// not make (pods that need them wait).
    Permissions(DeniedWrites),
    /// A snapshot's first line: the ids the core's nodes had, so that a
    /// replay from it visits them in the live order.
    Layout(NodeLayout),
}

/// A line after the header: the core's clock (nanoseconds from the
/// scheduler's start) and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub t: u64,
    #[serde(flatten)]
    pub entry: Entry,
}
