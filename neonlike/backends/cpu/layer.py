"""The numpy paths of convolution and pooling (ConvLayer, PoolLayer: ../nn_layers.py).

Layouts are neon's, batch innermost: input (C, D, H, W, N), filters (C, T, R, S, K), output
(K, M, P, Q, N); layers hand the same memory over as 2-D (features, N) buffers. The numpy
functions here are the path taken where numba is missing (im2col + GEMM, window loops for
pooling); nn.py drives them and conv_kernels.py holds the Numba kernels.
"""
from __future__ import annotations

import numpy as np

from ..nn_layers import (ALGOS, CONV_OPS, FILTER_LAYOUTS, ConvLayer,  # noqa: F401
                         PoolLayer)


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
