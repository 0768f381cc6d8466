"""numpy's floating-point error handling around a test."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np


def with_error_settings(**new_settings: Any) -> Callable:
    """Run the decorated function under np.errstate(**new_settings)."""
    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def run(*args: Any, **kwargs: Any) -> Any:
            with np.errstate(**new_settings):
                return f(*args, **kwargs)
        return run
    return decorate


def raise_all_numpy_errors(f: Callable) -> Callable:
    """Run f with every numpy floating-point error (divide, over, under, invalid) raised."""
    return with_error_settings(divide="raise", over="raise", under="raise", invalid="raise")(f)
