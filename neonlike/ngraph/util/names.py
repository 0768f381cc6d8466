"""Name scopes: assigning an attribute of a scope names the value after the attribute.

    ax = make_name_scope(name="ax")
    ax.N = make_axis(batch=True)      # ax.N.name == 'N'

Only anonymous values are named (those whose `name` is None, such as an axis or a role made
without one); a value that already has a name keeps it. Axis names are unique among live axes
(`neonlike.axes`), so ax.N is 'N' unless another live axis holds 'N' already, then 'N_1'.
Upstream named the value '<scope>.<attribute>'; the seed names only what it is assigned to.
"""
from __future__ import annotations

from typing import Any


class NameScope:
    """A namespace whose attributes name the anonymous values assigned to them."""

    def __init__(self, name: str | None = None) -> None:
        object.__setattr__(self, "name", name)

    def __setattr__(self, attribute: str, value: Any) -> None:
        if attribute != "name" and getattr(value, "name", False) is None:
            value.name = attribute
        object.__setattr__(self, attribute, value)

    def named(self, name: str | None) -> NameScope:
        """Set the scope's name and return the scope."""
        object.__setattr__(self, "name", name)
        return self

    def __repr__(self) -> str:
        return f"NameScope({self.name})"


def make_name_scope(name: str | None = None) -> NameScope:
    """A new NameScope (seed 000: `ax = ng.make_name_scope(name="ax")`)."""
    return NameScope(name=name)
