"""Activations (neon.transforms.activation). `__call__(x)` builds the op-tree of the activation;
`bprop(y)` its derivative as a function of the output y, as neon's layers use it."""
from __future__ import annotations

from typing import Any

from .transform import Transform


class Identity(Transform):
    def __call__(self, x: Any) -> Any:
        return x

    def bprop(self, x: Any) -> Any:
        return 1.0


class Rectlin(Transform):
    """max(x, 0) + slope * min(x, 0)."""

    def __init__(self, slope: float = 0.0, name: str | None = None) -> None:
        super().__init__(name)
        self.slope = slope

    def __call__(self, x: Any) -> Any:
        if self.slope == 0:
            return self.be.maximum(x, 0.0)
        return self.be.maximum(x, 0.0) + self.be.minimum(x, 0.0) * self.slope

    def bprop(self, x: Any) -> Any:
        if self.slope == 0:
            return self.be.greater(x, 0.0)
        return self.be.greater(x, 0.0) + self.be.less(x, 0.0) * self.slope


class Leaky(Rectlin):
    """Rectlin with a negative slope (0.01 by default)."""

    def __init__(self, slope: float = 0.01, name: str | None = None) -> None:
        super().__init__(slope, name)


class Rectlinclip(Transform):
    """min(max(x, 0) + slope * min(x, 0), xcut) (neon's argument order: slope, name, xcut)."""

    def __init__(self, slope: float = 0.0, name: str | None = None, xcut: float = 20.0) -> None:
        super().__init__(name)
        self.slope, self.xcut = slope, xcut

    def __call__(self, x: Any) -> Any:
        be = self.be
        y = be.maximum(x, 0.0) if self.slope == 0 else \
            be.maximum(x, 0.0) + be.minimum(x, 0.0) * self.slope
        return be.minimum(y, self.xcut)

    def bprop(self, x: Any) -> Any:
        be = self.be
        d = be.greater(x, 0.0) if self.slope == 0 else \
            be.greater(x, 0.0) + be.less(x, 0.0) * self.slope
        return d * be.less(x, self.xcut)


class Explin(Transform):
    """x for x > 0, alpha * (exp(x) - 1) otherwise (ELU)."""

    def __init__(self, alpha: float = 1.0, name: str | None = None) -> None:
        super().__init__(name)
        self.alpha = alpha

    def __call__(self, x: Any) -> Any:
        return self.be.maximum(x, 0.0) + (self.be.exp(self.be.minimum(x, 0.0)) - 1.0) * self.alpha

    def bprop(self, x: Any) -> Any:
        # of the output y: 1 where y > 0, y + alpha where y <= 0
        return self.be.greater(x, 0.0) + (self.be.minimum(x, 0.0) + self.alpha) * \
            self.be.less_equal(x, 0.0)


class Logistic(Transform):
    """1 / (1 + exp(-x)). shortcut=True: bprop is 1, for use with CrossEntropyBinary, whose bprop
    then gives the combined y - t."""

    def __init__(self, shortcut: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        self.shortcut = shortcut

    def __call__(self, x: Any) -> Any:
        return self.be.sig(x)

    def bprop(self, x: Any) -> Any:
        return 1.0 if self.shortcut else x * (1.0 - x)


class Tanh(Transform):
    def __call__(self, x: Any) -> Any:
        return self.be.tanh(x)

    def bprop(self, x: Any) -> Any:
        return 1.0 - self.be.square(x)


class Softmax(Transform):
    """exp(x - max(x)) / sum(exp(x - max(x))) along `axis` (0: over the features of each sample).
    bprop is 1: used with CrossEntropyMulti, whose bprop gives the combined y - t."""

    def __init__(self, axis: int = 0, epsilon: float = 2 ** -23, name: str | None = None) -> None:
        super().__init__(name)
        self.axis, self.epsilon = axis, epsilon

    def __call__(self, x: Any) -> Any:
        e = self.be.exp(x - self.be.max(x, axis=self.axis))
        return e / self.be.sum(e, axis=self.axis)

    def bprop(self, x: Any) -> Any:
        return 1.0


class PixelwiseSoftmax(Transform):
    """Softmax over `c` channels at every pixel: x, a (c * pixels, N) buffer read as (c, -1), is
    normalised along its first axis. As in neon, the result is written into x and x returned;
    bprop is 1 (for CrossEntropyMulti's combined y - t)."""

    def __init__(self, c: int, name: str | None = None, epsilon: float = 2 ** -23) -> None:
        super().__init__(name)
        self.c, self.epsilon = c, epsilon

    def __call__(self, x: Any) -> Any:
        be = self.be
        y = x.reshape((self.c, -1))
        e = be.exp(y - be.max(y, axis=0))
        y[:] = e / be.sum(e, axis=0)
        return x

    def bprop(self, x: Any) -> Any:
        return 1.0


class Sign(Transform):
    """+1 where x >= 0, else -1; bprop is the straight-through estimator 1 where |x| <= 1, of
    the input kept at the call (neon's binarized networks)."""

    def __call__(self, x: Any) -> Any:
        be = self.be
        self.inputs = be.empty(x.shape)
        self.inputs[:] = x
        return be.greater_equal(self.inputs, 0.0) * 2.0 - 1.0

    def bprop(self, x: Any) -> Any:
        return self.be.less_equal(self.be.absolute(self.inputs), 1.0)


class Normalizer(Transform):
    """x / divisor (a fixed scale, e.g. 255 for pixels)."""

    def __init__(self, divisor: float = 128.0, name: str | None = None) -> None:
        super().__init__(name)
        self.divisor = divisor

    def __call__(self, x: Any) -> Any:
        return x * (1.0 / self.divisor)

    def bprop(self, x: Any) -> Any:
        return 1.0 / self.divisor
