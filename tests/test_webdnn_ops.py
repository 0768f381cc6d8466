"""neonlike.webdnn.graph operators: semantics, binding errors, and values against numpy
(float64 references, graphs run in float64 on the engine)."""
from __future__ import annotations

import numpy as np
import pytest

from neonlike.axes import make_axis
from neonlike.webdnn.graph import (Axis, AveragePooling2D, Convolution2d, Linear, MaxPooling2D,
                                   Order, OrderNCHW, Placeholder, Reshape, Softmax, Transpose,
                                   Variable, format_with_semantics, relu, run, sigmoid, tanh)
from neonlike.webdnn.lowering import Lowering

RNG = np.random.default_rng(0)


def new(shape, axes=None):
    return Variable(shape, Order(axes or [None] * len(shape)))


def run64(outputs, feeds):
    return run(outputs, feeds, dtype=np.float64)


def conv_ref(x, w, pad, stride, dil=1):
    """x (N, C, H, W), w (C, K, R, S): cross-correlation as neon's fprop_conv."""
    n, c, h, wd = x.shape
    _, k, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    p = (h + 2 * pad - (dil * (r - 1) + 1)) // stride + 1
    q = (wd + 2 * pad - (dil * (s - 1) + 1)) // stride + 1
    out = np.zeros((n, k, p, q))
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dil:i * dil + stride * p:stride, j * dil:j * dil + stride * q:stride]
            out += np.einsum("nchw,ck->nkhw", patch, w[:, :, i, j])
    return out


def pool_ref(x, k, stride, reduce):
    n, c, h, w = x.shape
    p, q = (h - k) // stride + 1, (w - k) // stride + 1
    out = np.empty((n, c, p, q))
    for i in range(p):
        for j in range(q):
            out[:, :, i, j] = reduce(x[:, :, i * stride:i * stride + k, j * stride:j * stride + k],
                                     axis=(2, 3))
    return out


# ---------------------------------------------------------------- convolution
@pytest.mark.parametrize("pad,stride,dil", [(1, 1, 1), (0, 2, 1), (1, 1, 2)])
def test_conv_values_and_axes(pad, stride, dil):
    x, w = new([2, 3, 7, 6]), new([3, 4, 3, 3])
    conv = Convolution2d(None, ksize=3, pad=pad, stride=stride, dilation_rate=dil)
    y, = conv(x, w)
    xa, wa = RNG.standard_normal(x.shape), RNG.standard_normal(w.shape)
    np.testing.assert_allclose(run64(y, {x: xa, w: wa}), conv_ref(xa, wa, pad, stride, dil),
                               rtol=1e-10, atol=1e-10)
    keeps = y.shape[2:] == x.shape[2:]
    assert (y.order.axes[2] == x.order.axes[2]) == keeps
    assert [row.short_name for row in conv.semantics] == \
        ["N", "C1", "H", "W", "C2", "R", "S"] + ([] if keeps else ["P", "Q"])
    assert w.order.axes[0] == x.order.axes[1]          # unified by the layout


@pytest.mark.parametrize("layouts", [None, ("CTRSK",)])
def test_conv_reads_inputs_in_any_order(layouts, monkeypatch):
    """Given axes are found by identity: x in NHWC, w in (S, R, C2, C1); the filters reach the
    backend as (K, C, T, R, S) (the CPU's choice) or, for a backend that takes neon's layout
    only, as (C, T, R, S, K)."""
    if layouts is not None:
        from neonlike.backends.cpu.device import NervanaCPU
        monkeypatch.setattr(NervanaCPU, "conv_filter_layouts", layouts)
    n, c, h, wd, k, r, s = (Axis() for _ in range(7))
    x = Variable([2, 5, 4, 3], Order([n, h, wd, c]))
    w = Variable([3, 3, 4, 3], Order([s, r, k, c]))
    y, = Convolution2d(None, ksize=3, pad=1, stride=1, axis_batch_size=n, axis_in_channel=c,
                       axis_image_height=h, axis_image_width=wd, axis_out_channel=k,
                       axis_kernel_height=r, axis_kernel_width=s)(x, w)
    assert y.order == Order([n, k, h, wd])
    xa, wa = RNG.standard_normal(x.shape), RNG.standard_normal(w.shape)
    ref = conv_ref(xa.transpose(0, 3, 1, 2), wa.transpose(3, 2, 1, 0), 1, 1)
    np.testing.assert_allclose(run64(y, {x: xa, w: wa}), ref, rtol=1e-10, atol=1e-10)


def test_conv_errors_name_the_axis_and_the_operator():
    x, w = new([1, 3, 5, 5]), new([4, 2, 3, 3])         # w's in-channel 4 != x's 3
    with pytest.raises(ValueError, match=r"ConvX: axis_in_channel \?\d+ contradicts input w"):
        Convolution2d("ConvX", ksize=3, pad=1, stride=1, axis_in_channel=x.order.axes[1])(x, w)
    x, w = new([1, 3, 5, 5]), new([3, 2, 3, 3])   # N given at position 1: C1 is then x[0] (1)
    with pytest.raises(ValueError, match=r"ConvY: axis_in_channel \?\d+ contradicts input w"):
        Convolution2d("ConvY", ksize=3, axis_batch_size=x.order.axes[1])(x, w)
    with pytest.raises(ValueError, match="ksize"):
        Convolution2d(None, ksize=5)(new([1, 3, 5, 5]), new([3, 2, 3, 3]))
    with pytest.raises(ValueError, match="has 3 axes, the layout"):
        Convolution2d(None, ksize=3)(new([3, 5, 5]), new([3, 2, 3, 3]))
    with pytest.raises(TypeError, match="takes no argument 'axis_foo'"):
        Convolution2d(None, ksize=3, axis_foo=Axis())
    with pytest.raises(ValueError, match="pad must be"):
        Convolution2d(None, ksize=3, pad=-1)


def test_conv_output_stays_in_neon_layout():
    """conv -> elementwise chain: no transpose statement; the chain is one statement."""
    x, w = new([2, 3, 4, 4]), new([3, 2, 3, 3])
    y, = Convolution2d(None, ksize=3, pad=1)(x, w)
    z = relu(y) * 2.0 + 1.0
    xa, wa = RNG.standard_normal(x.shape), RNG.standard_normal(w.shape)
    lw = Lowering(dtype=np.float64)
    lw.feed({x: xa, w: wa})
    np.testing.assert_allclose(lw.fetch(z), np.maximum(conv_ref(xa, wa, 1, 1), 0) * 2 + 1,
                               rtol=1e-10)
    assert (lw.compound_ops, lw.statements) == (1, 1)


def test_conv_with_placeholder_batch():
    n = Placeholder(label="B")
    x, w = new([n, 2, 4, 4]), new([2, 3, 3, 3])
    y, = Convolution2d(None, ksize=3, pad=1)(x, w)
    assert "shape=(B, 3, 4, 4)" in repr(y)
    with pytest.raises(ValueError, match="set placeholder B first"):
        run64(y, {x: np.zeros((2, 2, 4, 4)), w: np.zeros((2, 3, 3, 3))})
    n.value = 2
    xa, wa = RNG.standard_normal((2, 2, 4, 4)), RNG.standard_normal((2, 3, 3, 3))
    np.testing.assert_allclose(run64(y, {x: xa, w: wa}), conv_ref(xa, wa, 1, 1), atol=1e-10)


# ---------------------------------------------------------------- pooling
@pytest.mark.parametrize("cls,reduce", [(MaxPooling2D, np.max), (AveragePooling2D, np.mean)])
def test_pooling(cls, reduce):
    x = new([2, 3, 6, 4])
    pool = cls(None, ksize=2, stride=2)
    y, = pool(x)
    assert y.shape == (2, 3, 3, 2) and y.order.axes[:2] == x.order.axes[:2]
    assert [r.short_name for r in pool.semantics] == ["N", "C", "H", "W", "P", "Q"]
    xa = RNG.standard_normal(x.shape)
    np.testing.assert_allclose(run64(y, {x: xa}), pool_ref(xa, 2, 2, reduce), atol=1e-12)


# ---------------------------------------------------------------- elementwise
def test_elementwise_chain_is_one_statement():
    x, b = new([3, 4]), new([4])
    b_axis = b.order.axes[0]
    b_axis.unify(x.order.axes[1])
    y = tanh(relu(x * 2.0 - 1.0) + b) / 3.0 + sigmoid(x) ** 2
    assert y.order == x.order
    xa, ba = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    lw = Lowering(dtype=np.float64)
    lw.feed({x: xa, b: ba})
    got = lw.fetch(y)
    ref = np.tanh(np.maximum(xa * 2 - 1, 0) + ba) / 3 + (1 / (1 + np.exp(-xa))) ** 2
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert lw.statements == 1                 # the whole chain: one fused assignment


def test_elementwise_pairs_axes_by_identity_not_position():
    a, b = Axis(), Axis()
    x = Variable([2, 3], Order([a, b]))
    z = Variable([3, 2], Order([b, a]))
    y = x - z                                # z is read through a transposed view
    xa, za = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 2))
    np.testing.assert_allclose(run64(y, {x: xa, z: za}), xa - za.T)
    c = new([5])
    outer = x * c                            # a new axis broadcasts: [a, b, c]
    assert outer.order == Order([a, b, c.order.axes[0]])
    ca = RNG.standard_normal(5)
    np.testing.assert_allclose(run64(outer, {x: xa, c: ca}), xa[:, :, None] * ca)
    cmp = (x > 0.5) + (x <= -0.5) + abs(-x)
    np.testing.assert_allclose(run64(cmp, {x: xa}), (xa > .5) + (xa <= -.5) + abs(xa))


def test_elementwise_size_conflict_on_a_preset_axis():
    x, z = Variable([2, 3], OrderNCHW.axes[:2]), Variable([2, 4], OrderNCHW.axes[:2])
    with pytest.raises(ValueError, match="axis C is 3 in one operand and 4"):
        x + z


# ---------------------------------------------------------------- linear, softmax
def test_linear_and_softmax_over_a_named_meaning():
    x, w = new([4, 5]), new([3, 5])               # w is (out, in): a transposed operand
    lin = Linear(None, axis_in_features=x.order.axes[1], axis_out_features=w.order.axes[0])
    y, = lin(x, w)
    assert [r.short_name for r in lin.semantics] == ["C1", "C2", "B1"]
    sm = Softmax(None, axis=lin.axis_for("C2"))
    p, = sm(y)
    xa, wa = RNG.standard_normal((4, 5)), RNG.standard_normal((3, 5))
    logits = xa @ wa.T
    ref = np.exp(logits - logits.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(run64(p, {x: xa, w: wa}), ref, rtol=1e-12)
    with pytest.raises(ValueError, match=r"SoftX: axis \?\d+ is not an axis of its input"):
        Softmax("SoftX", axis=Axis())(y)


def test_linear_keeps_several_axes():
    x, w = new([2, 3, 4]), new([3, 5])
    lin = Linear(None, axis_in_features=x.order.axes[1])
    y, = lin(x, w)
    assert y.order == Order([x.order.axes[0], w.order.axes[1], x.order.axes[2]])
    xa, wa = RNG.standard_normal(x.shape), RNG.standard_normal(w.shape)
    np.testing.assert_allclose(run64(y, {x: xa, w: wa}), np.einsum("ack,cd->adk", xa, wa),
                               rtol=1e-12)


# ---------------------------------------------------------------- reshape, transpose
def test_transpose_moves_no_data_and_reshape_reads_in_order():
    x = new([2, 3, 4])
    a, b, c = x.order.axes
    t, = Transpose(None, Order([c, a, b]))(x)
    lw = Lowering(dtype=np.float64)
    xa = RNG.standard_normal(x.shape)
    lw.feed({x: xa})
    np.testing.assert_allclose(lw.fetch(t), xa.transpose(2, 0, 1))
    assert lw.statements == 0
    r, = Reshape(None, [4, 6], Order([c, None]))(t)      # keeps c, makes a new axis
    assert r.order.axes[0] == c
    np.testing.assert_allclose(run64(r, {x: xa}), xa.transpose(2, 0, 1).reshape(4, 6))
    with pytest.raises(ValueError, match=r"cannot reshape .* \(24 values\) to \(5, 5\)"):
        Reshape(None, [5, 5])(x)
    with pytest.raises(ValueError, match="is not a permutation"):
        Transpose(None, Order([a, b, Axis()]))(x)


def test_semantics_printing_per_operator():
    x = new([1, 2, 3, 3])
    pool = MaxPooling2D(None, ksize=1, stride=1)
    y, = pool(x)
    assert format_with_semantics(y, pool.semantics).endswith("order=[N, C, H, W]>")


def test_conv_pool_linear_network():
    """conv -> relu -> pool -> reshape -> linear -> softmax, against numpy."""
    x, w = new([2, 2, 6, 6]), new([2, 3, 3, 3])
    y, = Convolution2d(None, ksize=3, pad=1)(x, w)
    h, = MaxPooling2D(None, ksize=2)(relu(y))
    f, = Reshape(None, [2, 27], Order([x.order.axes[0], None]))(h)
    v = new([27, 4])
    logits, = Linear(None)(f, v)
    p, = Softmax(None)(logits)
    xa, wa, va = (RNG.standard_normal(t.shape) for t in (x, w, v))
    ref = pool_ref(np.maximum(conv_ref(xa, wa, 1, 1), 0), 2, 2, np.max).reshape(2, 27) @ va
    ref = np.exp(ref - ref.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(run64(p, {x: xa, w: wa, v: va}), ref, rtol=1e-10)


def test_run_errors():
    x = new([2, 3])
    y = x * 2
    with pytest.raises(ValueError, match=r"Variable\d+ .* is a graph input; feed it"):
        run(y, {})
    with pytest.raises(ValueError, match=r"fed an array of shape \(3, 2\), expected \(2, 3\)"):
        run(y, {x: np.zeros((3, 2))})


def test_ngraph_axes_in_a_webdnn_graph():
    """One axis core: an anonymous ngraph axis sits in an Order and unifies with Axis()."""
    m = make_axis()
    assert m.name is None
    x = Variable([3, 2], Order([m, Axis()]))
    assert m.length == 3
    a = Axis()
    a.unify(m)
    assert a == m and hash(a) == hash(m)
    np.testing.assert_allclose(run64(x + 1, {x: np.ones((3, 2))}), 2 * np.ones((3, 2)))
    import neonlike.ngraph as ng
    assert ng.placeholder(x.axes).axes == x.axes     # x's stand-in in an ngraph graph
