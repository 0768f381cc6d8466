"""Softmax over the axis of one meaning.

    sm = Softmax(None, axis=conv.axis_for("C2"))     # over what the conv calls C2
    y, = sm(x)

Choices: `axis` defaults to x's last axis; a given axis must be one of x's (by identity), else
an error naming the axis and the operator. The output has x's order.
"""
from __future__ import annotations


from ..operator import Operator, Role
from ..order import axis_text
from ..variable import Variable


class Softmax(Operator):
    """Softmax(name, axis=None): exp(x) / sum(exp(x)) along `axis`."""

    ROLES = (Role("C", "softmax axis (normalised over)", "axis"),)

    def __call__(self, x: Variable) -> tuple[Variable]:
        self._check_inputs({"x": x})
        axis = self._axes["C"]
        if axis is None:
            self._axes["C"] = x.order.axes[-1]
        elif axis not in x.order.axes:
            raise ValueError(f"{self.name}: axis {axis_text(axis)} is not an axis of its "
                             f"input {x}")
        return self._connect({"x": x}, {"y": Variable(x._shape, x.order)})
