"""Shared fixtures: `be` runs a test on every backend this machine can build (others skip)."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from neonlike.backends import gen_backend

settings.register_profile("default", deadline=None, max_examples=100,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")

BACKENDS = ["cpu", "mkl", "gpu"]


def make_backend(name: str, **kwargs):
    try:
        return gen_backend(name, rng_seed=0, **kwargs)
    except (ImportError, RuntimeError, NotImplementedError) as e:
        pytest.skip(f"backend {name!r} unavailable here: {e}")


@pytest.fixture(autouse=True)
def cpu_engine(request, monkeypatch):
    """Which engine the 'cpu'/'mkl' backends run trees with in this test module.

    By default every tree is compiled and run fused on its first run (NEONLIKE_JIT_AFTER=1), so
    the tensor, op-tree and seed tests exercise the fused engine. A module that sets
    `CPU_ENGINE = "reference"` (test_ops, test_random_trees: thousands of one-off structures whose
    job is to pin each op's semantics) runs the numpy reference interpreter instead; every op is
    run fused against that reference in test_fused_cpu.py, on edge inputs and random trees.
    """
    if importlib.util.find_spec("numba") is None:
        return
    from neonlike.backends.cpu import device as nervanacpu
    from neonlike.backends.cpu import program as fused_cpu
    # the suite compiles thousands of structures in one process, far past a user's budget
    # (NEONLIKE_MAX_COMPILED; tests/test_engine_memory.py tests the budget itself)
    monkeypatch.setattr(fused_cpu.ENGINE, "max_compiled", 1 << 30)
    if getattr(request.module, "CPU_ENGINE", "fused") == "reference":
        monkeypatch.setattr(nervanacpu, "_FUSED", [None])
    else:
        monkeypatch.setattr(nervanacpu, "_FUSED", [fused_cpu.ENGINE])
        monkeypatch.setattr(fused_cpu.ENGINE, "jit_after", 1)


@pytest.fixture(params=BACKENDS)
def be(request):
    """Each available backend in turn."""
    return make_backend(request.param)


@pytest.fixture
def cpu():
    return make_backend("cpu")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ---------------------------------------------------------------- every planned stage, for the GPU
# While the suite runs, every FUSED stage the CPU engine plans is also rendered to CUDA C
# (render_cuda), and when the session ends all distinct kernels are compiled with nvcc for sm_90:
# a compile error, a warning or a register spill fails the run (issue 6: checks without a GPU).
# Needs nvcc on PATH; NEONLIKE_CUDA_SUITE_CHECK=0 turns it off.
_CUDA_KERNELS: dict = {}
_CUDA_PROBLEMS: list = []


def _render_for_cuda(plan, tensors, out, nodes, ctype) -> None:
    from neonlike import plan as P
    from neonlike.backends.gpu import render as render_cuda
    from neonlike.backends.gpu.device import reduce_layout
    from neonlike.optree import shape_of
    meta = {i: (len(t.shape), P._mask(t.shape), t.dtype) for i, t in enumerate(tensors)}
    meta[plan.n_inputs] = (len(out.shape), P._mask(out.shape), out.dtype)
    for j, pos in enumerate(plan.temps):
        meta[plan.n_inputs + 1 + j] = (len(nodes[pos].shape), P._mask(nodes[pos].shape))
    for i, stage in enumerate(plan.stages):
        if stage.kind is P.StageKind.FUSED:
            store = out.dtype if stage.out == plan.n_inputs else ctype
            # the default layout, and the wide one reduce_layout picks on a 132-SM device
            dom = shape_of(nodes[stage.domain][1]) if stage.domain >= 0 else \
                (out.shape if stage.out == plan.n_inputs
                 else nodes[plan.temps[stage.out - plan.n_inputs - 1]].shape)
            wide = reduce_layout(stage.reduce_axes, dom, 132) if stage.reduce_axes else None
            for ppb, block in [(None, render_cuda.BLOCK)] + ([wide] if wide else []):
                try:
                    k = render_cuda.render(stage, meta, ctype.name, store, f"suite/{i}",
                                           points_per_block=ppb, block=block)
                except Exception as e:  # noqa: BLE001 - reported at the end with the stage
                    _CUDA_PROBLEMS.append(f"render_cuda failed on {stage}: "
                                          f"{type(e).__name__}: {e}")
                    continue
                _CUDA_KERNELS.setdefault(k.name, k)


# ---------------------------------------------------------------- kernel replay
# NEONLIKE_DUMP_KERNELS=DIR writes the Numba and CUDA source of every FUSED stage the suite plans
# into DIR (one file per distinct source, named by its hash), so a refactor that claims to leave
# the generated kernels alone can show it: `diff -r` the folders of two runs (tinygrad's
# process replay).
def _dump_kernels(directory: str):
    import hashlib

    def observe(plan, tensors, out, nodes, ctype) -> None:
        from neonlike import plan as P
        from neonlike.backends.gpu import render as render_cuda
        from neonlike.backends.cpu import render as render_numba
        meta2 = {i: (len(t.shape), P._mask(t.shape)) for i, t in enumerate(tensors)}
        meta2[plan.n_inputs] = (len(out.shape), P._mask(out.shape))
        meta3 = {i: (len(t.shape), P._mask(t.shape), t.dtype) for i, t in enumerate(tensors)}
        meta3[plan.n_inputs] = (len(out.shape), P._mask(out.shape), out.dtype)
        for j, pos in enumerate(plan.temps):
            meta2[plan.n_inputs + 1 + j] = meta3[plan.n_inputs + 1 + j] = (
                len(nodes[pos].shape), P._mask(nodes[pos].shape))
        for i, stage in enumerate(plan.stages):
            if stage.kind is not P.StageKind.FUSED:
                continue
            final = stage.out == plan.n_inputs
            store = out.dtype if final and out.dtype != np.float16 else ctype
            sources = {"py": render_numba.render(stage, meta2, ctype.name, store, f"dump/{i}")[0],
                       "cu": render_cuda.render(stage, meta3, ctype.name,
                                                out.dtype if final else ctype, f"dump/{i}").source}
            for ext, src in sources.items():
                name = hashlib.sha256(src.encode()).hexdigest()[:16]
                path = os.path.join(directory, f"{name}.{ext}")
                if not os.path.exists(path):
                    with open(path, "w") as f:
                        f.write(src)
    return observe


def pytest_configure(config):
    import shutil
    from neonlike.backends import engine
    if os.environ.get("NEONLIKE_CUDA_SUITE_CHECK", "1") != "0" and shutil.which("nvcc"):
        engine.PLAN_OBSERVERS.append(_render_for_cuda)
    if os.environ.get("NEONLIKE_DUMP_KERNELS"):
        os.makedirs(os.environ["NEONLIKE_DUMP_KERNELS"], exist_ok=True)
        engine.PLAN_OBSERVERS.append(_dump_kernels(os.environ["NEONLIKE_DUMP_KERNELS"]))


def _nvcc_batch(sources: list) -> tuple:
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "suite_kernels.cu")
        with open(path, "w") as f:
            f.write("\n".join(sources))
        r = subprocess.run(["nvcc", "--cubin", "-arch=sm_90", "-Xptxas", "-v", "-o", os.devnull,
                            path], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def pytest_sessionfinish(session, exitstatus):
    import re
    import time
    from concurrent.futures import ThreadPoolExecutor
    if not _CUDA_KERNELS and not _CUDA_PROBLEMS:
        return
    t0 = time.perf_counter()
    names = sorted(_CUDA_KERNELS)
    n = max(1, min(os.cpu_count() or 1, 4, len(names)))
    size = max(1, -(-len(names) // (n * 4)))      # a few files per worker: errors stay findable
    chunks = [names[i:i + size] for i in range(0, len(names), size)]
    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda c: _nvcc_batch([_CUDA_KERNELS[k].source for k in c]), chunks))
    problems = list(_CUDA_PROBLEMS)
    spill = re.compile(r"(\d+) bytes spill stores")
    for chunk, (rc, log) in zip(chunks, results):
        if rc != 0 or "warning" in log:
            lines = [x for x in log.splitlines() if "ptxas info" not in x and "bytes stack" not in x]
            problems.append(f"nvcc on {len(chunk)} kernels ({chunk[0]} ...):\n" + "\n".join(lines[:40]))
        elif any(int(m.group(1)) for m in spill.finditer(log)):
            problems.append(f"register spills in one of {chunk}")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    line = (f"render_cuda: {len(names)} distinct kernels of the suite's plans compiled by nvcc "
            f"for sm_90 in {time.perf_counter() - t0:.1f} s")
    if reporter is not None:
        reporter.write_line(line + (f", {len(problems)} problem(s)" if problems else ", no error, "
                                    "warning or spill"))
        for p in problems[:10]:
            reporter.write_line(p)
    if problems:
        session.exitstatus = 1
