"""Operators and their axis semantics (seed 001): names belong to operators, identity to axes.

    conv = Convolution2d(None, ksize=3, pad=1, stride=1, axis_in_channel=x.order.axes[1])
    y, = conv(x, w)
    conv.semantics               # [<AxisSemantics short_name="N", ...>, ...]
    print_with_semantics(y, semantics=conv.semantics)     # order=[N, C2, H, W]

An operator class declares its ROLES (short name, description, keyword: one row per meaning an
axis can have for it) and its LAYOUTS (for each input, the role of each position by default).
Binding the inputs at call time is the same for every operator (`Operator._bind`):

1. a role whose axis is known (given as `axis_*=`, or bound from an earlier input) is found in
   each input that has it in its layout by identity, at any position (orders are layouts; the
   lowering transposes where a kernel needs it);
2. the roles not found take the positions left, in layout order (with nothing given, role i
   is the input's axis i), and are unified with those axes: the seed's "enormous arguments"
   problem, every `axis_*` is optional;
3. a unify that fails there (lengths, names: the input's order contradicts a given axis) is
   an error naming the operator, the input, the role's keyword and both axes.

`semantics` lists the roles in ROLES order with their axes (None until bound); an operator
whose outputs have axes of their own (a convolution that shrinks the image) adds rows for them.
"""
from __future__ import annotations

import itertools
from typing import Any, NamedTuple

from ... import axes as core
from .order import axis_text
from .placeholder import sizes_conflict
from .variable import Variable

_NAMES = itertools.count()


class Role(NamedTuple):
    short_name: str
    description: str
    keyword: str


class AxisSemantics(NamedTuple):
    """What `axis` means to one operator: `short_name` ("C1") and `description`."""
    short_name: str
    description: str
    axis: Any

    def __repr__(self) -> str:
        axis = "None" if self.axis is None else f"<Axis {axis_text(self.axis)}>"
        return (f'<AxisSemantics short_name="{self.short_name}", '
                f'description="{self.description}", axis={axis}>')


class Semantics(list):
    """A list of AxisSemantics, printed one per line as in the seed; `axis(short_name)`."""

    def axis(self, short_name: str) -> Any:
        for row in self:
            if row.short_name == short_name:
                return row.axis
        raise KeyError(f"no axis named {short_name!r} in these semantics "
                       f"({', '.join(r.short_name for r in self)})")

    def __repr__(self) -> str:
        return "[\n" + "".join(f"{row!r},\n" for row in self) + "]"


def format_with_semantics(v: Variable, semantics: list) -> str:
    """`v` printed with its axes named by `semantics` (the ?N of axes it does not name)."""
    names = [next((row.short_name for row in semantics if row.axis == axis), axis_text(axis))
             for axis in v.order.axes]
    from .variable import format_shape
    return f"<{v.name} shape={format_shape(v.shape)}, order=[{', '.join(names)}]>"


def print_with_semantics(v: Variable, semantics: list) -> None:
    """Print `v` with the short names one operator gives its axes."""
    print(format_with_semantics(v, semantics))


class Operator:
    """A graph node: named, with inputs and outputs by name and axis semantics."""

    ROLES: tuple = ()
    LAYOUTS: dict = {}

    def __init__(self, name: str | None = None, **axes: Any) -> None:
        self.name = name if name is not None else f"{type(self).__name__}{next(_NAMES)}"
        keywords = {role.keyword: role for role in self.ROLES}
        self._axes: dict[str, Any] = {role.short_name: None for role in self.ROLES}
        for keyword, axis in axes.items():
            if keyword not in keywords:
                raise TypeError(f"{type(self).__name__} takes no argument {keyword!r}; its axes "
                                f"are {', '.join(keywords)}")
            if axis is not None:
                if not isinstance(axis, core.Axis):
                    raise TypeError(f"{self.name}: {keyword} must be an Axis, got {axis!r}")
                self._axes[keywords[keyword].short_name] = axis
        self._extra: list[AxisSemantics] = []
        self.inputs: dict[str, Variable] = {}
        self.outputs: dict[str, Variable] = {}

    @property
    def semantics(self) -> Semantics:
        return Semantics([AxisSemantics(r.short_name, r.description, self._axes[r.short_name])
                          for r in self.ROLES] + self._extra)

    def axis_for(self, short_name: str) -> Any:
        """The axis this operator calls `short_name`."""
        return self.semantics.axis(short_name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # ---- building
    def _check_inputs(self, inputs: dict) -> None:
        for key, v in inputs.items():
            if not isinstance(v, Variable):
                raise TypeError(f"{self.name}: input {key} must be a Variable, got "
                                f"{type(v).__name__}")
        if self.inputs:
            raise ValueError(f"{self.name} has been called already; make a new operator")

    def _bind(self, inputs: dict) -> dict:
        """Bind every role of the layouts to an axis of the inputs; role -> size."""
        self._check_inputs(inputs)
        roles = {r.short_name: r for r in self.ROLES}
        sizes: dict[str, Any] = {}
        for key, layout in self.LAYOUTS.items():
            v = inputs[key]
            axes = v.order.axes
            if v.ndim != len(layout):
                raise ValueError(f"{self.name}: input {key} {v} has {v.ndim} axes, the layout "
                                 f"[{', '.join(layout)}] has {len(layout)}")
            found = {r for r in layout if self._axes[r] is not None and self._axes[r] in axes}
            free = [pos for pos, axis in enumerate(axes)
                    if not any(self._axes[r] == axis for r in found)]
            for pos, role in zip(free, [r for r in layout if r not in found]):
                self._take(key, v, pos, roles[role])
            for pos, axis in enumerate(axes):
                role = next(r for r in layout if self._axes[r] == axis)
                n = v.shape[pos]
                if role in sizes and sizes_conflict(sizes[role], n):
                    raise ValueError(f"{self.name}: the {roles[role].description} ({role}) is "
                                     f"{sizes[role]} in one input and {n} in {key} {v}")
                sizes.setdefault(role, n)
        return sizes

    def _take(self, key: str, v: Variable, pos: int, role: Role) -> None:
        found = v.order.axes[pos]
        axis = self._axes[role.short_name]
        if axis is None:
            self._axes[role.short_name] = found
            return
        try:
            axis.unify(found)
        except core.UnifyError as e:
            raise ValueError(f"{self.name}: {role.keyword} {axis_text(axis)} contradicts input "
                             f"{key} {v}, whose axis {axis_text(found)} at position {pos} is "
                             f"the {role.description} by {type(self).__name__}'s layout: "
                             f"{e}") from e

    def _connect(self, inputs: dict, outputs: dict) -> tuple:
        self.inputs, self.outputs = dict(inputs), dict(outputs)
        for v in inputs.values():
            v.input_to.append(self)
        for v in outputs.values():
            v.output_from = self
        return tuple(outputs.values())
