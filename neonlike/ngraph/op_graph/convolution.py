"""ngraph's convolution (late 2016): `ng.convolution(conv_params, inputs, filters, axes)`.

    conv_params = dict(pad_d=0, pad_h=1, pad_w=1, str_d=1, str_h=1, str_w=1)   # dil_* optional
    y = ng.convolution(conv_params, x, w, axes=[K', M, P, Q, N])   # x (C, D, H, W, N),
                                                                   # w (C, T, R, S, K)
Axes are read by position, in neon's layout: the input's are (C, D, H, W, N) with N its one
batch axis, the filters' (C, T, R, S, K), the first axis of both the same; `axes` names the
result's five axes (K, M, P, Q, N), whose lengths are checked against the convolution's
(`spatial_axis` makes them). The lowering builds the engine's `conv` node (neonlike/compound.py),
run by the backend's conv kernels, and `deriv` differentiates through it with the engine's rules
(conv_bprop for the input, conv_update for the filters), as upstream's bprop_conv and update_conv.
The error texts of upstream's checks are upstream's.
"""
from __future__ import annotations

from typing import Any

from ...axes import Axes
from .op_graph import TensorOp, _float_dtype, as_op

CONV_KEYS = ("pad_d", "pad_h", "pad_w", "str_d", "str_h", "str_w")


def _one_batch_axis(inputs: TensorOp) -> None:
    batch_axes = inputs.axes.batch_axes()
    if len(batch_axes) != 1:
        raise ValueError(
            f"Input must have one batch axis.  Found {len(batch_axes)} batch axes: {batch_axes} "
            f"Found {len(inputs.axes.sample_axes())} sample axes: {inputs.axes.sample_axes()}.")
    if inputs.axes[-1] != batch_axes[0]:
        raise ValueError(f"the batch axis {batch_axes[0]} must be the input's last axis "
                         f"(C, D, H, W, N), got {inputs.axes}")


def _result_axes(op: str, axes: Any, lengths: tuple | None) -> Axes:
    axes = Axes(axes)
    if len(axes) != 5:
        raise ValueError(f"{op}: the result needs 5 axes (K, M, P, Q, N), got {axes}")
    if lengths is not None:
        for a, n in zip(axes, lengths):
            if a.length is not None and a.length != n:
                raise ValueError(f"{op}: result axis {a.name} has length {a.length}, the "
                                 f"result's lengths are {lengths} (make them with "
                                 "ng.spatial_axis)")
    return axes


def _params(op: str, params: dict, keys: tuple) -> dict:
    missing = [k for k in keys if params.get(k) is None]
    if missing:
        raise ValueError(f"{op}: missing parameter(s) {missing} in {params}")
    return params


class ConvolutionOp(TensorOp):
    """A convolution of `inputs` (C, D, H, W, N) with `filters` (C, T, R, S, K)."""

    def __init__(self, conv_params: dict, inputs: Any, filters: Any, axes: Any = None,
                 **kwargs: Any) -> None:
        inputs, filters = as_op(inputs), as_op(filters)
        if len(inputs.axes) != 5:
            raise ValueError(f"convolution input shape must be length 5, found {len(inputs.axes)}")
        if len(filters.axes) != 5:
            raise ValueError(
                f"convolution filter shape must be length 5, found {len(filters.axes)}")
        if inputs.axes[0] != filters.axes[0]:
            raise ValueError(f"the first axis in input {inputs.axes[0]} and filter "
                             f"{filters.axes[0]} are not the same.")
        _one_batch_axis(inputs)
        self.conv_params = _params("convolution", dict(conv_params), CONV_KEYS)
        super().__init__((inputs, filters),
                         axes=_result_axes("convolution", axes, self.output_lengths(
                             inputs, filters)),
                         dtype=_float_dtype((inputs, filters)), **kwargs)

    def output_lengths(self, inputs: TensorOp, filters: TensorOp) -> tuple | None:
        from ...compound import conv_shape
        lengths = (inputs.axes.lengths, filters.axes.lengths)
        if any(n is None for part in lengths for n in part):
            return None
        return conv_shape("convolution", *lengths, self.geometry())[0]

    def geometry(self) -> dict:
        """The engine node's keyword arguments."""
        p = self.conv_params
        return {"padding": tuple(p[f"pad_{d}"] for d in "dhw"),
                "strides": tuple(p[f"str_{d}"] for d in "dhw"),
                "dilation": tuple(p.get(f"dil_{d}", 1) for d in "dhw")}


def convolution(conv_params: dict, inputs: Any, filters: Any, axes: Any,
                docstring: str | None = None) -> TensorOp:
    """The convolution of inputs (C, D, H, W, N) with filters (C, T, R, S, K), in `axes`."""
    op = ConvolutionOp(conv_params, inputs, filters, axes=axes)
    op.metadata["docstring"] = docstring
    return op


__all__ = ["ConvolutionOp", "convolution"]
