"""The fused CPU engine (kernel plan + Numba renderer + structural cache) against the reference
interpreter and numpy float64. These tests switch the engine on for themselves, with every tree
compiled on its first run (the library interprets a tree's first run and compiles when it recurs)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("numba")

from neonlike import plan as P  # noqa: E402
from neonlike.ops import OP_INFO, Kind, Op  # noqa: E402
from neonlike.backends import gen_backend  # noqa: E402
from neonlike.backends.cpu import device as nervanacpu  # noqa: E402
from neonlike.backends.cpu import program as fused_cpu  # noqa: E402
from neonlike.backends.cache import CPU_CACHE  # noqa: E402


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kernels")


@pytest.fixture
def be(cache_dir, monkeypatch):
    monkeypatch.setenv("NEONLIKE_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(CPU_CACHE, "_dir", None)
    monkeypatch.setattr(nervanacpu, "_FUSED", [fused_cpu.ENGINE])
    monkeypatch.setattr(fused_cpu.ENGINE, "jit_after", 1)
    return gen_backend("cpu", rng_seed=0)


def data(shape, lo=-3.0, hi=3.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def check(be, out_shape, build, arrays, out_dtype=np.float32, in_dtype=np.float32, rtol=2e-6,
          atol=1e-6):
    """Run `build(be, *tensors)` fused and compare with `build(np, *float64 arrays)`."""
    tensors = [be.array(a, dtype=in_dtype) for a in arrays]
    out = be.empty(out_shape, dtype=out_dtype)
    out[:] = build(be, *tensors)
    expected = np.asarray(build(NP, *[t.get().astype(np.float64) for t in tensors]))
    expected = np.broadcast_to(expected.reshape(expected.shape if expected.ndim >= 2 else
                                                (1,) * (2 - expected.ndim) + expected.shape),
                               out_shape)
    if np.dtype(out_dtype).kind in "iu":
        info = np.iinfo(out_dtype)
        expected = np.clip(np.rint(np.nan_to_num(expected)), info.min, info.max)
        np.testing.assert_array_equal(out.get(), expected)
    else:
        np.testing.assert_allclose(out.get(), expected.astype(out_dtype), rtol=rtol, atol=atol,
                                   equal_nan=True)
    return out


class NP:
    """numpy with neon's names, for the float64 oracle."""
    exp, tanh, sqrt, dot, maximum, minimum = np.exp, np.tanh, np.sqrt, np.dot, np.maximum, np.minimum

    @staticmethod
    def sig(x):
        return 1 / (1 + np.exp(-x))

    @staticmethod
    def relu(x):
        return np.maximum(x, 0)

    @staticmethod
    def sum(x, axis=None, keepdims=True):
        return np.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def max(x, axis=None, keepdims=True):
        return np.max(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def min(x, axis=None, keepdims=True):
        return np.min(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def argmax(x, axis=1, keepdims=True):
        return np.argmax(x, axis=axis, keepdims=keepdims) if axis is not None else np.argmax(x)

    @staticmethod
    def argmin(x, axis=1, keepdims=True):
        return np.argmin(x, axis=axis, keepdims=keepdims) if axis is not None else np.argmin(x)

    @staticmethod
    def mean(x, axis=None, keepdims=True):
        return np.mean(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def var(x, axis=None, keepdims=True):
        return np.var(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def take(x, idx, axis):
        return np.take(x, np.asarray(idx).ravel().astype(int), axis)


TREES = {
    "broadcast_row": ((4, 5), lambda b, x, y: x * 2.5 + y, [(4, 5), (1, 5)]),
    "outer": ((3, 4), lambda b, x, y: x * y - x, [(3, 1), (1, 4)]),
    "3d": ((2, 3, 4), lambda b, x, y: b.exp(x) / (1 + abs(y)), [(2, 3, 4), (3, 1)]),
    "4d": ((2, 1, 3, 4), lambda b, x, y: b.sqrt(abs(x)) + y, [(2, 1, 3, 4), (1, 4)]),
    "logistic": ((64, 64), lambda b, x: 1 / (1 + b.exp(-x)), [(64, 64)]),
    "ten_op": ((50, 40), lambda b, a, c, d, e: ((a * c + d) * e - a / (c + 1)) * b.exp(-d * d)
               + b.sqrt(abs(e)), [(50, 40)] * 4),
    "softmax0": ((30, 20), lambda b, x: b.exp(x - b.max(x, axis=0))
                 / b.sum(b.exp(x - b.max(x, axis=0)), axis=0), [(30, 20)]),
    "softmax1": ((30, 20), lambda b, x: b.exp(x - b.max(x, axis=1))
                 / b.sum(b.exp(x - b.max(x, axis=1)), axis=1), [(30, 20)]),
    "sum0": ((1, 40), lambda b, x: b.sum(x, axis=0), [(300, 40)]),
    "sum1": ((300, 1), lambda b, x: b.sum(x * x, axis=1), [(300, 40)]),
    "sum_all": ((1, 1), lambda b, x: b.sum(x), [(70, 30)]),
    "sum_3d_02": ((1, 5, 1), lambda b, x: b.sum(x, axis=(0, 2)), [(4, 5, 6)]),
    "max_min": ((1, 6), lambda b, x: b.max(x, axis=0) - b.min(x, axis=0), [(7, 6)]),
    "argmax0": ((1, 6), lambda b, x: b.argmax(x, axis=0), [(7, 6)]),
    "argmin1": ((7, 1), lambda b, x: b.argmin(x, axis=1), [(7, 6)]),
    "mean_var": ((9, 1), lambda b, x: b.mean(x, axis=1) + b.var(x, axis=1), [(9, 33)]),
    "sum_then_broadcast": ((9, 33), lambda b, x: x * 2 + b.sum(x, axis=1), [(9, 33)]),
    "mixed_axes": ((9, 33), lambda b, x: b.sum(x, axis=0) + b.sum(x, axis=1), [(9, 33)]),
    "dot_relu": ((5, 7), lambda b, w, x, c: b.relu(b.dot(w, x) + c), [(5, 3), (3, 7), (5, 1)]),
    "take": ((2, 4), lambda b, x: b.take(x, [2, 0], axis=0) * 2, [(3, 4)]),
    "big_parallel": ((256, 300), lambda b, x, y: b.tanh(x * y + x / (y + 4)), [(256, 300)] * 2),
}


@pytest.mark.parametrize("name", sorted(TREES))
def test_tree_matches_numpy(be, name):
    shape, build, shapes = TREES[name]
    check(be, shape, build, [data(s, seed=i) for i, s in enumerate(shapes)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out_dtype", [np.float64, np.float16, np.int8, np.uint8, np.int32])
def test_output_dtypes(be, out_dtype):
    rtol = {np.float16: 1e-3}.get(out_dtype, 1e-6)
    check(be, (6, 7), lambda b, x: x * 100 - 3, [data((6, 7), seed=3)], out_dtype=out_dtype, rtol=rtol,
          atol=1e-5)


@pytest.mark.parametrize("in_dtype", [np.int8, np.int32, np.uint16, np.float16, np.float64])
def test_input_dtypes(be, in_dtype):
    arrays = [np.rint(data((5, 8), -20, 20, seed=4))]
    check(be, (5, 8), lambda b, x: x * x + 1, arrays, in_dtype=in_dtype, out_dtype=np.float64,
          rtol=1e-12 if np.dtype(in_dtype).itemsize == 8 or in_dtype in (np.int32,) else 2e-7)


def test_edge_values(be):
    edge = np.array([0.0, -0.0, 1e-30, 1e-40, 1e30, 3e38, -3e38, np.inf, -np.inf, np.nan, 1, -1])
    x = be.array(edge.reshape(3, 4))
    out = be.empty((3, 4))
    out[:] = be.maximum(x, 0) + be.minimum(x, 1) * 0 + be.sig(x)
    ref = be.empty((3, 4))
    ref[:] = x  # computed below with numpy on the stored float32 values
    v = x.get().astype(np.float64)
    with np.errstate(all="ignore"):
        expected = (np.maximum(v, 0) + np.minimum(v, 1) * 0 + 1 / (1 + np.exp(-v))).astype(np.float32)
    np.testing.assert_allclose(out.get(), expected, rtol=1e-6, equal_nan=True)
    m = be.empty((1, 4))
    m[:] = be.max(x, axis=0)
    np.testing.assert_array_equal(m.get(), np.max(x.get(), axis=0, keepdims=True))


def test_output_aliases_input(be):
    host = data((6, 5), seed=7)
    t = be.array(host)
    t[:] = t * 2 + be.sum(t, axis=1)
    h = host.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(t.get(), h * 2 + h.sum(axis=1, keepdims=True), rtol=1e-5)
    sq = be.array(data((4, 4), seed=8))
    before = sq.get()
    sq[:] = sq.T + 0  # overlapping views: computed into a temp first
    np.testing.assert_array_equal(sq.get(), before.T)


def test_strided_views(be):
    host = data((8, 10), seed=9).astype(np.float32)
    x = be.array(host)
    out = be.zeros((8, 10))
    out[::2, 1::3] = x[1::2, ::-4] * 3 + x[::2, 1::3]
    expected = np.zeros((8, 10), np.float32)
    expected[::2, 1::3] = host[1::2, ::-4] * 3 + host[::2, 1::3]
    np.testing.assert_allclose(out.get(), expected, rtol=1e-6)


def test_failed_execution_leaves_output_untouched(be):
    x = be.array(data((3, 4), seed=10))
    out = be.array(np.full((2, 4), 7.0))
    with pytest.raises(IndexError):
        out[:] = be.take(x, [0, 5], axis=0) + 1
    np.testing.assert_array_equal(out.get(), np.full((2, 4), 7.0))


def test_zero_size(be):
    x = be.array(np.zeros((0, 3)))
    out = be.empty((0, 3))
    out[:] = x * 2
    assert out.get().shape == (0, 3)


def test_constants_and_identities_share_a_kernel(be):
    a, b, c, d = (be.array(data((5, 6), seed=s)) for s in range(4))
    out = be.empty((5, 6))
    out[:] = 2.5 * a + b
    misses = CPU_CACHE.stats["misses"]
    out[:] = 3.0 * c + d
    assert CPU_CACHE.stats["misses"] == misses
    np.testing.assert_allclose(out.get(), 3.0 * c.get() + d.get(), rtol=1e-6)


def test_sizes_share_a_kernel(be):
    outs = []
    for shape in ((8, 16), (9, 17), (1024, 3)):
        x, y = be.array(data(shape, seed=1)), be.array(data(shape, seed=2))
        o = be.empty(shape)
        o[:] = be.minimum(x * 1.5, y) - x
        outs.append((o, x, y))
        if shape == (8, 16):
            compiles = CPU_CACHE.stats["compiles"] + CPU_CACHE.stats["disk_loads"]
            misses = CPU_CACHE.stats["misses"]
    assert CPU_CACHE.stats["misses"] == misses
    assert CPU_CACHE.stats["compiles"] + CPU_CACHE.stats["disk_loads"] == compiles
    for o, x, y in outs:
        np.testing.assert_allclose(o.get(), np.minimum(x.get() * np.float32(1.5), y.get()) - x.get(),
                                   rtol=1e-6)


def test_signature_is_structural(be):
    a, b = be.array(data((3, 4))), be.array(data((3, 4), seed=1))
    out = be.empty((3, 4))
    k1 = P.walk(out, a * 2.0 + b)[0]
    k2 = P.walk(out, b * 7.0 + a)[0]
    k3 = P.walk(out, a * 2.0 + a)[0]          # the same tensor twice is another structure
    k4 = P.walk(a, a * 2.0 + b)[0]            # so is an output that is also an input
    k5 = P.walk(out, be.array(data((1, 4))) * 2.0 + b)[0]  # and another broadcast pattern
    assert k1 == k2
    assert len({k1, k3, k4, k5}) == 4


def test_softmax_is_one_stage(be):
    x = be.array(data((30, 20)))
    tree = be.exp(x - be.max(x, axis=0)) / be.sum(be.exp(x - be.max(x, axis=0)), axis=0)
    out = be.empty((30, 20))
    key, tensors, consts, nodes = P.walk(out, tree)
    plan = P.make_plan(out, tree, tensors, nodes, fused_cpu.render_numba.RENDERABLE)
    assert [s.kind for s in plan.stages] == [P.StageKind.FUSED]
    assert plan.stages[0].reduce_axes == (0,)


def test_dot_in_a_tree_is_a_gemm_stage(be):
    w, x = be.array(data((5, 3))), be.array(data((3, 7)))
    out = be.empty((5, 7))
    tree = be.relu(be.dot(w, x) + 1)
    key, tensors, consts, nodes = P.walk(out, tree)
    plan = P.make_plan(out, tree, tensors, nodes, fused_cpu.render_numba.RENDERABLE)
    assert [s.kind for s in plan.stages] == [P.StageKind.GEMM, P.StageKind.FUSED]


@pytest.mark.parametrize("out_dtype", [np.float32, np.float64, np.float16, np.int32])
def test_assigned_dot_runs_straight_into_the_output(be, monkeypatch, out_dtype):
    """`out[:] = dot(a, b)` (and dot(out=)) writes the GEMM into `out` itself when its dtype is the
    compute dtype and it shares no memory with a or b; otherwise through a temp. Always right."""
    from neonlike.backends.cpu import gemm as gemm
    seen = []
    real = gemm.gemm

    def spy(a, b, c, *args):
        seen.append(c)
        return real(a, b, c, *args)
    monkeypatch.setattr(gemm, "gemm", spy)
    a, b = data((6, 4)), data((4, 6))
    A, B = be.array(a), be.array(b)
    out = be.empty((6, 6), dtype=out_dtype)
    for _ in range(3):  # interpreted, compiled, cached
        seen.clear()
        out[:] = be.dot(A, B)
    np.testing.assert_allclose(out.get(), (a.astype(np.float64) @ b).astype(out_dtype),
                               rtol=1e-3, atol=1)
    if out_dtype == np.float32:
        np.testing.assert_allclose(out.get(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-6)
    direct = out_dtype in (np.float32, np.float64)  # the compute dtypes
    assert (seen[0] is out._tensor) == direct
    be.dot(A, B, out=out)
    assert (seen[-1] is out._tensor) == direct
    # the output aliasing an operand: through the temp, still right
    sq = be.array(data((5, 5), seed=3))
    expected = sq.get().astype(np.float64) @ sq.get()
    for _ in range(2):
        sq2 = be.array(sq.get())
        sq2[:] = be.dot(sq2, sq2)
        np.testing.assert_allclose(sq2.get(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8])
def test_dot_with_out_goes_straight_to_the_gemm(be, monkeypatch, dtype):
    """`be.dot(a, b, out=c)` of 2-D float tensors of one dtype calls the device's GEMM without
    building a node (compound_dot's path); other dtypes, shapes that do not fit (the same error
    as before, out untouched) and another backend's tensors go through the op-tree."""
    from neonlike.backends import backend as backend_module
    built = []
    real = backend_module.build

    def spy(*args, **kwargs):
        built.append(args[0])
        return real(*args, **kwargs)
    monkeypatch.setattr(backend_module, "build", spy)
    a, b = data((5, 3), seed=1), data((3, 4), seed=2)
    if dtype == np.int8:
        a, b = np.round(a), np.round(b)
    A, B = be.array(a, dtype=dtype), be.array(b, dtype=dtype)
    C = be.empty((5, 4), dtype=dtype)
    assert be.dot(A, B, out=C) is C
    want = a.astype(dtype).astype(np.float64) @ b.astype(dtype).astype(np.float64)
    np.testing.assert_allclose(C.get().astype(np.float64), want.astype(dtype), rtol=2e-3,
                               atol=1e-2)
    assert built == ([] if dtype != np.int8 else [Op.DOT])
    built.clear()
    bad = be.zeros((5, 5), dtype=dtype)
    with pytest.raises(ValueError, match=r"\(5, 3\)"):
        be.dot(A, A, out=bad)
    assert built == [Op.DOT] and not bad.get().any()
    built.clear()
    from neonlike.backends import gen_backend
    other = gen_backend("cpu")
    D = other.empty((5, 4), dtype=dtype)
    if other is not be:
        be.dot(A, B, out=D)
        assert built == [Op.DOT]


def test_kernel_source_is_readable(be):
    x = be.array(data((4, 4)))
    out = be.empty((4, 4))
    out[:] = x * 2 + 1
    program = CPU_CACHE.get(P.walk(out, x * 2 + 1)[0])
    src = next(iter(program.kernels.values())).source
    assert "def kernel_serial(out, dom, b0, c0, c1):" in src
    assert "prange" in src and "c0" in src
    compile(src, "<kernel>", "exec")


def test_disk_cache_survives_processes_and_corruption(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        from neonlike.backends import gen_backend
        from neonlike.backends.cache import CPU_CACHE
        be = gen_backend('cpu')
        x = be.array(np.arange(12.0).reshape(3, 4))
        o = be.empty((3, 4))
        o[:] = be.tanh(x * 0.25) * 3 - x
        assert np.allclose(o.get(), np.tanh(np.arange(12.0).reshape(3, 4) * 0.25) * 3
                           - np.arange(12.0).reshape(3, 4), rtol=1e-6)
        print(CPU_CACHE.stats['compiles'], CPU_CACHE.stats['disk_loads'])
    """)
    env = dict(os.environ, NEONLIKE_FUSE="1", NEONLIKE_JIT_AFTER="1", NEONLIKE_CACHE_DIR=str(tmp_path))

    def run():
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return tuple(int(v) for v in r.stdout.split())

    assert run() == (1, 0)           # cold: compiled
    assert run() == (0, 1)           # warm: numba's disk cache
    for f in tmp_path.glob("k_*.py"):
        f.write_text("this is not python")
    assert run()[0] + run()[1] >= 1  # a corrupt module is rewritten, never fatal


def test_cache_stats_and_clear(be):
    import neonlike
    x = be.array(data((3, 3)))
    out = be.empty((3, 3))
    out[:] = x * 4 - 1
    stats = neonlike.cache_stats()
    assert {"hits", "misses", "compiles", "compile_seconds", "entries"} <= set(stats)
    assert stats["entries"] >= 1 and stats["misses"] >= 1
    neonlike.clear_caches()
    assert neonlike.cache_stats()["entries"] == 0
    out[:] = x * 4 - 1          # recompiled into memory (or reloaded from disk), same values
    np.testing.assert_allclose(out.get(), x.get() * 4 - 1, rtol=1e-6)
    assert neonlike.cache_stats()["misses"] == 1


# ---------------------------------------------------------------- random trees, fused vs reference

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from neonlike.backends import reference  # noqa: E402

_UNARY = [lambda b, t: -t, lambda b, t: abs(t), lambda b, t: b.tanh(t), lambda b, t: b.sig(t),
          lambda b, t: b.sqrt(abs(t)), lambda b, t: b.exp(-abs(t)), lambda b, t: b.log(abs(t) + 1)]
_BINARY = [lambda b, s, t: s + t, lambda b, s, t: s - t, lambda b, s, t: s * t,
           lambda b, s, t: b.maximum(s, t), lambda b, s, t: b.minimum(s, t),
           lambda b, s, t: s / (abs(t) + 1), lambda b, s, t: s > t]
_REDUCE = [lambda b, t, a: b.sum(t, axis=a), lambda b, t, a: b.max(t, axis=a),
           lambda b, t, a: b.mean(t, axis=a), lambda b, t, a: b.argmax(t, axis=a)]


@st.composite
def _trees(draw, depth=0):
    """A recipe: a function of (be, leaves) building a random tree of shape (3, 4) or a broadcast of it."""
    kind = draw(st.sampled_from(["leaf", "const", "unary", "binary", "binary", "reduce", "reduce"]
                                if depth < 5 else ["leaf", "const"]))
    if kind == "leaf":
        i = draw(st.integers(0, 2))
        return lambda b, leaves: leaves[i]
    if kind == "const":
        c = draw(st.sampled_from([0.5, 2.0, -1.5, np.float32(3.0), 7]))
        return lambda b, leaves: c
    if kind == "unary":
        f, sub = draw(st.sampled_from(_UNARY)), draw(_trees(depth + 1))
        return lambda b, leaves: f(b, _as_tree(b, sub(b, leaves), leaves))
    if kind == "binary":
        f, s, t = draw(st.sampled_from(_BINARY)), draw(_trees(depth + 1)), draw(_trees(depth + 1))
        return lambda b, leaves: f(b, _as_tree(b, s(b, leaves), leaves), t(b, leaves))
    f, sub, axis = draw(st.sampled_from(_REDUCE)), draw(_trees(depth + 1)), draw(st.sampled_from([0, 1]))
    return lambda b, leaves: f(b, _as_tree(b, sub(b, leaves), leaves), axis)


def _as_tree(b, x, leaves):
    return x if not isinstance(x, (int, float, np.floating)) else leaves[0] * 0 + x


@settings(max_examples=40, deadline=None)
@given(recipe=_trees(), out_dtype=st.sampled_from([np.float32, np.float64, np.int16]),
       in_dtype=st.sampled_from([np.float32, np.float16, np.int8]))
def test_random_trees_fused_equal_reference(cache_dir, recipe, out_dtype, in_dtype):
    saved_env = os.environ.get("NEONLIKE_CACHE_DIR")
    os.environ["NEONLIKE_CACHE_DIR"] = str(cache_dir)
    saved, CPU_CACHE._dir = nervanacpu._FUSED[:], None
    nervanacpu._FUSED[:] = [fused_cpu.ENGINE]
    try:
        be = gen_backend("cpu", rng_seed=0)
        leaves = [be.array(np.rint(data(s, -4, 4, seed=i) * 4) / 4, dtype=in_dtype)
                  for i, s in enumerate([(3, 4), (1, 4), (3, 1)])]
        tree = _as_tree(be, recipe(be, leaves), leaves)
        out = be.empty((3, 4), dtype=out_dtype)
        dt = reference.tree_dtype(out, tree)
        expected = np.broadcast_to(reference.evaluate(tree, dt), (3, 4))
        out[:] = tree
    finally:
        nervanacpu._FUSED[:] = saved
        CPU_CACHE._dir = None
        if saved_env is None:
            os.environ.pop("NEONLIKE_CACHE_DIR", None)
        else:
            os.environ["NEONLIKE_CACHE_DIR"] = saved_env
    if np.dtype(out_dtype).kind == "f":
        np.testing.assert_allclose(out.get(), expected.astype(out_dtype), rtol=2e-5, atol=2e-5,
                                   equal_nan=True)
    else:
        got, want = out.get().astype(np.int64), be.array(expected, dtype=out_dtype).get()
        assert np.all(np.abs(got - want) <= 1), (got, want)


def test_reduction_of_a_constant(be):
    x = be.ones((2, 3))
    out = be.empty((2, 3))
    out[:] = x + be.max(3)
    np.testing.assert_array_equal(out.get(), np.full((2, 3), 4.0))
    one = be.empty((1, 1))
    one[:] = be.sum(0.25, axis=1)
    assert one.get()[0, 0] == 0.25


# ---------------------------------------------------------------- every renderable op, fused

EDGE = np.array([0.0, -0.0, 1e-30, -1e-40, 0.5, -0.75, 1.0, -1.0, 2.5, -3.0, 20.0, -30.0, 88.0,
                 -100.0, 1e30, -3e38, np.inf, -np.inf, np.nan, 0.999, 7.0, -7.0, 1e-3, 40.0])
ELEMENTWISE = sorted(op for op in fused_cpu.render_numba.RENDERABLE
                     if OP_INFO[op].kind is Kind.ELEMENTWISE)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ELEMENTWISE, ids=str)
def test_every_elementwise_op_equals_the_reference(be, op, dtype):
    """Each op the renderer knows, fused, on edge inputs (0, -0, tiny, huge, inf, nan), against
    the reference interpreter (itself checked against numpy float64 in test_ops)."""
    x = be.array(EDGE.reshape(4, 6), dtype=dtype)
    y = be.array(np.roll(EDGE, 5).reshape(4, 6), dtype=dtype)
    tree = P.OpTreeNode.build(op, x, y if OP_INFO[op].arity == 2 else None)
    fused, ref = be.empty((4, 6), dtype=dtype), be.empty((4, 6), dtype=dtype)
    with np.errstate(all="ignore"):
        fused[:] = tree
        ref._store(fused_cpu.reference.evaluate(tree, np.dtype(dtype)))
    assert CPU_CACHE.get(P.walk(fused, tree)[0]) is not None, "the tree did not run fused"
    tol = 4e-7 if dtype == np.float32 else 1e-15
    # atol: the smallest normal number; below it the vector math keeps subnormal results
    # (sig(-100) = 3.7e-44) where numpy's float32 formula rounds to 0
    np.testing.assert_allclose(fused.get(), ref.get(), rtol=tol, atol=np.finfo(dtype).tiny,
                               equal_nan=True,
                               err_msg=f"{op} on {EDGE.reshape(4, 6)} and {np.roll(EDGE, 5).reshape(4, 6)}")


@pytest.mark.parametrize("shape", [(8, 16), (9, 17), (1024, 3), (300, 400), (0, 5), (5, 0)])
def test_repeated_reductions_take_the_fast_path(be, shape):
    """A statement run again goes through the per-program runner, which works out the reductions'
    domain from its tensors' shapes: right for every size, broadcasting and empty domains."""
    x = be.array(data(shape, seed=11))
    w = be.array(data((1, shape[1]), seed=12))
    o0, o1 = be.empty((1, shape[1])), be.empty((shape[0], 1))
    h, hw = x.get().astype(np.float64), w.get().astype(np.float64)
    for _ in range(3):  # compile, then the fast path twice
        o0[:] = be.sum(x * w, axis=0)
        o1[:] = be.max(x * w - 1, axis=1) if shape[1] else be.sum(x * w - 1, axis=1)
        # float32 sums: the error scales with the sum of the magnitudes
        atol = 1e-6 * max(np.abs(h * hw).sum(axis=0).max(initial=1), np.abs(h * hw - 1).sum(axis=1).max(initial=1))
        np.testing.assert_allclose(o0.get(), (h * hw).sum(axis=0, keepdims=True), rtol=1e-5, atol=atol)
        expected = ((h * hw - 1).max(axis=1, keepdims=True) if shape[1]
                    else (h * hw - 1).sum(axis=1, keepdims=True))
        np.testing.assert_allclose(o1.get(), expected, rtol=1e-5, atol=atol)


@st.composite
def _dag_programs(draw):
    """Steps that combine earlier values, each value used any number of times."""
    return draw(st.lists(st.tuples(st.sampled_from(["unary", "binary", "binary", "reduce"]),
                                   st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)),
                         min_size=2, max_size=9))


def _run_program(b, leaves, program, shared):
    """The program's last value: with `shared`, a value used twice is one node object (a DAG);
    without, every use builds its own copy (the same tree, unshared)."""
    makers = [lambda t=t: t for t in leaves]
    for kind, i, j, k in program:
        f, g = makers[i % len(makers)], makers[j % len(makers)]
        if kind == "unary":
            make = lambda f=f, k=k: _UNARY[k % len(_UNARY)](b, f())
        elif kind == "binary":
            make = lambda f=f, g=g, k=k: _BINARY[k % (len(_BINARY) - 1)](b, f(), g())
        else:
            make = lambda f=f, k=k: _REDUCE[k % 3](b, f(), k % 2)
        if shared:
            node = make()
            make = lambda node=node: node
        makers.append(make)
    return makers[-1]()


@settings(max_examples=25, deadline=None)
@given(program=_dag_programs())
def test_shared_subtrees_fused_equal_unshared_reference(program):
    """A tree whose subtrees are shared node objects (as Autodiff's gradients are) runs fused to
    the values of the same tree built without sharing, run by the reference interpreter."""
    be = gen_backend("cpu", rng_seed=0)
    leaves = [be.array(data(s, -2, 2, seed=i)) for i, s in enumerate([(3, 4), (1, 4), (3, 1)])]
    dag = _run_program(be, leaves, program, shared=True) * 1.0
    tree = _run_program(be, leaves, program, shared=False) * 1.0
    out = be.empty((3, 4))
    out[:] = dag
    out[:] = dag            # the second run is compiled whatever NEONLIKE_JIT_AFTER says
    expected = np.broadcast_to(reference.evaluate(tree, np.dtype(np.float32)), (3, 4))
    np.testing.assert_allclose(out.get(), expected, rtol=2e-5, atol=2e-5, equal_nan=True)


def test_which_subtree_is_shared_is_part_of_the_key():
    be = gen_backend("cpu", rng_seed=0)
    x, y = be.array(data((3, 4), seed=1)), be.array(data((3, 4), seed=2))
    xv, yv = x.get(), y.get()
    out = be.empty((3, 4))
    for _ in range(2):
        u = x + y
        v = be.tanh(u)
        out[:] = v + u                     # the right operand shares the first node
        np.testing.assert_allclose(out.get(), np.tanh(xv + yv) + xv + yv, rtol=1e-6)
        out[:] = v + v                     # ... the second one
        np.testing.assert_allclose(out.get(), 2 * np.tanh(xv + yv), rtol=1e-6)


def test_a_tree_thousands_of_nodes_deep_is_planned_without_recursion_error():
    """plan.walk and the planner are iterative (an unrolled loop; tests/test_deep_trees.py)."""
    import sys

    from neonlike import plan as P
    from neonlike.backends.cpu import render as render_numba
    be = gen_backend("cpu", rng_seed=0)
    x = be.array(data((2, 2)))
    y = x
    for _ in range(3000):
        y = y * 0.999 + 0.001
    out = be.empty((2, 2))
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(1000)
        key, tensors, consts, nodes = P.walk(out, y)
        plan = P.make_plan(out, y, tensors, nodes, render_numba.RENDERABLE)
    finally:
        sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))
    assert len(nodes) == 6000 and len(consts) == 6000
    # split under the plan's caps into a chain of stages, each reading x or the temp before it
    assert len(plan.stages) > 1 and len(plan.temps) == len(plan.stages) - 1
    assert all(st.kind is P.StageKind.FUSED for st in plan.stages)
    assert sum(ins.op != "load" for st in plan.stages for ins in st.program) == 2 * 6000
