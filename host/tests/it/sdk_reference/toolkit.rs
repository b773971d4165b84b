//! The one list the three SDKs are held to: each helper and builder an
//! author uses, its name in Rust, Python and JavaScript, and one line on
//! what it does. An empty name is a helper that language does not need;
//! the line then says why.

/// (Rust, Python, JavaScript, what it does).
pub type Row = (&'static str, &'static str, &'static str, &'static str);

#[rustfmt::skip]
pub const SETTINGS: &[Row] = &[
    ("Config::from_json", "Settings.__init__", "Settings.constructor", "The policy's settings, from the JSON the scheduler hands over (it converts the YAML file)."),
    ("Config::str", "Settings.str", "Settings.str", "A string setting; none when absent or null."),
    ("Config::f64", "Settings.number", "Settings.number", "A finite number (or a string that parses as one); none when absent or null."),
    ("Config::flag", "Settings.flag", "Settings.flag", "A true/false setting; none when absent or null."),
    ("Config::unread_error", "Settings.check_all_read", "Settings.checkAllRead", "Refuses a setting the policy never read, naming the nearest one it did (Rust calls it after `Policy::new`)."),
    ("Config::value", "", "", "The whole document, every key counted as read (Rust only: Python and JavaScript authors have the parsed JSON at hand)."),
    ("Config::parse", "", "", "The document as a serde type (Rust only: serde)."),
];

#[rustfmt::skip]
pub const HOST: &[Row] = &[
    ("host::info", "info", "info", "An info line in the scheduler's log (capped: docs/security.md)."),
    ("host::warn", "warn", "warn", "A warning line in the scheduler's log."),
    ("host::log", "", "", "A log line at any level with fields (Python and JavaScript call the contract's `log` import itself)."),
    ("host::config_json", "", "", "The settings' JSON text (Python and JavaScript call the contract's `config` import itself)."),
    ("host::node_metrics", "", "", "Metric samples for node ids (Python and JavaScript call the contract's import, or `Attempt.metric`)."),
];

#[rustfmt::skip]
pub const NODES: &[Row] = &[
    ("Node::label", "NodeView.label", "NodeView.label", "A node label's value, or none."),
    ("Node::annotation", "NodeView.annotation", "NodeView.annotation", "A node annotation's value, or none."),
    ("Node::annotation_f64", "NodeView.annotation_f64", "NodeView.annotationF64", "An annotation as a number: none when absent, an error naming the node when not a number."),
    ("", "parse_number", "parseNumber", "A decimal number as every SDK reads one, Rust's grammar: none for `inf`, `0x10`, `1_000` or an empty string (Rust: `str::parse::<f64>`, finite)."),
    ("Node::allocatable_scalar", "NodeView.allocatable_scalar", "NodeView.allocatableScalar", "The allocatable amount of an extended resource such as `nvidia.com/gpu` (0 when none)."),
    ("NodeView::index", "NodeView.index", "NodeView.index", "The node's position among this call's candidates."),
    ("NodeView::usage", "NodeView.usage", "NodeView.usage", "What the pods already on the node request (cpu, memory, storage, their non-zero forms, pod count)."),
    ("NodeView::free_milli_cpu", "NodeView.free_milli_cpu", "NodeView.freeMilliCpu", "Allocatable cpu less what the node's pods request, never below 0."),
    ("NodeView::free_memory", "NodeView.free_memory", "NodeView.freeMemory", "Allocatable memory less what the node's pods request, never below 0."),
    ("NodeView::least_allocated_score", "NodeView.least_allocated_score", "NodeView.leastAllocatedScore", "kube-scheduler's LeastAllocated score, 0..100, with the pod's own request."),
    ("NodeView::node", "", "", "The node's facts (Rust only: in Python and JavaScript the view is the node)."),
    ("least_allocated_score", "least_allocated_score", "leastAllocatedScore", "LeastAllocated from the numbers: allocatable, the node's non-zero requests and the pod."),
    ("", "least_allocated", "leastAllocated", "One resource's LeastAllocated score in kube's integers (Rust: in `least_allocated_score`)."),
    ("", "free_milli_cpu", "freeMilliCpu", "Free cpu from two numbers (Rust: `NodeView::free_milli_cpu`)."),
    ("", "free_memory", "freeMemory", "Free memory from two numbers (Rust: `NodeView::free_memory`)."),
];

#[rustfmt::skip]
pub const PODS: &[Row] = &[
    ("Pod::label", "PodView.label", "PodView.label", "A pod label's value, or none."),
    ("Pod::annotation", "PodView.annotation", "PodView.annotation", "A pod annotation's value, or none."),
    ("Pod::tolerates", "PodView.tolerates", "PodView.tolerates", "Whether one of the pod's tolerations tolerates a taint (kube's rule)."),
    ("Pod::untolerated_taint", "PodView.untolerated_taint", "PodView.untoleratedTaint", "The node's first NoSchedule or NoExecute taint the pod does not tolerate, as TaintToleration reports it."),
    ("Pod::matches_node", "PodView.matches_node", "PodView.matchesNode", "nodeSelector and required node affinity, as kube's NodeAffinity filter evaluates them."),
    ("", "tolerates", "tolerates", "Whether one toleration tolerates one taint (Rust: `Pod::tolerates`)."),
    ("", "requirement_matches", "requirementMatches", "One node-selector requirement against a label's value (Rust: inside `Pod::matches_node`)."),
    ("", "term_matches", "termMatches", "One required-affinity term against a node (Rust: inside `Pod::matches_node`)."),
];

#[rustfmt::skip]
pub const ATTEMPTS: &[Row] = &[
    ("Attempt::seed", "Attempt.seed", "Attempt.seed", "The attempt's seed, derived by the scheduler from its `--seed` and the pod."),
    ("Attempt::rng", "Attempt.rng", "Attempt.rng", "A SplitMix64 seeded for this pod."),
    ("Attempt::metric", "Attempt.metric", "Attempt.metric", "A node metric's value and age, or none; one host call per metric for every candidate."),
    ("Attempt::metric_fresh_or", "Attempt.metric_fresh_or", "Attempt.metricFreshOr", "The metric's value if fresh enough, else the default given."),
    ("Attempt::node", "Nodes.get", "Nodes.get", "Any node the policy's table holds, by id, candidate or not: where a group's placed members are."),
    ("SplitMix64::new", "SplitMix64.__init__", "SplitMix64.constructor", "The scheduler's tie-breaking generator from a seed."),
    ("SplitMix64::next_u64", "SplitMix64.next_u64", "SplitMix64.nextU64", "The next 64-bit number."),
    ("SplitMix64::next_f64", "SplitMix64.next_f64", "SplitMix64.nextF64", "Uniform in [0, 1), 53 bits of precision."),
];

#[rustfmt::skip]
pub const SCORE_PARTS: &[Row] = &[
    ("ScoreParts::new", "ScoreParts.__init__", "ScoreParts.constructor", "An empty breakdown of a node's raw score; return it from the per-node score (Rust: `Policy::score_parts`) and the score is its sum."),
    ("ScoreParts::add", "ScoreParts.add", "ScoreParts.add", "One more named part (at most 16 a node, names of at most 64 bytes), shown by `--explain`."),
    ("ScoreParts::total", "ScoreParts.total", "ScoreParts.total", "The raw score: the sum of the parts."),
    ("ScoreParts::parts", "ScoreParts.parts", "ScoreParts.parts", "Each part's name and value, in the order added."),
];

/// Rust's `export_policy!` keeps the node table and builds the views; in
/// Python and JavaScript the policy's module does it with these.
#[rustfmt::skip]
pub const PLUMBING: &[Row] = &[
    ("", "Nodes.__init__", "Nodes.constructor", "The node table (Rust: kept by `export_policy!`). `prepare`, a function of one node, is the work done once per version of a node instead of once per pod: each view's `prepared` holds its result, and reading it raises what `prepare` raised for that node (Rust: not needed, per-pod work costs it nanoseconds)."),
    ("", "Nodes.sync", "Nodes.sync", "Applies `sync-nodes`: every node, then only changes."),
    ("", "Nodes.views", "Nodes.views", "The call's candidates as NodeViews, each with what its pods request."),
    ("", "Nodes.placements", "Nodes.placements", "`score-placement`'s placements as PlacementViews over the table; a node the host never sent fails the call (Rust: the SDK makes them for `Policy::score_placements`)."),
    ("", "NodeView.__init__", "NodeView.constructor", "A node's view (Rust: made by the SDK)."),
    ("", "PodView.__init__", "PodView.constructor", "The pod's view (Rust: made by the SDK)."),
    ("", "Attempt.__init__", "Attempt.constructor", "An attempt from a seed and the candidates (Rust: made by the SDK)."),
    ("", "filter_each", "filterEach", "The contract's `filter` from a function of one node; what it raises for one node refuses that node alone, as `policy error: ...` (Rust: `Policy::filter`)."),
    ("", "score_each", "scoreEach", "The contract's `score` from a function of one node, a number or ScoreParts (Rust: `Policy::score`)."),
    ("", "explain_each", "explainEach", "The contract's `explain-score` from the same function: each node's parts, none for a number (Rust: `export_policy!` from `Policy::score_parts`)."),
    ("", "Columns.__init__", "Columns.constructor", "A call's candidates as columns of numbers, read in place from contract 0.3's packed bytes (Rust: the SDK reads the columns)."),
    ("", "columns", "columns", "The call's candidates as `Columns`."),
    ("", "pack_scores", "packScores", "Raw scores as the contract's `score` and `score-placement` return them: f64s, packed little-endian (Rust: the SDK packs them)."),
    ("", "pack_verdicts", "packVerdicts", "Filter verdicts as contract 0.3 carries them: u32s, packed little-endian (Rust: the SDK packs them)."),
];

#[rustfmt::skip]
pub const NODE_BUILDER: &[Row] = &[
    ("NodeBuilder::new", "NodeBuilder.__init__", "NodeBuilder.constructor", "A fixture node: 4 cpu, 16Gi memory, 100Gi storage, 110 pods, nothing used."),
    ("NodeBuilder::cpu", "NodeBuilder.cpu", "NodeBuilder.cpu", "Allocatable cpu, a quantity (`\"4\"`, `\"3500m\"`)."),
    ("NodeBuilder::memory", "NodeBuilder.memory", "NodeBuilder.memory", "Allocatable memory, a quantity (`\"16Gi\"`)."),
    ("NodeBuilder::pods", "NodeBuilder.pods", "NodeBuilder.pods", "Allocatable pods."),
    ("NodeBuilder::scalar", "NodeBuilder.scalar", "NodeBuilder.scalar", "An allocatable extended resource."),
    ("NodeBuilder::label", "NodeBuilder.label", "NodeBuilder.label", "A label (replacing one of the same key)."),
    ("NodeBuilder::annotation", "NodeBuilder.annotation", "NodeBuilder.annotation", "An annotation."),
    ("NodeBuilder::taint", "NodeBuilder.taint", "NodeBuilder.taint", "A taint with its effect."),
    ("NodeBuilder::unschedulable", "NodeBuilder.unschedulable", "NodeBuilder.unschedulable", "Marks the node unschedulable."),
    ("NodeBuilder::requested", "NodeBuilder.requested", "NodeBuilder.requested", "What the pods already on it request: cpu and memory quantities."),
    ("NodeBuilder::pod_count", "NodeBuilder.pod_count", "NodeBuilder.podCount", "How many pods are already on it."),
    ("NodeBuilder::info", "NodeBuilder.info", "NodeBuilder.info", "The node's facts under an id, as the contract's node-info."),
    ("NodeBuilder::build", "NodeBuilder.build", "NodeBuilder.build", "The node's facts under an id, and what is placed on it."),
];

#[rustfmt::skip]
pub const POD_BUILDER: &[Row] = &[
    ("PodBuilder::new", "PodBuilder.__init__", "PodBuilder.constructor", "A fixture pod in `default`, requesting nothing (scored as 100m / 200 MB, as kube does)."),
    ("PodBuilder::namespace", "PodBuilder.namespace", "PodBuilder.namespace", "Its namespace."),
    ("PodBuilder::cpu", "PodBuilder.cpu", "PodBuilder.cpu", "Its cpu request, a quantity."),
    ("PodBuilder::memory", "PodBuilder.memory", "PodBuilder.memory", "Its memory request, a quantity."),
    ("PodBuilder::label", "PodBuilder.label", "PodBuilder.label", "A label."),
    ("PodBuilder::annotation", "PodBuilder.annotation", "PodBuilder.annotation", "An annotation."),
    ("PodBuilder::priority", "PodBuilder.priority", "PodBuilder.priority", "Its priority."),
    ("PodBuilder::node_selector", "PodBuilder.node_selector", "PodBuilder.nodeSelector", "A nodeSelector pair."),
    ("PodBuilder::required_affinity_term", "PodBuilder.required_affinity_term", "PodBuilder.requiredAffinityTerm", "A required node-affinity term (terms are ORed)."),
    ("PodBuilder::toleration", "PodBuilder.toleration", "PodBuilder.toleration", "A toleration: key, operator, value, effect (none for every effect)."),
    ("PodBuilder::info", "PodBuilder.info", "PodBuilder.info", "The pod as the contract's pod-info."),
    ("PodBuilder::group", "PodBuilder.group", "PodBuilder.group", "A member of a PodGroup: its name, quorum and members."),
    ("PodBuilder::member_placed", "PodBuilder.member_placed", "PodBuilder.memberPlaced", "Another member of its group already on a fixture node."),
];

#[rustfmt::skip]
pub const HARNESS: &[Row] = &[
    ("Harness::new", "Harness.__init__", "Harness.constructor", "A harness for the policy with its settings; the policy's own error when it refuses them."),
    ("Harness::with_config", "Harness.__init__", "Harness.constructor", "The same, with settings given (Python and JavaScript: the constructor's second argument)."),
    ("Harness::add_node", "Harness.add_node", "Harness.addNode", "Adds a fixture node; candidates come in the order added."),
    ("Harness::set_metric", "Harness.set_metric", "Harness.setMetric", "A node metric's value and age, for `Attempt::metric`."),
    ("Harness::clear_metric", "Harness.clear_metric", "Harness.clearMetric", "Removes a node metric, as if its source went away."),
    ("Harness::logs", "Harness.logs", "Harness.logs", "The lines the policy logged, as `Info: message k=v`."),
    ("Harness::filter", "Harness.filter", "Harness.filter", "Each node's reason for rejecting the pod, or none, in the order added."),
    ("Harness::try_score", "Harness.try_score", "Harness.tryScore", "Each node's raw score for a seed, or the policy's error."),
    ("Harness::score", "Harness.score", "Harness.score", "Each node's raw score with seed 0; fails on the policy's error."),
    ("Harness::explain", "Harness.explain", "Harness.explain", "Each node's score parts with seed 0 (none where the policy gives none), as `--explain` shows them."),
    ("Harness::best", "Harness.best", "Harness.best", "The node this policy alone would pick: the best raw score its filter passes, the first on ties."),
    ("Harness::placement_domains", "Harness.placement_domains", "Harness.placementDomains", "The domains the policy asks a gang member's group to be placed in."),
    ("Harness::try_score_placements", "Harness.try_score_placements", "Harness.tryScorePlacements", "The raw scores of placements given as domains and members on fixture nodes, or the policy's error."),
    ("Harness::score_placements", "Harness.score_placements", "Harness.scorePlacements", "The same; fails on the policy's error."),
];

#[rustfmt::skip]
pub const GANGS: &[Row] = &[
    ("", "PlacementView.__init__", "PlacementView.constructor", "A placement's view: its domain, its members each on a node's view, and how many did not fit (Rust: made by the SDK)."),
    ("", "PlacedMember.__init__", "", "A member of a placement on a node (JavaScript: a plain `{ pod, node }`; Rust: made by the SDK)."),
    ("PlacementView::nodes", "PlacementView.nodes", "PlacementView.nodes", "Each node a placement uses, once, in name order."),
    ("PlacementView::spread", "PlacementView.spread", "PlacementView.spread", "How many members a placement puts on each value of a node label."),
];

/// Each group: its heading and where the reference says it lives.
pub const GROUPS: &[(&str, &[Row])] = &[
    ("Settings", SETTINGS),
    ("Logging", HOST),
    ("Nodes and resources", NODES),
    ("The pod", PODS),
    ("The attempt", ATTEMPTS),
    ("What a score is made of", SCORE_PARTS),
    ("A gang's placements", GANGS),
    ("The node table (Python and JavaScript)", PLUMBING),
    ("Test builders: nodes", NODE_BUILDER),
    ("Test builders: pods", POD_BUILDER),
    ("Test harness", HARNESS),
];
