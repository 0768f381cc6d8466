"""Nervana Graph (ngraph-python, late 2016) on neonlike's engine: `import neonlike.ngraph as ng`.

Module paths mirror upstream's (`neonlike.ngraph.op_graph.axes`, `neonlike.ngraph.util.names`,
`neonlike.ngraph.frontends.neon`), so a script ports by renaming its imports. The seeds'
spellings work too: `ng.axis(...)` is `ng.make_axis(...)`, `ng.make_name_scope(name=...)`.
"""
from neonlike.ngraph.op_graph.axes import (
    Axes, Axis, AxisRole, DualAxis, FlattenedAxis, PaddedAxis, SlicedAxis, TensorDescription,
    make_axes, make_axis, make_axis_role, spatial_axis,
)
from neonlike.ngraph.util.names import NameScope, make_name_scope

from neonlike.ngraph.op_graph.op_graph import *  # noqa: F401,F403  (the graph builders)
from neonlike.ngraph.op_graph import op_graph as _op_graph
from neonlike.ngraph.op_graph.convolution import convolution
from neonlike.ngraph.op_graph.pooling import pooling

axis = make_axis   # seed 000's spelling: ng.axis(length=3, roles=[role_channel], name="my_axis")


def __getattr__(name: str):
    """The transformers' names and the `testing` module, imported when first asked for
    (`ng.NumPyTransformer()`, `ng.testing.assert_allclose`)."""
    if name == "NumPyTransformer":
        from neonlike.ngraph.transformers.nptransform import NumPyTransformer
        return NumPyTransformer
    if name in ("testing", "transformers"):     # upstream: `ng.testing.assert_allclose(...)`
        import importlib
        return importlib.import_module(f"neonlike.ngraph.{name}")
    if name in ("make_transformer", "make_transformer_factory", "set_transformer_factory",
                "transformer_choices", "Transformer", "Computation"):
        from neonlike.ngraph import transformers
        return getattr(transformers, name)
    raise AttributeError(f"module 'neonlike.ngraph' has no attribute {name!r}")

__all__ = list(_op_graph.__all__) + ["NumPyTransformer", "make_transformer",
                                      "make_transformer_factory", "set_transformer_factory",
                                      "transformer_choices", "Axes", "Axis", "AxisRole", "DualAxis", "FlattenedAxis", "NameScope", "PaddedAxis",
           "SlicedAxis", "TensorDescription", "axis", "make_axes", "make_axis", "make_axis_role",
           "make_name_scope", "convolution", "pooling", "spatial_axis"]
