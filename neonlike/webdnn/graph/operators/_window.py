"""What convolution and pooling share: window arguments and the output image axes."""
from __future__ import annotations

import operator
from typing import Any

from ..axis import Axis
from ..operator import AxisSemantics, Operator
from ..placeholder import same_size


def pair(value: Any, what: str, op: str, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints >= minimum, as a pair."""
    values = value if isinstance(value, (tuple, list)) else (value, value)
    try:
        values = tuple(operator.index(v) for v in values)
    except TypeError:
        values = ()
    if len(values) != 2 or min(values) < minimum:
        raise ValueError(f"{op}: {what} must be an int or a pair of ints >= {minimum}, "
                         f"got {value!r}")
    return values  # type: ignore[return-value]


def out_size(n: Any, k: int, pad: int, stride: int, dilation: int = 1) -> Any:
    """The number of window positions along an input of size n (n may be a Placeholder)."""
    return (n + 2 * pad - (dilation * (k - 1) + 1)) // stride + 1


def image_axis(op: Operator, role: str, n_in: Any, n_out: Any, short: str, text: str) -> Any:
    """The input's image axis where the output keeps its size, else a new axis, added to the
    operator's semantics as `short` ("output height")."""
    if same_size(n_in, n_out):
        return op._axes[role]
    axis = Axis()
    op._extra.append(AxisSemantics(short, text, axis))
    return axis
