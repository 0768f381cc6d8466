"""Register-tile float32 GEMM for Numba kernels (imported by rnn_kernels when first used):
C = A @ B + beta * C over a panel of A's rows, A, B and C any strided float32 memory; and, at
the end of the file, whole thread-parallel products of such panels (`gemm`) with B packed from
a transposed operand by register transposes (`pack_transposed`), for the LSTM's large GEMMs.

Why: an LSTM step's recurrent GEMM is a thin product (4 * 128 gate rows by 256 deep by batch 32
columns a task) run 50 times a sequence from the same A. A BLAS call pays its packing and
blocking on every one of them: single-threaded, OpenBLAS's small-matrix kernels ran such a
product at ~70 GFLOP/s on the 2-core Zen 4 development machine, whose core peak is ~116
GFLOP/s. The tile here runs at that peak (113-116 GFLOP/s at 512x256x32 and at 128x1024x32).

The tile (`_tile(R, V)`, an llvmlite intrinsic) holds R rows by V vectors of C in registers as
<VW x float> accumulators, and for each k loads V vectors of B's row k and broadcasts each of
A's R values of column k into one fused multiply-add a vector:

    for k in range(K):
        b = B[k, 0:V*VW]                                  # V vector loads
        for r in range(R):
            acc[r] += A[aoff + k * ak + r * ar] * b       # a broadcast and V FMAs
    C[r, 0:V*VW] = acc[r] + beta * C[r, 0:V*VW]           # C not read where beta is 0

A is read in place through its two strides: a row-major W's rows (ak = 1, ar = the row
length) or its columns, i.e. W.T's rows (ak = the row length, ar = 1). Packing A into k-major
panels first was measured no faster (74.6 against 74.5 us at 512x256x32; 72.5 against 73.4 at
128x1024x32) and cost ~150 us a 1 MB W. A panel of ROWS rows runs whole tiles across C's
columns (`panel_gemm`); a shorter one runs single-row tiles; columns past the last whole vector
run as a plain loop. Where C is only a vector or two wide (a task's share of a batch),
`tall_gemm` runs TALL = ROWS * VECTORS rows a vector wide: the same accumulator count, so the
same loads of A and B a multiply-add (a ROWS-row tile of one vector holds half as many; in the
LSTM's backward kernel that split ran 1.04x the unit split's time, with tall tiles 0.87x).

Numba's own loops around the tiles: a short loop (16 or 32 iterations) or one over
`range(start, stop)` may not vectorise where the same loop from 0 over a long run does (measured:
tanh32 over 256 floats 3.3 against 0.6 ns an element); rnn_kernels keeps its cell loops short
and from 0 (their measured best).

Shape per machine (`TILE`: rows, vectors, vector width), from the host LLVM targets:
AVX-512 (32 vector registers): 8 rows by 2 vectors of 16 (16 accumulators, 32 columns); other
x86-64 with AVX2 + FMA (16 registers): 6 by 2 of 8. Elsewhere TILE is None and callers keep
their BLAS calls (rnn.py); the AVX2 shape is not measured here (no such machine).
"""
from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

_FMA = {"contract"}


def _tile_shape() -> tuple | None:
    """(rows, vectors, vector width) of the tile for this host, None where none is set."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    import llvmlite.binding as llvm
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return (8, 2, 16)
    if features.get("avx2") and features.get("fma"):
        return (6, 2, 8)
    return None


TILE = _tile_shape()
ROWS, VECTORS, WIDTH = TILE if TILE is not None else (1, 1, 1)


def _data(context, builder, aryty, value):
    """A float* to the first element of a Numba array value."""
    return context.make_array(aryty)(context, builder, value).data


def _prefetch(builder, ptr, write: bool = True):
    """Emit llvm.prefetch of ptr's cache line, for writing (else reading), into L1."""
    i32 = ir.IntType(32)
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]),
        "llvm.prefetch.p0")
    builder.call(fn, [ptr, ir.Constant(i32, int(write)), ir.Constant(i32, 3), ir.Constant(i32, 1)])


_SPREAD_SHIFT = 2      # a spread tile asks for a line every 2**_SPREAD_SHIFT steps of k


def _tile(R: int, V: int, VW: int, masked: bool = False, ahead: int = 0,
          spread: bool = False):
    """The intrinsic tile(K, A, aoff, astride, arstride, B, boff, ldb, C, coff, ldc, beta): R
    rows by V vectors of VW columns, C[coff + r*ldc + j] = sum_k A[aoff + k*astride +
    r*arstride] * B[boff + k*ldb + j] + beta * C[...] (C is not read where beta == 0). A, B, C:
    float32 arrays, the offsets and strides in elements. `masked` (V = 1): one more argument,
    `lanes` (1 .. VW - 1), and only the first `lanes` columns of B are read and of C read and
    written (llvm.masked.load / masked.store): a panel's columns past its last whole vector.
    `ahead`: step k also asks for A's row k mod R, `ahead` steps of k on (a
    prefetch, which cannot fault past A's end): for A's rows read along their length (astride
    1), R lines at once, where the hardware's prefetchers kept up with one stream (A's columns)
    and fell behind on R. `spread` (not masked): four more arguments (P, poff, pld, count): at
    step k = 4i (i < count) line P[poff + i*pld] is asked for, for writing: lines a kernel will
    write after this tile, asked for a few at a time while the arithmetic runs (all at once,
    before it, they held up its loads)."""
    assert V == 1 or not masked
    assert not (masked and spread)

    def typer(typingctx, *args):
        if not all(isinstance(a, types.Array) and a.dtype == types.float32
                   for a in (args[1], args[5], args[8]) + args[12:13] * spread):
            return None
        return types.void(*args), codegen

    if spread:
        @intrinsic
        def tile(typingctx, K, A, aoff, astride, arstride, B, boff, ldb, C, coff, ldc, beta,
                 P, poff, pld, count):
            return typer(typingctx, K, A, aoff, astride, arstride, B, boff, ldb, C, coff, ldc,
                         beta, P, poff, pld, count)
    elif masked:
        @intrinsic
        def tile(typingctx, K, A, aoff, astride, arstride, B, boff, ldb, C, coff, ldc, beta,
                 lanes):
            return typer(typingctx, K, A, aoff, astride, arstride, B, boff, ldb, C, coff, ldc,
                         beta, lanes)
    else:
        @intrinsic
        def tile(typingctx, K, A, aoff, astride, arstride, B, boff, ldb, C, coff, ldc, beta):
            return typer(typingctx, K, A, aoff, astride, arstride, B, boff, ldb, C, coff, ldc,
                         beta)

    # the code generator the intrinsics above return (typer)
    def codegen(context, builder, signature, args):
        at = signature.args
        idx = {i: context.cast(builder, args[i], at[i], types.int64)
               for i in (0, 2, 3, 4, 6, 7, 9, 10)}
        K, aoff, astride, arstride, boff, ldb, coff, ldc = \
            (idx[i] for i in (0, 2, 3, 4, 6, 7, 9, 10))
        Ap, Bp, Cp = (_data(context, builder, at[i], args[i]) for i in (1, 5, 8))
        beta = context.cast(builder, args[11], at[11], types.float32)
        f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
        vt = ir.VectorType(f32, VW)
        vp = vt.as_pointer()
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt] * 3),
                                             f"llvm.fma.v{VW}f32")
        undef, zeros = ir.Constant(vt, ir.Undefined), ir.Constant(vt, None)
        lane0, splat = ir.Constant(i32, 0), ir.Constant(ir.VectorType(i32, VW), None)

        def broadcast(s):
            return builder.shuffle_vector(builder.insert_element(undef, s, lane0), undef,
                                          splat)

        def const(v):
            return ir.Constant(i64, v)

        if masked:
            mt = ir.VectorType(ir.IntType(1), VW)
            masked_load = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vt, [vp, i32, mt, vt]),
                f"llvm.masked.load.v{VW}f32.p0")
            masked_store = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [vt, vp, i32, mt]),
                f"llvm.masked.store.v{VW}f32.p0")
            lanes = context.cast(builder, args[12], at[12], types.int32)
            iota = ir.Constant(ir.VectorType(i32, VW), list(range(VW)))
            mask = builder.icmp_signed("<", iota, builder.shuffle_vector(
                builder.insert_element(ir.Constant(ir.VectorType(i32, VW), ir.Undefined),
                                       lanes, lane0), ir.Constant(ir.VectorType(i32, VW),
                                                                  ir.Undefined), splat))

        def load(p):
            if masked:
                return builder.call(masked_load, [p, ir.Constant(i32, 4), mask, zeros])
            return builder.load(p, align=4)

        def store(value, p):
            if masked:
                builder.call(masked_store, [value, p, ir.Constant(i32, 4), mask])
            else:
                builder.store(value, p, align=4)

        acc = [[cgutils.alloca_once_value(builder, zeros) for _ in range(V)]
               for _ in range(R)]
        if spread:
            P0 = builder.gep(_data(context, builder, at[12], args[12]),
                             [context.cast(builder, args[13], at[13], types.int64)])
            pld, count = (context.cast(builder, args[i], at[i], types.int64) for i in (14, 15))
        A0, B0, C0 = (builder.gep(p, [o]) for p, o in ((Ap, aoff), (Bp, boff), (Cp, coff)))
        for r in range(R):          # C's lines, on their way while the k loop runs
            crow = builder.gep(C0, [builder.mul(const(r), ldc)])
            for v in range(0, V * VW, 16):
                _prefetch(builder, builder.gep(crow, [const(v)]))
        with cgutils.for_range(builder, K) as loop:
            k = loop.index
            if ahead:
                row = builder.urem(k, const(R))
                _prefetch(builder, builder.gep(A0, [builder.add(
                    builder.mul(builder.add(k, const(ahead)), astride),
                    builder.mul(row, arstride))]), write=False)
            if spread:
                i = builder.lshr(k, const(_SPREAD_SHIFT))
                now = builder.and_(builder.icmp_signed("<", i, count), builder.icmp_signed(
                    "==", builder.and_(k, const((1 << _SPREAD_SHIFT) - 1)), const(0)))
                with builder.if_then(now, likely=False):
                    _prefetch(builder, builder.gep(P0, [builder.mul(i, pld)]))
            brow = builder.gep(B0, [builder.mul(k, ldb)])
            b = [load(builder.bitcast(builder.gep(brow, [const(v * VW)]), vp))
                 for v in range(V)]
            arow = builder.gep(A0, [builder.mul(k, astride)])
            for r in range(R):
                a = broadcast(builder.load(builder.gep(arow, [builder.mul(const(r),
                                                                          arstride)]),
                                           align=4))
                for v in range(V):
                    builder.store(builder.call(fma, [a, b[v], builder.load(acc[r][v])]),
                                  acc[r][v])
        reads_c = builder.fcmp_unordered("!=", beta, ir.Constant(f32, 0.0))
        scale = broadcast(beta)
        for r in range(R):
            crow = builder.gep(C0, [builder.mul(const(r), ldc)])
            for v in range(V):
                p = builder.bitcast(builder.gep(crow, [const(v * VW)]), vp)
                with builder.if_then(reads_c):
                    old = load(p)
                    builder.store(builder.call(fma, [scale, old, builder.load(acc[r][v])]),
                                  acc[r][v])
                store(builder.load(acc[r][v]), p)
        return context.get_dummy_value()

    return tile


_FULL = _tile(ROWS, VECTORS, WIDTH)     # ROWS x VECTORS * WIDTH columns
_FULL1 = _tile(ROWS, 1, WIDTH)          # ROWS x WIDTH
_ROW = _tile(1, VECTORS, WIDTH)         # one row of a short panel
_ROW1 = _tile(1, 1, WIDTH)
TALL = VECTORS * ROWS
_TALL = _tile(TALL, 1, WIDTH)           # TALL x WIDTH: as many accumulators, one B vector
_TALL_ROWS = _tile(TALL, 1, WIDTH, ahead=64)    # the same reading A's rows (astride 1)
_TALL_SPREAD = _tile(TALL, 1, WIDTH, ahead=64, spread=True)     # ... asking for lines to write


_LEFT = _tile(TALL, 1, WIDTH, masked=True)     # TALL rows of a vector's first columns
_LEFT_ROWS = _tile(ROWS, 1, WIDTH, masked=True)
_LEFT1 = _tile(1, 1, WIDTH, masked=True)


@njit(cache=True, fastmath=_FMA, inline="always")
def _columns_left(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, j0, N, beta):
    """Columns j0 .. N (fewer than a vector) of an mr-row panel, as masked tiles (a plain loop
    here ran ~4x the time of a whole vector's tile: an LSTM, plain or GRU layer over a batch of
    8 or 24 ran several times the per-step GEMM calls' time)."""
    lanes = N - j0
    tall = mr - mr % TALL
    rows = tall + (mr - tall) // ROWS * ROWS
    for r in range(0, tall, TALL):
        _LEFT(K, A, aoff + r * ar, ak, ar, B, boff + j0, ldb, C, coff + r * ldc + j0, ldc,
              beta, lanes)
    for r in range(tall, rows, ROWS):
        _LEFT_ROWS(K, A, aoff + r * ar, ak, ar, B, boff + j0, ldb, C, coff + r * ldc + j0, ldc,
                   beta, lanes)
    for r in range(rows, mr):          # (one accumulator: 4x the time a multiply-add)
        _LEFT1(K, A, aoff + r * ar, ak, ar, B, boff + j0, ldb, C, coff + r * ldc + j0, ldc,
               beta, lanes)


@njit(cache=True, fastmath=_FMA)
def panel_gemm(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, N, beta):
    """C's mr rows (N columns, row stride ldc, first element at coff) = mr rows of A (K deep;
    element (row r, k) at aoff + k * ak + r * ar) @ B (K rows, N columns, row stride ldb, at
    boff) + beta * C. A panel packed by pack_panel has ak = mr, ar = 1; a row-major W's rows
    from row0 are A with aoff = row0 * ld, ak = 1, ar = ld; W.T's, from W's column col0, aoff =
    col0, ak = ld, ar = 1. A, B, C: 1-D float32 arrays (flat views of C-ordered roots); beta
    float32."""
    beta = np.float32(beta)
    cols = VECTORS * WIDTH
    full = N - N % cols
    single = N - N % WIDTH
    if mr == ROWS:
        for j in range(0, full, cols):
            _FULL(K, A, aoff, ak, ar, B, boff + j, ldb, C, coff + j, ldc, beta)
        for j in range(full, single, WIDTH):
            _FULL1(K, A, aoff, ak, ar, B, boff + j, ldb, C, coff + j, ldc, beta)
    else:
        for r in range(mr):
            for j in range(0, full, cols):
                _ROW(K, A, aoff + r * ar, ak, ar, B, boff + j, ldb, C, coff + r * ldc + j, ldc,
                     beta)
            for j in range(full, single, WIDTH):
                _ROW1(K, A, aoff + r * ar, ak, ar, B, boff + j, ldb, C, coff + r * ldc + j, ldc,
                      beta)
    if single < N:
        _columns_left(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, single, N, beta)


@njit(cache=True, fastmath=_FMA)
def tall_gemm(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, N, beta):
    """panel_gemm for up to TALL rows, one vector of columns at a time: for products whose
    column count is one or few vectors (a task's share of a batch), where a ROWS-row tile of one
    vector would hold half the accumulators for the same loads of A and B. A's rows read along
    their length (ak 1: the forward steps' W) take the tile that asks for them ahead (_TALL_ROWS:
    the LSTM's forward steps, 256 units, batch 32, 50 steps: 6.04 ms with it against 6.17
    without, order-balanced; their GEMM alone 4.62-4.66 against 4.78-4.92)."""
    if mr != TALL:
        for r in range(0, mr, ROWS):
            panel_gemm(K, A, aoff + r * ar, ak, ar, min(ROWS, mr - r), B, boff, ldb, C,
                       coff + r * ldc, ldc, N, beta)
        return
    beta = np.float32(beta)
    single = N - N % WIDTH
    for j in range(0, single, WIDTH):
        if ak == 1:
            _TALL_ROWS(K, A, aoff, ak, ar, B, boff + j, ldb, C, coff + j, ldc, beta)
        else:
            _TALL(K, A, aoff, ak, ar, B, boff + j, ldb, C, coff + j, ldc, beta)
    if single < N:
        _columns_left(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, single, N, beta)


@njit(cache=True, fastmath=_FMA, inline="always")
def tall_gemm_spread(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, N, beta, P, prow, pcol,
                     count):
    """tall_gemm, asking meanwhile for the lines of P[prow:prow + count, pcol:pcol + N] (P 2-D
    float32), which the caller writes next: spread over the whole-vector tiles' steps of k
    (_TALL_SPREAD) where the tile is TALL rows of A's rows (ak 1), else all at once first
    (prefetch_rows). (The LSTM's forward steps, 256 units, batch 32, 50 steps: the next block's
    c, c_act and h lines asked for so, against all at once before the block, 5.57 against 5.74
    ms, medians of 61 order-balanced rounds; paired, 0.97x.)"""
    if mr != TALL or ak != 1 or N < WIDTH or count << _SPREAD_SHIFT > K:
        prefetch_rows(P, prow, prow + count, pcol, N)
        tall_gemm(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, N, beta)
        return
    beta = np.float32(beta)
    single = N - N % WIDTH
    flat, pld = P.reshape(P.size), P.shape[1]
    for j in range(0, single, WIDTH):
        _TALL_SPREAD(K, A, aoff, ak, ar, B, boff + j, ldb, C, coff + j, ldc, beta, flat,
                     prow * pld + pcol + j, pld, count)
    if single < N:
        _columns_left(K, A, aoff, ak, ar, mr, B, boff, ldb, C, coff, ldc, single, N, beta)


@intrinsic
def _prefetch_write(typingctx, A, off):
    """Prefetch the cache line of A's element `off` (A a float32 array) for writing."""
    if not (isinstance(A, types.Array) and A.dtype == types.float32):
        return None

    def codegen(context, builder, signature, args):
        _prefetch(builder, builder.gep(
            _data(context, builder, signature.args[0], args[0]),
            [context.cast(builder, args[1], signature.args[1], types.int64)]))
        return context.get_dummy_value()

    return types.void(A, off), codegen


@njit(cache=True, inline="always")
def prefetch_rows(A, r0, r1, c0, N):
    """Ask for the lines of A[r0:r1, c0:c0 + N] (2-D float32) ahead of writing them: a kernel
    issues this before a tile's arithmetic, so that the lines' reads for ownership overlap it."""
    flat = A.reshape(A.size)
    L = A.shape[1]
    for r in range(r0, r1):
        for j in range(0, N, 16):
            _prefetch_write(flat, r * L + c0 + j)
        _prefetch_write(flat, r * L + c0 + N - 1)


# ---------------------------------------------------------------- whole products
# A thread-parallel product of register tiles for the LSTM's large GEMMs (rnn.py: the input
# projection of every step at once, the weight gradients over every step, the input errors).
# The tasks share C's rows (whole ROWS-row panels) or, `by_columns`, its columns (whole
# PANEL-column panels: each task then reads only its share of B, the input errors' case, where
# B is the larger operand); each runs its share KC deep at a time over JC-column blocks (JC x KC
# of B stays in L2 while A's panels stream from it). B is row-major in place, or packed as
# panels of PANEL columns (pack_transposed: B = X.T for a row-major X, the weight gradients'
# case, read in place as X.T would need a strided load per element).
KC, JC = 512, 128
PANEL = VECTORS * WIDTH


@njit(parallel=True, cache=True, fastmath=_FMA)
def gemm(M, N, K, A, aoff, ak, ar, B, boff, ldb, panels, C, coff, ldc, bias, beta, by_columns,
         tasks):
    """C (M x N, row stride ldc, at coff) = A @ B + beta * C (bias[r] added to row r where bias
    is not empty; then beta must be 0): A's element (r, k) at aoff + k * ak + r * ar; B
    row-major (row stride ldb, at boff), or, where `panels`, packed by pack_transposed at boff.
    A, B, C, bias: 1-D float32 arrays."""
    rows, cols = M // ROWS, -(-N // PANEL)
    for task in prange(tasks):
        if by_columns:
            r0, r1 = 0, M
            c0 = task * cols // tasks * PANEL
            c1 = min(N, (task + 1) * cols // tasks * PANEL)
        else:
            r0 = task * rows // tasks * ROWS
            r1 = M if task == tasks - 1 else (task + 1) * rows // tasks * ROWS
            c0, c1 = 0, N
        for j0 in range(c0, c1, JC):
            nn = min(JC, c1 - j0)
            if bias.size:
                for r in range(r0, r1):
                    row = C[coff + r * ldc + j0:coff + r * ldc + j0 + nn]
                    for j in range(nn):
                        row[j] = bias[r]
            for k0 in range(0, K, KC):
                kk = min(KC, K - k0)
                b = np.float32(1.0) if k0 > 0 or bias.size else np.float32(beta)
                step = PANEL if panels else nn      # columns a panel_gemm call
                for p in range(r0, r1, ROWS):
                    a = aoff + p * ar + k0 * ak
                    for j in range(j0, j0 + nn, step):
                        bo, lb = (boff + j * K + k0 * PANEL, PANEL) if panels else \
                            (boff + k0 * ldb + j, ldb)
                        panel_gemm(kk, A, a, ak, ar, min(ROWS, r1 - p), B, bo, lb, C,
                                   coff + p * ldc + j, ldc, min(step, j0 + nn - j), b)


def _transpose_block(VW: int):
    """The intrinsic transpose(X, xoff, ldx, P, poff, ldp): the VW x VW block of X at xoff
    (row stride ldx) stored transposed at P's poff (row stride ldp): VW vector loads, log2(VW)
    rounds of VW two-vector shuffles (row i takes, at the columns whose bit s is set, the
    columns of row i + s shifted by s, and row i + s the others; after the rounds s = 1, 2, ...,
    VW / 2, row i holds column i), VW vector stores. X, P: float32 arrays, offsets in
    elements."""
    @intrinsic
    def transpose(typingctx, X, xoff, ldx, P, poff, ldp):
        if not all(isinstance(a, types.Array) and a.dtype == types.float32 for a in (X, P)):
            return None
        sig = types.void(X, xoff, ldx, P, poff, ldp)

        def codegen(context, builder, signature, args):
            at = signature.args
            i64 = ir.IntType(64)
            idx = [context.cast(builder, args[k], at[k], types.int64) for k in (1, 2, 4, 5)]
            vp = ir.VectorType(ir.FloatType(), VW).as_pointer()
            X0 = builder.gep(_data(context, builder, at[0], args[0]), [idx[0]])
            P0 = builder.gep(_data(context, builder, at[3], args[3]), [idx[2]])

            def row(base, stride, r):
                return builder.bitcast(builder.gep(base, [builder.mul(ir.Constant(i64, r),
                                                                      stride)]), vp)

            rows = [builder.load(row(X0, idx[1], r), align=4) for r in range(VW)]
            s = 1
            while s < VW:
                low = [j if not j & s else VW + j - s for j in range(VW)]
                high = [j + s if not j & s else VW + j for j in range(VW)]
                new = list(rows)
                for r in range(VW):
                    if not r & s:
                        a, b = rows[r], rows[r + s]
                        new[r] = builder.shuffle_vector(a, b, ir.Constant(
                            ir.VectorType(ir.IntType(32), VW), low))
                        new[r + s] = builder.shuffle_vector(a, b, ir.Constant(
                            ir.VectorType(ir.IntType(32), VW), high))
                rows, s = new, 2 * s
            for r in range(VW):
                builder.store(rows[r], row(P0, idx[3], r), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return transpose


_TRANSPOSE = _transpose_block(WIDTH)


@njit(parallel=True, cache=True)
def pack_transposed(X0, X1, split, K, P, tasks):
    """P = B = X.T as panels of PANEL columns for gemm's `panels`: X's row u (B's column u) is
    X0[u, :split] followed by X1[u, :K - split] (X0, X1 (N, *) C-ordered float32; a weight
    gradient against the step before: X0 the start state, X1 the outputs); column u of panel
    q = u // PANEL, row k lands at P[q * K * PANEL + k * PANEL + u % PANEL] (a last panel's
    columns past N are left as they are: gemm does not read them). Blocks of WIDTH rows by
    WIDTH columns of X are transposed in registers (_TRANSPOSE: 1.6 MB in ~0.05 against
    ~0.3 ms element by element), the rest element by element."""
    N = X0.shape[0]
    blocks = N // WIDTH
    for task in prange(tasks):
        parts = ((X0, 0, split, 0), (X1, split, K, split))    # (source, k from, k to, k shift)
        for blk in range(task * blocks // tasks, (task + 1) * blocks // tasks):
            u = blk * WIDTH
            base = (u // PANEL) * K * PANEL + u % PANEL
            for X, lo, hi, shift in parts:
                flat, ld = X.reshape(X.size), X.shape[1]
                k = lo
                while k + WIDTH <= hi:
                    _TRANSPOSE(flat, u * ld + k - shift, ld, P, base + k * PANEL, PANEL)
                    k += WIDTH
                for c in range(WIDTH):
                    for kk in range(k, hi):
                        P[base + kk * PANEL + c] = X[u + c, kk - shift]
        if task == tasks - 1:
            for u in range(blocks * WIDTH, N):
                base = (u // PANEL) * K * PANEL + u % PANEL
                for X, lo, hi, shift in parts:
                    for k in range(lo, hi):
                        P[base + k * PANEL] = X[u, k - shift]
