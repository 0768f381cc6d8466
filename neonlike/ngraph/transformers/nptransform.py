"""NumPyTransformer: computations evaluated by neonlike's numpy reference interpreter.

The same lowering as the engine transformers (lowering.py), each statement's op-tree evaluated by
`neonlike.backends.reference` (numpy, one array per node, nothing compiled): the reference the
engine transformers are checked against.
"""
from __future__ import annotations

from typing import Any

from ...backends import reference
from .base import Transformer


class NumPyTransformer(Transformer):
    """Plain numpy: no kernels are fused or compiled."""

    name = "numpy"

    def __init__(self, **backend_args: Any) -> None:
        super().__init__("cpu", **backend_args)

    def _run(self, out: Any, tree: Any) -> None:
        out._store(reference.evaluate(tree, reference.tree_dtype(out, tree)))

    def _prepare(self, out: Any, tree: Any) -> Any:
        return lambda target=None: self._run(out if target is None else target, tree)


__all__ = ["NumPyTransformer"]
