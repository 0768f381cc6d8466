"""neonlike: neon's op-tree programming model on today's Python, numpy, Numba and CUDA.

    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    x = be.array(...); out = be.empty(x.shape)
    out[:] = 1 / (1 + be.exp(-x))     # builds an op-tree, runs it on assignment

Importing neonlike does no work and needs numpy alone.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


class NervanaObject:
    """neon's base of layers, costs and optimizers: `self.be` is the global backend."""

    be: Any = None

    def __init__(self, name: str | None = None) -> None:
        self.name = name if name is not None else f"{type(self).__name__}_{id(self):x}"


def cache_stats() -> dict:
    """Kernel-cache counters: hits, misses, compiles, disk_loads, compile_seconds, entries, ..."""
    from .backends.cache import CPU_CACHE
    return dict(CPU_CACHE.stats, entries=len(CPU_CACHE), directory=str(CPU_CACHE.directory()))


def clear_caches() -> None:
    """Forget every compiled program held in memory and zero the counters (disk files stay)."""
    from .backends.cache import CPU_CACHE
    CPU_CACHE.clear()


def __getattr__(name: str) -> Any:
    if name in ("gen_backend", "cleanup_backend"):
        from . import backends
        return getattr(backends, name)
    if name in ("Tensor", "OpTreeNode", "Backend"):
        from .backends import backend
        return getattr(backend, name)
    if name == "Op":
        from .ops import Op
        return Op
    raise AttributeError(f"module 'neonlike' has no attribute {name!r}")


__all__ = ["NervanaObject", "gen_backend", "cleanup_backend", "Tensor", "OpTreeNode", "Backend", "Op",
           "cache_stats", "clear_caches"]
