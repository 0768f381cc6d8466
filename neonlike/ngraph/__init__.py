"""Nervana Graph (ngraph-python, late 2016) on neonlike's engine: `import neonlike.ngraph as ng`.

Module paths mirror upstream's (`neonlike.ngraph.op_graph.axes`, `neonlike.ngraph.util.names`,
`neonlike.ngraph.frontends.neon`), so a script ports by renaming its imports. The seeds'
spellings work too: `ng.axis(...)` is `ng.make_axis(...)`, `ng.make_name_scope(name=...)`.
"""
from neonlike.ngraph.op_graph.axes import (
    Axes, Axis, AxisRole, DualAxis, FlattenedAxis, PaddedAxis, SlicedAxis, TensorDescription,
    make_axes, make_axis, make_axis_role,
)
from neonlike.ngraph.util.names import NameScope, make_name_scope

axis = make_axis   # seed 000's spelling: ng.axis(length=3, roles=[role_channel], name="my_axis")

__all__ = ["Axes", "Axis", "AxisRole", "DualAxis", "FlattenedAxis", "NameScope", "PaddedAxis",
           "SlicedAxis", "TensorDescription", "axis", "make_axes", "make_axis", "make_axis_role",
           "make_name_scope"]
