"""Linear: a matrix product contracting one axis, with axis semantics.

    lin = Linear(None)                    # x [..., C1], w [C1, C2] by default
    y, = lin(x, w)                        # y: x's order with C1 replaced by C2

Choices: x may have any number of axes; those other than the contracted one are kept, in x's
order, and named B1, B2, ... ("kept axis") in `semantics`. By default x's last axis is C1; a
given `axis_in_features` is found in x and w by identity, wherever it is.
"""
from __future__ import annotations


from ..operator import Operator, Role
from ..order import Order
from ..variable import Variable


class Linear(Operator):
    """Linear(name, axis_in_features=None, axis_out_features=None)."""

    ROLES = (Role("C1", "input features", "axis_in_features"),
             Role("C2", "output features", "axis_out_features"))

    def __call__(self, x: Variable, w: Variable) -> tuple[Variable]:
        self._check_inputs({"x": x, "w": w})
        c1 = self._axes["C1"]
        if c1 is not None and c1 in x.order.axes:
            kept = [a for a in x.order.axes if a != c1]
        else:
            kept = list(x.order.axes[:-1])
        extra = tuple(Role(f"B{i + 1}", f"kept axis {i + 1}", f"axis_kept_{i + 1}")
                      for i in range(len(kept)))
        self.ROLES = type(self).ROLES + extra
        for role, axis in zip(extra, kept):
            self._axes[role.short_name] = axis
        x_layout = tuple(r.short_name for r in extra)
        position = x.order.axes.index(c1) if c1 is not None and c1 in x.order.axes else x.ndim - 1
        self.LAYOUTS = {"x": x_layout[:position] + ("C1",) + x_layout[position:],
                        "w": ("C1", "C2")}
        sizes = self._bind({"x": x, "w": w})
        layout = self.LAYOUTS["x"]
        y = Variable([sizes[r] if r != "C1" else sizes["C2"] for r in layout],
                     Order([self._axes["C2" if r == "C1" else r] for r in layout]))
        return self._connect({"x": x, "w": w}, {"y": y})
