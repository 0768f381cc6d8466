"""Convolution2d with axis semantics (seed 001).

    conv = Convolution2d(None, ksize=3, pad=1, stride=1)     # every axis_* optional
    y, = conv(x, w)      # x [N, C1, H, W], w [C1, C2, R, S] by default; y [N, C2, H', W']

Choices: the layouts are the seed's (x batch, in-channel, height, width; w in-channel,
out-channel, kernel height, kernel width), read by identity where axes are given. The output
keeps the input's H and W axes where its size equals theirs (pad = (k - 1) / 2, stride 1, as in
the seed) and makes new axes otherwise, added to `semantics` as P and Q. `ksize` may be None
(taken from w); given, it must agree with w's kernel axes. `dilation_rate` as in WebDNN.
"""
from __future__ import annotations

from typing import Any

from ..operator import Operator, Role
from ..order import Order
from ..placeholder import sizes_conflict
from ..variable import Variable
from ._window import image_axis, out_size, pair


class Convolution2d(Operator):
    """Convolution2d(name, ksize, pad, stride, dilation_rate=1, axis_batch_size=None, ...)."""

    ROLES = (
        Role("N", "batch size", "axis_batch_size"),
        Role("C1", "input channel", "axis_in_channel"),
        Role("H", "image height", "axis_image_height"),
        Role("W", "image width", "axis_image_width"),
        Role("C2", "output channel", "axis_out_channel"),
        Role("R", "kernel height", "axis_kernel_height"),
        Role("S", "kernel width", "axis_kernel_width"),
    )
    LAYOUTS = {"x": ("N", "C1", "H", "W"), "w": ("C1", "C2", "R", "S")}

    def __init__(self, name: str | None, ksize: Any = None, pad: Any = 0, stride: Any = 1,
                 dilation_rate: Any = 1, **axes: Any) -> None:
        super().__init__(name, **axes)
        self.ksize = None if ksize is None else pair(ksize, "ksize", self.name, 1)
        self.pad = pair(pad, "pad", self.name, 0)
        self.stride = pair(stride, "stride", self.name, 1)
        self.dilation_rate = pair(dilation_rate, "dilation_rate", self.name, 1)

    def __call__(self, x: Variable, w: Variable) -> tuple[Variable]:
        sizes = self._bind({"x": x, "w": w})
        kernel = (sizes["R"], sizes["S"])
        if self.ksize is not None and any(map(sizes_conflict, self.ksize, kernel)):
            raise ValueError(f"{self.name}: ksize {self.ksize} but the kernel w {w} is "
                             f"{kernel[0]} x {kernel[1]}")
        self.ksize = kernel
        p, q = (out_size(sizes[r], k, pad, s, d) for r, k, pad, s, d in
                zip("HW", kernel, self.pad, self.stride, self.dilation_rate))
        ho = image_axis(self, "H", sizes["H"], p, "P", "output height")
        wo = image_axis(self, "W", sizes["W"], q, "Q", "output width")
        y = Variable([sizes["N"], sizes["C2"], p, q],
                     Order([self._axes["N"], self._axes["C2"], ho, wo]))
        return self._connect({"x": x, "w": w}, {"y": y})
