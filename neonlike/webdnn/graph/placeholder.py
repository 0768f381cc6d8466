"""WebDNN's `webdnn.graph.placeholder`: sizes not known while the graph is built.

    n = Placeholder(label="N")
    x = Variable([n, 3], OrderNC)
    m = n * 2 + 1            # symbolic: prints (N * 2 + 1), no value yet
    n.value = 4              # settable once; m.value is now 9

Choices where WebDNN is silent or loose:

* Only a leaf placeholder takes a value, and only once: a second assignment raises, naming the
  label and both values (WebDNN #631: a value must be an int; it is checked to be one >= 0).
* `==` between unresolved placeholders is structural (the same leaves and operators); once
  everything is resolved it compares values. Placeholders are unhashable, as their value and
  therefore their equality change when it is set.
* `int(p)` / `operator.index(p)` give the value of a resolved placeholder and raise TypeError,
  naming the unresolved labels, otherwise: numpy shapes and the axis core read sizes that way.
"""
from __future__ import annotations

import itertools
import operator
from typing import Any, Callable

_BINARY: dict[str, Callable[[int, int], int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
    "%": operator.mod,
}
_LABELS = itertools.count(1)


def _checked_value(value: Any, label: str) -> int:
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"placeholder {label} takes an int value, got {value!r}") from None
    if value < 0:
        raise ValueError(f"placeholder {label} takes a value >= 0, got {value}")
    return value


class Placeholder:
    """A size to be given later: a leaf (`Placeholder(value=None, label=None)`) or an
    expression of placeholders and ints with `+ - * // %`."""

    def __init__(self, value: int | None = None, label: str | None = None) -> None:
        self.label = label if label is not None else f"p{next(_LABELS)}"
        self._value: int | None = None if value is None else _checked_value(value, self.label)
        self._expr: tuple | None = None     # (op, left, right) for an expression

    @classmethod
    def _expression(cls, op: str, left: Any, right: Any) -> Any:
        if not (isinstance(left, Placeholder) or isinstance(right, Placeholder)):
            return _BINARY[op](left, right)
        node = cls(label=f"({_text(left)} {op} {_text(right)})")
        node._expr = (op, left, right)
        return node

    # ---- value
    @property
    def is_resolved(self) -> bool:
        if self._expr is None:
            return self._value is not None
        return all(Placeholder.check_resolved(x) for x in self._expr[1:])

    @staticmethod
    def check_resolved(x: Any) -> bool:
        """True for an int or a resolved placeholder."""
        return x.is_resolved if isinstance(x, Placeholder) else True

    @staticmethod
    def to_int(x: Any) -> int:
        """The int value of `x` (an int or a resolved placeholder); TypeError otherwise."""
        return operator.index(x)

    @property
    def value(self) -> Any:
        """The int value once resolved, else the placeholder itself (as WebDNN)."""
        if not self.is_resolved:
            return self
        if self._expr is None:
            return self._value
        op, left, right = self._expr
        return _BINARY[op](operator.index(left), operator.index(right))

    @value.setter
    def value(self, value: int) -> None:
        if self._expr is not None:
            raise ValueError(f"placeholder {self.label} is an expression; set the value of "
                             f"its leaves instead")
        value = _checked_value(value, self.label)
        if self._value is not None:
            raise ValueError(f"placeholder {self.label} already has the value {self._value}; "
                             f"a value can be set once (given again: {value})")
        self._value = value

    def unresolved_labels(self) -> list[str]:
        if self._expr is None:
            return [] if self._value is not None else [self.label]
        return [label for x in self._expr[1:] if isinstance(x, Placeholder)
                for label in x.unresolved_labels()]

    def __index__(self) -> int:
        if not self.is_resolved:
            raise TypeError(f"placeholder {self.label} has no value yet: set "
                            f"{', '.join(self.unresolved_labels())} first")
        return self.value

    __int__ = __index__

    # ---- comparison
    def _structure(self) -> Any:
        if self._expr is None:
            return ("leaf", id(self))
        op, left, right = self._expr
        return (op,) + tuple(x._structure() if isinstance(x, Placeholder) else x
                             for x in (left, right))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Placeholder, int)):
            return NotImplemented
        if Placeholder.check_resolved(self) and Placeholder.check_resolved(other):
            return operator.index(self) == operator.index(other)
        return isinstance(other, Placeholder) and self._structure() == other._structure()

    __hash__ = None  # type: ignore[assignment]

    # ---- arithmetic
    def __add__(self, other: Any) -> Any:
        return Placeholder._expression("+", self, other)

    def __radd__(self, other: Any) -> Any:
        return Placeholder._expression("+", other, self)

    def __sub__(self, other: Any) -> Any:
        return Placeholder._expression("-", self, other)

    def __rsub__(self, other: Any) -> Any:
        return Placeholder._expression("-", other, self)

    def __mul__(self, other: Any) -> Any:
        return Placeholder._expression("*", self, other)

    def __rmul__(self, other: Any) -> Any:
        return Placeholder._expression("*", other, self)

    def __floordiv__(self, other: Any) -> Any:
        return Placeholder._expression("//", self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return Placeholder._expression("//", other, self)

    def __mod__(self, other: Any) -> Any:
        return Placeholder._expression("%", self, other)

    def __rmod__(self, other: Any) -> Any:
        return Placeholder._expression("%", other, self)

    def __str__(self) -> str:
        return str(self.value) if self.is_resolved else self.label

    def __repr__(self) -> str:
        return f"<Placeholder {self.label}={self.value}>" if self.is_resolved \
            else f"<Placeholder {self.label}>"


def _text(x: Any) -> str:
    return x.label if isinstance(x, Placeholder) else str(x)


def same_size(a: Any, b: Any) -> bool:
    """Whether two sizes (ints or placeholders) are known to be equal."""
    return bool(a == b)


def sizes_conflict(a: Any, b: Any) -> bool:
    """Whether two sizes are known to differ (an unresolved placeholder conflicts with nothing)."""
    return Placeholder.check_resolved(a) and Placeholder.check_resolved(b) and \
        operator.index(a) != operator.index(b)
