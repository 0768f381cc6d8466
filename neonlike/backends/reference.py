"""The numpy reference interpreter of the post-order stack: the living spec and the test oracle.

Each op runs its `OP_INFO[op].ref` on whole arrays in the compute dtype; nothing is fused. Every
other execution path is checked against this one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import compute_dtype
from ..ops import OP_INFO, Op
from ..optree import OpTreeNode, Operators


def tree_dtype(out: Any, value: Any) -> np.dtype:
    """The compute dtype of `out[:] = value` (see neonlike.dtypes)."""
    leaves = value.leaves() if isinstance(value, OpTreeNode) else [value]
    return compute_dtype([out.dtype] + [t.dtype for t in leaves if isinstance(t, Operators)])


def evaluate(value: Any, dtype: np.dtype) -> np.ndarray:
    """The value of a tree (or a single leaf) as an array of `dtype` and of the tree's shape."""
    stack = value.traverse([]) if isinstance(value, OpTreeNode) else [value]
    values: list = []
    with np.errstate(all="ignore"):
        for item in stack:
            if isinstance(item, dict):
                info = OP_INFO[Op(item["op"])]
                args = values[len(values) - info.arity:]
                del values[len(values) - info.arity:]
                result = np.asarray(info.ref(item, *args), dtype=dtype)
                if result.shape != item["shape"]:
                    result = result.reshape(item["shape"])
                values.append(result)
            elif isinstance(item, Operators):
                values.append(item._host().astype(dtype, copy=False))
            else:
                values.append(np.full((1, 1), item, dtype=dtype))
    return values[0]
