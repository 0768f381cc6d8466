"""The front ends (webdnn, ngraph, SINGA) on the 'gpu' backend, against their CPU results: on the
emulated device of test_gpu_offline.py, and on a real GPU where one is present. Each front end lowers onto the same backend calls on either device: webdnn's
views become strided device views, SINGA's conv, pool and batch norm the GPU's kernels.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import make_backend
from test_gpu_offline import cpu, example_error, gpu  # noqa: F401  (fixtures)


@pytest.fixture(params=["emulated", "device"])
def dev_gpu(request):
    """The 'gpu' backend on the emulated device, or on a real GPU (skipped, with the reason,
    where gen_backend('gpu') cannot be made)."""
    return request.getfixturevalue("gpu") if request.param == "emulated" else \
        make_backend("gpu")


def launches(be):
    """The emulated device's launch log (None on a real device)."""
    fake = getattr(be, "fake", None)
    return None if fake is None else fake.launches


# ---------------------------------------------------------------- webdnn
def test_webdnn_network_on_the_gpu_equals_the_cpu_and_numpy(dev_gpu, cpu):  # noqa: F811
    gpu = dev_gpu
    """conv -> relu -> pool -> reshape -> linear -> softmax, inputs fed in other orders than
    the ops read them (views: strided on the device), and a transpose that moves no data."""
    from neonlike.webdnn.graph import (AveragePooling2D, Convolution2d, Linear, MaxPooling2D,
                                       Order, Reshape, Softmax, Transpose, Variable, relu, run,
                                       tanh)
    from neonlike.webdnn.lowering import Lowering
    rng = np.random.default_rng(0)

    def new(shape):
        return Variable(shape, Order([None] * len(shape)))

    x, w = new([2, 2, 6, 6]), new([2, 3, 3, 3])
    y, = Convolution2d(None, ksize=3, pad=1)(x, w)
    h, = MaxPooling2D(None, ksize=2)(relu(y))
    a, = AveragePooling2D(None, ksize=2)(tanh(y))
    f, = Reshape(None, [2, 27], Order([x.order.axes[0], None]))(h)
    v = new([27, 4])
    logits, = Linear(None)(f, v)
    p, = Softmax(None)(logits)
    t, = Transpose(None, Order(list(reversed(y.order.axes))))(y)
    feeds = {x: rng.standard_normal(x.shape), w: rng.standard_normal(w.shape),
             v: rng.standard_normal(v.shape)}
    results = [run([p, t, a], feeds, backend=be) for be in (gpu, cpu)]
    for g, c in zip(*results):
        np.testing.assert_allclose(g, c, rtol=2e-5, atol=1e-6)
    lw = Lowering(gpu)
    lw.feed({x: feeds[x]})
    tt, = Transpose(None, Order([x.order.axes[3], x.order.axes[1], x.order.axes[0],
                                 x.order.axes[2]]))(x)
    np.testing.assert_allclose(lw.fetch(tt), feeds[x].transpose(3, 1, 0, 2), rtol=1e-6)
    assert lw.statements == 0


# ---------------------------------------------------------------- ngraph
def test_ngraph_example_learns_the_same_on_the_gpu(dev_gpu, tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    from neonlike.ngraph.frontends.neon import ax
    for axis in (ax.N, ax.Y):      # the example sets their lengths: put them back afterwards
        monkeypatch.setattr(axis, "length", axis.length)
    errors = [example_error(monkeypatch, "ngraph_mlp.py", "-b", b, "-e", "1", "-w",
                            str(tmp_path)) for b in ("gpu", "cpu")]
    assert errors[0] <= 40.0 and abs(errors[0] - errors[1]) <= 1.0, errors


# ---------------------------------------------------------------- SINGA
def singa_step(dev, params):
    """One training step of a small SINGA conv net on `dev` from the given weights: the loss, the
    logits and every parameter's gradient, as numpy arrays."""
    from neonlike.singa import autograd, tensor
    conv = autograd.Conv2d(1, 4, 3, padding=1)
    bn = autograd.BatchNorm2d(4)
    pool = autograd.MaxPool2d(2)
    avg = autograd.AvgPool2d(3, 1, padding=1)
    linear = autograd.Linear(4 * 4 * 4, 5)
    rng = np.random.default_rng(3)
    x = tensor.Tensor(device=dev, data=rng.normal(size=(6, 1, 8, 8)).astype(np.float32),
                      stores_grad=False)
    t = tensor.Tensor(device=dev, data=np.eye(5, dtype=np.float32)[rng.integers(0, 5, 6)],
                      requires_grad=False)

    def forward():
        y = avg(pool(autograd.relu(bn(conv(x)))))
        return linear(autograd.flatten(y))

    autograd.training = True
    try:
        forward()                   # makes the parameters; then the same values on each device
        layers = {"conv": conv, "bn": bn, "linear": linear}
        for name, layer in layers.items():
            layer.set_params(**params[name])
        logits = forward()
        loss = autograd.softmax_cross_entropy(logits, t)
        grads = {id(p): tensor.to_numpy(g) for p, g in autograd.backward(loss)}
        named = [grads[id(getattr(layer, k))] for name, layer in layers.items()
                 for k in sorted(params[name])]
    finally:
        autograd.training = False
    return [tensor.to_numpy(loss), tensor.to_numpy(logits)] + named


def test_singa_conv_net_step_on_the_gpu_equals_the_cpu(dev_gpu):
    from neonlike.singa import device
    rng = np.random.default_rng(5)
    params = {"conv": {"W": rng.normal(0, 0.5, (4, 1, 3, 3)), "b": rng.normal(0, 0.1, 4)},
              "bn": {"scale": rng.normal(1, 0.1, 4), "bias": rng.normal(0, 0.1, 4)},
              "linear": {"W": rng.normal(0, 0.2, (64, 5)), "b": rng.normal(0, 0.1, 5)}}
    log = launches(dev_gpu)
    before = len(log or ())
    on_gpu = singa_step(device.create_cuda_gpu(set_default=False), params)
    if log is not None:
        names = log[before:]
        assert any(n.startswith("nl_im2col") for n in names), "the conv ran off the device"
        assert sum(n.startswith("nl_pool") for n in names) >= 4, "pools ran off the device"
    on_cpu = singa_step(device.create_cpu_device(), params)
    for g, c in zip(on_gpu, on_cpu):
        np.testing.assert_allclose(g, c, rtol=2e-4, atol=2e-5)


def test_singa_examples_learn_on_the_gpu(dev_gpu, monkeypatch):
    """singa_cnn.py and singa_mlp.py with the GPU as SINGA's default device (create_cuda_gpu):
    every statement runs on the device, and the nets learn (their weights drawn by the device's
    generator, so not the CPU run's numbers)."""
    pytest.importorskip("sklearn")
    from neonlike.singa import device
    log = launches(dev_gpu)
    before = len(log or ())
    device.create_cuda_gpu()
    try:
        assert device.create_cpu_device().backend_name == "cpu"
        errors = [example_error(monkeypatch, script, "--epochs", "1")
                  for script in ("singa_mlp.py", "singa_cnn.py")]
    finally:
        device.set_default_device(device.Device("cpu"))
    assert errors[0] <= 25.0 and errors[1] <= 15.0, errors
    assert log is None or any(n.startswith("nl_im2col") for n in log[before:])
