"""team-fit: a platform team's placement rules, read from node labels and
annotations, in Python. The twin of policies/team-fit (Rust) and
policies/js/team-fit (JavaScript): the three decide alike (tests/it's
team_fit module holds them to it).

- Filter: refuses nodes under maintenance (annotation
  `example.com/maintenance: "true"`), nodes labelled for another team
  (label `teamLabel`, compared with the pod's), and nodes whose rack load
  annotation is not a number.
- Score, in parts: the node's free memory after the pod, in percent
  (integer arithmetic); `gpuBonus` for a pod that asks for
  `nvidia.com/gpu` on a node that has some; minus a quarter of the rack's
  load (annotation `example.com/rack-load`, 0-100).

What depends on the node alone (its maintenance flag, team, rack load,
GPUs and memory) is read once per version of the node, by `prepare`, not
once per pod: the per-node functions read `node.prepared`.

Build: componentize-py against wit/0.3.0 with this folder and the SDK's
(sdk/python) on the path; see docs/development.md.
"""

import wasmsched_helpers as h
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types

MAINTENANCE = "example.com/maintenance"
RACK_LOAD = "example.com/rack-load"
GPU = "nvidia.com/gpu"
UNREADABLE_LOAD = f"node(s) had a {RACK_LOAD} annotation that is not a number"

# Module state lives as long as the instance; componentize-py may make a
# new `Policy` object for every call.
SETTINGS = {"team_label": "team", "gpu_bonus": 10.0}


class Prepared:
    """What the rules need of one node, read from its labels and
    annotations when it arrives or changes."""

    __slots__ = ("maintenance", "team", "rack_load", "load_unreadable", "gpus", "memory")

    def __init__(self, node: h.NodeView):
        self.maintenance = node.annotation(MAINTENANCE) == "true"
        self.team = node.label(SETTINGS["team_label"])
        raw = node.annotation(RACK_LOAD)
        self.rack_load = None if raw is None else h.parse_number(raw)
        self.load_unreadable = raw is not None and self.rack_load is None
        self.gpus = node.allocatable_scalar(GPU)
        self.memory = node.allocatable.memory


NODES = h.Nodes(prepare=Prepared)


def reject(pod: h.PodView, node: h.NodeView):
    p = node.prepared
    if p.maintenance:
        return "node(s) are under maintenance"
    if p.team is not None and pod.labels.get(SETTINGS["team_label"]) != p.team:
        return "node(s) belong to another team"
    if p.load_unreadable:
        return UNREADABLE_LOAD
    return None


def asks_for_gpu(pod: h.PodView) -> bool:
    return any(name == GPU and amount > 0 for name, amount in pod.requests.scalar)


def free_memory_percent(pod: h.PodView, node: h.NodeView, p: Prepared) -> int:
    """The node's free memory after the pod, in whole percent."""
    free = p.memory - node.requested_memory - pod.requests.memory
    return max(free, 0) * 100 // p.memory if p.memory > 0 else 0


def score(pod: h.PodView, node: h.NodeView) -> float:
    """The raw score, a number: what the scheduler asks for every node of
    every pod. Written out rather than summed from `parts` below, because
    each call and object costs the interpreter about as much as the rest
    of the score (docs/benchmarks.md); the tests hold the two to the same
    sums."""
    p = node.prepared
    total = float(free_memory_percent(pod, node, p))
    if p.gpus > 0 and asks_for_gpu(pod):
        total += SETTINGS["gpu_bonus"]
    if p.rack_load is not None:
        total += -p.rack_load / 4
    return total


def parts(pod: h.PodView, node: h.NodeView) -> h.ScoreParts:
    """The same score in parts, for `--explain` only."""
    p = node.prepared
    parts = h.ScoreParts().add("free memory", free_memory_percent(pod, node, p))
    if p.gpus > 0 and asks_for_gpu(pod):
        parts.add("gpu", SETTINGS["gpu_bonus"])
    if p.rack_load is not None:
        parts.add("rack load", -p.rack_load / 4)
    return parts


def read_settings(text: str) -> dict:
    raw = h.Settings(text)
    team_label = raw.str("teamLabel", "team")
    if not team_label:
        raise Err("teamLabel must be a label key, got an empty string")
    gpu_bonus = raw.number("gpuBonus", 10.0)
    if gpu_bonus < 0:
        raise Err(f"gpuBonus must be a number, 0 or more; got {gpu_bonus!r}")
    raw.check_all_read()
    return {"team_label": team_label, "gpu_bonus": gpu_bonus}


class Policy(exports.Policy):
    def describe(self) -> types.PolicyInfo:
        return types.PolicyInfo(
            name="team-fit-py",
            version="0.1.0",
            description="maintenance, team, free memory, GPUs and rack load, from labels and annotations (Python)",
            phases=types.Phases(filter=True, score=True),
            score_order=types.ScoreOrder.HIGHER_IS_BETTER,
            independent_nodes=True,
        )

    def init(self) -> None:
        SETTINGS.update(read_settings(host.config()))

    def sync_nodes(self, reset: bool, changes: list[types.NodeChange]) -> None:
        NODES.sync(reset, changes)

    def filter(self, pod: types.PodInfo, candidates: types.Candidates) -> types.FilterVerdicts:
        return h.filter_each(NODES, pod, candidates, reject)

    def score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> bytes:
        return h.score_each(NODES, pod, candidates, score, seed)

    def explain_score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> list:
        return h.explain_each(NODES, pod, candidates, parts, seed)
