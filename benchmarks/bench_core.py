"""Baseline timings of the core engine (reference-interpreter CPU path) against numpy.

Run: NEONLIKE_FUSE=0 python benchmarks/bench_core.py   (the interpreter; a markdown table of medians)

Measures, in one process, side by side:
- the per-statement cost of `o[:] = be.tanh(s*2.0 + 1.0)*s - s` on 100 elements, tree building
  included, against the same expression in numpy (naive and with out=);
- logistic `1/(1+exp(-x))` at 1e6 float32 elements, neonlike against numpy naive and numpy out=.
"""
from __future__ import annotations

import statistics
import timeit

import numpy as np

from neonlike.backends import gen_backend


def median_seconds(fn, number: int, repeat: int = 7) -> float:
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    be = gen_backend("cpu", rng_seed=0)
    rows = []

    s_np = np.random.default_rng(0).uniform(-1, 1, (100, 1)).astype(np.float32)
    s, o = be.array(s_np), be.empty((100, 1))
    o_np, tmp = np.empty_like(s_np), np.empty_like(s_np)

    def nl_stmt():
        o[:] = be.tanh(s * 2.0 + 1.0) * s - s

    def np_naive():
        o_np[:] = np.tanh(s_np * 2.0 + 1.0) * s_np - s_np

    def np_out():
        np.multiply(s_np, 2.0, out=tmp)
        np.add(tmp, 1.0, out=tmp)
        np.tanh(tmp, out=tmp)
        np.multiply(tmp, s_np, out=tmp)
        np.subtract(tmp, s_np, out=o_np)

    t = {k: median_seconds(f, 2000) for k, f in
         (("neonlike", nl_stmt), ("numpy", np_naive), ("numpy out=", np_out))}
    rows.append(("statement, 100 elements", t))

    x_np = np.random.default_rng(1).uniform(-5, 5, (1000, 1000)).astype(np.float32)
    x, y = be.array(x_np), be.empty((1000, 1000))
    y_np = np.empty_like(x_np)

    def nl_logistic():
        y[:] = 1 / (1 + be.exp(-x))

    def np_logistic():
        y_np[:] = 1 / (1 + np.exp(-x_np))

    def np_logistic_out():
        np.negative(x_np, out=y_np)
        np.exp(y_np, out=y_np)
        np.add(y_np, 1, out=y_np)
        np.reciprocal(y_np, out=y_np)

    t = {k: median_seconds(f, 20) for k, f in
         (("neonlike", nl_logistic), ("numpy", np_logistic), ("numpy out=", np_logistic_out))}
    rows.append(("logistic, 1e6 float32", t))

    print("| case | neonlike | numpy | numpy out= | neonlike / numpy | neonlike / numpy out= |")
    print("|---|---|---|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t['neonlike'] * 1e6:.1f} µs | {t['numpy'] * 1e6:.1f} µs | "
              f"{t['numpy out='] * 1e6:.1f} µs | {t['neonlike'] / t['numpy']:.2f}x | "
              f"{t['neonlike'] / t['numpy out=']:.2f}x |")


if __name__ == "__main__":
    main()
