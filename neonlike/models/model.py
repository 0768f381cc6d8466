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
            pending = self.__dict__.pop("_pending_weights", None)
            if pending is not None:                    # load_params before initialize
                self.layers.load_weights(*pending)
        if cost is not None and cost is not self.cost:
            cost.initialize(self.layers)
            self.cost = cost
        nclass = getattr(dataset, "nclass", None)
        out = self.layers.out_shape
        if nclass is not None and cost is not None and \
                (out[0] if len(out) == 2 else math.prod(out)) != nclass:   # (classes, steps)
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
        if self.initialized:
            self.layers.load_weights(pdict["model"], load_states)
        else:       # neon's order: the weights wait for initialize (which may take another
            self._pending_weights = (pdict["model"], load_states)   # sequence length)
        self.epoch_index = pdict.get("epoch_index", 0)

    def serialize(self, fn: str | None = None, keep_states: bool = True) -> dict:
        pdict = self.get_description(True, keep_states)
        if fn is not None:
            with open(fn, "wb") as f:
                pickle.dump(pdict, f, protocol=4)
        return pdict


class GAN(Model):
    """A generative adversarial net (neon's GAN): `layers` a GenerativeAdversarial container,
    `noise_dim` the generator's input shape, noise_type 'normal' or 'uniform' (in [-1, 1)).
    Each minibatch trains the discriminator on a noise batch and the data batch (gradients
    summed, one update); every get_k(generator iterations) minibatches the generator is trained
    through the discriminator. The cost is a GeneralizedGANCost (or a GeneralizedCost) of a
    GANCost. wgan_param_clamp clips the discriminator's weights to [-c, c] before each
    minibatch; wgan_train_sched trains the generator every 100 minibatches for its first 25
    iterations and every 500th (Arjovsky et al. 2017)."""

    def __init__(self, layers: Any, noise_dim: Any, noise_type: str = "normal",
                 weights_only: bool = False, name: str = "model", optimizer: Any = None,
                 k: int = 1, wgan_param_clamp: float | None = None,
                 wgan_train_sched: bool = False) -> None:
        if not (hasattr(layers, "generator") and hasattr(layers, "discriminator")):
            raise TypeError(f"GAN: layers must be a GenerativeAdversarial container, got "
                            f"{type(layers).__name__}")
        if noise_type not in ("normal", "uniform"):
            raise ValueError(f"GAN: noise_type must be 'normal' or 'uniform', got {noise_type!r}")
        if int(k) < 1:
            raise ValueError(f"GAN: k (data batches per generator batch) must be >= 1, got {k}")
        self.noise_dim = tuple(noise_dim) if isinstance(noise_dim, (tuple, list)) else noise_dim
        self.noise_type, self.k = noise_type, int(k)
        self.wgan_param_clamp, self.wgan_train_sched = wgan_param_clamp, wgan_train_sched
        super().__init__(layers, weights_only=weights_only, name=name, optimizer=optimizer)

    @staticmethod
    def clip_param_in_layers(layer_list: list, abs_bound: float | None = None) -> None:
        """Clip every parameter of the layers to [-|abs_bound|, |abs_bound|]."""
        if not abs_bound:
            return
        from ..optimizers.optimizer import get_param_list
        bound = abs(abs_bound)
        for (param, _grad), _states in get_param_list(layer_list):
            param[:] = param.backend.clip(param, -bound, bound)

    def fill_noise(self, z: Any, normal: bool = True) -> None:
        """z from N(0, 1) or uniform in [-1, 1)."""
        if normal:
            self.be.fill_normal(z)
        else:
            z.set(self.be.rng.uniform(-1.0, 1.0, z.shape))   # neon: 2 * be.rand() - 1

    def initialize(self, dataset: Any, cost: Any = None) -> None:
        if self.initialized:
            return
        if self.be is None or not self.be.bsz:
            raise ValueError(f"{self.name}: the backend has no batch size; pass batch_size= to "
                             f"gen_backend")
        layers = self.layers
        layers.configure(self.noise_dim)
        shape = tuple(dataset.shape) if hasattr(dataset, "shape") else None
        gen_out = tuple(layers.generator.out_shape) if isinstance(
            layers.generator.out_shape, (tuple, list)) else (layers.generator.out_shape,)
        if shape is not None and math.prod(shape) != math.prod(gen_out):
            raise ValueError(f"{self.name}: the generator gives {gen_out}, the discriminator "
                             f"reads data of shape {shape}")
        if cost is not None:
            cost.initialize(layers)
            self.cost = cost
        layers.allocate()
        layers.allocate_deltas()
        self.in_shape = shape
        self.initialized = True
        self.zbuf = self.be.iobuf(self.noise_dim)
        self.ybuf = self.be.iobuf((1,))
        # the cost's errors are op-trees; layers take (and may write into) a tensor
        self.dbuf = self.be.iobuf(layers.discriminator.out_shape)
        self.z0 = self.be.iobuf(self.noise_dim)      # fixed noise for samples to look at
        self.fill_noise(self.z0, normal=self.noise_type == "normal")
        self.cost_dis = np.empty((1,), dtype=np.float32)
        self.current_batch = self.gen_iter = self.last_gen_batch = 0

    def get_k(self, giter: int) -> int:
        """Data minibatches per generator iteration after giter generator iterations."""
        if self.wgan_train_sched and (giter < 25 or giter % 500 == 0):
            return 100
        return self.k

    def _epoch_fit(self, dataset: Any, callbacks: Any) -> None:
        epoch, be = self.epoch_index, self.be
        gen, dis = self.layers.generator, self.layers.discriminator
        normal = self.noise_type == "normal"
        costfunc = self.cost.costfunc
        self.total_cost[:] = 0.0
        first_gen_iter = self.gen_iter
        z, y_temp = self.zbuf, self.ybuf
        x = None
        for mb_idx, (x, _) in enumerate(dataset):
            callbacks.on_minibatch_begin(epoch, mb_idx)
            be.begin("minibatch", mb_idx)
            if self.wgan_param_clamp:
                self.clip_param_in_layers(dis.layers_to_optimize, self.wgan_param_clamp)
            # the discriminator: a noise batch, then the data batch, gradients summed
            self.fill_noise(z, normal=normal)
            y_noise = self.fprop_dis(self.fprop_gen(z))
            y_temp[:] = y_noise
            self.dbuf[:] = costfunc.bprop_noise(y_noise)
            self.bprop_dis(self.dbuf)
            dis.set_acc_on(True)
            y_data = self.fprop_dis(x)
            self.dbuf[:] = costfunc.bprop_data(y_data)
            self.bprop_dis(self.dbuf)
            self.optimizer.optimize(dis.layers_to_optimize, epoch=epoch)
            dis.set_acc_on(False)
            self.cost_dis[:] = self._gan_cost(y_data, y_temp).get().ravel()[:1]
            # the generator, through the discriminator
            if self.current_batch == self.last_gen_batch + self.get_k(self.gen_iter):
                self.fill_noise(z, normal=normal)
                y_temp[:] = y_data
                y_noise = self.fprop_dis(self.fprop_gen(z))
                self.dbuf[:] = costfunc.bprop_generator(y_noise)
                self.bprop_gen(self.bprop_dis(self.dbuf))
                self.optimizer.optimize(gen.layers_to_optimize, epoch=epoch)
                cost = self._gan_cost(y_temp, y_noise)
                self.cost_dis[:] = cost.get().ravel()[:1]
                self.total_cost[:] = self.total_cost + cost
                self.last_gen_batch = self.current_batch
                self.gen_iter += 1
            be.end("minibatch", mb_idx)
            callbacks.on_minibatch_end(epoch, mb_idx)
            self.current_batch += 1
        n = self.gen_iter - first_gen_iter
        if n == 0:
            raise RuntimeError(f"{self.name}: no generator iteration in this epoch "
                               f"({dataset.nbatches} minibatches, one every "
                               f"{self.get_k(self.gen_iter)} after the first): the epoch's cost "
                               f"cannot be estimated; use more minibatches or a smaller k")
        self.total_cost[:] = self.total_cost * (1.0 / n)
        self.data_batch, self.noise_batch = x, self.fprop_gen(self.z0)

    def _gan_cost(self, y_data: Any, y_noise: Any) -> Any:
        """The discriminator's cost on data and noise outputs, a (1, 1) device tensor."""
        try:
            return self.cost.get_cost(y_data, y_noise, cost_type="dis")
        except TypeError:      # a plain GeneralizedCost: GANCost's default type is 'dis'
            return self.cost.get_cost(y_data, y_noise)

    def fprop_gen(self, x: Any, inference: bool = False) -> Any:
        return self.layers.generator.fprop(x, inference)

    def fprop_dis(self, x: Any, inference: bool = False) -> Any:
        return self.layers.discriminator.fprop(x, inference)

    def bprop_dis(self, delta: Any) -> Any:
        return self.layers.discriminator.bprop(delta)

    def bprop_gen(self, delta: Any) -> Any:
        return self.layers.generator.bprop(delta)
