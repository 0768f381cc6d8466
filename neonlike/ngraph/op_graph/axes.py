"""ngraph's `op_graph.axes`, served by neonlike's axis core (`neonlike.axes`, where the choices
made where the seeds are silent are written down)."""
from neonlike.axes import (
    Axes, Axis, AxisRole, DualAxis, FlattenedAxis, PaddedAxis, SlicedAxis, TensorDescription,
    make_axes, make_axis, make_axis_role,
)

__all__ = ["Axes", "Axis", "AxisRole", "DualAxis", "FlattenedAxis", "PaddedAxis", "SlicedAxis",
           "TensorDescription", "make_axes", "make_axis", "make_axis_role"]
