"""Kernel templates shipped as package data (installed as `neonlike.kernels`).

The renderers read their skeletons from here with `template(name)`; the files are plain text so a
generated kernel can be traced back to the template it came from.
"""
from __future__ import annotations

from importlib.resources import files


def template(name: str) -> str:
    """The text of the template file `name` shipped in this package."""
    return files(__name__).joinpath(name).read_text(encoding="utf-8")
