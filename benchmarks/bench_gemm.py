"""GEMM: neonlike's `be.dot(A, B, out=C)` against the fastest BLAS on the machine, float32.

    python benchmarks/bench_gemm.py               # every shape below, 11 rounds
    python benchmarks/bench_gemm.py --quick       # 5 rounds
    python benchmarks/bench_gemm.py --cases gemm1024,gemm2048x128    # bench_cpu.py's two rows

Side by side in one process: neonlike (NEONLIKE_GEMM unset: 'auto', the faster of MKL and numpy
per shape class, timed once), numpy's matmul as written (`A @ B`) and with out= (the BLAS numpy
is built with: OpenBLAS in the pip wheels), cblas_sgemm called directly through ctypes on the
libmkl_rt that neonlike binds ('MKL direct'), neonlike's private single-threaded OpenBLAS
(scipy-openblas32) called directly on numba's pool ('OpenBLAS tasks': openblas.library().gemm,
where installed), and torch.mm. The target: within 5% of the fastest of numpy out=, MKL direct
and OpenBLAS tasks. The notes give each implementation's spread (fastest and
slowest of the rounds), run on its own also of `neonlike.backends.cpu.gemm.gemm(A, B, C)`
called directly (the same GEMM without the statement around it), and the path 'auto' chose per
shape class.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import _harness  # noqa: F401  first: pins the thread pools before numpy loads

import numpy as np  # noqa: E402

import _runner  # noqa: E402
from _harness import (GEMM_PAUSE_S, Bench, Case, Suite, Target, fmt_time,  # noqa: E402
                      sgemm_call)
from _runner import Context  # noqa: E402

BLAS_PEERS = "numpy out=,MKL direct,OpenBLAS tasks"   # the 'fastest BLAS' of the target
WITH_MODULE = False   # also time gemm.gemm called directly (this file run on its own)


def gemm(s: Suite, M: int, N: int, K: int) -> Bench:
    """`be.dot(A, B, out=C)`, A (M, K) @ B (K, N), C-ordered float32 in [-1, 1)."""
    be = s.be
    A, B = s.data((M, K), -1, 1), s.data((K, N), -1, 1)
    An, Bn, Cn = be.array(A), be.array(B), be.empty((M, N))
    C = np.empty((M, N), np.float32)

    def neon() -> Any:
        be.dot(An, Bn, out=Cn)
        return Cn

    impls: dict[str, Callable] = {"neonlike": neon, "numpy": lambda: A @ B,
                                  "numpy out=": lambda: np.matmul(A, B, out=C)}
    if WITH_MODULE:  # the GEMM module alone, without the statement around it (notes only)
        from neonlike.backends.cpu import gemm as G
        Cg = np.empty((M, N), np.float32)
        impls["gemm.gemm"] = lambda: G.gemm(A, B, Cg)
    if s.p.torch:
        At, Bt, Ct, th = s.p.t(A), s.p.t(B), s.p.t(np.empty((M, N), np.float32)), s.p.torch
        impls["torch"] = lambda: th.mm(At, Bt, out=Ct)
    if s.p.mkl:
        impls["MKL direct"] = s.p.mkl.sgemm(A, B, np.empty((M, N), np.float32))
    tasks = openblas_tasks(A, B, np.empty((M, N), np.float32))
    if tasks is not None:
        impls["OpenBLAS tasks"] = tasks
    return Bench(case_name(M, N, K), label(M, N, K) + " (M x N x K)", M * N, impls,
                 lambda: A.astype(np.float64) @ B.astype(np.float64), rtol=1e-3, atol=1e-4,
                 flops=2 * M * N * K, targets=[Target("vs", 1 / 1.05, BLAS_PEERS)],
                 pause_s=GEMM_PAUSE_S, size="—")


def openblas_tasks(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> Callable | None:
    """C = A @ B on neonlike's private OpenBLAS, one single-threaded call per task of numba's
    pool (backends/cpu/openblas.py), as a no-arg call; None where the package is missing."""
    from neonlike.backends.cpu import openblas
    if not openblas.available():
        return None
    return sgemm_call(openblas.library().gemm[4], A, B, C)


def case_name(M: int, N: int, K: int) -> str:
    if M == N == K:
        return f"gemm{M}"
    return f"gemm{M}x{K}" if M == N else f"gemm{M}x{N}x{K}"


def label(M: int, N: int, K: int) -> str:
    return f"GEMM {M}^3" if M == N == K else f"GEMM {M}x{N}x{K}"


def assign_check(s: Suite) -> str | None:
    """`C[:] = be.dot(A, B)` must equal `be.dot(A, B, out=C)` (checked once, not timed)."""
    be = s.be
    A, B = s.data((64, 32), -1, 1), s.data((32, 48), -1, 1)
    An, Bn, C1, C2 = be.array(A), be.array(B), be.empty((64, 48)), be.empty((64, 48))
    try:
        C1[:] = be.dot(An, Bn)
        be.dot(An, Bn, out=C2)
        ok = np.allclose(C1.get(), C2.get(), rtol=1e-5, atol=1e-5) and \
            np.allclose(C1.get(), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
        return None if ok else "C[:] = be.dot(A, B) differs from be.dot(A, B, out=C)"
    except Exception as e:  # noqa: BLE001
        return f"C[:] = be.dot(A, B) failed: {type(e).__name__}: {e}"


def _case(M: int, N: int, K: int) -> tuple[str, Case]:
    return case_name(M, N, K), Case(lambda s, n: gemm(s, M, N, K))


# bench_cpu.py's two rows, then shapes this file adds when run on its own: a small and a mid
# cube, mnist_mlp's first-layer fprop (neon's (features, batch) layout: 100 x 128 x 784), a wide
# product, and 2048^3, whose class 'auto' times on a representative half its size
CASES = dict([_case(1024, 1024, 1024), _case(2048, 2048, 128)])
MORE_CASES = dict([_case(256, 256, 256), _case(512, 512, 512), _case(100, 128, 784),
                   _case(128, 2048, 2048), _case(2048, 2048, 2048)])


def finish(ctx: Context) -> None:
    """Notes: the `C[:] = be.dot` check, each GEMM row's spread, the paths 'auto' chose."""
    ran = [c for c in ctx.args.case_list if c.startswith("gemm")]
    if not ran:
        return
    msg = assign_check(ctx.suite)
    ctx.notes.append(msg or "`C[:] = be.dot(A, B)` checked equal to `be.dot(A, B, out=C)` "
                            "(the GEMM rows time the out= form)")
    spreads = []
    for key, samples in ctx.samples.items():
        if not key.startswith("gemm"):
            continue
        cells = ", ".join(f"{impl} {fmt_time(min(t))}-{fmt_time(max(t))}"
                          for impl, t in samples.items() if t)
        spreads.append(f"{key.split('@')[0]}: {cells}")
    if spreads:
        ctx.notes.append("GEMM spread (fastest-slowest round, per call): " + "; ".join(spreads))
    try:
        from neonlike.backends.cpu import gemm as G
        table = G.choices()
        splits = G.split_choices()
        path = G.backend_name()
    except Exception:  # noqa: BLE001 - the module's internals may change
        return
    if path != "auto":
        ctx.notes.append(f"neonlike's GEMM path: '{path}' (forced or no MKL: nothing timed)")
    elif table:
        ctx.notes.append("'auto' chose: " + "; ".join(
            f"{c.dtype} {c.m}x{c.n}x{c.k} {c.layout}" + ("" if c.batch == 1 else f" x{c.batch}")
            + f" -> {p}" + (_split_text(splits[c]) if p == "openblas" and c in splits else "")
            for c, p in table.items())
            + " (m, n, k: power-of-two buckets, m/2 < M <= m)")


def _split_text(split: tuple) -> str:
    """' in 4-row calls' for an OpenBLAS class 'auto' cuts into small-kernel calls."""
    along_m, step = split
    return f" in {step}-{'row' if along_m else 'column'} calls"


if __name__ == "__main__":
    CASES.update(MORE_CASES)
    WITH_MODULE = True
    sys.exit(_runner.run([sys.modules[__name__]], "bench_gemm.py", __doc__.split("\n")[0],
                   order=tuple(CASES)))
