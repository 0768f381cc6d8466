"""neon's layer parameter objects for the compound NN ops (ConvLayer, PoolLayer) and the checks
those ops share on every device: shapes only, no device library.

Layouts are neon's, batch innermost: input (C, D, H, W, N), filters (C, T, R, S, K), output
(K, M, P, Q, N); layers hand the same memory over as 2-D (features, N) buffers.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..compound import output_dim
from ..memo import Memo
from ..ops import Op

ALGOS = ("direct", "im2col")
CONV_OPS = ("fprop", "bprop", "update")


def _sizes(axes: tuple) -> tuple:
    """Output sizes along axes of (size, window, pad, stride, dilation, what), and the reason
    the window does not fit where one is below 1 (else None). neon builds such layers (its tests
    make them and read dimO first); running one raises with the reason (check_layer)."""
    sizes, unfit = [], None
    for X, S, pad, stride, dil, what in axes:
        try:
            sizes.append(output_dim(X, S, pad, stride, dil, what))
        except ValueError as e:
            if min(X, S, stride, dil) < 1 or pad < 0:
                raise
            unfit = unfit or str(e)
            sizes.append((X + 2 * pad - (dil * (S - 1) + 1)) // stride + 1)
    return tuple(sizes), unfit


FILTER_LAYOUTS = ("CTRSK", "KCTRS")


class ConvLayer:
    """neon's ConvLayer: the shapes of one convolution, passed to fprop/bprop/update_conv.

    `algo` maps 'fprop', 'bprop', 'update' to 'direct', 'im2col' or None (None: timed on first
    use, see NNOpsMixin); `set_algo(name)` forces all three. `filter_layout` is neon's 'CTRSK'
    (filters F and their gradient U (C, T, R, S, K)) or 'KCTRS' (K, C, T, R, S), the layout of
    PyTorch's and SINGA's weights, taken by the kernels without a transposed copy.
    """

    def __init__(self, dtype: Any, N: int, C: int, K: int, D: int = 1, H: int = 1, W: int = 1,
                 T: int = 1, R: int = 1, S: int = 1, pad_d: int = 0, pad_h: int = 0, pad_w: int = 0,
                 str_d: int = 1, str_h: int = 1, str_w: int = 1,
                 dil_d: int = 1, dil_h: int = 1, dil_w: int = 1,
                 filter_layout: str = "CTRSK") -> None:
        if min(N, C, K) < 1:
            raise ValueError(f"conv_layer: N, C and K must be >= 1, got N={N}, C={C}, K={K}")
        if filter_layout not in FILTER_LAYOUTS:
            raise ValueError(f"conv_layer: filter_layout must be one of {FILTER_LAYOUTS}, got "
                             f"{filter_layout!r}")
        self.filter_layout = filter_layout
        self.dtype = np.dtype(dtype)
        self.N, self.C, self.K = N, C, K
        self.D, self.H, self.W = D, H, W
        self.T, self.R, self.S = T, R, S
        (self.M, self.P, self.Q), self.unfit = _sizes(
            ((D, T, pad_d, str_d, dil_d, "conv_layer (depth)"),
             (H, R, pad_h, str_h, dil_h, "conv_layer (height)"),
             (W, S, pad_w, str_w, dil_w, "conv_layer (width)")))
        M, P, Q = self.M, self.P, self.Q
        self.NCK, self.DHW, self.TRS, self.MPQ = (N, C, K), (D, H, W), (T, R, S), (M, P, Q)
        self.padding = (pad_d, pad_h, pad_w)
        self.strides = (str_d, str_h, str_w)
        self.dilation = (dil_d, dil_h, dil_w)
        self.dimI, self.dimF, self.dimO = (C, D, H, W, N), (C, T, R, S, K), (K, M, P, Q, N)
        self.dimS = (K, 1)
        self.dimI2 = (C * D * H * W, N)
        self.CTRS = C * T * R * S          # rows of the columns (im2col)
        self.dimF2 = (self.CTRS, K)
        if filter_layout == "KCTRS":
            self.dimF, self.dimF2 = (K, C, T, R, S), (K, C * T * R * S)
        self.dimO2 = (K * M * P * Q, N)
        self.sizeI, self.sizeF, self.sizeO = (math.prod(d) for d in
                                              (self.dimI, self.dimF, self.dimO))
        self.nOut = K * M * P * Q
        # what the kernels take: padding, strides, dilation as one int tuple
        self.geometry = self.padding + self.strides + self.dilation
        self.key = (self.dtype.str, self.dimI, self.dimF, self.geometry, filter_layout)
        self.algo: dict[str, str | None] = dict.fromkeys(CONV_OPS)

    def set_algo(self, name: str | None) -> None:
        """Force 'direct' or 'im2col' for fprop, bprop and update (None: time both on first use)."""
        if name is not None and name not in ALGOS:
            raise ValueError(f"conv algo must be one of {ALGOS} or None, got {name!r}")
        self.algo = dict.fromkeys(CONV_OPS, name)

    def __repr__(self) -> str:
        return (f"ConvLayer(N={self.N}, C={self.C}, K={self.K}, DHW={self.DHW}, TRS={self.TRS}, "
                f"MPQ={self.MPQ}, pad={self.padding}, str={self.strides}, dil={self.dilation})")


class PoolLayer:
    """neon's PoolLayer: the shapes of one pooling op over (J, T, R, S) windows; J > 1 pools
    across channels too (K = output channels)."""

    def __init__(self, dtype: Any, op: str, N: int, C: int, D: int = 1, H: int = 1, W: int = 1,
                 J: int = 1, T: int = 1, R: int = 1, S: int = 1,
                 pad_c: int = 0, pad_d: int = 0, pad_h: int = 0, pad_w: int = 0,
                 str_c: int | None = None, str_d: int | None = None, str_h: int | None = None,
                 str_w: int | None = None) -> None:
        if op not in ("max", "avg", "l2"):
            raise ValueError(f"pool_layer: op must be 'max', 'avg' or 'l2', got {op!r}")
        strides = tuple(w if s is None else s for s, w in
                        zip((str_c, str_d, str_h, str_w), (J, T, R, S)))
        for name, pad, win in (("pad_c", pad_c, J), ("pad_d", pad_d, T), ("pad_h", pad_h, R),
                               ("pad_w", pad_w, S)):
            if pad >= win:
                raise ValueError(f"pool_layer: {name}={pad} must be smaller than the window "
                                 f"({win}) so that no window lies wholly in the padding")
        self.dtype = np.dtype(dtype)
        self.op = op
        self.N, self.C = N, C
        self.D, self.H, self.W = D, H, W
        self.J, self.T, self.R, self.S = J, T, R, S
        (self.K, self.M, self.P, self.Q), self.unfit = _sizes(
            ((C, J, pad_c, strides[0], 1, "pool_layer (channels)"),
             (D, T, pad_d, strides[1], 1, "pool_layer (depth)"),
             (H, R, pad_h, strides[2], 1, "pool_layer (height)"),
             (W, S, pad_w, strides[3], 1, "pool_layer (width)")))
        self.JTRS, self.DHW, self.MPQ = (J, T, R, S), (D, H, W), (self.M, self.P, self.Q)
        self.padding = (pad_c, pad_d, pad_h, pad_w)
        self.strides = strides
        self.overlap = any(s < w for s, w in zip(strides, self.JTRS))
        self.dimI = (C, D, H, W, N)
        self.dimO = (self.K, self.M, self.P, self.Q, N)
        self.dimF2 = None
        self.dimI2 = (C * D * H * W, N)
        self.dimO2 = (self.K * self.M * self.P * self.Q, N)
        self.sizeI, self.sizeO = math.prod(self.dimI), math.prod(self.dimO)
        self.nOut = self.K * self.M * self.P * self.Q
        # padding and strides of (channel, depth, height, width), as the kernels take them
        self.geometry = self.padding + strides

    def __repr__(self) -> str:
        return (f"PoolLayer(op={self.op!r}, N={self.N}, C={self.C}, DHW={self.DHW}, "
                f"JTRS={self.JTRS}, MPQ={self.MPQ}, pad={self.padding}, str={self.strides})")


def check_layer(op: str, layer: Any, cls: type) -> None:
    if not isinstance(layer, cls):
        raise TypeError(f"{op}: layer must be a {cls.__name__} (from be.{cls.__name__[:-5].lower()}"
                        f"_layer), got {type(layer).__name__}")
    if getattr(layer, "unfit", None):
        raise ValueError(f"{op}: {layer.unfit}")


def check_index_dtype(dt: np.dtype, window: int) -> None:
    if dt.kind in "iu" and np.iinfo(dt).max < window - 1:
        raise ValueError(f"fprop_pool: argmax dtype {dt} cannot hold window positions up to "
                         f"{window - 1}; use a wider integer type")


def work_dtype(dt: np.dtype) -> np.dtype:
    """The dtype an NN op computes a float operand in: float16 in float32 temporaries."""
    return np.dtype(np.float32) if dt == np.float16 else dt


def check_operand(op: str, name: str, shape: tuple, dtype: np.dtype, shapes: tuple,
                  numeric: bool, expected: np.dtype | None) -> np.dtype | None:
    """Check one operand of an NN op (its shape among `shapes`; a numeric dtype, or a float one
    equal to the other operands' `expected`); the float dtype the op's operands then share."""
    if shape not in shapes:
        want = " or ".join(str(s) for s in dict.fromkeys(shapes))
        raise ValueError(f"{op}: {name} has shape {shape}, expected {want}")
    if numeric:
        if dtype.kind not in "iuf":
            raise ValueError(f"{op}: {name} must have a numeric dtype, got {dtype}")
        return expected
    if expected is None:
        if dtype.kind != "f":
            raise ValueError(f"{op}: {name} must be float16, float32 or float64, got {dtype}")
        return dtype
    if dtype != expected:
        raise ValueError(f"{op}: {name} has dtype {dtype}, expected {expected} "
                         "like the other operands")
    return expected


class NNOpsBase:
    """What every device's NN ops share: the layer parameter objects and the two faces of a
    convolution's data pass; a device gives `_xprop_conv`, `update_conv` and the pooling ops."""

    conv_filter_layouts = FILTER_LAYOUTS    # conv_layer's filter_layout choices

    def conv_layer(self, dtype: Any, N: int, C: int, K: int, D: int = 1, H: int = 1, W: int = 1,
                   T: int = 1, R: int = 1, S: int = 1, pad_d: int = 0, pad_h: int = 0,
                   pad_w: int = 0, str_d: int = 1, str_h: int = 1, str_w: int = 1,
                   dil_d: int = 1, dil_h: int = 1, dil_w: int = 1,
                   filter_layout: str = "CTRSK") -> ConvLayer:
        """The shapes of a convolution (see ConvLayer); ValueError if the window does not fit.
        filter_layout 'KCTRS' (not neon's): filters and their gradients as (K, C, T, R, S)."""
        return ConvLayer(dtype, N, C, K, D, H, W, T, R, S, pad_d, pad_h, pad_w,
                         str_d, str_h, str_w, dil_d, dil_h, dil_w, filter_layout)

    def pool_layer(self, dtype: Any, op: str, N: int, C: int, D: int = 1, H: int = 1, W: int = 1,
                   J: int = 1, T: int = 1, R: int = 1, S: int = 1, pad_c: int = 0, pad_d: int = 0,
                   pad_h: int = 0, pad_w: int = 0, str_c: int | None = None,
                   str_d: int | None = None, str_h: int | None = None,
                   str_w: int | None = None) -> PoolLayer:
        """The shapes of a pooling op; strides default to the window (non-overlapping)."""
        return PoolLayer(dtype, op, N, C, D, H, W, J, T, R, S, pad_c, pad_d, pad_h, pad_w,
                         str_c, str_d, str_h, str_w)

    def fprop_conv(self, layer: ConvLayer, I: Any, F: Any, O: Any, X: Any = None,
                   bias: Any = None, bsum: Any = None, alpha: float = 1.0, beta: float = 0.0,
                   relu: bool = False, brelu: bool = False, slope: float = 0.0,
                   layer_op: Any = None) -> None:
        """O = alpha * conv(I, F) + beta * X (X defaults to O), then + bias (K, 1), then relu
        (negatives times `slope`) or brelu (times relu'(X)); bsum (K, 1) = sum of the result."""
        self._xprop_conv("fprop_conv", layer, I, F, O, X, bias, bsum, alpha, beta, relu, brelu,
                         slope)

    def bprop_conv(self, layer: ConvLayer, F: Any, E: Any, grad_I: Any, X: Any = None,
                   bias: Any = None, bsum: Any = None, alpha: float = 1.0, beta: float = 0.0,
                   relu: bool = False, brelu: bool = False, slope: float = 0.0,
                   layer_op: Any = None) -> None:
        """grad_I = alpha * (gradient w.r.t. the input of the conv, given output error E) +
        beta * X (X defaults to grad_I); bias/relu/brelu/bsum as in fprop_conv, over C."""
        self._xprop_conv("bprop_conv", layer, E, F, grad_I, X, bias, bsum, alpha, beta, relu,
                         brelu, slope)


_COMPOUND_LAYERS = Memo("nn.compound_layers", 256)   # (kind, dtype, shapes, attrs) -> layer


def compound_layer(kind: str, dtype: np.dtype, dimI: tuple, trs: tuple, K: int, d: dict) -> Any:
    """The ConvLayer ('conv') or PoolLayer ('pool') of a compound node (neonlike/compound.py)
    with attrs `d`, input shape dimI, window trs and K filters; made once per geometry."""
    g = d["geometry"]
    key = (kind, dtype.str, dimI, trs, K, g, d.get("pool_op"))
    layer = _COMPOUND_LAYERS.get(key)
    if layer is None:
        C, D, H, W, N = dimI
        if kind == "conv":
            layer = ConvLayer(dtype, N, C, K, D, H, W, *trs, *g)
        else:
            layer = PoolLayer(dtype, d["pool_op"], N, C, D, H, W, 1, *trs, 0, *g[:3],
                              1, *g[3:6])
        _COMPOUND_LAYERS.put(key, layer)
    return layer


# ---- compound nodes (neonlike/compound.py) on a device's own neon ops: dst and the operands
# are what those ops take (the CPU: host arrays wrapped as tensors; the GPU: its tensors), each
# with .shape and .dtype; empty(shape, dtype) makes a scratch one

def _conv(be: Any, d: dict, dst: Any, empty: Callable, I: Any, F: Any) -> None:
    layer = compound_layer("conv", dst.dtype, I.shape, F.shape[1:4], F.shape[4], d)
    be.fprop_conv(layer, I, F, dst)


def _conv_bprop(be: Any, d: dict, dst: Any, empty: Callable, E: Any, F: Any) -> None:
    layer = compound_layer("conv", dst.dtype, dst.shape, F.shape[1:4], F.shape[4], d)
    be.bprop_conv(layer, F, E, dst)


def _conv_update(be: Any, d: dict, dst: Any, empty: Callable, I: Any, E: Any) -> None:
    layer = compound_layer("conv", dst.dtype, I.shape, dst.shape[1:4], dst.shape[4], d)
    be.update_conv(layer, I, E, dst)


def _pool(be: Any, d: dict, dst: Any, empty: Callable, I: Any) -> None:
    layer = compound_layer("pool", dst.dtype, I.shape, d["window"], 0, d)
    be.fprop_pool(layer, I, dst)


def _pool_bprop(be: Any, d: dict, dst: Any, empty: Callable, I: Any, E: Any) -> None:
    """Max pooling's gradient finds each window's argmax again from the input (one more pooling
    pass: the node holds no argmax buffer between statements)."""
    layer = compound_layer("pool", dst.dtype, I.shape, d["window"], 0, d)
    argmax = None
    if layer.op == "max":
        argmax = empty(layer.dimO, np.int32)
        be.fprop_pool(layer, I, empty(layer.dimO, dst.dtype), argmax)
    be.bprop_pool(layer, E, dst, argmax)


_RUN: dict[Op, Callable[..., None]] = {
    Op.CONV: _conv, Op.CONV_BPROP: _conv_bprop, Op.CONV_UPDATE: _conv_update,
    Op.POOL: _pool, Op.POOL_BPROP: _pool_bprop,
}


def run_compound(be: Any, d: dict, dst: Any, operands: list, empty: Callable) -> None:
    """Compute compound node `d` (its op_dict) into `dst` from `operands` (all of dst's dtype)
    through be's fprop_conv, bprop_conv, update_conv, fprop_pool and bprop_pool."""
    _RUN[Op(d["op"])](be, d, dst, empty, *operands)
