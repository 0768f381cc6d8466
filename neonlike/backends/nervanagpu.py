"""The 'gpu' backend: CUDA through PyCUDA. This module checks what the GPU path needs."""
from __future__ import annotations

from typing import Any

from .backend import Backend


def _require_cuda(device_id: int) -> None:
    try:
        import pycuda.driver as drv
    except ImportError as e:
        raise ImportError(f"gen_backend('gpu') needs pycuda (pip install 'neonlike[gpu]' on a "
                          f"machine with CUDA): {e}") from e
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as e:  # pycuda.driver.Error, or a missing libcuda
        raise RuntimeError(f"gen_backend('gpu'): pycuda found no usable CUDA driver: {e}") from e
    if not 0 <= device_id < count:
        raise RuntimeError(f"gen_backend('gpu'): device_id {device_id} requested, "
                           f"{count} CUDA device(s) present")


class NervanaGPU(Backend):
    """neon's GPU backend. Kernel generation for it is not written yet (issue 6)."""

    backend_name = "gpu"
    device_type = 1

    def __init__(self, *args: Any, device_id: int = 0, **kwargs: Any) -> None:
        _require_cuda(device_id)
        raise NotImplementedError("gen_backend('gpu'): CUDA is present, but neonlike's GPU "
                                  "backend is not implemented yet; use 'cpu' or 'mkl'")
