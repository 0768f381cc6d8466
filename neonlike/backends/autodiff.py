"""Autodiff over op-trees: gradients as op-trees, built by one reverse walk over the tree's DAG.

    ad = Autodiff(f, be)                       # f: an op-tree (or a Tensor, or a number)
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
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..ops import LN2, OP_INFO, SAFELOG_MIN, Kind, Op
from ..optree import OpTreeNode, Operators, build, shape_of

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


_CONSTANTS: dict = {}


def _constant(kind: str, shape: tuple, axis: int | None, make: Callable[[], np.ndarray]) -> Any:
    """A constant tensor on the global backend (neon's NervanaObject.be), made once per
    (backend, kind, shape, axis) and kept (at most 64; a tensor keeps its backend alive)."""
    from .. import NervanaObject
    be = NervanaObject.be
    key = (id(be), kind, shape, axis)
    t = _CONSTANTS.get(key)
    if t is None:
        values = make()
        if len(_CONSTANTS) >= 64:
            _CONSTANTS.clear()
        t = _CONSTANTS[key] = be.array(values, dtype=np.float32 if values.size < 2 ** 24
                                       else np.float64)
    return t


def _ones(shape: tuple) -> Any:
    return _constant("ones", shape, None, lambda: np.ones(shape))


def _iota(shape: tuple, axis: int | None) -> Any:
    """Element positions: along `axis` (broadcasting over the others), or flat C-order positions
    for axis None."""
    def make() -> np.ndarray:
        if axis is None:
            return np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
        view = [1] * len(shape)
        view[axis] = shape[axis]
        return np.arange(shape[axis], dtype=np.float64).reshape(view)
    return _constant("iota", shape, axis, make)


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
    from .. import NervanaObject
    be, axis = NervanaObject.be, d["axis"]
    dz, na, nz = _tree(dz, z), shape_of(x)[axis], shape_of(z)[axis]
    return be.slice(dz, [0], [na], [axis]), be.slice(dz, [na], [nz], [axis])


def _tile(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    reps, xs = d["reps"], shape_of(x)
    xs = (1,) * (len(reps) - len(xs)) + tuple(xs)
    split = tuple(v for r, n in zip(reps, xs) for v in (r, n))
    g = build(Op.RESHAPE, _tree(dz, z), None, newshape=split)
    g = build(Op.SUM, g, None, axis=tuple(range(0, len(split), 2)), keepdims=False)
    return build(Op.RESHAPE, g, None, newshape=shape_of(x)), None


def _cast(x: Any, y: Any, z: Any, dz: Grad, d: dict) -> tuple:
    return (dz if d["dtype"].kind == "f" else None), None


def _sqrt(a: Grad) -> Grad:
    return unary(Op.SQRT, a)


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
    Op.CONCAT: _concat,
    Op.TILE: _tile,
    Op.CAST: _cast,
}
# zero almost everywhere: no contribution
for _op in (Op.SGN, Op.FINITE, Op.RINT, Op.CEIL, Op.FLOOR, Op.NOT, Op.EQ, Op.NE, Op.LT, Op.LE,
            Op.GT, Op.GE, Op.AND, Op.OR, Op.XOR, Op.ARGMAX, Op.ARGMIN, Op.ONEHOT):
    RULES[_op] = _zero


# ---------------------------------------------------------------- views
def _positions(view: np.ndarray, base: np.ndarray) -> np.ndarray | None:
    """For each element of `view` (a numpy view into `base`'s memory), its C-order position in
    `base`; None where the view is not made of whole elements of a C-contiguous base."""
    if not base.flags.c_contiguous or view.dtype != base.dtype:
        return None
    item = base.itemsize
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if offset % item or any(s % item for s in view.strides):
        return None
    pos = np.lib.stride_tricks.as_strided(
        np.arange(base.size, dtype=np.int64)[offset // item:], shape=view.shape,
        strides=tuple(s // item * 8 for s in view.strides))
    if pos.size and (pos.min() < 0 or pos.max() >= base.size):
        return None
    return np.array(pos)


def _embed(be: Any, g: Grad, view: Any, base: Any) -> Grad:
    """The gradient `g` of a view of `base`, as a gradient of `base`: in the view's place, zero
    elsewhere (a view's elements are distinct, so this is a gather, not a scatter-add)."""
    pos = _positions(view._host(), base._host())
    if pos is None:
        raise NotImplementedError(f"Autodiff: the tree reads a view of shape {view.shape} that is "
                                  f"not a strided view of the tensor of shape {base.shape}")
    shape = tuple(base.shape)
    grid = np.arange(math.prod(shape)).reshape(shape)
    if pos.shape == shape and np.array_equal(pos, grid):
        return g
    if pos.shape == shape[::-1] and np.array_equal(pos, grid.T):
        return build(Op.TRANSPOSE, g, None, axes=None)
    if pos.size == grid.size and np.array_equal(pos.ravel(), grid.ravel()):
        return build(Op.RESHAPE, g, None, newshape=shape)
    n = pos.size
    where = np.full(grid.size, n, dtype=np.int64)     # n: the appended zero
    where[pos.ravel()] = np.arange(n)
    flat = build(Op.RESHAPE, g, None, newshape=(1, n))
    padded = build(Op.CONCAT, flat, _full(0.0, (1, 1)), axis=1)
    gathered = build(Op.TAKE, padded, be.array(where.reshape(1, -1).astype(np.float32)
                                               if grid.size < 2 ** 24 else where.reshape(1, -1)),
                     axis=1)
    return build(Op.RESHAPE, gathered, None, newshape=shape)


# ---------------------------------------------------------------- the walk
def _dag_postorder(root: Any) -> list:
    """The op nodes under `root` (root included), each once, children before parents."""
    order: list = []
    seen: set = set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        for child in (node[2], node[1]):
            if isinstance(child, OpTreeNode) and id(child) not in seen:
                stack.append((child, False))
    return order


def gradients(root: Any, seed: Grad) -> dict:
    """{id(tensor): (tensor, gradient)} for every Tensor under `root`, given d(root) = seed."""
    grads: dict = {}
    leaves: dict = {}
    if not isinstance(root, OpTreeNode):
        if isinstance(root, Operators):
            leaves[id(root)] = (root, seed)
        return leaves
    grads[id(root)] = seed
    for node in reversed(_dag_postorder(root)):
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


class Autodiff:
    """neon's Autodiff: gradients of `op_tree` with respect to tensors, as op-trees.

    next_error: the gradient flowing into op_tree (a Tensor or op-tree of op_tree's shape, or a
    number); None means ones.
    """

    def __init__(self, op_tree: Any, be: Any, next_error: Any = None) -> None:
        shape = shape_of(op_tree) if isinstance(op_tree, Operators) else (1, 1)
        if next_error is not None and not _num(next_error):
            if not isinstance(next_error, Operators):
                raise TypeError(f"Autodiff: next_error must be a Tensor, an op-tree or a number, "
                                f"got {type(next_error).__name__}")
            if tuple(shape_of(next_error)) != tuple(shape):
                raise ValueError(f"Autodiff: next_error must have the op-tree's shape {shape}, "
                                 f"got {shape_of(next_error)}")
        self.op_tree, self.be, self.next_error = op_tree, be, next_error
        self.dtype = be.default_dtype
        seed = 1.0 if next_error is None else next_error
        self._leaves = gradients(op_tree, seed)

    def get_grad_op_tree(self, tensors: Sequence[Any]) -> list:
        """One gradient op-tree per tensor, of the tensor's shape; `tensor * 0.` for a tensor
        the tree does not use (as neon)."""
        out = []
        for t in tensors:
            entry = self._leaves.get(id(t))
            g = None if entry is None else _full_shape(entry[1], t.shape)
            for v, gv in self._views_of(t):   # views of t in the tree: their gradient in place
                e = _embed(self.be, _full_shape(gv, v.shape), v, t)
                g = e if g is None else add(g, e)
            out.append(build(Op.MUL, t, 0.0) if g is None else g)
        return out

    def _views_of(self, t: Any) -> list:
        """(view, its gradient) for each leaf of the tree that is another Tensor over part of t's
        memory (x[0], x.T, a reshape)."""
        found = []
        try:
            mem = t._host()
        except AttributeError:  # a device without host arrays: views are matched by identity only
            return found
        for v, g in self._leaves.values():
            if v is t:
                continue
            try:
                vm = v._host()
            except AttributeError:
                continue
            if np.shares_memory(vm, mem):
                found.append((v, g))
        return found

    def get_grad_tensor(self, tensors: Sequence[Any]) -> list:
        """The gradients executed into new tensors."""
        grads = self.get_grad_op_tree(tensors)
        out = []
        for t, g in zip(tensors, grads):
            buf = self.be.empty(t.shape, dtype=t.dtype if t.dtype.kind == "f" else None)
            buf[:] = g
            out.append(buf)
        return out

    def get_grad_asnumpyarray(self, tensors: Sequence[Any]) -> list:
        return [g.get().astype(self.be.default_dtype) for g in self.get_grad_tensor(tensors)]

    def back_prop_grad(self, tensors: Sequence[Any], gradients: Sequence[Any]) -> None:
        """Execute each gradient into the matching preallocated buffer."""
        if len(tensors) != len(gradients):
            raise ValueError(f"back_prop_grad: {len(tensors)} tensors but {len(gradients)} buffers")
        for t, buf in zip(tensors, gradients):
            if tuple(buf.shape) != tuple(t.shape):
                raise ValueError(f"back_prop_grad: the buffer for a tensor of shape {t.shape} has "
                                 f"shape {buf.shape}")
            if id(buf) in self._leaves:
                raise ValueError("back_prop_grad: a gradient buffer is itself a tensor of the "
                                 "graph; its gradients read it")
        pairs = list(zip(gradients, self.get_grad_op_tree(tensors)))
        # the next_error buffer may be reused for a gradient: it is read by the others, so last
        pairs.sort(key=lambda p: p[0] is self.next_error)
        for buf, g in pairs:
            buf[:] = g

    def cleanup(self) -> None:
        self._leaves = {}


__all__ = ["Autodiff", "RULES", "gradients", "unbroadcast"]
