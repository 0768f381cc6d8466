"""Model (neon.models.model): layers, a cost and an optimizer, trained by `fit`.

    model = Model(layers=[Affine(100, init, activation=Rectlin()), Affine(10, init, activation=Logistic(shortcut=True))])
    model.fit(train_set, cost=GeneralizedCost(CrossEntropyBinary()), optimizer=GradientDescentMomentum(0.1, 0.9),
              num_epochs=10, callbacks=Callbacks(model, eval_set=valid_set))
    error = model.eval(valid_set, metric=Misclassification())

Per minibatch: fprop, the cost added to a device accumulator (not read back), the error, bprop,
the optimizer's update: about a dozen fused statements and five GEMMs for a two-layer MLP.
"""
from __future__ import annotations

import math
import pickle
from typing import Any

import numpy as np

from .. import NervanaObject
from ..layers.container import Sequential


class Model(NervanaObject):
    def __init__(self, layers: Any, dataset: Any = None, weights_only: bool = False,
                 name: str = "model", optimizer: Any = None) -> None:
        super().__init__(name)
        if isinstance(layers, str):
            raise TypeError("Model: build the layers, then model.load_params(path) to load a "
                            "file's weights")
        self.layers = layers if isinstance(layers, Sequential) else Sequential(layers)
        self.optimizer = optimizer
        self.cost: Any = None
        self.initialized = False
        self.in_shape: tuple | None = None
        self.epoch_index = 0
        self.finished = False
        self.total_cost: Any = None
        self.nbatches = 0
        if dataset is not None:
            self.initialize(dataset)

    @property
    def layers_to_optimize(self) -> list:
        return self.layers.layers_to_optimize

    def __str__(self) -> str:
        return "Network Layers:\n" + "\n".join(str(layer) for layer in self.layers.layers)

    # ---------------------------------------------------------------- set-up
    def initialize(self, dataset: Any, cost: Any = None) -> None:
        """Shapes from the dataset, buffers and parameters; a later dataset must match."""
        shape = tuple(dataset.shape) if hasattr(dataset, "shape") else tuple(dataset)
        if self.initialized:
            if shape != self.in_shape:
                raise ValueError(f"{self.name}: the model was set up for inputs of shape "
                                 f"{self.in_shape}, this dataset gives {shape}")
        else:
            if self.be is None or not self.be.bsz:
                raise ValueError(f"{self.name}: the backend has no batch size; pass batch_size= "
                                 f"to gen_backend")
            self.layers.configure(shape)
            self.layers.allocate()
            self.layers.allocate_deltas()
            self.in_shape = shape
            self.initialized = True
        if cost is not None and cost is not self.cost:
            cost.initialize(self.layers)
            self.cost = cost
        nclass = getattr(dataset, "nclass", None)
        out = self.layers.out_shape
        if nclass is not None and cost is not None and math.prod(out) != nclass:
            raise ValueError(f"{self.name}: the last layer gives {math.prod(out)} outputs, the "
                             f"dataset has {nclass} classes")

    # ---------------------------------------------------------------- training
    def fit(self, dataset: Any, cost: Any, optimizer: Any, num_epochs: int, callbacks: Any = None) -> None:
        from ..callbacks.callbacks import Callbacks
        self.initialize(dataset, cost)
        self.optimizer = optimizer
        distribute = getattr(optimizer, "distribute", None)
        if distribute is not None:     # neonlike.distributed: broadcast, shard, rank-0 callbacks
            dataset, callbacks = distribute(self, dataset, callbacks)
        self.total_cost = self.be.zeros((1, 1))
        callbacks = callbacks if callbacks is not None else Callbacks(self, progress_bar=False)
        callbacks.on_train_begin(num_epochs)
        while self.epoch_index < num_epochs and not self.finished:
            self.nbatches = dataset.nbatches
            callbacks.on_epoch_begin(self.epoch_index)
            self._epoch_fit(dataset, callbacks)
            callbacks.on_epoch_end(self.epoch_index)
            self.epoch_index += 1
        callbacks.on_train_end()

    def _epoch_fit(self, dataset: Any, callbacks: Any) -> None:
        epoch, be = self.epoch_index, self.be
        self.total_cost[:] = 0.0
        n = 0
        for mb_idx, (x, t) in enumerate(dataset):
            callbacks.on_minibatch_begin(epoch, mb_idx)
            be.begin("minibatch", mb_idx)
            x = self.fprop(x)
            self.total_cost[:] = self.total_cost + self.cost.get_cost(x, t)
            self.bprop(self.cost.get_errors(x, t))
            self.optimizer.optimize(self.layers_to_optimize, epoch=epoch)
            be.end("minibatch", mb_idx)
            n = mb_idx + 1
            callbacks.on_minibatch_end(epoch, mb_idx)
        self.total_cost[:] = self.total_cost * (1.0 / max(n, 1))

    def set_batch_size(self, N: int) -> None:
        """The minibatch's real size (buffers keep the backend's): each layer's `actual_bsz`,
        or its own set_batch_size (neon's hook; no neonlike layer shortens its work by it)."""
        self._tell_layers("set_batch_size", "actual_bsz", N)

    def set_seq_len(self, S: int) -> None:
        """The sequences' real length: each layer's `actual_seq_len` (or its set_seq_len)."""
        self._tell_layers("set_seq_len", "actual_seq_len", S)

    def _tell_layers(self, method: str, attr: str, value: int) -> None:
        for layer in self.layers.layers_fprop():
            setter = getattr(layer, method, None)
            setter(value) if setter is not None else setattr(layer, attr, value)

    def benchmark(self, dataset: Any, inference: bool = False, cost: Any = None,
                  optimizer: Any = None, niterations: int = 20, nskip: int = 2) -> dict:
        """ms per minibatch of fprop (and, with a cost and an optimizer, bprop and the whole
        iteration) over niterations + nskip minibatches, the first nskip left out; printed
        through the logger and returned as {step: {Mean, Median, Amin, Amax}}."""
        from ..benchmark import Benchmark
        if not inference and (cost is None or optimizer is None):
            raise RuntimeError("Model.benchmark: timing bprop needs a cost and an optimizer")
        self.initialize(dataset, cost)
        if optimizer is not None:
            self.optimizer = optimizer
        times = Benchmark(self, time_layers=False).time(dataset, inference, niterations + nskip)
        return Benchmark.print_stats(times, nskip=nskip)

    def fprop(self, x: Any, inference: bool = False) -> Any:
        return self.layers.fprop(x, inference)

    def bprop(self, delta: Any) -> Any:
        return self.layers.bprop(delta)

    # ---------------------------------------------------------------- inference
    def eval(self, dataset: Any, metric: Any) -> np.ndarray:
        """The metric over the dataset (each full batch weighted by its size; the wrapped part of
        the last batch is left out)."""
        self.initialize(dataset)
        running = np.zeros(len(metric.metric_names))
        nprocessed = 0
        dataset.reset()
        for x, t in dataset:
            x = self.fprop(x, inference=True)
            bsz = min(dataset.ndata - nprocessed, self.be.bsz)
            running += np.asarray(metric(x, t, calcrange=slice(0, bsz))) * bsz
            nprocessed += bsz
        dataset.reset()
        return running / nprocessed

    def get_outputs(self, dataset: Any) -> np.ndarray:
        """The network's outputs for every sample: (ndata, outputs)."""
        self.initialize(dataset)
        dataset.reset()
        chunks = []
        for x, _ in dataset:
            chunks.append(self.fprop(x, inference=True).get().T)
        dataset.reset()
        return np.concatenate(chunks)[:dataset.ndata]

    # ---------------------------------------------------------------- weights
    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        return {"model": self.layers.get_description(get_weights, keep_states),
                "epoch_index": self.epoch_index, "in_shape": self.in_shape,
                "neonlike_version": 1}

    def save_params(self, param_path: str, keep_states: bool = True) -> None:
        """Every layer's parameters (and optimizer states) as numpy arrays in a pickle."""
        with open(param_path, "wb") as f:
            pickle.dump(self.get_description(True, keep_states), f, protocol=4)

    def load_params(self, param_path: str, load_states: bool = True) -> None:
        with open(param_path, "rb") as f:
            pdict = pickle.load(f)
        if not isinstance(pdict, dict) or "model" not in pdict:
            raise ValueError(f"{param_path}: not a file written by Model.save_params")
        if not self.initialized:
            if pdict.get("in_shape") is None:
                raise ValueError(f"{param_path}: saved from a model that was never initialised")
            self.initialize(tuple(pdict["in_shape"]))
        self.layers.load_weights(pdict["model"], load_states)
        self.epoch_index = pdict.get("epoch_index", 0)

    def serialize(self, fn: str | None = None, keep_states: bool = True) -> dict:
        pdict = self.get_description(True, keep_states)
        if fn is not None:
            with open(fn, "wb") as f:
                pickle.dump(pdict, f, protocol=4)
        return pdict
