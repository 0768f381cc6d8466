"""Lowering an ngraph graph onto neonlike's engine: every op becomes part of an op-tree.

Layout: a tensor with storage (variable, placeholder, constant, a computation's result) is one
engine tensor laid out in its axes' order (C-contiguous; neon's tensors are at least 2-D, so
fewer axes get trailing size-1 dimensions).

Frames: a statement (a result, an assignment) is lowered in one *frame*, an ordered list of
axes: the statement's own axes first, then every other axis its fusable region touches (the
region: elementwise ops, reductions, broadcasts, reorders, casts and tensors, down to dots and
structural ops). Every value of the region has the frame's rank, with size 1 on the axes it
lacks, so operands pair by axis identity through the engine's size-1 broadcasting; a tensor is
read through a view (transposed and reshaped, never copied); a reduction keeps its reduced axes
as size 1. The region becomes one fused op-tree, hence one kernel.

Boundaries: a dot, a structural op (slices of computed values, flatten, one_hot, stack, pad), a
convolution or pooling and a derivative are lowered in their own axes' layout as engine nodes
(DOT, RESHAPE, TRANSPOSE, SLICE, CONCAT, ONEHOT, CONV, POOL) and then put in the consumer's frame
(TRANSPOSE / RESHAPE where needed); the engine plans those as GEMM, COMPOUND and host stages of
the same statement.

Derivatives: `deriv(c, w)` lowers `c` to one op-tree (boundaries included) and asks neonlike's
Autodiff for the gradient of w's engine tensor: ngraph's derivatives use the engine's one rule
table. The independent must be a tensor with storage (a variable or placeholder).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ...axes import Axes
from ...ops import Op as E
from ...optree import OpTreeNode, build
from ..op_graph import op_graph as G
from ..op_graph.convolution import ConvolutionOp
from ..op_graph.pooling import PoolingOp


def _pad2(shape: tuple) -> tuple:
    return shape + (1,) * (2 - len(shape)) if len(shape) < 2 else shape


def _lengths(axes: Any) -> tuple:
    return tuple([a.length for a in axes])


def _shape_in(axes: Any, frame: tuple) -> tuple:
    """The shape of a value with these axes in `frame` (size 1 on the axes it lacks)."""
    present = set(axes)
    return _pad2(tuple(a.length if a in present else 1 for a in frame))


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else (1, 1)


def _permuted(t: Any, perm: list) -> Any:
    """A view of engine tensor `t` with its axes in the order `perm` (no copy): a transposed
    numpy view on the CPU, permuted strides on the GPU."""
    if hasattr(t, "_tensor"):
        return t._derived(np.transpose(t._tensor, perm))
    if hasattr(t, "strides"):
        return t._derived(tuple(t.shape[i] for i in perm), 0, tuple(t.strides[i] for i in perm))
    raise NotImplementedError(f"ngraph on {type(t).__name__}: a tensor read in another axis "
                              f"order needs a permuted view, which this backend does not give")


class Lowering:
    """Lowers ops for one transformer; `storage(op)` gives an op's engine tensor."""

    def __init__(self, be: Any, storage: Any, random: Any) -> None:
        self.be, self.storage, self.random = be, storage, random
        self.memo: dict = {}

    # ---------------------------------------------------------------- frames
    def frame(self, op: G.TensorOp, first: Any = ()) -> tuple:
        """`first` (or op's axes), then every axis op's fusable region touches: first those of
        the values the region reads (dots, tensors, structural ops), in their own order, so
        that they enter the frame without a transpose, then the others."""
        outer, inner = [], []
        stack, visited = [op], set()
        while stack:
            x = stack.pop()
            if x in visited:
                continue
            visited.add(x)
            if self._in_region(x):
                inner.append(x)
                if not isinstance(x, G.AxesCastOp):   # a cast's operand is read under its axes
                    stack.extend(reversed([a for a in x.args if isinstance(a, G.TensorOp)]))
            else:
                outer.append(x)
        axes = list(first) or list(op.axes)
        seen = set(axes)
        for x in outer + inner:
            for a in x.axes:
                if a not in seen:
                    seen.add(a)
                    axes.append(a)
        return tuple(axes)

    @staticmethod
    def _in_region(x: Any) -> bool:
        if isinstance(x, G.ReductionOp):
            return x.engine not in (E.ARGMAX, E.ARGMIN) or len(x.reduction_axes) == 1
        return isinstance(x, (G.ElementWise, G.BroadcastOp, G.ReorderAxes, G.AxesCastOp,
                              G.ExpandDims))

    # ---------------------------------------------------------------- values in a frame
    def value(self, op: G.TensorOp, frame: tuple) -> Any:
        """op's value laid out in `frame`: an op-tree, an engine tensor (view) or a number."""
        key = (op, frame)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._value(op, frame)
        return hit

    def _value(self, op: G.TensorOp, frame: tuple) -> Any:
        missing = op.axes - Axes(frame)
        if len(missing):
            raise AssertionError(f"lowering: {op.name}'s axes {list(missing)} are not in the "
                                 f"frame {list(frame)}")
        if isinstance(op, G.AssignableTensorOp):
            if op.is_scalar_constant:
                return float(op.const)
            return self.view(self.storage(op), op.axes, frame)
        if isinstance(op, G.RngOp):
            return self.view(self.random(op), op.axes, frame)
        if isinstance(op, G.TensorSizeOp):
            op.size_axes.require_lengths()
            return float(math.prod(_lengths(op.size_axes)))
        if isinstance(op, G.ElementWise):
            args = [self.value(a, frame) for a in op.args]
            if op.engine == "mod":          # numpy's floored modulo
                a, b = args
                return build(E.SUB, a, build(E.MUL, b, build(E.FLOOR, build(E.DIV, a, b), None)))
            if all(isinstance(a, float) for a in args):
                args[0] = self._as_tree(args[0])       # a tree, not a Python number
            return build(op.engine, args[0], args[1] if op.arity == 2 else None)
        if isinstance(op, G.ReductionOp) and self._in_region(op):
            x = self.value(op.args[0], frame)
            if not len(op.reduction_axes):
                return x
            pos = tuple(frame.index(a) for a in op.reduction_axes)
            if isinstance(x, float):
                n = math.prod(_lengths(op.reduction_axes))
                return x * n if op.engine is E.SUM else (0.0 if op.engine in (E.ARGMAX, E.ARGMIN)
                                                        else x)
            if op.engine in (E.ARGMAX, E.ARGMIN):
                return build(op.engine, x, None, axis=pos[0], keepdims=True)
            return build(op.engine, x, None, axis=pos, keepdims=True)
        if isinstance(op, (G.BroadcastOp, G.ReorderAxes, G.ExpandDims)):
            return self.value(op.args[0], frame)      # size-1 axes broadcast; order is the frame's
        if isinstance(op, G.AxesCastOp):
            x = op.args[0]
            rename = dict(zip(op.axes, x.axes))
            inner = tuple(rename.get(a, a) for a in frame)
            if len(set(inner)) == len(inner):
                return self.value(x, inner)
        return self.place(self.own(op), op.axes, frame)

    def _as_tree(self, x: Any) -> Any:
        """A number as an op-tree (0 + x on a (1, 1) zero tensor); anything else as is."""
        return build(E.ADD, self._filled(0.0, (1, 1)), x) if isinstance(x, float) else x

    def _filled(self, value: float, shape: tuple) -> Any:
        """An engine tensor of `shape` holding `value` (made once per lowering)."""
        key = ("filled", value, shape)
        t = self.memo.get(key)
        if t is None:
            t = self.memo[key] = self.be.array(np.full(shape, value, dtype=np.float32))
        return t

    # ---------------------------------------------------------------- layouts
    def view(self, t: Any, axes: Any, frame: tuple) -> Any:
        """An engine tensor laid out in `axes` order, as a view in `frame`."""
        axes = list(axes)
        order = [a for a in frame if a in set(axes)]
        if order != axes:
            perm = [axes.index(a) for a in order] + list(range(len(axes), len(t.shape)))
            t = _permuted(t, perm)
        shape = _shape_in(axes, frame)
        return t if tuple(t.shape) == shape else t.reshape(shape)

    def place(self, tree: Any, axes: Any, frame: tuple) -> Any:
        """A value laid out in `axes` order (shape: their lengths, padded to 2-D) in `frame`."""
        if isinstance(tree, float):
            return tree
        if not isinstance(tree, OpTreeNode):
            return self.view(tree, axes, frame)
        axes = list(axes)                   # (_value checked that they are in the frame)
        order = [a for a in frame if a in set(axes)]
        if order != axes:
            perm = tuple(axes.index(a) for a in order)
            tree = build(E.RESHAPE, tree, None, newshape=_lengths(axes)) \
                if _shape(tree) != _lengths(axes) else tree
            tree = build(E.TRANSPOSE, tree, None, axes=perm)
            axes = order
        shape = _shape_in(axes, frame)
        return tree if _shape(tree) == shape else build(E.RESHAPE, tree, None, newshape=shape)

    def own(self, op: G.TensorOp) -> Any:
        """op's value laid out in its own axes' order (shape: their lengths, padded to 2-D)."""
        key = (op, "own")
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._own(op)
        return hit

    def _own(self, op: G.TensorOp) -> Any:
        if isinstance(op, G.DotOp):
            return self._dot(op)
        if isinstance(op, G.DerivOp):
            return self._deriv(op)
        if isinstance(op, (ConvolutionOp, PoolingOp)):
            return self._compound(op)
        if isinstance(op, G.TensorSliceOp):
            return self._slice(op)
        if isinstance(op, (G.Flatten, G.Unflatten)):
            x = op.args[0]
            return self._reshape(self.in_own(x), _pad2(_lengths(op.axes)))
        if isinstance(op, G.OneHotOp):
            x = op.args[0]
            n, m = op.axis.length, math.prod(_lengths(x.axes))
            idx = self._reshape(self.in_own(x), (1, m))
            return self._reshape(build(E.ONEHOT, idx, None, axis=0, depth=n),
                                 _pad2(_lengths(op.axes)))
        if isinstance(op, G.StackOp):
            return self._stack(op)
        if isinstance(op, G.PadOp):
            return self._pad(op)
        if isinstance(op, G.ReductionOp):       # argmax / argmin over several axes: the
            x = op.args[0]                      # position in them flattened, in their order
            kept, red = list(op.axes), list(op.reduction_axes)
            rows, cols = (math.prod(_lengths(v)) for v in (kept, red))
            flat = self._reshape(self.in_own(x, kept + red), (rows, cols))
            found = build(op.engine, flat, None, axis=1, keepdims=True)
            return self._reshape(found, _pad2(_lengths(op.axes)))
        return self.value(op, tuple(op.axes))

    def in_own(self, op: G.TensorOp, first: Any = None) -> Any:
        """op's value in the order `first` (default: its axes), with shape their lengths (padded
        to 2-D): lowered in its region's frame, whose extra axes (size 1) are then dropped."""
        first = tuple(op.axes) if first is None else tuple(first)
        frame = self.frame(op, first=first)
        tree = self.value(op, frame)
        return self._reshape(tree, _pad2(_lengths(first)))

    def _reshape(self, x: Any, shape: tuple) -> Any:
        if _shape(x) == tuple(shape):
            return x
        if isinstance(x, OpTreeNode) or isinstance(x, float):
            return build(E.RESHAPE, self._as_tree(x), None, newshape=tuple(shape))
        try:
            return x.reshape(tuple(shape))
        except ValueError:
            return build(E.RESHAPE, x, None, newshape=tuple(shape))

    def _dot(self, op: G.DotOp) -> Any:
        x, y = op.args
        xf = [a for a in x.axes if a not in op.x_reduce]
        yf = [a for a in y.axes if a not in op.y_reduce]
        xr, yr = list(op.x_reduce), list(op.y_reduce)
        for a in xf + xr + yr + yf:
            if a.length is None:
                raise ValueError(f"dot: axis {a.name or a} has no length")
        m, k, n = (math.prod(_lengths(v)) for v in (xf, xr, yf))
        a = self._reshape(self.in_own(x, xf + xr), (m, k))
        b = self._reshape(self.in_own(y, yr + yf), (k, n))
        return self._reshape(build(E.DOT, a, b), _pad2(_lengths(op.axes)))

    def _compound(self, op: Any) -> Any:
        """A convolution or pooling: the engine's node on its operands in their own axes order
        (neon's layouts, by position); the result's axes must have the node's lengths."""
        for x in op.args:
            x.axes.require_lengths()
        operands = [self.in_own(x) for x in op.args]
        if isinstance(op, ConvolutionOp):
            node = build(E.CONV, operands[0], operands[1], **op.geometry())
        else:
            node = build(E.POOL, operands[0], None, **op.geometry())
        lengths = tuple(a.length for a in op.axes)
        if node.shape != lengths:
            raise ValueError(f"{type(op).__name__} {op.name}: the result's axes {list(op.axes)} "
                             f"have lengths {lengths}, the result has shape {node.shape} (make "
                             "them with ng.spatial_axis)")
        return node

    def _slice(self, op: G.TensorSliceOp) -> Any:
        x = op.args[0]
        index = tuple(s if isinstance(s, slice) else slice(int(s), int(s) + 1 if int(s) != -1
                                                             else None) for s in op.slices)
        index = index + (slice(None),) * (len(_pad2(_lengths(x.axes))) - len(index))
        if isinstance(x, G.AssignableTensorOp) and not x.is_scalar_constant:
            t = self.storage(x)
            if hasattr(t, "_tensor"):           # the CPU's: a view
                return self._reshape(t._derived(t._tensor[index]), _pad2(_lengths(op.axes)))
            return self._reshape(build(E.SLICE, t, None, index=index), _pad2(_lengths(op.axes)))
        src = self.in_own(x)
        return self._reshape(build(E.SLICE, src, None, index=index), _pad2(_lengths(op.axes)))

    def _stack(self, op: G.StackOp) -> Any:
        parts = []
        first = op.args[0].axes
        shape = list(_lengths(first))
        shape.insert(op.pos, 1)
        for x in op.args:
            parts.append(self._reshape(self.in_own(x, first), _pad2(tuple(shape))))
        tree = parts[0]
        for p in parts[1:]:
            tree = build(E.CONCAT, tree, p, axis=op.pos)
        own = list(first)
        own.insert(op.pos, op.axis)
        return self.place(tree, own, tuple(op.axes)) if own != list(op.axes) else tree

    def _pad(self, op: G.PadOp) -> Any:
        x = op.args[0]
        tree = self.in_own(x)
        shape = list(_pad2(_lengths(x.axes)))
        for i, (lo, hi) in enumerate(op.paddings):
            for side, n in (("lo", lo), ("hi", hi)):
                if n:
                    zeros = self._filled(0.0, tuple(n if j == i else d
                                                    for j, d in enumerate(shape)))
                    tree = build(E.CONCAT, zeros, tree, axis=i) if side == "lo" else \
                        build(E.CONCAT, tree, zeros, axis=i)
            shape[i] += lo + hi
        return tree

    def _deriv(self, op: G.DerivOp) -> Any:
        from ...backends.autodiff import UnusedTensorWarning
        w = op.independent
        if not isinstance(w, G.AssignableTensorOp) or w.is_scalar_constant:
            raise NotImplementedError(f"deriv: the independent must be a variable or placeholder "
                                      f"(a tensor with storage), got {type(w).__name__} {w.name}")
        target = self.storage(w)
        # one Autodiff per (dependent, error): the derivatives of one cost share its backward
        # pass, node for node (schedule.py then computes its shared parts once)
        key = ("autodiff", op.dependent, op.error)
        ad = self.memo.get(key)
        if ad is None:
            ad = self.memo[key] = self._autodiff(op)
        if isinstance(ad, float):
            return build(E.ADD, self._filled(0.0, tuple(target.shape)), 0.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnusedTensorWarning)
            return ad.get_grad_op_tree([target])[0]

    def _autodiff(self, op: G.DerivOp) -> Any:
        """neonlike's Autodiff of op's dependent weighted by its error (0.0: a constant)."""
        from ...backends.autodiff import Autodiff
        frame = self.frame(op.dependent)
        dependent = self.value(op.dependent, frame)
        error = self.value(op.error, frame)
        if isinstance(dependent, float):           # a constant: its derivative is zero
            return 0.0
        # a value lacking some of its axes (broadcast ones) is spread over them, so that the
        # dependent and the error have one shape; Autodiff sums the gradient back
        full = _shape_in(op.dependent.axes, frame)
        if _shape(dependent) != full:
            dependent = build(E.ADD, self._filled(0.0, full), dependent)
        if not isinstance(error, float) and _shape(error) != full:
            error = build(E.ADD, self._filled(0.0, full), error)
        return Autodiff(dependent, self.be, next_error=error)
