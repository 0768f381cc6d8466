"""Shape rules, checked when a tree is built: neon's at-least-2-D world, numpy broadcasting, axes.

Every function here raises ValueError naming the op, what it expected and what it was given.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from .memo import Memo

Shape = tuple  # of Python ints, never fewer than 2 entries


def as_shape(shape: Any, what: str = "shape") -> tuple:
    """A user-given shape (int or sequence, numpy ints allowed) as a tuple of Python ints."""
    if isinstance(shape, (int,)) or hasattr(shape, "__index__"):
        shape = (shape,)
    try:
        dims = tuple(int(d.__index__()) for d in shape)
    except (TypeError, AttributeError):
        raise TypeError(f"{what} must be an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"{what} must not have negative dimensions, got {dims}")
    return dims


def pad2(shape: tuple) -> tuple:
    """neon's rule for computed shapes: never fewer than 2 dims; missing dims are leading 1s.

    Leading 1s keep numpy's broadcasting meaning: a (4,) row becomes (1, 4).
    """
    return shape if len(shape) >= 2 else (1,) * (2 - len(shape)) + shape


def host_shape(shape: tuple) -> tuple:
    """neon's rule for host data given to the backend: a scalar is (1, 1), a 1-D (n,) is (n, 1)."""
    if len(shape) == 0:
        return (1, 1)
    if len(shape) == 1:
        return (shape[0], 1)
    return shape


def broadcast(sa: tuple, sb: tuple, op: Any) -> tuple:
    """numpy broadcasting of two shapes, or ValueError naming both shapes and the op."""
    if sa == sb or (sb == (1, 1) and len(sa) >= 2):
        return sa
    if sa == (1, 1) and len(sb) >= 2:
        return sb
    n = max(len(sa), len(sb))
    pa = (1,) * (n - len(sa)) + sa
    pb = (1,) * (n - len(sb)) + sb
    out = []
    for da, db in zip(pa, pb):
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            raise ValueError(f"{op}: cannot broadcast shapes {sa} and {sb} "
                             f"(dimension {da} vs {db}; sizes must match or be 1)")
    return tuple(out)


def check_assignable(out_shape: tuple, value_shape: tuple) -> None:
    """A value can be stored into an output when it broadcasts to exactly the output's shape."""
    try:
        ok = broadcast(out_shape, value_shape, "assign") == out_shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"assign: cannot store a value of shape {value_shape} into an output of "
                         f"shape {out_shape} (the value must broadcast to the output's shape)")


def norm_axis(axis: Any, ndim: int, op: Any) -> int:
    """One axis, negative allowed, as a non-negative int."""
    try:
        a = int(axis.__index__())
    except AttributeError:
        raise TypeError(f"{op}: axis must be an int, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise ValueError(f"{op}: axis {a} is out of range for {ndim} dimensions")
    return a % ndim


def norm_axes(axis: Any, ndim: int, op: Any) -> tuple:
    """None, an int or a tuple of ints as a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        axes = tuple(norm_axis(a, ndim, op) for a in axis)
    else:
        axes = (norm_axis(axis, ndim, op),)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(axes))


def reduce_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return pad2(tuple(d for i, d in enumerate(shape) if i not in axes))


def reshape_target(shape: tuple, new: Any, op: Any = "reshape") -> tuple:
    """Resolve a reshape target (one -1 allowed) against a shape, or ValueError. Resolved
    targets are remembered (a layer reshapes the same views every step)."""
    if type(new) is tuple or type(new) is int:
        try:
            hit = _RESHAPES.get((shape, new))
        except TypeError:       # an unhashable dim (a 0-d array)
            hit = False
        if hit is None:
            hit = _RESHAPES.put((shape, new), _reshape_target(shape, new, op))
        if hit:
            return hit
    return _reshape_target(shape, new, op)    # a list, an array: resolved each time


_RESHAPES = Memo("shapes.reshape_targets", 4096)


def _reshape_target(shape: tuple, new: Any, op: Any) -> tuple:
    dims = list(as_shape_allow_minus(new))
    size = math.prod(shape)
    if dims.count(-1) > 1:
        raise ValueError(f"{op}: only one dimension may be -1, got {tuple(dims)}")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or size % known:
            raise ValueError(f"{op}: cannot reshape {shape} (size {size}) into {tuple(dims)}")
        dims[dims.index(-1)] = size // known
    if math.prod(dims) != size:
        raise ValueError(f"{op}: cannot reshape {shape} (size {size}) into {tuple(dims)} "
                         f"(size {math.prod(dims)})")
    return host_shape(tuple(dims))


def as_shape_allow_minus(new: Any) -> tuple:
    if isinstance(new, int) or hasattr(new, "__index__"):
        new = (new,)
    dims = tuple(int(d.__index__()) for d in new)
    if any(d < -1 for d in dims):
        raise ValueError(f"reshape: invalid dimension in {dims}")
    return dims


def slice_spec(shape: tuple, key: Sequence[slice]) -> tuple:
    """Normalised (start, stop, step) triples, one per axis, for basic slicing."""
    if len(key) > len(shape):
        raise IndexError(f"too many indices: {len(key)} for a tensor of shape {shape}")
    key = tuple(key) + (slice(None),) * (len(shape) - len(key))
    return tuple(k.indices(d) for k, d in zip(key, shape))


def sliced_shape(spec: tuple) -> tuple:
    return tuple(len(range(*t)) for t in spec)


def as_slice(triple: tuple) -> slice:
    """A normalised (start, stop, step) back as a slice (slice.indices' stop -1 means 'before 0')."""
    start, stop, step = triple
    if len(range(start, stop, step)) == 0:
        return slice(0, 0, 1)
    return slice(start, stop if stop >= 0 else None, step)
