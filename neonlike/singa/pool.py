"""Reused statement outputs: a host device's per-(shape, dtype) pool of tensors.

Each operator's result runs into a tensor from `Device.alloc`. A train step makes the same shapes
every step, so a tensor nobody holds any more is handed out again instead of a new one: same
memory, and the engine's memos on it (`_hinfo`, `_token`) stay, so its statements take the
compiled fast runners rather than the first-call path.

"Nobody holds it" is read from reference counts: the tensor's (only this pool's list), its
array's and the array's memory owner's (no more than when it was made, after the engine's own
memo `_hinfo` was added: a numpy view of it, an engine view or a tree over it, a CTensor,
anything holding it counts; a numpy view of the array refers to the owner, not to the array,
where the array is itself a view, as the CPU backend's cache-line-aligned arrays are). A tensor
in use is never handed out; at most PER_KEY tensors per key are kept, KEYS_MAX keys.
"""
from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any, Callable

PER_KEY = 8      # tensors kept per (shape, dtype)
KEYS_MAX = 64    # (shape, dtype) keys kept, least recently used dropped

_refs = sys.getrefcount


class HostPool:
    """`take(shape, dtype)`: a free pooled tensor, or a new one from `make` (kept if room)."""

    def __init__(self, make: Callable[[tuple, Any], Any], memo: Callable[[Any], Any]) -> None:
        self.make, self.memo = make, memo        # memo(t): the engine's per-tensor memo, made now
        self.slots: OrderedDict = OrderedDict()  # (shape, dtype) -> [(tensor, array refs when free)]

    def take(self, shape: tuple, dtype: Any) -> Any:
        key = (shape, dtype)
        entries = self.slots.get(key)
        if entries is None:
            entries = self.slots[key] = []
            if len(self.slots) > KEYS_MAX:
                self.slots.popitem(last=False)
        else:
            for entry in entries:
                t = entry[0]
                # held here by `entries`' tuple, `t` and getrefcount's argument: 3 when free
                if _refs(t) == 3 and _refs(t._tensor) <= entry[1] and \
                        _refs(_owner(t._tensor)) <= entry[2]:
                    return t
        t = self.make(shape, dtype)
        if len(entries) < PER_KEY:
            self.memo(t)
            entries.append((t, _refs(t._tensor), _refs(_owner(t._tensor))))
        return t


def _owner(a: Any) -> Any:
    """The object owning an array's memory (numpy keeps a view's base at the owner)."""
    base = getattr(a, "base", None)
    return a if base is None else base
