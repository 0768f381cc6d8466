"""The execute pipeline, written once for every device: `out[:] = tree` -> key -> program -> run.

    Engine.execute(out, value)
      -> fast key: the tree's interned structure id (optree, made while the tree was built) +
         which leaves are the same tensor + the output's slot and token; no walk. A runner
         filed under it (a program's `fast`) runs at once.
      -> plan.walk (counted in `stats`): the full signature, the tensors, constants and nodes
      -> a miss: the first `jit_after - 1` runs of a structure are interpreted (the numpy
         reference, no compile wait for one-off trees); then the device compiles a Program
         (plan, render, compile, load) and the engine caches it by signature, and its runner
         by the fast key
      -> empty tensors go to the reference interpreter (no kernel handles a zero size)
      -> program.run(out, tensors, consts, nodes)

A process compiles at most NEONLIKE_MAX_COMPILED structures (compiled code is never given back);
later new structures are interpreted, large elementwise trees by rows (`interpret`). A statement
run many times as it is (an ngraph computation's) is `prepare`d: walked once, then run straight
on its program.

A device supplies the compile step, `compile(key, out, value, tensors, nodes) -> Program`; a
Program has `plan`, `dtype` (its compute dtype), `run(out, tensors, consts, nodes)` and `fast`:
a runner `fast(out, tensors, consts) -> bool` for plans that need no node list, returning False
(having done nothing) where `run` must go, or None. Allocation, copies, rendering, compiling and
launching are the device's; this module imports no device library.
"""
from __future__ import annotations

import math
import os
import warnings
from typing import Any, Callable

import numpy as np

from ..memo import Memo
from ..ops import Kind
from ..optree import OpTreeNode, Tensor_, hotpath, tensor_token
from .. import plan as P
from . import reference

DEBUG = int(os.environ.get("NEONLIKE_DEBUG", "0") or 0)

# Called as observer(plan, tensors, out, nodes, compute_dtype) for every program compiled (the
# test suite renders each planned stage for the GPU too and compiles it with nvcc:
# tests/conftest.py).
PLAN_OBSERVERS: list = []


def jit_after_default() -> int:
    """NEONLIKE_JIT_AFTER: a structure is compiled on its N-th run (default 2)."""
    return max(1, int(os.environ.get("NEONLIKE_JIT_AFTER", "2") or 2))


def max_compiled_default() -> int:
    """NEONLIKE_MAX_COMPILED: the structures one process compiles at most (default 2048); later
    new structures run interpreted. Compiled code is never given back within a process (numba's
    MCJIT), so this bounds the memory kernels take: ~0.2-0.35 MB a structure loaded through the
    CPU's compile worker (benchmarks/README.md), ~2-4.5 MB compiled in the process itself."""
    return max(0, int(os.environ.get("NEONLIKE_MAX_COMPILED", "2048") or 0))


# Trees whose largest operand or output has at least this many elements compile on their first
# run: the interpreter holds a full-size array per node (and the tier exists for small one-off
# trees, whose compile would cost more than it saves).
COMPILE_AT_ONCE = 1 << 20
# The interpreter evaluates an elementwise tree over this many output elements at a time, so its
# temporaries stay bounded (~1 MB per node) whatever the size.
INTERPRET_CHUNK = 1 << 17


class Engine:
    """One device's execute pipeline over its program cache (a KernelCache keyed by signature)."""

    def __init__(self, name: str, compile: Callable[..., Any], programs: Any,
                 jit_after: int = 1, max_compiled: int | None = None) -> None:
        self.name, self.compile, self.programs = name, compile, programs
        self.jit_after = jit_after
        self.max_compiled = max_compiled_default() if max_compiled is None else max_compiled
        self.compiled = 0            # programs compiled in this process (never reset: see above)
        self.seen = Memo(f"{name}.runs_before_compile", 8192)
        self.runners = Memo(f"{name}.fast_runners", 4096)   # fast key -> runner
        # what a backend may run straight from Tensor.__setitem__ (Backend._runners): not in
        # debug mode, which prints every statement
        self.fast_runners = None if DEBUG else self.runners
        # statements that took the walk (the fast path keeps no count: it is the hot path)
        self.stats = {"walks": 0, "interpreted": 0, "over_budget": 0}

    def execute(self, out: Any, value: Any) -> None:
        """out[:] = value (an op-tree, a Tensor or a number)."""
        d = value[0] if isinstance(value, OpTreeNode) else None
        key = None
        if d is not None and not DEBUG:
            # the tree's structure was interned while it was built: its key needs no walk
            # the key, the runner and its call in C where built (NotImplemented: the key is
            # statement_key's to make); False: no runner took it, so the key only files one
            ran = _run_fast(self.runners, out, value) if _run_fast is not None else NotImplemented
            if ran is True:
                return
            found = statement_key(d, out)
            if found is not None:
                key, tensors = found
                fast = self.runners.get(key) if ran is NotImplemented else None
                if fast is not None and fast(out, tensors, d.consts):
                    return
        self.stats["walks"] += 1
        walk_key, tensors, consts, nodes = P.walk(out, value)
        program = self.programs.get(walk_key)
        if DEBUG:
            pp = value.pp() if d is not None else repr(value)
            print(f"neonlike{'' if self.name == 'cpu' else ' ' + self.name}: "
                  f"{out.name or 'out'}[:] = {pp}"
                  + (" (cache hit)" if program is not None and DEBUG >= 2 else ""))
        if program is None and (self._over_budget()
                                or self._interpret_first(walk_key, out, tensors, nodes)):
            self.stats["interpreted"] += 1
            interpret(out, value, tensors, nodes)
            return
        if program is None:
            program = self.compile(walk_key, out, value, tensors, nodes)
            self.compiled += 1
            for observe in PLAN_OBSERVERS:
                observe(program.plan, tensors, out, nodes, program.dtype)
            self.programs.put(walk_key, program)
        if key is not None and program.fast is not None:
            runner = program.fast
            if len(consts) != len(d.consts):   # a shared subtree holds constants
                runner = _shared_constants(runner, P.const_order(value))
            self.runners.put(key, runner)
        if out.size == 0 or any(t.size == 0 for t in tensors) or any(0 in n.shape for n in nodes):
            out._store(reference.evaluate(value, program.dtype))
            return
        program.run(out, tensors, consts, nodes)

    def prepare(self, out: Any, value: Any) -> Callable[[], None]:
        """`out[:] = value` as a runner for a statement run many times as it is (the same tree
        object over the same tensors: an ngraph computation's): the walk is done here, once,
        and once the structure is compiled each call runs its program straight away. Until
        then (the interpreted tier, a structure over the compile budget, a zero size) a call
        goes through execute().

        `run(target)` writes into `target` instead of out: a tensor of out's shape and dtype that
        the tree does not read (an ngraph computation's fresh result array, handed to its caller
        without a copy)."""
        if not isinstance(value, OpTreeNode) or DEBUG:
            return lambda target=None: self.execute(out if target is None else target, value)
        walk_key, tensors, consts, nodes = P.walk(out, value)
        empty = out.size == 0 or any(t.size == 0 for t in tensors) or \
            any(0 in n.shape for n in nodes)
        ready: list = []
        d = value[0]
        # the program's fast runner where it has one (one fused stage) and the tree's interned
        # constants are the walk's (no shared subtree holding constants)
        interned = getattr(d, "consts", None)
        fast_consts = interned if interned is not None and len(interned) == len(consts) else None

        def run(target: Any = None) -> None:
            dst = out if target is None else target
            if ready:
                program, bound = ready
                if program.fast is not None and fast_consts is not None and \
                        program.fast(dst, tensors, fast_consts):
                    return
                if bound is not None and target is None:
                    bound()
                else:
                    program.run(dst, tensors, consts, nodes)
                return
            self.execute(dst, value)
            program = self.programs.get(walk_key)
            if program is not None and not empty:
                # a plan the fast runner does not take, bound to this statement's buffers
                bind = getattr(program, "bind", None)
                bound = bind(out, tensors, consts, nodes) if bind is not None and (
                    program.fast is None or fast_consts is None) else None
                ready.extend((program, bound))
        return run

    def _interpret_first(self, key: tuple, out: Any, tensors: list, nodes: list) -> bool:
        """Tiered execution: a structure is interpreted its first jit_after - 1 runs (unless its
        tensors are large: COMPILE_AT_ONCE, or it holds a convolution or pooling, which the
        device runs with its own kernels and the interpreter slowly)."""
        if self.jit_after <= 1 or max([out.size] + [t.size for t in tensors]) >= COMPILE_AT_ONCE \
                or any(n.kind is Kind.COMPOUND for n in nodes):
            return False
        n = self.seen.get(key, 0) + 1
        if n >= self.jit_after:
            self.seen.pop(key, None)
            return False
        self.seen.put(key, n)
        return True

    def _over_budget(self) -> bool:
        """Whether this process has compiled its NEONLIKE_MAX_COMPILED structures (one warning)."""
        if self.compiled < self.max_compiled:
            return False
        if not self.stats["over_budget"]:
            warnings.warn(f"neonlike: {self.compiled} structures compiled in this process, its "
                          f"budget (NEONLIKE_MAX_COMPILED={self.max_compiled}: compiled code stays "
                          "in memory until the process ends); new structures run interpreted "
                          "from now on", RuntimeWarning, stacklevel=4)
        self.stats["over_budget"] += 1
        return True


def interpret(out: Any, value: Any, tensors: list, nodes: list) -> None:
    """out[:] = value by the reference interpreter; an elementwise tree over a large output goes
    INTERPRET_CHUNK elements at a time (rows of its first axis), where no operand shares the
    output's memory."""
    dtype = reference.tree_dtype(out, value)
    rows = out.shape[0]
    if (out.size <= INTERPRET_CHUNK or rows < 2
            or any(n.kind is not Kind.ELEMENTWISE or len(n.shape) != out.ndim for n in nodes)
            or any(t.ndim != out.ndim for t in tensors)
            or any(t._original_base is out._original_base for t in tensors)):
        out._store(reference.evaluate(value, dtype))
        return
    step = max(1, INTERPRET_CHUNK // (out.size // rows))

    def rows_of(x: Any, dt: np.dtype, start: int, stop: int) -> np.ndarray:
        if isinstance(x, Tensor_) and x.shape[0] == rows:   # a tensor with the output's rows
            x = x[start:stop]
        return reference.read_leaf(x, dt)

    for start in range(0, rows, step):
        stop = min(rows, start + step)
        out[start:stop]._store(reference.evaluate(
            value, dtype, leaf=lambda x, dt: rows_of(x, dt, start, stop)))


def statement_key(d: Any, out: Any) -> tuple | None:
    """(key, tensors) of `out[:] = tree` for the tree's root op dict `d`, or None where the tree
    has no structure id (then the engine walks it). The key is the tree's interned structure,
    which leaves are the same tensor (`pattern`: None where all differ, 0 where there is one,
    else each leaf's slot), the output's slot among them (-1: not read) and the output's token;
    `tensors` are the distinct tensors in first-occurrence (slot) order.
    neonlike._hotpath.statement_key is this function in C (the engine takes it where built)."""
    sid = getattr(d, "sid", None)
    if sid is None:
        return None
    # NOTE: Tensors hash and compare as objects here (a dict never calls == between two
    # distinct tensors: their hashes differ), so no tree is built
    leaves = d.leaves
    first = dict.fromkeys(leaves)    # the tensors in first-occurrence (slot) order
    n = len(first)
    if n == len(leaves):             # every leaf a different tensor: 0, 1, .., n-1
        pattern, tensors = None, leaves
        slot = _position(leaves, out) if out in first else -1
    elif n == 1:                     # one tensor
        pattern, tensors = 0, leaves[:1]
        slot = 0 if out in first else -1
    else:
        slots = dict(zip(first, range(n)))
        pattern, tensors = tuple(map(slots.__getitem__, leaves)), tuple(first)
        slot = slots.get(out, -1)
    try:
        token = out._token
    except AttributeError:
        token = tensor_token(out)
    return (sid, pattern, slot, token), tensors


# Engine.execute's fast path in C (neonlike._hotpath.run_fast: statement_key, the runner's lookup
# and its call) where the extension was built
_run_fast = getattr(hotpath(), "run_fast", None)


def _position(leaves: tuple, t: Any) -> int:
    for i, x in enumerate(leaves):
        if x is t:
            return i
    return -1


def _shared_constants(fast: Callable[..., bool], order: list) -> Callable[..., bool]:
    """`fast` for trees whose shared subtrees hold constants. The node's constants list a shared
    subtree's once per occurrence and the program numbers them once (walk()'s order: `order`
    gives each one's number). The fast key does not see sharing (`s*2.0 + s*3.0` and
    `u + u` with `u = s*2.0` have one key), so the constants a shared program reads once must be
    equal in this tree; where they are not, the walk decides."""
    first: dict = {}
    for pos, k in enumerate(order):
        first.setdefault(k, pos)
    picks = [first[k] for k in range(len(first))]
    repeats = [(pos, first[k]) for pos, k in enumerate(order) if pos != first[k]]

    def runner(out: Any, tensors: Any, consts: tuple) -> bool:
        for i, j in repeats:
            a, b = consts[i], consts[j]
            if a is not b and not (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)):
                return False
        return fast(out, tensors, [consts[i] for i in picks])
    return runner


__all__ = ["Engine", "PLAN_OBSERVERS", "jit_after_default", "max_compiled_default", "interpret"]
