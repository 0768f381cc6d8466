"""Compile time: a never-seen tree compiled in a fresh cache dir, and reloaded from the disk cache.

    python benchmarks/bench_compile.py

Two subprocesses share a fresh NEONLIKE_CACHE_DIR: the first times the first call of a never-seen
tree (the 10-op), after a first tree has paid the process's start-up; the second times the same
tree reloaded from the disk cache. The numba cells are a hand-written @njit(parallel=True,
cache=True) kernel in the same processes. See benchmarks/README.md (bench_cpu.py runs these rows
last, after the other families).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as H  # first: pins the thread pools before numpy loads

import _runner  # noqa: E402
from _harness import Case, Target, fmt_time  # noqa: E402
from _runner import Context, Row, evaluate_targets  # noqa: E402

COMPILE_SCRIPT = r'''
import json, statistics, sys, time
t0 = time.perf_counter()
import numpy as np
from neonlike.backends import gen_backend
be = gen_backend(sys.argv[1])
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)
shape = (1000, 1000)
xs = [rng.uniform(0, 1, shape).astype(np.float32) for _ in range(4)]
a, b, c, d = [be.array(x) for x in xs]
o = be.empty(shape)

def first_and_steady(stmt):
    t = time.perf_counter(); stmt(); first = time.perf_counter() - t
    steady = []
    for _ in range(5):
        t = time.perf_counter(); stmt(); steady.append(time.perf_counter() - t)
    return first, statistics.median(steady)

def tree_a():
    o[:] = 1 / (1 + be.exp(-a))

def tree_b():  # the 10-op tree: never seen in a fresh cache dir
    o[:] = ((a * b + c) * d - a / (b + 1)) * be.exp(-c * c) + be.sqrt(abs(d))

out = {"import": t_import, "first tree": first_and_steady(tree_a),
       "new tree": first_and_steady(tree_b)}
try:
    import numba
    numba.set_num_threads(min(NTHREADS, numba.config.NUMBA_NUM_THREADS))

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def nb_first(x, o):  # numba's own start-up (threading layer, cache index): not a tree's cost
        for i in numba.prange(x.size):
            o[i] = np.float32(1) / (np.float32(1) + np.exp(-x[i]))

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def nb_10op(a, b, c, d, o):
        for i in numba.prange(a.size):
            ai, bi, ci, di = a[i], b[i], c[i], d[i]
            o[i] = ((ai * bi + ci) * di - ai / (bi + np.float32(1))) * np.exp(-ci * ci) \
                + np.sqrt(np.abs(di))
    flat = [x.reshape(-1) for x in xs]
    o_nb = np.empty(flat[0].shape, np.float32)
    out["numba first"] = first_and_steady(lambda: nb_first(flat[0], o_nb))
    out["numba new"] = first_and_steady(lambda: nb_10op(*flat, o_nb))
except ImportError:
    pass
print("RESULT " + json.dumps(out))
'''


def compile_times(backend: str, threads: int) -> dict[str, Any]:
    """{'cold': {...}, 'warm': {...}} from two subprocesses sharing one fresh cache dir."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="neonlike-bench-") as tmp:
        script = Path(tmp) / "compile_probe.py"
        script.write_text(COMPILE_SCRIPT.replace("NTHREADS", str(threads)))
        # NEONLIKE_JIT_AFTER=1: compile on a tree's first run (by default the first run of a
        # structure is interpreted and the compile happens when it recurs)
        env = dict(os.environ, **H.thread_env(threads), NEONLIKE_CACHE_DIR=str(Path(tmp) / "cache"),
                   NEONLIKE_JIT_AFTER="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(H.REPO), env.get("PYTHONPATH")) if p)
        for phase in ("cold", "warm"):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, str(script), backend], env=env, cwd=tmp,
                                  capture_output=True, text=True, timeout=600)
            wall = time.perf_counter() - t0
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if proc.returncode or line is None:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
                out[phase] = f"error: {tail[0][:120]}"
                print(f"  compile ({phase}) failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            out[phase] = json.loads(line[len("RESULT "):])
            out[phase]["process"] = wall
    return out


def finish(ctx: Context) -> None:
    """The four compile rows (after every timed case: they run in subprocesses)."""
    if "compile" not in ctx.args.case_list:
        return
    ctx.log("compile (two subprocesses)")
    ct = compile_times(ctx.args.backend, ctx.args.threads)
    ctx.raw["compile"] = ct
    for phase, key, label, target in (
            ("cold", "first tree", "compile: first tree of a cold process (start-up included)",
             None),
            ("cold", "new tree", "compile: a never-seen tree (the 10-op), empty cache dir", 0.5),
            ("warm", "first tree", "reload: first tree of a new process (start-up included)",
             None),
            ("warm", "new tree", "reload: the 10-op tree from the disk cache", 0.010)):
        d = ct.get(phase)
        peer: dict[str, Any] = {}
        if isinstance(d, dict):
            first, steady = d[key]
            neon: Any = max(0.0, first - steady)
            nb = d.get("numba " + key.split()[0])
            if nb:
                peer["numba"] = max(0.0, nb[0] - nb[1])
        else:
            neon = d or "not run"
        targets = [Target("max", target)] if target is not None else []
        ctx.rows.append(Row("compile", label, "1e6", neon, "—", peer, targets,
                            evaluate_targets(targets, neon, None, None, peer, False)))
    cold = ct.get("cold")
    if isinstance(cold, dict) and cold["new tree"][0] - cold["new tree"][1] < 0.02:
        ctx.notes.append("compile rows: the first call of a never-seen tree cost under 20 ms, so "
                         "no kernel was compiled (this backend interprets the tree; see the "
                         "neonlike environment line above).")
    if isinstance(ct.get("cold"), dict):
        ctx.notes.append(f"compile rows: first call minus a steady call, (1000, 1000) float32; "
                         f"`import neonlike` + gen_backend took {fmt_time(ct['cold']['import'])} "
                         f"(cold process); the numba cells are hand-written @njit(parallel, "
                         f"cache=True) kernels in the same processes (logistic first, then the "
                         f"10-op).")


CASES = {"compile": Case(None)}

if __name__ == "__main__":
    sys.exit(_runner.run([sys.modules[__name__]], "bench_compile.py", __doc__.split("\n")[0]))
