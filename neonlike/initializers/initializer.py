"""Initializers (neon.initializers.initializer): each fills a parameter from `be.rng` (the host
RandomState seeded by gen_backend's rng_seed), so a seeded backend gives the same weights.

Fan-in and fan-out follow neon's layouts: a Linear weight is (nout, nin), a convolution's filter
is (C*R*S, K): `local=True` (convolutions) takes the fan-in from axis 0, else from axis 1.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import NervanaObject


class Initializer(NervanaObject):
    def fill(self, param: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement fill(param)")

    def get_description(self) -> dict:
        return {"type": type(self).__name__, "config": dict(vars(self))}


class Constant(Initializer):
    def __init__(self, val: float = 0.0, name: str = "constantInit") -> None:
        super().__init__(name=name)
        self.val = val

    def fill(self, param: Any) -> None:
        param[:] = self.val


class Uniform(Initializer):
    def __init__(self, low: float = 0.0, high: float = 1.0, name: str = "uniformInit") -> None:
        super().__init__(name=name)
        self.low, self.high = low, high

    def fill(self, param: Any) -> None:
        param.set(self.be.rng.uniform(self.low, self.high, param.shape))


class Gaussian(Initializer):
    def __init__(self, loc: float = 0.0, scale: float = 1.0, name: str = "gaussianInit") -> None:
        super().__init__(name=name)
        self.loc, self.scale = loc, scale

    def fill(self, param: Any) -> None:
        param.set(self.be.rng.normal(self.loc, self.scale, param.shape))


class GlorotUniform(Initializer):
    """Uniform in +-sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)."""

    def __init__(self, name: str = "autouniformInit") -> None:
        super().__init__(name=name)

    def fill(self, param: Any) -> None:
        k = np.sqrt(6.0 / (param.shape[0] + param.shape[1]))
        param.set(self.be.rng.uniform(-k, k, param.shape))


class Xavier(Initializer):
    """Uniform in +-sqrt(3 / fan_in)."""

    def __init__(self, local: bool = True, name: str = "xavier") -> None:
        super().__init__(name=name)
        self.local = local

    def fill(self, param: Any) -> None:
        fan_in = param.shape[0 if self.local else 1]
        k = np.sqrt(3.0 / fan_in)
        param.set(self.be.rng.uniform(-k, k, param.shape))


class Kaiming(Initializer):
    """Normal with standard deviation sqrt(2 / fan_in) (He et al., 2015)."""

    def __init__(self, local: bool = True, name: str = "Kaiming") -> None:
        super().__init__(name=name)
        self.local = local

    def fill(self, param: Any) -> None:
        fan_in = param.shape[0 if self.local else 1]
        param.set(self.be.rng.normal(0.0, np.sqrt(2.0 / fan_in), param.shape))


class Array(Constant):
    """The values of an array (numpy or a tensor) of the parameter's shape; its description holds
    them as a numpy array (so a model's serialization keeps them)."""

    def __init__(self, val: Any = 0.0, name: str = "arrayInit") -> None:
        super().__init__(val, name=name)

    def fill(self, param: Any) -> None:
        val = self.val
        if isinstance(val, np.ndarray):
            if val.size != param.size:
                raise ValueError(f"Array: the values have shape {val.shape}, the parameter "
                                 f"{tuple(param.shape)}")
            param.set(val.reshape(param.shape))
        else:
            param[:] = val

    def get_description(self) -> dict:
        desc = super().get_description()
        if hasattr(desc["config"]["val"], "get"):
            desc["config"]["val"] = desc["config"]["val"].get()
        return desc


class IdentityInit(Initializer):
    """The identity: ones on the diagonal of the (nin, nout) parameter, zeros elsewhere."""

    def __init__(self, local: bool = True, name: str = "Identity") -> None:
        super().__init__(name=name)
        self.local = local

    def fill(self, param: Any) -> None:
        if len(param.shape) != 2:
            raise ValueError(f"IdentityInit: the parameter must be 2-D, got {tuple(param.shape)}")
        param.set(np.eye(*param.shape))


class Orthonormal(Initializer):
    """scale times the orthonormal factor (of the parameter's shape) of a Gaussian matrix's SVD
    (Saxe et al., 2013), drawn from `be.rng`."""

    def __init__(self, scale: float = 1.1, name: str = "orthonormal") -> None:
        super().__init__(name=name)
        self.scale = scale

    def fill(self, param: Any) -> None:
        a = self.be.rng.normal(0.0, 1.0, param.shape)
        u, _, v = np.linalg.svd(a, full_matrices=False)
        param.set(self.scale * (u if u.shape == tuple(param.shape) else v))
