"""The kernel cache on disk never kills a process (issue 13, points 1, 2 and 7).

Each case runs fresh processes (`sys.executable -c`) over a private NEONLIKE_CACHE_DIR: a poisoned
entry (numba's .nbi/.nbc, or a k_<hash>.py) is removed with one warning naming it and rebuilt, and
the next process finds the cache healed; files take the user's umask; a read-only cache serves
what it holds; two threads' first kernels never race on the directory; a Ctrl-C during numba's
import leaves the process able to run the next statement.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest

pytest.importorskip("numba")

from neonlike.backends.cache import KernelCache  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# 'one': the kernel of x * 2 + 1 (F); 'both': E (exp(x) - 1) first, so E's module is imported
# when F's entry is read. Prints F's and E's compile and disk-load counts.
SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from neonlike.backends import gen_backend
    from neonlike.backends.cache import CPU_CACHE
    be = gen_backend('cpu')
    a = np.arange(12.0).reshape(3, 4)
    x, o = be.array(a), be.empty((3, 4))
    if sys.argv[1] == 'both':
        o[:] = be.exp(x) - 1
        assert np.allclose(o.get(), np.exp(a) - 1, rtol=1e-6)
    o[:] = x * 2 + 1
    assert np.allclose(o.get(), a * 2 + 1), o.get()
    print(CPU_CACHE.stats['compiles'], CPU_CACHE.stats['disk_loads'])
""")


def child_env(cache: Path, tmp: Path) -> dict:
    """The child's environment: kernels compile as shipped, in the compile worker (cpu/compiler.py),
    whose child process reads and writes numba's files through the same recovering cache."""
    return dict(os.environ, NEONLIKE_CACHE_DIR=str(cache), NEONLIKE_FUSE="1",
                NEONLIKE_JIT_AFTER="1", TMPDIR=str(tmp),
                PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")


def run(cache: Path, tmp: Path, which: str = "one", prefix: list | None = None) -> tuple:
    """(compiles, disk loads, the neonlike warnings) of SCRIPT in a fresh process."""
    tmp.mkdir(exist_ok=True)
    cmd = (prefix or []) + [sys.executable, "-W", "always", "-c", SCRIPT, which]
    r = subprocess.run(cmd, env=child_env(cache, tmp), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    compiles, loads = (int(v) for v in r.stdout.split())
    return compiles, loads, [line for line in r.stderr.splitlines() if "neonlike:" in line]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A cache holding F's kernel and E's, and the names of their module files."""
    cache, tmp = tmp_path_factory.mktemp("template"), tmp_path_factory.mktemp("tmp")
    assert run(cache, tmp, "one")[:2] == (1, 0)
    f = next(cache.glob("k_*.py")).stem
    assert run(cache, tmp, "both")[:2] == (1, 1)
    e = next(p.stem for p in cache.glob("k_*.py") if p.stem != f)
    return cache, f, e


def numba_file(cache: Path, stem: str, ext: str) -> Path:
    return next((cache / "__pycache__").glob(f"{stem}.*{ext}"))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def k_module_a_directory(path: Path) -> None:
    path.unlink()
    (path / "inside").mkdir(parents=True)


POISONS = {
    # name: (which file of F's, how it is poisoned, which script runs)
    "index truncated": (".nbi", truncate, "one"),
    "index garbage": (".nbi", lambda p: p.write_bytes(b"garbage\n"), "one"),
    "data garbage": (".nbc", lambda p: p.write_bytes(b"garbage\n"), "one"),
    "data empty": (".nbc", lambda p: p.write_bytes(b""), "one"),
    "data of another kernel": (".nbc", "E", "one"),            # E's module not imported: fails
    "data of a loaded kernel": (".nbc", "E", "both"),          # unpickles: must not be run
    "module a directory": (".py", k_module_a_directory, "one"),
    "module not its source": (".py", lambda p: p.write_text("kernel_serial = 1\n"), "one"),
    "module unreadable": (".py", lambda p: p.chmod(0), "one"),
}


@pytest.mark.parametrize("poison", list(POISONS))
def test_a_poisoned_entry_is_rebuilt_with_one_warning_and_heals(poison, template, tmp_path):
    ext, spoil, which = POISONS[poison]
    if poison == "module unreadable" and os.geteuid() == 0:
        pytest.skip("root reads a chmod 000 file (the directory case takes the same path)")
    src, f, e = template
    cache = tmp_path / "cache"
    shutil.copytree(src, cache)
    target = cache / f"{f}.py" if ext == ".py" else numba_file(cache, f, ext)
    if spoil == "E":
        shutil.copyfile(numba_file(cache, e, ext), target)
    else:
        spoil(target)
    compiles, loads, warned = run(cache, tmp_path / "tmp", which)
    assert len(warned) == 1, warned
    assert target.name in warned[0] and ("removed" in warned[0] or "wrote it again" in warned[0])
    e_loads = 1 if which == "both" else 0
    # a rewritten module keeps its numba entry (numba stamps a source by its content)
    assert (compiles, loads) == ((0, 1) if ext == ".py" else (1, e_loads))
    assert run(cache, tmp_path / "tmp", which) == (0, 1 + e_loads, [])


def test_files_take_the_users_umask(tmp_path):
    cache = tmp_path / "cache"
    script = "import os; os.umask(0o002); import sys; sys.argv[1:] = ['one']; exec(" \
             f"{SCRIPT!r})"
    r = subprocess.run([sys.executable, "-c", script], env=child_env(cache, tmp_path),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    files = list(cache.glob("k_*.py")) + list((cache / "__pycache__").glob("k_*"))
    assert len(files) == 3
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o664)}, files


def read_only(cache: Path) -> list:
    """A command prefix under which `cache` cannot be written: its folders made 0555 (restored by
    the caller), or for root (who writes anyway) a read-only bind mount in a mount namespace."""
    if os.geteuid() != 0:
        for d in (cache, cache / "__pycache__"):
            d.chmod(0o555)
        return []
    prefix = ["unshare", "--mount", "sh", "-c",
              'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"', str(cache)]
    if shutil.which("unshare") is None or subprocess.run(
            prefix + ["true"], capture_output=True).returncode != 0:
        pytest.skip("root needs `unshare --mount` for a read-only cache directory")
    return prefix


def test_a_read_only_cache_serves_its_kernels_and_reuses_one_fallback(template, tmp_path):
    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    shutil.copytree(template[0], cache)
    for p in (cache / "__pycache__").glob(f"{template[2]}.*"):   # the cache holds F, not E
        p.unlink()
    (cache / f"{template[2]}.py").unlink()
    prefix = read_only(cache)
    try:
        assert run(cache, tmp, "one", prefix) == (0, 1, [])       # served: nothing compiled
        assert not list(tmp.iterdir()), "a folder was made for a cache that needed none"
        compiles, loads, warned = run(cache, tmp, "both", prefix)
        assert (compiles, loads) == (1, 1) and len(warned) == 1 and str(cache) in warned[0]
        assert run(cache, tmp, "both", prefix)[:2] == (0, 2)    # E from the one fallback folder
        assert [p.name for p in tmp.iterdir()] == [f"neonlike-cache-{os.getuid()}"]
    finally:
        for d in (cache, cache / "__pycache__"):
            d.chmod(0o755)


def test_two_threads_first_kernels_never_race_on_the_directory(tmp_path, monkeypatch):
    for i in range(300):
        monkeypatch.setenv("NEONLIKE_CACHE_DIR", str(tmp_path / f"cache{i}"))
        cache, barrier, mods = KernelCache(f"race{i}"), threading.Barrier(2), {}

        def first_kernel(t: int) -> None:
            barrier.wait()
            mods[t] = cache.module(f"VALUE = {t}\n")
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            threads = [threading.Thread(target=first_kernel, args=(t,)) for t in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert not [str(w.message) for w in warned], f"try {i}"
        assert cache.directory() == tmp_path / f"cache{i}"
        assert (mods[0].VALUE, mods[1].VALUE) == (0, 1)


def test_ctrl_c_during_numba_import_leaves_the_process_working(tmp_path):
    """SIGINT arrives half-way through numba's import (a meta-path hook raises it when
    numba.core.typing is looked up): the statement raises KeyboardInterrupt, the next one runs."""
    script = textwrap.dedent("""
        import signal, sys
        import numpy as np
        # as in an interactive session: a background job (CI under `cmd &`, nohup) starts with
        # SIGINT ignored, and Python then leaves it ignored
        signal.signal(signal.SIGINT, signal.default_int_handler)

        class CtrlC:
            def find_spec(self, name, path=None, target=None):
                if name == 'numba.core.typing':
                    sys.meta_path.remove(self)
                    signal.raise_signal(signal.SIGINT)
                return None

        from neonlike.backends import gen_backend
        be = gen_backend('cpu')
        a = np.arange(6.0).reshape(2, 3)
        x, o = be.array(a), be.empty((2, 3))
        assert 'numba' not in sys.modules
        sys.meta_path.insert(0, CtrlC())
        try:
            o[:] = x * 2 + 1
            raise SystemExit('the Ctrl-C was lost')
        except KeyboardInterrupt:
            pass
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        o[:] = x * 2 + 1
        assert np.allclose(o.get(), a * 2 + 1), o.get()
        print('ok')
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=child_env(tmp_path / "cache", tmp_path))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
