"""Transformers (`import neonlike.ngraph.transformers as ngt`): see base.py."""
from .base import (Computation, Transformer, make_transformer, make_transformer_factory,
                   set_transformer_factory, transformer_choices)

__all__ = ["Computation", "Transformer", "make_transformer", "make_transformer_factory",
           "set_transformer_factory", "transformer_choices"]
