"""The 'gpu' backend on a real device, against the CPU backend and numpy. Every test skips, with
the reason, where gen_backend('gpu') cannot be made (no pycuda, no driver, no device).
tests/test_gpu_offline.py covers what runs without a GPU (and the whole backend on an emulated
device).
"""
from __future__ import annotations

import numpy as np
import pytest

from neonlike.backends.gpu import render as RC
from neonlike.ops import OP_INFO, Kind, Op

from conftest import make_backend

UNARY = sorted(op for op in RC.RENDERABLE if OP_INFO[op].kind is Kind.ELEMENTWISE
               and OP_INFO[op].arity == 1 and op is not Op.CAST)
BINARY = sorted(op for op in RC.RENDERABLE if OP_INFO[op].kind is Kind.ELEMENTWISE
                and OP_INFO[op].arity == 2)
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int32, np.uint8]


@pytest.fixture(scope="module")
def gpu():
    return make_backend("gpu")


@pytest.fixture(scope="module")
def cpu_be():
    from neonlike.backends.nervanacpu import NervanaCPU
    return NervanaCPU(rng_seed=0)


def both(gpu, cpu_be, fn, *arrays, dtype=np.float32, out_shape=None, out_dtype=None):
    """fn(be, *tensors) -> tree, assigned into a new tensor on each backend: the two results."""
    results = []
    for be in (gpu, cpu_be):
        ts = [be.array(a, dtype=dtype) for a in arrays]
        tree = fn(be, *ts)
        out = be.empty(out_shape or tree.shape, dtype=out_dtype or dtype)
        out[:] = tree
        results.append(out.get())
    return results


def close(g, c, dtype=np.float32):
    tol = {np.float16: 2e-3, np.float32: 2e-5, np.float64: 1e-12}.get(dtype, 0)
    np.testing.assert_allclose(g.astype(np.float64), c.astype(np.float64), rtol=tol,
                               atol=tol, equal_nan=True)


EDGES = np.array([[0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 0.9, -0.9],
                  [2.0, -2.0, 30.0, -30.0, np.inf, -np.inf, np.nan, 3.5]])


@pytest.mark.parametrize("op", UNARY, ids=str)
def test_unary_ops_match_the_cpu(gpu, cpu_be, op):
    with np.errstate(all="ignore"):
        g, c = both(gpu, cpu_be, lambda be, x: getattr(be, OP_INFO[op].names[0])(x)
                    if OP_INFO[op].names else x, EDGES)
    close(g, c)


@pytest.mark.parametrize("op", BINARY, ids=str)
def test_binary_ops_match_the_cpu(gpu, cpu_be, op):
    from neonlike.optree import build
    y = np.random.default_rng(0).uniform(-3, 3, (1, 8))
    g, c = both(gpu, cpu_be, lambda be, a, b: build(op, a, b), EDGES, y)
    close(g, c)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_stores_convert_like_the_cpu(gpu, cpu_be, dtype):
    x = np.random.default_rng(1).uniform(-300, 300, (17, 33))
    g, c = both(gpu, cpu_be, lambda be, a: a * 1.5 - 2.0, x, dtype=dtype)
    close(g, c, dtype)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), 2])
@pytest.mark.parametrize("op", ["sum", "max", "min", "argmax", "argmin"])
def test_reductions_match_the_cpu(gpu, cpu_be, op, axis):
    if op.startswith("arg") and isinstance(axis, tuple):
        pytest.skip("argmax/argmin take one axis or None")
    x = np.random.default_rng(2).uniform(-1, 1, (5, 300, 7))
    g, c = both(gpu, cpu_be, lambda be, a: getattr(be, op)(a, axis=axis), x)
    close(g, c)


def test_softmax_and_var_in_one_tree(gpu, cpu_be):
    x = np.random.default_rng(3).uniform(-5, 5, (10, 1000))
    g, c = both(gpu, cpu_be, lambda be, a: be.exp(a - be.max(a, axis=0))
                / be.sum(be.exp(a - be.max(a, axis=0)), axis=0) + be.var(a, axis=1), x)
    close(g, c)


def test_views_get_and_set(gpu):
    av = np.arange(60, dtype=np.float32).reshape(6, 10)
    a = gpu.array(av)
    np.testing.assert_array_equal(a[1:5:2, ::-3].get(), av[1:5:2, ::-3])
    np.testing.assert_array_equal(a.T.get(), av.T)
    np.testing.assert_array_equal(a.reshape(3, 20).get(), av.reshape(3, 20))
    a[:, 3] = -1.0
    av[:, 3] = -1.0
    a.T[2:4] = np.ones((2, 6))
    av.T[2:4] = 1.0
    np.testing.assert_array_equal(a.get(), av)
    s = a.share((2, 5))
    np.testing.assert_array_equal(s.get(), av.reshape(-1)[:10].reshape(2, 5))
    assert a[2:4]._layout() == (20, (10, 1))


def test_aliased_assignments(gpu):
    av = np.random.default_rng(4).uniform(-1, 1, (8, 8)).astype(np.float32)
    a = gpu.array(av)
    a[:] = a.T * 2.0
    np.testing.assert_allclose(a.get(), av.T * 2.0, rtol=1e-6)
    a[1:, :] = a[:-1, :] + 1.0
    want = av.T * 2.0
    want[1:, :] = want[:-1, :] + 1.0
    np.testing.assert_allclose(a.get(), want, rtol=1e-6)


@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "sliced"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_dot_and_compound_dot(gpu, layout, dtype):
    rng = np.random.default_rng(5)
    av, bv, cv = rng.uniform(-1, 1, (33, 65)), rng.uniform(-1, 1, (65, 17)), \
        rng.uniform(-1, 1, (33, 17))
    a = gpu.array(av.T if layout == "tn" else av, dtype=dtype)
    b = gpu.array(bv.T if layout == "nt" else bv, dtype=dtype)
    a = a.T if layout == "tn" else a
    b = b.T if layout == "nt" else b
    if layout == "sliced":
        a = gpu.array(np.pad(av, 2), dtype=dtype)[2:-2, 2:-2]
    tol = 2e-2 if dtype == np.float16 else 1e-4
    c = gpu.array(cv, dtype=dtype)
    gpu.compound_dot(a, b, c, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(c.get(), 0.5 * av @ bv + 2.0 * cv, rtol=tol, atol=tol)
    o = gpu.empty((33, 17), dtype=dtype)
    o[:] = gpu.dot(a, b) + 1.0
    np.testing.assert_allclose(o.get(), av @ bv + 1.0, rtol=tol, atol=tol)


def test_batched_dot(gpu):
    rng = np.random.default_rng(6)
    X, K, C, N = 4, 16, 24, 32
    wv, iv, ev = rng.uniform(-1, 1, (K, C)), rng.uniform(-1, 1, (X, C, N)), \
        rng.uniform(-1, 1, (X, K, N))
    W, I, E = gpu.array(wv), gpu.array(iv), gpu.array(ev)
    O, B, U = gpu.empty((X, K, N)), gpu.empty((X, C, N)), gpu.empty((K, C))
    gpu.batched_dot(W, I, O)
    gpu.batched_dot(W.T, E, B)
    gpu.batched_dot(E, I.T, U)
    np.testing.assert_allclose(O.get(), wv @ iv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(B.get(), wv.T @ ev, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(U.get(), np.einsum("xkn,xcn->kc", ev, iv), rtol=1e-4, atol=1e-4)


def test_rng_is_reproducible_for_a_seed(gpu):
    from neonlike.backends.gpu import device as G
    a, b = gpu.empty((100, 300)), gpu.empty((100, 300))
    gpu.rng_reset()
    gpu.rand(a)
    gpu.rng_reset()
    gpu.rand(b)
    np.testing.assert_array_equal(a.get(), b.get())
    np.testing.assert_array_equal(a.get().ravel(),
                                  G.rng_uniform_reference(G.rng_key(gpu._rng_seed, 0), 30000))
    m = gpu.empty((100, 300), dtype=np.uint8)
    gpu.make_binary_mask(m, 0.25)
    assert abs(m.get().mean() - 0.25) < 0.01
    gpu.fill_normal(a, 2.0, 3.0)
    assert abs(a.get().mean() - 2.0) < 0.05 and abs(a.get().std() - 3.0) < 0.05


def test_failed_assignment_leaves_the_output_untouched(gpu, monkeypatch):
    x = gpu.array(np.arange(6.0).reshape(2, 3))
    o = gpu.array(np.full((2, 3), 5.0))

    def broken(*a, **k):
        raise RuntimeError("render failed (simulated)")
    monkeypatch.setattr(RC, "render", broken)
    with pytest.raises(RuntimeError, match="simulated"):
        o[:] = gpu.sqrt(x) * 3.0 + gpu.log(x + 7.0)
    np.testing.assert_array_equal(o.get(), np.full((2, 3), 5.0))


def test_large_and_empty_tensors(gpu):
    x = gpu.ones((0, 5))
    y = gpu.empty((0, 5))
    y[:] = x * 2.0
    assert y.get().shape == (0, 5)
    z = gpu.ones((4096, 4097))
    s = gpu.empty((1, 1))
    s[:] = gpu.sum(z)
    assert s.get()[0, 0] == 4096 * 4097


def test_second_backend_and_cleanup(gpu):
    other = make_backend("gpu")
    t = other.array(np.ones((3, 3)))
    other.cleanup_backend()
    np.testing.assert_array_equal(t.get(), np.ones((3, 3)))


def test_kernels_past_two_to_the_31_elements(gpu):
    """3 * 2**30 + 3 elements (uint8: 3 GiB a tensor): the 64-bit index path and the grid cap."""
    cols = 2**30 + 1
    x = gpu.empty((3, cols), dtype=np.uint8)
    y = gpu.empty((3, cols), dtype=np.uint8)
    x[:] = 1
    x[2, cols - 4:] = 7
    y[:] = x * 2 + 1
    np.testing.assert_array_equal(y[0, :5].get(), [[3] * 5])
    np.testing.assert_array_equal(y[2, cols - 6:].get(), [[3, 3, 15, 15, 15, 15]])
    s = gpu.empty((3, 1), dtype=np.float32)
    s[:] = gpu.sum(y, axis=1)
    np.testing.assert_allclose(s.get()[:, 0], [3.0 * cols, 3.0 * cols, 3.0 * cols + 48],
                               rtol=1e-6)
