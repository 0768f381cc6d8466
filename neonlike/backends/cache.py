"""The structural kernel cache: a bounded memo of compiled programs, and generated modules on disk.

Keys are tree signatures (plan.walk): structure only, never constant values, tensor identities or
sizes. On disk each generated module is `<cache dir>/k_<sha256 of its source>.py`, written
atomically; Numba's own file cache (`cache=True`) keeps the machine code beside it in __pycache__.
A module that fails to import is rewritten once, never fatal. The directory is
$NEONLIKE_CACHE_DIR, else $XDG_CACHE_HOME/neonlike, else ~/.cache/neonlike.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, NamedTuple

from ..memo import Memo

STATS_KEYS = ("hits", "misses", "compiles", "disk_loads", "compile_seconds", "disk_writes")


def cache_dir() -> Path:
    env = os.environ.get("NEONLIKE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neonlike"


class KernelCache:
    """Compiled programs keyed by signature (a bounded Memo), plus the on-disk module store."""

    def __init__(self, name: str = "cpu.programs", maxsize: int = 512) -> None:
        self._entries = Memo(name, maxsize)
        self._modules = Memo(f"{name}.modules", 4 * maxsize)
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self.stats = dict.fromkeys(STATS_KEYS, 0)
        self.stats["compile_seconds"] = 0.0

    def get(self, key: Any) -> Any:
        entry = self._entries.get(key)
        if entry is not None:
            self.stats["hits"] += 1
        return entry

    def put(self, key: Any, entry: Any) -> None:
        with self._lock:
            self.stats["misses"] += 1
            self._entries.put(key, entry)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._modules.clear()
            for k in self.stats:
                self.stats[k] = 0
            self.stats["compile_seconds"] = 0.0

    def __len__(self) -> int:
        return len(self._entries)

    # ---------------------------------------------------------------- generated modules
    def directory(self) -> Path:
        if self._dir is None:
            d = cache_dir()
            try:
                d.mkdir(parents=True, exist_ok=True)
                probe = d / f".probe{os.getpid()}"
                probe.write_text("")
                probe.unlink()
            except OSError as e:
                fallback = Path(tempfile.mkdtemp(prefix="neonlike-cache-"))
                warnings.warn(f"neonlike: kernel cache directory {d} is not writable ({e}); "
                              f"using {fallback} for this process", RuntimeWarning, stacklevel=3)
                d = fallback
            self._dir = d
        return self._dir

    def module(self, source: str) -> ModuleType:
        """The module of generated `source`, written to disk once and imported (then memoised)."""
        digest = hashlib.sha256(source.encode()).hexdigest()[:24]
        mod = self._modules.get(digest)
        if mod is not None:
            return mod
        path = self.directory() / f"k_{digest}.py"
        for attempt in (0, 1):
            if attempt or not path.exists() or path.read_text(errors="replace") != source:
                self._write(path, source)
            try:
                mod = _import(f"neonlike_kernel_{digest}", path)
                break
            except Exception:
                if attempt:
                    raise
        return self._modules.put(digest, mod)

    def _write(self, path: Path, source: str) -> None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
        self.stats["disk_writes"] += 1


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load generated kernel module {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception:
        sys.modules.pop(name, None)
        raise
    return mod


CPU_CACHE = KernelCache()


# Called as listener(event) with a CompileEvent around a generated kernel's first call, which
# compiles it or loads it from numba's disk cache: 'start' before (the caller waits from here on),
# then 'end' (event.kind 'compile' or 'disk_load') or 'error' (the call raised, KeyboardInterrupt
# included). The progress bar says "compiling kernel N..." with it (callbacks.ProgressBarCallback).
COMPILE_LISTENERS: list = []


class CompileEvent(NamedTuple):
    phase: str             # 'start', 'end' or 'error'
    kernel: str            # the dispatcher's function name ('kernel_parallel')
    kind: str | None       # 'compile' or 'disk_load' at 'end', else None
    seconds: float         # the call's time at 'end' and 'error', else 0.0


def timed_first_call(fn: Callable, stats: dict) -> Callable:
    """Wrap a numba dispatcher: a call that adds a signature is a compile, or a load from numba's
    disk cache (told apart by the dispatcher's cache-miss count). The first call (no signature
    yet) is announced to COMPILE_LISTENERS; later calls only pay one length check for it."""
    def call(*args: Any) -> Any:
        before = len(fn.overloads)
        listeners = COMPILE_LISTENERS if not before else None
        if listeners:
            _announce(listeners, CompileEvent("start", fn.__name__, None, 0.0))
        t0 = time.perf_counter()
        try:
            result = fn(*args)
        except BaseException:
            if listeners:
                _announce(listeners, CompileEvent("error", fn.__name__, None,
                                                  time.perf_counter() - t0))
            raise
        if len(fn.overloads) > before:
            misses = sum(fn.stats.cache_misses.values())
            kind = "compile" if misses > call.misses else "disk_load"
            seconds = time.perf_counter() - t0
            stats[kind + "s"] += 1
            stats["compile_seconds"] += seconds
            call.misses = misses
            if listeners:
                _announce(listeners, CompileEvent("end", fn.__name__, kind, seconds))
        return result
    call.misses = 0
    call.dispatcher = fn
    return call


def _announce(listeners: list, event: CompileEvent) -> None:
    for listener in tuple(listeners):   # a listener may remove itself
        listener(event)
