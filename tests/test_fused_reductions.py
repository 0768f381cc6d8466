"""Reductions of the fused CPU engine (tiled reduction kernels of render_numba) against numpy
float64: every reduction over every axis pattern, shapes that take the parallel path and tiny ones,
nan/inf/ties, float64 and integer outputs, non-contiguous inputs and an output that is an input."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("numba")

from neonlike import plan as P  # noqa: E402
from neonlike.backends import gen_backend  # noqa: E402
from neonlike.backends.cpu import device as nervanacpu  # noqa: E402
from neonlike.backends.cpu import program as fused_cpu
from neonlike.backends.cache import CPU_CACHE  # noqa: E402


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kernels")


@pytest.fixture
def be(cache_dir, monkeypatch):
    monkeypatch.setenv("NEONLIKE_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(CPU_CACHE, "_dir", None)
    monkeypatch.setattr(nervanacpu, "_FUSED", [fused_cpu.ENGINE])
    monkeypatch.setattr(fused_cpu.ENGINE, "jit_after", 1)  # compile on the first run
    return gen_backend("cpu", rng_seed=0)


def data(shape, lo=-3.0, hi=3.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def reduced(shape, axis):
    axes = range(len(shape)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


# (neonlike, numpy float64) pairs; numpy's argmax/argmin take one axis or None
RED = {
    "sum": (lambda b, x, a: b.sum(x, axis=a), lambda x, a: np.sum(x, axis=a, keepdims=True)),
    "max": (lambda b, x, a: b.max(x, axis=a), lambda x, a: np.max(x, axis=a, keepdims=True)),
    "min": (lambda b, x, a: b.min(x, axis=a), lambda x, a: np.min(x, axis=a, keepdims=True)),
    "mean": (lambda b, x, a: b.mean(x, axis=a), lambda x, a: np.mean(x, axis=a, keepdims=True)),
    "var": (lambda b, x, a: b.var(x, axis=a), lambda x, a: np.var(x, axis=a, keepdims=True)),
    "argmax": (lambda b, x, a: b.argmax(x, axis=a),
               lambda x, a: np.argmax(x, axis=a, keepdims=True) if a is not None
               else np.argmax(x).reshape((1,) * x.ndim)),
    "argmin": (lambda b, x, a: b.argmin(x, axis=a),
               lambda x, a: np.argmin(x, axis=a, keepdims=True) if a is not None
               else np.argmin(x).reshape((1,) * x.ndim)),
}


def run(be, kind, host, axis, in_dtype=np.float32, out_dtype=np.float32):
    x = be.array(host, dtype=in_dtype)
    out = be.empty(reduced(host.shape, axis), dtype=out_dtype)
    out[:] = RED[kind][0](be, x, axis)
    with np.errstate(all="ignore"):
        expected = RED[kind][1](x.get().astype(np.float64), axis)
    return out.get(), expected


def assert_close(got, expected, kind, n, dtype=np.float32):
    if kind.startswith("arg"):
        np.testing.assert_array_equal(got, expected)
        return
    eps = np.finfo(dtype).eps
    # a sum of n terms of magnitude <= 3 in float32: well below a wrong-rule error
    atol = 3 * eps * 3 * max(n, 1) ** 0.5 * 4
    np.testing.assert_allclose(got, expected.astype(dtype), rtol=8 * eps, atol=atol, equal_nan=True)


SHAPES_2D = [(1, 1), (1, 5), (5, 1), (3, 7), (300, 400), (3000, 40), (40, 3000), (7, 10007),
             (257, 129)]


@pytest.mark.parametrize("kind", sorted(RED))
@pytest.mark.parametrize("shape", SHAPES_2D)
@pytest.mark.parametrize("axis", [0, 1, None])
def test_2d(be, kind, shape, axis):
    host = data(shape, seed=sum(shape) + len(kind) * 7 + (3 if axis is None else axis))
    got, expected = run(be, kind, host, axis)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    assert_close(got, expected, kind, n)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "mean", "var"])
@pytest.mark.parametrize("shape", [(3, 7), (300, 400)])
def test_axis_tuple_01(be, kind, shape):
    got, expected = run(be, kind, data(shape, seed=5), (0, 1))
    assert_close(got, expected, kind, int(np.prod(shape)))


@pytest.mark.parametrize("kind", sorted(RED))
@pytest.mark.parametrize("shape", [(4, 5, 6), (20, 300, 17), (30, 7, 301)])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_3d(be, kind, shape, axis):
    got, expected = run(be, kind, data(shape, seed=axis), axis)
    assert_close(got, expected, kind, shape[axis])


@pytest.mark.parametrize("kind", ["sum", "max", "min", "mean", "var"])
@pytest.mark.parametrize("axis", [(0, 2), (1, 3), (0, 1), (2, 3), (0, 1, 2), (1, 2, 3), (0, 3)])
@pytest.mark.parametrize("shape", [(3, 4, 5, 6), (9, 11, 13, 31)])
def test_4d_axis_tuples(be, kind, axis, shape):
    got, expected = run(be, kind, data(shape, seed=len(axis)), axis)
    assert_close(got, expected, kind, int(np.prod([shape[a] for a in axis])))


def softmax(m, x, axis):
    return m.exp(x - m.max(x, axis=axis)) / m.sum(m.exp(x - m.max(x, axis=axis)), axis=axis)


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (5, 1), (30, 20), (300, 400), (7, 10007),
                                   (3000, 40)])
def test_softmax(be, axis, shape):
    host = data(shape, -20, 20, seed=3)
    x = be.array(host)
    out = be.empty(shape)
    out[:] = softmax(be, x, axis)
    expected = np_softmax(x.get().astype(np.float64), axis)
    np.testing.assert_allclose(out.get(), expected, rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(out.get().sum(axis=axis), 1.0, rtol=1e-4)


def test_neon_softmax_form(be):
    """neon's Softmax transform: reciprocal(sum(exp(x - max))) * exp(x - max)."""
    host = data((500, 300), -4, 4, seed=11)
    x = be.array(host)
    out = be.empty((500, 300))
    out[:] = be.reciprocal(be.sum(be.exp(x - be.max(x, axis=0)), axis=0)) * be.exp(x - be.max(x, axis=0))
    np.testing.assert_allclose(out.get(), np_softmax(x.get().astype(np.float64), 0), rtol=2e-5,
                               atol=1e-8)


@pytest.mark.parametrize("shape", [(6, 9), (300, 401)])
@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("kind", sorted(RED))
def test_nan_inf(be, shape, axis, kind):
    host = data(shape, seed=2)
    rng = np.random.default_rng(4)
    flat = host.reshape(-1)
    for v in (np.inf, -np.inf, np.nan):
        flat[rng.integers(0, flat.size, max(1, flat.size // 50))] = v
    host[0, :] = -np.inf             # a row / column of -inf only
    host[:, -1] = np.inf
    host[-1, 0] = np.nan
    got, expected = run(be, kind, host, axis)
    if kind in ("sum", "mean", "var"):
        # with inf and nan in play, only the class of each result is meaningful
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(expected))
        np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    else:
        np.testing.assert_array_equal(got, expected.astype(np.float32))


@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("kind", ["argmax", "argmin", "max", "min"])
@pytest.mark.parametrize("shape", [(5, 8), (200, 301), (3, 1000)])
def test_ties_take_the_first_index(be, axis, kind, shape):
    host = np.rint(data(shape, -2, 2, seed=6))      # few distinct values: many ties
    got, expected = run(be, kind, host, axis)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_first_nan_and_all_inf(be, axis, kind):
    host = data((70, 90), seed=8)
    host[3, 5] = host[3, 70] = host[40, 5] = host[50, 50] = np.nan
    host[10, :] = -np.inf if kind == "argmax" else np.inf
    host[:, 20] = -np.inf if kind == "argmax" else np.inf
    host[60, :] = np.inf if kind == "argmax" else -np.inf
    got, expected = run(be, kind, host, axis)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kind", sorted(RED))
@pytest.mark.parametrize("axis", [0, 1])
def test_float64(be, kind, axis):
    host = data((300, 200), seed=12) + 1e4       # catastrophic cancellation for var in float32
    got, expected = run(be, kind, host, axis, in_dtype=np.float64, out_dtype=np.float64)
    if kind.startswith("arg"):
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-9)


@pytest.mark.parametrize("kind", ["sum", "argmax", "max"])
@pytest.mark.parametrize("axis", [0, 1])
def test_int_output(be, kind, axis):
    host = np.rint(data((300, 150), -4, 4, seed=13))
    got, expected = run(be, kind, host, axis, out_dtype=np.int32)
    np.testing.assert_array_equal(got, expected.astype(np.int32))
    got, expected = run(be, "sum", host * 10, axis, out_dtype=np.int8)   # saturates
    np.testing.assert_array_equal(got, np.clip(expected, -128, 127).astype(np.int8))


@pytest.mark.parametrize("kind", sorted(RED))
@pytest.mark.parametrize("axis", [0, 1])
def test_transposed_input(be, kind, axis):
    host = data((400, 300), seed=14).astype(np.float32)
    xt = be.array(host).T                           # (300, 400), non-contiguous
    out = be.empty(reduced((300, 400), axis))
    out[:] = RED[kind][0](be, xt, axis)
    expected = RED[kind][1](host.T.astype(np.float64), axis)
    assert_close(out.get(), expected, kind, (300, 400)[axis])


def test_broadcast_operands(be):
    """Operands with size-1 axes inside the reduced expression."""
    a, r, c = data((300, 400), seed=15), data((1, 400), seed=16), data((300, 1), seed=17)
    x, y, z = be.array(a), be.array(r), be.array(c)
    for axis in (0, 1):
        out = be.empty(reduced((300, 400), axis))
        out[:] = be.sum(x * y + z, axis=axis) + be.max(y - z, axis=axis)
        h = [t.get().astype(np.float64) for t in (x, y, z)]
        expected = (np.sum(h[0] * h[1] + h[2], axis=axis, keepdims=True)
                    + np.max(h[1] - h[2], axis=axis, keepdims=True))
        np.testing.assert_allclose(out.get(), expected, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("shape", [(6, 5), (300, 400)])
def test_output_aliases_input(be, shape):
    host = data(shape, seed=7)
    t = be.array(host)
    t[:] = t * 2 + be.sum(t, axis=1)
    h = host.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(t.get(), h * 2 + h.sum(axis=1, keepdims=True), rtol=1e-5,
                               atol=1e-4)
    u = be.array(host)
    u[:] = u - be.mean(u, axis=0)
    np.testing.assert_allclose(u.get(), h - h.mean(axis=0, keepdims=True), rtol=1e-5, atol=1e-5)


def test_full_output_of_a_reduction_over_the_middle_axis(be):
    """An epilogue over the whole domain with a reduction over the middle axis of 3-D."""
    host = data((13, 300, 17), seed=18)
    x = be.array(host)
    out = be.empty((13, 300, 17))
    out[:] = x - be.mean(x, axis=1)
    h = x.get().astype(np.float64)
    np.testing.assert_allclose(out.get(), h - h.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_softmax_kernel_structure(be):
    """One tiled kernel: the duplicated max(x, 0) is one pass, and the lane loops read row slices."""
    x = be.array(data((30, 20)))
    out = be.empty((30, 20))
    tree = be.exp(x - be.max(x, axis=0)) / be.sum(be.exp(x - be.max(x, axis=0)), axis=0)
    out[:] = tree
    program = CPU_CACHE.get(P.walk(out, tree)[0])
    src = next(iter(program.kernels.values())).source
    body = src.split("def kernel_parallel")[1]
    assert body.count("# pass:") == 2
    assert "prange" in body and "b0[j0, c:c + w]" in body
    compile(src, "<kernel>", "exec")


def test_per_column_values_hoisted(be):
    """neon's softmax over axis 0: reciprocal(sum) is computed once per column of a tile (into an
    `h` array), not once per element; the result is right across several tiles and a short one."""
    shape = (700, 1100)
    host = data(shape, -30, 30, seed=12)
    x = be.array(host)
    out = be.empty(shape)
    tree = be.reciprocal(be.sum(be.exp(x - be.max(x, axis=0)), axis=0)) * be.exp(x - be.max(x, axis=0))
    out[:] = tree
    out[:] = tree
    np.testing.assert_allclose(out.get(), np_softmax(host.astype(np.float64), 0), rtol=2e-5,
                               atol=1e-8)
    src = _kernel(be, out, tree).source.split("def kernel_parallel")[1]
    division = re.search(r"v(\d+) = \(ONE / v\d+\)", src)
    assert division, src
    i = division.group(1)
    assert f"h{i}[u] = v{i}" in src and f"v{i} = h{i}[u]" in src, src


@pytest.mark.parametrize("axis", [0, 1])
def test_var_takes_the_fast_path_on_every_shape(be, axis):
    """var's second pass reads the first (x - mean(x)): the one-stage fast path still applies
    (its domain is the broadcast of the tensors under the reductions) and follows shape changes."""
    for shape in [(10, 10), (9, 17), (1024, 3), (3, 1024)]:
        host = data(shape, -3, 3, seed=shape[0])
        x = be.array(host)
        out = be.empty((1, shape[1]) if axis == 0 else (shape[0], 1))
        tree = be.var(x, axis=axis)
        for _ in range(3):
            out[:] = tree
        np.testing.assert_allclose(out.get(), host.astype(np.float64).var(axis=axis, keepdims=True),
                                   rtol=2e-5, atol=1e-6)
    program = CPU_CACHE.get(P.walk(out, tree)[0])
    assert program.fast is not None


def _neon_softmax(be, x):
    return be.reciprocal(be.sum(be.exp(x - be.max(x, axis=0)), axis=0)) * be.exp(x - be.max(x, axis=0))


def test_stash_computes_exp_once(be):
    """Softmax over axis 0: the sum pass stores exp(x - max) in the output tile and the epilogue
    reads it back (no exp in the epilogue)."""
    x = be.array(data((300, 500), -20, 20, seed=14))
    out = be.empty((300, 500))
    tree = _neon_softmax(be, x)
    out[:] = tree
    out[:] = tree
    src = _kernel(be, out, tree).source
    assert "# stash:" in src
    for body in src.split("def kernel_")[1:]:
        epilogue = body.split("# epilogue")[1]
        assert "exp32(" not in epilogue and "= ro[u]" in epilogue, body
    np.testing.assert_allclose(out.get(), np_softmax(x.get().astype(np.float64), 0), rtol=2e-5,
                               atol=1e-8)


@pytest.mark.parametrize("shape", [(300, 500), (40, 3000)])
@pytest.mark.parametrize("how", ["same tensor", "same memory", "overlapping view"])
def test_stash_with_the_output_aliasing_the_input(be, shape, how):
    """`x[:] = softmax(x)` and its aliases: the stash must not clobber the input before it is
    read (the executor takes a temp)."""
    host = data(shape, -20, 20, seed=15)
    expected = np_softmax(host.astype(np.float64), 0)
    for _ in range(3):                 # interpreted, compiled, cached fast path
        x = be.array(host)
        if how == "same tensor":
            out, src = x, x
        elif how == "same memory":      # another Tensor over the same memory
            out, src = x, x.reshape(shape)
            assert src is not x
        else:
            big = be.array(np.concatenate([host, host[:1]], axis=0))
            src, out = big[1:], big[:-1]   # out[i] is src[i - 1]
            expected = np_softmax(np.concatenate([host, host[:1]])[1:].astype(np.float64), 0)
        out[:] = _neon_softmax(be, src)
        np.testing.assert_allclose(out.get(), expected, rtol=2e-5, atol=1e-8)


@pytest.mark.parametrize("how", ["same tensor", "same memory"])
def test_stash_with_an_epilogue_reading_the_aliased_input(be, how):
    """`x[:] = softmax(x) + x`: the epilogue reads x as well as the stashed exp, so writing the
    stash into x itself would be wrong; the executor must take a temp."""
    host = data((200, 300), -5, 5, seed=17)
    expected = np_softmax(host.astype(np.float64), 0) + host
    for _ in range(3):
        x = be.array(host)
        src = x if how == "same tensor" else x.reshape(x.shape)
        x[:] = _neon_softmax(be, src) + src
        np.testing.assert_allclose(x.get(), expected, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32])
def test_stash_only_in_the_compute_dtype(be, dtype):
    host = data((64, 96), -3, 3, seed=16)
    x = be.array(host)
    out = be.empty((64, 96), dtype=dtype)
    tree = _neon_softmax(be, x) * 100
    for _ in range(2):
        out[:] = tree
    expected = np_softmax(host.astype(np.float32).astype(np.float64), 0) * 100
    if dtype == np.int32:
        np.testing.assert_array_equal(out.get(), np.rint(expected).astype(np.int32))
    else:
        np.testing.assert_allclose(out.get().astype(np.float64), expected,
                                   rtol=2e-3 if dtype == np.float16 else 2e-5, atol=1e-6)
    # float16 outputs are computed into a float32 temp, so they stash too; int32 never does
    assert ("# stash:" in _kernel(be, out, tree).source) == (dtype != np.int32)


def test_inner_sum_accumulates_in_a_register(be):
    """A sum over the innermost axis: one scalar through `_radd` (the one reassociable add), no
    lane array; exact on integers, right on a long row with inf and nan rows."""
    host = np.rint(data((64, 5003), -8, 8, seed=13))
    host[3, 17] = np.inf
    host[5, 4000] = np.nan
    host[7, :2] = (np.inf, -np.inf)
    x = be.array(host)
    out = be.empty((64, 1))
    tree = be.sum(x, axis=1)
    out[:] = tree
    out[:] = tree
    with np.errstate(invalid="ignore"):  # inf + -inf in row 7
        expected = host.astype(np.float64).sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(out.get(), expected)
    src = _kernel(be, out, tree).source.split("def kernel_parallel")[1]
    assert "_radd(s" in src and "np.empty(LANES" not in src


# ------------------------------------------------ row-split parallel path (one reduction of leading
# axes with the innermost axis kept and too few full-width column tiles)
def _kernel(be, out, tree):
    program = CPU_CACHE.get(P.walk(out, tree)[0])
    return next(iter(program.kernels.values()))


ROW_SPLIT = {k: RED[k] for k in ("sum", "max", "min", "mean")}


@pytest.mark.parametrize("kind", sorted(ROW_SPLIT))
@pytest.mark.parametrize("shape", [(1000, 1000), (10007, 37), (4099, 1500), (3, 5000),
                                   (5, 3), (2, 2048)])
def test_row_split_axis0(be, kind, shape):
    """Through the engine (the parallel variant where the size allows) and, for every shape, the
    parallel kernel called directly, against numpy float64."""
    host = data(shape, seed=21)
    got, expected = run(be, kind, host, 0)
    assert_close(got, expected, kind, shape[0])
    x = be.array(host)
    out = be.empty(reduced(shape, 0))
    k = _kernel(be, out, RED[kind][0](be, x, 0))
    assert "nsplit = RSPLIT if" in k.source.split("def kernel_parallel")[1]
    direct = np.full(out.shape, np.nan, np.float32)
    consts = [np.float32(1.0 / shape[0])] if kind == "mean" else []
    k.parallel(direct, shape, x.get(), *consts)
    assert_close(direct, expected, kind, shape[0])


@pytest.mark.parametrize("kind", sorted(ROW_SPLIT))
@pytest.mark.parametrize("axis", [0, (0, 1)])
@pytest.mark.parametrize("shape", [(7, 300, 700), (40, 50, 1100), (3, 2, 4000)])
def test_row_split_3d(be, kind, axis, shape):
    host = data(shape, seed=22)
    got, expected = run(be, kind, host, axis)
    n = int(np.prod([shape[a] for a in np.atleast_1d(axis)]))
    assert_close(got, expected, kind, n)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape", [(1000, 1000), (4099, 1500)])
def test_row_split_nan_inf(be, kind, shape):
    """nan anywhere in a column (any chunk of rows, first or last row) gives nan; +-inf kept."""
    host = data(shape, seed=23)
    host[0, 3] = host[-1, 4] = host[shape[0] // 2, 5] = host[shape[0] // 4 + 1, 6] = np.nan
    host[:, 7] = np.nan
    host[shape[0] - 2, 8] = np.inf
    host[1, 9] = -np.inf
    host[:, 10] = -np.inf
    host[:, 11] = np.inf
    host[7, 11] = np.nan
    got, expected = run(be, kind, host, 0)
    assert np.isnan(got[0, 3:8]).all()
    np.testing.assert_array_equal(got, expected.astype(np.float32))


@pytest.mark.parametrize("kind", sorted(ROW_SPLIT))
def test_row_split_float64(be, kind):
    host = data((2000, 900), seed=24) + 1e4
    got, expected = run(be, kind, host, 0, in_dtype=np.float64, out_dtype=np.float64)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_row_split_int_output(be, kind):
    host = np.rint(data((3000, 700), -4, 4, seed=25))
    got, expected = run(be, kind, host, 0, out_dtype=np.int32)
    np.testing.assert_array_equal(got, expected.astype(np.int32))
    got, expected = run(be, "sum", host * 10, 0, out_dtype=np.int8)   # saturates
    np.testing.assert_array_equal(got, np.clip(expected, -128, 127).astype(np.int8))


def test_row_split_independent_of_thread_count(be):
    import numba
    host = data((3001, 1000), seed=26).astype(np.float32)
    x = be.array(host)
    out = be.empty((1, 1000))
    k = _kernel(be, out, be.sum(x, axis=0))
    results = []
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            res = np.empty((1, 1000), np.float32)
            k.parallel(res, host.shape, host)
            results.append(res)
    finally:
        numba.set_num_threads(before)
    for res in results[1:]:
        np.testing.assert_array_equal(res, results[0])
