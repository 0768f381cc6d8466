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
    """min(max(x, 0), xcut)."""

    def __init__(self, xcut: float = 20.0, name: str | None = None) -> None:
        super().__init__(name)
        self.xcut = xcut

    def __call__(self, x: Any) -> Any:
        return self.be.minimum(self.be.maximum(x, 0.0), self.xcut)

    def bprop(self, x: Any) -> Any:
        return self.be.greater(x, 0.0) * self.be.less(x, self.xcut)


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


class Normalizer(Transform):
    """x / divisor (a fixed scale, e.g. 255 for pixels)."""

    def __init__(self, divisor: float = 128.0, name: str | None = None) -> None:
        super().__init__(name)
        self.divisor = divisor

    def __call__(self, x: Any) -> Any:
        return x * (1.0 / self.divisor)

    def bprop(self, x: Any) -> Any:
        return 1.0 / self.divisor
