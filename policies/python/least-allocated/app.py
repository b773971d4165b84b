"""kube-scheduler's NodeResourcesFit LeastAllocated, in Python: the twin of
policies/least-allocated (Rust). Prefers the node with the most free cpu and
memory after placing the pod, each weighted equally, in kube's integer
arithmetic, so both twins place every pod on the same node.

Build: see README.md. componentize-py turns this module into a component
that exports `wasmsched:policy/policy` of wit/0.3.0, whose per-node
columns arrive as packed bytes: read through `memoryview(...).cast`, they
cost no Python object until an element is read, and the scores go back as
one `array("d")`.
"""

from array import array

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
            # Each node's score depends on the pod and that node alone:
            # the scheduler may split a call over its cores.
            independent_nodes=True,
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
        # Not called: describe() declares the score phase only. Every
        # verdict 0 (feasible): a zero u32 per node, as many bytes as the
        # node-id column has.
        return types.FilterVerdicts(reasons=[], verdicts=bytes(len(candidates.nodes)))

    def score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> bytes:
        nodes = memoryview(candidates.nodes).cast("I")
        cpu_used = memoryview(candidates.nonzero_requested_milli_cpu).cast("Q")
        memory_used = memoryview(candidates.nonzero_requested_memory).cast("Q")
        if not (len(cpu_used) == len(memory_used) == len(nodes)):
            raise Err("candidate columns differ in length")
        pod_cpu, pod_memory = pod.nonzero_milli_cpu, pod.nonzero_memory
        scores = array("d", bytes(8 * len(nodes)))
        for i, node_id in enumerate(nodes):
            allocatable = ALLOCATABLE.get(node_id)
            if allocatable is None:
                raise Err(f"candidate {i} names node id {node_id} which the host never sent")
            cpu = least_allocated(cpu_used[i] + pod_cpu, allocatable[0])
            memory = least_allocated(memory_used[i] + pod_memory, allocatable[1])
            scores[i] = (cpu + memory) // 2
        return scores.tobytes()

    def explain_score(self, pod: types.PodInfo, candidates: types.Candidates, seed: int) -> list:
        # No breakdown: the score is one formula, kube's.
        return [[] for _ in range(len(candidates.nodes) // 4)]
