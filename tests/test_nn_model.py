"""Model.fit end to end (fused kernels): digits accuracy, eval, outputs, save/load, callbacks,
data loading, and bad input rejected before any training starts."""
from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

pytest.importorskip("sklearn")

from neonlike.backends import gen_backend  # noqa: E402
from neonlike.callbacks.callbacks import Callbacks  # noqa: E402
from neonlike.data import MNIST, ArrayIterator, find_mnist, load_digits, load_mnist  # noqa: E402
from neonlike.initializers import Gaussian  # noqa: E402
from neonlike.layers import Affine, Conv, GeneralizedCost, Linear  # noqa: E402
from neonlike.models import Model  # noqa: E402
from neonlike.optimizers import GradientDescentMomentum  # noqa: E402
from neonlike.transforms import (CrossEntropyBinary, Logistic, Misclassification,  # noqa: E402
                                 Rectlin)
from neonlike.util.argparser import NeonArgparser  # noqa: E402


def mlp(nout=10):
    init = Gaussian(loc=0.0, scale=0.01)
    return Model([Affine(nout=100, init=init, activation=Rectlin()),
                  Affine(nout=nout, init=init, activation=Logistic(shortcut=True))])


@pytest.fixture
def digits():
    gen_backend("cpu", rng_seed=0, batch_size=32)
    (X, y), (Xt, yt), nclass = load_digits()
    return (ArrayIterator(X, y, nclass=nclass, lshape=(1, 8, 8)),
            ArrayIterator(Xt, yt, nclass=nclass, lshape=(1, 8, 8)))


def test_digits_reach_95_percent_in_10_epochs(digits, capsys):
    train, valid = digits
    model = mlp()
    callbacks = Callbacks(model, eval_set=valid)
    model.fit(train, cost=GeneralizedCost(CrossEntropyBinary()),
              optimizer=GradientDescentMomentum(0.1, momentum_coef=0.9), num_epochs=10,
              callbacks=callbacks)
    error = model.eval(valid, metric=Misclassification())[0]
    assert error <= 0.05, error
    costs = callbacks.callback_data["cost/train"]
    assert len(costs) == 10 and costs[-1] < costs[0] / 3
    out = capsys.readouterr().out
    last = out.splitlines()[-1].split("\r")[-1]
    assert last.startswith("Epoch 9   [Train |" + "\u2588" * 20 + "| 45/45 batches, ")
    assert "cost, " in last and "[CrossEntropyBinary Loss " in last


def test_outputs_eval_and_save_load_round_trip(digits, tmp_path):
    train, valid = digits
    model = mlp()
    model.fit(train, cost=GeneralizedCost(CrossEntropyBinary()),
              optimizer=GradientDescentMomentum(0.1, momentum_coef=0.9), num_epochs=2)
    outputs = model.get_outputs(valid)
    assert outputs.shape == (valid.ndata, 10)
    labels = valid.labels
    np.testing.assert_allclose(model.eval(valid, metric=Misclassification())[0],
                               np.mean(outputs.argmax(1) != labels), atol=1e-6)
    path = str(tmp_path / "mlp.pkl")
    model.save_params(path)
    other = mlp()
    other.load_params(path)
    np.testing.assert_array_equal(other.get_outputs(valid), outputs)
    # states came back too: one more epoch from both gives the same weights
    opt = GradientDescentMomentum(0.1, momentum_coef=0.9)
    for m in (model, other):
        m.epoch_index = 0
        train.reset()
        m.fit(train, cost=GeneralizedCost(CrossEntropyBinary()), optimizer=opt, num_epochs=1)
    np.testing.assert_allclose(other.get_outputs(valid), model.get_outputs(valid), rtol=1e-5,
                               atol=1e-6)


def test_callbacks_serialize_and_early_stop(digits, tmp_path):
    train, valid = digits
    model = mlp()
    save = str(tmp_path / "ckpt")
    cb = Callbacks(model, eval_set=valid, serialize=1, save_path=save, history=2,
                   progress_bar=False)
    calls = []

    def stop(state, loss):
        calls.append(loss)
        return state, len(calls) == 3
    cb.add_early_stop_callback(stop)
    model.fit(train, cost=GeneralizedCost(CrossEntropyBinary()),
              optimizer=GradientDescentMomentum(0.1, momentum_coef=0.9), num_epochs=10,
              callbacks=cb)
    assert model.epoch_index == 3 and len(cb.callback_data["cost/loss"]) == 3
    assert sorted(os.listdir(tmp_path)) == ["ckpt_1", "ckpt_2"]


def test_bad_input_is_caught_before_training(digits):
    train, valid = digits
    be = gen_backend("cpu", rng_seed=0, batch_size=32)
    X = np.random.rand(64, 5)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 3\), got 0..3"):
        ArrayIterator(X, np.arange(64) % 4, nclass=3)
    with pytest.raises(ValueError, match="lshape"):
        ArrayIterator(X, np.arange(64) % 3, nclass=3, lshape=(1, 2, 2))
    model = mlp()
    model.initialize(ArrayIterator(X, np.arange(64) % 10, nclass=10))
    before = [p.get() for layer in model.layers_to_optimize for (p, _), _ in layer.get_params()]
    with pytest.raises(ValueError, match=r"set up for inputs of shape \(5,\), this dataset gives \(64,\)"):
        model.fit(ArrayIterator(np.random.rand(64, 64), np.arange(64) % 10, nclass=10),
                  cost=GeneralizedCost(CrossEntropyBinary()),
                  optimizer=GradientDescentMomentum(0.1), num_epochs=1)
    after = [p.get() for layer in model.layers_to_optimize for (p, _), _ in layer.get_params()]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="the last layer gives 4 outputs, the dataset has 10"):
        mlp(nout=4).fit(ArrayIterator(X, np.arange(64) % 10, nclass=10),
                        cost=GeneralizedCost(CrossEntropyBinary()),
                        optimizer=GradientDescentMomentum(0.1), num_epochs=1)
    with pytest.raises(ValueError, match=r"\(C, H, W\) or \(C, D, H, W\), got in_shape \(5,\)"):
        Model([Conv((3, 3, 4), init=Gaussian()), Linear(2)]).fit(
            ArrayIterator(X, np.arange(64) % 2, nclass=2), cost=GeneralizedCost(CrossEntropyBinary()),
            optimizer=GradientDescentMomentum(0.1), num_epochs=1)
    assert be.bsz == 32


def test_array_iterator_wraps_and_carries(digits):
    gen_backend("cpu", batch_size=4)
    X = np.arange(30.0).reshape(10, 3)
    it = ArrayIterator(X, np.arange(10) % 3, nclass=3)
    seen = []
    for epoch in range(2):
        assert it.nbatches == (3 if epoch == 0 else 2)
        for x, t in it:
            seen.append((x.get()[0] / 3).astype(int).tolist())
            np.testing.assert_array_equal(t.get().argmax(0), np.array(seen[-1]) % 3)
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]


def _idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_mnist_from_local_idx_files(tmp_path):
    gen_backend("cpu", batch_size=16)
    rng = np.random.default_rng(0)
    train, test = rng.integers(0, 256, (40, 28, 28)), rng.integers(0, 256, (20, 28, 28))
    _idx(tmp_path / "train-images-idx3-ubyte.gz", train)
    _idx(tmp_path / "train-labels-idx1-ubyte.gz", np.arange(40) % 10)
    _idx(tmp_path / "t10k-images-idx3-ubyte.gz", test)
    _idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.arange(20) % 10)
    assert find_mnist(str(tmp_path)) == "idx" and find_mnist(str(tmp_path / "none")) is None
    (X, y), (Xt, yt), nclass = load_mnist(str(tmp_path))
    assert X.shape == (40, 784) and nclass == 10
    np.testing.assert_allclose(X, train.reshape(40, 784) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(yt, np.arange(20) % 10)
    mnist = MNIST(path=str(tmp_path))
    assert mnist.train_iter.shape == (1, 28, 28) and mnist.valid_iter.ndata == 20
    with pytest.raises(FileNotFoundError, match="no MNIST files"):
        load_mnist(str(tmp_path / "none"))


def test_neon_argparser_makes_the_backend():
    args = NeonArgparser("doc").parse_args(["-b", "cpu", "-z", "64", "-e", "3", "-r", "1",
                                            "--no_progress_bar"])
    assert args.epochs == 3 and args.be.bsz == 64 and args.be.backend_name == "cpu"
    assert args.callback_args["progress_bar"] is False and args.callback_args["eval_freq"] == 1
