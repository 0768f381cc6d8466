"""The dtype policy, one for every backend.

- Tensors hold float16/32/64, int8/16/32 or uint8/16/32.
- A tree computes in float32, or in float64 when the output or any tensor leaf is float64, int32 or
  uint32 (values float32 cannot hold exactly). float16 therefore computes in float32 and rounds on store.
- Storing into an integer tensor rounds to nearest (ties to even) and saturates; nan stores as 0.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

SUPPORTED = tuple(np.dtype(t) for t in (
    "float16", "float32", "float64", "int8", "int16", "int32", "uint8", "uint16", "uint32"))
WIDE = frozenset(np.dtype(t) for t in ("float64", "int32", "uint32"))


def as_dtype(dtype: Any, allowed: Iterable[np.dtype] = SUPPORTED) -> np.dtype:
    """A supported numpy dtype, or ValueError naming the supported ones."""
    allowed = tuple(allowed)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt not in allowed:
        names = ", ".join(d.name for d in allowed)
        raise ValueError(f"unsupported dtype {dtype!r}; expected one of {names}")
    return dt


def compute_dtype(dtypes: Iterable[np.dtype]) -> np.dtype:
    return np.dtype(np.float64) if any(d in WIDE for d in dtypes) else np.dtype(np.float32)


def cast_for_store(values: np.ndarray, dtype: np.dtype,
                   out: np.ndarray | None = None) -> np.ndarray:
    """Values converted as a store into `dtype` converts them (rounding, saturation): a new
    array, or `out` (of `dtype` and values' shape) written and returned."""
    values = np.asarray(values)
    if dtype.kind != "f":
        info = np.iinfo(dtype)
        if values.dtype.kind not in "iub":
            values = np.rint(np.nan_to_num(values.astype(np.float64), nan=0.0, posinf=info.max,
                                           neginf=info.min))
        values = np.clip(values, info.min, info.max)
    with np.errstate(over="ignore"):
        if out is None:
            return values.astype(dtype)   # a copy: callers (be.array) own the result
        np.copyto(out, values, casting="unsafe")
        return out
