"""Compound NN ops (nn_cpu.py): convolution, pooling and batch norm against numpy float64 loops
and central differences, both conv paths forced, the numpy path without numba, and bad input."""
from __future__ import annotations

import numpy as np
import pytest

from neonlike.backends import gen_backend
from neonlike.backends.cpu import nn as nn_cpu


@pytest.fixture
def be():
    return gen_backend("cpu", rng_seed=0, datatype=np.float64)


@pytest.fixture(params=["numba", "numpy"])
def path(request, monkeypatch):
    """Run a test with the Numba kernels and again on the numpy path (as without numba)."""
    if request.param == "numpy":
        monkeypatch.setattr(nn_cpu, "_NUMBA", [None])
    elif nn_cpu._kernels() is None:
        pytest.skip("numba is not installed")
    return request.param


# ---------------------------------------------------------------------------------------------
# numpy float64 loop references
# ---------------------------------------------------------------------------------------------

def ref_conv(layer, I, F):
    C, D, H, W, N = layer.dimI
    K, M, P, Q, _ = layer.dimO
    (T, R, S), (pd, ph, pw) = layer.TRS, layer.padding
    (sd, sh, sw), (dd, dh, dw) = layer.strides, layer.dilation
    O = np.zeros(layer.dimO)
    for m, p, q in np.ndindex(M, P, Q):
        for t, r, s in np.ndindex(T, R, S):
            d, h, w = m * sd - pd + t * dd, p * sh - ph + r * dh, q * sw - pw + s * dw
            if 0 <= d < D and 0 <= h < H and 0 <= w < W:
                O[:, m, p, q] += F[:, t, r, s].T @ I[:, d, h, w]
    return O


def pool_windows(layer):
    """For each output (m, p, q): the valid (window index, d, h, w) positions."""
    (D, H, W), (_, T, R, S) = layer.DHW, layer.JTRS
    (_, pd, ph, pw), (_, sd, sh, sw) = layer.padding, layer.strides
    for m, p, q in np.ndindex(*layer.MPQ):
        cells = []
        for t, r, s in np.ndindex(T, R, S):
            d, h, w = m * sd - pd + t, p * sh - ph + r, q * sw - pw + s
            if 0 <= d < D and 0 <= h < H and 0 <= w < W:
                cells.append(((t * R + r) * S + s, d, h, w))
        yield (m, p, q), cells


def ref_pool(layer, I):
    O, A = np.zeros(layer.dimO), np.zeros(layer.dimO, np.int64)
    for (m, p, q), cells in pool_windows(layer):
        vals = np.stack([I[:, d, h, w] for _, d, h, w in cells])
        if layer.op == "max":
            best = np.argmax(vals, axis=0)          # first max on ties
            O[:, m, p, q] = np.max(vals, axis=0)
            A[:, m, p, q] = np.array([c[0] for c in cells])[best]
        else:
            O[:, m, p, q] = vals.mean(axis=0)
    return O, A


def ref_bn(x, gamma, beta, eps):
    mean, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta, mean, var


def central_diff(f, x, eps=1e-6):
    """d f / d x for every element of x (float64, modified in place and restored)."""
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        keep = x[i]
        x[i] = keep + eps
        up = f()
        x[i] = keep - eps
        down = f()
        x[i] = keep
        g[i] = (up - down) / (2 * eps)
    return g


# ---------------------------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------------------------

CONV_SHAPES = {
    "2d pad": dict(N=3, C=2, K=3, H=6, W=6, R=3, S=3, pad_h=1, pad_w=1),
    "strides, non-square": dict(N=2, C=3, K=2, H=7, W=6, R=3, S=2, pad_h=1, pad_w=1, str_h=2,
                                str_w=3),
    "dilation": dict(N=2, C=2, K=3, H=7, W=8, R=2, S=3, pad_h=2, pad_w=1, dil_h=2, dil_w=3),
    "3d": dict(N=2, C=2, K=2, D=4, H=5, W=4, T=2, R=3, S=2, pad_d=1, pad_h=1, str_d=2,
               dil_w=2),
    "batch 1, big pad": dict(N=1, C=3, K=4, H=5, W=5, R=2, S=2, pad_h=3, pad_w=2),
    "1x1": dict(N=4, C=5, K=3, H=3, W=4),
    # width stride 1, height stride 2, wide padding: the row kernels' border classes
    "height stride": dict(N=2, C=2, K=2, D=2, H=6, W=5, T=2, R=3, S=4, pad_d=1, pad_h=2,
                          pad_w=2, str_h=2),
}


def conv_case(be, name, rng):
    layer = be.conv_layer(np.float64, **CONV_SHAPES[name])
    I, F, E = (rng.standard_normal(d) for d in (layer.dimI, layer.dimF, layer.dimO))
    return layer, I, F, E


def run_conv(be, layer, I, F, E):
    """fprop, bprop and update results (5-D numpy) through 2-D tensors, as layers pass them."""
    O, G, U = be.zeros(layer.dimO2), be.zeros(layer.dimI2), be.zeros(layer.dimF2)
    Ft = be.array(F.reshape(layer.dimF2))
    be.fprop_conv(layer, be.array(I.reshape(layer.dimI2)), Ft, O)
    be.bprop_conv(layer, Ft, be.array(E.reshape(layer.dimO2)), G)
    be.update_conv(layer, be.array(I.reshape(layer.dimI2)), be.array(E.reshape(layer.dimO2)), U)
    return O.get().reshape(layer.dimO), G.get().reshape(layer.dimI), U.get().reshape(layer.dimF)


@pytest.mark.parametrize("name", list(CONV_SHAPES))
@pytest.mark.parametrize("algo", ["direct", "im2col"])
def test_conv_matches_loops(be, rng, name, algo, path):
    """fprop against the loop reference; bprop and update against the loops' adjoints:
    <conv(I, F), E> = <I, bprop(E)> = <F, update(I, E)> for every I, F, E."""
    if path == "numpy" and algo == "direct":
        pytest.skip("the direct path needs numba")
    layer, I, F, E = conv_case(be, name, rng)
    layer.set_algo(algo)
    O, G, U = run_conv(be, layer, I, F, E)
    np.testing.assert_allclose(O, ref_conv(layer, I, F), atol=1e-12)
    want_G = np.zeros_like(I)
    want_U = np.zeros_like(F)
    for idx in np.ndindex(*I.shape):  # columns of the linear map I -> <conv(I, F), E>
        unit = np.zeros_like(I)
        unit[idx] = 1
        want_G[idx] = np.sum(ref_conv(layer, unit, F) * E)
    for idx in np.ndindex(*F.shape):
        unit = np.zeros_like(F)
        unit[idx] = 1
        want_U[idx] = np.sum(ref_conv(layer, I, unit) * E)
    np.testing.assert_allclose(G, want_G, atol=1e-10)
    np.testing.assert_allclose(U, want_U, atol=1e-10)


@pytest.mark.parametrize("name", list(CONV_SHAPES))
@pytest.mark.parametrize("algo", ["direct", "im2col"])
def test_conv_kctrs_filters_match_neons_layout(be, rng, name, algo, path):
    """A layer with filter_layout 'KCTRS' takes the filters as (K, C, T, R, S) and gives their
    gradient so (alpha and beta too): the same numbers as neon's (C, T, R, S, K) layer, which
    test_conv_matches_loops checks against the loops."""
    if path == "numpy" and algo == "direct":
        pytest.skip("the direct path needs numba")
    layer, I, F, E = conv_case(be, name, rng)
    kl = be.conv_layer(np.float64, filter_layout="KCTRS", **CONV_SHAPES[name])
    assert kl.dimF == (layer.K,) + layer.dimF[:4] and kl.dimF2 == layer.dimF2[::-1]
    for lay in layer, kl:
        lay.set_algo(algo)
    Fk = np.ascontiguousarray(F.transpose(4, 0, 1, 2, 3))
    U0 = rng.standard_normal(layer.dimF)
    outs = []
    for lay, f, u0 in ((layer, F, U0), (kl, Fk, np.ascontiguousarray(U0.transpose(4, 0, 1, 2, 3)))):
        O, G, U = be.zeros(lay.dimO2), be.zeros(lay.dimI2), be.array(u0.reshape(lay.dimF2))
        Ft = be.array(f.reshape(lay.dimF2))
        be.fprop_conv(lay, be.array(I.reshape(lay.dimI2)), Ft, O, alpha=0.5)
        be.bprop_conv(lay, Ft, be.array(E.reshape(lay.dimO2)), G, alpha=2.0)
        be.update_conv(lay, be.array(I.reshape(lay.dimI2)), be.array(E.reshape(lay.dimO2)), U,
                       alpha=1.5, beta=0.25)
        outs.append((O.get(), G.get(), U.get().reshape(lay.dimF)))
    (O, G, U), (Ok, Gk, Uk) = outs
    np.testing.assert_allclose(Ok, O, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Gk, G, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Uk, U.transpose(4, 0, 1, 2, 3), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"filter_layout must be one of \('CTRSK', 'KCTRS'\), "
                                         r"got 'KRSC'"):
        be.conv_layer(np.float64, filter_layout="KRSC", **CONV_SHAPES[name])


@pytest.mark.parametrize("name", ["strides, non-square", "dilation", "3d"])
def test_conv_gradients_central_differences(be, rng, name):
    """bprop_conv and update_conv are the gradients of sum(fprop(I, F) * E)."""
    layer, I, F, E = conv_case(be, name, rng)
    O, G, U = run_conv(be, layer, I, F, E)
    out = be.zeros(layer.dimO)

    def loss():
        be.fprop_conv(layer, be.array(I.reshape(layer.dimI2)), be.array(F.reshape(layer.dimF2)),
                      out)
        return float(np.sum(out.get() * E))
    np.testing.assert_allclose(G, central_diff(loss, I), atol=1e-6)
    np.testing.assert_allclose(U, central_diff(loss, F), atol=1e-6)


def test_conv_paths_agree_on_a_cifar_like_layer(rng):
    """float32, the network's shapes (batch 8): direct and im2col give the same numbers."""
    be = gen_backend("cpu", rng_seed=0)
    layer = be.conv_layer(np.float32, 8, 3, 16, H=12, W=12, R=5, S=5, pad_h=2, pad_w=2)
    I, F, E = (rng.standard_normal(d).astype(np.float32) for d in
               (layer.dimI, layer.dimF, layer.dimO))
    results = []
    for algo in ("direct", "im2col"):
        layer.set_algo(algo)
        results.append(run_conv(be, layer, I, F, E))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(results[0][0], ref_conv(layer, I.astype(np.float64), F),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("algo", ["direct", "im2col", None])
def test_conv_options(be, rng, algo):
    """alpha, beta with X or O, bias, relu with slope, brelu, bsum, grad_bias, update beta."""
    layer, I, F, E = conv_case(be, "2d pad", rng)
    layer.set_algo(algo)
    tI, tF, tE = (be.array(a.reshape(s)) for a, s in
                  ((I, layer.dimI2), (F, layer.dimF2), (E, layer.dimO2)))
    conv = ref_conv(layer, I, F).reshape(layer.K, -1)
    K = layer.K
    x_host = rng.standard_normal(conv.shape)
    bias_host = rng.standard_normal((K, 1))
    O, X, bias, bsum = be.array(x_host), be.array(x_host), be.array(bias_host), be.zeros((K, 1))
    O2 = O.reshape(layer.dimO2)
    be.fprop_conv(layer, tI, tF, O2, bias=bias, bsum=bsum, alpha=0.5, beta=2.0, relu=True,
                  slope=0.1)
    v = 0.5 * conv + 2.0 * x_host + bias_host
    v = np.maximum(v, 0) + 0.1 * np.minimum(v, 0)
    np.testing.assert_allclose(O.get(), v, atol=1e-12)
    np.testing.assert_allclose(bsum.get(), v.sum(1, keepdims=True), atol=1e-10)

    O = be.zeros(layer.dimO2)
    be.fprop_conv(layer, tI, tF, O, X=X.reshape(layer.dimO2), beta=-1.0, brelu=True, slope=0.25)
    v = (conv - x_host) * ((x_host > 0) + 0.25 * (x_host < 0))
    np.testing.assert_allclose(O.get().reshape(K, -1), v, atol=1e-12)

    G = be.array(np.ones(layer.dimI2))
    be.bprop_conv(layer, tF, tE, G, alpha=2.0, beta=3.0)
    G1 = be.zeros(layer.dimI2)
    be.bprop_conv(layer, tF, tE, G1)
    np.testing.assert_allclose(G.get(), 2.0 * G1.get() + 3.0, atol=1e-12)

    U, U1, gb = be.array(np.ones(layer.dimF2)), be.zeros(layer.dimF2), be.zeros((K, 1))
    be.update_conv(layer, tI, tE, U1, grad_bias=gb)
    be.update_conv(layer, tI, tE, U, alpha=-1.0, beta=0.5)
    np.testing.assert_allclose(U.get(), 0.5 - U1.get(), atol=1e-12)
    np.testing.assert_allclose(gb.get(), E.reshape(K, -1).sum(1, keepdims=True), atol=1e-12)


def test_conv_choice_is_timed_once_and_remembered(be, rng, monkeypatch):
    monkeypatch.delenv(nn_cpu.ALGO_ENV, raising=False)
    if nn_cpu._kernels() is None:
        pytest.skip("numba is not installed")
    layer, I, F, E = conv_case(be, "2d pad", rng)
    be.clear_conv_choices()
    run_conv(be, layer, I, F, E)
    assert {op for op, _ in be.conv_choices} == {"fprop", "bprop", "update"}
    assert set(be.conv_choices.values()) <= {"direct", "im2col"}
    with pytest.raises(ValueError, match="direct.*im2col"):
        layer.set_algo("winograd")


def test_conv_layer_fields(be):
    layer = be.conv_layer(np.float32, 8, 3, 16, D=1, H=32, W=30, R=5, S=3, pad_h=2,
                          str_w=2, dil_h=2)
    assert (layer.M, layer.P, layer.Q) == (1, 28, 14)
    assert layer.dimI == (3, 1, 32, 30, 8) and layer.dimF == (3, 1, 5, 3, 16)
    assert layer.dimO == (16, 1, 28, 14, 8) and layer.dimO2 == (16 * 28 * 14, 8)
    assert layer.dimI2 == (3 * 32 * 30, 8) and layer.dimF2 == (45, 16)
    assert layer.nOut == 16 * 28 * 14 and layer.sizeF == 45 * 16
    assert layer.padding == (0, 2, 0) and layer.strides == (1, 1, 2)
    assert layer.dilation == (1, 2, 1)


def test_conv_bad_input(be):
    # a window that does not fit builds (neon's tests build such layers and read dimO first);
    # running it raises, naming the axis
    unfit = be.conv_layer(np.float32, 2, 3, 4, H=4, W=4, R=5, S=5)
    assert unfit.dimO == (4, 1, 0, 0, 2)
    with pytest.raises(ValueError, match=r"fprop_conv: conv_layer \(height\): a window of 5 "
                                         r"\(dilation 1\) does not fit an input of 4"):
        be.fprop_conv(unfit, be.zeros(unfit.dimI2, dtype=np.float32),
                      be.zeros(unfit.dimF2, dtype=np.float32), be.zeros((1, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="sizes, strides and dilations must be >= 1"):
        be.conv_layer(np.float32, 2, 3, 4, H=4, W=4, R=3, S=3, str_h=0)
    layer = be.conv_layer(np.float64, 2, 3, 4, H=5, W=5, R=3, S=3)
    I, F, O = be.zeros(layer.dimI2), be.zeros(layer.dimF2), be.zeros(layer.dimO2)
    with pytest.raises(ValueError, match=r"I has shape \(75, 3\), expected \(3, 1, 5, 5, 2\) or "
                                         r"\(75, 2\)"):
        be.fprop_conv(layer, be.zeros((75, 3)), F, O)
    with pytest.raises(ValueError, match=r"O has shape \(35, 2\), expected"):
        be.fprop_conv(layer, I, F, be.zeros((35, 2)))
    with pytest.raises(ValueError, match="dtype float32, expected float64"):
        be.fprop_conv(layer, I, be.zeros(layer.dimF2, dtype=np.float32), O)
    with pytest.raises(ValueError, match=r"bias has shape \(3, 1\), expected \(4, 1\)"):
        be.fprop_conv(layer, I, F, O, bias=be.zeros((3, 1)))
    with pytest.raises(ValueError, match=r"grad_I has shape"):
        be.bprop_conv(layer, F, O, be.zeros(layer.dimO2))
    with pytest.raises(ValueError, match=r"U has shape \(27, 3\), expected"):
        be.update_conv(layer, I, O, be.zeros((27, 3)))
    with pytest.raises(TypeError, match="ConvLayer"):
        be.fprop_conv(be.pool_layer(np.float64, "max", 2, 3, H=4, W=4, R=2, S=2), I, F, O)


# ---------------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------------

POOL_SHAPES = {
    "2x2": dict(N=3, C=2, H=4, W=6, R=2, S=2),
    "3x3 stride 2 pad 1": dict(N=2, C=3, H=7, W=6, R=3, S=3, pad_h=1, pad_w=1, str_h=2, str_w=2),
    "non-square overlapping": dict(N=2, C=2, H=5, W=7, R=2, S=3, pad_w=2, str_h=1, str_w=2),
    "3d": dict(N=2, C=2, D=4, H=4, W=3, T=2, R=2, S=3, pad_d=1, pad_w=1, str_w=1),
    "batch 1": dict(N=1, C=4, H=5, W=5, R=3, S=3, pad_h=2, pad_w=2, str_h=3, str_w=3),
    # a batch of one runs the plane-by-plane kernels (the SINGA front end's NCHW pooling)
    "batch 1 overlapping": dict(N=1, C=5, H=8, W=7, R=3, S=3, pad_h=1, pad_w=1, str_h=1,
                                str_w=1),
    "batch 1 non-square": dict(N=1, C=3, H=5, W=7, R=2, S=3, pad_w=2, str_h=1, str_w=2),
}


@pytest.mark.parametrize("name", list(POOL_SHAPES))
@pytest.mark.parametrize("op", ["max", "avg"])
def test_pool_matches_loops(be, rng, name, op, path):
    layer = be.pool_layer(np.float64, op, **POOL_SHAPES[name])
    I = rng.standard_normal(layer.dimI)
    I[0, ..., 0] = np.round(I[0, ..., 0])  # ties: the first max wins
    O, A = be.array(rng.standard_normal(layer.dimO2)), be.zeros(layer.dimO2, dtype=np.int32)
    keep = O.get()
    be.fprop_pool(layer, be.array(I.reshape(layer.dimI2)), O, A, beta=0.5)
    want, want_arg = ref_pool(layer, I)
    np.testing.assert_allclose(O.get(), want.reshape(layer.dimO2) + 0.5 * keep, atol=1e-12)
    if op == "max":
        np.testing.assert_array_equal(A.get(), want_arg.reshape(layer.dimO2))
    # bprop against the loops: each error to the argmax, or spread over the valid cells
    E = rng.standard_normal(layer.dimO)
    want_G = np.zeros(layer.dimI)
    for (m, p, q), cells in pool_windows(layer):
        for index, d, h, w in cells:
            if op == "max":
                want_G[:, d, h, w] += np.where(want_arg[:, m, p, q] == index, E[:, m, p, q], 0)
            else:
                want_G[:, d, h, w] += E[:, m, p, q] / len(cells)
    G = be.array(np.ones(layer.dimI2))
    be.bprop_pool(layer, be.array(E), G, A, alpha=2.0, beta=-1.0)
    np.testing.assert_allclose(G.get(), 2.0 * want_G.reshape(layer.dimI2) - 1.0, atol=1e-12)


@pytest.mark.parametrize("op", ["max", "avg"])
@pytest.mark.parametrize("name", ["3x3 stride 2 pad 1", "non-square overlapping",
                                  "batch 1 overlapping"])
def test_pool_gradient_central_differences(be, rng, op, name):
    layer = be.pool_layer(np.float64, op, **POOL_SHAPES[name])
    I = rng.permutation(np.prod(layer.dimI)).reshape(layer.dimI) * 0.01  # no ties
    E = rng.standard_normal(layer.dimO)
    O, A, G = be.zeros(layer.dimO), be.zeros(layer.dimO, dtype=np.int8), be.zeros(layer.dimI)

    def loss():
        be.fprop_pool(layer, be.array(I), O, A)
        return float(np.sum(O.get() * E))
    loss()
    be.bprop_pool(layer, be.array(E), G, A)
    np.testing.assert_allclose(G.get(), central_diff(loss, I, eps=1e-4), atol=1e-7)


@pytest.mark.parametrize("op", ["max", "avg"])
def test_pool_planes_match_batched_kernels_on_edge_values(rng, op):
    """N*C planes of a batch of one (the plane kernels) against the same images as a batch of N
    (the lane-row kernels), and both against the general kernels (any J, T, D): NaN wins a
    window and stays, -inf and inf, ties, zeros and tiny values, max and average, forward and
    backward, float32."""
    be = gen_backend("cpu", rng_seed=0)
    if nn_cpu._kernels() is None:
        pytest.skip("numba is not installed")
    N, C, H, W = 4, 3, 6, 5
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    x.flat[rng.choice(x.size, 12, replace=False)] = [np.nan, -np.inf, np.inf, 0.0, -0.0, 1e-38,
                                                     -1e38, 1e38, np.nan, 2.0, 2.0, 2.0]
    x[1, 2] = -np.inf                                    # a plane of -inf: argmax 0 everywhere
    geo = dict(H=H, W=W, R=3, S=2, pad_h=1, pad_w=1, str_h=2, str_w=1)
    planes = be.pool_layer(np.float32, op, 1, N * C, **geo)
    batched = be.pool_layer(np.float32, op, N, C, **geo)
    O1, A1 = be.zeros(planes.dimO), be.zeros(planes.dimO, dtype=np.int32)
    be.fprop_pool(planes, be.array(x.reshape(planes.dimI)), O1, A1)
    O2, A2 = be.zeros(batched.dimO), be.zeros(batched.dimO, dtype=np.int32)
    be.fprop_pool(batched, be.array(np.ascontiguousarray(x.transpose(1, 0, 2, 3))[:, None]
                                    .transpose(0, 1, 3, 4, 2)), O2, A2)
    kernels = nn_cpu._kernels()
    O3, A3 = np.zeros(batched.dimO, np.float32), np.zeros(batched.dimO, np.int32)
    I3 = np.ascontiguousarray(x.transpose(1, 0, 2, 3))[:, None].transpose(0, 1, 3, 4, 2)
    kernels.fprop_pool(np.ascontiguousarray(I3), O3, A3, op == "max", 0.0, *batched.JTRS,
                       batched.geometry)
    np.testing.assert_array_equal(O2.get(), O3)
    to_nchw = (4, 0, 1, 2, 3)
    np.testing.assert_array_equal(O1.get().reshape(N, C, *planes.MPQ[1:]),
                                  O2.get().transpose(to_nchw)[:, :, 0])
    if op == "max":
        np.testing.assert_array_equal(A2.get(), A3)
        np.testing.assert_array_equal(A1.get().reshape(N, C, *planes.MPQ[1:]),
                                      A2.get().transpose(to_nchw)[:, :, 0])
    E = rng.standard_normal((N, C) + planes.MPQ[1:]).astype(np.float32)
    G1, G2 = be.zeros(planes.dimI), be.zeros(batched.dimI)
    be.bprop_pool(planes, be.array(E.reshape(planes.dimO)), G1, A1)
    be.bprop_pool(batched, be.array(np.ascontiguousarray(E.transpose(1, 2, 3, 0))[:, None]),
                  G2, A2)
    G3 = np.zeros(batched.dimI, np.float32)
    kernels.bprop_pool(np.ascontiguousarray(E.transpose(1, 2, 3, 0))[:, None], G3, A3,
                       op == "max", 1.0, 0.0, *batched.JTRS, batched.geometry)
    np.testing.assert_allclose(G2.get(), G3, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(G1.get().reshape(N, C, H, W),
                               G2.get().transpose(to_nchw)[:, :, 0], rtol=1e-6, atol=1e-7)


def test_pool_argmax_dtypes(be, rng):
    layer = be.pool_layer(np.float64, "max", 2, 3, H=6, W=6, R=3, S=3, str_h=1, str_w=1)
    I = be.array(rng.standard_normal(layer.dimI2))
    results = []
    for dt in (np.int8, np.int32, np.float32):
        O, A = be.zeros(layer.dimO2), be.zeros(layer.dimO2, dtype=dt)
        be.fprop_pool(layer, I, O, A)
        results.append(A.get().astype(np.int64))
    assert all(np.array_equal(results[0], r) for r in results)
    assert results[0].min() >= 0 and results[0].max() <= 8


def test_pool_bad_input(be):
    with pytest.raises(ValueError, match="smaller than the window"):
        be.pool_layer(np.float32, "max", 2, 3, H=4, W=4, R=2, S=2, pad_h=2)
    with pytest.raises(ValueError, match="op must be"):
        be.pool_layer(np.float32, "median", 2, 3, H=4, W=4, R=2, S=2)
    with pytest.raises(ValueError, match="pad_c=2 must be smaller"):
        be.pool_layer(np.float32, "max", 2, 4, H=4, W=4, J=2, R=2, S=2, pad_c=2)
    layer = be.pool_layer(np.float64, "max", 2, 3, H=4, W=4, R=2, S=2)
    I, O = be.zeros(layer.dimI2), be.zeros(layer.dimO2)
    with pytest.raises(ValueError, match=r"O has shape \(48, 2\), expected \(3, 1, 2, 2, 2\)"):
        be.fprop_pool(layer, I, be.zeros((48, 2)))
    with pytest.raises(ValueError, match="needs the argmax"):
        be.bprop_pool(layer, O, I)
    with pytest.raises(ValueError, match="cannot hold"):
        big = be.pool_layer(np.float64, "max", 1, 1, H=16, W=16, R=16, S=16)
        be.fprop_pool(big, be.zeros(big.dimI2), be.zeros(big.dimO2),
                      be.zeros(big.dimO2, dtype=np.int8))


# ---------------------------------------------------------------------------------------------
# batch norm
# ---------------------------------------------------------------------------------------------

def bn_tensors(be, rng, F=5, N=7):
    x = rng.standard_normal((F, N)) * 2 + 1
    gamma, beta = rng.uniform(0.5, 1.5, (F, 1)), rng.standard_normal((F, 1))
    gm, gv = rng.standard_normal((F, 1)), rng.uniform(0.5, 2, (F, 1))
    return x, gamma, beta, gm, gv


@pytest.mark.parametrize("relu", [False, True])
def test_bn_fprop(be, rng, relu):
    x, gamma, beta, gm, gv = bn_tensors(be, rng)
    y0 = rng.standard_normal(x.shape)
    t = {k: be.array(v) for k, v in dict(x=x, gamma=gamma, beta=beta, gm=gm, gv=gv, y=y0).items()}
    xsum, xvar = be.zeros((5, 1)), be.zeros((5, 1))
    be.compound_fprop_bn(t["x"], xsum, xvar, t["gm"], t["gv"], t["gamma"], t["beta"], t["y"],
                         1e-3, 0.9, True, accumbeta=0.5, relu=relu)
    want, mean, var = ref_bn(x, gamma, beta, 1e-3)
    want = want + 0.5 * y0
    np.testing.assert_allclose(t["y"].get(), np.maximum(want, 0) if relu else want, atol=1e-12)
    np.testing.assert_allclose(xsum.get(), mean, atol=1e-12)
    np.testing.assert_allclose(xvar.get(), var, atol=1e-12)
    np.testing.assert_allclose(t["gm"].get(), 0.9 * gm + 0.1 * mean, atol=1e-12)
    np.testing.assert_allclose(t["gv"].get(), 0.9 * gv + 0.1 * var, atol=1e-12)
    # a batch sum computed elsewhere (fprop_conv's bsum), then inference from running stats
    xsum2 = be.array(x.sum(1, keepdims=True))
    y = be.zeros(x.shape)
    be.compound_fprop_bn(t["x"], xsum2, xvar, be.array(gm), be.array(gv), t["gamma"], t["beta"],
                         y, 1e-3, 0.9, False)
    np.testing.assert_allclose(xsum2.get(), mean, atol=1e-12)
    np.testing.assert_allclose(y.get(), ref_bn(x, gamma, beta, 1e-3)[0], atol=1e-12)
    gm_t, gv_t = be.array(gm), be.array(gv)
    be.compound_fprop_bn(t["x"], xsum, xvar, gm_t, gv_t, t["gamma"], t["beta"], y, 1e-3, 0.9,
                         True, inference=True)
    np.testing.assert_allclose(y.get(), (x - gm) / np.sqrt(gv + 1e-3) * gamma + beta, atol=1e-12)
    np.testing.assert_array_equal(gm_t.get(), gm)


def test_bn_bprop(be, rng):
    x, gamma, beta, gm, gv = bn_tensors(be, rng)
    delta = rng.standard_normal(x.shape)
    tx, tg, tb = be.array(x), be.array(gamma), be.array(beta)
    xsum, xvar, y = be.zeros((5, 1)), be.zeros((5, 1)), be.zeros(x.shape)
    be.compound_fprop_bn(tx, xsum, xvar, be.array(gm), be.array(gv), tg, tb, y, 1e-3, 0.9, True)
    d_out, g_gamma, g_beta = be.zeros(x.shape), be.zeros((5, 1)), be.zeros((5, 1))
    be.compound_bprop_bn(d_out, g_gamma, g_beta, be.array(delta), tx, xsum, xvar, tg, 1e-3)

    def loss():
        return float(np.sum(ref_bn(x, gamma, beta, 1e-3)[0] * delta))
    np.testing.assert_allclose(d_out.get(), central_diff(loss, x), atol=1e-6)
    np.testing.assert_allclose(g_gamma.get(), central_diff(loss, gamma), atol=1e-6)
    np.testing.assert_allclose(g_beta.get(), central_diff(loss, beta), atol=1e-6)


def test_bn_bad_input(be):
    x = be.zeros((4, 3))
    r = be.zeros((4, 1))
    with pytest.raises(ValueError, match=r"xvar has shape \(3, 1\), expected \(4, 1\)"):
        be.compound_fprop_bn(x, r, be.zeros((3, 1)), r, r, r, r, x, 1e-3, 0.9, True)
    with pytest.raises(ValueError, match=r"delta_in has shape \(4, 2\), expected \(4, 3\)"):
        be.compound_bprop_bn(x, r, r, be.zeros((4, 2)), x, r, r, r, 1e-3)
    with pytest.raises(NotImplementedError, match="binary"):
        be.compound_fprop_bn(x, r, r, r, r, r, r, x, 1e-3, 0.9, True, binary=True)


# ---------------------------------------------------------------------------------------------
# batch norm's per-channel sums (batch_moments / batch_grad_sums): the CPU kernel, the op-trees
# of the base Backend, and numpy float64
# ---------------------------------------------------------------------------------------------

def _bn_paths(be, path):
    """(batch_moments, batch_grad_sums) of the CPU kernels or of the base Backend's op-trees."""
    from neonlike.backends.backend import Backend
    if path == "kernel":
        return be.batch_moments, be.batch_grad_sums
    return (lambda *a, **k: Backend.batch_moments(be, *a, **k),
            lambda *a: Backend.batch_grad_sums(be, *a))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["kernel", "op-trees"])
@pytest.mark.parametrize("edge", ["plain", "huge and tiny", "nan and inf", "zeros"])
def test_batch_moments_and_grad_sums_against_numpy(rng, dtype, path, edge):
    be = gen_backend("cpu", rng_seed=0, datatype=dtype)
    A, C, B = 5, 4, 7
    x = rng.standard_normal((A, C, B)) * 3 + 1
    if edge == "huge and tiny":
        x[:, 0] *= 1e30 if dtype == np.float64 else 1e15
        x[:, 1] *= 1e-30
    elif edge == "nan and inf":
        x[1, 0, 2], x[2, 1, 3] = np.nan, np.inf
    elif edge == "zeros":
        x[:] = 0.0
    x = x.astype(dtype)
    dy = rng.standard_normal((A, C, B)).astype(dtype)
    rm0, rv0 = rng.standard_normal((1, C)), rng.random((1, C)) + 0.5
    mean, var, inv = (be.empty((1, C, 1)) for _ in range(3))
    rm, rv = be.array(rm0), be.array(rv0)
    keep, take = 0.1, (0.9, 0.9 * 35 / 34)
    with np.errstate(all="ignore"):
        moments, sums = _bn_paths(be, path)
        moments(be.array(x), mean, var, inv, 1e-5, (rm, rv), keep, take)
        x64 = x.astype(np.float64)
        m = x64.mean(axis=(0, 2))
        v = ((x64 - m[None, :, None]) ** 2).mean(axis=(0, 2))
        i = 1.0 / np.sqrt(v + 1e-5)
        dg = (dy * (x64 - m[None, :, None]) * i[None, :, None]).sum(axis=(0, 2))
        db = dy.astype(np.float64).sum(axis=(0, 2))
    tol = dict(rtol=1e-5 if dtype == np.float32 else 1e-12, atol=0)
    for got, want in ((mean, m), (var, v), (inv, i), (rm, rm0 * keep + m * take[0]),
                      (rv, rv0 * keep + v * take[1])):
        np.testing.assert_allclose(got.get().ravel(), want.astype(dtype).ravel(), **tol)
    dgamma, dbeta = be.empty((1, C, 1)), be.empty((1, C, 1))
    with np.errstate(all="ignore"):
        sums(be.array(dy), be.array(x), mean, inv, dgamma, dbeta)
    np.testing.assert_allclose(dgamma.get().ravel(), dg.astype(dtype), **tol)
    np.testing.assert_allclose(dbeta.get().ravel(), db.astype(dtype), **tol)


def test_batch_moments_takes_the_op_trees_where_the_kernel_cannot(rng):
    # a strided x (a slice) has no flat C-ordered array: the op-trees run, with the same results
    be = gen_backend("cpu", rng_seed=0, datatype=np.float32)
    full = be.array(rng.standard_normal((3, 2, 8)).astype(np.float32))
    x = full[:, :, 1:6]
    mean, var, inv = (be.empty((1, 2, 1)) for _ in range(3))
    be.batch_moments(x, mean, var, inv, 1e-3)
    want = full.get()[:, :, 1:6].astype(np.float64)
    np.testing.assert_allclose(mean.get().ravel(), want.mean(axis=(0, 2)), rtol=1e-5)
    np.testing.assert_allclose(var.get().ravel(), want.var(axis=(0, 2)), rtol=1e-4)
