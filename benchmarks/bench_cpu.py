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
               neonlike.backends.cpu.gemm binds.

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
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
DEFAULT_THREADS = 2
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS", "NUMBA_NUM_THREADS")


def _threads_from_argv(argv: list[str]) -> int:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return DEFAULT_THREADS


def _thread_env(n: int) -> dict[str, str]:
    return {v: str(n) for v in THREAD_VARS}


if __name__ == "__main__":  # thread pools are sized when the libraries load: pin them first
    os.environ.update(_thread_env(_threads_from_argv(sys.argv[1:])))
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

try:  # hand-written numba kernels; prange is range when numba is missing (they are then unused)
    from numba import prange
except ImportError:  # pragma: no cover
    prange = range

# =====================================================================================================
# Hand-written numba kernels (module level: numba freezes the float32 globals as constants)
# =====================================================================================================
F0, F1, F2 = np.float32(0.0), np.float32(1.0), np.float32(2.0)
COLS = 128  # column block of the axis-0 kernels


def nb_copy(x, o):
    for i in prange(x.size):
        o[i] = x[i]


def nb_logistic(x, o):
    for i in prange(x.size):
        o[i] = F1 / (F1 + np.exp(-x[i]))


def nb_muladd(x0, x1, o):
    for i in prange(x0.size):
        a = x0[i]
        o[i] = a * a + a * x1[i]


def nb_tanh(x0, x1, o):
    for i in prange(x0.size):
        a, b = x0[i], x1[i]
        o[i] = np.tanh(a * b + a / b)


def nb_10op(a, b, c, d, o):
    for i in prange(a.size):
        ai, bi, ci, di = a[i], b[i], c[i], d[i]
        o[i] = ((ai * bi + ci) * di - ai / (bi + F1)) * np.exp(-ci * ci) + np.sqrt(np.abs(di))


def nb_stmt(s, o):
    for i in prange(s.size):
        v = s[i]
        o[i] = np.tanh(v * F2 + F1) * v - v


def nb_softmax0(x, o):
    rows, cols = x.shape
    for blk in prange((cols + COLS - 1) // COLS):
        c0 = blk * COLS
        c1 = min(c0 + COLS, cols)
        w = c1 - c0
        m = x[0, c0:c1].copy()
        for r in range(1, rows):
            row = x[r, c0:c1]
            for c in range(w):
                m[c] = max(m[c], row[c])
        s = np.zeros(w, np.float32)
        for r in range(rows):
            row, orow = x[r, c0:c1], o[r, c0:c1]
            for c in range(w):
                e = np.exp(row[c] - m[c])
                orow[c] = e
                s[c] += e
        for c in range(w):
            s[c] = F1 / s[c]
        for r in range(rows):
            orow = o[r, c0:c1]
            for c in range(w):
                orow[c] *= s[c]


def nb_sum0(x, o):
    rows, cols = x.shape
    for blk in prange((cols + COLS - 1) // COLS):
        c0 = blk * COLS
        c1 = min(c0 + COLS, cols)
        acc = x[0, c0:c1].copy()
        for r in range(1, rows):
            row = x[r, c0:c1]
            for c in range(c1 - c0):
                acc[c] += row[c]
        o[c0:c1] = acc


def nb_sum1(x, o):
    rows, cols = x.shape
    for r in prange(rows):
        s = F0
        for c in range(cols):
            s += x[r, c]
        o[r] = s


def nb_var1(x, o):
    rows, cols = x.shape
    inv = F1 / np.float32(cols)
    for r in prange(rows):
        s = F0
        for c in range(cols):
            s += x[r, c]
        m = s * inv
        q = F0
        for c in range(cols):
            d = x[r, c] - m
            q += d * d
        o[r] = q * inv


NUMBA_KERNELS = {f.__name__[3:]: f for f in (nb_copy, nb_logistic, nb_muladd, nb_tanh, nb_10op,
                                               nb_stmt, nb_softmax0, nb_sum0, nb_sum1, nb_var1)}


# =====================================================================================================
# Peers: optional imports, thread settings, MKL's cblas_sgemm
# =====================================================================================================
class Peers:
    """The optional libraries found, with a note for each one that is missing."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.notes: list[str] = []
        self.versions: dict[str, str] = {"numpy": np.__version__}
        self.ne = self._try("numexpr", lambda m: m.set_num_threads(threads))
        self.numba = self._try("numba", lambda m: m.set_num_threads(
            min(threads, m.config.NUMBA_NUM_THREADS)))
        self.torch = self._try("torch", lambda m: m.set_num_threads(threads))
        try:
            import mkl  # mkl-service: MKL's thread count
            mkl.set_num_threads(threads)
        except ImportError:
            pass
        self._nb: dict[str, tuple] = {}
        self.mkl: MKLDirect | None = None
        try:
            self.mkl = MKLDirect()
            self.versions["MKL"] = os.path.basename(self.mkl.path)
        except Exception as e:  # noqa: BLE001
            self.notes.append(f"MKL direct skipped: {e}")

    def _try(self, name: str, setup: Callable) -> Any:
        try:
            mod = __import__(name)
            setup(mod)
            self.versions[name] = getattr(mod, "__version__", "?")
            return mod
        except Exception as e:  # noqa: BLE001
            self.notes.append(f"{name} skipped ({type(e).__name__}: {e}); pip install {name}")
            return None

    def numba_kernel(self, name: str) -> tuple | None:
        """(serial, parallel) dispatchers of a hand-written kernel, compiled on first call."""
        if self.numba is None:
            return None
        if name not in self._nb:
            f = NUMBA_KERNELS[name]
            self._nb[name] = (self.numba.njit(fastmath=True)(f),
                              self.numba.njit(parallel=True, fastmath=True)(f))
        return self._nb[name]

    def numba_best(self, name: str, *args: Any) -> Callable[[], Any] | None:
        """The faster of the serial and parallel kernels on these arguments, as a no-arg call."""
        pair = self.numba_kernel(name)
        if pair is None:
            return None
        best, best_t = None, math.inf
        for k in pair:
            k(*args)  # compile
            t0 = time.perf_counter()
            n = 0
            while n < 3 or time.perf_counter() - t0 < 0.005:
                k(*args)
                n += 1
            t = (time.perf_counter() - t0) / n
            if t < best_t:
                best, best_t = k, t
        return lambda: best(*args)

    def t(self, a: np.ndarray) -> Any:
        return self.torch.from_numpy(a)


class MKLDirect:
    """cblas_sgemm of libmkl_rt through ctypes: the library neonlike's GEMM module binds."""

    def __init__(self) -> None:
        path = None
        try:  # the library neonlike resolved, so both call into the same MKL instance
            from neonlike.backends.cpu import gemm as G
            if G.backend_name() == "mkl":
                path = G.mkl_library_path()
        except Exception:  # noqa: BLE001 - the module's internals may change: look ourselves
            pass
        path = path or self._find()
        if not path:
            raise RuntimeError("libmkl_rt not found (pip install mkl mkl-service)")
        self.path = path
        lib = ctypes.CDLL(path)
        if hasattr(lib, "cblas_sgemm_64"):
            fn, it = lib.cblas_sgemm_64, ctypes.c_int64
        else:
            fn, it = lib.cblas_sgemm, ctypes.c_int
        e, p, f = ctypes.c_int, ctypes.c_void_p, ctypes.c_float
        fn.argtypes = [e, e, e, it, it, it, f, p, it, p, it, f, p, it]
        fn.restype = None
        self.fn = fn

    @staticmethod
    def _find() -> str | None:
        try:
            from importlib.metadata import files
            for f in files("mkl") or []:
                if os.path.basename(str(f)).startswith("libmkl_rt.so"):
                    return str(f.locate())
        except Exception:  # noqa: BLE001
            pass
        import ctypes.util
        return ctypes.util.find_library("mkl_rt")

    def sgemm(self, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> Callable[[], np.ndarray]:
        """C = A @ B for C-contiguous float32 arrays, as a no-arg call (pointers bound once)."""
        (M, K), N = A.shape, B.shape[1]
        fn, pa, pb, pc = self.fn, A.ctypes.data, B.ctypes.data, C.ctypes.data

        def call() -> np.ndarray:
            fn(101, 111, 111, M, N, K, 1.0, pa, K, pb, N, 0.0, pc, N)
            return C
        return call


# =====================================================================================================
# Cases
# =====================================================================================================
@dataclass
class Target:
    """One clause of a row's target: kind 'gbps' (>= GB/s), 'ceiling' (>= fraction of the copy
    ceiling at the size), 'vs' (peer time / neonlike time >= x), 'max' (neonlike time <= s)."""
    kind: str
    value: float
    peer: str = ""

    def text(self) -> str:
        if self.kind == "gbps":
            return f">= {self.value:g} GB/s"
        if self.kind == "ceiling":
            return f">= {self.value:.0%} of copy"
        if self.kind == "max":
            return f"<= {fmt_time(self.value)}"
        if self.value == 1:
            return f"<= {self.peer} time"
        if self.value < 1:
            return f"<= {1 / self.value:.2f}x {self.peer} time"
        return f">= {self.value:g}x {self.peer}"


@dataclass
class Bench:
    case: str
    label: str                 # what is measured, shown in the table
    n: int                     # elements (output elements for elementwise; input for reductions)
    impls: dict[str, Callable[[], Any]]
    ref: Callable[[], np.ndarray]   # float64 reference result
    rtol: float = 1e-4
    atol: float = 1e-5         # relative to max |reference|
    nbytes: int | None = None  # bytes that must move
    flops: int | None = None
    targets: list[Target] = field(default_factory=list)
    ceiling_row: bool = False
    pause_s: float = 0.01      # idle time after each batch (see PAUSE_S)


def shape2d(n: int) -> tuple[int, int]:
    """n elements as (rows, cols): 1e2 -> (10, 10), 1e4 -> (100, 100), 1e6 -> (1000, 1000),
    1e7 -> (10000, 1000)."""
    cols = min(1000, 10 ** (int(math.log10(max(n, 1))) // 2))
    return max(1, n // cols), cols


class Suite:
    def __init__(self, be: Any, peers: Peers, seed: int = 0) -> None:
        self.be, self.p = be, peers
        self.rng = np.random.default_rng(seed)

    def data(self, shape: tuple, lo: float, hi: float) -> np.ndarray:
        return self.rng.uniform(lo, hi, shape).astype(np.float32)

    # ------------------------------------------------------------------ copy ceiling
    def copy(self, n: int) -> Bench:
        shape = shape2d(n)
        x = self.data(shape, -1, 1)
        o = np.empty_like(x)
        impls: dict[str, Callable] = {"numpy out=": lambda: np.copyto(o, x) or o}
        nb = self.p.numba_best("copy", x.reshape(-1), o.reshape(-1))
        if nb:
            impls["numba"] = lambda: nb() or o
        if self.p.torch:
            xt, ot = self.p.t(x), self.p.t(np.empty_like(x))
            impls["torch"] = lambda: ot.copy_(xt)
        return Bench("copy", "copy (ceiling)", x.size, impls, lambda: x.astype(np.float64),
                     nbytes=2 * x.nbytes, ceiling_row=True)

    # ------------------------------------------------------------------ elementwise trees
    def _elementwise(self, case: str, label: str, n: int, ranges: list, nl: Callable,
                     naive: Callable, out_eq: Callable, ne_expr: str | None, ne_names: Any,
                     ne_const: dict, nb_name: str, torch_fn: Callable | None, targets: list,
                     shape: tuple | None = None) -> Bench:
        be = self.be
        shape = shape or shape2d(n)
        xs = [self.data(shape, lo, hi) for lo, hi in ranges]
        nls = [be.array(x) for x in xs]
        o_nl = be.empty(shape)
        o, tmp = np.empty(shape, np.float32), np.empty(shape, np.float32)

        def neon() -> Any:
            o_nl[:] = nl(be, *nls)
            return o_nl

        impls: dict[str, Callable] = {"neonlike": neon,
                                      "numpy": lambda: naive(np, *xs),
                                      "numpy out=": lambda: out_eq(*xs, o, tmp)}
        if self.p.ne and ne_expr:
            local = dict(zip(ne_names, xs))
            local.update(ne_const)
            ne = self.p.ne
            o_ne = np.empty(shape, np.float32)
            impls["numexpr"] = lambda: ne.evaluate(ne_expr, local_dict=local, out=o_ne)
        flat = [x.reshape(-1) for x in xs]
        o_nb = np.empty(shape, np.float32)
        nb = self.p.numba_best(nb_name, *flat, o_nb.reshape(-1))
        if nb:
            impls["numba"] = lambda: nb() or o_nb
        if self.p.torch and torch_fn:
            ts = [self.p.t(x) for x in xs]
            ot = self.p.t(np.empty(shape, np.float32))
            th = self.p.torch
            impls["torch"] = lambda: torch_fn(th, *ts, ot)
        x64 = [x.astype(np.float64) for x in xs]
        return Bench(case, label, o.size, impls, lambda: naive(np, *x64),
                     nbytes=(len(xs) + 1) * o.nbytes, targets=targets)

    @staticmethod
    def _bw_targets(n: int, at_1e6: list[Target] | None = None) -> list[Target]:
        if n >= 10_000_000:
            return [Target("ceiling", 0.95)]
        if n >= 1_000_000:
            return at_1e6 if at_1e6 is not None else [Target("gbps", 45)]
        return []

    def logistic(self, n: int) -> Bench:
        def out_eq(x, o, tmp):
            np.negative(x, out=o)
            np.exp(o, out=o)
            np.add(o, 1, out=o)
            return np.reciprocal(o, out=o)
        return self._elementwise(
            "logistic", "logistic 1/(1+exp(-x))", n, [(-5, 5)],
            lambda be, x: 1 / (1 + be.exp(-x)), lambda m, x: 1 / (1 + m.exp(-x)), out_eq,
            "1/(1+exp(-x))", ["x"], {}, "logistic", lambda th, x, o: th.sigmoid(x, out=o),
            self._bw_targets(n) + ([Target("vs", 1.0, "torch")] if n >= 1_000_000 else []))

    def muladd(self, n: int) -> Bench:
        def out_eq(x0, x1, o, tmp):
            np.multiply(x0, x0, out=o)
            np.multiply(x0, x1, out=tmp)
            return np.add(o, tmp, out=o)
        return self._elementwise(
            "muladd", "x0*x0 + x0*x1", n, [(-1, 1), (-1, 1)],
            lambda be, x0, x1: x0 * x0 + x0 * x1, lambda m, x0, x1: x0 * x0 + x0 * x1, out_eq,
            "x0*x0 + x0*x1", ["x0", "x1"], {}, "muladd", lambda th, x0, x1, o: th.add(x0 * x0, x0 * x1, out=o),
            self._bw_targets(n))

    def tanh(self, n: int) -> Bench:
        def out_eq(x0, x1, o, tmp):
            np.multiply(x0, x1, out=o)
            np.divide(x0, x1, out=tmp)
            np.add(o, tmp, out=o)
            return np.tanh(o, out=o)
        return self._elementwise(
            "tanh", "tanh(x0*x1 + x0/x1)", n, [(-1, 1), (0.5, 1.5)],
            lambda be, x0, x1: be.tanh(x0 * x1 + x0 / x1),
            lambda m, x0, x1: m.tanh(x0 * x1 + x0 / x1), out_eq,
            "tanh(x0*x1 + x0/x1)", ["x0", "x1"], {}, "tanh",
            lambda th, x0, x1, o: th.tanh(x0 * x1 + x0 / x1, out=o), self._bw_targets(n))

    def tenop(self, n: int) -> Bench:
        def out_eq(a, b, c, d, o, tmp):
            np.multiply(a, b, out=o)
            np.add(o, c, out=o)
            np.multiply(o, d, out=o)
            np.add(b, 1, out=tmp)
            np.divide(a, tmp, out=tmp)
            np.subtract(o, tmp, out=o)
            np.multiply(c, c, out=tmp)
            np.negative(tmp, out=tmp)
            np.exp(tmp, out=tmp)
            np.multiply(o, tmp, out=o)
            np.abs(d, out=tmp)
            np.sqrt(tmp, out=tmp)
            return np.add(o, tmp, out=o)

        def tree(m, a, b, c, d):
            return ((a * b + c) * d - a / (b + 1)) * m.exp(-c * c) + m.sqrt(abs(d))

        def torch_fn(th, a, b, c, d, o):
            return th.add(((a * b + c) * d - a / (b + 1)) * th.exp(-c * c),
                          th.sqrt(th.abs(d)), out=o)
        at_1e6 = [Target("gbps", 40), Target("vs", 5, "numpy out="), Target("vs", 10, "numexpr"),
                  Target("vs", 1.0, "torch")]
        return self._elementwise(
            "10op", "10-op ((a*b+c)*d - a/(b+1))*exp(-c*c) + sqrt(abs(d))", n,
            [(-1, 1), (0, 1), (-1, 1), (-1, 1)], tree, tree, out_eq,
            "((a*b+c)*d - a/(b+1)) * exp(-c*c) + sqrt(abs(d))", "abcd", {}, "10op", torch_fn,
            self._bw_targets(n, at_1e6))

    def stmt100(self, n: int = 100) -> Bench:
        def out_eq(s, o, tmp):
            np.multiply(s, 2.0, out=o)
            np.add(o, 1.0, out=o)
            np.tanh(o, out=o)
            np.multiply(o, s, out=o)
            return np.subtract(o, s, out=o)
        b = self._elementwise(
            "stmt100", "statement o[:] = be.tanh(s*2.0 + 1.0)*s - s, 100 elements", 100,
            [(-1, 1)], lambda be, s: be.tanh(s * 2.0 + 1.0) * s - s,
            lambda m, s: m.tanh(s * 2.0 + 1.0) * s - s, out_eq,
            "tanh(s*two + one)*s - s", ["s"], {"two": np.float32(2), "one": np.float32(1)}, "stmt",
            lambda th, s, o: th.sub(th.tanh(s * 2.0 + 1.0) * s, s, out=o),
            [Target("max", 5e-6)], shape=(100, 1))
        b.nbytes = None
        return b

    # ------------------------------------------------------------------ softmax and reductions
    def softmax(self, n: int = 0) -> Bench:
        be, shape = self.be, (1000, 4096)
        x = self.data(shape, -4, 4)
        xn, o_nl = be.array(x), be.empty(shape)

        def neon() -> Any:  # neon's Softmax transform, verbatim
            o_nl[:] = (be.reciprocal(be.sum(be.exp(xn - be.max(xn, axis=0)), axis=0))
                       * be.exp(xn - be.max(xn, axis=0)))
            return o_nl

        def naive(m, x):
            e = m.exp(x - x.max(axis=0, keepdims=True))
            return e / e.sum(axis=0, keepdims=True)

        o, mx, sm = np.empty(shape, np.float32), np.empty((1, 4096), np.float32), \
            np.empty((1, 4096), np.float32)

        def out_eq():
            np.max(x, axis=0, keepdims=True, out=mx)
            np.subtract(x, mx, out=o)
            np.exp(o, out=o)
            np.sum(o, axis=0, keepdims=True, out=sm)
            return np.divide(o, sm, out=o)

        impls: dict[str, Callable] = {"neonlike": neon, "numpy": lambda: naive(np, x),
                                      "numpy out=": out_eq}
        if self.p.ne:
            ne, o_ne = self.p.ne, np.empty(shape, np.float32)

            def numexpr():
                m = x.max(axis=0, keepdims=True)
                ne.evaluate("exp(x - m)", local_dict={"x": x, "m": m}, out=o_ne)
                s = ne.evaluate("sum(e, axis=0)", local_dict={"e": o_ne}).reshape(1, -1)
                return ne.evaluate("e / s", local_dict={"e": o_ne, "s": s}, out=o_ne)
            impls["numexpr"] = numexpr
        o_nb = np.empty(shape, np.float32)
        nb = self.p.numba_best("softmax0", x, o_nb)
        if nb:
            impls["numba"] = lambda: nb() or o_nb
        if self.p.torch:
            xt, ot, th = self.p.t(x), self.p.t(np.empty(shape, np.float32)), self.p.torch
            impls["torch"] = lambda: th.softmax(xt, 0, out=ot)
        return Bench("softmax", "softmax over axis 0, (1000, 4096)", x.size, impls,
                     lambda: naive(np, x.astype(np.float64)), atol=1e-6, nbytes=2 * x.nbytes,
                     targets=[Target("vs", 3, "numpy"), Target("vs", 1.0, "torch")])

    def _reduction(self, case: str, label: str, n: int, axis: int, kind: str) -> Bench:
        be = self.be
        shape = shape2d(n)
        x = self.data(shape, 0, 1)
        oshape = (1, shape[1]) if axis == 0 else (shape[0], 1)
        xn, o_nl = be.array(x), be.empty(oshape)
        o = np.empty(oshape, np.float32)
        if kind == "sum":
            def neon() -> Any:
                o_nl[:] = be.sum(xn, axis=axis)
                return o_nl

            def naive(m, x):
                return x.sum(axis=axis)

            def out_eq():
                return np.sum(x, axis=axis, keepdims=True, out=o)
            ne_expr = f"sum(x, axis={axis})"
        else:
            tmp = np.empty(shape, np.float32)

            def neon() -> Any:
                o_nl[:] = be.var(xn, axis=axis)
                return o_nl

            def naive(m, x):
                return x.var(axis=axis)

            def out_eq():
                np.mean(x, axis=axis, keepdims=True, out=o)
                np.subtract(x, o, out=tmp)
                np.square(tmp, out=tmp)
                return np.mean(tmp, axis=axis, keepdims=True, out=o)
            ne_expr = f"sum((x - m)**2, axis={axis})"
        impls: dict[str, Callable] = {"neonlike": neon, "numpy": lambda: naive(np, x),
                                      "numpy out=": out_eq}
        if self.p.ne:
            ne = self.p.ne
            if kind == "sum":
                impls["numexpr"] = lambda: ne.evaluate(ne_expr, local_dict={"x": x})
            else:
                inv = np.float32(1.0 / shape[axis])

                def numexpr():
                    m = x.mean(axis=axis, keepdims=True)
                    return ne.evaluate(ne_expr, local_dict={"x": x, "m": m}) * inv
                impls["numexpr"] = numexpr
        o_nb = np.empty(oshape, np.float32)
        nb = self.p.numba_best(f"{kind}{axis}", x, o_nb.reshape(-1))
        if nb:
            impls["numba"] = lambda: nb() or o_nb
        if self.p.torch:
            xt, ot, th = self.p.t(x), self.p.t(np.empty(oshape, np.float32)), self.p.torch
            if kind == "sum":
                impls["torch"] = lambda: th.sum(xt, axis, keepdim=True, out=ot)
            else:
                impls["torch"] = lambda: th.var(xt, axis, correction=0, keepdim=True, out=ot)
        targets = [Target("vs", 3, "numpy"), Target("vs", 1.0, "torch")] if x.size >= 1_000_000 \
            else []
        return Bench(case, f"{label}, {shape}", x.size, impls,
                     lambda: naive(np, x.astype(np.float64)), rtol=1e-3, atol=1e-5,
                     nbytes=x.nbytes + o.nbytes, targets=targets)

    def sum0(self, n: int) -> Bench:
        return self._reduction("sum0", "sum over axis 0", n, 0, "sum")

    def sum1(self, n: int) -> Bench:
        return self._reduction("sum1", "sum over axis 1", n, 1, "sum")

    def var1(self, n: int) -> Bench:
        return self._reduction("var1", "var over axis 1", n, 1, "var")

    # ------------------------------------------------------------------ GEMM
    def gemm(self, M: int, N: int, K: int) -> Bench:
        be = self.be
        A, B = self.data((M, K), -1, 1), self.data((K, N), -1, 1)
        An, Bn, Cn = be.array(A), be.array(B), be.empty((M, N))
        C = np.empty((M, N), np.float32)

        def neon() -> Any:
            be.dot(An, Bn, out=Cn)
            return Cn

        impls: dict[str, Callable] = {"neonlike": neon, "numpy": lambda: A @ B,
                                      "numpy out=": lambda: np.matmul(A, B, out=C)}
        if self.p.torch:
            At, Bt, Ct, th = self.p.t(A), self.p.t(B), self.p.t(np.empty((M, N), np.float32)), \
                self.p.torch
            impls["torch"] = lambda: th.mm(At, Bt, out=Ct)
        if self.p.mkl:
            impls["MKL direct"] = self.p.mkl.sgemm(A, B, np.empty((M, N), np.float32))
        label = f"GEMM {M}^3" if M == N == K else f"GEMM {M}x{N}x{K}"
        return Bench(f"gemm{M}" if M == N == K else f"gemm{M}x{K}", label + " (M x N x K)",
                     M * N, impls, lambda: A.astype(np.float64) @ B.astype(np.float64),
                     rtol=1e-3, atol=1e-4, flops=2 * M * N * K,
                     targets=[Target("vs", 1 / 1.05, "MKL direct")], pause_s=GEMM_PAUSE_S)

    def gemm_assign_check(self) -> str | None:
        """`C[:] = be.dot(A, B)` must equal `be.dot(A, B, out=C)` (checked once, not timed)."""
        be = self.be
        A, B = self.data((64, 32), -1, 1), self.data((32, 48), -1, 1)
        An, Bn, C1, C2 = be.array(A), be.array(B), be.empty((64, 48)), be.empty((64, 48))
        try:
            C1[:] = be.dot(An, Bn)
            be.dot(An, Bn, out=C2)
            ok = np.allclose(C1.get(), C2.get(), rtol=1e-5, atol=1e-5) and \
                np.allclose(C1.get(), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
            return None if ok else "C[:] = be.dot(A, B) differs from be.dot(A, B, out=C)"
        except Exception as e:  # noqa: BLE001
            return f"C[:] = be.dot(A, B) failed: {type(e).__name__}: {e}"


# =====================================================================================================
# Measuring
# =====================================================================================================
@dataclass
class Config:
    repeats: int
    batch_s: float    # one timed batch lasts at least this long
    warm_s: float     # warm-up lasts at least this long (after the checked first call)
    warm_calls: int


def to_numpy(r: Any) -> np.ndarray:
    if hasattr(r, "get") and not isinstance(r, np.ndarray):
        return np.asarray(r.get())
    if hasattr(r, "detach"):
        return r.detach().numpy()
    return np.asarray(r)


def close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> bool:
    if got.size != want.size:
        return False
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    return bool(np.allclose(got.reshape(want.shape), want, rtol=rtol, atol=atol * scale))


# Pause between two batches: OpenMP pools (torch's, MKL's) spin-wait after a parallel region, and
# spinning threads on a 2-core machine slow whatever runs next by up to 40% (measured: neonlike's
# logistic at 1e6 right after a torch.sigmoid batch, 269 us; after a 10 ms pause, 199 us).
PAUSE_S = 0.01
# BLAS pools spin far longer (OpenBLAS's for up to ~0.1 s, Intel OpenMP's KMP_BLOCKTIME 0.2 s):
# without this pause every GEMM ran at about half speed right after another library's GEMM.
GEMM_PAUSE_S = 0.3


def measure(b: Bench, cfg: Config) -> dict[str, Any]:
    """{impl: median seconds per call, or a string saying why it was not timed}."""
    res: dict[str, Any] = {}
    outs: dict[str, np.ndarray] = {}
    for name, fn in b.impls.items():
        try:
            outs[name] = to_numpy(fn())
        except Exception as e:  # noqa: BLE001
            res[name] = f"error: {type(e).__name__}"
            print(f"  {b.case} n={b.n} {name}: {type(e).__name__}: {e}", file=sys.stderr)
            if name == "neonlike":
                traceback.print_exc(limit=3, file=sys.stderr)
    ref = b.ref()
    base = ref
    if "neonlike" in outs:
        if close(outs["neonlike"], ref, b.rtol, b.atol):
            base = outs["neonlike"]
        else:
            res["wrong"] = "neonlike"
            print(f"  {b.case} n={b.n}: neonlike's result differs from the float64 reference",
                  file=sys.stderr)
    live = []
    for name in b.impls:
        if name not in outs:
            continue
        if name != "neonlike" and not close(outs[name], base, b.rtol, b.atol):
            res[name] = "wrong result"
            print(f"  {b.case} n={b.n} {name}: result differs from neonlike's", file=sys.stderr)
            continue
        live.append(name)
    del outs
    number = {}
    for name in live:
        fn = b.impls[name]
        t0, k = time.perf_counter(), 0
        while k < cfg.warm_calls or time.perf_counter() - t0 < cfg.warm_s:
            fn()  # the first warm-up call may compile (neonlike's second run of a tree does)
            k += 1
        # the batch size from steady calls only: a compile inside the warm-up would make it one
        # call per batch, and a lone call times a cold cache and sleeping worker threads
        t0, k = time.perf_counter(), 0
        while k < 2 or time.perf_counter() - t0 < cfg.warm_s:
            fn()
            k += 1
        per = (time.perf_counter() - t0) / k
        number[name] = max(1, math.ceil(cfg.batch_s / max(per, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in live}
    gc_was = gc.isenabled()
    for r in range(cfg.repeats):
        order = live[r % len(live):] + live[:r % len(live)] if live else []
        for name in order:
            fn, k = b.impls[name], number[name]
            gc.disable()
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            t = time.perf_counter() - t0
            if gc_was:
                gc.enable()
            samples[name].append(t / k)
            time.sleep(b.pause_s)
    for name in live:
        res[name] = statistics.median(samples[name])
    return res


# =====================================================================================================
# Compile time (subprocesses with a fresh NEONLIKE_CACHE_DIR)
# =====================================================================================================
COMPILE_SCRIPT = r'''
import json, statistics, sys, time
t0 = time.perf_counter()
import numpy as np
from neonlike.backends import gen_backend
be = gen_backend(sys.argv[1])
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)
shape = (1000, 1000)
xs = [rng.uniform(0, 1, shape).astype(np.float32) for _ in range(4)]
a, b, c, d = [be.array(x) for x in xs]
o = be.empty(shape)

def first_and_steady(stmt):
    t = time.perf_counter(); stmt(); first = time.perf_counter() - t
    steady = []
    for _ in range(5):
        t = time.perf_counter(); stmt(); steady.append(time.perf_counter() - t)
    return first, statistics.median(steady)

def tree_a():
    o[:] = 1 / (1 + be.exp(-a))

def tree_b():  # the 10-op tree: never seen in a fresh cache dir
    o[:] = ((a * b + c) * d - a / (b + 1)) * be.exp(-c * c) + be.sqrt(abs(d))

out = {"import": t_import, "first tree": first_and_steady(tree_a),
       "new tree": first_and_steady(tree_b)}
try:
    import numba
    numba.set_num_threads(min(NTHREADS, numba.config.NUMBA_NUM_THREADS))

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def nb_first(x, o):  # numba's own start-up (threading layer, cache index): not a tree's cost
        for i in numba.prange(x.size):
            o[i] = np.float32(1) / (np.float32(1) + np.exp(-x[i]))

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def nb_10op(a, b, c, d, o):
        for i in numba.prange(a.size):
            ai, bi, ci, di = a[i], b[i], c[i], d[i]
            o[i] = ((ai * bi + ci) * di - ai / (bi + np.float32(1))) * np.exp(-ci * ci) \
                + np.sqrt(np.abs(di))
    flat = [x.reshape(-1) for x in xs]
    o_nb = np.empty(flat[0].shape, np.float32)
    out["numba first"] = first_and_steady(lambda: nb_first(flat[0], o_nb))
    out["numba new"] = first_and_steady(lambda: nb_10op(*flat, o_nb))
except ImportError:
    pass
print("RESULT " + json.dumps(out))
'''


def compile_times(backend: str, threads: int) -> dict[str, Any]:
    """{'cold': {...}, 'warm': {...}} from two subprocesses sharing one fresh cache dir."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="neonlike-bench-") as tmp:
        script = Path(tmp) / "compile_probe.py"
        script.write_text(COMPILE_SCRIPT.replace("NTHREADS", str(threads)))
        # NEONLIKE_JIT_AFTER=1: compile on a tree's first run (by default the first run of a
        # structure is interpreted and the compile happens when it recurs)
        env = dict(os.environ, **_thread_env(threads), NEONLIKE_CACHE_DIR=str(Path(tmp) / "cache"),
                   NEONLIKE_JIT_AFTER="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        for phase in ("cold", "warm"):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, str(script), backend], env=env, cwd=tmp,
                                  capture_output=True, text=True, timeout=600)
            wall = time.perf_counter() - t0
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if proc.returncode or line is None:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
                out[phase] = f"error: {tail[0][:120]}"
                print(f"  compile ({phase}) failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            out[phase] = json.loads(line[len("RESULT "):])
            out[phase]["process"] = wall
    return out


# =====================================================================================================
# Report
# =====================================================================================================
PEERS = ("numpy", "numpy out=", "numexpr", "numba", "torch", "MKL direct")


def fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_n(n: int) -> str:
    e = math.log10(n) if n > 0 else 0
    return f"1e{int(e)}" if n > 0 and abs(e - round(e)) < 1e-9 else f"{n:,}"


@dataclass
class Row:
    case: str
    label: str
    n: str
    neon: Any                         # seconds or a string
    rate: str                         # GB/s (% of copy) or GFLOP/s
    peers: dict[str, Any]
    targets: list[Target]
    met: str


def evaluate_targets(targets: list[Target], neon: Any, gbps: float | None, ceiling: float | None,
                     peers: dict[str, Any], wrong: bool) -> str:
    if not targets:
        return "—"
    if wrong:
        return "WRONG result"
    if not isinstance(neon, float):
        return "no (neonlike failed)"
    misses, unknown = [], []
    for t in targets:
        if t.kind == "gbps":
            ok = gbps is not None and gbps >= t.value
            what = f"{gbps:.1f} GB/s" if gbps is not None else "GB/s"
        elif t.kind == "ceiling":
            if gbps is None or not ceiling:
                unknown.append("ceiling")
                continue
            ok = gbps >= t.value * ceiling
            what = f"{gbps / ceiling:.0%} of copy"
        elif t.kind == "max":
            ok, what = neon <= t.value, fmt_time(neon)
        else:
            p = peers.get(t.peer)
            if not isinstance(p, float):
                unknown.append(t.peer)
                continue
            ok, what = p / neon >= t.value * (1 - 1e-9), f"{p / neon:.2f}x {t.peer}"
        if not ok:
            misses.append(what)
    text = "yes" if not misses else "NO: " + ", ".join(misses)
    if unknown:
        text += f" ({', '.join(unknown)} n/a)"
    return text


def cell(v: Any, neon: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if isinstance(neon, float) and neon > 0:
        r = v / neon
        return f"{fmt_time(v)} ({r:.0f}x)" if r >= 10 else f"{fmt_time(v)} ({r:.2g}x)"
    return fmt_time(v)


def to_markdown(rows: list[Row]) -> str:
    head = ["case", "size", "neonlike", "GB/s (% of copy)", *PEERS, "target", "met?"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        neon = fmt_time(r.neon) if isinstance(r.neon, float) else (r.neon or "—")
        vals = [r.label, r.n, neon, r.rate, *(cell(r.peers.get(p), r.neon) for p in PEERS),
                "; ".join(t.text() for t in r.targets) or "—", r.met]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def machine_line(threads: int, peers: Peers, be: Any) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        rev = ""
    vers = ", ".join(f"{k} {v}" for k, v in peers.versions.items())
    return (f"{platform.machine()}, {os.cpu_count()} CPUs ({cpu}), {threads} threads, float32, "
            f"{datetime.date.today().isoformat()}; python {platform.python_version()}, {vers}; "
            f"neonlike backend '{getattr(be, 'backend_name', '?')}'"
            + (f" at {rev}" if rev else ""))


# =====================================================================================================
# Main
# =====================================================================================================
CASES = ("copy", "logistic", "muladd", "tanh", "10op", "softmax", "sum0", "sum1", "var1",
         "gemm1024", "gemm2048x128", "stmt100", "compile")
SIZED = ("copy", "logistic", "muladd", "tanh", "10op", "sum0", "sum1", "var1")
FULL_SIZES = (100, 10_000, 1_000_000, 10_000_000)
QUICK_SIZES = (1_000_000, 10_000_000)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="neonlike's CPU benchmark suite against numpy, numexpr, numba and PyTorch.",
        epilog="cases: " + ", ".join(CASES) + ". 'copy' (the ceiling) runs whenever a "
               "bandwidth case does. Peer cells read 'time (peer time / neonlike time)': above "
               "1x neonlike is faster.")
    ap.add_argument("--quick", action="store_true",
                    help=f"sizes {','.join(fmt_n(s) for s in QUICK_SIZES)} and 5 repeats "
                         "(under 2 minutes)")
    ap.add_argument("--sizes", help="comma-separated element counts, e.g. 1e2,1e4,1e6,1e7")
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--repeats", type=int, help="timed rounds per case (default 11, quick 5)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the table (with notes) here")
    ap.add_argument("--json", metavar="FILE", help="also write the raw medians here")
    ap.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                    help="threads for every library (default 2: the targets are for 2 cores)")
    ap.add_argument("--backend", default="cpu", help="gen_backend name (default 'cpu')")
    args = ap.parse_args(argv)
    args.case_list = list(CASES) if not args.cases else [c.strip() for c in args.cases.split(",")]
    bad = [c for c in args.case_list if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; choose from {', '.join(CASES)}")
    if args.sizes:
        args.size_list = sorted({int(float(s)) for s in args.sizes.split(",") if s.strip()})
        if any(s < 1 for s in args.size_list):
            ap.error("sizes must be positive")
    else:
        args.size_list = list(QUICK_SIZES if args.quick else FULL_SIZES)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg() if hasattr(os, "getloadavg") else (0.0,)
    os.environ.update(_thread_env(args.threads))  # for subprocesses (and if imported, not run)
    cfg = Config(repeats=args.repeats or (5 if args.quick else 11),
                 batch_s=0.01 if args.quick else 0.04, warm_s=0.02 if args.quick else 0.1,
                 warm_calls=1 if args.quick else 3)
    from neonlike.backends import gen_backend
    be = gen_backend(args.backend, rng_seed=0)
    peers = Peers(args.threads)
    suite = Suite(be, peers)
    notes = list(peers.notes)

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {msg}", file=sys.stderr, flush=True)

    # (case, size) pairs in table order; copy at each size any bandwidth case uses
    plan: list[tuple[str, int]] = []
    sized = [c for c in args.case_list if c in SIZED and c != "copy"]
    copy_sizes = set(args.size_list) if (sized or "copy" in args.case_list) else set()
    if "softmax" in args.case_list:
        copy_sizes.add(1000 * 4096)
    plan += [("copy", n) for n in sorted(copy_sizes)]
    for c in args.case_list:
        if c in SIZED and c != "copy":
            plan += [(c, n) for n in args.size_list]
        elif c in ("softmax", "gemm1024", "gemm2048x128", "stmt100"):
            plan.append((c, 0))

    rows: list[Row] = []
    raw: dict[str, Any] = {}
    ceiling: dict[int, float] = {}
    for case, n in plan:
        log(f"{case} {fmt_n(n) if n else ''}")
        try:
            b = {"copy": suite.copy, "logistic": suite.logistic, "muladd": suite.muladd,
                 "tanh": suite.tanh, "10op": suite.tenop, "sum0": suite.sum0, "sum1": suite.sum1,
                 "var1": suite.var1}[case](n) if case in SIZED else \
                {"softmax": suite.softmax, "stmt100": suite.stmt100,
                 "gemm1024": lambda _: suite.gemm(1024, 1024, 1024),
                 "gemm2048x128": lambda _: suite.gemm(2048, 2048, 128)}[case](n)
        except Exception as e:  # noqa: BLE001 - a case that cannot be set up is a row saying so
            traceback.print_exc(file=sys.stderr)
            rows.append(Row(case, case, fmt_n(n) if n else "", f"setup error: {type(e).__name__}",
                            "—", {}, [], "no"))
            continue
        res = measure(b, cfg)
        wrong = res.pop("wrong", None) == "neonlike"
        raw[f"{case}@{b.n}"] = res
        neon = res.get("neonlike")
        gbps = rate = None
        if b.ceiling_row:
            cands = [res[k] for k in ("numpy out=", "numba") if isinstance(res.get(k), float)]
            if cands:
                ceiling[b.n] = b.nbytes / min(cands) / 1e9
                rate = f"{ceiling[b.n]:.1f} (ceiling)"
            neon = "—"
        elif isinstance(neon, float) and b.nbytes:
            gbps = b.nbytes / neon / 1e9
            ceil_n = ceiling.get(b.n)
            rate = f"{gbps:.1f}" + (f" ({gbps / ceil_n:.0%})" if ceil_n else "")
        elif isinstance(neon, float) and b.flops:
            rate = f"{b.flops / neon / 1e9:.0f} GFLOP/s"
        met = evaluate_targets(b.targets, neon, gbps, ceiling.get(b.n), res, wrong)
        if wrong:
            neon = f"WRONG {fmt_time(neon)}" if isinstance(neon, float) else neon
        size = "(100, 1)" if case == "stmt100" else fmt_n(b.n) if case in SIZED else \
            f"{b.n:,}" if not case.startswith("gemm") else "—"
        rows.append(Row(case, b.label, size, neon, rate or "—",
                        {k: v for k, v in res.items() if k != "neonlike"}, b.targets, met))
        del b
        gc.collect()

    if any(c.startswith("gemm") for c in args.case_list):
        msg = suite.gemm_assign_check()
        notes.append(msg or "`C[:] = be.dot(A, B)` checked equal to `be.dot(A, B, out=C)` "
                            "(the GEMM rows time the out= form)")

    if "compile" in args.case_list:
        log("compile (two subprocesses)")
        ct = compile_times(args.backend, args.threads)
        raw["compile"] = ct
        for phase, key, label, target in (
                ("cold", "first tree", "compile: first tree of a cold process (start-up included)",
                 None),
                ("cold", "new tree", "compile: a never-seen tree (the 10-op), empty cache dir", 0.5),
                ("warm", "first tree", "reload: first tree of a new process (start-up included)",
                 None),
                ("warm", "new tree", "reload: the 10-op tree from the disk cache", 0.010)):
            d = ct.get(phase)
            peer: dict[str, Any] = {}
            if isinstance(d, dict):
                first, steady = d[key]
                neon: Any = max(0.0, first - steady)
                nb = d.get("numba " + key.split()[0])
                if nb:
                    peer["numba"] = max(0.0, nb[0] - nb[1])
            else:
                neon = d or "not run"
            targets = [Target("max", target)] if target is not None else []
            rows.append(Row("compile", label, "1e6", neon, "—", peer, targets,
                            evaluate_targets(targets, neon, None, None, peer, False)))
        cold = ct.get("cold")
        if isinstance(cold, dict) and cold["new tree"][0] - cold["new tree"][1] < 0.02:
            notes.append("compile rows: the first call of a never-seen tree cost under 20 ms, so "
                         "no kernel was compiled (this backend interprets the tree; see the "
                         "neonlike environment line above).")
        if isinstance(ct.get("cold"), dict):
            notes.append(f"compile rows: first call minus a steady call, (1000, 1000) float32; "
                         f"`import neonlike` + gen_backend took {fmt_time(ct['cold']['import'])} "
                         f"(cold process); the numba cells are hand-written @njit(parallel, "
                         f"cache=True) kernels in the same processes (logistic first, then the "
                         f"10-op).")

    elapsed = time.perf_counter() - started
    cmdline = list(argv if argv is not None else sys.argv[1:])
    header = [f"Machine: {machine_line(args.threads, peers, be)}.",
              f"Run: `{' '.join(['python benchmarks/bench_cpu.py', *cmdline])}`, {elapsed:.0f} s; "
              f"medians of {cfg.repeats} interleaved rounds.",
              "Peer cells: median time (peer time / neonlike time; above 1x neonlike is faster). "
              "GB/s: inputs read once + output written once, over neonlike's time; % of copy: "
              "against the copy ceiling at the same size (the faster of np.copyto and a numba "
              "prange copy, this run)."]
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    if load is not None:
        busy = load_start[0] > 0.25 * (os.cpu_count() or 1) or load[0] > 0.25 * (os.cpu_count() or 1)
        header.append(f"Load average (1 min) {load_start[0]:.2f} at the start, {load[0]:.2f} at the "
                      f"end" + ("; other processes were using the cores, so these numbers are "
                                "noisy and multi-threaded ones suffer most." if busy else "."))
    envs = {k: v for k, v in os.environ.items() if k.startswith("NEONLIKE_")}
    header.append("neonlike environment: " + (", ".join(f"{k}={v}" for k, v in sorted(envs.items()))
                                              or "none set (library defaults)") + ".")
    if peers.numba is not None:
        try:
            layer = peers.numba.threading_layer()
        except Exception:  # noqa: BLE001 - no parallel kernel has run
            layer = "?"
        notes.append(f"numba: threading layer {layer}, SVML "
                     f"{'on' if peers.numba.config.USING_SVML else 'off (no icc_rt): exp/tanh are scalar libm calls'}")
    cache_res = [f"{fmt_n(n)}: {g:.1f} GB/s" for n, g in sorted(ceiling.items())]
    if cache_res:
        notes.append("copy ceiling " + ", ".join(cache_res))
    judged = [r for r in rows if r.targets]
    met = sum(r.met.startswith("yes") for r in judged)
    header.append(f"Targets met: {met} of {len(judged)} rows.")
    table = to_markdown(rows)
    text = "\n\n".join(header) + "\n\n" + table + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_line(args.threads, peers, be),
                                               "results": raw, "ceiling": ceiling}, indent=1,
                                              default=str), encoding="utf-8")
    log(f"done in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
