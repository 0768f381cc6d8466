"""Memoised gradient plans for TreeOp's backward (autodiff.py's plans, at the scale of one op).

Deriving an operator's input gradients by the engine's rules (autograd.rule_gradients) is the
same work every step for the same structure. The first time, the walk runs over stand-in tensors
(placeholders of the inputs', the output's and the gradient's shapes and dtypes) and what it
builds is recorded as a tape of nodes to make:

    tape:    (op, shape, attrs, left, right) ...   operands: a slot of `env` or a constant
    env:     [input values..., dy, z, made nodes...]
    outputs: per input, its gradient's slot (or None, or a number) and whether it is run at once

Later steps replay the tape over the real values (optree.trusted_node: no shape checks, no rule
lookups, no unbroadcast). A plan holds no tensor but the rules' own constants (autodiff's ones
and positions on this device's backend); plans live on the Device, at most PLANS_MAX.
"""
from __future__ import annotations

from typing import Any

from ..backends import autodiff as _AD
from ..ops import OP_INFO, Kind
from ..optree import OpTreeNode, dag_postorder, shape_of, trusted_node

PLANS_MAX = 512
UNPLANNABLE = "unplannable"    # a plan table's entry for a structure whose gradients name
#                                something other than the op's values and the rules' constants
_EW = (Kind.ELEMENTWISE, Kind.REDUCTION)


def record(rule_gradients: Any, op: Any, be: Any, xs: tuple, dy: Any, needs: tuple,
           out_lazy: bool) -> Any:
    """The plan of `op`'s backward (a tuple (tape, outputs)), or UNPLANNABLE."""
    env: list = []
    slot: dict = {}             # id(real value) -> its env slot (aliases share one)
    places: list = []
    for x in list(xs) + [dy]:
        v = x.value
        i = slot.get(id(v))
        if i is None:
            i = slot[id(v)] = len(env)
            env.append(be.empty(shape_of(v), dtype=x.dtype))
        places.append(env[i])
    n_in = len(xs)
    z_slot = len(env)
    with _AD._on(be):
        tree = op.make(be, *places[:n_in])
        z = tree if out_lazy else be.empty(shape_of(tree), dtype=op._out.dtype)
        env.append(z)
        grads = rule_gradients(tree, z, places[:n_in], places[n_in], list(needs))
    refs = {id(p): i for i, p in enumerate(env) if i != z_slot or not out_lazy}
    tape: list = []

    def ref(x: Any) -> tuple:
        if x is None or type(x) in (int, float):
            return False, x
        r = refs.get(id(x))
        if r is not None:
            return True, r
        kind = getattr(x, "_constant_key", None)
        if kind is not None and _AD._CONSTANTS.get((id(be), *kind)) is x:
            return False, x
        raise LookupError(type(x).__name__)

    outputs = []
    try:
        for g in grads:
            run = False
            if type(g) is OpTreeNode:
                for node in dag_postorder(g, stop=refs.keys()):
                    d, a, b = node
                    run = run or OP_INFO[d["op"]].kind not in _EW
                    tape.append((d["op"], d["shape"], _AD._attrs(d) or None, *ref(a), *ref(b)))
                    refs[id(node)] = len(env)
                    env.append(node)
            outputs.append((*ref(g), run))
    except LookupError:
        return UNPLANNABLE
    return tuple(tape), tuple(outputs), z_slot + 1


def replay(plan: tuple, values: list, dy: Any, z: Any) -> list:
    """The plan's gradients over real values: [(gradient or None, run at once)] per input."""
    tape, outputs, n_env = plan
    env = values + [dy, z] if len(values) + 2 == n_env else _aliased(values, dy, z, n_env)
    for op, shape, items, kx, x, ky, y in tape:
        env.append(trusted_node(op, shape, items, env[x] if kx else x, env[y] if ky else y))
    return [(env[g] if kg else g, run) for kg, g, run in outputs]


def _aliased(values: list, dy: Any, z: Any, n_env: int) -> list:
    """env's first slots where values alias (the plan numbered distinct objects, in order)."""
    env: list = []
    seen: set = set()
    for v in values + [dy]:
        if id(v) not in seen:
            seen.add(id(v))
            env.append(v)
    env.append(z)
    return env


def alias_pattern(values: list, dy: Any) -> Any:
    """None where the inputs and dy are distinct objects, else each one's first position."""
    if len(values) == 1 and values[0] is not dy:
        return None
    ids = [id(v) for v in values]
    ids.append(id(dy))
    if len(set(ids)) == len(ids):
        return None
    return tuple(ids.index(i) for i in ids)


__all__ = ["record", "replay", "alias_pattern", "PLANS_MAX", "UNPLANNABLE"]
