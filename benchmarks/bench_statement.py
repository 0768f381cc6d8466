"""The statement cost: `o[:] = be.tanh(s*2.0 + 1.0)*s - s` on 100 elements, building included.

    python benchmarks/bench_statement.py

Against numpy as written, numpy with out=, numexpr, a hand-written numba kernel and torch; the
target is 3 µs a statement (issue 12; bench_statement_cost.py breaks it down). See
benchmarks/README.md (bench_cpu.py runs it with the other families, as the row `stmt100`).
"""
from __future__ import annotations

import sys

import _harness  # noqa: F401  first: pins the thread pools before numpy loads

import numpy as np  # noqa: E402

import _runner  # noqa: E402
from _harness import Bench, Case, Suite, Target, prange  # noqa: E402
from bench_elementwise import elementwise  # noqa: E402

# A hand-written numba kernel (module level: numba freezes the float32 globals as constants)
F1, F2 = np.float32(1.0), np.float32(2.0)


def nb_stmt(s, o):
    for i in prange(s.size):
        v = s[i]
        o[i] = np.tanh(v * F2 + F1) * v - v


def stmt100(suite: Suite, n: int = 100) -> Bench:
    def out_eq(s, o, tmp):
        np.multiply(s, 2.0, out=o)
        np.add(o, 1.0, out=o)
        np.tanh(o, out=o)
        np.multiply(o, s, out=o)
        return np.subtract(o, s, out=o)
    b = elementwise(
        suite, "stmt100", "statement o[:] = be.tanh(s*2.0 + 1.0)*s - s, 100 elements", 100,
        [(-1, 1)], lambda be, s: be.tanh(s * 2.0 + 1.0) * s - s,
        lambda m, s: m.tanh(s * 2.0 + 1.0) * s - s, out_eq,
        "tanh(s*two + one)*s - s", ["s"], {"two": np.float32(2), "one": np.float32(1)}, nb_stmt,
        lambda th, s, o: th.sub(th.tanh(s * 2.0 + 1.0) * s, s, out=o),
        [Target("max", 3e-6)], shape=(100, 1))
    b.nbytes = None
    b.size = "(100, 1)"
    return b


CASES = {"stmt100": Case(stmt100)}

if __name__ == "__main__":
    sys.exit(_runner.run([sys.modules[__name__]], "bench_statement.py", __doc__.split("\n")[0]))
