"""Numba kernels of the LSTM on neon's layouts (imported by backends/cpu/rnn.py when first used,
where numba is installed): one step after its GEMM (lstm_fprop / lstm_bprop), and every step of
a sequence with its recurrent GEMMs: through the GEMM path's sgemm (lstm_fprop_seq /
lstm_bprop_seq), or as register tiles (tiles.py), the tasks splitting the hidden units
(lstm_fprop_tiles / lstm_bprop_tiles) or the batch (lstm_fprop_cols / lstm_bprop_cols).

Each operand is a step view given as (root, r0, c0): the C-ordered float32 2-D array it lies in
and its first row and column there, so a row's columns are unit-stride memory at a known
offset. A cell's row runs as explicit vectors, its activations included (rowvec.py: one load
per operand, the arithmetic, one store per result, WIDTH columns at a time; Numba's loops over
several row slices paid more for the slices and the overlap checks than for the arithmetic,
and a loop over one slice of 16 floats more than its activations). ifog holds the gates i, f,
o, g in row blocks of n. The standard cell: gates Logistic, cell candidate and cell output
Tanh.

The sequence kernels take a whole layer's steps in one call: step t's view of an operand is at
column c0 + t * cs of its root (cs = -N for the backward half of a BiLSTM). Each step is one
parallel region whose tasks own a share of the hidden units: a task runs its units' rows of the
recurrent GEMM (the GEMM path's cblas_sgemm, MKL's or OpenBLAS's, called through the pointer
`gemm`, single-threaded in the task through `local`: MKL_Set_Num_Threads_Local, a no-op for
the single-threaded OpenBLAS) and then their pointwise work, so the GEMM's
output is used by the core that wrote it and no step pays a Python call, a thread pool wake-up
or an MKL call of its own (the per-step loop spent ~2x the GEMM's own time around it).
A task's GEMM is cut into calls of at most `rmax` rows where the library runs small products
faster (gemm.kernel_gemm_call_macs: OpenBLAS's small-matrix kernels).
"""
from __future__ import annotations

from numba import njit, prange

from . import rowvec, tiles
from .rowvec import ONE
from .vecmath import sig32, tanh32

_FMA = {"contract"}
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _cell(i, f, o, g, prev):
    """The forward cell, a column at a time: the gates' activations (sig32 for i, f, o, tanh32
    for the candidate g), c = f*c_prev + i*g, c_act = tanh(c), h = o*c_act."""
    i, f, o, g = sig32(i), sig32(f), sig32(o), tanh32(g)
    c = f * prev + i * g
    a = tanh32(c)
    return i, f, o, g, c, a, o * a


_CELL, _cell1 = rowvec.vector_kernel(_cell, 5, 7), rowvec.scalar_kernel(_cell)


@njit(cache=True, inline="always")
def _fprop_offsets(r, ifog, ir, ic, cp, pr, pc, c, cr, cc, ca, ar, ac, h, hr, hc, n):
    """Row r's offsets in _fprop_rows's flat operands: the gates i, f, o, g, c_prev, c, c_act,
    h."""
    lg = ifog.shape[1]
    i = (ir + r) * lg + ic
    return i, i + n * lg, i + 2 * n * lg, i + 3 * n * lg, (pr + r) * cp.shape[1] + pc, \
        (cr + r) * c.shape[1] + cc, (ar + r) * ca.shape[1] + ac, (hr + r) * h.shape[1] + hc


@njit(cache=True, fastmath=_FMA, inline="always")
def _fprop_rows(ifog, ir, ic, cp, pr, pc, c, cr, cc, ca, ar, ac, h, hr, hc, n, N, r0, r1):
    """Rows r0 .. r1 of one step: ifog's pre-activations in, activations out; c, c_act, h
    (_cell). Whole vectors of columns as one rowvec kernel each (the activations as vecmath's
    formulas on vectors, the same bits), the rest as scalars in a second pass over the rows
    where there are any. Against Numba loops over each row's slices for the activations (in
    place, vectorised, but each a loop around 16 floats) and rowvec kernels for the products:
    the batch split's forward steps, 256 units, batch 32, 50 steps, 4.71 against 5.29 ms
    (order-balanced, fresh numba cache), the same bits out."""
    G, P, C, A, H = ifog.reshape(ifog.size), cp.reshape(cp.size), c.reshape(c.size), \
        ca.reshape(ca.size), h.reshape(h.size)
    full = N - N % tiles.WIDTH
    for r in range(r0, r1):
        i, f, o, g, prev, cell, act, out = _fprop_offsets(r, ifog, ir, ic, cp, pr, pc, c, cr,
                                                          cc, ca, ar, ac, h, hr, hc, n)
        for j in range(0, full, tiles.WIDTH):
            _CELL(G, i + j, G, f + j, G, o + j, G, g + j, P, prev + j, G, i + j, G, f + j,
                  G, o + j, G, g + j, C, cell + j, A, act + j, H, out + j)
    if full == N:
        return
    for r in range(r0, r1):
        i, f, o, g, prev, cell, act, out = _fprop_offsets(r, ifog, ir, ic, cp, pr, pc, c, cr,
                                                          cc, ca, ar, ac, h, hr, hc, n)
        for j in range(full, N):
            G[i + j], G[f + j], G[o + j], G[g + j], C[cell + j], A[act + j], H[out + j] = \
                _cell1(G[i + j], G[f + j], G[o + j], G[g + j], P[prev + j])


# The backward cell's arithmetic, a column at a time, written once and run as vectors of
# tiles.WIDTH columns (rowvec.vector_kernel: the cell error and the gate errors as one kernel,
# 0.97x the backward steps' time of one kernel each) and as scalars for the columns left over
# (rowvec.scalar_kernel): the cell error e of the last step, of the others (plus the next
# step's cell error times its forget gate), then the four gates' pre-activation errors.

def _cell_error_last(a, o, d):
    return (ONE - a * a) * o * d


def _cell_error(a, o, d, cn, fn):
    return (ONE - a * a) * o * d + cn * fn


def _gate_errors(e, a, o, d, i, f, g, prev):
    return i * (ONE - i) * e * g, f * (ONE - f) * e * prev, o * (ONE - o) * d * a, \
        (ONE - g * g) * e * i


def _cell_back_last(a, o, d, i, f, g, prev):
    e = _cell_error_last(a, o, d)
    return (e,) + _gate_errors(e, a, o, d, i, f, g, prev)


def _cell_back(a, o, d, cn, fn, i, f, g, prev):
    e = _cell_error(a, o, d, cn, fn)
    return (e,) + _gate_errors(e, a, o, d, i, f, g, prev)


_CELL_BACK_LAST, _CELL_BACK = rowvec.vector_kernel(_cell_back_last, 7, 5), \
    rowvec.vector_kernel(_cell_back, 9, 5)
_cell_error_last1, _cell_error1, _gate_errors1 = (
    rowvec.scalar_kernel(_cell_error_last), rowvec.scalar_kernel(_cell_error),
    rowvec.scalar_kernel(_gate_errors))


@njit(cache=True, inline="always")
def _bprop_offsets(r, dh, dr, dc, cd, er, ec, cdn, nr, nc, fn, fr, fc, ir, ic, lg, cp, pr, pc,
                   ca, ar, ac, gr, gc, lgd, n):
    """Row r's offsets in _bprop_rows's flat operands: the gates i, f, o, g, dh, cd, c_act,
    the gate errors di, df, do, dg, c_prev, the next step's cell error and forget gate."""
    i, d = (ir + r) * lg + ic, (dr + r) * dh.shape[1] + dc
    e, a = (er + r) * cd.shape[1] + ec, (ar + r) * ca.shape[1] + ac
    di = (gr + r) * lgd + gc
    return i, i + n * lg, i + 2 * n * lg, i + 3 * n * lg, d, e, a, \
        di, di + n * lgd, di + 2 * n * lgd, di + 3 * n * lgd, (pr + r) * cp.shape[1] + pc, \
        (nr + r) * cdn.shape[1] + nc, (fr + r) * fn.shape[1] + fc


@njit(cache=True, fastmath=_FMA, inline="always")
def _bprop_rows(dh, dr, dc, cd, er, ec, cdn, nr, nc, fn, fr, fc, has_next, ifog, ir, ic,
                cp, pr, pc, ca, ar, ac, ifd, gr, gc, n, N, r0, r1):
    """Rows r0 .. r1 of one step of bprop: cd = (1 - c_act**2) * o * dh (+ cd_next * f_next);
    ifd: the gates' pre-activation errors. Whole vectors of columns as rowvec kernels, the rest
    as scalars (hot, 16 columns: 2.4 against 5.0 ns a cell as Numba loops over row slices; 32
    columns: 0.75 against 2.5), in a second pass over the rows where there are any: the scalar
    columns inside the rows' loop, even where there were none, made the batch split's backward
    steps 1.07x slower (256 units, batch 32, 50 steps: 6.16 against 5.70 ms, order-balanced)."""
    D, E, EN, FN = dh.reshape(dh.size), cd.reshape(cd.size), cdn.reshape(cdn.size), \
        fn.reshape(fn.size)
    G, P, A, GD = ifog.reshape(ifog.size), cp.reshape(cp.size), ca.reshape(ca.size), \
        ifd.reshape(ifd.size)
    lg, lgd = ifog.shape[1], ifd.shape[1]
    full = N - N % tiles.WIDTH
    for r in range(r0, r1):
        i, f, o, g, d, e, a, di, df, do, dg, prev, nx, fx = _bprop_offsets(
            r, dh, dr, dc, cd, er, ec, cdn, nr, nc, fn, fr, fc, ir, ic, lg, cp, pr, pc, ca, ar, ac,
            gr, gc, lgd, n)
        for j in range(0, full, tiles.WIDTH):
            if has_next:
                _CELL_BACK(A, a + j, G, o + j, D, d + j, EN, nx + j, FN, fx + j, G, i + j,
                           G, f + j, G, g + j, P, prev + j, E, e + j, GD, di + j, GD, df + j,
                           GD, do + j, GD, dg + j)
            else:
                _CELL_BACK_LAST(A, a + j, G, o + j, D, d + j, G, i + j, G, f + j, G, g + j,
                                P, prev + j, E, e + j, GD, di + j, GD, df + j, GD, do + j,
                                GD, dg + j)
    if full == N:
        return
    for r in range(r0, r1):
        i, f, o, g, d, e, a, di, df, do, dg, prev, nx, fx = _bprop_offsets(
            r, dh, dr, dc, cd, er, ec, cdn, nr, nc, fn, fr, fc, ir, ic, lg, cp, pr, pc, ca, ar, ac,
            gr, gc, lgd, n)
        for j in range(full, N):
            if has_next:
                E[e + j] = _cell_error1(A[a + j], G[o + j], D[d + j], EN[nx + j], FN[fx + j])
            else:
                E[e + j] = _cell_error_last1(A[a + j], G[o + j], D[d + j])
            GD[di + j], GD[df + j], GD[do + j], GD[dg + j] = _gate_errors1(
                E[e + j], A[a + j], G[o + j], D[d + j], G[i + j], G[f + j], G[g + j],
                P[prev + j])


@njit(cache=True, fastmath=_FMA)
def lstm_fprop(ifog, ir, ic, cp, pr, pc, c, cr, cc, ca, ar, ac, h, hr, hc, n, N):
    """One step (every row): ifog: pre-activations in, activations out; c = f*c_prev + i*g,
    c_act = tanh(c), h = o*c_act."""
    _fprop_rows(ifog, ir, ic, cp, pr, pc, c, cr, cc, ca, ar, ac, h, hr, hc, n, N, 0, n)


@njit(cache=True, fastmath=_FMA)
def lstm_bprop(dh, dr, dc, cd, er, ec, cdn, nr, nc, fn, fr, fc, has_next, ifog, ir, ic,
               cp, pr, pc, ca, ar, ac, ifd, gr, gc, n, N):
    """One step of bprop (every row): cd = (1 - c_act**2) * o * dh (+ cd_next * f_next);
    ifd: the gates' pre-activation errors."""
    _bprop_rows(dh, dr, dc, cd, er, ec, cdn, nr, nc, fn, fr, fc, has_next, ifog, ir, ic,
                cp, pr, pc, ca, ar, ac, ifd, gr, gc, n, N, 0, n)


@njit(cache=True, inline="always")
def _call_rows(u, rmax):
    """Rows a GEMM call of a task's u rows takes: u where rmax is 0 (no bound), else equal
    shares of at most rmax rows (u = 128, rmax = 30: five calls of 26 rows)."""
    if rmax <= 0 or u <= rmax:
        return max(u, 1)
    count = -(-u // rmax)
    return -(-u // count)


@njit(parallel=True, cache=True, fastmath=_FMA)
def lstm_fprop_seq(gemm, local, W, ifog, ir, ic, ics, h0, c0, h, hr, hc, hcs, c, cr, cc, ccs,
                   ca, ar, ac, acs, n, N, T, tasks, rmax):
    """T steps of fprop: step t adds W (4n, n) @ h_prev to ifog's step t (which holds the input
    projections), then runs the cell; h_prev, c_prev are h0, c0 (n, N) for step 0, else h's and
    c's step t - 1. `tasks` tasks a step, each a share of the hidden units; a GEMM call takes at
    most `rmax` rows (_call_rows)."""
    for t in range(T):
        for task in prange(tasks):
            u0, u1 = task * n // tasks, (task + 1) * n // tasks
            gi, hi, ci, ai = ic + t * ics, hc + t * hcs, cc + t * ccs, ac + t * acs
            if t == 0:
                hp, hpc, cp, pr, pc = h0, 0, c0, 0, 0
            else:
                hp, hpc, cp, pr, pc = h[hr:], hi - hcs, c, cr, ci - ccs
            if u1 > u0:
                before = local(1)
                rows = _call_rows(u1 - u0, rmax)
                for gate in range(4):
                    for r in range(u0, u1, rows):
                        row = gate * n + r
                        gemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, min(rows, u1 - r), N, n, 1.0,
                             W[row:].ctypes.data, n, hp[:, hpc:].ctypes.data, hp.shape[1], 1.0,
                             ifog[ir + row:, gi:].ctypes.data, ifog.shape[1])
                local(before)
            _fprop_rows(ifog, ir, gi, cp, pr, pc, c, cr, ci, ca, ar, ai, h, hr, hi, n, N, u0, u1)


@njit(cache=True, inline="always")
def _errors_back(gemm, local, W, ifd, gr, gc, out, orow, ocol, beta, n, N, u0, u1, rmax):
    """Rows u0 .. u1 of out's (n, N) view at (orow, ocol) = W.T @ ifd's step view at (gr, gc),
    plus beta times themselves: the error a step sends back in time. Single-threaded in the
    task (`local`), in calls of at most `rmax` rows (_call_rows)."""
    before = local(1)
    rows = _call_rows(u1 - u0, rmax)
    for r in range(u0, u1, rows):
        gemm(_ROW_MAJOR, _TRANS, _NO_TRANS, min(rows, u1 - r), N, 4 * n, 1.0,
             W[:, r:].ctypes.data, n, ifd[gr:, gc:].ctypes.data, ifd.shape[1], beta,
             out[orow + r:, ocol:].ctypes.data, out.shape[1])
    local(before)


@njit(parallel=True, cache=True, fastmath=_FMA)
def lstm_bprop_seq(gemm, local, W, dh, dr, dc, dcs, cd, er, ec, ecs, ifog, ir, ic, ics, c0, c, cr,
                   cc, ccs, ca, ar, ac, acs, ifd, gr, gc, gcs, n, N, T, tasks, rmax, h0e, c0e):
    """T steps of bprop, the last first: for t < T - 1 dh's step t gets W.T @ ifd's step t + 1
    (the error sent back in time), then the cell's bprop writes cd's and ifd's step t (c_prev:
    c0 for step 0). Then the starting state's errors, h0e = W.T @ ifd's step 0 and c0e = cd's
    step 0 * f's step 0 (both (n, N), C-ordered), each task its units' rows. Tasks as in
    lstm_fprop_seq."""
    for t in range(T - 1, -1, -1):
        for task in prange(tasks):
            u0, u1 = task * n // tasks, (task + 1) * n // tasks
            di, ei, gi, ii, ai = dc + t * dcs, ec + t * ecs, gc + t * gcs, ic + t * ics, \
                ac + t * acs
            has_next = t < T - 1
            if has_next and u1 > u0:
                _errors_back(gemm, local, W, ifd, gr, gi + gcs, dh, dr, di, 1.0, n, N, u0, u1,
                             rmax)
            if t == 0:
                cp, pr, pc = c0, 0, 0
            else:
                cp, pr, pc = c, cr, cc + (t - 1) * ccs
            # (the next step's views are read only where has_next)
            _bprop_rows(dh, dr, di, cd, er, ei, cd, er, ei + ecs, ifog, ir + n, ii + ics,
                        has_next, ifog, ir, ii, cp, pr, pc, ca, ar, ai, ifd, gr, gi, n, N, u0, u1)
    for task in prange(tasks):
        u0, u1 = task * n // tasks, (task + 1) * n // tasks
        if u1 > u0:
            _errors_back(gemm, local, W, ifd, gr, gc, h0e, 0, 0, 0.0, n, N, u0, u1, rmax)
        for r in range(u0, u1):
            out, cdel, f = c0e[r], cd[er + r, ec:ec + N], ifog[ir + n + r, ic:ic + N]
            for j in range(N):
                out[j] = cdel[j] * f[j]


# ---------------------------------------------------------------- register-tile sequences
# The same sequences with the recurrent GEMM as register tiles (tiles.py) reading W in place
# (its rows forward, its columns backward: as fast as packed panels, measured, and no packing a
# call): no library call a step, and the GEMM near the core's peak where the BLAS's
# small-matrix kernels ran at ~60% of it. Two ways to share the work (one step's work for a
# block of units and columns is _fprop_step / _bprop_step in both):
# - the units (lstm_*_tiles): one parallel region a step, each task its units' rows over the
#   whole batch, in ROWS-row tiles;
# - the batch, where it holds a vector width of columns for every thread (lstm_*_cols): a task
#   runs every step of the sequence for its own columns, all units, with no data of another
#   task's and no wait for one, so the whole sequence is one parallel region (the unit split's
#   GEMM reads the other core's half of h_prev or of the gate errors each step). Each core
#   reads all of W each step (from L3 where it does not stay in L2); its tiles are TALL rows
#   one vector wide (tiles.tall_gemm). Measured, the forward GEMM runs 77 us a step against
#   the unit split's 90.
# A step takes its units tiles.ROWS (or TALL) at a time: forward, the lines its pointwise work
# will write are asked for first (tiles.prefetch_rows), then the GEMM's rows for those units
# (four gate panels forward, one backward), then their pointwise work, while the rows are still
# in cache. Backward asks for nothing ahead: its eleven row groups a block (the cell's operands
# and the gate errors) made it slower (order-balanced, 256 units, batch 32, 50 steps: 5.40-5.44
# against 5.58-5.80 ms with the batch split, 5.34 against 5.63 with the unit split).

@njit(cache=True, fastmath=_FMA)
def _tile_rows(tall, K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, N, beta):
    """tiles.tall_gemm where `tall`, else tiles.panel_gemm."""
    if tall:
        tiles.tall_gemm(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, N, beta)
    else:
        tiles.panel_gemm(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, N, beta)


@njit(cache=True, fastmath=_FMA)
def _fprop_step(t, T, u0, u1, j0, w, tall, W, ifog, ir, ic, ics, h0, c0, h, hr, hc, hcs, c, cr,
                cc, ccs, ca, ar, ac, acs, n, N):
    """Step t of lstm_fprop_seq (of T) for units u0 .. u1 and the batch's columns j0 .. j0 + w.
    The lines a block's cell will write (its rows of c, c_act and h) are asked for ahead: with
    tall tiles, while the block before runs its tiles (the gate panels i, f, o each ask for one
    of the three, tiles.tall_gemm_spread; the last block of a step asks for the next step's
    first); else all at once before the block's tiles."""
    MR = tiles.TALL if tall else tiles.ROWS
    flat_W, flat_ifog = W.reshape(W.size), ifog.reshape(ifog.size)
    outs, rows, cols = (c, ca, h), (cr, ar, hr), (cc, ac, hc)
    li, lh = ifog.shape[1], h.shape[1]
    gi, hi, ci, ai = ic + t * ics + j0, hc + t * hcs + j0, cc + t * ccs + j0, ac + t * acs + j0
    if t == 0:
        hp, hoff, ldh, cp, pr, pc = h0.reshape(h0.size), j0, N, c0, 0, j0
    else:
        hp, hoff, ldh, cp, pr, pc = h.reshape(h.size), hr * lh + hi - hcs, lh, c, cr, ci - ccs
    for u in range(u0, u1, MR):
        mr = min(MR, u1 - u)
        if not tall or (t == 0 and u == u0):
            tiles.prefetch_rows(c, cr + u, cr + u + mr, ci, w)
            tiles.prefetch_rows(ca, ar + u, ar + u + mr, ai, w)
            tiles.prefetch_rows(h, hr + u, hr + u + mr, hi, w)
        if tall:    # the next block: its step, first unit and units (none after the last)
            nt, nu, nm = (t, u + MR, min(MR, u1 - u - MR)) if u + MR < u1 else \
                (t + 1, u0, min(MR, u1 - u0) if t + 1 < T else 0)
            steps = (ccs, acs, hcs)
        for gate in range(4):
            row = gate * n + u
            if tall:
                g = min(gate, 2)
                tiles.tall_gemm_spread(n, flat_W, row * n, 1, n, mr, hp, hoff, ldh, flat_ifog,
                                       (ir + row) * li + gi, li, w, 1.0, outs[g], rows[g] + nu,
                                       cols[g] + nt * steps[g] + j0, nm if gate < 3 else 0)
            else:
                tiles.panel_gemm(n, flat_W, row * n, 1, n, mr, hp, hoff, ldh, flat_ifog,
                                 (ir + row) * li + gi, li, w, 1.0)
        _fprop_rows(ifog, ir, gi, cp, pr, pc, c, cr, ci, ca, ar, ai, h, hr, hi, n, w, u, u + mr)


@njit(cache=True, fastmath=_FMA)
def _bprop_step(t, T, u0, u1, j0, w, tall, W, dh, dr, dc, dcs, cd, er, ec, ecs, ifog, ir, ic,
                ics, c0, c, cr, cc, ccs, ca, ar, ac, acs, ifd, gr, gc, gcs, n):
    """Step t of lstm_bprop_seq for units u0 .. u1 and the batch's columns j0 .. j0 + w."""
    MR = tiles.TALL if tall else tiles.ROWS
    K = 4 * n
    flat_W, flat_dh, flat_ifd = W.reshape(W.size), dh.reshape(dh.size), ifd.reshape(ifd.size)
    ld, lg = dh.shape[1], ifd.shape[1]
    di, ei, gi, ii, ai = dc + t * dcs + j0, ec + t * ecs + j0, gc + t * gcs + j0, \
        ic + t * ics + j0, ac + t * acs + j0
    has_next = t < T - 1
    if t == 0:
        cp, pr, pc = c0, 0, j0
    else:
        cp, pr, pc = c, cr, cc + (t - 1) * ccs + j0
    for u in range(u0, u1, MR):
        mr = min(MR, u1 - u)
        if has_next:
            _tile_rows(tall, K, flat_W, u, n, 1, mr, flat_ifd, gr * lg + gi + gcs, lg, flat_dh,
                       (dr + u) * ld + di, ld, w, 1.0)
        # (the next step's views are read only where has_next)
        _bprop_rows(dh, dr, di, cd, er, ei, cd, er, ei + ecs, ifog, ir + n, ii + ics, has_next,
                    ifog, ir, ii, cp, pr, pc, ca, ar, ai, ifd, gr, gi, n, w, u, u + mr)


@njit(cache=True, fastmath=_FMA)
def _start_errors_tiles(u0, u1, j0, w, tall, W, cd, er, ec, ifog, ir, ic, ifd, gr, gc, n, N,
                        h0e, c0e):
    """The starting state's errors for units u0 .. u1 and columns j0 .. j0 + w: h0e = W.T @
    ifd's step 0, c0e = cd's step 0 * f's step 0 (both (n, N), C-ordered)."""
    MR = tiles.TALL if tall else tiles.ROWS
    flat_W, flat_ifd, flat_h0e = W.reshape(W.size), ifd.reshape(ifd.size), h0e.reshape(h0e.size)
    lg = ifd.shape[1]
    for u in range(u0, u1, MR):
        _tile_rows(tall, 4 * n, flat_W, u, n, 1, min(MR, u1 - u), flat_ifd, gr * lg + gc + j0,
                   lg, flat_h0e, u * N + j0, N, w, 0.0)
    for r in range(u0, u1):
        out = c0e[r, j0:j0 + w]
        cdel, f = cd[er + r, ec + j0:ec + j0 + w], ifog[ir + n + r, ic + j0:ic + j0 + w]
        for j in range(w):
            out[j] = cdel[j] * f[j]


@njit(cache=True, inline="always")
def _share(task, tasks, N):
    """Columns j0 .. j1 of the batch for `task`: whole vectors (tiles.WIDTH), the last task
    the rest."""
    vectors = N // tiles.WIDTH
    j0 = task * vectors // tasks * tiles.WIDTH
    j1 = N if task == tasks - 1 else (task + 1) * vectors // tasks * tiles.WIDTH
    return j0, j1


@njit(parallel=True, cache=True, fastmath=_FMA)
def lstm_fprop_tiles(W, ifog, ir, ic, ics, h0, c0, h, hr, hc, hcs, c, cr, cc, ccs,
                     ca, ar, ac, acs, n, N, T, tasks):
    """lstm_fprop_seq with the recurrent GEMM as register tiles over W (4n, n), C-ordered,
    `tasks` tasks a step each a share of the units."""
    for t in range(T):
        for task in prange(tasks):
            _fprop_step(t, T, task * n // tasks, (task + 1) * n // tasks, 0, N, False, W, ifog,
                        ir, ic, ics, h0, c0, h, hr, hc, hcs, c, cr, cc, ccs, ca, ar, ac, acs,
                        n, N)


@njit(parallel=True, cache=True, fastmath=_FMA)
def lstm_bprop_tiles(W, dh, dr, dc, dcs, cd, er, ec, ecs, ifog, ir, ic, ics, c0, c, cr,
                     cc, ccs, ca, ar, ac, acs, ifd, gr, gc, gcs, n, N, T, tasks, h0e, c0e):
    """lstm_bprop_seq with the errors sent back in time as register tiles over W.T, read from
    W (4n, n) C-ordered (the array under W_recur.T), `tasks` tasks a step each a share of the
    units."""
    for t in range(T - 1, -1, -1):
        for task in prange(tasks):
            _bprop_step(t, T, task * n // tasks, (task + 1) * n // tasks, 0, N, False, W, dh,
                        dr, dc, dcs, cd, er, ec, ecs, ifog, ir, ic, ics, c0, c, cr, cc, ccs,
                        ca, ar, ac, acs, ifd, gr, gc, gcs, n)
    for task in prange(tasks):
        _start_errors_tiles(task * n // tasks, (task + 1) * n // tasks, 0, N, False, W, cd, er,
                            ec, ifog, ir, ic, ifd, gr, gc, n, N, h0e, c0e)


@njit(parallel=True, cache=True, fastmath=_FMA)
def lstm_fprop_cols(W, ifog, ir, ic, ics, h0, c0, h, hr, hc, hcs, c, cr, cc, ccs,
                    ca, ar, ac, acs, n, N, T, tasks):
    """lstm_fprop_tiles with `tasks` tasks each a share of the batch's columns (_share) over
    all T steps."""
    for task in prange(tasks):
        j0, j1 = _share(task, tasks, N)
        for t in range(T):
            _fprop_step(t, T, 0, n, j0, j1 - j0, True, W, ifog, ir, ic, ics, h0, c0, h, hr, hc,
                        hcs, c, cr, cc, ccs, ca, ar, ac, acs, n, N)


@njit(parallel=True, cache=True, fastmath=_FMA)
def lstm_bprop_cols(W, dh, dr, dc, dcs, cd, er, ec, ecs, ifog, ir, ic, ics, c0, c, cr,
                    cc, ccs, ca, ar, ac, acs, ifd, gr, gc, gcs, n, N, T, tasks, h0e, c0e):
    """lstm_bprop_tiles with `tasks` tasks each a share of the batch's columns (_share) over
    all T steps, the starting state's errors included."""
    for task in prange(tasks):
        j0, j1 = _share(task, tasks, N)
        for t in range(T - 1, -1, -1):
            _bprop_step(t, T, 0, n, j0, j1 - j0, True, W, dh, dr, dc, dcs, cd, er, ec, ecs,
                        ifog, ir, ic, ics, c0, c, cr, cc, ccs, ca, ar, ac, acs, ifd, gr, gc,
                        gcs, n)
        _start_errors_tiles(0, n, j0, j1 - j0, True, W, cd, er, ec, ifog, ir, ic, ifd, gr, gc,
                            n, N, h0e, c0e)
