"""The GPU backend's convolution, pooling and batch norm (gpu/nn.py), every result compared with
the CPU backend's (whose kernels tests/test_nn_ops.py checks against numpy), on two devices:
'emulated', test_gpu_offline.py's (the kernels of gpu/nn_source.py run as their host build
(g++), cuBLAS as emulated GEMM, op-trees as numpy stages), and 'device', a real GPU (skipped,
with the reason, where gen_backend('gpu') cannot be made). The kernels compile with nvcc here.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from neonlike.backends.gpu import compile as CC
from neonlike.backends.gpu import nn as GN
from neonlike.backends.gpu import nn_source as NS

from conftest import make_backend
from test_gpu_offline import cpu, example_error, gpu, needs_nvcc  # noqa: F401  (fixtures)

DEFAULT_CHUNK = GN.CHUNK_BYTES
TOL = {np.float64: 1e-10, np.float32: 2e-5, np.float16: 2e-2}


def close(a, b, dtype):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    tol = TOL[dtype]
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(1.0, np.nanmax(np.abs(b))))


@needs_nvcc
def test_nn_kernels_compile_for_sm90(tmp_path, monkeypatch):
    monkeypatch.setenv("NEONLIKE_CACHE_DIR", str(tmp_path))
    CC.clear_memory()
    assert CC.is_whole_elf(CC.compile_cubin(NS.NN_SOURCE, "nl_nn", "sm_90"))
    CC.clear_memory()


def test_kernel_names_and_formats_match_the_source():
    """Every (kernel, dtype, index width) is instantiated, and its pycuda format has one letter a
    parameter of the extern "C" signature."""
    for base, dtype, wide in itertools.product(("nl_im2col", "nl_col2im", "nl_pool",
                                                "nl_pool_bprop"), ("float32", "float64"),
                                               (False, True)):
        name, fmt = NS.kernel(base, dtype, wide)
        assert name.endswith("_i64") == wide and name.startswith(base)
        head = NS.NN_SOURCE.split(f"void {base}_##suffix##isuffix(")[1].split(")")[0]
        params = head.replace("NL_CONV_GEOMETRY", ",".join(NS.CONV_GEOMETRY)) \
            .replace("NL_POOL_GEOMETRY", ",".join(NS.POOL_GEOMETRY)).split(",")
        assert len(params) == len(fmt), (name, params, fmt)
        scalar = "d" if dtype == "float64" else "f"
        assert set(fmt) <= set("Pqi") | {scalar}


# (N, C, K, DHW, TRS, pad, stride, dilation, filter_layout)
CONVS = [
    (4, 3, 5, (1, 6, 7), (1, 3, 3), (0, 1, 1), (1, 1, 1), (1, 1, 1), "CTRSK"),
    (3, 2, 4, (1, 9, 8), (1, 3, 2), (0, 0, 1), (1, 2, 3), (1, 1, 1), "CTRSK"),
    (2, 3, 2, (1, 9, 9), (1, 3, 3), (0, 2, 1), (1, 1, 2), (1, 2, 2), "KCTRS"),
    (2, 2, 3, (4, 5, 5), (2, 3, 2), (1, 1, 0), (2, 1, 2), (1, 1, 1), "CTRSK"),
    (5, 4, 6, (1, 4, 4), (1, 1, 1), (0, 0, 0), (1, 1, 1), (1, 1, 1), "CTRSK"),   # pointwise
    (5, 4, 6, (1, 4, 4), (1, 1, 1), (0, 0, 0), (1, 1, 1), (1, 1, 1), "KCTRS"),
    (1, 1, 1, (1, 5, 5), (1, 5, 5), (0, 2, 2), (1, 1, 1), (1, 1, 1), "CTRSK"),
]


def conv_layers(case, dtype):
    N, C, K, (D, H, W), (T, R, S), pad, st, dil, fl = case
    return [be.conv_layer(dtype, N, C, K, D, H, W, T, R, S, *pad, *st, *dil, filter_layout=fl)
            for be in BES]


BES: list = []


@pytest.fixture(params=["emulated", "device"])
def both(request, cpu, monkeypatch):  # noqa: F811
    """(GPU backend, CPU backend), the GPU emulated or real."""
    gpu = request.getfixturevalue("gpu") if request.param == "emulated" else \
        make_backend("gpu")
    # blocks of a few columns, so that every conv runs over several im2col blocks
    monkeypatch.setattr(GN, "CHUNK_BYTES", 700)
    BES[:] = [gpu, cpu]
    yield gpu, cpu
    BES.clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("case", CONVS)
def test_conv_fprop_bprop_update_match_the_cpu(both, case, dtype):
    rng = np.random.default_rng(7)
    layers = conv_layers(case, dtype)
    lay = layers[1]
    iv, fv = rng.normal(size=lay.dimI), rng.normal(size=lay.dimF)
    ev = rng.normal(size=lay.dimO)
    res = []
    for be, layer in zip(both, layers):
        I, F, E = (be.array(v, dtype=dtype) for v in (iv, fv, ev))
        O, G, U = (be.empty(d, dtype=dtype) for d in (layer.dimO, layer.dimI, layer.dimF))
        be.fprop_conv(layer, I, F, O)
        be.bprop_conv(layer, F, E, G)
        be.update_conv(layer, I, E, U)
        res.append([t.get() for t in (O, G, U)])
    for g, c in zip(*res):
        close(g, c, dtype)


@pytest.mark.parametrize("variant", ["alpha_beta", "x", "bias_relu_bsum", "brelu",
                                     "brelu_x", "views2d", "strided_out"])
@pytest.mark.parametrize("op", ["fprop", "bprop"])
def test_conv_options_match_the_cpu(both, op, variant):
    dtype = np.float32
    rng = np.random.default_rng(3)
    layers = conv_layers(CONVS[1], dtype)
    lay = layers[1]
    fprop = op == "fprop"
    din, dout = (lay.dimI, lay.dimO) if fprop else (lay.dimO, lay.dimI)
    ch = dout[0]
    vals = {k: rng.normal(size=s) for k, s in (("src", din), ("f", lay.dimF), ("o", dout),
                                                ("x", dout), ("b", (ch, 1)))}
    res = []
    for be, layer in zip(both, layers):
        src, F = be.array(vals["src"], dtype=dtype), be.array(vals["f"], dtype=dtype)
        O = be.array(vals["o"], dtype=dtype)
        kw, extra = {}, []
        if variant == "alpha_beta":
            kw = dict(alpha=0.5, beta=-2.0)
        elif variant == "x":
            kw = dict(X=be.array(vals["x"], dtype=dtype), alpha=1.5, beta=0.25)
        elif variant == "bias_relu_bsum":
            s = be.empty((ch, 1), dtype=dtype)
            kw = dict(bias=be.array(vals["b"], dtype=dtype), relu=True, slope=0.1, bsum=s)
            extra = [s]
        elif variant == "brelu":
            kw = dict(brelu=True, slope=0.2)
        elif variant == "brelu_x":
            kw = dict(brelu=True, X=be.array(vals["x"], dtype=dtype))
        elif variant == "views2d":
            src = src.reshape(din[0] * int(np.prod(din[1:4])), din[4])
            O = O.reshape(int(np.prod(dout[:4])), dout[4])
        out = O
        if variant == "strided_out":     # a view of a wider tensor: a temp copied back
            wide = be.array(np.zeros(dout[:4] + (dout[4] * 2,)), dtype=dtype)
            out = wide[..., ::2] if len(dout) == 5 else wide
            out = wide.reshape(-1, dout[4] * 2)[:, ::2]
            extra = [wide]
        if fprop:
            be.fprop_conv(layer, src, F, out, **kw)
        else:
            be.bprop_conv(layer, F, src, out, **kw)
        res.append([t.get() for t in [out] + extra])
    for g, c in zip(*res):
        close(g, c, dtype)


def test_update_conv_beta_and_grad_bias_match_the_cpu(both):
    dtype = np.float64
    rng = np.random.default_rng(5)
    layers = conv_layers(CONVS[3], dtype)
    lay = layers[1]
    iv, ev, uv = (rng.normal(size=s) for s in (lay.dimI, lay.dimO, lay.dimF))
    res = []
    for be, layer in zip(both, layers):
        U, gb = be.array(uv, dtype=dtype), be.empty((layer.K, 1), dtype=dtype)
        be.update_conv(layer, be.array(iv, dtype=dtype), be.array(ev, dtype=dtype), U,
                       alpha=0.5, beta=0.75, grad_bias=gb)
        res.append((U.get(), gb.get()))
    for g, c in zip(*res):
        close(g, c, dtype)


# (op, N, C, DHW, JTRS, pad (c, d, h, w), stride or None)
POOLS = [
    ("max", 4, 3, (1, 6, 6), (1, 1, 2, 2), (0, 0, 0, 0), None),
    ("max", 3, 2, (1, 7, 6), (1, 1, 3, 3), (0, 0, 1, 1), (1, 1, 2, 2)),
    ("avg", 3, 2, (1, 7, 6), (1, 1, 3, 3), (0, 0, 1, 1), (1, 1, 2, 2)),
    ("max", 2, 5, (3, 4, 4), (3, 2, 2, 2), (1, 1, 0, 1), (2, 1, 2, 1)),
    ("avg", 2, 5, (3, 4, 4), (3, 2, 2, 2), (1, 1, 0, 1), (2, 1, 2, 1)),
    ("l2", 3, 2, (1, 5, 5), (1, 1, 3, 3), (0, 0, 1, 1), (1, 1, 1, 1)),
]


def pool_layers(case, dtype):
    op, N, C, (D, H, W), (J, T, R, S), pad, st = case
    st = st or (None,) * 4
    return [be.pool_layer(dtype, op, N, C, D, H, W, J, T, R, S, *pad, *st) for be in BES]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("case", POOLS)
def test_pool_fprop_bprop_match_the_cpu(both, case, dtype):
    rng = np.random.default_rng(11)
    layers = pool_layers(case, dtype)
    lay = layers[1]
    iv = rng.normal(size=lay.dimI)
    iv.flat[::7] = iv.flat[1::7]         # ties: the first maximum wins on both
    ev = rng.normal(size=lay.dimO)
    res = []
    for be, layer in zip(both, layers):
        I, O = be.array(iv, dtype=dtype), be.array(np.ones(lay.dimO), dtype=dtype)
        am = be.empty(layer.dimO, dtype=np.int32)
        be.fprop_pool(layer, I, O, am, beta=0.5)
        out = [O.get()] + ([am.get()] if layer.op == "max" else [])
        if layer.op != "l2":
            G = be.array(np.ones(lay.dimI), dtype=dtype)
            be.bprop_pool(layer, be.array(ev, dtype=dtype), G, am, alpha=2.0, beta=-1.0)
            out.append(G.get())
        res.append(out)
    for g, c in zip(*res):
        if g.dtype.kind == "i":
            np.testing.assert_array_equal(g, c)
        else:
            close(g, c, dtype)


@pytest.mark.parametrize("am_dtype", [np.uint8, np.uint16, np.float32])
def test_pool_argmax_of_other_dtypes_and_nans(both, am_dtype):
    layers = pool_layers(POOLS[1], np.float32)
    lay = layers[1]
    iv = np.random.default_rng(2).normal(size=lay.dimI)
    iv[0, 0, 2, 3, :] = np.nan           # a NaN wins its windows
    iv[1, 0, 4, :, 0] = -np.inf
    res = []
    for be, layer in zip(both, layers):
        O, am = be.empty(layer.dimO2), be.empty(layer.dimO2, dtype=am_dtype)
        be.fprop_pool(layer, be.array(iv.reshape(lay.dimI2)), O, am)
        G = be.empty(layer.dimI)
        be.bprop_pool(layer, be.ones(layer.dimO2), G, am)
        res.append((O.get(), am.get(), G.get()))
    for g, c in zip(*res):
        np.testing.assert_array_equal(g, c)
    assert np.isnan(res[0][0]).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_geometries_match_the_cpu(both, dtype):
    """Convolutions and pools of random shapes, windows, padding, strides and dilations."""
    rng = np.random.default_rng(1234)
    for _ in range(12):
        D = int(rng.integers(1, 3))
        H, W = (int(v) for v in rng.integers(3, 8, 2))
        T = int(rng.integers(1, D + 1))
        R, S = int(rng.integers(1, H + 1)), int(rng.integers(1, W + 1))
        pads = tuple(int(rng.integers(0, w)) for w in (T, R, S))
        strides = tuple(int(v) for v in rng.integers(1, 4, 3))
        dils = (1,) + tuple(int(rng.integers(1, 3)) if w * 2 - 1 <= x else 1
                            for w, x in ((R, H), (S, W)))
        N, C, K = (int(v) for v in rng.integers(1, 4, 3))
        case = (N, C, K, (D, H, W), (T, R, S), pads, strides, dils,
                ("CTRSK", "KCTRS")[int(rng.integers(2))])
        test_conv_fprop_bprop_update_match_the_cpu(both, case, dtype)
        J = int(rng.integers(1, C + 1))
        pool = (("max", "avg")[int(rng.integers(2))], N, C, (D, H, W), (J, T, R, S),
                (int(rng.integers(0, J)),) + pads, (int(rng.integers(1, 3)),) + strides)
        test_pool_fprop_bprop_match_the_cpu(both, pool, dtype)


def test_batch_norm_matches_the_cpu(both):
    rng = np.random.default_rng(4)
    F, N = 6, 10
    xv, dv = rng.normal(2, 3, (F, N)), rng.normal(size=(F, N))
    gv, bv = rng.normal(size=(F, 1)), rng.normal(size=(F, 1))
    res = []
    for be in both:
        x, y, d_in = be.array(xv), be.empty((F, N)), be.array(dv)
        xsum, xvar, gmean, gvar = (be.zeros((F, 1)) for _ in range(4))
        gamma, beta = be.array(gv), be.array(bv)
        be.compound_fprop_bn(x, xsum, xvar, gmean, gvar, gamma, beta, y, 1e-5, 0.9, True,
                             relu=True)
        d_out, gg, gb = be.empty((F, N)), be.empty((F, 1)), be.empty((F, 1))
        be.compound_bprop_bn(d_out, gg, gb, d_in, x, xsum, xvar, gamma, 1e-5)
        res.append([t.get() for t in (y, xsum, xvar, gmean, gvar, d_out, gg, gb)])
    for g, c in zip(*res):
        close(g, c, np.float32)


def test_bad_operands_are_clear_errors_and_leave_outputs_untouched(both):
    gpu, cpu = both
    layer = conv_layers(CONVS[0], np.float32)[0]
    I, F = gpu.ones(layer.dimI), gpu.ones(layer.dimF)
    O = gpu.array(np.full(layer.dimO, 3.0))
    with pytest.raises(ValueError, match=r"fprop_conv: I has shape \(3, 1, 6, 7, 5\), expected"):
        gpu.fprop_conv(layer, gpu.ones((3, 1, 6, 7, 5)), F, O)
    with pytest.raises(TypeError, match="F must be a GPU Tensor, got CPUTensor"):
        gpu.fprop_conv(layer, I, cpu.ones(layer.dimF), O)
    with pytest.raises(ValueError, match="F has dtype float64, expected float32"):
        gpu.fprop_conv(layer, I, gpu.ones(layer.dimF, dtype=np.float64), O)
    with pytest.raises(ValueError, match="relu and brelu exclude each other"):
        gpu.fprop_conv(layer, I, F, O, relu=True, brelu=True)
    with pytest.raises(TypeError, match="layer must be a ConvLayer"):
        gpu.fprop_conv(pool_layers(POOLS[0], np.float32)[0], I, F, O)
    np.testing.assert_array_equal(O.get(), 3.0)
    pl = pool_layers(POOLS[3], np.float32)[0]
    with pytest.raises(ValueError, match="argmax dtype uint8 cannot hold"):
        pool_big = gpu.pool_layer(np.float32, "max", 2, 1, 1, 20, 20, 1, 1, 17, 17)
        gpu.fprop_pool(pool_big, gpu.ones(pool_big.dimI), gpu.empty(pool_big.dimO),
                       gpu.empty(pool_big.dimO, dtype=np.uint8))
    with pytest.raises(ValueError, match="max pooling needs the argmax"):
        gpu.bprop_pool(pl, gpu.ones(pl.dimO), gpu.empty(pl.dimI))


@pytest.mark.parametrize("script,epochs,most", [("convnet.py", "1", 30.0),
                                                ("mnist_mlp.py", "2", 30.0)])
def test_examples_train_on_the_gpu_as_on_the_cpu(both, tmp_path, monkeypatch, script, epochs,
                                                  most):
    """`python examples/<script> -b gpu` in this process (emulated: the fixture's patches make
    every NervanaGPU one on the emulated device), against the same run on the CPU: the host
    RandomState draws the same initial weights, so the two learn the same model."""
    monkeypatch.setattr(GN, "CHUNK_BYTES", DEFAULT_CHUNK)   # whole layers, not a few columns
    pytest.importorskip("sklearn")
    errors = [example_error(monkeypatch, script, "-b", b, "-r", "0", "-z", "32", "-e", epochs,
                            "-w", str(tmp_path), "--no_progress_bar") for b in ("gpu", "cpu")]
    assert errors[0] <= most and abs(errors[0] - errors[1]) <= 1.0, errors


def test_conv_and_pool_nodes_run_as_gpu_stages_and_differentiate_as_on_the_cpu(both):
    """Op-tree conv and pool nodes (neonlike/compound.py) become COMPOUND stages that run the
    GPU's conv and pool kernels (no host evaluation), and Autodiff's gradients through them
    match the CPU's."""
    from neonlike.backends.autodiff import Autodiff
    from neonlike.compound import conv, pool
    gpu, cpu = both
    rng = np.random.default_rng(9)
    xv, fv = rng.normal(size=(2, 1, 7, 6, 3)), rng.normal(size=(2, 1, 3, 3, 4))
    geometry = dict(padding=(0, 1, 1), strides=(1, 1, 2), dilation=(1, 1, 1))
    res = []
    for be in both:
        X, F = be.array(xv), be.array(fv)
        y = be.tanh(conv(X, F, **geometry))
        z = pool(y, "max", (1, 2, 2), (0, 1, 0), (1, 2, 1)) * 2.0 + \
            pool(y, "avg", (1, 2, 2), (0, 1, 0), (1, 2, 1))
        out = be.empty(z.shape)
        emulated = hasattr(gpu, "fake")
        before = len(gpu.fake.launches) if emulated else 0
        out[:] = z
        if be is gpu and emulated:
            names = gpu.fake.launches[before:]
            assert any(n.startswith("nl_im2col") for n in names)
            assert sum(n.startswith("nl_pool") for n in names) == 2
        loss = be.sum(be.reshape(z * z, (1, -1)), axis=1)
        grads = Autodiff(loss, be).get_grad_asnumpyarray([X, F])
        res.append([out.get()] + grads)
    for g, c in zip(*res):
        close(g, c, np.float32)


def test_lrn_matches_the_cpu(both):
    """neon's LRN (op-trees over a padded scratch buffer, the same code on every device)."""
    rng = np.random.default_rng(6)
    dims = (6, 1, 3, 4, 5)
    iv, ev = rng.normal(size=dims), rng.normal(size=dims)
    res = []
    for be in both:
        layer = be.lrn_layer(np.float32, 5, 6, 1, 3, 4, J=5)
        I, E = be.array(iv), be.array(ev)
        O, denom, delta = be.empty(dims), be.empty(dims), be.empty(dims)
        be.fprop_lrn(layer, I, O, denom, ascale=0.3, bpower=0.75)
        be.bprop_lrn(layer, I, O, E, delta, denom, ascale=0.3, bpower=0.75)
        res.append([t.get() for t in (O, denom, delta)])
    for g, c in zip(*res):
        close(g, c, np.float32)


def test_the_64_bit_index_kernels_match_the_cpu(both, monkeypatch):
    """The _i64 variants (taken where an index could pass 2**31 - 1), forced on small shapes."""
    monkeypatch.setattr(GN, "INDEX32_MAX", 0)
    log = getattr(both[0], "fake", None)
    before = len(log.launches) if log else 0
    for case in (CONVS[1], CONVS[3]):
        test_conv_fprop_bprop_update_match_the_cpu(both, case, np.float64)
    for case in (POOLS[3], POOLS[4]):
        test_pool_fprop_bprop_match_the_cpu(both, case, np.float32)
    if log:
        names = [n for n in log.launches[before:] if n.startswith(("nl_im2col", "nl_col2im",
                                                                   "nl_pool"))]
        assert names and all(n.endswith("_i64") for n in names)
