"""Elementwise trees at each size: logistic, x0*x0 + x0*x1, tanh(x0*x1 + x0/x1), the 10-op tree.

    python benchmarks/bench_elementwise.py --quick     # 1e6 and 1e7 elements (the copy ceiling too)

Each case is `out[:] = tree` in neonlike (the tree built inside the timed call) against numpy as
written, numpy with ufunc out=, numexpr, a hand-written numba kernel and torch; see
benchmarks/README.md (bench_cpu.py runs these with the other families).
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import _harness  # noqa: F401  first: pins the thread pools before numpy loads

import numpy as np  # noqa: E402

import _runner  # noqa: E402
from _harness import Bench, Case, Suite, Target, prange, shape2d  # noqa: E402

# Hand-written numba kernels (module level: numba freezes the float32 globals as constants)
F1 = np.float32(1.0)


def nb_logistic(x, o):
    for i in prange(x.size):
        o[i] = F1 / (F1 + np.exp(-x[i]))


def nb_muladd(x0, x1, o):
    for i in prange(x0.size):
        a = x0[i]
        o[i] = a * a + a * x1[i]


def nb_tanh(x0, x1, o):
    for i in prange(x0.size):
        a, b = x0[i], x1[i]
        o[i] = np.tanh(a * b + a / b)


def nb_10op(a, b, c, d, o):
    for i in prange(a.size):
        ai, bi, ci, di = a[i], b[i], c[i], d[i]
        o[i] = ((ai * bi + ci) * di - ai / (bi + F1)) * np.exp(-ci * ci) + np.sqrt(np.abs(di))


def elementwise(s: Suite, case: str, label: str, n: int, ranges: list, nl: Callable,
                naive: Callable, out_eq: Callable, ne_expr: str | None, ne_names: Any,
                ne_const: dict, kernel: Callable, torch_fn: Callable | None, targets: list,
                shape: tuple | None = None) -> Bench:
    """A Bench of `out[:] = tree` on inputs drawn from `ranges`, with every peer's version."""
    be = s.be
    shape = shape or shape2d(n)
    xs = [s.data(shape, lo, hi) for lo, hi in ranges]
    nls = [be.array(x) for x in xs]
    o_nl = be.empty(shape)
    o, tmp = np.empty(shape, np.float32), np.empty(shape, np.float32)

    def neon() -> Any:
        o_nl[:] = nl(be, *nls)
        return o_nl

    impls: dict[str, Callable] = {"neonlike": neon,
                                  "numpy": lambda: naive(np, *xs),
                                  "numpy out=": lambda: out_eq(*xs, o, tmp)}
    if s.p.ne and ne_expr:
        local = dict(zip(ne_names, xs))
        local.update(ne_const)
        ne = s.p.ne
        o_ne = np.empty(shape, np.float32)
        impls["numexpr"] = lambda: ne.evaluate(ne_expr, local_dict=local, out=o_ne)
    flat = [x.reshape(-1) for x in xs]
    o_nb = np.empty(shape, np.float32)
    nb = s.p.numba_best(kernel, *flat, o_nb.reshape(-1))
    if nb:
        impls["numba"] = lambda: nb() or o_nb
    if s.p.torch and torch_fn:
        ts = [s.p.t(x) for x in xs]
        ot = s.p.t(np.empty(shape, np.float32))
        th = s.p.torch
        impls["torch"] = lambda: torch_fn(th, *ts, ot)
    x64 = [x.astype(np.float64) for x in xs]
    return Bench(case, label, o.size, impls, lambda: naive(np, *x64),
                 nbytes=(len(xs) + 1) * o.nbytes, targets=targets)


def bw_targets(n: int, at_1e6: list[Target] | None = None) -> list[Target]:
    if n >= 10_000_000:
        return [Target("ceiling", 0.95)]
    if n >= 1_000_000:
        return at_1e6 if at_1e6 is not None else [Target("gbps", 45)]
    return []


def logistic(s: Suite, n: int) -> Bench:
    def out_eq(x, o, tmp):
        np.negative(x, out=o)
        np.exp(o, out=o)
        np.add(o, 1, out=o)
        return np.reciprocal(o, out=o)
    return elementwise(
        s, "logistic", "logistic 1/(1+exp(-x))", n, [(-5, 5)],
        lambda be, x: 1 / (1 + be.exp(-x)), lambda m, x: 1 / (1 + m.exp(-x)), out_eq,
        "1/(1+exp(-x))", ["x"], {}, nb_logistic, lambda th, x, o: th.sigmoid(x, out=o),
        bw_targets(n) + ([Target("vs", 1.0, "torch")] if n >= 1_000_000 else []))


def muladd(s: Suite, n: int) -> Bench:
    def out_eq(x0, x1, o, tmp):
        np.multiply(x0, x0, out=o)
        np.multiply(x0, x1, out=tmp)
        return np.add(o, tmp, out=o)
    return elementwise(
        s, "muladd", "x0*x0 + x0*x1", n, [(-1, 1), (-1, 1)],
        lambda be, x0, x1: x0 * x0 + x0 * x1, lambda m, x0, x1: x0 * x0 + x0 * x1, out_eq,
        "x0*x0 + x0*x1", ["x0", "x1"], {}, nb_muladd,
        lambda th, x0, x1, o: th.add(x0 * x0, x0 * x1, out=o), bw_targets(n))


def tanh(s: Suite, n: int) -> Bench:
    def out_eq(x0, x1, o, tmp):
        np.multiply(x0, x1, out=o)
        np.divide(x0, x1, out=tmp)
        np.add(o, tmp, out=o)
        return np.tanh(o, out=o)
    return elementwise(
        s, "tanh", "tanh(x0*x1 + x0/x1)", n, [(-1, 1), (0.5, 1.5)],
        lambda be, x0, x1: be.tanh(x0 * x1 + x0 / x1),
        lambda m, x0, x1: m.tanh(x0 * x1 + x0 / x1), out_eq,
        "tanh(x0*x1 + x0/x1)", ["x0", "x1"], {}, nb_tanh,
        lambda th, x0, x1, o: th.tanh(x0 * x1 + x0 / x1, out=o), bw_targets(n))


def tenop(s: Suite, n: int) -> Bench:
    def out_eq(a, b, c, d, o, tmp):
        np.multiply(a, b, out=o)
        np.add(o, c, out=o)
        np.multiply(o, d, out=o)
        np.add(b, 1, out=tmp)
        np.divide(a, tmp, out=tmp)
        np.subtract(o, tmp, out=o)
        np.multiply(c, c, out=tmp)
        np.negative(tmp, out=tmp)
        np.exp(tmp, out=tmp)
        np.multiply(o, tmp, out=o)
        np.abs(d, out=tmp)
        np.sqrt(tmp, out=tmp)
        return np.add(o, tmp, out=o)

    def tree(m, a, b, c, d):
        return ((a * b + c) * d - a / (b + 1)) * m.exp(-c * c) + m.sqrt(abs(d))

    def torch_fn(th, a, b, c, d, o):
        return th.add(((a * b + c) * d - a / (b + 1)) * th.exp(-c * c),
                      th.sqrt(th.abs(d)), out=o)
    at_1e6 = [Target("gbps", 40), Target("vs", 5, "numpy out="), Target("vs", 10, "numexpr"),
              Target("vs", 1.0, "torch")]
    return elementwise(
        s, "10op", "10-op ((a*b+c)*d - a/(b+1))*exp(-c*c) + sqrt(abs(d))", n,
        [(-1, 1), (0, 1), (-1, 1), (-1, 1)], tree, tree, out_eq,
        "((a*b+c)*d - a/(b+1)) * exp(-c*c) + sqrt(abs(d))", "abcd", {}, nb_10op, torch_fn,
        bw_targets(n, at_1e6))


CASES = {"logistic": Case(logistic, sized=True), "muladd": Case(muladd, sized=True),
         "tanh": Case(tanh, sized=True), "10op": Case(tenop, sized=True)}

if __name__ == "__main__":
    sys.exit(_runner.run([sys.modules[__name__]], "bench_elementwise.py", __doc__.split("\n")[0]))
