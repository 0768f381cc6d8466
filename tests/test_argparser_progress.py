"""The examples' command line (NeonArgparser) and the training progress line (ProgressBarCallback
on tqdm, the compile notice through cache.COMPILE_LISTENERS)."""
from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import neonlike
from neonlike.backends import cache
from neonlike.callbacks.callbacks import Callbacks, ProgressBarCallback
from neonlike.util.argparser import NeonArgparser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINAL = re.compile(r"^Epoch (\d) +\[Train \|\u2588{20}\| (\d+)/(\d+) batches, \d+\.\d\d cost, "
                   r"\d+\.\d\ds\]")


def example(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "examples", "mnist_mlp.py"), *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def assert_usage_error(out, *reasons):
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert out.stderr.startswith("usage: mnist_mlp.py ")
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("mnist_mlp.py: error: argument -b/--backend: ")
    for reason in reasons:
        assert reason in last, last


# ---------------------------------------------------------------- command line
def test_unknown_backend_is_a_usage_error_listing_the_choices():
    out = example("-b", "foo")
    assert_usage_error(out, "invalid choice: 'foo'", "'cpu'", "'mkl'", "'gpu'")


def _gpu_usable():
    if importlib.util.find_spec("pycuda") is None:
        return False
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


@pytest.mark.skipif(_gpu_usable(), reason="pycuda and a GPU are here: -b gpu works")
def test_gpu_backend_without_cuda_is_a_usage_error_with_its_cause():
    out = example("-b", "gpu")
    assert_usage_error(out, "'gpu' is unavailable here: ", "gen_backend('gpu') needs pycuda"
                       if importlib.util.find_spec("pycuda") is None else "CUDA driver")


def test_a_backend_failing_to_build_is_one_line_of_usage_error(monkeypatch, capsys):
    import neonlike.backends

    def broken(**kwargs):
        raise RuntimeError("no device here\n  (first line)\n  (second line)")
    monkeypatch.setattr(neonlike.backends, "gen_backend", broken)
    with pytest.raises(SystemExit) as e:
        NeonArgparser("doc", prog="prog.py").parse_args(["-b", "cpu"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: prog.py ")
    assert err.strip().splitlines()[-1] == ("prog.py: error: argument -b/--backend: 'cpu' is "
                                            "unavailable here: no device here (first line) "
                                            "(second line)")


def test_help_names_the_script_and_shows_the_docstring_as_description():
    out = example("--help")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("usage: mnist_mlp.py [-h] [-b NAME] ")
    assert "neon's examples/mnist_mlp.py on neonlike: a 784-100-10 MLP" in out.stdout
    assert not any(line.startswith("usage: neon's") for line in lines)
    assert "one of cpu, gpu, mkl" in out.stdout


def test_neon_argparser_takes_neons_desc_first():
    parser = NeonArgparser("the description")
    assert parser.description == "the description"
    assert parser.prog == os.path.basename(sys.argv[0])
    assert NeonArgparser(description="by keyword").description == "by keyword"
    assert NeonArgparser(prog="x.py").format_usage().startswith("usage: x.py ")
    with pytest.raises(TypeError, match="description once"):
        NeonArgparser("one", description="two")
    args = NeonArgparser("doc").parse_args(["--no_progress_bar", "-e", "1"], gen_be=False)
    assert args.callback_args["progress_bar"] is False


# ---------------------------------------------------------------- the compile notice
def test_timed_first_call_announces_the_first_call_only(monkeypatch):
    numba = pytest.importorskip("numba")
    events = []
    monkeypatch.setattr(cache, "COMPILE_LISTENERS", [events.append])
    stats = dict.fromkeys(cache.STATS_KEYS, 0)

    @numba.njit
    def kernel_twice(x):
        return 2 * x
    call = cache.timed_first_call(kernel_twice, stats)
    assert call(3) == 6 and call(4) == 8
    assert [(e.phase, e.kernel, e.kind) for e in events] == [
        ("start", "kernel_twice", None), ("end", "kernel_twice", "compile")]
    assert events[1].seconds > 0 and stats["compiles"] == 1

    @numba.njit
    def kernel_fails(x):
        return x[10]
    events.clear()
    call = cache.timed_first_call(kernel_fails, stats)
    with pytest.raises(Exception):
        call(3)                       # a typing error: the compile raises
    assert [e.phase for e in events] == ["start", "error"]


# ---------------------------------------------------------------- the progress line
class Terminal(io.StringIO):
    def isatty(self):
        return True


def fit(bar, epochs=2, seed=0):
    from neonlike.backends import gen_backend
    from neonlike.data import ArrayIterator
    from neonlike.initializers import Gaussian
    from neonlike.layers import Affine, GeneralizedCost
    from neonlike.models import Model
    from neonlike.optimizers import GradientDescentMomentum
    from neonlike.transforms import CrossEntropyBinary, Logistic, Rectlin
    gen_backend("cpu", rng_seed=seed, batch_size=32)
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(256, 64)), rng.integers(0, 10, 256)
    train = ArrayIterator(X, y, nclass=10, lshape=(1, 8, 8))
    valid = ArrayIterator(X[:64], y[:64], nclass=10, lshape=(1, 8, 8))
    init = Gaussian(loc=0.0, scale=0.01)
    model = Model([Affine(nout=16, init=init, activation=Rectlin()),
                   Affine(nout=10, init=init, activation=Logistic(shortcut=True))])
    callbacks = Callbacks(model, eval_set=valid, progress_bar=False)
    callbacks.add_callback(bar, insert_pos=len(callbacks.callbacks))
    model.fit(train, cost=GeneralizedCost(CrossEntropyBinary()),
              optimizer=GradientDescentMomentum(0.1, momentum_coef=0.9), num_epochs=epochs,
              callbacks=callbacks)
    return model


def test_line_keeps_neons_format():
    bar = ProgressBarCallback()
    bar.nbatches = 469
    assert bar.line(0, 469, 0.2213, 2.4667) == (
        "Epoch 0   [Train |" + "\u2588" * 20 + "| 469/469 batches, 0.22 cost, 2.47s]")
    assert bar.line(12, 100, 1.0, 0.5) == (
        "Epoch 12  [Train |" + "\u2588" * 4 + " " * 16 + "| 100/469 batches, 1.00 cost, 0.50s]")


def test_not_a_terminal_gets_one_line_per_epoch_and_no_carriage_return():
    out = io.StringIO()
    fit(ProgressBarCallback(out=out), epochs=2)
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == 2
    for epoch, line in enumerate(lines):
        m = FINAL.match(line)
        assert m and m[1] == str(epoch) and m[2] == m[3], line
        assert line.endswith("s]") and " [CrossEntropyBinary Loss " in line


def test_a_terminal_is_redrawn_in_place_and_told_about_compiles():
    pytest.importorskip("numba")
    neonlike.clear_caches()          # every kernel's first call again: compiled or loaded
    out = Terminal()
    bar = ProgressBarCallback(out=out, interval=0.0)
    fit(bar, epochs=2, seed=1)
    text = out.getvalue()
    assert "\r" in text
    frames = [f for f in re.split(r"[\r\n]", text) if f.strip()]
    notices = [f for f in frames if "compiling kernel" in f]
    assert notices, frames
    assert re.search(r"^Epoch 0   \[Train \|[\u2588 ]{20}\| +\d+/8 batches(, [\d.]+ cost)?, "
                     r"\d+\.\d\ds, compiling kernel 1\.\.\.\]", notices[0]), notices[0]
    counts = [int(re.search(r"compiling kernel (\d+)", f)[1]) for f in notices]
    assert counts == list(range(1, len(counts) + 1))
    assert any(re.search(r", \d+\.\d\ds, (\d\d:\d\d|\?) left, +[\d.?]+ batches/s\]$", f.rstrip())
               for f in frames), frames   # tqdm's time left and rate while the epoch runs
    finals = [f.rstrip() for f in text.split("\n") if f.strip()]
    assert len(finals) == 2
    for epoch, final in enumerate(finals):
        last = final.split("\r")[-1]
        assert FINAL.match(last) and last.startswith(f"Epoch {epoch}"), last
    assert not [f for f in cache.COMPILE_LISTENERS if getattr(f, "__self__", None) is bar]


def test_the_compile_listener_goes_at_train_end_and_on_a_failed_compile():
    out = Terminal()
    bar = ProgressBarCallback(out=out)
    bar.on_train_begin({}, None, 1)
    assert bar.on_compile in cache.COMPILE_LISTENERS

    class Model:
        nbatches = 4
    bar.on_epoch_begin({}, Model, 0)
    bar.on_compile(cache.CompileEvent("start", "kernel_serial", None, 0.0))
    assert out.getvalue().rstrip().endswith("compiling kernel 1...]")
    bar.on_compile(cache.CompileEvent("error", "kernel_serial", None, 0.1))   # e.g. Ctrl-C
    assert bar.on_compile not in cache.COMPILE_LISTENERS and bar.bar is None
    assert out.getvalue().endswith("\n")

    stale = ProgressBarCallback(out=Terminal())      # a run that raised out of fit()
    stale.on_train_begin({}, None, 1)
    bar.on_train_begin({}, None, 1)
    assert stale.on_compile not in cache.COMPILE_LISTENERS
    bar.on_train_end({}, None)
    assert bar.on_compile not in cache.COMPILE_LISTENERS


def test_no_progress_bar_flag_leaves_the_bar_out():
    args = NeonArgparser("doc").parse_args(["--no_progress_bar"], gen_be=False)

    class Model:
        pass
    callbacks = Callbacks(Model(), **args.callback_args)
    assert not any(isinstance(c, ProgressBarCallback) for c in callbacks.callbacks)
    callbacks = Callbacks(Model())
    assert any(isinstance(c, ProgressBarCallback) for c in callbacks.callbacks)
