"""neon's extra layers and containers (Deconvolution, LRN, Convolution_bias, Reshape, SkipNode,
BranchNode/Tree, MergeSum, MergeBroadcast, gradient accumulation) against float64 numpy
references, and their gradients against central differences (check_layer)."""
from __future__ import annotations

import numpy as np
import pytest
from test_nn_layers import check_layer, rand

from neonlike.backends import gen_backend
from neonlike.initializers import Gaussian
from neonlike.layers import (LRN, BranchNode, Convolution, Convolution_bias, Deconvolution, Linear,
                             MergeBroadcast, MergeSum, Reshape, SkipNode, Tree)

N = 3


@pytest.fixture
def be():
    return gen_backend("cpu", rng_seed=0, datatype=np.float64, batch_size=N)


def lrn_ref(x, depth, ascale, bpower):
    """x (C, H, W, N)."""
    C, h = x.shape[0], depth // 2
    sq = np.pad(x * x, [(h, h)] + [(0, 0)] * (x.ndim - 1))
    denom = 1 + ascale / depth * sum(sq[j:j + C] for j in range(depth))
    return x * denom ** -bpower


def test_lrn_values_and_gradient(be):
    shape = (5, 2, 2)
    x = rand((20, N), seed=1)
    layer = LRN(depth=3, ascale=0.5, bpower=0.75)
    layer.configure(shape)
    layer.allocate()
    want = lrn_ref(x.reshape(shape + (N,)), 3, 0.5, 0.75).reshape(20, N)
    np.testing.assert_allclose(layer.fprop(be.array(x)).get(), want, rtol=1e-12)
    check_layer(be, LRN(depth=3, ascale=0.5, bpower=0.75), shape, x)


def test_lrn_rejects_even_depth(be):
    with pytest.raises(ValueError, match="odd"):
        LRN(depth=4)


def deconv_ref(x, W, C, R, S):
    """x (K, P, Q, N), W (C*R*S, K): each input pixel scatters W's window (stride 1, pad 0)."""
    K, P, Q, n = x.shape
    F = W.reshape(C, R, S, K)
    out = np.zeros((C, P + R - 1, Q + S - 1, n))
    for p in range(P):
        for q in range(Q):
            out[:, p:p + R, q:q + S] += np.einsum("crsk,kn->crsn", F, x[:, p, q])
    return out


def test_deconvolution_values_and_gradients(be):
    shape = (2, 3, 3)
    x = rand((18, N), seed=2)
    layer = Deconvolution((2, 2, 3), init=Gaussian(0, 0.5))
    layer.configure(shape)
    layer.allocate()
    assert layer.out_shape == (3, 4, 4)
    want = deconv_ref(x.reshape(shape + (N,)), layer.W.get(), 3, 2, 2).reshape(-1, N)
    np.testing.assert_allclose(layer.fprop(be.array(x)).get(), want, rtol=1e-10, atol=1e-12)
    check_layer(be, Deconvolution((2, 2, 3), init=Gaussian(0, 0.5)), shape, x, params=("W",))


def test_convolution_bias_is_conv_plus_bias(be):
    shape = (2, 4, 4)
    x = rand((32, N), seed=3)
    fused = Convolution_bias((3, 3, 2), init=Gaussian(0, 0.5), bias=Gaussian(0, 1.0))
    fused.configure(shape)
    fused.allocate()
    plain = Convolution((3, 3, 2))
    plain.configure(shape)
    plain.allocate()
    plain.set_params({"params": {"W": fused.W.get()}})
    out = plain.fprop(be.array(x)).get().reshape(2, -1, N) + fused.weight_bias.get()[:, :, None]
    np.testing.assert_allclose(fused.fprop(be.array(x)).get(), out.reshape(-1, N), rtol=1e-12)
    check_layer(be, Convolution_bias((3, 3, 2), init=Gaussian(0, 0.5), bias=Gaussian(0, 1.0)),
                shape, x, params=("W",))
    e = rand((2 * 4, N), seed=11)    # d out / d bias_k is 1 at every pixel of filter k
    fused.bprop(be.array(e))
    np.testing.assert_allclose(fused.grad_bias.get(), e.reshape(2, -1).sum(1, keepdims=True),
                               rtol=1e-12)


def test_reshape_shapes_and_passes_through(be):
    layer = Reshape((0, -1, 2))
    layer.configure((3, 4, 2))
    assert layer.out_shape == (3, 4, 2)
    layer = Reshape((4, -1))
    layer.configure((2, 2, 3))
    assert layer.out_shape == (4, 3) and layer.out_shape_t == (4, 3 * N)
    x = rand((12, N))
    np.testing.assert_array_equal(layer.fprop(be.array(x)).get(), x.reshape(4, 3 * N))
    np.testing.assert_array_equal(layer.bprop(be.array(x.reshape(4, 3 * N))).get(), x)
    with pytest.raises(ValueError, match="cannot reshape"):
        Reshape((5, -1)).configure((2, 2, 3))


def test_skipnode_gradient(be):
    check_layer(be, SkipNode(), (4,), rand((4, N)))


@pytest.mark.parametrize("kind", ["sum", "depth", "stack"])
def test_merges_values_and_gradient(be, kind):
    def paths():
        return [[Linear(3, init=Gaussian(0, 0.5))], [Linear(3, init=Gaussian(0, 0.5))]]
    x = rand((4, N), seed=4)
    layer = MergeSum(paths()) if kind == "sum" else MergeBroadcast(paths(), merge=kind)
    layer.configure((4,))
    layer.allocate()
    Ws = [p.layers[0].W.get() for p in layer.layers]
    outs = [W @ x for W in Ws]
    want = outs[0] + outs[1] if kind == "sum" else np.concatenate(outs)
    np.testing.assert_allclose(layer.fprop(be.array(x)).get(), want, rtol=1e-12)
    fresh = MergeSum(paths()) if kind == "sum" else MergeBroadcast(paths(), merge=kind)
    check_layer(be, fresh, (4,), x)


def test_tree_paths_share_the_trunk_and_add_errors(be):
    bnode = BranchNode(name="extra_test_bnode")
    trunk, b1, b2 = (Linear(4, init=Gaussian(0, 0.5)), Linear(2, init=Gaussian(0, 0.5)),
                     Linear(3, init=Gaussian(0, 0.5)))
    tree = Tree([[trunk, bnode, b1], [bnode, b2]])
    tree.configure((5,))
    tree.allocate()
    tree.allocate_deltas()
    trunk.deltas = be.iobuf((5,))
    x = rand((5, N), seed=5)
    out = tree.fprop(be.array(x))
    Wt, W1, W2 = trunk.W.get(), b1.W.get(), b2.W.get()
    np.testing.assert_allclose(out[0].get(), W1 @ Wt @ x, rtol=1e-12)
    np.testing.assert_allclose(out[1].get(), W2 @ Wt @ x, rtol=1e-12)
    e1, e2 = rand((2, N), seed=6), rand((3, N), seed=7)
    tree.bprop([be.array(e1), be.array(e2)])
    np.testing.assert_allclose(trunk.deltas.get(), Wt.T @ (W1.T @ e1 + W2.T @ e2), rtol=1e-12)
    np.testing.assert_allclose(trunk.dW.get(), (W1.T @ e1 + W2.T @ e2) @ x.T, rtol=1e-12)


def test_acc_on_adds_gradients(be):
    layer = Linear(2, init=Gaussian(0, 0.5))
    layer.configure((3,))
    with pytest.raises(BufferError):
        layer.set_acc_on(True)
    layer.allocate(accumulate_updates=True)
    x, e1, e2 = rand((3, N), seed=8), rand((2, N), seed=9), rand((2, N), seed=10)
    layer.fprop(be.array(x))
    layer.bprop(be.array(e1))
    layer.set_acc_on(True)
    layer.bprop(be.array(e2))
    np.testing.assert_allclose(layer.dW.get(), (e1 + e2) @ x.T, rtol=1e-12)
    layer.set_acc_on(False)
    layer.bprop(be.array(e2))
    np.testing.assert_allclose(layer.dW.get(), e2 @ x.T, rtol=1e-12)
