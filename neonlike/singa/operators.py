"""Seed 004's operators (SINGA 3.0's autograd list), as engine op-trees.

Most are table rows mapping a SINGA class to an engine op (or a small composite of them); their
backward is TreeOp's: the engine's gradient rules (autograd.py). Broadcasting is ONNX's
multidirectional (numpy's), and a broadcast operand's gradient is summed back to its shape.
Hand-written here: softmax, softmax_cross_entropy (the fused loss), views (reshape, flatten,
squeeze, unsqueeze: no copy), split (several outputs), and the constants (shape, nonzero,
onehot, constant_of_shape: no gradient, outputs do not require one).

Both spellings where the seed's differ from SINGA's code: Equal/equal, Mul/mul,
MeanSquareError/mse_loss, SoftSign/softsign, SoftPlus/softplus, constantOfShape/
constant_of_shape, reduceSum/reduce_sum, reduceMean/reduce_mean.

Choices where SINGA differs or is silent (documented traps): `add_bias` returns a new tensor
(SINGA writes into x) and its axis=1 gradient sums over axis 1; Dropout scales kept values by
1/(1-ratio) (SINGA by 1-ratio); shape mismatches are ValueErrors naming both shapes; losses
return shape (1,), averaged over axis 0 (the batch); softmax_cross_entropy takes one-hot
targets or integer labels (one per row).
"""
from __future__ import annotations

import builtins as B
import math
from typing import Any

import numpy as np

from ..ops import Op
from ..optree import build
from ..shapes import pad2
from . import autograd as ag
from .autograd import Operation, TreeOp
from .layout import as_chwn, chwn, nchw
from .singa_wrap import CTensor, ran
from .tensor import Tensor


def _off(shape: tuple) -> int:
    """Engine axes lie this many places after logical ones (the leading 1s of pad2)."""
    return len(pad2(shape)) - len(shape)


def _axes(axes: Any, ndim: int, what: str) -> tuple:
    if axes is None:
        return tuple(range(ndim))
    axes = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    out = []
    for a in axes:
        if not -ndim <= a < B.max(ndim, 1):
            raise ValueError(f"{what}: axis {a} is out of range for {ndim} dimensions")
        out.append(int(a) % B.max(ndim, 1))
    return tuple(sorted(set(out)))


def _batch(shape: tuple) -> int:
    return shape[0] if len(shape) >= 2 else 1


# ---------------------------------------------------------------- elementwise: one engine op
class _Unary(TreeOp):
    op: Op = Op.NEG

    def plan_key(self) -> Any:
        return ()

    def make(self, be: Any, x: Any) -> Any:
        return build(self.op, x, None)


_UNARY = {  # SINGA class -> engine op
    "ReLU": Op.RELU, "Sigmoid": Op.SIG, "Tanh": Op.TANH, "Exp": Op.EXP, "Log": Op.LOG,
    "Sqrt": Op.SQRT, "Abs": Op.ABS, "Sign": Op.SGN, "Negative": Op.NEG,
    "Reciprocal": Op.RECIPROCAL, "Ceil": Op.CEIL, "SoftPlus": Op.SOFTPLUS,
    "Cos": Op.COS, "Cosh": Op.COSH, "Acos": Op.ACOS, "Acosh": Op.ACOSH,
    "Sin": Op.SIN, "Sinh": Op.SINH, "Asin": Op.ASIN, "Asinh": Op.ASINH,
    "Tan": Op.TAN, "Atan": Op.ATAN, "Atanh": Op.ATANH,
}
for _name, _op in _UNARY.items():
    globals()[_name] = type(_name, (_Unary,), {"op": _op})


class Identity(TreeOp):
    def plan_key(self) -> Any:
        return ()

    def make(self, be: Any, x: Any) -> Any:
        return x


# ---------------------------------------------------------------- elementwise: composites
class _Composite(TreeOp):
    """A unary op written as an engine expression `fn(be, x, *args)`."""
    fn: Any = None

    def __init__(self, *args: Any) -> None:
        super().__init__()
        self.args = args

    def plan_key(self) -> Any:
        return self.args

    def make(self, be: Any, x: Any) -> Any:
        return type(self).fn(be, x, *self.args)


def _clip(be: Any, x: Any, lo: Any, hi: Any) -> Any:
    if lo is not None:
        x = be.maximum(x, float(lo))
    if hi is not None:
        x = be.minimum(x, float(hi))
    return x


_COMPOSITE = {  # SINGA class -> (engine expression, default arguments)
    "SoftSign": (lambda be, x: x / (1.0 + B.abs(x)), ()),
    "LeakyRelu": (lambda be, x, a: be.maximum(x, 0.0) + a * be.minimum(x, 0.0), (0.01,)),
    "Elu": (lambda be, x, alpha: be.maximum(x, 0.0) + alpha * (be.exp(be.minimum(x, 0.0)) - 1.0),
            (1.0,)),
    "SeLU": (lambda be, x, alpha, gamma: gamma * (be.maximum(x, 0.0) + alpha * (
        be.exp(be.minimum(x, 0.0)) - 1.0)), (1.67326, 1.0507)),
    "HardSigmoid": (lambda be, x, alpha, gamma: be.minimum(be.maximum(alpha * x + gamma, 0.0),
                                                           1.0), (0.2, 0.5)),
    "Clip": (_clip, (None, None)),
}
for _name, (_fn, _defaults) in _COMPOSITE.items():
    def _init(self: Any, *args: Any, _defaults: tuple = _defaults) -> None:
        _Composite.__init__(self, *(args + _defaults[len(args):]))
    globals()[_name] = type(_name, (_Composite,), {"fn": staticmethod(_fn), "__init__": _init})


# ---------------------------------------------------------------- elementwise: binary
class _Binary(TreeOp):
    """x op y with numpy broadcasting; a number operand is a constant of the tree."""
    op: Op = Op.ADD

    def __init__(self, left: float | None = None, right: float | None = None) -> None:
        super().__init__()
        self.left, self.right = left, right

    def plan_key(self) -> Any:
        return self.left, self.right

    def make(self, be: Any, *values: Any) -> Any:
        if self.left is not None:
            values = (self.left,) + values
        elif self.right is not None:
            values = values + (self.right,)
        return self.combine(*values)

    def combine(self, x: Any, y: Any) -> Any:
        return build(self.op, x, y)

    def out_shape(self, *shapes: tuple) -> tuple:
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError(f"{self.name}: cannot broadcast shapes {shapes[0]} and {shapes[1]} "
                             f"(dimensions must match or be 1)") from None


_BINARY = {"Add": Op.ADD, "Sub": Op.SUB, "Mul": Op.MUL, "Div": Op.DIV, "Pow": Op.POW}
for _name, _op in _BINARY.items():
    globals()[_name] = type(_name, (_Binary,), {"op": _op})


class PRelu(_Binary):
    def combine(self, x: Any, slope: Any) -> Any:
        return build(Op.MAXIMUM, x, 0.0) + slope * build(Op.MINIMUM, x, 0.0)


class _Logic(_Binary):
    """Comparisons and logic: 1.0 where true, else 0.0; no gradient (asking is a TypeError)."""

    def backward(self, dy: CTensor) -> Any:
        raise TypeError(f"{self.name} is a logic operator and has no gradient; mark its inputs "
                        f"requires_grad=False or keep it off the loss's path")


_LOGIC = {"Less": Op.LT, "Greater": Op.GT, "Equal": Op.EQ, "And": Op.AND, "Or": Op.OR,
          "Xor": Op.XOR}
for _name, _op in _LOGIC.items():
    globals()[_name] = type(_name, (_Logic,), {"op": _op})


class Not(_Logic):
    def make(self, be: Any, x: Any) -> Any:
        return build(Op.NOT, x, None)


class _Variadic(TreeOp):
    """sum / mean / min / max of any number of tensors (broadcasting)."""
    op: Op = Op.ADD
    scale = False

    def plan_key(self) -> Any:
        return ()

    def make(self, be: Any, *values: Any) -> Any:
        tree = values[0]
        for v in values[1:]:
            tree = build(self.op, tree, v)
        if self.scale:
            tree = tree * (1.0 / len(values))
        elif len(values) == 1:
            tree = tree * 1.0
        return tree


Sum = type("Sum", (_Variadic,), {"op": Op.ADD})
Mean = type("Mean", (_Variadic,), {"op": Op.ADD, "scale": True})
Min = type("Min", (_Variadic,), {"op": Op.MINIMUM})
Max = type("Max", (_Variadic,), {"op": Op.MAXIMUM})


class AddBias(TreeOp):
    """x + b along rows (axis=0: b has x's column count) or columns (axis=1: x's row count)."""

    def __init__(self, axis: int = 0) -> None:
        super().__init__()
        if axis not in (0, 1):
            raise ValueError(f"AddBias: axis must be 0 or 1, got {axis}")
        self.axis = axis

    def plan_key(self) -> Any:
        return self.axis

    def out_shape(self, xs: tuple, bs: tuple) -> tuple:
        n = xs[1 - self.axis] if len(xs) == 2 else None
        if len(xs) != 2 or math.prod(bs) != n:
            raise ValueError(f"add_bias: x must be 2-D and b hold {n} values for axis="
                             f"{self.axis}; got x {xs} and b {bs}")
        return xs

    def make(self, be: Any, x: Any, b: Any) -> Any:
        m, n = x.shape
        target = (1, n) if self.axis == 0 else (m, 1)
        if tuple(b.shape) != target:
            b = build(Op.RESHAPE, b, None, newshape=target)
        return x + b


class Cast(TreeOp):
    def __init__(self, to: Any) -> None:
        super().__init__()
        self.to = np.dtype(to)

    def plan_key(self) -> Any:
        return self.to

    def out_dtype(self, xs: tuple) -> Any:
        return self.to

    def make(self, be: Any, x: Any) -> Any:
        return build(Op.CAST, x, None, dtype=self.to)


class Dropout(TreeOp):
    """Training: zero each element with probability `ratio`, scale the rest by 1/(1-ratio)
    (SINGA scales by 1-ratio, against its own docstring); otherwise the identity."""

    def __init__(self, ratio: float = 0.5) -> None:
        super().__init__()
        if not 0 <= ratio < 1:
            raise ValueError(f"Dropout: ratio must be in [0, 1), got {ratio}")
        self.ratio, self.mask = ratio, None

    def forward(self, x: CTensor) -> CTensor:
        if ag.training and self.ratio > 0:
            be = x.dev.be
            keep = be.rng.uniform(size=pad2(x.lshape)) >= self.ratio
            self.mask = be.array(keep * (1.0 / (1.0 - self.ratio)), dtype=x.dtype)
        else:
            self.mask = None
        return super().forward(x)

    def make(self, be: Any, x: Any) -> Any:
        return x if self.mask is None else x * self.mask


# ---------------------------------------------------------------- reductions (run at once)
class _Reduce(TreeOp):
    lazy = False

    def __init__(self, axes: Any = None, keepdims: int = 1) -> None:
        super().__init__()
        self.axes_arg, self.keepdims = axes, bool(keepdims)

    def plan_key(self) -> Any:
        axes = self.axes_arg
        return (tuple(axes) if isinstance(axes, list) else axes), self.keepdims, self.mean

    def out_shape(self, shape: tuple) -> tuple:
        axes = _axes(self.axes_arg, len(shape), self.name)
        if self.keepdims:
            return tuple(1 if i in axes else d for i, d in enumerate(shape))
        return tuple(d for i, d in enumerate(shape) if i not in axes)

    def make(self, be: Any, x: Any) -> Any:
        lshape = self._lshape
        axes = _axes(self.axes_arg, len(lshape), self.name)
        off = _off(lshape)
        tree = build(Op.SUM, x, None, axis=tuple(a + off for a in axes), keepdims=True)
        if self.mean:
            tree = tree * (1.0 / B.max(1, math.prod(lshape[a] for a in axes)))
        out = pad2(self.out_shape(lshape))
        return tree if tuple(tree.shape) == out else build(Op.RESHAPE, tree, None, newshape=out)

    def forward(self, x: CTensor) -> CTensor:
        self._lshape = x.lshape
        return super().forward(x)

    mean = False


ReduceSum = type("ReduceSum", (_Reduce,), {"mean": False})
ReduceMean = type("ReduceMean", (_Reduce,), {"mean": True})


class GlobalAveragePool(_Reduce):
    def __init__(self, data_format: str = "channels_first") -> None:
        if data_format not in ("channels_first", "channels_last"):
            raise ValueError(f"GlobalAveragePool: data_format must be 'channels_first' or "
                             f"'channels_last', got {data_format!r}")
        super().__init__(None, 1)
        self.first = data_format == "channels_first"
        self.mean = True

    def forward(self, x: CTensor) -> CTensor:
        n = len(x.lshape)
        if n < 3:
            raise ValueError(f"GlobalAveragePool: expected (N, C, spatial...), got {x.lshape}")
        self.axes_arg = tuple(range(2, n)) if self.first else tuple(range(1, n - 1))
        return super().forward(x)


class SoftMax(Operation):
    """exp(x - max) / sum(exp(x - max)) along `axis` (one fused kernel); backward by hand:
    y * (dy - sum(dy * y))."""

    def __init__(self, axis: int = 1) -> None:
        super().__init__()
        self.axis = axis

    def _engine_axis(self, shape: tuple) -> int:
        a = _axes(self.axis, len(shape), "softmax")[0]
        return a + _off(shape)

    def forward(self, x: CTensor) -> CTensor:
        be, a = x.dev.be, self._engine_axis(x.lshape)
        e = be.exp(x.value - be.max(x.value, axis=a))
        y = CTensor(e / be.sum(e, axis=a), x.lshape, x.dev, x.dtype)
        y.materialize()
        self.y = y
        return y

    def backward(self, dy: CTensor) -> CTensor:
        be, y, a = dy.dev.be, self.y.value, self._engine_axis(dy.lshape)
        return CTensor(y * (dy.value - be.sum(dy.value * y, axis=a)), dy.lshape, dy.dev,
                       dy.dtype)


# ---------------------------------------------------------------- losses
def _targets(x: CTensor, t: CTensor) -> Any:
    """t as one-hot rows of x's shape: given so, or as one integer label per row."""
    if t.lshape == x.lshape:
        return t.value
    n, c = _batch(x.lshape), x.lshape[-1]
    if t.Size() == n:
        flat = t.materialize().reshape((1, n))
        hot = build(Op.ONEHOT, flat, None, depth=c, axis=1)
        if tuple(hot.shape) != pad2(x.lshape):
            hot = build(Op.RESHAPE, hot, None, newshape=pad2(x.lshape))
        out = x.dev.be.empty(pad2(x.lshape), dtype=x.dtype)
        out[:] = hot
        return out
    raise ValueError(f"targets of shape {t.lshape} fit neither the predictions' shape "
                     f"{x.lshape} (one-hot) nor one label per row ({n})")


class SoftMaxCrossEntropy(Operation):
    """-sum(t * log(softmax(x))) / N over rows x (N, C); t one-hot (N, C) or labels (N,)."""

    def forward(self, x: CTensor, t: CTensor) -> CTensor:
        be = x.dev.be
        a = len(pad2(x.lshape)) - 1
        e = be.exp(x.value - be.max(x.value, axis=a))
        p = ran(e / be.sum(e, axis=a), x.lshape, x.dev, x.dtype)
        self.p, self.t, self.n = p.value, _targets(x, t), _batch(x.lshape)
        loss = be.sum(self.t * be.safelog(self.p)) * (-1.0 / self.n)
        return ran(loss, (1,), x.dev, x.dtype)

    def backward(self, dy: CTensor) -> tuple:
        g = (self.p - self.t) * (dy.value * (1.0 / self.n))
        return CTensor(g, self._lshape(), dy.dev, dy.dtype), None

    def _lshape(self) -> tuple:
        return self._outs_in

    def _do_forward(self, *xs: Any) -> tuple:
        self._outs_in = xs[0].shape
        return super()._do_forward(*xs)


class CrossEntropy(TreeOp):
    """-sum(t * log(y)) / N; y probabilities (N, C), t one-hot (N, C)."""
    lazy = False

    def out_shape(self, ys: tuple, ts: tuple) -> tuple:
        if ys != ts:
            raise ValueError(f"cross_entropy: predictions {ys} and targets {ts} differ in shape")
        self.n = _batch(ys)
        return (1,)

    def make(self, be: Any, y: Any, t: Any) -> Any:
        return build(Op.SUM, t * be.log(y), None, axis=None, keepdims=True) * (-1.0 / self.n)


class MeanSquareError(TreeOp):
    """sum((x - t)^2) / (2N), N = x.shape[0] (SINGA's)."""
    lazy = False

    def out_shape(self, xs: tuple, ts: tuple) -> tuple:
        if xs != ts:
            raise ValueError(f"mse_loss: x {xs} and t {ts} differ in shape")
        self.n = _batch(xs)
        return (1,)

    def make(self, be: Any, x: Any, t: Any) -> Any:
        d = x - t
        total = build(Op.SUM, d * d, None, axis=None, keepdims=True)
        if len(total.shape) > 2:     # (1, 1, 1, 1) of an NCHW x: the (1,) result's (1, 1)
            total = build(Op.RESHAPE, total, None, newshape=(1, 1))
        return total * (0.5 / self.n)


# ---------------------------------------------------------------- products
class Matmul(TreeOp):
    """x @ w for 2-D x (m, k) and w (k, n): one GEMM (be.compound_dot), and one per gradient,
    dy @ w.T and x.T @ dy, written here (a GEMM's gradients need no walk of the rules: the
    replayed plan and statements around each product cost ~7 us of a step's ~270)."""
    lazy = False
    fuse_inputs = False

    def out_shape(self, xs: tuple, ws: tuple) -> tuple:
        if len(xs) != 2 or len(ws) != 2 or xs[1] != ws[0]:
            raise ValueError(f"matmul: expected 2-D x (m, k) and w (k, n), got x {xs} and w {ws}")
        return (xs[0], ws[1])

    def plan_key(self) -> Any:
        return ()

    def make(self, be: Any, x: Any, w: Any) -> Any:
        return build(Op.DOT, x, w)

    def forward(self, x: CTensor, w: CTensor) -> CTensor:
        shape = self.out_shape(x.lshape, w.lshape)
        xv, wv = x.materialize(), w.materialize()
        dtype = ag.float_result_dtype((x, w))
        dev = x.dev
        out = dev.alloc(shape, dtype)
        dev.be.compound_dot(xv, wv, out)
        y = CTensor(out, shape, dev, dtype)
        if ag.training:
            self._xs, self._out = (x, w), y
        return y

    def backward(self, dy: CTensor) -> tuple:
        x, w = xs = self.kept_inputs()
        needs = self._needs or (True, True)
        d = dy.materialize()
        srcs = self.src or ((None, 0, None, False),) * 2
        grads = []
        for i in (0, 1):          # by position: x and w may be one CTensor (matmul(a, a))
            if not needs[i]:
                grads.append(None)
                continue
            like, src = xs[i], srcs[i]
            a, b = (d, w.value.T) if i == 0 else (x.value.T, d)
            if ag._keeps_product(src, math.prod(like.lshape)):   # for SGD's GEMM into v
                grads.append(CTensor(build(Op.DOT, a, b), like.lshape, like.dev, like.dtype))
                continue
            out = like.dev.alloc(like.value.shape, like.dtype)
            like.dev.be.compound_dot(a, b, out)
            grads.append(CTensor(out, like.lshape, like.dev, like.dtype))
        return tuple(grads)


class Gemm(TreeOp):
    """alpha * A' @ B' + beta * C (A' = A.T where transA, B' likewise; C broadcasts)."""
    lazy = False
    fuse_inputs = False

    def __init__(self, alpha: float = 1.0, beta: float = 1.0, transA: int = 0,
                 transB: int = 0) -> None:
        super().__init__()
        self.alpha, self.beta, self.transA, self.transB = alpha, beta, transA, transB

    def plan_key(self) -> Any:
        return self.alpha, self.beta, self.transA, self.transB

    def out_shape(self, a: tuple, b: tuple, c: tuple | None = None) -> tuple:
        if len(a) != 2 or len(b) != 2:
            raise ValueError(f"gemm: A and B must be 2-D, got {a} and {b}")
        a, b = (a[::-1] if self.transA else a), (b[::-1] if self.transB else b)
        if a[1] != b[0]:
            raise ValueError(f"gemm: A' {a} and B' {b} do not multiply")
        out = (a[0], b[1])
        if c is not None and tuple(np.broadcast_shapes(out, c)) != out:
            raise ValueError(f"gemm: C of shape {c} does not broadcast to {out}")
        return out

    def make(self, be: Any, a: Any, b: Any, c: Any = None) -> Any:
        a = build(Op.TRANSPOSE, a, None, axes=None) if self.transA else a
        b = build(Op.TRANSPOSE, b, None, axes=None) if self.transB else b
        tree = build(Op.DOT, a, b)
        tree = tree if self.alpha == 1.0 else tree * float(self.alpha)
        return tree if c is None else tree + c * float(self.beta)


# ---------------------------------------------------------------- structure
class Reshape(Operation):
    """A view of another shape (ONNX: a 0 copies the input's dimension, one -1 is inferred)."""

    def __init__(self, shape: Any = None) -> None:
        super().__init__()
        self.shape = None if shape is None else [int(d) for d in shape]

    def target(self, shape: tuple) -> tuple:
        new = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(self.shape)]
        size = math.prod(shape)
        if new.count(-1) > 1:
            raise ValueError(f"reshape: at most one -1, got {self.shape}")
        if -1 in new:
            known = math.prod(d for d in new if d != -1)
            if known == 0 or size % known:
                raise ValueError(f"reshape: cannot reshape {shape} into {tuple(self.shape)}")
            new[new.index(-1)] = size // known
        if math.prod(new) != size:
            raise ValueError(f"reshape: cannot reshape {shape} (size {size}) into "
                             f"{tuple(self.shape)} (size {math.prod(new)})")
        return tuple(new)

    def forward(self, x: CTensor) -> CTensor:
        self.in_shape = x.lshape
        return view(x, self.target(x.lshape))

    def backward(self, dy: CTensor) -> CTensor:
        return view(dy, self.in_shape)


def view(c: CTensor, shape: tuple) -> CTensor:
    """c's values with another logical shape: a view of its tensor (copied only if strided)."""
    value = c.materialize()
    target = pad2(tuple(shape))
    if tuple(value.shape) != target:
        try:
            value = value.reshape(target)
        except ValueError:
            out = c.dev.be.empty(target, dtype=c.dtype)
            out[:] = build(Op.RESHAPE, value, None, newshape=target)
            value = out
    return CTensor(value, shape, c.dev, c.dtype)


class Flatten(Reshape):
    def __init__(self, axis: int = 1) -> None:
        super().__init__()
        self.axis = axis

    def target(self, shape: tuple) -> tuple:
        n = len(shape)
        if not -n <= self.axis <= n:
            raise ValueError(f"flatten: axis {self.axis} is out of range for shape {shape}")
        a = self.axis % n if self.axis < 0 else self.axis
        return (math.prod(shape[:a]), math.prod(shape[a:]))


class Squeeze(Reshape):
    def __init__(self, axis: Any = None) -> None:
        super().__init__()
        self.axis = [] if axis is None else ([axis] if isinstance(axis, int) else list(axis))

    def target(self, shape: tuple) -> tuple:
        axes = _axes(self.axis, len(shape), "squeeze") if self.axis else \
            tuple(i for i, d in enumerate(shape) if d == 1)
        if any(shape[i] != 1 for i in axes):
            raise ValueError(f"squeeze: axes {axes} of shape {shape} are not all of size 1")
        return tuple(d for i, d in enumerate(shape) if i not in axes)


class Unsqueeze(Reshape):
    def __init__(self, axis: Any = -1) -> None:
        super().__init__()
        self.axis = [axis] if isinstance(axis, int) else list(axis)

    def target(self, shape: tuple) -> tuple:
        out = list(shape)
        n = len(shape) + len(self.axis)
        for a in sorted(x % n for x in self.axis):
            out.insert(a, 1)
        return tuple(out)


class Transpose(TreeOp):
    lazy = False
    fuse_inputs = False

    def __init__(self, perm: Any = None) -> None:
        super().__init__()
        self.perm = None if perm is None else tuple(int(p) for p in perm)

    def _perm(self, shape: tuple) -> tuple:
        perm = tuple(reversed(range(len(shape)))) if self.perm is None else self.perm
        if sorted(p % B.max(len(shape), 1) for p in perm) != list(range(len(shape))):
            raise ValueError(f"transpose: {self.perm} is not a permutation of the axes of "
                             f"shape {shape}")
        return tuple(p % len(shape) for p in perm)

    def out_shape(self, shape: tuple) -> tuple:
        self._lshape = shape
        return tuple(shape[p] for p in self._perm(shape))

    def make(self, be: Any, x: Any) -> Any:
        shape = self._lshape
        off = _off(shape)
        axes = tuple(range(off)) + tuple(p + off for p in self._perm(shape))
        if axes == tuple(range(len(axes))):
            return x
        return build(Op.TRANSPOSE, x, None, axes=axes)


class Concat(Operation):
    """cat: each input written into its slice of one new tensor (a copy statement each, the
    input's tree fused into it), and each input's gradient its slice of dy copied out; no
    concatenate node, so no host stage and no walk of a tree a step."""

    def __init__(self, axis: int = 0) -> None:
        super().__init__()
        self.axis = axis

    def out_shape(self, *shapes: tuple) -> tuple:
        n = len(shapes[0])
        a = _axes(self.axis, n, "cat")[0]
        for s in shapes[1:]:
            if len(s) != n or any(x != y for i, (x, y) in enumerate(zip(s, shapes[0]))
                                  if i != a):
                raise ValueError(f"cat: shapes {shapes[0]} and {s} differ outside axis {a}")
        self._a = a + _off(shapes[0])
        return shapes[0][:a] + (B.sum(s[a] for s in shapes),) + shapes[0][a + 1:]

    def forward(self, *xs: CTensor) -> CTensor:
        shape = self.out_shape(*(x.lshape for x in xs))
        dtype = ag.float_result_dtype(xs)
        dev = xs[0].dev
        self._spans = None
        if self._a == 1 and len(shape) == 4:   # channels of values held in CHWN (layout.py)
            held = [chwn(x.value) for x in xs]
            if all(v is not None for v in held):
                N, C, H, W = shape
                out, spans = _concatenated(dev, held, [(c, H, W, N) for _, c, _, _ in
                                                       (x.lshape for x in xs)], 0,
                                           (C, H, W, N), dtype)
                self._chwn = [s[1:] for s in spans]
                return CTensor(nchw(out), shape, dev, dtype)
        out, spans = _concatenated(dev, [x.value for x in xs], [x.lshape for x in xs],
                                   self._a, shape, dtype)
        self._spans = list(zip(spans, (x.lshape for x in xs)))
        return CTensor(out, shape, dev, dtype)

    def backward(self, dy: CTensor) -> Any:
        grads = []
        if self._spans is None:     # forward ran in CHWN: dy's parts along its channels
            g = as_chwn(dy)
            for i, (start, stop) in enumerate(self._chwn):
                part = _span_view(g, (0, start, stop)) if self._need(i) else None
                grads.append(None if part is None else CTensor(
                    nchw(part), (dy.lshape[0], stop - start) + dy.lshape[2:], dy.dev,
                    dy.dtype))
            return tuple(grads) if len(grads) > 1 else grads[0]
        g = dy.materialize()
        for i, (span, shape) in enumerate(self._spans):
            if not self._need(i):
                grads.append(None)
                continue
            part = dy.dev.alloc(pad2(shape), dy.dtype)
            part[:] = _span_view(g, span)
            grads.append(CTensor(part, shape, dy.dev, dy.dtype))
        return tuple(grads) if len(grads) > 1 else grads[0]


def _concatenated(dev: Any, values: list, shapes: list, a: int, shape: tuple,
                  dtype: Any) -> tuple:
    """(a pooled tensor of logical `shape` holding `values` (trees, tensors or numbers of the
    logical `shapes`) one after another along engine axis a, the span of each): a copy
    statement per value into its slice, no concatenate node (a host stage and a walk)."""
    out = dev.alloc(pad2(shape), dtype)
    spans, start = [], 0
    for v, s in zip(values, shapes):
        n = pad2(s)[a]
        span = (a, start, start + n)
        _span_view(out, span)[:] = v
        spans.append(span)
        start += n
    return out, spans


def _span_view(t: Any, span: tuple) -> Any:
    """The view of engine tensor `t` over indices start:stop of axis a (span (a, start, stop)).
    Made each call, not kept: a view holds the pooled tensor's array, which would then never
    count as free (pool.py)."""
    a, start, stop = span
    index = (B.slice(None),) * a + (B.slice(start, stop),) + \
        (B.slice(None),) * (len(t.shape) - a - 1)                  # `slice` is an op here
    shape = t.shape[:a] + (stop - start,) + t.shape[a + 1:]
    return t._view(index, shape)


class _Index(TreeOp):
    """x[index] for an engine index (a slice per engine axis), then a logical shape."""
    lazy = False
    fuse_inputs = False

    def __init__(self, index: tuple, shape: tuple) -> None:
        super().__init__()
        self.index, self.shape = index, shape

    def out_shape(self, shape: tuple) -> tuple:
        return self.shape

    def make(self, be: Any, x: Any) -> Any:
        tree = build(Op.SLICE, x, None, index=self.index)
        target = pad2(self.shape)
        return tree if tuple(tree.shape) == target else \
            build(Op.RESHAPE, tree, None, newshape=target)


def _slice_op(shape: tuple, starts: Any, ends: Any, axes: Any = None, steps: Any = None) -> Any:
    n = len(shape)
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError("slice: starts, ends, axes and steps must have the same length")
    keys = [B.slice(None)] * n
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise ValueError("slice: steps cannot be 0")
        keys[_axes(a, n, "slice")[0]] = B.slice(int(s), int(e), int(st))
    return _index_op(shape, keys, [])


def _index_op(shape: tuple, keys: list, dropped: list) -> Any:
    spec = [k.indices(d) for k, d in zip(keys, shape)]
    sliced = [len(range(*t)) for t in spec]
    out = tuple(d for i, d in enumerate(sliced) if i not in dropped)
    off = _off(shape)
    index = tuple([B.slice(None)] * off + [B.slice(*t) if len(range(*t)) else B.slice(0, 0)
                                         for t in spec])
    return _Index(index, out)


class Split(Operation):
    """Parts of x along `axis` (sizes `parts`, or num_output equal parts); backward concatenates."""

    def __init__(self, axis: int, parts: Any = None, num_output: int | None = None) -> None:
        super().__init__()
        self.axis, self.parts, self.num_output = axis, parts, num_output

    def forward(self, x: CTensor) -> tuple:
        shape = x.lshape
        a = _axes(self.axis, len(shape), "split")[0]
        parts = self.parts
        if parts is None:
            k = self.num_output or 1
            if shape[a] % k:
                raise ValueError(f"split: axis {a} of size {shape[a]} does not split into {k}")
            parts = [shape[a] // k] * k
        if B.sum(parts) != shape[a]:
            raise ValueError(f"split: parts {list(parts)} do not add up to axis {a}'s size "
                             f"{shape[a]}")
        self.in_shape, self.a = shape, a
        outs, lo = [], 0
        x.materialize()
        for p in parts:
            keys = [B.slice(None)] * len(shape)
            keys[a] = B.slice(lo, lo + p)
            op = _index_op(shape, keys, [])
            outs.append(op.forward(x))
            lo += p
        return tuple(outs)

    def backward(self, *dys: Any) -> CTensor:
        _, dtype, dev = self._outs[0]
        out, _ = _concatenated(dev, [0.0 if dy is None else dy.value for dy in dys],
                               [shape for shape, _, _ in self._outs],
                               self.a + _off(self.in_shape), self.in_shape, dtype)
        return CTensor(out, self.in_shape, dev, dtype)


class Gather(TreeOp):
    """x's entries at `indices` along `axis` (ONNX Gather: indices' shape replaces the axis)."""
    lazy = False
    fuse_inputs = False

    def __init__(self, axis: int, indices: Any) -> None:
        super().__init__()
        self.axis, self.indices = axis, np.asarray(indices, dtype=np.int64)

    def out_shape(self, shape: tuple) -> tuple:
        a = _axes(self.axis, len(shape), "gather")[0]
        if self.indices.size and (self.indices.max() >= shape[a]
                                  or self.indices.min() < -shape[a]):
            raise ValueError(f"gather: indices out of range for axis {a} of size {shape[a]}")
        self._a, self._lshape = a, shape
        return shape[:a] + self.indices.shape + shape[a + 1:]

    def make(self, be: Any, x: Any) -> Any:
        idx = be.array((self.indices % self._lshape[self._a]).ravel(), dtype=np.int32)
        tree = build(Op.TAKE, x, idx, axis=self._a + _off(self._lshape))
        out = pad2(self.out_shape(self._lshape))
        return tree if tuple(tree.shape) == out else build(Op.RESHAPE, tree, None, newshape=out)


class Tile(TreeOp):
    lazy = False
    fuse_inputs = False

    def __init__(self, repeats: Any) -> None:
        super().__init__()
        self.repeats = tuple(int(r) for r in (repeats if isinstance(repeats, (list, tuple))
                                                else [repeats]))

    def out_shape(self, shape: tuple) -> tuple:
        n = B.max(len(shape), len(self.repeats))
        s = (1,) * (n - len(shape)) + tuple(shape)
        r = (1,) * (n - len(self.repeats)) + self.repeats
        self._lshape = shape
        return tuple(a * b for a, b in zip(s, r))

    def make(self, be: Any, x: Any) -> Any:
        out = pad2(self.out_shape(self._lshape))
        reps = (1,) * (len(out) - len(self.repeats)) + self.repeats
        if len(x.shape) < len(out):
            x = build(Op.RESHAPE, x, None, newshape=(1,) * (len(out) - len(x.shape)) + x.shape)
        return build(Op.TILE, x, None, reps=reps)


# ---------------------------------------------------------------- constants (no gradient)
class _Constant(Operation):
    differentiable = False

    def backward(self, *dys: Any) -> Any:
        return tuple(None for _ in self.src) if len(self.src) > 1 else None

    def host(self, values: np.ndarray, dev: Any, dtype: Any = np.float32) -> CTensor:
        values = np.asarray(values, dtype=dtype)
        return CTensor(dev.be.array(values.reshape(pad2(values.shape)), dtype=dtype),
                       values.shape, dev, dtype)


class Shape(_Constant):
    def forward(self, x: CTensor) -> CTensor:
        return self.host(np.array(x.lshape), x.dev)


class NonZero(_Constant):
    def forward(self, x: CTensor) -> CTensor:
        return self.host(np.array(np.nonzero(x.to_numpy())), x.dev)


class OneHot(_Constant):
    """ONNX OneHot: depth classes inserted at `axis`; values (off, on)."""

    def __init__(self, axis: int, depth: Any, values: Any) -> None:
        super().__init__()
        self.axis, self.depth, self.values = axis, int(np.asarray(depth).ravel()[0]), values

    def forward(self, indices: CTensor) -> CTensor:
        idx = indices.to_numpy().astype(np.int64) % self.depth
        off, on = (float(v) for v in np.asarray(self.values).ravel()[:2])
        hot = np.moveaxis(np.eye(self.depth)[idx], -1, self.axis)
        return self.host(off + (on - off) * hot, indices.dev)


class ConstantOfShape(_Constant):
    def __init__(self, value: float = 0.0) -> None:
        super().__init__()
        self.value = float(np.asarray(value).ravel()[0]) if np.size(value) else 0.0

    def forward(self, x: CTensor) -> CTensor:
        shape = tuple(int(d) for d in x.to_numpy().ravel())
        return self.host(np.full(shape, self.value), x.dev)


# ---------------------------------------------------------------- functions (SINGA's names)
def _call(op: Operation, *xs: Tensor) -> Tensor:
    return op(*xs)[0]


def _as_tensor(x: Any, like: Tensor) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(device=like.device, dtype=like.dtype,
                                                  data=np.asarray(x), requires_grad=False)


def _binary(cls: type, a: Any, b: Any) -> Tensor:
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return _call(cls(), a, b)
    if isinstance(a, Tensor) and isinstance(b, (int, float, np.number)):
        return _call(cls(right=float(b)), a)
    if isinstance(b, Tensor) and isinstance(a, (int, float, np.number)):
        return _call(cls(left=float(a)), b)
    if isinstance(a, Tensor):
        return _call(cls(), a, _as_tensor(b, a))
    if isinstance(b, Tensor):
        return _call(cls(), _as_tensor(a, b), b)
    raise TypeError(f"{cls.__name__}: at least one operand must be a singa Tensor, got "
                    f"{type(a).__name__} and {type(b).__name__}")


def _unary_fn(cls: type) -> Any:
    def fn(x: Tensor) -> Tensor:
        return _call(cls(), x)
    return fn


for _name in list(_UNARY) + ["Identity"]:
    globals()[_name.lower()] = _unary_fn(globals()[_name])
sigmoid, softplus, softsign = globals()["sigmoid"], globals()["softplus"], \
    _unary_fn(globals()["SoftSign"])
SoftPlus, SoftSign = globals()["SoftPlus"], globals()["SoftSign"]


def add(a: Any, b: Any) -> Tensor: return _binary(globals()["Add"], a, b)      # noqa: E704
def sub(a: Any, b: Any) -> Tensor: return _binary(globals()["Sub"], a, b)      # noqa: E704
def mul(a: Any, b: Any) -> Tensor: return _binary(globals()["Mul"], a, b)      # noqa: E704
def div(a: Any, b: Any) -> Tensor: return _binary(globals()["Div"], a, b)      # noqa: E704
def pow(a: Any, b: Any) -> Tensor: return _binary(globals()["Pow"], a, b)      # noqa: E704,A001
def prelu(x: Tensor, slope: Tensor) -> Tensor: return _binary(PRelu, x, slope)  # noqa: E704
def less(a: Any, b: Any) -> Tensor: return _binary(globals()["Less"], a, b)    # noqa: E704
def greater(a: Any, b: Any) -> Tensor: return _binary(globals()["Greater"], a, b)  # noqa: E704
def equal(a: Any, b: Any) -> Tensor: return _binary(globals()["Equal"], a, b)  # noqa: E704
def _and(a: Any, b: Any) -> Tensor: return _binary(globals()["And"], a, b)     # noqa: E704
def _or(a: Any, b: Any) -> Tensor: return _binary(globals()["Or"], a, b)       # noqa: E704
def _xor(a: Any, b: Any) -> Tensor: return _binary(globals()["Xor"], a, b)     # noqa: E704
def _not(x: Tensor) -> Tensor: return _call(Not(), x)                          # noqa: E704


def leakyrelu(x: Tensor, a: float = 0.01) -> Tensor:
    return _call(globals()["LeakyRelu"](a), x)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    return _call(globals()["Elu"](alpha), x)


def selu(x: Tensor, alpha: float = 1.67326, gamma: float = 1.0507) -> Tensor:
    return _call(globals()["SeLU"](alpha, gamma), x)


def hardsigmoid(x: Tensor, alpha: float = 0.2, gamma: float = 0.5) -> Tensor:
    return _call(globals()["HardSigmoid"](alpha, gamma), x)


def clip(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
    return _call(globals()["Clip"](min, max), x)


def sum(*l: Tensor) -> Tensor: return _call(Sum(), *l)                      # noqa: E704,A001,E741
def mean(*l: Tensor) -> Tensor: return _call(Mean(), *l)                    # noqa: E704,E741
def min(*l: Tensor) -> Tensor: return _call(Min(), *l)                      # noqa: E704,A001,E741
def max(*l: Tensor) -> Tensor: return _call(Max(), *l)                      # noqa: E704,A001,E741


def add_bias(x: Tensor, b: Tensor, axis: int = 0) -> Tensor:
    return _call(AddBias(axis), x, b)


def matmul(x: Tensor, w: Tensor) -> Tensor:
    return _call(Matmul(), x, w)


def gemm(A: Tensor, B: Tensor, C: Tensor | None = None, alpha: float = 1.0, beta: float = 1.0,
         transA: int = 0, transB: int = 0) -> Tensor:
    op = Gemm(alpha, beta, transA, transB)
    return _call(op, A, B) if C is None else _call(op, A, B, C)


def softmax(x: Tensor, axis: int = 1) -> Tensor:
    return _call(SoftMax(axis), x)


def softmax_cross_entropy(x: Tensor, t: Tensor) -> Tensor:
    return _call(SoftMaxCrossEntropy(), x, t)


def cross_entropy(y: Tensor, t: Tensor) -> Tensor:
    return _call(CrossEntropy(), y, t)


def mse_loss(x: Tensor, t: Tensor) -> Tensor:
    return _call(MeanSquareError(), x, t)


def reshape(x: Tensor, shape: Any) -> Tensor:
    return _call(Reshape(shape), x)


def flatten(x: Tensor, axis: int = 1) -> Tensor:
    return _call(Flatten(axis), x)


def squeeze(x: Tensor, axis: Any = None) -> Tensor:
    return _call(Squeeze(axis), x)


def unsqueeze(x: Tensor, axis: Any = -1) -> Tensor:
    return _call(Unsqueeze(axis), x)


def transpose(x: Tensor, shape: Any = None) -> Tensor:
    return _call(Transpose(shape), x)


def cat(xs: Any, axis: int = 0) -> Tensor:
    return _call(Concat(axis), *xs)


def slice(x: Tensor, starts: Any, ends: Any, axes: Any = None, steps: Any = None) -> Tensor:  # noqa: A001
    return _call(_slice_op(x.shape, starts, ends, axes, steps), x)


def split(x: Tensor, axis: int, parts: Any = None, num_output: int | None = None) -> tuple:
    return Split(axis, parts, num_output)(x)


def gather(x: Tensor, axis: int, indices: Any) -> Tensor:
    return _call(Gather(axis, indices), x)


def tile(x: Tensor, repeats: Any) -> Tensor:
    return _call(Tile(repeats), x)


def shape(x: Tensor) -> Tensor:
    return _call(Shape(), x)


def nonzero(x: Tensor) -> Tensor:
    return _call(NonZero(), x)


def cast(x: Tensor, to: Any) -> Tensor:
    return _call(Cast(to), x)


def onehot(axis: int, indices: Tensor, depth: Any, values: Any) -> Tensor:
    return _call(OneHot(axis, depth, values), indices)


def constant_of_shape(x: Tensor, value: float = 0.0) -> Tensor:
    return _call(ConstantOfShape(value), x)


def reduce_sum(x: Tensor, axes: Any = None, keepdims: int = 1) -> Tensor:
    return _call(ReduceSum(axes, keepdims), x)


def reduce_mean(x: Tensor, axes: Any = None, keepdims: int = 1) -> Tensor:
    return _call(ReduceMean(axes, keepdims), x)


def dropout(x: Tensor, ratio: float = 0.5) -> Tensor:
    return _call(Dropout(ratio), x)


def globalaveragepool(x: Tensor, data_format: str = "channels_first") -> Tensor:
    return _call(GlobalAveragePool(data_format), x)


def _index(x: Tensor, key: Any) -> Tensor:
    """x[key] for ints and slices (an int drops its axis, as numpy)."""
    key = key if isinstance(key, tuple) else (key,)
    if len(key) > len(x.shape):
        raise IndexError(f"too many indices ({len(key)}) for shape {x.shape}")
    keys, dropped = [], []
    for i, k in enumerate(key):
        if isinstance(k, (int, np.integer)):
            n = x.shape[i]
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of range for axis {i} of size {n}")
            keys.append(B.slice(int(k) % n, int(k) % n + 1))
            dropped.append(i)
        elif isinstance(k, B.slice):
            keys.append(k)
        else:
            raise TypeError(f"tensor indices must be ints or slices, got {type(k).__name__}")
    keys += [B.slice(None)] * (len(x.shape) - len(keys))
    return _call(_index_op(x.shape, keys, dropped), x)


# seed 004's spellings
Equal, Mul = globals()["Equal"], globals()["Mul"]
mse = mse_loss
constantOfShape, ConstantOfShapeOp = constant_of_shape, ConstantOfShape
reduceSum, reduceMean = reduce_sum, reduce_mean
ReduceSumOp, ReduceMeanOp = ReduceSum, ReduceMean

__all__ = sorted(set(
    list(_UNARY) + list(_COMPOSITE) + list(_BINARY) + list(_LOGIC) + [n.lower() for n in _UNARY]
    + ["Identity", "identity", "PRelu", "Not", "Sum", "Mean", "Min", "Max", "AddBias", "Cast",
       "Dropout", "ReduceSum", "ReduceMean", "GlobalAveragePool", "SoftMax",
       "SoftMaxCrossEntropy", "CrossEntropy", "MeanSquareError", "Matmul", "Gemm", "Reshape",
       "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Gather", "Tile",
       "Shape", "NonZero", "OneHot", "ConstantOfShape", "softsign", "add", "sub", "mul", "div",
       "pow", "prelu", "less", "greater", "equal", "_and", "_or", "_xor", "_not", "leakyrelu",
       "elu", "selu", "hardsigmoid", "clip", "sum", "mean", "min", "max", "add_bias", "matmul",
       "gemm", "softmax", "softmax_cross_entropy", "cross_entropy", "mse_loss", "reshape",
       "flatten", "squeeze", "unsqueeze", "transpose", "cat", "slice", "split", "gather", "tile",
       "shape", "nonzero", "cast", "onehot", "constant_of_shape", "reduce_sum", "reduce_mean",
       "dropout", "globalaveragepool", "_index", "view", "Equal", "Mul", "MeanSquareError",
       "SoftSign", "SoftPlus", "constantOfShape", "reduceSum", "reduceMean", "mse"]))
ag._export(globals())
