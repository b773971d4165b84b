"""one-rack: a gang's members together in one rack, in Python. The twin of
policies/one-rack (Rust) and policies/js/one-rack (JavaScript): the three
decide alike (tests/it's source_policies module holds them to it). It
speaks contract 0.4 (groups and the `place` phase) and ships as source, on
wasmsched's Python interpreter.

- Place: a gang (`minCount` of 2 or more) is tried in each rack, the racks
  being the values of node label `rackLabel`. With `required` (the
  default) it waits rather than spread; without it, it spreads over every
  node when no rack can take it. Of the racks that fit, the one that
  places the most members wins, then the one that packs them on the fewest
  nodes; a placement over every node comes after every rack.
- Score: a member scheduled on its own (beyond the quorum, or a
  replacement) prefers the rack where most of its group's placed members
  are.

Settings: `rackLabel` (default `topology.kubernetes.io/rack`), `required`
(default true).
"""

import wasmsched_helpers as h
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types

DEFAULT_RACK_LABEL = "topology.kubernetes.io/rack"
# What spreading over every node costs a placement's score: more than any
# rack's count of members can make up.
SPREAD_PENALTY = 1e9

# Module state lives as long as the instance; componentize-py may make a
# new `Policy` object for every call.
SETTINGS = {"rack_label": DEFAULT_RACK_LABEL, "required": True}
NODES = h.Nodes()


def read_settings(text: str) -> dict:
    raw = h.Settings(text)
    rack_label = raw.str("rackLabel", DEFAULT_RACK_LABEL)
    if not rack_label.strip():
        raise Err("rackLabel is empty: name the node label whose values are the racks")
    required = raw.flag("required", True)
    raw.check_all_read()
    return {"rack_label": rack_label, "required": required}


def score(pod: h.PodView, node: h.NodeView) -> float:
    """How many of the pod's group's placed members are in this node's
    rack."""
    rack = node.label(SETTINGS["rack_label"])
    if pod.group is None or rack is None:
        return 0.0
    racks = (NODES.get(member.node) for member in pod.group.placed)
    return float(sum(1 for placed in racks if placed is not None and placed.label(SETTINGS["rack_label"]) == rack))


def score_placement(placement: h.PlacementView) -> float:
    spread = SPREAD_PENALTY if placement.domain == "" else 0.0
    return len(placement.members) * 1000.0 - len(placement.nodes()) - spread


class Policy(exports.Policy):
    def describe(self) -> types.PolicyInfo:
        return types.PolicyInfo(
            name="one-rack-py",
            version="0.1.0",
            description="a gang's members together in one rack (Python)",
            phases=types.Phases(filter=False, score=True, place=True),
            score_order=types.ScoreOrder.HIGHER_IS_BETTER,
            independent_nodes=True,
        )

    def init(self) -> None:
        SETTINGS.update(read_settings(host.config()))

    def sync_nodes(self, reset: bool, changes: list[types.NodeChange]) -> None:
        NODES.sync(reset, changes)

    def filter(self, pod: types.PodInfo, candidates: types.Candidates) -> types.FilterVerdicts:
        # Not called: describe() declares no filter phase.
        return types.FilterVerdicts(reasons=[], verdicts=bytes(len(candidates.nodes)))

    def score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> bytes:
        return h.score_each(NODES, pod, candidates, score, seed)

    def explain_score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> list:
        # No breakdown: the score is one count.
        return [[] for _ in range(len(candidates.nodes) // 4)]

    def placement_domains(self, pod: types.PodInfo) -> "types.DomainRequest | None":
        if pod.group is None or pod.group.min_count < 2:
            return None
        return types.DomainRequest(key=SETTINGS["rack_label"], required=SETTINGS["required"])

    def score_placement(self, pod: types.PodInfo, placements: list[types.Placement]) -> bytes:
        return h.pack_scores([score_placement(p) for p in NODES.placements(placements)])
