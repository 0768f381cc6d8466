"""The execute pipeline, written once for every device: `out[:] = tree` -> key -> program -> run.

    Engine.execute(out, value)
      -> fast key: the tree's interned structure id (optree._intern, made while the tree was
         built) + which leaves are the same tensor + the output's token; no walk. A cached
         program with a `fast` runner runs at once.
      -> plan.walk: the full signature, the tensors, constants and nodes of this call
      -> a miss: the first `jit_after - 1` runs of a structure are interpreted (the numpy
         reference, no compile wait for one-off trees); then the device compiles a Program
         (plan, render, compile, load) and the engine caches it under both keys
      -> empty tensors go to the reference interpreter (no kernel handles a zero size)
      -> program.run(out, tensors, consts, nodes)

A device supplies the compile step, `compile(key, out, value, tensors, nodes) -> Program`; a
Program has `plan`, `dtype` (its compute dtype), `run(out, tensors, consts, nodes)` and `fast`:
a runner `fast(out, tensors, consts) -> bool` for plans that need no node list, returning False
(having done nothing) where `run` must go, or None. Allocation, copies, rendering, compiling and
launching are the device's; this module imports no device library.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from ..memo import Memo
from ..optree import OpTreeNode, tensor_token
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


class Engine:
    """One device's execute pipeline over its program cache (a KernelCache keyed by signature)."""

    def __init__(self, name: str, compile: Callable[..., Any], programs: Any,
                 jit_after: int = 1) -> None:
        self.name, self.compile, self.programs = name, compile, programs
        self.jit_after = jit_after
        self.seen = Memo(f"{name}.runs_before_compile", 8192)

    def execute(self, out: Any, value: Any) -> None:
        """out[:] = value (an op-tree, a Tensor or a number)."""
        d = value[0] if isinstance(value, OpTreeNode) else None
        sid = getattr(d, "sid", None)
        key = None
        if sid is not None and not DEBUG:
            # the tree's structure was interned while it was built: its key needs no walk, only
            # which leaves are the same tensor (and whether the output is one of them)
            slots: dict = {}
            tensors: list = []
            pattern = []
            for t in d.leaves:
                slot = slots.get(id(t))
                if slot is None:
                    slot = slots[id(t)] = len(tensors)
                    tensors.append(t)
                pattern.append(slot)
            key = (sid, tuple(pattern), slots.get(id(out), -1), tensor_token(out))
            program = self.programs.get(key)
            if program is not None and program.fast is not None and \
                    program.fast(out, tensors, d.consts):
                return
        walk_key, tensors, consts, nodes = P.walk(out, value)
        program = self.programs.get(walk_key)
        if DEBUG:
            pp = value.pp() if d is not None else repr(value)
            print(f"neonlike{'' if self.name == 'cpu' else ' ' + self.name}: "
                  f"{out.name or 'out'}[:] = {pp}"
                  + (" (cache hit)" if program is not None and DEBUG >= 2 else ""))
        if program is None and self._interpret_first(walk_key):
            out._store(reference.evaluate(value, reference.tree_dtype(out, value)))
            return
        if program is None:
            program = self.compile(walk_key, out, value, tensors, nodes)
            for observe in PLAN_OBSERVERS:
                observe(program.plan, tensors, out, nodes, program.dtype)
            self.programs.put(walk_key, program)
        if key is not None:
            self.programs.alias(key, program)
        if out.size == 0 or any(t.size == 0 for t in tensors) or any(0 in n.shape for n in nodes):
            out._store(reference.evaluate(value, program.dtype))
            return
        program.run(out, tensors, consts, nodes)

    def _interpret_first(self, key: tuple) -> bool:
        """Tiered execution: a structure is interpreted its first jit_after - 1 runs."""
        if self.jit_after <= 1:
            return False
        n = self.seen.get(key, 0) + 1
        if n >= self.jit_after:
            self.seen.pop(key, None)
            return False
        self.seen.put(key, n)
        return True


__all__ = ["Engine", "PLAN_OBSERVERS", "jit_after_default"]
