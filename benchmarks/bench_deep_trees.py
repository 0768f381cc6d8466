"""Deep and wide trees (issue 13): planning, compile time per kernel, and results.

    python benchmarks/bench_deep_trees.py                 # every case
    python benchmarks/bench_deep_trees.py alt2000 wide600

Each case runs in its own process with a fresh NEONLIKE_CACHE_DIR (so every kernel compiles) on
a float32 (10, 10) tensor: the first run of the statement is interpreted (the numpy reference),
the second compiles; both are checked against numpy in float64. Cases: `altN`, an unrolled
`t = tanh(t)` / `t = t * 1.0001` alternating N deep; `wideN`, the sum of N distinct tensors;
`wideN_sum`, the same summed over axis 1. Per case: the plan's stages and distinct kernels,
the slowest kernel's compile (numba's first call, from cache.COMPILE_LISTENERS), the second
run (plan, render, every compile, the run), and a steady run. See benchmarks/README.md.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

CASES = ["alt2000", "alt12000", "alt20000", "wide600", "wide600_sum"]

SCRIPT = r'''
import json, sys, time
import numpy as np
from neonlike.backends import gen_backend
from neonlike.backends import cache
from neonlike.backends.cpu import program as cpu_program
from neonlike import plan as P

case = sys.argv[1]
be = gen_backend("cpu", datatype=np.float32)
rng = np.random.default_rng(0)
compiles = []
cache.COMPILE_LISTENERS.append(
    lambda e: compiles.append(e.seconds) if e.phase == "end" else None)
warm = be.array(rng.uniform(-1, 1, (10, 10)).astype(np.float32))
w = be.empty((10, 10))
for _ in range(2):          # the process's first kernel pays numba's start-up: not counted
    w[:] = warm * 2.0 + 1.0
compiles.clear()

if case.startswith("alt"):
    depth = int(case[3:])
    xv = rng.uniform(-1, 1, (10, 10)).astype(np.float32)
    x = be.array(xv)
    t, ref = x, xv.astype(np.float64)
    for i in range(depth):
        if i % 2 == 0:
            t, ref = be.tanh(t), np.tanh(ref)
        else:
            t, ref = t * 1.0001, ref * 1.0001
    out = be.empty((10, 10))
else:
    n = int(case[4:].split("_")[0])
    xs = [rng.uniform(0, 1, (10, 10)).astype(np.float32) for _ in range(n)]
    ts = [be.array(v) for v in xs]
    t = ts[0]
    for u in ts[1:]:
        t = t + u
    ref = np.sum(np.array(xs, dtype=np.float64), axis=0)
    if case.endswith("_sum"):
        t, ref = be.sum(t, axis=1), ref.sum(axis=1, keepdims=True)
    out = be.empty(ref.shape)

def timed():
    t0 = time.perf_counter()
    out[:] = t
    return time.perf_counter() - t0, float(np.abs(out.get() - ref).max() / np.abs(ref).max())

first, err_first = timed()
second, err_second = timed()
steady, _ = timed()
key, tensors, consts, nodes = P.walk(out, t)
t0 = time.perf_counter()
plan = P.make_plan(out, t, tensors, nodes, cpu_program.render_numba.RENDERABLE)
planning = time.perf_counter() - t0
prog = cpu_program.ENGINE.programs.get(key)
print(json.dumps({"case": case, "stages": len(plan.stages),
                  "kernels": len({k.source for k in prog.kernels.values()}) if prog else None,
                  "planning_s": planning, "first_s": first, "second_s": second,
                  "steady_s": steady, "compiles": len(compiles),
                  "slowest_compile_s": max(compiles, default=0.0),
                  "err_first": err_first, "err_second": err_second}))
'''


def run_case(case: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="neonlike-deep-") as d:
        env = dict(os.environ, NEONLIKE_CACHE_DIR=d)
        r = subprocess.run([sys.executable, "-c", SCRIPT, case], env=env, capture_output=True,
                           text=True, timeout=900)
    if r.returncode:
        return {"case": case, "error": f"exit {r.returncode}: {r.stderr.strip()[-400:]}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    cases = sys.argv[1:] or CASES
    print("| case | stages | kernels | planning | 1st run (interpreted) | 2nd run (compiles) "
          "| slowest kernel compile | steady run | rel. error 1st / 2nd |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        r = run_case(case)
        if "error" in r:
            print(f"| {case} | {r['error']} |")
            continue
        print(f"| {case} | {r['stages']} | {r['kernels']} | {r['planning_s']:.2f} s "
              f"| {r['first_s']:.3f} s | {r['second_s']:.2f} s | {r['slowest_compile_s']:.2f} s "
              f"| {r['steady_s'] * 1e3:.2f} ms | {r['err_first']:.1e} / {r['err_second']:.1e} |",
              flush=True)


if __name__ == "__main__":
    main()
