"""SINGA's devices: a Device is a neonlike backend.

    from neonlike.singa import device
    dev = device.get_default_device()    # the 'cpu' backend (fused Numba kernels, MKL GEMM)
    gpu = device.create_cuda_gpu()       # the 'gpu' backend

Each device makes its backend on first use, without installing it as neonlike's global backend
(`NervanaObject.be`), so a SINGA script and a neon model can share a process.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..memo import Memo
from .plans import PLANS_MAX
from .pool import HostPool

_DEFAULT: list = []
_CPU: list = []      # create_cpu_device's while the default is another device


class Device:
    """A SINGA device over a neonlike backend (`be`)."""

    def __init__(self, backend: str, device_id: int = 0, rng_seed: int | None = None) -> None:
        self.backend_name, self._id, self._seed = backend, device_id, rng_seed
        self._be: Any = None
        # memoised operator plans (shapes, gradient tapes: autograd.TreeOp, plans.py)
        self.plans = Memo("singa.plans", PLANS_MAX)

    @property
    def be(self) -> Any:
        if self._be is None:
            from ..backends import registry
            known = registry()
            if self.backend_name not in known:
                raise ValueError(f"device: unknown backend {self.backend_name!r}; known: "
                                 f"{sorted(known)}")
            cls = known[self.backend_name]()
            self._be = cls(rng_seed=self._seed, device_id=self._id)
        return self._be

    def alloc(self, shape: tuple, dtype: Any) -> Any:
        """A tensor for a statement to write every element of: on a host backend uninitialised
        (be.empty zero-fills, work a statement's output does not need), one nobody holds any
        more where one of this shape and dtype is (pool.py); be.empty elsewhere."""
        try:
            return self._alloc(shape, dtype)
        except AttributeError:
            be = self.be
            if hasattr(be.empty((1, 1)), "_tensor"):   # its tensors wrap numpy arrays
                from ..backends.cpu.program import _host_info
                from_host, empty = be._from_host, np.empty
                self._alloc = HostPool(lambda shape, dtype: from_host(empty(shape, dtype), None,
                                                                      True), _host_info).take
            else:
                self._alloc = lambda shape, dtype: be.empty(shape, dtype=dtype)
            return self._alloc(shape, dtype)

    def ones(self, shape: tuple, dtype: Any) -> Any:
        """A new tensor of ones (backward's seed gradient): a pooled host tensor filled through
        its array where the device has a host pool (be.ones costs ~4-7 us), else be.ones."""
        t = self.alloc(shape, dtype)
        info = getattr(t, "_hinfo", None)     # the pool's memo: (array, ...) of a kept tensor
        if info is None:
            return self.be.ones(shape, dtype=dtype)
        info[0].fill(1)
        return t

    def id(self) -> int:
        return self._id

    def lang(self) -> str:
        return "kCuda" if self.backend_name == "gpu" else "kCpp"

    def SetRandSeed(self, seed: int) -> None:
        self.be.gen_rng(seed)

    def __repr__(self) -> str:
        return f"Device({self.backend_name!r}, id={self._id})"


def get_default_device() -> Device:
    """The default device: the 'cpu' backend (or what create_cuda_gpu(set_default=True) made)."""
    if not _DEFAULT:
        _DEFAULT.append(Device("cpu"))
    return _DEFAULT[0]


def create_cpu_device() -> Device:
    """The host device: the default one while that is the 'cpu' backend, else a 'cpu' device
    of its own (made once), never the GPU that create_cuda_gpu made the default."""
    dev = get_default_device()
    if dev.backend_name == "cpu":
        return dev
    if not _CPU:
        _CPU.append(Device("cpu"))
    return _CPU[0]


def set_default_device(dev: Device) -> None:
    _DEFAULT[:] = [dev]


def create_cuda_gpu(set_default: bool = True) -> Device:
    """A device on the 'gpu' backend (pycuda, CUDA C kernels, cuBLAS); the default device too
    unless set_default=False."""
    dev = Device("gpu")
    dev.be   # made now: a missing driver or pycuda is reported here
    if set_default:
        set_default_device(dev)
    return dev


def create_cuda_gpu_on(device_id: int, set_default: bool = True) -> Device:
    dev = Device("gpu", device_id)
    dev.be
    if set_default:
        set_default_device(dev)
    return dev


__all__ = ["Device", "get_default_device", "create_cpu_device", "create_cuda_gpu",
           "create_cuda_gpu_on", "set_default_device"]
