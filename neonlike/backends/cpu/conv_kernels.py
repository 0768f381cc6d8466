"""Numba kernels for convolution and pooling on neon's batch-innermost layouts, and batch norm's
per-channel sums (last section).

Imported only by nn.py, inside the ops, where numba is installed. Arrays: input I
(C, D, H, W, N), filters F (C, T, R, S, K), output O (K, M, P, Q, N); `g` is the layer's
geometry (pad_d, pad_h, pad_w, str_d, str_h, str_w, dil_d, dil_h, dil_w). Every kernel's inner
loop runs over the batch (contiguous), so it vectorises; stride-1 rows run as one long loop
over (position, batch). The direct kernels parallelise over output rows (fprop), input rows
(bprop) or filter rows (update), so no two threads write the same element.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

# contract: fused multiply-add; reassoc only where a dot product must vectorise (update)
_FMA = {"contract"}
_DOT = {"contract", "reassoc"}


@njit(cache=True, inline="always")
def _store(out, acc, x, alpha, beta):
    """out = alpha * acc + beta * x, row by row; x is not read when beta is 0 (as in BLAS)."""
    if beta == 0.0:
        for j in range(out.shape[0]):
            out[j] = alpha * acc[j]
    else:
        for j in range(out.shape[0]):
            out[j] = alpha * acc[j] + beta * x[j]


@njit(cache=True, inline="always")
def _taps(o, stride, pad, dil, X, T):
    """The taps t of output position o that land inside [0, X): range(lo, hi)."""
    base = o * stride - pad
    lo = 0
    if base < 0:
        lo = (-base + dil - 1) // dil
    hi = T
    last = X - 1 - base
    if last < 0:
        hi = 0
    elif last // dil + 1 < T:
        hi = last // dil + 1
    return lo, max(lo, hi)


@njit(cache=True, inline="always")
def _outs(x, stride, pad, dil, t, Q):
    """Output positions q in range(lo, hi) whose tap t reads input position x0 = q*stride-pad+t*dil
    inside [0, x); returned with the offset x0 of q = 0."""
    x0 = t * dil - pad
    lo = 0
    if x0 < 0:
        lo = (-x0 + stride - 1) // stride
    hi = Q
    if x0 > x - 1:
        hi = 0
    elif (x - 1 - x0) // stride + 1 < Q:
        hi = (x - 1 - x0) // stride + 1
    return lo, max(lo, hi), x0


# ---------------------------------------------------------------------------------------------
# direct convolution
# ---------------------------------------------------------------------------------------------

@njit(parallel=True, cache=True, fastmath=_FMA)
def fprop_direct(I, F, O, X, alpha, beta, g):
    """O = alpha * conv(I, F) + beta * X, one (k, m, p) output row per task."""
    C, D, H, W, N = I.shape
    K, M, P, Q, _ = O.shape
    T, R, S = F.shape[1], F.shape[2], F.shape[3]
    pd, ph, pw, sd, sh, sw, dd, dh, dw = g
    Ft = np.ascontiguousarray(F.transpose(4, 0, 1, 2, 3))
    If = I.reshape(C, D, H, W * N)
    for kmp in prange(K * M * P):
        k, m, p = kmp // (M * P), (kmp // P) % M, kmp % P
        acc = np.zeros(Q * N, O.dtype)
        t0, t1 = _taps(m, sd, pd, dd, D, T)
        r0, r1 = _taps(p, sh, ph, dh, H, R)
        for c in range(C):
            for t in range(t0, t1):
                d = m * sd - pd + t * dd
                for r in range(r0, r1):
                    h = p * sh - ph + r * dh
                    row = If[c, d, h]
                    for s in range(S):
                        f = Ft[k, c, t, r, s]
                        q0, q1, w0 = _outs(W, sw, pw, dw, s, Q)
                        if sw == 1:
                            shift = w0 * N
                            for j in range(q0 * N, q1 * N):
                                acc[j] += f * row[j + shift]
                        else:
                            for q in range(q0, q1):
                                src = (w0 + q * sw) * N
                                for n in range(N):
                                    acc[q * N + n] += f * row[src + n]
        _store(O[k, m, p].reshape(Q * N), acc, X[k, m, p].reshape(Q * N), alpha, beta)


@njit(parallel=True, cache=True, fastmath=_FMA)
def bprop_direct(F, E, G, X, alpha, beta, g):
    """G = alpha * (input gradient of conv given output error E) + beta * X, one (c, d, h)
    input row per task: each input position gathers the outputs that read it."""
    C, D, H, W, N = G.shape
    K, M, P, Q, _ = E.shape
    T, R, S = F.shape[1], F.shape[2], F.shape[3]
    pd, ph, pw, sd, sh, sw, dd, dh, dw = g
    Ef = E.reshape(K, M, P, Q * N)
    for cdh in prange(C * D * H):
        c, d, h = cdh // (D * H), (cdh // H) % D, cdh % H
        acc = np.zeros(W * N, G.dtype)
        for t in range(T):
            md = d + pd - t * dd
            if md < 0 or md % sd != 0 or md // sd >= M:
                continue
            m = md // sd
            for r in range(R):
                ph_ = h + ph - r * dh
                if ph_ < 0 or ph_ % sh != 0 or ph_ // sh >= P:
                    continue
                p = ph_ // sh
                for k in range(K):
                    row = Ef[k, m, p]
                    for s in range(S):
                        f = F[c, t, r, s, k]
                        q0, q1, w0 = _outs(W, sw, pw, dw, s, Q)
                        if sw == 1:
                            shift = w0 * N
                            for j in range(q0 * N, q1 * N):
                                acc[j + shift] += f * row[j]
                        else:
                            for q in range(q0, q1):
                                dst = (w0 + q * sw) * N
                                for n in range(N):
                                    acc[dst + n] += f * row[q * N + n]
        _store(G[c, d, h].reshape(W * N), acc, X[c, d, h].reshape(W * N), alpha, beta)


@njit(parallel=True, cache=True, fastmath=_DOT)
def update_direct(I, E, U, alpha, beta, g):
    """U = alpha * dLoss/dF + beta * U, one (c, t, r) filter row (S x K values) per task."""
    C, D, H, W, N = I.shape
    K, M, P, Q, _ = E.shape
    T, R, S = U.shape[1], U.shape[2], U.shape[3]
    pd, ph, pw, sd, sh, sw, dd, dh, dw = g
    for ctr in prange(C * T * R):
        c, t, r = ctr // (T * R), (ctr // R) % T, ctr % R
        acc = np.zeros((S, K), np.float64)
        m0, m1, d0 = _outs(D, sd, pd, dd, t, M)
        p0, p1, h0 = _outs(H, sh, ph, dh, r, P)
        for m in range(m0, m1):
            d = d0 + m * sd
            for p in range(p0, p1):
                h = h0 + p * sh
                for s in range(S):
                    q0, q1, w0 = _outs(W, sw, pw, dw, s, Q)
                    for q in range(q0, q1):
                        irow = I[c, d, h, w0 + q * sw]
                        for k in range(K):
                            erow = E[k, m, p, q]
                            total = 0.0
                            for n in range(N):
                                total += irow[n] * erow[n]
                            acc[s, k] += total
        for s in range(S):
            for k in range(K):
                if beta == 0.0:
                    U[c, t, r, s, k] = alpha * acc[s, k]
                else:
                    U[c, t, r, s, k] = alpha * acc[s, k] + beta * U[c, t, r, s, k]


# ---------------------------------------------------------------------------------------------
# direct convolution over the rows of the input as it lies, width stride 1 (the fast path)
# ---------------------------------------------------------------------------------------------
# A tap (c, t, r, s) of output row mp = m*P + p reads input row (c, d, h), d = m*sd - pd + t*dd,
# h = p*sh - ph + r*dh, shifted by (s*dw - pw) columns: one contiguous slice of the row over the
# output lanes j (position * N + image) that land inside it. nn.py's `_row_taps` lays that out:
# lane 0 of the tap's slice is flat input index rowoff[mp] + tapoff[tap] (negative for a left
# shift of the first row); rows fall into classes (cls[mp]) by which taps' input rows lie inside
# the input; per class k, lo / hi[k, tap] are the lanes a tap reaches (lo = hi = 0 where its row
# lies outside), and the row's lanes are cut into segments seg[k, g] over which one set of taps
# lands inside (the middle, and a few lanes at each border), those taps in order in
# sel[k, g, :cnt[k, g]]. Nothing is padded or copied: the padding's zeros are the lanes and rows
# a tap skips. Taps stay in (c, t, r, s) order, so the eight slices of a pass overlap (neighbours
# along s read one input row shifted by N lanes) and stay in L1.

KB = 4   # filters of one conv_rows task: the eight input slices of a pass serve all of them


@njit(parallel=True, cache=True, fastmath=_FMA)
def conv_rows(If, Ft, rowoff, cls, tapoff, seg, sel, cnt, O, X, alpha, beta):
    """O[k, mp] = alpha * sum_tap Ft[k, tap] * (the tap's slice of the flat input If) + beta * X.

    O and X are (K, M*P, Q*N). A task is an output row and KB filters; over each segment of the
    row its taps run 8 at a time (one pass over the accumulator for eight taps and a filter, the
    eight input slices shared by the KB filters), the rest one at a time.
    """
    K = Ft.shape[0]
    _, MP, QN = O.shape
    nkb = (K + KB - 1) // KB
    for task in prange(MP * nkb):
        mp, k0 = task // nkb, task % nkb * KB
        k1 = min(K, k0 + KB)
        acc = np.zeros((KB, QN), O.dtype)
        cl, bs = cls[mp], tapoff
        for g in range(seg.shape[1]):
            n = cnt[cl, g]
            j0, j1 = seg[cl, g, 0], seg[cl, g, 1]
            L = j1 - j0
            row = sel[cl, g]
            a = rowoff[mp] + j0       # + tapoff[t]: where tap t's slice of the segment starts
            i = 0
            while i + 8 <= n:
                t0, t1, t2, t3 = row[i], row[i + 1], row[i + 2], row[i + 3]
                t4, t5, t6, t7 = row[i + 4], row[i + 5], row[i + 6], row[i + 7]
                b0, b1, b2, b3 = bs[t0] + a, bs[t1] + a, bs[t2] + a, bs[t3] + a
                b4, b5, b6, b7 = bs[t4] + a, bs[t5] + a, bs[t6] + a, bs[t7] + a
                x0, x1, x2, x3 = If[b0:b0 + L], If[b1:b1 + L], If[b2:b2 + L], If[b3:b3 + L]
                x4, x5, x6, x7 = If[b4:b4 + L], If[b5:b5 + L], If[b6:b6 + L], If[b7:b7 + L]
                for k in range(k0, k1):
                    f0, f1, f2, f3 = Ft[k, t0], Ft[k, t1], Ft[k, t2], Ft[k, t3]
                    f4, f5, f6, f7 = Ft[k, t4], Ft[k, t5], Ft[k, t6], Ft[k, t7]
                    av = acc[k - k0, j0:j1]
                    for j in range(L):
                        av[j] += ((f0 * x0[j] + f1 * x1[j] + f2 * x2[j] + f3 * x3[j])
                                  + (f4 * x4[j] + f5 * x5[j] + f6 * x6[j] + f7 * x7[j]))
                i += 8
            while i < n:
                t = row[i]
                b0 = bs[t] + a
                x0 = If[b0:b0 + L]
                for k in range(k0, k1):
                    f0 = Ft[k, t]
                    av = acc[k - k0, j0:j1]
                    for j in range(L):
                        av[j] += f0 * x0[j]
                i += 1
        for k in range(k0, k1):
            _store(O[k, mp], acc[k - k0], X[k, mp], alpha, beta)


TAP_BLOCK = 8   # taps of one task: each row of E is read once per block of taps, not per tap


@njit(cache=True, inline="always")
def _add4(acc, i, k, kn, s0, s1, s2, s3):
    acc[i, k] += s0
    if kn > 1:
        acc[i, k + 1] += s1
    if kn > 2:
        acc[i, k + 2] += s2
    if kn > 3:
        acc[i, k + 3] += s3


@njit(parallel=True, cache=True, fastmath=_DOT)
def update_rows(If, E, rowoff, cls, tapoff, lo, hi, seg, U, alpha, beta, zero):
    """U[tap, k] = alpha * sum_mp <the tap's slice of the flat input If, E[k, mp]> + beta * U.

    E is (K, M*P, Q*N), U is (taps, K). A task is a block of TAP_BLOCK taps: for each output row
    mp, segment of its lanes and four filters, the four rows of E stay in L1 while every tap of
    the block that lands inside the segment is dotted with them, two taps at a time (8
    accumulators a pass). Reading E once per tap instead (E is larger than L2 for a 16->32 5x5
    layer) made this kernel memory-bound.
    """
    ntap, K = U.shape
    _, MP, QN = E.shape
    nblock = (ntap + TAP_BLOCK - 1) // TAP_BLOCK
    for blk in prange(nblock):
        t0 = blk * TAP_BLOCK
        t1 = min(ntap, t0 + TAP_BLOCK)
        acc = np.zeros((TAP_BLOCK, K), np.float64)
        for mp in range(MP):
            cl, ro, bs = cls[mp], rowoff[mp], tapoff
            ls, hs = lo[cl], hi[cl]
            for g in range(seg.shape[1]):
                j0, j1 = seg[cl, g, 0], seg[cl, g, 1]
                if j1 <= j0:
                    continue
                L = j1 - j0
                k = 0
                while k < K:
                    kn = min(4, K - k)
                    e0 = E[k, mp, j0:j1]
                    e1 = E[k + 1, mp, j0:j1] if kn > 1 else e0
                    e2 = E[k + 2, mp, j0:j1] if kn > 2 else e0
                    e3 = E[k + 3, mp, j0:j1] if kn > 3 else e0
                    t = t0
                    while t < t1:
                        ta, tb = t, t + 1
                        va = ls[ta] <= j0 and hs[ta] >= j1
                        vb = tb < t1 and ls[tb] <= j0 and hs[tb] >= j1
                        if va and vb:
                            xa = If[ro + bs[ta] + j0:ro + bs[ta] + j1]
                            xb = If[ro + bs[tb] + j0:ro + bs[tb] + j1]
                            s0 = s1 = s2 = s3 = zero
                            r0 = r1 = r2 = r3 = zero
                            for j in range(L):
                                u = xa[j]
                                v = xb[j]
                                w0, w1, w2, w3 = e0[j], e1[j], e2[j], e3[j]
                                s0 += u * w0
                                s1 += u * w1
                                s2 += u * w2
                                s3 += u * w3
                                r0 += v * w0
                                r1 += v * w1
                                r2 += v * w2
                                r3 += v * w3
                            _add4(acc, ta - t0, k, kn, s0, s1, s2, s3)
                            _add4(acc, tb - t0, k, kn, r0, r1, r2, r3)
                        elif va or vb:
                            tt = ta if va else tb
                            xa = If[ro + bs[tt] + j0:ro + bs[tt] + j1]
                            s0 = s1 = s2 = s3 = zero
                            for j in range(L):
                                u = xa[j]
                                s0 += u * e0[j]
                                s1 += u * e1[j]
                                s2 += u * e2[j]
                                s3 += u * e3[j]
                            _add4(acc, tt - t0, k, kn, s0, s1, s2, s3)
                        t += 2
                    k += 4
        for t in range(t0, t1):
            for kk in range(K):
                U[t, kk] = alpha * acc[t - t0, kk] + (beta * U[t, kk] if beta != 0.0 else 0.0)


# ---------------------------------------------------------------------------------------------
# im2col / col2im over a block of output positions [pos0, pos1) (pos = (m*P + p)*Q + q)
# ---------------------------------------------------------------------------------------------

@njit(parallel=True, cache=True)
def im2col(I, col, pos0, pos1, T, R, S, M, P, Q, g):
    """col[(c,t,r,s), (pos-pos0)*N + n] = I[c, d, h, w, n] (0 in padding)."""
    C, D, H, W, N = I.shape
    pd, ph, pw, sd, sh, sw, dd, dh, dw = g
    for row in prange(C * T * R * S):
        c, t, r, s = row // (T * R * S), (row // (R * S)) % T, (row // S) % R, row % S
        dst = col[row]
        for pos in range(pos0, pos1):
            m, p, q = pos // (P * Q), (pos // Q) % P, pos % Q
            d = m * sd - pd + t * dd
            h = p * sh - ph + r * dh
            w = q * sw - pw + s * dw
            base = (pos - pos0) * N
            if d < 0 or d >= D or h < 0 or h >= H or w < 0 or w >= W:
                for n in range(N):
                    dst[base + n] = 0
            else:
                src = I[c, d, h, w]
                for n in range(N):
                    dst[base + n] = src[n]


@njit(parallel=True, cache=True)
def col2im(col, G, pos0, pos1, T, R, S, M, P, Q, g):
    """G[c, d, h, w, n] += the columns that im2col would have filled from it; one channel
    per task (taps of one channel overlap, channels do not)."""
    C, D, H, W, N = G.shape
    pd, ph, pw, sd, sh, sw, dd, dh, dw = g
    for c in prange(C):
        for t in range(T):
            for r in range(R):
                for s in range(S):
                    src = col[((c * T + t) * R + r) * S + s]
                    for pos in range(pos0, pos1):
                        m, p, q = pos // (P * Q), (pos // Q) % P, pos % Q
                        d = m * sd - pd + t * dd
                        h = p * sh - ph + r * dh
                        w = q * sw - pw + s * dw
                        if d < 0 or d >= D or h < 0 or h >= H or w < 0 or w >= W:
                            continue
                        dst = G[c, d, h, w]
                        base = (pos - pos0) * N
                        for n in range(N):
                            dst[n] += src[base + n]


# ---------------------------------------------------------------------------------------------
# what follows the convolution: bias, relu / bprop-relu, batch sum
# ---------------------------------------------------------------------------------------------

@njit(parallel=True, cache=True)
def epilogue(O, X, bias, mode, slope, bsum):
    """Per channel row k of O (K, L): add bias[k] (if bias has K rows), then mode 1: relu with
    `slope` for negatives, mode 2: multiply by relu'(X) (bprop relu); bsum[k] = row sum (if
    bsum has K rows)."""
    K, L = O.shape
    for k in prange(K):
        b = bias[k, 0] if bias.shape[0] == K else 0.0
        total = 0.0
        for j in range(L):
            v = O[k, j] + b
            if mode == 1:
                v = max(v, 0.0) + slope * min(v, 0.0)
            elif mode == 2:
                x = X[k, j]
                v = v * ((x > 0.0) + slope * (x < 0.0))
            O[k, j] = v
            total += v
        if bsum.shape[0] == K:
            bsum[k, 0] = total

# ---------------------------------------------------------------------------------------------
# pooling: one (k, m, p) output row per task; j runs over the channels of a window (J = 1: c = k)
# ---------------------------------------------------------------------------------------------

@njit(parallel=True, cache=True)
def fprop_pool(I, O, argmax, is_max, beta, J, T, R, S, g):
    """O = max (first on ties, a NaN before all; argmax = ((j*T + t)*R + r)*S + s within the full
    window) or the mean over the window's valid positions, plus beta * O; `g` is (pad_c, pad_d,
    pad_h, pad_w, str_c, str_d, str_h, str_w)."""
    C, D, H, W, N = I.shape
    K, M, P, Q, _ = O.shape
    pc, pd, ph, pw, sc, sd, sh, sw = g
    for kmp in prange(K * M * P):
        k, m, p = kmp // (M * P), (kmp // P) % M, kmp % P
        j0, j1 = _taps(k, sc, pc, 1, C, J)
        t0, t1 = _taps(m, sd, pd, 1, D, T)
        r0, r1 = _taps(p, sh, ph, 1, H, R)
        best = np.empty(N, np.float64)
        where = np.zeros(N, np.int64)
        for q in range(Q):
            s0, s1 = _taps(q, sw, pw, 1, W, S)
            if is_max:
                best[:] = -np.inf
            else:
                best[:] = 0.0
            for j in range(j0, j1):
                c = k * sc - pc + j
                for t in range(t0, t1):
                    d = m * sd - pd + t
                    for r in range(r0, r1):
                        h = p * sh - ph + r
                        for s in range(s0, s1):
                            row = I[c, d, h, q * sw - pw + s]
                            if is_max:
                                index = ((j * T + t) * R + r) * S + s
                                for n in range(N):
                                    v = row[n]  # a NaN wins (and stays), as numpy's max
                                    if v > best[n] or (v != v and best[n] == best[n]):
                                        best[n] = v
                                        where[n] = index
                            else:
                                for n in range(N):
                                    best[n] += row[n]
            out = O[k, m, p, q]
            if not is_max:
                scale = 1.0 / ((j1 - j0) * (t1 - t0) * (r1 - r0) * (s1 - s0))
                for n in range(N):
                    best[n] *= scale
            for n in range(N):
                out[n] = best[n] + beta * out[n] if beta != 0.0 else best[n]
            if is_max and argmax.shape[0] == K:
                for n in range(N):
                    argmax[k, m, p, q, n] = where[n]


# Pooling over windows of one channel and depth (J = T = 1, D = 1), the common case, runs on
# "lane rows": a channel's (H, W, L) values as rows (H, W*L) with L values a position, innermost.
# Each window tap (r, s) then updates a whole (q, lane) run of an output row as one loop, which
# vectorises. neon's CHWN tensors are lane rows as they lie (L = N, a channel a task); the SINGA
# front end's NCHW planes (a batch of one, N*C channels) are not: a task takes LANES consecutive
# planes and lays them out (H, W, LANES) in a local buffer (a batch loop of one ran branchy scalar
# code, ~10x slower).
LANES = 32


@njit(cache=True, inline="always")
def _block_in(X, I, c0, n):
    """X (A, B, LANES) = planes c0 .. c0 + n of I (C, A, B); lanes past n zero."""
    if n < LANES:
        X[:] = 0.0
    for j in range(n):
        plane = I[c0 + j]
        for a in range(X.shape[0]):
            for b in range(X.shape[1]):
                X[a, b, j] = plane[a, b]


@njit(cache=True, inline="always")
def _runs(W, sw, pw, s, Q, L):
    """The (q, lane) runs that window column s reaches, as (first q, runs, lanes a run, w0 of
    _outs): at stride 1 the outputs q0 .. q1 are one run; else a run a q."""
    q0, q1, w0 = _outs(W, sw, pw, 1, s, Q)
    if sw == 1:
        return q0, 1, (q1 - q0) * L, w0
    return q0, q1 - q0, L, w0


@njit(cache=True, inline="always")
def _pool_taps(best, where, xs, index, is_max):
    """One window tap over a run of lanes: best takes xs (max: where it is larger, or a NaN over
    a number, recording `index` in where; average: added). Runs are sliced by the caller, so
    the loop indexes from 0 and vectorises (an offset index carries a negative-index check
    per element that stops it: ~9x slower)."""
    for k in range(best.shape[0]):
        v = xs[k]
        if is_max:
            b = best[k]
            if v > b or (v != v and b == b):  # a NaN wins (and stays), as numpy's max
                best[k] = v
                where[k] = index
        else:
            best[k] += v


@njit(cache=True, inline="always")
def _fprop_lanes(Xf, Ym, Ys, A, L, is_max, R, S, g):
    """Pool lane rows Xf (H, W*L) into Ym (max, Xf's dtype: exact) or Ys (average, float64 sums),
    (P, Q*L), and A (the argmax, zeroed here), taps (r, s) in index order."""
    H, W = Xf.shape[0], Xf.shape[1] // L
    P, Q = A.shape[0], A.shape[1] // L
    ph, pw, sh, sw = g[2], g[3], g[6], g[7]
    for p in range(P):
        r0, r1 = _taps(p, sh, ph, 1, H, R)
        A[p] = 0
        if is_max:
            Ym[p] = -np.inf
        else:
            Ys[p] = 0.0
        for r in range(r0, r1):
            xrow = Xf[p * sh - ph + r]
            for s in range(S):
                q0, runs, width, w0 = _runs(W, sw, pw, s, Q, L)
                index = r * S + s
                for q in range(q0, q0 + runs):
                    dst, src = q * L, (w0 + q * sw) * L
                    xs, where = xrow[src:src + width], A[p, dst:dst + width]
                    if is_max:
                        _pool_taps(Ym[p, dst:dst + width], where, xs, index, True)
                    else:
                        _pool_taps(Ys[p, dst:dst + width], where, xs, index, False)
        if not is_max:
            for q in range(Q):
                s0, s1 = _taps(q, sw, pw, 1, W, S)
                scale = 1.0 / ((r1 - r0) * (s1 - s0))
                run = Ys[p, q * L:(q + 1) * L]
                for j in range(L):
                    run[j] *= scale


@njit(cache=True, inline="always")
def _gather_row(E, A, c, h, acc, L, is_max, R, S, H, W, g):
    """acc (W*L, float64) += the errors E[c] (P, Q*L) of the windows that hold input row h of
    channel c: each to its argmax A[c] (max), or divided by its window's count of valid
    positions (average). A row gathers what reaches it: a task owns the rows it writes."""
    P, Q = E.shape[1], E.shape[2] // L
    ph, pw, sh, sw = g[2], g[3], g[6], g[7]
    for r in range(R):
        pr = h + ph - r
        if pr < 0 or pr % sh != 0 or pr // sh >= P:
            continue
        p = pr // sh
        r0, r1 = _taps(p, sh, ph, 1, H, R)
        erow = E[c, p]
        for s in range(S):
            if is_max:
                arow = A[c, p]
                index = r * S + s
                q0, runs, width, w0 = _runs(W, sw, pw, s, Q, L)
                for q in range(q0, q0 + runs):
                    src, dst = q * L, (w0 + q * sw) * L
                    err, arg = erow[src:src + width], arow[src:src + width]
                    out = acc[dst:dst + width]
                    for k in range(width):   # branch-free: it vectorises
                        out[k] += err[k] if arg[k] == index else 0.0
            else:
                q0, q1, w0 = _outs(W, sw, pw, 1, s, Q)
                for q in range(q0, q1):
                    s0, s1 = _taps(q, sw, pw, 1, W, S)
                    scale = 1.0 / ((r1 - r0) * (s1 - s0))
                    src, dst = q * L, (w0 + q * sw) * L
                    err, out = erow[src:src + L], acc[dst:dst + L]
                    for k in range(L):
                        out[k] += err[k] * scale


@njit(parallel=True, cache=True, fastmath=_FMA)
def fprop_pool_lanes(I, O, argmax, is_max, beta, L, R, S, g):
    """fprop_pool of (C, 1, H, W, L) lane rows I (C, H, W*L) into O and argmax (C, P, Q*L) (an
    empty argmax: not kept), a channel a task; results as fprop_pool's."""
    C = I.shape[0]
    P, QL = O.shape[1], O.shape[2]
    keep = is_max and argmax.shape[0] == C
    for c in prange(C):
        Ym = np.empty((P, QL) if is_max else (0, 0), I.dtype)
        Ys = np.empty((0, 0) if is_max else (P, QL), np.float64)
        A = np.empty((P, QL), np.int32)
        _fprop_lanes(I[c], Ym, Ys, A, L, is_max, R, S, g)
        out = O[c]
        for p in range(P):
            row = out[p]
            for k in range(QL):
                v = Ym[p, k] if is_max else Ys[p, k]
                row[k] = v + beta * row[k] if beta != 0.0 else v
            if keep:
                arg = argmax[c, p]
                for k in range(QL):
                    arg[k] = A[p, k]


@njit(parallel=True, cache=True, fastmath=_FMA)
def bprop_pool_lanes(E, G, argmax, is_max, alpha, beta, L, R, S, g):
    """bprop_pool for fprop_pool_lanes' layers: G (C, H, W*L) = alpha * (E (C, P, Q*L) sent back
    to each max's position, or spread over each window's valid positions) + beta * G, the sums
    in float64, a (channel, input row) a task."""
    C, H, WL = G.shape
    for ch in prange(C * H):
        c, h = ch // H, ch % H
        acc = np.zeros(WL, np.float64)
        _gather_row(E, argmax, c, h, acc, L, is_max, R, S, H, WL // L, g)
        row = G[c, h]
        for k in range(WL):
            v = alpha * acc[k]
            row[k] = v + beta * row[k] if beta != 0.0 else v


@njit(parallel=True, cache=True, fastmath=_FMA)
def fprop_pool_planes(I, O, argmax, is_max, beta, R, S, g):
    """fprop_pool of the planes I (C, H, W) into O and argmax (C, P, Q); results as fprop_pool's
    on (C, 1, H, W, 1): blocks of LANES planes laid out as lane rows."""
    C, H, W = I.shape
    P, Q = O.shape[1], O.shape[2]
    keep = is_max and argmax.shape[0] == C
    for block in prange((C + LANES - 1) // LANES):
        c0 = block * LANES
        n = min(LANES, C - c0)
        X = np.empty((H, W, LANES), I.dtype)
        _block_in(X, I, c0, n)
        Ym = np.empty((P, Q * LANES) if is_max else (0, 0), I.dtype)
        Ys = np.empty((0, 0) if is_max else (P, Q * LANES), np.float64)
        A = np.empty((P, Q * LANES), np.int32)
        _fprop_lanes(X.reshape(H, W * LANES), Ym, Ys, A, LANES, is_max, R, S, g)
        for j in range(n):
            out = O[c0 + j]
            for p in range(P):
                for q in range(Q):
                    v = Ym[p, q * LANES + j] if is_max else Ys[p, q * LANES + j]
                    out[p, q] = v + beta * out[p, q] if beta != 0.0 else v
            if keep:
                arg = argmax[c0 + j]
                for p in range(P):
                    for q in range(Q):
                        arg[p, q] = A[p, q * LANES + j]


@njit(parallel=True, cache=True, fastmath=_FMA)
def bprop_pool_planes(E, G, argmax, is_max, alpha, beta, R, S, g):
    """bprop_pool for fprop_pool_planes' layers: G (C, H, W) = alpha * (E (C, P, Q) sent back
    to each max's position, or spread over each window's valid positions) + beta * G, the sums
    in float64; blocks of LANES planes as lane rows."""
    C, H, W = G.shape
    P, Q = E.shape[1], E.shape[2]
    for block in prange((C + LANES - 1) // LANES):
        c0 = block * LANES
        n = min(LANES, C - c0)
        D = np.empty((P, Q, LANES), E.dtype)
        _block_in(D, E, c0, n)
        A = np.empty((P, Q, LANES), argmax.dtype)   # read for max pooling only
        if is_max:
            _block_in(A, argmax, c0, n)
        Df, Af = D.reshape(1, P, Q * LANES), A.reshape(1, P, Q * LANES)
        acc = np.empty(W * LANES, np.float64)
        for h in range(H):
            acc[:] = 0.0
            _gather_row(Df, Af, 0, h, acc, LANES, is_max, R, S, H, W, g)
            for j in range(n):
                out = G[c0 + j, h]
                for w in range(W):
                    v = alpha * acc[w * LANES + j]
                    out[w] = v + beta * out[w] if beta != 0.0 else v


@njit(parallel=True, cache=True)
def bprop_pool(E, G, argmax, is_max, alpha, beta, J, T, R, S, g):
    """G = alpha * (errors routed back through the pooling) + beta * G; one (c, d, h) input row
    per task, each input position gathering the windows that contain it."""
    C, D, H, W, N = G.shape
    K, M, P, Q, _ = E.shape
    pc, pd, ph, pw, sc, sd, sh, sw = g
    for cdh in prange(C * D * H):
        c, d, h = cdh // (D * H), (cdh // H) % D, cdh % H
        acc = np.zeros((W, N), np.float64)
        for j in range(J):
            kc = c + pc - j
            if kc < 0 or kc % sc != 0 or kc // sc >= K:
                continue
            k = kc // sc
            kj0, kj1 = _taps(k, sc, pc, 1, C, J)
            for t in range(T):
                md = d + pd - t
                if md < 0 or md % sd != 0 or md // sd >= M:
                    continue
                m = md // sd
                mt0, mt1 = _taps(m, sd, pd, 1, D, T)
                for r in range(R):
                    pr = h + ph - r
                    if pr < 0 or pr % sh != 0 or pr // sh >= P:
                        continue
                    p = pr // sh
                    pr0, pr1 = _taps(p, sh, ph, 1, H, R)
                    count = (kj1 - kj0) * (mt1 - mt0) * (pr1 - pr0)
                    for s in range(S):
                        index = ((j * T + t) * R + r) * S + s
                        q0, q1, w0 = _outs(W, sw, pw, 1, s, Q)
                        for q in range(q0, q1):
                            w = w0 + q * sw
                            err = E[k, m, p, q]
                            if is_max:
                                arg = argmax[k, m, p, q]
                                for n in range(N):
                                    if arg[n] == index:
                                        acc[w, n] += err[n]
                            else:
                                qs0, qs1 = _taps(q, sw, pw, 1, W, S)
                                scale = 1.0 / (count * (qs1 - qs0))
                                for n in range(N):
                                    acc[w, n] += scale * err[n]
        out = G[c, d, h]
        for w in range(W):
            for n in range(N):
                out[w, n] = alpha * acc[w, n] + beta * out[w, n] if beta != 0.0 \
                    else alpha * acc[w, n]


# ---------------------------------------------------------------------------------------------
# batch norm: per-channel sums over x (A, C, B), a channel a task, in float64
# ---------------------------------------------------------------------------------------------

@njit(parallel=True, cache=True, fastmath=_DOT)
def batch_moments(x, mean, var, inv, eps, rmean, rvar, keep, take_mean, take_var):
    """mean[c], the biased var[c] and inv[c] = 1 / sqrt(var[c] + eps) over x[:, c, :]; where
    rmean / rvar have C entries, rmean = rmean * keep + mean * take_mean (rvar alike)."""
    A, C, B = x.shape
    n = A * B
    for c in prange(C):
        total = 0.0
        for a in range(A):
            row = x[a, c]
            for b in range(B):
                total += row[b]
        m = total / n
        sq = 0.0
        for a in range(A):
            row = x[a, c]
            for b in range(B):
                d = row[b] - m
                sq += d * d
        v = sq / n
        mean[c], var[c], inv[c] = m, v, 1.0 / np.sqrt(v + eps)
        if rmean.shape[0] == C:
            rmean[c] = rmean[c] * keep + m * take_mean
        if rvar.shape[0] == C:
            rvar[c] = rvar[c] * keep + v * take_var


@njit(parallel=True, cache=True, fastmath=_DOT)
def batch_grad_sums(dy, x, mean, inv, dgamma, dbeta):
    """dbeta[c] = sum of dy[:, c, :]; dgamma[c] = sum of dy * (x - mean[c]) * inv[c] there."""
    A, C, B = x.shape
    for c in prange(C):
        m = np.float64(mean[c])
        total = 0.0
        cross = 0.0
        for a in range(A):
            g, row = dy[a, c], x[a, c]
            for b in range(B):
                total += g[b]
                cross += g[b] * (row[b] - m)
        dbeta[c] = total
        dgamma[c] = cross * inv[c]
