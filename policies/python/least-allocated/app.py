"""kube-scheduler's NodeResourcesFit LeastAllocated, in Python: the twin of
policies/least-allocated (Rust). Prefers the node with the most free cpu and
memory after placing the pod, each weighted equally, in kube's integer
arithmetic, so both twins place every pod on the same node.

Build: see README.md. componentize-py turns this module into a component
that exports `wasmsched:policy/policy` of wit/0.1.0, unchanged.
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types

NAME = "least-allocated-py"
VERSION = "0.1.0"
MAX_NODE_SCORE = 100

# The node table: node id -> (allocatable milli-cpu, allocatable memory).
# Module state, not instance state: componentize-py may create a new
# `Policy` object for every call, the module lives as long as the instance.
ALLOCATABLE: dict[int, tuple[int, int]] = {}


def least_allocated(requested: int, capacity: int) -> int:
    """(capacity - requested) * 100 / capacity, 0 if it does not fit."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


class Policy(exports.Policy):
    def describe(self) -> types.PolicyInfo:
        return types.PolicyInfo(
            name=NAME,
            version=VERSION,
            description="kube-scheduler's LeastAllocated on cpu and memory (Python)",
            phases=types.Phases(filter=False, score=True),
            score_order=types.ScoreOrder.HIGHER_IS_BETTER,
        )

    def init(self) -> None:
        # No configuration, like the Rust twin (which ignores it too).
        host.log(types.LogLevel.DEBUG, "least-allocated (Python) ready", [])

    def sync_nodes(self, reset: bool, changes: list[types.NodeChange]) -> None:
        if reset:
            ALLOCATABLE.clear()
        for change in changes:
            if isinstance(change, types.NodeChange_Upsert):
                node = change.value
                ALLOCATABLE[node.id] = (node.allocatable.milli_cpu, node.allocatable.memory)
            else:
                ALLOCATABLE.pop(change.value, None)

    def filter(self, pod: types.PodInfo, candidates: types.Candidates) -> types.FilterVerdicts:
        # Not called: describe() declares the score phase only.
        return types.FilterVerdicts(reasons=[], verdicts=[0] * len(candidates.nodes))

    def score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> list[float]:
        cpu_used = candidates.nonzero_requested_milli_cpu
        memory_used = candidates.nonzero_requested_memory
        if not (len(cpu_used) == len(memory_used) == len(candidates.nodes)):
            raise Err("candidate columns differ in length")
        scores = []
        for i, node_id in enumerate(candidates.nodes):
            allocatable = ALLOCATABLE.get(node_id)
            if allocatable is None:
                raise Err(f"candidate {i} names node id {node_id} which the host never sent")
            cpu = least_allocated(cpu_used[i] + pod.nonzero_milli_cpu, allocatable[0])
            memory = least_allocated(memory_used[i] + pod.nonzero_memory, allocatable[1])
            scores.append(float((cpu + memory) // 2))
        return scores
