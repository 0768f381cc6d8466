"""Reshape and Transpose: operators that make axes or keep them in another order.

    t, = Transpose(None, Order([w_axis, h_axis]))(x)    # the same axes, reordered
    y, = Reshape(None, [6, 4])(x)                         # new anonymous axes
    y, = Reshape(None, [n, 12], Order([x.order.axes[0], None]))(x)   # keeps the first axis

Choices: Transpose keeps every axis (the values of an axis do not move between axes), so the
lowering reorders nothing until a kernel needs another layout. Reshape reads x row-major in
x's order; its output order is given (None makes a new axis) or all new. An output axis that
is also an input axis keeps its identity: its size must agree (the Variable checks). Semantics:
Transpose names its output axes D1, ...; Reshape names x's axes I1, ... and its own O1, ....
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..operator import AxisSemantics, Operator
from ..order import Order
from ..placeholder import Placeholder
from ..variable import Variable, format_shape


class Transpose(Operator):
    """Transpose(name, order): x's axes in `order` (an Order or a list of them)."""

    def __init__(self, name: str | None, order: Any) -> None:
        super().__init__(name)
        self.order = order if isinstance(order, Order) else Order(order)

    def __call__(self, x: Variable) -> tuple[Variable]:
        self._check_inputs({"x": x})
        if not x.order.check_same_axes(self.order) or x.ndim != self.order.ndim:
            raise ValueError(f"{self.name}: order {self.order} is not a permutation of the "
                             f"axes of {x}")
        sizes = x.shape_dict
        y = Variable([sizes[a] for a in self.order.axes], self.order)
        self._extra = [AxisSemantics(f"D{i + 1}", f"dimension {i + 1} of the result", a)
                       for i, a in enumerate(self.order.axes)]
        return self._connect({"x": x}, {"y": y})


class Reshape(Operator):
    """Reshape(name, shape, order=None): x's values row-major in a new shape."""

    def __init__(self, name: str | None, shape: Sequence[Any], order: Any = None) -> None:
        super().__init__(name)
        self.shape = tuple(shape)
        self.order = Order([None] * len(self.shape) if order is None else order)
        if self.order.ndim != len(self.shape):
            raise ValueError(f"{self.name}: shape {format_shape(self.shape)} and order "
                             f"{self.order} differ in length")

    def __call__(self, x: Variable) -> tuple[Variable]:
        self._check_inputs({"x": x})
        before, after = x.size, math.prod(self.shape)
        if Placeholder.check_resolved(before) and Placeholder.check_resolved(after) and \
                int(before) != int(after):
            raise ValueError(f"{self.name}: cannot reshape {x} ({int(before)} values) to "
                             f"{format_shape(self.shape)} ({int(after)} values)")
        y = Variable(self.shape, self.order)
        self._extra = [AxisSemantics(f"I{i + 1}", f"input axis {i + 1}", a)
                       for i, a in enumerate(x.order.axes)] + \
                      [AxisSemantics(f"O{i + 1}", f"output axis {i + 1}", a)
                       for i, a in enumerate(self.order.axes)]
        return self._connect({"x": x}, {"y": y})
