"""The numpy reference interpreter of the post-order stack: the living spec and the test oracle.

Each op runs its `OP_INFO[op].ref` on whole arrays in the compute dtype; nothing is fused. Every
other execution path is checked against this one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import compute_dtype
from ..ops import OP_INFO, Op
from ..optree import OpTreeNode, Operators, dag_postorder


def tree_dtype(out: Any, value: Any) -> np.dtype:
    """The compute dtype of `out[:] = value` (see neonlike.dtypes)."""
    leaves = value.leaves() if isinstance(value, OpTreeNode) else [value]
    return compute_dtype([out.dtype] + [t.dtype for t in leaves if isinstance(t, Operators)])


def evaluate(value: Any, dtype: np.dtype, leaf: Any = None) -> np.ndarray:
    """The value of a tree (or a single leaf) as an array of `dtype` and of the tree's shape.

    A node object reached twice (a shared subtree: `y + y`) is computed once. `leaf(x, dtype)`,
    where given, reads the leaves instead of `read_leaf`: an elementwise tree then takes the
    shape its leaves broadcast to (the engine evaluates a large tree by rows that way)."""
    if not isinstance(value, OpTreeNode):
        return (leaf or _leaf)(value, dtype)
    chunked, leaf = leaf is not None, leaf or _leaf
    order = dag_postorder(value)
    uses: dict = {}
    for node in order:
        for c in (node[1], node[2]):
            if type(c) is OpTreeNode:
                uses[id(c)] = uses.get(id(c), 0) + 1
    values: dict = {}
    with np.errstate(all="ignore"):
        for node in order:
            d = node[0]
            info = OP_INFO[Op(d["op"])]
            args = [_take_value(values, uses, c) if type(c) is OpTreeNode else leaf(c, dtype)
                    for c in (node[1], node[2])[:info.arity]]
            result = np.asarray(info.ref(d, *args), dtype=dtype)
            if result.shape != d["shape"] and not chunked:
                result = result.reshape(d["shape"])
            values[id(node)] = result
    return values[id(value)]


def evaluate_op(d: dict, operands: list, dtype: np.dtype) -> np.ndarray:
    """One node's op (its op_dict `d`) on operand arrays, as an array of `dtype` and d's shape
    (a plan's HOST or COMPOUND stage whose operands earlier stages computed)."""
    with np.errstate(all="ignore"):
        result = OP_INFO[Op(d["op"])].ref(d, *(np.asarray(a, dtype=dtype) for a in operands))
    return np.asarray(result, dtype=dtype).reshape(d["shape"])


def _take_value(values: dict, uses: dict, node: Any) -> np.ndarray:
    """A child's value, forgotten after its last use (intermediates do not pile up)."""
    v = values[id(node)]
    uses[id(node)] -= 1
    if not uses[id(node)]:
        del values[id(node)]
    return v


def _leaf(x: Any, dtype: np.dtype) -> np.ndarray:
    """A leaf (a Tensor or a number) as an array of `dtype`."""
    if isinstance(x, Operators):
        return x._host().astype(dtype, copy=False)
    return np.full((1, 1), x, dtype=dtype)


read_leaf = _leaf
