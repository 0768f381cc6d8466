"""Gradient trees run through the fused CPU kernels (float32), equal to analytic gradients."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from neonlike.backends import Autodiff, gen_backend  # noqa: E402


@pytest.fixture
def be():
    return gen_backend("cpu", rng_seed=0)


def test_seed_example_fused(be):
    x0 = be.array(np.array([[1.0, 2.0], [3.0, 4.0]]))
    x1 = be.array(np.array([[5.0, 6.0], [7.0, 8.0]]))
    g0, g1 = Autodiff(x0 * x0 + x0 * x1, be).get_grad_asnumpyarray([x0, x1])
    np.testing.assert_array_equal(g0, 2 * x0.get() + x1.get())
    np.testing.assert_array_equal(g1, x0.get())


def test_ten_op_gradients_fused(be):
    rng = np.random.default_rng(0)
    a, b, c, d = (rng.uniform(0.1, 1, (64, 50)).astype(np.float32) for _ in range(4))
    A, B, C, D = (be.array(v) for v in (a, b, c, d))
    f = ((A * B + C) * D - A / (B + 1)) * be.exp(-C * C) + be.sqrt(abs(D))
    bufs = [be.empty((64, 50)) for _ in range(4)]
    Autodiff(f, be).back_prop_grad([A, B, C, D], bufs)
    a, b, c, d = (v.astype(np.float64) for v in (a, b, c, d))
    e = np.exp(-c * c)
    p = (a * b + c) * d - a / (b + 1)
    want = [(b * d - 1 / (b + 1)) * e, (a * d + a / (b + 1) ** 2) * e,
            d * e + p * e * (-2 * c), (a * b + c) * e + 0.5 / np.sqrt(d)]
    for got, w in zip(bufs, want):
        np.testing.assert_allclose(got.get(), w, rtol=2e-5, atol=1e-6)


def test_softmax_cross_entropy_gradient_fused(be):
    """A cost written as an op-tree (neon's style): d/dx of sum(-t * safelog(softmax(x)))."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(10, 32)).astype(np.float32)
    t = np.eye(10, dtype=np.float32)[:, rng.integers(10, size=32)]
    X, T = be.array(x), be.array(t)
    sm = be.exp(X - be.max(X, axis=0)) / be.sum(be.exp(X - be.max(X, axis=0)), axis=0)
    cost = be.sum(-T * be.safelog(sm), axis=None)
    g = Autodiff(cost, be).get_grad_asnumpyarray([X])[0]
    xs = x.astype(np.float64)
    s = np.exp(xs - xs.max(0)) / np.exp(xs - xs.max(0)).sum(0)
    np.testing.assert_allclose(g, s - t, rtol=1e-4, atol=1e-5)


def test_a_deep_shared_chain_runs_fused_as_a_dag(be):
    """20 nested y = tanh(y + y): the forward tree and its gradient are DAGs of ~20 and ~100
    nodes (2^20 leaves as trees); both compile into kernels of a size linear in depth."""
    import neonlike
    x = be.array(np.linspace(-0.05, 0.05, 12).reshape(3, 4))
    y = x
    for _ in range(20):
        y = be.tanh(y + y)
    neonlike.clear_caches()
    out = be.empty((3, 4))
    for _ in range(2):
        out[:] = y
        g = Autodiff(y, be).get_grad_tensor([x])[0]
    assert neonlike.cache_stats()["compiles"] + neonlike.cache_stats()["disk_loads"] >= 2
    v = x.get().astype(np.float64)
    d = np.ones_like(v)
    for _ in range(20):
        v = np.tanh(2 * v)
        d = d * 2 * (1 - v * v)
    np.testing.assert_allclose(out.get(), v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.get(), d, rtol=1e-4, atol=1e-6)
