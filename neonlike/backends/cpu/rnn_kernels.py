"""Numba kernels of one LSTM step on neon's layouts (imported by backends/cpu/rnn.py when first
used, where numba is installed).

Each operand is a step view given as (root, r0, c0): the C-ordered float32 2-D array it lies in
and its first row and column there, so the batch loop runs over unit-stride memory that Numba
knows is contiguous and vectorises (a strided view's type would not); each row runs as short
loops over one or few operands, which vectorise where one loop over all of them does not.
ifog holds the gates i, f, o, g in row blocks of n. The standard cell: gates Logistic, cell
candidate and cell output Tanh.
"""
from __future__ import annotations

from numba import njit

from .vecmath import sig32, tanh32

_FMA = {"contract"}


@njit(cache=True, fastmath=_FMA)
def lstm_fprop(ifog, ir, ic, cp, pr, pc, c, cr, cc, ca, ar, ac, h, hr, hc, n, N):
    """ifog: pre-activations in, activations out; c = f*c_prev + i*g, c_act = tanh(c),
    h = o*c_act."""
    for r in range(n):
        i = ifog[ir + r, ic:ic + N]
        f = ifog[ir + n + r, ic:ic + N]
        o = ifog[ir + 2 * n + r, ic:ic + N]
        g = ifog[ir + 3 * n + r, ic:ic + N]
        cell = c[cr + r, cc:cc + N]
        act = ca[ar + r, ac:ac + N]
        prev = cp[pr + r, pc:pc + N]
        out = h[hr + r, hc:hc + N]
        for j in range(N):
            i[j] = sig32(i[j])
        for j in range(N):
            f[j] = sig32(f[j])
        for j in range(N):
            o[j] = sig32(o[j])
        for j in range(N):
            g[j] = tanh32(g[j])
        for j in range(N):
            cell[j] = f[j] * prev[j] + i[j] * g[j]
        for j in range(N):
            act[j] = tanh32(cell[j])
        for j in range(N):
            out[j] = o[j] * act[j]


@njit(cache=True, fastmath=_FMA)
def lstm_bprop(dh, dr, dc, cd, er, ec, cdn, nr, nc, fn, fr, fc, has_next, ifog, ir, ic,
               cp, pr, pc, ca, ar, ac, ifd, gr, gc, n, N):
    """cd = (1 - c_act**2) * o * dh (+ cd_next * f_next); ifd: the gates' pre-activation
    errors."""
    for r in range(n):
        i = ifog[ir + r, ic:ic + N]
        f = ifog[ir + n + r, ic:ic + N]
        o = ifog[ir + 2 * n + r, ic:ic + N]
        g = ifog[ir + 3 * n + r, ic:ic + N]
        act = ca[ar + r, ac:ac + N]
        d = dh[dr + r, dc:dc + N]
        cdel = cd[er + r, ec:ec + N]
        for j in range(N):
            cdel[j] = (1 - act[j] * act[j]) * o[j] * d[j]
        if has_next:
            cnext = cdn[nr + r, nc:nc + N]
            fnext = fn[fr + r, fc:fc + N]
            for j in range(N):
                cdel[j] += cnext[j] * fnext[j]
        di = ifd[gr + r, gc:gc + N]
        df = ifd[gr + n + r, gc:gc + N]
        do = ifd[gr + 2 * n + r, gc:gc + N]
        dg = ifd[gr + 3 * n + r, gc:gc + N]
        prev = cp[pr + r, pc:pc + N]
        for j in range(N):
            di[j] = i[j] * (1 - i[j]) * cdel[j] * g[j]
        for j in range(N):
            df[j] = f[j] * (1 - f[j]) * cdel[j] * prev[j]
        for j in range(N):
            do[j] = o[j] * (1 - o[j]) * d[j] * act[j]
        for j in range(N):
            dg[j] = (1 - g[j] * g[j]) * cdel[j] * i[j]
