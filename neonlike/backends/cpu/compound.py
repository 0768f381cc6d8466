"""COMPOUND stages on the CPU: convolution and pooling nodes (neonlike/compound.py) run through
the backend's own neon ops (nn.py: fprop_conv, bprop_conv, update_conv, fprop_pool, bprop_pool),
so a conv in an op-tree takes the same kernels, timed path choice and numpy fallback as a conv
layer does.

    run(be, node_dict, dst, operands)   # dst and operands: host arrays in the compute dtype

Layer objects are made once per geometry (nn_layers.compound_layer), as a layer does in its
configure step.
Max pooling's gradient finds each window's argmax again from the input (one more pooling pass;
the node holds no argmax buffer between statements).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...ops import Op
from ..nn_layers import compound_layer


class _Host:
    """A host array where the neon ops expect a CPU tensor (they read `_host()`)."""

    __slots__ = ("a",)

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def _host(self) -> np.ndarray:
        return self.a


def _conv(be: Any, d: dict, dst: np.ndarray, I: np.ndarray, F: np.ndarray) -> None:
    layer = compound_layer("conv", dst.dtype, I.shape, F.shape[1:4], F.shape[4], d)
    be.fprop_conv(layer, _Host(I), _Host(F), _Host(dst))


def _conv_bprop(be: Any, d: dict, dst: np.ndarray, E: np.ndarray, F: np.ndarray) -> None:
    layer = compound_layer("conv", dst.dtype, dst.shape, F.shape[1:4], F.shape[4], d)
    be.bprop_conv(layer, _Host(F), _Host(E), _Host(dst))


def _conv_update(be: Any, d: dict, dst: np.ndarray, I: np.ndarray, E: np.ndarray) -> None:
    layer = compound_layer("conv", dst.dtype, I.shape, dst.shape[1:4], dst.shape[4], d)
    be.update_conv(layer, _Host(I), _Host(E), _Host(dst))


def _pool(be: Any, d: dict, dst: np.ndarray, I: np.ndarray) -> None:
    layer = compound_layer("pool", dst.dtype, I.shape, d["window"], 0, d)
    be.fprop_pool(layer, _Host(I), _Host(dst))


def _pool_bprop(be: Any, d: dict, dst: np.ndarray, I: np.ndarray, E: np.ndarray) -> None:
    layer = compound_layer("pool", dst.dtype, I.shape, d["window"], 0, d)
    argmax = None
    if layer.op == "max":
        argmax = _Host(np.empty(layer.dimO, dtype=np.int32))
        be.fprop_pool(layer, _Host(I), _Host(np.empty(layer.dimO, dtype=dst.dtype)), argmax)
    be.bprop_pool(layer, _Host(E), _Host(dst), argmax)


RUN: dict[Op, Callable[..., None]] = {
    Op.CONV: _conv, Op.CONV_BPROP: _conv_bprop, Op.CONV_UPDATE: _conv_update,
    Op.POOL: _pool, Op.POOL_BPROP: _pool_bprop,
}


def run(be: Any, d: dict, dst: np.ndarray, operands: list) -> None:
    """Compute node `d` (its op_dict) into `dst` from the operand arrays."""
    dt = dst.dtype
    RUN[Op(d["op"])](be, d, dst, *(np.ascontiguousarray(a, dtype=dt) for a in operands))
