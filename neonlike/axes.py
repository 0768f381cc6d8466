"""The axis core the front ends share: axes paired by identity, ordered Axes, derived axes.

    C = make_axis(length=3, name='C')
    H, W = make_axis(name='H'), make_axis(name='W')    # lengths may stay None while building
    Axes([C, H]) + Axes([W, H])                        # Axes(C, H, W): ordered union
    (C - 1).length == C.length                         # a dual axis shares its primary's length
    Axes([C, H]).require_lengths()                     # ValueError naming H while H.length is None

ngraph (seed 000, issue 14) uses this core through `neonlike.ngraph.op_graph.axes`, WebDNN's
front end (seed 001, issue 15: anonymous axes and `unify`) through `neonlike.webdnn.graph.axis`. The semantics are ngraph's of
the seed era (late 2016): `Axis +/- int` is a dual axis, `Axes + Axes` is the ordered union, and
axes compare by identity.

Choices made where the seeds are silent:

* Identity goes through one indirection. Every axis reads its state (length, name, flags,
  roles) from `annotated_axis`, the root of a union-find tree of axes. `a.unify(b)` (issue 15,
  WebDNN's seed 001) checks that lengths and names agree, then links b's root under a's and
  merges b's state into it, so that every tensor, Axes and dual holding b reads and compares
  as a without being touched (see `unify`). Links point from child to root only: the records
  of a unification live in the axes and die with them; no global table holds them.
* `==` compares identity keys: a plain axis's key is its root's id, a dual's key is
  (its primary's key, offset), a FlattenedAxis's key is the keys of its parts (structural, as
  upstream). `hash` is the hash of the key, so `==` and `hash` always agree. unify changes the
  hash of the axes it links under another root: a dict or set keyed by them before the unify
  must be rebuilt; `unify_count()` tells a container that caches hashes when to rebuild.
* Names are unique among live axes, as upstream: a second live axis asking for 'C' is named
  'C_1' (then 'C_2', ...), and its `short_name` stays 'C'. The registry holds axes weakly, so a
  name is free again once its axis is gone. An axis made without a name is anonymous: `name` is
  None (front ends print it their way) and it never claims a name. A NameScope names only
  anonymous values, so `ax.C` is 'C' unless some other live axis already holds 'C'; while the
  neon front end's scope is loaded, a user's `make_axis(name='C')` is therefore 'C_1'.
* Dual axes: `A - k` / `A + k` / `A.get_dual(offset)` is cached per (axis, offset) on the axis
  while the dual lives (weakly, so an axis and its duals make no reference cycle), so
  `C - 1 is C - 1`; duals made apart compare and hash equal anyway. Offsets add:
  `(A - 1) + 1 is A` and `(A - 1) - 1 is A - 2`; `A.T` flips levels 0 and -1. A dual shares its
  primary's length lazily (setting the length of a dual raises, naming the primary), is named
  from the primary's current name (`C-1`, `C+1`; None for an anonymous primary), and does not
  inherit batch, recurrent or roles (upstream did not either).
* SlicedAxis and PaddedAxis are new axes (their own identity) whose lengths follow the parent's
  lazily and which inherit its batch, recurrent and roles (NG@f4d5). A slice's step must be 1,
  -1 or None (upstream, whose tests expect ValueError for step 2).
* `match_on_length` (upstream's axes that equal any axis of the same length) is not offered:
  it cannot agree with a hash, and upstream removed it; anonymous axes plus unify replace it.
* TensorDescription is the minimum ngraph's tests import: C-contiguous strides in axes order
  and `broadcast` (reorder, stride-0 new axes); flatten/slice views are the lowering's business.
* Axes compare only with Axes (a list compares unequal); `Axes([...])` accepts Axis, Axes and
  nested sequences (a nested sequence of one axis is that axis, of several a FlattenedAxis).
"""
from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator
from typing import Any
from weakref import WeakValueDictionary

import numpy as np

# name -> the live axis holding it; weak, so entries die with their axes
_LIVE_NAMES: WeakValueDictionary[str, Axis] = WeakValueDictionary()


def _claim_name(axis: Axis, name: str | None) -> str | None:
    """`name`, or `name_<n>` with the smallest n free, registered for `axis`; None stays None."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"an axis name must be a str or None, got {name!r}")
    unique, n = name, 0
    while _LIVE_NAMES.get(unique, axis) is not axis:
        n += 1
        unique = f"{name}_{n}"
    _LIVE_NAMES[unique] = axis
    return unique


def _checked_length(length: Any, axis_label: str) -> int | None:
    if length is None:
        return None
    try:
        value = operator.index(length)
    except TypeError:
        raise TypeError(f"length of axis {axis_label} must be an int or None, got {length!r}") from None
    if value < 0:
        raise ValueError(f"length of axis {axis_label} must be >= 0, got {value}")
    return value


def _label(axis: Axis) -> str:
    return axis.name if axis.name is not None else repr(axis)


def _known(length: Any) -> int | None:
    """`length` as an int where it is known (an int, or a front end's resolved symbol)."""
    try:
        return None if length is None else operator.index(length)
    except TypeError:
        return None


_UNIFY_COUNT = 0


def unify_count() -> int:
    """How many unifications this process has made: a container that caches axis hashes
    rebuilds itself when the count has moved (unify changes the hash of the axes it links)."""
    return _UNIFY_COUNT


class UnifyError(ValueError, TypeError):
    """Two axes cannot be one: their lengths or names differ, or one is derived.

    A TypeError too, as WebDNN raised one for differently named axes."""


# **************** roles ****************

class AxisRole:
    """A type for axes, such as Height or Channel, that ops such as convolution match on.

    Roles compare by identity; a NameScope names an anonymous role after its attribute.
    """

    def __init__(self, name: str | None = None, docstring: str | None = None) -> None:
        self.name = name
        self.docstring = docstring

    def __repr__(self) -> str:
        return f"AxisRole({self.name if self.name is not None else '?'})"


def make_axis_role(name: str | None = None, docstring: str | None = None) -> AxisRole:
    """A new AxisRole (seed 000: `ar.Height = ng.make_axis_role()`)."""
    return AxisRole(name=name, docstring=docstring)


# **************** axes ****************

class Axis:
    """One dimension of a tensor, paired with others by identity, never by length or position.

    Arguments:
        length: an int >= 0, or None until the first computation runs (settable).
        name: unique among live axes ('C', then 'C_1', ...); None makes an anonymous axis.
        batch, recurrent: flags read by `Axes.batch_axes()`, `.sample_axes()`, `.recurrent_axes()`.
        roles: AxisRoles, e.g. `[ar.Channel]`.
        docstring: what the axis means.
    """

    def __init__(self, length: int | None = None, name: str | None = None, batch: bool = False,
                 recurrent: bool = False, roles: Iterable[AxisRole] | None = None,
                 docstring: str | None = None) -> None:
        self._parent: Axis | None = None   # set only by unify: the root holds the state
        self._serial: int | None = None    # a front end's display number (see `serial`)
        self._length = _checked_length(length, name if name is not None else "?")
        self._short_name = name
        self._name = _claim_name(self, name)
        self._batch = bool(batch)
        self._recurrent = bool(recurrent)
        self._roles: set[AxisRole] = set()
        for role in roles or ():
            self.add_role(role)
        self.docstring = docstring
        self._duals: WeakValueDictionary[int, DualAxis] = WeakValueDictionary()

    # ---- identity
    @property
    def annotated_axis(self) -> Axis:
        """The root axis whose identity and state this axis shares (itself until unified)."""
        root = self
        while root._parent is not None:
            root = root._parent
        node = self
        while node._parent is not None and node._parent is not root:
            node._parent, node = root, node._parent
        return root

    _unifiable = True     # False where identity is derived from other axes (duals, flattened)

    def unify(self, other: Axis) -> Axis:
        """Make self and `other` one axis everywhere; returns self.

        Lengths that are both known must agree, names (as asked, `short_name`) that are both
        given must agree, else UnifyError naming both. Unifying two axes that are already one
        is a no-op. other's root is linked under self's, which takes whatever other's class
        knew that self's did not: a length, a name, batch/recurrent flags, roles, the smallest
        serial. The result does not depend on the order (`a.unify(b)` reads as `b.unify(a)`).
        """
        for axis in (self, other):
            if not isinstance(axis, Axis):
                raise TypeError(f"unify takes an Axis, got {type(axis).__name__} {axis!r}")
            if not axis._unifiable:
                raise UnifyError(f"cannot unify {_label(axis)}: a {type(axis).__name__}'s identity "
                                 f"is derived from other axes; unify those instead")
        a, b = self.annotated_axis, other.annotated_axis
        if a is b:
            return self
        la, lb = _known(a._length), _known(b._length)
        if la is not None and lb is not None and la != lb:
            raise UnifyError(f"cannot unify axis {_label(a)} (length {la}) with axis "
                             f"{_label(b)} (length {lb}): their lengths differ")
        if None not in (a._short_name, b._short_name) and a._short_name != b._short_name:
            raise UnifyError(f"cannot unify axis {_label(a)} with axis {_label(b)}: "
                             f"they are named differently")
        global _UNIFY_COUNT
        _UNIFY_COUNT += 1
        b._parent = a
        if a._length is None or (la is None and lb is not None):
            a._length = b._length
        if a._short_name is None and b._short_name is not None:
            a._short_name, a._name = b._short_name, b._name
            _LIVE_NAMES[a._name] = a     # the class keeps the name while any member lives
        a._batch, a._recurrent = a._batch or b._batch, a._recurrent or b._recurrent
        a._roles |= b._roles
        if a._serial is None or (b._serial is not None and b._serial < a._serial):
            a._serial = b._serial
        a.docstring = a.docstring or b.docstring
        return self

    @property
    def serial(self) -> int | None:
        """A number a front end gives an axis to print it by (webdnn numbers its anonymous
        axes ?1, ?2, ...); a unified class keeps the smallest of its members'."""
        return self.annotated_axis._serial

    @serial.setter
    def serial(self, value: int | None) -> None:
        self.annotated_axis._serial = value

    def _key(self) -> Any:
        return id(self.annotated_axis)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Axis):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # ---- state, read through the root
    @property
    def length(self) -> int | None:
        return self.annotated_axis._length

    @length.setter
    def length(self, value: int | None) -> None:
        root = self.annotated_axis
        root._length = _checked_length(value, _label(root))

    @property
    def name(self) -> str | None:
        return self.annotated_axis._name

    @name.setter
    def name(self, name: str | None) -> None:
        root = self.annotated_axis
        if root._name is not None and _LIVE_NAMES.get(root._name) is root:
            del _LIVE_NAMES[root._name]
        root._short_name = name
        root._name = _claim_name(root, name)

    @property
    def short_name(self) -> str | None:
        """The name asked for, before uniquifying ('C' for 'C_1')."""
        return self.annotated_axis._short_name

    def named(self, name: str | None) -> Axis:
        """Set the name and return the axis."""
        self.name = name
        return self

    @property
    def is_batch(self) -> bool:
        return self.annotated_axis._batch

    @property
    def is_recurrent(self) -> bool:
        return self.annotated_axis._recurrent

    @property
    def roles(self) -> frozenset[AxisRole]:
        return frozenset(self.annotated_axis._roles)

    def has_role(self, role: AxisRole) -> bool:
        return role in self.roles

    def add_role(self, role: AxisRole) -> None:
        if not isinstance(role, AxisRole):
            raise TypeError(f"roles of axis {_label(self)} must be AxisRoles "
                            f"(make_axis_role()), got {role!r}")
        self.annotated_axis._roles.add(role)

    @property
    def axes(self) -> Axes:
        """This axis alone, as Axes."""
        return Axes([self])

    # ---- duals
    @property
    def primary_axis(self) -> Axis:
        return self

    @property
    def dual_level(self) -> int:
        """The dual offset from the primary axis: in dot, a left axis of level n contracts
        with a right axis of level n + 1."""
        return 0

    def get_dual(self, offset: int = -1) -> Axis:
        """The axis `offset` dual levels away (cached, so `C - 1 is C - 1`; offset 0 is self)."""
        offset = operator.index(offset)
        if offset == 0:
            return self
        dual = self._duals.get(offset)
        if dual is None:
            dual = self._duals[offset] = DualAxis(self, offset)
        return dual

    def __add__(self, offset: int) -> Axis:
        if not hasattr(offset, "__index__"):
            return NotImplemented
        return self.get_dual(offset)

    def __sub__(self, offset: int) -> Axis:
        if not hasattr(offset, "__index__"):
            return NotImplemented
        return self.get_dual(-operator.index(offset))

    @property
    def T(self) -> Axis:
        """Level 0 <-> level -1 (a weight's 'transposed' axis in linear maps)."""
        return self.primary_axis.get_dual(-1 - self.dual_level)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name if self.name is not None else '?'}: {self.length})"


class DualAxis(Axis):
    """`primary + offset`: its own identity, its primary's length. Made by `Axis.get_dual`."""

    _unifiable = False

    def __init__(self, primary: Axis, offset: int) -> None:
        super().__init__()
        self._primary = primary
        self._offset = offset

    def _key(self) -> Any:
        return ("dual", self._primary._key(), self._offset)

    def _get_length(self) -> int | None:
        return self._primary.length

    def _set_length(self, value: int | None) -> None:
        raise AttributeError(f"the length of dual axis {_label(self)} is its primary's; "
                             f"set {_label(self._primary)}.length instead")

    length = property(_get_length, _set_length)

    def _get_name(self) -> str | None:
        primary = self._primary.name
        return None if primary is None else f"{primary}{self._offset:+d}"

    def _set_name(self, name: str | None) -> None:
        raise AttributeError(f"dual axis {_label(self)} is named after its primary; "
                             f"rename {_label(self._primary)} instead")

    name = property(_get_name, _set_name)

    @property
    def short_name(self) -> str | None:
        return self.name

    @property
    def primary_axis(self) -> Axis:
        return self._primary

    @property
    def dual_level(self) -> int:
        return self._offset

    def get_dual(self, offset: int = -1) -> Axis:
        return self._primary.get_dual(self._offset + operator.index(offset))


class _DerivedAxis(Axis):
    """An axis of its own identity whose length is computed from a parent axis's, lazily."""

    _unifiable = False   # its length follows the parent's: unify could not keep them apart

    def __init__(self, parent: Axis, name: str | None = None) -> None:
        if not isinstance(parent, Axis):
            raise TypeError(f"{type(self).__name__} needs an Axis to derive from, got {parent!r}")
        super().__init__(name=name)
        self.parent = parent

    def _derived_length(self, parent_length: int) -> int:
        raise NotImplementedError

    def _get_length(self) -> int | None:
        n = self.parent.length
        return None if n is None else self._derived_length(n)

    def _set_length(self, value: int | None) -> None:
        raise AttributeError(f"the length of {_label(self)} follows {_label(self.parent)}; "
                             f"set {_label(self.parent)}.length instead")

    length = property(_get_length, _set_length)

    @property
    def is_batch(self) -> bool:
        return self.parent.is_batch

    @property
    def is_recurrent(self) -> bool:
        return self.parent.is_recurrent

    @property
    def roles(self) -> frozenset[AxisRole]:
        return self.parent.roles | super().roles


class SlicedAxis(_DerivedAxis):
    """The axis of `parent[s]`: length `len(range(*s.indices(parent.length)))`, lazily."""

    def __init__(self, parent: Axis, s: slice, name: str | None = None) -> None:
        if not isinstance(s, slice):
            raise TypeError(f"SlicedAxis needs a slice, got {s!r}")
        if s.step not in (None, 1, -1):
            raise ValueError(f"SlicedAxis takes a slice step of 1, -1 or None, got {s.step} in {s}")
        super().__init__(parent, name)
        self.slice = s

    def _derived_length(self, parent_length: int) -> int:
        return len(range(*self.slice.indices(parent_length)))


class PaddedAxis(_DerivedAxis):
    """The axis of `parent` padded by `pad = (before, after)`: length parent + before + after."""

    def __init__(self, parent: Axis, pad: tuple[int, int], name: str | None = None) -> None:
        before, after = (operator.index(p) for p in pad)
        if before < 0 or after < 0:
            raise ValueError(f"PaddedAxis takes pads >= 0, got {tuple(pad)}")
        super().__init__(parent, name)
        self.pad = (before, after)

    def _derived_length(self, parent_length: int) -> int:
        return parent_length + self.pad[0] + self.pad[1]


class FlattenedAxis(Axis):
    """Several axes as one: length the product of theirs (lazily), `.axes` to unflatten.

    Compares structurally: two FlattenedAxis of the same axes in the same order are equal.
    """

    _unifiable = False

    def __init__(self, axes: Iterable[Any], name: str | None = None) -> None:
        super().__init__(name=name)
        self._parts = Axes(axes)

    def _key(self) -> Any:
        return ("flat",) + tuple(axis._key() for axis in self._parts)

    @property
    def axes(self) -> Axes:
        return self._parts

    def _get_length(self) -> int | None:
        lengths = self._parts.lengths
        return None if None in lengths else math.prod(lengths)

    def _set_length(self, value: int | None) -> None:
        raise AttributeError(f"the length of a FlattenedAxis is the product of "
                             f"{list(self._parts.names)}; set theirs instead")

    length = property(_get_length, _set_length)

    def __repr__(self) -> str:
        return f"FlattenedAxis({', '.join(map(repr, self._parts))})"


def make_axis(length: int | None = None, name: str | None = None, batch: bool = False,
              recurrent: bool = False, roles: Iterable[AxisRole] | None = None,
              docstring: str | None = None) -> Axis:
    """A new Axis (seed 000: `H = ng.make_axis(length=3, name='height')`)."""
    return Axis(length=length, name=name, batch=batch, recurrent=recurrent, roles=roles,
                docstring=docstring)


# **************** Axes ****************

def _as_axis(item: Any) -> Axis:
    if isinstance(item, Axis):
        return item
    if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):
        raise TypeError(f"Axes are made of Axis objects (or nested sequences of them), "
                        f"got {type(item).__name__} {item!r}")
    return Axes(item).flatten()


class Axes:
    """An ordered, immutable tuple of distinct axes labelling a tensor's dimensions.

    `+` is the ordered union (left axes, then the right's new ones), `-` the difference, `==`
    ordered equality. A nested sequence inside the list becomes a FlattenedAxis.
    """

    def __init__(self, axes: Any = ()) -> None:
        if axes is None:
            axes = ()
        elif isinstance(axes, Axis):
            axes = (axes,)
        elif isinstance(axes, (str, bytes)) or not isinstance(axes, Iterable):
            raise TypeError(f"Axes takes an Axis or a sequence of them, got {axes!r}")
        items = tuple(_as_axis(item) for item in axes)
        seen: set[Axis] = set()
        for axis in items:
            if axis in seen:
                raise ValueError(f"The axes labels of a tensor cannot contain duplicates. "
                                 f"Axis {_label(axis)} appears twice in {list(items)}")
            seen.add(axis)
        self._axes = items

    # ---- sequence
    def __iter__(self) -> Iterator[Axis]:
        return iter(self._axes)

    def __len__(self) -> int:
        return len(self._axes)

    def __getitem__(self, item: int | slice) -> Any:
        if isinstance(item, slice):
            return Axes(self._axes[item])
        return self._axes[item]

    def __contains__(self, axis: object) -> bool:
        return axis in self._axes

    def index(self, axis: Axis) -> int:
        return self._axes.index(axis)

    # ---- algebra
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Axes):
            return NotImplemented
        return self._axes == other._axes

    def __hash__(self) -> int:
        return hash(self._axes)

    def __add__(self, other: Any) -> Axes:
        """Ordered union: `(C, H) + (W, H, N)` is `(C, H, W, N)`."""
        other = Axes(other)
        return Axes(self._axes + tuple(axis for axis in other if axis not in self))

    def __radd__(self, other: Any) -> Axes:
        return Axes(other) + self

    def __sub__(self, other: Any) -> Axes:
        other = Axes(other)
        return Axes(axis for axis in self if axis not in other)

    def intersect(self, other: Any) -> Axes:
        """The axes of self that are also in `other`, in self's order."""
        other = Axes(other)
        return Axes(axis for axis in self if axis in other)

    def has_same_axes(self, other: Any) -> bool:
        """The same set of axes, in any order."""
        return set(self) == set(Axes(other))

    def get_dual(self, offset: int = -1) -> Axes:
        return Axes(axis.get_dual(offset) for axis in self)

    @property
    def T(self) -> Axes:
        return Axes(axis.T for axis in self)

    def flatten(self) -> Axis:
        """One axis: the only axis itself, else a FlattenedAxis of all of them."""
        return self._axes[0] if len(self._axes) == 1 else FlattenedAxis(self)

    # ---- selections
    def batch_axes(self) -> Axes:
        return Axes(axis for axis in self if axis.is_batch)

    def sample_axes(self) -> Axes:
        return Axes(axis for axis in self if not axis.is_batch)

    def recurrent_axes(self) -> Axes:
        return Axes(axis for axis in self if axis.is_recurrent)

    def role_axes(self, role: AxisRole) -> Axes:
        return Axes(axis for axis in self if axis.has_role(role))

    def find_by_name(self, name: str) -> Axes:
        """The axes named `name`, exactly or before uniquifying ('C' finds C and C_1)."""
        return Axes(axis for axis in self if name in (axis.name, axis.short_name))

    # ---- lengths
    @property
    def names(self) -> tuple:
        return tuple(axis.name for axis in self)

    @property
    def lengths(self) -> tuple:
        """Each axis's length; None where one is not set yet (see `require_lengths`)."""
        return tuple(axis.length for axis in self)

    @property
    def full_lengths(self) -> tuple:
        """Lengths with each FlattenedAxis as the nested tuple of its parts' lengths."""
        return tuple(axis.axes.full_lengths if isinstance(axis, FlattenedAxis) else axis.length
                     for axis in self)

    def require_lengths(self) -> tuple:
        """The lengths, all ints; ValueError naming the first axis whose length is None."""
        for axis in self:
            if axis.length is None:
                raise ValueError(f"axis {_label(axis)} of {self!r} has length None; "
                                 f"set {_label(axis)}.length before running a computation")
        return self.lengths

    @property
    def size(self) -> int:
        return math.prod(self.require_lengths())

    def __repr__(self) -> str:
        return f"Axes({', '.join(map(repr, self))})"


def make_axes(axes: Any = ()) -> Axes:
    """Axes from a list of axes (seed 000: `ng.make_axes([H, W])`)."""
    return Axes(axes)


# **************** layout ****************

class TensorDescription:
    """A host layout for a tensor with these axes: C-contiguous in axes order.

    Every axis must have a length by now; `broadcast(new_axes)` describes the view that adds
    axes (stride 0) and reorders them.
    """

    def __init__(self, axes: Any, dtype: Any = None, strides: tuple | None = None,
                 offset: int = 0) -> None:
        self.axes = Axes(axes)
        self.dtype = np.dtype(np.float32 if dtype is None else dtype)
        self.offset = offset
        for axis in self.axes:
            if axis.length is None:
                raise ValueError(f"axes used in the constructor of TensorDescription must always "
                                 f"have non-None length. Axis {_label(axis)} has length None")
        if strides is None:
            inner, contiguous = self.dtype.itemsize, []
            for n in reversed(self.shape):
                contiguous.append(inner)
                inner *= n
            strides = tuple(reversed(contiguous))
        self.strides = tuple(strides)

    @property
    def shape(self) -> tuple:
        return self.axes.lengths

    @property
    def ndim(self) -> int:
        return len(self.axes)

    def broadcast(self, new_axes: Any) -> TensorDescription:
        """This buffer seen with `new_axes`, a superset of the axes in any order."""
        new_axes = Axes(new_axes)
        missing = self.axes - new_axes
        if missing:
            raise ValueError(f"cannot broadcast {self.axes!r} to {new_axes!r}: "
                             f"it lacks {list(missing.names)}")
        stride_of = dict(zip(self.axes, self.strides))
        return TensorDescription(new_axes, self.dtype,
                                 tuple(stride_of.get(axis, 0) for axis in new_axes), self.offset)

    def __repr__(self) -> str:
        return f"TensorDescription({self.axes!r}, {self.dtype}, strides={self.strides})"
