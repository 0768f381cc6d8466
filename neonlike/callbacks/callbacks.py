"""Callbacks (neon.callbacks.callbacks): hooks around training, with neon's names.

`Callbacks(model, eval_set=..., eval_freq=1, serialize=N, save_path=...)` always holds a
TrainCostCallback and (unless progress_bar=False) a ProgressBarCallback; with an eval_set a
LossCallback evaluates the cost on it every eval_freq epochs. Results go to `callback_data`, a dict
of lists ('cost/train': per-epoch mean cost, 'cost/loss': validation cost, 'time/train': seconds).

The device is read only where something is shown or stored: the progress bar reads the running
cost when it redraws (at most every 0.1 s and on the last batch), TrainCostCallback once per epoch.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

import numpy as np

from .. import NervanaObject, logger


class Callback(NervanaObject):
    epoch_freq: int = 1

    def on_train_begin(self, callback_data: dict, model: Any, epochs: int) -> None: ...
    def on_train_end(self, callback_data: dict, model: Any) -> None: ...
    def on_epoch_begin(self, callback_data: dict, model: Any, epoch: int) -> None: ...
    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None: ...
    def on_minibatch_begin(self, callback_data: dict, model: Any, epoch: int, minibatch: int) -> None: ...
    def on_minibatch_end(self, callback_data: dict, model: Any, epoch: int, minibatch: int) -> None: ...

    def should_fire(self, epoch: int) -> bool:
        return self.epoch_freq > 0 and (epoch + 1) % self.epoch_freq == 0


class TrainCostCallback(Callback):
    """The mean training cost of each epoch into callback_data['cost/train'] (one read per epoch)."""

    def on_train_begin(self, callback_data: dict, model: Any, epochs: int) -> None:
        callback_data.setdefault("cost/train", [])

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        callback_data["cost/train"].append(float(model.total_cost.get()[0, 0]))


class ProgressBarCallback(Callback):
    """neon's progress line, drawn by tqdm:
    `Epoch 0   [Train |████████████████████| 469/469 batches, 0.22 cost, 2.47s]`.

    On a terminal, and in a notebook where tqdm.auto picks its widget, the line is redrawn in place
    at most every `interval` seconds and on the last batch, with the time left and the rate while
    the epoch runs, and says "compiling kernel N..." while a kernel compiles (the first epoch, cold
    cache). Anywhere else (a file, a pipe, CI) it writes each epoch's final line only, without
    carriage returns. `out` defaults to sys.stdout.
    """

    def __init__(self, bar_width: int = 20, interval: float = 0.1, out: Any = None) -> None:
        super().__init__()
        self.bar_width, self.interval = bar_width, interval
        self.out = out
        self.bar: Any = None
        self.bar_class: type | None = None
        self.widget = False   # tqdm.auto's notebook widget: it draws the bar itself
        self.compiled = 0

    def _stream(self) -> Any:
        return self.out if self.out is not None else sys.stdout

    def _head(self, widget: bool = False) -> str:
        """tqdm's bar_format up to 'batches'."""
        bar = "{bar}" if widget else "{bar:%d}" % self.bar_width
        w = len(str(max(self.nbatches, 1)))
        return "{desc} [Train |" + bar + "| {n:>%dd}/{total:<%dd} batches" % (w, w)

    def line(self, epoch: int, done: int, cost: float, elapsed: float) -> str:
        """The epoch's final line, neon's format."""
        from tqdm.std import tqdm
        return tqdm.format_meter(done, max(self.nbatches, 1), elapsed, prefix=f"Epoch {epoch:<3d}",
                                 ascii=_BAR_CHARS, bar_format=self._head() + _literal(
                                     f", {cost:.2f} cost, {elapsed:.2f}s]"))

    def on_train_begin(self, callback_data: dict, model: Any, epochs: int) -> None:
        from ..backends.cache import COMPILE_LISTENERS
        # a bar left by a run that raised out of fit() (it never reached on_train_end)
        COMPILE_LISTENERS[:] = [f for f in COMPILE_LISTENERS if not isinstance(
            getattr(f, "__self__", None), ProgressBarCallback)]
        self.compiled = 0
        self.bar_class = _bar_class(self.out)
        self.widget = self.bar_class is not None and self.bar_class is not _std_tqdm()
        if self.bar_class is not None:
            COMPILE_LISTENERS.append(self.on_compile)

    def on_train_end(self, callback_data: dict, model: Any) -> None:
        self._stop()

    def _stop(self) -> None:
        from ..backends.cache import COMPILE_LISTENERS
        if self.on_compile in COMPILE_LISTENERS:
            COMPILE_LISTENERS.remove(self.on_compile)
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def on_epoch_begin(self, callback_data: dict, model: Any, epoch: int) -> None:
        self.start = self.last = time.perf_counter()
        self.nbatches, self.done, self.cost, self.elapsed = model.nbatches, 0, 0.0, 0.0
        if self.bar_class is not None:
            self.running = self._head(self.widget) + "{postfix}, {elapsed_s:.2f}s, {remaining} " \
                                                     "left, {rate_noinv_fmt}]"
            size = {} if self.widget else _screen(self._stream())
            self.bar = self.bar_class(total=max(self.nbatches, 1), desc=f"Epoch {epoch:<3d}",
                                      file=self._stream(), bar_format=self.running,
                                      ascii=_BAR_CHARS, unit=" batches", leave=True,
                                      mininterval=self.interval, **size)

    def on_compile(self, event: Any) -> None:
        """COMPILE_LISTENERS' entry while training: the main thread is compiling, so the line is
        redrawn from here."""
        bar = self.bar
        if bar is None:
            return
        if event.phase == "start":
            self.compiled += 1
            bar.bar_format = self.running.rsplit(", {remaining}", 1)[0] + \
                f", compiling kernel {self.compiled}...]"
            bar.refresh()
        elif event.phase == "error":   # e.g. Ctrl-C while compiling: fit() will not end the bar
            self._stop()

    def on_minibatch_end(self, callback_data: dict, model: Any, epoch: int, minibatch: int) -> None:
        now = time.perf_counter()
        done = minibatch + 1
        if done < self.nbatches and now - self.last < self.interval:
            return
        self.last = now
        self.done, self.elapsed = done, now - self.start
        self.cost = float(model.total_cost.get()[0, 0]) / done
        if self.bar is not None:
            self.bar.n = done
            self.bar.bar_format = self.running
            self.bar.set_postfix_str(f"{self.cost:.2f} cost", refresh=False)
            self.bar.refresh()

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        extra = ""
        losses = callback_data.get("cost/loss")
        if losses and callback_data.get("cost/loss_epoch", [None])[-1] == epoch:
            name = type(model.cost.costfunc).__name__ if model.cost is not None else "Validation"
            extra = f" [{name} Loss {losses[-1]:.2f}, {callback_data['time/loss'][-1]:.2f}s]"
        tail = _literal(f", {self.cost:.2f} cost, {self.elapsed:.2f}s]{extra}")
        if self.bar is not None:
            self.bar.n = self.done
            self.bar.bar_format = self._head(self.widget) + tail
            self.bar.close()           # draws the final line and ends it
            self.bar = None
        else:
            out = self._stream()
            out.write(self.line(epoch, self.done, self.cost, self.elapsed) + extra + "\n")
            out.flush()


_BAR_CHARS = " \u2588"   # tqdm's charset: blank and full block only, as neon drew it


def _literal(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _std_tqdm() -> type:
    from tqdm.std import tqdm
    return tqdm


def _screen(stream: Any) -> dict:
    """tqdm's ncols and nrows for a terminal: its size, where it tells one (some pseudo-terminals
    say 0 x 0, which would make tqdm hide the line)."""
    try:
        cols, rows = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        cols = rows = 0
    return {"ncols": cols or 10_000, "nrows": rows or 24}


def _bar_class(out: Any) -> type | None:
    """tqdm.auto's class where `out` is stdout in a notebook (its widget), the terminal bar where
    `out` is a terminal, else None (one line per epoch)."""
    if out is None:
        from tqdm.auto import tqdm as auto
        notebook = sys.modules.get("tqdm.notebook")   # imported by tqdm.auto in a notebook only
        if notebook is not None and issubclass(auto, notebook.tqdm_notebook):
            return auto
        out = sys.stdout
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):   # no isatty, or a closed stream
        tty = False
    return _std_tqdm() if tty else None


def _dataset_cost(model: Any, dataset: Any) -> float:
    """The model's cost averaged over a dataset's samples (inference mode)."""
    cost = model.cost
    total, n = 0.0, 0
    dataset.reset()
    for x, t in dataset:
        y = model.fprop(x, inference=True)
        bsz = min(dataset.ndata - n, model.be.bsz)
        cost.outputs[:] = cost.costfunc(y, t)
        total += float(cost.outputs.get()[0, :bsz].sum())
        n += bsz
    dataset.reset()
    return total / n


class LossCallback(Callback):
    """The cost on `eval_set` every epoch_freq epochs into callback_data['cost/loss']."""

    def __init__(self, eval_set: Any, epoch_freq: int = 1) -> None:
        super().__init__()
        self.eval_set, self.epoch_freq = eval_set, epoch_freq

    def on_train_begin(self, callback_data: dict, model: Any, epochs: int) -> None:
        for k in ("cost/loss", "cost/loss_epoch", "time/loss"):
            callback_data.setdefault(k, [])

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        if not self.should_fire(epoch):
            return
        t0 = time.perf_counter()
        callback_data["cost/loss"].append(_dataset_cost(model, self.eval_set))
        callback_data["cost/loss_epoch"].append(epoch)
        callback_data["time/loss"].append(time.perf_counter() - t0)


class MetricCallback(Callback):
    """A metric on `eval_set` every epoch_freq epochs into callback_data['metrics/<name>']."""

    def __init__(self, eval_set: Any, metric: Any, epoch_freq: int = 1) -> None:
        super().__init__()
        self.eval_set, self.metric, self.epoch_freq = eval_set, metric, epoch_freq

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        if self.should_fire(epoch):
            values = np.atleast_1d(model.eval(self.eval_set, metric=self.metric))
            for name, v in zip(self.metric.metric_names, values):
                callback_data.setdefault(f"metrics/{name}", []).append(float(v))


class SerializeModelCallback(Callback):
    """Saves the model's parameters every epoch_freq epochs; with history > 1 the last `history`
    files are kept as save_path_<epoch>."""

    def __init__(self, save_path: str, epoch_freq: int = 1, history: int = 1) -> None:
        super().__init__()
        self.save_path, self.epoch_freq, self.history = save_path, epoch_freq, history
        self.saved: list = []

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        if not self.should_fire(epoch):
            return
        path = self.save_path if self.history <= 1 else f"{self.save_path}_{epoch}"
        model.save_params(path)
        if self.history > 1:
            self.saved.append(path)
            while len(self.saved) > self.history:
                old = self.saved.pop(0)
                if os.path.exists(old):
                    os.remove(old)


class SaveBestStateCallback(Callback):
    """Saves the parameters whenever the validation cost (cost/loss) reaches a new low."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.best_path, self.best = path, float("inf")

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        losses = callback_data.get("cost/loss")
        if losses and callback_data["cost/loss_epoch"][-1] == epoch and losses[-1] < self.best:
            self.best = losses[-1]
            model.save_params(self.best_path)


class EarlyStopCallback(Callback):
    """`stop_func(state, validation_cost) -> (state, finished)` after each validation; finished
    ends training (neon's contract; the first call gets state None)."""

    def __init__(self, stop_func: Callable) -> None:
        super().__init__()
        self.stop_func, self.stop_state = stop_func, None

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        losses = callback_data.get("cost/loss")
        if losses and callback_data["cost/loss_epoch"][-1] == epoch:
            self.stop_state, finished = self.stop_func(self.stop_state, losses[-1])
            if finished:
                model.finished = True


class RunTimerCallback(Callback):
    """Training time into callback_data['time/train'] per epoch and 'time/total'."""

    def on_train_begin(self, callback_data: dict, model: Any, epochs: int) -> None:
        self.t0 = time.perf_counter()
        callback_data.setdefault("time/train", [])

    def on_epoch_begin(self, callback_data: dict, model: Any, epoch: int) -> None:
        self.te = time.perf_counter()

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        callback_data["time/train"].append(time.perf_counter() - self.te)

    def on_train_end(self, callback_data: dict, model: Any) -> None:
        callback_data["time/total"] = time.perf_counter() - self.t0


class WatchTickerCallback(Callback):
    """Shows one sample of a Ticker data set every epoch_freq epochs: its inputs, the model's
    outputs and the targets over the sample's steps (neon's diagnostic for the copy tasks)."""

    def __init__(self, model: Any, valid_set: Any, epoch_freq: int = 1) -> None:
        super().__init__()
        from ..data.ticker import Ticker
        if not isinstance(valid_set, Ticker):
            raise ValueError(f"WatchTickerCallback: valid_set must be a Ticker, got "
                             f"{type(valid_set).__name__}")
        self.model, self.valid_set, self.epoch_freq = model, valid_set, epoch_freq

    def on_epoch_end(self, callback_data: dict, model: Any, epoch: int) -> None:
        if not self.should_fire(epoch):
            return
        x, (t, mask) = next(iter(self.valid_set))
        y = model.fprop(x, inference=True)
        bsz = self.be.bsz
        steps = 1 + int(np.max(mask.get().nonzero()[1])) // bsz
        with np.printoptions(formatter={"float": "{: 0.1f}".format}, linewidth=150):
            for name, item in (("Inputs", x), ("Outputs", y), ("Targets", t)):
                logger.display(name)
                logger.display(str(item.get()[:, ::bsz][:, :steps]))   # the first sample


class Callbacks(NervanaObject):
    """The callbacks of one training run, called in order."""

    def __init__(self, model: Any, train_set: Any = None, output_file: str | None = None,
                 eval_freq: int | None = 1, progress_bar: bool = True, save_path: str | None = None,
                 serialize: int = 0, history: int = 1, model_file: str | None = None,
                 eval_set: Any = None, metric: Any = None, log_token: Any = None,
                 multicost: bool = False) -> None:
        super().__init__()
        self.model = model
        self.callback_data: dict = {}
        self.callbacks: list = [RunTimerCallback(), TrainCostCallback()]
        if eval_set is not None and eval_freq:
            self.callbacks.append(LossCallback(eval_set, eval_freq))
            if metric is not None:
                self.callbacks.append(MetricCallback(eval_set, metric, eval_freq))
        if save_path:      # as neon: a save_path alone saves every epoch
            self.callbacks.append(SerializeModelCallback(save_path, max(serialize or 1, 1),
                                                         history))
        if model_file:
            model.load_params(model_file)
        if progress_bar:
            self.callbacks.append(ProgressBarCallback())

    def add_callback(self, callback: Callback, insert_pos: int | None = None) -> None:
        if insert_pos is None:
            # before the progress bar, so that what it prints at an epoch's end is there
            bars = [i for i, c in enumerate(self.callbacks) if isinstance(c, ProgressBarCallback)]
            insert_pos = bars[0] if bars else len(self.callbacks)
        self.callbacks.insert(insert_pos, callback)

    def add_validation_callback(self, valid_set: Any, epoch_freq: int) -> None:
        self.add_callback(LossCallback(valid_set, epoch_freq))

    def add_save_best_state_callback(self, path: str) -> None:
        self.add_callback(SaveBestStateCallback(path))

    def add_early_stop_callback(self, stop_func: Callable) -> None:
        self.add_callback(EarlyStopCallback(stop_func))

    def add_watch_ticker_callback(self, valid: Any) -> None:
        """Show a sample of the Ticker data set `valid` (the training set will do) each epoch."""
        self.add_callback(WatchTickerCallback(self.model, valid))

    def on_train_begin(self, epochs: int) -> None:
        for c in self.callbacks:
            c.on_train_begin(self.callback_data, self.model, epochs)

    def on_train_end(self) -> None:
        for c in self.callbacks:
            c.on_train_end(self.callback_data, self.model)

    def on_epoch_begin(self, epoch: int) -> None:
        for c in self.callbacks:
            c.on_epoch_begin(self.callback_data, self.model, epoch)

    def on_epoch_end(self, epoch: int) -> None:
        for c in self.callbacks:
            c.on_epoch_end(self.callback_data, self.model, epoch)

    def on_minibatch_begin(self, epoch: int, minibatch: int) -> None:
        for c in self.callbacks:
            c.on_minibatch_begin(self.callback_data, self.model, epoch, minibatch)

    def on_minibatch_end(self, epoch: int, minibatch: int) -> None:
        for c in self.callbacks:
            c.on_minibatch_end(self.callback_data, self.model, epoch, minibatch)


__all__ = ["Callbacks", "Callback", "TrainCostCallback", "ProgressBarCallback", "LossCallback",
           "MetricCallback", "SerializeModelCallback", "SaveBestStateCallback",
           "EarlyStopCallback", "RunTimerCallback", "WatchTickerCallback"]
