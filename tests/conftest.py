"""Shared fixtures: `be` runs a test on every backend this machine can build (others skip)."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from neonlike.backends import gen_backend

settings.register_profile("default", deadline=None, max_examples=100,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")

BACKENDS = ["cpu", "mkl", "gpu"]


def make_backend(name: str, **kwargs):
    try:
        return gen_backend(name, rng_seed=0, **kwargs)
    except (ImportError, RuntimeError, NotImplementedError) as e:
        pytest.skip(f"backend {name!r} unavailable here: {e}")


@pytest.fixture(autouse=True)
def cpu_engine(request, monkeypatch):
    """Which engine the 'cpu'/'mkl' backends run trees with in this test module.

    By default every tree is compiled and run fused on its first run (NEONLIKE_JIT_AFTER=1), so
    the tensor, op-tree and seed tests exercise the fused engine. A module that sets
    `CPU_ENGINE = "reference"` (test_ops, test_random_trees: thousands of one-off structures whose
    job is to pin each op's semantics) runs the numpy reference interpreter instead; every op is
    run fused against that reference in test_fused_cpu.py, on edge inputs and random trees.
    """
    if importlib.util.find_spec("numba") is None:
        return
    from neonlike.backends import fused_cpu, nervanacpu
    if getattr(request.module, "CPU_ENGINE", "fused") == "reference":
        monkeypatch.setattr(nervanacpu, "_FUSED", [None])
    else:
        monkeypatch.setattr(nervanacpu, "_FUSED", [fused_cpu])
        monkeypatch.setattr(fused_cpu, "JIT_AFTER", 1)


@pytest.fixture(params=BACKENDS)
def be(request):
    """Each available backend in turn."""
    return make_backend(request.param)


@pytest.fixture
def cpu():
    return make_backend("cpu")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
