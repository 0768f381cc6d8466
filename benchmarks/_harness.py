"""What the CPU benchmark families share: thread pinning, peers, cases, measuring, formatting.

A case family (bench_elementwise.py, bench_reductions.py, bench_gemm.py, bench_statement.py,
bench_compile.py) defines its cases as a CASES table (name -> Case) and may define
`finish(ctx)`, called after the timed cases (extra rows and notes); _runner.run times the
selected cases of some families into one table: bench_cpu.py runs all of them, each family file
runs its own.

Import this module before numpy: when a benchmark script is the command being run, the thread
count of --threads (default 2) is put into every library's environment variable here, before
any thread pool is sized.
"""
from __future__ import annotations

import ctypes
import gc
import math
import os
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_THREADS = 2
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS", "NUMBA_NUM_THREADS")


def threads_from_argv(argv: list[str]) -> int:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return DEFAULT_THREADS


def thread_env(n: int) -> dict[str, str]:
    return {v: str(n) for v in THREAD_VARS}


def _pin_threads_of_the_command() -> None:
    """Thread pools are sized when the libraries load: pin them before numpy is imported."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if script and Path(script).resolve().parent == HERE:
        os.environ.update(thread_env(threads_from_argv(sys.argv[1:])))
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))


_pin_threads_of_the_command()

import numpy as np  # noqa: E402

try:  # hand-written numba kernels; prange is range when numba is missing (they are then unused)
    from numba import prange
except ImportError:  # pragma: no cover
    prange = range


def nb_copy(x, o):
    for i in prange(x.size):
        o[i] = x[i]


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
        self._nb: dict[Callable, tuple] = {}
        self.mkl: MKLDirect | None = None
        try:
            self.mkl = MKLDirect()
            self.versions["MKL"] = os.path.basename(self.mkl.path)
        except Exception as e:  # noqa: BLE001
            self.notes.append(f"MKL direct skipped: {e}")
        blas = numpy_blas()
        if blas:
            self.versions["numpy's BLAS"] = blas

    def _try(self, name: str, setup: Callable) -> Any:
        try:
            mod = __import__(name)
            setup(mod)
            self.versions[name] = getattr(mod, "__version__", "?")
            return mod
        except Exception as e:  # noqa: BLE001
            self.notes.append(f"{name} skipped ({type(e).__name__}: {e}); pip install {name}")
            return None

    def numba_kernel(self, kernel: Callable) -> tuple | None:
        """(serial, parallel) dispatchers of a hand-written kernel, compiled on first call."""
        if self.numba is None:
            return None
        if kernel not in self._nb:
            self._nb[kernel] = (self.numba.njit(fastmath=True)(kernel),
                                self.numba.njit(parallel=True, fastmath=True)(kernel))
        return self._nb[kernel]

    def numba_best(self, kernel: Callable, *args: Any) -> Callable[[], Any] | None:
        """The faster of the serial and parallel kernels on these arguments, as a no-arg call."""
        pair = self.numba_kernel(kernel)
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


def numpy_blas() -> str | None:
    """The BLAS numpy's matmul calls, as numpy's build configuration names it."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - older numpy: no dict mode
        return None


class MKLDirect:
    """cblas_sgemm of libmkl_rt through ctypes: the library neonlike's GEMM module binds."""

    def __init__(self) -> None:
        path = None
        try:  # the library neonlike resolved, so both call into the same MKL instance
            from neonlike.backends.cpu import gemm as G
            G.backend_name()
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
        return sgemm_call(self.fn, A, B, C)


def sgemm_call(fn: Callable, A: np.ndarray, B: np.ndarray,
               C: np.ndarray) -> Callable[[], np.ndarray]:
    """C = A @ B through `fn`, a row-major cblas_sgemm, for C-contiguous float32 arrays, as a
    no-arg call (pointers bound once)."""
    (M, K), N = A.shape, B.shape[1]
    pa, pb, pc = A.ctypes.data, B.ctypes.data, C.ctypes.data

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
    ceiling at the size), 'vs' (peer time / neonlike time >= x; `peer` may name several,
    comma-separated: the fastest of them counts), 'max' (neonlike time <= s)."""
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
        peer = self.peer if "," not in self.peer else f"fastest of {self.peer.replace(',', ', ')}"
        if self.value == 1:
            return f"<= {peer} time"
        if self.value < 1:
            return f"<= {1 / self.value:.2f}x {peer} time"
        return f">= {self.value:g}x {peer}"


# Pause between two batches: OpenMP pools (torch's, MKL's) spin-wait after a parallel region, and
# spinning threads on a 2-core machine slow whatever runs next by up to 40% (measured: neonlike's
# logistic at 1e6 right after a torch.sigmoid batch, 269 us; after a 10 ms pause, 199 us).
PAUSE_S = 0.01
# BLAS pools spin far longer (OpenBLAS's for up to ~0.1 s, Intel OpenMP's KMP_BLOCKTIME 0.2 s):
# without this pause every GEMM ran at about half speed right after another library's GEMM.
GEMM_PAUSE_S = 0.3


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
    pause_s: float = PAUSE_S   # idle time after each batch
    size: str | None = None    # the table's size cell (default: n)


@dataclass(frozen=True)
class Case:
    """A case of a family's CASES table: build(suite, n) gives its Bench (None: the family's
    finish(ctx) makes its rows). A sized case runs at every --sizes element count, the others
    once (n = 0); `ceiling_n`: an extra size at which the copy ceiling is measured for it."""
    build: Callable[[Suite, int], Bench] | None
    sized: bool = False
    ceiling_n: int | None = None


def shape2d(n: int) -> tuple[int, int]:
    """n elements as (rows, cols): 1e2 -> (10, 10), 1e4 -> (100, 100), 1e6 -> (1000, 1000),
    1e7 -> (10000, 1000)."""
    cols = min(1000, 10 ** (int(math.log10(max(n, 1))) // 2))
    return max(1, n // cols), cols


class Suite:
    """The backend, the peers and the random data every case draws from (one stream, seed 0)."""

    def __init__(self, be: Any, peers: Peers, seed: int = 0) -> None:
        self.be, self.p = be, peers
        self.rng = np.random.default_rng(seed)

    def data(self, shape: tuple, lo: float, hi: float) -> np.ndarray:
        return self.rng.uniform(lo, hi, shape).astype(np.float32)


def copy_bench(s: Suite, n: int) -> Bench:
    """The copy ceiling at n elements: np.copyto, a numba prange copy, torch's copy_."""
    shape = shape2d(n)
    x = s.data(shape, -1, 1)
    o = np.empty_like(x)
    impls: dict[str, Callable] = {"numpy out=": lambda: np.copyto(o, x) or o}
    nb = s.p.numba_best(nb_copy, x.reshape(-1), o.reshape(-1))
    if nb:
        impls["numba"] = lambda: nb() or o
    if s.p.torch:
        xt, ot = s.p.t(x), s.p.t(np.empty_like(x))
        impls["torch"] = lambda: ot.copy_(xt)
    return Bench("copy", "copy (ceiling)", x.size, impls, lambda: x.astype(np.float64),
                 nbytes=2 * x.nbytes, ceiling_row=True)


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


def measure(b: Bench, cfg: Config,
            samples_out: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """{impl: median seconds per call, or a string saying why it was not timed}; the per-round
    times go into samples_out when given."""
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
    if samples_out is not None:
        samples_out.update(samples)
    return res


# =====================================================================================================
# Formatting
# =====================================================================================================
def fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_n(n: int) -> str:
    e = math.log10(n) if n > 0 else 0
    return f"1e{int(e)}" if n > 0 and abs(e - round(e)) < 1e-9 else f"{n:,}"
