"""COMPOUND stages on the GPU: convolution and pooling nodes (neonlike/compound.py) run through
the backend's own neon ops (nn.py), as on the CPU (cpu/compound.py), so a conv in an op-tree
takes the same kernels as a conv layer.

    run(be, node_dict, dst, operands)   # dst and operands: GPU tensors; dst in the compute dtype

Max pooling's gradient finds each window's argmax again from the input (one more pooling pass).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...ops import Op
from ..nn_layers import compound_layer


def _conv(be: Any, d: dict, dst: Any, I: Any, F: Any) -> None:
    layer = compound_layer("conv", dst.dtype, I.shape, F.shape[1:4], F.shape[4], d)
    be.fprop_conv(layer, I, F, dst)


def _conv_bprop(be: Any, d: dict, dst: Any, E: Any, F: Any) -> None:
    layer = compound_layer("conv", dst.dtype, dst.shape, F.shape[1:4], F.shape[4], d)
    be.bprop_conv(layer, F, E, dst)


def _conv_update(be: Any, d: dict, dst: Any, I: Any, E: Any) -> None:
    layer = compound_layer("conv", dst.dtype, I.shape, dst.shape[1:4], dst.shape[4], d)
    be.update_conv(layer, I, E, dst)


def _pool(be: Any, d: dict, dst: Any, I: Any) -> None:
    layer = compound_layer("pool", dst.dtype, I.shape, d["window"], 0, d)
    be.fprop_pool(layer, I, dst)


def _pool_bprop(be: Any, d: dict, dst: Any, I: Any, E: Any) -> None:
    layer = compound_layer("pool", dst.dtype, I.shape, d["window"], 0, d)
    argmax = None
    if layer.op == "max":
        argmax = be._empty(layer.dimO, np.int32)
        be.fprop_pool(layer, I, be._empty(layer.dimO, dst.dtype), argmax)
    be.bprop_pool(layer, E, dst, argmax)


RUN: dict[Op, Callable[..., None]] = {
    Op.CONV: _conv, Op.CONV_BPROP: _conv_bprop, Op.CONV_UPDATE: _conv_update,
    Op.POOL: _pool, Op.POOL_BPROP: _pool_bprop,
}


def run(be: Any, d: dict, dst: Any, operands: list) -> None:
    """Compute node `d` (its op_dict) into `dst` from the operand tensors (converted to dst's
    dtype where theirs differs)."""
    def as_dst(t: Any) -> Any:
        if t.dtype == dst.dtype:
            return t
        c = be._empty(t.shape, dst.dtype)
        be._copy(c, t)
        return c
    RUN[Op(d["op"])](be, d, dst, *(as_dst(t) for t in operands))
