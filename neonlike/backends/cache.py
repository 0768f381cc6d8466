"""The structural kernel cache: a bounded memo of compiled programs, and generated modules on disk.

Keys are tree signatures (plan.walk): structure only, never constant values, tensor identities or
sizes. On disk each generated module is `<cache dir>/k_<sha256 of its source>.py`, written
atomically with the user's umask; Numba's own file cache (`cache=True`) keeps the machine code
beside it in __pycache__. The directory is $NEONLIKE_CACHE_DIR, else $XDG_CACHE_HOME/neonlike,
else ~/.cache/neonlike.

Nothing on disk is fatal: a module file that cannot be read or does not hold its source, and a
numba index or data file that cannot be read, parsed or matched to its kernel, is removed with
one warning and rebuilt. A read-only cache directory still serves the kernels it holds; the ones
it lacks go to one per-user directory under the temp directory (fallback_dir), reused by later
processes.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib.util
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, NamedTuple

from ..memo import Memo

STATS_KEYS = ("hits", "misses", "compiles", "disk_loads", "compile_seconds", "disk_writes")
MISSING = "is missing"


def cache_dir() -> Path:
    env = os.environ.get("NEONLIKE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neonlike"


def fallback_dir() -> Path:
    """Where kernels go that the cache directory cannot take: `neonlike-cache-<uid>` under the
    temp directory, reused by later processes; a fresh one, removed at exit, where that name is
    taken by something that is not this user's directory."""
    d = Path(tempfile.gettempdir()) / f"neonlike-cache-{os.getuid()}"
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        st = d.lstat()
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    d = Path(tempfile.mkdtemp(prefix="neonlike-cache-"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


class KernelCache:
    """Compiled programs keyed by signature (a bounded Memo), plus the on-disk module store."""

    def __init__(self, name: str = "cpu.programs", maxsize: int = 512) -> None:
        self._entries = Memo(name, maxsize)
        self._modules = Memo(f"{name}.modules", 4 * maxsize)
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._read_only: Path | None = None     # the cache directory, once a write there failed
        self._fallback: Path | None = None
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
        """The cache directory, created where missing. No probe file: whether it can be written
        is learnt from the first write it needs (two threads' probes once raced)."""
        if self._dir is None:
            d = cache_dir()
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                fallback = self._fallback_dir()
                _warn(f"kernel cache directory {d} cannot be created ({e}); using {fallback}")
                d = fallback
            self._dir = d
        return self._dir

    def module(self, source: str) -> ModuleType:
        """The module of generated `source`, imported from the cache directory (written there
        first where no file holds that source) and memoised."""
        digest = hashlib.sha256(source.encode()).hexdigest()[:24]
        mod = self._modules.get(digest)
        if mod is not None:
            return mod
        path = self.directory() / f"k_{digest}.py"
        problem = _stored_problem(path, source)
        if problem is not None and path.parent == self._read_only:
            path = self._fallback_dir() / path.name
            problem = _stored_problem(path, source)
        for attempt in (0, 1):
            if problem is not None:
                path = self._store(path, source, problem)
            try:
                mod = _import(f"neonlike_kernel_{digest}", path)
                break
            except Exception as e:
                if attempt:
                    raise
                problem = f"does not import ({type(e).__name__}: {e})"
        _recovering_numba_cache(mod)
        return self._modules.put(digest, mod)

    def _store(self, path: Path, source: str, problem: str) -> Path:
        """Write `source` at `path` in place of what is there, or in the fallback directory where
        path's directory is read-only; the path it is at."""
        moved = None
        try:
            _replace(path, source)
        except OSError as e:
            if path.parent == self._fallback:
                raise
            with self._lock:
                first, self._read_only = self._read_only != path.parent, path.parent
            moved = self._fallback_dir() / path.name
            if first:
                _warn(f"kernel cache directory {path.parent} cannot be written ({e.strerror}); "
                      f"kernels it lacks go to {moved.parent}")
            if _stored_problem(moved, source) is not None:
                _replace(moved, source)
        self.stats["disk_writes"] += 1
        if problem != MISSING:
            _warn(f"kernel module {path} {problem}; "
                  + ("discarded it and wrote it again" if moved is None else f"using {moved}"))
        return moved or path

    def _fallback_dir(self) -> Path:
        with self._lock:
            if self._fallback is None:
                self._fallback = fallback_dir()
            return self._fallback


def _stored_problem(path: Path, source: str) -> str | None:
    """What keeps the file at `path` from serving `source` (MISSING where absent), or None."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return MISSING
    except OSError as e:
        return f"cannot be read ({type(e).__name__}: {e.strerror})"
    return None if text == source else "does not hold its source"


def _replace(path: Path, source: str) -> None:
    """Write `source` at `path` atomically (a temp file of a unique name, then a rename) with the
    user's umask, as numba's own files are (mkstemp's 0600 kept a shared cache from others)."""
    if path.is_dir():
        _remove(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _remove(path: str | os.PathLike) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _warn(message: str) -> None:
    warnings.warn(f"neonlike: {message}", RuntimeWarning, stacklevel=3)


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


# ---------------------------------------------------------------- numba's disk cache
def _recovering_numba_cache(mod: ModuleType) -> None:
    """Give each `cache=True` dispatcher of a generated module the KernelDiskCache in place of
    numba's FunctionCache (a private attribute: numba has no hook to choose the cache class)."""
    if "numba" not in sys.modules:
        return
    from numba.core.caching import FunctionCache
    for obj in vars(mod).values():
        if type(getattr(obj, "_cache", None)) is FunctionCache:
            obj._cache = _kernel_disk_cache()(obj.py_func)


@functools.lru_cache(maxsize=None)
def _kernel_disk_cache() -> type:
    """numba's FunctionCache, built on first use (numba is imported only where kernels are), that
    never fails a call: an entry that cannot be read, parsed or matched to its kernel is removed
    with one warning and the kernel compiled again; a save that fails (a read-only cache) leaves
    the compile to this process; a __pycache__ that can be read but not written is still read."""
    from numba.core import caching, sigutils

    class ReadableLocator(caching.InTreeCacheLocator):
        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            found = super().from_function(py_func, py_file)   # a writable __pycache__
            pycache = os.path.join(os.path.dirname(py_file), "__pycache__")
            if found is None and os.path.isdir(pycache) and os.access(pycache, os.R_OK | os.X_OK):
                found = cls(py_func, py_file)
            return found

    class KernelCacheImpl(caching.CompileResultCacheImpl):
        _locator_classes = [ReadableLocator if c is caching.InTreeCacheLocator else c
                            for c in caching.CompileResultCacheImpl._locator_classes]

    class KernelDiskCache(caching.FunctionCache):
        _impl_class = KernelCacheImpl

        def load_overload(self, sig: Any, target_context: Any) -> Any:
            try:
                cres = super().load_overload(sig, target_context)
            except Exception as e:
                return self._discard(f"cannot be read ({type(e).__name__}: {e})")
            args, _ = sigutils.normalize_signature(sig)
            fn = self._py_func
            if cres is None or (cres.fndesc.modname, cres.fndesc.qualname, cres.signature.args) \
                    == (fn.__module__, fn.__qualname__, tuple(args)):
                return cres
            return self._discard(f"holds another kernel ({cres.fndesc.modname}."
                                 f"{cres.fndesc.qualname}{cres.signature})")

        def save_overload(self, sig: Any, data: Any) -> None:
            with contextlib.suppress(OSError):  # a read-only cache: the compile stays in memory
                super().save_overload(sig, data)

        def _discard(self, problem: str) -> None:
            base, names = self._impl.filename_base, []
            with contextlib.suppress(OSError):
                names = sorted(n for n in os.listdir(self._cache_path)
                               if n.startswith(base + ".") and n.endswith((".nbi", ".nbc")))
            try:
                for name in names:
                    _remove(os.path.join(self._cache_path, name))
                done = f"removed {', '.join(names)} and compiled the kernel again"
            except OSError as e:
                done = f"cannot remove it ({e.strerror}): compiled the kernel for this process"
            _warn(f"numba's cache of {self._py_func.__qualname__} in {self._cache_path} "
                  f"{problem}; {done}")

    return KernelDiskCache


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


def timed_first_call(fn: Callable, stats: dict,
                     compile_first: Callable[[tuple], bool] | None = None) -> Callable:
    """Wrap a numba dispatcher: a call that adds a signature is a compile, or a load from numba's
    disk cache (told apart by the dispatcher's cache-miss count). The first call (no signature
    yet) is announced to COMPILE_LISTENERS; later calls only pay one length check for it.
    `compile_first(args)`, where given, runs inside the first call before the dispatcher and
    returns True where it compiled the kernel elsewhere (the CPU's compile worker): the call
    then counts as a compile although the dispatcher loads it from disk."""
    def call(*args: Any) -> Any:
        before = len(fn.overloads)
        listeners = COMPILE_LISTENERS if not before else None
        if listeners:
            _announce(listeners, CompileEvent("start", fn.__name__, None, 0.0))
        t0 = time.perf_counter()
        elsewhere = False
        try:
            if not before and compile_first is not None:
                elsewhere = compile_first(args)
            result = fn(*args)
        except BaseException:
            if listeners:
                _announce(listeners, CompileEvent("error", fn.__name__, None,
                                                  time.perf_counter() - t0))
            raise
        if len(fn.overloads) > before:
            misses = sum(fn.stats.cache_misses.values())
            kind = "compile" if elsewhere or misses > call.misses else "disk_load"
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
