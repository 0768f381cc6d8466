"""neonlike.singa: seed 004's two examples, the backward walk's rules, laziness (kernel counts),
layers and optimizers against torch (float64), errors. Runs on the fused CPU engine."""
from __future__ import annotations

import numpy as np
import pytest

from neonlike.ops import OP_INFO
from neonlike.optree import dag_postorder
from neonlike.singa import autograd, device, opt
from neonlike.singa.singa_wrap import CTensor
from neonlike.singa.tensor import Tensor
from neonlike.tensor import Tensor as Tensor_

F64 = np.float64


@pytest.fixture(autouse=True)
def training():
    autograd.training = True
    yield
    autograd.training = False


def t64(a, **kw):
    return Tensor(data=np.asarray(a), dtype=F64, **kw)


# ---------------------------------------------------------------- seed 004's examples
def test_seed_operation_only_mlp():
    """The seed's first example as written (import renamed), on a small XOR-like data set."""
    from neonlike.singa.tensor import Tensor
    from neonlike.singa import autograd
    from neonlike.singa import opt
    rng = np.random.RandomState(0)
    data = rng.uniform(-1, 1, (64, 2)).astype(np.float32)
    label = np.eye(2)[(data[:, 0] + data[:, 1] > 0).astype(int)].astype(np.float32)

    w0 = Tensor(shape=(2, 3), requires_grad=True, stores_grad=True)
    w0.gaussian(0.0, 0.1)
    b0 = Tensor(shape=(1, 3), requires_grad=True, stores_grad=True)
    b0.set_value(0.0)
    w1 = Tensor(shape=(3, 2), requires_grad=True, stores_grad=True)
    w1.gaussian(0.0, 0.1)
    b1 = Tensor(shape=(1, 2), requires_grad=True, stores_grad=True)
    b1.set_value(0.0)

    inputs = Tensor(data=data)  # data matrix
    target = Tensor(data=label)  # label vector
    autograd.training = True    # for training
    sgd = opt.SGD(0.05)   # optimizer
    losses = []
    for i in range(10):
        x = autograd.matmul(inputs, w0)  # matrix multiplication
        x = autograd.add_bias(x, b0)    # add the bias vector
        x = autograd.relu(x)            # ReLU activation operation
        x = autograd.matmul(x, w1)
        x = autograd.add_bias(x, b1)
        loss = autograd.softmax_cross_entropy(x, target)
        for p, g in autograd.backward(loss):
            assert g.shape == p.shape      # b0 (1, 3) gets a (1, 3) gradient (SINGA 3.0: (3,))
            sgd.update(p, g)
        losses.append(float(loss.to_numpy()[0]))
    sgd = opt.SGD(0.5, momentum=0.9)
    for i in range(60):
        x = autograd.add_bias(autograd.matmul(autograd.relu(autograd.add_bias(
            autograd.matmul(inputs, w0), b0)), w1), b1)
        sgd.backward_and_update(autograd.softmax_cross_entropy(x, target))
    pred = x.to_numpy().argmax(1)
    assert losses[-1] < losses[0] and np.mean(pred == label.argmax(1)) > 0.9


def test_seed_cnn_example():
    """The seed's second example as written (layers, cat, BN, both pools), two steps of batch 2."""
    from neonlike.singa import tensor
    dev = device.get_default_device()
    conv1 = autograd.Conv2d(1, 32, 3, padding=1, bias=False)
    bn1 = autograd.BatchNorm2d(32)
    pooling1 = autograd.MaxPool2d(3, 1, padding=1)
    conv21 = autograd.Conv2d(32, 16, 3, padding=1)
    conv22 = autograd.Conv2d(32, 16, 3, padding=1)
    bn2 = autograd.BatchNorm2d(32)
    linear = autograd.Linear(32 * 28 * 28, 10)
    pooling2 = autograd.AvgPool2d(3, 1, padding=1)

    def forward(x, t):
        y = conv1(x)           # Conv layer
        y = autograd.relu(y)   # ReLU operation
        y = bn1(y)             # BN layer
        y = pooling1(y)        # Pooling Layer
        y1 = conv21(y)
        y2 = conv22(y)
        y = autograd.cat((y1, y2), 1)  # cat operation
        y = autograd.relu(y)           # ReLU operation
        y = bn2(y)
        y = pooling2(y)
        y = autograd.flatten(y)        # flatten operation
        y = linear(y)                  # Linear layer
        loss = autograd.softmax_cross_entropy(y, t)  # operation
        return loss, y

    rng = np.random.RandomState(0)
    batch_sz, batch_number, epochs = 2, 2, 1
    x_train = rng.rand(batch_sz * batch_number, 1, 28, 28).astype(np.float32)
    y_train = np.eye(10)[rng.randint(0, 10, batch_sz * batch_number)].astype(np.float32)
    sgd = opt.SGD(lr=0.01)
    autograd.training = True
    seen = []
    for epoch in range(epochs):
        for i in range(batch_number):
            inputs = tensor.Tensor(device=dev, data=x_train[
                i * batch_sz:(1 + i) * batch_sz], stores_grad=False)
            targets = tensor.Tensor(device=dev, data=y_train[
                i * batch_sz:(1 + i) * batch_sz], requires_grad=False, stores_grad=False)
            loss, y = forward(inputs, targets)  # forward the net
            for p, gp in autograd.backward(loss):  # auto backward
                assert gp.shape == p.shape
                seen.append(p)
                sgd.update(p, gp)
            assert np.isfinite(loss.to_numpy()).all() and y.shape == (2, 10)
    # conv1 (no bias) W, bn1 scale+bias, conv21/conv22 W+b, bn2 scale+bias, linear W+b
    assert len(seen) == 2 * 11 and len({id(p) for p in seen}) == 11


# ---------------------------------------------------------------- the backward walk
def _mlp(rng):
    x = t64(rng.randn(6, 4))
    w0, b0 = t64(rng.randn(4, 5), stores_grad=True), t64(rng.randn(5), stores_grad=True)
    w1, b1 = t64(rng.randn(5, 3), stores_grad=True), t64(rng.randn(3), stores_grad=True)
    t = t64(np.eye(3)[rng.randint(0, 3, 6)], requires_grad=False)

    def loss():
        h = autograd.tanh(autograd.add_bias(autograd.matmul(x, w0), b0))
        y = autograd.add_bias(autograd.matmul(h, w1), b1)
        return autograd.softmax_cross_entropy(autograd.mul(y, y), t)
    return loss, [w0, b0, w1, b1]


def test_updating_inside_the_loop_changes_no_later_gradient():
    rng = np.random.RandomState(3)
    loss, params = _mlp(rng)
    expected = {id(p): g.to_numpy() for p, g in autograd.gradients(loss()).items()}
    before = {id(p): p.to_numpy() for p in params}
    order = []
    sgd = opt.SGD(0.5)
    for p, g in autograd.backward(loss()):
        order.append(p)
        np.testing.assert_allclose(g.to_numpy(), expected[id(p)], rtol=1e-12)
        sgd.update(p, g)   # before the rest of the backward pass
    assert [id(p) for p in order] == [id(p) for p in params[::-1]]   # each once, last use first
    for p in params:
        np.testing.assert_allclose(p.to_numpy(), before[id(p)] - 0.5 * expected[id(p)])


def test_pooled_outputs_are_reused_only_when_nobody_holds_them():
    rng = np.random.RandomState(4)
    x = Tensor(data=rng.rand(5, 3), requires_grad=False)
    w = Tensor(data=rng.rand(3, 4), requires_grad=True, stores_grad=True)
    first = autograd.matmul(x, w)
    held = first.data.value                      # an engine tensor, a numpy view, a copy
    view, copy = np.asarray(held._host())[1:], first.to_numpy()
    w.copy_from_numpy(rng.rand(3, 4))
    made = {id(held)}                            # ids only: a name would hold them
    for _ in range(3):                           # same shapes: reuse, never of what is held
        y = autograd.matmul(x, w)
        assert y.data.value is not held
        made.add(id(y.data.value))
        np.testing.assert_array_equal(first.to_numpy(), copy)
        np.testing.assert_array_equal(view, copy[1:])
    del y, first, held, view
    assert id(autograd.matmul(x, w).data.value) in made    # freed: handed out again
    only = autograd.matmul(x, w).data.value._host()[:]    # held by a numpy view alone
    snapshot = only.copy()
    w.copy_from_numpy(rng.rand(3, 4))
    for _ in range(3):
        autograd.matmul(x, w)
    np.testing.assert_array_equal(only, snapshot)


def test_matmul_of_a_tensor_with_itself_sums_both_gradients():
    """matmul(a, a): the gradient of sum(R * (a @ a)) is R @ a.T + a.T @ R (each input's GEMM
    by its position, not by which CTensor it is)."""
    rng = np.random.RandomState(12)
    A, R = rng.randn(4, 4), rng.randn(4, 4)
    a = Tensor(data=A, dtype=np.float64, stores_grad=True)
    y = autograd.matmul(a, a)
    np.testing.assert_allclose(y.to_numpy(), A @ A, rtol=1e-12)
    g = autograd.gradients(autograd.reduce_sum(
        autograd.mul(y, Tensor(data=R, dtype=np.float64, requires_grad=False)), None, 0))
    np.testing.assert_allclose(g[a].to_numpy(), R @ A.T + A.T @ R, rtol=1e-10, atol=1e-12)


def test_the_seed_gradient_is_ones_in_a_reused_pooled_tensor_and_without_a_pool(monkeypatch):
    """backward's dy = 1 comes from Device.ones: a pooled host tensor (which last held other
    values) filled through its array, or be.ones where the device's tensors have no host memo;
    the loss's own gradient (stores_grad) is that seed, in both cases."""
    dev = device.get_default_device()
    for host in (True, False):
        if not host:
            monkeypatch.setattr(dev, "_alloc", lambda shape, dtype: dev.be.empty(shape,
                                                                                  dtype=dtype))
        for _ in range(3):
            junk = dev.alloc((1, 1), np.dtype(np.float32))
            junk[:] = 7.0                       # the pool may hand this tensor out next
            del junk
            x = Tensor(data=np.array([2.0, 3.0]), stores_grad=True)
            g = autograd.gradients(autograd.reduce_sum(autograd.mul(x, x), None, 0))
            np.testing.assert_array_equal(g[x].to_numpy(), [4.0, 6.0])
            ones = dev.ones((2, 3), np.dtype(np.float32))
            assert ones.dtype == np.float32
            np.testing.assert_array_equal(ones.get(), np.ones((2, 3)))


@pytest.mark.parametrize("dx, dw", [(np.float32, np.float64), (np.float64, np.float32),
                                    (np.int32, np.float32)])
def test_matmul_of_mixed_dtypes_and_its_gradients_against_numpy(dx, dw):
    """matmul's GEMMs (be.compound_dot) take operands of different dtypes through the engine's
    conversion: the product in the promoted float dtype, each gradient in its input's dtype,
    all against numpy in float64 (an integer data input gets no gradient)."""
    rng = np.random.RandomState(11)
    xa, wa, r = (rng.randn(5, 3) * 3).astype(dx), rng.randn(3, 4).astype(dw), rng.randn(5, 4)
    grads = dx is not np.int32
    x = Tensor(data=xa, dtype=dx, requires_grad=grads, stores_grad=grads)
    w = Tensor(data=wa, dtype=dw, stores_grad=True)
    y = autograd.matmul(x, w)
    X, W = xa.astype(np.float64), wa.astype(np.float64)
    want = np.result_type(*[d for d in (dx, dw) if np.dtype(d).kind == "f"])
    assert y.data.dtype == want and y.to_numpy().dtype == want
    np.testing.assert_allclose(y.to_numpy(), X @ W, rtol=1e-6, atol=1e-6)
    g = autograd.gradients(autograd.reduce_sum(
        autograd.mul(y, Tensor(data=r, dtype=np.float64, requires_grad=False)), None, 0))
    assert g[w].data.dtype == np.dtype(dw) and g[w].to_numpy().dtype == np.dtype(dw)
    np.testing.assert_allclose(g[w].to_numpy(), X.T @ r, rtol=1e-5, atol=1e-5)
    if grads:
        assert g[x].data.dtype == np.dtype(dx) and g[x].to_numpy().dtype == np.dtype(dx)
        np.testing.assert_allclose(g[x].to_numpy(), r @ W.T, rtol=1e-5, atol=1e-5)
    else:
        assert x not in g


@pytest.mark.parametrize("make", [lambda: opt.SGD(0.01, momentum=0.9),
                                  lambda: opt.SGD(0.01, momentum=0.9, nesterov=True),
                                  lambda: opt.SGD(0.01), lambda: opt.Adam(0.01)])
def test_a_large_weight_gradient_kept_for_a_gemm_gives_the_same_steps(make, monkeypatch):
    """A large weight's gradient x.T @ dy stays lazy (autograd._kept_product): SGD with momentum
    runs it as one GEMM into its velocity, other optimizers run it once; the same values as with
    every gradient run at once."""
    rng = np.random.RandomState(7)
    X, W0, T = rng.randn(16, 200), rng.randn(200, 200) * 0.05, np.eye(200)[rng.randint(0, 200, 16)]
    results = []
    for kept in (autograd.KEPT_PRODUCT_MIN, 10 ** 9):
        monkeypatch.setattr(autograd, "KEPT_PRODUCT_MIN", kept)
        x, t = t64(X, requires_grad=False), t64(T, requires_grad=False)
        w = t64(W0, stores_grad=True)
        o = make()
        grads = []
        for _ in range(3):
            loss = autograd.softmax_cross_entropy(autograd.relu(autograd.matmul(x, w)), t)
            for p, g in autograd.backward(loss):
                assert g.data.lazy == (kept < 10 ** 9)
                o.update(p, g)
                grads.append(g.to_numpy())      # read after: x.T @ dy does not read w
        results.append((w.to_numpy(), grads))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12, atol=1e-15)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_gradients_of_a_tensor_used_several_times_are_summed():
    a = t64([[1.0, 2.0]], stores_grad=True)
    y = autograd.add(autograd.mul(a, a), autograd.mul(a, 3.0))
    g = autograd.gradients(autograd.reduce_sum(y, None, 0))
    np.testing.assert_allclose(g[a].to_numpy(), [[5.0, 7.0]])


def test_stores_grad_and_requires_grad_rules():
    rng = np.random.RandomState(4)
    x = t64(rng.randn(3, 2))                                  # data: requires_grad, not stored
    w = t64(rng.randn(2, 2), stores_grad=True)
    frozen = t64(rng.randn(2, 2), requires_grad=False)        # no gradient at all
    h = autograd.matmul(x, w)
    h.stores_grad = True                                       # an intermediate, stored
    y = autograd.matmul(autograd.relu(h), frozen)
    g = autograd.gradients(autograd.reduce_mean(y, None, 0))
    assert set(map(id, g)) == {id(w), id(h)}
    np.testing.assert_allclose(g[w].to_numpy(), x.to_numpy().T @ g[h].to_numpy())
    assert not autograd.relu(frozen).requires_grad
    with pytest.raises(ValueError, match="stores_grad=True needs requires_grad=True"):
        Tensor(shape=(2,), requires_grad=False, stores_grad=True)


def test_backward_yields_a_leaf_loss_and_takes_dy():
    a = t64([[1.0, 2.0]], stores_grad=True)
    y = autograd.mul(a, a)
    g = dict(autograd.backward(y, t64([[1.0, 10.0]])))
    np.testing.assert_allclose(g[a].to_numpy(), [[2.0, 40.0]])


def test_errors_name_what_is_wrong():
    a, b = t64(np.ones((2, 3)), stores_grad=True), t64(np.ones((4,)))
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\)"):
        autograd.add(a, b)
    with pytest.raises(ValueError, match=r"x \(2, 3\) and w \(2, 3\)"):
        autograd.matmul(a, a)
    with pytest.raises(ValueError, match=r"scalar.*\(2, 3\)"):
        next(autograd.backward(autograd.relu(a)))
    with pytest.raises(ValueError, match=r"reshape \(2, 3\)"):
        autograd.reshape(a, (4, 2))
    with pytest.raises(TypeError, match="singa Tensor"):
        autograd.relu(np.ones(3))
    autograd.training = False
    loss = autograd.reduce_sum(autograd.relu(a), None, 0)
    with pytest.raises(RuntimeError, match="training = True"):
        next(autograd.backward(loss))


def test_custom_operation_on_ctensors():
    """An Operation written as SINGA's are (forward/backward on `.data`), and a direct call of
    `y.creator.backward(dy.data)`."""
    class Cube(autograd.Operation):
        def forward(self, x):
            self.x = x
            assert x.nDim() == 2 and x.Size() == 3 and x.shape() == (1, 3)
            return x * x * x

        def backward(self, dy):
            return dy * 3.0 * self.x * self.x

    a = t64([[1.0, 2.0, 3.0]], stores_grad=True)
    y = Cube()(a)[0]
    np.testing.assert_allclose(y.to_numpy(), [[1.0, 8.0, 27.0]])
    dx = y.creator.backward(t64([[1.0, 1.0, 1.0]]).data)
    assert isinstance(dx, CTensor)
    np.testing.assert_allclose(dx.to_numpy(), [[3.0, 12.0, 27.0]])
    g = autograd.gradients(autograd.reduce_sum(y, None, 0))
    np.testing.assert_allclose(g[a].to_numpy(), [[3.0, 12.0, 27.0]])


def test_layer_get_and_set_params():
    lin = autograd.Linear(3, 2)
    params = lin.get_params()
    assert set(params) == {"W", "b"} and params["W"].shape == (3, 2) and params["b"].shape == (2,)
    lin.set_params(W=np.ones((3, 2)), b=np.arange(2.0))
    np.testing.assert_allclose(lin.b.to_numpy(), [0.0, 1.0])
    with pytest.raises(ValueError, match=r"has shape \(3, 2\)"):
        lin.set_params(W=np.ones((2, 2)))


# ---------------------------------------------------------------- laziness
def _spy(monkeypatch):
    be = device.get_default_device().be
    log = []
    run, dot = be.execute_assign, be.compound_dot
    inside = []     # a compound_dot is one GEMM however it runs (its fallback is a statement)

    def spy(out, value):
        if not inside:
            log.append(frozenset(OP_INFO[n[0]["op"]].kind.value for n in dag_postorder(value)))
        return run(out, value)

    def spy_dot(*args, **kwargs):
        log.append(frozenset({"matmul"}))
        inside.append(True)
        try:
            return dot(*args, **kwargs)
        finally:
            inside.pop()
    monkeypatch.setattr(be, "execute_assign", spy)
    monkeypatch.setattr(be, "compound_dot", spy_dot)
    # Tensor.__setitem__'s C fast path (neonlike._hotpath) runs a known statement without
    # execute_assign: the spy counts every statement, so the Python __setitem__ is put back
    setitem = Tensor_.__setitem__
    monkeypatch.setattr(Tensor_, "__setitem__", getattr(setitem, "__wrapped__", setitem))
    return log


def test_a_layer_chain_runs_as_one_gemm_and_one_fused_kernel(monkeypatch):
    rng = np.random.RandomState(5)
    x = Tensor(data=rng.randn(8, 4))
    w, b = Tensor(data=rng.randn(4, 5), stores_grad=True), Tensor(data=rng.randn(5), stores_grad=True)
    log = _spy(monkeypatch)
    y = autograd.relu(autograd.add_bias(autograd.matmul(x, w), b))
    assert log == [{"matmul"}] and y.data.lazy      # the GEMM ran; relu(. + b) waits
    got = y.to_numpy()
    assert log == [{"matmul"}, {"elementwise"}]     # one fused kernel on the host read
    np.testing.assert_allclose(got, np.maximum(x.to_numpy() @ w.to_numpy() + b.to_numpy(), 0),
                               rtol=1e-5)


def test_kernel_counts_of_an_mlp_train_step(monkeypatch):
    """Forward: 2 GEMMs, the hidden layer's fused kernel, softmax, loss. Backward + SGD: the
    output error, b1's update (its gradient's sum fused in), 2 GEMMs, w1's update, the hidden
    error (tanh' fused), b0's update, 1 GEMM (no gradient for the data), w0's update."""
    rng = np.random.RandomState(6)
    x = Tensor(data=rng.randn(8, 4))
    t = Tensor(data=np.eye(3)[rng.randint(0, 3, 8)], requires_grad=False)
    w0, b0 = Tensor(data=rng.randn(4, 5), stores_grad=True), Tensor(data=rng.randn(5), stores_grad=True)
    w1, b1 = Tensor(data=rng.randn(5, 3), stores_grad=True), Tensor(data=rng.randn(3), stores_grad=True)
    sgd = opt.SGD(0.1)
    log = _spy(monkeypatch)
    for step in range(2):
        del log[:]
        h = autograd.tanh(autograd.add_bias(autograd.matmul(x, w0), b0))
        loss = autograd.softmax_cross_entropy(autograd.add_bias(autograd.matmul(h, w1), b1), t)
        forward = list(log)
        for p, g in autograd.backward(loss):
            sgd.update(p, g)
        backward = log[len(forward):]
        E, R, M = "elementwise", "reduction", "matmul"
        assert forward == [{M}, {E}, {M}, {E, R}, {E, R}]
        assert len(backward) == 9
        assert sum(M in k for k in backward) == 3 and sum(k == {E} for k in backward) == 4


# ---------------------------------------------------------------- layers against torch
torch = pytest.importorskip("torch")


def _check_layer(fn, tfn, inputs, params, rng):
    """fn(singa tensors) vs tfn(torch tensors): values and every gradient (float64)."""
    xs = [t64(a, stores_grad=True) for a in inputs]
    y = fn(*xs)
    txs = [torch.tensor(a, requires_grad=True) for a in inputs]
    tps = [torch.tensor(p.to_numpy(), requires_grad=True) for p in params]
    ty = tfn(*txs, *tps)
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), rtol=1e-9, atol=1e-12)
    r = rng.randn(*ty.shape)
    g = autograd.gradients(autograd.reduce_sum(autograd.mul(y, t64(r, requires_grad=False)),
                                               None, 0))
    (ty * torch.tensor(r)).sum().backward()
    for mine, theirs in list(zip(xs, txs)) + list(zip(params, tps)):
        np.testing.assert_allclose(g[mine].to_numpy(), theirs.grad.numpy(), rtol=1e-9,
                                   atol=1e-12)


def _as64(layer, *names):
    for n in names:
        setattr(layer, n, t64(getattr(layer, n).to_numpy() + 0.1, stores_grad=True))
    return [getattr(layer, n) for n in names]


@pytest.mark.parametrize("layouts", [None, ("CTRSK",)])
@pytest.mark.parametrize("kw", [dict(padding=1), dict(stride=2, padding=0, dilation=2),
                                dict(padding=1, group=2, bias=False), dict(padding=1, out=4)])
def test_conv2d_against_torch(kw, layouts, monkeypatch):
    """Conv2d's forward and gradients against torch (float64); with layouts ('CTRSK',) the
    backend takes neon's filter layout only (W and dW are then transposed on the way), the
    4 -> 4 case checking that equal channel counts do not make the two layouts look alike."""
    if layouts is not None:
        monkeypatch.setattr(type(device.get_default_device().be), "conv_filter_layouts",
                            layouts)
    rng = np.random.RandomState(7)
    kw = dict(kw)
    conv = autograd.Conv2d(4, kw.pop("out", 6), 3, **kw)
    bias = kw.get("bias", True)
    params = _as64(conv, "W", *(["b"] if bias else []))
    tkw = {k: v for k, v in kw.items() if k != "bias"}
    tkw["groups"] = tkw.pop("group", 1)
    _check_layer(conv, lambda x, w, b=None: torch.nn.functional.conv2d(x, w, b, **tkw),
                 [rng.randn(2, 4, 7, 7)], params, rng)


@pytest.mark.parametrize("layer,tfn", [
    (lambda: autograd.MaxPool2d(3, 2, padding=1), lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1)),
    (lambda: autograd.AvgPool2d(2), lambda x: torch.nn.functional.avg_pool2d(x, 2)),
    (lambda: autograd.MaxPool1d(2), lambda x: torch.nn.functional.max_pool1d(x, 2)),
    (lambda: autograd.AvgPool1d(3, 1, padding=1),
     lambda x: torch.nn.functional.avg_pool1d(x, 3, 1, 1, count_include_pad=False))])
def test_pooling_against_torch(layer, tfn):
    rng = np.random.RandomState(8)
    shape = (2, 3, 6, 6) if "2d" in tfn.__code__.co_names[-1] else (2, 3, 6)
    _check_layer(layer(), tfn, [rng.randn(*shape)], [], rng)


def test_batchnorm2d_against_torch_with_running_stats():
    rng = np.random.RandomState(9)
    bn = autograd.BatchNorm2d(3)
    params = _as64(bn, "scale", "bias")
    bn.running_mean, bn.running_var = t64(np.zeros(3), requires_grad=False), \
        t64(np.ones(3), requires_grad=False)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    _check_layer(bn, lambda x, s, b: torch.nn.functional.batch_norm(
        x, rm, rv, s, b, training=True, momentum=0.9, eps=1e-5), [rng.randn(4, 3, 3, 2)],
        params, rng)
    np.testing.assert_allclose(bn.running_mean.to_numpy(), rm.numpy(), atol=1e-12)
    np.testing.assert_allclose(bn.running_var.to_numpy(), rv.numpy(), atol=1e-12)
    autograd.training = False
    x = rng.randn(2, 3, 2, 2)
    scale, bias = (torch.tensor(p.to_numpy()) for p in params)
    want = torch.nn.functional.batch_norm(torch.tensor(x), rm, rv, scale, bias, training=False)
    np.testing.assert_allclose(bn(t64(x)).to_numpy(), want.numpy(), atol=1e-12)


def test_batchnorm_takes_channel_rows_a_view_or_a_copy_of_a_strided_view():
    # the backend's batch-norm sums read an (N, C, H*W) view of a C-ordered tensor; a strided
    # one (no such view) is copied first, values kept
    from neonlike.singa.device import get_default_device
    from neonlike.singa.layers import _channel_rows
    dev = get_default_device()
    x = dev.be.array(np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5))
    v = _channel_rows(x, dev.alloc)
    assert v.shape == (2, 3, 20) and v._tensor.base is not None
    assert np.shares_memory(v._tensor, x._tensor)
    strided = x[:, :, :, 1:4]
    v = _channel_rows(strided, dev.alloc)
    assert v.shape == (2, 3, 12) and not np.shares_memory(v._tensor, x._tensor)
    np.testing.assert_array_equal(v.get(), x.get()[:, :, :, 1:4].reshape(2, 3, 12))


def test_batchnorm_of_a_strided_input_and_its_gradients():
    # a strided NCHW input (a slice) goes through the copy; forward and backward against torch
    rng = np.random.RandomState(3)
    base = rng.randn(4, 3, 5, 6)
    x = t64(base, requires_grad=True, stores_grad=True)
    bn = autograd.BatchNorm2d(3)
    params = _as64(bn, "scale", "bias")
    bn.running_mean, bn.running_var = t64(np.zeros(3), requires_grad=False), \
        t64(np.ones(3), requires_grad=False)
    y = bn(autograd.slice(x, [1], [5], [3]))      # (4, 3, 5, 4): a strided view
    ty = torch.tensor(base, requires_grad=True)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    want = torch.nn.functional.batch_norm(ty[:, :, :, 1:5], rm, rv,
                                          torch.tensor(params[0].to_numpy()),
                                          torch.tensor(params[1].to_numpy()), training=True,
                                          momentum=0.9)
    np.testing.assert_allclose(y.to_numpy(), want.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(bn.running_mean.to_numpy(), rm.numpy(), atol=1e-12)
    np.testing.assert_allclose(bn.running_var.to_numpy(), rv.numpy(), atol=1e-12)
    R = rng.randn(*want.shape)
    grads = autograd.gradients(autograd.reduce_sum(autograd.mul(y, t64(R, requires_grad=False))))
    (want * torch.tensor(R)).sum().backward()
    np.testing.assert_allclose(grads[x].to_numpy(), ty.grad.numpy(), atol=1e-9)


def test_rnn_and_lstm_against_torch():
    rng = np.random.RandomState(10)
    xs = [rng.randn(2, 3) for _ in range(3)]
    rnn = autograd.RNN(3, 4)
    p = _as64(rnn, "Wx", "Wh", "b")
    h0 = rng.randn(2, 4)

    def t_rnn(x0, x1, x2, h, wx, wh, b):
        for x in (x0, x1, x2):
            h = torch.tanh(x @ wx + h @ wh + b)
        return h
    _check_layer(lambda *a: rnn(list(a[:3]), a[3])[1], t_rnn, xs + [h0], p, rng)
    lstm = autograd.LSTM(3, 2)
    p = _as64(lstm, "Wx", "Wh", "b")

    def t_lstm(x0, x1, x2, h, c, wx, wh, b):
        for x in (x0, x1, x2):
            i, f, o, g = (x @ wx + h @ wh + b).split(2, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h + 2 * c
    _check_layer(lambda *a: autograd.add(*(lambda o: (o[1], autograd.mul(o[2], 2.0)))(
        lstm(list(a[:3]), (a[3], a[4])))), t_lstm, xs + [rng.randn(2, 2), rng.randn(2, 2)], p, rng)


@pytest.mark.parametrize("make,tmake", [
    (lambda: opt.SGD(0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
     lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    (lambda: opt.SGD(0.1, momentum=0.9, nesterov=True),
     lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9, nesterov=True)),
    (lambda: opt.SGD(0.1, momentum=0.9), lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9)),
    (lambda: opt.Adam(0.01), lambda ps: torch.optim.Adam(ps, 0.01, eps=1e-8))])
@pytest.mark.parametrize("use", ["w", "w * 1"])
def test_optimizers_against_torch(make, tmake, use):
    """Each rule three steps. w's gradient x.T @ dy (too small to be kept for a GEMM) is a
    tensor, so SGD with momentum runs the backend's sgd_momentum kernel; used as w * 1, the
    gradient is a lazy tree and the op-trees run."""
    rng = np.random.RandomState(11)
    w0, x = rng.randn(3, 2), rng.randn(4, 3)
    w = t64(w0, stores_grad=True)
    tw = torch.tensor(w0, requires_grad=True)
    o, to = make(), tmake([tw])
    for _ in range(3):
        y = autograd.matmul(t64(x), w if use == "w" else autograd.mul(w, t64(np.ones((3, 2)))))
        loss = autograd.reduce_sum(autograd.mul(y, y), None, 0)
        o.backward_and_update(loss)
        to.zero_grad()
        ((torch.tensor(x) @ tw) ** 2).sum().backward()
        to.step()
    np.testing.assert_allclose(w.to_numpy(), tw.detach().numpy(), rtol=1e-9)


def test_the_readme_singa_example_runs():
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("## SINGA's tape autograd", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope: dict = {}
    exec(compile(code.replace("print(", "_ = ("), "README.md", "exec"), scope)
    from neonlike.singa import autograd, tensor
    loss = autograd.softmax_cross_entropy(
        autograd.add_bias(autograd.matmul(scope["x"], scope["w"]), scope["b"]), scope["t"])
    first = float(tensor.to_numpy(loss).ravel()[0])
    assert np.isfinite(first) and first < np.log(10)      # it learned something


@pytest.mark.parametrize("first", ["tensor", "autograd", "operators", "layers", "opt", "device",
                                   "singa_wrap"])
def test_any_submodule_imports_first(first):
    """autograd re-exports the operators and layers, which import autograd: whichever module a
    script imports first, every name ends up in autograd (layers first was a circular-import
    AttributeError)."""
    import subprocess
    import sys
    code = (f"import neonlike.singa.{first}\n"
            "from neonlike.singa import autograd, layers, operators\n"
            "missing = [n for m in (layers, operators) for n in m.__all__\n"
            "           if getattr(autograd, n, None) is not getattr(m, n)]\n"
            "assert not missing, missing\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# ---------------------------------------------------------------- CHWN between operators
def _convnet(rng):
    """The bench's model in float64: conv, relu, BN, max pool, two convs cat, relu, BN, avg pool,
    flatten, linear; its layers, their parameters, and the same net in torch."""
    conv1 = autograd.Conv2d(2, 4, 3, padding=1, bias=False)
    bn1, bn2 = autograd.BatchNorm2d(4), autograd.BatchNorm2d(6)
    pool1, pool2 = autograd.MaxPool2d(3, 1, padding=1), autograd.AvgPool2d(2)
    conv21, conv22 = autograd.Conv2d(4, 2, 3, padding=1), autograd.Conv2d(4, 4, 3, padding=1)
    linear = autograd.Linear(6 * 3 * 2, 5)
    params = (_as64(conv1, "W") + _as64(bn1, "scale", "bias") + _as64(conv21, "W", "b") +
              _as64(conv22, "W", "b") + _as64(bn2, "scale", "bias") + _as64(linear, "W", "b"))
    for bn in bn1, bn2:
        n = bn.scale.shape[0]
        bn.running_mean, bn.running_var = t64(np.zeros(n), requires_grad=False), \
            t64(np.ones(n), requires_grad=False)

    def net(x):
        y = pool1(bn1(autograd.relu(conv1(x))))
        y = pool2(bn2(autograd.relu(autograd.cat((conv21(y), conv22(y)), 1))))
        return linear(autograd.flatten(y))

    F = torch.nn.functional
    stats = [torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64),
             torch.zeros(6, dtype=torch.float64), torch.ones(6, dtype=torch.float64)]

    def tnet(x, w1, s1, o1, w21, b21, w22, b22, s2, o2, lw, lb, training=True):
        y = F.batch_norm(F.relu(F.conv2d(x, w1, padding=1)), stats[0], stats[1], s1, o1,
                         training=training, momentum=0.9)
        y = F.max_pool2d(y, 3, 1, 1)
        y = torch.cat((F.conv2d(y, w21, b21, padding=1), F.conv2d(y, w22, b22, padding=1)), 1)
        y = F.batch_norm(F.relu(y), stats[2], stats[3], s2, o2, training=training,
                         momentum=0.9)
        return F.avg_pool2d(y, 2).flatten(1) @ lw + lb
    return net, tnet, params


def test_a_convnet_held_in_chwn_between_its_operators_matches_torch():
    """Convolution and pooling results stay in neon's CHWN layout (layout.py) through relu, BN,
    the other pools and convolutions and cat: forward values and every gradient against torch
    (float64), and no transpose between operators but the input's and flatten's (the CPU's
    conv layers take the weights and give their gradients in SINGA's (K, C, R, S) layout)."""
    from neonlike.singa import layers, layout
    rng = np.random.RandomState(11)
    net, tnet, params = _convnet(rng)
    transposes, weights = [], []
    orig, orig_w = layout.chwn_copy, layers.permuted

    def counted(x):
        transposes.append(x.lshape)
        return orig(x)
    layout.chwn_copy = counted
    layers.permuted = lambda v, *a: weights.append(v.shape) or orig_w(v, *a)
    try:
        _check_layer(net, tnet, [rng.randn(3, 2, 6, 4)], params, rng)
    finally:
        layout.chwn_copy, layers.permuted = orig, orig_w
    # conv1's data input, forward; pool2's gradient from flatten, backward: nothing else
    assert transposes == [(3, 2, 6, 4), (3, 6, 3, 2)]
    assert weights == []
    # inference (running statistics, updated once by each side) through the same CHWN path
    autograd.training = False
    x = rng.randn(2, 2, 6, 4)
    want = tnet(torch.tensor(x), *(torch.tensor(p.to_numpy()) for p in params), training=False)
    np.testing.assert_allclose(net(t64(x)).to_numpy(), want.numpy(), rtol=1e-9, atol=1e-12)


def test_chwn_sinks_through_elementwise_trees_and_refuses_what_needs_a_copy():
    from neonlike.ops import Op
    from neonlike.optree import build
    from neonlike.singa.layout import chwn, nchw
    be = device.get_default_device().be
    rng = np.random.RandomState(12)
    t, u = (be.array(rng.randn(4, 3, 2, 5)) for _ in range(2))      # (C, H, W, N)
    col = be.array(rng.randn(1, 4, 1, 1))                            # an NCHW broadcast
    plain = be.array(rng.randn(5, 4, 3, 2))                          # a full NCHW tensor
    tree = build(Op.MAXIMUM, (nchw(t) - col) * 2.0 + nchw(u), 0.0)
    held = chwn(tree)
    want = np.maximum((t.get().transpose(3, 0, 1, 2) - col.get()) * 2.0 +
                      u.get().transpose(3, 0, 1, 2), 0.0)
    out = be.empty((4, 3, 2, 5))
    out[:] = held
    np.testing.assert_allclose(out.get(), want.transpose(1, 2, 3, 0), rtol=1e-15)
    assert chwn(nchw(t)) is t
    assert chwn(nchw(t) + plain) is None                             # would need a transpose
    assert chwn(build(Op.SUM, nchw(t), None, axis=0)) is None        # not elementwise
    assert chwn(plain) is None and chwn(build(Op.TRANSPOSE, plain, None, axes=(0, 1, 3, 2))) \
        is None


def test_a_parameter_update_settles_its_chwn_readers_with_the_old_values():
    """BN's lazy output reads its bias; an update of the bias first runs that output in CHWN
    (CTensor.settle) with the old bias, and the value stays held in CHWN."""
    from neonlike.singa.layout import chwn
    rng = np.random.RandomState(13)
    conv, bn = autograd.Conv2d(2, 3, 3, padding=1), autograd.BatchNorm2d(3)
    _as64(conv, "W", "b")
    scale, bias = _as64(bn, "scale", "bias")
    x = t64(rng.randn(4, 2, 5, 5))
    c = conv(x).to_numpy()
    y = bn(conv(x))
    assert y.data.lazy and type(chwn(y.data.value)) is not Tensor_   # a tree over CHWN
    mean, var = c.mean(axis=(0, 2, 3), keepdims=True), c.var(axis=(0, 2, 3), keepdims=True)
    want = (c - mean) / np.sqrt(var + 1e-5) * scale.to_numpy().reshape(1, 3, 1, 1) + \
        bias.to_numpy().reshape(1, 3, 1, 1)
    bias.data.write(bias.data.value * 0.0 + 7.0)
    held = chwn(y.data.value)
    assert isinstance(held, Tensor_) and held.shape == (3, 5, 5, 4)  # run, still in CHWN
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-12, atol=1e-12)
