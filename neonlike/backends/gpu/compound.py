"""COMPOUND stages on the GPU: convolution and pooling nodes (neonlike/compound.py) run through
the backend's own neon ops (nn.py), as on the CPU (cpu/compound.py), so a conv in an op-tree
takes the same kernels as a conv layer (the node -> op table: nn_layers.run_compound).

    run(be, node_dict, dst, operands)   # dst and operands: GPU tensors; dst in the compute dtype
"""
from __future__ import annotations

from typing import Any

from ..nn_layers import run_compound


def run(be: Any, d: dict, dst: Any, operands: list) -> None:
    """Compute node `d` (its op_dict) into `dst` from the operand tensors (converted to dst's
    dtype where theirs differs)."""
    operands = [t if t.dtype == dst.dtype else be._contiguous_copy_as(t, dst.dtype)
                for t in operands]
    run_compound(be, d, dst, operands, be._empty)
