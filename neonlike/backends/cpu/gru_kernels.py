"""Numba kernels of neon's GRU layer (layers.GRU) on neon's layouts (imported by
backends/cpu/rnn.py when first used, where numba is installed and the host has a register
tile): every step of a sequence with its recurrent GEMMs as register tiles (tiles.py), the
tasks sharing the batch (each task runs every step for its own columns: rnn_kernels' _share),
for the standard cell (gates logistic, candidate tanh). neon's GRU, as the generic
compound_gru_fprop_steps / compound_gru_bprop_steps (backends/rnn.py) compute it step by step:

    forward:   [r; z] = sig([r; z] + W_rz @ h_prev)     ([r; z; hcan] hold W_input x + b on entry)
               rh_prev = r * h_prev
               hcan = tanh(hcan + W_hcan @ rh_prev)
               h = h_prev + z * (hcan - h_prev)
    backward:  hcan_d = (1 - hcan**2) * dh * z,   z_d = z (1 - z) * dh * (hcan - h_prev)
               wrc = W_hcan.T @ hcan_d
               r_d = r (1 - r) * wrc * h_prev
               dh_prev += dh * (1 - z) + r * wrc,   then dh_prev += W_rz.T @ [r_d; z_d]

W is the layer's W_recur (3n, n) C-ordered: W_rz its first 2n rows, W_hcan the last n. Each
operand is a step view given as (root, r0, c0, cs), as in rnn_kernels. A step runs in phases,
each over the units in TALL-row blocks, since a GEMM needs the whole of the phase before it
(rh_prev for the candidate's, hcan_d for wrc's, [r_d; z_d] for the error sent back in time).
"""
from __future__ import annotations

from numba import njit, prange

from . import tiles
from .rnn_kernels import _share, _tile_rows
from .rowvec import ONE
from .vecmath import sig32, tanh32

_FMA = {"contract"}


@njit(cache=True, fastmath=_FMA, inline="always")
def _gates_rows(g, gr, gc, hp, pr, pc, rh, rr, rc, n, N, r0, r1):
    """Rows r0 .. r1: r, z = sig(r), sig(z) in place; rh_prev = r * h_prev."""
    for u in range(r0, r1):
        R, Z = g[gr + u, gc:gc + N], g[gr + n + u, gc:gc + N]
        P, RH = hp[pr + u, pc:pc + N], rh[rr + u, rc:rc + N]
        for j in range(N):
            R[j] = sig32(R[j])
        for j in range(N):
            Z[j] = sig32(Z[j])
        for j in range(N):
            RH[j] = R[j] * P[j]


@njit(cache=True, fastmath=_FMA, inline="always")
def _output_rows(g, gr, gc, hp, pr, pc, h, hr, hc, n, N, r0, r1):
    """Rows r0 .. r1: hcan = tanh(hcan) in place; h = h_prev + z * (hcan - h_prev)."""
    for u in range(r0, r1):
        C, Z = g[gr + 2 * n + u, gc:gc + N], g[gr + n + u, gc:gc + N]
        P, H = hp[pr + u, pc:pc + N], h[hr + u, hc:hc + N]
        for j in range(N):
            C[j] = tanh32(C[j])
        for j in range(N):
            H[j] = P[j] + Z[j] * (C[j] - P[j])


@njit(cache=True, fastmath=_FMA)
def _fprop_step(t, j0, w, W, g, gr, gc, gcs, h0, h, hr, hc, hcs, rh, rr, rc, rcs, n, N):
    """Step t of the forward sequence for the batch's columns j0 .. j0 + w."""
    MR = tiles.TALL
    flat_W, flat_g, flat_rh = W.reshape(W.size), g.reshape(g.size), rh.reshape(rh.size)
    lg, lh, lr = g.shape[1], h.shape[1], rh.shape[1]
    gi, hi, ri = gc + t * gcs + j0, hc + t * hcs + j0, rc + t * rcs + j0
    if t == 0:
        hp, pr, pc, flat_hp, hoff, ldh = h0, 0, j0, h0.reshape(h0.size), j0, N
    else:
        hp, pr, pc, flat_hp, hoff, ldh = h, hr, hi - hcs, h.reshape(h.size), \
            hr * lh + hi - hcs, lh
    for u in range(0, n, MR):               # r and z: their GEMM rows, then the gates
        mr = min(MR, n - u)
        for gate in range(2):
            row = gate * n + u
            _tile_rows(True, n, flat_W, row * n, 1, n, mr, flat_hp, hoff, ldh, flat_g,
                       (gr + row) * lg + gi, lg, w, 1.0)
        _gates_rows(g, gr, gi, hp, pr, pc, rh, rr, ri, n, w, u, u + mr)
    for u in range(0, n, MR):               # the candidate, from every unit's r * h_prev
        mr = min(MR, n - u)
        row = 2 * n + u
        _tile_rows(True, n, flat_W, row * n, 1, n, mr, flat_rh, rr * lr + ri, lr, flat_g,
                   (gr + row) * lg + gi, lg, w, 1.0)
        _output_rows(g, gr, gi, hp, pr, pc, h, hr, hi, n, w, u, u + mr)


@njit(parallel=True, cache=True, fastmath=_FMA)
def gru_fprop_cols(W, g, gr, gc, gcs, h0, h, hr, hc, hcs, rh, rr, rc, rcs, n, N, T, tasks):
    """The forward sequence, `tasks` tasks each a share of the batch's columns over all T
    steps; g: the gates [r; z; hcan] (3n rows a step), h0 (n, N) C-ordered."""
    for task in prange(tasks):
        j0, j1 = _share(task, tasks, N)
        for t in range(T):
            _fprop_step(t, j0, j1 - j0, W, g, gr, gc, gcs, h0, h, hr, hc, hcs, rh, rr, rc, rcs,
                        n, N)


@njit(cache=True, fastmath=_FMA)
def _bprop_step(t, j0, w, W, d, dr, dc, dcs, gd, er, ec, ecs, g, gr, gc, gcs, h0, h, hr, hc,
                hcs, wrc, h0e, n, N):
    """Step t of the backward sequence for the batch's columns j0 .. j0 + w: dh (d's step t)
    is complete; the error sent back goes to d's step t - 1, or h0e for t = 0."""
    MR = tiles.TALL
    flat_W, flat_gd, flat_wrc = W.reshape(W.size), gd.reshape(gd.size), wrc.reshape(wrc.size)
    ld, le, lh = d.shape[1], gd.shape[1], h.shape[1]
    di, ei, gi, hi = dc + t * dcs + j0, ec + t * ecs + j0, gc + t * gcs + j0, hc + t * hcs + j0
    if t == 0:
        hp, pr, pc = h0, 0, j0
        tgt, tr, tc, flat_t, ldt = h0e, 0, j0, h0e.reshape(h0e.size), N
    else:
        hp, pr, pc = h, hr, hi - hcs
        tgt, tr, tc, flat_t, ldt = d, dr, di - dcs, d.reshape(d.size), ld
    for u in range(n):                      # the candidate's and z's errors
        dh, P = d[dr + u, di:di + w], hp[pr + u, pc:pc + w]
        C, Z = g[gr + 2 * n + u, gi:gi + w], g[gr + n + u, gi:gi + w]
        CD, ZD = gd[er + 2 * n + u, ei:ei + w], gd[er + n + u, ei:ei + w]
        for j in range(w):
            CD[j] = (ONE - C[j] * C[j]) * dh[j] * Z[j]
        for j in range(w):
            ZD[j] = Z[j] * (ONE - Z[j]) * dh[j] * (C[j] - P[j])
    for u in range(0, n, MR):               # wrc = W_hcan.T @ hcan_d, then r's error
        mr = min(MR, n - u)
        _tile_rows(True, n, flat_W, 2 * n * n + u, n, 1, mr, flat_gd, (er + 2 * n) * le + ei,
                   le, flat_wrc, u * N + j0, N, w, 0.0)
        for v in range(u, u + mr):
            dh, P, X = d[dr + v, di:di + w], hp[pr + v, pc:pc + w], wrc[v, j0:j0 + w]
            R, Z = g[gr + v, gi:gi + w], g[gr + n + v, gi:gi + w]
            RD, out = gd[er + v, ei:ei + w], tgt[tr + v, tc:tc + w]
            for j in range(w):
                RD[j] = R[j] * (ONE - R[j]) * X[j] * P[j]
            for j in range(w):
                out[j] = out[j] + dh[j] * (ONE - Z[j]) + R[j] * X[j]
    for u in range(0, n, MR):               # the error sent back: += W_rz.T @ [r_d; z_d]
        _tile_rows(True, 2 * n, flat_W, u, n, 1, min(MR, n - u), flat_gd, er * le + ei, le,
                   flat_t, (tr + u) * ldt + tc, ldt, w, 1.0)


@njit(parallel=True, cache=True, fastmath=_FMA)
def gru_bprop_cols(W, d, dr, dc, dcs, gd, er, ec, ecs, g, gr, gc, gcs, h0, h, hr, hc, hcs, wrc,
                   h0e, n, N, T, tasks):
    """The backward sequence, `tasks` tasks each a share of the batch's columns over all T
    steps, last first: d (the errors of h, in place: each step's gets the error its next step
    sends back), gd the gates' pre-activation errors [r_d; z_d; hcan_d], wrc and h0e (n, N)
    C-ordered (h0e: the starting state's error, zero on entry)."""
    for task in prange(tasks):
        j0, j1 = _share(task, tasks, N)
        for t in range(T - 1, -1, -1):
            _bprop_step(t, j0, j1 - j0, W, d, dr, dc, dcs, gd, er, ec, ecs, g, gr, gc, gcs, h0,
                        h, hr, hc, hcs, wrc, h0e, n, N)
