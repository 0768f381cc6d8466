"""CTensor: what SINGA's `Tensor.data` is, here a handle on an engine value.

A CTensor holds `value`, an engine Tensor or an unexecuted op-tree, and the logical shape SINGA
sees (any rank, scalars and 1-D included). The engine's tensors are at least 2-D, so the value's
shape is always `pad2(shape)`: leading 1s, which keep numpy's broadcasting meaning (a (3,) bias is
the engine's (1, 3)).

Laziness (choices SINGA, which runs a kernel per operator, does not have to make):
- an elementwise operator's result is an op-tree over its inputs' values; `materialize()` runs it
  into a new tensor, one fused kernel, and the CTensor then holds that tensor;
- a tree never reads a tensor that is later written in place with a stale meaning: a lazy
  CTensor registers as a reader of the tensors of its tree that can be written (`watch`), and
  `write` first materialises every live reader (an optimizer's update cannot change a gradient
  or a forward value still to be computed).

CTensor keeps SINGA's C++ methods that Python code calls (`shape()`, `nDim()`, `Size()`,
`device()`, `data_type()`) and adds arithmetic (`+ - * /`, numbers allowed, numpy broadcasting)
that builds lazy CTensors, so an Operation subclass can write its forward and backward with them.
"""
from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from ..backends.autodiff import _attrs
from ..ops import Op
from ..optree import OpTreeNode, build, trusted_node
from ..shapes import pad2
from ..tensor import Tensor as EngineTensor

READERS_PRUNE = 64   # a watch list is swept of dead readers when it grows past this


def watch(value: Any) -> None:
    """Mark an engine tensor as one that may be written in place (parameters, data, states)."""
    base = value._original_base
    if not hasattr(base, "_sg_readers"):
        base._sg_readers = []


def _leaves(tree: OpTreeNode) -> tuple:
    d = tree[0]
    leaves = getattr(d, "leaves", None)
    return leaves if leaves and getattr(d, "sid", None) is not None else tuple(tree.leaves())


class CTensor:
    """A value (engine Tensor or op-tree of shape pad2(shape)) with SINGA's logical shape."""

    __slots__ = ("value", "lshape", "dev", "dtype", "__weakref__")

    def __init__(self, value: Any, shape: tuple, device: Any, dtype: Any) -> None:
        self.value, self.lshape, self.dev = value, tuple(shape), device
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        if type(value) is OpTreeNode:
            me = None
            for leaf in _leaves(value):
                base = leaf if leaf.base is None else leaf._original_base
                readers = getattr(base, "_sg_readers", None)
                if readers is None:
                    continue
                if me is None:
                    me = weakref.ref(self)
                elif readers and readers[-1] is me:   # a base read twice (by this tree)
                    continue
                if len(readers) > READERS_PRUNE:
                    readers[:] = [r for r in readers if r() is not None]
                readers.append(me)

    # ---------------------------------------------------------------- SINGA's C++ methods
    def shape(self, axis: int | None = None) -> Any:
        return self.lshape if axis is None else self.lshape[axis]

    def nDim(self) -> int:
        return len(self.lshape)

    def Size(self) -> int:
        return math.prod(self.lshape)

    def device(self) -> Any:
        return self.dev

    def data_type(self) -> Any:
        return self.dtype

    def __repr__(self) -> str:
        state = "lazy" if self.lazy else "materialized"
        return f"CTensor(shape={self.lshape}, dtype={self.dtype.name}, {state})"

    # ---------------------------------------------------------------- values
    @property
    def lazy(self) -> bool:
        return type(self.value) is OpTreeNode

    def materialize(self) -> EngineTensor:
        """The value as an engine tensor (the tree run into a new one, which replaces it)."""
        if type(self.value) is OpTreeNode:
            self.value = run(self.dev, self.value, self.dtype)
        return self.value

    def write(self, value: Any) -> None:
        """Write `value` (a tree, tensor or number of this shape) into this CTensor's tensor in
        place, after materialising every live lazy CTensor that reads it."""
        self.writable()[:] = value

    def writable(self) -> EngineTensor:
        """This CTensor's tensor, for an op to update in place: every live lazy CTensor that
        reads it is materialised first (it keeps the value it was built from)."""
        target = self.materialize()
        readers = getattr(target._original_base, "_sg_readers", None)
        if readers:
            for ref in readers:
                reader = ref()
                if reader is not None and reader is not self and reader.lazy:
                    reader.settle()
            readers.clear()
        return target

    def settle(self) -> None:
        """Run the tree, so that the value reads no tensor but its own: materialised, or where
        the tree is a transpose of another (layout.py's NCHW view of a CHWN tree), that tree run
        and the transpose kept (the readers that want it in CHWN take it without a copy)."""
        v = self.value
        if type(v) is OpTreeNode:
            d = v[0]
            if d["op"] is Op.TRANSPOSE and type(v[1]) is OpTreeNode:
                inner = run(self.dev, v[1], self.dtype)
                self.value = trusted_node(Op.TRANSPOSE, d["shape"], _attrs(d), inner, None)
            else:
                self.materialize()

    def to_numpy(self) -> np.ndarray:
        return self.materialize().get().reshape(self.lshape)

    # ---------------------------------------------------------------- arithmetic (lazy)
    def _binary(self, other: Any, op: Op, swap: bool = False) -> CTensor:
        if isinstance(other, CTensor):
            shape = np.broadcast_shapes(self.lshape, other.lshape)
            dtype = np.result_type(self.dtype, other.dtype)
            other = other.value
        elif isinstance(other, (int, float, np.number)):
            shape, dtype, other = self.lshape, self.dtype, float(other)
        else:
            return NotImplemented
        a, b = (other, self.value) if swap else (self.value, other)
        return CTensor(build(op, a, b), shape, self.dev, dtype)

    def __add__(self, o: Any) -> CTensor: return self._binary(o, Op.ADD)           # noqa: E704
    def __radd__(self, o: Any) -> CTensor: return self._binary(o, Op.ADD, True)    # noqa: E704
    def __sub__(self, o: Any) -> CTensor: return self._binary(o, Op.SUB)           # noqa: E704
    def __rsub__(self, o: Any) -> CTensor: return self._binary(o, Op.SUB, True)    # noqa: E704
    def __mul__(self, o: Any) -> CTensor: return self._binary(o, Op.MUL)           # noqa: E704
    def __rmul__(self, o: Any) -> CTensor: return self._binary(o, Op.MUL, True)    # noqa: E704
    def __truediv__(self, o: Any) -> CTensor: return self._binary(o, Op.DIV)       # noqa: E704
    def __rtruediv__(self, o: Any) -> CTensor: return self._binary(o, Op.DIV, True)  # noqa: E704

    def __neg__(self) -> CTensor:
        return CTensor(build(Op.NEG, self.value, None), self.lshape, self.dev, self.dtype)


def run(dev: Any, tree: Any, dtype: Any) -> EngineTensor:
    """A tree executed into a new tensor on `dev`; a reshape at its root becomes a view of its
    operand's result (no copy, no host stage), a transpose at its root the backend's
    copy_transpose of its operand's result (layout.py's NCHW views of CHWN tensors)."""
    d = tree[0]
    if d["op"] is Op.TRANSPOSE:
        inner = tree[1]
        inner = run(dev, inner, dtype) if type(inner) is OpTreeNode else inner
        out = dev.alloc(d["shape"], dtype)
        dev.be.copy_transpose(inner, out, axes=d["axes"])
        return out
    if d["op"] is Op.RESHAPE:
        inner = tree[1]
        inner = run(dev, inner, dtype) if type(inner) is OpTreeNode else inner
        try:
            return inner.reshape(d["shape"])
        except ValueError:       # a strided view: copied by a statement
            tree = build(Op.RESHAPE, inner, None, newshape=d["shape"])
    out = dev.alloc(d["shape"], dtype)
    out[:] = tree
    return out


def ran(value: Any, shape: tuple, dev: Any, dtype: Any) -> CTensor:
    """A materialised CTensor of `value` (a tree is run at once, so it registers as no reader)."""
    if type(value) is OpTreeNode:
        value = run(dev, value, dtype)
    return CTensor(value, shape, dev, dtype)


def gemm_operands(value: Any) -> tuple | None:
    """(A, B), engine tensors or their `.T` views, where `value` is the tree `A @ B` of 2-D
    tensors (a product a GEMM can take straight, `C = A @ B + beta * C`); None otherwise."""
    if type(value) is not OpTreeNode or value[0]["op"] is not Op.DOT:
        return None
    ab = []
    for x in value[1], value[2]:
        if type(x) is OpTreeNode and x[0]["op"] is Op.TRANSPOSE and x[0]["axes"] == (1, 0):
            x = x[1].T if isinstance(x[1], EngineTensor) and len(x[1].shape) == 2 else None
        if not isinstance(x, EngineTensor) or len(x.shape) != 2:
            return None
        ab.append(x)
    return tuple(ab)


def from_value(value: Any, shape: tuple, device: Any) -> CTensor:
    """A CTensor over an engine tensor (of shape pad2(shape))."""
    if tuple(value.shape) != pad2(tuple(shape)):
        raise ValueError(f"CTensor: a value of shape {value.shape} cannot hold logical shape "
                         f"{shape} (expected {pad2(tuple(shape))})")
    return CTensor(value, shape, device, value.dtype)


__all__ = ["CTensor", "watch", "run", "ran", "gemm_operands", "from_value"]
