"""COMPOUND stages on the CPU: convolution and pooling nodes (neonlike/compound.py) run through
the backend's own neon ops (nn.py: fprop_conv, bprop_conv, update_conv, fprop_pool, bprop_pool),
so a conv in an op-tree takes the same kernels, timed path choice and numpy fallback as a conv
layer does.

    run(be, node_dict, dst, operands)   # dst and operands: host arrays in the compute dtype

The node -> op table is nn_layers.run_compound's, shared with the GPU (gpu/compound.py); layer
objects are made once per geometry (nn_layers.compound_layer), as a layer does in its configure
step.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..nn_layers import run_compound


class _Host:
    """A host array where the neon ops expect a CPU tensor (they read `_host()`)."""

    __slots__ = ("a",)

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def _host(self) -> np.ndarray:
        return self.a

    @property
    def shape(self) -> tuple:
        return self.a.shape

    @property
    def dtype(self) -> np.dtype:
        return self.a.dtype


def run(be: Any, d: dict, dst: np.ndarray, operands: list) -> None:
    """Compute node `d` (its op_dict) into `dst` from the operand arrays."""
    dt = dst.dtype
    run_compound(be, d, _Host(dst), [_Host(np.ascontiguousarray(a, dtype=dt)) for a in operands],
                 lambda shape, dtype: _Host(np.empty(shape, dtype)))
