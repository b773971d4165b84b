"""wasmsched's helpers for policies in Python: the Rust SDK's, with the same
names and formulas (wasmsched's sdk/README.md, "The helpers, exactly").
`wasmsched new --lang python` ships this file in src/; componentize-py builds
it into the component beside app.py.

Settings: read each key with `str`, `number` or `flag`, then call
`check_all_read()`: a key the policy never asked for (most often a
misspelled one) is refused, naming the nearest key it did ask for. Every
error is an `Err` with the reason, which rejects the policy when it loads.
"""

import json
import math

from componentize_py_types import Err
from wit_world.imports import types

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
            near = nearest(key, known)
            named.append(f"`{key}` (did you mean `{near}`?)" if near else f"`{key}`")
        plural = "s" if len(unread) > 1 else ""
        reads = ", ".join(known) if known else "no settings"
        raise Err(f"unknown setting{plural} {', '.join(named)}; this policy reads {reads}")


def nearest(typed: str, known: list[str]) -> "str | None":
    """The name in `known` closest to `typed` by edit distance, if close
    enough to be a misspelling: at most a third of its letters differ."""
    limit = max(-(-len(typed) // 3), 1)
    best = None
    for name in known:
        distance = edit_distance(typed.lower(), name.lower())
        if distance <= limit and (best is None or distance < best[0]):
            best = (distance, name)
    return best[1] if best else None


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a):
        diagonal, row[0] = row[0], i + 1
        for j, cb in enumerate(b):
            above = row[j + 1]
            row[j + 1] = min(above + 1, row[j] + 1, diagonal + (ca != cb))
            diagonal = above
    return row[len(b)]


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


class Nodes:
    """The node table: each node as the scheduler sent it, kept by
    `sync_nodes` (call `sync` from it). The scheduler sends each node once,
    then only its changes; calls name their candidates by id. Keep it at
    module level: componentize-py may make a new `Policy` object for every
    call, the module lives as long as the instance."""

    def __init__(self):
        self._by_id: dict = {}

    def sync(self, reset: bool, changes) -> None:
        if reset:
            self._by_id.clear()
        for change in changes:
            if isinstance(change, types.NodeChange_Upsert):
                self._by_id[change.value.id] = NodeView(change.value)
            else:
                self._by_id.pop(change.value, None)

    def views(self, candidates) -> "list[NodeView]":
        """The call's candidates, in order, each with what its pods request
        (valid for this call: the next one fills them anew). The host sends
        every node before naming it, so a miss is a bug worth failing the
        call for."""
        try:
            views = [self._by_id[node_id] for node_id in candidates.nodes]
        except KeyError as e:
            raise Err(f"node id {e.args[0]} was never sent by the host")
        columns = zip(
            views, candidates.requested_milli_cpu, candidates.requested_memory,
            candidates.nonzero_requested_milli_cpu, candidates.nonzero_requested_memory, candidates.pod_count,
        )
        for view, cpu, memory, nonzero_cpu, nonzero_memory, pods in columns:
            view.requested_milli_cpu, view.requested_memory = cpu, memory
            view.nonzero_requested_milli_cpu, view.nonzero_requested_memory, view.pod_count = (
                nonzero_cpu, nonzero_memory, pods
            )
        return views


class NodeView:
    """One candidate, as the Rust SDK's `NodeView`: `name`, `labels` and
    `annotations` (dicts), `taints`, `allocatable`, `unschedulable`, and
    what the pods already on it request (`requested_milli_cpu`,
    `requested_memory`, `nonzero_requested_milli_cpu`,
    `nonzero_requested_memory`, `pod_count`)."""

    __slots__ = (
        "name", "labels", "annotations", "taints", "allocatable", "unschedulable", "requested_milli_cpu",
        "requested_memory", "nonzero_requested_milli_cpu", "nonzero_requested_memory", "pod_count",
    )

    def __init__(self, info):
        self.name, self.labels, self.annotations = info.name, dict(info.labels), dict(info.annotations)
        self.taints, self.allocatable, self.unschedulable = info.taints, info.allocatable, info.unschedulable
        self.requested_milli_cpu = self.requested_memory = self.pod_count = 0
        self.nonzero_requested_milli_cpu = self.nonzero_requested_memory = 0

    def label(self, key: str) -> "str | None":
        return self.labels.get(key)

    def free_milli_cpu(self) -> int:
        return free_milli_cpu(self.allocatable.milli_cpu, self.requested_milli_cpu)

    def free_memory(self) -> int:
        return free_memory(self.allocatable.memory, self.requested_memory)

    def least_allocated_score(self, pod) -> int:
        return least_allocated_score(
            self.allocatable, self.nonzero_requested_milli_cpu, self.nonzero_requested_memory, pod
        )


def filter_each(nodes: Nodes, pod, candidates, reject) -> types.FilterVerdicts:
    """The contract's `filter` from a function of one node: `reject(pod,
    node)` returns `None` to pass the node, or the reason to reject it
    (phrased as kube-scheduler's: they are counted in the pod's
    FailedScheduling message). Each distinct reason is sent once."""
    reasons: list[str] = []
    numbers: dict[str, int] = {}
    verdicts = []
    for node in nodes.views(candidates):
        why = reject(pod, node)
        if why is None:
            verdicts.append(0)
            continue
        if why not in numbers:
            reasons.append(why)
            numbers[why] = len(reasons)
        verdicts.append(numbers[why])
    return types.FilterVerdicts(reasons=reasons, verdicts=verdicts)


def score_each(nodes: Nodes, pod, candidates, score) -> list[float]:
    """The contract's `score` from a function of one node: `score(pod,
    node)` returns the node's raw score (any finite number; the scheduler
    normalises them, sdk/README.md "How raw scores become points")."""
    return [float(score(pod, node)) for node in nodes.views(candidates)]
