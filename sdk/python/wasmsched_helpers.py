"""wasmsched's helpers for policies in Python: the Rust SDK's, with the same
names and formulas (wasmsched's sdk/README.md, "The helpers, exactly").
`wasmsched new --lang python` ships this file in src/; componentize-py builds
it into the component beside app.py.

The contract (wit/policy.wit, wasmsched:policy 0.4; 0.3 is the same but
for groups) sends each call's
per-node numbers as packed bytes, which cross into Python as one `bytes`
object a column: `columns(candidates)` reads them as arrays of numbers,
`pack_scores` and `pack_verdicts` pack an answer. `filter_each`,
`score_each` and `explain_each` do all of that for a function of one node.
A gang's placements (0.4's `place` phase) arrive as the contract's
records: `Nodes.placements` makes `PlacementView`s of them, and
`pack_scores` packs their scores.

Settings: read each key with `str`, `number` or `flag`, then call
`check_all_read()`: a key the policy never asked for (most often a
misspelled one) is refused, naming the nearest key it did ask for. Every
error is an `Err` with the reason, which rejects the policy when it loads.

The reference: wasmsched's sdk/reference/python.md lists every helper with
its signature, beside the Rust and JavaScript names.
"""

import json
import math
import re
from array import array

from componentize_py_types import Err
from wit_world.imports import host, types

# kube-scheduler's MaxNodeScore: scores of the built-in plugins are 0..100.
MAX_NODE_SCORE = 100


class Settings:
    """The policy's settings: the document the scheduler hands over as JSON
    (it converts the YAML file)."""

    def __init__(self, text: str):
        try:
            raw = json.loads(text.strip() or "{}")
        except ValueError as e:
            raise Err(f"the settings are not JSON: {e}")
        if not isinstance(raw, dict):
            raise Err(f"the settings must be a mapping, got {text}")
        self._raw = raw
        self._asked: list[str] = []

    def _get(self, key: str):
        if key not in self._asked:
            self._asked.append(key)
        return self._raw.get(key)

    def str(self, key: str, default: "str | None" = None) -> "str | None":
        """A string setting; `default` when absent or null."""
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise Err(f"setting `{key}` must be a string, got {json.dumps(value)}")
        return value

    def number(self, key: str, default: "float | None" = None) -> "float | None":
        """A finite number (or a string that parses as one); `default` when
        absent or null."""
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise Err(f"setting `{key}` must be a number, got {json.dumps(value)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise Err(f"setting `{key}` must be a number, got {json.dumps(value)}")
        return float(value)

    def flag(self, key: str, default: "bool | None" = None) -> "bool | None":
        """A true/false setting; `default` when absent or null."""
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise Err(f"setting `{key}` must be true or false, got {json.dumps(value)}")
        return value

    def check_all_read(self) -> None:
        """Refuses the settings the policy never asked for, with the nearest
        name it did ask for. Call it last in `init`."""
        unread = sorted(k for k in self._raw if k not in self._asked)
        if not unread:
            return
        known = sorted(self._asked)
        named = []
        for key in unread:
            near = _nearest(key, known)
            named.append(f"`{key}` (did you mean `{near}`?)" if near else f"`{key}`")
        plural = "s" if len(unread) > 1 else ""
        reads = ", ".join(known) if known else "no settings"
        raise Err(f"unknown setting{plural} {', '.join(named)}; this policy reads {reads}")


def _nearest(typed: str, known: list[str]) -> "str | None":
    """The name in `known` closest to `typed` by edit distance, if close
    enough to be a misspelling: at most a third of its letters differ."""
    limit = max(-(-len(typed) // 3), 1)
    best = None
    for name in known:
        distance = _edit_distance(typed.lower(), name.lower())
        if distance <= limit and (best is None or distance < best[0]):
            best = (distance, name)
    return best[1] if best else None


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a):
        diagonal, row[0] = row[0], i + 1
        for j, cb in enumerate(b):
            above = row[j + 1]
            row[j + 1] = min(above + 1, row[j] + 1, diagonal + (ca != cb))
            diagonal = above
    return row[len(b)]


class Columns:
    """A call's candidates as numbers, read in place from the contract's
    packed bytes (`memoryview.cast`: no Python object until an element is
    read). Each column has one entry per candidate, in order: `nodes` (node
    ids), `requested_milli_cpu`, `requested_memory`,
    `requested_ephemeral_storage`, `nonzero_requested_milli_cpu`,
    `nonzero_requested_memory`, `pod_count`."""

    __slots__ = (
        "nodes", "requested_milli_cpu", "requested_memory", "requested_ephemeral_storage",
        "nonzero_requested_milli_cpu", "nonzero_requested_memory", "pod_count",
    )

    def __init__(self, candidates):
        try:
            self.nodes = memoryview(candidates.nodes).cast("I")
            self.requested_milli_cpu = memoryview(candidates.requested_milli_cpu).cast("Q")
            self.requested_memory = memoryview(candidates.requested_memory).cast("Q")
            self.requested_ephemeral_storage = memoryview(candidates.requested_ephemeral_storage).cast("Q")
            self.nonzero_requested_milli_cpu = memoryview(candidates.nonzero_requested_milli_cpu).cast("Q")
            self.nonzero_requested_memory = memoryview(candidates.nonzero_requested_memory).cast("Q")
            self.pod_count = memoryview(candidates.pod_count).cast("I")
        except TypeError as e:
            raise Err(f"the candidates' columns are not packed bytes: {e}")

    def __len__(self) -> int:
        return len(self.nodes)


def columns(candidates) -> Columns:
    """The call's candidates as columns of numbers (see `Columns`)."""
    return Columns(candidates)


def pack_scores(scores) -> bytes:
    """Raw scores, one a candidate in order, as the contract's `score`
    returns them (f64s, little-endian)."""
    return array("d", scores).tobytes()


def pack_verdicts(verdicts) -> bytes:
    """Filter verdicts, one a candidate in order (0 passes, k is the k-th
    reason), as the contract's `filter-verdicts` carries them (u32s,
    little-endian)."""
    return array("I", verdicts).tobytes()


def free_milli_cpu(allocatable_milli_cpu: int, requested_milli_cpu: int) -> int:
    """CPU left on a node: allocatable minus what its pods request (the
    candidates' `requested_milli_cpu` column), never below 0. The pod being
    scheduled is not subtracted."""
    return max(allocatable_milli_cpu - requested_milli_cpu, 0)


def free_memory(allocatable_memory: int, requested_memory: int) -> int:
    """Memory left on a node, in bytes: as `free_milli_cpu`."""
    return max(allocatable_memory - requested_memory, 0)


def least_allocated(requested: int, capacity: int) -> int:
    """One resource's LeastAllocated score, 0..100, in kube's integers:
    `(capacity - requested) * 100 // capacity`, 0 when it does not fit or
    the node has none."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def least_allocated_score(allocatable, nonzero_requested_milli_cpu: int, nonzero_requested_memory: int, pod) -> int:
    """kube-scheduler's NodeResourcesFit LeastAllocated score, 0..100, cpu
    and memory weighted equally, with the pod's own non-zero request
    included. `allocatable` is the node's (`types.Resources`); the requests
    are the candidates' `nonzero_requested_*` columns."""
    cpu = least_allocated(nonzero_requested_milli_cpu + pod.nonzero_milli_cpu, allocatable.milli_cpu)
    memory = least_allocated(nonzero_requested_memory + pod.nonzero_memory, allocatable.memory)
    return (cpu + memory) // 2


def tolerates(toleration, taint) -> bool:
    """kube's rule: the effects match (or the toleration names none), the
    keys match (an empty key matches every key), and `Exists` or equal
    values."""
    if toleration.effect is not None and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    return toleration.operator == types.TolerationOperator.EXISTS or toleration.value == taint.value


_INTEGER = re.compile(r"[+-]?[0-9]+")

# Rust's f64 grammar for finite decimals, and the characters its `trim`
# removes (Unicode White_Space), so that every language reads the same
# strings as the same numbers: `float` alone would also take "1_000" and
# non-ASCII digits.
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def parse_number(text: str) -> "float | None":
    """A decimal number as the Rust and JavaScript SDKs read one: leading
    and trailing white space ignored, `1e3`, `.5`, `+2` accepted; `None`
    for anything else (`inf`, `nan`, `0x10`, `1_000`, an empty string)."""
    t = text.strip(_WHITE_SPACE)
    if not _DECIMAL.fullmatch(t):
        return None
    value = float(t)
    return value if math.isfinite(value) else None


def requirement_matches(requirement, value: "str | None") -> bool:
    """One node-selector requirement against a label's value (None: the
    node lacks the label), as kube's NodeAffinity filter reads it: `GT` and
    `LT` compare integers and fail on anything else."""
    operator, values = requirement.operator, requirement.values
    ops = types.SelectorOperator
    if operator == ops.IN:
        return value is not None and value in values
    if operator == ops.NOT_IN:
        return value is None or value not in values
    if operator == ops.EXISTS:
        return value is not None
    if operator == ops.DOES_NOT_EXIST:
        return value is None
    if value is None or len(values) != 1:
        return False
    if not (_INTEGER.fullmatch(value) and _INTEGER.fullmatch(values[0])):
        return False
    v, bound = int(value), int(values[0])
    return v > bound if operator == ops.GT else v < bound


def term_matches(term, node) -> bool:
    """One required-affinity term: its requirements ANDed, fields naming
    `metadata.name` only; a term with neither matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(requirement_matches(r, node.label(r.key)) for r in term.match_expressions) and all(
        r.key == "metadata.name" and requirement_matches(r, node.name) for r in term.match_fields
    )


def info(message: str) -> None:
    """A log line to the scheduler's log, as the Rust SDK's `host::info`.
    The scheduler caps what a policy logs (docs/security.md)."""
    host.log(types.LogLevel.INFO, message, [])


def warn(message: str) -> None:
    """A warning to the scheduler's log, as the Rust SDK's `host::warn`."""
    host.log(types.LogLevel.WARN, message, [])


_U64 = (1 << 64) - 1


class SplitMix64:
    """kube-scheduler's tie-breaker generator (SplitMix64), the same numbers
    as the Rust SDK's for the same seed: `attempt.rng()` gives one seeded
    for the pod."""

    def __init__(self, seed: int):
        self._state = seed & _U64

    def next_u64(self) -> int:
        """The next number, in 0..2**64."""
        self._state = (self._state + 0x9E3779B97F4A7C15) & _U64
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _U64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _U64
        return z ^ (z >> 31)

    def next_f64(self) -> float:
        """Uniform in [0, 1), 53 bits of precision."""
        return (self.next_u64() >> 11) / float(1 << 53)


class Attempt:
    """The scheduling attempt a call belongs to: its seed, and node metrics
    fetched when first asked for, one host call per metric for every
    candidate."""

    def __init__(self, seed: int, candidates):
        cols = candidates if isinstance(candidates, Columns) else Columns(candidates)
        self._seed, self._candidates, self._metrics = seed, cols, {}

    def seed(self) -> int:
        """Derived by the scheduler from its `--seed` and the pod."""
        return self._seed

    def rng(self) -> SplitMix64:
        return SplitMix64(self._seed)

    def metric(self, name: str, node: "NodeView"):
        """The node's `types.MetricSample` (`value`, `age_ms`), or None when
        the scheduler has none usable for this node."""
        if name not in self._metrics:
            self._metrics[name] = host.node_metrics(name, self._candidates.nodes.tolist())
        return self._metrics[name][node.index()]

    def metric_fresh_or(self, name: str, node: "NodeView", max_age_ms: int, default: float) -> float:
        """The metric's value if it is at most `max_age_ms` old, else
        `default`."""
        sample = self.metric(name, node)
        if sample is not None and sample.age_ms <= max_age_ms and math.isfinite(sample.value):
            return sample.value
        return default


class PodView:
    """The pod being scheduled, as the Rust SDK's `Pod`: the contract's
    fields, with `labels`, `annotations` and `node_selector` as dicts, and
    `group`, its PodGroup (`name`, `min_count`, `members`, `placed`: the
    members already on nodes, each a `pod` name and a `node` id), or None."""

    def __init__(self, info):
        # A componentized policy built against contract 0.3 has no groups.
        self.group = getattr(info, "group", None)
        self.namespace, self.name, self.uid, self.priority = info.namespace, info.name, info.uid, info.priority
        self.labels, self.annotations = dict(info.labels), dict(info.annotations)
        self.requests, self.nonzero_milli_cpu, self.nonzero_memory = (
            info.requests, info.nonzero_milli_cpu, info.nonzero_memory
        )
        self.node_selector = dict(info.node_selector)
        self.required_node_affinity, self.tolerations = info.required_node_affinity, info.tolerations

    def label(self, key: str) -> "str | None":
        return self.labels.get(key)

    def annotation(self, key: str) -> "str | None":
        return self.annotations.get(key)

    def tolerates(self, taint) -> bool:
        """Whether one of the pod's tolerations tolerates `taint` (kube's
        rule)."""
        return any(tolerates(toleration, taint) for toleration in self.tolerations)

    def untolerated_taint(self, node: "NodeView"):
        """The node's first NoSchedule or NoExecute taint the pod does not
        tolerate, as TaintToleration reports it; None if none."""
        for taint in node.taints:
            if taint.effect != types.TaintEffect.PREFER_NO_SCHEDULE and not self.tolerates(taint):
                return taint
        return None

    def matches_node(self, node: "NodeView") -> bool:
        """nodeSelector and required node affinity, as kube's NodeAffinity
        filter evaluates them."""
        if any(node.label(key) != value for key, value in self.node_selector.items()):
            return False
        terms = self.required_node_affinity
        return not terms or any(term_matches(term, node) for term in terms)


class Nodes:
    """The node table: each node as the scheduler sent it, kept by
    `sync_nodes` (call `sync` from it). The scheduler sends each node once,
    then only its changes; calls name their candidates by id. Keep it at
    module level: componentize-py may make a new `Policy` object for every
    call, the module lives as long as the instance.

    `prepare`, a function of one `NodeView`, is the work that depends on
    the node alone (its labels, annotations, allocatable) and on the
    settings: it runs when a node arrives or changes, once per version of
    the node, and the per-node functions read its result as
    `node.prepared`, for every pod. What it raises is raised again where
    `node.prepared` is read, so a node it cannot prepare is judged as if
    the work ran per pod (`filter_each` rejects that node alone)."""

    def __init__(self, prepare=None):
        self._by_id: dict = {}
        self._prepare = prepare

    def sync(self, reset: bool, changes) -> None:
        if reset:
            self._by_id.clear()
        for change in changes:
            if isinstance(change, types.NodeChange_Upsert):
                view = NodeView(change.value)
                if self._prepare is not None:
                    view._prepare_with(self._prepare)
                self._by_id[change.value.id] = view
            else:
                self._by_id.pop(change.value, None)

    def get(self, node_id: int) -> "NodeView | None":
        """Any node of the table, by id, candidate or not: where a group's
        placed members are (`pod.group.placed`). Outside a call's
        candidates, its usage reads zeros."""
        return self._by_id.get(node_id)

    def placements(self, placements) -> "list[PlacementView]":
        """The contract's placements (`score_placement`'s) as views over
        the table. The host sends every node before naming it, so a miss
        is a bug worth failing the call for."""
        views = []
        for placement in placements:
            members = []
            for member in placement.members:
                node = self._by_id.get(member.node)
                if node is None:
                    raise Err(f"placement {placement.domain!r} names node id {member.node} which the host never sent")
                members.append(PlacedMember(member.pod, node))
            views.append(PlacementView(placement.domain, members, placement.unplaced))
        return views

    def views(self, candidates) -> "list[NodeView]":
        """The call's candidates (the contract's, or `Columns` of them), in
        order, each with what its pods request
        (valid for this call: the next one fills them anew). The host sends
        every node before naming it, so a miss is a bug worth failing the
        call for."""
        if not isinstance(candidates, Columns):
            candidates = Columns(candidates)
        try:
            views = [self._by_id[node_id] for node_id in candidates.nodes]
        except KeyError as e:
            raise Err(f"node id {e.args[0]} was never sent by the host")
        for position, view in enumerate(views):
            view.position, view._columns = position, candidates
        return views


class PlacedMember:
    """A member of a group on a node in a placement: `pod` (its name, in
    the group's namespace) and `node` (a `NodeView`)."""

    __slots__ = ("pod", "node")

    def __init__(self, pod: str, node: "NodeView"):
        self.pod, self.node = pod, node


class PlacementView:
    """One feasible placement of a gang, as the Rust SDK's
    `PlacementView`: `domain` (the value of the label the policy named in
    `placement_domains`; "" for the placement over every node), `members`
    (`PlacedMember`s, in the order the scheduler tried them) and
    `unplaced` (members tried that did not fit)."""

    def __init__(self, domain: str, members: "list[PlacedMember]", unplaced: int):
        self.domain, self.members, self.unplaced = domain, members, unplaced

    def nodes(self) -> "list[NodeView]":
        """Every node this placement uses, each once, in name order."""
        by_name = {member.node.name: member.node for member in self.members}
        return [by_name[name] for name in sorted(by_name)]

    def spread(self, key: str) -> "dict[str, int]":
        """How many members are on each value of node label `key` (nodes
        without it count under ""), in the label's order."""
        counts: dict = {}
        for member in self.members:
            value = member.node.label(key) or ""
            counts[value] = counts.get(value, 0) + 1
        return dict(sorted(counts.items()))


class NodeView:
    """One candidate, as the Rust SDK's `NodeView`: `id`, `name`, `labels`
    and `annotations` (dicts), `taints`, `allocatable`, `unschedulable`,
    and what the pods already on it request (`requested_milli_cpu`,
    `requested_memory`, `requested_ephemeral_storage`,
    `nonzero_requested_milli_cpu`, `nonzero_requested_memory`,
    `pod_count`)."""

    __slots__ = (
        "id", "name", "labels", "annotations", "taints", "allocatable", "unschedulable", "position", "_columns",
        "prepared", "_prepare_error",
    )

    def __init__(self, info):
        self.id, self.name, self.labels, self.annotations = info.id, info.name, dict(info.labels), dict(info.annotations)
        self.taints, self.allocatable, self.unschedulable = info.taints, info.allocatable, info.unschedulable
        self.position, self._columns = 0, _NO_CALL
        # What `Nodes(prepare=...)` made of this node when it arrived or
        # last changed, computed once per version of the node, not once
        # per pod. A plain attribute, read at the cost of any other.
        self.prepared = self._prepare_error = None

    def _prepare_with(self, prepare) -> None:
        try:
            self.prepared = prepare(self)
        except Exception as e:  # noqa: BLE001 - raised again where it is read
            # Without its traceback, whose frames would be kept alive.
            self._prepare_error = e.with_traceback(None)
            self.__class__ = _UnpreparedNodeView

    def label(self, key: str) -> "str | None":
        return self.labels.get(key)

    def annotation(self, key: str) -> "str | None":
        return self.annotations.get(key)

    def annotation_f64(self, key: str) -> "float | None":
        """An annotation as a number: None when absent; `Err` naming the
        node when it is not a finite number (`parse_number`'s grammar, the
        Rust SDK's)."""
        raw = self.annotations.get(key)
        if raw is None:
            return None
        value = parse_number(raw)
        if value is None:
            raise Err(f"node {self.name}: annotation {key}={json.dumps(raw)} is not a number")
        return value

    def allocatable_scalar(self, name: str) -> int:
        """The allocatable amount of an extended resource such as
        `nvidia.com/gpu` (0 when the node has none)."""
        return next((amount for n, amount in self.allocatable.scalar if n == name), 0)

    def index(self) -> int:
        """Its position among this call's candidates."""
        return self.position

    def usage(self) -> dict:
        """What the pods already on it request, as the Rust SDK's `Usage`."""
        return {
            "requested_milli_cpu": self.requested_milli_cpu, "requested_memory": self.requested_memory,
            "requested_ephemeral_storage": self.requested_ephemeral_storage,
            "nonzero_requested_milli_cpu": self.nonzero_requested_milli_cpu,
            "nonzero_requested_memory": self.nonzero_requested_memory, "pod_count": self.pod_count,
        }

    def free_milli_cpu(self) -> int:
        return free_milli_cpu(self.allocatable.milli_cpu, self.requested_milli_cpu)

    def free_memory(self) -> int:
        return free_memory(self.allocatable.memory, self.requested_memory)

    def least_allocated_score(self, pod) -> int:
        return least_allocated_score(
            self.allocatable, self.nonzero_requested_milli_cpu, self.nonzero_requested_memory, pod
        )


class _UnpreparedNodeView(NodeView):
    """A node whose `prepare` raised: reading `prepared` raises it again,
    so the node is judged as if the work ran per pod."""

    __slots__ = ()

    @property
    def prepared(self):
        # Without the old traceback, which would grow at every raise.
        raise self._prepare_error.with_traceback(None)


# What the pods on a candidate request, each read from the call's columns
# when asked for: a view serves every candidate of every call, and most
# policies read one or two of them.
NodeView.requested_milli_cpu = property(lambda view: view._columns.requested_milli_cpu[view.position])
NodeView.requested_memory = property(lambda view: view._columns.requested_memory[view.position])
NodeView.requested_ephemeral_storage = property(lambda view: view._columns.requested_ephemeral_storage[view.position])
NodeView.nonzero_requested_milli_cpu = property(lambda view: view._columns.nonzero_requested_milli_cpu[view.position])
NodeView.nonzero_requested_memory = property(lambda view: view._columns.nonzero_requested_memory[view.position])
NodeView.pod_count = property(lambda view: view._columns.pod_count[view.position])


class _NoCall:
    """A view's columns before its first call: zeros."""

    def __getattr__(self, name):
        return (0,)


_NO_CALL = _NoCall()


def _takes_attempt(function) -> bool:
    """Whether a per-node function takes the attempt as a third argument
    (`(pod, node)` functions written before it was passed still work).
    Read from the function's code each call: no cache, since a bound
    method is a new object per `Policy` instance (componentize-py may make
    one per call)."""
    func = getattr(function, "__func__", function)
    code = getattr(func, "__code__", None)
    if code is None:  # a callable object or a builtin: given the attempt
        return True
    positional = code.co_argcount - (0 if func is function else 1)
    return positional >= 3 or bool(code.co_flags & _CO_VARARGS)


# `inspect.CO_VARARGS`, without importing inspect into every component.
_CO_VARARGS = 0x04


def filter_each(nodes: Nodes, pod, candidates, reject) -> types.FilterVerdicts:
    """The contract's `filter` from a function of one node: `reject(pod,
    node, attempt)` (a PodView, a NodeView, an Attempt; the attempt may be
    left out) returns `None` to pass the node, or the reason to reject it
    (phrased as kube-scheduler's: they are counted in the pod's
    FailedScheduling message). Each distinct reason is sent once.

    An exception raised while judging one node (an `Err`, such as
    `annotation_f64`'s for a value that is not a number, or any other)
    rejects that node alone, with the reason `policy error: ...`; the other
    nodes are judged. An exception outside `reject` still fails the call
    (docs/architecture.md, "Fallback")."""
    reasons: list[str] = []
    numbers: dict[str, int] = {}
    cols = Columns(candidates)
    verdicts = array("I", bytes(4 * len(cols)))
    pod_view, attempt = PodView(pod), (Attempt(0, cols) if _takes_attempt(reject) else None)
    for i, node in enumerate(nodes.views(cols)):
        try:
            why = reject(pod_view, node) if attempt is None else reject(pod_view, node, attempt)
        except Exception as e:  # noqa: BLE001 - one node's error is that node's verdict
            why = f"policy error: {_error_text(e)}"
        if why is None:
            continue
        number = numbers.get(why)
        if number is None:
            reasons.append(why)
            number = numbers[why] = len(reasons)
        verdicts[i] = number
    return types.FilterVerdicts(reasons=reasons, verdicts=verdicts.tobytes())


def _error_text(e: Exception) -> str:
    """An exception as a reason: an `Err`'s own message, else its type and
    message."""
    if isinstance(e, Err):
        return str(e.value)
    return f"{type(e).__name__}: {e}"


class ScoreParts:
    """A node's raw score as named parts, as the Rust SDK's `ScoreParts`: a
    per-node score function may return one instead of a number; the score
    is the parts' sum, and `wasmsched simulate --explain` shows each part."""

    __slots__ = ("_parts", "_total")

    def __init__(self):
        self._parts: list = []
        self._total = 0.0

    def add(self, name: str, value: float) -> "ScoreParts":
        """One more part: a short name (at most 64 bytes; at most 16 parts a
        node) and its value."""
        value = float(value)
        self._parts.append((name, value))
        # Summed as added, in order: the sum the Rust SDK makes.
        self._total += value
        return self

    def total(self) -> float:
        """The raw score: the sum of the parts."""
        return self._total

    def parts(self) -> "list[tuple[str, float]]":
        """Each part's name and value, in the order added."""
        return list(self._parts)


def score_each(nodes: Nodes, pod, candidates, score, seed: int = 0) -> bytes:
    """The contract's `score` from a function of one node: `score(pod,
    node, attempt)` (the attempt may be left out) returns the node's raw
    score (any finite number; the scheduler normalises them, sdk/README.md
    "How raw scores become points"), or a ScoreParts whose sum it is. Pass
    the call's `seed` for `attempt.seed()` and `attempt.rng()`. Returns
    the scores packed as the contract carries them."""
    cols = Columns(candidates)
    scores = array("d", bytes(8 * len(cols)))
    pod_view, attempt = PodView(pod), (Attempt(seed, cols) if _takes_attempt(score) else None)
    for i, node in enumerate(nodes.views(cols)):
        raw = score(pod_view, node) if attempt is None else score(pod_view, node, attempt)
        scores[i] = raw.total() if isinstance(raw, ScoreParts) else float(raw)
    return scores.tobytes()


def explain_each(nodes: Nodes, pod, candidates, score, seed: int = 0) -> list:
    """The contract's `explain_score` from the same function as
    `score_each`: each node's parts where it returns a ScoreParts, none
    where it returns a number. The scheduler asks only when a person asks
    (`--explain`)."""
    from wit_world.exports.policy import ScorePart

    cols = Columns(candidates)
    pod_view, extra = PodView(pod), ((Attempt(seed, cols),) if _takes_attempt(score) else ())
    raws = (score(pod_view, node, *extra) for node in nodes.views(cols))
    return [
        [ScorePart(name=n, value=v) for n, v in raw.parts()] if isinstance(raw, ScoreParts) else [] for raw in raws
    ]
