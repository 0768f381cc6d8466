"""run(outputs, feeds): a WebDNN graph lowered onto neonlike's engine.

    y, = Convolution2d(None, ksize=3, pad=1, stride=1)(x, w)
    z = relu(y) * 2 + 1
    out = run(z, {x: x_array, w: w_array})       # a numpy array in z's order

Each variable becomes a Value: engine data (a Tensor, or an op-tree not run yet) and the axes
of its dimensions, outermost first. A Value's layout is whatever its producer found cheapest,
not the variable's order: orders are layouts, and values are reordered only where a kernel
needs another one. Choices:

* Elementwise ops, softmax and a matrix product build op-trees: a chain of them over the same
  axes is ONE engine statement (`out[:] = tree`, one fused kernel) when something reads it.
  An operand whose layout differs (another order, a broadcast) is stored and read through a
  permuted, broadcasting view of the stored tensor (no copy).
* Convolution and pooling run the engine's compound ops (`be.conv_layer` + `be.fprop_conv`,
  `be.pool_layer` + `be.fprop_pool`) in neon's layouts: I (C, D=1, H, W, N), F (C, T=1, R, S,
  K), O (K, M=1, P, Q, N). The input is handed over as a permuted view, which the op makes
  contiguous while reading it (the one transpose a kernel needs); the output stays in neon's
  layout (C2, P, Q, N) for what follows.
* Transpose moves no data. Reshape reads its input in the input variable's order: stored in
  that order first if its layout differs.
* Every size must be known by `run`: a Placeholder without a value is an error naming it. A
  graph input (a variable no operator computes) must be fed, with the variable's shape.
* Views are numpy views on the CPU backends ('cpu', 'mkl') and strided views of the same memory
  on the 'gpu' backend (`run(..., backend='gpu')`); the default backend is neon's current one
  (`NervanaObject.be`) where it is a CPU one, else `gen_backend('cpu')`, which (as always in
  neon) becomes the current one.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..tensor import Tensor
from .graph.operators import (Convolution2d, Elementwise, Linear, Pooling2D, Reshape, Softmax,
                              Transpose)
from .graph.placeholder import Placeholder
from .graph.variable import Variable, format_shape


class Value(NamedTuple):
    data: Any       # engine Tensor or op-tree, in engine shape (at least 2-D)
    axes: tuple     # the axis of each dimension, outermost first
    shape: tuple    # the size of each


def engine_shape(shape: Sequence[int]) -> tuple:
    """The engine's tensors are at least 2-D: () -> (1, 1), (n,) -> (n, 1)."""
    shape = tuple(shape)
    return shape + (1,) * (2 - len(shape)) if len(shape) < 2 else shape


def known_shape(v: Variable) -> tuple:
    for n in v.shape:
        if isinstance(n, Placeholder):
            raise ValueError(f"run: {v} has a size not known yet; set placeholder "
                             f"{', '.join(n.unresolved_labels())} first")
    return tuple(int(n) for n in v.shape)


def _host(t: Any) -> np.ndarray:
    """An engine tensor's values as a numpy array (the array itself on a CPU backend)."""
    return t._tensor if hasattr(t, "_tensor") else t.get()


def _dense(t: Any) -> bool:
    """Whether an engine tensor is C-ordered and contiguous."""
    return t._tensor.flags.c_contiguous if hasattr(t, "_tensor") else t.is_contiguous


def _on_host(backend: Any) -> bool:
    return getattr(backend, "backend_name", None) in HOST_BACKENDS


HOST_BACKENDS = ("cpu", "mkl")     # their tensors are numpy arrays: views cost nothing

EW: dict[str, Callable] = {
    "add": lambda be, a, b: a + b, "sub": lambda be, a, b: a - b,
    "mul": lambda be, a, b: a * b, "div": lambda be, a, b: a / b,
    "pow": lambda be, a, b: a ** b, "lt": lambda be, a, b: a < b,
    "le": lambda be, a, b: a <= b, "gt": lambda be, a, b: a > b,
    "ge": lambda be, a, b: a >= b, "maximum": lambda be, a, b: be.maximum(a, b),
    "minimum": lambda be, a, b: be.minimum(a, b), "neg": lambda be, a: -a,
    "abs": lambda be, a: abs(a), "relu": lambda be, a: be.maximum(a, 0),
    "exp": lambda be, a: be.exp(a), "log": lambda be, a: be.log(a),
    "sqrt": lambda be, a: be.sqrt(a), "tanh": lambda be, a: be.tanh(a),
    "sigmoid": lambda be, a: be.sig(a),
}


class Lowering:
    """One run of a graph: each variable's Value, computed once; `statements` counts the
    engine assignments made, `compound_ops` the conv / pool calls."""

    def __init__(self, backend: Any = None, dtype: Any = np.float32) -> None:
        if backend is None or isinstance(backend, str):
            from .. import NervanaObject
            from ..backends import gen_backend
            current = NervanaObject.be
            backend = current if backend is None and _on_host(current) \
                else gen_backend(backend or "cpu")
        self.be, self.dtype = backend, np.dtype(dtype)
        self.values: dict[Variable, Value] = {}
        self.statements = 0
        self.compound_ops = 0

    # ---- storage and views
    def store(self, value: Value) -> Any:
        """The value as an engine Tensor (a tree is assigned to a new tensor: one statement)."""
        if isinstance(value.data, Tensor):
            return value.data
        if not hasattr(value.data, "shape"):
            raise TypeError(f"run: expected an engine Tensor or op-tree from "
                            f"{type(self.be).__name__}, got {type(value.data).__name__}")
        out = self.be.empty(engine_shape(value.shape), dtype=self.dtype)
        out[:] = value.data
        self.statements += 1
        return out

    def view(self, value: Value, axes: Sequence[Any]) -> Any:
        """A view of the stored value with dimensions `axes` (None: a new size-1 dimension; an
        axis the value lacks broadcasts as size 1)."""
        t = self.store(value)
        present = [a for a in axes if a is not None and a in value.axes]
        shape = [value.shape[value.axes.index(a)] if a in present else 1 for a in axes]
        if not hasattr(t, "_tensor"):    # a device tensor: the same memory, strides permuted
            t = t.reshape(value.shape)
            strides = [t.strides[value.axes.index(a)] if a in present else 0 for a in axes]
            strides += [0] * (len(engine_shape(shape)) - len(shape))
            return t._derived(engine_shape(shape), 0, tuple(strides))
        host = t._tensor.reshape(value.shape)
        host = host.transpose([value.axes.index(a) for a in present])
        return t._derived(host.reshape(engine_shape(shape)))

    def in_layout(self, value: Value, axes: tuple) -> Any:
        """Value's data with dimensions `axes`, the data itself where the layout is that."""
        return value.data if value.axes == axes else self.view(value, axes)

    # ---- the graph
    def value(self, v: Variable) -> Value:
        if v not in self.values:
            op = v.output_from
            if op is None:
                raise ValueError(f"run: {v} is a graph input; feed it: run(outputs, "
                                 f"{{variable: array}})")
            lower = LOWERINGS.get(type(op)) or next(
                (f for cls, f in LOWERINGS.items() if isinstance(op, cls)), None)
            if lower is None:
                raise NotImplementedError(f"run: no lowering for {type(op).__name__}")
            for x, value in zip(op.outputs.values(), lower(self, op)):
                self.values[x] = value
        return self.values[v]

    def feed(self, feeds: dict) -> None:
        for v, array in feeds.items():
            if not isinstance(v, Variable):
                raise TypeError(f"run: feeds are keyed by Variable, got {type(v).__name__} {v!r}")
            array = np.asarray(array)
            shape = known_shape(v)
            if array.shape != shape:
                raise ValueError(f"run: {v} is fed an array of shape {format_shape(array.shape)}, "
                                 f"expected {format_shape(shape)}")
            t = self.be.array(array.reshape(engine_shape(shape)), dtype=self.dtype)
            self.values[v] = Value(t, v.order.axes, shape)

    def fetch(self, v: Variable) -> np.ndarray:
        value = self.value(v)
        host = _host(self.store(value)).reshape(value.shape)
        return np.array(host.transpose([value.axes.index(a) for a in v.order.axes]))


def _elementwise(lw: Lowering, op: Elementwise) -> list:
    y = op.outputs["y"]
    frame = y.order.axes
    for x in op.operands:          # the layout of a full operand costs it no view
        if isinstance(x, Variable) and x.ndim == y.ndim:
            frame = lw.value(x).axes
            break
    sizes = dict(zip(y.order.axes, known_shape(y)))
    shape = tuple(sizes[a] for a in frame)
    operands = [float(x) if not isinstance(x, Variable) else lw.in_layout(lw.value(x), frame)
                for x in op.operands]
    return [Value(EW[op.kind](lw.be, *operands), frame, shape)]


def _convolution(lw: Lowering, op: Convolution2d) -> list:
    x, w, y = op.inputs["x"], op.inputs["w"], op.outputs["y"]
    a = op._axes
    n, c, h, wd = (dict(zip(x.order.axes, known_shape(x)))[a[r]] for r in ("N", "C1", "H", "W"))
    k, r, s = (dict(zip(w.order.axes, known_shape(w)))[a[q]] for q in ("C2", "R", "S"))
    _, _, p, q = known_shape(y)
    # filters as (K, C, T, R, S) where the backend takes them so (the CPU's): weights held as
    # (C2, C1, R, S) are then passed as they lie, not copied into neon's (C, T, R, S, K)
    kctrs = "KCTRS" in getattr(lw.be, "conv_filter_layouts", ())
    layer = lw.be.conv_layer(lw.dtype, n, c, k, D=1, H=h, W=wd, T=1, R=r, S=s,
                             pad_h=op.pad[0], pad_w=op.pad[1], str_h=op.stride[0],
                             str_w=op.stride[1], dil_h=op.dilation_rate[0],
                             dil_w=op.dilation_rate[1],
                             **({"filter_layout": "KCTRS"} if kctrs else {}))
    inputs = lw.view(lw.value(x), (a["C1"], None, a["H"], a["W"], a["N"]))
    filters = lw.view(lw.value(w), (a["C2"], a["C1"], None, a["R"], a["S"]) if kctrs else
                      (a["C1"], None, a["R"], a["S"], a["C2"]))
    out = lw.be.empty((k, 1, p, q, n), dtype=lw.dtype)
    lw.be.fprop_conv(layer, inputs, filters, out)
    lw.compound_ops += 1
    _, _, ho, wo = y.order.axes
    return [Value(out.reshape(k, p, q, n), (a["C2"], ho, wo, a["N"]),
                  (k, p, q, n))]


def _pooling(lw: Lowering, op: Pooling2D) -> list:
    x, y = op.inputs["x"], op.outputs["y"]
    a = op._axes
    n, c, h, wd = (dict(zip(x.order.axes, known_shape(x)))[a[r]] for r in ("N", "C", "H", "W"))
    _, _, p, q = known_shape(y)
    layer = lw.be.pool_layer(lw.dtype, op.POOL, n, c, D=1, H=h, W=wd, J=1, T=1,
                             R=op.ksize[0], S=op.ksize[1], pad_h=op.pad[0], pad_w=op.pad[1],
                             str_h=op.stride[0], str_w=op.stride[1])
    inputs = lw.view(lw.value(x), (a["C"], None, a["H"], a["W"], a["N"]))
    out = lw.be.empty((c, 1, p, q, n), dtype=lw.dtype)
    lw.be.fprop_pool(layer, inputs, out)
    lw.compound_ops += 1
    _, _, ho, wo = y.order.axes
    return [Value(out.reshape(c, p, q, n), (a["C"], ho, wo, a["N"]),
                  (c, p, q, n))]


def _linear(lw: Lowering, op: Linear) -> list:
    x, w = op.inputs["x"], op.inputs["w"]
    c1, c2 = op._axes["C1"], op._axes["C2"]
    xv = lw.value(x)
    kept = tuple(ax for ax in xv.axes if ax != c1)
    sizes = dict(zip(xv.axes, xv.shape))
    rows, k, m = int(np.prod([sizes[ax] for ax in kept])), sizes[c1], \
        dict(zip(w.order.axes, known_shape(w)))[c2]
    left = lw.view(xv, kept + (c1,))
    if not _dense(left):      # GEMM reads it as (rows, k): lay it out so
        dense = lw.be.empty(left.shape, dtype=lw.dtype)
        dense[:] = left
        lw.statements += 1
        left = dense
    left = left.reshape(rows, k)
    product = lw.be.dot(left, lw.view(lw.value(w), (c1, c2)))
    if len(kept) == 1:
        return [Value(product, kept + (c2,), (rows, m))]
    out = lw.be.empty((rows, m), dtype=lw.dtype)
    out[:] = product
    lw.statements += 1
    shape = tuple(sizes[ax] for ax in kept) + (m,)
    return [Value(out.reshape(engine_shape(shape)), kept + (c2,), shape)]


def _softmax(lw: Lowering, op: Softmax) -> list:
    xv = lw.value(op.inputs["x"])
    k = xv.axes.index(op._axes["C"])
    shifted = xv.data - lw.be.max(xv.data, axis=k)
    e = lw.be.exp(shifted)
    return [Value(e / lw.be.sum(e, axis=k), xv.axes, xv.shape)]


def _transpose(lw: Lowering, op: Transpose) -> list:
    return [lw.value(op.inputs["x"])]


def _reshape(lw: Lowering, op: Reshape) -> list:
    x, y = op.inputs["x"], op.outputs["y"]
    xv = lw.value(x)
    t = lw.store(xv) if xv.axes == x.order.axes else None
    if t is None or not _dense(t):
        t = lw.be.empty(engine_shape(known_shape(x)), dtype=lw.dtype)
        t[:] = lw.in_layout(xv, x.order.axes)
        lw.statements += 1
    shape = known_shape(y)
    return [Value(t.reshape(engine_shape(shape)), y.order.axes, shape)]


LOWERINGS: dict[type, Callable[[Lowering, Any], list]] = {
    Elementwise: _elementwise, Convolution2d: _convolution, Pooling2D: _pooling,
    Linear: _linear, Softmax: _softmax, Transpose: _transpose, Reshape: _reshape,
}


def run(outputs: Any, feeds: dict, backend: Any = None, dtype: Any = np.float32) -> Any:
    """The values of `outputs` (a Variable or a list of them) as numpy arrays in their orders,
    given `feeds` ({input Variable: array}); `backend` a backend or its name ('cpu', 'mkl',
    'gpu')."""
    single = isinstance(outputs, Variable)
    outs = [outputs] if single else list(outputs)
    lw = Lowering(backend, dtype)
    lw.feed(feeds)
    arrays = [lw.fetch(v) for v in outs]
    return arrays[0] if single else arrays


__all__ = ["Lowering", "Value", "run"]
