"""MaxPooling2D and AveragePooling2D with axis semantics.

    pool = MaxPooling2D(None, ksize=2, stride=2)     # x [N, C, H, W] by default
    y, = pool(x)

Choices: stride defaults to ksize (WebDNN's default); the output keeps H and W where their
sizes do not change, else new axes (P, Q in `semantics`). Average pooling divides by the
window positions inside the image (padding is not counted), as neon's engine does.
"""
from __future__ import annotations

from typing import Any

from ..operator import Operator, Role
from ..order import Order
from ..variable import Variable
from ._window import image_axis, out_size, pair


class Pooling2D(Operator):
    """The pooling operators' common part; POOL names the engine's pooling op."""

    POOL = ""
    ROLES = (
        Role("N", "batch size", "axis_batch_size"),
        Role("C", "channel", "axis_channel"),
        Role("H", "image height", "axis_image_height"),
        Role("W", "image width", "axis_image_width"),
    )
    LAYOUTS = {"x": ("N", "C", "H", "W")}

    def __init__(self, name: str | None, ksize: Any, stride: Any = None, pad: Any = 0,
                 **axes: Any) -> None:
        super().__init__(name, **axes)
        self.ksize = pair(ksize, "ksize", self.name, 1)
        self.stride = self.ksize if stride is None else pair(stride, "stride", self.name, 1)
        self.pad = pair(pad, "pad", self.name, 0)
        if any(p >= k for p, k in zip(self.pad, self.ksize)):
            raise ValueError(f"{self.name}: pad {self.pad} must be smaller than ksize "
                             f"{self.ksize} (a window of padding alone has no value)")

    def __call__(self, x: Variable) -> tuple[Variable]:
        sizes = self._bind({"x": x})
        p, q = (out_size(sizes[r], k, pad, s) for r, k, pad, s in
                zip("HW", self.ksize, self.pad, self.stride))
        ho = image_axis(self, "H", sizes["H"], p, "P", "output height")
        wo = image_axis(self, "W", sizes["W"], q, "Q", "output width")
        y = Variable([sizes["N"], sizes["C"], p, q],
                     Order([self._axes["N"], self._axes["C"], ho, wo]))
        return self._connect({"x": x}, {"y": y})


class MaxPooling2D(Pooling2D):
    POOL = "max"


class AveragePooling2D(Pooling2D):
    POOL = "avg"
