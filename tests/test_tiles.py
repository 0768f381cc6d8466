"""The register-tile GEMM (neonlike/backends/cpu/tiles.py) against float64 numpy: every panel
and column shape it splits into, A read from W's rows or its columns (W.T) in place, beta 0 / 1 /
other, row-strided B and C at
offsets, non-finite values; the memory around C untouched."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
from numba import njit  # noqa: E402

from neonlike.backends.cpu import tiles  # noqa: E402

pytestmark = pytest.mark.skipif(tiles.TILE is None, reason="no register tile for this host")


@njit(cache=True)
def _gemm_all(W, transposed, M, K, B, boff, ldb, C, coff, ldc, N, beta):
    """C = A @ B + beta * C, A = W's first M rows (K of each) or W.T's, panel by panel."""
    flat, ld = W.reshape(W.size), W.shape[1]
    for p in range(0, M, tiles.ROWS):
        mr = min(tiles.ROWS, M - p)
        if transposed:      # A's row p + r, column k: W[k, p + r]
            tiles.panel_gemm(K, flat, p, ld, 1, mr, B, boff, ldb, C, coff + p * ldc, ldc, N,
                             beta)
        else:               # W[p + r, k]
            tiles.panel_gemm(K, flat, p * ld, 1, ld, mr, B, boff, ldb, C, coff + p * ldc, ldc,
                             N, beta)


def _run(W, transposed, M, K, B, C, N, beta, row=1, col=2):
    """C[row:row+M, col:col+N] = A @ B[:, 1:1+N] + beta * C; returns A."""
    _gemm_all(W, transposed, M, K, B.reshape(-1), 1, B.shape[1], C.reshape(-1),
              row * C.shape[1] + col, C.shape[1], N, np.float32(beta))
    return W[:K, :M].T if transposed else W[:M, :K]


def _expected(A, B, C0, N, beta, row=1, col=2):
    M = A.shape[0]
    want = C0.astype(np.float64)
    old = want[row:row + M, col:col + N]
    with np.errstate(invalid="ignore", over="ignore"):
        prod = A.astype(np.float64) @ B[:, 1:1 + N].astype(np.float64)
    want[row:row + M, col:col + N] = prod if beta == 0 else prod + beta * old
    return want


W2 = tiles.VECTORS * tiles.WIDTH


@pytest.mark.parametrize("M", [1, tiles.ROWS - 1, tiles.ROWS, tiles.ROWS + 3, 3 * tiles.ROWS])
@pytest.mark.parametrize("N", [1, tiles.WIDTH - 1, tiles.WIDTH, W2, W2 + tiles.WIDTH + 3,
                               2 * W2 + 1])
@pytest.mark.parametrize("K", [1, 5, 64])
@pytest.mark.parametrize("transposed", [False, True], ids=["W", "W.T"])
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5])
def test_panels_match_float64(M, N, K, transposed, beta):
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    W = rng.standard_normal((K + 2, M + 3) if transposed else (M + 2, K + 3)).astype(np.float32)
    B = rng.standard_normal((K, N + 6)).astype(np.float32)
    C = rng.standard_normal((M + 3, N + 7)).astype(np.float32)
    if beta == 0:
        C[1:1 + M, 2:2 + N] = np.nan        # not read where beta is 0
    C0 = C.copy()
    A = _run(W, transposed, M, K, B, C, N, beta)
    want = _expected(A, B, C0, N, beta)
    np.testing.assert_allclose(C, want, rtol=2e-5, atol=2e-5 * np.sqrt(K))
    outside = np.ones(C.shape, bool)
    outside[1:1 + M, 2:2 + N] = False
    np.testing.assert_array_equal(C[outside], C0[outside])    # nothing written around C


def test_non_finite_values_propagate_as_in_a_gemm():
    """inf and nan in A or B reach the outputs they feed (inf * 0 = nan, as BLAS gives), and
    beta * C carries C's non-finite values where beta != 0."""
    M, K, N = 2 * tiles.ROWS + 1, 7, W2 + tiles.WIDTH + 2
    rng = np.random.default_rng(3)
    W = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N + 6)).astype(np.float32)
    W[0, 3], W[tiles.ROWS + 1, 0], W[-1, 2] = np.inf, np.nan, -np.inf
    B[3, 5] = 0.0                       # inf * 0 in row 0, column 4
    B[1, N] = np.nan                    # the last column
    C = rng.standard_normal((M + 3, N + 7)).astype(np.float32)
    C[2, 4] = np.inf
    C0 = C.copy()
    _run(W, False, M, K, B, C, N, 1.0)
    want = _expected(W, B, C0, N, 1.0)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(C, want, rtol=2e-5, atol=1e-4)
    assert np.isnan(C[1, 2 + 4]) and np.isnan(C[1:1 + M, 2 + N - 1]).all()


def test_tile_shape_fits_the_host():
    """8 x 2 x 16 on AVX-512, 6 x 2 x 8 with AVX2 + FMA: the accumulators, B's vectors and a
    broadcast fit the vector registers (32 or 16)."""
    import llvmlite.binding as llvm
    features = llvm.get_host_cpu_features()
    rows, vectors, width = tiles.TILE
    registers = 32 if features.get("avx512f") else 16
    assert width == (16 if features.get("avx512f") else 8)
    assert rows * vectors + vectors + 1 <= registers


@njit(cache=True)
def _tall_all(W, M, K, B, boff, ldb, C, coff, ldc, N, beta):
    flat, ld = W.reshape(W.size), W.shape[1]
    for p in range(0, M, tiles.TALL):
        tiles.tall_gemm(K, flat, p * ld, 1, ld, min(tiles.TALL, M - p), B, boff, ldb, C,
                        coff + p * ldc, ldc, N, beta)


@pytest.mark.parametrize("M", [tiles.TALL, tiles.TALL + tiles.ROWS + 1, 2 * tiles.TALL - 1])
@pytest.mark.parametrize("N", [1, tiles.WIDTH, tiles.WIDTH + 5, 3 * tiles.WIDTH])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_tall_tiles_match_float64(M, N, beta):
    """tall_gemm: TALL-row tiles a vector wide, shorter panels through panel_gemm."""
    K = 37
    rng = np.random.default_rng(M * 100 + N)
    W = rng.standard_normal((M + 1, K + 2)).astype(np.float32)
    B = rng.standard_normal((K, N + 6)).astype(np.float32)
    C = rng.standard_normal((M + 3, N + 7)).astype(np.float32)
    if beta == 0:
        C[1:1 + M, 2:2 + N] = np.nan
    C0 = C.copy()
    _tall_all(W, M, K, B.reshape(-1), 1, B.shape[1], C.reshape(-1), C.shape[1] + 2, C.shape[1],
              N, np.float32(beta))
    want = _expected(W[:M, :K], B, C0, N, beta)
    np.testing.assert_allclose(C, want, rtol=2e-5, atol=2e-5 * np.sqrt(K))


@njit(cache=True)
def _spread_all(W, M, K, B, boff, ldb, C, coff, ldc, N, beta, P, count):
    flat, ld = W.reshape(W.size), W.shape[1]
    for p in range(0, M, tiles.TALL):
        tiles.tall_gemm_spread(K, flat, p * ld, 1, ld, min(tiles.TALL, M - p), B, boff, ldb, C,
                               coff + p * ldc, ldc, N, beta, P, 0, 3, count)


@pytest.mark.parametrize("M", [tiles.TALL, tiles.TALL + tiles.ROWS + 1])
@pytest.mark.parametrize("N", [tiles.WIDTH - 3, tiles.WIDTH, 2 * tiles.WIDTH + 5])
@pytest.mark.parametrize("count", [0, 5, 40])
def test_tall_tiles_asking_for_lines_match_float64(M, N, count):
    """tall_gemm_spread computes tall_gemm's product whether it spreads its line requests over
    the tiles (5 rows over 64 steps of k), asks for all first (40: more than a request every 4
    steps; a short panel; fewer columns than a vector) or for none; the rows it asks for are
    only read."""
    K = 64
    rng = np.random.default_rng(M * 100 + N + count)
    W = rng.standard_normal((M + 1, K + 2)).astype(np.float32)
    B = rng.standard_normal((K, N + 6)).astype(np.float32)
    C = rng.standard_normal((M + 3, N + 7)).astype(np.float32)
    P = rng.standard_normal((count + 1, N + 9)).astype(np.float32)
    C0, P0 = C.copy(), P.copy()
    _spread_all(W, M, K, B.reshape(-1), 1, B.shape[1], C.reshape(-1), C.shape[1] + 2, C.shape[1],
                N, np.float32(1.0), P, count)
    want = _expected(W[:M, :K], B, C0, N, 1.0)
    np.testing.assert_allclose(C, want, rtol=2e-5, atol=2e-5 * np.sqrt(K))
    assert np.array_equal(P, P0)


_AVX2_CHILD = r'''
import llvmlite.binding as llvm
host = llvm.get_host_cpu_features
def avx2_only():
    features = host()
    for name in list(features):
        if name.startswith("avx512"):
            features[name] = False
    return features
llvm.get_host_cpu_features = avx2_only        # numba's codegen and tiles both ask this
import numpy as np
from numba import njit
from neonlike.backends.cpu import tiles
assert tiles.TILE == (6, 2, 8), tiles.TILE

@njit
def run(W, M, K, B, C, N, beta, tall):
    flat, ld, step = W.reshape(W.size), W.shape[1], tiles.TALL if tall else tiles.ROWS
    for p in range(0, M, step):
        mr = min(step, M - p)
        if tall:
            tiles.tall_gemm(K, flat, p * ld, 1, ld, mr, B, 0, N, C, p * N, N, N, beta)
        else:
            tiles.panel_gemm(K, flat, p * ld, 1, ld, mr, B, 0, N, C, p * N, N, N, beta)

rng = np.random.default_rng(0)
for M, K, N in ((6, 5, 16), (13, 33, 21), (12, 8, 8), (25, 17, 40)):
    for beta in (0.0, 1.0):
        for tall in (False, True):
            W = rng.standard_normal((M, K)).astype(np.float32)
            B = rng.standard_normal((K, N)).astype(np.float32)
            C = rng.standard_normal((M, N)).astype(np.float32)
            want = W.astype(np.float64) @ B + beta * C
            run(W, M, K, B.reshape(-1), C.reshape(-1), N, np.float32(beta), tall)
            np.testing.assert_allclose(C, want, rtol=2e-5, atol=1e-4)

@njit
def run_spread(W, M, K, B, C, N, P, count):   # the tall tiles that ask for lines as they go
    flat, ld = W.reshape(W.size), W.shape[1]
    for p in range(0, M, tiles.TALL):
        tiles.tall_gemm_spread(K, flat, p * ld, 1, ld, min(tiles.TALL, M - p), B, 0, N, C, p * N,
                               N, N, np.float32(1.0), P, 0, 0, count)

for M, K, N in ((24, 64, 16), (17, 64, 21)):
    W = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = rng.standard_normal((M, N)).astype(np.float32)
    P = rng.standard_normal((5, N)).astype(np.float32)
    want, P0 = W.astype(np.float64) @ B + C, P.copy()
    run_spread(W, M, K, B.reshape(-1), C.reshape(-1), N, P, 5)
    np.testing.assert_allclose(C, want, rtol=2e-5, atol=1e-4)
    assert np.array_equal(P, P0)

# the whole products with 8 x 8 register transposes, and an LSTM layer (rowvec's 8-column cells)
for M, N, K in ((13, 37, 600), (8, 16, 9)):
    A = rng.standard_normal((M, K)).astype(np.float32)
    X = rng.standard_normal((N, K)).astype(np.float32)
    P = np.empty(-(-N // tiles.PANEL) * tiles.PANEL * K, np.float32)
    tiles.pack_transposed(X[:, :5].copy(), X[:, 5:].copy(), 5, K, P, 2)
    C = np.empty((M, N), np.float32)
    tiles.gemm(M, N, K, A.reshape(-1), 0, 1, K, P, 0, 0, True, C.reshape(-1), 0, N,
               np.empty(0, np.float32), 0.0, False, 2)
    np.testing.assert_allclose(C, A.astype(np.float64) @ X.T, rtol=1e-4, atol=1e-3)
from neonlike.backends import gen_backend
from neonlike.initializers import Gaussian
from neonlike.backends.cpu import rnn as cpu_rnn
from neonlike.layers import GRU, LSTM, BiRNN
from neonlike.transforms import Logistic, Tanh
assert cpu_rnn._plain_kernels() is not None and cpu_rnn._gru_kernels() is not None
x = rng.standard_normal((11, 4 * 21))
for make in (lambda: LSTM(19, Gaussian(scale=0.4), activation=Tanh(),
                          gate_activation=Logistic()),
             lambda: BiRNN(19, Gaussian(scale=0.4), activation=Tanh()),
             lambda: GRU(19, Gaussian(scale=0.4), activation=Tanh(),
                         gate_activation=Logistic())):
    got = {}
    for dt in (np.float64, np.float32):
        be = gen_backend("cpu", datatype=dt, batch_size=21, rng_seed=0)
        layer = make()
        layer.configure((11, 4)); layer.prev_layer = True; layer.allocate(); layer.set_deltas()
        layer.W.set(np.random.default_rng(1).normal(scale=0.4, size=layer.W.shape))
        out = layer.fprop(be.array(x)).get()
        R = np.random.default_rng(2).standard_normal(out.shape)
        dx = layer.bprop(be.array(R)).get()
        got[dt] = (out, dx, layer.dW.get())
    for a, b in zip(got[np.float32], got[np.float64]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
print("AVX2 TILE OK")
'''


def test_the_avx2_tile_shape_computes_right(tmp_path):
    """The AVX2 + FMA shape (6 x 2 x 8), which no machine here has: a child process that hides
    the host's AVX-512 from llvmlite (so numba compiles for AVX2 and tiles.TILE is the AVX2
    shape), with its own numba cache, checks panel_gemm, tall_gemm and the whole products
    (8 x 8 register transposes) against float64, and the float32 passes of an LSTM layer (its
    cells as 8-column vectors), a BiRNN and a GRU (plain_rnn_kernels, gru_kernels) against
    their float64 ones."""
    import os
    import subprocess
    import sys
    import llvmlite.binding as llvm
    if not llvm.get_host_cpu_features().get("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _AVX2_CHILD], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and "AVX2 TILE OK" in done.stdout, done.stderr[-3000:]


# ---------------------------------------------------------------- whole products (tiles.gemm)
@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (tiles.ROWS + 3, W2 + 5, 7),
                                     (3 * tiles.ROWS + 1, tiles.JC + W2 + 3, tiles.KC + 9),
                                     (64, 100, 2 * tiles.KC)])
@pytest.mark.parametrize("tasks", [1, 2, 3])
@pytest.mark.parametrize("form", ["A", "A.T", "bias", "B packed"])
@pytest.mark.parametrize("beta", [0.0, -0.5])
@pytest.mark.parametrize("by_columns", [False, True], ids=["row shares", "column shares"])
def test_gemm_matches_float64(M, N, K, tasks, form, beta, by_columns):
    """C = A @ B + beta * C (or + bias): A in place as rows or as W.T's, B row-major or packed
    from X.T (with the split of its rows between two sources), over KC-deep and JC-wide blocks
    and the tasks' row or column shares; C's neighbours untouched."""
    if form == "bias" and beta:
        pytest.skip("a bias starts C: beta 0")
    rng = np.random.default_rng(M + 7 * N + 13 * K + tasks)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(M).astype(np.float32) if form == "bias" else \
        np.empty(0, np.float32)
    C = np.full((M + 2, N + 3), 7.0, np.float32)
    C[1:1 + M, 2:2 + N] = rng.standard_normal((M, N))
    old = C[1:1 + M, 2:2 + N].astype(np.float64)
    coff, ldc = 1 * (N + 3) + 2, N + 3
    flat = C.reshape(-1)
    if form == "A.T":
        W = np.ascontiguousarray(A.T)
        tiles.gemm(M, N, K, W.reshape(-1), 0, M, 1, B.reshape(-1), 0, N, False, flat, coff, ldc,
                   bias, beta, by_columns, tasks)
    elif form == "B packed":
        X = np.ascontiguousarray(B.T)
        split = K // 3
        P = np.full(-(-N // tiles.PANEL) * tiles.PANEL * K, np.nan, np.float32)
        tiles.pack_transposed(np.ascontiguousarray(X[:, :split]),
                              np.ascontiguousarray(X[:, split:]), split, K, P, tasks)
        tiles.gemm(M, N, K, A.reshape(-1), 0, 1, K, P, 0, 0, True, flat, coff, ldc, bias, beta,
                   by_columns, tasks)
    else:
        tiles.gemm(M, N, K, A.reshape(-1), 0, 1, K, B.reshape(-1), 0, N, False, flat, coff, ldc,
                   bias, beta, by_columns, tasks)
    want = A.astype(np.float64) @ B.astype(np.float64) + beta * old
    if bias.size:
        want += bias[:, None]
    np.testing.assert_allclose(C[1:1 + M, 2:2 + N], want, rtol=1e-4, atol=1e-4 * np.sqrt(K))
    rest = C.copy()
    rest[1:1 + M, 2:2 + N] = 7.0
    assert (rest == 7.0).all()


def test_rowvec_kernels_match_numpy():
    """A rowvec cell as vectors of WIDTH columns and as scalars: the same values as numpy's
    float64 arithmetic on the float32 operands (to float32 rounding), in place included."""
    from neonlike.backends.cpu import rowvec
    from neonlike.backends.cpu.rowvec import ONE

    def cell(a, b, c):
        return a * b + c, ONE - a * a, (b - c) * 2

    vec, one = rowvec.vector_kernel(cell, 3, 3), rowvec.scalar_kernel(cell)

    @njit
    def run(X, P, Q, R, n):
        full = n - n % tiles.WIDTH
        for j in range(0, full, tiles.WIDTH):
            # the first operand's row is also the second result's: in place
            vec(X, j, X, n + j, X, 2 * n + j, P, j, X, j, R, j)
        for j in range(full, n):
            P[j], X[j], R[j] = one(X[j], X[n + j], X[2 * n + j])

    rng = np.random.default_rng(3)
    n = 2 * tiles.WIDTH + 5
    X = rng.standard_normal(3 * n).astype(np.float32)
    a, b, c = (X[k * n:(k + 1) * n].astype(np.float64) for k in range(3))
    P, R = np.zeros(n, np.float32), np.zeros(n, np.float32)
    run(X, P, np.zeros(1, np.float32), R, n)
    np.testing.assert_allclose(P, a * b + c, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(X[:n], 1 - a * a, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(R, (b - c) * 2, rtol=1e-6, atol=1e-6)


def test_rowvec_activations_are_vecmaths_bits():
    """A rowvec cell calling vecmath's sig32 and tanh32 runs their vector forms (rowvec._vsig,
    _vtanh): the same float32 bits as the scalar functions, lane by lane, over random bit
    patterns (every sign, exponent and nan payload), wide normal draws and the edges (0, -0,
    the smallest subnormal, the exp clamps and overflow, the tanh polynomial's bound, +-inf,
    nan); nan where the scalar gives nan."""
    from neonlike.backends.cpu import rowvec
    from neonlike.backends.cpu.vecmath import sig32, tanh32

    def acts(x):
        return sig32(x), tanh32(x)

    vec = rowvec.vector_kernel(acts, 1, 2)

    @njit
    def run(x, vs, vt, ss, st):
        for j in range(0, x.size, tiles.WIDTH):
            vec(x, j, vs, j, vt, j)
        for j in range(x.size):
            ss[j], st[j] = sig32(x[j]), tanh32(x[j])

    rng = np.random.default_rng(11)
    edges = np.array([0.0, -0.0, 1e-45, -1e-45, 1.2e-38, 88.72284, -88.72284, 89.0, -89.0,
                      104.0, -104.0, 0.625, -0.625, 0.62499994, 1e30, -1e30, np.inf, -np.inf,
                      np.nan], np.float32)
    x = np.concatenate([rng.integers(0, 2 ** 32, 1 << 18, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32), (rng.standard_normal(1 << 16) * 30).astype(np.float32),
                        edges])
    x = np.concatenate([x, np.zeros(-x.size % tiles.WIDTH, np.float32)])
    vs, vt, ss, st = (np.empty_like(x) for _ in range(4))
    with np.errstate(all="ignore"):
        run(x, vs, vt, ss, st)
    for got, want in ((vs, ss), (vt, st)):
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
