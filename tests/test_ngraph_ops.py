"""Every ngraph op on both transformers (NumPyTransformer and the 'cpu' engine one) against numpy
float64 references, edge inputs included, and `deriv` of every differentiable op against central
differences. A transformer takes no new computation after its first call (upstream), so each
computation gets a fresh one."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neonlike.ngraph as ng

TRANSFORMERS = {"numpy": ng.NumPyTransformer, "cpu": ng.make_transformer_factory("cpu")}
F64 = np.float64
EDGES = np.array([0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30, np.inf, -np.inf, np.nan, 0.5, -2.0, 3.0])


@pytest.fixture(params=sorted(TRANSFORMERS))
def make(request):
    return TRANSFORMERS[request.param]


def fresh(*lengths, batch=()):
    """New axes of these lengths (named a0, a1, ... made unique by the axis core)."""
    return [ng.make_axis(length=n, name=f"a{i}", batch=i in batch) for i, n in enumerate(lengths)]


def run(make, results, *feeds):
    """The values of `results` with placeholders fed: feeds are (placeholder, array) pairs."""
    f = make().computation(results, *[p for p, _ in feeds])
    return f(*[v for _, v in feeds])


def close(got, want, rtol=1e-12, atol=0.0):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.astype(F64), np.asarray(want, dtype=F64), rtol=rtol,
                               atol=atol, equal_nan=True)


def rand(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


# **************** elementwise ****************

def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


UNARY = [
    ("negative", np.negative), ("absolute", np.abs), ("sin", np.sin), ("cos", np.cos),
    ("tanh", np.tanh), ("exp", np.exp), ("log", np.log),
    ("safelog", lambda x: np.log(np.maximum(x, np.exp(-50.0)))),
    ("reciprocal", lambda x: 1 / x), ("sign", np.sign), ("square", np.square),
    ("sqrt", np.sqrt), ("sigmoid", _sigmoid),
]


@pytest.mark.parametrize("name, ref", UNARY, ids=[u[0] for u in UNARY])
def test_unary_ops_on_edge_values(make, name, ref):
    A, B = fresh(3, 4)
    x = ng.placeholder([A, B], dtype=F64)
    xv = EDGES.reshape(3, 4)
    y = getattr(ng, name)(x)
    assert y.axes == ng.make_axes([A, B]) and y.dtype == F64
    with np.errstate(all="ignore"):
        want = ref(xv)
    # sin/cos of 1e30: libm and numba's intrinsic reduce the argument alike, but allow 1 ulp-ish
    close(run(make, y, (x, xv)), want, rtol=1e-12 if name not in ("sin", "cos") else 1e-9)


BINARY = [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
    ("divide", np.divide), ("maximum", np.maximum), ("minimum", np.minimum),
    ("power", np.power), ("equal", np.equal), ("not_equal", np.not_equal),
    ("greater", np.greater), ("less", np.less), ("greater_equal", np.greater_equal),
    ("less_equal", np.less_equal),
]
BINARY_EDGES = np.array([0.0, 1e-30, 1e30, -1e30, np.inf, -np.inf, np.nan, 2.5, -1.5, 3.0])


@pytest.mark.parametrize("name, ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary_ops_on_every_pair_of_edge_values(make, name, ref):
    """(A,) op (B,) -> (A, B): every pair of edge values, paired by axis identity."""
    A, B = fresh(len(BINARY_EDGES), len(BINARY_EDGES))
    x, y = ng.placeholder([A], dtype=F64), ng.placeholder([B], dtype=F64)
    z = getattr(ng, name)(x, y)
    assert z.axes == ng.make_axes([A, B])
    with np.errstate(all="ignore"):
        want = ref(BINARY_EDGES[:, None], BINARY_EDGES[None, :])
    got = run(make, z, (x, BINARY_EDGES), (y, BINARY_EDGES))
    if want.dtype == bool:
        assert got.dtype == bool, got.dtype
        np.testing.assert_array_equal(got, want)
    else:
        close(got, want)


def test_mod_is_numpys_floored_modulo(make):
    """mod on moderate finite values (the floored form a - b * floor(a / b) is what lowers)."""
    vals = np.array([-7.5, -3.0, -1.0, 0.0, 1.0, 2.5, 7.0])
    divs = np.array([-2.0, -0.5, 0.75, 3.0])
    A, B = fresh(len(vals), len(divs))
    x, y = ng.placeholder([A], dtype=F64), ng.placeholder([B], dtype=F64)
    close(run(make, ng.mod(x, y), (x, vals), (y, divs)),
          np.mod(vals[:, None], divs[None, :]), atol=1e-12)
    close(run(make, x % 2.0, (x, vals)), np.mod(vals, 2.0), atol=1e-12)


def test_python_operators_and_numbers(make):
    A, B = fresh(2, 3)
    x = ng.placeholder([A, B], dtype=F64)
    xv = rand(2, 3) + 2.0
    exprs = [(x + 1, xv + 1), (1 + x, 1 + xv), (x - 1, xv - 1), (1 - x, 1 - xv),
             (2 * x, 2 * xv), (x / 4, xv / 4), (4 / x, 4 / xv), (x ** 2, xv ** 2),
             (2 ** x, 2 ** xv), (-x, -xv), (abs(-x), xv), (+x, xv),
             (np.float64(3) * x, 3 * xv), (x < 2.5, xv < 2.5), (x >= 2.5, xv >= 2.5)]
    got = run(make, [e for e, _ in exprs], (x, xv))
    for g, (_, want) in zip(got, exprs):
        close(g, want)


def test_a_scalar_only_expression(make):
    """An op of two scalar constants is still a value (one number, shape ())."""
    assert float(run(make, ng.constant(2.0) + ng.constant(3.0))) == 5.0
    assert float(run(make, ng.exp(ng.constant(0.0)))) == 1.0


def test_seed_000_elementwise_axis_table_with_values(make):
    """Seed 000's binary table: each result's axes, and its values aligned by identity."""
    C, H, W, N = fresh(2, 3, 4, 5)
    vals = {a: i for i, a in enumerate([C, H, W, N])}

    def p(*axes):
        shape = tuple(a.length for a in axes)
        seed = len(axes) * 7 + vals[axes[0]]
        return ng.placeholder(list(axes), dtype=F64), rand(*shape, seed=seed)

    cases = [((H,), (H,), (H,)), ((H, W), (H, W), (H, W)), ((H, W), (H,), (H, W)),
             ((H, W), (W,), (H, W)), ((H, W), (W, N), (H, W, N)), ((H, W), (N, W), (H, W, N)),
             ((C, H), (W, H, N), (C, H, W, N)), ((H,), (W,), (H, W)), ((W,), (H,), (W, H)),
             ((C,), (H, W), (C, H, W)), ((H, W), (C,), (H, W, C))]
    for left, right, out in cases:
        (x, xv), (y, yv) = p(*left), p(*right)
        z = x + y
        assert list(z.axes) == list(out), (left, right, list(z.axes))
        want = _align(xv, list(left), list(out)) + _align(yv, list(right), list(out))
        close(run(make, z, (x, xv), (y, yv)), want)


def test_associative_and_distributive_cases(make):
    H, W, N = fresh(2, 3, 4)
    h, w, n = (ng.placeholder([a], dtype=F64) for a in (H, W, N))
    hv, wv, nv = rand(2, seed=1), rand(3, seed=2), rand(4, seed=3)
    left, right = (h + w) + n, h + (w + n)
    dist1, dist2 = h * (w + n), h * w + h * n
    for z in (left, right, dist1, dist2):
        assert list(z.axes) == [H, W, N]
    got = run(make, [left, right, dist1, dist2], (h, hv), (w, wv), (n, nv))
    sumv = hv[:, None, None] + wv[None, :, None] + nv[None, None, :]
    distv = hv[:, None, None] * (wv[None, :, None] + nv[None, None, :])
    for g, want in zip(got, (sumv, sumv, distv, distv)):
        close(g, want, rtol=1e-14)


# **************** reductions ****************

REDUCTIONS = [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean),
              ("variance", np.var)]


@pytest.mark.parametrize("name, ref", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reductions_over_every_subset_of_axes(make, name, ref):
    A, B, C = fresh(2, 3, 4)
    x = ng.placeholder([A, B, C], dtype=F64)
    xv = rand(2, 3, 4)
    subsets = [s for k in range(4) for s in itertools.combinations(range(3), k)]
    ops = [getattr(ng, name)(x, reduction_axes=[[A, B, C][i] for i in reversed(s)])
           for s in subsets]
    for op, s in zip(ops, subsets):
        assert list(op.axes) == [a for i, a in enumerate([A, B, C]) if i not in s]
    for g, s in zip(run(make, ops, (x, xv)), subsets):
        want = ref(xv, axis=s) if s else (xv * 0 if name == "variance" else xv)
        close(g, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name, ref", [("argmax", np.argmax), ("argmin", np.argmin)])
def test_arg_reductions(make, name, ref):
    A, B = fresh(3, 5)
    x = ng.placeholder([A, B], dtype=F64)
    xv = rand(3, 5, seed=4)
    r1, r0 = (getattr(ng, name)(x, reduction_axes=[a]) for a in (B, A))
    g1, g0 = run(make, [r1, r0], (x, xv))
    np.testing.assert_array_equal(g1, ref(xv, axis=1))
    np.testing.assert_array_equal(g0, ref(xv, axis=0))
    assert np.issubdtype(np.asarray(g1).dtype, np.integer), np.asarray(g1).dtype


def test_reductions_with_edge_values(make):
    A, B = fresh(3, 4)
    x = ng.placeholder([A, B], dtype=F64)
    xv = np.array([[1.0, np.inf, 2.0, 3.0], [-np.inf, 1.0, 1e308, 1e308],
                   [np.nan, 0.0, -0.0, 1e-300]])
    ops = [ng.sum(x, reduction_axes=[B]), ng.max(x, reduction_axes=[B]),
           ng.min(x, reduction_axes=[B])]
    with np.errstate(all="ignore"):
        wants = [xv.sum(1), xv.max(1), xv.min(1)]
    for g, want in zip(run(make, ops, (x, xv)), wants):
        close(g, want)


def test_reduction_defaults_and_out_axes(make):
    """No axes: every axis but the batch ones; out_axes alone: reduce the rest, in that order."""
    A, B, N = fresh(2, 3, 4, batch=(2,))
    x = ng.placeholder([A, N, B], dtype=F64)
    xv = rand(2, 4, 3)
    default, kept = ng.sum(x), ng.sum(x, out_axes=[N])
    to_scalar, none = ng.sum(x, out_axes=()), ng.sum(x, reduction_axes=[])
    swapped = ng.sum(x, reduction_axes=[A], out_axes=[B, N])
    assert list(default.axes) == [N] and list(kept.axes) == [N] and list(none.axes) == [A, N, B]
    assert list(to_scalar.axes) == [] and list(swapped.axes) == [B, N]
    got = run(make, [default, kept, to_scalar, none, swapped], (x, xv))
    close(got[0], xv.sum((0, 2)), rtol=1e-14)
    close(got[1], xv.sum((0, 2)), rtol=1e-14)
    close(got[2], xv.sum(), rtol=1e-14)
    close(got[3], xv)
    close(got[4], xv.sum(0).T, rtol=1e-14)


def test_tensor_size_batch_size_and_squared_L2(make):
    A, B, N = fresh(2, 3, 4, batch=(2,))
    x = ng.placeholder([A, B, N], dtype=F64)
    xv = rand(2, 3, 4)
    ops = [ng.tensor_size(x), ng.tensor_size(x, reduction_axes=[A, N]), ng.batch_size(x),
           ng.squared_L2(x)]
    got = run(make, ops, (x, xv))
    assert [float(g) for g in got[:3]] == [6.0, 8.0, 4.0]
    assert list(ops[3].axes) == [N]
    close(got[3], (xv ** 2).sum((0, 1)), rtol=1e-14)


# **************** dot ****************

def test_dot_two_d_both_dual_spellings(make):
    H, W, N = fresh(2, 3, 4)
    hv, nv = rand(2, 3, seed=1), rand(3, 4, seed=2)
    a1, b1 = ng.placeholder([H, W - 1], dtype=F64), ng.placeholder([W, N], dtype=F64)
    a2, b2 = ng.placeholder([H, W], dtype=F64), ng.placeholder([W + 1, N], dtype=F64)
    d1, d2 = ng.dot(a1, b1), ng.dot(a2, b2)
    assert list(d1.axes) == [H, N] and list(d2.axes) == [H, N]
    close(run(make, d1, (a1, hv), (b1, nv)), hv @ nv, rtol=1e-14)
    close(run(make, d2, (a2, hv), (b2, nv)), hv @ nv, rtol=1e-14)


@pytest.mark.parametrize("order", [("C", "H", "W"), ("W", "H", "C"), ("H", "C", "W")])
def test_dot_four_d_in_any_order(make, order):
    """(M, C-1, H-1, W-1) . (C, H, W, N) -> (M, N), the dual axes listed in any order."""
    M, C, H, W, N = fresh(2, 3, 4, 5, 6)
    names = {"C": C, "H": H, "W": W}
    lhs_axes = [M] + [names[k] - 1 for k in order]
    x = ng.placeholder(lhs_axes, dtype=F64)
    y = ng.placeholder([C, H, W, N], dtype=F64)
    xv, yv = rand(*(a.length for a in lhs_axes), seed=5), rand(3, 4, 5, 6, seed=6)
    d = ng.dot(x, y)
    assert list(d.axes) == [M, N]
    sub = "m" + "".join(k.lower() for k in order)
    close(run(make, d, (x, xv), (y, yv)), np.einsum(f"{sub},chwn->mn", xv, yv), rtol=1e-13)
    # and the other spelling: plain axes on the left, +1 duals on the right
    x2 = ng.placeholder([M] + [names[k] for k in order], dtype=F64)
    y2 = ng.placeholder([C + 1, H + 1, W + 1, N], dtype=F64)
    d2 = ng.dot(x2, y2)
    assert list(d2.axes) == [M, N]
    close(run(make, d2, (x2, xv), (y2, yv)), np.einsum(f"{sub},chwn->mn", xv, yv), rtol=1e-13)


def test_dot_over_shared_axes_and_to_a_scalar(make):
    """Seed 003's dot(w, x): no dual pair, so the axes both share contract."""
    C, Y, N = fresh(3, 2, 4)
    w, x = ng.placeholder([C, Y], dtype=F64), ng.placeholder([C, N], dtype=F64)
    wv, xv = rand(3, 2, seed=1), rand(3, 4, seed=2)
    d = ng.dot(w, x)
    assert list(d.axes) == [Y, N]
    v = ng.placeholder([C], dtype=F64)
    vv = rand(3, seed=3)
    s = ng.dot(v, v)
    assert list(s.axes) == []
    got = run(make, [d, s, ng.dot(x, w)], (w, wv), (x, xv), (v, vv))
    close(got[0], wv.T @ xv, rtol=1e-14)
    close(got[1], vv @ vv, rtol=1e-14)
    close(got[2], xv.T @ wv, rtol=1e-14)


def test_dot_of_computed_values_and_outer_product(make):
    A, B, K = fresh(2, 3, 4)
    x, y = ng.placeholder([A, K], dtype=F64), ng.placeholder([K, B], dtype=F64)
    xv, yv = rand(2, 4, seed=1), rand(4, 3, seed=2)
    d = ng.dot(ng.tanh(x) * 2, ng.exp(y)) + 1
    assert list(d.axes) == [A, B]
    u, v = ng.placeholder([A], dtype=F64), ng.placeholder([B], dtype=F64)
    outer = ng.dot(u, v)
    assert list(outer.axes) == [A, B]
    got = run(make, [d, outer], (x, xv), (y, yv), (u, xv[:, 0]), (v, yv[0]))
    close(got[0], (np.tanh(xv) * 2) @ np.exp(yv) + 1, rtol=1e-13)
    close(got[1], np.outer(xv[:, 0], yv[0]), rtol=1e-14)


# **************** axes ops ****************

def test_broadcast_reorder_cast_expand(make):
    C, H, W, C2 = fresh(2, 3, 4, 2)
    x = ng.placeholder([C, H], dtype=F64)
    xv = rand(2, 3)
    b1, b2 = ng.broadcast(x, [C, H, W]), ng.broadcast(x, [W, H, C])
    r = ng.axes_with_order(x, [H, C])
    c = ng.cast_axes(x, [C2, H])
    e = ng.expand_dims(x, W, 1)
    assert list(b1.axes) == [C, H, W] and list(b2.axes) == [W, H, C]
    assert list(r.axes) == [H, C] and list(c.axes) == [C2, H] and list(e.axes) == [C, W, H]
    s = c + x                      # C2 and C are different axes: an outer sum
    assert list(s.axes) == [C2, H, C]
    got = run(make, [b1, b2, r, c, e, s], (x, xv))
    close(got[0], np.broadcast_to(xv[:, :, None], (2, 3, 4)))
    close(got[1], np.broadcast_to(xv.T[None], (4, 3, 2)))
    close(got[2], xv.T)
    close(got[3], xv)
    close(got[4], np.broadcast_to(xv[:, None, :], (2, 4, 3)))
    close(got[5], xv[:, :, None] + xv.T[None, :, :])


def test_axes_ops_of_computed_values(make):
    C, H, C2 = fresh(2, 3, 2)
    x = ng.placeholder([C, H], dtype=F64)
    xv = rand(2, 3)
    r = ng.axes_with_order(ng.exp(x) + 1, [H, C])
    c = ng.cast_axes(x * 2, [C2, H]) + ng.cast_axes(x, [C2, H])
    got = run(make, [r, c], (x, xv))
    close(got[0], (np.exp(xv) + 1).T)
    close(got[1], 3 * xv)


def test_seed_000_cast_axes_example(make):
    C1, C2, N = fresh(100, 100, 128)
    hidden_1 = ng.constant(np.ones((100, 128)), [C1, N])
    hidden_2 = ng.constant(np.ones((100, 128)), [C2, N])
    sum_direct = hidden_1 + hidden_2
    assert list(sum_direct.axes) == [C1, N, C2]
    hidden_2_cast = ng.cast_axes(hidden_2, [C1, N])
    sum_cast = hidden_1 + hidden_2_cast
    assert list(sum_cast.axes) == [C1, N]
    direct, cast = run(make, [sum_direct, sum_cast])
    assert direct.shape == (100, 128, 100) and np.all(direct == 2)
    assert cast.shape == (100, 128) and np.all(cast == 2)


def test_slices(make):
    A, B = fresh(5, 4)
    x = ng.placeholder([A, B], dtype=F64)
    xv = rand(5, 4)
    s14 = x[1:4]
    cases = [(s14, xv[1:4]), (x[2], xv[2]), (x[:, 1], xv[:, 1]), (x[::-1, 1:], xv[::-1, 1:]),
             (x[-1], xv[-1]), (x[1, -2], xv[1, -2]), (x[::-1], xv[::-1]),
             (ng.slice_along_axis(x, B, 3), xv[:, 3]), ((x + 1)[1:3, 2], xv[1:3, 2] + 1),
             ((x * 2)[3:0:-1], xv[3:0:-1] * 2),
             (s14 + ng.cast_axes(x[0:3], s14.axes), xv[1:4] + xv[0:3]),
             (x[1:4] + x[0:3], xv[1:4, :, None] + xv[0:3].T[None])]   # two sliced axes: outer sum
    for op, want in cases:
        assert op.axes.lengths == np.shape(want), (op.axes.lengths, np.shape(want))
    for g, (_, want) in zip(run(make, [op for op, _ in cases], (x, xv)), cases):
        close(g, want)


def test_flatten_and_unflatten(make):
    A, B, C = fresh(2, 3, 4)
    x = ng.placeholder([A, B, C], dtype=F64)
    xv = rand(2, 3, 4)
    f_all, f_lead = ng.flatten(x), ng.flatten(x, [A, B])
    at = ng.flatten_at(x, 1)
    back = ng.unflatten(f_all)
    assert f_all.axes.lengths == (24,) and f_lead.axes.lengths == (6, 4)
    assert at.axes.lengths == (2, 12) and list(back.axes) == [A, B, C]
    computed = ng.flatten(ng.axes_with_order(x, [C, A, B]) * 2)
    got = run(make, [f_all, f_lead, at, back, computed], (x, xv))
    close(got[0], xv.reshape(24))
    close(got[1], xv.reshape(6, 4))
    close(got[2], xv.reshape(2, 12))
    close(got[3], xv)
    close(got[4], (xv.transpose(2, 0, 1) * 2).reshape(24))


def test_one_hot(make):
    A, N = fresh(4, 5)
    x = ng.placeholder([N], dtype=F64)
    xv = np.array([0.0, 3.0, 1.0, 3.0, 2.0])
    h = ng.one_hot(x, A)
    assert list(h.axes) == [A, N]
    close(run(make, h, (x, xv)), np.eye(4)[xv.astype(int)].T)


def test_stack(make):
    A, B, S, S1 = fresh(2, 3, 3, 3)
    xs = [ng.placeholder([A, B], dtype=F64) for _ in range(3)]
    vs = [rand(2, 3, seed=i) for i in range(3)]
    s0, s1 = ng.stack(xs, S, 0), ng.stack([xs[0] + 1, xs[1], ng.exp(xs[2])], S1, 2)
    assert list(s0.axes) == [S, A, B] and list(s1.axes) == [A, B, S1]
    got = run(make, [s0, s1], *zip(xs, vs))
    close(got[0], np.stack(vs, 0))
    close(got[1], np.stack([vs[0] + 1, vs[1], np.exp(vs[2])], 2))


def test_pad(make):
    A, B = fresh(2, 3)
    x = ng.placeholder([A, B], dtype=F64)
    xv = rand(2, 3)
    p1, p2 = ng.pad(x, [1, (0, 2)]), ng.pad(x * 3, [(2, 0), 0])
    assert p1.axes.lengths == (4, 5) and p2.axes.lengths == (4, 3)
    got = run(make, [p1, p2], (x, xv))
    close(got[0], np.pad(xv, [(1, 1), (0, 2)]))
    close(got[1], np.pad(xv * 3, [(2, 0), (0, 0)]))


# **************** softmax, cross entropy, random ****************

def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_softmax_and_cross_entropies(make):
    C, N = fresh(4, 3, batch=(1,))
    x, t = ng.placeholder([C, N], dtype=F64), ng.placeholder([C, N], dtype=F64)
    xv = np.array([[1.0, 1000.0, -1000.0], [2.0, -1000.0, 0.0], [0.5, 0.0, 1000.0],
                   [-1.0, 3.0, 2.0]])
    tv = np.eye(4)[[0, 2, 3]].T
    s = ng.softmax(x)
    ce = ng.cross_entropy_multi(s, t)
    ce_bits = ng.cross_entropy_multi(s, t, usebits=True)
    sig = ng.sigmoid(x)
    ceb = ng.cross_entropy_binary(sig, t)
    naive = ng.cross_entropy_multi(s, t, enable_softmax_opt=False)
    got = run(make, [s, ce, ce_bits, ceb, naive], (x, xv), (t, tv))
    sm = _softmax(xv, 0)
    logz = np.log(np.exp(xv - xv.max(0)).sum(0)) + xv.max(0)
    want_ce = -(xv * tv).sum(0) + logz
    close(got[0], sm, rtol=1e-12, atol=1e-300)
    close(got[1], want_ce, rtol=1e-12)
    close(got[2], want_ce / np.log(2), rtol=1e-12)
    want_ceb = ((1 - tv) * xv + np.logaddexp(0, -xv)).sum(0)
    close(got[3], want_ceb, rtol=1e-12)
    # the naive form: -sum(safelog(softmax) * t), softmax underflowing to 0 gives log e^-50
    close(got[4], -(np.log(np.maximum(sm, np.exp(-50.0))) * tv).sum(0), rtol=1e-12)


def test_softmax_normalization_axes(make):
    A, B = fresh(3, 4)
    x = ng.placeholder([A, B], dtype=F64)
    xv = rand(3, 4) * 5
    s_all, s_b = ng.softmax(x), ng.softmax(x, normalization_axes=[B])
    got = run(make, [s_all, s_b], (x, xv))
    close(got[0], _softmax(xv.reshape(-1), 0).reshape(3, 4))
    close(got[1], _softmax(xv, 1))


def test_uniform_and_normal_draw_anew_each_call(make):
    A, B = fresh(50, 40)
    x = ng.placeholder([A, B], dtype=F64)
    u, n = ng.uniform(x, low=-2.0, high=3.0), ng.normal(x, loc=1.0, scale=0.5)
    assert list(u.axes) == [A, B] and list(n.axes) == [A, B]
    f = make().computation([u, n], x)
    u1, n1 = (np.array(v) for v in f(np.zeros((50, 40))))
    u2, _ = f(np.zeros((50, 40)))
    assert u1.shape == (50, 40) and np.all((u1 >= -2) & (u1 < 3))
    assert abs(u1.mean() - 0.5) < 0.2 and abs(n1.mean() - 1.0) < 0.1
    assert abs(n1.std() - 0.5) < 0.05 and not np.array_equal(u1, u2)


# **************** random small graphs ****************

_HYP_UNARY = ["negative", "tanh", "sin", "square", "absolute", "sigmoid", "exp_small"]
_HYP_BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]
_NP = {"negative": np.negative, "tanh": np.tanh, "sin": np.sin, "square": np.square,
       "absolute": np.abs, "sigmoid": _sigmoid, "add": np.add, "subtract": np.subtract,
       "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def _graph(draw, depth):
    """A random expression over leaves 0..2: ('leaf', i) | (unary, e) | (binary, e, e) |
    ('sum', e, k) (reduce the expression's k-th axis)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return ("leaf", draw(st.integers(0, 2)))
    kind = draw(st.sampled_from(["unary", "binary", "binary", "sum"]))
    if kind == "unary":
        return (draw(st.sampled_from(_HYP_UNARY)), _graph(draw, depth - 1))
    if kind == "sum":
        return ("sum", _graph(draw, depth - 1), draw(st.integers(0, 3)))
    return (draw(st.sampled_from(_HYP_BINARY)), _graph(draw, depth - 1), _graph(draw, depth - 1))


def _build(expr, leaves):
    """(ngraph op, numpy value, axes) of expr; numpy values are kept in the op's axes order."""
    kind = expr[0]
    if kind == "leaf":
        return leaves[expr[1]]
    if kind == "sum":
        op, v, axes = _build(expr[1], leaves)
        if not axes:
            return op, v, axes
        k = expr[2] % len(axes)
        return ng.sum(op, reduction_axes=[axes[k]]), v.sum(k), axes[:k] + axes[k + 1:]
    if kind == "exp_small":
        op, v, axes = _build(expr[1], leaves)
        return ng.exp(ng.tanh(op)), np.exp(np.tanh(v)), axes
    if len(expr) == 2:
        op, v, axes = _build(expr[1], leaves)
        return getattr(ng, kind)(op), _NP[kind](v), axes
    (xo, xv, xa), (yo, yv, ya) = _build(expr[1], leaves), _build(expr[2], leaves)
    out = xa + [a for a in ya if a not in xa]
    return getattr(ng, kind)(xo, yo), _NP[kind](_align(xv, xa, out), _align(yv, ya, out)), out


def _align(v, axes, out):
    """v (in `axes` order) broadcast into the order `out`, size 1 on the axes it lacks."""
    v = np.transpose(v, [axes.index(a) for a in out if a in axes])
    return v.reshape([a.length if a in axes else 1 for a in out])


_HYP_AXES = fresh(2, 3, 4)
_HYP_LEAF_AXES = [[_HYP_AXES[0], _HYP_AXES[1]], [_HYP_AXES[1], _HYP_AXES[2]], [_HYP_AXES[2]]]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_small_graphs_on_both_transformers(data):
    expr = _graph(data.draw, 4)
    leaves = []
    for i, axes in enumerate(_HYP_LEAF_AXES):
        p = ng.placeholder(axes, dtype=F64)
        leaves.append((p, rand(*(a.length for a in axes), seed=i), list(axes)))
    op, want, axes = _build(expr, leaves)
    feeds = [(p, v) for p, v, _ in leaves]
    for name, make in TRANSFORMERS.items():
        got = run(make, op, *feeds)
        assert list(op.axes) == axes
        close(np.asarray(got), np.broadcast_to(want, tuple(a.length for a in axes)), rtol=1e-12,
              atol=1e-13)


# **************** deriv against central differences ****************

def check_deriv(make, build, *inputs, eps=1e-6, rtol=1e-6, atol=1e-8):
    """deriv of sum(build(*xs) * c) (c: fixed random weights) with respect to each x, against
    central differences; also deriv(build(*xs), x, error=c) for the non-scalar dependent."""
    ps = [ng.placeholder(axes, dtype=F64) for axes, _ in inputs]
    values = [np.asarray(v, dtype=F64) for _, v in inputs]
    y = build(*ps)
    cv = rand(*y.axes.lengths, seed=11, low=0.5, high=1.5)
    c = ng.constant(cv, y.axes, dtype=F64)
    cost = ng.sum(y * c, reduction_axes=y.axes)
    ders = [ng.deriv(cost, p) for p in ps]
    with_error = [ng.deriv(y, p, error=c) for p in ps]
    for p, d in zip(ps, ders):
        assert d.axes == p.axes
    f = make().computation([cost] + ders + with_error, *ps)
    got = f(*values)
    for i, v in enumerate(values):
        numeric = np.zeros_like(v)
        for idx in np.ndindex(*v.shape):
            hi, lo = [w.copy() for w in values], [w.copy() for w in values]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            numeric[idx] = (float(f(*hi)[0]) - float(f(*lo)[0])) / (2 * eps)
        assert np.all(np.isfinite(got[1 + i]))
        close(got[1 + i], numeric, rtol=rtol, atol=atol)
        close(got[1 + len(ps) + i], got[1 + i], rtol=1e-12, atol=1e-14)


POSITIVE = {"log", "safelog", "sqrt", "reciprocal"}


@pytest.mark.parametrize("name", [u[0] for u in UNARY if u[0] != "sign"])
def test_deriv_unary(make, name):
    A, B = fresh(2, 3)
    v = rand(2, 3, seed=3, low=0.2, high=2.0) if name in POSITIVE else rand(2, 3, seed=3)
    if name == "absolute":
        v = v + np.sign(v) * 0.1         # away from the kink
    check_deriv(make, getattr(ng, name), ([A, B], v))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum",
                                  "minimum", "power"])
def test_deriv_binary_both_sides_and_broadcast(make, name):
    """x (A, B) op y (B, C) -> (A, B, C): both sides, each summed over the axes it lacks."""
    A, B, C = fresh(2, 3, 2)
    xv = rand(2, 3, seed=1, low=0.5, high=2.0)
    yv = rand(3, 2, seed=2, low=0.5, high=2.0) + (0.05 if name in ("maximum", "minimum") else 0)
    check_deriv(make, getattr(ng, name), ([A, B], xv), ([B, C], yv))


@pytest.mark.parametrize("name", ["sum", "max", "min", "mean", "variance"])
def test_deriv_reductions(make, name):
    A, B, C = fresh(2, 3, 4)
    v = rand(2, 3, 4, seed=5)
    check_deriv(make, lambda x: getattr(ng, name)(x, reduction_axes=[C, A]), ([A, B, C], v))
    check_deriv(make, lambda x: getattr(ng, name)(x, reduction_axes=[B]), ([A, B, C], v))


def test_deriv_dot_with_dual_pairs_and_shared_axes(make):
    M, C, H, N = fresh(2, 3, 2, 3)
    check_deriv(make, ng.dot, ([M, H - 1, C - 1], rand(2, 2, 3, seed=1)),
                ([C, H, N], rand(3, 2, 3, seed=2)))
    check_deriv(make, ng.dot, ([C, M], rand(3, 2, seed=3)), ([N, C], rand(3, 3, seed=4)))
    check_deriv(make, lambda x, y: ng.dot(ng.tanh(x), y * y), ([M, C], rand(2, 3, seed=5)),
                ([C + 1, N], rand(3, 3, seed=6)))


def test_deriv_axes_ops(make):
    A, B, C, A2 = fresh(2, 3, 2, 2)
    v = rand(2, 3, seed=7)
    check_deriv(make, lambda x: ng.broadcast(x, [B, C, A]) * ng.broadcast(x, [A, B, C]),
                ([A, B], v))
    check_deriv(make, lambda x: ng.cast_axes(x, [A2, B]) * x, ([A, B], v))
    check_deriv(make, lambda x: ng.axes_with_order(ng.exp(x), [B, A]), ([A, B], v))
    check_deriv(make, lambda x: ng.expand_dims(x, C, 0) * 2, ([A, B], v))


def test_deriv_structural_ops(make):
    A, B, S = fresh(4, 3, 2)
    v = rand(4, 3, seed=8)
    check_deriv(make, lambda x: x[1:3, 2] * x[1:3, 0], ([A, B], v))
    check_deriv(make, lambda x: ng.tanh(x)[::-1, 1:], ([A, B], v))
    check_deriv(make, lambda x: ng.flatten(x * x), ([A, B], v))
    check_deriv(make, lambda x: ng.unflatten(ng.flatten(x)) * x, ([A, B], v))
    check_deriv(make, lambda x: ng.stack([x, ng.exp(x)], S, 1), ([A, B], v))
    check_deriv(make, lambda x: ng.pad(x * x, [1, (0, 2)]), ([A, B], v))


def test_deriv_softmax_and_cross_entropies(make):
    C, N = fresh(4, 3, batch=(1,))
    t = np.eye(4)[[0, 2, 3]].T
    v = rand(4, 3, seed=9) * 3
    check_deriv(make, lambda x: ng.softmax(x), ([C, N], v))
    check_deriv(make, lambda x: ng.cross_entropy_multi(ng.softmax(x), ng.constant(t, [C, N])),
                ([C, N], v))
    check_deriv(make, lambda x: ng.cross_entropy_binary(ng.sigmoid(x), ng.constant(t, [C, N])),
                ([C, N], v))
    check_deriv(make, lambda x: ng.cross_entropy_binary(ng.sigmoid(x) * 0.9 + 0.05,
                                                        ng.constant(t, [C, N])), ([C, N], v))


def test_softmax_cross_entropy_and_its_derivative_are_finite_at_large_logits(make):
    C, N = fresh(3, 4, batch=(1,))
    x = ng.placeholder([C, N], dtype=F64)
    t = ng.placeholder([C, N], dtype=F64)
    xv = np.array([[1000.0, -1000.0, 0.0, 1000.0], [-1000.0, 1000.0, 0.0, 1000.0],
                   [0.0, 0.0, 1000.0, -1000.0]])
    tv = np.eye(3)[[1, 1, 0, 2]].T
    ce = ng.cross_entropy_multi(ng.softmax(x), t)
    cost = ng.sum(ce, out_axes=())
    d = ng.deriv(cost, x)
    cev, dv = run(make, [ce, d], (x, xv), (t, tv))
    assert np.all(np.isfinite(cev)) and np.all(np.isfinite(dv))
    top = xv.max(0)
    close(cev, -(xv * tv).sum(0) + top + np.log(np.exp(xv - top).sum(0)), rtol=1e-14)
    sm = _softmax(xv, 0)
    close(dv, sm - tv, atol=1e-12)
    # the same for cross_entropy_binary of a sigmoid
    ceb = ng.cross_entropy_binary(ng.sigmoid(x), t)
    db = ng.deriv(ng.sum(ceb, out_axes=()), x)
    cebv, dbv = run(make, [ceb, db], (x, xv), (t, tv))
    assert np.all(np.isfinite(cebv)) and np.all(np.isfinite(dbv))
    close(dbv, _sigmoid(xv) - tv, atol=1e-12)     # at x = 0 too: 0.5 - t


def test_cross_entropy_multi_for_targets_not_summing_to_one(make):
    """-sum(log(softmax(x)) * t) for any t (label mass 0.5, 0 or 2), value and derivative."""
    C, N = fresh(3, 4, batch=(1,))
    x, t = ng.placeholder([C, N], dtype=F64), ng.placeholder([C, N], dtype=F64)
    xv = rand(3, 4, seed=2) * 4
    xv[:, 3] = [1000.0, 1000.0, -1000.0]
    tv = np.eye(3)[[0, 1, 2, 2]].T * np.array([0.5, 0.0, 2.0, 1.0])
    ce = ng.cross_entropy_multi(ng.softmax(x), t)
    d = ng.deriv(ng.sum(ce, out_axes=()), x)
    cev, dv = run(make, [ce, d], (x, xv), (t, tv))
    top = xv.max(0)
    logsm = xv - top - np.log(np.exp(xv - top).sum(0))
    close(cev, -(logsm * tv).sum(0), rtol=1e-13)
    close(dv, _softmax(xv, 0) * tv.sum(0) - tv, atol=1e-12)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_over_several_axes_is_the_flat_position_in_them(make, name):
    # the reduction axes flattened in their order (upstream's flat index)
    A, B, N = (ng.make_axis(length=n) for n in (3, 4, 5))
    v = np.random.default_rng(7).standard_normal((3, 4, 5))
    x = ng.placeholder([A, B, N])
    f = make().computation([getattr(ng, name)(x, reduction_axes=[A, B]),
                            getattr(ng, name)(x, reduction_axes=[B, A])], x)
    ab, ba = f(v)
    want = getattr(np, name)
    np.testing.assert_array_equal(ab, want(v.reshape(12, 5), axis=0))
    np.testing.assert_array_equal(ba, want(v.transpose(1, 0, 2).reshape(12, 5), axis=0))


def test_deriv_with_respect_to_a_computed_value_is_refused_at_build_time():
    X = ng.make_axis(length=3)
    w = ng.variable([X], initial_value=1.0)
    h = w * 2.0
    with pytest.raises(NotImplementedError, match=r"independent must be a tensor with storage"):
        ng.deriv(ng.sum(h * h, reduction_axes=[X]), h)
