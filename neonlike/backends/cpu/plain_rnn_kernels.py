"""Numba kernels of neon's plain recurrent layer (layers.Recurrent) on neon's layouts (imported
by backends/cpu/rnn.py when first used, where numba is installed and the host has a register
tile): every step of a sequence with its recurrent GEMM as register tiles (tiles.py), as the
LSTM's sequence kernels run (rnn_kernels.py, whose tile calls and batch shares these reuse).

    forward,  t = 0 .. T-1:   h[t] = act(W @ h[t-1] + h_ff[t] + b)        (h[-1] = h0)
    backward, t = T-1 .. 0:   d[t] = act'(h[t]) * (d[t] + W.T @ d[t+1])   (no W.T term at T-1)
              then            h0_err += W.T @ d[0]

as compound_rnn_unroll_fprop / compound_rnn_unroll_bprop compute them step by step (the
generic ops in backends/rnn.py: a GEMM call and a statement a step, ~2x the GEMM's own time a
step around it). act' is neon's bprop of the activation as a function of its output.

Each operand is a step view given as (root, r0, c0, cs): the C-ordered float32 2-D array it lies
in, its first row and column there and the column step from one step to the next (as in
rnn_kernels). The activation comes as a code (rnn.py's _activation_code): 0 identity, 1 tanh,
2 logistic, 3 rectifier max(x, 0) + slope * min(x, 0). Two ways to share the work, as the
LSTM's: the batch (rnn_*_cols: a task runs every step for its own columns, one parallel
region) where each task gets a vector width of columns, else the units (rnn_*_tiles: one
parallel region a step). 256 units, 50 steps, 2 threads, the unit split against the batch
split with fewer tasks (one): 4.42 against 5.19 ms at a batch of 8, 8.70 against 10.17 at 24;
at 128 units, batch 16, 1.48 against 1.37.
"""
from __future__ import annotations

from numba import njit, prange

from . import tiles
from .rnn_kernels import _share, _tile_rows
from .rowvec import ONE
from .vecmath import sig32, tanh32

_FMA = {"contract"}
ZERO = ONE - ONE


@njit(cache=True, fastmath=_FMA, inline="always")
def _fprop_rows(h, hr, hc, ff, fr, fc, b, kind, slope, N, r0, r1):
    """Rows r0 .. r1 of one step, N columns: h (holding W @ h_prev) = act(h + ff + b[row])."""
    for r in range(r0, r1):
        out, inp, bias = h[hr + r, hc:hc + N], ff[fr + r, fc:fc + N], b[r]
        for j in range(N):
            out[j] = out[j] + inp[j] + bias
        if kind == 1:
            for j in range(N):
                out[j] = tanh32(out[j])
        elif kind == 2:
            for j in range(N):
                out[j] = sig32(out[j])
        elif kind == 3 and slope == 0:
            for j in range(N):          # max(v, 0) as numpy's: nan stays nan
                v = out[j]
                out[j] = ZERO if v < ZERO else v
        elif kind == 3:
            for j in range(N):
                v = out[j]
                out[j] = (ZERO if v < ZERO else v) + (ZERO if v > ZERO else v) * slope


@njit(cache=True, fastmath=_FMA, inline="always")
def _bprop_rows(d, dr, dc, h, hr, hc, kind, slope, N, r0, r1):
    """Rows r0 .. r1 of one step, N columns: d = act'(h) * d (identity: d as it is)."""
    for r in range(r0, r1):
        err, out = d[dr + r, dc:dc + N], h[hr + r, hc:hc + N]
        if kind == 1:
            for j in range(N):
                err[j] = (ONE - out[j] * out[j]) * err[j]
        elif kind == 2:
            for j in range(N):
                err[j] = out[j] * (ONE - out[j]) * err[j]
        elif kind == 3:
            for j in range(N):
                v = out[j]
                err[j] = ((ONE if v > ZERO else ZERO) + (slope if v < ZERO else ZERO)) * err[j]


@njit(cache=True, fastmath=_FMA)
def _fprop_step(t, u0, u1, j0, w, tall, W, h0, h, hr, hc, hcs, ff, fr, fc, fcs, b, kind, slope,
                n, N):
    """Step t of the forward sequence for units u0 .. u1 and the batch's columns j0 .. j0 + w."""
    MR = tiles.TALL if tall else tiles.ROWS
    flat_W, flat_h = W.reshape(W.size), h.reshape(h.size)
    lh = h.shape[1]
    hi, fi = hc + t * hcs + j0, fc + t * fcs + j0
    if t == 0:
        hp, hoff, ldh = h0.reshape(h0.size), j0, N
    else:
        hp, hoff, ldh = flat_h, hr * lh + hi - hcs, lh
    for u in range(u0, u1, MR):
        mr = min(MR, u1 - u)
        _tile_rows(tall, n, flat_W, u * n, 1, n, mr, hp, hoff, ldh, flat_h, (hr + u) * lh + hi,
                   lh, w, 0.0)
        _fprop_rows(h, hr, hi, ff, fr, fi, b, kind, slope, w, u, u + mr)


@njit(cache=True, fastmath=_FMA)
def _bprop_step(t, T, u0, u1, j0, w, tall, W, d, dr, dc, dcs, h, hr, hc, hcs, kind, slope, n):
    """Step t of the backward sequence for units u0 .. u1 and the batch's columns j0 .. j0 + w:
    d[t] += W.T @ d[t + 1] (W.T's rows read as W's columns), then d[t] *= act'(h[t])."""
    MR = tiles.TALL if tall else tiles.ROWS
    flat_W, flat_d = W.reshape(W.size), d.reshape(d.size)
    ld = d.shape[1]
    di, hi = dc + t * dcs + j0, hc + t * hcs + j0
    for u in range(u0, u1, MR):
        mr = min(MR, u1 - u)
        if t < T - 1:
            _tile_rows(tall, n, flat_W, u, n, 1, mr, flat_d, dr * ld + di + dcs, ld, flat_d,
                       (dr + u) * ld + di, ld, w, 1.0)
        _bprop_rows(d, dr, di, h, hr, hi, kind, slope, w, u, u + mr)


@njit(cache=True, fastmath=_FMA)
def _start_errors(u0, u1, j0, w, tall, W, d, dr, dc, n, N, h0e):
    """h0e ((n, N), C-ordered) += W.T @ d's step 0, units u0 .. u1, columns j0 .. j0 + w."""
    MR = tiles.TALL if tall else tiles.ROWS
    flat_W, flat_d, flat_e = W.reshape(W.size), d.reshape(d.size), h0e.reshape(h0e.size)
    ld = d.shape[1]
    for u in range(u0, u1, MR):
        _tile_rows(tall, n, flat_W, u, n, 1, min(MR, u1 - u), flat_d, dr * ld + dc + j0, ld,
                   flat_e, u * N + j0, N, w, 1.0)


@njit(parallel=True, cache=True, fastmath=_FMA)
def rnn_fprop_cols(W, h0, h, hr, hc, hcs, ff, fr, fc, fcs, b, kind, slope, n, N, T, tasks):
    """The forward sequence, `tasks` tasks each a share of the batch's columns (rnn_kernels'
    _share) over all T steps; W (n, n) C-ordered, h0 (n, N) C-ordered, b (n,)."""
    for task in prange(tasks):
        j0, j1 = _share(task, tasks, N)
        for t in range(T):
            _fprop_step(t, 0, n, j0, j1 - j0, True, W, h0, h, hr, hc, hcs, ff, fr, fc, fcs, b,
                        kind, slope, n, N)


@njit(parallel=True, cache=True, fastmath=_FMA)
def rnn_fprop_tiles(W, h0, h, hr, hc, hcs, ff, fr, fc, fcs, b, kind, slope, n, N, T, tasks):
    """rnn_fprop_cols with `tasks` tasks a step, each a share of the units."""
    for t in range(T):
        for task in prange(tasks):
            _fprop_step(t, task * n // tasks, (task + 1) * n // tasks, 0, N, False, W, h0, h,
                        hr, hc, hcs, ff, fr, fc, fcs, b, kind, slope, n, N)


@njit(parallel=True, cache=True, fastmath=_FMA)
def rnn_bprop_cols(W, d, dr, dc, dcs, h, hr, hc, hcs, kind, slope, n, N, T, tasks, h0e):
    """The backward sequence and the starting state's errors (h0e += W.T @ d[0]), `tasks`
    tasks each a share of the batch's columns over all T steps; W (n, n) C-ordered (the array
    under W_recur.T)."""
    for task in prange(tasks):
        j0, j1 = _share(task, tasks, N)
        for t in range(T - 1, -1, -1):
            _bprop_step(t, T, 0, n, j0, j1 - j0, True, W, d, dr, dc, dcs, h, hr, hc, hcs, kind,
                        slope, n)
        _start_errors(0, n, j0, j1 - j0, True, W, d, dr, dc, n, N, h0e)


@njit(parallel=True, cache=True, fastmath=_FMA)
def rnn_bprop_tiles(W, d, dr, dc, dcs, h, hr, hc, hcs, kind, slope, n, N, T, tasks, h0e):
    """rnn_bprop_cols with `tasks` tasks a step, each a share of the units."""
    for t in range(T - 1, -1, -1):
        for task in prange(tasks):
            _bprop_step(t, T, task * n // tasks, (task + 1) * n // tasks, 0, N, False, W, d, dr,
                        dc, dcs, h, hr, hc, hcs, kind, slope, n)
    for task in prange(tasks):
        _start_errors(task * n // tasks, (task + 1) * n // tasks, 0, N, False, W, d, dr, dc, n,
                      N, h0e)
