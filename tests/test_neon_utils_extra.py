"""neon's small names: Ticker and its tasks, extract_valid_args, -u/--rounding, load_obj/save_obj."""
from __future__ import annotations

import argparse
import gzip
import pickle

import numpy as np
import pytest

from neonlike.backends import gen_backend
from neonlike.callbacks.callbacks import Callbacks, SerializeModelCallback, WatchTickerCallback
from neonlike.data import CopyTask, PrioritySortTask, RepeatCopyTask, Ticker
from neonlike.util.argparser import NeonArgparser, extract_valid_args
from neonlike.util.persist import load_obj, save_obj

BSZ = 4


@pytest.fixture
def be():
    return gen_backend("cpu", rng_seed=0, batch_size=BSZ)


def steps(a, bsz=BSZ):
    """(channels, T * bsz) time-major -> (bsz, channels, T)."""
    return a.reshape(a.shape[0], -1, bsz).transpose(2, 0, 1)


def one_batch(task):
    ticker = Ticker(task)
    x, (t, m) = next(iter(ticker))
    return ticker, x.get(), t.get(), m.get()


def test_copy_task_layout(be):
    ticker, x, t, m = one_batch(CopyTask(seq_len_max=5, vec_size=8))
    assert ticker.shape == (10, 12) and (ticker.nin, ticker.nout) == (10, 8)
    assert x.shape == (10, 12 * BSZ) and t.shape == m.shape == (8, 12 * BSZ)
    used = int(m[0].sum()) // BSZ                    # 2 l + 2 steps
    seq_len = (used - 2) // 2
    assert used == 2 * seq_len + 2 and 1 <= seq_len <= 5
    xs, ts, ms = steps(x), steps(t), steps(m)
    assert (xs[:, 8, 0] == 1).all() and xs[:, 8, 1:].sum() == 0          # start bit, step 0
    assert (xs[:, 9, seq_len + 1] == 1).all() and xs[:, 9].sum() == BSZ  # stop bit, step l+1
    np.testing.assert_array_equal(ts[:, :, seq_len + 2:used], xs[:, :8, 1:seq_len + 1])
    assert ts[:, :, :seq_len + 2].sum() == 0 and ts[:, :, used:].sum() == 0
    assert (ms[:, :, :used] == 1).all() and (ms[:, :, used:] == 0).all()
    assert set(np.unique(xs[:, :8])) <= {0.0, 1.0}


def test_ticker_epochs_are_fresh_and_seeded(be):
    batches = [t.get().copy() for _, (t, _) in Ticker(CopyTask(5, 8))]
    assert len(batches) == 100
    assert not all(np.array_equal(batches[0], b) for b in batches[1:])
    gen_backend("cpu", rng_seed=0, batch_size=BSZ)
    again = [t.get().copy() for _, (t, _) in Ticker(CopyTask(5, 8))]
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))


def test_repeat_copy_task(be):
    task = RepeatCopyTask(seq_len_max=3, repeat_count_max=2, vec_size=4)
    assert task.repeat_count_max == 2 and task.time_steps_max == 3 * 3 + 3
    ticker, x, t, m = one_batch(task)
    xs, ts = steps(x), steps(t)
    used = int(m[0].sum()) // BSZ
    r = int(xs[0, 5].max())
    seq_len = (used - 3) // (r + 1)
    assert 1 <= r <= 2 and used == seq_len * (r + 1) + 3
    seq = xs[:, :4, 1:seq_len + 1]
    for i in range(r):
        start = (i + 1) * seq_len + 2
        np.testing.assert_array_equal(ts[:, :4, start:start + seq_len], seq)
    assert (ts[:, 4, used - 1] == 1).all() and ts[:, 4].sum() == BSZ


def test_priority_sort_task(be):
    ticker, x, t, m = one_batch(PrioritySortTask(seq_len_max=4, vec_size=3))
    assert (ticker.nin, ticker.nout) == (6, 3)
    xs, ts = steps(x), steps(t)
    used = int(m[0].sum()) // BSZ
    seq_len = (used - 2) // 2
    for b in range(BSZ):
        shown = xs[b, :, 1:seq_len + 1]
        order = np.argsort(shown[-1])
        np.testing.assert_array_equal(ts[b, :, seq_len + 2:used], shown[:3, order])
        assert (np.abs(shown[-1]) < 1).all()


def test_watch_ticker_callback(be, caplog):
    from neonlike.layers import GRU
    from neonlike.initializers import Uniform
    from neonlike.models import Model
    from neonlike.transforms import Logistic, Tanh
    train = Ticker(CopyTask(3, 4))
    init = Uniform(-0.1, 0.1)
    model = Model([GRU(train.nout, init, activation=Tanh(), gate_activation=Logistic())])
    model.initialize(train)
    cbs = Callbacks(model, progress_bar=False)
    cbs.add_watch_ticker_callback(train)
    [watch] = [c for c in cbs.callbacks if isinstance(c, WatchTickerCallback)]
    watch.on_epoch_end(cbs.callback_data, model, 0)
    out = caplog.text
    assert out.index("Inputs") < out.index("Outputs") < out.index("Targets")
    with pytest.raises(ValueError, match="Ticker"):
        WatchTickerCallback(model, object())


def test_extract_valid_args():
    ns = argparse.Namespace(backend="cpu", rng_seed=3, batch_size=8, epochs=2, be=None)
    assert extract_valid_args(ns, gen_backend) == {"backend": "cpu", "rng_seed": 3,
                                                   "batch_size": 8}

    class Thing:
        def __init__(self, model, epochs=1, **kwargs):
            pass
    ns.model = "m"
    assert extract_valid_args(ns, Thing.__init__, startidx=1) == {"model": "m", "epochs": 2}
    assert extract_valid_args(ns, Thing.__init__, startidx=2) == {"epochs": 2}
    assert extract_valid_args(ns, Thing(1).__init__, startidx=1) == {"model": "m", "epochs": 2}


def test_deferred_backend_from_parsed_args():
    args = NeonArgparser("x").parse_args(["-b", "cpu", "-z", "16", "-d", "f64", "-r", "1"],
                                         gen_be=False)
    assert args.datatype is np.float64 and args.rounding is False and args.progress_bar
    be = gen_backend(**extract_valid_args(args, gen_backend))
    assert be.bsz == 16 and be.default_dtype == np.float64


@pytest.mark.parametrize("argv, value", [([], False), (["-u"], True), (["-u", "8"], 8),
                                         (["--rounding", "10"], 10)])
def test_rounding_flag(argv, value):
    args = NeonArgparser().parse_args(["-b", "mkl", *argv], gen_be=False)
    assert args.rounding == value
    args = NeonArgparser().parse_args(["-b", "cpu", "-eval", "3"], gen_be=False)
    assert args.eval_freq == 3 and args.rounding is False


def test_rounding_on_cpu_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        NeonArgparser().parse_args(["-b", "cpu", "-u"], gen_be=False)
    assert e.value.code == 2 and "stochastic rounding" in capsys.readouterr().err


def test_save_and_load_obj(tmp_path, monkeypatch):
    obj = {"a": np.arange(3), "b": [1, "two"]}
    path = tmp_path / "deep" / "er" / "x.pkl"
    save_obj(obj, str(path))
    back = load_obj(str(path))
    np.testing.assert_array_equal(back["a"], obj["a"])
    assert back["b"] == [1, "two"]
    monkeypatch.setenv("NL_TEST_DIR", str(tmp_path))
    assert load_obj("$NL_TEST_DIR/deep/er/x.pkl")["b"] == [1, "two"]
    with open(path, "rb") as f:
        assert load_obj(f)["b"] == [1, "two"]
    save_obj(obj, str(tmp_path / "x.pkl.gz"))
    with gzip.open(tmp_path / "x.pkl.gz", "rb") as f:
        assert pickle.load(f)["b"] == [1, "two"]
    assert load_obj(str(tmp_path / "x.pkl.gz"))["b"] == [1, "two"]
    save_obj(obj, None)
    save_obj(obj, "")


def test_load_obj_reads_python2_pickles(tmp_path):
    # protocol 2 with a py2 str (SHORT_BINSTRING): neon's files; latin-1 as neon's loader
    (tmp_path / "py2.pkl").write_bytes(b"\x80\x02}q\x00U\x01kq\x01U\x02\xe9vq\x02s.")
    assert load_obj(str(tmp_path / "py2.pkl")) == {"k": "\xe9v"}


def test_load_obj_reads_saved_params(tmp_path, be):
    from neonlike.layers import Affine
    from neonlike.initializers import Uniform
    from neonlike.models import Model
    model = Model([Affine(3, Uniform(-1, 1))])
    model.initialize((5,))
    model.save_params(str(tmp_path / "m.pkl"))
    assert "model" in load_obj(str(tmp_path / "m.pkl"))


def test_callbacks_save_path_alone_saves_each_epoch(tmp_path, be):
    from neonlike.layers import Affine
    from neonlike.initializers import Uniform
    from neonlike.models import Model
    model = Model([Affine(3, Uniform(-1, 1))])
    model.initialize((5,))
    cbs = Callbacks(model, save_path=str(tmp_path / "s.pkl"), serialize=0, progress_bar=False)
    [save] = [c for c in cbs.callbacks if isinstance(c, SerializeModelCallback)]
    assert save.epoch_freq == 1
    save.on_epoch_end(cbs.callback_data, model, 0)
    assert (tmp_path / "s.pkl").exists()
