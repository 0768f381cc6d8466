"""neon's `neon.benchmark`: per-layer and per-step timing of a model (Benchmark)."""
from .benchmark import Benchmark

__all__ = ["Benchmark"]
