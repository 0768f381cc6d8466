"""Reproducible test values in a tensor's axes: `RandomTensorGenerator(seed, dtype)`.

The stream is numpy's RandomState(seed), as upstream's, so a seed gives upstream's values.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from neonlike.axes import Axes


def _lengths(axes: Any) -> tuple:
    return Axes(axes).require_lengths()


class RandomTensorGenerator:
    """Pseudo-random arrays shaped by axes, from a seed; `reset()` starts the stream again."""

    def __init__(self, seed: int = 0, dtype: Any = np.float32) -> None:
        self.dtype = dtype
        self.seed = seed
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        """Restart from `seed` (default: the generator's seed)."""
        if seed is not None:
            self.seed = seed
        self.rng = np.random.RandomState(seed=self.seed)

    def uniform(self, low: float, high: float, axes: Any, dtype: Any = None) -> np.ndarray:
        """Values uniform in [low, high), shaped by `axes`."""
        return np.asarray(self.rng.uniform(low, high, _lengths(axes)), dtype=dtype or self.dtype)

    def normal(self, loc: float, scale: float, axes: Any, dtype: Any = None) -> np.ndarray:
        """Normal values (mean loc, standard deviation scale), shaped by `axes`."""
        return np.asarray(self.rng.normal(loc, scale, _lengths(axes)), dtype=dtype or self.dtype)

    def discrete_uniform(self, low: float, high: float, quantum: float, axes: Any,
                         dtype: Any = None) -> np.ndarray:
        """Values low + k * quantum, k uniform in 0 .. floor((high - low) / quantum)."""
        n = math.floor((high - low) / quantum)
        k = self.rng.randint(0, n + 1, _lengths(axes))
        return np.asarray(low + k * quantum, dtype=dtype or self.dtype)

    def random_integers(self, low: int, high: int, axes: Any, dtype: Any = np.int8) -> np.ndarray:
        """Integers uniform in [low, high] (both ends included)."""
        return self.rng.randint(low, high + 1, _lengths(axes)).astype(dtype)
