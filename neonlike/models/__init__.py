"""neon's Model and GAN."""
from .model import GAN, Model

__all__ = ["Model", "GAN"]
