"""WebDNN's `webdnn.graph` with seed 001's anonymous axes, unify and operator semantics.

    from neonlike.webdnn.graph import Axis, Order, Variable, Convolution2d, run
    x = Variable([1, 64, 56, 56], Order([Axis(), Axis(), Axis(), Axis()]))
    w = Variable([64, 256, 3, 3], Order([Axis(), Axis(), Axis(), Axis()]))
    w.order.axes[0].unify(x.order.axes[1])
    y, = Convolution2d(None, ksize=3, pad=1, stride=1)(x, w)
    run(y, {x: x_array, w: w_array})

Modules mirror WebDNN's: `axis`, `order`, `variable`, `placeholder`, `operator`, `operators/`;
`run` lowers a graph onto the engine (`neonlike.webdnn.lowering`). The choices made where the
seed is silent are in each module's docstring.
"""
from ..lowering import run
from .axis import Axis, AxisKeyDict
from .operator import AxisSemantics, Operator, Semantics, format_with_semantics, print_with_semantics
from .operators import (AveragePooling2D, Convolution2d, Elementwise, Linear, MaxPooling2D,
                        Reshape, Softmax, Transpose, elementwise, exp, log, maximum, minimum,
                        relu, sigmoid, sqrt, tanh)
from .order import (Order, OrderC, OrderCHWN, OrderCN, OrderCNHW, OrderHWCN, OrderHWNC, OrderNC,
                    OrderNCHW, OrderNHWC, OrderNT, OrderNTC)
from .placeholder import Placeholder
from .variable import Variable

__all__ = [
    "AveragePooling2D", "Axis", "AxisKeyDict", "AxisSemantics", "Convolution2d", "Elementwise",
    "Linear", "MaxPooling2D", "Operator", "Order", "OrderC", "OrderCHWN", "OrderCN", "OrderCNHW",
    "OrderHWCN", "OrderHWNC", "OrderNC", "OrderNCHW", "OrderNHWC", "OrderNT", "OrderNTC",
    "Placeholder", "Reshape", "Semantics", "Softmax", "Transpose", "Variable", "elementwise",
    "exp", "format_with_semantics", "log", "maximum", "minimum", "print_with_semantics", "relu",
    "run", "sigmoid", "sqrt", "tanh",
]
