"""Memory a compiled structure costs (issue 13, point 3): RSS after N distinct tree structures.

    python benchmarks/bench_memory.py [--n 700] [--n-here 150] [--shape 10,10]

Each row runs in a fresh process with a fresh kernel cache directory: N distinct structures (a
chain of ops chosen by the digits of i in base 6, as tests/test_engine_memory.py), each run
twice (interpreted, then compiled), after a warm-up structure. Rows:

- compiled in the compile worker and loaded from numba's disk cache (the default);
- compiled in the process itself (NEONLIKE_COMPILE_WORKER=0; numba keeps what it compiled);
- loaded from a warm disk cache (the same N again in a new process: what a second run costs).

The table gives RSS growth over the N structures, per structure, and seconds per structure.
The last column checks the bound the docs state: 700 structures under +800 MB.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import textwrap

SCRIPT = """
import sys, time
import numpy as np
from neonlike.backends import gen_backend
n, shape = int(sys.argv[1]), tuple(int(s) for s in sys.argv[2].split(','))
be = gen_backend('cpu')
rng = np.random.default_rng(0)
a = be.array(rng.uniform(-1, 1, shape).astype(np.float32))
b = be.array(rng.uniform(0.5, 2, shape).astype(np.float32))
o = be.empty(shape)
OPS = [lambda x: x + a, lambda x: x * b, be.tanh, be.sig, lambda x: x - 1.0,
       lambda x: be.sqrt(be.absolute(x))]

def run(i):
    x, d = a, []
    while True:
        d.append(i % 6); i //= 6
        if not i:
            break
    for k in d + [len(d) % 6]:
        x = OPS[k](x)
    o[:] = x
    o[:] = x

def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS')) / 1024

run(100_000)
r0, t0 = rss(), time.perf_counter()
for i in range(n):
    run(i)
print(rss() - r0, time.perf_counter() - t0)
"""


def measure(n: int, shape: str, cache: str, **env: str) -> tuple[float, float]:
    full = dict(os.environ, NEONLIKE_CACHE_DIR=cache, NEONLIKE_JIT_AFTER="2", **env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), str(n), shape],
                       env=full, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    grew, seconds = (float(v) for v in r.stdout.split())
    return grew, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=700, help="distinct structures (worker rows)")
    ap.add_argument("--n-here", type=int, default=150,
                    help="distinct structures compiled in the process itself")
    ap.add_argument("--shape", default="10,10", help="the tensors' shape (300,300: parallel kernels)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        worker = os.path.join(tmp, "worker")
        rows.append(("compile worker, loaded from disk (default)", args.n,
                     *measure(args.n, args.shape, worker)))
        rows.append(("warm disk cache (a second process)", args.n,
                     *measure(args.n, args.shape, worker)))
        rows.append(("compiled in the process (NEONLIKE_COMPILE_WORKER=0)", args.n_here,
                     *measure(args.n_here, args.shape, os.path.join(tmp, "here"),
                              NEONLIKE_COMPILE_WORKER="0")))
    print(f"\nMemory per compiled structure, shape ({args.shape}) float32, each run twice; "
          f"{platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}\n")
    print("| kernels | structures | RSS growth | MB per structure | s per structure | "
          "700 structures (bound: +800 MB) |")
    print("|---|---|---|---|---|---|")
    for name, n, grew, seconds in rows:
        per = grew / n
        print(f"| {name} | {n} | {grew:.0f} MB | {per:.2f} | {seconds / n:.3f} | "
              f"{per * 700:.0f} MB: {'within' if per * 700 < 800 else 'OVER'} |")


if __name__ == "__main__":
    main()
