"""Transform: a function of op-trees, `__call__(x)` -> op-tree, with `bprop`."""
from __future__ import annotations

from typing import Any

from .. import NervanaObject


class Transform(NervanaObject):
    """An activation: `__call__(x)` builds its op-tree. `bprop(y)` gives dy/dx as an op-tree of
    the *output* y (neon's convention: the layer keeps only its output) or a number. A transform
    that does not define bprop is differentiated by Autodiff from its input instead."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)

    def __call__(self, x: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__(x)")

    def bprop(self, x: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no bprop")

    def get_description(self) -> dict:
        return {"type": type(self).__name__, "config": {k: v for k, v in vars(self).items()
                                                         if k != "name"}}


def has_bprop(transform: Any) -> bool:
    """Whether `transform` defines its own bprop (else Autodiff differentiates it)."""
    return getattr(type(transform), "bprop", Transform.bprop) is not Transform.bprop
