"""neonlike: neon's op-tree programming model on today's Python, numpy, Numba and CUDA.

    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    x = be.array(...); out = be.empty(x.shape)
    out[:] = 1 / (1 + be.exp(-x))     # builds an op-tree, runs it on assignment

Importing neonlike does no work and needs numpy alone.
"""
import typing as _typing

__version__ = "0.1.0"


class NervanaObject:
    """neon's base of layers, costs and optimizers: `self.be` is the global backend."""

    be: _typing.Any = None

    def __init__(self, name: str | None = None) -> None:
        self.name = name if name is not None else f"{type(self).__name__}_{id(self):x}"


def cache_stats() -> dict:
    """The CPU kernel cache's counters (hits, misses, compiles, disk_loads, compile_seconds,
    disk_writes, entries, evictions, directory), and under "memos" every bounded memo's
    entries, maxsize and evictions, by name."""
    from .backends.cache import CPU_CACHE
    from .memo import memos
    return dict(CPU_CACHE.stats, entries=len(CPU_CACHE), evictions=CPU_CACHE._entries.evictions,
                directory=str(CPU_CACHE.directory()),
                memos={m.name: m.stats() for m in memos()})


def clear_caches() -> None:
    """Forget every compiled program and memoised table held in memory (every Memo: kernels,
    structures, gradient plans, ...) and zero the counters; files on disk stay.

    What it cannot free: the machine code of kernels already compiled or loaded, which Numba
    keeps until the process ends (MCJIT). It is bounded instead: kernels compile in a child
    process and load here from disk (~0.2-0.35 MB each), and a process compiles at most
    NEONLIKE_MAX_COMPILED structures (README, "Environment variables"). The child process (and
    all it took) is ended; the next compile starts a new one."""
    import sys
    from .backends.cache import CPU_CACHE
    from .memo import clear_all
    CPU_CACHE.clear()
    clear_all()
    compiler = sys.modules.get("neonlike.backends.cpu.compiler")
    if compiler is not None:       # the compile worker's process and its memory (started anew
        compiler.WORKER.stop()     # on the next compile)


def __getattr__(name: str) -> _typing.Any:
    if name in ("gen_backend", "cleanup_backend"):
        from . import backends
        return getattr(backends, name)
    if name in ("Tensor", "OpTreeNode", "Backend"):
        from .backends import backend
        return getattr(backend, name)
    if name == "Op":
        from .ops import Op
        return Op
    if name == "logger":                # neon's `from neon import logger`
        from .util.log import logger
        return logger
    raise AttributeError(f"module 'neonlike' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names and the submodules imported so far (no typing helpers)."""
    loaded = [k for k, v in globals().items() if type(v) is type(_typing) and k != "_typing"]
    return sorted(set(__all__ + ["__version__"] + loaded))


__all__ = ["NervanaObject", "gen_backend", "cleanup_backend", "Tensor", "OpTreeNode", "Backend", "Op",
           "cache_stats", "clear_caches", "logger"]
