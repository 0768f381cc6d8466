"""WebDNN's `webdnn.graph.variable`: a value of a graph, with a shape and an Order.

    x = Variable([1, 64, 56, 56], Order([Axis(), Axis(), Axis(), Axis()]))
    print(x)       # <Variable0 shape=(1, 64, 56, 56), order=[?1, ?2, ?3, ?4]>
    y = abs(x * 2 - 1)     # elementwise operators, paired by axis identity

Choices where the seed is silent:

* Variables are named `Variable0`, `Variable1`, ... in creation order (the seed's printout),
  from a process-wide counter; `name` can be changed.
* A Variable gives each axis of its order its size: an axis without a length takes it, one
  whose known length differs is an error naming the axis, both lengths and the variable.
  Preset axes (Axis.N, ...) take no length; each variable's shape says its size.
* ngraph: a Variable is not an ngraph op. The two front ends build different graphs (ngraph's
  ops are lowered by its transformers, a WebDNN graph by `run`), so a Variable cannot be an
  operand of `ng.dot`. They share the axis core: `v.axes` is the core's `Axes` of the
  variable's axes, so `ng.placeholder(v.axes)` stands for v in an ngraph graph with the same
  axes (by identity), and an ngraph axis can be in an Order and be unified with `Axis()`s.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

from ... import axes as core
from .axis import Axis, AxisKeyDict
from .order import Order, axis_text
from .placeholder import Placeholder, sizes_conflict

_NAMES = itertools.count()


def _size(n: Any, shape: Sequence) -> Any:
    if isinstance(n, Placeholder):
        return n
    try:
        n = int(n) if not isinstance(n, bool) and float(n) == int(n) else None
    except (TypeError, ValueError):
        n = None
    if n is None or n < 0:
        raise TypeError(f"Variable: a size must be an int >= 0 or a Placeholder, got shape {shape}")
    return n


def _bind_length(axis: core.Axis, n: Any, variable: str) -> None:
    if getattr(axis, "_preset", False):
        return
    known = axis.length
    if known is None:
        if isinstance(n, Placeholder) and not isinstance(axis, Axis):
            return          # an ngraph axis takes int lengths only
        axis.length = n
    elif sizes_conflict(known, n):
        raise ValueError(f"{variable}: axis {axis_text(axis)} has length {known}, the shape "
                         f"gives it {n}")


def format_shape(shape: Sequence) -> str:
    return f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"


class Variable:
    """Variable(shape, order): `order` an Order or a list of axes (None for new ones)."""

    def __init__(self, shape: Sequence[Any], order: Any) -> None:
        order = order if isinstance(order, Order) else Order(order)
        shape = tuple(_size(n, shape) for n in shape)
        if len(shape) != order.ndim:
            raise ValueError(f"Variable: shape {format_shape(shape)} has {len(shape)} sizes, "
                             f"order {order} has {order.ndim} axes")
        self.name = f"Variable{next(_NAMES)}"
        for axis, n in zip(order.axes, shape):
            _bind_length(axis, n, self.name)
        self._shape = shape
        self._order = order
        self.output_from: Any = None     # the operator computing this variable
        self.input_to: list = []         # the operators reading it

    @property
    def shape(self) -> tuple:
        """The sizes (ints, or Placeholders until they are resolved)."""
        return tuple(n.value if isinstance(n, Placeholder) else n for n in self._shape)

    @property
    def order(self) -> Order:
        return self._order

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> Any:
        return math.prod(self._shape) if self._shape else 1

    @property
    def shape_dict(self) -> AxisKeyDict:
        return AxisKeyDict(self._order.axes, self.shape)

    @property
    def axes(self) -> core.Axes:
        """The axes as the core's Axes (what ngraph's constructors take)."""
        return core.Axes(self._order.axes)

    def __repr__(self) -> str:
        return f"<{self.name} shape={format_shape(self.shape)}, order={self._order}>"

    __str__ = __repr__

    def __bool__(self) -> bool:
        raise TypeError(f"{self.name} has no truth value: it is a graph value; compare its "
                        f"values after run()")

    # ---- elementwise operators (operators/elementwise.py)
    def _ew(self, kind: str, *operands: Any) -> Variable:
        from .operators.elementwise import elementwise
        return elementwise(kind, *operands)

    def __add__(self, other: Any) -> Variable:
        return self._ew("add", self, other)

    def __radd__(self, other: Any) -> Variable:
        return self._ew("add", other, self)

    def __sub__(self, other: Any) -> Variable:
        return self._ew("sub", self, other)

    def __rsub__(self, other: Any) -> Variable:
        return self._ew("sub", other, self)

    def __mul__(self, other: Any) -> Variable:
        return self._ew("mul", self, other)

    def __rmul__(self, other: Any) -> Variable:
        return self._ew("mul", other, self)

    def __truediv__(self, other: Any) -> Variable:
        return self._ew("div", self, other)

    def __rtruediv__(self, other: Any) -> Variable:
        return self._ew("div", other, self)

    def __pow__(self, other: Any) -> Variable:
        return self._ew("pow", self, other)

    def __rpow__(self, other: Any) -> Variable:
        return self._ew("pow", other, self)

    def __neg__(self) -> Variable:
        return self._ew("neg", self)

    def __abs__(self) -> Variable:
        return self._ew("abs", self)

    def __lt__(self, other: Any) -> Variable:
        return self._ew("lt", self, other)

    def __le__(self, other: Any) -> Variable:
        return self._ew("le", self, other)

    def __gt__(self, other: Any) -> Variable:
        return self._ew("gt", self, other)

    def __ge__(self, other: Any) -> Variable:
        return self._ew("ge", self, other)
