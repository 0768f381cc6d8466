"""neon's compound NN ops for the CPU backend: convolution, pooling, batch norm.

NervanaCPU inherits NNOpsMixin. Layouts are neon's: input (C, D, H, W, N), filters
(C, T, R, S, K), output (K, M, P, Q, N), batch innermost; each op also takes the 2-D views
layers use (dimI2, dimF2, dimO2: (features, N), features in C order). Results are written into
the given output tensors.

Convolution has two paths, both exact in float64 (fastmath only allows fused multiply-add, and
reassociation of the batch dot product in the direct update kernel):
  'direct'  Numba kernels looping over the taps, vectorised over the batch (conv_kernels.py);
  'im2col'  a column matrix of the input (in blocks of output rows, CHUNK_BYTES each) and one
            GEMM per block through neonlike.backends.cpu.gemm (MKL); col2im for bprop.
A layer's `algo[op]` forces one; NEONLIKE_CONV_ALGO=direct|im2col forces one everywhere.
Otherwise each (op, layer shape, dtype) is timed once with both paths on scratch outputs, and
the faster is remembered on the backend (`conv_choices`, cleared by `clear_conv_choices()`).
Without numba every op runs on numpy (im2col + GEMM, window loops for pooling).

Pooling: argmax (dimO or dimO2, any integer dtype that holds J*T*R*S - 1, or a float dtype)
receives ((j*T + t)*R + r)*S + s, the first maximum's position in the full (J, T, R, S) window
(padding included in the numbering, never chosen; J > 1 pools across channels); average pooling
divides by the number of window positions inside the input (padding does not count), as neon's
CPU did.
"""
from __future__ import annotations

import importlib.util
import math
import os
import time
from typing import Any, Callable

import numpy as np

from ...memo import Memo
from .gemm import gemm
from ..nn_layers import (NNOpsBase, check_index_dtype, check_layer, check_operand,
                         work_dtype)
from .layer import (ALGOS, ConvLayer, PoolLayer, bprop_pool_numpy,
                    col2im_numpy, fprop_pool_numpy, im2col_numpy)

ALGO_ENV = "NEONLIKE_CONV_ALGO"
CHUNK_BYTES = 2 << 20    # im2col block size: see benchmarks/README.md (bench_nn_ops.py)
MAX_CHOICES = 1024       # remembered (op, layer shape) -> algo entries per backend
CHOICE_RUNS = 3          # timed runs per path when a conv path is picked (the best counts)

_NUMBA: list = []


def _kernels() -> Any:
    """conv_kernels (numba) or None where numba is missing; imported on first use."""
    if not _NUMBA:
        if importlib.util.find_spec("numba") is None:
            _NUMBA.append(None)
        else:
            from . import conv_kernels
            _NUMBA.append(conv_kernels)
    return _NUMBA[0]


class _Arrays:
    """Host arrays of an op's tensors, checked and reshaped to the op's layout; outputs that
    cannot be written in place (non-contiguous, float16) get a temp copied back by `commit`."""

    def __init__(self, op: str) -> None:
        self.op = op
        self.dtype: np.dtype | None = None
        self.pending: list = []

    def _host(self, t: Any, name: str, shapes: tuple, numeric: bool = False) -> np.ndarray:
        host = getattr(t, "_host", None)
        if host is None:
            raise TypeError(f"{self.op}: {name} must be a CPU Tensor, got {type(t).__name__}")
        a = host()
        self.dtype = check_operand(self.op, name, a.shape, a.dtype, shapes, numeric,
                                   self.dtype)
        return a

    def read(self, t: Any, name: str, shape: tuple, alt: tuple | None = None) -> np.ndarray:
        a = self._host(t, name, (shape,) if alt is None else (shape, alt))
        return np.ascontiguousarray(a, dtype=work_dtype(a.dtype)).reshape(shape)

    def write(self, t: Any, name: str, shape: tuple, alt: tuple | None = None,
              numeric: bool = False) -> np.ndarray:
        a = self._host(t, name, (shape,) if alt is None else (shape, alt), numeric)
        if a.flags.c_contiguous and (numeric or a.dtype == work_dtype(a.dtype)):
            return a.reshape(shape)
        work = np.ascontiguousarray(a, dtype=a.dtype if numeric else work_dtype(a.dtype))
        self.pending.append((a, work))
        return work.reshape(shape)

    def commit(self) -> None:
        for a, work in self.pending:
            a[...] = work.reshape(a.shape)


def _same(a: Any, b: Any) -> bool:
    return a is b or (a is not None and b is not None and a._host() is b._host())


class NNOpsMixin(NNOpsBase):
    """Convolution and pooling with neon's names, signatures and layouts (conv_layer,
    pool_layer, fprop_conv and bprop_conv: NNOpsBase)."""

    # ------------------------------------------------------------------ convolution
    def update_conv(self, layer: ConvLayer, I: Any, E: Any, U: Any, alpha: float = 1.0,
                    beta: float = 0.0, grad_bias: Any = None, layer_op: Any = None) -> None:
        """U = alpha * dLoss/dF + beta * U; grad_bias (K, 1) = sum of E over all but K."""
        check_layer("update_conv", layer, ConvLayer)
        arrays = _Arrays("update_conv")
        i = arrays.read(I, "I", layer.dimI, layer.dimI2)
        e = arrays.read(E, "E", layer.dimO, layer.dimO2)
        u = arrays.write(U, "U", layer.dimF, layer.dimF2)
        gb = None if grad_bias is None else arrays.write(grad_bias, "grad_bias", (layer.K, 1))
        run = _CONV["update"]
        algo = self._conv_algo(layer, "update", lambda a, out: run[a](layer, i, e, out, None,
                                                                      1.0, 0.0), u)
        run[algo](layer, i, e, u, None, float(alpha), float(beta))
        if gb is not None:
            np.sum(e.reshape(layer.K, -1), axis=1, keepdims=True, out=gb)
        arrays.commit()

    def _xprop_conv(self, op: str, layer: ConvLayer, I: Any, F: Any, O: Any, X: Any, bias: Any,
                    bsum: Any, alpha: float, beta: float, relu: bool, brelu: bool,
                    slope: float) -> None:
        check_layer(op, layer, ConvLayer)
        fprop = op == "fprop_conv"
        din, dout = (layer.dimI, layer.dimO) if fprop else (layer.dimO, layer.dimI)
        din2, dout2 = (layer.dimI2, layer.dimO2) if fprop else (layer.dimO2, layer.dimI2)
        channels = dout[0]
        arrays = _Arrays(op)
        src = arrays.read(I, "I" if fprop else "E", din, din2)
        f = arrays.read(F, "F", layer.dimF, layer.dimF2)
        out = arrays.write(O, "O" if fprop else "grad_I", dout, dout2)
        if relu and brelu:
            raise ValueError(f"{op}: relu and brelu exclude each other")
        x = out if X is None or _same(X, O) else arrays.read(X, "X", dout, dout2)
        mask = x.copy() if brelu and x is out else x
        b = None if bias is None else arrays.read(bias, "bias", (channels, 1))
        s = None if bsum is None else arrays.write(bsum, "bsum", (channels, 1))
        alpha, beta = float(alpha), float(beta)
        key = "fprop" if fprop else "bprop"
        run = _CONV[key]
        algo = self._conv_algo(layer, key, lambda a, o: run[a](layer, src, f, o, o, 1.0, 0.0),
                               out)
        run[algo](layer, src, f, out, x, alpha, beta)
        if b is not None or relu or brelu or s is not None:
            _epilogue(out.reshape(channels, -1), mask.reshape(channels, -1), b,
                      1 if relu else 2 if brelu else 0, float(slope), s)
        arrays.commit()

    # ------------------------------------------------------------------ picking a conv path
    @property
    def conv_choices(self) -> dict:
        """(op, layer key) -> 'direct' or 'im2col', as timed on first use."""
        choices = self.__dict__.get("_conv_choices")
        if choices is None:
            choices = self.__dict__["_conv_choices"] = Memo(
                f"{self.backend_name}.conv_choices", MAX_CHOICES)
        return choices

    def clear_conv_choices(self) -> None:
        """Forget the timed conv path choices (each layer shape is timed again on next use) and
        free the im2col column buffers."""
        self.conv_choices.clear()
        _WORKSPACE.clear()

    def _conv_algo(self, layer: ConvLayer, op: str, trial: Callable, out: np.ndarray) -> str:
        """The forced, remembered or (timed now, on scratch outputs) faster path for op."""
        if _kernels() is None:
            if layer.algo[op] == "direct" or os.environ.get(ALGO_ENV) == "direct":
                raise ImportError("the 'direct' conv path needs numba (pip install numba); "
                                  "without it conv runs through im2col + GEMM")
            return "im2col"
        forced = layer.algo[op] or os.environ.get(ALGO_ENV) or None
        if forced is not None:
            if forced not in ALGOS:
                raise ValueError(f"{ALGO_ENV} / layer.algo must be one of {ALGOS}, got {forced!r}")
            return forced
        choices = self.conv_choices
        key = (op, layer.key)
        algo = choices.get(key)
        if algo is None:
            scratch = np.empty_like(out)
            best = math.inf
            for name in ALGOS:
                trial(name, scratch)  # compiles (or loads) the kernels, warms the caches
                # NOTE: the best of a few runs: one run on a busy machine can pick a path
                # several times slower
                for _ in range(CHOICE_RUNS):
                    start = time.perf_counter()
                    trial(name, scratch)
                    took = time.perf_counter() - start
                    if took < best:
                        best, algo = took, name
            choices.put(key, algo)
        return algo

    # ------------------------------------------------------------------ pooling
    def fprop_pool(self, layer: PoolLayer, I: Any, O: Any, argmax: Any = None,
                   beta: float = 0.0) -> None:
        """O = pool(I) + beta * O; for max pooling, argmax receives each max's window position."""
        check_layer("fprop_pool", layer, PoolLayer)
        arrays = _Arrays("fprop_pool")
        i = arrays.read(I, "I", layer.dimI, layer.dimI2)
        out = arrays.write(O, "O", layer.dimO, layer.dimO2)
        am = None
        if argmax is not None and layer.op == "max":
            am = arrays.write(argmax, "argmax", layer.dimO, layer.dimO2, numeric=True)
            check_index_dtype(am.dtype, math.prod(layer.JTRS))
        kernels, rows = _kernels(), _pool_rows(layer)
        if kernels is None or layer.op == "l2":
            result = fprop_pool_numpy(layer, i, am)
            out[...] = result + beta * out if beta else result
        elif rows is not None:
            planes, din, dout = rows
            am3 = _empty3(np.int32) if am is None else am.reshape(dout)
            args = (i.reshape(din), out.reshape(dout), am3, layer.op == "max", float(beta))
            if planes:
                kernels.fprop_pool_planes(*args, *layer.JTRS[2:], layer.geometry)
            else:
                kernels.fprop_pool_lanes(*args, layer.N, *layer.JTRS[2:], layer.geometry)
        else:
            kernels.fprop_pool(i, out, _empty5(np.int32) if am is None else am,
                               layer.op == "max", float(beta), *layer.JTRS, layer.geometry)
        arrays.commit()

    def bprop_pool(self, layer: PoolLayer, I: Any, O: Any, argmax: Any = None,
                   alpha: float = 1.0, beta: float = 0.0) -> None:
        """O (dimI) = alpha * (error I (dimO) routed back) + beta * O: max pooling sends each
        error to its argmax, average pooling spreads it evenly over the window's valid positions."""
        check_layer("bprop_pool", layer, PoolLayer)
        if layer.op == "l2":
            raise NotImplementedError("bprop_pool: l2 pooling has no bprop (as in neon)")
        arrays = _Arrays("bprop_pool")
        e = arrays.read(I, "I (the error)", layer.dimO, layer.dimO2)
        out = arrays.write(O, "O (the delta)", layer.dimI, layer.dimI2)
        am = None
        if layer.op == "max":
            if argmax is None:
                raise ValueError("bprop_pool: max pooling needs the argmax tensor that "
                                 "fprop_pool filled")
            am = arrays._host(argmax, "argmax", (layer.dimO, layer.dimO2), numeric=True)
            am = np.ascontiguousarray(am).reshape(layer.dimO)
        kernels, rows = _kernels(), _pool_rows(layer)
        if kernels is None:
            result = alpha * bprop_pool_numpy(layer, e, am)
            out[...] = result + beta * out if beta else result
        elif rows is not None:
            planes, din, dout = rows
            am3 = _empty3(np.int32) if am is None else am.reshape(dout)
            args = (e.reshape(dout), out.reshape(din), am3, layer.op == "max", float(alpha),
                    float(beta))
            if planes:
                kernels.bprop_pool_planes(*args, *layer.JTRS[2:], layer.geometry)
            else:
                kernels.bprop_pool_lanes(*args, layer.N, *layer.JTRS[2:], layer.geometry)
        else:
            kernels.bprop_pool(e, out, _empty5(np.int32) if am is None else am,
                               layer.op == "max", float(alpha), float(beta), *layer.JTRS,
                               layer.geometry)
        arrays.commit()

    # ------------------------------------------------------------------ batch norm's kernels
    def batch_moments(self, x: Any, mean: Any, var: Any, inv: Any, eps: float,
                      running: tuple | None = None, keep: float = 1.0,
                      take: tuple = (0.0, 0.0)) -> None:
        """Backend.batch_moments as one kernel (float64 sums, in place), where every operand is a
        CPU tensor of x's float32/64 dtype that a flat view reaches (x a C-ordered 3-D one);
        else the op-trees."""
        ops = _flat_operands(x, (mean, var, inv) + (tuple(running) if running else ()))
        kernels = _kernels()
        if ops is None or kernels is None:
            return super().batch_moments(x, mean, var, inv, eps, running, keep, take)
        a, (m, v, i, *r) = ops
        none = np.zeros(0, a.dtype)
        kernels.batch_moments(a, m, v, i, float(eps), r[0] if r else none, r[1] if r else none,
                              float(keep), float(take[0]), float(take[1]))

    def batch_grad_sums(self, dy: Any, x: Any, mean: Any, inv: Any, dgamma: Any,
                        dbeta: Any) -> None:
        """Backend.batch_grad_sums as one kernel, on the terms of batch_moments'."""
        ops = _flat_operands(x, (mean, inv, dgamma, dbeta))
        g = _flat_operands(dy, ())
        kernels = _kernels()
        if ops is None or g is None or kernels is None or g[0].shape != ops[0].shape or \
                g[0].dtype != ops[0].dtype:
            return super().batch_grad_sums(dy, x, mean, inv, dgamma, dbeta)
        kernels.batch_grad_sums(g[0], ops[0], *ops[1])

def _flat_operands(x: Any, stats: tuple) -> tuple | None:
    """(x's array, flat views of the stats' arrays) where x is a C-ordered 3-D float32/64 CPU
    tensor and every stat a CPU tensor of its dtype whose array has a flat view of C elements;
    None otherwise (the caller takes the op-trees)."""
    host = getattr(x, "_host", None)
    a = host() if host is not None else None
    if a is None or a.ndim != 3 or not a.flags.c_contiguous or a.dtype.kind != "f" or \
            a.dtype.itemsize < 4:
        return None
    flat = []
    for t in stats:
        host = getattr(t, "_host", None)
        s = host() if host is not None else None
        if s is None or s.dtype != a.dtype or s.size != a.shape[1] or \
                not s.flags.c_contiguous:
            return None
        flat.append(s.reshape(-1))
    return a, flat


# ---------------------------------------------------------------------------------------------
# empty operands and pooling's row layouts
# ---------------------------------------------------------------------------------------------

def _empty5(dtype: Any) -> np.ndarray:
    return np.zeros((0, 1, 1, 1, 1), dtype)


def _empty3(dtype: Any) -> np.ndarray:
    return np.zeros((0, 1, 1), dtype)


def _pool_rows(layer: PoolLayer) -> tuple | None:
    """How the CPU kernels take a pooling layer over windows of one channel and depth (J = T = 1,
    D = 1, every channel pooled): (planes, input rows, output rows), a batch of one as its (C, H, W) planes (planes
    True: an NCHW tensor's images taken as N*C channels, as the SINGA front end pools), any other
    batch as lane rows (C, H, W*N) and (C, P, Q*N); None: the general kernels."""
    if layer.JTRS[:2] != (1, 1) or layer.D != 1 or layer.K != layer.C:
        return None      # (K != C: a channel stride over single-channel windows skips channels)
    C, N, (_, H, W), (_, P, Q) = layer.C, layer.N, layer.DHW, layer.MPQ
    return N == 1, (C, H, W * N), (C, P, Q * N)


# ---------------------------------------------------------------------------------------------
# the two conv paths: fn(layer, a, b, out, x, alpha, beta) for fprop (I, F, O), bprop (E, F, G)
# and update (I, E, U; x unused), all arrays in the 5-D layouts
# ---------------------------------------------------------------------------------------------

def _is_dot(layer: ConvLayer) -> bool:
    """1x1x1 filters, stride 1, no padding: the input is its own column matrix."""
    return layer.TRS == (1, 1, 1) and layer.padding == (0, 0, 0) and layer.strides == (1, 1, 1)


_WORKSPACE = Memo("cpu.im2col_workspace", 8)   # dtype -> column buffer


def _blocks(layer: ConvLayer, dtype: np.dtype):
    """(pos0, pos1, column block (CTRS, (pos1 - pos0) * N), the output columns it makes) over
    blocks of output positions pos = (m*P + p)*Q + q, each about CHUNK_BYTES of columns."""
    N, rows_f, positions = layer.N, layer.CTRS, layer.M * layer.P * layer.Q
    block = max(1, min(positions, CHUNK_BYTES // (rows_f * N * dtype.itemsize)))
    size = rows_f * block * N
    buf = _WORKSPACE.get(dtype)
    if buf is None or buf.size < size:
        buf = _WORKSPACE.put(dtype, np.empty(size, dtype))
    for pos0 in range(0, positions, block):
        pos1 = min(positions, pos0 + block)
        cols = (pos1 - pos0) * N
        yield pos0, pos1, buf[:rows_f * cols].reshape(rows_f, cols), slice(pos0 * N, pos1 * N)


def _fprop_im2col(layer: ConvLayer, I: np.ndarray, F: np.ndarray, O: np.ndarray,
                  X: np.ndarray, alpha: float, beta: float) -> None:
    K = layer.K
    F2t, O2 = _filter_rows(layer, F), O.reshape(K, -1)
    if beta != 0.0 and X is not O:
        np.copyto(O, X)
    kernels = _kernels()
    if _is_dot(layer):
        gemm(F2t, I.reshape(layer.C, -1), O2, alpha, beta)
    elif kernels is None:
        gemm(F2t, im2col_numpy(layer, I), O2, alpha, beta)
    else:
        T, R, S = layer.TRS
        for pos0, pos1, col, cols in _blocks(layer, I.dtype):
            kernels.im2col(I, col, pos0, pos1, T, R, S, *layer.MPQ, layer.geometry)
            gemm(F2t, col, O2[:, cols], alpha, beta)


def _bprop_im2col(layer: ConvLayer, E: np.ndarray, F: np.ndarray, G: np.ndarray,
                  X: np.ndarray, alpha: float, beta: float) -> None:
    K = layer.K
    F2, E2 = _filter_rows(layer, F).T, E.reshape(K, -1)
    kernels = _kernels()
    if _is_dot(layer):
        if beta != 0.0 and X is not G:
            np.copyto(G, X)
        gemm(F2, E2, G.reshape(layer.C, -1), alpha, beta)
        return
    if beta == 0.0:
        G.fill(0)
    else:
        np.multiply(X, beta, out=G)
    if kernels is None:
        G += col2im_numpy(layer, gemm(F2, E2, np.empty((F2.shape[0], E2.shape[1]), G.dtype),
                                      alpha))
        return
    T, R, S = layer.TRS
    for pos0, pos1, col, cols in _blocks(layer, G.dtype):
        gemm(F2, E2[:, cols], col, alpha)
        kernels.col2im(col, G, pos0, pos1, T, R, S, *layer.MPQ, layer.geometry)


def _update_im2col(layer: ConvLayer, I: np.ndarray, E: np.ndarray, U: np.ndarray,
                   X: Any, alpha: float, beta: float) -> None:
    K = layer.K
    E2 = E.reshape(K, -1)
    kernels = _kernels()
    if layer.filter_layout == "KCTRS":     # U (K, CTRS) = E2 @ col.T
        def acc(col, e2, b):
            gemm(e2, col.T, U.reshape(K, -1), alpha, b)
    else:                                  # U (CTRS, K) = col @ E2.T
        def acc(col, e2, b):
            gemm(col, e2.T, U.reshape(-1, K), alpha, b)
    if _is_dot(layer):
        acc(I.reshape(layer.C, -1), E2, beta)
    elif kernels is None:
        acc(im2col_numpy(layer, I), E2, beta)
    else:
        T, R, S = layer.TRS
        for pos0, pos1, col, cols in _blocks(layer, I.dtype):
            kernels.im2col(I, col, pos0, pos1, T, R, S, *layer.MPQ, layer.geometry)
            acc(col, E2[:, cols], beta if pos0 == 0 else 1.0)


def _ctrsk(layer: ConvLayer, F: np.ndarray) -> np.ndarray:
    """Filters (or their gradient) as neon's 5-D (C, T, R, S, K): F itself, or a view of a
    'KCTRS' layer's (K, C, T, R, S) array."""
    F = F.reshape(layer.dimF)
    return F.transpose(1, 2, 3, 4, 0) if layer.filter_layout == "KCTRS" else F


def _filter_rows(layer: ConvLayer, F: np.ndarray) -> np.ndarray:
    """Filters as (K, CTRS) rows: a 'KCTRS' layer's array reshaped, neon's (CTRS, K) transposed
    (a view either way)."""
    if layer.filter_layout == "KCTRS":
        return F.reshape(layer.K, -1)
    return F.reshape(-1, layer.K).T


def _row_taps(dims_in: tuple, dims_out: tuple, taps: tuple, pads: tuple, strides: tuple,
              dilation: tuple) -> tuple:
    """What conv_rows / update_rows read (conv_kernels.py) for an input (C, D, H, W, N), output
    (M, P, Q) and width stride 1. A tap (c, t, r, s) of output row mp = m*P + p would read lane
    0 at flat input index rowoff[mp] + tapoff[tap]. Rows fall into classes by which of their
    taps' input rows lie inside the input (the interior, and one class per border case);
    cls[mp] is a row's. Per class: lo / hi[k, tap], the lanes j = q*N + n a tap reaches inside
    the input (lo = hi = 0 where its row lies outside), the lanes cut where any tap's start or
    end (seg[k, g] = (j0, j1), (0, 0) past the last) and the taps that reach all of a segment,
    in order (sel[k, g, :cnt[k, g]]). Remembered per geometry (read-only); its size grows with
    the taps and the classes, not with the rows."""
    key = (dims_in, dims_out, taps, pads, strides, dilation)
    hit = _ROW_TAPS.get(key)
    if hit is not None:
        return hit
    C, D, H, W, N = dims_in
    (M, P, Q), (T, R, S), (pd, ph, pw) = dims_out, taps, pads
    (sd, sh), (dd, dh, dw) = strides, dilation
    WN = W * N
    c, t, r, s_ = (a.ravel() for a in np.meshgrid(np.arange(C), np.arange(T), np.arange(R),
                                                  np.arange(S), indexing="ij"))
    shift = (s_ * dw - pw) * N
    tapoff = (((c * D + t * dd) * H + r * dh) * WN + shift).astype(np.int64)
    mp = np.arange(M * P)
    d0, h0 = mp // P * sd - pd, mp % P * sh - ph
    rowoff = (d0 * H * WN + h0 * WN).astype(np.int64)
    d = d0[:, None] + np.arange(T) * dd               # (rows, T), (rows, R): in the input?
    h = h0[:, None] + np.arange(R) * dh
    inside = np.concatenate(((d >= 0) & (d < D), (h >= 0) & (h < H)), axis=1)
    patterns, cls = np.unique(inside, axis=0, return_inverse=True)
    lo_s, hi_s = np.maximum(0, -shift), np.minimum(Q * N, WN - shift)
    lo = np.zeros((len(patterns), len(c)), np.int64)
    hi = np.zeros_like(lo)
    classes = []
    for k, pattern in enumerate(patterns):
        valid = pattern[t] & pattern[T + r] & (lo_s < hi_s)
        lo[k, valid], hi[k, valid] = lo_s[valid], hi_s[valid]
        edges = np.unique(np.concatenate((lo[k, valid], hi[k, valid])))
        classes.append([(j0, j1, np.flatnonzero((lo[k] <= j0) & (hi[k] >= j1) & valid))
                        for j0, j1 in zip(edges[:-1], edges[1:])])
    seg = np.zeros((len(patterns), max(1, max(map(len, classes))), 2), np.int64)
    sel = np.zeros(seg.shape[:2] + (len(c),), np.int64)
    cnt = np.zeros(seg.shape[:2], np.int64)
    for k, segments in enumerate(classes):
        for g, (j0, j1, on) in enumerate(segments):
            seg[k, g], sel[k, g, :len(on)], cnt[k, g] = (j0, j1), on, len(on)
    out = (rowoff, cls.ravel().astype(np.int64), tapoff, lo, hi, seg, sel, cnt)
    for a in out:
        a.flags.writeable = False
    return _ROW_TAPS.put(key, out)


_ROW_TAPS = Memo("cpu.conv_row_taps", 256)


def _fprop_direct(layer: ConvLayer, I: np.ndarray, F: np.ndarray, O: np.ndarray,
                  X: np.ndarray, alpha: float, beta: float) -> None:
    kernels = _kernels()
    if layer.strides[2] != 1:
        kernels.fprop_direct(I, _ctrsk(layer, F), O, X, alpha, beta, layer.geometry)
        return
    rowoff, cls, tapoff, _, _, seg, sel, cnt = _row_taps(
        layer.dimI, layer.MPQ, layer.TRS, layer.padding, layer.strides[:2], layer.dilation)
    K, M, P, Q, N = layer.dimO
    rows = (K, M * P, Q * N)
    kernels.conv_rows(I.reshape(-1), np.ascontiguousarray(_filter_rows(layer, F)), rowoff, cls,
                      tapoff, seg, sel, cnt, O.reshape(rows), X.reshape(rows), alpha, beta)


def _bprop_direct(layer: ConvLayer, E: np.ndarray, F: np.ndarray, G: np.ndarray,
                  X: np.ndarray, alpha: float, beta: float) -> None:
    """Stride 1: a forward conv of the error with the flipped filters, padded by
    dil*(window-1) - pad (a negative pad crops); otherwise the gathering kernel."""
    kernels = _kernels()
    if layer.strides != (1, 1, 1):
        kernels.bprop_direct(_ctrsk(layer, F), E, G, X, alpha, beta, layer.geometry)
        return
    pads = tuple(d * (t - 1) - p for d, t, p in zip(layer.dilation, layer.TRS, layer.padding))
    C, D, H, W, N = layer.dimI
    Fc = _ctrsk(layer, F)
    Fb = np.ascontiguousarray(Fc[:, ::-1, ::-1, ::-1, :].transpose(0, 4, 1, 2, 3)).reshape(C, -1)
    rowoff, cls, tapoff, _, _, seg, sel, cnt = _row_taps(
        layer.dimO, layer.DHW, layer.TRS, pads, (1, 1), layer.dilation)
    rows = (C, D * H, W * N)
    kernels.conv_rows(E.reshape(-1), Fb, rowoff, cls, tapoff, seg, sel, cnt, G.reshape(rows),
                      X.reshape(rows), alpha, beta)


def _update_direct(layer: ConvLayer, I: np.ndarray, E: np.ndarray, U: np.ndarray,
                   X: Any, alpha: float, beta: float) -> None:
    kernels = _kernels()
    if layer.strides[2] != 1:
        kernels.update_direct(I, E, _ctrsk(layer, U), alpha, beta, layer.geometry)
        return
    rowoff, cls, tapoff, lo, hi, seg, _, _ = _row_taps(
        layer.dimI, layer.MPQ, layer.TRS, layer.padding, layer.strides[:2], layer.dilation)
    K, M, P, Q, N = layer.dimO
    kernels.update_rows(I.reshape(-1), E.reshape(K, M * P, Q * N), rowoff, cls, tapoff, lo, hi,
                        seg, _filter_rows(layer, U).T, alpha, beta, np.zeros(1, I.dtype)[0])


_CONV = {
    "fprop": {"direct": _fprop_direct, "im2col": _fprop_im2col},
    "bprop": {"direct": _bprop_direct, "im2col": _bprop_im2col},
    "update": {"direct": _update_direct, "im2col": _update_im2col},
}


def _epilogue(O: np.ndarray, X: np.ndarray, bias: np.ndarray | None, mode: int, slope: float,
              bsum: np.ndarray | None) -> None:
    """Bias, relu (mode 1) or bprop relu (mode 2), batch sum, per channel row of O (K, L)."""
    kernels = _kernels()
    if kernels is not None:
        empty = np.zeros((0, 1), O.dtype)
        kernels.epilogue(O, X, empty if bias is None else bias, mode, slope,
                         empty if bsum is None else bsum)
        return
    if bias is not None:
        O += bias
    if mode == 1:
        O[...] = np.maximum(O, 0) + slope * np.minimum(O, 0)
    elif mode == 2:
        O *= (X > 0) + slope * (X < 0)
    if bsum is not None:
        np.sum(O, axis=1, keepdims=True, out=bsum)
