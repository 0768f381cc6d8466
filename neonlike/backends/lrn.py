"""Local response normalisation across channels (neon's lrn_layer / fprop_lrn / bprop_lrn), as
op-trees on every device (the Backend base inherits LRNOpsMixin).

The window sum over channels is one op-tree over shifted row views of a zero-padded scratch
buffer (C + J - 1, D*H*W*N): J slices of the same shape added, so no host loop over pixels.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class LRNLayer:
    """The shapes of an LRN op: J (odd) channels centred on each; dimI == dimO == (C, D, H, W, N)."""

    def __init__(self, dtype: Any, N: int, C: int, D: int = 1, H: int = 1, W: int = 1,
                 J: int = 1) -> None:
        if min(N, C, D, H, W, J) < 1 or J % 2 == 0:
            raise ValueError(f"lrn_layer: N, C, D, H, W must be >= 1 and J a positive odd int, "
                             f"got N={N}, C={C}, D={D}, H={H}, W={W}, J={J}")
        self.dtype = np.dtype(dtype)
        self.N, self.C, self.D, self.H, self.W, self.J = N, C, D, H, W, J
        self.K, self.M, self.P, self.Q = C, D, H, W
        self.JTRS = (J, 1, 1, 1)
        self.padding = (J // 2, 0, 0, 0)
        self.strides = (1, 1, 1, 1)
        self.dimI = self.dimO = (C, D, H, W, N)
        self.dimI2 = self.dimO2 = (C * D * H * W, N)
        self.sizeI = self.sizeO = C * D * H * W * N
        self.scratch: Any = None    # (C + J - 1, D*H*W*N), made on first use

    def __str__(self) -> str:
        return f"LRNLayer: C={self.C} DHW={(self.D, self.H, self.W)} N={self.N} J={self.J}"


def _rows(t: Any, layer: LRNLayer, name: str, op: str) -> Any:
    """t viewed as (C, D*H*W*N)."""
    if t.size != layer.sizeI:
        raise ValueError(f"{op}: {name} has shape {tuple(t.shape)} ({t.size} values), the layer "
                         f"needs {layer.dimI} ({layer.sizeI})")
    try:
        return t.reshape((layer.C, -1))
    except ValueError as e:
        raise ValueError(f"{op}: {name} must be contiguous ({e})") from None


class LRNOpsMixin:
    """neon's LRN ops, op-trees on the backend's own tensors."""

    def lrn_layer(self, dtype: Any, N: int, C: int, D: int = 1, H: int = 1, W: int = 1,
                  J: int = 1) -> LRNLayer:
        return LRNLayer(dtype, N, C, D, H, W, J)

    def _window_sum(self, layer: LRNLayer, rows_tree: Any) -> Any:
        """The op-tree of the sum over each channel's window of `rows_tree` (C, n)."""
        C, J = layer.C, layer.J
        n = layer.sizeI // C
        pad = layer.scratch
        if pad is None or tuple(pad.shape) != (C + J - 1, n):
            pad = layer.scratch = self.zeros((C + J - 1, n))
        pad[J // 2:J // 2 + C] = rows_tree
        total = pad[0:C]
        for j in range(1, J):
            total = total + pad[j:j + C]
        return total

    def fprop_lrn(self, layer: LRNLayer, I: Any, O: Any, denom: Any, alpha: Any = None,
                  beta: Any = None, ascale: float = 1.0, bpower: float = 1.0) -> None:
        """denom = 1 + ascale/J * window sum of I^2; O = I * denom^-bpower (alpha, beta unused,
        as on neon's CPU)."""
        i = _rows(I, layer, "I", "fprop_lrn")
        o, d = _rows(O, layer, "O", "fprop_lrn"), _rows(denom, layer, "denom", "fprop_lrn")
        d[:] = 1.0 + (float(ascale) / layer.J) * self._window_sum(layer, i * i)
        o[:] = i * d ** (-float(bpower))

    def bprop_lrn(self, layer: LRNLayer, I: Any, O: Any, E: Any, delta: Any, denom: Any,
                  alpha: Any = None, beta: Any = None, ascale: float = 1.0,
                  bpower: float = 1.0) -> None:
        """delta = E * denom^-bpower - 2 bpower ascale/J * I * window sum of O * E / denom."""
        i, o = _rows(I, layer, "I", "bprop_lrn"), _rows(O, layer, "O", "bprop_lrn")
        e, d = _rows(E, layer, "E", "bprop_lrn"), _rows(denom, layer, "denom", "bprop_lrn")
        out = _rows(delta, layer, "delta", "bprop_lrn")
        s = self._window_sum(layer, o * e / d)
        out[:] = e * d ** (-float(bpower)) - (2.0 * float(bpower) * float(ascale) / layer.J) * i * s
