"""ngraph's pooling (late 2016): `ng.pooling(pool_params, inputs, axes)`.

    pool_params = dict(op='max', J=1, T=1, R=2, S=2, pad_c=0, pad_d=0, pad_h=0, pad_w=0,
                       str_c=1, str_d=1, str_h=2, str_w=2)
    y = ng.pooling(pool_params, x, axes=[C', M, P, Q, N])          # x (C, D, H, W, N)

`op` is 'max' or 'avg' (upstream's two). Pooling across channels (J > 1 or pad_c > 0) is not
offered: the backend's kernels pool within a channel, and the error says so. The lowering builds
the engine's `pool` node (neonlike/compound.py); `deriv` goes through `pool_bprop` (the error
routed to each window's first maximum, or spread over its valid positions).
"""
from __future__ import annotations

from typing import Any

from .convolution import _one_batch_axis, _params, _result_axes
from .op_graph import TensorOp, as_op

POOL_KEYS = ("J", "T", "R", "S", "pad_c", "pad_d", "pad_h", "pad_w", "str_c", "str_d", "str_h",
             "str_w", "op")


class PoolingOp(TensorOp):
    """Max or average pooling of `inputs` (C, D, H, W, N) over (T, R, S) windows."""

    def __init__(self, pool_params: dict, inputs: Any, axes: Any = None, **kwargs: Any) -> None:
        inputs = as_op(inputs)
        if len(inputs.axes) != 5:
            raise ValueError(f"pooling input shape must be length 5, found {len(inputs.axes)}")
        _one_batch_axis(inputs)
        params = _params("pooling", dict(pool_params), POOL_KEYS)
        if params["op"] not in ("max", "avg"):
            raise ValueError(f"Unsupported pooling type: {params['op']}.  Only max and avg "
                             "pooling currently supported. ")
        if params["J"] != 1 or params["pad_c"] != 0 or params["str_c"] != 1:
            raise NotImplementedError(
                f"pooling across channels (J={params['J']}, pad_c={params['pad_c']}, "
                f"str_c={params['str_c']}) is not supported: use J=1, pad_c=0, str_c=1")
        self.pool_params = params
        super().__init__((inputs,), axes=_result_axes("pooling", axes, self.output_lengths(
            inputs)), dtype=inputs.dtype, **kwargs)

    def output_lengths(self, inputs: TensorOp) -> tuple | None:
        from ...compound import pool_shape
        if any(n is None for n in inputs.axes.lengths):
            return None
        return pool_shape("pooling", inputs.axes.lengths, None, self.geometry())[0]

    def geometry(self) -> dict:
        """The engine node's keyword arguments."""
        p = self.pool_params
        return {"pool_op": p["op"], "window": (p["T"], p["R"], p["S"]),
                "padding": tuple(p[f"pad_{d}"] for d in "dhw"),
                "strides": tuple(p[f"str_{d}"] for d in "dhw")}


def pooling(pool_params: dict, inputs: Any, axes: Any, docstring: str | None = None) -> TensorOp:
    """Pooling of inputs (C, D, H, W, N) as pool_params say, in `axes`."""
    op = PoolingOp(pool_params, inputs, axes=axes)
    op.metadata["docstring"] = docstring
    return op


__all__ = ["PoolingOp", "pooling"]
