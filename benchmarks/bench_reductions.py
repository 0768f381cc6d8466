"""Softmax and reductions: softmax over axis 0 of (1000, 4096), sum over axis 0 and 1, var over 1.

    python benchmarks/bench_reductions.py --quick      # 1e6 and 1e7 elements (the copy ceiling too)

neon's Softmax transform verbatim, and `out[:] = be.sum(x, axis=...)` / `be.var(...)` at each size,
against numpy as written, numpy with out=, numexpr, a hand-written numba kernel and torch; see
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
F0, F1 = np.float32(0.0), np.float32(1.0)
COLS = 128  # column block of the axis-0 kernels


def nb_softmax0(x, o):
    rows, cols = x.shape
    for blk in prange((cols + COLS - 1) // COLS):
        c0 = blk * COLS
        c1 = min(c0 + COLS, cols)
        w = c1 - c0
        m = x[0, c0:c1].copy()
        for r in range(1, rows):
            row = x[r, c0:c1]
            for c in range(w):
                m[c] = max(m[c], row[c])
        s = np.zeros(w, np.float32)
        for r in range(rows):
            row, orow = x[r, c0:c1], o[r, c0:c1]
            for c in range(w):
                e = np.exp(row[c] - m[c])
                orow[c] = e
                s[c] += e
        for c in range(w):
            s[c] = F1 / s[c]
        for r in range(rows):
            orow = o[r, c0:c1]
            for c in range(w):
                orow[c] *= s[c]


def nb_sum0(x, o):
    rows, cols = x.shape
    for blk in prange((cols + COLS - 1) // COLS):
        c0 = blk * COLS
        c1 = min(c0 + COLS, cols)
        acc = x[0, c0:c1].copy()
        for r in range(1, rows):
            row = x[r, c0:c1]
            for c in range(c1 - c0):
                acc[c] += row[c]
        o[c0:c1] = acc


def nb_sum1(x, o):
    rows, cols = x.shape
    for r in prange(rows):
        s = F0
        for c in range(cols):
            s += x[r, c]
        o[r] = s


def nb_var1(x, o):
    rows, cols = x.shape
    inv = F1 / np.float32(cols)
    for r in prange(rows):
        s = F0
        for c in range(cols):
            s += x[r, c]
        m = s * inv
        q = F0
        for c in range(cols):
            d = x[r, c] - m
            q += d * d
        o[r] = q * inv


def softmax(suite: Suite, n: int = 0) -> Bench:
    """neon's Softmax transform over axis 0 of a (1000, 4096) matrix."""
    be, shape = suite.be, (1000, 4096)
    x = suite.data(shape, -4, 4)
    xn, o_nl = be.array(x), be.empty(shape)

    def neon() -> Any:  # neon's Softmax transform, verbatim
        o_nl[:] = (be.reciprocal(be.sum(be.exp(xn - be.max(xn, axis=0)), axis=0))
                   * be.exp(xn - be.max(xn, axis=0)))
        return o_nl

    def naive(m, x):
        e = m.exp(x - x.max(axis=0, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)

    o, mx, sm = np.empty(shape, np.float32), np.empty((1, 4096), np.float32), \
        np.empty((1, 4096), np.float32)

    def out_eq():
        np.max(x, axis=0, keepdims=True, out=mx)
        np.subtract(x, mx, out=o)
        np.exp(o, out=o)
        np.sum(o, axis=0, keepdims=True, out=sm)
        return np.divide(o, sm, out=o)

    impls: dict[str, Callable] = {"neonlike": neon, "numpy": lambda: naive(np, x),
                                  "numpy out=": out_eq}
    if suite.p.ne:
        ne, o_ne = suite.p.ne, np.empty(shape, np.float32)

        def numexpr():
            m = x.max(axis=0, keepdims=True)
            ne.evaluate("exp(x - m)", local_dict={"x": x, "m": m}, out=o_ne)
            s = ne.evaluate("sum(e, axis=0)", local_dict={"e": o_ne}).reshape(1, -1)
            return ne.evaluate("e / s", local_dict={"e": o_ne, "s": s}, out=o_ne)
        impls["numexpr"] = numexpr
    o_nb = np.empty(shape, np.float32)
    nb = suite.p.numba_best(nb_softmax0, x, o_nb)
    if nb:
        impls["numba"] = lambda: nb() or o_nb
    if suite.p.torch:
        xt, ot, th = suite.p.t(x), suite.p.t(np.empty(shape, np.float32)), suite.p.torch
        impls["torch"] = lambda: th.softmax(xt, 0, out=ot)
    return Bench("softmax", "softmax over axis 0, (1000, 4096)", x.size, impls,
                 lambda: naive(np, x.astype(np.float64)), atol=1e-6, nbytes=2 * x.nbytes,
                 targets=[Target("vs", 3, "numpy"), Target("vs", 1.0, "torch")])


def reduction(suite: Suite, case: str, label: str, n: int, axis: int, kind: str) -> Bench:
    """`out[:] = be.sum(x, axis)` (kind 'sum') or `be.var(x, axis)` ('var') on shape2d(n)."""
    be = suite.be
    shape = shape2d(n)
    x = suite.data(shape, 0, 1)
    oshape = (1, shape[1]) if axis == 0 else (shape[0], 1)
    xn, o_nl = be.array(x), be.empty(oshape)
    o = np.empty(oshape, np.float32)
    if kind == "sum":
        def neon() -> Any:
            o_nl[:] = be.sum(xn, axis=axis)
            return o_nl

        def naive(m, x):
            return x.sum(axis=axis)

        def out_eq():
            return np.sum(x, axis=axis, keepdims=True, out=o)
        ne_expr = f"sum(x, axis={axis})"
    else:
        tmp = np.empty(shape, np.float32)

        def neon() -> Any:
            o_nl[:] = be.var(xn, axis=axis)
            return o_nl

        def naive(m, x):
            return x.var(axis=axis)

        def out_eq():
            np.mean(x, axis=axis, keepdims=True, out=o)
            np.subtract(x, o, out=tmp)
            np.square(tmp, out=tmp)
            return np.mean(tmp, axis=axis, keepdims=True, out=o)
        ne_expr = f"sum((x - m)**2, axis={axis})"
    impls: dict[str, Callable] = {"neonlike": neon, "numpy": lambda: naive(np, x),
                                  "numpy out=": out_eq}
    if suite.p.ne:
        ne = suite.p.ne
        if kind == "sum":
            impls["numexpr"] = lambda: ne.evaluate(ne_expr, local_dict={"x": x})
        else:
            inv = np.float32(1.0 / shape[axis])

            def numexpr():
                m = x.mean(axis=axis, keepdims=True)
                return ne.evaluate(ne_expr, local_dict={"x": x, "m": m}) * inv
            impls["numexpr"] = numexpr
    o_nb = np.empty(oshape, np.float32)
    nb = suite.p.numba_best(KERNELS[kind, axis], x, o_nb.reshape(-1))
    if nb:
        impls["numba"] = lambda: nb() or o_nb
    if suite.p.torch:
        xt, ot, th = suite.p.t(x), suite.p.t(np.empty(oshape, np.float32)), suite.p.torch
        if kind == "sum":
            impls["torch"] = lambda: th.sum(xt, axis, keepdim=True, out=ot)
        else:
            impls["torch"] = lambda: th.var(xt, axis, correction=0, keepdim=True, out=ot)
    targets = [Target("vs", 3, "numpy"), Target("vs", 1.0, "torch")] if x.size >= 1_000_000 \
        else []
    return Bench(case, f"{label}, {shape}", x.size, impls,
                 lambda: naive(np, x.astype(np.float64)), rtol=1e-3, atol=1e-5,
                 nbytes=x.nbytes + o.nbytes, targets=targets)


def sum0(suite: Suite, n: int) -> Bench:
    return reduction(suite, "sum0", "sum over axis 0", n, 0, "sum")


def sum1(suite: Suite, n: int) -> Bench:
    return reduction(suite, "sum1", "sum over axis 1", n, 1, "sum")


def var1(suite: Suite, n: int) -> Bench:
    return reduction(suite, "var1", "var over axis 1", n, 1, "var")


KERNELS = {("sum", 0): nb_sum0, ("sum", 1): nb_sum1, ("var", 1): nb_var1}
CASES = {"softmax": Case(softmax, ceiling_n=1000 * 4096), "sum0": Case(sum0, sized=True),
         "sum1": Case(sum1, sized=True), "var1": Case(var1, sized=True)}

if __name__ == "__main__":
    sys.exit(_runner.run([sys.modules[__name__]], "bench_reductions.py", __doc__.split("\n")[0]))
