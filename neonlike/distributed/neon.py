"""Data-parallel training of neon models: `DistributedOptimizer`, `ShardIterator`.

`Model.fit` hands itself, the dataset and the callbacks to the optimizer's `distribute` (any
optimizer that has one): the parameters and optimizer state go out from rank 0, the dataset
becomes this rank's shard of each epoch, the gradients' tensors become views into the fused
buckets (the layers' own statements write them there), each layer's end of bprop may start its
bucket's all-reduce, and the callbacks that print or save stay on rank 0 only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import NervanaObject
from ..callbacks.callbacks import (Callback, Callbacks, ProgressBarCallback,
                                   SaveBestStateCallback, SerializeModelCallback)
from ..optimizers.optimizer import Optimizer, get_param_list
from .comm import (GradientBuckets, broadcast_tensors, host_array, install_abort_hook, mpi,
                   world)

_ROOT_ONLY = (ProgressBarCallback, SerializeModelCallback, SaveBestStateCallback)


class ShardIterator(NervanaObject):
    """This rank's shard of every epoch of an in-memory dataset (an ArrayIterator's arrays).

    Each epoch is permuted by a generator seeded with (seed, epoch), the same on every rank, and
    cut into global batches of size * bsz samples; rank r takes columns r*bsz..(r+1)*bsz of each.
    The shards are disjoint, every rank has the same number of batches, and the samples past the
    last whole global batch (fewer than size * bsz) sit out that epoch (another set each epoch).
    With size 1 and batch 2B the batches are the unions of the two ranks' batches at size 2 and B.
    """

    def __init__(self, dataset: Any, comm: Any = None, shuffle: bool = True, seed: int = 0,
                 name: str | None = None) -> None:
        super().__init__(name)
        if not hasattr(dataset, "Xdev"):
            raise TypeError(f"ShardIterator: expected an ArrayIterator (in-memory arrays), got a "
                            f"{type(dataset).__name__}")
        be = self.be
        self.comm = comm if comm is not None else world()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.dataset, self.shuffle, self.seed = dataset, shuffle, seed
        self.X = dataset.Xdev.get()
        self.Y = None if dataset.ydev is None else dataset.ydev.get()
        self.ndata, self.shape = dataset.ndata, dataset.shape
        self.nclass = getattr(dataset, "nclass", None)
        self.lshape = getattr(dataset, "lshape", None)
        if self.nbatches == 0:
            raise ValueError(f"ShardIterator: {self.ndata} samples make no global batch of "
                             f"{self.size} ranks x {be.bsz}")
        # sample-major buffers served transposed, as ArrayIterator serves its rows: a batch is
        # one gather of whole rows into the buffer's memory
        self.Xrows = be.empty((be.bsz, self.X.shape[1]))
        self.yrows = None if self.Y is None else be.empty((be.bsz, self.Y.shape[1]))
        self.epoch = 0

    @property
    def nbatches(self) -> int:
        return self.ndata // (self.size * self.be.bsz)

    def reset(self) -> None:
        """neon's reset between passes; the epoch count (and so the next shuffle) goes on."""

    def indices(self, epoch: int) -> np.ndarray:
        """This rank's sample indices of `epoch`, (nbatches, bsz)."""
        order = (np.random.default_rng([self.seed, epoch]).permutation(self.ndata) if self.shuffle
                 else np.arange(self.ndata))
        bsz = self.be.bsz
        glob = order[:self.nbatches * self.size * bsz].reshape(self.nbatches, self.size, bsz)
        return glob[:, self.rank]

    def __iter__(self) -> Any:
        xs = host_array(self.Xrows)
        ys = None if self.yrows is None else host_array(self.yrows)
        for idx in self.indices(self.epoch):
            np.take(self.X, idx, axis=0, out=xs)
            if ys is not None:
                np.take(self.Y, idx, axis=0, out=ys)
            yield self.Xrows.T, (None if self.yrows is None else self.yrows.T)
        self.epoch += 1


def _refers(value: Any, grad: Any, depth: int = 0) -> bool:
    """Whether `value` is, views, or holds in its lists, tuples and dicts, the tensor `grad`."""
    if value is grad or getattr(value, "base", None) is not None and \
            getattr(value, "_original_base", None) is grad:
        return True
    if depth < 3 and isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return any(_refers(v, grad, depth + 1) for v in items)
    return False


def _rebind(layer: Any, grad: Any, view: Any) -> bool:
    """Makes `view` the layer's gradient tensor where that is safe: `grad` is no view, one
    attribute holds it and nothing else of the layer refers to it (neon's recurrent layers write
    their gradient through views of one tensor, and list it in a kept param list: those keep
    their tensors, and the gradient is copied in and out of the bucket instead)."""
    if grad.base is not None:
        return False
    names = [k for k, v in vars(layer).items() if v is grad]
    if len(names) != 1 or any(_refers(v, grad) for k, v in vars(layer).items() if k != names[0]):
        return False
    setattr(layer, names[0], view)
    if any(g is view for (_, g), _ in layer.get_params()):
        return True
    setattr(layer, names[0], grad)
    return False


class _ReduceCost(Callback):
    """Averages the running training cost over the ranks at the epoch's last minibatch, before
    the progress bar and TrainCostCallback read it, so every rank reports the same cost."""

    def __init__(self, comm: Any) -> None:
        super().__init__()
        self.comm = comm
        self.MPI = mpi()

    def on_train_end(self, callback_data: dict, model: Any) -> None:
        model.layers.bprop_hook = None             # set again by the next distributed fit()

    def on_minibatch_end(self, callback_data: dict, model: Any, epoch: int, minibatch: int) -> None:
        if minibatch + 1 == model.nbatches:
            total = model.total_cost
            self.comm.Allreduce(self.MPI.IN_PLACE, host_array(total), op=self.MPI.SUM)
            total[:] = total * (1.0 / self.comm.Get_size())


class DistributedOptimizer(Optimizer):
    """Data-parallel training by one line: `optimizer = DistributedOptimizer(optimizer)`.

    Run the script with `mpiexec -n N python script.py`. `Model.fit` then broadcasts rank 0's
    parameters and optimizer state, trains each rank on its shard of every epoch (ShardIterator:
    `shuffle`, `seed`), averages the gradients over the ranks before every update (fused float32
    buckets: `fusion_bytes`, `first_bytes`; see GradientBuckets), averages the training cost, and
    keeps the progress bar and checkpoints on rank 0. An uncaught exception on any rank aborts
    the job. `rank`, `size` and `is_root` are there for the script's own prints and files.
    """

    def __init__(self, optimizer: Any, comm: Any = None, shuffle: bool = True, seed: int = 0,
                 fusion_bytes: int = 4 << 20, first_bytes: int = 64 << 10,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        if not isinstance(optimizer, Optimizer) or isinstance(optimizer, DistributedOptimizer):
            raise TypeError(f"DistributedOptimizer: wraps a neon optimizer, got a "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        self.comm = comm if comm is not None else world()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.is_root = self.rank == 0
        self.shuffle, self.seed = shuffle, seed
        self.fusion_bytes, self.first_bytes = fusion_bytes, first_bytes
        self.buckets: GradientBuckets | None = None
        self._layers: list = []
        self._unbound: list = []           # (layer, grad, view) where no attribute holds grad
        self._reported: set = set()        # layers whose bprop ended this step
        install_abort_hook(self.comm)

    # ---------------------------------------------------------------- set-up
    def distribute(self, model: Any, dataset: Any, callbacks: Any) -> tuple:
        """Model.fit's hook: broadcast, shard, buckets, rank-0 callbacks; returns (dataset,
        callbacks) to train with."""
        self.bind(model.layers_to_optimize)
        model.layers.bprop_hook = self.layer_done
        self.broadcast(model)
        if not isinstance(dataset, ShardIterator):
            dataset = ShardIterator(dataset, self.comm, self.shuffle, self.seed)
        dataset.epoch = model.epoch_index           # a later fit() goes on with the next shuffle
        if callbacks is None:
            callbacks = Callbacks(model, progress_bar=False)
        if not self.is_root:
            callbacks.callbacks = [c for c in callbacks.callbacks if not isinstance(c, _ROOT_ONLY)]
        if not any(isinstance(c, _ReduceCost) for c in callbacks.callbacks):
            callbacks.callbacks.insert(0, _ReduceCost(self.comm))
        return dataset, callbacks

    def bind(self, layer_list: list) -> None:
        """The layers' gradient tensors become views into the fused buckets (once)."""
        if self.buckets is not None and [id(x) for x in layer_list] == \
                [id(x) for x in self._layers]:
            return
        entries = [(layer, param, grad) for layer in reversed(layer_list)
                   for (param, grad), _ in layer.get_params()]
        dtype = entries[0][2].dtype if entries else np.float32
        folded = self._fold_average()
        self.buckets = GradientBuckets(self.comm, self.be, [g.size for _, _, g in entries],
                                       [id(layer) for layer, _, _ in entries],
                                       self.fusion_bytes, self.first_bytes, dtype,
                                       average=not folded)
        self._layers, self._unbound = list(layer_list), []
        for i, (layer, param, grad) in enumerate(entries):
            view = self.buckets.view(i).reshape(grad.shape)
            view[:] = grad
            if not _rebind(layer, grad, view):
                self._unbound.append((layer, grad, view))

    def _fold_average(self) -> bool:
        """Where every wrapped optimizer is one of neonlike's (they divide each gradient by the
        batch size in their update's statement), the 1/size of the average goes there too
        (`grad_sums`) and the buckets need no scaling statement of their own."""
        inner = self.optimizer
        opts = [inner, *getattr(inner, "optimizer_mapping", {}).values()]
        if any(type(o).__module__ != Optimizer.__module__ for o in opts):
            return False
        for o in opts:
            o.grad_sums = self.size
        return True

    def broadcast(self, model: Any) -> None:
        """Rank 0's parameters, optimizer states (made where a rank lacks them), the optimizer's
        counters and the model's epoch to every rank."""
        params = get_param_list(model.layers_to_optimize)
        counts = self.comm.bcast([len(states) for _, states in params], root=0)
        tensors = []
        for ((param, grad), states), n in zip(params, counts):
            del states[n:]
            while len(states) < n:
                states.append(self.be.zeros_like(grad))
            tensors += [param, *states]
        broadcast_tensors(self.comm, tensors)
        inner = self.optimizer
        plain = {k: v for k, v in vars(inner).items()
                 if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)}
        for k, v in self.comm.bcast(plain, root=0).items():
            setattr(inner, k, v)
        model.epoch_index = self.comm.bcast(model.epoch_index, root=0)

    # ---------------------------------------------------------------- per step
    def layer_done(self, layer: Any) -> None:
        """Sequential.bprop's hook after each layer: its bucket may start now."""
        for owner, grad, view in self._unbound:
            if owner is layer:
                view[:] = grad
        self._reported.add(id(layer))
        self.buckets.ready(id(layer))
        self.buckets.progress()

    def optimize(self, layer_list: list, epoch: int) -> None:
        """Waits for the averaged gradients, then the wrapped optimizer's update."""
        self.bind(layer_list)
        for owner, grad, view in self._unbound:
            if id(owner) not in self._reported:      # a loop without Sequential's hook
                view[:] = grad
        self._reported.clear()
        self.buckets.wait()
        for _, grad, view in self._unbound:
            grad[:] = view
        self.optimizer.optimize(layer_list, epoch)

    def get_description(self) -> dict:
        return self.optimizer.get_description()


__all__ = ["DistributedOptimizer", "ShardIterator"]
