"""The seed era's home of ngraph's test helpers (`ngraph.util.utils`, moved to `ngraph.testing`
in January 2017): the same objects, re-exported."""
from neonlike.ngraph.testing import (ExecutorFactory, RandomTensorGenerator, check_derivative,
                                     executor, numeric_derivative, raise_all_numpy_errors,
                                     with_error_settings)

__all__ = ["ExecutorFactory", "RandomTensorGenerator", "check_derivative", "executor",
           "numeric_derivative", "raise_all_numpy_errors", "with_error_settings"]
