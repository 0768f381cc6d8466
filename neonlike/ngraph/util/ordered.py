"""OrderedSet: a set that remembers insertion order (ngraph.util.ordered.OrderedSet)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSet
from typing import Any


class OrderedSet(MutableSet):
    """A set iterating in insertion order; `pop()` takes the last item added."""

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items: dict = dict.fromkeys(items)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Any) -> None:
        self._items[item] = None

    def discard(self, item: Any) -> None:
        self._items.pop(item, None)

    def update(self, items: Iterable[Any]) -> None:
        for item in items:
            self._items[item] = None

    def pop(self) -> Any:
        if not self._items:
            raise KeyError("pop from an empty OrderedSet")
        return self._items.popitem()[0]

    def __repr__(self) -> str:
        return f"OrderedSet({list(self._items)!r})"
