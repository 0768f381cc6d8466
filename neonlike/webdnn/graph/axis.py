"""WebDNN's `webdnn.graph.axis` on neonlike's axis core: anonymous axes, unify, AxisKeyDict.

    a, b = Axis(), Axis()      # <Axis ?1>, <Axis ?2>: anonymous, numbered in creation order
    b.unify(a)                 # one axis from now on: both print ?1 and compare equal
    Axis("T")                  # a named axis prints its name

The identity, the union-find and the checks are the core's (`neonlike.axes.Axis.unify`): an
ngraph axis and a WebDNN axis are the same kind of object and can be unified with each other.
What this module adds is WebDNN's face (seed 001, mil-tokyo/webdnn#619). Choices made where the
seed is silent:

* Numbering: an anonymous axis gets the next number of a process-wide counter (from 1; a
  counter, not a table, so nothing grows) as its core `serial`, and prints `?N`. A unified class
  prints the smallest number among its members, i.e. its earliest-made axis, whichever side
  `unify` was called on: the seed's example unifies `w.order.axes[0]` (?5) with
  `x.order.axes[1]` (?2) and its conv semantics then show the in-channel axis as ?2.
* Names are as asked: `Axis("N").name == "N"` even while another axis named N lives (the core
  uniquifies names for ngraph; WebDNN lets two axes share one, so `name` reads `short_name`).
* Lengths: a Variable gives each of its axes its size (an int or a Placeholder) and refuses an
  axis that already has another; unify refuses two known, different lengths.
* Presets `Axis.N, C, H, W, T, KH, KW` are WebDNN's global axes: kinds, not dimensions. Every
  variable in `OrderNCHW` shares them whatever its sizes, so they take no length and cannot be
  unified (the seed's point: make an `Axis()` per dimension and let operators name it).
* Axes are hashable (the core hashes the class's root; WebDNN had `__hash__ = None` and a list
  scan). `AxisKeyDict` is a dict that re-indexes itself when a unify has happened since.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from ... import axes as core
from .placeholder import Placeholder

_SERIALS = itertools.count(1)
T = TypeVar("T")


class Axis(core.Axis):
    """Axis(name=None): one dimension; anonymous (printed `?N`) unless named."""

    N: Axis
    C: Axis
    H: Axis
    W: Axis
    T: Axis
    KH: Axis
    KW: Axis

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name=name)
        self._preset = False
        if name is None:
            self.serial = next(_SERIALS)

    @property
    def id(self) -> int:
        """The identity of the dimension: equal for unified axes."""
        return id(self.annotated_axis)

    @property
    def name(self) -> str:
        """The name asked for, else `?N`."""
        root = self.annotated_axis
        if root._short_name is not None:
            return root._short_name
        return f"?{root._serial}" if root._serial is not None else f"?#{id(root):x}"

    def _get_length(self) -> Any:
        return self.annotated_axis._length

    def _set_length(self, value: Any) -> None:
        if self._preset:
            raise TypeError(f"preset axis {self.name} is shared by variables of every size "
                            f"and takes no length; use an Axis() of its own")
        if isinstance(value, Placeholder):
            self.annotated_axis._length = value
        else:
            core.Axis.length.fset(self, value)

    length = property(_get_length, _set_length)

    def unify(self, other: core.Axis) -> Axis:
        for axis in (self, other):
            if getattr(axis, "_preset", False):
                raise core.UnifyError(
                    f"cannot unify {self.name} with {_label(other)}: preset axis {axis.name} "
                    f"stands for every variable's {axis.name} dimension; unify an Axis() made "
                    f"for this one dimension instead")
        super().unify(other)
        return self

    def __str__(self) -> str:
        return f"<Axis {self.name}>"

    __repr__ = __str__


def _label(axis: Any) -> str:
    return axis.name if isinstance(axis, Axis) else repr(axis)


def _preset(name: str) -> Axis:
    axis = Axis(name)
    axis._preset = True
    return axis


for _name in ("N", "C", "H", "W", "T", "KH", "KW"):
    setattr(Axis, _name, _preset(_name))


def as_axis(axis: Any, what: str) -> core.Axis:
    if not isinstance(axis, core.Axis):
        raise TypeError(f"{what} must be an Axis, got {type(axis).__name__} {axis!r}")
    return axis


class AxisKeyDict(Generic[T]):
    """A mapping keyed by axis identity that follows unify.

    `AxisKeyDict()`, `AxisKeyDict(other)`, `AxisKeyDict([(axis, value), ...])` or
    `AxisKeyDict(keys, values)`; duplicate keys raise ValueError. When two keys become one by
    unify, the first inserted keeps its value and the later one goes.
    """

    def __init__(self, *args: Any) -> None:
        if not args:
            pairs: list = []
        elif len(args) == 1 and isinstance(args[0], AxisKeyDict):
            pairs = list(args[0].items())
        elif len(args) == 1:
            pairs = [tuple(pair) for pair in args[0]]
        elif len(args) == 2:
            keys, values = list(args[0]), list(args[1])
            if len(keys) != len(values):
                raise ValueError(f"AxisKeyDict: {len(keys)} keys and {len(values)} values; "
                                 f"they must be as many")
            pairs = list(zip(keys, values))
        else:
            raise TypeError(f"AxisKeyDict takes (), (AxisKeyDict), (pairs) or (keys, values), "
                            f"got {len(args)} arguments")
        self._data: dict[core.Axis, tuple[core.Axis, T]] = {}
        self._seen = core.unify_count()
        for key, value in pairs:
            if key in self:
                raise ValueError(f"AxisKeyDict: axis {_label(key)} is given twice")
            self[key] = value

    def _index(self) -> dict:
        if self._seen != core.unify_count():
            data: dict = {}
            for key, value in self._data.values():
                data.setdefault(key, (key, value))
            self._data, self._seen = data, core.unify_count()
        return self._data

    def __contains__(self, key: object) -> bool:
        return key in self._index()

    def __getitem__(self, key: core.Axis) -> T:
        try:
            return self._index()[key][1]
        except KeyError:
            raise KeyError(f"axis {_label(key)} is not a key of {self}") from None

    def __setitem__(self, key: core.Axis, value: T) -> None:
        data = self._index()
        data[as_axis(key, "an AxisKeyDict key")] = (data.get(key, (key,))[0], value)

    def __delitem__(self, key: core.Axis) -> None:
        del self._index()[key]

    def __len__(self) -> int:
        return len(self._index())

    def __iter__(self) -> Iterator[core.Axis]:
        return self.keys()

    def get(self, key: core.Axis, default: Any = None) -> Any:
        return self[key] if key in self else default

    def keys(self) -> Iterator[core.Axis]:
        return iter([key for key, _ in self._index().values()])

    def values(self) -> Iterator[T]:
        return iter([value for _, value in self._index().values()])

    def items(self) -> Iterable[tuple[core.Axis, T]]:
        return list(self._index().values())

    def __str__(self) -> str:
        return "{" + ", ".join(f"{_label(k)}: {v}" for k, v in self.items()) + "}"

    __repr__ = __str__
