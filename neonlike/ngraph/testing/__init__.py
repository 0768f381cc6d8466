"""ngraph's test helpers (`ngraph.testing`; `ngraph.util.utils` in the seed era): executors on
the default transformer, numeric and symbolic derivatives, seeded random tensors, comparisons
that allow for the transformer.

    from neonlike.ngraph.testing import ExecutorFactory, RandomTensorGenerator, check_derivative
    rng = RandomTensorGenerator(0, np.float32)
    x_value = rng.uniform(-1, 1, x.axes)
    with executor(ng.tanh(x), x) as f:
        assert_allclose(f(x_value), np.tanh(x_value), rtol=1e-6)
    check_derivative(ng.sum(ng.tanh(x), out_axes=()), x, 1e-3, x_value, rtol=1e-2, atol=1e-3)
"""
from neonlike.ngraph.testing.decorators import raise_all_numpy_errors, with_error_settings
from neonlike.ngraph.testing.error_check import allclose, assert_allclose, transformer_tolerances
from neonlike.ngraph.testing.execution import (ExecutorFactory, check_derivative, executor,
                                               numeric_derivative)
from neonlike.ngraph.testing.random import RandomTensorGenerator

__all__ = ["ExecutorFactory", "RandomTensorGenerator", "allclose", "assert_allclose",
           "check_derivative", "executor", "numeric_derivative", "raise_all_numpy_errors",
           "transformer_tolerances", "with_error_settings"]
