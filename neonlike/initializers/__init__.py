"""neon's initializers: `init.fill(param)` fills a parameter tensor from the backend's host RNG."""
from .initializer import (Array, Constant, Gaussian, GlorotUniform, IdentityInit, Initializer, Kaiming,
                          Orthonormal, Uniform, Xavier)

__all__ = ["Initializer", "Constant", "Array", "Uniform", "Gaussian", "GlorotUniform", "Xavier",
           "Kaiming", "IdentityInit", "Orthonormal"]
