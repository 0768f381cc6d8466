"""The 'cpu' backend: numpy memory; trees run as fused Numba kernels (backends/cpu/program.py)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import shapes as S
from ...dtypes import cast_for_store
from ...optree import OpTreeNode
from ...tensor import Tensor
from .. import reference
from ..backend import Backend
from .extra_ops import CPUExtraOpsMixin
from .gemm import gemm
from .nn import NNOpsMixin
from .rnn import CPURNNMixin


_new = object.__new__

# A tensor's memory starts on a cache line (and AVX-512 vector) boundary. numpy's own
# allocations start 16 bytes past one here, so a 128-byte row segment (an LSTM step's 32
# columns of a float32 row) spanned three cache lines and every 64-byte vector load split
# over two: the LSTM's backward sequence kernel (256 units, batch 32, 50 steps) ran 7.71 ms
# on such buffers against 6.30 on aligned ones (medians, same process; forward 6.98 / 6.89).
# Tensors under ALIGN_MIN bytes keep numpy's allocation: aligning costs ~1-2 us a tensor
# (be.empty((100, 32)) 3.2 us with numpy's, 8.4 with np.prod and .ctypes before this bound).
ALIGN = 64
ALIGN_MIN = 4096


def aligned_empty(shape: tuple, dtype: Any) -> np.ndarray:
    """An uninitialised C-ordered array whose first byte is on an ALIGN boundary (numpy's own
    allocation under ALIGN_MIN bytes)."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes < ALIGN_MIN:
        return np.empty(shape, dt)
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = -raw.__array_interface__["data"][0] % ALIGN
    return raw[start:start + nbytes].view(dt).reshape(shape)


class CPUTensor(Tensor):
    """A Tensor over a numpy array (`_tensor`); views are numpy views."""

    def __init__(self, backend: Any, ary: np.ndarray, name: str | None = None,
                 persist_values: bool = True, base: Tensor | None = None) -> None:
        super().__init__(backend, ary.shape, ary.dtype, name, persist_values, base)
        self._tensor = ary

    def _derived(self, ary: np.ndarray) -> CPUTensor:
        """A view over `ary` (base self), its attributes set as __init__ sets them but directly
        (0.24 against 0.70 us; a train step makes dozens of views: reshapes, .T, slices).
        tests/test_backends.py checks the two give the same attributes."""
        v = _new(CPUTensor)
        v.backend, v.shape, v.dtype, v.name = self.backend, ary.shape, ary.dtype, None
        v.persist_values, v.base, v._tensor = self.persist_values, self, ary
        return v

    def _view(self, slices: tuple, shape: tuple) -> CPUTensor:
        return self._derived(self._tensor[slices].reshape(shape))

    def _host(self) -> np.ndarray:
        return self._tensor

    def get(self) -> np.ndarray:
        return self._tensor.copy()

    def _layout(self) -> tuple | None:
        ary, root = self._tensor, self._original_base._tensor
        item = ary.itemsize
        offset = ary.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        if ary.dtype != root.dtype or offset % item or any(s % item for s in ary.strides):
            return None
        return offset // item, tuple(s // item for s in ary.strides)

    def _store(self, values: np.ndarray) -> None:
        if type(values) is np.ndarray and values.dtype == self.dtype and \
                values.shape == self.shape:       # nothing to broadcast or convert: one copy
            self._tensor[...] = values
            return
        self._tensor[...] = cast_for_store(np.broadcast_to(values, self.shape), self.dtype)

    def reshape(self, *shape: Any) -> CPUTensor:
        """A view of another shape (one dim may be -1); ValueError where that needs a copy."""
        target = S.reshape_target(self.shape, shape[0] if len(shape) == 1 else shape)
        ary = self._tensor
        if ary.flags.c_contiguous:     # always a view (np.reshape's wrapper costs ~1 us more)
            return self._derived(ary.reshape(target))
        try:
            return self._derived(np.reshape(ary, target, copy=False))
        except ValueError:
            raise ValueError(f"reshape: a strided view of shape {self.shape} cannot be reshaped to "
                             f"{target} without a copy; assign it to a new tensor first") from None

    @property
    def T(self) -> CPUTensor:
        """Transposed view: 2-D reverses the axes; more dims swap the last two (batched matrices)."""
        ary = self._tensor
        return self._derived(ary.T if ary.ndim == 2 else ary.swapaxes(-1, -2))

    def share(self, shape: Any, dtype: Any = None, name: str | None = None) -> CPUTensor:
        """A tensor over the first bytes of this one's (contiguous) memory."""
        dt = self.backend._dtype(dtype if dtype is not None else self.dtype)
        shape = S.host_shape(S.as_shape(shape))
        nbytes = int(np.prod(shape)) * dt.itemsize
        if not self._tensor.flags.c_contiguous or nbytes > self._tensor.nbytes:
            raise ValueError(f"share: needs a contiguous tensor of at least {nbytes} bytes, "
                             f"this one has shape {self.shape} and {self._tensor.nbytes} bytes")
        flat = self._tensor.reshape(-1).view(np.uint8)[:nbytes]
        return CPUTensor(self.backend, flat.view(dt).reshape(shape), name, base=self)


class NervanaCPU(CPURNNMixin, CPUExtraOpsMixin, NNOpsMixin, Backend):
    """neon's CPU backend on numpy."""

    backend_name = "cpu"
    device_type = 0
    tensor_cls = CPUTensor

    def _from_host(self, values: np.ndarray, name: str | None, persist_values: bool) -> CPUTensor:
        return CPUTensor(self, values, name, persist_values)   # made by _host_empty

    def _host_empty(self, shape: tuple, dt: np.dtype) -> np.ndarray:
        return aligned_empty(shape, dt)

    def execute(self, optree: OpTreeNode) -> CPUTensor:
        """Fused Numba kernels where numba is installed, else the reference interpreter."""
        out, value = optree[1], optree[2]
        if isinstance(value, OpTreeNode):
            return self.execute_assign(out, value)
        out._store(reference.evaluate(value, reference.tree_dtype(out, value)))
        return out

    def _gemm(self, A: CPUTensor, B: CPUTensor, C: CPUTensor, alpha: float, beta: float) -> bool:
        """C = alpha * A @ B + beta * C straight through MKL (compound_dot's fast path); False
        where the dtypes differ or are not floats (the op-tree path then converts)."""
        if not (A.dtype == B.dtype == C.dtype) or A.dtype not in _GEMM_DTYPES:
            return False
        gemm(A._tensor, B._tensor, C._tensor, alpha, beta)
        return True

    def execute_assign(self, out: CPUTensor, value: OpTreeNode) -> CPUTensor:
        """`out[:] = value` straight to the engine, without an `assign` node."""
        engine = _FUSED[0] if _FUSED else _fused()
        if engine is not None:
            if self._runners is None:
                self._runners = engine.fast_runners  # Tensor.__setitem__'s C fast path uses them
            engine.execute(out, value)
        else:
            out._store(reference.evaluate(value, reference.tree_dtype(out, value)))
        return out


_FUSED: list = []
_GEMM_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))  # gemm's


def _fused() -> Any:
    """The CPU's engine (engine.Engine over Numba programs), or None: NEONLIKE_FUSE=0 selects
    the reference interpreter, and without numba the reference interpreter runs (one warning)."""
    if not _FUSED:
        import importlib.util
        import os
        if os.environ.get("NEONLIKE_FUSE", "1") == "0":
            _FUSED.append(None)
        elif importlib.util.find_spec("numba") is None:
            import warnings
            warnings.warn("neonlike: numba is not installed; the 'cpu' backend interprets trees "
                          "with numpy (pip install numba for fused kernels)", RuntimeWarning, 2)
            _FUSED.append(None)
        else:
            _FUSED.append(_import_engine())
    return _FUSED[0]


def _import_engine() -> Any:
    """program.ENGINE, imported (numba with it) with Ctrl-C held until the import is over, then
    raised: numba cut off half-way stays broken for the process ("module 'numba' has no attribute
    'core'") and cannot be imported again (its extension modules load once per process)."""
    import signal
    import threading
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        from .program import ENGINE     # signals reach the main thread only; None: set from C
        return ENGINE
    held: list = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        from .program import ENGINE
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        signal.raise_signal(signal.SIGINT)   # to the caller's handler: KeyboardInterrupt by default
    return ENGINE
