"""Elementwise operators: inputs paired by axis identity, never by position.

    y = x * 2 + b            # Variable operators build Elementwise nodes
    z = relu(y)

Choices (WebDNN's elementwise rule): the output order is built by visiting the variable
operands by descending ndim (stably) and appending each axis not seen yet, so `x[N, C] + b[C]`
is [N, C] and `b[C] + x[N, C]` too. An axis a variable lacks, or has with size 1, broadcasts;
two sizes > 1 that differ on one axis are an error naming it. Operands may be numbers.
`semantics` names the output axes D1, D2, ... in output order.
"""
from __future__ import annotations

from typing import Any

from ..operator import AxisSemantics, Operator
from ..order import Order, axis_text
from ..placeholder import sizes_conflict
from ..variable import Variable

ARITY = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "pow": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2,
    "maximum": 2, "minimum": 2,
    "neg": 1, "abs": 1, "relu": 1, "exp": 1, "log": 1, "sqrt": 1, "tanh": 1, "sigmoid": 1,
}


class Elementwise(Operator):
    """Elementwise(kind, name=None): one of ARITY's kinds over Variables and numbers."""

    def __init__(self, kind: str, name: str | None = None) -> None:
        if kind not in ARITY:
            raise ValueError(f"Elementwise: unknown kind {kind!r}; kinds are {', '.join(ARITY)}")
        super().__init__(name)
        self.kind = kind
        self.operands: tuple = ()

    def __call__(self, *operands: Any) -> tuple[Variable]:
        if len(operands) != ARITY[self.kind]:
            raise TypeError(f"{self.name}: {self.kind} takes {ARITY[self.kind]} operands, got "
                            f"{len(operands)}")
        for x in operands:
            if not isinstance(x, (Variable, int, float)) or isinstance(x, bool):
                raise TypeError(f"{self.name}: an operand must be a Variable or a number, got "
                                f"{type(x).__name__} {x!r}")
        variables = [x for x in operands if isinstance(x, Variable)]
        if not variables:
            raise TypeError(f"{self.name}: needs a Variable among its operands")
        inputs = {f"x{i}": x for i, x in enumerate(operands) if isinstance(x, Variable)}
        self._check_inputs(inputs)
        axes: list = []
        sizes: list = []
        for v in sorted(variables, key=lambda v: -v.ndim):
            for axis, n in zip(v.order.axes, v.shape):
                if axis not in axes:
                    axes.append(axis)
                    sizes.append(n)
                    continue
                i = axes.index(axis)
                if sizes[i] == 1:
                    sizes[i] = n
                elif n != 1 and sizes_conflict(sizes[i], n):
                    raise ValueError(f"{self.name}: axis {axis_text(axis)} is {sizes[i]} in one "
                                     f"operand and {n} in {v}")
        self.operands = operands
        self._extra = [AxisSemantics(f"D{i + 1}", f"dimension {i + 1} of the result", axis)
                       for i, axis in enumerate(axes)]
        return self._connect(inputs, {"y": Variable(sizes, Order(axes))})


def elementwise(kind: str, *operands: Any) -> Variable:
    """The result of a new Elementwise(kind) over the operands."""
    y, = Elementwise(kind)(*operands)
    return y


def relu(x: Variable) -> Variable:
    return elementwise("relu", x)


def exp(x: Variable) -> Variable:
    return elementwise("exp", x)


def log(x: Variable) -> Variable:
    return elementwise("log", x)


def sqrt(x: Variable) -> Variable:
    return elementwise("sqrt", x)


def tanh(x: Variable) -> Variable:
    return elementwise("tanh", x)


def sigmoid(x: Variable) -> Variable:
    return elementwise("sigmoid", x)


def maximum(a: Any, b: Any) -> Variable:
    return elementwise("maximum", a, b)


def minimum(a: Any, b: Any) -> Variable:
    return elementwise("minimum", a, b)
