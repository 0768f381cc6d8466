"""Tensor: a typed, shaped handle on a backend's memory. Its operators build op-trees.

A device subclasses Tensor and implements the storage hooks (`_view`, `get`, `_store`, `reshape`,
`T`, `share`); everything else, assignment included, is written once here.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from . import shapes as S
from .ops import Op
from .optree import OpTreeNode, Operators, Tensor_, build, hotpath


def normalize_index(shape: tuple, key: Any) -> tuple:
    """A basic-indexing key as `(slices, view_shape)`, with neon's keep-2-D rule applied.

    On tensors of at most 2 dims an integer index keeps its axis with size 1 (`x[0]` is (1, n));
    on more dims it drops the axis, as numpy does (a view of fewer than 2 dims gets leading 1s).
    Negative indices and steps are allowed. Every int becomes a one-element slice, so the view is
    always a view, even when every index is an int.
    """
    key = key if isinstance(key, tuple) else (key,)
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if ellipses:
        i = ellipses[0]
        key = key[:i] + (slice(None),) * max(len(shape) - len(key) + 1, 0) + key[i + 1:]
    if len(key) > len(shape):
        raise IndexError(f"too many indices: {len(key)} for a tensor of shape {shape}")
    slices, dropped = [], set()
    for axis, k in enumerate(key):
        if isinstance(k, slice):
            slices.append(k)
        elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            i, n = operator.index(k), shape[axis]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            i %= n
            slices.append(slice(i, i + 1))
            if len(shape) > 2:
                dropped.add(axis)
        else:
            raise TypeError(f"tensor indices must be ints, slices or '...', got {type(k).__name__}; "
                            "for index lists use be.take(tensor, indices, axis)")
    spec = S.slice_spec(shape, slices)
    sliced = S.sliced_shape(spec)
    return tuple(S.as_slice(t) for t in spec), S.pad2(tuple(d for i, d in enumerate(sliced) if i not in dropped))


class Tensor(Operators, Tensor_):
    """A backend tensor: `shape` (at least 2-D), `dtype`, `name`; views share memory with `base`."""

    __hash__ = object.__hash__  # == builds an op-tree; tensors still key dicts by identity

    def __init__(self, backend: Any, shape: tuple, dtype: Any, name: str | None = None,
                 persist_values: bool = True, base: Tensor | None = None) -> None:
        self.backend = backend
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.name = name
        self.persist_values = persist_values
        self.base = base

    # ---------------------------------------------------------------- metadata
    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def _original_base(self) -> Tensor:
        t = self
        while t.base is not None:
            t = t.base
        return t

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self) -> Any:
        raise TypeError(f"a {type(self).__name__} is not iterable; copy it to the host with .get()")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, shape={self.shape}, "
                f"dtype={self.dtype.name})")

    def __str__(self) -> str:
        return str(self.get())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a Tensor's values reach numpy only as a copy (np.asarray(t, copy=False) "
                             "cannot be honoured); use t.get()")
        values = self.get()
        return values if dtype is None else values.astype(dtype)

    # ---------------------------------------------------------------- assignment
    def __getitem__(self, key: Any) -> Tensor:
        if key is Ellipsis or (isinstance(key, slice) and key == slice(None)):
            return self
        return self._view(*normalize_index(self.shape, key))

    def __setitem__(self, key: Any, value: Any) -> None:
        if type(key) is slice and key.start is None and key.stop is None and key.step is None:
            # `out[:] = tree` of the tree's own shape, the statement of every layer: no view to
            # make and nothing to check (the shape was checked as the tree was built)
            if type(value) is OpTreeNode and value[0]["shape"] == self.shape:
                self.backend.execute_assign(self, value)
            else:
                self._assign(value)
            return
        self[key]._assign(value)

    def _assign(self, value: Any) -> Tensor:
        if type(value) is OpTreeNode and value[0]["shape"] == self.shape:
            # the common `out[:] = tree` of the tree's own shape: nothing to check, run it
            return self.backend.execute_assign(self, value)
        if isinstance(value, Operators):
            return build(Op.ASSIGN, self, value)
        if isinstance(value, np.ndarray) and value.ndim > 0:
            return self.set(value)
        if isinstance(value, (int, float, np.generic, np.ndarray)):
            return self.fill(value)
        raise TypeError(f"cannot assign a {type(value).__name__} to a tensor; expected a Tensor, "
                        "an op-tree, a number or a numpy array")

    def fill(self, value: Any) -> Tensor:
        """Set every element to `value` (converted as a store: rounding, saturation)."""
        from .optree import constant
        self._store(np.asarray(constant(value, "fill"), dtype=np.float64))
        return self

    def set(self, ary: Any) -> Tensor:
        """Copy host data in: the array must broadcast to the tensor's shape or have its size."""
        ary = np.asarray(ary)
        if ary.dtype.kind not in "biuf":
            raise TypeError(f"set: expected a real numeric array, got dtype {ary.dtype}")
        try:
            S.check_assignable(self.shape, S.host_shape(ary.shape))
            ary = ary.reshape(S.host_shape(ary.shape))
        except ValueError:
            if ary.size != self.size:
                raise ValueError(f"set: an array of shape {ary.shape} does not fit a tensor of "
                                 f"shape {self.shape}") from None
            ary = ary.reshape(self.shape)
        self._store(ary)
        return self

    def copy(self, a: Any) -> Tensor:
        """neon's copy: assign `a` (Tensor, op-tree, number or array) into this tensor."""
        return self._assign(a)

    copy_from = copy

    def asnumpyarray(self) -> np.ndarray:
        """A host copy (neon's CPU returned a view here; neonlike always copies, as neon's GPU did)."""
        return self.get()

    # ---------------------------------------------------------------- views and derived tensors
    def transpose(self, out: Tensor | None = None) -> Any:
        """The transposed view, or, with `out`, the transpose assigned into `out`."""
        return self.T if out is None else build(Op.TRANSPOSE, self, None, out=out)

    def take(self, indices: Any, axis: Any = None, out: Tensor | None = None) -> Tensor:
        """Entries along `axis` at `indices` (flattened), as a new tensor or into `out`."""
        tree = self.backend.take(self, indices, axis)
        if out is not None:
            return build(Op.ASSIGN, out, tree)
        return tree.astensor()

    # ---------------------------------------------------------------- device hooks
    def _view(self, slices: tuple, shape: tuple) -> Tensor:
        """The view of `self[slices]` reshaped to `shape` (which only drops size-1 axes)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement views")

    def get(self) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} does not implement get()")

    def _layout(self) -> tuple | None:
        """(offset, strides) of this tensor's elements in its `_original_base`'s memory, counted in
        elements, or None where the device cannot say (Autodiff places views' gradients by it)."""
        return None

    def _store(self, values: np.ndarray) -> None:
        """Write host values (already checked to broadcast to self.shape), converting to dtype."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _store()")

    def reshape(self, *shape: Any) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement reshape()")

    @property
    def T(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement .T")

    def hist(self, tag: str) -> Tensor:
        """neon's log2 histogram of the values (bins from be.set_hist_buffers), kept under `tag`
        in the backend's histogram buffer (be.dump_hist_data) and returned as its (1, bins) row."""
        fn = getattr(self.backend, "_hist_of", None)
        if fn is None:
            raise NotImplementedError(f"hist: the {type(self.backend).__name__} backend has no "
                                      "histogram buffers; use the 'cpu' or 'mkl' backend")
        return fn(self, tag)


__all__ = ["Tensor", "OpTreeNode", "normalize_index"]


# `out[:] = tree` through the backend's fast runners in C (neonlike._hotpath.Setitem, where built):
# the Python __setitem__ above stays the definition and takes every other call
if hotpath() is not None:
    Tensor.__setitem__ = hotpath().Setitem(Tensor.__setitem__)  # type: ignore[method-assign]
