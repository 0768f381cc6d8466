"""gen_backend and the backend registry.

Built-in backends are named here and imported only when asked for; other packages add backends
through the `neonlike.backends` entry-point group, e.g. in their setup.py:

    entry_points={"neonlike.backends": ["mybackend = mypackage.backend:MyBackend"]}
"""
from __future__ import annotations

import atexit
import importlib
import importlib.util
from importlib.metadata import entry_points
from typing import Any, Callable

import numpy as np

BUILTIN = {
    "cpu": "neonlike.backends.nervanacpu:NervanaCPU",
    "mkl": "neonlike.backends.nervanamkl:NervanaMKL",
    "gpu": "neonlike.backends.nervanagpu:NervanaGPU",
}
ENTRY_POINT_GROUP = "neonlike.backends"
_atexit_registered = False


def registry() -> dict[str, Callable[[], type]]:
    """Backend name -> a loader returning the backend class (built-ins, then entry points)."""
    found: dict[str, Callable[[], type]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.load
    for name, target in BUILTIN.items():
        module, cls = target.split(":")
        found[name] = lambda module=module, cls=cls: getattr(importlib.import_module(module), cls)
    return found


def _default_backend() -> str:
    return "mkl" if importlib.util.find_spec("mkl") is not None else "cpu"


def gen_backend(backend: str | None = None, rng_seed: int | None = None, datatype: Any = np.float32,
                batch_size: int = 0, stochastic_round: bool = False, device_id: int = 0,
                max_devices: int = 1, compat_mode: str | None = None,
                deterministic_update: bool | None = None, deterministic: bool | None = None,
                **kwargs: Any) -> Any:
    """Make the backend `be`, install it as the global `NervanaObject.be` and return it.

    backend: 'cpu', 'mkl', 'gpu' or a name registered by entry point; None picks 'mkl' where
    mkl-service is installed, else 'cpu'. datatype: the default dtype of new tensors.
    """
    from .. import NervanaObject
    global _atexit_registered
    name = _default_backend() if backend is None else backend
    known = registry()
    if name not in known:
        raise ValueError(f"backend must be one of {sorted(known)}, got {name!r}")
    cls = known[name]()
    be = cls(rng_seed=rng_seed, default_dtype=datatype, stochastic_round=stochastic_round,
             device_id=device_id, max_devices=max_devices, compat_mode=compat_mode,
             deterministic=deterministic, **kwargs)
    be.bsz = batch_size
    cleanup_backend()  # only once the new backend exists: a failed gen_backend keeps the old one
    NervanaObject.be = be
    if not _atexit_registered:
        atexit.register(cleanup_backend)
        _atexit_registered = True
    return be


def cleanup_backend() -> None:
    """Release the global backend's resources and clear NervanaObject.be."""
    from .. import NervanaObject
    be, NervanaObject.be = NervanaObject.be, None
    if be is not None:
        be.cleanup_backend()


from .autodiff import Autodiff  # noqa: E402  (neon exported it here; imports only the core)

__all__ = ["gen_backend", "cleanup_backend", "registry", "BUILTIN", "ENTRY_POINT_GROUP",
           "Autodiff"]
