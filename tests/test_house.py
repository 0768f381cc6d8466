"""The house: neon's module paths over the device folders, one engine, one bounded memo type."""
from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

import neonlike
from neonlike.memo import Memo, clear_all, memos


@pytest.mark.parametrize("path, name", [
    ("neonlike.backends", "gen_backend"),
    ("neonlike.backends", "Autodiff"),
    ("neonlike.backends.autodiff", "Autodiff"),
    ("neonlike.backends.backend", "Tensor"),
    ("neonlike.backends.backend", "OpTreeNode"),
    ("neonlike.backends.backend", "Backend"),
    ("neonlike.backends.nervanacpu", "NervanaCPU"),
    ("neonlike.backends.nervanamkl", "NervanaMKL"),
    ("neonlike.backends.nervanagpu", "NervanaGPU"),
])
def test_neon_module_paths_work(path, name):
    assert hasattr(importlib.import_module(path), name), f"{path}.{name}"


def test_neon_faces_are_the_device_classes():
    from neonlike.backends import nervanacpu, nervanagpu
    from neonlike.backends.cpu import device as cpu
    from neonlike.backends.gpu import device as gpu
    assert nervanacpu.NervanaCPU is cpu.NervanaCPU
    assert nervanagpu.NervanaGPU is gpu.NervanaGPU


def test_dir_of_the_package_shows_no_helpers():
    names = dir(neonlike)
    for leaked in ("Any", "annotations", "typing", "_typing"):
        assert leaked not in names
    for public in neonlike.__all__:
        assert public in names


def test_both_devices_run_through_the_one_engine():
    from neonlike.backends.cpu import program
    from neonlike.backends.engine import Engine
    from neonlike.backends.gpu import device as gpu
    assert isinstance(program.ENGINE, Engine)
    src = open(gpu.__file__).read()
    # the GPU device hands execute to an Engine instead of walking trees itself
    assert "Engine(" in src and "P.walk(" not in src


def test_the_core_and_engine_import_no_device_library():
    code = ("import sys\n"
            "for m in ('numba', 'pycuda', 'mkl'):\n"
            "    sys.modules[m] = None\n"
            "import neonlike.memo, neonlike.plan, neonlike.backends.engine, "
            "neonlike.backends.cache, neonlike.backends.reference, neonlike.backends.autodiff\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------- Memo
def test_memo_is_bounded_and_drops_its_oldest_eighth():
    m = Memo("test.bounded", 16)
    for i in range(40):
        m.put(i, i * i)
    assert len(m) <= 16
    assert 39 in m and m[39] == 39 * 39
    assert 0 not in m                       # the oldest went first
    assert m.evictions == 40 - len(m)
    m.put(39, -1)                           # replacing a key evicts nothing
    assert m[39] == -1 and m.evictions == 40 - len(m)


def test_memo_rejects_a_useless_bound():
    with pytest.raises(ValueError, match="maxsize must be >= 1, got 0"):
        Memo("test.zero", 0)


def test_clear_caches_reaches_every_memo(cpu):
    a = cpu.array(np.arange(6.0).reshape(2, 3))
    out = cpu.empty((2, 3))
    for _ in range(3):
        out[:] = cpu.tanh(a * 2.0 + 1.0) * a - cpu.sum(a, axis=1)
    mine = Memo("test.mine", 8)
    mine.put("k", 1)
    stats = neonlike.cache_stats()["memos"]
    assert stats["test.mine"] == {"entries": 1, "maxsize": 8, "evictions": 0}
    assert stats["cpu.programs"]["entries"] >= 1
    neonlike.clear_caches()
    assert all(len(m) == 0 for m in memos()), [m for m in memos() if len(m)]
    assert neonlike.cache_stats()["entries"] == 0
    out[:] = cpu.tanh(a * 2.0 + 1.0) * a - cpu.sum(a, axis=1)   # rebuilt after a clear
    np.testing.assert_allclose(out.get(), np.tanh(np.arange(6.0).reshape(2, 3) * 2 + 1)
                               * np.arange(6.0).reshape(2, 3)
                               - np.arange(6.0).reshape(2, 3).sum(1, keepdims=True), rtol=1e-6)
    clear_all()


def test_memoized_keeps_results_in_a_bounded_memo():
    from neonlike.memo import memoized
    calls = []

    @memoized("test.memoized", 4)
    def square(x):
        calls.append(x)
        return None if x < 0 else x * x    # None is a result like any other

    assert [square(i) for i in (2, 2, -1, -1)] == [4, 4, None, None]
    assert calls == [2, -1]
    for i in range(10):
        square(i)
    assert len(square.memo) <= 4 and square.memo.name == "test.memoized"
    neonlike.clear_caches()
    square(2)
    assert calls[-1] == 2                  # computed again after the clear
