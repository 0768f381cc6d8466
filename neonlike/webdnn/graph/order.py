"""WebDNN's `webdnn.graph.order`: the axes of a variable, outermost first.

    Order([Axis(), Axis()])          # [?1, ?2]
    Order([None, None])              # None makes a fresh anonymous axis
    OrderNCHW                        # the presets, on the preset axes Axis.N, C, H, W, ...

Choices: duplicate axes raise ValueError (WebDNN asserted); orders compare by the identity of
their axes (so after a unify two orders may become equal) and are unhashable, as in WebDNN;
`unify` is positional and names the position that failed.
"""
from __future__ import annotations

from typing import Any, Sequence

from ... import axes as core
from .axis import Axis, AxisKeyDict, as_axis


def axis_text(axis: core.Axis) -> str:
    return axis.name if isinstance(axis, Axis) else (axis.name or repr(axis))


class Order:
    """Order(axes): a tuple of distinct axes (None -> a new Axis())."""

    def __init__(self, axes: Sequence[Any]) -> None:
        if isinstance(axes, Order):
            axes = axes.axes
        items = tuple(Axis() if a is None else as_axis(a, "an Order's axis") for a in axes)
        for i, a in enumerate(items):
            if a in items[:i]:
                raise ValueError(f"Order: axis {axis_text(a)} appears twice in "
                                 f"[{', '.join(map(axis_text, items))}]")
        self._axes = items

    @property
    def axes(self) -> tuple:
        return self._axes

    @property
    def ndim(self) -> int:
        return len(self._axes)

    @property
    def axes_dict(self) -> AxisKeyDict:
        """axis -> position."""
        return AxisKeyDict(self._axes, range(self.ndim))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Order) and self._axes == other._axes

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return f"[{', '.join(map(axis_text, self._axes))}]"

    __repr__ = __str__

    def check_same_axes(self, other: Order) -> bool:
        """The same axes, in any order."""
        return set(self._axes) == set(other.axes)

    def get_common_axes(self, other: Order) -> list:
        return [a for a in self._axes if a in other.axes]

    def get_all_axes(self, other: Order) -> list:
        return list(self._axes) + [a for a in other.axes if a not in self._axes]

    def unify(self, other: Order) -> None:
        """Unify the axes position by position."""
        if self.ndim != other.ndim:
            raise ValueError(f"cannot unify order {self} with {other}: {self.ndim} axes "
                             f"against {other.ndim}")
        for i, (a, b) in enumerate(zip(self._axes, other.axes)):
            try:
                a.unify(b)
            except core.UnifyError as e:
                raise core.UnifyError(f"cannot unify order {self} with {other} at position "
                                      f"{i}: {e}") from e


OrderC = Order([Axis.C])
OrderNC = Order([Axis.N, Axis.C])
OrderCN = Order([Axis.C, Axis.N])
OrderNT = Order([Axis.N, Axis.T])
OrderNTC = Order([Axis.N, Axis.T, Axis.C])
OrderNHWC = Order([Axis.N, Axis.H, Axis.W, Axis.C])
OrderNCHW = Order([Axis.N, Axis.C, Axis.H, Axis.W])
OrderCHWN = Order([Axis.C, Axis.H, Axis.W, Axis.N])
OrderCNHW = Order([Axis.C, Axis.N, Axis.H, Axis.W])
OrderHWNC = Order([Axis.H, Axis.W, Axis.N, Axis.C])
OrderHWCN = Order([Axis.H, Axis.W, Axis.C, Axis.N])
