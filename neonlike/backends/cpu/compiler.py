"""The compile worker: generated kernels are compiled in a child process, loaded from disk here.

numba's compiled code and the memory its compiler takes stay in the process for good (MCJIT;
numba issues #5976, #2290): compiling a kernel here costs ~1.5-2.2 MB that nothing gives back,
loading the same kernel from numba's disk cache ~0.2-0.5 MB. So the first call of a kernel asks
one long-lived child process (`python -m neonlike.backends.cpu.compiler`) to compile it for
the call's argument types into numba's disk cache (`cache=True` beside the generated module),
and then loads it from there. The child is started on the first compile, restarted when its own
memory passes RECYCLE_MB, and ended with this process.

Where the child cannot help, the kernel compiles in this process as before, with one warning:
the child cannot be started, it failed on this kernel (its error is in the warning), it died,
or its compile was not found in the disk cache afterwards (a cache numba cannot write). A kernel
the child failed on is then compiled, healed or reported here by the usual path.

NEONLIKE_COMPILE_WORKER=0 compiles in this process always.
"""
from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import threading
import warnings
from typing import Any

# the child is restarted once its resident memory passes this (it grows by ~2 MB a kernel)
RECYCLE_MB = 1024


class _Worker:
    """The client of one child process; every request holds the lock (one compile at a time)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.disabled = os.environ.get("NEONLIKE_COMPILE_WORKER", "1") == "0"
        self.compiles = 0
        self.last: Any = None     # the dispatcher of the last kernel the child compiled
        self.atexit = False

    def compile(self, module: Any, fn: Any, args: tuple) -> bool:
        """Compile `fn` (a dispatcher of generated `module`) for `args`' types in the child;
        True where it did (the caller's call then loads it from numba's disk cache); False where
        the disk cache holds it already or the child could not help (the call compiles it)."""
        last, self.last = self.last, None
        if last is not None and not sum(last.stats.cache_hits.values()) and not self.disabled:
            # the last kernel the child compiled was not loaded from numba's disk cache here
            # (its call compiled it again): the child is no help here. (Its cache hits, not its
            # misses: the same kernel may since have compiled here for other argument types.)
            self._give_up("its kernels were not found in numba's disk cache afterwards (is the "
                          "cache directory writable?)")
        if self.disabled:
            return False
        from numba import typeof
        try:
            sig = tuple(typeof(a) for a in args)
        except Exception:        # a type numba cannot name: compile here
            return False
        try:
            if _on_disk(fn, sig):
                return False         # the dispatcher loads it from numba's disk cache itself
        except Exception:            # an index numba cannot read: the dispatcher's call heals it
            return False
        request = (module.__name__, module.__file__, fn.__name__, sig)
        with self.lock:
            for attempt in (0, 1):
                try:
                    proc = self._process()
                    pickle.dump(request, proc.stdin)
                    proc.stdin.flush()
                    status, detail = pickle.load(proc.stdout)
                    break
                except (OSError, EOFError, pickle.PickleError) as e:
                    self.stop()
                    if attempt:
                        self._give_up(f"the compile worker stopped ({type(e).__name__}: {e})")
                        return False
            if status == "ok":
                compiled, rss_mb = detail
                self.compiles += compiled
                self.last = fn
                if rss_mb > RECYCLE_MB:
                    self.stop()
                return compiled
        warnings.warn(f"neonlike: the compile worker could not compile {fn.__name__} of "
                      f"{module.__file__} ({detail}); compiling it in this process",
                      RuntimeWarning, stacklevel=4)
        return False

    def _process(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                p for p in [*sys.path, os.environ.get("PYTHONPATH", "")] if p))
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "neonlike.backends.cpu.compiler"], env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
            if not self.atexit:
                atexit.register(self.stop)
                self.atexit = True
        return self.proc

    def stop(self) -> None:
        """End the child (it exits at the end of its input) and close the pipes."""
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                proc.stdin.close()
                proc.wait(timeout=5)
            except Exception:
                proc.kill()
                proc.wait()
            proc.stdout.close()

    def _give_up(self, why: str) -> None:
        self.disabled = True
        self.stop()
        warnings.warn(f"neonlike: {why}; kernels compile in this process from now on",
                      RuntimeWarning, stacklevel=5)


def _on_disk(fn: Any, sig: tuple) -> bool:
    """Whether numba's disk cache holds `fn` compiled for `sig` (its index only, nothing loaded;
    numba's own index key)."""
    cache = fn._cache
    return cache._index_key(sig, fn.targetctx.codegen()) in cache._cache_file._load_index()


WORKER = _Worker()


def _serve() -> None:
    """The child: compile each request into numba's disk cache; answer (status, detail)."""
    import resource
    from pathlib import Path
    from ..cache import _import, _recovering_numba_cache
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr          # nothing but answers on the pipe
    while True:
        try:
            name, path, func, sig = pickle.load(stdin)
        except EOFError:
            return
        try:
            mod = sys.modules.get(name)
            if mod is None:          # the parent's module name: numba's cache records it
                mod = _import(name, Path(path))
                _recovering_numba_cache(mod)     # numba's files read and written as the parent's
            fn = getattr(mod, func)
            fn.compile(sig)
            compiled = sum(fn.stats.cache_misses.values()) > 0   # else: on disk already
            answer = ("ok", (compiled, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
        except Exception as e:
            answer = ("error", f"{type(e).__name__}: {e}")
        pickle.dump(answer, stdout)
        stdout.flush()


if __name__ == "__main__":
    _serve()
