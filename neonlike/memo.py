"""Memo: the one bounded cache every memo table of neonlike is made of.

    _BCAST = Memo("optree.broadcast", 4096)     # a dict: get, [], in, len work as usual
    shape = _BCAST.get(key)
    if shape is None:
        shape = _BCAST.put(key, compute(key))   # past maxsize the oldest eighth is dropped

Every Memo is registered by name, so `neonlike.clear_caches()` empties them all and
`neonlike.cache_stats()` lists their sizes; nothing else is needed to own a cache. Reads are a
plain dict's (no bookkeeping on the hot path); eviction is by age of insertion, an eighth at a
time (numexpr's CacheDict habit), so a cache that overflows keeps most of what it has.
"""
from __future__ import annotations

import functools
import itertools
import weakref
from typing import Any, Callable

_ALL: weakref.WeakSet = weakref.WeakSet()


class Memo(dict):
    """A dict bounded to `maxsize` entries, registered for clear_caches()."""

    def __init__(self, name: str, maxsize: int) -> None:
        super().__init__()
        if maxsize < 1:
            raise ValueError(f"Memo {name!r}: maxsize must be >= 1, got {maxsize}")
        self.name, self.maxsize, self.evictions = name, maxsize, 0
        _ALL.add(self)

    def put(self, key: Any, value: Any) -> Any:
        """memo[key] = value, first dropping the oldest eighth where the memo is full."""
        if len(self) >= self.maxsize and key not in self:
            drop = max(1, self.maxsize // 8)
            for k in list(itertools.islice(iter(self), drop)):
                del self[k]
            self.evictions += drop
        self[key] = value
        return value

    def stats(self) -> dict:
        return {"entries": len(self), "maxsize": self.maxsize, "evictions": self.evictions}

    __hash__ = object.__hash__      # a cache is an object with an identity (the registry's set)

    def __eq__(self, other: Any) -> bool:
        return self is other

    def __ne__(self, other: Any) -> bool:
        return self is not other

    def __repr__(self) -> str:
        return f"Memo({self.name!r}, {len(self)}/{self.maxsize})"


def memoized(name: str, maxsize: int) -> Callable[[Callable], Callable]:
    """A one-argument function whose results are kept in a Memo (`fn.memo`): the bounded,
    clearable counterpart of functools.lru_cache."""
    def wrap(fn: Callable) -> Callable:
        table = Memo(name, maxsize)

        @functools.wraps(fn)
        def call(key: Any) -> Any:
            try:
                return table[key]
            except KeyError:
                return table.put(key, fn(key))
        call.memo = table  # type: ignore[attr-defined]
        return call
    return wrap


def memos() -> list[Memo]:
    """Every live Memo, by name."""
    return sorted(_ALL, key=lambda m: m.name)


def clear_all() -> None:
    """Empty every Memo and zero its eviction count."""
    for m in list(_ALL):
        m.clear()
        m.evictions = 0


__all__ = ["Memo", "memoized", "memos", "clear_all"]
