"""The 'mkl' backend: the CPU backend where Intel MKL is installed (GEMM through MKL)."""
from __future__ import annotations

from typing import Any

from .nervanacpu import NervanaCPU


class NervanaMKL(NervanaCPU):
    """NervanaCPU on a machine with MKL; needs the mkl-service package."""

    backend_name = "mkl"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from .cpu.gemm import prefer_tbb_threading
        prefer_tbb_threading()        # before mkl-service loads MKL (see gemm.py)
        try:
            import mkl  # noqa: F401  (mkl-service: thread control for MKL)
        except ImportError as e:
            raise ImportError(f"gen_backend('mkl') needs the mkl-service package "
                              f"(pip install mkl-service mkl), or use 'cpu': {e}") from e
        super().__init__(*args, **kwargs)
