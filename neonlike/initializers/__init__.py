"""neon's initializers: `init.fill(param)` fills a parameter tensor from the backend's host RNG."""
from .initializer import Constant, Gaussian, GlorotUniform, Initializer, Kaiming, Uniform, Xavier

__all__ = ["Initializer", "Constant", "Uniform", "Gaussian", "GlorotUniform", "Xavier", "Kaiming"]
