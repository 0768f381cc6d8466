"""Costs and metrics (neon.transforms.cost). Data are feature-major: y and t are (classes, batch).

A cost's `__call__(y, t)` builds the per-sample cost, an op-tree of shape (1, batch); `bprop(y, t)`
the gradient with respect to y, an op-tree of y's shape. A cost that does not define bprop is
differentiated by Autodiff (so a user's cost is just its `__call__`). A metric's `__call__(y, t,
calcrange)` returns host numbers, one per name in `metric_names`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import NervanaObject
from .transform import has_bprop


def _check(y: Any, t: Any, who: str) -> None:
    if tuple(y.shape) != tuple(t.shape):
        raise ValueError(f"{who}: outputs and targets must have the same shape, got outputs "
                         f"{tuple(y.shape)} and targets {tuple(t.shape)}")


class Cost(NervanaObject):
    def __call__(self, y: Any, t: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__(y, t)")

    def bprop(self, y: Any, t: Any) -> Any:
        """d(sum of the per-sample costs)/dy, by Autodiff (a cost may define its own)."""
        from ..backends.autodiff import Autodiff
        return Autodiff(self(y, t), self.be).get_grad_op_tree([y])[0]

    def get_description(self) -> dict:
        return {"type": type(self).__name__, "config": {k: v for k, v in vars(self).items()
                                                         if k != "name"}}


class CrossEntropyBinary(Cost):
    """-sum(t * log(y) + (1 - t) * log(1 - y)) per sample; bprop y - t (with Logistic(shortcut))."""

    def __init__(self, scale: float = 1.0, name: str | None = None) -> None:
        super().__init__(name)
        self.scale = scale

    def __call__(self, y: Any, t: Any) -> Any:
        _check(y, t, type(self).__name__)
        be = self.be
        return be.sum(be.safelog(1.0 - y) * (t - 1.0) - be.safelog(y) * t, axis=0) * self.scale

    def bprop(self, y: Any, t: Any) -> Any:
        return (y - t) * self.scale


class CrossEntropyMulti(Cost):
    """-sum(t * log(y)) per sample (in bits with usebits); bprop y - t (with Softmax)."""

    def __init__(self, scale: float = 1.0, usebits: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        self.scale = scale
        self.logscale = 1.0 / math.log(2.0) if usebits else 1.0

    def __call__(self, y: Any, t: Any) -> Any:
        _check(y, t, type(self).__name__)
        return self.be.sum(-t * self.be.safelog(y), axis=0) * (self.logscale * self.scale)

    def bprop(self, y: Any, t: Any) -> Any:
        return (y - t) * (self.logscale * self.scale)


class SumSquared(Cost):
    """sum((y - t)^2) / 2 per sample."""

    def __call__(self, y: Any, t: Any) -> Any:
        _check(y, t, type(self).__name__)
        return self.be.sum(self.be.square(y - t), axis=0) * 0.5

    def bprop(self, y: Any, t: Any) -> Any:
        return y - t


class MeanSquared(Cost):
    """mean((y - t)^2) / 2 per sample."""

    def __call__(self, y: Any, t: Any) -> Any:
        _check(y, t, type(self).__name__)
        return self.be.mean(self.be.square(y - t), axis=0) * 0.5

    def bprop(self, y: Any, t: Any) -> Any:
        return (y - t) * (1.0 / y.shape[0])


class SmoothL1Loss(Cost):
    """Huber-like: 0.5 * sigma^2 * x^2 where |x| < 1/sigma^2, |x| - 0.5/sigma^2 elsewhere (x = y - t)."""

    def __init__(self, sigma: float = 1.0, name: str | None = None) -> None:
        super().__init__(name)
        self.sigma2 = sigma * sigma

    def __call__(self, y: Any, t: Any) -> Any:
        _check(y, t, type(self).__name__)
        be, x = self.be, y - t
        small = be.absolute(x) < 1.0 / self.sigma2
        return be.sum(be.square(x) * (0.5 * self.sigma2) * small
                      + (be.absolute(x) - 0.5 / self.sigma2) * (1.0 - small), axis=0)

    def bprop(self, y: Any, t: Any) -> Any:
        be, x = self.be, y - t
        small = be.absolute(x) < 1.0 / self.sigma2
        return x * self.sigma2 * small + be.sgn(x) * (1.0 - small)


# ---------------------------------------------------------------- metrics
class Metric(Cost):
    metric_names: list = []

    def _buffers(self, y: Any, names: tuple) -> list:
        """Per-sample (1, batch) buffers, made for the batch size first seen."""
        key = tuple(y.shape)
        if getattr(self, "_key", None) != key:
            self._key = key
            self._bufs = [self.be.empty((1, y.shape[1]), dtype=np.float32) for _ in names]
        return self._bufs


class Misclassification(Metric):
    """The fraction of samples whose arg-max output is not the target's arg-max."""

    def __init__(self, steps: int = 1, name: str | None = None) -> None:
        super().__init__(name)
        self.steps = steps
        self.metric_names = ["Top1Misclass"]

    def __call__(self, y: Any, t: Any, calcrange: slice = slice(0, None)) -> float:
        _check(y, t, type(self).__name__)
        (wrong,) = self._buffers(y, ("wrong",))
        wrong[:] = self.be.not_equal(self.be.argmax(y, axis=0), self.be.argmax(t, axis=0))
        return float(wrong.get()[:, calcrange].mean())


class Accuracy(Metric):
    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.metric_names = ["Accuracy"]

    def __call__(self, y: Any, t: Any, calcrange: slice = slice(0, None)) -> float:
        _check(y, t, type(self).__name__)
        (right,) = self._buffers(y, ("right",))
        right[:] = self.be.equal(self.be.argmax(y, axis=0), self.be.argmax(t, axis=0))
        return float(right.get()[:, calcrange].mean())


class LogLoss(Metric):
    """-mean(log(sum(y * t))): the log-probability given to the target class."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.metric_names = ["LogLoss"]

    def __call__(self, y: Any, t: Any, calcrange: slice = slice(0, None)) -> float:
        _check(y, t, type(self).__name__)
        (loss,) = self._buffers(y, ("loss",))
        loss[:] = -self.be.safelog(self.be.sum(y * t, axis=0))
        return float(loss.get()[:, calcrange].mean())


class TopKMisclassification(Metric):
    """[LogLoss, Top1Misclass, TopKMisclass]: a sample is a top-k hit when fewer than k outputs
    exceed the target class's output."""

    def __init__(self, k: int, name: str | None = None) -> None:
        super().__init__(name)
        self.k = k
        self.metric_names = ["LogLoss", "Top1Misclass", f"Top{k}Misclass"]

    def __call__(self, y: Any, t: Any, calcrange: slice = slice(0, None)) -> np.ndarray:
        _check(y, t, type(self).__name__)
        be = self.be
        loss, top1, topk = self._buffers(y, ("loss", "top1", "topk"))
        target = be.sum(y * t, axis=0)                  # the target class's output
        loss[:] = -be.safelog(target)
        above = be.sum(be.greater(y, target), axis=0)   # outputs beating it
        top1[:] = be.not_equal(be.argmax(y, axis=0), be.argmax(t, axis=0))
        topk[:] = 1.0 - be.less(above, float(self.k))
        return np.array([b.get()[:, calcrange].mean() for b in (loss, top1, topk)])


__all__ = ["Cost", "CrossEntropyBinary", "CrossEntropyMulti", "SumSquared", "MeanSquared",
           "SmoothL1Loss", "Metric", "Misclassification", "Accuracy", "LogLoss",
           "TopKMisclassification", "has_bprop"]
