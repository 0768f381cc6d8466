"""GEMM on host numpy arrays: MKL's CBLAS through ctypes where MKL is installed, OpenBLAS on
numba's thread pool (openblas.py) where its package is, numpy otherwise.

    gemm(A, B, C, alpha=1.0, beta=0.0)          C = alpha * A @ B + beta * C      (2-D)
    batched_gemm(A, B, C, alpha=1.0, beta=0.0)  the same for each C[x]; A or B may be 2-D (shared)

A, B and C are numpy arrays of one dtype: float32, float64 or float16 (float16 is computed in
float32 temporaries and rounded into C). Both functions write into C and return it. As in BLAS,
C is not read when beta == 0 and A, B are not read when alpha == 0 (NaNs there do not spread).

CBLAS paths (MKL, OpenBLAS): views whose last or first stride is the itemsize (C order, Fortran
order, `.T`, column or row slices) go to CBLAS as they are, with CblasTrans and the right leading
dimension; other operands (stepped slices, negative strides, misaligned data) are copied into
contiguous temps. C is written in place when it is C- or Fortran-ordered (the latter as C.T =
B.T @ A.T) and does not overlap A or B; otherwise the product goes through a temp copied back.

Which path: NEONLIKE_GEMM ('auto', 'mkl', 'openblas' or 'numpy', read when the path is first
resolved) or `set_backend(name)`; `backend_name()` says which. 'auto', the default where MKL
loads, times MKL against its rival (OpenBLAS on numba's pool where `scipy-openblas32` is
installed, else numpy's matmul) once per shape class (dtype, power-of-two buckets of M, N, K and
the batch, the operands' transposition pattern, whether alpha is 1 and beta 0: see
`_shape_class`) and runs the faster one from then on (against numpy ties go to MKL, and so do
short calls after which numpy's OpenBLAS pool spins on; long calls are judged by their medians:
see `_time_paths`; against OpenBLAS ties go to OpenBLAS, and a class MKL wins is timed again
after CONFIRM_AFTER calls: MKL keeps it only by winning twice); `choices()` shows the table,
`clear_choices()` empties it. Against OpenBLAS, 'auto' also times OpenBLAS cut into calls its
small-matrix kernels run (openblas.small_splits) against its packed split, and runs a class in
the cut that won by 5% (`split_choices()`). A call laid out as one before (shapes, strides,
dtypes) skips the checks and layout work (_PREPARED). Without MKL every
call takes OpenBLAS, else numpy. Nothing is loaded at import: MKL's runtime (libmkl_rt from the
pip `mkl` package) and OpenBLAS are found and bound on the first call.
"""
from __future__ import annotations

import ctypes
import math
import os
import platform
import statistics
import sys
import threading
import time
from typing import Any, Callable, NamedTuple

import numpy as np

from ...memo import Memo

__all__ = ["gemm", "batched_gemm", "backend_name", "set_backend", "choices", "clear_choices",
           "split_choices",
           "ShapeClass", "set_num_threads", "get_num_threads", "mkl_library_path",
           "kernel_gemm_pointers", "ENV_VAR"]

ENV_VAR = "NEONLIKE_GEMM"
_BACKENDS = ("auto", "mkl", "openblas", "numpy")

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_DTYPES = {_F16: 2, _F32: 4, _F64: 8}  # the dtypes gemm takes (native byte order only)

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112  # CBLAS_LAYOUT / CBLAS_TRANSPOSE values
_FLIP = {_NO_TRANS: _TRANS, _TRANS: _NO_TRANS}

# 'auto' (see _auto_path, _time_paths and benchmarks/README.md, bench_gemm.py)
SMALL_MACS = 1 << 18     # up to 64^3 multiply-adds (K > 1) numpy runs it, untimed
TIMED_MACS = 1 << 30     # float32 classes above this are timed on a smaller representative
TIMING_RUNS = 3          # timed runs per path after one warm-up call; the minimum counts
SLOW_RUN_S = 0.05        # a warm-up call slower than this ends the timing and keeps MKL
QUIET_S = 0.003          # pause between the two paths' runs (MKL's TBB workers spin ~1 ms)
NUMPY_MARGIN = 0.95      # numpy is chosen when it takes under 95% of MKL's time ...
MKL_MARGIN = 0.90        # against OpenBLAS on numba's pool, MKL keeps a class only when it
#                          takes under 90% of OpenBLAS's time: in loops that interleave other
#                          work MKL's calls ran 1.2-1.7x their back-to-back time (its TBB pool
#                          waking), OpenBLAS's within 10% (100x128x784 in bench_gemm: MKL 116
#                          against 121 us back to back, then 162 against 132 in the rounds)
SPIN_PROBE_S = 0.005     # ... and leaves no thread spinning over this long after its calls,
SPIN_OK_S = 0.005        # unless one call takes this long (see _time_paths) ...
SPIN_MARGIN = 0.75       # ... and numpy takes under 75% of MKL's time
SETTLE_S = 0.3           # longest wait for a spinning pool to stop before timing a path (Intel
#                          OpenMP's KMP_BLOCKTIME, MKL's spin where it runs on that layer: 0.2 s)
LONG_RUNS = 5            # calls of each path (MKL's, then numpy's) whose medians judge long calls
CONFIRM_AFTER = 64       # calls of a class MKL won against OpenBLAS on numba's pool, after which
#                          the class is timed again and MKL keeps it only if it wins again: one
#                          timing is ~30 ms of this machine's time, whose speed moves by 10-20%
#                          over seconds (bench_gemm, 512^3: MKL won the timing, then ran 1.61 ms
#                          against OpenBLAS's 1.43 in the rounds)
MAX_CHOICES = 1024       # remembered shape classes (the oldest is dropped when full)


# ---------------------------------------------------------------------------------------------
# Finding and binding MKL (lazily)
# ---------------------------------------------------------------------------------------------

def _rt_sort_key(path: str) -> tuple:
    """libmkl_rt.so.3 before libmkl_rt.so.2 before libmkl_rt.so."""
    tail = os.path.basename(path).split(".so")[-1].lstrip(".")
    try:
        return (0, -int(tail.split(".")[0]))
    except ValueError:
        return (1, 0)


def _is_rt(name: str) -> bool:
    base = os.path.basename(name)
    return base.startswith("libmkl_rt.so") or base in ("mkl_rt.dll", "libmkl_rt.dylib") \
        or (base.startswith("mkl_rt.") and base.endswith(".dll"))


def _loaded_rt() -> list[str]:
    """libmkl_rt files already mapped into this process (Linux), e.g. by mkl-service."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            found = {line.split(None, 5)[-1].strip() for line in f if "mkl_rt" in line}
    except OSError:
        return []
    return sorted((p for p in found if _is_rt(p) and os.path.isfile(p)), key=_rt_sort_key)


def _candidate_paths() -> list[str]:
    """Where MKL's single dynamic library may be, best first."""
    out: list[str] = list(_loaded_rt())
    try:  # the pip `mkl` distribution lists its files, the runtime among them (in <prefix>/lib)
        from importlib.metadata import PackageNotFoundError, files
        try:
            listed = files("mkl") or []
        except PackageNotFoundError:
            listed = []
        out += sorted((str(f.locate()) for f in listed if _is_rt(str(f))), key=_rt_sort_key)
    except Exception:  # noqa: BLE001 - metadata trouble just means: look elsewhere
        pass
    dirs = [os.path.join(p, "lib") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)]
    try:
        import sysconfig
        dirs.append(os.path.normpath(os.path.join(sysconfig.get_paths()["purelib"], "..", "..")))
    except Exception:  # noqa: BLE001
        pass
    dirs += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        out += sorted((os.path.join(d, n) for n in names if _is_rt(n)), key=_rt_sort_key)
    import ctypes.util
    lib = ctypes.util.find_library("mkl_rt")
    if lib:
        out.append(lib)
    seen, unique = set(), []
    for p in out:
        key = os.path.realpath(p) if os.path.sep in p else p
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


_read_size_t = ctypes.c_size_t.from_address
_PTR_OFFSET: int | None = None  # where an ndarray keeps its data pointer; see _pointer_offset


def _pointer_offset() -> int | None:
    """The byte offset of the data pointer in an ndarray object, or None to use .ctypes.data.

    `arr.ctypes.data` costs ~1.5 us a call, about an 8x8 sgemm's time. numpy's public struct
    (PyArrayObject_fields: PyObject_HEAD, then `char *data`) puts the pointer right after the
    object header, so we read it there -- but only after checking that offset on probe arrays,
    falling back to `.ctypes.data` wherever the check fails (other builds, other runtimes).
    """
    offset = object.__basicsize__
    try:
        base = np.arange(64, dtype=np.float64).reshape(8, 8)
        probes = [base, base[3:, 2:], base.T[::2], np.empty(0), np.zeros((2, 3), np.float32),
                  np.asfortranarray(base)[1:]]
        if all(_read_size_t(id(p) + offset).value == p.ctypes.data for p in probes):
            return offset
    except Exception:  # noqa: BLE001
        pass
    return None


def _ptr(a: np.ndarray) -> int:
    """The address of a's first element."""
    off = _PTR_OFFSET
    return _read_size_t(id(a) + off).value if off is not None else a.ctypes.data


class _MKL:
    """ctypes bindings of MKL's cblas_?gemm and cblas_?gemm_batch_strided."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = lib = ctypes.CDLL(path)
        # The *_64 entry points take 64-bit integers whatever the interface layer
        # (MKL_INTERFACE_LAYER may make plain cblas_sgemm ILP64); plain names are LP64 otherwise.
        if hasattr(lib, "cblas_sgemm_64") and hasattr(lib, "cblas_dgemm_64"):
            suffix, integer = "_64", ctypes.c_int64
        else:
            ilp64 = os.environ.get("MKL_INTERFACE_LAYER", "").upper().startswith("ILP64")
            suffix, integer = "", (ctypes.c_int64 if ilp64 else ctypes.c_int)
        self.lp64 = integer is ctypes.c_int
        enum, ptr, i = ctypes.c_int, ctypes.c_void_p, integer
        self.gemm: dict[int, Any] = {}
        self.batch: dict[int, Any] = {}
        self.pointers: tuple | None = None     # mkl_kernel_pointers(), made on first use
        for size, prefix, real in ((4, "s", ctypes.c_float), (8, "d", ctypes.c_double)):
            fn = getattr(lib, f"cblas_{prefix}gemm{suffix}")
            fn.argtypes = [enum, enum, enum, i, i, i, real, ptr, i, ptr, i, real, ptr, i]
            fn.restype = None
            self.gemm[size] = fn
            name = f"cblas_{prefix}gemm_batch_strided{suffix}"
            if hasattr(lib, name):
                fb = getattr(lib, name)
                fb.argtypes = [enum, enum, enum, i, i, i, real, ptr, i, i, ptr, i, i, real, ptr,
                               i, i, i]
                fb.restype = None
                self.batch[size] = fb


class _State:
    lock = threading.Lock()
    forced: str | None = None      # set_backend(); None = the environment variable / auto
    resolved: str | None = None    # 'mkl' or 'numpy' once resolved
    mkl: _MKL | None = None
    mkl_error: str | None = None   # why MKL could not be loaded, when it could not
    tbb = False                    # MKL runs on its TBB threading layer (prefer_tbb_threading)
    rival = "numpy"                # what 'auto' times MKL against: 'openblas' or 'numpy'
    openblas: Any = None           # openblas.library() once bound (the 'openblas' path, rival)
    choices = Memo("cpu.gemm_choices", MAX_CHOICES)  # ShapeClass tuple -> 'mkl' or 'numpy'
    # class MKL won once against OpenBLAS -> its calls before it is timed again
    unconfirmed = Memo("cpu.gemm_unconfirmed", MAX_CHOICES)
    # class -> how OpenBLAS cuts a call into small-kernel calls ((along M, step), openblas'
    # small_splits), or None: its packed kernels, a block a thread (_choose_split)
    splits = Memo("cpu.gemm_splits", MAX_CHOICES)


def prefer_tbb_threading() -> str | None:
    """Ask MKL for its TBB threading layer, the thread pool numba's parallel kernels run on, so
    that a GEMM and a fused kernel alternating (every layer's fprop) share one pool: MKL's default
    OpenMP threads keep spinning after a GEMM and take the cores from the next kernel (a
    conv-then-dense step ran 2x slower). Only before MKL is loaded, only where the user has not
    chosen (MKL_THREADING_LAYER) and where MKL's TBB layer and TBB are installed; returns the
    layer set, or None. The process environment is left as it was."""
    if "MKL_THREADING_LAYER" in os.environ or _loaded_rt():
        return None
    for path in _candidate_paths():
        d = os.path.dirname(path)
        try:
            names = os.listdir(d) if d else []
        except OSError:
            continue
        tbb = sorted(n for n in names if n.startswith("libtbb.so."))
        if not tbb or not any(n.startswith("libmkl_tbb_thread.so") for n in names):
            continue
        try:   # MKL dlopens its TBB layer, which needs libtbb found: load it first, globally
            ctypes.CDLL(os.path.join(d, tbb[0]), mode=ctypes.RTLD_GLOBAL)
        except OSError:
            return None   # (MKL would abort the process if it could not load its layer)
        # MKL reads the variable when its first call loads the threading layer: make that call
        # now, then drop the variable, so that child processes (which have not loaded libtbb)
        # do not inherit it
        os.environ["MKL_THREADING_LAYER"] = "TBB"
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL).MKL_Get_Max_Threads()
        except (OSError, AttributeError):
            return None
        finally:
            del os.environ["MKL_THREADING_LAYER"]
        _State.tbb = True
        return "TBB"
    return None


def _load_mkl() -> _MKL:
    if _State.mkl is not None:
        return _State.mkl
    if _State.mkl_error is not None:
        raise RuntimeError(_State.mkl_error)
    prefer_tbb_threading()
    try:  # mkl-service first: it loads libmkl_rt the way MKL wants (RTLD_GLOBAL) and then
        import mkl  # noqa: F401  we bind that same instance, whose threads it controls
    except (ImportError, OSError):
        pass
    errors = []
    for path in _candidate_paths():
        try:
            _State.mkl = _MKL(path)
            break
        except (OSError, AttributeError) as e:
            errors.append(f"{path}: {e}")
    else:
        _State.mkl_error = ("MKL's runtime library (libmkl_rt) was not found or could not be "
                            "bound (pip install mkl mkl-service); tried: "
                            + ("; ".join(errors) or "nothing found"))
        raise RuntimeError(_State.mkl_error)
    return _State.mkl


def _resolve() -> str:
    with _State.lock:
        if _State.resolved is not None:
            return _State.resolved
        want = _State.forced or os.environ.get(ENV_VAR, "").strip().lower() or "auto"
        if want not in _BACKENDS:
            raise ValueError(f"{ENV_VAR} must be one of {_BACKENDS}, got {want!r}")
        from . import openblas
        if want == "numpy":
            name = "numpy"
        elif want == "openblas":
            _State.openblas = openblas.library()   # (RuntimeError naming the package)
            name = want
        else:
            try:
                _load_mkl()
                name = want
            except RuntimeError:
                if want == "mkl":
                    raise
                name = "openblas" if openblas.available() else "numpy"
        # what 'auto' times against MKL: OpenBLAS on numba's pool where it is installed
        _State.rival = "openblas" if name == "auto" and openblas.available() else "numpy"
        if name == "openblas" or _State.rival == "openblas":
            _State.openblas = openblas.library()
        global _PTR_OFFSET
        if _PTR_OFFSET is None:
            _PTR_OFFSET = _pointer_offset()
        _State.resolved = name
        return name


def backend_name() -> str:
    """'mkl', 'openblas', 'numpy' or 'auto' (MKL loaded, the faster per shape class of MKL and
    its rival, OpenBLAS where installed, else numpy: `choices()`): the path gemm and
    batched_gemm take, resolving it if need be."""
    return _State.resolved or _resolve()


def set_backend(name: str | None) -> str | None:
    """Force 'mkl', 'openblas' or 'numpy', or 'auto' (the faster per shape class where MKL
    loads, else OpenBLAS where installed, else numpy); None goes back to $NEONLIKE_GEMM.

    Returns the previous forced value (for restoring). 'mkl' and 'openblas' raise RuntimeError
    when their library cannot be loaded.
    """
    if name is not None and name not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS} or None, got {name!r}")
    with _State.lock:
        previous, _State.forced, _State.resolved = _State.forced, name, None
    if name in ("mkl", "openblas"):
        try:
            _resolve()
        except RuntimeError:
            with _State.lock:
                _State.forced, _State.resolved = previous, None
            raise
    return previous


def mkl_kernel_pointers() -> tuple | None:
    """(sgemm, set_threads_local) for Numba kernels that call MKL themselves: ctypes function
    pointers of the bound cblas_sgemm (its integer width included) and of
    MKL_Set_Num_Threads_Local (int -> previous int). None where gemm does not take MKL (not
    installed, or NEONLIKE_GEMM / set_backend chose 'numpy')."""
    if backend_name() == "numpy" or _State.mkl is None:
        return None
    mkl = _State.mkl
    if mkl.pointers is None:
        fn = mkl.gemm[4]
        local = getattr(mkl.lib, "MKL_Set_Num_Threads_Local", None)
        if local is None:
            return None
        addr = ctypes.c_void_p
        mkl.pointers = (
            ctypes.CFUNCTYPE(None, *fn.argtypes)(ctypes.cast(fn, addr).value),
            ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(ctypes.cast(local, addr).value))
    return mkl.pointers


def kernel_gemm_pointers() -> tuple | None:
    """(sgemm, set_threads_local) for Numba kernels that run a single-threaded sgemm in each
    task (rnn_kernels): OpenBLAS's (openblas.py; its thread call a no-op) where gemm takes
    OpenBLAS ('openblas', or 'auto' with OpenBLAS the rival), else MKL's
    (mkl_kernel_pointers); None on the numpy path."""
    if _kernels_take_openblas():
        return _State.openblas.pointers
    return mkl_kernel_pointers()


def _kernels_take_openblas() -> bool:
    """Whether the kernels' sgemm is OpenBLAS's: the 'openblas' path, or 'auto' with OpenBLAS
    the rival."""
    name = backend_name()
    return name == "openblas" or (name == "auto" and _State.rival == "openblas")


def kernel_gemm_call_macs() -> int:
    """The most multiply-adds one call of kernel_gemm_pointers' sgemm should take, 0 for no
    bound: OpenBLAS's small-matrix bound (openblas.SMALL_MACS) on x86-64 where the pointers are
    OpenBLAS's. Measured in rnn_kernels' setting (two tasks a step, each its own calls; 256
    units, batch 32, 50 steps): the forward steps' GEMMs 5.1 ms in 128-row calls, 4.1-4.3 in
    64- or 32-row ones; the backward steps' 5.3 ms in 128-row calls, 4.3 in 16-row ones."""
    if _kernels_take_openblas() and platform.machine().lower() in ("x86_64", "amd64"):
        from .openblas import SMALL_MACS
        return SMALL_MACS
    return 0


def mkl_library_path() -> str | None:
    """The libmkl_rt file bound, or None when MKL is not (yet, or cannot be) loaded."""
    return _State.mkl.path if _State.mkl is not None else None


def _numpy_blas_pools() -> list:
    """threadpoolctl's handles on the BLAS numpy calls (OpenBLAS, BLIS, FlexiBLAS), if any.

    MKL is left out: mkl-service controls it. [] without threadpoolctl (a scikit-learn
    dependency) or where numpy's BLAS is not one of these."""
    try:
        from threadpoolctl import ThreadpoolController
        found = ThreadpoolController().select(internal_api=["openblas", "blis", "flexiblas"])
        return list(found.lib_controllers)
    except Exception:  # noqa: BLE001 - no threadpoolctl, or it cannot read this process
        return []


def set_num_threads(n: int) -> int | None:
    """Set the thread count of both GEMM paths: MKL's (mkl-service) and the BLAS under numpy's
    matmul (OpenBLAS, through threadpoolctl). Returns the previous count (MKL's, else numpy
    BLAS's), or None when neither can be set. Forgets the 'auto' choices: they were timed with
    the old count.
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"set_num_threads needs n >= 1, got {n}")
    prefer_tbb_threading()   # (a no-op once MKL is loaded; mkl-service's import loads it)
    previous = None
    for pool in _numpy_blas_pools():
        previous = pool.num_threads
        pool.set_num_threads(n)
    try:
        import mkl
    except ImportError:
        mkl = None
    if mkl is not None:
        previous = mkl.get_max_threads()
        mkl.set_num_threads(n)
        if _State.tbb:   # MKL's TBB layer ignores the global count; the calling thread's applies
            mkl.set_num_threads_local(n)
    clear_choices()
    return previous


def get_num_threads() -> int | None:
    """MKL's maximum thread count (mkl-service), else numpy BLAS's; None when neither is known."""
    try:
        import mkl
    except ImportError:
        pools = _numpy_blas_pools()
        return pools[0].num_threads if pools else None
    return mkl.get_max_threads()


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def _dtype_error(fn: str, A: Any, B: Any, C: Any) -> ValueError:
    def name(x: Any) -> str:
        return str(x.dtype) if isinstance(x, np.ndarray) else type(x).__name__
    return ValueError(f"{fn}: A, B and C must share one dtype, float16, float32 or float64 in "
                      f"native byte order; got A {name(A)}, B {name(B)}, C {name(C)}")


def _check_arrays(fn: str, A: Any, B: Any, C: Any) -> np.dtype:
    for label, x in (("A", A), ("B", B), ("C", C)):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{fn}: {label} must be a numpy.ndarray, got {type(x).__name__}")
    dt = C.dtype
    if dt not in _DTYPES or A.dtype != dt or B.dtype != dt or not dt.isnative:
        raise _dtype_error(fn, A, B, C)
    if not C.flags.writeable:
        raise ValueError(f"{fn}: C is read-only")
    return dt


def _shape_error(fn: str, A: np.ndarray, B: np.ndarray, C: np.ndarray, want: str) -> ValueError:
    return ValueError(f"{fn}: expected {want}; got A {A.shape}, B {B.shape}, C {C.shape}")


# ---------------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------------

def _layout(s0: int, s1: int, r: int, c: int, e: int) -> tuple[int, int] | None:
    """(CblasNoTrans or CblasTrans, ld) for an r x c operand (r, c >= 1) with byte strides
    (s0, s1) and itemsize e, row-major CBLAS; None when it needs a copy."""
    if s1 == e or c == 1:
        if r == 1:
            return _NO_TRANS, c
        if s0 >= c * e and s0 % e == 0:
            return _NO_TRANS, s0 // e
    if s0 == e or r == 1:
        if c == 1:
            return _TRANS, r
        if s1 >= r * e and s1 % e == 0:
            return _TRANS, s1 // e
    return None


def _operand_layout(X: np.ndarray, r: int, c: int, e: int) -> tuple[int, int] | None:
    """_layout of a 2-D array, with the contiguous cases first (None: copy it)."""
    fl = X.flags
    if not fl.aligned:
        return None
    if fl.c_contiguous:
        return _NO_TRANS, c
    if fl.f_contiguous:
        return _TRANS, r
    s0, s1 = X.strides
    return _layout(s0, s1, r, c, e)


def _scale_only(C: np.ndarray, beta: float) -> np.ndarray:
    """C = beta * C, for alpha == 0 or K == 0 (C not read when beta == 0)."""
    if beta == 0:
        C[...] = 0
    elif beta != 1:
        C *= beta
    return C


def _overlaps(C: np.ndarray, A: np.ndarray, B: np.ndarray) -> bool:
    return np.may_share_memory(C, A) or np.may_share_memory(C, B)


# ---------------------------------------------------------------------------------------------
# MKL paths
# ---------------------------------------------------------------------------------------------

def _span(lay: tuple[int, int], r: int, c: int, e: int) -> int:
    """Bytes from the first to one past the last element of an r x c operand laid out `lay`."""
    return ((r - 1) * lay[1] + c) * e if lay[0] == _NO_TRANS else ((c - 1) * lay[1] + r) * e


def _cblas_form(la: tuple[int, int], lb: tuple[int, int], lc: tuple[int, int], M: int,
                N: int) -> tuple:
    """(ta, tb, m, n, lda, ldb, ldc, swap): the row-major CBLAS call of A (M, K) @ B (K, N)
    into C from the operands' layouts; swap where C is column-major and the call is C.T =
    B.T @ A.T (A's and B's pointers exchanged)."""
    if lc[0] == _NO_TRANS:
        return la[0], lb[0], M, N, la[1], lb[1], lc[1], False
    return _FLIP[lb[0]], _FLIP[la[0]], N, M, lb[1], la[1], lc[1], True


def _blas_gemm(lib: Any, A: np.ndarray, B: np.ndarray, C: np.ndarray, M: int, N: int, K: int,
               alpha: float, beta: float, split: tuple | None = None) -> None:
    """C = alpha A @ B + beta C through lib's cblas_?gemm (lib: the bound MKL, or the OpenBLAS
    of openblas.py, which takes the same arguments); dtype float32/float64, M, N, K >= 1.
    `split` (OpenBLAS only): the CBLAS call cut into small-kernel calls (openblas.small_splits),
    where C is written in place."""
    e = C.itemsize
    lc = _operand_layout(C, M, N, e)
    if lc is None:
        return _blas_gemm_via_temp(lib, A, B, C, M, N, K, alpha, beta)
    la = _operand_layout(A, M, K, e)
    if la is None:
        A = np.ascontiguousarray(A)  # (keeps the copy alive until the call returns)
        la = (_NO_TRANS, K)
    lb = _operand_layout(B, K, N, e)
    if lb is None:
        B = np.ascontiguousarray(B)
        lb = (_NO_TRANS, N)
    off = _PTR_OFFSET
    if off is not None:
        pa = _read_size_t(id(A) + off).value
        pb = _read_size_t(id(B) + off).value
        pc = _read_size_t(id(C) + off).value
    else:
        pa, pb, pc = A.ctypes.data, B.ctypes.data, C.ctypes.data
    # C must not overlap A or B (BLAS reads them while writing C): compare address ranges
    end_c = pc + _span(lc, M, N, e)
    if ((pa < end_c and pc < pa + _span(la, M, K, e))
            or (pb < end_c and pc < pb + _span(lb, K, N, e))):
        return _blas_gemm_via_temp(lib, A, B, C, M, N, K, alpha, beta)
    if lib.lp64 and max(M, N, K, la[1], lb[1], lc[1]) > 2**31 - 1:
        raise ValueError(f"gemm: dimensions {M}x{N}x{K} exceed this BLAS's 32-bit integers")
    ta, tb, m, n, lda, ldb, ldc, swap = _cblas_form(la, lb, lc, M, N)
    if swap:
        pa, pb = pb, pa
    args = (_ROW_MAJOR, ta, tb, m, n, K, alpha, pa, lda, pb, ldb, beta, pc, ldc)
    if split is None:
        lib.gemm[e](*args)
    else:
        lib.split[e](*split, *args)


def _blas_gemm_via_temp(lib: Any, A: np.ndarray, B: np.ndarray, C: np.ndarray, M: int, N: int,
                        K: int, alpha: float, beta: float) -> None:
    """For a C that CBLAS cannot write in place (odd strides, overlapping A or B)."""
    T = np.array(C, order="C") if beta != 0 else np.empty((M, N), C.dtype)
    _blas_gemm(lib, A, B, T, M, N, K, alpha, beta)
    C[...] = T


def _batch_layout(X: np.ndarray, nb: int, r: int, c: int, e: int) -> tuple[int, int, int] | None:
    """(trans, ld, batch stride in items) of a 2-D (shared: stride 0) or 3-D operand."""
    if not X.flags.aligned:
        return None
    if X.ndim == 2:
        s0, s1 = X.strides
        sb = 0
    else:
        sb, s0, s1 = X.strides
        if nb == 1:
            sb = 0
        elif sb < 0 or sb % e:
            return None
    lay = _layout(s0, s1, r, c, e)
    return None if lay is None else (lay[0], lay[1], sb // e)


def _blas_batched(lib: Any, A: np.ndarray, B: np.ndarray, C: np.ndarray, nb: int, M: int,
                  N: int, K: int, alpha: float, beta: float) -> None:
    """C[x] = alpha A[x] @ B[x] + beta C[x] through lib (as _blas_gemm); dtype float32/float64,
    nb, M, N, K >= 1."""
    e = C.itemsize
    lc = _batch_layout(C, nb, M, N, e)
    if lc is not None and nb > 1 and lc[2] < lc[1] * (M if lc[0] == _NO_TRANS else N):
        lc = None  # slices of C must not overlap one another (and MKL wants stridec >= ldc*rows)
    if lc is None or _overlaps(C, A, B):
        T = np.array(C, order="C") if beta != 0 else np.empty((nb, M, N), C.dtype)
        _blas_batched(lib, A, B, T, nb, M, N, K, alpha, beta)
        C[...] = T
        return
    la = _batch_layout(A, nb, M, K, e)
    if la is None:
        A = np.ascontiguousarray(A)
        la = (_NO_TRANS, K, M * K if A.ndim == 3 else 0)
    lb = _batch_layout(B, nb, K, N, e)
    if lb is None:
        B = np.ascontiguousarray(B)
        lb = (_NO_TRANS, N, K * N if B.ndim == 3 else 0)
    if lib.lp64 and max(nb, M, N, K, la[1], lb[1], lc[1], la[2], lb[2], lc[2]) > 2**31 - 1:
        raise ValueError(f"batched_gemm: sizes {nb}x{M}x{N}x{K} exceed this BLAS's 32-bit "
                         f"integers")
    pa, pb, pc = _ptr(A), _ptr(B), _ptr(C)
    if lc[0] == _TRANS:  # column-major C slices: C[x].T = B[x].T @ A[x].T
        la, lb, pa, pb, M, N = (_FLIP[lb[0]], lb[1], lb[2]), (_FLIP[la[0]], la[1], la[2]), \
            pb, pa, N, M
    if lb[2] == 0 and la[0] == _NO_TRANS and la[2] == M * la[1] and lc[2] == M * lc[1]:
        # B shared and the A and C slices stacked row after row: one (nb*M) x N x K GEMM
        lib.gemm[e](_ROW_MAJOR, la[0], lb[0], nb * M, N, K, alpha, pa, la[1], pb, lb[1],
                    beta, pc, lc[1])
        return
    batch = lib.batch.get(e)
    if batch is not None and nb > 1:  # (MKL wants stridec >= ldc * rows even for one slice)
        batch(_ROW_MAJOR, la[0], lb[0], M, N, K, alpha, pa, la[1], la[2], pb, lb[1], lb[2],
              beta, pc, lc[1], lc[2], nb)
        return
    fn = lib.gemm[e]
    for x in range(nb):
        fn(_ROW_MAJOR, la[0], lb[0], M, N, K, alpha, pa + x * la[2] * e, la[1],
           pb + x * lb[2] * e, lb[1], beta, pc + x * lc[2] * e, lc[1])


# ---------------------------------------------------------------------------------------------
# numpy path
# ---------------------------------------------------------------------------------------------

def _numpy_gemm(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float) -> None:
    """C = alpha A @ B + beta C with np.matmul (batched when any operand is 3-D)."""
    if beta == 0:
        np.matmul(A, B, out=C)  # numpy copies for itself where C overlaps A or B
        if alpha != 1:
            C *= alpha
        return
    T = np.matmul(A, B)
    if alpha != 1:
        T *= alpha
    if beta != 1:
        C *= beta
    C += T


def _float16(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float,
             run) -> np.ndarray:
    """float16: compute in float32 temps and round the result into C."""
    T = C.astype(np.float32) if beta != 0 else np.empty(C.shape, np.float32)
    run(A.astype(np.float32), B.astype(np.float32), T)
    C[...] = T
    return C


# ---------------------------------------------------------------------------------------------
# 'auto': the faster path per shape class, timed once
# ---------------------------------------------------------------------------------------------

class ShapeClass(NamedTuple):
    """What 'auto' times once: GEMMs of one class run on the same path.

    m, n, k and batch are power-of-two buckets (m=1024: 512 < M <= 1024; batch 1 for gemm);
    layout is the CBLAS view of A, B and C, 'N' (rows contiguous) or 'T' (columns), an 's'
    after a batched operand shared by every slice: 'NT>N' is A (M, K) @ B.T into C-ordered C."""
    op: str
    dtype: str
    batch: int
    m: int
    n: int
    k: int
    layout: str
    alpha_one: bool
    beta_zero: bool


_CODE = {_NO_TRANS: "N", _TRANS: "T"}


def _bucket(x: int) -> int:
    return 1 << (x - 1).bit_length()


def _shape_class(A: np.ndarray, B: np.ndarray, C: np.ndarray, nb: int, M: int, N: int, K: int,
                 alpha: float, beta: float) -> tuple | None:
    """The ShapeClass of this call as a plain tuple, or None where an operand needs a copy on
    the MKL path."""
    e = C.itemsize
    if C.ndim == 2:
        la, lb, lc = (_operand_layout(A, M, K, e), _operand_layout(B, K, N, e),
                      _operand_layout(C, M, N, e))
        if la is None or lb is None or lc is None:
            return None
        codes = (_CODE[la[0]], _CODE[lb[0]], _CODE[lc[0]])
    else:
        la, lb = _batch_layout(A, nb, M, K, e), _batch_layout(B, nb, K, N, e)
        if la is None or lb is None:
            return None
        if C.flags.c_contiguous:
            lc = "N"
        elif C.transpose(0, 2, 1).flags.c_contiguous:
            lc = "T"
        else:
            return None
        codes = (_CODE[la[0]] + ("s" if la[2] == 0 else ""),
                 _CODE[lb[0]] + ("s" if lb[2] == 0 else ""), lc)
    # a plain tuple in ShapeClass's order (dtype by its char): ShapeClass() and dtype.name
    # would cost a few microseconds a call
    return ("gemm" if C.ndim == 2 else "batched_gemm", C.dtype.char,
            _bucket(nb) if C.ndim == 3 else 1, _bucket(M), _bucket(N), _bucket(K),
            f"{codes[0]}{codes[1]}>{codes[2]}", alpha == 1, beta == 0)


def _split_codes(layout: str) -> tuple[str, str, str]:
    """'NTs>N' -> ('N', 'Ts', 'N')."""
    ab, c = layout.split(">")
    cut = 2 if ab[1:2] == "s" else 1
    return ab[:cut], ab[cut:], c


def _scratch(code: str, lead: tuple, r: int, c: int, dt: np.dtype, ones: bool) -> np.ndarray:
    """An r x c operand (lead: (batch,) or ()) laid out as a ShapeClass layout code says."""
    shape = (() if code.endswith("s") else lead) + ((r, c) if code[0] == "N" else (c, r))
    x = np.ones(shape, dt) if ones else np.zeros(shape, dt)
    return x if code[0] == "N" else x.swapaxes(-1, -2)


def _representative(key: tuple, dt: np.dtype, nb: int, M: int, N: int,
                    K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Operands in key's layout, halved (the batch first, then the longest of M, N, K) until the
    product fits TIMED_MACS: a large GEMM runs at the speed of one a few times smaller (both
    paths are in their blocked kernels there), and one run of the full product may cost most of
    a second."""
    cap = TIMED_MACS * 4 // dt.itemsize
    while nb * M * N * K > cap:
        if nb > 1:
            nb = (nb + 1) // 2
        elif M >= N and M >= K:
            M = (M + 1) // 2
        elif N >= K:
            N = (N + 1) // 2
        else:
            K = (K + 1) // 2
    ca, cb, cc = _split_codes(key[6])
    lead = (nb,) if key[0] == "batched_gemm" else ()
    return (_scratch(ca, lead, M, K, dt, True), _scratch(cb, lead, K, N, dt, True),
            _scratch(cc, lead, M, N, dt, False))


def _best_of(run: Callable[[], Any]) -> float | None:
    """The fastest of TIMING_RUNS calls after a warm-up call; None when the warm-up call took
    over SLOW_RUN_S."""
    start = time.perf_counter()
    run()
    if time.perf_counter() - start > SLOW_RUN_S:
        return None
    best = math.inf
    for _ in range(TIMING_RUNS):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _spinning() -> bool:
    """Whether this process keeps a core busy while it sleeps SPIN_PROBE_S (a BLAS pool left
    spinning by the last call)."""
    cpu, wall = time.process_time(), time.perf_counter()
    time.sleep(SPIN_PROBE_S)
    return time.process_time() - cpu > 0.3 * (time.perf_counter() - wall)


def _settle() -> None:
    """Wait (up to SETTLE_S) while a BLAS pool spins: a worker OpenBLAS left spinning after the
    last class's numpy trial took one core of two from the next class's MKL timing, which then
    read ~2x slow (1024x256x2048: 8.5-9.2 against 4.4 ms) and sent the class to numpy."""
    for _ in range(round(SETTLE_S / SPIN_PROBE_S)):   # (each probe sleeps SPIN_PROBE_S)
        if not _spinning():
            return


def _time_paths(run_mkl: Callable[[], Any], run_numpy: Callable[[], Any]) -> str:
    """'numpy' where its calls take under NUMPY_MARGIN of MKL's and leave no thread spinning
    after them, or, for a long call (SPIN_OK_S or more), under SPIN_MARGIN of MKL's where they
    do; else 'mkl' (also when a call is too slow to time).

    Each path runs its calls back to back after a warm-up call (caches filled, its pool awake),
    as a class's calls do once chosen: MKL first, then, after QUIET_S (MKL's TBB workers spin
    ~1 ms), numpy. What the timing cannot see is the spinning: after a call that used its
    thread pool, OpenBLAS leaves a worker spinning on a core for ~65 ms, so in a training loop
    one of two cores is taken from numba's kernels and MKL (which share TBB's pool). mnist_mlp
    (bench_nn.py) ran an epoch in 0.32 s when its 100x784x128 weight-gradient GEMM went to
    numpy on timing alone, 0.26 s on MKL; an LSTM layer's pass (bench_rnn.py, 256 units, batch
    32, 50 steps) 50 ms when its three ~4 ms weight and input-error GEMMs did, 35 ms on MKL:
    the spin after a long call outlasts the call and stalls the parallel step kernels that
    follow. So a short call goes to numpy only where OpenBLAS ran it on one thread (up to
    ~80^3 here), a long one where numpy's saving is large (1024^3: 9.6 against 13.1 ms). The
    5% margin sends ties, within this machine's noise, to MKL.

    Where the rival is OpenBLAS on numba's pool (_State.rival 'openblas', openblas.py), nothing
    spins after its calls, and the tie goes the other way: MKL keeps a class only where it
    takes under MKL_MARGIN of OpenBLAS's time, by medians (of two rounds for short calls); the
    second argument then runs OpenBLAS and 'openblas' is the verdict. OpenBLAS is timed once no
    pool spins, and an MKL that leaves its threads spinning (its Intel OpenMP layer) must take
    under SPIN_MARGIN of OpenBLAS's time. (bench_gemm's shapes,
    2026-11-28: OpenBLAS's AVX-512 kernels at or ahead of MKL's AVX2 on each, 256^3 to 2048^3
    and 100x128x784; with the old rule, ties to MKL and the kernel load in OpenBLAS's warm-up
    call, 'auto' kept 5 of 7 classes on MKL, 3 of 7 rows within 5% of the fastest BLAS.)"""
    _settle()
    mkl = _best_of(run_mkl)
    if mkl is None:
        return "mkl"   # too slow a machine to time this size: keep the MKL default
    if _State.rival == "openblas":
        # MKL on Intel OpenMP (where mkl-service or another library loaded MKL before neonlike
        # could ask for TBB: prefer_tbb_threading) leaves its threads spinning 0.2 s after each
        # call: the kernels that follow lose a core, and so did OpenBLAS's timing, which ran at
        # half speed right after MKL's calls (bench_gemm, 512^3: 2.6 against MKL's 1.34 ms, 1.38
        # alone). So OpenBLAS is timed once the spin has stopped, and a spinning MKL must save
        # SPIN_MARGIN, as numpy's spinning pool must against MKL.
        time.sleep(QUIET_S)      # (MKL's TBB workers spin ~1 ms: not counted)
        spins = _spinning()
        _settle()
        run_numpy()    # (a process's first call also loads tiles' cached kernel, ~0.4 s)
        if mkl >= SPIN_OK_S:
            mkl, rival = _medians(run_mkl, run_numpy)
        else:   # two rounds of each, the lower of a path's two medians counts: one path's
            #     fastest call (MKL's TBB pool here: medians 1.2-1.7x its fastest calls) or a
            #     burst of load during one round decided the verdict (100x128x784: MKL by its
            #     fastest call, then 162 against OpenBLAS's 132 us in bench_gemm's medians)
            if _best_of(run_numpy) is None:
                return "mkl"
            mkl, rival = _medians(run_mkl, run_numpy)
            time.sleep(QUIET_S)
            mkl2, rival2 = _medians(run_mkl, run_numpy)
            mkl, rival = min(mkl, mkl2), min(rival, rival2)
        return "mkl" if mkl < (SPIN_MARGIN if spins else MKL_MARGIN) * rival else "openblas"
    if mkl >= SPIN_OK_S:
        mkl, numpy = _medians(run_mkl, run_numpy)
        if numpy >= NUMPY_MARGIN * mkl:
            return "mkl"
        if not _spinning():
            return "numpy"
        # numpy leaves its pool spinning: it must save SPIN_MARGIN, on a second timing of MKL
        # too (MKL's calls sometimes ran at half speed for a while, one core taken: 8.5
        # against 4.3 ms at 1024x256x2048, which sent the class to numpy in 2 of 6 runs)
        _settle()
        mkl = min(mkl, _median(run_mkl))
        return "numpy" if numpy < SPIN_MARGIN * mkl else "mkl"
    time.sleep(QUIET_S)
    _settle()
    numpy = _best_of(run_numpy)
    if numpy is None or numpy >= NUMPY_MARGIN * mkl or _spinning():
        return "mkl"
    return "numpy"


def _medians(run_mkl: Callable[[], Any], run_numpy: Callable[[], Any]) -> tuple[float, float]:
    """(MKL's, the rival's) median of LONG_RUNS calls of each: MKL's calls first, then, after
    QUIET_S and once no pool spins (_settle), the rival's. A median is what a loop of such calls
    sees (a shared machine's fastest call says little of it). Not alternating the two: each MKL
    call then ran beside the worker OpenBLAS leaves spinning after a call (~65 ms), on one core
    of two, and looked twice as slow as it is (1024x256x2048: 11.7 ms a call alternating,
    5.6-6.3 alone; numpy's 5.4)."""
    mkl = _median(run_mkl)
    time.sleep(QUIET_S)
    _settle()
    return mkl, _median(run_numpy)


def _median(run: Callable[[], Any]) -> float:
    """The median time of LONG_RUNS back-to-back calls of `run`."""
    times = []
    for _ in range(LONG_RUNS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _remember(key: tuple, path: str) -> None:
    with _State.lock:
        _State.choices.put(key, path)


def _dims(A: np.ndarray, C: np.ndarray) -> tuple[int, int, int, int]:
    """(batch, M, N, K); batch 1 for 2-D C."""
    if C.ndim == 2:
        return 1, C.shape[0], C.shape[1], A.shape[-1]
    return C.shape[0], C.shape[1], C.shape[2], A.shape[-1]


def _auto_path(A: np.ndarray, B: np.ndarray, C: np.ndarray, nb: int, M: int, N: int, K: int,
               alpha: float, beta: float) -> str:
    """'mkl', 'openblas' or 'numpy' for this call under 'auto' (timing its shape class against
    _State.rival if it is new).

    Up to SMALL_MACS numpy's matmul is taken untimed: its call costs 2-10 us less than MKL's
    through ctypes (64^3: 6.6 against 9.1 us; 16 slices of 16^3: 2.8 against 8.7), OpenBLAS runs
    these sizes on one thread (no pool left spinning), and timing, or even computing the class
    (~1-2 us), would eat the gain. Not for K == 1, an outer product, which numpy's matmul runs
    slowly (128x128x1: 34 us, MKL 9). Operands that the MKL path would copy into temps keep MKL,
    the path they took before 'auto' timed anything (numpy copies them too)."""
    if K > 1 and nb * M * N * K <= SMALL_MACS:
        return "numpy"
    key = _shape_class(A, B, C, nb, M, N, K, alpha, beta)
    if key is None:
        return "mkl"
    path = _State.choices.get(key)
    if path is not None:
        if path == "mkl" and key in _State.unconfirmed:
            return _confirm(key, A, B, C, nb, M, N, K, alpha, beta)
        return path
    path = _timed(key, A, B, C, nb, M, N, K, alpha, beta, True)
    if path == "mkl" and _State.rival == "openblas":
        with _State.lock:
            _State.unconfirmed.put(key, CONFIRM_AFTER)
    _remember(key, path)
    return path


def _confirm(key: tuple, A: np.ndarray, B: np.ndarray, C: np.ndarray, nb: int, M: int, N: int,
             K: int, alpha: float, beta: float) -> str:
    """'mkl' for a class MKL won once against OpenBLAS until CONFIRM_AFTER of its calls have
    run; then the class is timed again, at another moment of the machine's, and the second
    verdict stands (MKL keeps the class only by winning twice)."""
    with _State.lock:
        left = _State.unconfirmed.get(key, 0) - 1
        if left > 0:
            _State.unconfirmed[key] = left
            return "mkl"
        _State.unconfirmed.pop(key, None)
    path = _timed(key, A, B, C, nb, M, N, K, alpha, beta, False)
    _remember(key, path)
    return path


def _timed(key: tuple, A: np.ndarray, B: np.ndarray, C: np.ndarray, nb: int, M: int, N: int,
           K: int, alpha: float, beta: float, reuse: bool) -> str:
    """The verdict of _time_paths for the class `key` of this call: on the call's own A and B
    and a scratch C laid out as C, or for a large class on a smaller representative (whose
    class's verdict is taken where it has one and `reuse`)."""
    if nb * M * N * K > TIMED_MACS * 4 // C.itemsize:
        A, B, T = _representative(key, C.dtype, nb, M, N, K)
        rep = _shape_class(A, B, T, *_dims(A, T), alpha, beta)
        path = _State.choices.get(rep) if rep is not None and reuse else None
        if path is not None:
            return path
    else:
        _, _, cc = _split_codes(key[6])
        T = _scratch(cc, (nb,) if C.ndim == 3 else (), M, N, C.dtype, False)
        rep = None
    rival = _runner(_State.rival)
    if _State.rival == "openblas" and rep is None and C.ndim == 2:
        _State.splits.put(key, _choose_split(A, B, T, M, N, K, alpha, beta))
    path = _time_paths(lambda: _mkl_run(A, B, T, alpha, beta),
                       lambda: rival(A, B, T, alpha, beta))
    if rep is not None:
        _remember(rep, path)
    return path


SPLIT_MARGIN = 0.95      # a small split replaces OpenBLAS's packed split at 5% faster


def _choose_split(A: np.ndarray, B: np.ndarray, T: np.ndarray, M: int, N: int, K: int,
                  alpha: float, beta: float) -> tuple | None:
    """How OpenBLAS should cut this call (2-D, written into T): the fastest of its packed split
    and the small-kernel splits that fit (openblas.small_splits, on the CBLAS call's M and N),
    each the fastest of TIMING_RUNS calls after a warm-up; None (the packed split) unless a
    small one takes under SPLIT_MARGIN of its time, or where none fits or an operand would be
    copied."""
    e = T.itemsize
    la, lb, lc = (_operand_layout(A, M, K, e), _operand_layout(B, K, N, e),
                  _operand_layout(T, M, N, e))
    if la is None or lb is None or lc is None or _State.openblas is None:
        return None
    import numba
    from . import openblas
    m, n = _cblas_form(la, lb, lc, M, N)[2:4]
    candidates = openblas.small_splits(m, n, K, numba.get_num_threads())
    if not candidates:
        return None
    lib = _State.openblas
    _settle()

    def packed_call() -> None:
        _blas_gemm(lib, A, B, T, M, N, K, alpha, beta)
    packed_call()     # (a process's first call also loads tiles' cached kernel, ~0.3 s)
    packed = _best_of(packed_call)
    if packed is None:
        return None
    best, found = SPLIT_MARGIN * packed, None
    for split in candidates:
        took = _best_of(lambda: _blas_gemm(lib, A, B, T, M, N, K, alpha, beta, split))
        if took is not None and took < best:
            best, found = took, split
    return found


def split_choices() -> dict[ShapeClass, tuple]:
    """The shape classes whose OpenBLAS calls 'auto' cuts into small-kernel calls, each with its
    (along M, rows or columns a call) of the CBLAS call (openblas.small_splits)."""
    with _State.lock:
        table = [(k, v) for k, v in _State.splits.items() if v is not None]
    return {ShapeClass(op, np.dtype(char).name, *rest): v for (op, char, *rest), v in table}


def choices() -> dict[ShapeClass, str]:
    """The shape classes 'auto' has timed, each with the path it runs ('mkl', 'openblas' or
    'numpy')."""
    with _State.lock:
        table = list(_State.choices.items())
    return {ShapeClass(op, np.dtype(char).name, *rest): path for (op, char, *rest), path in table}


def clear_choices() -> None:
    """Forget the timed choices: each shape class is timed again on its next call."""
    with _State.lock:
        _State.choices.clear()
        _State.unconfirmed.clear()
        _State.splits.clear()


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------

def gemm(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float = 1.0,
         beta: float = 0.0) -> np.ndarray:
    """C = alpha * A @ B + beta * C for 2-D A (M, K), B (K, N), C (M, N); returns C.

    One dtype for all three: float32, float64 or float16 (computed in float32). Shapes and
    dtypes are checked (ValueError; TypeError for non-arrays) before anything is written.

    A call laid out as one before (the same shapes, strides and dtypes: a layer's, every step)
    takes its checks and CBLAS arguments from _PREPARED: ~1.5 us of Python in front of the
    library instead of ~4.5.
    """
    if type(A) is _ND and type(B) is _ND and type(C) is _ND:
        sig = (A.shape, A.strides, B.shape, B.strides, C.shape, C.strides, A.dtype, B.dtype,
               C.dtype)
        p = _PREPARED.get(sig)
        if p:
            if C.flags.writeable and alpha != 0 and _prepared_call(p, A, B, C, float(alpha),
                                                                   float(beta)):
                return C
    else:
        sig = p = None
    dt = _check_arrays("gemm", A, B, C)
    if A.ndim != 2 or B.ndim != 2 or C.ndim != 2:
        raise _shape_error("gemm", A, B, C, "2-D A (M, K), B (K, N), C (M, N)")
    M, K = A.shape
    N = B.shape[1]
    if B.shape[0] != K or C.shape[0] != M or C.shape[1] != N:
        raise _shape_error("gemm", A, B, C, f"A (M, K), B (K, N), C (M, N), i.e. B ({K}, {N}) "
                           f"and C ({M}, {N}) for this A and B's {N} columns")
    alpha = float(alpha)
    beta = float(beta)
    if M == 0 or N == 0:
        return C
    if K == 0 or alpha == 0:
        return _scale_only(C, beta)
    _run(A, B, C, dt, alpha, beta)
    if p is None and sig is not None:
        _PREPARED.put(sig, _prepared(A, B, C, dt, M, N, K) or False)
    return C


# ---------------------------------------------------------------------------------------------
# Prepared calls: a layout seen before, its checks and CBLAS arguments kept
# ---------------------------------------------------------------------------------------------

_ND = np.ndarray
MAX_PREPARED = 1024      # remembered call layouts (a layer's few GEMMs each)


class _Prepared(NamedTuple):
    """What gemm worked out for a call layout that passed its checks (2-D, native float32 or
    float64, no size zero, every operand a view CBLAS takes as it is)."""
    key: tuple           # the ShapeClass tuple of alpha 1, beta 0 (_prepared_call mends it)
    e: int               # itemsize
    M: int
    N: int
    K: int
    args: tuple          # the CBLAS call's (ta, tb, m, n, lda, ldb, ldc, swap): _cblas_form
    spans: tuple         # bytes each of A, B and C spans (the overlap test)


_PREPARED = Memo("cpu.gemm_prepared", MAX_PREPARED)
# the genuine path functions: a test's stand-in (looked up by name, _runner) is called instead
# of the prepared BLAS call
_GENUINE: dict = {}


def _prepared(A: np.ndarray, B: np.ndarray, C: np.ndarray, dt: np.dtype, M: int, N: int,
              K: int) -> _Prepared | None:
    """The _Prepared of a checked call (sizes >= 1), or None where an operand is not a view
    CBLAS takes as it is (copies, temps: the full path each time) or the dtype is float16."""
    if dt == _F16:
        return None
    e = C.itemsize
    la, lb, lc = (_operand_layout(A, M, K, e), _operand_layout(B, K, N, e),
                  _operand_layout(C, M, N, e))
    if la is None or lb is None or lc is None or max(M, N, K, la[1], lb[1], lc[1]) > 2**31 - 1:
        return None
    return _Prepared(_shape_class(A, B, C, 1, M, N, K, 1.0, 0.0), e, M, N, K,
                     _cblas_form(la, lb, lc, M, N),
                     (_span(la, M, K, e), _span(lb, K, N, e), _span(lc, M, N, e)))


def _prepared_call(p: _Prepared, A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float,
                   beta: float) -> bool:
    """Run a prepared call; False (nothing done) where the full path must: the path not yet
    resolved or chosen for the class, a pending MKL confirmation, misaligned or overlapping
    data."""
    path = _State.resolved
    key = p.key if alpha == 1 and beta == 0 else p.key[:7] + (alpha == 1, beta == 0)
    if path == "auto":
        M, N, K = p.M, p.N, p.K
        if K > 1 and M * N * K <= SMALL_MACS:
            path = "numpy"
        else:
            path = _State.choices.get(key)
            if path is None or (path == "mkl" and key in _State.unconfirmed):
                return False
    elif path is None:
        return False
    run = _runner(path)
    if run is _GENUINE.get(path):
        lib = _State.mkl if path == "mkl" else _State.openblas if path == "openblas" else None
        if lib is not None:
            off = _PTR_OFFSET
            if off is None:
                return False
            pa = _read_size_t(id(A) + off).value
            pb = _read_size_t(id(B) + off).value
            pc = _read_size_t(id(C) + off).value
            e = p.e
            sa, sb, sc = p.spans
            if (pa | pb | pc) % e or (pa < pc + sc and pc < pa + sa) or \
                    (pb < pc + sc and pc < pb + sb):
                return False
            # (the overlap test and the call are _blas_gemm's, inline: this is the hot path)
            ta, tb, m, n, lda, ldb, ldc, swap = p.args
            if swap:
                pa, pb = pb, pa
            split = _State.splits.get(key) if path == "openblas" and _State.splits else None
            if split is None:
                lib.gemm[e](_ROW_MAJOR, ta, tb, m, n, p.K, alpha, pa, lda, pb, ldb, beta, pc,
                            ldc)
            else:
                lib.split[e](*split, _ROW_MAJOR, ta, tb, m, n, p.K, alpha, pa, lda, pb, ldb,
                             beta, pc, ldc)
            return True
    run(A, B, C, alpha, beta)
    return True


def _mkl_run(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float) -> None:
    """The MKL path of gemm (2-D C) or batched_gemm (3-D C); sizes >= 1, float32 or float64."""
    _blas_run(_State.mkl, A, B, C, alpha, beta)


def _openblas_run(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float,
                  beta: float) -> None:
    """The OpenBLAS path (openblas.py: single-threaded calls, one per task of numba's pool),
    a 2-D call cut as 'auto' chose for its class where it chose a small split."""
    if C.ndim == 2 and _State.splits:
        nb, M, N, K = _dims(A, C)
        key = _shape_class(A, B, C, 1, M, N, K, alpha, beta)
        split = _State.splits.get(key) if key is not None else None
        if split is not None:
            _blas_gemm(_State.openblas, A, B, C, M, N, K, alpha, beta, split)
            return
    _blas_run(_State.openblas, A, B, C, alpha, beta)


def _blas_run(lib: Any, A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float,
              beta: float) -> None:
    nb, M, N, K = _dims(A, C)
    if C.ndim == 2:
        _blas_gemm(lib, A, B, C, M, N, K, alpha, beta)
    else:
        _blas_batched(lib, A, B, C, nb, M, N, K, alpha, beta)


def _auto_run(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float) -> None:
    nb, M, N, K = _dims(A, C)
    _runner(_auto_path(A, B, C, nb, M, N, K, alpha, beta))(A, B, C, alpha, beta)


# each path's function, looked up by name at the call (a test's stand-in takes its place)
_RUNNERS = {"mkl": "_mkl_run", "openblas": "_openblas_run", "numpy": "_numpy_gemm",
            "auto": "_auto_run"}


def _runner(path: str) -> Callable[..., None]:
    return globals()[_RUNNERS[path]]


_GENUINE.update({path: globals()[name] for path, name in _RUNNERS.items()})


def _run(A: np.ndarray, B: np.ndarray, C: np.ndarray, dt: np.dtype, alpha: float,
         beta: float) -> np.ndarray:
    """C = alpha A @ B + beta C on the resolved path; float16 goes through float32 temps."""
    fn = _runner(_State.resolved or _resolve())
    if dt == _F16:
        return _float16(A, B, C, alpha, beta, lambda a, b, t: fn(a, b, t, alpha, beta))
    fn(A, B, C, alpha, beta)
    return C


def batched_gemm(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float = 1.0,
                 beta: float = 0.0) -> np.ndarray:
    """C[x] = alpha * A[x] @ B[x] + beta * C[x] for C (X, M, N); returns C.

    A is (X, M, K) or (M, K) (one A for every x), B is (X, K, N) or (K, N). dtypes and errors
    as in gemm.
    """
    dt = _check_arrays("batched_gemm", A, B, C)
    want = "A (X, M, K) or (M, K), B (X, K, N) or (K, N), C (X, M, N)"
    if C.ndim != 3 or A.ndim not in (2, 3) or B.ndim not in (2, 3):
        raise _shape_error("batched_gemm", A, B, C, want)
    nb, M, N = C.shape
    K = A.shape[-1]
    if (A.shape[-2] != M or B.shape[-2] != K or B.shape[-1] != N
            or (A.ndim == 3 and A.shape[0] != nb) or (B.ndim == 3 and B.shape[0] != nb)):
        raise _shape_error("batched_gemm", A, B, C, want)
    alpha = float(alpha)
    beta = float(beta)
    if nb == 0 or M == 0 or N == 0:
        return C
    if K == 0 or alpha == 0:
        return _scale_only(C, beta)
    return _run(A, B, C, dt, alpha, beta)
