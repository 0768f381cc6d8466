"""ngraph's `op_graph.axes`, served by neonlike's axis core (`neonlike.axes`, where the choices
made where the seeds are silent are written down), plus the two helpers convolution and pooling
layers used to make their result axes: `output_dim` and `spatial_axis`."""
from __future__ import annotations

from typing import Any

from neonlike.axes import (
    Axes, Axis, AxisRole, DualAxis, FlattenedAxis, PaddedAxis, SlicedAxis, TensorDescription,
    make_axes, make_axis, make_axis_role,
)


def output_dim(X: int, S: int, padding: int, strides: int, pooling: bool = False,
               dilation: int = 1) -> int:
    """The output length of a window of S over X (neon's formula); with `pooling`, the padding
    must be smaller than the window."""
    from neonlike.compound import output_dim as _output_dim
    if pooling and padding >= S:
        raise ValueError(f"Padding dim {padding} incompatible with filter size {S}")
    return _output_dim(X, S, padding, strides, dilation, "output_dim")


def spatial_axis(input: Any, filter: Any, padding: int, stride: int, role: AxisRole) -> Axis:
    """A new axis for a convolution's or pooling's output along `role`: the input's axis of that
    role, windowed by the filter's axis of that role (or by `filter` itself, an int)."""
    ax_i = Axes(input).role_axes(role)
    if not len(ax_i):
        raise ValueError(f"spatial_axis: no input axis has the role {role.name} ({input})")
    if isinstance(filter, int):
        rr = filter
    else:
        ax_f = Axes(filter).role_axes(role)
        if not len(ax_f):
            raise ValueError(f"spatial_axis: no filter axis has the role {role.name} ({filter})")
        rr = ax_f[0].length
    length = output_dim(ax_i[0].length, rr, padding, stride)
    return make_axis(length=length, name=ax_i[0].short_name, roles=[role])


__all__ = ["Axes", "Axis", "AxisRole", "DualAxis", "FlattenedAxis", "PaddedAxis", "SlicedAxis",
           "TensorDescription", "make_axes", "make_axis", "make_axis_role", "output_dim",
           "spatial_axis"]
