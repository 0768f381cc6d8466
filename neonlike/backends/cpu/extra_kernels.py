"""Numba kernels of extra_ops.py: neon's log2 histogram, ROI pooling and copy_transpose's tiles.

Without numba the same functions run as plain Python (`njit` and `prange` fall back to the
identity and `range`): correct, and slow; extra_ops.py takes a numpy path for the histogram.
ROI pooling layouts are neon's: feature maps (C, H, W, N), rois (R, 5) rows (image, x1, y1,
x2, y2) in input pixels, pooled output and argmax (C, PH, PW, R).
"""
from __future__ import annotations

import numpy as np

try:
    from numba import njit, prange
    HAVE_NUMBA = True
except ImportError:         # the plain-Python fallback
    HAVE_NUMBA = False
    prange = range

    def njit(*args, **kwargs):
        return (lambda fn: fn) if not args or not callable(args[0]) else args[0]


@njit(parallel=True, cache=True)
def log2_histogram(x, nbins, offset, counts):
    """counts[chunk, b] += number of x in bin b of its chunk: b = rint(log2|x|) - offset in
    float32, clipped to [0, nbins); zeros (log2 = -inf) land in bin 0, values above
    offset + nbins and NaNs in none (np.histogram's edges, the last bin closed)."""
    chunks = counts.shape[0]
    n = x.shape[0]
    step = (n + chunks - 1) // chunks
    top = offset + nbins
    for chunk in prange(chunks):
        row = counts[chunk]
        for i in range(chunk * step, min(n, (chunk + 1) * step)):
            v = abs(np.float32(x[i]))
            if v == 0.0:
                row[0] += 1
                continue
            # log2 in float64 then rounded to float32: the correctly rounded float32 log2
            lg = np.rint(np.float32(np.log2(np.float64(v))))
            if lg != lg or lg > top:
                continue
            b = lg - offset
            if b < 0:
                b = 0
            elif b > nbins - 1:
                b = nbins - 1
            row[int(b)] += 1


@njit(cache=True)
def _roi_box(roi, scale, PH, PW):
    """(image, x0, y0, bin height, bin width) of one roi row, the corners rounded half to even
    (Python's round, as neon)."""
    x0 = int(np.rint(roi[1] * scale))
    y0 = int(np.rint(roi[2] * scale))
    x1 = int(np.rint(roi[3] * scale))
    y1 = int(np.rint(roi[4] * scale))
    height = max(y1 - y0 + 1, 1)
    width = max(x1 - x0 + 1, 1)
    return int(roi[0]), x0, y0, height / PH, width / PW


@njit(cache=True)
def _roi_bin(i, size, start, X):
    """Input range [lo, hi) of pooled position i: floor(i*size) to ceil((i+1)*size) from start,
    clipped to [0, X)."""
    lo = int(np.floor(i * size)) + start
    hi = int(np.ceil((i + 1) * size)) + start
    return min(max(lo, 0), X), min(max(hi, 0), X)


@njit(parallel=True, cache=True)
def roipool_fprop(fm, rois, O, argmax, scale):
    """O = the max of each bin of each roi (0 for an empty bin), argmax = its h*W + w in the
    feature map (first on ties, a NaN before all; -1 for an empty bin)."""
    C, H, W, _ = fm.shape
    _, PH, PW, R = O.shape
    for cb in prange(C * R):
        c, b = cb // R, cb % R
        n, x0, y0, bin_h, bin_w = _roi_box(rois[b], scale, PH, PW)
        for ph in range(PH):
            h0, h1 = _roi_bin(ph, bin_h, y0, H)
            for pw in range(PW):
                w0, w1 = _roi_bin(pw, bin_w, x0, W)
                best = 0.0
                where = -1
                if h1 > h0 and w1 > w0:
                    best = fm[c, h0, w0, n]
                    where = h0 * W + w0
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            v = fm[c, h, w, n]
                            if v > best or (v != v and best == best):
                                best = v
                                where = h * W + w
                O[c, ph, pw, b] = best
                argmax[c, ph, pw, b] = where


@njit(parallel=True, cache=True)
def roipool_bprop(E, rois, G, argmax):
    """G = each pooled error added at its argmax in the image of its roi; one channel per task
    (rois of one image may overlap)."""
    C, H, W, _ = G.shape
    _, PH, PW, R = E.shape
    for c in prange(C):
        G[c] = 0.0
        for b in range(R):
            n = int(rois[b, 0])
            for ph in range(PH):
                for pw in range(PW):
                    where = argmax[c, ph, pw, b]
                    if where >= 0:
                        G[c, where // W, where % W, n] += E[c, ph, pw, b]


@njit(cache=True, inline="always", boundscheck=False)
def _rows8(a, o, i0):
    for j in range(a.shape[1]):
        for ii in range(8):
            o[j, i0 + ii] = a[i0 + ii, j]


@njit(cache=True, inline="always", boundscheck=False)
def _rows16(a, o, i0):
    for j in range(a.shape[1]):
        for ii in range(16):
            o[j, i0 + ii] = a[i0 + ii, j]


@njit(cache=True, inline="always", boundscheck=False)
def _rows(a, o, i0, i1):
    """o[:, i0:i1] = a[i0:i1].T: 16 or 8 rows of a read in step (each sequentially) while each
    row of o gets that many contiguous elements, the rest one by one."""
    wide = a.shape[1] > 64
    while i1 - i0 >= 16 and not wide:
        _rows16(a, o, i0)
        i0 += 16
    while i1 - i0 >= 8:
        _rows8(a, o, i0)
        i0 += 8
    for i in range(i0, i1):
        for j in range(a.shape[1]):
            o[j, i] = a[i, j]


@njit(cache=True, boundscheck=False)
def transpose2d(a, o):
    """o = a.T for C-contiguous a (n, m) and o (m, n), in tiles of rows: 8 where a's rows are
    long, 16 where they are short (at most 64), whose rows of o then fill whole cache lines.
    numpy's copy of the transposed view ran 2-6x slower (float32, us: 32x1024 56 against 9.3,
    1024x32 20 against 10.3, 784x128 61 against 28)."""
    _rows(a, o, 0, a.shape[0])


@njit(parallel=True, cache=True, boundscheck=False)
def transpose2d_parallel(a, o):
    """transpose2d with blocks of 64 rows of a shared among the threads (each writes its own
    columns of o)."""
    n = a.shape[0]
    for b in prange((n + 63) // 64):
        _rows(a, o, b * 64, min(b * 64 + 64, n))


@njit(cache=True, boundscheck=False)
def _sgd_block(p, v, g, lr, momentum, damp, wd, nesterov, first, i0, i1):
    for i in range(i0, i1):
        gi = g[i] + wd * p[i] if wd != 0.0 else g[i]
        vi = gi if first else v[i] * momentum + damp * gi
        v[i] = vi
        vi = v[i]          # as stored: the parameter's step reads the velocity's own dtype
        p[i] = p[i] - lr * (gi + momentum * vi if nesterov else vi)


@njit(cache=True, boundscheck=False)
def sgd_momentum(p, v, g, lr, momentum, damp, wd, nesterov, first):
    """One SGD step of flat arrays, in place: gi = g + wd * p; v = gi (first) or
    v * momentum + damp * gi; p -= lr * (gi + momentum * v if nesterov else v). `damp` is
    1 - dampening."""
    _sgd_block(p, v, g, lr, momentum, damp, wd, nesterov, first, 0, p.shape[0])


SGD_BLOCK = 1 << 15


@njit(parallel=True, cache=True, boundscheck=False)
def sgd_momentum_parallel(p, v, g, lr, momentum, damp, wd, nesterov, first):
    """sgd_momentum in blocks of SGD_BLOCK elements shared among the threads."""
    n = p.shape[0]
    for b in prange((n + SGD_BLOCK - 1) // SGD_BLOCK):
        _sgd_block(p, v, g, lr, momentum, damp, wd, nesterov, first, b * SGD_BLOCK,
                   min(n, b * SGD_BLOCK + SGD_BLOCK))
