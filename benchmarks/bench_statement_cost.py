"""Statement cost (issue 12, point 4): one small statement, tree building included, against
numpy, numba and torch on the same data, side by side in one process.

    python benchmarks/bench_statement_cost.py [--n 100] [--rounds 15] [--threads 2]

Rows (float32, `--n` elements as an (n, 1) tensor, random data in [-1, 1]):

- `o[:] = be.tanh(s*2.0 + 1.0)*s - s`, the tree built in the timed statement (target <= 3 us),
  and its two halves: building the tree only, and `o[:] = tree` for a tree built beforehand;
- an Autodiff-style statement: `g[:] = tree` for the gradient trees of the 10-op tree (their
  shared subtrees hold constants), per statement, with the number of statements that took the
  engine's walk instead of its fast path;
- peers: numpy's ufuncs with out= (one call per op), a hand-written @njit kernel called
  directly, torch on the same memory (from_numpy, the last op with out=), each where installed.
  torch runs on one thread here, as neonlike's kernel does at this size: with two, its OpenMP
  fork-join made the statement take 0.5-9 ms whenever another process held a core.

Every implementation is checked against numpy first. Then rounds: in each, every implementation
runs one batch (at least ~20 ms) in a rotating order, with the garbage collector on as in a
training loop. The table gives the median over rounds of the time per statement, and the
fastest and slowest round (the spread; this machine is shared).
"""
from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

TARGET_US = 3.0


def batch_size(fn: Callable[[], Any], seconds: float = 0.02) -> int:
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= seconds:
            return n
        n *= 2


def timed_rounds(impls: dict, rounds: int) -> dict:
    """Seconds per call of each implementation, one sample per round (rotating order)."""
    sizes = {k: batch_size(fn) for k, fn in impls.items()}
    samples: dict = {k: [] for k in impls}
    names = list(impls)
    gc.enable()
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, n = impls[name], sizes[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - t0) / n)
            time.sleep(0.002)
    return samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    import numpy as np
    from neonlike.backends import Autodiff, gen_backend
    be = gen_backend("cpu", rng_seed=0)
    engine = _engine()
    rng = np.random.default_rng(0)
    host = rng.uniform(-1, 1, (args.n, 1)).astype(np.float32)
    s, o = be.array(host), be.empty((args.n, 1))
    expect = np.tanh(host * 2 + 1) * host - host

    def statement() -> None:
        o[:] = be.tanh(s * 2.0 + 1.0) * s - s

    tree = be.tanh(s * 2.0 + 1.0) * s - s

    def build() -> None:
        be.tanh(s * 2.0 + 1.0) * s - s

    def assign() -> None:
        o[:] = tree

    # the Autodiff-style statements: the gradients of the 10-op tree (bench_autodiff's)
    ad = [be.array(rng.uniform(0.1, 1.0, (args.n, 1)).astype(np.float32)) for _ in range(4)]
    f = ((ad[0] * ad[1] + ad[2]) * ad[3] - ad[0] / (ad[1] + 1)) * be.exp(-ad[2] * ad[2]) + \
        be.sqrt(abs(ad[3]))
    grad_trees = Autodiff(f, be).get_grad_op_tree(ad)
    grads = [be.empty((args.n, 1)) for _ in ad]

    def gradients() -> None:
        for g, t in zip(grads, grad_trees):
            g[:] = t

    impls: dict = {"neonlike statement (tree built in it)": statement,
                   "neonlike: building the tree only": build,
                   "neonlike: o[:] = tree (tree built before)": assign,
                   "neonlike: Autodiff gradient statement": gradients}
    per_call = {"neonlike: Autodiff gradient statement": len(grad_trees)}
    checks = {"neonlike statement (tree built in it)": lambda: o.get()}
    peers, notes = _peers(host, expect)
    impls.update({k: v[0] for k, v in peers.items()})
    checks.update({k: v[1] for k, v in peers.items()})
    for name, fn in impls.items():             # first calls compile; then check the results
        for _ in range(3):
            fn()
    for name, get in checks.items():
        np.testing.assert_allclose(get(), expect, rtol=1e-5, atol=1e-6, err_msg=name)
    stats = getattr(engine, "stats", None)      # the engine's count of statements that walked
    walks = stats["walks"] if stats is not None else 0
    samples = timed_rounds(impls, args.rounds)
    walked = stats["walks"] - walks if stats is not None else None
    _report(samples, per_call, walked, args, notes)


def _engine() -> Any:
    try:
        from neonlike.backends.cpu.program import ENGINE
        return ENGINE
    except ImportError:
        return None


def _peers(host: Any, expect: Any) -> tuple:
    """{name: (call, result getter)} for numpy out=, numba and torch, and notes on the missing."""
    import numpy as np
    peers, notes = {}, []
    x, out = host.copy(), np.empty_like(host)

    def numpy_out() -> None:
        np.multiply(x, 2.0, out=out)
        np.add(out, 1.0, out=out)
        np.tanh(out, out=out)
        np.multiply(out, x, out=out)
        np.subtract(out, x, out=out)
    peers["numpy, ufuncs with out="] = (numpy_out, lambda: out)
    try:
        import numba

        @numba.njit(fastmath=True)
        def nb_stmt(s: Any, o: Any) -> None:
            for i in range(s.shape[0]):
                v = s[i, 0]
                o[i, 0] = np.tanh(v * np.float32(2.0) + np.float32(1.0)) * v - v
        nb_out = np.empty_like(host)
        peers["numba @njit, called directly"] = (lambda: nb_stmt(x, nb_out), lambda: nb_out)
    except ImportError:
        notes.append("numba is not installed: no numba row")
    try:
        import torch
        torch.set_num_threads(1)
        ts, to = torch.from_numpy(x), torch.from_numpy(np.empty_like(host))

        def torch_stmt() -> None:
            torch.sub(torch.tanh(ts * 2.0 + 1.0) * ts, ts, out=to)
        peers["torch (eager, out=, 1 thread)"] = (torch_stmt, lambda: to.numpy())
    except ImportError:
        notes.append("torch is not installed: no torch row")
    return peers, notes


def _report(samples: dict, per_call: dict, walked: Any, args: Any, notes: list) -> None:
    import numpy as np
    us = {k: [t * 1e6 / per_call.get(k, 1) for t in v] for k, v in samples.items()}
    med = {k: statistics.median(v) for k, v in us.items()}
    lead = "neonlike statement (tree built in it)"
    print(f"\nStatement cost, {args.n} float32 elements as ({args.n}, 1), {args.threads} threads, "
          f"medians of {args.rounds} rounds (garbage collector on); "
          f"{platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
          f"numpy {np.__version__}\n")
    print("| implementation | µs per statement | fastest-slowest round | this / neonlike statement |"
          " target |")
    print("|---|---|---|---|---|")
    for k, v in med.items():
        target = ""
        if k == lead:
            target = f"<= {TARGET_US:g} µs: {'met' if v <= TARGET_US else 'not met'}"
        print(f"| {k} | {v:.2f} | {min(us[k]):.2f}-{max(us[k]):.2f} | {v / med[lead]:.2f}x |"
              f" {target} |")
    if walked is not None:
        total = sum(len(v) for v in samples.values())
        print(f"\nStatements that took the engine's walk during the timed rounds: {walked} "
              f"(0: every statement ran on the fast path; {total} timed batches)")
    for n in notes:
        print(f"note: {n}")


if __name__ == "__main__":
    sys.exit(main())
