"""wasmsched's test builders for policies in Python: the Rust SDK's `testing`
module (NodeBuilder, PodBuilder, Harness), with the same names and
defaults. `wasmsched new --lang python` ships this file in tests/; it drives
the policy's own methods in plain CPython, with the contract's host imports
replaced by the harness.

    h = Harness(app.Policy, {"preferredZone": "zone-b"})
    h.add_node(NodeBuilder("a").cpu("8").memory("32Gi").requested("2", "4Gi"))
    h.best(PodBuilder("web").cpu("500m"))   # "a"

The reference: wasmsched's sdk/reference/python.md.
"""

import copy
import json
import math
import re
import unicodedata
from array import array
from decimal import Decimal
from fractions import Fraction
from math import ceil

from wasmsched_helpers import ScoreParts
from wit_world.imports import host, types

_QUANTITY = re.compile(
    r"\+?(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)|[eE](?P<exp>[+-]?[0-9]+))?"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def _quantity(what: str, text: str, scale: int) -> int:
    """A Kubernetes quantity ("500m", "2", "1.5Gi", "1e3") times `scale`,
    rounded up as kube rounds a quantity's milli-value."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"fixture {what}: {text!r} is not a quantity")
    value = Fraction(match["number"]) * scale
    suffix = match["suffix"]
    if suffix in _BINARY:
        value *= 1 << _BINARY[suffix]
    else:
        value *= Fraction(10) ** (_DECIMAL[suffix] if suffix else int(match["exp"] or 0))
    return ceil(value)


def _cpu(text: str) -> int:
    return _quantity("cpu", text, 1000)


def _bytes(text: str) -> int:
    return _quantity("memory", text, 1)


class NodeBuilder:
    """A fixture node: allocatable resources, labels, taints, and what is
    already requested on it."""

    def __init__(self, name: str):
        """4 cpu, 16Gi memory, 100Gi ephemeral storage, 110 pods, nothing
        used."""
        self._name, self._labels, self._annotations, self._taints = name, [("kubernetes.io/hostname", name)], [], []
        self._allocatable = {"milli_cpu": 4000, "memory": 16 << 30, "ephemeral_storage": 100 << 30, "pods": 110}
        self._scalar, self._unschedulable = [], False
        self._usage = {
            "requested_milli_cpu": 0, "requested_memory": 0, "requested_ephemeral_storage": 0,
            "nonzero_requested_milli_cpu": 0, "nonzero_requested_memory": 0, "pod_count": 0,
        }

    def cpu(self, quantity: str) -> "NodeBuilder":
        self._allocatable["milli_cpu"] = _cpu(quantity)
        return self

    def memory(self, quantity: str) -> "NodeBuilder":
        self._allocatable["memory"] = _bytes(quantity)
        return self

    def pods(self, pods: int) -> "NodeBuilder":
        self._allocatable["pods"] = pods
        return self

    def scalar(self, name: str, amount: int) -> "NodeBuilder":
        """An extended resource such as `nvidia.com/gpu`."""
        self._scalar.append((name, amount))
        return self

    def label(self, key: str, value: str) -> "NodeBuilder":
        self._labels = [(k, v) for k, v in self._labels if k != key] + [(key, value)]
        return self

    def annotation(self, key: str, value: str) -> "NodeBuilder":
        self._annotations.append((key, value))
        return self

    def taint(self, key: str, value: str, effect: types.TaintEffect) -> "NodeBuilder":
        self._taints.append(types.Taint(key=key, value=value, effect=effect))
        return self

    def unschedulable(self) -> "NodeBuilder":
        self._unschedulable = True
        return self

    def requested(self, cpu: str, memory: str) -> "NodeBuilder":
        """What bound pods already request (used as the scoring view too)."""
        milli_cpu, memory_bytes = _cpu(cpu), _bytes(memory)
        self._usage.update(requested_milli_cpu=milli_cpu, requested_memory=memory_bytes)
        self._usage.update(nonzero_requested_milli_cpu=milli_cpu, nonzero_requested_memory=memory_bytes)
        return self

    def pod_count(self, pods: int) -> "NodeBuilder":
        self._usage["pod_count"] = pods
        return self

    def info(self, node_id: int) -> types.NodeInfo:
        """The node's facts under `node_id`, as the contract's node-info."""
        allocatable = types.Resources(scalar=list(self._scalar), **self._allocatable)
        return types.NodeInfo(
            id=node_id, name=self._name, labels=list(self._labels), annotations=list(self._annotations),
            taints=list(self._taints), allocatable=allocatable, unschedulable=self._unschedulable,
        )

    def build(self, node_id: int) -> "tuple[types.NodeInfo, dict]":
        """The node's facts under `node_id` and what is placed on it."""
        return self.info(node_id), dict(self._usage)


class PodBuilder:
    """A fixture pod. Requests are summed as plain containers."""

    def __init__(self, name: str):
        """Namespace `default`, no requests (scored as 100m / 200 MB, like
        kube)."""
        self._info = types.PodInfo(
            namespace="default", name=name, uid=f"uid-{name}", labels=[], annotations=[], priority=0,
            requests=types.Resources(milli_cpu=0, memory=0, ephemeral_storage=0, pods=1, scalar=[]),
            nonzero_milli_cpu=100, nonzero_memory=200 * 1024 * 1024,
            node_selector=[], required_node_affinity=[], tolerations=[], group=None,
        )
        self._placed: "list[tuple[str, str]]" = []

    def namespace(self, namespace: str) -> "PodBuilder":
        self._info.namespace = namespace
        return self

    def cpu(self, quantity: str) -> "PodBuilder":
        value = _cpu(quantity)
        self._info.requests.milli_cpu, self._info.nonzero_milli_cpu = value, value or 100
        return self

    def memory(self, quantity: str) -> "PodBuilder":
        value = _bytes(quantity)
        self._info.requests.memory, self._info.nonzero_memory = value, value or 200 * 1024 * 1024
        return self

    def label(self, key: str, value: str) -> "PodBuilder":
        self._info.labels.append((key, value))
        return self

    def annotation(self, key: str, value: str) -> "PodBuilder":
        self._info.annotations.append((key, value))
        return self

    def priority(self, priority: int) -> "PodBuilder":
        self._info.priority = priority
        return self

    def node_selector(self, key: str, value: str) -> "PodBuilder":
        self._info.node_selector.append((key, value))
        return self

    def required_affinity_term(self, term: types.NodeSelectorTerm) -> "PodBuilder":
        self._info.required_node_affinity.append(term)
        return self

    def toleration(
        self, key: str, operator: types.TolerationOperator, value: str, effect: "types.TaintEffect | None"
    ) -> "PodBuilder":
        """`effect` None tolerates every effect."""
        self._info.tolerations.append(types.Toleration(key=key, operator=operator, value=value, effect=effect))
        return self

    def group(self, name: str, min_count: int, members: int) -> "PodBuilder":
        """A member of PodGroup `name`: its quorum (`minCount`; 1 for a
        basic group) and how many members it has."""
        self._info.group = types.GroupInfo(name=name, min_count=min_count, members=members, placed=[])
        return self

    def member_placed(self, pod: str, node: str) -> "PodBuilder":
        """Another member of its group already placed on fixture node
        `node`."""
        if self._info.group is None:
            raise AssertionError("member_placed before group")
        self._placed.append((pod, node))
        return self

    def info(self, id_of=None) -> types.PodInfo:
        """The pod as the contract's pod-info; `id_of` gives a fixture
        node's id by name, for the members placed (the Harness passes it)."""
        info = copy.deepcopy(self._info)
        if self._placed:
            if id_of is None:
                raise AssertionError("a pod with members placed is built by the Harness, which knows the nodes")
            placed = [types.MemberPlacement(pod=pod, node=id_of(node)) for pod, node in self._placed]
            info.group.placed = sorted(placed, key=lambda m: m.pod)
        return info


class Harness:
    """Runs one policy natively over fixture nodes, through its own contract
    methods, as the scheduler calls them."""

    _active = None

    def __init__(self, policy, settings: "dict | str | None" = None):
        """`policy`: the policy class (`app.Policy`). `settings`: a dict (or
        JSON text) as the policy's settings file holds them. The policy's
        own `Err` is raised."""
        _without_required_place_calls(policy)
        self._policy_class, self._nodes, self._metrics, self._logs = policy, [], {}, []
        self._settings = settings if isinstance(settings, str) else json.dumps(settings or {})
        described = policy().describe()
        self._name, self._phases, self._order = described.name, described.phases, described.score_order
        problem = _describe_problem(described)
        if problem:
            raise AssertionError(f"{self._name}: malformed describe result: {problem}")
        self._enter()

    def add_node(self, node: NodeBuilder) -> "Harness":
        """Adds a node; candidates are offered in the order they were added."""
        info, usage = node.build(len(self._nodes))
        self._enter()
        self._policy_class().sync_nodes(False, [types.NodeChange_Upsert(info)])
        self._nodes.append((info, usage))
        return self

    def set_metric(self, node: str, metric: str, value: float, age_ms: int) -> "Harness":
        """A metric sample for a node added earlier."""
        self._metrics[(self._id_of(node), metric)] = types.MetricSample(value=value, age_ms=age_ms)
        return self

    def clear_metric(self, node: str, metric: str) -> "Harness":
        """Removes a metric sample, as if its source went away."""
        self._metrics.pop((self._id_of(node), metric), None)
        return self

    def logs(self) -> "list[str]":
        """Log lines the policy wrote, as `Info: message k=v`."""
        return self._logs

    def filter(self, pod: PodBuilder) -> "dict[str, str | None]":
        """Each node's reason for rejecting the pod, or None if it passes,
        by name in the order added."""
        self._enter()
        answer = _refusing_long_errors(self._name, "filter", lambda: self._policy_class().filter(pod.info(self._id_of), self._candidates()))
        verdicts, problem = _unpack(answer.verdicts, "verdicts", "I", "u32")
        problem = problem or _filter_problem(answer.reasons, verdicts, len(self._nodes))
        if problem:
            raise AssertionError(f"{self._name}: malformed filter result: {problem}")
        names = [info.name for info, _ in self._nodes]
        return {name: (answer.reasons[v - 1] if v else None) for name, v in zip(names, verdicts)}

    def try_score(self, pod: PodBuilder, seed: int = 0) -> "tuple[dict[str, float] | None, str | None]":
        """Each node's raw score by name, and None; or None and the policy's
        error."""
        self._enter()
        try:
            packed = self._policy_class().score(pod.info(self._id_of), self._candidates(), seed)
        except Exception as error:  # the policy's Err, or its bug
            message = getattr(error, "value", None) or repr(error)
            problem = _error_problem(message)
            return None, f"{self._name}: malformed score result: {problem}" if problem else message
        scores, problem = _unpack(packed, "scores", "d", "f64")
        problem = problem or _score_problem(scores, [info.name for info, _ in self._nodes])
        if problem:
            return None, f"{self._name}: malformed score result: {problem}"
        return dict(zip((info.name for info, _ in self._nodes), scores)), None

    def score(self, pod: PodBuilder) -> "dict[str, float]":
        """Each node's raw score with seed 0; the policy's error is raised,
        and a result the scheduler would refuse fails as an AssertionError
        with the scheduler's words."""
        self._enter()
        packed = _refusing_long_errors(self._name, "score", lambda: self._policy_class().score(pod.info(self._id_of), self._candidates(), 0))
        scores, problem = _unpack(packed, "scores", "d", "f64")
        problem = problem or _score_problem(scores, [info.name for info, _ in self._nodes])
        if problem:
            raise AssertionError(f"{self._name}: malformed score result: {problem}")
        return dict(zip((info.name for info, _ in self._nodes), scores))

    def explain(self, pod: PodBuilder) -> "dict[str, ScoreParts]":
        """Each node's ScoreParts with seed 0, by name (no parts where the
        policy gives none): what `--explain` shows. The policy's error is
        raised, and parts the scheduler would refuse fail as an
        AssertionError in its words."""
        self._enter()
        explain = lambda: self._policy_class().explain_score(pod.info(self._id_of), self._candidates(), 0)  # noqa: E731
        explained = _refusing_long_errors(self._name, "explain-score", explain)
        problem = _parts_problem(explained, len(self._nodes))
        if problem:
            raise AssertionError(f"{self._name}: malformed explain-score result: {problem}")
        result = {}
        for (info, _), parts in zip(self._nodes, explained):
            result[info.name] = ScoreParts()
            for part in parts:
                result[info.name].add(part.name, part.value)
        return result

    def placement_domains(self, pod: PodBuilder) -> "types.DomainRequest | None":
        """The domains the policy asks a gang member's group to be placed
        in; the policy's error is raised, and an answer the scheduler would
        refuse fails as an AssertionError."""
        if not self._phases.place:
            raise AssertionError(f"{self._name} does not declare the place phase: the scheduler never asks it")
        self._enter()
        ask = lambda: self._policy_class().placement_domains(pod.info(self._id_of))  # noqa: E731
        domains = _refusing_long_errors(self._name, "placement-domains", ask)
        if domains is not None and not domains.key.strip(_WHITE_SPACE):
            raise AssertionError(f"{self._name}: malformed placement-domains result: the domains' label key is empty")
        return domains

    def try_score_placements(self, pod: PodBuilder, placements) -> "tuple[list[float] | None, str | None]":
        """Raw scores of placements, each given as its domain and its
        members on fixture nodes (`("a", [("w-0", "a1"), ...])`), and None;
        or None and the policy's error (or the scheduler's words for an
        answer it would refuse)."""
        if not self._phases.place:
            raise AssertionError(f"{self._name} does not declare the place phase: the scheduler never asks it")
        self._enter()
        wire = [
            types.Placement(
                domain=domain,
                members=[types.MemberPlacement(pod=member, node=self._id_of(node)) for member, node in members],
                unplaced=0,
            )
            for domain, members in placements
        ]
        try:
            packed = self._policy_class().score_placement(pod.info(self._id_of), wire)
        except Exception as error:  # the policy's Err, or its bug
            message = getattr(error, "value", None) or repr(error)
            problem = _error_problem(message)
            return None, f"{self._name}: malformed score-placement result: {problem}" if problem else message
        scores, problem = _unpack(packed, "scores", "d", "f64")
        refused = any(not math.isfinite(s) or abs(s) > _MAX_RAW_SCORE for s in scores)
        if not problem and (len(scores) != len(wire) or refused):
            problem = f"{scores} for {len(wire)} placements"
        if problem:
            return None, f"{self._name}: malformed score-placement result: {problem}"
        return scores, None

    def score_placements(self, pod: PodBuilder, placements) -> "list[float]":
        """The same; the policy's error is raised as an AssertionError."""
        scores, error = self.try_score_placements(pod, placements)
        if error is not None:
            raise AssertionError(f"{self._name} score-placement failed: {error}")
        return scores

    def best(self, pod: PodBuilder) -> "str | None":
        """The node this policy alone would pick: among the nodes its filter
        passes, the best raw score in its score order, the first on ties."""
        passed = self.filter(pod) if self._phases.filter else {}
        scores = self.score(pod) if self._phases.score else {info.name: 0.0 for info, _ in self._nodes}
        lower = self._order == types.ScoreOrder.LOWER_IS_BETTER
        best = None
        for name, score in scores.items():
            if passed.get(name) is None and (best is None or (score < best[1] if lower else score > best[1])):
                best = (name, score)
        return best[0] if best else None

    def _enter(self) -> None:
        """The policy's module state belongs to one harness at a time:
        another harness used since gets this one's settings and nodes back
        first. The host imports answer from this harness."""
        host.config = lambda: self._settings
        host.log = self._log
        host.node_metrics = lambda metric, ids: [self._metrics.get((i, metric)) for i in ids]
        if Harness._active is not self:
            Harness._active = self
            policy = self._policy_class()
            policy.init()
            policy.sync_nodes(True, [types.NodeChange_Upsert(info) for info, _ in self._nodes])

    def _log(self, level: types.LogLevel, message: str, fields) -> None:
        named = level.name.capitalize()
        self._logs.append(f"{named}: {message}" + "".join(f" {k}={v}" for k, v in fields))

    def _id_of(self, name: str) -> int:
        for node_id, (info, _) in enumerate(self._nodes):
            if info.name == name:
                return node_id
        raise KeyError(f"no fixture node {name}")

    def _candidates(self) -> types.Candidates:
        """The nodes as the scheduler sends them: packed little-endian
        columns, u32 ids and pod counts, u64 amounts."""
        kind = {"pod_count": "I"}
        column = lambda key: array(kind.get(key, "Q"), [usage[key] for _, usage in self._nodes]).tobytes()  # noqa: E731
        return types.Candidates(
            nodes=array("I", [info.id for info, _ in self._nodes]).tobytes(),
            requested_milli_cpu=column("requested_milli_cpu"),
            requested_memory=column("requested_memory"), requested_ephemeral_storage=column("requested_ephemeral_storage"),
            nonzero_requested_milli_cpu=column("nonzero_requested_milli_cpu"),
            nonzero_requested_memory=column("nonzero_requested_memory"), pod_count=column("pod_count"),
        )


_PLACE_CALLS = frozenset({"placement_domains", "score_placement"})


def _without_required_place_calls(policy) -> None:
    """As the interpreter that runs a policy shipped as source: a policy
    class without the place phase's two calls (contract 0.4's) can still
    be made, and is answered as one without domains."""
    abstract = getattr(policy, "__abstractmethods__", frozenset())
    if abstract & _PLACE_CALLS:
        policy.__abstractmethods__ = frozenset(abstract - _PLACE_CALLS)


# The scheduler's checks of a result (rules/src/answers.rs), in its words:
# a result it would refuse fails here first.
_MAX_RAW_SCORE = 2.0**53
_MAX_REASON_BYTES = 1024
_MAX_SCORE_PARTS = 16
_MAX_PART_NAME_BYTES = 64
_MAX_ERROR_BYTES = 4096
_MAX_NAME_BYTES, _MAX_VERSION_BYTES, _MAX_DESCRIPTION_BYTES = 253, 64, 1024
# Unicode's White_Space, which Rust's `trim` strips (`str.strip()` also
# strips \x1c-\x1f).
_WHITE_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


def _within(what: str, text: str, limit: int) -> "str | None":
    size = len(text.encode())
    return f"{what} is {size} bytes, over the {limit}-byte limit" if size > limit else None


def _error_problem(message) -> "str | None":
    return _within("its error message", message, _MAX_ERROR_BYTES) if isinstance(message, str) else None


def _refusing_long_errors(name: str, phase: str, call):
    """The call's answer; the policy's error is raised as it is, unless the
    scheduler would refuse its message as too long."""
    try:
        return call()
    except Exception as error:
        problem = _error_problem(getattr(error, "value", None))
        if problem:
            raise AssertionError(f"{name}: malformed {phase} result: {problem}") from error
        raise


def _describe_problem(info) -> "str | None":
    if not info.name.strip(_WHITE_SPACE):
        return "the policy name is empty"
    problem = (
        _within("its name", info.name, _MAX_NAME_BYTES)
        or _within("its version", info.version, _MAX_VERSION_BYTES)
        or _within("its description", info.description, _MAX_DESCRIPTION_BYTES)
    )
    if problem:
        return problem
    if any(unicodedata.category(c) == "Cc" for c in info.name + info.version):
        return "its name or version holds control characters"
    if not info.phases.filter and not info.phases.score:
        return "the policy implements neither filter nor score"
    return None


def _parts_problem(breakdowns, candidates: int) -> "str | None":
    if len(breakdowns) != candidates:
        return f"{len(breakdowns)} breakdowns for {candidates} candidates"
    for i, parts in enumerate(breakdowns):
        if len(parts) > _MAX_SCORE_PARTS:
            return f"{len(parts)} parts for candidate {i}, over {_MAX_SCORE_PARTS}"
        for part in parts:
            problem = _within(f"a part name of candidate {i}", part.name, _MAX_PART_NAME_BYTES)
            if problem:
                return problem
            if not math.isfinite(part.value) or abs(part.value) > _MAX_RAW_SCORE:
                return f"part {_rust_debug(part.name)} of candidate {i} is {_rust_exponent(float(part.value))}"
    return None


def _rust_debug(text: str) -> str:
    """A string as Rust's `{:?}` quotes it, for the names these messages
    hold: quotes and backslashes escaped, control characters as escapes."""
    escaped = {"\0": "\\0", "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return '"' + "".join(escaped.get(c) or (f"\\u{{{ord(c):x}}}" if unicodedata.category(c) == "Cc" else c) for c in text) + '"'


def _rust_exponent(value: float) -> str:
    """A float as the scheduler prints it in these messages: 1e300, 9.1e15."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return ("-" if sign else "") + f"{mantissa}e{exponent + len(digits) - 1}"


def _score_problem(scores, names) -> "str | None":
    if len(scores) != len(names):
        return f"{len(scores)} scores for {len(names)} candidates"
    for i, score in enumerate(scores):
        if not math.isfinite(score) or abs(score) > _MAX_RAW_SCORE:
            return (
                f"the score for node {names[i]} (candidate {i}) is {_rust_exponent(float(score))}; "
                "scores must be finite, |score| <= 2^53"
            )
    return None


def _unpack(packed, what: str, code: str, kind: str) -> "tuple[list, str | None]":
    """An answer's packed numbers, or the scheduler's words for bytes that
    are not a whole number of them."""
    size = array(code).itemsize
    if not isinstance(packed, (bytes, bytearray, memoryview)):
        return [], f"the {what} are a {type(packed).__name__}, not packed bytes (wasmsched_helpers' pack_{what})"
    if len(packed) % size:
        return [], f"the {what} are {len(packed)} bytes, not a whole number of {kind}s ({size} bytes each, little-endian)"
    return array(code, bytes(packed)).tolist(), None


def _filter_problem(reasons, verdicts, candidates: int) -> "str | None":
    if len(verdicts) != candidates:
        return f"{len(verdicts)} verdicts for {candidates} candidates"
    if len(reasons) > max(candidates, 1):
        return f"{len(reasons)} reasons for {candidates} candidates"
    for i, reason in enumerate(reasons):
        if len(reason.encode()) > _MAX_REASON_BYTES:
            return f"reason {i} is {len(reason.encode())} bytes, over the {_MAX_REASON_BYTES}-byte limit"
    for i, verdict in enumerate(verdicts):
        if verdict > len(reasons):
            return f"verdict {verdict} of candidate {i} names a reason beyond the {len(reasons)} given"
    return None
