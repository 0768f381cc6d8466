"""A small ctypes binding of cuBLAS (pycuda has none), and the row-major -> column-major mapping.

cuBLAS is column-major; neonlike's tensors are row-major with element strides. A row-major
(rows, cols) matrix with strides (r, 1) is, read column-major, its transpose with leading dimension
r; with strides (1, c) (a `.T` view) it is itself with leading dimension c. So C = A @ B is asked of
cuBLAS as C^T = B^T A^T (or, where C itself is a `.T` view, as C = A B), and each operand's layout
becomes an op flag and a leading dimension: `gemm_args` (pure, tested without a GPU) does this.

The library is found in the nvidia-cublas pip package, torch's lib folder, $CUDA_HOME or
/usr/local/cuda, then the loader's paths. It runs in the calling thread's current CUDA context
(the runtime adopts it), so with pycuda's primary context pushed both share one context.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
from typing import Any, NamedTuple

OP_N, OP_T = 0, 1
CUDA_R_32F, CUDA_R_64F, CUDA_R_16F = 0, 1, 2
CUBLAS_COMPUTE_32F = 68
CUBLAS_COMPUTE_32F_FAST_TF32 = 77   # float32 operands rounded to tf32 on the tensor cores
CUBLAS_GEMM_DEFAULT = -1
STATUS = {
    0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}
INT_MAX = 2**31 - 1


class CublasError(RuntimeError):
    """A cuBLAS call returned a status other than success."""


# ---------------------------------------------------------------- the pure mapping

class Matrix(NamedTuple):
    """A row-major matrix operand: its pointer, (rows, cols) and strides in elements."""
    ptr: int
    shape: tuple
    strides: tuple


class GemmArgs(NamedTuple):
    """The column-major call: C' (m x n, ldc) = op_a(X) (m x k, lda) op_b(Y) (k x n, ldb)."""
    transa: int
    transb: int
    m: int
    n: int
    k: int
    a: int          # pointer of X
    lda: int
    b: int          # pointer of Y
    ldb: int
    c: int
    ldc: int
    swapped: bool   # X is B and Y is A (C' is C^T = B^T A^T); else X is A and Y is B


def column_major(shape: tuple, strides: tuple) -> tuple | None:
    """How a row-major (rows, cols) operand reads column-major: (transposed, ld), where
    `transposed` says the column-major matrix is the operand's transpose; None where neither axis
    is unit-stride (the caller copies it to a contiguous buffer first). Size-1 axes take any
    stride."""
    rows, cols = shape
    rs, cs = strides
    if cols == 1 or cs == 1:                  # rows contiguous: column-major it is the transpose
        ld = rs if rows > 1 else max(cols, 1)
        if ld >= max(cols, 1):
            return True, ld
    if rows == 1 or rs == 1:                  # columns contiguous (a .T view): itself
        ld = cs if cols > 1 else max(rows, 1)
        if ld >= max(rows, 1):
            return False, ld
    return None


def gemm_args(A: Matrix, B: Matrix, C: Matrix) -> GemmArgs | None:
    """cuBLAS arguments for row-major C = A @ B, or None where an operand's layout does not map
    (no unit stride, a leading dimension past int32, or C not writable as one matrix)."""
    (M, K), (K2, N) = A.shape, B.shape
    if K != K2 or C.shape != (M, N):
        raise ValueError(f"gemm: expected A (m, k), B (k, n), C (m, n); got {A.shape}, {B.shape}, "
                         f"{C.shape}")
    c_layout = column_major(C.shape, C.strides)
    if c_layout is None:
        return None
    c_trans, ldc = c_layout
    if c_trans:
        # column-major C is C^T (N x M) = B^T A^T: X = B, Y = A
        X, Y, m, n = B, A, N, M
        want_x, want_y = True, True        # op(X) must be B^T, op(Y) must be A^T
    else:
        # column-major C is C (M x N) = A B: X = A, Y = B
        X, Y, m, n = A, B, M, N
        want_x, want_y = False, False
    lx, ly = column_major(X.shape, X.strides), column_major(Y.shape, Y.strides)
    if lx is None or ly is None:
        return None
    (x_trans, lda), (y_trans, ldb) = lx, ly
    # the stored column-major matrix is X^T when x_trans; op flips it to what is wanted
    transa = OP_N if x_trans == want_x else OP_T
    transb = OP_N if y_trans == want_y else OP_T
    if max(lda, ldb, ldc, m, n, K) > INT_MAX:
        return None
    return GemmArgs(transa, transb, m, n, K, X.ptr, lda, Y.ptr, ldb, C.ptr, ldc, c_trans)


class BatchedArgs(NamedTuple):
    gemm: GemmArgs
    stride_a: int   # batch strides of X, Y and C' in elements (0: the same matrix every batch)
    stride_b: int
    stride_c: int
    count: int


def batched_gemm_args(A: Matrix, B: Matrix, C: Matrix, batch_strides: tuple,
                      count: int) -> BatchedArgs | None:
    """Strided-batched C[i] = A[i] @ B[i]: the per-matrix mapping of `gemm_args` (A, B, C are
    the first matrices) plus batch strides (of A, B, C; 0 for an operand shared by every batch),
    swapped like X and Y."""
    g = gemm_args(A, B, C)
    if g is None:
        return None
    sa, sb, sc = batch_strides
    if g.swapped:
        sa, sb = sb, sa
    return BatchedArgs(g, sa, sb, sc, count)


# ---------------------------------------------------------------- the library

def _candidates() -> list:
    """Paths of libcublas to try, best first."""
    found: list = []
    for entry in sys.path:
        for pattern in ("nvidia/cublas/lib/libcublas.so*", "nvidia/cu*/lib/libcublas.so*",
                        "torch/lib/libcublas.so*"):
            found += sorted(glob.glob(os.path.join(entry, pattern)), reverse=True)
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            found += sorted(glob.glob(os.path.join(root, "lib64", "libcublas.so*")), reverse=True)
    name = ctypes.util.find_library("cublas")
    if name:
        found.append(name)
    found.append("libcublas.so")
    return [p for p in found if "Lt" not in os.path.basename(p)]


def load_library() -> ctypes.CDLL:
    """libcublas, with libcublasLt from the same folder loaded first (it depends on it)."""
    errors = []
    for path in _candidates():
        folder = os.path.dirname(path)
        if folder:
            for lt in sorted(glob.glob(os.path.join(folder, "libcublasLt.so*")), reverse=True):
                try:
                    ctypes.CDLL(lt, mode=ctypes.RTLD_GLOBAL)
                    break
                except OSError:
                    pass
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise RuntimeError("neonlike's GPU backend needs cuBLAS (pip install nvidia-cublas, or a CUDA "
                       "toolkit); tried:\n  " + "\n  ".join(errors[-6:]))


_P, _I, _LL = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
_SIGNATURES = {
    "cublasCreate_v2": [ctypes.POINTER(_P)],
    "cublasDestroy_v2": [_P],
    "cublasSetStream_v2": [_P, _P],
    "cublasSgemm_v2": [_P, _I, _I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I],
    "cublasDgemm_v2": [_P, _I, _I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I],
    "cublasGemmEx": [_P, _I, _I, _I, _I, _I, _P, _P, _I, _I, _P, _I, _I, _P, _P, _I, _I, _I, _I],
    "cublasSgemmStridedBatched": [_P, _I, _I, _I, _I, _I, _P, _P, _I, _LL, _P, _I, _LL, _P, _P,
                                  _I, _LL, _I],
    "cublasDgemmStridedBatched": [_P, _I, _I, _I, _I, _I, _P, _P, _I, _LL, _P, _I, _LL, _P, _P,
                                  _I, _LL, _I],
}


class Cublas:
    """One cuBLAS handle in the current context. Element types: 'float32', 'float64' and
    'float16' (through cublasGemmEx with float32 compute)."""

    def __init__(self, lib: ctypes.CDLL | None = None) -> None:
        self.lib = lib or load_library()
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        handle = _P()
        self._check("cublasCreate_v2", self.lib.cublasCreate_v2(ctypes.byref(handle)))
        self.handle = handle

    @staticmethod
    def _check(name: str, status: int) -> None:
        if status != 0:
            raise CublasError(f"{name} failed: {STATUS.get(status, 'unknown status')} ({status})")

    def set_stream(self, stream: int | None) -> None:
        self._check("cublasSetStream_v2", self.lib.cublasSetStream_v2(self.handle, stream or None))

    def destroy(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            self._check("cublasDestroy_v2", self.lib.cublasDestroy_v2(handle))

    @staticmethod
    def _scalars(dtype: str, alpha: float, beta: float) -> tuple:
        t = ctypes.c_double if dtype == "float64" else ctypes.c_float
        return t(alpha), t(beta)

    def gemm(self, dtype: str, g: GemmArgs, alpha: float, beta: float,
             tf32: bool = False) -> None:
        """C = alpha op(A) op(B) + beta C; tf32: a float32 product on the tensor cores (operands
        rounded to 10-bit mantissas, as torch's allow_tf32)."""
        al, be = self._scalars(dtype, alpha, beta)
        common = (self.handle, g.transa, g.transb, g.m, g.n, g.k, ctypes.byref(al))
        if dtype == "float32" and tf32:
            self._check("cublasGemmEx", self.lib.cublasGemmEx(
                *common, g.a, CUDA_R_32F, g.lda, g.b, CUDA_R_32F, g.ldb, ctypes.byref(be),
                g.c, CUDA_R_32F, g.ldc, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT))
        elif dtype == "float32":
            self._check("cublasSgemm_v2", self.lib.cublasSgemm_v2(
                *common, g.a, g.lda, g.b, g.ldb, ctypes.byref(be), g.c, g.ldc))
        elif dtype == "float64":
            self._check("cublasDgemm_v2", self.lib.cublasDgemm_v2(
                *common, g.a, g.lda, g.b, g.ldb, ctypes.byref(be), g.c, g.ldc))
        elif dtype == "float16":
            self._check("cublasGemmEx", self.lib.cublasGemmEx(
                *common, g.a, CUDA_R_16F, g.lda, g.b, CUDA_R_16F, g.ldb, ctypes.byref(be),
                g.c, CUDA_R_16F, g.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))
        else:
            raise TypeError(f"cuBLAS gemm: no binding for {dtype}")

    def gemm_strided_batched(self, dtype: str, b: BatchedArgs, alpha: float, beta: float) -> None:
        g = b.gemm
        al, be = self._scalars(dtype, alpha, beta)
        name = {"float32": "cublasSgemmStridedBatched",
                "float64": "cublasDgemmStridedBatched"}.get(dtype)
        if name is None:
            raise TypeError(f"cuBLAS strided batched gemm: no binding for {dtype}")
        self._check(name, getattr(self.lib, name)(
            self.handle, g.transa, g.transb, g.m, g.n, g.k, ctypes.byref(al), g.a, g.lda,
            b.stride_a, g.b, g.ldb, b.stride_b, ctypes.byref(be), g.c, g.ldc, b.stride_c,
            b.count))


def describe(args: Any) -> str:
    """The call in words, for error messages."""
    return ", ".join(f"{k}={v}" for k, v in args._asdict().items())


__all__ = ["Cublas", "CublasError", "Matrix", "GemmArgs", "BatchedArgs", "column_major",
           "gemm_args", "batched_gemm_args", "load_library", "OP_N", "OP_T"]
