"""The OpenBLAS GEMM path (backends/cpu/openblas.py): single-threaded OpenBLAS calls, one per
task of numba's pool, against numpy float64; it leaves numpy's own BLAS alone."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from neonlike.backends.cpu import gemm as G
from neonlike.backends.cpu import openblas as OB

pytestmark = pytest.mark.skipif(not OB.available(), reason="scipy-openblas32 is not installed")
NO, T = 111, 112


def stored(x, trans):
    """x (rows, cols) as CBLAS reads it: itself (NoTrans) or its transpose's C copy (Trans)."""
    return np.ascontiguousarray(x.T if trans == T else x)


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("ta", [NO, T])
@pytest.mark.parametrize("tb", [NO, T])
@pytest.mark.parametrize("split_m", [True, False])
@pytest.mark.parametrize("blocks", [1, 2, 3, 7])
def test_tiles_cut_rows_or_columns(dtype, rtol, ta, tb, split_m, blocks):
    """Every block count (more blocks than rows of some, odd remainders), either cut, every
    transposition, alpha and beta, batched slices with a shared B, and C's columns beyond N
    (ldc > N) left alone."""
    rng = np.random.default_rng(blocks * 7 + ta + tb)
    nb, M, N, K = 3, 13, 6, 9
    A = rng.standard_normal((nb, M, K))
    B = rng.standard_normal((K, N))
    C = rng.standard_normal((nb, M, N + 4))
    want = C.copy()
    want[:, :, :N] = 0.5 * (A @ B) - 2.0 * C[:, :, :N]
    a = np.stack([stored(x, ta) for x in A]).astype(dtype)
    b, c = stored(B, tb).astype(dtype), C.astype(dtype)
    lda, ldb = a.shape[2], b.shape[1]
    e = np.dtype(dtype).itemsize
    OB.tiles(OB.library().cblas[e], ta, tb, M, N, K, 0.5, a.ctypes.data, lda, a[0].size,
             b.ctypes.data, ldb, 0, -2.0, c.ctypes.data, N + 4, c[0].size, nb, e, split_m,
             blocks)
    np.testing.assert_allclose(c, want, rtol=rtol, atol=rtol * 10)


@pytest.mark.parametrize("shape", [(1, 1, 1), (700, 3, 900), (3, 700, 900), (256, 320, 2048)])
def test_gemm_on_the_openblas_path_splits_big_calls(monkeypatch, shape):
    """gemm() with 'openblas': small products in one call, big ones cut into numba's tasks
    (counted), each against numpy float64; column-major C too (written as C.T = B.T A.T)."""
    previous = G.set_backend("openblas")
    try:
        launched = []
        real = OB.tiles
        monkeypatch.setattr(OB, "tiles", lambda *a: (launched.append(a[-1]), real(*a))[1])
        M, N, K = shape
        rng = np.random.default_rng(M)
        A = rng.standard_normal((M, K)).astype(np.float32)
        B = rng.standard_normal((K, N)).astype(np.float32)
        for C in (np.empty((M, N), np.float32), np.empty((N, M), np.float32).T):
            G.gemm(A, B, C)
            want = A.astype(np.float64) @ B.astype(np.float64)
            np.testing.assert_allclose(C, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        split = OB._blocks(1, M, N, K)[1] > 1
        assert launched == ([OB._blocks(1, M, N, K)[1]] * 2 if split else [])
    finally:
        G.set_backend(previous)


def test_blocks_rule():
    import numba
    threads = numba.get_num_threads()
    assert OB._blocks(1, 8, 8, 8) == (True, 1)                        # too small to cut
    assert OB._blocks(1, 2048, 64, 2048) == (True, min(threads, 2048 // 16))
    assert OB._blocks(1, 64, 4096, 2048)[0] is False                  # the longer side: N
    assert OB._blocks(64, 128, 128, 128) == (True, 1)                 # slices are the tasks
    assert OB._blocks(1, 17, 4096, 4096)[1] == min(threads, 4096 // 16)


def test_private_single_threaded_library_leaves_numpy_blas_alone():
    """In a fresh process: binding the OpenBLAS path leaves OPENBLAS_NUM_THREADS as it was,
    its library runs one thread, and numpy's BLAS keeps its thread count."""
    code = textwrap.dedent("""
        import os, numpy as np
        from threadpoolctl import threadpool_info
        def numpy_threads():
            return sorted(p["num_threads"] for p in threadpool_info()
                          if "scipy_openblas64" in p["filepath"] or "numpy" in p["filepath"])
        before = numpy_threads()
        from neonlike.backends.cpu import gemm, openblas
        gemm.set_backend("openblas")
        a = np.ones((300, 300), np.float32)
        gemm.gemm(a, a, np.empty_like(a))
        lib = openblas.library()
        import scipy_openblas32
        print(scipy_openblas32.dll.scipy_openblas_get_num_threads(),
              numpy_threads() == before, "OPENBLAS_NUM_THREADS" in os.environ)
    """)
    pytest.importorskip("threadpoolctl")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "True", "False"]


def test_missing_package_is_a_clear_error(monkeypatch):
    """Without scipy-openblas32: 'openblas' raises RuntimeError naming the package; 'auto' goes
    on without it (MKL against numpy)."""
    monkeypatch.setattr(OB, "_FOUND", [])
    monkeypatch.setitem(sys.modules, "scipy_openblas32", None)     # import fails
    previous = G.set_backend(None)
    try:
        with pytest.raises(RuntimeError, match="scipy-openblas32"):
            G.set_backend("openblas")
        assert not OB.available()
        G.set_backend("auto")
        assert G.backend_name() in ("auto", "numpy") and G._State.rival == "numpy"
    finally:
        monkeypatch.undo()
        G.set_backend(previous)
