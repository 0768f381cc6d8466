"""Shared fixtures: `be` runs a test on every backend this machine can build (others skip)."""
from __future__ import annotations

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
