"""ngraph's convolution and pooling (neonlike/ngraph/op_graph/convolution.py, pooling.py) on both
transformers: upstream's build-time checks with upstream's texts, values against brute-force
numpy loops, deriv against central differences, and a small convnet trained by deriv/assign."""
from __future__ import annotations

import numpy as np
import pytest

import neonlike.ngraph as ng
from neonlike.ngraph.frontends.neon import ar, ax
from neonlike.ngraph.op_graph.axes import output_dim, spatial_axis
from test_compound import brute_conv, brute_pool
from test_ngraph_ops import check_deriv, close, rand

TRANSFORMERS = {"numpy": ng.NumPyTransformer, "cpu": ng.make_transformer_factory("cpu")}
F64 = np.float64
PAD = dict(pad_d=0, pad_h=1, pad_w=0)
STR = dict(str_d=1, str_h=1, str_w=2)


@pytest.fixture(params=sorted(TRANSFORMERS))
def make(request):
    return TRANSFORMERS[request.param]


def image_axes(C, D, H, W, N):
    """Fresh (C, D, H, W, N) input axes with neon's roles, N the batch axis."""
    return ng.make_axes([ng.make_axis(C, name="C", roles=[ar.Channel]),
                         ng.make_axis(D, name="D", roles=[ar.Depth]),
                         ng.make_axis(H, name="H", roles=[ar.Height]),
                         ng.make_axis(W, name="W", roles=[ar.Width]),
                         ng.make_axis(N, name="N", batch=True)])


def filter_axes(C_axis, T, R, S, K):
    return ng.make_axes([C_axis, ng.make_axis(T, name="T", roles=[ar.Depth]),
                         ng.make_axis(R, name="R", roles=[ar.Height]),
                         ng.make_axis(S, name="S", roles=[ar.Width]),
                         ng.make_axis(K, name="K", roles=[ar.Channelout])])


def conv_out_axes(ax_i, ax_f, pad, stride):
    """upstream's test recipe: K as a new channel axis, spatial_axis for D, H, W, then N."""
    return ng.make_axes([
        ng.make_axis(ax_f.role_axes(ar.Channelout)[0].length, name="C", roles=[ar.Channel]),
        spatial_axis(ax_i, ax_f, pad["pad_d"], stride["str_d"], role=ar.Depth),
        spatial_axis(ax_i, ax_f, pad["pad_h"], stride["str_h"], role=ar.Height),
        spatial_axis(ax_i, ax_f, pad["pad_w"], stride["str_w"], role=ar.Width),
        ax_i[4]])


def pool_out_axes(ax_i, params):
    return ng.make_axes([ax_i[0]] + [
        spatial_axis(ax_i, params[w], params["pad_" + d], params["str_" + d], role=r)
        for w, d, r in (("T", "d", ar.Depth), ("R", "h", ar.Height), ("S", "w", ar.Width))]
        + [ax_i[4]])


def pool_params(op, T=1, R=2, S=2, pads=(0, 0, 0), strides=(1, 2, 2)):
    return dict(op=op, J=1, T=T, R=R, S=S, pad_c=0, pad_d=pads[0], pad_h=pads[1],
                pad_w=pads[2], str_c=1, str_d=strides[0], str_h=strides[1], str_w=strides[2])


# **************** upstream's build-time checks (tests/test_conv.py, Dec 2016) ****************

def _conv_params():
    params = dict(pad_d=0, pad_h=0, pad_w=0)
    params.update(dict(str_d=1, str_h=1, str_w=1))
    return params


def test_wrong_filters_shape_length():
    ax_i = ng.make_axes([ax.C, ax.D, ax.H, ax.W, ax.N])
    ax_f = ng.make_axes([ax.C, ax.T, ax.R, ax.S])
    inputs, filters = ng.placeholder(ax_i), ng.placeholder(ax_f)
    with pytest.raises(ValueError) as exinfo:
        ng.convolution(_conv_params(), inputs, filters, {})
    assert str(exinfo.value) == f"convolution filter shape must be length 5, found {len(ax_f)}"


def test_wrong_input_shape_length():
    ax_i = ng.make_axes([ax.C, ax.D, ax.H, ax.W])
    ax_f = ng.make_axes([ax.C, ax.T, ax.R, ax.S, ax.K])
    inputs, filters = ng.placeholder(ax_i), ng.placeholder(ax_f)
    with pytest.raises(ValueError) as exinfo:
        ng.convolution(_conv_params(), inputs, filters, {})
    assert str(exinfo.value) == f"convolution input shape must be length 5, found {len(ax_i)}"


def test_first_axes_not_same():
    ax_i = ng.make_axes([ax.D, ax.C, ax.H, ax.W, ax.N])
    ax_f = ng.make_axes([ax.C, ax.T, ax.R, ax.S, ax.K])
    inputs, filters = ng.placeholder(ax_i), ng.placeholder(ax_f)
    with pytest.raises(ValueError) as exinfo:
        ng.convolution(_conv_params(), inputs, filters, {})
    assert str(exinfo.value) == (f"the first axis in input {inputs.axes[0]} and filter "
                                 f"{filters.axes[0]} are not the same.")


def test_wrong_number_of_batch_axes_at_input():
    ax_C = ng.make_axis(length=3, name="C", batch=True)
    ax_D = ng.make_axis(length=1, name="D", batch=True)
    ax_i = ng.make_axes([ax_C, ax_D, ax.H, ax.W, ax.N])
    ax_f = ng.make_axes([ax_C, ax.T, ax.R, ax.S, ax.K])
    inputs, filters = ng.placeholder(axes=ax_i), ng.placeholder(ax_f)
    with pytest.raises(ValueError) as exinfo:
        ng.convolution(_conv_params(), inputs, filters, {})
    assert str(exinfo.value) == (
        f"Input must have one batch axis.  Found {len(inputs.axes.batch_axes())} batch axes: "
        f"{inputs.axes.batch_axes()} Found {len(inputs.axes.sample_axes())} sample axes: "
        f"{inputs.axes.sample_axes()}.")


def test_more_bad_input_is_named_at_build_time():
    ax_i = image_axes(2, 1, 5, 5, 3)
    ax_f = filter_axes(ax_i[0], 1, 3, 3, 4)
    x, w = ng.placeholder(ax_i), ng.placeholder(ax_f)
    with pytest.raises(ValueError, match=r"missing parameter\(s\) \['str_w'\]"):
        ng.convolution(dict(pad_d=0, pad_h=0, pad_w=0, str_d=1, str_h=1), x, w,
                       conv_out_axes(ax_i, ax_f, _conv_params(), _conv_params()))
    wrong = conv_out_axes(ax_i, ax_f, _conv_params(), _conv_params())   # no padding: H is 3
    with pytest.raises(ValueError, match=r"result axis H(_\d+)? has length 3, the result's lengths are "
                                         r"\(4, 1, 5, 5, 3\)"):
        ng.convolution(dict(_conv_params(), pad_h=1, pad_w=1), x, w, wrong)
    with pytest.raises(ValueError, match="the result needs 5 axes"):
        ng.convolution(_conv_params(), x, w, wrong[:4])
    with pytest.raises(ValueError, match="Unsupported pooling type: sum"):
        ng.pooling(pool_params("sum"), x, pool_out_axes(ax_i, pool_params("max")))
    with pytest.raises(NotImplementedError, match=r"pooling across channels \(J=2"):
        ng.pooling(dict(pool_params("max"), J=2), x, pool_out_axes(ax_i, pool_params("max")))
    with pytest.raises(ValueError, match="Padding dim 2 incompatible with filter size 2"):
        output_dim(5, 2, 2, 1, pooling=True)
    with pytest.raises(ValueError, match="no filter axis has the role"):
        spatial_axis(ax_i, ng.make_axes([ax_i[0]]), 0, 1, role=ar.Height)


# **************** values ****************

@pytest.mark.parametrize("pad, stride", [(dict(pad_d=0, pad_h=0, pad_w=0), _conv_params()),
                                         (PAD, STR)])
def test_convolution_values(make, pad, stride):
    ax_i = image_axes(3, 1, 6, 7, 4)
    ax_f = filter_axes(ax_i[0], 1, 3, 2, 5)
    x, w = ng.placeholder(ax_i, dtype=F64), ng.placeholder(ax_f, dtype=F64)
    y = ng.convolution(dict(pad, **{k: v for k, v in stride.items() if k.startswith("str")}),
                       x, w, axes=conv_out_axes(ax_i, ax_f, pad, stride))
    xv, wv = rand(*ax_i.lengths, seed=1), rand(*ax_f.lengths, seed=2)
    got = make().computation(y, x, w)(xv, wv)
    close(got, brute_conv(xv, wv, [pad["pad_" + d] for d in "dhw"],
                          [stride["str_" + d] for d in "dhw"], (1, 1, 1)))


@pytest.mark.parametrize("op", ["max", "avg"])
def test_pooling_values(make, op):
    ax_i = image_axes(2, 1, 7, 6, 3)
    params = pool_params(op, R=3, S=2, pads=(0, 1, 0), strides=(1, 2, 2))
    x = ng.placeholder(ax_i, dtype=F64)
    y = ng.pooling(params, x, axes=pool_out_axes(ax_i, params))
    xv = rand(*ax_i.lengths, seed=3)
    close(make().computation(y, x)(xv), brute_pool(xv, op, (1, 3, 2), (0, 1, 0), (1, 2, 2)))


# **************** deriv ****************

def test_convolution_deriv_against_central_differences(make):
    ax_i = image_axes(2, 1, 5, 4, 2)
    ax_f = filter_axes(ax_i[0], 1, 2, 2, 3)
    params = dict(PAD, **STR)
    out = conv_out_axes(ax_i, ax_f, PAD, STR)
    check_deriv(make, lambda x, w: ng.tanh(ng.convolution(params, x, w, axes=out)),
                (ax_i, rand(*ax_i.lengths, seed=4)), (ax_f, rand(*ax_f.lengths, seed=5)),
                rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("op", ["max", "avg"])
def test_pooling_deriv_against_central_differences(make, op):
    ax_i = image_axes(2, 1, 5, 5, 2)
    params = pool_params(op, R=3, S=2, pads=(0, 1, 1), strides=(1, 2, 1))
    out = pool_out_axes(ax_i, params)
    xv = np.random.default_rng(6).permutation(np.arange(np.prod(ax_i.lengths))).reshape(
        ax_i.lengths) / 7.0                                   # distinct values: no ties
    check_deriv(make, lambda x: ng.pooling(params, x, axes=out), (ax_i, xv))


def test_upstream_convolution_forward_and_derivatives_agree_across_transformers():
    """upstream's test_convolution (shapes cut down): output, cost and both derivatives of a
    binary cross-entropy over a convolution, the engine against the numpy transformer."""
    ax_i = image_axes(3, 1, 8, 8, 4)
    ax_f = filter_axes(ax_i[0], 1, 2, 2, 8)
    inputs, filters = ng.placeholder(ax_i), ng.placeholder(ax_f)
    output = ng.convolution(_conv_params(), inputs, filters,
                            axes=conv_out_axes(ax_i, ax_f, _conv_params(), _conv_params()))
    targets = ng.placeholder(axes=output.axes)
    costs = ng.cross_entropy_binary(ng.sigmoid(output), targets)
    error = ng.sum(costs, out_axes=()) / ng.batch_size(costs)
    d_inputs, d_filters = ng.deriv(error, inputs), ng.deriv(error, filters)
    values = (rand(*ax_i.lengths, seed=7), rand(*ax_f.lengths, seed=8),
              rand(*output.axes.lengths, seed=9, low=0.1, high=0.9))
    results = [output, error, d_inputs, d_filters]
    numpy = ng.NumPyTransformer().computation(results, inputs, filters, targets)(*values)
    engine = ng.make_transformer_factory("cpu")().computation(
        results, inputs, filters, targets)(*values)
    for a, b in zip(engine, numpy):
        close(a, b, rtol=1e-4, atol=1e-5)


def test_a_small_convnet_learns_with_deriv_and_assign():
    """conv -> relu -> max pool -> dot -> softmax, trained by assign updates on the 'cpu'
    transformer: the cost falls, and the forward conv is computed once per step (shared)."""
    rng = np.random.default_rng(0)
    ax_i = image_axes(1, 1, 6, 6, 16)
    ax_f = filter_axes(ax_i[0], 1, 3, 3, 4)
    Y = ng.make_axis(2, name="Y")
    x, t = ng.placeholder(ax_i), ng.placeholder([Y, ax_i[4]])
    w = ng.variable(ax_f, initial_value=rng.normal(0, 0.3, ax_f.lengths))
    h = ng.maximum(ng.convolution(dict(PAD, pad_w=1, str_d=1, str_h=1, str_w=1), x, w,
                                  axes=conv_out_axes(ax_i, ax_f, dict(PAD, pad_w=1),
                                                     _conv_params())), 0.0)
    params = pool_params("max")
    p = ng.flatten_at(ng.pooling(params, h, axes=pool_out_axes(h.axes, params)), 4)
    v = ng.variable([Y] + [a - 1 for a in p.axes[:1]],
                    initial_value=rng.normal(0, 0.1, (2, p.axes[0].length)))
    y = ng.softmax(ng.dot(v, p))
    cost = ng.sum(ng.cross_entropy_multi(y, t), out_axes=()) / 16.0
    step = ng.doall([ng.assign(w, w - 0.5 * ng.deriv(cost, w)),
                     ng.assign(v, v - 0.5 * ng.deriv(cost, v))])
    tr = ng.make_transformer_factory("cpu")()
    train, evaluate = tr.computation([cost, step], x, t), tr.computation(cost, x, t)
    labels = rng.integers(0, 2, 16)
    images = rng.normal(0, 0.1, ax_i.lengths)
    images[0, 0, :3, :, labels == 1] += 1.0          # class 1: a bright top half
    onehot = np.eye(2)[labels].T
    first = float(evaluate(images, onehot))
    for _ in range(30):
        train(images, onehot)
    assert float(evaluate(images, onehot)) < 0.5 * first
