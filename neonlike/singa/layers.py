"""SINGA's layers (autograd.Linear, Conv2d, BatchNorm2d, pooling, RNN, LSTM): parameters plus
the operators that use them."""
from __future__ import annotations

import math
from typing import Any

from . import operators as F
from .autograd import Layer
from .tensor import Tensor


class Linear(Layer):
    """y = x @ W + b; W (in, out) ~ N(0, sqrt(2 / (in + out))), b (out,) zeros (SINGA's)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features, self.bias = in_features, out_features, bias
        self.W = Tensor(shape=(in_features, out_features), requires_grad=True, stores_grad=True)
        self.W.gaussian(0.0, math.sqrt(2.0 / (in_features + out_features)))
        self.allow_params = ["W"]
        if bias:
            self.b = Tensor(shape=(out_features,), requires_grad=True, stores_grad=True)
            self.allow_params.append("b")

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"Linear: expected input (N, {self.in_features}), got {x.shape}")
        y = F.matmul(x, self.W)
        return F.add_bias(y, self.b, axis=0) if self.bias else y


__all__ = ["Linear"]
