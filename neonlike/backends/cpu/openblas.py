"""OpenBLAS run on numba's thread pool: GEMM's third path beside MKL and numpy's matmul.

A private, single-threaded OpenBLAS (the `scipy-openblas32` wheel: its own library and thread
count, apart from the OpenBLAS under numpy's matmul) is called once per task of a Numba
parallel region that cuts C into row or column blocks (`tiles`). So:
- its kernels are OpenBLAS's own for the machine (SkylakeX's AVX-512 on this AMD EPYC, where
  MKL takes its AVX2 code: one thread 100-109 GFLOP/s on 1024x1600x256 against MKL's 62-85;
  two tasks ~178 against MKL's two threads ~140, benchmarks/README.md);
- it starts no thread pool of its own: nothing is left spinning after a call to take a core
  from the fused kernels that follow (numpy's OpenBLAS does that for ~65 ms after a threaded
  call; see gemm._time_paths), and its tasks run on the pool numba's kernels and MKL's TBB
  layer already share.

Where a product is small enough, its calls may instead be cut into many calls that OpenBLAS
runs in its small-matrix kernels (`small_splits`, `split[itemsize]`), as gemm's 'auto' chooses by
timing per shape class.

`library()` binds it on first use (RuntimeError naming the package where it is missing).
Its `gemm[itemsize]` and `batch[itemsize]` take MKL's row-major CBLAS arguments, so gemm.py's
layout code drives both libraries; `pointers` are what Numba kernels that call a GEMM per task
take (rnn_kernels), as `gemm.mkl_kernel_pointers` gives MKL's; made on first use.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

try:   # (without numba the path is unavailable: library() says so, and 'auto' goes on)
    from numba import njit, prange
except ImportError:
    njit = prange = None

_ROW_MAJOR, _NO_TRANS = 101, 111
TASK_MACS = 1 << 20      # multiply-adds a task at least (~15 us): smaller calls run on one
# OpenBLAS (0.3.31, x86-64) runs a call of at most SMALL_MACS multiply-adds (M*N*K) in its
# small-matrix kernels, which pack neither operand: an LSTM step's task GEMM, 32 columns, one
# thread: 122x32x256 89 GFLOP/s, 123x32x256 74; Trans-A 30x32x1024 75, 31x32x1024 45. The
# sequence kernels cut their calls to fit (gemm.kernel_gemm_call_macs).
SMALL_MACS = 100 ** 3
PACKAGE = "scipy-openblas32"

_LOCK = threading.Lock()
_FOUND: list = []        # [the bound _OpenBLAS] or [the RuntimeError message]


def tiles(fn, ta, tb, M, N, K, alpha, pa, lda, sa, pb, ldb, sb, beta, pc, ldc, sc, nb, e,
          split_m, blocks):
    """nb slices (item strides sa, sb, sc between them) of a row-major C = alpha op(A) op(B) +
    beta C, each cut into `blocks` blocks of rows (split_m) or of columns, one `fn` call (a
    single-threaded cblas_?gemm) per (slice, block) task. Byte addresses pa, pb, pc; e the
    itemsize; ta, tb CblasNoTrans (111) or CblasTrans."""
    for job in prange(nb * blocks):
        x = job // blocks
        blk = job - x * blocks
        a, b, c = pa + x * sa * e, pb + x * sb * e, pc + x * sc * e
        if split_m:
            r0, r1 = blk * M // blocks, (blk + 1) * M // blocks
            a += (r0 * lda if ta == _NO_TRANS else r0) * e
            fn(_ROW_MAJOR, ta, tb, r1 - r0, N, K, alpha, a, lda, b, ldb, beta,
               c + r0 * ldc * e, ldc)
        else:
            c0, c1 = blk * N // blocks, (blk + 1) * N // blocks
            b += (c0 if tb == _NO_TRANS else c0 * ldb) * e
            fn(_ROW_MAJOR, ta, tb, M, c1 - c0, K, alpha, a, lda, b, ldb, beta, c + c0 * e, ldc)


if njit is not None:
    tiles = njit(parallel=True, cache=True)(tiles)


def _blocks(nb: int, M: int, N: int, K: int) -> tuple[bool, int]:
    """(split along M, blocks a slice): as many tasks as numba has threads where each gets
    TASK_MACS, cutting the longer of M and N (column blocks kept 16 wide and more)."""
    import numba
    threads = numba.get_num_threads()
    tasks = min(threads, max(1, nb * M * N * K // TASK_MACS))
    blocks = max(1, -(-tasks // nb)) if nb < tasks else 1
    split_m = M >= N
    blocks = min(blocks, max(1, (M if split_m else N) // 16))
    return split_m, blocks


SPLIT_STEPS = (4, 8, 16, 32)   # rows or columns a call of a small split takes
SPLIT_BLOCKS_MAX = 64           # calls a split makes at most


def small_splits(M: int, N: int, K: int, threads: int) -> list[tuple[bool, int]]:
    """The ways to cut a row-major M x N x K product into calls that OpenBLAS runs in its
    small-matrix kernels (at most SMALL_MACS each, which pack neither operand), as (along M,
    rows or columns a call): every SPLIT_STEPS step that fits, with at least `threads` and at
    most SPLIT_BLOCKS_MAX calls. Which is fastest, and whether any beats the packed kernels
    split in `threads` blocks, depends on the shape beyond any rule seen here (one thread
    each, 2-core Zen 4, against the packed split: 256^3 1.27x in 8-row calls, 0.61x in 8-column
    ones; 32x512x512 1.64x in 32-column calls; 64x1024x256 0.39x in 16-column calls, 1.13x in
    32-column ones), so gemm's 'auto' times them per shape class (gemm._choose_split)."""
    out = []
    for along_m, dim, other in ((True, M, N), (False, N, M)):
        for step in SPLIT_STEPS:
            blocks = -(-dim // step)
            if step * other * K <= SMALL_MACS and threads <= blocks <= SPLIT_BLOCKS_MAX:
                out.append((along_m, step))
    return out


class _OpenBLAS:
    """The bound library: gemm[e] / batch[e] callables with MKL's CBLAS arguments."""

    lp64 = True     # scipy-openblas32: 32-bit integers

    def __init__(self, dll: Any, path: str) -> None:
        self.path = path
        enum, ptr, i = ctypes.c_int, ctypes.c_void_p, ctypes.c_int
        self.cblas: dict[int, Any] = {}
        for size, prefix, real in ((4, "s", ctypes.c_float), (8, "d", ctypes.c_double)):
            fn = getattr(dll, f"scipy_cblas_{prefix}gemm")
            fn.argtypes = [enum, enum, enum, i, i, i, real, ptr, i, ptr, i, real, ptr, i]
            fn.restype = None
            # the same function as a ctypes pointer object: what a Numba kernel can call
            self.cblas[size] = ctypes.CFUNCTYPE(None, *fn.argtypes)(
                ctypes.cast(fn, ctypes.c_void_p).value)
        self.gemm = {e: self._gemm_of(e) for e in self.cblas}
        self.batch = {e: self._batch_of(e) for e in self.cblas}
        self.split = {e: self._split_of(e) for e in self.cblas}
        self._pointers: tuple | None = None

    @property
    def pointers(self) -> tuple:
        """(sgemm, set_threads_local) for Numba kernels, made when first asked (the no-op's
        numba compile, ~0.5 s, is not paid by a process that never runs such a kernel)."""
        if self._pointers is None:
            self._pointers = (self.cblas[4], _keep_threads())
        return self._pointers

    def _gemm_of(self, e: int) -> Any:
        fn = self.cblas[e]

        def gemm(layout, ta, tb, M, N, K, alpha, pa, lda, pb, ldb, beta, pc, ldc) -> None:
            split_m, blocks = _blocks(1, M, N, K)
            if blocks == 1:
                fn(layout, ta, tb, M, N, K, alpha, pa, lda, pb, ldb, beta, pc, ldc)
            else:
                tiles(fn, ta, tb, M, N, K, alpha, pa, lda, 0, pb, ldb, 0, beta, pc, ldc, 0, 1,
                      e, split_m, blocks)
        return gemm

    def _split_of(self, e: int) -> Any:
        fn = self.cblas[e]

        def split(along_m, step, layout, ta, tb, M, N, K, alpha, pa, lda, pb, ldb, beta, pc,
                  ldc) -> None:
            """gemm's call cut into blocks of about `step` rows (along_m) or columns, one
            single-threaded call each, on numba's pool (small_splits)."""
            blocks = -(-(M if along_m else N) // step)
            tiles(fn, ta, tb, M, N, K, alpha, pa, lda, 0, pb, ldb, 0, beta, pc, ldc, 0, 1, e,
                  along_m, blocks)
        return split

    def _batch_of(self, e: int) -> Any:
        fn = self.cblas[e]

        def batch(layout, ta, tb, M, N, K, alpha, pa, lda, sa, pb, ldb, sb, beta, pc, ldc, sc,
                  nb) -> None:
            split_m, blocks = _blocks(nb, M, N, K)
            tiles(fn, ta, tb, M, N, K, alpha, pa, lda, sa, pb, ldb, sb, beta, pc, ldc, sc, nb,
                  e, split_m, blocks)
        return batch


def _keep_threads() -> Any:
    """A ctypes pointer to `int f(int)` returning 1 and changing nothing: the 'set this thread's
    BLAS threads' call that rnn_kernels make around a task's GEMM (MKL_Set_Num_Threads_Local for
    MKL); this OpenBLAS is single-threaded already."""
    from numba import cfunc, types

    @cfunc(types.int32(types.int32))
    def keep(n):   # noqa: ARG001
        return 1
    # (the cfunc object owns the compiled code: keep it alive with the pointer)
    ptr = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(keep.address)
    ptr._owner = keep
    return ptr


def library() -> _OpenBLAS:
    """The private single-threaded OpenBLAS, bound on first use; RuntimeError naming the package
    where it cannot be loaded."""
    if _FOUND:
        if isinstance(_FOUND[0], str):
            raise RuntimeError(_FOUND[0])
        return _FOUND[0]
    with _LOCK:
        if not _FOUND:
            _FOUND.append(_bind())
    return library()


def available() -> bool:
    """Whether library() binds (the package is installed and its library loads)."""
    try:
        library()
    except RuntimeError:
        return False
    return True


def _bind() -> _OpenBLAS | str:
    """The library, or why not. OPENBLAS_NUM_THREADS=1 while the package loads it, so that it
    makes no worker threads at all (numpy's own OpenBLAS, loaded before, keeps its count)."""
    if njit is None:
        return "the OpenBLAS GEMM path runs on numba's thread pool: numba is not installed"
    saved = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import scipy_openblas32 as pkg
        dll = pkg.dll
        dll.scipy_openblas_set_num_threads(1)
        return _OpenBLAS(dll, getattr(dll, "_name", "?"))
    except (ImportError, OSError, AttributeError) as e:
        return (f"the OpenBLAS GEMM path needs the {PACKAGE} package (pip install {PACKAGE}): "
                f"{type(e).__name__}: {e}")
    finally:
        if saved is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = saved
