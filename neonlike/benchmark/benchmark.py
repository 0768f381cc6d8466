"""Benchmark (neon.benchmark.benchmark): time a model's minibatch steps and each layer's fprop and
bprop with the backend's timing marks.

    b = Benchmark(model)                 # wraps every layer's fprop/bprop with marks
    times = b.time(train_set, niterations=20)          # ms per step: fprop, bprop, iteration,
    Benchmark.print_stats(times)                       # data_loading, 'fprop <layer>', ...

Timing marks synchronise with the device, so GPU times are the work's, not the launches'.
Where neon patched `LayerContainer.flatten_layers` onto the container class, the layers are
walked here (`Sequential.layers_fprop`).
"""
from __future__ import annotations

from collections import OrderedDict
from functools import wraps
from typing import Any, Callable

import numpy as np


def _leaf_layers(model: Any) -> list:
    """The model's layers, nested containers opened (the containers themselves left out)."""
    return [layer for layer in model.layers.layers_fprop() if not hasattr(layer, "layers_fprop")]


class Benchmark:
    def __init__(self, model: Any, time_layers: bool = True) -> None:
        self.model = model
        self.layer_times: OrderedDict = OrderedDict()
        self.time_layers = time_layers
        if not time_layers:
            return
        be = model.be
        self.start, self.end = be.init_mark(), be.init_mark()
        for layer in _leaf_layers(model):
            for step in ("fprop", "bprop"):
                times = self.layer_times.setdefault(f"{step} {layer.name}", [])
                setattr(layer, step, self.benchmarked(getattr(layer, step), self.start, self.end,
                                                      times, be))

    @staticmethod
    def benchmarked(func: Callable, start: dict, end: dict, output: list,
                    be: Any = None) -> Callable:
        """func, each call timed (ms, synchronised) and appended to `output`."""
        if be is None:
            from .. import NervanaObject
            be = NervanaObject.be

        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            be.record_mark(start)
            result = func(*args, **kwargs)
            be.record_mark(end)
            be.synchronize_mark(end)
            output.append(be.get_time(start, end))
            return result
        return wrapper

    def time(self, dataset: Any, inference: bool = False, niterations: int = 20) -> OrderedDict:
        """ms per minibatch over `niterations` minibatches (the dataset repeated as needed):
        'fprop' (with the data loading), and unless inference 'bprop' (cost error, bprop, the
        optimizer's update) and 'iteration'; 'data_loading'; then each layer's."""
        model = self.model
        if not dataset:
            raise ValueError("Benchmark.time: provide a dataset to time on, got "
                             f"{dataset!r}")
        if niterations < 1:
            raise ValueError(f"Benchmark.time: niterations must be >= 1, got {niterations}")
        if not inference and (model.cost is None or model.optimizer is None):
            raise RuntimeError("Benchmark.time: timing bprop needs the model's cost and "
                               "optimizer (model.fit, or set model.cost and model.optimizer)")
        be = model.be
        keys = ["fprop"] if inference else ["fprop", "bprop", "iteration"]
        if self.time_layers:
            keys.append("data_loading")
        times = OrderedDict((k, np.full(niterations, -1.0)) for k in keys)
        loading, f_start, f_end, b_end = (be.init_mark() for _ in range(4))
        count = 0
        while count < niterations:
            dataset.reset()
            be.record_mark(loading)
            for x, t in dataset:
                be.record_mark(f_start)
                x = model.fprop(x, inference)
                be.record_mark(f_end)
                if inference:
                    be.synchronize_mark(f_end)
                else:
                    model.cost.get_cost(x, t)
                    model.bprop(model.cost.get_errors(x, t))
                    model.optimizer.optimize(model.layers_to_optimize, epoch=0)
                    be.record_mark(b_end)
                    be.synchronize_mark(b_end)
                load = be.get_time(loading, f_start)
                if self.time_layers:
                    times["data_loading"][count] = load
                times["fprop"][count] = be.get_time(f_start, f_end) + load
                if not inference:
                    times["bprop"][count] = be.get_time(f_end, b_end)
                    times["iteration"][count] = times["fprop"][count] + times["bprop"][count]
                be.record_mark(loading)
                count += 1
                if count >= niterations:
                    break
        times.update(self.layer_times)
        return times

    @staticmethod
    def print_stats(stats: Any, functions: Any = None, output: Any = None,
                    nskip: int = 0) -> dict:
        """A table of each statistic's functions (default mean, median, amin, amax, titled by
        their names) through `output.display` (default neonlike's logger); returns the numbers."""
        if not stats:
            raise ValueError(f"print_stats: provide a dict of timings, got {stats!r}")
        if output is None:
            from ..util.log import logger as output
        elif not hasattr(output, "display"):
            raise TypeError(f"print_stats: output must have a display method, got "
                            f"{type(output).__name__}")
        functions = functions or (np.mean, np.median, np.amin, np.amax)
        names = [f.__name__.title() for f in functions]
        rows = [f"| {'Func':^33} " + "".join(f"| {n:^11} " for n in names) + "|    Units    |"]
        out: dict = {}
        for step, values in stats.items():
            values = np.asarray(values, dtype=np.float64)[nskip:]
            if not values.size or not values.any():
                continue
            out[step] = {n: float(f(values)) for n, f in zip(names, functions)}
            rows.append(f"| {step:<33} " + "".join(f"|  {out[step][n]:<10.5g} " for n in names)
                        + f"| {'msec':^11} |")
        sep = "+" + "-" * (len(rows[0]) - 2) + "+"
        output.display("\n".join([sep, rows[0], sep] + rows[1:] + [sep]))
        return out
