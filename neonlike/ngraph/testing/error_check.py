"""Comparisons that allow for the transformer: numpy's assert_allclose / allclose, with the
tolerances widened to the transformer's own where those are coarser.

The transformer is the one the latest `ExecutorFactory` (or `executor`) made. The NumPy
transformer has no tolerance of its own (it is the reference); the engine transformers ('cpu',
'mkl', 'gpu') run float32 fused kernels whose rounding may differ from numpy's ufuncs by a few
units in the last place, so their relative tolerance is at least 1e-5 (upstream gave its GPU
transformer the same). A transformer class may set `default_rtol` / `default_atol` itself.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .execution import latest_transformer

ENGINE_RTOL, ENGINE_ATOL = 1e-5, 0.0


def transformer_tolerances(transformer: Any = None) -> tuple[float, float]:
    """(rtol, atol) of `transformer` (default: the latest one an ExecutorFactory made)."""
    t = latest_transformer() if transformer is None else transformer
    if t is None:
        return 0.0, 0.0
    if hasattr(t, "default_rtol") or hasattr(t, "default_atol"):
        return float(getattr(t, "default_rtol", 0.0)), float(getattr(t, "default_atol", 0.0))
    return (0.0, 0.0) if getattr(t, "name", None) == "numpy" else (ENGINE_RTOL, ENGINE_ATOL)


def _widen(rtol: float, atol: float) -> tuple[float, float]:
    t_rtol, t_atol = transformer_tolerances()
    return max(rtol, t_rtol), max(atol, t_atol)


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-07, atol: float = 0,
                    equal_nan: bool = False, err_msg: str = "", verbose: bool = True,
                    transformer_overwrite: bool = True) -> None:
    """numpy.testing.assert_allclose; with transformer_overwrite, rtol and atol are widened to
    the transformer's where those are coarser."""
    if transformer_overwrite:
        rtol, atol = _widen(rtol, atol)
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, equal_nan=equal_nan,
                               err_msg=err_msg, verbose=verbose)


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False,
             transformer_overwrite: bool = True) -> bool:
    """numpy.allclose, with the same widening as assert_allclose."""
    if transformer_overwrite:
        rtol, atol = _widen(rtol, atol)
    return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))
