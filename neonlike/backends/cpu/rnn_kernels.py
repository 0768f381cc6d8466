"""Numba kernels of one LSTM step on neon's layouts (imported by backends/cpu/rnn.py when first
used, where numba is installed).

Each operand is a step view given as (root, r0, c0): the C-ordered float32 2-D array it lies in
and its first row and column there, so the batch loop runs over unit-stride memory that Numba
knows is contiguous and vectorises (a strided view's type would not). ifog holds the gates i, f,
o, g in row blocks of n. The standard cell: gates Logistic, cell candidate and cell output Tanh.
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
        for j in range(N):
            i = sig32(ifog[ir + r, ic + j])
            f = sig32(ifog[ir + n + r, ic + j])
            o = sig32(ifog[ir + 2 * n + r, ic + j])
            g = tanh32(ifog[ir + 3 * n + r, ic + j])
            ifog[ir + r, ic + j] = i
            ifog[ir + n + r, ic + j] = f
            ifog[ir + 2 * n + r, ic + j] = o
            ifog[ir + 3 * n + r, ic + j] = g
            cell = f * cp[pr + r, pc + j] + i * g
            act = tanh32(cell)
            c[cr + r, cc + j] = cell
            ca[ar + r, ac + j] = act
            h[hr + r, hc + j] = o * act


@njit(cache=True, fastmath=_FMA)
def lstm_bprop(dh, dr, dc, cd, er, ec, cdn, nr, nc, fn, fr, fc, has_next, ifog, ir, ic,
               cp, pr, pc, ca, ar, ac, ifd, gr, gc, n, N):
    """cd = (1 - c_act**2) * o * dh (+ cd_next * f_next); ifd: the gates' pre-activation
    errors."""
    for r in range(n):
        for j in range(N):
            i = ifog[ir + r, ic + j]
            f = ifog[ir + n + r, ic + j]
            o = ifog[ir + 2 * n + r, ic + j]
            g = ifog[ir + 3 * n + r, ic + j]
            act = ca[ar + r, ac + j]
            d = dh[dr + r, dc + j]
            cdel = (1 - act * act) * o * d
            if has_next:
                cdel += cdn[nr + r, nc + j] * fn[fr + r, fc + j]
            cd[er + r, ec + j] = cdel
            ifd[gr + r, gc + j] = i * (1 - i) * cdel * g
            ifd[gr + n + r, gc + j] = f * (1 - f) * cdel * cp[pr + r, pc + j]
            ifd[gr + 2 * n + r, gc + j] = o * (1 - o) * d * act
            ifd[gr + 3 * n + r, gc + j] = (1 - g * g) * cdel * i
