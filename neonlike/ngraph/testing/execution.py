"""Running graphs in tests: executors, and symbolic derivatives checked against numeric ones.

    with ExecutorFactory() as ex:
        f = ex.executor([y, cost], x)                # a computation of ex's transformer
        num = ex.numeric_derivative(cost, x, 1e-3)   # x value -> d cost / d x, by differences
        sym = ex.derivative(cost, x)                 # x value -> d cost / d x, by ng.deriv
    check_derivative(cost, x, 1e-3, x_value, rtol=1e-2, atol=1e-3)

The transformer is the default factory's (`ng.make_transformer()`: 'numpy' unless
`set_transformer_factory` chose another). Computations of one transformer must all be made before
the first is called (the transformer is finalized then), so `check_derivative` makes both of its
computations before running either.

Choices where upstream is silent or loose:
- `executor(results, *parameters)` works both ways upstream used it: called (the seed era's
  `executor(a)()`) and as a context manager (`with executor(a) as f: f()`, Jan 2017); the
  transformer it owns is closed when the block ends.
- A parameter that is a variable marked `v.input = True` (upstream's spelling in its tests) is
  made a placeholder (`is_input`), and so is the independent of `derivative` and
  `numeric_derivative` (upstream set `px.input = True` there).
- `numeric_derivative` takes central differences (upstream: forward ones), divides by the step
  actually taken in x's dtype, and never writes into the caller's array.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

import neonlike.ngraph as ng
from neonlike.ngraph import transformers as ngt
from neonlike.ngraph.op_graph import op_graph as G

# the transformer the latest ExecutorFactory made: error_check reads its tolerances
_LATEST: list = []


def latest_transformer() -> Any:
    """The transformer the latest ExecutorFactory made (None if none is alive)."""
    return _LATEST[0]() if _LATEST else None


class ExecutorFactory:
    """Owns one transformer (made on first use; closed when a `with` block ends) and makes
    computations and derivative checkers on it."""

    def __init__(self) -> None:
        self._transformer: Any = None

    @property
    def transformer(self) -> Any:
        if self._transformer is None:
            self._transformer = ngt.make_transformer()
            _LATEST[:] = [weakref.ref(self._transformer)]
        return self._transformer

    def __enter__(self) -> ExecutorFactory:
        self.transformer
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._transformer is not None:
            self._transformer.close()

    def executor(self, results: Any, *parameters: Any) -> Any:
        """A computation of `results` taking arrays for `parameters` (see Transformer)."""
        for p in parameters:
            if isinstance(p, G.AssignableTensorOp) and getattr(p, "input", False):
                p.is_input = True
        return self.transformer.computation(results, *parameters)

    def get_tensor_view_value(self, op: Any, host_tensor: np.ndarray | None = None) -> np.ndarray:
        """The current value of a tensor with storage (variable, placeholder, constant) as an
        array in its axes order; copied into `host_tensor` when given."""
        if not isinstance(op, G.AssignableTensorOp) or op.is_scalar_constant:
            raise ValueError(f"get_tensor_view_value: {getattr(op, 'name', op)!r} has no storage "
                             f"(only variables, placeholders and array constants do)")
        value = self.transformer.storage(op).get().reshape(op.axes.require_lengths())
        if host_tensor is None:
            return value.astype(op.dtype, copy=False)
        host_tensor[...] = value
        return host_tensor

    def numeric_derivative(self, f: Any, p_x: Any, dx: float, *params: Any) -> Callable:
        """A function (x value, *parameter values) -> df/dx by central differences, shaped
        f's lengths + x's lengths."""
        _make_input(p_x)
        comp = self.executor(f, p_x, *params)

        def helper(x: Any, *args: Any) -> np.ndarray:
            return numeric_derivative(lambda xx: comp(xx, *args), x, dx)
        return helper

    def derivative(self, f: Any, px: Any, *parameters: Any) -> Callable:
        """A function (x value, *parameter values) -> df/dx by `ng.deriv`, shaped f's lengths +
        x's lengths: one call for a scalar f, one per element of f otherwise (its adjoint set to
        each unit vector in turn)."""
        _make_input(px)
        fshape = f.axes.require_lengths()
        if not fshape:
            return self.executor(ng.deriv(f, px), px, *parameters)
        adjoint = ng.placeholder(f.axes)
        comp = self.executor(ng.deriv(f, px, error=adjoint), adjoint, px, *parameters)

        def helper(x: Any, *args: Any) -> np.ndarray:
            xshape = px.axes.require_lengths()
            out = np.empty(fshape + xshape, dtype=px.dtype)
            unit = np.zeros(fshape, dtype=f.dtype)
            for index in np.ndindex(*fshape):
                unit[index] = 1
                out[index] = np.asarray(comp(unit, x, *args)).reshape(xshape)
                unit[index] = 0
            return out
        return helper


def _make_input(p: Any) -> None:
    if isinstance(p, G.AssignableTensorOp) and not p.is_constant:
        p.is_input = True


class executor:  # noqa: N801  (upstream's name; a function in the seed era)
    """A computation of `results` from `parameters` on a transformer of its own: call it, or use
    it as a context manager (`with executor(y, x) as f: f(x_value)`)."""

    def __init__(self, results: Any, *parameters: Any) -> None:
        self.factory = ExecutorFactory()
        self.computation = self.factory.executor(results, *parameters)

    def __call__(self, *args: Any) -> Any:
        return self.computation(*args)

    def __enter__(self) -> executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.factory.__exit__(*exc)


def numeric_derivative(f: Callable, x: Any, dx: float) -> np.ndarray:
    """df/dx at x by central differences: (f(x + dx e_i) - f(x - dx e_i)) / step for each element
    i of x, where step is the difference actually taken in x's dtype. The result is shaped f's
    shape + x's shape (f 2x4, x 3x7: 2x4x3x7). Do not use where f has a kink at x (abs at 0, a
    tie at a max or min): the difference straddles it."""
    x = np.array(x, copy=True)
    if x.dtype.kind in "biu":
        raise ValueError(f"numeric_derivative: x must be floating point, got {x.dtype} (an "
                         f"integer cannot move by dx={dx})")
    y = np.asarray(f(x.copy()))
    d = np.zeros(y.shape + x.shape, dtype=np.float32)
    for index in np.ndindex(*x.shape):
        old = x[index]
        x[index] = old + dx
        hi, up = np.array(f(x.copy()), dtype=np.float64), np.float64(x[index])
        x[index] = old - dx
        lo, down = np.array(f(x.copy()), dtype=np.float64), np.float64(x[index])
        x[index] = old
        d[(Ellipsis,) + index] = (hi - lo) / (up - down)
    return d


def check_derivative(f: Any, x: Any, delta: float, x_value: Any, parameters: Any = (),
                     parameter_values: Any = (), **kwargs: Any) -> None:
    """Assert that ng.deriv(f, x) at x = x_value agrees with the numeric derivative (step
    `delta`); `parameters` are f's other placeholders, fed `parameter_values`; kwargs go to
    assert_allclose (rtol, atol)."""
    from .error_check import assert_allclose
    with ExecutorFactory() as ex:
        numeric = ex.numeric_derivative(f, x, delta, *parameters)
        symbolic = ex.derivative(f, x, *parameters)
        assert_allclose(numeric(x_value, *parameter_values),
                        symbolic(x_value, *parameter_values), **kwargs)
