"""SINGA's optimizers: `update(param, grad)` in place, `backward_and_update(loss)`.

    sgd = opt.SGD(lr=0.05, momentum=0.9)       # SINGA's order: lr, momentum, dampening, ...
    for p, g in autograd.backward(loss):
        sgd.update(p, g)

SGD with momentum is the backend's `sgd_momentum`: one kernel for the velocity and the parameter
where the gradient is a tensor (on the CPU), else a fused statement per state, the gradient's tree
fused into the velocity's; plain momentum takes a large weight's gradient x.T @ dy, left unrun by
autograd, as one GEMM into the velocity (v = x.T @ dy + m * v) and a statement for the parameter.
Plain SGD is one statement for the parameter, the gradient's tree fused in.
Unlike SINGA, `weight_decay` does not write into the gradient tensor. State is kept per
parameter object.
"""
from __future__ import annotations

import math
from typing import Any

from .singa_wrap import gemm_operands
from .tensor import Tensor


def _value(g: Tensor) -> Any:
    """g's value for a statement to read: a tree fuses into it, except a product kept lazy for
    a GEMM (autograd._kept_product), which runs here once (no statement repeats a GEMM)."""
    if gemm_operands(g.data.value) is not None:
        return g.data.materialize()
    return g.data.value


def _check(p: Tensor, g: Tensor) -> None:
    if not isinstance(p, Tensor) or not isinstance(g, Tensor):
        raise TypeError(f"update: param and grad must be singa Tensors, got "
                        f"{type(p).__name__} and {type(g).__name__}")
    if p.shape != g.shape:
        raise ValueError(f"update: the gradient's shape {g.shape} differs from the parameter's "
                         f"{p.shape}")


class Optimizer:
    def __init__(self, lr: float) -> None:
        self.lr = lr
        self.step_counter = 0

    def set_lr(self, lr: float) -> None:
        self.lr = lr

    def update(self, param: Tensor, grad: Tensor) -> None:
        raise NotImplementedError

    def apply(self, param_name: Any, param: Tensor, grad: Tensor) -> None:
        self.update(param, grad)

    def backward_and_update(self, loss: Tensor) -> None:
        from .autograd import backward
        for p, g in backward(loss):
            self.update(p, g)
        self.step()

    def step(self) -> None:
        self.step_counter += 1

    def _state(self, param: Tensor, name: str, like: Any) -> Any:
        states = self.__dict__.setdefault("_states", {})
        key = (id(param), name)
        entry = states.get(key)
        if entry is None or entry[0] is not param:
            be = param.device.be
            entry = states[key] = (param, be.zeros(like.shape, dtype=param.dtype))
        return entry[1]


class SGD(Optimizer):
    """p -= lr * v; v = g (first step), then v = momentum * v + (1 - dampening) * g; with
    nesterov the step is g + momentum * v; weight_decay adds wd * p to g."""

    def __init__(self, lr: float = 0.1, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        super().__init__(lr)
        if momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: momentum and weight_decay must be >= 0, got {momentum} and "
                             f"{weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening 0")
        self.momentum, self.dampening = momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov
        self._seen: dict = {}

    def update(self, param: Tensor, grad: Tensor) -> None:
        _check(param, grad)
        p = param.data.writable()      # its lazy readers run first, on the old value
        if not self.momentum:
            g = _value(grad)
            if self.weight_decay:
                g = g + self.weight_decay * p
            p[:] = p - self.lr * g
            return
        v = self._state(param, "v", p)
        first = self._seen.get(id(param)) is not param
        self._seen[id(param)] = param
        plain = not (self.weight_decay or self.dampening or self.nesterov)
        ab = gemm_operands(grad.data.value) if plain else None   # else _value runs a product
        if ab is not None:    # v = A @ B (+ m * v): one GEMM, no gradient tensor
            param.device.be.compound_dot(ab[0], ab[1], v, 1.0, 0.0 if first else self.momentum)
            p[:] = p - self.lr * v
            return
        param.device.be.sgd_momentum(p, v, _value(grad), self.lr, self.momentum, self.dampening,
                                     self.weight_decay, self.nesterov, first)


class Adam(Optimizer):
    """Adam (Kingma and Ba): m, v moving averages of g and g^2, bias-corrected."""

    def __init__(self, lr: float = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(lr)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.weight_decay = weight_decay
        self._steps: dict = {}

    def update(self, param: Tensor, grad: Tensor) -> None:
        _check(param, grad)
        p = param.data.materialize()
        g = _value(grad)
        if self.weight_decay:
            g = g + self.weight_decay * p
        t = self._steps.get(id(param), (None, 0))
        t = (param, (t[1] if t[0] is param else 0) + 1)
        self._steps[id(param)] = t
        m, v = self._state(param, "m", p), self._state(param, "v", p)
        b1, b2 = self.beta_1, self.beta_2
        m[:] = m * b1 + (1.0 - b1) * g
        v[:] = v * b2 + (1.0 - b2) * g * g
        step = self.lr / (1.0 - b1 ** t[1])
        be = param.device.be
        scale = 1.0 / math.sqrt(1.0 - b2 ** t[1])
        param.data.write(p - step * m / (be.sqrt(v) * scale + self.epsilon))


class DistOpt(Optimizer):
    """SINGA's distributed optimizer over MPI (neonlike.distributed): wraps an optimizer, and
    `backward_and_update(loss)` packs each gradient into a fused buffer as the backward pass
    yields it (its tree run straight into the buffer), starts a bucket's non-blocking all-reduce
    as soon as it is full, and updates every parameter with the averaged gradients once all are
    in. `broadcast(params)` gives every rank rank 0's values (call it once before training).
    Run with `mpiexec -n N python script.py`; `world_size`, `global_rank` as SINGA's."""

    def __init__(self, opt: Optimizer, comm: Any = None, buffSize: int = 4 << 20,
                 first_bytes: int = 64 << 10) -> None:
        from ..distributed.comm import StreamingBuckets, install_abort_hook, world
        if not isinstance(opt, Optimizer) or isinstance(opt, DistOpt):
            raise TypeError(f"DistOpt: wraps a singa optimizer, got a {type(opt).__name__}")
        super().__init__(opt.lr)
        self.opt = opt
        self.communicator = comm if comm is not None else world()
        self.world_size = self.communicator.Get_size()
        self.global_rank = self.local_rank = self.communicator.Get_rank()
        self.buckets = StreamingBuckets(self.communicator, buffSize, first_bytes)
        install_abort_hook(self.communicator)

    def set_lr(self, lr: float) -> None:
        self.lr = lr
        self.opt.set_lr(lr)

    def update(self, param: Tensor, grad: Tensor) -> None:
        """The wrapped optimizer's update (the gradient is taken as already averaged)."""
        self.opt.update(param, grad)

    def broadcast(self, params: list) -> None:
        """Rank 0's values of `params` (singa Tensors) on every rank."""
        from ..distributed.comm import broadcast_tensors
        values = [p.data.materialize() for p in params]
        broadcast_tensors(self.communicator, values)

    def all_reduce(self, tensor: Tensor) -> None:
        """`tensor` averaged over the ranks, in place (a blocking reduction of its own)."""
        from ..distributed.comm import host_array
        value = tensor.data.materialize()
        MPI = self.buckets.MPI
        self.communicator.Allreduce(MPI.IN_PLACE, host_array(value), op=MPI.SUM)
        value[:] = value * (1.0 / self.world_size)

    def backward_and_update(self, loss: Tensor) -> None:
        from .autograd import backward
        from .singa_wrap import CTensor
        from .tensor import from_raw_tensor
        pairs = []
        for p, g in backward(loss):
            _check(p, g)
            place = self.buckets.add(p.device.be, _value(g), g.data.value.shape, g.dtype)
            pairs.append((p, from_raw_tensor(CTensor(place, p.shape, p.device, g.dtype))))
            self.buckets.progress()
        self.buckets.wait()
        for p, g in pairs:
            self.opt.update(p, g)
        self.opt.step()
        self.step()


__all__ = ["Optimizer", "SGD", "Adam", "DistOpt"]
