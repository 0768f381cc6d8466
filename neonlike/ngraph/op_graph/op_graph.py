"""Nervana Graph ops (seed 003): a graph of Ops with data, initializer and control dependencies.

    x = ng.placeholder([C, N]); w = ng.variable([Y, C], initial_value=0.1)
    y = ng.tanh(ng.dot(w, x))               # builds ops; nothing runs
    ng.assign(w, w - 0.1 * ng.deriv(ng.squared_L2(y), w))
    f = ng.make_transformer().computation(y, x)    # runs on neonlike's engine (transformers/)

Every op holds `args` (its data dependencies), `initializers` (ops that run once before any
computation: a constant's or an initialised variable's value), `other_deps` (control dependencies,
see `assign`), `axes` (its result's, from the axis core: neonlike/axes.py), `name` (unique by
default, settable), `metadata`, and `filename` / `lineno` / `file_info` of the line that built it.

Axis semantics (seed 000): an elementwise result takes its left operand's axes, then the right's
that are new; operands pair by axis identity, never by position (no size-1 numpy broadcasting
between different axes). A reduction removes `reduction_axes` (default: every axis but the batch
and recurrent ones; `[]` reduces nothing; `out_axes` alone keeps those). `dot` contracts the axes
of x that are duals (offset -1) of axes of y, `(H, W - 1) . (W, N) -> (H, N)` in any order, and
where there is no such pair, the axes both share (seed 003's `dot(w, x)`).

Graph semantics: `assign(w, v)` (also `w[:] = v`, `ng.SetItem(w, v)`) makes every op built later
from `w` depend on it (`other_deps`), and so do computations of `w`: `computation(w)` after
`assign(w, w + 1)` gives 1, 2, 3 on three calls. Under `with ng.Op.saved_user_deps():` the
assignment is recorded in a map thrown away at the block's end: 0, 0, 0 unless the update op is
asked for. `deriv(dependent, independent, error)` builds a graph only (a DerivOp); its value is
computed by lowering the dependent's graph onto the engine and running neonlike's Autodiff on it,
so ngraph's derivatives use the engine's one rule table.

Choices where the seeds are silent: ops compare and hash by identity (`==` is identity as in
ngraph, whose ops key dicts; use `ng.equal` for elementwise equality); a number or numpy scalar
operand is a scalar constant; a numpy array operand needs axes (`ng.constant(a, axes)`): an array
without them gets fresh anonymous axes, which pair with nothing. `mod` is numpy's (floored).
Results are float32 as in ngraph, unless an operand is float64 (then float64: the numeric
derivative checks run in it); comparisons give booleans, argmax / argmin int32.
"""
from __future__ import annotations

import builtins
import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from ...axes import Axes, Axis, FlattenedAxis, make_axis
from ...ops import Op as E
from ..util.ordered import OrderedSet

_NAME_COUNTS: dict = {}
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _unique_name(prefix: str) -> str:
    n = _NAME_COUNTS[prefix] = _NAME_COUNTS.get(prefix, 0) + 1
    return f"{prefix}_{n}"


def _caller() -> tuple[str, int]:
    """(file, line) of the first frame outside neonlike.ngraph: the user's line."""
    frame = sys._getframe(2)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return "<unknown>", 0
    return frame.f_code.co_filename, frame.f_lineno


class Op:
    """A node of the graph. Ops compare and hash by identity (they key dicts)."""

    # tensor op -> the AssignOps recorded for it; `saved_user_deps` swaps in a fresh map
    _user_deps: dict = {}

    def __init__(self, args: Any = (), metadata: dict | None = None, name: str | None = None,
                 **kwargs: Any) -> None:
        self.args = tuple(as_op(a) for a in args)
        self.initializers: OrderedSet = OrderedSet()
        self.other_deps: OrderedSet = OrderedSet()
        for a in self.args:
            deps = Op._user_deps.get(a)
            if deps:
                self.other_deps.update(deps)
        self.metadata = dict(metadata or {})
        self._name = name if name is not None else _unique_name(type(self).__name__)
        self.filename, self.lineno = _caller()
        self.schemas: list = []
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) "
                            f"{sorted(kwargs)}")

    # ---- identity, names, debug info
    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, name: str) -> None:
        self._name = name

    @property
    def file_info(self) -> str:
        return f'File "{self.filename}", line {self.lineno}'

    def __repr__(self) -> str:
        return f"<{type(self).__name__}({self.name}):{id(self)}>"

    # ---- control dependencies
    @staticmethod
    @contextmanager
    def saved_user_deps(user_deps_map: dict | None = None) -> Iterator[None]:
        """Assignments made inside the block are recorded in a map thrown away at its end."""
        saved = Op._user_deps
        Op._user_deps = {} if user_deps_map is None else user_deps_map
        try:
            yield
        finally:
            Op._user_deps = saved

    def add_other_dep(self, op: Op) -> None:
        self.other_deps.add(op)

    # ---- schemas
    def add_schema(self, schema: Any) -> None:
        self.schemas.append(schema)

    def find_schema(self, t: type) -> Any:
        for schema in self.schemas:
            if isinstance(schema, t):
                return schema
        return None

    # ---- graph queries
    def all_deps(self) -> Iterator[Op]:
        yield from self.args
        yield from self.other_deps

    def variables(self, filter: Callable[[Op], bool] | None = None) -> list:
        """The trainable variables this op depends on, in the order first reached."""
        found, seen, stack = [], set(), [self]
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            if isinstance(op, AssignableTensorOp) and op.is_trainable and \
                    (filter is None or filter(op)):
                found.append(op)
            stack.extend(reversed(op.args))
        return found


class TensorOp(Op):
    """An op with a tensor value: `axes` and `dtype`; Python operators build ops."""

    def __init__(self, args: Any = (), axes: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(args, **kwargs)
        self._axes = Axes(axes) if axes is not None else Axes()
        self.dtype = np.dtype(dtype if dtype is not None else np.float32)

    @property
    def axes(self) -> Axes:
        return self._axes

    @property
    def shape(self) -> tuple:
        return self._axes.lengths

    # operators (no ==: identity; ng.equal is elementwise)
    def __add__(self, y: Any) -> TensorOp: return add(self, y)
    def __radd__(self, y: Any) -> TensorOp: return add(y, self)
    def __sub__(self, y: Any) -> TensorOp: return subtract(self, y)
    def __rsub__(self, y: Any) -> TensorOp: return subtract(y, self)
    def __mul__(self, y: Any) -> TensorOp: return multiply(self, y)
    def __rmul__(self, y: Any) -> TensorOp: return multiply(y, self)
    def __truediv__(self, y: Any) -> TensorOp: return divide(self, y)
    def __rtruediv__(self, y: Any) -> TensorOp: return divide(y, self)
    def __mod__(self, y: Any) -> TensorOp: return mod(self, y)
    def __rmod__(self, y: Any) -> TensorOp: return mod(y, self)
    def __pow__(self, y: Any) -> TensorOp: return power(self, y)
    def __rpow__(self, y: Any) -> TensorOp: return power(y, self)
    def __lt__(self, y: Any) -> TensorOp: return less(self, y)
    def __le__(self, y: Any) -> TensorOp: return less_equal(self, y)
    def __gt__(self, y: Any) -> TensorOp: return greater(self, y)
    def __ge__(self, y: Any) -> TensorOp: return greater_equal(self, y)
    def __neg__(self) -> TensorOp: return negative(self)
    def __pos__(self) -> TensorOp: return self
    def __abs__(self) -> TensorOp: return absolute(self)

    __array_ufunc__ = None   # numpy defers: np.float32(2) * x builds an op

    def __getitem__(self, key: Any) -> TensorOp:
        return tensor_slice(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        if not _full_slice(key, len(self.axes)):
            raise ValueError(f"{self.name}[...] = value: only x[:] = value (the whole tensor) is "
                             f"an assignment; got the index {key!r}")
        assign(self, value)


def _full_slice(key: Any, n: int) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    whole = builtins.all(k == slice(None) or k is Ellipsis for k in keys)
    return whole and len(keys) <= builtins.max(n, 1)


# **************** tensors with storage ****************

class AssignableTensorOp(TensorOp):
    """A tensor with storage: a placeholder (a computation's input), a constant, a variable
    (trainable) or other persistent storage. `initial_value` is a value, an op or a callable
    (called with the tensor's axes lengths, returning an array)."""

    def __init__(self, axes: Any = None, dtype: Any = None, initial_value: Any = None,
                 is_input: bool = False, is_constant: bool = False, is_trainable: bool = False,
                 is_persistent: bool = False, const: Any = None, **kwargs: Any) -> None:
        super().__init__((), axes=axes, dtype=dtype, **kwargs)
        self.is_input, self.is_constant = is_input, is_constant
        self.is_trainable, self.is_persistent = is_trainable, is_persistent
        self.const = const
        self.initial_value = initial_value
        if initial_value is not None:
            with Op.saved_user_deps():   # initializers never order user computations
                self.initializers.add(InitTensorOp(self, initial_value))

    @property
    def input(self) -> bool:
        """Upstream's spelling of `is_input` (its tests set `v.input = True` to feed a variable
        through a computation's arguments)."""
        return self.is_input

    @input.setter
    def input(self, value: bool) -> None:
        self.is_input = bool(value)

    @property
    def is_scalar_constant(self) -> bool:
        return self.is_constant and not len(self.axes) and self.const is not None

    def __repr__(self) -> str:
        if self.is_scalar_constant:
            return f"<AssignableTensorOp(<Const({self.const})>):{id(self)}>"
        return super().__repr__()


class InitTensorOp(Op):
    """Fills a tensor with its initial value before any computation runs."""

    def __init__(self, tensor: AssignableTensorOp, value: Any, **kwargs: Any) -> None:
        super().__init__((), **kwargs)
        self.tensor, self.value = tensor, value


def placeholder(axes: Any, dtype: Any = None, initial_value: Any = None) -> AssignableTensorOp:
    """An input: its value comes from the computation's arguments (or initial_value)."""
    return AssignableTensorOp(axes, dtype, initial_value, is_input=True, is_persistent=True)


def variable(axes: Any, dtype: Any = None, initial_value: Any = None) -> AssignableTensorOp:
    """A trainable tensor that keeps its value between computations."""
    return AssignableTensorOp(axes, dtype, initial_value, is_trainable=True, is_persistent=True)


def persistent_tensor(axes: Any, dtype: Any = None, initial_value: Any = None) -> Any:
    return AssignableTensorOp(axes, dtype, initial_value, is_persistent=True)


def temporary(axes: Any, dtype: Any = None, initial_value: Any = None) -> Any:
    return AssignableTensorOp(axes, dtype, initial_value)


def constant_storage(axes: Any, dtype: Any = None, initial_value: Any = None) -> Any:
    return AssignableTensorOp(axes, dtype, initial_value, is_persistent=True)


def constant(const: Any, axes: Any = None, dtype: Any = None) -> AssignableTensorOp:
    """A constant: a number (no axes) or an array labelled by `axes` (its lengths must agree;
    an axis of unknown length takes the array's)."""
    value = np.asarray(const)
    if axes is None:
        axes = [make_axis(length=n) for n in value.shape]
    axes = Axes(axes)
    if len(axes) != value.ndim:
        raise ValueError(f"constant: a value of shape {value.shape} needs {value.ndim} axes, "
                         f"got {len(axes)}: {list(axes)}")
    for axis, n in zip(axes, value.shape):
        if axis.length is None:
            axis.length = n
        elif axis.length != n:
            raise ValueError(f"constant: axis {axis.name or axis} has length {axis.length}, the "
                             f"value's dimension is {n} (value shape {value.shape})")
    dt = dtype if dtype is not None else (np.float32 if value.dtype.kind in "biuf" else value.dtype)
    return AssignableTensorOp(axes, dt, value, is_constant=True, is_persistent=True,
                              const=value.item() if value.ndim == 0 else value)


def as_op(x: Any) -> Op:
    """An Op as is; a number or array as a constant."""
    if isinstance(x, Op):
        return x
    if isinstance(x, (int, float, bool, np.number, np.bool_)) or \
            (isinstance(x, np.ndarray) and x.ndim == 0):
        return constant(x)
    if isinstance(x, np.ndarray):
        return constant(x)
    raise TypeError(f"expected an ngraph op, a number or a numpy array, got {type(x).__name__}")


# **************** assignment and control ****************

class AssignOp(Op):
    """`lvalue[:] = rvalue` (broadcast to lvalue's axes) when the computation runs; ops built
    later from lvalue depend on it."""

    def __init__(self, lvalue: Any, rvalue: Any, force: bool = False, **kwargs: Any) -> None:
        lvalue, rvalue = as_op(lvalue), as_op(rvalue)
        if not isinstance(lvalue, AssignableTensorOp):
            raise TypeError(f"assign: the left side must be a tensor with storage (a variable, "
                            f"placeholder, ...), got {type(lvalue).__name__} {lvalue.name}")
        if lvalue.is_constant and not force:
            raise ValueError(f"assign: {lvalue.name} is a constant (use force=True to assign it)")
        extra = rvalue.axes - lvalue.axes
        if len(extra):
            raise ValueError(f"assign: the value has axes {list(extra)} that {lvalue.name} "
                             f"(axes {list(lvalue.axes)}) lacks")
        super().__init__((lvalue, rvalue), **kwargs)
        Op._user_deps[lvalue] = OrderedSet([self])


SetItem = AssignOp


def assign(lvalue: Any, rvalue: Any, force: bool = False) -> AssignOp:
    return AssignOp(lvalue, rvalue, force=force)


class doall(Op):
    """An op that runs all of `all` (its control dependencies)."""

    def __init__(self, all: Any, **kwargs: Any) -> None:
        super().__init__((), **kwargs)
        self.other_deps.update(as_op(a) for a in all)


# **************** elementwise ****************

class ElementWise(TensorOp):
    """An elementwise op: `engine` names the engine op (or a composite) it lowers to."""
    engine: Any = None


def _elementwise_axes(args: tuple) -> Axes:
    axes = Axes()
    for a in args:
        axes = axes + a.axes
    for axis in axes:
        lengths = {a.axes[a.axes.index(axis)].length for a in args if axis in a.axes}
        if len(lengths - {None}) > 1:
            raise ValueError(f"axis {axis.name or axis} has different lengths in the operands: "
                             f"{sorted(x for x in lengths if x is not None)}")
    return axes


def _elementwise_class(name: str, engine: Any, arity: int) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) != arity:
            raise TypeError(f"{name} takes {arity} operand(s), got {len(args)}")
        ops = tuple(as_op(a) for a in args)
        for a in ops:
            if not isinstance(a, TensorOp):
                raise TypeError(f"{name}: operands must be tensor ops, got {type(a).__name__}")
        dtype = np.bool_ if engine in _COMPARISONS else _float_dtype(ops)
        ElementWise.__init__(self, ops, axes=_elementwise_axes(ops), dtype=dtype, **kwargs)
    return type(name, (ElementWise,), {"__init__": __init__, "engine": engine, "arity": arity})


_COMPARISONS = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)


def _float_dtype(ops: Any) -> np.dtype:
    """The widest floating dtype of the operands (float32 at least): float64 inputs give
    float64 results, everything else float32 as in ngraph."""
    floats = [a.dtype for a in ops if a.dtype.kind == "f"]
    return np.dtype(np.result_type(np.float32, *floats))


# (class, function, engine op or composite name, arity)
_ELEMENTWISE = [
    ("NegativeOp", "negative", E.NEG, 1), ("AbsoluteOp", "absolute", E.ABS, 1),
    ("SinOp", "sin", E.SIN, 1), ("CosOp", "cos", E.COS, 1), ("TanhOp", "tanh", E.TANH, 1),
    ("ExpOp", "exp", E.EXP, 1), ("LogOp", "log", E.LOG, 1), ("SafeLogOp", "safelog", E.SAFELOG, 1),
    ("ReciprocalOp", "reciprocal", E.RECIPROCAL, 1), ("SignOp", "sign", E.SGN, 1),
    ("SquareOp", "square", E.SQR, 1), ("SqrtOp", "sqrt", E.SQRT, 1),
    ("SigmoidOp", "sigmoid", E.SIG, 1),
    ("AddOp", "add", E.ADD, 2), ("SubtractOp", "subtract", E.SUB, 2),
    ("MultiplyOp", "multiply", E.MUL, 2), ("DivideOp", "divide", E.DIV, 2),
    ("ModOp", "mod", "mod", 2), ("MaximumOp", "maximum", E.MAXIMUM, 2),
    ("MinimumOp", "minimum", E.MINIMUM, 2), ("PowerOp", "power", E.POW, 2),
    ("EqualOp", "equal", E.EQ, 2), ("NotEqualOp", "not_equal", E.NE, 2),
    ("GreaterOp", "greater", E.GT, 2), ("LessOp", "less", E.LT, 2),
    ("GreaterEqualOp", "greater_equal", E.GE, 2), ("LessEqualOp", "less_equal", E.LE, 2),
]
_g = globals()
for _cls, _fn, _engine, _arity in _ELEMENTWISE:
    _g[_cls] = _elementwise_class(_cls, _engine, _arity)
    _g[_fn] = (lambda c: lambda *args, name=None: c(*args, name=name))(_g[_cls])
    _g[_fn].__name__ = _fn
    _g[_fn].__doc__ = f"The elementwise {_fn} of its operands (seed 000's axis rules)."
# seed-era short class names (ngraph's `Add`, `Multiply`, ...)
Add, Subtract, Multiply, Divide = AddOp, SubtractOp, MultiplyOp, DivideOp  # noqa: F821
Maximum, Minimum, Power, Mod = MaximumOp, MinimumOp, PowerOp, ModOp          # noqa: F821
Equal, NotEqual, Greater, Less = EqualOp, NotEqualOp, GreaterOp, LessOp      # noqa: F821
GreaterEqual, LessEqual = GreaterEqualOp, LessEqualOp                        # noqa: F821


class Sigmoid:
    """Schema: this op is sigmoid(x) (cross_entropy_binary takes the stable form)."""

    def __init__(self, x: Any) -> None:
        self.x = x


def _sigmoid(x: Any, name: str | None = None) -> TensorOp:
    result = SigmoidOp(x, name=name)  # noqa: F821
    result.add_schema(Sigmoid(as_op(x)))
    return result


sigmoid = _sigmoid


# **************** reductions ****************

class ReductionOp(TensorOp):
    """A reduction of `x` over `reduction_axes` (the result keeps the rest, in x's order)."""
    engine: Any = None

    def __init__(self, x: Any, reduction_axes: Any = None, out_axes: Any = None,
                 dtype: Any = None, **kwargs: Any) -> None:
        x = as_op(x)
        red, out = _reduction_axes(x, reduction_axes, out_axes, type(self).__name__)
        if dtype is None:
            dtype = np.int32 if self.engine in (E.ARGMAX, E.ARGMIN) else _float_dtype((x,))
        super().__init__((x,), axes=out, dtype=dtype, **kwargs)
        self.reduction_axes = red


def _reduction_axes(x: TensorOp, reduction_axes: Any, out_axes: Any, name: str) -> tuple:
    if reduction_axes is None and out_axes is None:
        red = x.axes.sample_axes() - x.axes.recurrent_axes()
    elif reduction_axes is None:
        red = x.axes - Axes(out_axes)
    else:
        red = Axes(reduction_axes)
    missing = red - x.axes
    if len(missing):
        raise ValueError(f"{name}: reduction axes {list(missing)} are not axes of its operand "
                         f"{x.name} (axes {list(x.axes)})")
    out = x.axes - red
    if out_axes is not None:
        if not Axes(out_axes).has_same_axes(out):
            raise ValueError(f"{name}: out_axes {list(Axes(out_axes))} are not the operand's axes "
                             f"less the reduction axes {list(red)} ({list(out)})")
        out = Axes(out_axes)
    return red, out


def _reduction_class(name: str, engine: Any) -> type:
    return type(name, (ReductionOp,), {"engine": engine})


Sum, Max, Min = (_reduction_class(n, e) for n, e in (("Sum", E.SUM), ("Max", E.MAX),
                                                      ("Min", E.MIN)))
Argmax, Argmin = _reduction_class("Argmax", E.ARGMAX), _reduction_class("Argmin", E.ARGMIN)


def sum(x: Any, reduction_axes: Any = None, out_axes: Any = None) -> TensorOp:  # noqa: A001
    return Sum(x, reduction_axes, out_axes)


def max(x: Any, reduction_axes: Any = None, out_axes: Any = None) -> TensorOp:  # noqa: A001
    return Max(x, reduction_axes, out_axes)


def min(x: Any, reduction_axes: Any = None, out_axes: Any = None) -> TensorOp:  # noqa: A001
    return Min(x, reduction_axes, out_axes)


def argmax(x: Any, dtype: Any = None, reduction_axes: Any = None, out_axes: Any = None) -> Any:
    return Argmax(x, reduction_axes, out_axes, dtype=dtype)


def argmin(x: Any, dtype: Any = None, reduction_axes: Any = None, out_axes: Any = None) -> Any:
    return Argmin(x, reduction_axes, out_axes, dtype=dtype)


def tensor_size(x: Any, reduction_axes: Any = None, out_axes: Any = None) -> TensorOp:
    """The number of elements reduced (a scalar constant, its lengths read when it runs)."""
    red, _ = _reduction_axes(as_op(x), reduction_axes, out_axes, "tensor_size")
    return TensorSizeOp(red)


class TensorSizeOp(TensorOp):
    """The product of some axes' lengths: a scalar known once the lengths are."""

    def __init__(self, size_axes: Axes, **kwargs: Any) -> None:
        super().__init__((), axes=(), **kwargs)
        self.size_axes = size_axes


def batch_size(x: Any) -> TensorOp:
    return TensorSizeOp(as_op(x).axes.batch_axes())


def mean(x: Any, reduction_axes: Any = None, out_axes: Any = None) -> TensorOp:
    return sum(x, reduction_axes, out_axes) / tensor_size(x, reduction_axes, out_axes)


def variance(x: Any, reduction_axes: Any = None, out_axes: Any = None) -> TensorOp:
    return mean(square(x - mean(x, reduction_axes, out_axes)), reduction_axes, out_axes)  # noqa: F821


# **************** dot ****************

class DotOp(TensorOp):
    """x . y contracting `x_reduce` of x with `y_reduce` of y (pairwise, in that order)."""

    def __init__(self, x: Any, y: Any, **kwargs: Any) -> None:
        x, y = as_op(x), as_op(y)
        xr, yr = _dot_pairs(x, y)
        super().__init__((x, y), axes=(x.axes - Axes(xr)) + (y.axes - Axes(yr)),
                         dtype=_float_dtype((x, y)), **kwargs)
        self.x_reduce, self.y_reduce = Axes(xr), Axes(yr)
        for a, b in zip(xr, yr):
            if a.length is not None and b.length is not None and a.length != b.length:
                raise ValueError(f"dot: contracted axes {a.name} and {b.name} have lengths "
                                 f"{a.length} and {b.length}")


def _dot_pairs(x: TensorOp, y: TensorOp) -> tuple[list, list]:
    """The contracted axes: x's axes that are y's axes shifted by -1 (dual pairs), else the axes
    both share. A shared axis that is not contracted is an error."""
    xr, yr = [], []
    for a in x.axes:
        for b in y.axes:
            if b.get_dual(-1) == a:
                xr.append(a)
                yr.append(b)
    if not xr:
        shared = [a for a in x.axes if a in y.axes]
        return shared, shared
    left = [a for a in x.axes if a in y.axes and a not in xr]
    if left:
        raise ValueError(f"dot: axes {left} are in both operands but not contracted (the dual "
                         f"pairs {list(zip(xr, yr))} are): cast one of them (ng.cast_axes)")
    return xr, yr


def dot(x: Any, y: Any, name: str | None = None) -> TensorOp:
    return DotOp(x, y, name=name)


def squared_L2(x: Any) -> TensorOp:
    """The sum of squares of x over all its axes but the batch ones."""
    x = as_op(x)
    return sum(x * x, reduction_axes=x.axes - x.axes.batch_axes())


# **************** axes ****************

class AxesOp(TensorOp):
    """An op that relabels, reorders, broadcasts, slices or reshapes its operand's axes."""


class BroadcastOp(AxesOp):
    def __init__(self, x: Any, axes: Any, **kwargs: Any) -> None:
        x = as_op(x)
        axes = Axes(axes)
        if len(x.axes - axes):
            raise ValueError(f"broadcast: the new axes {list(axes)} must include all of "
                             f"{x.name}'s axes {list(x.axes)}")
        super().__init__((x,), axes=axes, dtype=x.dtype, **kwargs)


class ReorderAxes(AxesOp):
    def __init__(self, x: Any, axes: Any, **kwargs: Any) -> None:
        x = as_op(x)
        axes = Axes(axes)
        if not axes.has_same_axes(x.axes):
            raise ValueError(f"axes_with_order: {list(axes)} are not a reordering of "
                             f"{x.name}'s axes {list(x.axes)}")
        super().__init__((x,), axes=axes, dtype=x.dtype, **kwargs)


class AxesCastOp(AxesOp):
    def __init__(self, x: Any, axes: Any, **kwargs: Any) -> None:
        x = as_op(x)
        axes = Axes(axes)
        if len(axes) != len(x.axes):
            raise ValueError(f"cast_axes: {x.name} has {len(x.axes)} axes {list(x.axes)}, "
                             f"got {len(axes)}: {list(axes)}")
        for a, b in zip(x.axes, axes):
            if a.length is not None and b.length is not None and a.length != b.length:
                raise ValueError(f"cast_axes: axis {a.name} (length {a.length}) cannot be cast to "
                                 f"{b.name} (length {b.length})")
        super().__init__((x,), axes=axes, dtype=x.dtype, **kwargs)


class ExpandDims(AxesOp):
    def __init__(self, x: Any, axis: Axis, dim: int, **kwargs: Any) -> None:
        x = as_op(x)
        axes = list(x.axes)
        axes.insert(dim, axis)
        super().__init__((x,), axes=axes, dtype=x.dtype, **kwargs)


class TensorSliceOp(AxesOp):
    """x[slices]: an integer drops its axis; a slice makes a SlicedAxis (a new axis)."""

    def __init__(self, x: Any, slices: tuple, axes: Any = None, **kwargs: Any) -> None:
        from ...axes import SlicedAxis
        x = as_op(x)
        if len(slices) > len(x.axes):
            raise ValueError(f"slice: {len(slices)} indices for {x.name}'s {len(x.axes)} axes")
        slices = tuple(slices) + (slice(None),) * (len(x.axes) - len(slices))
        kept = []
        for axis, s in zip(x.axes, slices):
            if isinstance(s, slice):
                kept.append(axis if s == slice(None) else SlicedAxis(axis, s))
            elif not isinstance(s, (int, np.integer)):
                raise TypeError(f"slice: an index must be an int or a slice, got {s!r}")
        if axes is not None:
            if len(Axes(axes)) != len(kept):
                raise ValueError(f"slice: axes {list(Axes(axes))} for a result with "
                                 f"{len(kept)} axes")
            kept = list(Axes(axes))
        super().__init__((x,), axes=kept, dtype=x.dtype, **kwargs)
        self.slices = slices


class Flatten(AxesOp):
    def __init__(self, x: Any, axes: Any, **kwargs: Any) -> None:
        x = as_op(x)
        super().__init__((x,), axes=axes, dtype=x.dtype, **kwargs)


class Unflatten(AxesOp):
    def __init__(self, x: Any, axes: Any, **kwargs: Any) -> None:
        x = as_op(x)
        super().__init__((x,), axes=axes, dtype=x.dtype, **kwargs)


def broadcast(x: Any, axes: Any) -> TensorOp:
    return BroadcastOp(x, axes)


def axes_with_order(x: Any, axes: Any) -> TensorOp:
    return ReorderAxes(x, axes)


def cast_axes(tensor: Any, axes: Any) -> TensorOp:
    return AxesCastOp(tensor, axes)


def expand_dims(x: Any, axis: Axis, dim: int) -> TensorOp:
    return ExpandDims(x, axis, dim)


def tensor_slice(x: Any, slices: Any, axes: Any = None) -> TensorOp:
    return TensorSliceOp(x, slices if isinstance(slices, tuple) else (slices,), axes)


def slice_along_axis(x: Any, axis: Axis, idx: Any) -> TensorOp:
    x = as_op(x)
    pos = x.axes.index(axis)
    return tensor_slice(x, tuple(idx if i == pos else slice(None) for i in range(len(x.axes))))


def flatten(x: Any, axes: Any = None) -> TensorOp:
    """x with its axes merged into one FlattenedAxis (all of them, or `axes`, a leading run)."""
    x = as_op(x)
    axes = x.axes if axes is None else Axes(axes)
    if list(x.axes)[:len(axes)] != list(axes):
        raise ValueError(f"flatten: {list(axes)} must be the leading axes of {x.name}'s "
                         f"{list(x.axes)}")
    return Flatten(x, [axes.flatten()] + list(x.axes)[len(axes):])


def flatten_at(x: Any, idx: int) -> TensorOp:
    """x with its axes before `idx` merged into one axis and those from `idx` on into another."""
    x = as_op(x)
    if idx in (0, len(x.axes)):
        return flatten(x)
    parts = (x.axes[:idx], x.axes[idx:])
    return Flatten(x, [p[0] if len(p) == 1 else p.flatten() for p in parts])


def unflatten(x: Any, axes: Any = None) -> TensorOp:
    """x with its FlattenedAxes split back into their parts."""
    x = as_op(x)
    if axes is None:
        axes = [p for a in x.axes for p in (a.axes if isinstance(a, FlattenedAxis) else [a])]
    return Unflatten(x, axes)


class OneHotOp(AxesOp):
    def __init__(self, x: Any, axis: Axis, **kwargs: Any) -> None:
        x = as_op(x)
        super().__init__((x,), axes=Axes([axis]) + x.axes, **kwargs)
        self.axis = axis


def one_hot(x: Any, axis: Axis) -> TensorOp:
    """Integers x (values in [0, axis.length)) as one-hot vectors along the new `axis` (first)."""
    return OneHotOp(x, axis)


class StackOp(AxesOp):
    def __init__(self, xs: list, axis: Axis, pos: int = 0, **kwargs: Any) -> None:
        xs = [as_op(x) for x in xs]
        first = xs[0].axes
        for x in xs[1:]:
            if not x.axes.has_same_axes(first):
                raise ValueError(f"stack: every operand needs the axes {list(first)}, "
                                 f"{x.name} has {list(x.axes)}")
        if axis.length is None:
            axis.length = len(xs)
        elif axis.length != len(xs):
            raise ValueError(f"stack: axis {axis.name} has length {axis.length}, "
                             f"{len(xs)} tensors given")
        axes = list(first)
        axes.insert(pos, axis)
        super().__init__(xs, axes=axes, dtype=_float_dtype(xs), **kwargs)
        self.axis, self.pos = axis, pos


def stack(x_list: list, axis: Axis, pos: int = 0) -> TensorOp:
    return StackOp(x_list, axis, pos)


class PadOp(AxesOp):
    def __init__(self, x: Any, paddings: list, axes: Any = None, **kwargs: Any) -> None:
        from ...axes import PaddedAxis
        x = as_op(x)
        if len(paddings) != len(x.axes):
            raise ValueError(f"pad: {len(paddings)} paddings for {x.name}'s {len(x.axes)} axes")
        pads = [(p, p) if isinstance(p, int) else tuple(p) for p in paddings]
        new = [a if p == (0, 0) else PaddedAxis(a, p) for a, p in zip(x.axes, pads)]
        super().__init__((x,), axes=axes if axes is not None else new, dtype=x.dtype, **kwargs)
        self.paddings = pads


def pad(x: Any, paddings: list, axes: Any = None) -> TensorOp:
    return PadOp(x, paddings, axes)


# **************** random ****************

class RngOp(TensorOp):
    def __init__(self, distribution: str, params: dict, x: Any, **kwargs: Any) -> None:
        x = as_op(x)
        super().__init__((x,), axes=x.axes, dtype=x.dtype, **kwargs)
        self.distribution, self.params = distribution, params


def uniform(x: Any, low: float = 0.0, high: float = 1.0) -> TensorOp:
    """Uniform random values in [low, high) in x's axes, drawn anew at each computation call."""
    return RngOp("uniform", {"low": low, "high": high}, x)


def normal(x: Any, loc: float = 0.0, scale: float = 1.0) -> TensorOp:
    return RngOp("normal", {"loc": loc, "scale": scale}, x)


# **************** softmax and cross entropy ****************

class Softmax:
    """Schema: this op is softmax(x): `x` (shifted by its max), `exps`, `Z`."""

    def __init__(self, x: Any, exps: Any, Z: Any) -> None:
        self.x, self.exps, self.Z = x, exps, Z


def softmax(x: Any, normalization_axes: Any = None) -> TensorOp:
    x = as_op(x)
    if normalization_axes is None:
        normalization_axes = x.axes.sample_axes() - x.axes.recurrent_axes()
    x = x - max(x, reduction_axes=normalization_axes)
    exps = exp(x)  # noqa: F821
    Z = sum(exps, reduction_axes=normalization_axes)
    result = exps / Z
    result.add_schema(Softmax(x=x, exps=exps, Z=Z))
    return result


def cross_entropy_multi(y: Any, t: Any, usebits: bool = False, out_axes: Any = None,
                        enable_softmax_opt: bool = True, enable_diff_opt: bool = True) -> TensorOp:
    """-sum(log(y) * t); where y is a softmax of x, the stable form
    -sum((x - max x) * t) + log(Z) * sum(t) (no NaN for logits of +-1000), for the value and for
    its derivative (seed-era ngraph left out the `* sum(t)`: right only for t summing to 1)."""
    y, t = as_op(y), as_op(t)
    if out_axes is None:
        out_axes = y.axes.recurrent_axes() + y.axes.batch_axes()
    smy = y.find_schema(Softmax)
    if enable_softmax_opt and smy is not None:
        result = -sum(smy.x * t, out_axes=out_axes) + \
            safelog(smy.Z) * sum(t, out_axes=out_axes)  # noqa: F821
    else:
        result = -sum(safelog(y) * t, out_axes=out_axes)  # noqa: F821
    if usebits:
        result = result * float(1.0 / np.log(2.0))
    return result


def cross_entropy_binary_inner(y: Any, t: Any, enable_sig_opt: bool = True,
                               enable_diff_opt: bool = True) -> TensorOp:
    y, t = as_op(y), as_op(t)
    sig = y.find_schema(Sigmoid)
    if enable_sig_opt and sig is not None:
        # -(t log y + (1-t) log(1-y)) with y = sig(x) is (1 - t) x + log(1 + exp(-x)); stably,
        # log(1 + exp(-x)) = (|x| - x) / 2 + log(1 + exp(-|x|)), whose kinks at 0 cancel, so
        # the derivative is sig(x) - t there too (max(-x, 0) would give -t or 1 - t)
        x = sig.x
        ax = absolute(x)  # noqa: F821
        return (0.5 - t) * x + 0.5 * ax + safelog(1 + exp(-ax))  # noqa: F821
    return -(safelog(y) * t + safelog(1 - y) * (1 - t))  # noqa: F821


def cross_entropy_binary(y: Any, t: Any, usebits: bool = False, out_axes: Any = None,
                         enable_sig_opt: bool = True, enable_diff_opt: bool = True) -> TensorOp:
    result = sum(cross_entropy_binary_inner(y, t, enable_sig_opt, enable_diff_opt),
                 out_axes=out_axes)
    if usebits:
        result = result * float(1.0 / np.log(2.0))
    return result


# **************** derivatives ****************

class DerivOp(TensorOp):
    """d(dependent)/d(independent), weighted by `error` (same axes as the dependent): a graph
    whose value the transformer computes with neonlike's Autodiff on the lowered dependent."""

    def __init__(self, dependent: Any, independent: Any, error: Any, **kwargs: Any) -> None:
        dependent, independent, error = as_op(dependent), as_op(independent), as_op(error)
        if not isinstance(independent, AssignableTensorOp) or independent.is_scalar_constant:
            raise NotImplementedError(
                f"deriv: the independent must be a tensor with storage (a variable or a "
                f"placeholder), got {type(independent).__name__} {independent.name}; derivatives "
                f"with respect to a computed value are not supported yet")
        if not error.axes.has_same_axes(dependent.axes):
            raise ValueError(f"Dependent and error must have the same set of axes: the dependent "
                             f"{dependent.name} has {list(dependent.axes)}, the error "
                             f"{list(error.axes)} (a non-scalar dependent needs an error)")
        super().__init__((dependent, independent, error), axes=independent.axes,
                         dtype=independent.dtype, **kwargs)
        self.dependent, self.independent, self.error = dependent, independent, error


def deriv(dependent: Any, independent: Any, error: Any = None) -> TensorOp:
    """The derivative of `dependent` with respect to `independent`, in independent's axes."""
    return DerivOp(dependent, independent, constant(1.0) if error is None else error)


__all__ = [n for n in list(globals()) if not n.startswith("_") and n not in (
    "annotations", "builtins", "os", "sys", "contextmanager", "Any",
    "Callable", "Iterator", "np", "E")]
