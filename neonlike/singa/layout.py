"""NCHW values held in neon's CHWN layout between the operators that run in it.

Convolution and pooling run in neon's layouts, channels outermost and the batch innermost: a
(C, H, W, N) tensor. SINGA's tensors are NCHW. Rather than transposing each result back to NCHW
and the next operator's input forward again, an operator hands its CHWN result on as the lazy
tree `nchw(t)`: the transpose of t to NCHW, which is what SINGA sees and what any reader that
materialises it gets (one be.copy_transpose: singa_wrap.run).

An operator that runs in CHWN itself (convolution, pooling, batch norm, cat along the channels)
asks `chwn(value)` for its input. An elementwise tree commutes with a permutation of its
operands' axes, so the transposes of the tree's leaves move above it: relu(nchw(t)),
batch norm's arithmetic over such values, the sum of two such gradients all come back as trees
over the CHWN tensors, which the operator runs in CHWN. A leaf that broadcasts (a (1, C, 1, 1)
scale, a number) is permuted by a reshape; a full NCHW tensor among the leaves, or any other
node, and the answer is None: the operator transposes the materialised NCHW value, as before.
"""
from __future__ import annotations

from typing import Any

from ..backends.autodiff import _attrs
from ..ops import OP_INFO, Kind, Op
from ..optree import OpTreeNode, build, shape_of, trusted_node
from .singa_wrap import run

TO_NCHW = (3, 0, 1, 2)   # (C, H, W, N) -> (N, C, H, W)
TO_CHWN = (1, 2, 3, 0)   # (N, C, H, W) -> (C, H, W, N)
_NO = object()           # "cannot be moved into CHWN without a copy"


def nchw(t: Any) -> OpTreeNode:
    """The NCHW tree over a (C, H, W, N) tensor or tree (a CTensor value)."""
    C, H, W, N = t.shape
    return trusted_node(Op.TRANSPOSE, (N, C, H, W), _AXES, t, None)


_AXES = (("axes", TO_NCHW),)


def chwn(value: Any) -> Any:
    """The (C, H, W, N) tensor or elementwise tree equal to the NCHW `value` transposed, where
    no copy is needed for it; None otherwise."""
    if type(value) is not OpTreeNode:
        return None
    out = _sink(value, {})
    return None if out is _NO else out


def take_chwn(x: Any) -> Any:
    """CTensor x's values as a (C, H, W, N) engine tensor where `chwn` finds them (a tree is run
    once, and x then holds its transpose, for other readers); None where x is not held so."""
    v = chwn(x.value)
    if type(v) is OpTreeNode:
        v = run(x.dev, v, x.dtype)
        x.value = nchw(v)
    return v


def as_chwn(x: Any) -> Any:
    """CTensor x's NCHW values as a (C, H, W, N) engine tensor: the one it is held as
    (take_chwn), else a transposed copy of its value."""
    t = take_chwn(x)
    return chwn_copy(x) if t is None else t


def chwn_copy(x: Any) -> Any:
    """A (C, H, W, N) copy of CTensor x's NCHW values."""
    return permuted(x.materialize(), TO_CHWN, x.dev.alloc)


def permuted(value: Any, perm: tuple, alloc: Any) -> Any:
    """A C-ordered copy of the engine tensor `value` with its axes permuted by `perm`
    (be.copy_transpose, a tiled kernel on the CPU for these rotations of the axes) into
    `alloc(shape, dtype)` (a device's Device.alloc)."""
    out = alloc(tuple(value.shape[p] for p in perm), value.dtype)
    value.backend.copy_transpose(value, out, axes=perm)
    return out


def _sink(x: Any, memo: dict) -> Any:
    if type(x) is not OpTreeNode:
        return x if x is None or type(x) in (int, float) else _broadcast_leaf(x)
    hit = memo.get(id(x))
    if hit is not None:
        return hit
    d = x[0]
    op = d["op"]
    if op is Op.TRANSPOSE:
        out = x[1] if d["axes"] == TO_NCHW else _NO
    elif OP_INFO[op].kind is Kind.ELEMENTWISE:
        a = _sink(x[1], memo)
        b = _sink(x[2], memo) if a is not _NO and OP_INFO[op].arity == 2 else None
        out = _NO if a is _NO or b is _NO else build(op, a, b, **dict(_attrs(d)))
    else:
        out = _NO
    memo[id(x)] = out
    return out


def _broadcast_leaf(t: Any) -> Any:
    """A tensor leaf that broadcasts against NCHW values, permuted to CHWN by a view: its axes
    of size > 1 must keep their order ((1, C, 1, 1) -> (C, 1, 1, 1)); else _NO."""
    shape = shape_of(t)
    if shape is None or len(shape) > 4:
        return _NO
    if all(n == 1 for n in shape):
        return t
    full = (1,) * (4 - len(shape)) + tuple(shape)
    big = [i for i in TO_CHWN if full[i] != 1]
    if big != sorted(big):
        return _NO
    try:
        return t.reshape(tuple(full[i] for i in TO_CHWN))
    except ValueError:
        return _NO


__all__ = ["TO_NCHW", "TO_CHWN", "nchw", "chwn", "take_chwn", "as_chwn", "chwn_copy", "permuted"]
