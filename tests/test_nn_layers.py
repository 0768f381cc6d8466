"""The layer library against float64 central differences and numpy: every layer's bprop (error
and parameter gradients), every activation and cost, the metrics, and the optimizers' updates
against hand-computed values. Runs on the reference interpreter (many one-off trees)."""
from __future__ import annotations

import numpy as np
import pytest

from neonlike.backends import gen_backend
from neonlike.initializers import Constant, Gaussian, GlorotUniform, Kaiming, Uniform, Xavier
from neonlike.layers import (Activation, Affine, Bias, Dropout, GeneralizedCost, Linear,
                             LookupTable, Sequential)
from neonlike.optimizers import (Adadelta, Adagrad, Adam, GradientDescentMomentum, MultiOptimizer,
                                 RMSProp, Schedule, StepSchedule)
from neonlike.transforms import (SquareHingeLoss, Accuracy, CrossEntropyBinary, CrossEntropyMulti, Explin, Identity,
                                 Leaky, LogLoss, Logistic, MeanSquared, Misclassification,
                                 Normalizer, Rectlin, Rectlinclip, SmoothL1Loss, Softmax,
                                 SumSquared, Tanh, TopKMisclassification, Transform)

CPU_ENGINE = "reference"
N = 5


@pytest.fixture
def be():
    return gen_backend("cpu", rng_seed=0, datatype=np.float64, batch_size=N)


def rand(shape, lo=-1.0, hi=1.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def numeric(f, x, h=1e-6):
    """Central differences of the scalar f() with respect to the numpy array x (changed in place)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        up = f()
        x[i] = old - h
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * h)
    return g


def check_layer(be, layer, in_shape, x, params=(), rtol=1e-5, atol=1e-7, seed=3):
    """fprop/bprop of one layer: its deltas and its parameter gradients against central
    differences of sum(w * outputs)."""
    layer.configure(in_shape)
    layer.allocate()
    layer.set_deltas()
    X = be.array(x)
    w = None

    def loss():
        X.set(x)
        out = layer.fprop(X).get()
        return float(np.sum(w * out))
    out = layer.fprop(be.array(x)).get()
    w = rand(out.shape, 0.5, 1.5, seed)
    want_dx = numeric(loss, x)
    want_dp = []
    for name in params:
        p = getattr(layer, name)
        host = p.get()

        def ploss(p=p, host=host):
            p.set(host)
            return loss()
        want_dp.append(numeric(ploss, host))
        p.set(host)
    X.set(x)
    layer.fprop(X)
    deltas = layer.bprop(be.array(w))
    np.testing.assert_allclose(deltas.get(), want_dx, rtol=rtol, atol=atol)
    for name, want in zip(params, want_dp):
        grad = getattr(layer, "d" + name if name == "W" else "grad_" + name)
        np.testing.assert_allclose(grad.get(), want, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- layers
def test_linear(be):
    check_layer(be, Linear(4, init=Gaussian(0, 0.5)), (3,), rand((3, N), seed=1), params=("W",))


def test_linear_on_image_shaped_inputs(be):
    check_layer(be, Linear(3, init=Uniform(-1, 1)), (2, 2, 2), rand((8, N), seed=2), params=("W",))


def test_bias_per_feature_and_per_channel(be):
    check_layer(be, Bias(init=Uniform(-1, 1)), (4,), rand((4, N), seed=4), params=("W",))
    check_layer(be, Bias(init=Uniform(-1, 1)), (2, 3, 1), rand((6, N), seed=5), params=("W",))


ACTIVATIONS = [Identity(), Rectlin(), Rectlin(slope=0.2), Leaky(), Rectlinclip(xcut=0.5),
               Rectlinclip(0.1, xcut=0.5),
               Explin(alpha=0.7), Logistic(), Tanh(), Normalizer(4.0)]


@pytest.mark.parametrize("transform", ACTIVATIONS, ids=lambda t: f"{type(t).__name__}")
def test_activation_layers(be, transform):
    x = rand((4, N), seed=6)
    x[np.abs(x) < 0.05] = 0.3          # away from kinks
    x[np.abs(x - 0.5) < 0.05] = 0.7
    check_layer(be, Activation(transform), (4,), x)


def test_softmax_activation_values(be):
    x = rand((4, N), -3, 3, seed=7)
    layer = Activation(Softmax())
    layer.configure((4,))
    layer.allocate()
    y = layer.fprop(be.array(x)).get()
    e = np.exp(x - x.max(0))
    np.testing.assert_allclose(y, e / e.sum(0), rtol=1e-12)


class Swish(Transform):
    """A user's activation with no bprop: the layer differentiates it with Autodiff."""

    def __call__(self, x):
        return x * self.be.sig(x * 1.5)


def test_an_activation_without_bprop_uses_autodiff(be):
    check_layer(be, Activation(Swish()), (4,), rand((4, N), seed=8))


def test_dropout(be):
    layer = Dropout(keep=0.6)
    layer.configure((40,))
    layer.allocate()
    layer.set_deltas()
    x = rand((40, N), seed=9)
    y = layer.fprop(be.array(x)).get()
    mask = layer.keep_mask.get()
    assert set(np.unique(mask)) <= {0.0, 1.0} and 0.3 < mask.mean() < 0.9
    np.testing.assert_array_equal(y, x * mask)
    e = rand((40, N), seed=10)
    np.testing.assert_array_equal(layer.bprop(be.array(e)).get(), e * mask)
    np.testing.assert_allclose(layer.fprop(be.array(x), inference=True).get(), x * 0.6)


def test_lookup_table(be):
    layer = LookupTable(vocab_size=7, embedding_dim=3, init=Uniform(-1, 1))
    ids = np.array([[1, 2, 2, 6, 0], [3, 3, 1, 0, 5]], dtype=float)  # (length 2, batch 5)
    layer.configure((2,))
    layer.allocate()
    W = layer.W.get()
    y = layer.fprop(be.array(ids)).get()
    assert y.shape == (3, 2 * N)
    np.testing.assert_array_equal(y, W[ids.ravel().astype(int)].T)
    err = rand((3, 2 * N), seed=11)
    layer.bprop(be.array(err))
    want = np.zeros((7, 3))
    np.add.at(want, ids.ravel().astype(int), err.T)
    np.testing.assert_allclose(layer.dW.get(), want, rtol=1e-12)
    with pytest.raises(ValueError, match=r"word ids must be in \[0, 7\)"):
        layer.fprop(be.array(ids + 6))


def test_sequential_affine_chain(be):
    """Two Affine layers with biases and activations: the whole stack's input gradient and every
    parameter gradient against central differences."""
    net = Sequential([Affine(4, init=Gaussian(0, 0.7), bias=Uniform(-0.5, 0.5), activation=Tanh()),
                      Affine(3, init=Gaussian(0, 0.7), bias=Uniform(-0.5, 0.5),
                             activation=Logistic())])
    net.configure((3,))
    net.allocate()
    net.allocate_deltas()
    x = rand((3, N), seed=12)
    w = rand((3, N), 0.5, 1.5, seed=13)
    X = be.array(x)

    def loss():
        X.set(x)
        return float(np.sum(w * net.fprop(X).get()))
    loss()
    params = [p for layer in net.layers_to_optimize for (p, _), _ in layer.get_params()]
    wants = []
    for p in params:
        host = p.get()

        def ploss(p=p, host=host):
            p.set(host)
            return loss()
        wants.append(numeric(ploss, host))
        p.set(host)
    loss()
    net.bprop(be.array(w))
    grads = [g for layer in net.layers_to_optimize for (_, g), _ in layer.get_params()]
    for g, want in zip(grads, wants):
        np.testing.assert_allclose(g.get(), want, rtol=1e-5, atol=1e-8)


# ---------------------------------------------------------------- costs and metrics
COSTS = [CrossEntropyBinary(), CrossEntropyMulti(), CrossEntropyMulti(usebits=True),
         SumSquared(), MeanSquared(), SmoothL1Loss(sigma=1.5), SquareHingeLoss(),
         SquareHingeLoss(margin=0.5)]


def _numpy_cost(cost, y, t):
    if isinstance(cost, CrossEntropyBinary):
        return -np.sum(t * np.log(y) + (1 - t) * np.log(1 - y), axis=0)
    if isinstance(cost, CrossEntropyMulti):
        return -np.sum(t * np.log(y), axis=0) * cost.logscale
    if isinstance(cost, SumSquared):
        return np.sum((y - t) ** 2, axis=0) / 2
    if isinstance(cost, MeanSquared):
        return np.mean((y - t) ** 2, axis=0) / 2
    if isinstance(cost, SquareHingeLoss):
        return np.mean(np.maximum(cost.margin - (2 * t - 1) * y, 0) ** 2, axis=0)
    x, s2 = y - t, cost.sigma2
    return np.sum(np.where(np.abs(x) < 1 / s2, 0.5 * s2 * x * x, np.abs(x) - 0.5 / s2), axis=0)


@pytest.mark.parametrize("cost", COSTS, ids=lambda c: type(c).__name__)
def test_costs_against_numpy(be, cost):
    y = np.random.default_rng(14).dirichlet(np.ones(4), N).T
    t = np.eye(4)[:, np.random.default_rng(15).integers(0, 4, N)]
    out = be.empty((1, N))
    out[:] = cost(be.array(y), be.array(t))
    np.testing.assert_allclose(out.get()[0], _numpy_cost(cost, y, t), rtol=1e-10)


@pytest.mark.parametrize("cost, act", [(CrossEntropyBinary(), Logistic(shortcut=True)),
                                       (CrossEntropyMulti(), Softmax())],
                         ids=["binary+logistic", "multi+softmax"])
def test_shortcut_costs_give_the_gradient_of_the_pair(be, cost, act):
    """bprop of these costs is the gradient with respect to the activation's input."""
    x = rand((4, N), -2, 2, seed=16)
    t = np.eye(4)[:, np.random.default_rng(17).integers(0, 4, N)]
    X, T = be.array(x), be.array(t)
    out = be.empty((1, N))
    y = be.empty((4, N))

    def loss():
        X.set(x)
        y[:] = act(X)
        out[:] = cost(y, T)
        return float(out.get().sum())
    want = numeric(loss, x)
    loss()
    got = be.empty((4, N))
    got[:] = cost.bprop(y, T) * act.bprop(y)
    np.testing.assert_allclose(got.get(), want, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("cost", [SumSquared(), MeanSquared(), SmoothL1Loss(sigma=1.5),
                                  SquareHingeLoss()], ids=lambda c: type(c).__name__)
def test_direct_cost_gradients(be, cost):
    y, t = rand((4, N), seed=18), rand((4, N), seed=19)
    Y, T = be.array(y), be.array(t)
    out = be.empty((1, N))

    def loss():
        Y.set(y)
        out[:] = cost(Y, T)
        return float(out.get().sum())
    want = numeric(loss, y)
    got = be.empty((4, N))
    got[:] = cost.bprop(Y, T)
    np.testing.assert_allclose(got.get(), want, rtol=1e-5, atol=1e-8)


class Hinge(CrossEntropyBinary.__mro__[1]):   # a user's Cost with no bprop: Autodiff gives it
    def __call__(self, y, t):
        return self.be.sum(self.be.maximum(1.0 - y * (t * 2.0 - 1.0), 0.0) ** 2, axis=0)


def test_a_cost_without_bprop_uses_autodiff(be):
    y, t = rand((4, N), seed=20), (rand((4, N), seed=21) > 0).astype(float)
    Y, T = be.array(y), be.array(t)
    out = be.empty((1, N))

    def loss():
        Y.set(y)
        out[:] = Hinge()(Y, T)
        return float(out.get().sum())
    want = numeric(loss, y)
    got = be.empty((4, N))
    got[:] = Hinge().bprop(Y, T)
    np.testing.assert_allclose(got.get(), want, rtol=1e-5, atol=1e-8)


def test_generalized_cost(be):
    cost = GeneralizedCost(CrossEntropyBinary())
    cost.initialize((4,))
    y = np.random.default_rng(22).uniform(0.1, 0.9, (4, N))
    t = np.eye(4)[:, [0, 1, 2, 3, 0]]
    c = cost.get_cost(be.array(y), be.array(t))
    assert c.shape == (1, 1)
    np.testing.assert_allclose(c.get()[0, 0], _numpy_cost(CrossEntropyBinary(), y, t).mean(),
                               rtol=1e-10)
    np.testing.assert_allclose(cost.get_errors(be.array(y), be.array(t)).get(), y - t, rtol=1e-12)
    with pytest.raises(ValueError, match=r"same shape, got outputs \(4, 5\) and targets \(3, 5\)"):
        cost.get_cost(be.array(y), be.array(t[:3]))


def test_metrics_against_numpy(be):
    rng = np.random.default_rng(23)
    y = rng.dirichlet(np.ones(6), N).T
    labels = rng.integers(0, 6, N)
    labels[0] = y[:, 0].argmax()
    t = np.eye(6)[:, labels]
    Y, T = be.array(y), be.array(t)
    wrong = (y.argmax(0) != labels)
    assert Misclassification()(Y, T) == pytest.approx(wrong.mean())
    assert Misclassification()(Y, T, calcrange=slice(0, 3)) == pytest.approx(wrong[:3].mean())
    assert Accuracy()(Y, T) == pytest.approx(1 - wrong.mean())
    logloss = -np.log(y[labels, np.arange(N)]).mean()
    assert LogLoss()(Y, T) == pytest.approx(logloss, rel=1e-6)
    rank = (y > y[labels, np.arange(N)]).sum(0)
    got = TopKMisclassification(3)(Y, T)
    np.testing.assert_allclose(got, [logloss, wrong.mean(), (rank >= 3).mean()], rtol=1e-6)


# ---------------------------------------------------------------- initializers
def test_initializers(be):
    w = be.empty((30, 20))
    Constant(0.25).fill(w)
    np.testing.assert_array_equal(w.get(), 0.25)
    Uniform(-2, 3).fill(w)
    assert -2 <= w.get().min() and w.get().max() < 3
    Gaussian(1.0, 0.1).fill(w)
    assert abs(w.get().mean() - 1) < 0.03 and abs(w.get().std() - 0.1) < 0.02
    GlorotUniform().fill(w)
    assert np.abs(w.get()).max() <= np.sqrt(6 / 50)
    Xavier().fill(w)
    assert np.abs(w.get()).max() <= np.sqrt(3 / 30)
    Kaiming(local=False).fill(w)
    assert abs(w.get().std() - np.sqrt(2 / 20)) < 0.05
    a = be.empty((4, 4))
    gen_backend("cpu", rng_seed=7, batch_size=N)
    Gaussian().fill(a)
    first = a.get()
    gen_backend("cpu", rng_seed=7, batch_size=N)
    Gaussian().fill(a)
    np.testing.assert_array_equal(a.get(), first)       # seeded: reproducible


# ---------------------------------------------------------------- optimizers
class _Param:
    """A stand-in layer with one parameter and a fixed gradient."""

    def __init__(self, be, p, g, name="p"):
        self.W, self.dW, self.states, self.name = be.array(p), be.array(g), [], name

    def get_params(self):
        return [((self.W, self.dW), self.states)]


def _run(be, opt, steps=3, p0=None, grads=None):
    p0 = rand((3, 2), seed=30) if p0 is None else p0
    grads = [rand((3, 2), seed=31 + k) * N for k in range(steps)] if grads is None else grads
    layer = _Param(be, p0, grads[0])
    for k, g in enumerate(grads):
        layer.dW.set(g)
        opt.optimize([layer], epoch=k)
    return p0, grads, layer.W.get()


def test_momentum_sgd_by_hand(be):
    p, grads, got = _run(be, GradientDescentMomentum(0.1, momentum_coef=0.9, wdecay=0.01))
    v = np.zeros_like(p)
    for g in grads:
        v = 0.9 * v - 0.1 * (g / N + 0.01 * p)
        p = p + v
    np.testing.assert_allclose(got, p, rtol=1e-12)


def test_plain_and_nesterov_sgd_by_hand(be):
    p, grads, got = _run(be, GradientDescentMomentum(0.1))
    for g in grads:
        p = p - 0.1 * g / N
    np.testing.assert_allclose(got, p, rtol=1e-12)
    p, grads, got = _run(be, GradientDescentMomentum(0.1, momentum_coef=0.5, nesterov=True))
    v = np.zeros_like(p)
    for g in grads:
        v = 0.5 * v - 0.1 * g / N
        p = p + 0.5 * v - 0.1 * g / N
    np.testing.assert_allclose(got, p, rtol=1e-12)


def test_clipping(be):
    # param clip with momentum 0 (neon built the clip tree and never assigned it)
    _, _, got = _run(be, GradientDescentMomentum(100.0, param_clip_value=0.05))
    assert np.abs(got).max() == pytest.approx(0.05)
    p, grads, got = _run(be, GradientDescentMomentum(0.1, gradient_clip_value=0.1))
    for g in grads:
        p = p - 0.1 * np.clip(g / N, -0.1, 0.1)
    np.testing.assert_allclose(got, p, rtol=1e-12)
    p, grads, got = _run(be, GradientDescentMomentum(0.1, gradient_clip_norm=0.2))
    for g in grads:
        norm = np.sqrt(np.sum(g * g)) / N
        p = p - 0.1 * (g / N) * (0.2 / max(norm, 0.2))
    np.testing.assert_allclose(got, p, rtol=1e-12)


def test_rmsprop_adagrad_adadelta_adam_by_hand(be):
    p0, grads, got = _run(be, RMSProp(decay_rate=0.9, learning_rate=0.01, epsilon=1e-6))
    p, s = p0.copy(), np.zeros_like(p0)
    for g in grads:
        g = g / N
        s = 0.9 * s + 0.1 * g * g
        p = p - 0.01 * g / (np.sqrt(s + 1e-6) + 1e-6)
    np.testing.assert_allclose(got, p, rtol=1e-12)

    _, _, got = _run(be, Adagrad(learning_rate=0.05))
    p, s = p0.copy(), np.zeros_like(p0)
    for g in grads:
        g = g / N
        s = s + g * g
        p = p - 0.05 * g / np.sqrt(s + 1e-6)
    np.testing.assert_allclose(got, p, rtol=1e-12)

    _, _, got = _run(be, Adadelta(decay=0.9))
    p, eg, edx = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for g in grads:
        g = g / N
        eg = 0.9 * eg + 0.1 * g * g
        dx = np.sqrt((edx + 1e-6) / (eg + 1e-6)) * g
        edx = 0.9 * edx + 0.1 * dx * dx
        p = p - dx
    np.testing.assert_allclose(got, p, rtol=1e-12)

    _, _, got = _run(be, Adam(learning_rate=0.01))
    p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t, g in enumerate(grads, 1):
        g = g / N
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(got, p, rtol=1e-12)


def test_schedules():
    s = Schedule(step_config=2, change=0.5)
    assert [s.get_learning_rate(1.0, e) for e in range(5)] == [1, 1, 0.5, 0.5, 0.25]
    s = Schedule(step_config=[1, 3], change=0.1)
    assert [s.get_learning_rate(1.0, e) for e in range(4)] == pytest.approx([1, 0.1, 0.1, 0.01])
    s = StepSchedule(step_config=[1, 3], change=[0.5, 0.05])
    assert [s.get_learning_rate(1.0, e) for e in range(4)] == [1.0, 0.5, 0.5, 0.05]
    with pytest.raises(ValueError, match="lists of one length"):
        StepSchedule([1, 2], [0.1])


def test_multi_optimizer(be):
    a, b = _Param(be, np.ones((2, 2)), np.full((2, 2), N), name="a"), \
        _Param(be, np.ones((2, 2)), np.full((2, 2), N), name="b")
    opt = MultiOptimizer({"default": GradientDescentMomentum(0.1), "b": GradientDescentMomentum(0.5)})
    opt.optimize([a, b], epoch=0)
    np.testing.assert_allclose(a.W.get(), 0.9)
    np.testing.assert_allclose(b.W.get(), 0.5)
    with pytest.raises(ValueError, match="'default'"):
        MultiOptimizer({"b": GradientDescentMomentum(0.5)})


# ---------------------------------------------------------------- image layers (the CPU's compound ops)
from neonlike.layers import BatchNorm, Convolution, Pooling  # noqa: E402


@pytest.mark.parametrize("kw", [dict(fshape=(3, 3, 2)), dict(fshape=(2, 3, 3), strides=2, padding=1),
                                dict(fshape=(3, 2, 2), dilation={"dil_h": 2}, padding={"pad_w": 1})],
                         ids=["3x3", "stride2-pad1", "dilated"])
def test_convolution_layer(be, kw):
    fshape = kw.pop("fshape")
    layer = Convolution(fshape, init=Gaussian(0, 0.5), **kw)
    check_layer(be, layer, (2, 5, 4), rand((40, N), seed=40), params=("W",), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op", ["max", "avg"])
def test_pooling_layer(be, op):
    x = rand((2 * 4 * 6, N), seed=41)
    x += np.arange(x.size).reshape(x.shape) * 1e-3     # no ties: max is differentiable
    check_layer(be, Pooling((2, 3), op=op), (2, 4, 6), x)
    check_layer(be, Pooling(2, op=op, strides=1, padding=1), (2, 4, 6), x)


def test_batchnorm_layer(be):
    layer = BatchNorm(eps=1e-3)
    check_layer(be, layer, (3,), rand((3, N), -2, 2, seed=42), params=("gamma", "beta"))
    check_layer(be, BatchNorm(), (2, 2, 3), rand((12, N), seed=43), params=("gamma", "beta"))


def test_batchnorm_inference_uses_running_statistics(be):
    layer = BatchNorm(rho=0.5, eps=1e-3)
    layer.configure((3,))
    layer.allocate()
    x = rand((3, N), -2, 2, seed=44)
    layer.fprop(be.array(x))
    mean, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    np.testing.assert_allclose(layer.gmean.get(), 0.5 * mean, rtol=1e-10)
    np.testing.assert_allclose(layer.gvar.get(), 0.5 + 0.5 * var, rtol=1e-10)
    y = layer.fprop(be.array(x), inference=True).get()
    np.testing.assert_allclose(y, (x - 0.5 * mean) / np.sqrt(0.5 + 0.5 * var + 1e-3), rtol=1e-10)
