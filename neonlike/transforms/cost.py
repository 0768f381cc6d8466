"""Costs and metrics (neon.transforms.cost). Data are feature-major: y and t are (classes, batch).

A cost's `__call__(y, t)` builds the per-sample cost, an op-tree of shape (1, batch); `bprop(y, t)`
the gradient with respect to y, an op-tree of y's shape. A cost that does not define bprop is
differentiated by Autodiff (so a user's cost is just its `__call__`). A metric's `__call__(y, t,
calcrange)` returns host numbers, one per name in `metric_names`.
"""
from __future__ import annotations

import math
from collections import Counter
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


class SquareHingeLoss(Cost):
    """mean(max(margin - t' * y, 0)^2) per sample, with targets t in {0, 1} read as t' = 2t - 1."""

    def __init__(self, margin: float = 1.0, name: str | None = None) -> None:
        super().__init__(name)
        self.margin = margin

    def __call__(self, y: Any, t: Any) -> Any:
        _check(y, t, type(self).__name__)
        be = self.be
        return be.mean(be.square(be.maximum(self.margin - (t * 2.0 - 1.0) * y, 0.0)), axis=0)

    def bprop(self, y: Any, t: Any) -> Any:
        be, shifted = self.be, t * 2.0 - 1.0
        return shifted * be.maximum(self.margin - shifted * y, 0.0) * (-2.0 / y.shape[0])


class GANCost(Cost):
    """A GAN's costs (Goodfellow et al. 2014; 'wasserstein': Arjovsky et al. 2017), signed so
    that both networks minimise: `__call__(y_data, y_noise, cost_type)` with cost_type 'dis'
    (the discriminator's, on data and noise outputs), 'dis_data', 'dis_noise' or 'gen'; func
    'original', 'modified' (the generator maximises log D(G(z))) or 'wasserstein'. The bprop_*
    methods give the gradients of the discriminator's cost on each input and of the generator's.
    The generator's cost is log(1 - D(G(z))) ('original') or -log D(G(z)) ('modified'), whose
    gradients bprop_generator gives; neon's __call__ had the two swapped (its bprop was right)."""

    FUNCS = ("original", "modified", "wasserstein")
    TYPES = ("dis", "dis_data", "dis_noise", "gen")

    def __init__(self, scale: float = 1.0, cost_type: str = "dis", func: str = "modified",
                 name: str | None = None) -> None:
        super().__init__(name)
        if cost_type not in ("dis", "gen"):
            raise ValueError(f"GANCost: cost_type must be 'dis' or 'gen', got {cost_type!r}")
        if func not in self.FUNCS:
            raise ValueError(f"GANCost: func must be one of {self.FUNCS}, got {func!r}")
        self.scale, self.cost_type, self.func = scale, cost_type, func

    def __call__(self, y_data: Any, y_noise: Any, cost_type: str = "dis") -> Any:
        _check(y_data, y_noise, "GANCost (data and noise outputs)")
        be = self.be
        if self.func == "wasserstein":
            parts = {"dis_data": y_data, "dis_noise": -y_noise, "gen": y_noise}
        else:
            gen = -be.safelog(y_noise) if self.func == "modified" else be.safelog(1.0 - y_noise)
            parts = {"dis_data": -be.safelog(y_data), "dis_noise": -be.safelog(1.0 - y_noise),
                     "gen": gen}
        parts["dis"] = parts["dis_data"] + parts["dis_noise"]
        if cost_type not in parts:
            raise ValueError(f"GANCost: cost_type must be one of {self.TYPES}, got {cost_type!r}")
        return be.mean(parts[cost_type], axis=0)

    def _ones(self, y: Any) -> Any:
        return self.be.ones(y.shape)

    def bprop_noise(self, y_noise: Any) -> Any:
        """d(discriminator cost)/d(y_noise)."""
        if self.func == "wasserstein":
            return self._ones(y_noise) * -self.scale
        return self.scale / (1.0 - y_noise)

    def bprop_data(self, y_data: Any) -> Any:
        """d(discriminator cost)/d(y_data)."""
        if self.func == "wasserstein":
            return self._ones(y_data) * self.scale
        return -self.scale / y_data

    def bprop_generator(self, y_noise: Any) -> Any:
        """d(generator cost)/d(y_noise)."""
        if self.func == "wasserstein":
            return self._ones(y_noise) * self.scale
        if self.func == "original":
            return self.scale / (y_noise - 1.0)
        return -self.scale / y_noise


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


class PrecisionRecall(Metric):
    """Class-averaged [Precision, Recall] of one-hot outputs y against one-hot targets t (classes,
    batch); per-class (precision, recall) stay in `outputs`. binarize=True first turns y into
    the one-hot of its arg-max, in place (as neon)."""

    def __init__(self, num_classes: int, binarize: bool = False, epsilon: float = 1e-6,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.num_classes, self.binarize, self.eps = num_classes, binarize, epsilon
        self.metric_names = ["Precision", "Recall"]
        self.outputs = self.be.empty((num_classes, 2))
        self.token_stats = self.be.empty((num_classes, 3))

    def __call__(self, y: Any, t: Any, calcrange: slice = slice(0, None)) -> np.ndarray:
        _check(y, t, type(self).__name__)
        if y.shape[0] != self.num_classes:
            raise ValueError(f"PrecisionRecall: made for {self.num_classes} classes, the outputs "
                             f"have {y.shape[0]} (shape {tuple(y.shape)})")
        be, stats = self.be, self.token_stats
        if self.binarize:
            y[:] = be.onehot(be.argmax(y, axis=0), axis=0, depth=self.num_classes)
        stats[:, 0] = be.sum(y * t, axis=1)      # true positives
        stats[:, 1] = be.sum(y, axis=1)          # predicted
        stats[:, 2] = be.sum(t, axis=1)          # actual
        self.outputs[:, 0] = stats[:, 0] / (stats[:, 1] + self.eps)
        self.outputs[:, 1] = stats[:, 0] / (stats[:, 2] + self.eps)
        return self.outputs.get().mean(axis=0)


class BLEUScore(Metric):
    """BLEU (Papineni et al. 2002) of predicted sentences against lists of references:
    `__call__(y, t, N=4, brevity_penalty=False, lower_case=True)` sets `bleu_n` (BLEU-1 .. N, in
    percent) and returns BLEU-N. N-grams holding the `unk` token never match. The brevity
    penalty uses the reference closest in length (the shorter on a tie); neon never updated its
    closest distance, so it took the last reference's length."""

    def __init__(self, unk: str = "<unk>", name: str | None = None) -> None:
        super().__init__(name)
        self.metric_names = ["BLEU"]
        self.end_token, self.unk_symbol = ".", unk

    @staticmethod
    def _ngrams(words: list, N: int) -> Counter:
        return Counter(tuple(words[i:i + n]) for n in range(1, N + 1)
                       for i in range(len(words) - n + 1))

    def __call__(self, y: Any, t: Any, N: int = 4, brevity_penalty: bool = False,
                 lower_case: bool = True) -> float:
        if len(y) != len(t):
            raise ValueError(f"BLEUScore: {len(y)} sentences but {len(t)} lists of references")
        totals, correct = np.zeros(N), np.zeros(N)
        len_translation = len_reference = 0
        for sentence, refs in zip(y, t):
            words = (sentence.lower() if lower_case else sentence).strip(self.end_token).split()
            best: Counter = Counter()
            for ref in refs:
                best |= self._ngrams(ref.split(), N)       # max count over the references
            lengths = [len(ref.split()) for ref in refs]
            len_reference += min(lengths, key=lambda n: (abs(n - len(words)), n))
            len_translation += len(words)
            for gram, count in self._ngrams(words, N).items():
                totals[len(gram) - 1] += count
                if self.unk_symbol not in gram:
                    correct[len(gram) - 1] += min(count, best[gram])
        logprec = np.log(correct / np.maximum(totals, 1) + 1e-7)
        bp = math.exp(1 - len_reference / len_translation) if brevity_penalty and \
            len_translation < len_reference else 1.0
        self.bleu_n = [100 * bp * math.exp(logprec[:n + 1].sum() / (n + 1)) for n in range(N)]
        return self.bleu_n[-1]


__all__ = ["Cost", "CrossEntropyBinary", "CrossEntropyMulti", "SumSquared", "MeanSquared",
           "SmoothL1Loss", "SquareHingeLoss", "GANCost", "Metric", "Misclassification",
           "Accuracy", "LogLoss", "TopKMisclassification", "PrecisionRecall", "BLEUScore",
           "has_bprop"]
