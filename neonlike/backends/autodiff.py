"""Autodiff over op-trees: gradients as op-trees, built by one reverse walk over the tree's DAG.

    ad = Autodiff(f, be)                       # f: an op-tree or a Tensor; be: gen_backend(...)
    dx, dy = ad.get_grad_op_tree([x, y])       # op-trees: nothing has run yet
    gx = ad.get_grad_tensor([x])[0]            # executed into new tensors (fused kernels)
    ad.back_prop_grad([x], [gx_buffer])        # executed into buffers you own

How (neon's algorithm, without its failures):
- The tree is walked once in post-order; a subtree reachable twice (`y + y`, a variable used in
  several places) is one node of a DAG, visited once, so its gradient is built once and the
  gradient's size grows linearly with the DAG's (neon re-differentiated every use).
- In reverse order each node's accumulated gradient `dz` goes through its op's rule (`RULES`,
  one row per op) to its children; an increment is summed back over the axes it was broadcast
  along (`unbroadcast`), and increments to the same child are added.
- Gradients are op-trees over the forward tree's own nodes and tensors, so they run through the
  same fused kernels, and Autodiff of a gradient gives second derivatives.
- Ops whose derivative is zero almost everywhere (comparisons, sign, rounding, argmax, onehot)
  contribute nothing; an op without a rule raises NotImplementedError naming it.
- What cannot be differentiated is refused by name: an op_tree that is not an op-tree or a Tensor
  and a `be` that is not a backend (TypeError); a gradient asked for something that is not a
  Tensor (an op-tree, an array) and a buffer that is not one (TypeError); one buffer given for two
  tensors, or overlapping views of one (ValueError, else only the last gradient would survive);
  any use after cleanup() (RuntimeError). A tensor the tree does not read gets exact zeros of its
  dtype (even where it holds inf or nan), as in neon (whose tests rely on it), with an
  UnusedTensorWarning naming it.
"""
from __future__ import annotations

import contextlib
import math
import sys
import types
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .. import compound as C
from ..memo import Memo, memoized
from ..ops import LN2, OP_INFO, SAFELOG_MIN, Kind, Op
from ..optree import OpTreeNode, Operators, build, shape_of, trusted_node
from ..optree import dag_postorder as _dag_postorder
from ..tensor import Tensor

Grad = Any  # an op-tree, a Tensor or a Python number


# ---------------------------------------------------------------- arithmetic on gradients
def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def add(a: Grad, b: Grad) -> Grad:
    if _num(a) and _num(b):
        return a + b
    if _num(a) and a == 0:
        return b
    if _num(b) and b == 0:
        return a
    return build(Op.ADD, a, b)


def mul(a: Grad, b: Grad) -> Grad:
    if _num(a) and _num(b):
        return a * b
    if _num(a) and a == 1:
        return b
    if _num(b) and b == 1:
        return a
    return build(Op.MUL, a, b)


def neg(a: Grad) -> Grad:
    return -a if _num(a) else build(Op.NEG, a, None)


def div(a: Grad, b: Grad) -> Grad:
    if _num(a) and _num(b):
        return a / b
    return build(Op.DIV, a, b)


def unary(op: Op, a: Grad) -> Grad:
    return build(op, a, None)


def unbroadcast(g: Grad, shape: tuple, logical: tuple) -> Grad:
    """The increment `g`, which stands for a gradient of shape `logical` (g itself may be smaller
    and broadcast to it, or a number), summed over the axes along which `shape` was broadcast to
    `logical` (numpy's rules: missing leading axes and axes of size 1), in `shape`'s rank.

    Where g already has size 1 on such an axis it is constant along it, so the sum is g times
    the axis' extent."""
    n = len(logical)
    padded = (1,) * (n - len(shape)) + tuple(shape)
    gs = (1,) * n if _num(g) else (1,) * (n - len(shape_of(g))) + tuple(shape_of(g))
    axes = [i for i in range(n) if padded[i] == 1 and logical[i] != 1]
    summed = tuple(i for i in axes if gs[i] != 1)
    scale = math.prod(logical[i] for i in axes if gs[i] == 1)
    if summed:
        g = build(Op.SUM, g, None, axis=tuple(i - (n - len(shape_of(g))) for i in summed),
                  keepdims=True)
    if scale != 1:
        g = mul(g, float(scale))
    if not _num(g) and len(shape_of(g)) != len(shape):
        if math.prod(shape_of(g)) == math.prod(shape):
            g = build(Op.RESHAPE, g, None, newshape=tuple(shape))
        elif len(shape_of(g)) > len(shape):   # smaller, of higher rank: its extra axes are 1
            g = build(Op.RESHAPE, g, None, newshape=tuple(shape_of(g)[-len(shape):]))
        # else: g is smaller than `shape` and broadcasts to it
    return g


# ---------------------------------------------------------------- the rules
# rule(x, y, z, dz, attrs) -> (dx, dy): x, y the operands (trees, tensors or numbers; y None for
# unary ops), z the node itself, dz its gradient; None where an operand gets nothing.
Rule = Callable[[Any, Any, Any, Grad, dict], tuple]


def _u(f: Callable[[Any, Any, Grad], Grad]) -> Rule:
    return lambda x, y, z, dz, d: (f(x, z, dz), None)


def _zero(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    return None, None


def _dot(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    dz = _tree(dz, z)
    return build(Op.DOT, dz, _t(y)), build(Op.DOT, _t(x), dz)


def _t(x: Any) -> Any:
    return build(Op.TRANSPOSE, x, None, axes=None)


def _transpose(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    inverse = tuple(int(i) for i in np.argsort(d["axes"]))
    return build(Op.TRANSPOSE, _tree(dz, z), None, axes=inverse), None


def _tree(dz: Grad, z: Any) -> Grad:
    """dz as an operand of a structural op or a dot, which do not broadcast."""
    return _full_shape(dz, shape_of(z))


def _full_shape(g: Grad, shape: tuple) -> Grad:
    """A number, or a tree smaller than `shape` (a sum's gradient), as a tree of `shape`."""
    if not _num(g) and tuple(shape_of(g)) == tuple(shape):
        return g
    return _full(g, shape)


def _full(value: Grad, shape: tuple) -> Grad:
    """`value` (a number, or a tree broadcasting to `shape`) as a tree of `shape`."""
    return build(Op.MUL, _ones(shape), value)


def _reshape(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    return build(Op.RESHAPE, _tree(dz, z), None, newshape=shape_of(x)), None


def _sum(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    # keepdims=False: put the reduced axes back so that dz broadcasts against x
    if not d["keepdims"] and not _num(dz):
        kept = tuple(1 if i in d["axis"] else n for i, n in enumerate(shape_of(x)))
        dz = build(Op.RESHAPE, dz, None, newshape=kept)
    return dz, None


def _extreme(op: Op) -> Rule:
    arg = Op.ARGMAX if op is Op.MAX else Op.ARGMIN

    def rule(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
        """The gradient goes to the first extreme along the reduced axes (numpy's argmax order);
        several axes are reduced one after another (the last first)."""
        shape, axes = shape_of(x), d["axis"]
        if len(axes) > 1 and len(axes) < len(shape):
            inner = build(op, x, None, axis=(axes[-1],), keepdims=True)
            outer = build(op, inner, None, axis=axes[:-1], keepdims=True)
            dz = _sum(x, None, z, dz, d)[0]
            d_inner = _extreme(op)(inner, None, outer, dz, {"axis": axes[:-1], "keepdims": True})[0]
            return _extreme(op)(x, None, inner, d_inner, {"axis": (axes[-1],), "keepdims": True})
        dz = _sum(x, None, z, dz, d)[0]
        if len(axes) == len(shape):
            where = build(arg, x, None, axis=None)
            first = build(Op.EQ, _iota(shape, None), where)
        else:
            where = build(arg, x, None, axis=axes[0], keepdims=True)
            first = build(Op.EQ, _iota(shape, axes[0]), where)
        return mul(dz, first), None
    return rule


_CONSTANTS = Memo("autodiff.constants", 64)  # (id(backend), kind, shape, detail) -> Tensor
_MAKERS: dict = {}         # kind -> detail-taking maker of its values
_BACKEND: list = [None]    # the backend of the Autodiff being built (constants live on it)


def _constant(kind: str, shape: tuple, detail: Any) -> Any:
    """A constant tensor (ones, positions) on the current Autodiff's backend, made once per
    (backend, kind, shape, detail) and kept (at most 64; a tensor keeps its backend alive); it
    carries `_constant_key`, (kind, shape, detail), by which a gradient plan names it."""
    be = _BACKEND[0]
    if be is None:
        from .. import NervanaObject
        be = NervanaObject.be
    key = (id(be), kind, shape, detail)
    t = _CONSTANTS.get(key)
    if t is None:
        values = _MAKERS[kind](shape, detail)
        if kind == "zeros":   # detail: the dtype of the tensor they are the gradient of
            dtype = np.dtype(detail)
        else:                 # float32 holds ones and positions exactly below 2 ** 24
            dtype = np.float32 if values.size < 2 ** 24 else np.float64
        t = _CONSTANTS.put(key, be.array(values, dtype=dtype))
        t._constant_key = (kind, shape, detail)
    return t


def _ones(shape: tuple) -> Any:
    return _constant("ones", shape, None)


def _iota(shape: tuple, axis: int | None) -> Any:
    """Element positions: along `axis` (broadcasting over the others), or flat C-order positions
    for axis None."""
    return _constant("iota", shape, axis)


def _make_iota(shape: tuple, axis: int | None) -> np.ndarray:
    if axis is None:
        return np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return np.arange(shape[axis], dtype=np.float64).reshape(view)


_MAKERS.update(ones=lambda shape, detail: np.ones(shape), iota=_make_iota,
               zeros=lambda shape, detail: np.zeros(shape))


def _no_gradient(t: Any) -> Any:
    """The gradient of a tensor the tree does not depend on: an op-tree of exact zeros of t's shape
    and dtype (neon's `t * 0.` gave nan where t held inf or nan)."""
    return build(Op.ADD, _constant("zeros", tuple(t.shape), t.dtype), 0.0)


def _pow(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    dx = mul(dz, mul(y, build(Op.POW, x, add(y, -1.0) if not _num(y) else y - 1.0)))
    dy = None if _num(y) else mul(dz, mul(z, unary(Op.LOG, x)))
    return dx, dy


def _minmax(op: Op) -> Rule:
    def rule(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
        # ties go to the left operand (torch.maximum splits them; neon gave both the gradient)
        left = build(Op.GE if op is Op.MAXIMUM else Op.LE, x, y)
        right = build(Op.LT if op is Op.MAXIMUM else Op.GT, x, y)
        return mul(dz, left), mul(dz, right)
    return rule


def _concat(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    axis, g = d["axis"], _tree(dz, z)
    na, nz = shape_of(x)[axis], shape_of(z)[axis]

    def part(lo: int, hi: int) -> Any:
        index = tuple(slice(lo, hi) if i == axis else slice(None) for i in range(len(shape_of(z))))
        return build(Op.SLICE, g, None, index=index)
    return part(0, na), part(na, nz)


def _tile(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    reps, xs = d["reps"], shape_of(x)
    xs = (1,) * (len(reps) - len(xs)) + tuple(xs)
    split = tuple(v for r, n in zip(reps, xs) for v in (r, n))
    g = build(Op.RESHAPE, _tree(dz, z), None, newshape=split)
    g = build(Op.SUM, g, None, axis=tuple(range(0, len(split), 2)), keepdims=False)
    return build(Op.RESHAPE, g, None, newshape=shape_of(x)), None


def _zeros(shape: tuple) -> Grad:
    return _full(0.0, shape)


def _place(g: Grad, axis: int, n: int, picked: range) -> Grad:
    """g, whose `axis` holds the elements at positions `picked` of an axis of length n, spread
    out to length n: g's values in their places, zeros elsewhere (one slice's gradient)."""
    gs = shape_of(g)
    at = gs[:axis], gs[axis + 1:]
    m = len(picked)
    if m == 0:
        return _zeros(at[0] + (n,) + at[1])
    step = picked.step
    if step < 0:   # descending positions: reverse g, then place it as an ascending run
        flip = tuple(slice(None, None, -1) if i == axis else slice(None) for i in range(len(gs)))
        g, picked, step = build(Op.SLICE, g, None, index=flip), picked[::-1], -step
    if step > 1 and m > 1:   # interleave step-1 zeros after each value, then cut the tail
        g = build(Op.RESHAPE, g, None, newshape=at[0] + (m, 1) + at[1])
        g = build(Op.CONCAT, g, _zeros(at[0] + (m, step - 1) + at[1]), axis=axis + 1)
        g = build(Op.RESHAPE, g, None, newshape=at[0] + (m * step,) + at[1])
        span = (m - 1) * step + 1
        cut = tuple(slice(0, span) if i == axis else slice(None) for i in range(len(gs)))
        g = build(Op.SLICE, g, None, index=cut)
    else:
        span = m
    lo = picked[0]
    if lo:
        g = build(Op.CONCAT, _zeros(at[0] + (lo,) + at[1]), g, axis=axis)
    if n - lo - span:
        g = build(Op.CONCAT, g, _zeros(at[0] + (n - lo - span,) + at[1]), axis=axis)
    return g


def _slice(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    """A slice's gradient lands in the slice's place, zero elsewhere (axis by axis)."""
    g, shape = _tree(dz, z), shape_of(x)
    for axis, spec in enumerate(d["index"]):
        picked = range(*spec)
        if len(picked) != shape[axis] or picked.step != 1:
            g = _place(g, axis, shape[axis], picked)
    return g, None


def _take(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    """take's gradient adds dz's entries into the taken positions (repeats add up): a product
    with the indices' one-hot matrix (negative indices count from the end, as numpy's)."""
    axis, xs, zs = d["axis"], shape_of(x), shape_of(z)
    n, m = xs[axis], zs[axis]
    index = add(y, mul(build(Op.LT, y, 0.0), float(n)))
    hot = build(Op.ONEHOT, index, None, depth=n, axis=0)             # (n, m)
    g = _tree(dz, z)
    rest = zs[:axis] + zs[axis + 1:]
    front = (axis,) + tuple(i for i in range(len(zs)) if i != axis)  # the taken axis first
    if front != tuple(range(len(zs))):
        g = build(Op.TRANSPOSE, g, None, axes=front)
    g = build(Op.RESHAPE, g, None, newshape=(m, math.prod(rest)))
    g = build(Op.DOT, hot, g)                                         # (n, rest)
    g = build(Op.RESHAPE, g, None, newshape=(n,) + rest)
    if front != tuple(range(len(zs))):
        g = build(Op.TRANSPOSE, g, None, axes=tuple(int(i) for i in np.argsort(front)))
    return g, None


def _cast(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    return (dz if d["dtype"].kind == "f" else None), None


def _sqrt(a: Grad) -> Grad:
    return unary(Op.SQRT, a)


# convolution and pooling (compound.py): conv's two adjoints are conv_bprop (input) and
# conv_update (filters); the three are bilinear and each one's adjoints are two of the three
def _conv(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    dz, g = _tree(dz, z), C.geometry_kwargs(d)
    return (build(Op.CONV_BPROP, dz, y, in_dhw=shape_of(x)[1:4], **g),
            build(Op.CONV_UPDATE, x, dz, window=shape_of(y)[1:4], **g))


def _conv_bprop(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    dz, g = _tree(dz, z), C.geometry_kwargs(d)
    return build(Op.CONV, dz, y, **g), build(Op.CONV_UPDATE, dz, x, window=shape_of(y)[1:4], **g)


def _conv_update(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    dz, g = _tree(dz, z), C.geometry_kwargs(d)
    return build(Op.CONV_BPROP, y, dz, in_dhw=shape_of(x)[1:4], **g), build(Op.CONV, x, dz, **g)


def _pool(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    return build(Op.POOL_BPROP, x, _tree(dz, z), **C.geometry_kwargs(d)), None


def _pool_bprop(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    # routing by x is constant almost everywhere; the error's adjoint: average pooling is
    # linear with adjoint pool(dz); max pooling's would gather dz at each window's argmax
    if d["pool_op"] != "avg":
        raise NotImplementedError("no gradient rule for the error operand of max pool_bprop "
                                  "(the second derivative of max pooling)")
    return None, build(Op.POOL, _tree(dz, z), None, **C.geometry_kwargs(d))


RULES: dict[Op, Rule] = {
    Op.NEG: _u(lambda x, z, dz: neg(dz)),
    Op.ABS: _u(lambda x, z, dz: mul(dz, unary(Op.SGN, x))),
    Op.SQRT: _u(lambda x, z, dz: div(mul(dz, 0.5), z)),
    Op.SQR: _u(lambda x, z, dz: mul(mul(dz, 2.0), x)),
    Op.EXP: _u(lambda x, z, dz: mul(dz, z)),
    Op.EXP2: _u(lambda x, z, dz: mul(mul(dz, z), LN2)),
    Op.LOG: _u(lambda x, z, dz: div(dz, x)),
    Op.LOG2: _u(lambda x, z, dz: div(dz, mul(x, LN2))),
    Op.SAFELOG: _u(lambda x, z, dz: div(mul(dz, build(Op.GT, x, SAFELOG_MIN)),
                                        build(Op.MAXIMUM, x, SAFELOG_MIN))),
    Op.SIG: _u(lambda x, z, dz: mul(dz, mul(z, add(1.0, neg(z))))),
    Op.SIG2: _u(lambda x, z, dz: mul(mul(dz, mul(z, add(1.0, neg(z)))), LN2)),
    Op.TANH: _u(lambda x, z, dz: mul(dz, add(1.0, neg(mul(z, z))))),
    Op.TANH2: _u(lambda x, z, dz: mul(mul(dz, add(1.0, neg(mul(z, z)))), LN2)),
    Op.RECIPROCAL: _u(lambda x, z, dz: neg(mul(dz, mul(z, z)))),
    Op.RELU: _u(lambda x, z, dz: mul(dz, build(Op.GT, x, 0.0))),
    Op.SOFTPLUS: _u(lambda x, z, dz: mul(dz, unary(Op.SIG, x))),
    Op.SIN: _u(lambda x, z, dz: mul(dz, unary(Op.COS, x))),
    Op.COS: _u(lambda x, z, dz: neg(mul(dz, unary(Op.SIN, x)))),
    Op.TAN: _u(lambda x, z, dz: mul(dz, add(1.0, mul(z, z)))),
    Op.ASIN: _u(lambda x, z, dz: div(dz, _sqrt(add(1.0, neg(mul(x, x)))))),
    Op.ACOS: _u(lambda x, z, dz: neg(div(dz, _sqrt(add(1.0, neg(mul(x, x))))))),
    Op.ATAN: _u(lambda x, z, dz: div(dz, add(1.0, mul(x, x)))),
    Op.SINH: _u(lambda x, z, dz: mul(dz, unary(Op.COSH, x))),
    Op.COSH: _u(lambda x, z, dz: mul(dz, unary(Op.SINH, x))),
    Op.ASINH: _u(lambda x, z, dz: div(dz, _sqrt(add(mul(x, x), 1.0)))),
    Op.ACOSH: _u(lambda x, z, dz: div(dz, _sqrt(add(mul(x, x), -1.0)))),
    Op.ATANH: _u(lambda x, z, dz: div(dz, add(1.0, neg(mul(x, x))))),
    Op.ADD: lambda x, y, z, dz, d: (dz, dz),
    Op.SUB: lambda x, y, z, dz, d: (dz, neg(dz)),
    Op.MUL: lambda x, y, z, dz, d: (mul(dz, y), mul(dz, x)),
    Op.DIV: lambda x, y, z, dz, d: (div(dz, y), neg(div(mul(dz, z), y))),
    Op.POW: _pow,
    Op.MAXIMUM: _minmax(Op.MAXIMUM),
    Op.MINIMUM: _minmax(Op.MINIMUM),
    Op.SUM: _sum,
    Op.MAX: _extreme(Op.MAX),
    Op.MIN: _extreme(Op.MIN),
    Op.DOT: _dot,
    Op.TRANSPOSE: _transpose,
    Op.RESHAPE: _reshape,
    Op.SLICE: _slice,
    Op.TAKE: _take,
    Op.CONCAT: _concat,
    Op.TILE: _tile,
    Op.CAST: _cast,
    Op.CONV: _conv,
    Op.CONV_BPROP: _conv_bprop,
    Op.CONV_UPDATE: _conv_update,
    Op.POOL: _pool,
    Op.POOL_BPROP: _pool_bprop,
}
# zero almost everywhere: no contribution
for _op in (Op.SGN, Op.FINITE, Op.RINT, Op.CEIL, Op.FLOOR, Op.NOT, Op.EQ, Op.NE, Op.LT, Op.LE,
            Op.GT, Op.GE, Op.AND, Op.OR, Op.XOR, Op.ARGMAX, Op.ARGMIN, Op.ONEHOT):
    RULES[_op] = _zero


# ---------------------------------------------------------------- views
# A leaf may be a view of a tensor asked about (x[0], x.T, a reshape): both have the same
# `_original_base`, and the device tells where each element lies in that base's memory
# (Tensor._layout: offset and strides in elements). A view's elements are distinct, so its
# gradient reaches the tensor by a gather, not a scatter-add.
def _addresses(layout: tuple, shape: tuple) -> np.ndarray:
    offset, strides = layout
    addr = np.full(shape, offset, dtype=np.int64)
    for axis, (n, step) in enumerate(zip(shape, strides)):
        along = [1] * len(shape)
        along[axis] = n
        addr = addr + (np.arange(n, dtype=np.int64) * step).reshape(along)
    return addr.ravel()


@memoized("autodiff.gather_index", 64)
def _gather_index(detail: tuple) -> np.ndarray | None:
    """For each element of the tensor (C order), the flat index of the view's element at the same
    address, or the view's size where there is none; None where they share no element."""
    view_shape, view_layout, shape, layout = detail
    view, mine = _addresses(view_layout, view_shape), _addresses(layout, shape)
    order = np.argsort(view, kind="stable")
    sorted_view = view[order]
    k = np.minimum(np.searchsorted(sorted_view, mine), max(view.size - 1, 0))
    hit = sorted_view[k] == mine if view.size else np.zeros(mine.size, dtype=bool)
    if not hit.any():
        return None
    return np.where(hit, order[k], view.size).astype(np.int64)


_MAKERS["gather"] = lambda shape, detail: _gather_index(detail).reshape(1, -1).astype(np.float64)


def _view_detail(view: Any, t: Any) -> tuple:
    lv, lt = view._layout(), t._layout()
    if lv is None or lt is None:
        raise NotImplementedError(
            f"Autodiff: the tree reads a tensor of shape {view.shape} that shares memory with the "
            f"tensor of shape {t.shape} asked about, and {type(t).__name__} does not say where its "
            f"elements lie (Tensor._layout); ask for the gradient of the tensor the tree reads")
    return tuple(view.shape), lv, tuple(t.shape), lt


def _embed(g: Grad, view: Any, t: Any) -> Grad | None:
    """The gradient `g` of `view` as a gradient of `t` (same memory): in the view's places, zero
    elsewhere; None where they share no element."""
    detail = _view_detail(view, t)
    where = _gather_index(detail)
    if where is None:
        return None
    shape, n = tuple(t.shape), math.prod(view.shape)
    grid = np.arange(n)
    if where.size == n and np.array_equal(where, grid):             # a reshape of t
        return g if tuple(view.shape) == shape else build(Op.RESHAPE, g, None, newshape=shape)
    if len(shape) == 2 and tuple(view.shape) == shape[::-1] and \
            np.array_equal(where, grid.reshape(shape[::-1]).T.ravel()):  # t.T
        return build(Op.TRANSPOSE, g, None, axes=None)
    flat = build(Op.RESHAPE, g, None, newshape=(1, n))
    padded = build(Op.CONCAT, flat, _zeros((1, 1)), axis=1)          # index n: the zero
    gathered = build(Op.TAKE, padded, _constant("gather", shape, detail), axis=1)
    return build(Op.RESHAPE, gathered, None, newshape=shape)


# ---------------------------------------------------------------- the walk
def gradients(root: Any, seed: Grad, nodes: list | None = None) -> dict:
    """{id(tensor): (tensor, gradient)} for every Tensor under `root`, given d(root) = seed
    (`nodes`: root's _dag_postorder, where the caller has it)."""
    grads: dict = {}
    leaves: dict = {}
    if not isinstance(root, OpTreeNode):
        if isinstance(root, Operators):
            leaves[id(root)] = (root, seed)
        return leaves
    grads[id(root)] = seed
    for node in reversed(_dag_postorder(root) if nodes is None else nodes):
        dz = grads.pop(id(node), None)
        if dz is None:
            continue
        d, x, y = node
        op = d["op"]
        rule = RULES.get(op)
        if rule is None:
            raise NotImplementedError(f"Autodiff: no gradient rule for op '{op}' "
                                      f"(in a node of shape {d['shape']})")
        incs = rule(x, y, node, dz, d)
        elementwise = OP_INFO[op].kind is Kind.ELEMENTWISE
        for child, inc in zip((x, y), incs):
            if inc is None or child is None or not isinstance(child, Operators):
                continue
            # an elementwise op's increments stand for gradients of the node's shape; every
            # other rule gives its operand's own shape (possibly smaller, broadcasting)
            logical = d["shape"] if elementwise else shape_of(child)
            inc = unbroadcast(inc, shape_of(child), logical)
            if isinstance(child, OpTreeNode):
                grads[id(child)] = add(grads[id(child)], inc) if id(child) in grads else inc
            else:
                old = leaves.get(id(child))
                leaves[id(child)] = (child, inc if old is None else add(old[1], inc))
    return leaves


# ---------------------------------------------------------------- gradient plans
# Building gradients is the same work for every tree of one structure, so the first build is
# recorded as a plan: a tape of nodes to make, whose operands name the forward tree's nodes ("n",
# post-order position), its tensors ("t", first-use order), the seed ("e"), earlier tape entries
# ("g"), constants by kind ("k") or numbers. A later tree with the same key (ops, attrs, shapes,
# constants, which operand is which node or tensor; tensors' shapes and dtypes) replays the tape
# over its own nodes and tensors. Plans hold no tensor; at most PLANS_MAX are kept.
PLANS_MAX = 256
_PLANS = Memo("autodiff.plans", PLANS_MAX)
PLAN_STATS = {"hits": 0, "misses": 0, "unplanned": 0}


class _Unplannable(Exception):
    """A gradient reads an object a plan cannot name (then the gradients are built every time)."""


def _attrs(d: dict) -> tuple:
    """A node's attributes (its op_dict less op and shape), in the order its op's shape rule gave."""
    return tuple(item for item in d.items() if item[0] != "op" and item[0] != "shape")


def _signature(root: Any, seed: Grad) -> tuple:
    """(key, nodes, tensors) of a tree: its structure, its DAG post-order, its distinct tensors."""
    nodes = _dag_postorder(root)
    position = {id(n): i for i, n in enumerate(nodes)}
    tensors: list = []
    found: dict = {}

    def ref(x: Any) -> Any:
        if x is None:
            return None
        i = position.get(id(x))
        if i is not None:
            return "n", i
        if isinstance(x, Operators):
            j = found.get(id(x))
            if j is None:
                j = found[id(x)] = len(tensors)
                tensors.append(x)
            return "t", j
        return "c", type(x), x, math.copysign(1.0, x) if x == 0 else 0   # -0.0 is not 0.0

    parts = tuple((d["op"], d["shape"], _attrs(d), ref(x), ref(y)) for d, x, y in nodes)
    seed_ref = ref(seed) if _num(seed) or id(seed) in position or id(seed) in found \
        else ("e", tuple(shape_of(seed)))
    key = (parts, tuple((t.shape, t.dtype) for t in tensors), seed_ref)
    return key, nodes, tensors


def _record(leaves: dict, nodes: list, tensors: list, seed: Grad) -> tuple:
    """The plan of `leaves` (gradients() of a tree): (tape, outputs)."""
    refs = {id(n): ("n", i) for i, n in enumerate(nodes)}
    refs.update((id(t), ("t", j)) for j, t in enumerate(tensors))
    if not _num(seed):
        refs.setdefault(id(seed), ("e",))
    tape: list = []
    made: dict = {}
    be = _BACKEND[0]

    def ref(x: Any) -> Any:
        if x is None or _num(x):
            return x
        r = refs.get(id(x)) or made.get(id(x))
        if r is not None:
            return r
        kind = getattr(x, "_constant_key", None)
        if kind is not None and _CONSTANTS.get((id(be), *kind)) is x:
            return ("k", *kind)
        raise _Unplannable(type(x).__name__)

    outputs = []
    for tensor, g in leaves.values():
        if isinstance(g, OpTreeNode):
            for node in _dag_postorder(g, stop=refs.keys() | made.keys()):
                d, x, y = node
                tape.append((d["op"], d["shape"], _attrs(d) or None, ref(x), ref(y)))
                made[id(node)] = ("g", len(tape) - 1)
        outputs.append((refs[id(tensor)][1], ref(g)))
    return tuple(tape), tuple(outputs)


def _replay(plan: tuple, nodes: list, tensors: list, seed: Grad) -> dict:
    tape, outputs = plan
    made: list = []

    def value(r: Any) -> Any:
        if type(r) is not tuple:
            return r                       # a number, or None
        tag = r[0]
        if tag == "g":
            return made[r[1]]
        if tag == "n":
            return nodes[r[1]]
        if tag == "t":
            return tensors[r[1]]
        if tag == "e":
            return seed
        return _constant(*r[1:])

    for op, shape, items, x, y in tape:
        made.append(trusted_node(op, shape, items, value(x), value(y)))
    return {id(tensors[j]): (tensors[j], value(g)) for j, g in outputs}


def leaf_gradients(root: Any, seed: Grad) -> dict:
    """gradients(root, seed), from the memoised plan of root's structure where there is one."""
    if not isinstance(root, OpTreeNode):
        return gradients(root, seed)
    try:
        key, nodes, tensors = _signature(root, seed)
        plan = _PLANS.get(key)
    except TypeError:                      # an unhashable attribute: no plan
        PLAN_STATS["unplanned"] += 1
        return gradients(root, seed)
    if plan is not None:
        PLAN_STATS["hits"] += 1
        return _replay(plan, nodes, tensors, seed)
    PLAN_STATS["misses"] += 1
    leaves = gradients(root, seed, nodes)
    try:
        plan = _record(leaves, nodes, tensors, seed)
    except _Unplannable:
        PLAN_STATS["unplanned"] += 1
        return leaves
    _PLANS.put(key, plan)
    return leaves


def clear_plans() -> None:
    """Forget every gradient plan and zero PLAN_STATS."""
    _PLANS.clear()
    PLAN_STATS.update(hits=0, misses=0, unplanned=0)


@contextlib.contextmanager
def _on(be: Any) -> Iterator[None]:
    """Constants made meanwhile live on `be`."""
    old, _BACKEND[0] = _BACKEND[0], be
    try:
        yield
    finally:
        _BACKEND[0] = old


class UnusedTensorWarning(UserWarning):
    """A gradient was asked for a tensor the op-tree does not read: it is zeros."""


def _describe(x: Any) -> str:
    """What an argument is, for an error message: its type (a numpy array's shape too)."""
    if isinstance(x, np.ndarray):
        return f"numpy.ndarray of shape {x.shape}"
    if isinstance(x, types.ModuleType):
        return f"the module {x.__name__}"
    if isinstance(x, type):
        return f"the class {x.__module__}.{x.__qualname__}"
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _label(t: Any) -> str:
    return f"tensor {t.name!r} of shape {t.shape}" if t.name else \
        f"an unnamed tensor of shape {t.shape}"


def _outside() -> int:
    """The stacklevel of the first caller outside this module (where a warning should point)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    return level


def _check_tensors(tensors: Any) -> list:
    if isinstance(tensors, Operators):
        raise TypeError(f"Autodiff: pass a list of Tensors, got a single {_describe(tensors)}")
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if isinstance(t, OpTreeNode):
            raise TypeError(f"Autodiff: gradients are taken with respect to Tensors, got "
                            f"{_describe(t)} at tensors[{i}]: the op-tree {_brief(t)} of shape "
                            f"{t.shape}; an op-tree has no gradient of its own, ask for the "
                            f"Tensors it reads")
        if not isinstance(t, Tensor):
            raise TypeError(f"Autodiff: gradients are taken with respect to Tensors, got "
                            f"{_describe(t)} at tensors[{i}]")
    return tensors


def _brief(tree: OpTreeNode) -> str:
    text = tree.pp()
    return text if len(text) <= 60 else text[:57] + "..."


def _check_buffers(gradients: Any, tensors: list) -> list:
    """back_prop_grad's buffers: Tensors of their tensors' shapes, no two sharing an element."""
    if isinstance(gradients, Operators):
        raise TypeError(f"back_prop_grad: pass a list of Tensors to write the gradients into, got "
                        f"a single {_describe(gradients)}")
    gradients = list(gradients)
    if len(tensors) != len(gradients):
        raise ValueError(f"back_prop_grad: {len(tensors)} tensors but {len(gradients)} buffers")
    for i, (t, buf) in enumerate(zip(tensors, gradients)):
        if not isinstance(buf, Tensor):
            hint = "; an op-tree cannot be written into" if isinstance(buf, OpTreeNode) else ""
            raise TypeError(f"back_prop_grad: gradients[{i}] must be a Tensor to write the "
                            f"gradient into, got {_describe(buf)}{hint}")
        if tuple(buf.shape) != tuple(t.shape):
            raise ValueError(f"back_prop_grad: the buffer for a tensor of shape {t.shape} has "
                             f"shape {buf.shape}")
    for j, b in enumerate(gradients):
        for i in range(j):
            a = gradients[i]
            if a is b or _shares_elements(a, b):
                what = "the same buffer" if a is b else "views sharing memory"
                raise ValueError(f"back_prop_grad: gradients[{i}] and gradients[{j}] are {what}; "
                                 f"each tensor needs a buffer of its own (else only the gradient "
                                 f"written last survives)")
    return gradients


def _shares_elements(a: Any, b: Any) -> bool:
    """Whether Tensors a and b (one being a view of the other's memory) share an element; True
    where the device cannot say (Tensor._layout is None)."""
    if a._original_base is not b._original_base:
        return False
    try:
        return _gather_index(_view_detail(a, b)) is not None
    except NotImplementedError:
        return True


class Autodiff:
    """neon's Autodiff: gradients of `op_tree` (an OpTreeNode or a Tensor) with respect to
    tensors, as op-trees, on the backend `be` (from gen_backend).

    next_error: the gradient flowing into op_tree (a Tensor or op-tree of op_tree's shape, or a
    number); None means ones. Trees of one structure share one gradient plan (PLAN_STATS).
    """

    def __init__(self, op_tree: Any, be: Any, next_error: Any = None) -> None:
        from .backend import Backend
        if not isinstance(op_tree, (OpTreeNode, Tensor)):
            hint = ""
            if isinstance(op_tree, np.ndarray):
                hint = "; put an array on the backend with be.array(...)"
            elif isinstance(op_tree, (int, float, np.number)):
                hint = "; a number has no gradient with respect to any tensor"
            raise TypeError(f"Autodiff: op_tree must be an OpTreeNode or a Tensor, got "
                            f"{_describe(op_tree)}{hint}")
        if not isinstance(be, Backend):
            raise TypeError(f"Autodiff: be must be a backend from gen_backend(...) (an instance "
                            f"of neonlike.backends.backend.Backend), got {_describe(be)}")
        shape = shape_of(op_tree)
        if next_error is not None and not _num(next_error):
            if not isinstance(next_error, Operators):
                raise TypeError(f"Autodiff: next_error must be a Tensor, an op-tree or a number, "
                                f"got {type(next_error).__name__}")
            if tuple(shape_of(next_error)) != tuple(shape):
                raise ValueError(f"Autodiff: next_error must have the op-tree's shape {shape}, "
                                 f"got {shape_of(next_error)}")
        self.op_tree, self.be, self.next_error = op_tree, be, next_error
        self.dtype = be.default_dtype
        self._reads: dict | None = None   # id -> every Tensor the tree reads (made when needed)
        self._warned: dict = {}           # id -> Tensor already warned about by this Autodiff
        with _on(be):
            self._leaves = leaf_gradients(op_tree, 1.0 if next_error is None else next_error)

    def _reads_tensor(self, t: Any) -> bool:
        """Whether the tree reads `t` or a view sharing an element with it (through any op, the
        ones with zero gradient too)."""
        if self._reads is None:
            root = self.op_tree
            reads = {id(root): root} if isinstance(root, Tensor) else {}
            if isinstance(root, OpTreeNode):
                for _, x, y in _dag_postorder(root):
                    reads.update((id(c), c) for c in (x, y) if isinstance(c, Tensor))
            self._reads = reads
        return id(t) in self._reads or any(_shares_elements(v, t) for v in self._reads.values())

    def _check_alive(self, method: str) -> None:
        if self._leaves is None:
            raise RuntimeError(f"Autodiff.{method}: this Autodiff was cleaned up (cleanup() frees "
                               f"its gradients); build a new Autodiff(op_tree, be) to take them "
                               f"again")

    def _unused(self, t: Any) -> None:
        """Warn, once per Autodiff and tensor, that `t`'s gradient is zeros because the tree does
        not read it (neon returned zeros silently; PyTorch raises)."""
        if id(t) in self._warned or self._reads_tensor(t):
            return
        self._warned[id(t)] = t
        warnings.warn(f"Autodiff: {_label(t)} does not appear in the op-tree (neither it nor a "
                      f"view of it): its gradient is zeros", UnusedTensorWarning,
                      stacklevel=_outside())

    def get_grad_op_tree(self, tensors: Sequence[Any]) -> list:
        """One gradient op-tree per tensor, of the tensor's shape. A leaf that is a view of a
        tensor asked about (x[0], x.T) gives its gradient in the view's place. A tensor the tree
        does not depend on gets exact zeros (neon: `tensor * 0.`), and an UnusedTensorWarning
        naming it where the tree does not read it at all."""
        self._check_alive("get_grad_op_tree")
        out = []
        with _on(self.be):
            for t in _check_tensors(tensors):
                entry = self._leaves.get(id(t))
                g = None if entry is None else _full_shape(entry[1], t.shape)
                for v, gv in self._leaves.values():
                    if v is t or v._original_base is not t._original_base:
                        continue
                    e = _embed(_full_shape(gv, v.shape), v, t)
                    if e is not None:
                        g = e if g is None else add(g, e)
                if g is None:
                    self._unused(t)
                out.append(_no_gradient(t) if g is None else g)
        return out

    def get_grad_tensor(self, tensors: Sequence[Any]) -> list:
        """The gradients executed into new tensors."""
        self._check_alive("get_grad_tensor")
        tensors = _check_tensors(tensors)
        grads = self.get_grad_op_tree(tensors)
        out = []
        for t, g in zip(tensors, grads):
            buf = self.be.empty(t.shape, dtype=t.dtype if t.dtype.kind == "f" else None)
            buf[:] = g
            out.append(buf)
        return out

    def get_grad_asnumpyarray(self, tensors: Sequence[Any]) -> list:
        self._check_alive("get_grad_asnumpyarray")
        return [g.get().astype(self.be.default_dtype) for g in self.get_grad_tensor(tensors)]

    def back_prop_grad(self, tensors: Sequence[Any], gradients: Sequence[Any]) -> None:
        """Execute each gradient into the matching preallocated buffer."""
        self._check_alive("back_prop_grad")
        tensors = _check_tensors(tensors)
        gradients = _check_buffers(gradients, tensors)
        for buf in gradients:
            if any(buf._original_base is v._original_base for v, _ in self._leaves.values()):
                raise ValueError("back_prop_grad: a gradient buffer shares memory with a tensor "
                                 "of the graph; its gradients read it")
        pairs = list(zip(gradients, self.get_grad_op_tree(tensors)))
        # the next_error buffer may be reused for a gradient: it is read by the others, so last
        pairs.sort(key=lambda p: p[0] is self.next_error)
        for buf, g in pairs:
            buf[:] = g

    def cleanup(self) -> None:
        """Free the gradients and the trees they read (as neon); using this Autodiff afterwards
        raises RuntimeError."""
        self._leaves, self._reads, self._warned = None, None, {}
        self.op_tree = self.next_error = None


__all__ = ["Autodiff", "UnusedTensorWarning", "RULES", "gradients", "leaf_gradients", "unbroadcast",
           "clear_plans", "PLAN_STATS"]
