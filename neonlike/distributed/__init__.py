"""Data-parallel training over MPI (mpi4py): the same script on N processes and N machines.

    from neonlike.distributed import DistributedOptimizer
    optimizer = DistributedOptimizer(GradientDescentMomentum(0.1, momentum_coef=0.9))
    model.fit(train_set, optimizer=optimizer, ...)        # mpiexec -n 4 python script.py

Nothing is imported until a name is used; mpi4py only when a communicator is needed
(`pip install 'neonlike[mpi]'`). docs/distributed.md tells the whole story.
"""
from typing import Any as _Any

_NAMES = {"DistributedOptimizer": "neon", "ShardIterator": "neon", "GradientBuckets": "comm",
          "StreamingBuckets": "comm",
          "install_abort_hook": "comm", "broadcast_tensors": "comm", "host_array": "comm",
          "mpi": "comm", "world": "comm"}


def __getattr__(name: str) -> _Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'neonlike.distributed' has no attribute {name!r}")
    from importlib import import_module
    return getattr(import_module(f"{__name__}.{module}"), name)


def __dir__() -> list:
    return sorted(_NAMES)


__all__ = sorted(_NAMES)
