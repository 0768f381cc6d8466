"""neon's extra CPU backend ops against float64 numpy references: batched_dot, the log2
histogram buffers (Tensor.hist), ROI pooling and cross-channel pooling (J > 1); bprops by
central differences."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from neonlike.backends import gen_backend
from neonlike.backends.cpu.layer import bprop_pool_numpy, fprop_pool_numpy


@pytest.fixture(scope="module")
def be():
    return gen_backend("cpu", rng_seed=0)


# ---------------------------------------------------------------------------------------------
# batched_dot
# ---------------------------------------------------------------------------------------------

def test_batched_dot_fprop_bprop_update(be):
    rng = np.random.default_rng(0)
    X, N, C, K = 5, 8, 12, 7
    I = rng.uniform(-1, 1, (X, C, N)).astype(np.float32)
    E = rng.uniform(-1, 1, (X, K, N)).astype(np.float32)
    W = rng.uniform(-1, 1, (K, C)).astype(np.float32)
    dI, dE, dW = be.array(I), be.array(E), be.array(W)
    O, B, U = be.zeros(E.shape), be.zeros(I.shape), be.zeros(W.shape)
    be.batched_dot(dW, dI, O)
    be.batched_dot(dW.T, dE, B)
    be.batched_dot(dE, dI.T, U)
    I64, E64, W64 = (a.astype(np.float64) for a in (I, E, W))
    np.testing.assert_allclose(O.get(), np.einsum("kc,xcn->xkn", W64, I64), atol=1e-5)
    np.testing.assert_allclose(B.get(), np.einsum("kc,xkn->xcn", W64, E64), atol=1e-5)
    np.testing.assert_allclose(U.get(), np.einsum("xkn,xcn->kc", E64, I64), atol=1e-5)


def test_batched_dot_alpha_beta_relu(be):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, 4, 5))
    Bm = rng.standard_normal((5, 6))
    C0 = rng.standard_normal((3, 4, 6))
    C = be.array(C0, dtype=np.float64)
    be.batched_dot(be.array(A, dtype=np.float64), be.array(Bm, dtype=np.float64), C,
                   alpha=2.0, beta=0.5, relu=True)
    want = np.maximum(2.0 * np.einsum("xmk,kn->xmn", A, Bm), 0) + 0.5 * C0
    np.testing.assert_allclose(C.get(), want, rtol=1e-12)
    # 2-D C from a 3-D A and a 2-D B: the sum over x
    U = be.zeros((4, 6), dtype=np.float64)
    be.batched_dot(be.array(A, dtype=np.float64), be.array(Bm, dtype=np.float64), U)
    np.testing.assert_allclose(U.get(), A.sum(0) @ Bm, rtol=1e-12)


def test_batched_dot_errors(be):
    with pytest.raises(ValueError, match="3-D A or B"):
        be.batched_dot(be.zeros((2, 3)), be.zeros((3, 4)), be.zeros((2, 4)))
    with pytest.raises(ValueError, match="batch sizes differ"):
        be.batched_dot(be.zeros((2, 3)), be.zeros((4, 3, 5)), be.zeros((5, 2, 5)))


# ---------------------------------------------------------------------------------------------
# histograms
# ---------------------------------------------------------------------------------------------

def ref_hist(x, nbins, offset):
    """Bin of each value: rint(log2|x|) (float32) - offset, clipped below, dropped above."""
    with np.errstate(divide="ignore"):
        lg = np.rint(np.log2(np.abs(np.asarray(x, np.float64).astype(np.float32)).astype(
            np.float64))).ravel()
    out = np.zeros(nbins, np.int64)
    for v in lg:
        if np.isnan(v) or v > offset + nbins:
            continue
        out[int(min(max(v - offset, 0), nbins - 1))] += 1
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.uint8, np.int8])
@pytest.mark.parametrize("nbins,offset", [(64, -48), (32, 0), (8, 2)])
def test_hist_matches_reference(be, dtype, nbins, offset):
    rng = np.random.default_rng(nbins)
    x = (rng.standard_normal((70, 3000)) * 40).astype(dtype)
    be.set_hist_buffers(nbins, offset)
    h = be.array(x, dtype=dtype).hist("x")
    assert h.shape == (1, nbins)
    np.testing.assert_array_equal(h.get()[0], ref_hist(x, nbins, offset))


def test_hist_numpy_path(be, monkeypatch):
    from neonlike.backends.cpu import extra_kernels
    monkeypatch.setattr(extra_kernels, "HAVE_NUMBA", False)
    x = np.array([0.0, 1e-30, 0.3, 5.0, 2.0 ** 20, np.inf, np.nan, -7.0], np.float32)
    be.set_hist_buffers(16, -4)
    np.testing.assert_array_equal(be.array(x[None]).hist("np").get()[0], ref_hist(x, 16, -4))
    be.set_hist_buffers(64, -48)


def test_hist_edges_and_dump(be):
    be.set_hist_buffers(16, -4)
    values = {"edges": [0.0, 2.0 ** -10, 2.0 ** 12, 2.0 ** 13, np.inf, np.nan, -3.0],
              "rounding": [2 ** 5, 63.99998856, 2 ** 6, 0.11262291, 92.22483826]}
    for tag, v in values.items():
        be.array(np.array(v, np.float32)[None]).hist(tag)
    data, tags = be.dump_hist_data()
    assert data.shape == (4096, 16) and set(tags) == set(values)
    for tag, v in values.items():
        np.testing.assert_array_equal(data.get()[tags[tag]], ref_hist(v, 16, -4))
    assert be.dump_hist_data()[1] == {}      # a dump starts a new buffer
    be.set_hist_buffers(64, -48)


# ---------------------------------------------------------------------------------------------
# ROI pooling
# ---------------------------------------------------------------------------------------------

def ref_roipool(fm, rois, PH, PW, scale):
    """(C, PH, PW, R) maxima of each roi's bins, 0 for an empty bin; float64 loops."""
    C, H, W, _ = fm.shape
    out = np.zeros((C, PH, PW, len(rois)))
    for b, (n, *box) in enumerate(rois):
        x0, y0, x1, y1 = (int(round(v * scale)) for v in box)
        bh, bw = max(y1 - y0 + 1, 1) / PH, max(x1 - x0 + 1, 1) / PW
        for ph, pw in itertools.product(range(PH), range(PW)):
            h0 = min(max(int(np.floor(ph * bh)) + y0, 0), H)
            h1 = min(max(int(np.ceil((ph + 1) * bh)) + y0, 0), H)
            w0 = min(max(int(np.floor(pw * bw)) + x0, 0), W)
            w1 = min(max(int(np.ceil((pw + 1) * bw)) + x0, 0), W)
            if h1 > h0 and w1 > w0:
                out[:, ph, pw, b] = fm[:, h0:h1, w0:w1, int(n)].reshape(C, -1).max(axis=1)
    return out


def _roi_case(rng):
    C, H, W, N, PH, PW, scale = 3, 13, 11, 2, 3, 4, 0.5
    fm = rng.permutation(C * H * W * N).reshape(C, H, W, N) / 7.0   # distinct values
    rois = np.array([[0, 0, 0, 20, 24], [1, 4, 2, 17, 9], [1, 10, 6, 30, 40], [0, 6, 6, 6, 6]],
                    np.float64)
    return fm, rois, PH, PW, scale


def _roi_run(be, fm, rois, PH, PW, scale):
    C, H, W, N = fm.shape
    O = be.zeros((C, PH, PW, len(rois)), dtype=np.float64)
    A = be.zeros(O.shape, dtype=np.int32)
    be.roipooling_fprop(be.array(fm.reshape(-1, N), dtype=np.float64),
                        be.array(rois, dtype=np.float64), O, A, len(rois), C, H, W, PH, PW, scale)
    return O, A


def test_roipooling_fprop(be):
    fm, rois, PH, PW, scale = _roi_case(np.random.default_rng(2))
    O, A = _roi_run(be, fm, rois, PH, PW, scale)
    np.testing.assert_array_equal(O.get(), ref_roipool(fm, rois, PH, PW, scale))
    C, H, W, N = fm.shape
    a = A.get()
    picked = np.where(a >= 0, fm[np.arange(C)[:, None, None, None], a // W, a % W,
                                 rois[:, 0].astype(int)], 0.0)
    np.testing.assert_array_equal(picked, O.get())


def test_roipooling_bprop_central_differences(be):
    fm, rois, PH, PW, scale = _roi_case(np.random.default_rng(3))
    C, H, W, N = fm.shape
    E = np.random.default_rng(4).standard_normal((C, PH, PW, len(rois)))
    _, A = _roi_run(be, fm, rois, PH, PW, scale)
    G = be.zeros((C * H * W, N), dtype=np.float64)
    be.roipooling_bprop(be.array(E, dtype=np.float64), be.array(rois, dtype=np.float64), G, A,
                        len(rois), C, H, W, PH, PW, scale)
    eps = 1e-4     # values are 1/7 apart: no perturbation changes a maximum
    numeric = np.zeros(fm.size)
    for i in range(fm.size):
        plus, minus = fm.copy().ravel(), fm.copy().ravel()
        plus[i] += eps
        minus[i] -= eps
        numeric[i] = (np.sum(E * ref_roipool(plus.reshape(fm.shape), rois, PH, PW, scale))
                      - np.sum(E * ref_roipool(minus.reshape(fm.shape), rois, PH, PW, scale))) \
            / (2 * eps)
    np.testing.assert_allclose(G.get().ravel(), numeric, atol=1e-8)


def test_roipooling_bad_rois(be):
    fm = be.zeros((2 * 4 * 4, 1))
    O, A = be.zeros((2, 2, 2, 1)), be.zeros((2, 2, 2, 1), dtype=np.int32)
    with pytest.raises(ValueError, match="rois must be"):
        be.roipooling_fprop(fm, be.zeros((1, 4)), O, A, 1, 2, 4, 4, 2, 2, 1.0)
    with pytest.raises(ValueError, match="image indices"):
        be.roipooling_fprop(fm, be.array([[1, 0, 0, 3, 3]]), O, A, 1, 2, 4, 4, 2, 2, 1.0)


# ---------------------------------------------------------------------------------------------
# cross-channel pooling (J > 1)
# ---------------------------------------------------------------------------------------------

def ref_pool(I, layer):
    """(K, M, P, Q, N) max or mean over each (J, T, R, S) window's valid positions; float64."""
    C, D, H, W, N = I.shape
    out = np.zeros(layer.dimO)
    for k, m, p, q in np.ndindex(layer.K, layer.M, layer.P, layer.Q):
        starts = [o * s - pad for o, s, pad in zip((k, m, p, q), layer.strides, layer.padding)]
        sl = tuple(slice(max(a, 0), min(a + win, X)) for a, win, X in
                   zip(starts, layer.JTRS, (C, D, H, W)))
        window = I[sl].reshape(-1, N)
        out[k, m, p, q] = window.max(0) if layer.op == "max" else window.mean(0)
    return out


CASES = [  # J, T, R, S, pad_c, pad_d, pad_h, pad_w, str_c, str_d, str_h, str_w
    (2, 1, 3, 3, 0, 0, 0, 0, 2, 1, 2, 2),
    (3, 1, 2, 2, 1, 0, 1, 0, 2, 1, 1, 2),
    (3, 2, 2, 1, 2, 1, 0, 0, 1, 1, 2, 1),
]


@pytest.mark.parametrize("op", ["max", "avg"])
@pytest.mark.parametrize("case", CASES)
def test_cross_channel_pool_fprop(be, op, case):
    C, D, H, W, N = 7, 2, 6, 5, 3
    layer = be.pool_layer(np.float64, op, N, C, D, H, W, *case)
    I = np.random.default_rng(5).standard_normal(layer.dimI)
    O = be.zeros(layer.dimO, dtype=np.float64)
    A = be.zeros(layer.dimO, dtype=np.int32)
    be.fprop_pool(layer, be.array(I, dtype=np.float64), O, A)
    want = ref_pool(I, layer)
    np.testing.assert_allclose(O.get(), want, rtol=1e-12)
    # the numpy path (no numba) agrees, argmax included
    am = np.zeros(layer.dimO, np.int32)
    np.testing.assert_allclose(fprop_pool_numpy(layer, I, am), want, rtol=1e-12)
    if op == "max":
        np.testing.assert_array_equal(am, A.get())


@pytest.mark.parametrize("op", ["max", "avg"])
def test_channel_stride_over_single_channel_windows(be, op):
    """J = T = D = 1 with a channel stride: every other channel pooled (the CPU's row kernels,
    which pool every channel, once took this case and failed to reshape)."""
    layer = be.pool_layer(np.float32, op, 2, 5, 1, 6, 4, 1, 1, 2, 2, str_c=2)
    assert layer.K == 3
    rng = np.random.default_rng(8)
    I = rng.permutation(layer.sizeI).reshape(layer.dimI) / 7.0
    O, A = be.zeros(layer.dimO), be.zeros(layer.dimO, dtype=np.int32)
    be.fprop_pool(layer, be.array(I), O, A)
    np.testing.assert_allclose(O.get(), ref_pool(I, layer), rtol=1e-6)
    E = rng.standard_normal(layer.dimO)
    G = be.zeros(layer.dimI)
    be.bprop_pool(layer, be.array(E), G, A)
    am = A.get() if op == "max" else None
    np.testing.assert_allclose(G.get(), bprop_pool_numpy(layer, E, am), rtol=1e-6, atol=1e-7)
    assert not G.get()[1::2].any()      # the skipped channels get no error


@pytest.mark.parametrize("op", ["max", "avg"])
@pytest.mark.parametrize("case", CASES)
def test_cross_channel_pool_bprop_central_differences(be, op, case):
    C, D, H, W, N = 5, 2, 4, 4, 2
    layer = be.pool_layer(np.float64, op, N, C, D, H, W, *case)
    rng = np.random.default_rng(6)
    I = rng.permutation(layer.sizeI).reshape(layer.dimI) / 3.0   # distinct: maxima are stable
    E = rng.standard_normal(layer.dimO)
    O, A = be.zeros(layer.dimO, dtype=np.float64), be.zeros(layer.dimO, dtype=np.int32)
    be.fprop_pool(layer, be.array(I, dtype=np.float64), O, A)
    G = be.zeros(layer.dimI, dtype=np.float64)
    be.bprop_pool(layer, be.array(E, dtype=np.float64), G, A)
    eps = 1e-4
    numeric = np.zeros(I.size)
    for i in range(I.size):
        plus, minus = I.copy().ravel(), I.copy().ravel()
        plus[i] += eps
        minus[i] -= eps
        numeric[i] = (np.sum(E * ref_pool(plus.reshape(I.shape), layer))
                      - np.sum(E * ref_pool(minus.reshape(I.shape), layer))) / (2 * eps)
    np.testing.assert_allclose(G.get().ravel(), numeric, atol=1e-8)
    am = A.get() if op == "max" else None
    np.testing.assert_allclose(bprop_pool_numpy(layer, E, am).ravel(), numeric, atol=1e-8)


@pytest.mark.parametrize("shape,axes", [
    ((32, 16, 8, 8), (1, 2, 3, 0)),     # NCHW -> CHWN (singa's conv input)
    ((16, 8, 8, 32), (3, 0, 1, 2)),     # and back
    ((5, 3, 7), (2, 0, 1)),
    ((13, 9), None),                    # a matrix .T, rows not a multiple of the tile
    ((45, 20), None),                   # short rows: tiles of 16, then 8, then one by one
    ((13, 1, 9), (1, 2, 0)),
    ((1, 4), (1, 0)),
    ((1100, 1000), (1, 0))])            # above TRANSPOSE_PARALLEL: the parallel kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copy_transpose_rotations(be, shape, axes, dtype):
    """copy_transpose of a rotation of the axes (the CPU's tiled kernel) equals numpy's."""
    a_np = np.random.default_rng(1).uniform(-1, 1, shape).astype(dtype)
    want = a_np.transpose(axes)
    out = be.empty(want.shape, dtype=dtype)
    assert be.copy_transpose(be.array(a_np, dtype=dtype), out, axes=axes) is out
    np.testing.assert_array_equal(out.get(), want)


def test_copy_transpose_other_cases_match_numpy(be):
    """What the tiled kernel does not take (not a rotation, a strided operand, a strided or
    half-precision output, an integer dtype, an op-tree) goes through the engine, same values."""
    rng = np.random.default_rng(2)
    a_np = rng.uniform(-1, 1, (4, 6, 5)).astype(np.float32)
    a = be.array(a_np)
    cases = [(a, (1, 0, 2), a_np), (a[:, 0:3], (2, 0, 1), a_np[:, 0:3]),
             (a * 2.0, (1, 2, 0), a_np * 2)]
    for x, axes, x_np in cases:
        want = x_np.transpose(axes)
        out = be.empty(want.shape)
        be.copy_transpose(x, out, axes=axes)
        np.testing.assert_allclose(out.get(), want, rtol=1e-6)
    wide = be.zeros((5, 8, 6))
    be.copy_transpose(a, wide[:, 0:4], axes=(2, 0, 1))        # into a strided output
    np.testing.assert_array_equal(wide.get()[:, 0:4], a_np.transpose(2, 0, 1))
    h = be.empty((5, 4, 6), dtype=np.float16)
    be.copy_transpose(be.array(a_np, dtype=np.float16), h, axes=(2, 0, 1))
    np.testing.assert_array_equal(h.get(), a_np.astype(np.float16).transpose(2, 0, 1))


def test_a_rotation_inside_a_tree_runs_the_tiled_kernel(be, monkeypatch):
    """The engine's TRANSPOSE stage of a rotation (a tree reading a CHWN tensor as NCHW, as the
    SINGA front end hands convolution results on) runs copy_transpose's tiled kernel, then the
    fused kernel over its result; values as numpy's. Other transposes keep the host stage."""
    from neonlike.backends.cpu import extra_kernels
    from neonlike.ops import Op
    from neonlike.optree import build
    if not extra_kernels.HAVE_NUMBA:
        pytest.skip("the CPU's tiled transpose kernel needs numba")
    calls = []
    real = extra_kernels.transpose2d
    monkeypatch.setattr(extra_kernels, "transpose2d", lambda a, o: (calls.append(a.shape),
                                                                     real(a, o)))
    rng = np.random.default_rng(3)
    t_np = rng.uniform(-1, 1, (4, 3, 2, 5)).astype(np.float32)
    t = be.array(t_np)
    out = be.empty((5, 4, 3, 2))
    out[:] = be.maximum(build(Op.TRANSPOSE, t, None, axes=(3, 0, 1, 2)), 0.0) * 2.0
    np.testing.assert_array_equal(out.get(), np.maximum(t_np.transpose(3, 0, 1, 2), 0) * 2)
    assert calls == [(24, 5)]
    out2 = be.empty((4, 2, 3, 5))
    out2[:] = build(Op.TRANSPOSE, t, None, axes=(0, 2, 1, 3)) + 1.0   # not a rotation
    np.testing.assert_array_equal(out2.get(), t_np.transpose(0, 2, 1, 3) + 1)
    assert len(calls) == 1


# ---------------------------------------------------------------------------------------------
# sgd_momentum: the CPU kernel (serial and parallel), the base Backend's op-trees, numpy float64
# ---------------------------------------------------------------------------------------------

def _sgd_reference(p, v, g, lr, m, damp, wd, nesterov, first):
    p, v, g = (a.astype(np.float64) for a in (p, v, g))
    g = g + wd * p
    v = g if first else v * m + (1.0 - damp) * g
    return p - lr * (g + m * v if nesterov else v), v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["kernel", "op-trees"])
@pytest.mark.parametrize("size", [(3, 7), (512, 600)])   # the second runs the parallel kernel
@pytest.mark.parametrize("rule", [dict(first=True), dict(), dict(damp=0.3, wd=0.01),
                                  dict(nesterov=True, wd=0.02), dict(first=True, wd=0.1)])
def test_sgd_momentum_against_numpy(be, dtype, path, size, rule):
    from neonlike.backends.backend import Backend
    rng = np.random.default_rng(1)
    p0, v0, g0 = (rng.uniform(-2, 2, size).astype(dtype) for _ in range(3))
    p0[0, :3] = (0.0, 1e-30 if dtype == np.float64 else 1e-20, 1e30 if dtype == np.float64
                 else 1e20)
    g0[0, 3] = np.inf
    g0[0, 4] = np.nan
    args = dict(lr=0.05, m=0.9, damp=0.0, wd=0.0, nesterov=False, first=False)
    args.update(rule)
    P, V, G = be.array(p0, dtype=dtype), be.array(v0, dtype=dtype), be.array(g0, dtype=dtype)
    run = be.sgd_momentum if path == "kernel" else \
        (lambda *a: Backend.sgd_momentum(be, *a))
    with np.errstate(all="ignore"):
        run(P, V, G, args["lr"], args["m"], args["damp"], args["wd"], args["nesterov"],
            args["first"])
        want_p, want_v = _sgd_reference(p0, v0, g0, **args)
    # rounding bound per element: a few ulps of the magnitudes summed (v * m + g cancels)
    eps = np.finfo(dtype).eps
    with np.errstate(all="ignore"):
        a = {k: np.abs(x.astype(np.float64)) for k, x in (("p", p0), ("v", v0), ("g", g0))}
        scale_v = a["v"] * args["m"] + a["g"] + args["wd"] * a["p"]
        scale_p = a["p"] + args["lr"] * scale_v * (1 + args["m"]) * 2
        for got, want, scale in ((V.get(), want_v, scale_v), (P.get(), want_p, scale_p)):
            same = (got == want) | (np.isnan(got) & np.isnan(want))
            close = np.abs(got - want) <= 8 * eps * scale
            assert np.all(same | close), np.argwhere(~(same | close))[:5]
    np.testing.assert_allclose(G.get(), g0)             # the gradient is only read


def test_sgd_momentum_takes_the_op_trees_where_the_kernel_cannot(be, monkeypatch):
    """A tree gradient, a strided velocity, mixed dtypes or shared memory: the op-trees run
    (the kernel is not called) and give the same step."""
    from neonlike.backends.cpu import extra_kernels
    calls = []
    for name in ("sgd_momentum", "sgd_momentum_parallel"):
        fn = getattr(extra_kernels, name)
        monkeypatch.setattr(extra_kernels, name, lambda *a, fn=fn: calls.append(1) or fn(*a))
    rng = np.random.default_rng(2)
    p0, v0, g0 = (rng.uniform(-1, 1, (4, 6)).astype(np.float32) for _ in range(3))
    want_p, want_v = _sgd_reference(p0, v0, 2.0 * g0, 0.1, 0.9, 0.0, 0.0, False, False)
    big = be.array(np.zeros((4, 12), np.float32))
    cases = [
        lambda P, V, G: (P, V, G * 2.0),                     # a tree
        lambda P, V, G: (P, _strided(big, V), G * 2.0),      # a strided velocity
        lambda P, V, G: (P, V, be.array(2.0 * g0, dtype=np.float64)),   # another dtype
    ]
    for make in cases:
        P, V, G = be.array(p0), be.array(v0), be.array(g0)
        P2, V2, G2 = make(P, V, G)
        be.sgd_momentum(P2, V2, G2, 0.1, 0.9)
        np.testing.assert_allclose(V2.get(), want_v, rtol=1e-6)
        np.testing.assert_allclose(P.get(), want_p, rtol=1e-6)
    P = be.array(p0)
    be.sgd_momentum(P, P, be.array(g0), 0.1, 0.9)          # velocity and parameter one tensor
    assert calls == []
    be.sgd_momentum(be.array(p0), be.array(v0), be.array(g0), 0.1, 0.9)
    assert calls == [1]


def _strided(big, V):
    view = big[:, ::2]
    view[:] = V
    return view
