"""neonlike.singa: every operator of seed 004 against numpy and against float64 central differences.

The engine runs here as the numpy reference interpreter (hundreds of one-off structures; the
fused kernels are exercised by tests/test_singa.py and every op by test_fused_cpu.py)."""
from __future__ import annotations

import numpy as np
import pytest

from neonlike.singa import autograd, tensor
from neonlike.singa.tensor import Tensor

CPU_ENGINE = "reference"
F64 = np.float64


@pytest.fixture(autouse=True)
def training():
    autograd.training = True
    yield
    autograd.training = False


def softmax(x, axis=1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def elu(x, a=1.0):
    return np.where(x > 0, x, a * (np.exp(x) - 1))


def onehot(n, c, rng):
    return np.eye(c)[rng.randint(0, c, n)]


# (id, function of (autograd, *tensors), numpy reference, input shapes, domain, kinks)
# domain: (lo, hi) for every input or one per input; kinks: points the inputs keep away from
CASES = [
    ("relu", lambda a, x: a.relu(x), lambda x: np.maximum(x, 0), [(2, 3)], (-2, 2), [0]),
    ("sigmoid", lambda a, x: a.sigmoid(x), lambda x: 1 / (1 + np.exp(-x)), [(2, 3)], (-2, 2), []),
    ("tanh", lambda a, x: a.tanh(x), np.tanh, [(3,)], (-2, 2), []),
    ("exp", lambda a, x: a.exp(x), np.exp, [(2, 3)], (-2, 2), []),
    ("log", lambda a, x: a.log(x), np.log, [(2, 3)], (0.5, 2), []),
    ("sqrt", lambda a, x: a.sqrt(x), np.sqrt, [(2, 3)], (0.5, 2), []),
    ("abs", lambda a, x: a.abs(x), np.abs, [(2, 3)], (-2, 2), [0]),
    ("sign", lambda a, x: a.sign(x), np.sign, [(2, 3)], (-2, 2), [0]),
    ("negative", lambda a, x: a.negative(x), np.negative, [(2, 3)], (-2, 2), []),
    ("reciprocal", lambda a, x: a.reciprocal(x), lambda x: 1 / x, [(2, 3)], (0.5, 2), []),
    ("ceil", lambda a, x: a.ceil(x), np.ceil, [(2, 3)], (-2, 2), [-2, -1, 0, 1, 2]),
    ("cos", lambda a, x: a.cos(x), np.cos, [(2, 3)], (-2, 2), []),
    ("cosh", lambda a, x: a.cosh(x), np.cosh, [(2, 3)], (-2, 2), []),
    ("acos", lambda a, x: a.acos(x), np.arccos, [(2, 3)], (-0.8, 0.8), []),
    ("acosh", lambda a, x: a.acosh(x), np.arccosh, [(2, 3)], (1.2, 3), []),
    ("sin", lambda a, x: a.sin(x), np.sin, [(2, 3)], (-2, 2), []),
    ("sinh", lambda a, x: a.sinh(x), np.sinh, [(2, 3)], (-2, 2), []),
    ("asin", lambda a, x: a.asin(x), np.arcsin, [(2, 3)], (-0.8, 0.8), []),
    ("asinh", lambda a, x: a.asinh(x), np.arcsinh, [(2, 3)], (-2, 2), []),
    ("tan", lambda a, x: a.tan(x), np.tan, [(2, 3)], (-1, 1), []),
    ("atan", lambda a, x: a.atan(x), np.arctan, [(2, 3)], (-2, 2), []),
    ("atanh", lambda a, x: a.atanh(x), np.arctanh, [(2, 3)], (-0.8, 0.8), []),
    ("identity", lambda a, x: a.identity(x), lambda x: x, [(2, 3)], (-2, 2), []),
    ("softsign", lambda a, x: a.softsign(x), lambda x: x / (1 + np.abs(x)), [(2, 3)], (-2, 2), [0]),
    ("SoftSign", lambda a, x: a.SoftSign()(x)[0], lambda x: x / (1 + np.abs(x)), [(2, 3)],
     (-2, 2), [0]),
    ("softplus", lambda a, x: a.softplus(x), lambda x: np.log1p(np.exp(x)), [(2, 3)], (-2, 2), []),
    ("SoftPlus", lambda a, x: a.SoftPlus()(x)[0], lambda x: np.log1p(np.exp(x)), [(2, 3)],
     (-2, 2), []),
    ("leakyrelu", lambda a, x: a.leakyrelu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x),
     [(2, 3)], (-2, 2), [0]),
    ("elu", lambda a, x: a.elu(x, 0.7), lambda x: elu(x, 0.7), [(2, 3)], (-2, 2), [0]),
    ("selu", lambda a, x: a.selu(x), lambda x: 1.0507 * elu(x, 1.67326), [(2, 3)], (-2, 2), [0]),
    ("hardsigmoid", lambda a, x: a.hardsigmoid(x), lambda x: np.clip(0.2 * x + 0.5, 0, 1),
     [(2, 3)], (-2, 2), []),
    ("clip", lambda a, x: a.clip(x, -0.5, 0.8), lambda x: np.clip(x, -0.5, 0.8), [(2, 3)],
     (-2, 2), [-0.5, 0.8]),
    ("add", lambda a, x, y: a.add(x, y), np.add, [(2, 3), (3,)], (-2, 2), []),
    ("add_4d", lambda a, x, y: a.add(x, y), np.add, [(4, 1, 3), (2, 1)], (-2, 2), []),
    ("add_scalar_tensor", lambda a, x, y: a.add(x, y), np.add, [(2, 3), ()], (-2, 2), []),
    ("sub", lambda a, x, y: a.sub(x, y), np.subtract, [(2, 1), (1, 3)], (-2, 2), []),
    ("mul", lambda a, x, y: a.mul(x, y), np.multiply, [(2, 3), (2, 1)], (-2, 2), []),
    ("Mul", lambda a, x, y: a.Mul()(x, y)[0], np.multiply, [(2, 3), (2, 3)], (-2, 2), []),
    ("div", lambda a, x, y: a.div(x, y), np.divide, [(2, 3), (3,)], [(-2, 2), (0.5, 2)], []),
    ("pow", lambda a, x, y: a.pow(x, y), np.power, [(2, 3), (2, 3)], [(0.5, 2), (-1, 1)], []),
    ("prelu", lambda a, x, s: a.prelu(x, s), lambda x, s: np.where(x > 0, x, s * x),
     [(2, 3), (3,)], (-2, 2), [0]),
    ("sum", lambda a, x, y, z: a.sum(x, y, z), lambda x, y, z: x + y + z,
     [(2, 3), (3,), (2, 1)], (-2, 2), []),
    ("mean", lambda a, x, y: a.mean(x, y), lambda x, y: (x + y) / 2, [(2, 3), (2, 3)], (-2, 2), []),
    ("min", lambda a, x, y: a.min(x, y), np.minimum, [(2, 3), (2, 3)], (-2, 2), []),
    ("max", lambda a, x, y: a.max(x, y), np.maximum, [(2, 3), (3,)], (-2, 2), []),
    ("matmul", lambda a, x, w: a.matmul(x, w), np.matmul, [(2, 3), (3, 4)], (-2, 2), []),
    ("gemm", lambda a, x, w, c: a.gemm(x, w, c, 0.5, 2.0, 1, 1),
     lambda x, w, c: 0.5 * x.T @ w.T + 2.0 * c, [(3, 2), (4, 3), (4,)], (-2, 2), []),
    ("gemm_noC", lambda a, x, w: a.gemm(x, w), np.matmul, [(2, 3), (3, 4)], (-2, 2), []),
    ("add_bias0", lambda a, x, b: a.add_bias(x, b, 0), lambda x, b: x + b.reshape(1, -1),
     [(2, 3), (3,)], (-2, 2), []),
    ("add_bias0_row", lambda a, x, b: a.add_bias(x, b, 0), lambda x, b: x + b,
     [(2, 3), (1, 3)], (-2, 2), []),
    ("add_bias1", lambda a, x, b: a.add_bias(x, b, 1), lambda x, b: x + b.reshape(-1, 1),
     [(2, 3), (2,)], (-2, 2), []),
    ("softmax", lambda a, x: a.softmax(x), softmax, [(2, 3)], (-2, 2), []),
    ("softmax_axis0", lambda a, x: a.softmax(x, 0), lambda x: softmax(x, 0), [(2, 3)], (-2, 2), []),
    ("mse_loss", lambda a, x, t: a.mse_loss(x, t), lambda x, t: [np.sum((x - t) ** 2) / 4],
     [(2, 3), (2, 3)], (-2, 2), []),
    ("mse_loss_4d", lambda a, x, t: a.mse_loss(x, t), lambda x, t: [np.sum((x - t) ** 2) / 4],
     [(2, 1, 3, 2), (2, 1, 3, 2)], (-2, 2), []),
    ("MeanSquareError", lambda a, x, t: a.MeanSquareError()(x, t)[0],
     lambda x, t: [np.sum((x - t) ** 2) / 4], [(2, 3), (2, 3)], (-2, 2), []),
    ("cross_entropy", lambda a, y, t: a.cross_entropy(y, t),
     lambda y, t: [-np.sum(t * np.log(y)) / 2], [(2, 3), (2, 3)], (0.1, 0.9), []),
    ("reshape", lambda a, x: a.reshape(x, [0, -1]), lambda x: x.reshape(2, 6),
     [(2, 3, 2)], (-2, 2), []),
    ("flatten", lambda a, x: a.flatten(x), lambda x: x.reshape(2, -1), [(2, 3, 2)], (-2, 2), []),
    ("flatten_0", lambda a, x: a.flatten(x, 0), lambda x: x.reshape(1, -1), [(2, 3)], (-2, 2), []),
    ("squeeze", lambda a, x: a.squeeze(x, [1]), lambda x: x.reshape(2, 3), [(2, 1, 3)], (-2, 2), []),
    ("unsqueeze", lambda a, x: a.unsqueeze(x, [0]), lambda x: x[None], [(3,)], (-2, 2), []),
    ("transpose", lambda a, x: a.transpose(x, (2, 0, 1)), lambda x: x.transpose(2, 0, 1),
     [(2, 3, 4)], (-2, 2), []),
    ("cat", lambda a, x, y: a.cat((x, y), 1), lambda x, y: np.concatenate((x, y), 1),
     [(2, 3), (2, 2)], (-2, 2), []),
    ("cat1d", lambda a, x, y, z: a.cat((x, y, z), 0), lambda x, y, z: np.concatenate((x, y, z)),
     [(3,), (2,), (1,)], (-2, 2), []),
    ("cat_axis0", lambda a, x, y: a.cat((x, y), 0), lambda x, y: np.concatenate((x, y), 0),
     [(2, 3, 2), (2, 3, 2)], (-2, 2), []),
    ("slice", lambda a, x: a.slice(x, [0, 1], [2, 4], [0, 1], [1, 2]), lambda x: x[0:2, 1:4:2],
     [(3, 4)], (-2, 2), []),
    ("split", lambda a, x: a.split(x, 1, [1, 2])[1], lambda x: x[:, 1:], [(2, 3)], (-2, 2), []),
    ("split_both", lambda a, x: a.mul(*a.split(x, 0, num_output=2)), lambda x: x[:1] * x[1:],
     [(2, 3)], (-2, 2), []),
    ("gather", lambda a, x: a.gather(x, 1, [[2, 0], [1, 1]]), lambda x: x[:, [[2, 0], [1, 1]]],
     [(2, 3)], (-2, 2), []),
    ("tile", lambda a, x: a.tile(x, [2, 3]), lambda x: np.tile(x, (2, 3)), [(2, 3)], (-2, 2), []),
    ("reduce_sum", lambda a, x: a.reduce_sum(x, [1], 0), lambda x: x.sum(1), [(2, 3)], (-2, 2), []),
    ("reduceSum", lambda a, x: a.reduceSum(x, [0, 2]), lambda x: x.sum((0, 2), keepdims=True),
     [(2, 3, 2)], (-2, 2), []),
    ("reduce_mean", lambda a, x: a.reduce_mean(x, None, 0), lambda x: x.mean(), [(2, 3)],
     (-2, 2), []),
    ("reduceMean", lambda a, x: a.reduceMean(x, [1]), lambda x: x.mean(1, keepdims=True),
     [(2, 3)], (-2, 2), []),
    ("globalaveragepool", lambda a, x: a.globalaveragepool(x),
     lambda x: x.mean((2, 3), keepdims=True), [(2, 3, 2, 2)], (-2, 2), []),
    ("dropout_eval", lambda a, x: _eval(a.dropout, x), lambda x: x, [(2, 3)], (-2, 2), []),
    ("index", lambda a, x: x[1, 1:], lambda x: x[1, 1:], [(2, 3)], (-2, 2), []),
    ("operators", lambda a, x, y: (x + y) * 2.0 - y / (abs(x) + 1.0) + (-x) ** 2.0 + 1.0 - x,
     lambda x, y: (x + y) * 2 - y / (np.abs(x) + 1) + x ** 2 + 1 - x, [(2, 3), (3,)],
     (-2, 2), [0]),
    ("matmul_operator", lambda a, x, w: x @ w, np.matmul, [(2, 3), (3, 2)], (-2, 2), []),
]


def _eval(fn, x):
    autograd.training = False
    try:
        return fn(x)
    finally:
        autograd.training = True


def _inputs(shapes, domain, kinks, rng):
    domains = domain if isinstance(domain, list) else [domain] * len(shapes)
    arrays = []
    for shape, (lo, hi) in zip(shapes, domains):
        a = rng.uniform(lo, hi, shape)
        for k in kinks:
            near = np.abs(a - k) < 0.1
            a = np.where(near, a + 0.25, a)
        arrays.append(np.asarray(a, dtype=F64))
    return arrays


def _tensors(arrays):
    return [Tensor(data=a, dtype=F64, requires_grad=True, stores_grad=True) for a in arrays]


def _weighted(fn, arrays, weights):
    out = fn(autograd, *_tensors(arrays))
    return float(np.sum(out.to_numpy() * weights))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_forward_matches_numpy(case):
    name, fn, ref, shapes, domain, kinks = case
    arrays = _inputs(shapes, domain, kinks, np.random.RandomState(0))
    out = fn(autograd, *_tensors(arrays))
    want = np.asarray(ref(*arrays))
    assert out.shape == want.shape, (out.shape, want.shape)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-10, atol=1e-12)


SMOOTH = [c for c in CASES if c[0] not in ("sign", "ceil", "dropout_eval")]


@pytest.mark.parametrize("case", SMOOTH, ids=[c[0] for c in SMOOTH])
def test_gradient_matches_central_differences(case):
    name, fn, ref, shapes, domain, kinks = case
    rng = np.random.RandomState(1)
    arrays = _inputs(shapes, domain, kinks, rng)
    xs = _tensors(arrays)
    out = fn(autograd, *xs)
    weights = rng.uniform(0.5, 1.5, out.shape)
    loss = autograd.reduce_sum(autograd.mul(out, Tensor(data=weights, dtype=F64,
                                                          requires_grad=False)), None, 0)
    grads = autograd.gradients(loss)
    eps = 1e-6
    for i, (x, a) in enumerate(zip(xs, arrays)):
        numeric = np.zeros(a.shape)
        for j in np.ndindex(a.shape):
            up, down = [b.copy() for b in arrays], [b.copy() for b in arrays]
            up[i][j] += eps
            down[i][j] -= eps
            numeric[j] = (_weighted(fn, up, weights) - _weighted(fn, down, weights)) / (2 * eps)
        got = grads[x].to_numpy() if x in grads else np.zeros(a.shape)
        assert got.shape == a.shape, (name, i, got.shape, a.shape)
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-7, err_msg=f"{name} input {i}")


@pytest.mark.parametrize("case", SMOOTH, ids=[c[0] for c in SMOOTH])
def test_replayed_gradient_plans_give_the_walks_gradients(case):
    """The first backward of a structure walks the rules (and records a plan); later ones replay
    the plan: the same values, also where inputs are lazy trees or the same tensor twice."""
    name, fn, ref, shapes, domain, kinks = case
    from neonlike.singa.device import get_default_device
    plans = get_default_device().plans
    plans.clear()
    arrays = _inputs(shapes, domain, kinks, np.random.RandomState(3))
    weights = None
    results = []
    for lazy_inputs in (False, False, True):
        xs = _tensors(arrays)
        ins = [autograd.mul(x, 1.0) for x in xs] if lazy_inputs else xs
        out = fn(autograd, *ins)
        if weights is None:
            weights = np.random.RandomState(4).uniform(0.5, 1.5, out.shape)
        loss = autograd.reduce_sum(autograd.mul(out, Tensor(data=weights, dtype=F64,
                                                              requires_grad=False)), None, 0)
        grads = autograd.gradients(loss)
        results.append([grads[x].to_numpy() if x in grads else np.zeros(a.shape)
                        for x, a in zip(xs, arrays)])
    assert len(plans) > 0
    for again in results[1:]:
        for i, (first, got) in enumerate(zip(results[0], again)):
            np.testing.assert_allclose(got, first, rtol=1e-12, atol=1e-14,
                                       err_msg=f"{name} input {i}")
    if len(shapes) >= 2 and len(set(shapes)) == 1:   # the same tensor as every input
        x = _tensors(arrays[:1])[0]
        for _ in range(2):
            out = fn(autograd, *([x] * len(shapes)))
            g = autograd.gradients(autograd.reduce_sum(out, None, 0))[x].to_numpy()
            results.append(g)
        np.testing.assert_allclose(results[-1], results[-2], rtol=1e-12)


def test_zero_gradient_ops():
    """sign and ceil: gradients are zeros (they are not logic ops)."""
    for fn in (autograd.sign, autograd.ceil):
        x = Tensor(data=np.array([[0.3, -1.7]]), dtype=F64, stores_grad=True)
        g = autograd.gradients(autograd.reduce_sum(fn(x), None, 0))
        np.testing.assert_array_equal(g[x].to_numpy(), [[0.0, 0.0]])


def test_softmax_cross_entropy_one_hot_and_labels():
    rng = np.random.RandomState(2)
    x = rng.randn(4, 3)
    labels = np.array([0, 2, 1, 2])
    t = np.eye(3)[labels]
    p = softmax(x)
    want_loss = -np.sum(t * np.log(p)) / 4
    for target in (t, labels.astype(F64)):
        xt = Tensor(data=x, dtype=F64, stores_grad=True)
        loss = autograd.softmax_cross_entropy(xt, Tensor(data=target, dtype=F64,
                                                         requires_grad=False))
        assert loss.shape == (1,)
        np.testing.assert_allclose(loss.to_numpy(), [want_loss], rtol=1e-10)
        g = autograd.gradients(loss)[xt].to_numpy()
        np.testing.assert_allclose(g, (p - t) / 4, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,fn,ref", [
    ("less", autograd.less, np.less), ("greater", autograd.greater, np.greater),
    ("equal", autograd.equal, np.equal), ("Equal", lambda x, y: autograd.Equal()(x, y)[0], np.equal),
    ("_and", autograd._and, np.logical_and), ("_or", autograd._or, np.logical_or),
    ("_xor", autograd._xor, np.logical_xor)])
def test_logic_ops_forward_and_no_gradient(name, fn, ref):
    a = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0]])
    b = np.array([1.0, 0.0, 2.0])
    x, y = Tensor(data=a, dtype=F64), Tensor(data=b, dtype=F64)
    out = fn(x, y)
    np.testing.assert_array_equal(out.to_numpy(), ref(a, b).astype(F64))
    with pytest.raises(TypeError, match="logic operator"):
        autograd.gradients(autograd.reduce_sum(autograd.mul(out, x), None, 0))


def test_not():
    x = Tensor(data=np.array([0.0, 2.0]), dtype=F64)
    np.testing.assert_array_equal(autograd._not(x).to_numpy(), [1.0, 0.0])


def test_constants_shape_nonzero_onehot_constant_of_shape_cast():
    x = Tensor(data=np.array([[0.0, 1.5, 0.0], [2.0, 0.0, 3.0]]), dtype=F64)
    s = autograd.shape(x)
    assert s.to_numpy().tolist() == [2, 3] and not s.requires_grad
    assert autograd.nonzero(x).to_numpy().tolist() == [[0, 1, 1], [1, 0, 2]]
    idx = Tensor(data=np.array([0, 2, 1]), requires_grad=False)
    hot = autograd.onehot(-1, idx, 3, [0.0, 5.0]).to_numpy()
    np.testing.assert_array_equal(hot, 5.0 * np.eye(3)[[0, 2, 1]])
    c = autograd.constant_of_shape(Tensor(data=np.array([2, 2])), 7.0)
    np.testing.assert_array_equal(c.to_numpy(), np.full((2, 2), 7.0))
    assert autograd.constantOfShape is autograd.constant_of_shape
    y = autograd.cast(x, np.int32)
    assert y.dtype == np.int32 and y.to_numpy().tolist() == [[0, 2, 0], [2, 0, 3]]


def test_dropout_scales_kept_values_by_one_over_keep():
    x = Tensor(data=np.ones((50, 40)), dtype=F64, stores_grad=True)
    y = autograd.dropout(x, 0.25).to_numpy()
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 1 / 0.75)
    assert 0.65 < kept.size / y.size < 0.85


def test_tensor_api():
    t = Tensor(shape=(2, 3))
    assert t.shape == (2, 3) and t.dtype == np.float32 and t.requires_grad and not t.stores_grad
    t.set_value(1.5)
    np.testing.assert_array_equal(tensor.to_numpy(t), np.full((2, 3), 1.5, np.float32))
    t.uniform(-1, 1)
    assert np.all(np.abs(t.to_numpy()) <= 1)
    t.gaussian(0.0, 0.1)
    c = t.clone()
    np.testing.assert_array_equal(c.to_numpy(), t.to_numpy())
    assert c.creator is None
    assert t.reshape((3, 2)).shape == (3, 2) and t.transpose().shape == (3, 2)
    np.testing.assert_array_equal(t.T().to_numpy(), t.to_numpy().T)
    assert tensor.from_numpy(np.zeros(4)).dtype == np.float64
    assert t.to_host() is t
    s = Tensor(data=np.float64(3.0))
    assert s.shape == () and s.to_numpy() == 3.0
