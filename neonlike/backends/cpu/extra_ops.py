"""neon's remaining CPU backend ops: batched_dot, the log2 histogram buffers, ROI pooling.

    be.batched_dot(W, I, O)          # O[x] = W @ I[x]        (fprop: W (K, C), I (X, C, N))
    be.batched_dot(W.T, E, B)        # B[x] = W.T @ E[x]      (bprop)
    be.batched_dot(E, I.T, U)        # U = sum_x E[x] @ I[x].T (update: a 2-D output)
    h = t.hist("tag")                # be.set_hist_buffers(nbins, offset); be.dump_hist_data()
    be.roipooling_fprop(I, rois, O, argmax, roi_count, C, H, W, PH, PW, spatial_scale)
    be.copy_transpose(a, out, axes=(1, 2, 3, 0))   # a rotation of the axes: a tiled kernel

Products run as MKL GEMMs (backends/cpu/gemm.py), the histogram, ROI pooling and the transposes
that rotate a tensor's axes (NCHW <-> CHWN, a matrix's .T) as Numba kernels (extra_kernels.py).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...memo import Memo
from .gemm import batched_gemm, gemm

HIST_MAX = 4096          # histograms the buffer holds between dump_hist_data calls (neon's)
HIST_CHUNK = 1 << 16     # elements per task of the histogram kernel
TRANSPOSE_PARALLEL = 1 << 20   # elements from which copy_transpose's kernel runs on every core
SGD_PARALLEL = 1 << 18         # elements from which sgd_momentum's kernel runs on every core
_SGD_ENTRIES = Memo("cpu.sgd_entries", 8)   # (dtype char, parallel) -> (kernel, entry point)


def _kernels() -> Any:
    """extra_kernels, imported (numba with it) on first use, not with the backend."""
    if not _KERNELS:
        from . import extra_kernels
        _KERNELS.append(extra_kernels)
    return _KERNELS[0]


_KERNELS: list = []


def _program() -> Any:
    """The program module (which imports this one, so it is looked up, not imported, here)."""
    if not _PROGRAM:
        from . import program
        _PROGRAM.append(program)
    return _PROGRAM[0]


_PROGRAM: list = []


def _host(t: Any, op: str, name: str) -> np.ndarray:
    host = getattr(t, "_host", None)
    if host is None:
        raise TypeError(f"{op}: {name} must be a CPU Tensor, got {type(t).__name__}")
    return host()


def _as4(t: Any, op: str, name: str, shape: tuple, out: bool = False) -> np.ndarray:
    """The tensor's array as `shape` (same size); outputs must be contiguous (written in place)."""
    a = _host(t, op, name)
    if a.size != int(np.prod(shape)):
        raise ValueError(f"{op}: {name} has shape {a.shape} ({a.size} elements), expected "
                         f"{shape} ({int(np.prod(shape))} elements)")
    if out and not a.flags.c_contiguous:
        raise ValueError(f"{op}: {name} must be contiguous (it is written in place)")
    return a.reshape(shape)


def _rotation(x: np.ndarray, y: np.ndarray, axes: Any) -> int | None:
    """r where `axes` rotates x's axes left by r (r, ..., ndim-1, 0, ..., r-1) and x and y are
    distinct, plain C-ordered float arrays of one dtype and y has the rotated shape: the
    transposition is then one of a matrix (the product of x's first r axes by the rest). None
    otherwise."""
    d = x.ndim
    axes = tuple(reversed(range(d))) if axes is None else tuple(axes)
    if d < 2 or len(axes) != d or not 0 < axes[0] < d or \
            axes != tuple((axes[0] + k) % d for k in range(d)):
        return None
    if x.dtype != y.dtype or x.dtype.kind != "f" or x.dtype.itemsize < 4 or \
            not (x.flags.c_contiguous and y.flags.c_contiguous and y.flags.writeable) or \
            y.shape != tuple(x.shape[k] for k in axes) or np.may_share_memory(x, y):
        return None
    return axes[0]


def transpose_into(x: np.ndarray, y: np.ndarray, axes: Any) -> bool:
    """y[...] = x.transpose(axes) by the tiled kernel, where `axes` rotate x's axes and x, y are
    distinct plain C-ordered float arrays of one dtype (the engine's TRANSPOSE stages, numpy's
    copy of a transposed view ran 2-6x slower); False, nothing written, otherwise."""
    r = _rotation(x, y, axes) if y.size else None
    if r is None:
        return False
    k = _kernels()
    if not k.HAVE_NUMBA:
        return False
    rows = math.prod(x.shape[:r])
    fn = k.transpose2d_parallel if x.size >= TRANSPOSE_PARALLEL else k.transpose2d
    fn(x.reshape(rows, -1), y.reshape(-1, rows))
    return True


def _sgd_operands(param: Any, velocity: Any, grad: Any) -> tuple | None:
    """Flat views of the arrays of three CPU tensors of one float32/64 dtype and size, each
    C-ordered, aligned and writable, no two sharing memory; None otherwise. The views are the
    engine's per-tensor memo (program._host_info), so a step's call makes no new ones."""
    kind = type(param)
    if getattr(kind, "_host", None) is None or type(velocity) is not kind or \
            type(grad) is not kind:
        return None
    _host_info = _program()._host_info
    p, rp, fp, plain_p = _host_info(param)
    v, rv, fv, plain_v = _host_info(velocity)
    g, rg, fg, plain_g = _host_info(grad)
    dt, n = p.dtype, p.size
    if not (plain_p and plain_v and plain_g) or dt.kind != "f" or dt.itemsize < 4 or \
            v.dtype != dt or g.dtype != dt or v.size != n or g.size != n:
        return None
    for (ra, a), (rb, b) in (((rp, fp), (rv, fv)), ((rp, fp), (rg, fg)), ((rv, fv), (rg, fg))):
        if ra == rb and np.may_share_memory(a, b):   # distinct roots share no memory
            return None
    return fp, fv, fg


class CPUExtraOpsMixin:
    """batched_dot, histogram buffers, ROI pooling and copy_transpose with neon's names and
    signatures."""

    def copy_transpose(self, a: Any, out: Any, axes: Any = None, repeat: int = 1) -> Any:
        """out[:] = a transposed (the axes reversed, or permuted by `axes`). A rotation of a
        tensor's axes into a separate C-ordered tensor (NCHW <-> CHWN, a matrix's .T) runs as
        a tiled transpose kernel; anything else as the engine's TRANSPOSE statement."""
        if type(a) is not type(out) or not hasattr(a, "_tensor") or \
                not transpose_into(a._tensor, out._tensor, axes):
            # (without numba the kernel would run as Python)
            return super().copy_transpose(a, out, axes, repeat)
        return out

    def sgd_momentum(self, param: Any, velocity: Any, grad: Any, lr: float, momentum: float,
                     dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                     first: bool = False) -> None:
        """Backend.sgd_momentum as one kernel where param, velocity and grad are C-ordered CPU
        tensors of one float32/64 dtype and size that share no memory (a statement each for the
        velocity and the parameter cost ~4 us, this kernel ~1 us); else the op-trees."""
        flat = _sgd_operands(param, velocity, grad)
        k = _kernels() if flat is not None else None
        if k is None or not k.HAVE_NUMBA:
            return super().sgd_momentum(param, velocity, grad, lr, momentum, dampening,
                                        weight_decay, nesterov, first)
        par = flat[0].size >= SGD_PARALLEL
        args = (*flat, float(lr), float(momentum), 1.0 - float(dampening), float(weight_decay),
                bool(nesterov), bool(first))
        fn = k.sgd_momentum_parallel if par else k.sgd_momentum
        key = (flat[0].dtype.char, par)
        known = _SGD_ENTRIES.get(key)
        if known is not None and known[0] is fn:
            known[1](*args)
            return
        fn(*args)
        entry = _program()._entry_point(fn, args)   # later calls skip numba's typing of 9 args
        if entry is not None:
            _SGD_ENTRIES.put(key, (fn, entry))

    # ---------------------------------------------------------------- batched products
    def batched_dot(self, A: Any, B: Any, C: Any, alpha: float = 1.0, beta: float = 0.0,
                    relu: bool = False) -> Any:
        """A 3-D C (X, m, n): C[x] = alpha * A[x] @ B[x] + beta * C[x], a 2-D A or B used by
        every x (fprop W.I, bprop W.T.E); a 2-D C: the sum over x (update E.I.T). relu applies
        before the beta term (neon's)."""
        if relu and beta != 0.0:
            product = self.empty(C.shape, dtype=C.dtype)
            self.batched_dot(A, B, product, alpha, 0.0, True)
            C[:] = product + C * float(beta)
            return C
        a, b, c = (_host(t, "batched_dot", n) for t, n in ((A, "A"), (B, "B"), (C, "C")))
        if not (a.ndim == 3 or b.ndim == 3) or a.ndim not in (2, 3) or b.ndim not in (2, 3) \
                or c.ndim not in (2, 3):
            raise ValueError(f"batched_dot: expected a 3-D A or B and a 2-D or 3-D C, got A "
                             f"{a.shape}, B {b.shape}, C {c.shape}")
        X = (a if a.ndim == 3 else b).shape[0]
        if (a.ndim == 3 and a.shape[0] != X) or (b.ndim == 3 and b.shape[0] != X) \
                or (c.ndim == 3 and c.shape[0] != X):
            raise ValueError(f"batched_dot: batch sizes differ: A {a.shape}, B {b.shape}, "
                             f"C {c.shape}")
        if c.ndim == 3:
            batched_gemm(a, b, c, alpha, beta)
        elif a.ndim == 3 and b.ndim == 3:
            # sum_x A[x] @ B[x] is one product over the joined inner axis (x, k)
            M, Kx = a.shape[1], a.shape[0] * a.shape[2]
            gemm(np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(M, Kx),
                 np.ascontiguousarray(b).reshape(Kx, b.shape[2]), c, alpha, beta)
        elif a.ndim == 3:
            gemm(a.sum(axis=0, dtype=a.dtype), b, c, alpha, beta)
        else:
            gemm(a, b.sum(axis=0, dtype=b.dtype), c, alpha, beta)
        if relu:
            C[:] = self.maximum(C, 0.0)
        return C

    # ---------------------------------------------------------------- histograms
    def set_hist_buffers(self, hist_bins: int, hist_offset: int) -> None:
        """Bins of Tensor.hist: hist_bins bins of rint(log2|x|) from hist_offset (the first
        takes everything below, zeros included); a change starts a new, empty buffer."""
        if int(hist_bins) != hist_bins or hist_bins < 1:
            raise ValueError(f"set_hist_buffers: hist_bins must be a positive int, "
                             f"got {hist_bins!r}")
        if (hist_bins, hist_offset) != (self.hist_bins, self.hist_offset) \
                or getattr(self, "hist_buf", None) is None:
            self.hist_bins, self.hist_offset = int(hist_bins), int(hist_offset)
            self.hist_max = HIST_MAX
            self._new_hist_buffer()

    def _new_hist_buffer(self) -> None:
        self.hist_buf = self.zeros((HIST_MAX, self.hist_bins), dtype=np.int32)
        self.hist_idx = 0
        self.hist_map: dict = {}

    def dump_hist_data(self) -> tuple:
        """(buffer (hist_max, hist_bins) int32, {tag: row}) of the histograms taken since the
        last dump; the backend starts a new buffer."""
        if getattr(self, "hist_buf", None) is None:
            self.set_hist_buffers(self.hist_bins, self.hist_offset)
        data, tags = self.hist_buf, self.hist_map
        self._new_hist_buffer()
        return data, tags

    def _hist_tensor(self, tag: str) -> Any:
        """The next row of the histogram buffer, recorded under `tag`."""
        if getattr(self, "hist_buf", None) is None:
            self.set_hist_buffers(self.hist_bins, self.hist_offset)
        if self.hist_idx >= HIST_MAX:
            raise RuntimeError(f"hist: the histogram buffer holds {HIST_MAX} histograms; call "
                               "be.dump_hist_data() to collect them and start a new one")
        self.hist_map[tag] = self.hist_idx
        row = self.hist_buf[self.hist_idx]
        self.hist_idx += 1
        return row

    def _hist_of(self, tensor: Any, tag: str) -> Any:
        """Tensor.hist: the log2 histogram of the tensor's values in the next buffer row."""
        x = _host(tensor, "hist", "the tensor").reshape(-1)
        if x.dtype == np.float16:
            x = x.astype(np.float32)
        nbins, offset = self.hist_bins, self.hist_offset
        kernels = _kernels()
        if kernels.HAVE_NUMBA:
            counts = np.zeros((max(1, min(256, x.size // HIST_CHUNK)), nbins), np.int64)
            kernels.log2_histogram(np.ascontiguousarray(x), nbins, offset, counts)
            hist = counts.sum(axis=0)
        else:
            with np.errstate(divide="ignore"):
                lg = np.rint(np.log2(np.abs(x.astype(np.float32))))
            lg = lg[~(np.isnan(lg) | (lg > offset + nbins))]
            hist = np.bincount(np.clip(lg - offset, 0, nbins - 1).astype(np.int64),
                               minlength=nbins)
        row = self._hist_tensor(tag)
        row._host()[...] = hist.reshape(row.shape)
        return row

    # ---------------------------------------------------------------- ROI pooling
    def _roi_args(self, op: str, I: Any, rois: Any, roi_count: int, C: int, H: int,
                  W: int) -> tuple:
        r = _host(rois, op, "rois")
        if r.ndim != 2 or r.shape[1] != 5 or r.shape[0] != roi_count:
            raise ValueError(f"{op}: rois must be ({roi_count}, 5) rows (image, x1, y1, x2, y2), "
                             f"got shape {r.shape}")
        size = _host(I, op, "the feature map" if op.endswith("fprop") else "O").size
        if size % (C * H * W):
            raise ValueError(f"{op}: the feature maps hold {size} elements, not a multiple of "
                             f"C*H*W = {C * H * W}")
        N = size // (C * H * W)
        r = np.ascontiguousarray(r, dtype=np.float64)
        if roi_count and (r[:, 0].min() < 0 or r[:, 0].max() >= N):
            raise ValueError(f"{op}: roi image indices must lie in [0, {N}), got "
                             f"{r[:, 0].min():g} to {r[:, 0].max():g}")
        return r, N

    def roipooling_fprop(self, I: Any, rois: Any, O: Any, argmax: Any, roi_count: int, C: int,
                         H: int, W: int, pooled_height: int, pooled_width: int,
                         spatial_scale: float) -> None:
        """O (C, PH, PW, rois) = the max of each of the PH x PW bins of each roi over the
        feature maps I (C, H, W, N); argmax the h*W + w of each max (-1 for an empty bin)."""
        op = "roipooling_fprop"
        r, N = self._roi_args(op, I, rois, roi_count, C, H, W)
        pooled = (C, pooled_height, pooled_width, roi_count)
        fm = _as4(I, op, "I", (C, H, W, N))
        out = _as4(O, op, "O", pooled, out=True)
        am = _as4(argmax, op, "argmax", pooled, out=True)
        _kernels().roipool_fprop(np.ascontiguousarray(fm), r, out, am, float(spatial_scale))

    def roipooling_bprop(self, I: Any, rois: Any, O: Any, argmax: Any, roi_count: int, C: int,
                         H: int, W: int, pooled_height: int, pooled_width: int,
                         spatial_scale: float) -> None:
        """O (C, H, W, N) = the pooled errors I (C, PH, PW, rois) routed back to their argmax."""
        op = "roipooling_bprop"
        r, N = self._roi_args(op, O, rois, roi_count, C, H, W)
        pooled = (C, pooled_height, pooled_width, roi_count)
        err = _as4(I, op, "I", pooled)
        am = _as4(argmax, op, "argmax", pooled)
        out = _as4(O, op, "O", (C, H, W, N), out=True)
        _kernels().roipool_bprop(np.ascontiguousarray(err, dtype=out.dtype), r, out,
                        np.ascontiguousarray(am))
