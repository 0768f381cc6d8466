"""The operator table: every op neonlike knows, with its shape rule and numpy reference semantics.

One row per op. Adding an op means adding a member to `Op` and a row to `OP_INFO`; the backend
functions, the reference interpreter and the tests all read this table.

`ref(attrs, *values)` is the op's meaning on numpy arrays already in the compute dtype; it is what
the reference interpreter runs and what every other backend is checked against.
`infer(op, shape_a, shape_b, kwargs) -> (shape, attrs)` checks the operands and normalises the
keyword arguments into the attrs stored in the node's op_dict.
"""
from __future__ import annotations

import enum
import math
from typing import Any, Callable, NamedTuple

import numpy as np

from . import compound as C
from . import shapes as S
from .dtypes import as_dtype, cast_for_store


class Kind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    MATMUL = "matmul"
    STRUCTURAL = "structural"
    COMPOUND = "compound"      # convolution and pooling (compound.py): a stage of their own
    ASSIGN = "assign"


class Op(enum.StrEnum):
    """Op identity. A str, so `op_dict['op'] == 'add'` holds as it did in neon."""

    def __repr__(self) -> str:
        return repr(self.value)

    # Enum's __hash__ is a Python function (hash(self._name_)); the value's str hash is the same
    # for equal members, consistent with `Op.ADD == 'add'`, and runs in C: ops key many dicts.
    __hash__ = str.__hash__

    ASSIGN = "assign"
    # unary elementwise (neon's names first, then seed 004's)
    NEG = "neg"; ABS = "abs"; SGN = "sgn"; SQRT = "sqrt"; SQR = "sqr"         # noqa: E702
    EXP = "exp"; LOG = "log"; EXP2 = "exp2"; LOG2 = "log2"                      # noqa: E702
    SIG = "sig"; SIG2 = "sig2"; TANH = "tanh"; TANH2 = "tanh2"                  # noqa: E702
    SAFELOG = "safelog"; FINITE = "finite"; RINT = "rint"                       # noqa: E702
    CEIL = "ceil"; FLOOR = "floor"; RECIPROCAL = "reciprocal"                   # noqa: E702
    RELU = "relu"; SOFTPLUS = "softplus"; NOT = "not"                           # noqa: E702
    SIN = "sin"; COS = "cos"; TAN = "tan"; ASIN = "asin"; ACOS = "acos"; ATAN = "atan"       # noqa: E702
    SINH = "sinh"; COSH = "cosh"; ASINH = "asinh"; ACOSH = "acosh"; ATANH = "atanh"         # noqa: E702
    # binary elementwise
    ADD = "add"; SUB = "sub"; MUL = "mul"; DIV = "div"; POW = "pow"             # noqa: E702
    EQ = "eq"; NE = "ne"; LT = "lt"; LE = "le"; GT = "gt"; GE = "ge"            # noqa: E702
    MINIMUM = "minimum"; MAXIMUM = "maximum"                                    # noqa: E702
    AND = "and"; OR = "or"; XOR = "xor"                                         # noqa: E702
    # reductions
    SUM = "sum"; MAX = "max"; MIN = "min"; ARGMAX = "argmax"; ARGMIN = "argmin"  # noqa: E702
    # linear algebra and structure
    DOT = "dot"; TRANSPOSE = "transpose"; RESHAPE = "reshape"; SLICE = "slice"  # noqa: E702
    TAKE = "take"; CONCAT = "concatenate"; TILE = "tile"; ONEHOT = "onehot"     # noqa: E702
    CAST = "cast"
    # convolution and pooling in neon's layouts (compound.py)
    CONV = "conv"; CONV_BPROP = "conv_bprop"; CONV_UPDATE = "conv_update"       # noqa: E702
    POOL = "pool"; POOL_BPROP = "pool_bprop"                                    # noqa: E702


class OpInfo(NamedTuple):
    kind: Kind
    arity: int
    ref: Callable[..., Any]
    infer: Callable[..., tuple]
    names: tuple = ()          # backend functions generated for this op (numpy's name first)
    symbol: str | None = None  # infix symbol for pp()


SAFELOG_MIN = math.exp(-50.0)
LN2 = math.log(2.0)


# ---------------------------------------------------------------- shape rules

def _same(op, sa, sb, kw):
    return sa, {}


def _broadcast(op, sa, sb, kw):
    return S.broadcast(sa, sb, op), {}


def _assign(op, sa, sb, kw):
    S.check_assignable(sa, sb)
    return sa, {}


def _reduce(op, sa, sb, kw):
    axes = S.norm_axes(kw.get("axis"), len(sa), op)
    keepdims = bool(kw.get("keepdims", True))
    return S.reduce_shape(sa, axes, keepdims), {"axis": axes, "keepdims": keepdims}


def _arg_reduce(op, sa, sb, kw):
    axis, keepdims = kw.get("axis"), bool(kw.get("keepdims", True))
    if axis is None:
        return (1, 1), {"axis": None, "keepdims": keepdims}
    axis = S.norm_axis(axis, len(sa), op)
    return S.reduce_shape(sa, (axis,), keepdims), {"axis": axis, "keepdims": keepdims}


def _dot(op, sa, sb, kw):
    if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0]:
        raise ValueError(f"dot: expected 2-D operands (m, k) and (k, n), got {sa} and {sb}")
    return (sa[0], sb[1]), {}


def _transpose(op, sa, sb, kw):
    axes = kw.get("axes")
    axes = tuple(reversed(range(len(sa)))) if axes is None else tuple(
        S.norm_axis(a, len(sa), op) for a in axes)
    if sorted(axes) != list(range(len(sa))):
        raise ValueError(f"transpose: axes {kw.get('axes')!r} are not a permutation of the "
                         f"{len(sa)} axes of shape {sa}")
    return tuple(sa[a] for a in axes), {"axes": axes}


def _reshape(op, sa, sb, kw):
    return S.reshape_target(sa, kw["newshape"]), {}


def _slice(op, sa, sb, kw):
    spec = S.slice_spec(sa, kw["index"])
    return S.sliced_shape(spec), {"index": spec}


def _take(op, sa, sb, kw):
    axis = S.norm_axis(kw["axis"], len(sa), op)
    return sa[:axis] + (math.prod(sb),) + sa[axis + 1:], {"axis": axis}


def _concat(op, sa, sb, kw):
    if len(sa) != len(sb):
        raise ValueError(f"concatenate: operands have {len(sa)} and {len(sb)} dimensions ({sa}, {sb})")
    axis = S.norm_axis(kw.get("axis", 0), len(sa), op)
    if any(x != y for i, (x, y) in enumerate(zip(sa, sb)) if i != axis):
        raise ValueError(f"concatenate: shapes {sa} and {sb} differ outside axis {axis}")
    return sa[:axis] + (sa[axis] + sb[axis],) + sa[axis + 1:], {"axis": axis}


def _tile(op, sa, sb, kw):
    reps = S.as_shape(kw["reps"], "tile reps")
    n = max(len(sa), len(reps))
    pa, pr = (1,) * (n - len(sa)) + sa, (1,) * (n - len(reps)) + reps
    return tuple(d * r for d, r in zip(pa, pr)), {"reps": pr}


def _onehot(op, sa, sb, kw):
    depth, axis = kw.get("depth"), kw.get("axis", 0)
    if not isinstance(depth, int) or depth <= 0:
        raise ValueError(f"onehot: depth must be a positive int, got {depth!r}")
    if axis not in (0, 1, -1):
        raise ValueError(f"onehot: axis must be 0 (classes, N) or 1 (N, classes), got {axis!r}")
    n = math.prod(sa)
    return ((depth, n) if axis == 0 else (n, depth)), {"depth": depth, "axis": axis % 2}


def _cast(op, sa, sb, kw):
    return sa, {"dtype": as_dtype(kw["dtype"])}


# keyword arguments each shape rule reads; any other keyword is a TypeError at build time
ACCEPTED_KWARGS = {
    _reduce: ("axis", "keepdims"), _arg_reduce: ("axis", "keepdims"), _transpose: ("axes",),
    _reshape: ("newshape",), _slice: ("index",), _take: ("axis",), _concat: ("axis",),
    _tile: ("reps",), _onehot: ("depth", "axis"), _cast: ("dtype",), **C.ACCEPTED,
}


# ---------------------------------------------------------------- reference semantics

def _u(fn):  # unary elementwise
    return lambda d, x: fn(x)


def _b(fn):  # binary elementwise
    return lambda d, x, y: fn(x, y)


def _onehot_ref(d, idx):
    classes = np.arange(d["depth"], dtype=idx.dtype)
    flat = idx.ravel()
    hot = classes[:, None] == flat[None, :]
    return hot if d["axis"] == 0 else hot.T


def _arg(fn):
    def ref(d, x):
        return fn(x) if d["axis"] is None else fn(x, axis=d["axis"], keepdims=True)
    return ref


def _red(fn):
    return lambda d, x: fn(x, axis=d["axis"], keepdims=True)


E, B, R = Kind.ELEMENTWISE, Kind.REDUCTION, Kind.STRUCTURAL

OP_INFO: dict[Op, OpInfo] = {
    Op.ASSIGN: OpInfo(Kind.ASSIGN, 2, None, _assign),
    Op.NEG: OpInfo(E, 1, _u(np.negative), _same, ("negative",), "-"),
    Op.ABS: OpInfo(E, 1, _u(np.abs), _same, ("absolute", "fabs", "abs")),
    Op.SGN: OpInfo(E, 1, _u(np.sign), _same, ("sign", "sgn")),
    Op.SQRT: OpInfo(E, 1, _u(np.sqrt), _same, ("sqrt",)),
    Op.SQR: OpInfo(E, 1, _u(np.square), _same, ("square",)),
    Op.EXP: OpInfo(E, 1, _u(np.exp), _same, ("exp",)),
    Op.LOG: OpInfo(E, 1, _u(np.log), _same, ("log",)),
    Op.EXP2: OpInfo(E, 1, _u(np.exp2), _same, ("exp2",)),
    Op.LOG2: OpInfo(E, 1, _u(np.log2), _same, ("log2",)),
    Op.SIG: OpInfo(E, 1, _u(lambda x: 1 / (1 + np.exp(-x))), _same, ("sig", "sigmoid")),
    Op.SIG2: OpInfo(E, 1, _u(lambda x: 1 / (1 + np.exp2(-x))), _same, ("sig2",)),
    Op.TANH: OpInfo(E, 1, _u(np.tanh), _same, ("tanh",)),
    Op.TANH2: OpInfo(E, 1, _u(lambda x: np.tanh(x * LN2)), _same, ("tanh2",)),
    Op.SAFELOG: OpInfo(E, 1, _u(lambda x: np.log(np.maximum(x, SAFELOG_MIN))), _same, ("safelog",)),
    Op.FINITE: OpInfo(E, 1, _u(np.isfinite), _same, ("finite", "isfinite")),
    Op.RINT: OpInfo(E, 1, _u(np.rint), _same, ("rint",)),
    Op.CEIL: OpInfo(E, 1, _u(np.ceil), _same, ("ceil",)),
    Op.FLOOR: OpInfo(E, 1, _u(np.floor), _same, ("floor",)),
    Op.RECIPROCAL: OpInfo(E, 1, _u(lambda x: 1 / x), _same, ("reciprocal",)),
    Op.RELU: OpInfo(E, 1, _u(lambda x: np.maximum(x, 0)), _same, ("relu",)),
    Op.SOFTPLUS: OpInfo(E, 1, _u(lambda x: np.logaddexp(0, x)), _same, ("softplus",)),
    Op.NOT: OpInfo(E, 1, _u(np.logical_not), _same, ("logical_not",)),
    Op.SIN: OpInfo(E, 1, _u(np.sin), _same, ("sin",)),
    Op.COS: OpInfo(E, 1, _u(np.cos), _same, ("cos",)),
    Op.TAN: OpInfo(E, 1, _u(np.tan), _same, ("tan",)),
    Op.ASIN: OpInfo(E, 1, _u(np.arcsin), _same, ("arcsin", "asin")),
    Op.ACOS: OpInfo(E, 1, _u(np.arccos), _same, ("arccos", "acos")),
    Op.ATAN: OpInfo(E, 1, _u(np.arctan), _same, ("arctan", "atan")),
    Op.SINH: OpInfo(E, 1, _u(np.sinh), _same, ("sinh",)),
    Op.COSH: OpInfo(E, 1, _u(np.cosh), _same, ("cosh",)),
    Op.ASINH: OpInfo(E, 1, _u(np.arcsinh), _same, ("arcsinh", "asinh")),
    Op.ACOSH: OpInfo(E, 1, _u(np.arccosh), _same, ("arccosh", "acosh")),
    Op.ATANH: OpInfo(E, 1, _u(np.arctanh), _same, ("arctanh", "atanh")),
    Op.ADD: OpInfo(E, 2, _b(np.add), _broadcast, ("add",), "+"),
    Op.SUB: OpInfo(E, 2, _b(np.subtract), _broadcast, ("subtract",), "-"),
    Op.MUL: OpInfo(E, 2, _b(np.multiply), _broadcast, ("multiply",), "*"),
    Op.DIV: OpInfo(E, 2, _b(np.divide), _broadcast, ("divide", "true_divide"), "/"),
    Op.POW: OpInfo(E, 2, _b(np.power), _broadcast, ("power",), "**"),
    Op.EQ: OpInfo(E, 2, _b(np.equal), _broadcast, ("equal",), "=="),
    Op.NE: OpInfo(E, 2, _b(np.not_equal), _broadcast, ("not_equal",), "!="),
    Op.LT: OpInfo(E, 2, _b(np.less), _broadcast, ("less",), "<"),
    Op.LE: OpInfo(E, 2, _b(np.less_equal), _broadcast, ("less_equal",), "<="),
    Op.GT: OpInfo(E, 2, _b(np.greater), _broadcast, ("greater",), ">"),
    Op.GE: OpInfo(E, 2, _b(np.greater_equal), _broadcast, ("greater_equal",), ">="),
    Op.MINIMUM: OpInfo(E, 2, _b(np.minimum), _broadcast, ("minimum",)),
    Op.MAXIMUM: OpInfo(E, 2, _b(np.maximum), _broadcast, ("maximum",)),
    Op.AND: OpInfo(E, 2, _b(np.logical_and), _broadcast, ("logical_and",)),
    Op.OR: OpInfo(E, 2, _b(np.logical_or), _broadcast, ("logical_or",)),
    Op.XOR: OpInfo(E, 2, _b(np.logical_xor), _broadcast, ("logical_xor",)),
    Op.SUM: OpInfo(B, 1, _red(np.sum), _reduce),
    Op.MAX: OpInfo(B, 1, _red(np.max), _reduce),
    Op.MIN: OpInfo(B, 1, _red(np.min), _reduce),
    Op.ARGMAX: OpInfo(B, 1, _arg(np.argmax), _arg_reduce),
    Op.ARGMIN: OpInfo(B, 1, _arg(np.argmin), _arg_reduce),
    Op.DOT: OpInfo(Kind.MATMUL, 2, _b(np.dot), _dot, (), "@"),
    Op.TRANSPOSE: OpInfo(R, 1, lambda d, x: np.transpose(x, d["axes"]), _transpose),
    Op.RESHAPE: OpInfo(R, 1, lambda d, x: np.reshape(x, d["shape"]), _reshape),
    Op.SLICE: OpInfo(R, 1, lambda d, x: x[tuple(S.as_slice(t) for t in d["index"])], _slice),
    Op.TAKE: OpInfo(R, 2, lambda d, x, i: np.take(x, i.ravel().astype(np.intp), d["axis"]), _take),
    Op.CONCAT: OpInfo(R, 2, lambda d, x, y: np.concatenate((x, y), d["axis"]), _concat),
    Op.TILE: OpInfo(R, 1, lambda d, x: np.tile(x, d["reps"]), _tile),
    Op.ONEHOT: OpInfo(R, 1, _onehot_ref, _onehot),
    Op.CAST: OpInfo(E, 1, lambda d, x: cast_for_store(x, d["dtype"]).astype(x.dtype), _cast),
    Op.CONV: OpInfo(Kind.COMPOUND, 2, C.conv_ref, C.conv_shape),
    Op.CONV_BPROP: OpInfo(Kind.COMPOUND, 2, C.conv_bprop_ref, C.conv_bprop_shape),
    Op.CONV_UPDATE: OpInfo(Kind.COMPOUND, 2, C.conv_update_ref, C.conv_update_shape),
    Op.POOL: OpInfo(Kind.COMPOUND, 1, C.pool_ref, C.pool_shape),
    Op.POOL_BPROP: OpInfo(Kind.COMPOUND, 2, C.pool_bprop_ref, C.pool_bprop_shape),
}

def as_op(op: Any) -> Op:
    """An op from its name or itself; ValueError listing the known names otherwise."""
    try:
        return Op(op)
    except ValueError:
        raise ValueError(f"unknown op {op!r}; known ops: {', '.join(o.value for o in Op)}") from None
