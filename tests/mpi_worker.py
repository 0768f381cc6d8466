"""One rank of tests/test_distributed.py's MPI jobs: `python tests/mpi_worker.py SCENARIO OUTDIR`.

identical    three epochs with a different initialisation seed per rank, several buckets,
             momentum SGD, Adam, a user's subclass (averaged by the buckets), and plain SGD
             with a layer whose gradient is copied in and out of its bucket; every bucket but
             the first layer's starts before that layer's bprop ends; rank 0 checks every rank's parameters and costs are bit-identical and
             that the epoch's shards are disjoint
mlp B        one epoch with batch B on the digits (shuffled, seed 0); rank 0 saves the weights
singa        the SINGA front end's DistOpt: parameters bit-identical after a few steps
raise        rank 1 raises in its third minibatch; the job must end by MPI_Abort
"""
from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from neonlike.backends import gen_backend
from neonlike.callbacks.callbacks import Callback, Callbacks
from neonlike.data import ArrayIterator, load_digits
from neonlike.distributed import DistributedOptimizer
from neonlike.initializers import Gaussian
from neonlike.layers import Activation, Affine, Bias, GeneralizedCost, Linear
from neonlike.models import Model
from neonlike.optimizers import Adam, GradientDescentMomentum
from neonlike.transforms import CrossEntropyBinary, Logistic, Rectlin

comm = MPI.COMM_WORLD
rank = comm.Get_rank()


class KeptListLinear(Linear):
    """Keeps its param list, as neon's recurrent layers do: its gradient tensor cannot become a
    bucket's view, and is copied in and out instead."""

    def allocate(self, shared_outputs: object = None) -> None:
        super().allocate(shared_outputs)
        self.plist = [((self.W, self.dW), self.states)]

    def get_params(self) -> list:
        return self.plist


def mlp(seed: int, batch: int, kept: bool = False) -> tuple:
    gen_backend("cpu", batch_size=batch, rng_seed=seed)
    (X, y), _, nclass = load_digits()
    train = ArrayIterator(X, y, nclass=nclass)
    init = Gaussian(scale=0.1)
    first = [KeptListLinear(32, init), Bias(init), Activation(Rectlin())] if kept else \
        [Affine(32, init, bias=init, activation=Rectlin())]
    model = Model(first + [Affine(10, init, bias=init, activation=Logistic(shortcut=True))])
    return model, train


def weights(model: Model) -> list:
    return [p.get() for layer in model.layers_to_optimize for (p, _), _ in layer.get_params()]


class OwnSGD(GradientDescentMomentum):
    """An optimizer of the user's: the buckets average with their own statement."""


def identical(outdir: str) -> None:
    for inner in (GradientDescentMomentum(0.1, momentum_coef=0.9), Adam(learning_rate=0.01),
                  OwnSGD(0.1, momentum_coef=0.9), GradientDescentMomentum(0.1)):
        kept = type(inner) is GradientDescentMomentum and not inner.momentum_coef
        model, train = mlp(seed=100 + rank, batch=16, kept=kept)
        opt = DistributedOptimizer(inner, first_bytes=512, fusion_bytes=4096)
        cb = Callbacks(model, progress_bar=False)
        model.fit(train, GeneralizedCost(CrossEntropyBinary()), opt, num_epochs=2, callbacks=cb)
        costs = list(cb.callback_data["cost/train"])
        overlap_checked(model, train, opt)
        mine = (weights(model), costs)
        everyone = comm.gather(mine, root=0)
        shards = comm.gather(opt.buckets and model_shard(train, opt), root=0)
        if rank == 0:
            assert len(opt.buckets.buffers) >= 2, len(opt.buckets.buffers)
            assert opt.buckets.average == (type(inner) is OwnSGD)
            assert [type(layer) for layer, _, _ in opt._unbound] == ([KeptListLinear] if kept
                                                                      else [])
            for r, (ws, costs) in enumerate(everyone[1:], 1):
                for a, b in zip(mine[0], ws):
                    assert a.tobytes() == b.tobytes(), f"rank {r}'s parameters differ"
                assert costs == mine[1], f"rank {r} reports costs {costs}, rank 0 {mine[1]}"
            flat = np.concatenate([s.ravel() for s in shards])
            assert len(np.unique(flat)) == flat.size, "the shards overlap"
            print(f"identical {type(inner).__name__}: {len(opt.buckets.buffers)} buckets, "
                  f"costs {mine[1]}", flush=True)


def overlap_checked(model: Model, train: ArrayIterator, opt: DistributedOptimizer) -> None:
    """One more epoch, noting which buckets start before the first layer's bprop has ended: all
    but the first layer's own (their reductions run while its backward still does)."""
    first, start, early = model.layers.layers[0], opt.buckets.start, set()

    def noting_start(b: int) -> None:
        if opt.buckets.requests[b] is None and id(first) not in opt._reported:
            early.add(b)
        start(b)

    opt.buckets.start = noting_start
    model.fit(train, model.cost, opt, num_epochs=model.epoch_index + 1,
              callbacks=Callbacks(model, progress_bar=False))
    opt.buckets.start = start
    last = opt.buckets.group_bucket[id(first)]
    assert early == set(range(len(opt.buckets.buffers))) - {last}, (early, last)


def model_shard(train: ArrayIterator, opt: DistributedOptimizer) -> np.ndarray:
    from neonlike.distributed import ShardIterator
    return ShardIterator(train, opt.comm, seed=opt.seed).indices(0)


def trained_mlp(batch: str, outdir: str) -> None:
    model, train = mlp(seed=0, batch=int(batch))
    opt = DistributedOptimizer(GradientDescentMomentum(0.1, momentum_coef=0.9))
    model.fit(train, GeneralizedCost(CrossEntropyBinary()), opt, num_epochs=1,
              callbacks=Callbacks(model, progress_bar=False))
    if opt.is_root:
        np.savez(f"{outdir}/mlp_{comm.Get_size()}x{batch}.npz", *weights(model))


def singa_params(seed: int) -> list:
    from neonlike.singa.tensor import Tensor
    np.random.seed(seed)
    params = []
    for shape in ((6, 16), (1, 16), (16, 4), (1, 4)):
        p = Tensor(shape=shape, requires_grad=True, stores_grad=True)
        p.gaussian(0.0, 0.3)
        params.append(p)
    return params


def singa_train(params: list, sgd: object, batches: list) -> None:
    from neonlike.singa import autograd
    from neonlike.singa.tensor import Tensor
    w0, b0, w1, b1 = params
    autograd.training = True
    for x, t in batches:
        x, t = Tensor(data=x, requires_grad=False), Tensor(data=t, requires_grad=False)
        h = autograd.relu(autograd.add_bias(autograd.matmul(x, w0), b0))
        loss = autograd.softmax_cross_entropy(autograd.add_bias(autograd.matmul(h, w1), b1), t)
        sgd.backward_and_update(loss)


def singa(outdir: str) -> None:
    from neonlike.singa import opt, tensor
    params = singa_params(seed=rank)            # each rank starts from its own values
    first = [tensor.to_numpy(p) for p in params]
    assert comm.allgather(first[0].tobytes()).count(first[0].tobytes()) == 1, "same start"
    sgd = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9), first_bytes=64)
    sgd.broadcast(params)
    start = [tensor.to_numpy(p) for p in params]
    rng = np.random.default_rng(0)              # global batches of 16, rank r takes rows 8r..
    batches = [(rng.standard_normal((16, 6)).astype(np.float32),
                np.eye(4, dtype=np.float32)[rng.integers(0, 4, 16)]) for _ in range(3)]
    singa_train(params, sgd, [(x[8 * rank:8 * rank + 8], t[8 * rank:8 * rank + 8])
                              for x, t in batches])
    mine = [tensor.to_numpy(p) for p in params]
    everyone = comm.gather(mine, root=0)
    if rank == 0:
        for r, ws in enumerate(everyone[1:], 1):
            for a, b in zip(mine, ws):
                assert a.tobytes() == b.tobytes(), f"rank {r}'s SINGA parameters differ"
        alone = singa_params(seed=0)
        for p, v in zip(alone, start):
            p.copy_from_numpy(v)
        singa_train(alone, opt.SGD(lr=0.1, momentum=0.9), batches)
        for a, p in zip(mine, alone):
            np.testing.assert_allclose(a, tensor.to_numpy(p), rtol=1e-4, atol=1e-6)
        print(f"singa identical: {len(sgd.buckets.buffers)} buckets, equal to one rank of "
              f"batch 16", flush=True)


class RaiseOnRank1(Callback):
    def on_minibatch_end(self, callback_data: dict, model: object, epoch: int, minibatch: int) -> None:
        if rank == 1 and minibatch == 2:
            raise ValueError("rank 1 fails on purpose")


def raises(outdir: str) -> None:
    model, train = mlp(seed=0, batch=16)
    opt = DistributedOptimizer(GradientDescentMomentum(0.1))
    cb = Callbacks(model, progress_bar=False)
    cb.add_callback(RaiseOnRank1())
    model.fit(train, GeneralizedCost(CrossEntropyBinary()), opt, num_epochs=100, callbacks=cb)


if __name__ == "__main__":
    scenario, *rest = sys.argv[1:]
    {"identical": identical, "mlp": trained_mlp, "singa": singa, "raise": raises}[scenario](*rest)
