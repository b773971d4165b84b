"""The entry module of wasmsched's Python interpreter component
(`wasmsched-python.wasm`): it runs a policy shipped as source, a `.py`
file written exactly as for a componentized build (a `Policy` class that
implements `exports.Policy`).

componentize-py builds this module, the SDK (wasmsched_helpers) and the
standard modules imported below into one component, snapshotted after
their import: once per language, not once per policy. When an instance
starts, the host hands over the policy's files
(`wasmsched:interpreter/source`, wit/interpreter/0.2.0, on the policy
contract 0.4); the first call
compiles and runs the entry file as a module of its own name, and every
export is the policy's own method from then on.

The standard modules imported here are the ones a policy can import: an
instance has no file system to read others from.
"""

import linecache
import sys

# Loaded into the snapshot for the tracebacks of the policy's exceptions:
# without it, CPython prints a bare one (no source lines), and an instance
# has no file system to load it from when the first one is printed.
import traceback  # noqa: F401
from types import ModuleType

# What a policy may import: the SDK and these standard modules, loaded
# into the snapshot.
import array  # noqa: F401
import bisect  # noqa: F401
import collections  # noqa: F401
import dataclasses  # noqa: F401
import decimal  # noqa: F401
import enum  # noqa: F401
import fractions  # noqa: F401
import functools  # noqa: F401
import heapq  # noqa: F401
import itertools  # noqa: F401
import json  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import re  # noqa: F401
import statistics  # noqa: F401
import string  # noqa: F401
import typing  # noqa: F401

import wasmsched_helpers  # noqa: F401
from componentize_py_types import Err  # noqa: F401
from wit_world import exports
from wit_world.imports import source, types

_POLICY = None
_PLACE_CALLS = frozenset({"placement_domains", "score_placement"})

# A policy written against contract 0.3 names two phases
# (`types.Phases(filter=..., score=...)`); 0.4 added `place`, which it
# then does not declare.
types.Phases.__init__.__defaults__ = (False,)


def _module_name(path: str) -> str:
    stem = path.rsplit("/", 1)[-1]
    return stem[: -len(".py")] if stem.endswith(".py") else stem


def _run(path: str, text: str) -> ModuleType:
    """Compiles and runs one file as the module its name says, its lines
    known to tracebacks."""
    name = _module_name(path)
    module = ModuleType(name)
    module.__file__ = path
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    sys.modules[name] = module
    exec(compile(text, path, "exec"), module.__dict__)
    return module


def _load():
    """The policy's `Policy`, its files run on the first call. What they
    raise fails the call, its traceback on stderr (the scheduler shows it
    without this module's frames)."""
    global _POLICY
    if _POLICY is not None:
        return _POLICY
    files = source.files()
    if not files:
        raise RuntimeError("the host gave no source: this component runs policies shipped as .py files")
    # Helper modules first, so that the entry module's imports find them.
    for file in files[1:]:
        _run(file.path, file.text)
    entry = _run(files[0].path, files[0].text)
    cls = getattr(entry, "Policy", None)
    if cls is None:
        raise NameError(f"{files[0].path} defines no `Policy` class (class Policy(exports.Policy): ...)")
    # A policy written against contract 0.3 has no place phase: the two
    # calls 0.4 added are not required of its class (the interpreter
    # answers them with the defaults below).
    abstract = getattr(cls, "__abstractmethods__", frozenset())
    if abstract & _PLACE_CALLS:
        cls.__abstractmethods__ = frozenset(abstract - _PLACE_CALLS)
    _POLICY = cls()
    return _POLICY


class Policy(exports.Policy):
    def describe(self):
        return _load().describe()

    def init(self):
        return _load().init()

    def sync_nodes(self, reset, changes):
        return _load().sync_nodes(reset, changes)

    def filter(self, pod, candidates):
        return _load().filter(pod, candidates)

    def score(self, pod, candidates, seed):
        return _load().score(pod, candidates, seed)

    def explain_score(self, pod, candidates, seed):
        return _load().explain_score(pod, candidates, seed)

    # The place phase (contract 0.4). A policy that declares it and leaves
    # one of these out gets the Rust SDK's defaults: no domains (the group
    # placed over every node), every placement scored 0 (the first wins).

    def placement_domains(self, pod):
        policy = _load()
        if _defines(policy, "placement_domains"):
            return policy.placement_domains(pod)
        return None

    def score_placement(self, pod, placements):
        policy = _load()
        if _defines(policy, "score_placement"):
            return policy.score_placement(pod, placements)
        return bytes(8 * len(placements))


def _defines(policy, method: str) -> bool:
    """Whether the policy's class has its own `method`, not the one
    `exports.Policy` declares (which raises NotImplementedError)."""
    own = getattr(type(policy), method, None)
    return own is not None and own is not getattr(exports.Policy, method, None)
