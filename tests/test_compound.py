"""Convolution and pooling as op-tree nodes (neonlike/compound.py): the CPU's stages against the
numpy float64 reference and a brute-force loop, Autodiff against central differences (second
derivatives included), the plan's stages and build-time errors."""
import itertools

import numpy as np
import pytest

from neonlike.backends import gen_backend
from neonlike.backends.autodiff import Autodiff
from neonlike.backends.reference import evaluate
from neonlike.compound import conv, pool
from neonlike.optree import build
from neonlike.plan import StageKind, make_plan, walk

RNG = np.random.default_rng(7)

GEOMETRIES = [  # (input C,D,H,W,N; filter T,R,S,K; padding, strides, dilation)
    ((2, 1, 5, 5, 3), (1, 3, 3, 4), (0, 1, 1), (1, 1, 1), (1, 1, 1)),
    ((3, 1, 6, 7, 2), (1, 2, 3, 2), (0, 0, 1), (1, 2, 2), (1, 1, 1)),
    ((1, 1, 7, 7, 2), (1, 2, 2, 3), (0, 1, 0), (1, 1, 2), (1, 2, 2)),
    ((2, 3, 4, 4, 2), (2, 2, 2, 2), (1, 1, 0), (2, 1, 1), (1, 1, 1)),
]
POOLS = [  # (input, window, padding, strides)
    ((2, 1, 6, 6, 3), (1, 2, 2), (0, 0, 0), None),
    ((2, 1, 7, 5, 2), (1, 3, 3), (0, 1, 1), (1, 2, 2)),
    ((1, 2, 5, 5, 2), (2, 2, 3), (1, 0, 1), (1, 1, 2)),
]


@pytest.fixture(scope="module")
def be64():
    return gen_backend("cpu", datatype=np.float64)


@pytest.fixture(scope="module")
def be32():
    return gen_backend("cpu", datatype=np.float32)


def run(be, tree):
    out = be.empty(tree.shape)
    out[:] = tree
    return out.get()


def brute_conv(x, f, pad, stride, dil):
    C, D, H, W, N = x.shape
    _, T, R, S, K = f.shape
    xp = np.pad(x, [(0, 0)] + [(p, p) for p in pad] + [(0, 0)])
    M, P, Q = ((n + 2 * p - (d * (k - 1) + 1)) // s + 1
               for n, k, p, s, d in zip((D, H, W), (T, R, S), pad, stride, dil))
    out = np.zeros((K, M, P, Q, N))
    for m, p, q, t, r, s in itertools.product(range(M), range(P), range(Q), range(T), range(R),
                                              range(S)):
        i = (m * stride[0] + t * dil[0], p * stride[1] + r * dil[1], q * stride[2] + s * dil[2])
        out[:, m, p, q, :] += np.einsum("cn,ck->kn", xp[(slice(None),) + i], f[:, t, r, s, :])
    return out


def brute_pool(x, op, window, pad, stride):
    C, D, H, W, N = x.shape
    stride = stride or window
    M, P, Q = ((n + 2 * p - k) // s + 1 for n, k, p, s in zip((D, H, W), window, pad, stride))
    out = np.zeros((C, M, P, Q, N))
    for m, p, q in itertools.product(range(M), range(P), range(Q)):
        lo = [o * s - pd for o, s, pd in zip((m, p, q), stride, pad)]
        sl = tuple(slice(max(a, 0), min(a + k, n)) for a, k, n in zip(lo, window, (D, H, W)))
        win = x[(slice(None),) + sl + (slice(None),)].reshape(C, -1, N)
        out[:, m, p, q, :] = win.max(axis=1) if op == "max" else win.mean(axis=1)
    return out


@pytest.mark.parametrize("geom", GEOMETRIES)
def test_conv_and_its_adjoints_match_the_reference_and_a_brute_loop(be64, be32, geom):
    dimI, (T, R, S, K), pad, stride, dil = geom
    x = RNG.standard_normal(dimI)
    f = RNG.standard_normal((dimI[0], T, R, S, K))
    want = brute_conv(x, f, pad, stride, dil)
    g = dict(padding=pad, strides=stride, dilation=dil)
    for be, tol in ((be64, 1e-12), (be32, 1e-5)):
        X, F = be.array(x), be.array(f)
        node = conv(X, F, **g)
        assert node.shape == want.shape
        np.testing.assert_allclose(evaluate(node, np.float64), want, rtol=tol, atol=tol)
        np.testing.assert_allclose(run(be, node), want, rtol=tol * 10, atol=tol * 10)
        E = be.array(RNG.standard_normal(want.shape))
        for tree in (build("conv_bprop", E, F, in_dhw=dimI[1:4], **g),
                     build("conv_update", X, E, window=(T, R, S), **g)):
            np.testing.assert_allclose(run(be, tree), evaluate(tree, np.float64),
                                       rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("op", ["max", "avg"])
@pytest.mark.parametrize("case", POOLS)
def test_pool_and_its_adjoint_match_the_reference_and_a_brute_loop(be64, be32, op, case):
    dimI, window, pad, stride = case
    x = RNG.standard_normal(dimI)
    want = brute_pool(x, op, window, pad, stride)
    for be, tol in ((be64, 1e-12), (be32, 1e-5)):
        X = be.array(x)
        node = pool(X, op, window, pad, stride)
        np.testing.assert_allclose(evaluate(node, np.float64), want, rtol=tol, atol=tol)
        np.testing.assert_allclose(run(be, node), want, rtol=tol, atol=tol)
        E = be.array(RNG.standard_normal(want.shape))
        back = build("pool_bprop", X, E, pool_op=op, window=window, padding=pad, strides=stride)
        np.testing.assert_allclose(run(be, back), evaluate(back, np.float64), rtol=tol * 10,
                                   atol=tol * 10)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_edge_values_propagate_like_the_reference(be64):
    x = RNG.standard_normal((1, 1, 4, 4, 2))
    x[0, 0, 1, 1, 0], x[0, 0, 2, 2, 1], x[0, 0, 0, 3, 0] = np.nan, np.inf, -np.inf
    f = RNG.standard_normal((1, 1, 2, 2, 2))
    X, F = be64.array(x), be64.array(f)
    for tree in (conv(X, F), pool(X, "max", (1, 2, 2)), pool(X, "avg", (1, 2, 2)),
                 pool(X, "max", (1, 3, 3), (0, 1, 1), (1, 1, 1))):
        np.testing.assert_array_equal(np.isnan(run(be64, tree)),
                                      np.isnan(evaluate(tree, np.float64)))
        ok = ~np.isnan(evaluate(tree, np.float64))
        np.testing.assert_allclose(run(be64, tree)[ok], evaluate(tree, np.float64)[ok])


def numeric_grad(fn, arrays, k, eps=1e-6):
    base = [a.copy() for a in arrays]
    g = np.zeros_like(base[k])
    for i in np.ndindex(g.shape):
        hi, lo = [a.copy() for a in base], [a.copy() for a in base]
        hi[k][i] += eps
        lo[k][i] -= eps
        g[i] = (fn(*hi) - fn(*lo)) / (2 * eps)
    return g


def check_grads(be, make, arrays):
    """make(*tensors) -> a scalar tree; Autodiff's gradients against central differences."""
    def value(*a):
        return run(be, make(*(be.array(v) for v in a))).item()
    tensors = [be.array(a) for a in arrays]
    grads = Autodiff(make(*tensors), be).get_grad_asnumpyarray(tensors)
    for k, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric_grad(value, arrays, k), rtol=1e-6, atol=1e-7)


def total(be, t):
    return be.sum(be.reshape(t, (1, -1)), axis=1)


@pytest.mark.parametrize("geom", GEOMETRIES[:3])
def test_conv_gradients_match_central_differences(be64, geom):
    dimI, (T, R, S, K), pad, stride, dil = geom
    g = dict(padding=pad, strides=stride, dilation=dil)
    x = RNG.standard_normal(dimI)
    f = RNG.standard_normal((dimI[0], T, R, S, K))
    w = RNG.standard_normal(brute_conv(x, f, pad, stride, dil).shape)
    check_grads(be64, lambda X, F: total(be64, be64.tanh(conv(X, F, **g)) * be64.array(w)),
                [x, f])


def test_conv_adjoints_have_gradients_too(be64):
    """conv_bprop and conv_update are differentiable (second derivatives of a conv)."""
    dimI, (T, R, S, K), pad, stride, dil = GEOMETRIES[1]
    g = dict(padding=pad, strides=stride, dilation=dil)
    x, f = RNG.standard_normal(dimI), RNG.standard_normal((dimI[0], T, R, S, K))
    e = RNG.standard_normal(brute_conv(x, f, pad, stride, dil).shape)
    wi, wf = RNG.standard_normal(dimI), RNG.standard_normal(f.shape)
    check_grads(be64, lambda E, F: total(be64, build("conv_bprop", E, F, in_dhw=dimI[1:4], **g)
                                         ** 2 * be64.array(wi)), [e, f])
    check_grads(be64, lambda X, E: total(be64, build("conv_update", X, E, window=(T, R, S), **g)
                                         ** 2 * be64.array(wf)), [x, e])


@pytest.mark.parametrize("op", ["max", "avg"])
@pytest.mark.parametrize("case", POOLS)
def test_pool_gradients_match_central_differences(be64, op, case):
    dimI, window, pad, stride = case
    x = RNG.permutation(np.arange(np.prod(dimI), dtype=np.float64)).reshape(dimI) / 10  # no ties
    w = RNG.standard_normal(brute_pool(x, op, window, pad, stride).shape)
    check_grads(be64, lambda X: total(be64, pool(X, op, window, pad, stride) * be64.array(w)),
                [x])


def test_avg_pool_bprop_has_a_gradient_and_max_pool_bprop_says_why_not(be64):
    dimI, window, pad, stride = POOLS[1]
    x = RNG.standard_normal(dimI)
    e = RNG.standard_normal(brute_pool(x, "avg", window, pad, stride).shape)
    w = RNG.standard_normal(dimI)
    kw = dict(window=window, padding=pad, strides=stride)
    check_grads(be64, lambda E: total(be64, build("pool_bprop", be64.array(x), E, pool_op="avg",
                                                  **kw) * be64.array(w)), [e])
    E = be64.array(e)
    tree = total(be64, build("pool_bprop", be64.array(x), E, pool_op="max", **kw))
    with pytest.raises(NotImplementedError, match="max pool_bprop"):
        Autodiff(tree, be64).get_grad_op_tree([E])


def test_a_conv_statement_plans_compound_stages_and_one_fused_epilogue(be32):
    X = be32.array(RNG.standard_normal((2, 1, 6, 6, 4)))
    F = be32.array(RNG.standard_normal((2, 1, 3, 3, 3)))
    b = be32.array(RNG.standard_normal((3, 1, 1, 1, 1)))
    tree = be32.maximum(pool(conv(X, F, padding=1) + b, "max", (1, 2, 2)), 0.0)
    out = be32.empty(tree.shape)
    _, tensors, _, nodes = walk(out, tree)
    kinds = [s.kind for s in make_plan(out, tree, tensors, nodes, {"add", "maximum"}).stages]
    assert kinds == [StageKind.COMPOUND, StageKind.FUSED, StageKind.COMPOUND, StageKind.FUSED]
    out[:] = tree
    np.testing.assert_allclose(out.get(), evaluate(tree, np.float64), rtol=1e-5, atol=1e-5)


def test_a_failed_compound_statement_leaves_its_output_untouched(be32):
    X = be32.array(RNG.standard_normal((2, 1, 4, 4, 2)))
    F = be32.array(RNG.standard_normal((2, 1, 2, 2, 3)))
    out = be32.array(np.full((3, 1, 3, 3, 3), 5.0))
    with pytest.raises(ValueError):
        out[:] = conv(X, F)                  # N is 2, the output's is 3
    np.testing.assert_array_equal(out.get(), 5.0)


@pytest.mark.parametrize("make, match", [
    (lambda X, F: conv(X[0], F), r"conv: the input must be 5-D \(C, D, H, W, N\), got shape"),
    (lambda X, F: conv(X, F[:1]), r"the input has 2 channels \(shape \(2, 1, 4, 4, 2\)\), the "
                                  r"filters 1"),
    (lambda X, F: conv(X, F, padding=(1, 1)), r"padding must be an int or 3 ints"),
    (lambda X, F: conv(X, F, strides=0), r"strides and dilations must be >= 1"),
    (lambda X, F: conv(X, F, dilation=4), r"does not fit an input of 4"),
    (lambda X, F: pool(X, "sum"), r"pool_op must be one of \('max', 'avg'\), got 'sum'"),
    (lambda X, F: pool(X, "max", (1, 2, 2), (0, 2, 0)), r"padding \(0, 2, 0\) must be smaller"),
    (lambda X, F: build("pool_bprop", X, X, pool_op="max", window=(1, 2, 2)),
     r"the error must have the pooled shape \(2, 1, 2, 2, 2\), got \(2, 1, 4, 4, 2\)"),
    (lambda X, F: build("conv_bprop", X, F, in_dhw=(1, 4, 4)), r"is not the output of filters"),
    (lambda X, F: build("conv", X, F, stride=2), r"unexpected keyword argument\(s\) \['stride'\]"),
])
def test_bad_geometry_is_named_at_build_time(be32, make, match):
    X = be32.array(RNG.standard_normal((2, 1, 4, 4, 2)))
    F = be32.array(RNG.standard_normal((2, 1, 2, 2, 3)))
    with pytest.raises((ValueError, TypeError), match=match):
        make(X, F)
