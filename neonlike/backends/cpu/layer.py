"""Convolution and pooling parameter objects (neon's ConvLayer, PoolLayer) and their numpy paths.

Layouts are neon's, batch innermost: input (C, D, H, W, N), filters (C, T, R, S, K), output
(K, M, P, Q, N); layers hand the same memory over as 2-D (features, N) buffers. The numpy
functions here are the path taken where numba is missing (im2col + GEMM, window loops for
pooling); nn.py drives them and conv_kernels.py holds the Numba kernels.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...compound import output_dim

ALGOS = ("direct", "im2col")
CONV_OPS = ("fprop", "bprop", "update")


def _sizes(axes: tuple) -> tuple:
    """Output sizes along axes of (size, window, pad, stride, dilation, what), and the reason
    the window does not fit where one is below 1 (else None). neon builds such layers (its tests
    make them and read dimO first); running one raises with the reason (nn._check_layer)."""
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


# ---------------------------------------------------------------------------------------------
# numpy paths (used where numba is missing)
# ---------------------------------------------------------------------------------------------

def _tap_slices(layer: ConvLayer, t: int, r: int, s: int) -> tuple:
    """Slices of the padded input that tap (t, r, s) reads for every output position."""
    (M, P, Q), (sd, sh, sw), (dd, dh, dw) = layer.MPQ, layer.strides, layer.dilation
    return (slice(None), slice(t * dd, t * dd + sd * (M - 1) + 1, sd),
            slice(r * dh, r * dh + sh * (P - 1) + 1, sh),
            slice(s * dw, s * dw + sw * (Q - 1) + 1, sw))


def _padded_shape(layer: ConvLayer) -> tuple:
    (C, D, H, W, N), (pd, ph, pw) = layer.dimI, layer.padding
    return (C, D + 2 * pd, H + 2 * ph, W + 2 * pw, N)


def _interior(layer: ConvLayer) -> tuple:
    (_, D, H, W, _), (pd, ph, pw) = layer.dimI, layer.padding
    return (slice(None), slice(pd, pd + D), slice(ph, ph + H), slice(pw, pw + W))


def im2col_numpy(layer: ConvLayer, I: np.ndarray) -> np.ndarray:
    """(C*T*R*S, M*P*Q*N) columns of the (C, D, H, W, N) input, zero where a tap is in padding."""
    padded = np.zeros(_padded_shape(layer), I.dtype)
    padded[_interior(layer)] = I
    T, R, S = layer.TRS
    col = np.empty((layer.C, T, R, S) + layer.MPQ + (layer.N,), I.dtype)
    for t in range(T):
        for r in range(R):
            for s in range(S):
                col[:, t, r, s] = padded[_tap_slices(layer, t, r, s)]
    return col.reshape(layer.CTRS, -1)


def col2im_numpy(layer: ConvLayer, col: np.ndarray) -> np.ndarray:
    """The (C, D, H, W, N) sum of the columns back onto the input positions they came from."""
    padded = np.zeros(_padded_shape(layer), col.dtype)
    T, R, S = layer.TRS
    col = col.reshape((layer.C, T, R, S) + layer.MPQ + (layer.N,))
    for t in range(T):
        for r in range(R):
            for s in range(S):
                padded[_tap_slices(layer, t, r, s)] += col[:, t, r, s]
    return padded[_interior(layer)]


def _pool_windows(layer: PoolLayer):
    """(flat index, slices of the padded input) for each window offset (j, t, r, s)."""
    J, T, R, S = layer.JTRS
    outs = (layer.K,) + layer.MPQ
    for index, taps in enumerate(np.ndindex(J, T, R, S)):
        yield index, tuple(slice(tap, tap + stride * (out - 1) + 1, stride)
                           for tap, stride, out in zip(taps, layer.strides, outs))


def _pool_counts(layer: PoolLayer) -> np.ndarray:
    """(K, M, P, Q, 1) number of window positions inside the input."""
    total = np.ones((), np.int64)
    for X, win, pad, stride, out in zip((layer.C,) + layer.DHW, layer.JTRS, layer.padding,
                                        layer.strides, (layer.K,) + layer.MPQ):
        start = np.arange(out) * stride - pad
        total = np.multiply.outer(total, np.minimum(start + win, X) - np.maximum(start, 0))
    return total[..., None]


def _padded(layer: PoolLayer, fill: float, dtype: np.dtype) -> tuple:
    """A (C, D, H, W, N) array padded on all four window axes, and the slices of its interior."""
    dims = (layer.C,) + layer.DHW
    inside = tuple(slice(p, p + x) for x, p in zip(dims, layer.padding))
    shape = tuple(x + 2 * p for x, p in zip(dims, layer.padding)) + (layer.N,)
    return np.full(shape, fill, dtype), inside


def fprop_pool_numpy(layer: PoolLayer, I: np.ndarray, argmax: np.ndarray | None) -> np.ndarray:
    """Max (first max on ties, a NaN before all, padding excluded) or average over the valid
    positions."""
    fill = -np.inf if layer.op == "max" else 0.0
    padded, inside = _padded(layer, fill, np.float64 if I.dtype == np.float64 else np.float32)
    padded[inside] = I
    out = np.full(layer.dimO, fill, padded.dtype)
    best = np.zeros(layer.dimO, np.int64)
    for index, sl in _pool_windows(layer):
        window = padded[sl]
        if layer.op == "max":
            better = (window > out) | (np.isnan(window) & ~np.isnan(out))  # NaN wins
            out[better] = window[better]
            best[better] = index
        elif layer.op == "avg":
            out += window
        else:
            out += window * window
    if layer.op == "avg":
        out /= _pool_counts(layer)
    elif layer.op == "l2":
        np.sqrt(out, out=out)
    if argmax is not None:
        argmax[...] = best
    return out


def bprop_pool_numpy(layer: PoolLayer, E: np.ndarray, argmax: np.ndarray | None) -> np.ndarray:
    """The (C, D, H, W, N) input gradient: errors routed to their argmax, or spread over counts."""
    padded, inside = _padded(layer, 0.0, E.dtype)
    if layer.op == "avg":
        E = E / _pool_counts(layer)
    for index, sl in _pool_windows(layer):
        padded[sl] += E if layer.op == "avg" else np.where(argmax == index, E, 0)
    return padded[inside]
