"""SINGA's optimizers: `update(param, grad)` in place, `backward_and_update(loss)`.

    sgd = opt.SGD(lr=0.05, momentum=0.9)       # SINGA's order: lr, momentum, dampening, ...
    for p, g in autograd.backward(loss):
        sgd.update(p, g)

Each update is one fused statement per state (SGD: the velocity, then the parameter; plain SGD
just the parameter, the gradient's tree fused in). Unlike SINGA, `weight_decay` does not write
into the gradient tensor. State is kept per parameter object.
"""
from __future__ import annotations

import math
from typing import Any

from .tensor import Tensor


def _value(g: Tensor) -> Any:
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
        p = param.data.materialize()
        g = _value(grad)
        if self.weight_decay:
            g = g + self.weight_decay * p
        if self.momentum:
            v = self._state(param, "v", p)
            first = self._seen.get(id(param)) is not param
            self._seen[id(param)] = param
            v[:] = g if first else v * self.momentum + (1.0 - self.dampening) * g
            g = g + self.momentum * v if self.nesterov else v
        param.data.write(p - self.lr * g)


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


__all__ = ["Optimizer", "SGD", "Adam"]
