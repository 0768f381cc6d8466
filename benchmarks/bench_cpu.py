"""The CPU benchmark suite: neonlike side by side with numpy, numexpr, numba and PyTorch, one process.

Run (the one command; see benchmarks/README.md):

    python benchmarks/bench_cpu.py                      # full: 1e2, 1e4, 1e6, 1e7 elements
    python benchmarks/bench_cpu.py --quick              # fewer sizes and repeats, under 2 minutes
    python benchmarks/bench_cpu.py --cases 10op,softmax --sizes 1e6,1e7 --markdown table.md

Every case defines the neonlike statement (`out[:] = tree`, the tree built inside the timed call, as
a user writes it) and each peer's equivalent:

- numpy        the expression as a numpy user writes it (new arrays for every intermediate);
- numpy out=   the same with ufunc out= into preallocated buffers;
- numexpr      ne.evaluate(expression, out=...) (numpy for the parts numexpr cannot do);
- numba        a kernel written by hand (@njit, fastmath, prange); the faster of its serial and
               parallel compilations at each size;
- torch        PyTorch eager on the same memory (torch.from_numpy), the last op with out=;
- MKL direct   (GEMM only) cblas_sgemm called through ctypes on libmkl_rt, the library that
               neonlike.backends.cpu.gemm binds; the GEMM target is the faster of it and
               numpy out= (numpy's own BLAS, OpenBLAS in the pip wheels).

Method: float32 random data (never zeros); each implementation is run once and checked with
np.allclose (neonlike against a float64 numpy reference, each peer against neonlike's result), and a
wrong one is not timed; then a warm-up, then R rounds in which every implementation runs one batch
of calls (the order rotating each round, so drift is shared; a pause after each batch, 10 ms
(0.3 s after GEMMs), lets spinning thread pools go idle); the median per-call time is reported.
GB/s = bytes that must move (each input read once + the output written once) / time; the copy
ceiling at each size is the faster of np.copyto and a numba prange copy, measured in the same run.
GEMM reports GFLOP/s (2*M*N*K / time). The compile rows run two subprocesses with a fresh
NEONLIKE_CACHE_DIR: the first times a never-seen tree (cold cache), the second the same tree again
(reloaded from the disk cache). Targets are for 2 cores and float32; the table says which are met.

All work goes through neonlike's public API (gen_backend, be.array, be.empty, Tensor operators,
backend functions, Tensor.get), so the suite keeps working while the internals change. Peers are
optional: a missing one is skipped with a note. Threads: --threads (default 2) is applied to every
library (OMP/MKL/OpenBLAS/numexpr/numba environment variables before import, and their set_*).

The cases live in one file per family, each runnable on its own with the same options:
bench_elementwise.py (logistic, muladd, tanh, 10op), bench_reductions.py (softmax, sum0, sum1,
var1), bench_gemm.py (gemm1024, gemm2048x128; more shapes when run on its own),
bench_statement.py (stmt100), bench_compile.py (compile); _harness.py holds the thread pinning,
the peers and the measuring, _runner.py the command line and the report. This file runs them all
into one table.
"""
from __future__ import annotations

import sys

import _harness  # noqa: F401  first: pins the thread pools before numpy loads

import _runner  # noqa: E402
import bench_compile  # noqa: E402
import bench_elementwise  # noqa: E402
import bench_gemm  # noqa: E402
import bench_reductions  # noqa: E402
import bench_statement  # noqa: E402

FAMILIES = [bench_elementwise, bench_reductions, bench_gemm, bench_statement, bench_compile]
ORDER = ("copy", "logistic", "muladd", "tanh", "10op", "softmax", "sum0", "sum1", "var1",
         "gemm1024", "gemm2048x128", "stmt100", "compile")   # the table's row order


def main(argv: list[str] | None = None) -> int:
    return _runner.run(FAMILIES, "bench_cpu.py",
                       "neonlike's CPU benchmark suite against numpy, numexpr, numba and PyTorch.",
                       argv, order=ORDER)


if __name__ == "__main__":
    sys.exit(main())
