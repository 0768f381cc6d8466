"""Property tests: random op-trees against an independent numpy float64 oracle.

A strategy (`cases`) draws a *description* of an op-tree (nested tuples), the host data of its leaf
tensors, and the output's shape and dtype; it tracks every node's shape itself. `build()` turns a
description into a neonlike tree (Python operators and backend functions, chosen at random), and
`evaluate()` computes from the same description, with numpy float64 only (no neonlike code, no op
table), for every node:

* `v`: the float64 value of the formula, elementwise, and
* an enclosure [lo, hi] of every value a correct evaluation in the tree's compute dtype may give,
  with masks `nan` (surely nan) and `unk` (anything may come out, e.g. inf - inf when an input
  interval reaches inf: the element is not compared).

The tolerance follows from the compute dtype rule: float32, or float64 when the output or a tensor
leaf is float64/int32/uint32. With u = 2**-24 (float32) or 2**-53 (float64) and `tiny` the compute
dtype's smallest normal number:

* neg, abs, relu, sgn, rint, floor, ceil, minimum, maximum, comparisons, logical ops, max/min
  reductions and transpose are exact (a comparison of overlapping enclosures may give 0 or 1).
* + - * / sqrt sqr, sum and dot are exact where the result is (every operand is a multiple of 2**-q and
  the magnitudes keep the result within the compute dtype's mantissa, so no rounding happens in any
  order); otherwise each may add 2u relative + 2 tiny absolute (sum of n terms / dot over k:
  2n u * sum|x| or 2(k+1) u * sum|a||b|).
* exp, sig, sig2, tanh, tanh2, safelog, softplus, arctan, pow: 16u relative + 16 tiny absolute.
* a result beyond the compute dtype's largest finite value may be inf.

The stored output is checked against the store rule applied to both ends of the enclosure (float16:
round to nearest; integers: round half to even, saturate, nan -> 0). Both are monotone, so
store(lo) <= got <= store(hi): an integer output can differ by one from the stored float64 value
only where the enclosure straddles a .5 boundary, a float16 output by one ulp only where it straddles
a float16 rounding boundary. Exact enclosures (most integer and dyadic data) demand equality.
nan follows numpy: it propagates through arithmetic, minimum/maximum and max/min reductions,
compares unequal (so comparisons give 0, != gives 1) and counts as true in logical ops.

Properties: every subtree of a random tree (depth <= 6, operands 1-D to 4-D that broadcast, all
nine dtypes for leaves and outputs, Python and numpy scalar constants) matches the oracle, and so
does each op at the root of random trees (so that every op is reached in every run); an output that
aliases an input (t[:] = t * 2 + be.sum(t, axis=a) ...) sees the input's old values; a failed
execution (take with an out-of-range index) leaves the output untouched; str/pp/traverse/leaves of
random trees never fail and traverse() lists the leaves and ops in post-order.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import math
import operator
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from neonlike.backends import gen_backend
from neonlike.optree import OpTreeNode

# the numpy reference interpreter: these tests pin each op's semantics on thousands of one-off
# trees; test_fused_cpu.py runs every op fused against it (see conftest.cpu_engine)
CPU_ENGINE = "reference"

DTYPES = tuple(np.dtype(n) for n in ("float16", "float32", "float64", "int8", "int16", "int32",
                                      "uint8", "uint16", "uint32"))
WIDE = {np.dtype("float64"), np.dtype("int32"), np.dtype("uint32")}


def _gpu_here() -> bool:
    """Whether gen_backend('gpu') can be made (asked once, where pycuda is installed at all)."""
    if importlib.util.find_spec("pycuda") is None:
        return False
    try:
        gen_backend("gpu", rng_seed=0)
    except (ImportError, RuntimeError, NotImplementedError):
        return False
    return True


BACKENDS = [
    "cpu",
    pytest.param("mkl", marks=pytest.mark.skipif(importlib.util.find_spec("mkl") is None,
                                                 reason="mkl-service is not installed")),
    pytest.param("gpu", marks=pytest.mark.skipif(not _gpu_here(),
                                                 reason="no pycuda, CUDA driver or GPU here")),
]

INF, NAN = math.inf, math.nan
LN2 = math.log(2.0)
SAFELOG_MIN = math.exp(-50.0)
BIG = 1 << 20
MAX_DEPTH = 6
FLOAT_EDGES = (0.0, -0.0, 1e-30, -1e-30, 1e-40, 5e-324, 6e-8, 0.5, -0.5, 1.5, -2.5, 65504.0, 1e30,
               -1e30, 3e38, -3e38, 1e300, INF, -INF, NAN, NAN, NAN)
# leaf dtypes: every supported one, floats twice as often (they carry the fractions, nan and inf)
LEAF_DTYPES = DTYPES + tuple(np.dtype(n) for n in ("float16", "float32", "float64"))


# ================================================================ the numpy float64 oracle

class Fmt:
    """The compute dtype's rounding facts."""

    def __init__(self, dtype: Any) -> None:
        fi = np.finfo(dtype)
        self.dtype = np.dtype(dtype)
        self.p = fi.nmant + 1                  # significand bits
        self.u = 2.0 ** -self.p                # unit roundoff
        self.tiny = float(fi.tiny)             # smallest normal
        self.max = float(fi.max)
        self.qmax = fi.nmant - fi.minexp       # 2**-qmax is the smallest subnormal


F64 = Fmt(np.float64)


def lowbit(x: np.ndarray) -> np.ndarray:
    """q with x = odd integer * 2**-q, for finite non-zero x; -BIG for 0 and non-finite x."""
    x = np.asarray(x, dtype=np.float64)
    ok = np.isfinite(x) & (x != 0)
    m, e = np.frexp(np.where(ok, x, 1.0))
    mant = np.abs(np.ldexp(m, 53)).astype(np.int64)
    tz = np.log2((mant & -mant).astype(np.float64)).astype(np.int64)
    return np.where(ok, 53 - e.astype(np.int64) - tz, -BIG)


def representable(mag: np.ndarray, q: np.ndarray, fmt: Fmt) -> np.ndarray:
    """Whether every multiple of 2**-q of magnitude <= mag is a number of the format `fmt`."""
    q = np.asarray(q, dtype=np.int64)
    scaled = np.ldexp(np.asarray(mag, dtype=np.float64), np.clip(q, -4000, 4000))
    return (q <= fmt.qmax) & (scaled < 2.0 ** fmt.p) & (mag <= fmt.max)


class Iv:
    """The oracle of one node: float64 value `v`, enclosure [lo, hi], masks `nan` and `unk`."""

    __slots__ = ("v", "lo", "hi", "nan", "unk")

    def __init__(self, v: Any, lo: Any, hi: Any, nan: Any, unk: Any) -> None:
        v, lo, hi, nan, unk = (np.array(x) for x in np.broadcast_arrays(v, lo, hi, nan, unk))
        nan = nan.astype(bool)
        unk = unk.astype(bool) & ~nan
        self.v = v.astype(np.float64)
        self.lo = np.where(nan, NAN, np.where(unk, -INF, lo)).astype(np.float64)
        self.hi = np.where(nan, NAN, np.where(unk, INF, hi)).astype(np.float64)
        self.nan, self.unk = nan, unk

    @property
    def exact(self) -> np.ndarray:
        return self.lo == self.hi

    def truth(self) -> tuple:
        """(surely true, surely false) as logical ops see it: nonzero (nan too) is true."""
        sure_true = self.nan | ((self.lo > 0) | (self.hi < 0))
        sure_false = (self.lo == 0) & (self.hi == 0)
        return sure_true, sure_false


def _widen(lo: np.ndarray, hi: np.ndarray, k: float, fmt: Fmt,
           mlo: Any = None, mhi: Any = None) -> tuple:
    """Widen by k rounding errors (relative to mlo/mhi, |lo|/|hi| by default); overflow -> inf."""
    mlo = np.abs(lo) if mlo is None else mlo
    mhi = np.abs(hi) if mhi is None else mhi
    nlo = lo - k * (fmt.u * mlo + fmt.tiny)
    nhi = hi + k * (fmt.u * mhi + fmt.tiny)
    nlo = np.where(nlo < -fmt.max, -INF, np.where(nlo > fmt.max, fmt.max, nlo))
    nhi = np.where(nhi > fmt.max, INF, np.where(nhi < -fmt.max, -fmt.max, nhi))
    return np.where(np.isfinite(lo), nlo, lo), np.where(np.isfinite(hi), nhi, hi)


def _rounded(v: Any, lo: Any, hi: Any, nan: Any, unk: Any, exact: Any, k: float, fmt: Fmt,
             mlo: Any = None, mhi: Any = None) -> Iv:
    wlo, whi = _widen(lo, hi, k, fmt, mlo, mhi)
    return Iv(v, np.where(exact, lo, wlo), np.where(exact, hi, whi), nan, unk)


def i_leaf(values: np.ndarray) -> Iv:
    x = values.astype(np.float64)
    return Iv(x, x, x, np.isnan(x), False)


def i_const(c: Any, fmt: Fmt) -> Iv:
    x = float(c)
    with np.errstate(over="ignore"):
        xc = float(np.asarray(x).astype(fmt.dtype))    # the constant in the compute dtype
    return Iv(np.full((1, 1), x), min(x, xc), max(x, xc), False, False)


def i_mono(a: Iv, f: Any, k: float, fmt: Fmt) -> Iv:
    """A non-decreasing function, total on [-inf, inf] (nan in, nan out)."""
    return _rounded(f(a.v), f(a.lo), f(a.hi), a.nan, a.unk, k == 0, k, fmt)


def i_neg(a: Iv) -> Iv:
    return Iv(-a.v, -a.hi, -a.lo, a.nan, a.unk)


def i_abs(a: Iv) -> Iv:
    lo = np.where(a.lo >= 0, a.lo, np.where(a.hi <= 0, -a.hi, 0.0))
    return Iv(np.abs(a.v), np.abs(lo), np.maximum(np.abs(a.lo), np.abs(a.hi)), a.nan, a.unk)


def i_add(a: Iv, b: Iv, fmt: Fmt, sub: bool = False) -> Iv:
    blo, bhi = (-b.hi, -b.lo) if sub else (b.lo, b.hi)
    lo, hi = a.lo + blo, a.hi + bhi
    maybe_nan = ((a.hi == INF) & (blo == -INF)) | ((a.lo == -INF) & (bhi == INF))
    ex_in = a.exact & b.exact
    fin = np.isfinite(a.lo) & np.isfinite(b.lo)
    q = np.maximum(lowbit(a.lo), lowbit(b.lo))
    exact = ex_in & (~fin | representable(np.abs(a.lo) + np.abs(b.lo), q, fmt))
    return _rounded(a.v - b.v if sub else a.v + b.v, lo, hi,
                    a.nan | b.nan | (maybe_nan & ex_in), a.unk | b.unk | (maybe_nan & ~ex_in),
                    exact, 2, fmt)


def _has_zero(a: Iv) -> np.ndarray:
    return (a.lo <= 0) & (a.hi >= 0)


def _has_inf(a: Iv) -> np.ndarray:
    return np.isinf(a.lo) | np.isinf(a.hi)


def _corners(f: Any, a: Iv, b: Iv) -> tuple:
    c = [f(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return np.fmin.reduce(c), np.fmax.reduce(c)


def i_mul(a: Iv, b: Iv, fmt: Fmt, v: Any = None) -> Iv:
    lo, hi = _corners(np.multiply, a, b)
    maybe_nan = (_has_zero(a) & _has_inf(b)) | (_has_zero(b) & _has_inf(a))
    ex_in = a.exact & b.exact
    fin = np.isfinite(a.lo) & np.isfinite(b.lo)
    exact = ex_in & (~fin | representable(np.abs(a.lo * b.lo), lowbit(a.lo) + lowbit(b.lo), fmt))
    return _rounded(a.v * b.v if v is None else v, lo, hi,
                    a.nan | b.nan | (maybe_nan & ex_in), a.unk | b.unk | (maybe_nan & ~ex_in),
                    exact, 2, fmt)


def i_div(a: Iv, b: Iv, fmt: Fmt) -> Iv:
    lo, hi = _corners(np.divide, a, b)
    maybe_nan = _has_inf(a) & _has_inf(b)
    ex_in = a.exact & b.exact
    r = a.lo / b.lo
    fin = np.isfinite(a.lo) & np.isfinite(b.lo)
    exact_quotient = (representable(np.abs(r * b.lo), lowbit(r) + lowbit(b.lo), F64)
                      & (r * b.lo == a.lo) & representable(np.abs(r), lowbit(r), fmt))
    exact = ex_in & (~fin | exact_quotient)
    return _rounded(a.v / b.v, lo, hi, a.nan | b.nan | (maybe_nan & ex_in),
                    a.unk | b.unk | _has_zero(b) | (maybe_nan & ~ex_in), exact, 2, fmt)


def i_sqrt(a: Iv, fmt: Fmt) -> Iv:
    r = np.sqrt(np.maximum(a.lo, 0.0))
    exact_root = (representable(r * r, 2 * lowbit(r), F64) & (r * r == a.lo)
                  & representable(r, lowbit(r), fmt))
    exact = a.exact & (np.isinf(a.lo) | exact_root)
    return _rounded(np.sqrt(a.v), r, np.sqrt(a.hi), a.nan, a.unk | (a.lo < 0), exact, 2, fmt)


def i_pow(a: Iv, b: Iv, fmt: Fmt) -> Iv:
    """x ** p, p a constant in {2, 3, 0.5, 1.5} (0.5 and 1.5 on x >= 0); c ** x, c in {2, 0.5}."""
    v = np.power(a.v, b.v)
    if b.v.shape == (1, 1) and b.exact.all() and float(b.lo[0, 0]) in (2.0, 3.0, 0.5, 1.5):
        p = float(b.lo[0, 0])
        base = i_abs(a) if p == 2.0 else a
        bad = (base.lo < 0) if p in (0.5, 1.5) else False
        lo, hi = np.power(base.lo, p), np.power(base.hi, p)
        return _rounded(v, lo, hi, a.nan, a.unk | bad, False, 16, fmt)
    if a.v.shape == (1, 1) and a.exact.all() and float(a.lo[0, 0]) in (2.0, 0.5):
        c = float(a.lo[0, 0])
        lo, hi = np.power(c, b.lo), np.power(c, b.hi)
        if c < 1:
            lo, hi = hi, lo
        return _rounded(v, lo, hi, b.nan, b.unk, False, 16, fmt)
    raise AssertionError("the generator made a power the oracle does not model")


def i_minmax(a: Iv, b: Iv, f: Any) -> Iv:
    return Iv(f(a.v, b.v), f(a.lo, b.lo), f(a.hi, b.hi), a.nan | b.nan, a.unk | b.unk)


def _bool_iv(v: np.ndarray, sure_true: np.ndarray, sure_false: np.ndarray) -> Iv:
    """A 0/1 result: 1 where surely true, 0 where surely false, either elsewhere."""
    return Iv(v.astype(np.float64), np.where(sure_true, 1.0, 0.0),
              np.where(sure_false, 0.0, 1.0), False, False)


def i_compare(name: str, a: Iv, b: Iv) -> Iv:
    if name in ("gt", "ge"):                     # a > b is b < a, nan included
        return i_compare({"gt": "lt", "ge": "le"}[name], b, a)
    anynan = a.nan | b.nan
    known = ~anynan & ~a.unk & ~b.unk
    apart = (a.hi < b.lo) | (a.lo > b.hi)
    same = a.exact & b.exact & (a.lo == b.lo)
    if name == "lt":
        t, f, v = known & (a.hi < b.lo), anynan | (known & (a.lo >= b.hi)), np.less(a.v, b.v)
    elif name == "le":
        t, f, v = known & (a.hi <= b.lo), anynan | (known & (a.lo > b.hi)), np.less_equal(a.v, b.v)
    elif name == "eq":
        t, f, v = known & same, anynan | (known & apart), np.equal(a.v, b.v)
    else:  # ne
        t, f, v = anynan | (known & apart), known & same, np.not_equal(a.v, b.v)
    return _bool_iv(v, t, f)


def i_logical(name: str, a: Iv, b: Iv) -> Iv:
    ta, fa = a.truth()
    tb, fb = b.truth()
    if name == "and":
        return _bool_iv(np.logical_and(a.v, b.v), ta & tb, fa | fb)
    if name == "or":
        return _bool_iv(np.logical_or(a.v, b.v), ta | tb, fa & fb)
    known = (ta | fa) & (tb | fb)
    differ = ta != tb
    return _bool_iv(np.logical_xor(a.v, b.v), known & differ, known & ~differ)


def i_not(a: Iv) -> Iv:
    t, f = a.truth()
    return _bool_iv(np.logical_not(a.v), f, t)


def i_finite(a: Iv) -> Iv:
    t = ~a.nan & ~a.unk & np.isfinite(a.lo) & np.isfinite(a.hi)
    f = a.nan | (a.exact & np.isinf(a.lo))
    return _bool_iv(np.isfinite(a.v), t, f)


def i_sum(a: Iv, axes: tuple, fmt: Fmt) -> Iv:
    def red(x: np.ndarray, f: Any = np.sum) -> np.ndarray:
        return f(x, axis=axes, keepdims=True)
    n = math.prod(a.lo.shape[i] for i in axes)
    ex_el = a.exact
    inf_pos, inf_neg = ex_el & (a.lo == INF), ex_el & (a.lo == -INF)
    anyinf = red(inf_pos | inf_neg, np.any)
    nan = red(a.nan, np.any) | (red(inf_pos, np.any) & red(inf_neg, np.any))
    mag = red(np.where(inf_pos | inf_neg, 0.0, np.maximum(np.abs(a.lo), np.abs(a.hi))))
    unk = red(a.unk, np.any) | (mag * (1 + 2 * n * fmt.u) > fmt.max)   # partial sums may overflow
    q = red(np.where(ex_el, lowbit(a.lo), -BIG), np.max)
    exact = red(ex_el, np.all) & (anyinf | representable(mag, q, fmt))
    return _rounded(red(a.v), red(a.lo), red(a.hi), nan, unk, exact, 2 * n, fmt,
                    red(np.abs(a.lo)), red(np.abs(a.hi)))


def i_maxmin(a: Iv, axes: tuple, f: Any) -> Iv:
    def red(x: np.ndarray, g: Any = f) -> np.ndarray:
        return g(x, axis=axes, keepdims=True)
    return Iv(red(a.v), red(a.lo), red(a.hi), red(a.nan, np.any), red(a.unk, np.any))


def i_dot(a: Iv, b: Iv, fmt: Fmt) -> Iv:
    k = a.lo.shape[1]
    bad_a = ~(np.isfinite(a.lo) & np.isfinite(a.hi))
    bad_b = ~(np.isfinite(b.lo) & np.isfinite(b.hi))
    bad = bad_a.any(1)[:, None] | bad_b.any(0)[None, :]
    alo, ahi = np.where(bad_a, 0.0, a.lo)[:, :, None], np.where(bad_a, 0.0, a.hi)[:, :, None]
    blo, bhi = np.where(bad_b, 0.0, b.lo)[None], np.where(bad_b, 0.0, b.hi)[None]
    prods = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
    lo, hi = np.min(prods, axis=0).sum(1), np.max(prods, axis=0).sum(1)
    mag = (np.maximum(np.abs(alo), np.abs(ahi)) * np.maximum(np.abs(blo), np.abs(bhi))).sum(1)
    unk = bad | (mag * (1 + 2 * (k + 1) * fmt.u) > fmt.max)
    q = (np.where(a.exact, lowbit(a.lo), -BIG).max(1)[:, None]
         + np.where(b.exact, lowbit(b.lo), -BIG).max(0)[None, :])
    exact = a.exact.all(1)[:, None] & b.exact.all(0)[None, :] & representable(mag, q, fmt)
    return _rounded(a.v @ b.v, lo, hi, False, unk, exact, 2 * (k + 1), fmt, mag, mag)


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


MONOTONE = {  # name: (non-decreasing float64 formula, rounding errors allowed)
    "sig": (_sig, 16),
    "sig2": (lambda x: 1.0 / (1.0 + np.exp2(-x)), 16),
    "tanh": (np.tanh, 16),
    "tanh2": (lambda x: np.tanh(x * LN2), 16),
    "exp": (np.exp, 16),
    "safelog": (lambda x: np.log(np.maximum(x, SAFELOG_MIN)), 16),
    "softplus": (lambda x: np.logaddexp(0.0, x), 16),
    "atan": (np.arctan, 16),
    "relu": (lambda x: np.maximum(x, 0.0), 0),
    "sgn": (np.sign, 0),
    "rint": (np.rint, 0),
    "floor": (np.floor, 0),
    "ceil": (np.ceil, 0),
}


def evaluate(desc: tuple, leaf_values: list, fmt: Fmt) -> Iv:
    """The oracle of a description (see the module docstring)."""
    kind = desc[0]
    if kind == "leaf":
        return i_leaf(leaf_values[desc[1]])
    if kind == "const":
        return i_const(desc[1], fmt)
    if kind == "un":
        name, a = desc[1], evaluate(desc[3], leaf_values, fmt)
        if name in MONOTONE:
            return i_mono(a, *MONOTONE[name], fmt)
        return {"neg": i_neg, "abs": i_abs, "not": i_not, "finite": i_finite,
                "sqrt": lambda x: i_sqrt(x, fmt),
                "sqr": lambda x: i_mul(i_abs(x), i_abs(x), fmt, v=np.square(x.v))}[name](a)
    if kind == "bin":
        name = desc[1]
        a, b = evaluate(desc[3], leaf_values, fmt), evaluate(desc[4], leaf_values, fmt)
        if name in ("add", "sub"):
            return i_add(a, b, fmt, sub=name == "sub")
        if name in ("eq", "ne", "lt", "le", "gt", "ge"):
            return i_compare(name, a, b)
        if name in ("and", "or", "xor"):
            return i_logical(name, a, b)
        return {"mul": lambda: i_mul(a, b, fmt), "div": lambda: i_div(a, b, fmt),
                "pow": lambda: i_pow(a, b, fmt), "minimum": lambda: i_minmax(a, b, np.minimum),
                "maximum": lambda: i_minmax(a, b, np.maximum)}[name]()
    if kind == "red":
        name, axes, a = desc[1], desc[2], evaluate(desc[5], leaf_values, fmt)
        if name == "sum":
            return i_sum(a, axes, fmt)
        return i_maxmin(a, axes, np.max if name == "max" else np.min)
    if kind == "tr":
        perm, a = desc[1], evaluate(desc[3], leaf_values, fmt)
        return Iv(*(np.transpose(x, perm) for x in (a.v, a.lo, a.hi, a.nan, a.unk)))
    if kind == "dot":
        return i_dot(evaluate(desc[2], leaf_values, fmt), evaluate(desc[3], leaf_values, fmt), fmt)
    raise AssertionError(f"unknown description {kind!r}")


def store(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The store rule, written here: floats round to nearest; integers round half to even,
    saturate, and take nan as 0."""
    with np.errstate(all="ignore"):
        if dtype.kind == "f":
            return x.astype(dtype)
        info = np.iinfo(dtype)
        return np.clip(np.rint(np.where(np.isnan(x), 0.0, x)), info.min, info.max).astype(dtype)


KINDS_OF_DESC = {"leaf", "const", "un", "bin", "red", "tr", "dot", "take"}


def is_desc(d: Any) -> bool:
    return isinstance(d, tuple) and bool(d) and isinstance(d[0], str) and d[0] in KINDS_OF_DESC


def children(desc: tuple) -> list:
    return [] if desc[0] in ("leaf", "const") else [d for d in desc[1:] if is_desc(d)]


def subtrees(desc: tuple) -> Any:
    """Every op node of a description, the root first."""
    if desc[0] not in ("leaf", "const"):
        yield desc
        for d in children(desc):
            yield from subtrees(d)


def leaf_indices(desc: tuple) -> set:
    if desc[0] == "leaf":
        return {desc[1]}
    return set().union(*(leaf_indices(d) for d in children(desc)))


def depth(desc: tuple) -> int:
    return 0 if desc[0] in ("leaf", "const") else 1 + max(depth(d) for d in children(desc))


def compute_fmt(case: "Case", desc: tuple) -> Fmt:
    dtypes = {case.out_dtype} | {case.leaves[i].data.dtype for i in leaf_indices(desc)}
    return Fmt(np.float64 if dtypes & WIDE else np.float32)


# ================================================================ descriptions and the strategy

@dataclasses.dataclass
class LeafSpec:
    """A leaf tensor: host data, and how the tensor is made from it."""

    data: np.ndarray   # given to be.array with dtype=data.dtype
    how: str           # 'plain', 'from1d' (1-D data -> (n, 1)), 'T' (2-D .T view), 'step' ([::2])
    name: str

    @property
    def value(self) -> np.ndarray:
        d = self.data
        return {"plain": d, "from1d": d.reshape(-1, 1), "T": d.T, "step": d[::2]}[self.how]

    def make(self, be: Any) -> Any:
        t = be.array(self.data, dtype=self.data.dtype, name=self.name)
        if self.how == "T":
            return t.T
        if self.how == "step":
            return t[::2]
        return t


@dataclasses.dataclass
class Case:
    desc: tuple
    shape: tuple          # the tree's shape (predicted)
    leaves: list
    out_arg: tuple        # what be.empty / be.array is given ((n,) for 1-D host shapes)
    out_shape: tuple
    out_dtype: np.dtype
    alias: bool = False   # the output is leaves[0]


def make_values(seed: int, flavour: int, dtype: np.dtype, shape: tuple) -> np.ndarray:
    """Leaf data: small dyadic numbers (exact, with ties), flavour 1 adds arbitrary reals,
    flavours 2 and 3 edge values (0, -0.0, tiny, subnormal, huge, inf, nan, integer extremes)
    for 30% / 60% of the elements."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype.kind == "f":
        x = rng.integers(-12, 13, n) / rng.choice([1.0, 2.0, 4.0, 8.0], n)
        if flavour >= 1:
            x = np.where(rng.random(n) < 0.5, rng.uniform(-3, 3, n), x)
        if flavour >= 2:
            x = np.where(rng.random(n) < 0.3 * (flavour - 1), rng.choice(FLOAT_EDGES, n), x)
        with np.errstate(over="ignore"):
            x = x.astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -6), min(info.max, 12) + 1, n)
        if flavour >= 2:
            x = np.where(rng.random(n) < 0.25, rng.choice([info.min, info.max, 0]), x)
        x = x.astype(dtype)
    return x.reshape(shape)


def pick(seq: Any) -> st.SearchStrategy:
    """An element of seq, near-uniformly (sampled_from follows the draws before it too closely to
    reach every op in 100 examples); shrinks to the first element."""
    seq = tuple(seq)
    return st.integers(0, 2**16).map(lambda i: seq[i % len(seq)])


def fits(shape: tuple, target: tuple, mode: str) -> bool:
    """Whether a node of `shape` may stand where `target` is asked for in `mode`:
    'exact' (equal), 'ndim' (same ndim, broadcasts) or 'bcast' (broadcasts to target)."""
    if mode == "exact":
        return shape == target
    if len(shape) > len(target) or (mode == "ndim" and len(shape) != len(target)):
        return False
    return all(d in (1, t) for d, t in zip(shape[::-1], target[::-1]))


def broadcast(sa: tuple, sb: tuple) -> tuple:
    n = max(len(sa), len(sb))
    pa, pb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    assert all(x == y or 1 in (x, y) for x, y in zip(pa, pb)), (sa, sb)
    return tuple(max(x, y) for x, y in zip(pa, pb))


CONSTANTS = st.one_of(
    st.integers(-3, 4),
    st.sampled_from([0.5, -1.25, 0.1, 2.0, 1e-3, 3.0, -0.0, 0.0, 2.5]),
    st.booleans(),
    st.builds(lambda t, x: t(x), st.sampled_from([np.float16, np.float32, np.float64]),
              st.sampled_from([0.5, -2.0, 0.1, 1.5, 3.0, 0.0])),
    st.builds(lambda t, x: t(x), st.sampled_from([np.int8, np.int16, np.int32, np.uint8,
                                                  np.uint16, np.uint32]), st.integers(0, 5)),
    st.builds(np.array, st.sampled_from([1.5, -2.0, 3, 0.25])),          # 0-d arrays
)

UNARY_FNS = {
    "neg": ("negative",), "abs": ("absolute", "fabs"), "sqr": ("square",), "sqrt": ("sqrt",),
    "sig": ("sig", "sigmoid"), "sig2": ("sig2",), "tanh": ("tanh",), "tanh2": ("tanh2",),
    "exp": ("exp",), "safelog": ("safelog",), "softplus": ("softplus",), "relu": ("relu",),
    "sgn": ("sgn", "sign"), "rint": ("rint",), "floor": ("floor",), "ceil": ("ceil",),
    "atan": ("arctan", "atan"), "finite": ("finite", "isfinite"), "not": ("logical_not",),
}
UNARY_OPS = {"neg": operator.neg, "abs": abs, "not": operator.invert}
BINARY_FNS = {
    "add": ("add",), "sub": ("subtract",), "mul": ("multiply",), "div": ("divide", "true_divide"),
    "pow": ("power",), "eq": ("equal",), "ne": ("not_equal",), "lt": ("less",),
    "le": ("less_equal",), "gt": ("greater",), "ge": ("greater_equal",), "minimum": ("minimum",),
    "maximum": ("maximum",), "and": ("logical_and",), "or": ("logical_or",),
    "xor": ("logical_xor",),
}
BINARY_OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "pow": operator.pow, "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
    "le": operator.le, "gt": operator.gt, "ge": operator.ge, "and": operator.and_,
    "or": operator.or_, "xor": operator.xor,
}
REFLECTED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
# the kinds of inner nodes; repeated entries weigh more (leaves end a branch early 1 time in 8)
NODE_KINDS = ("un", "arith", "cmp", "red", "un", "arith", "logic", "tr", "dot", "div", "pow",
              "arith", "un", "red", "cmp")
UNARY_NAMES = tuple(UNARY_FNS)
FOCUS_KINDS = {**{n: "un" for n in UNARY_NAMES},
               **{n: "arith" for n in ("add", "sub", "mul", "minimum", "maximum")},
               **{n: "cmp" for n in ("eq", "ne", "lt", "le", "gt", "ge")},
               **{n: "logic" for n in ("and", "or", "xor")},
               **{n: "red" for n in ("sum", "max", "min")},
               "div": "div", "pow": "pow", "transpose": "tr", "dot": "dot"}


class _Gen:
    """Draws a description whose node shapes fit a target shape (see `fits`)."""

    def __init__(self, draw: Any, focus: str | None = None) -> None:
        self.draw = draw
        self.leaves: list[LeafSpec] = []
        self.focus = focus      # the op the root must be, if any

    # ------------------------------------------------------------ leaves and constants
    def new_leaf(self, shape: tuple, dtype: Any = None, how: str | None = None) -> tuple:
        draw = self.draw
        dtype = draw(pick(LEAF_DTYPES)) if dtype is None else np.dtype(dtype)
        if how is None:
            hows = ["plain", "step"]
            if len(shape) == 2:
                hows.append("T")
                if shape[1] == 1:
                    hows.append("from1d")
            how = draw(st.sampled_from(hows))
        base = {"plain": shape, "from1d": shape[:1], "T": shape[::-1],
                "step": (2 * shape[0],) + shape[1:]}[how]
        data = make_values(draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from([0, 1, 2, 3])),
                           dtype, base)
        self.leaves.append(LeafSpec(data, how, f"leaf{len(self.leaves)}"))
        return ("leaf", len(self.leaves) - 1), shape

    def leaf(self, target: tuple, mode: str) -> tuple:
        draw = self.draw
        reuse = [i for i, spec in enumerate(self.leaves) if fits(spec.value.shape, target, mode)]
        if reuse and draw(st.integers(0, 3)) == 3:
            i = draw(st.sampled_from(reuse))
            return ("leaf", i), self.leaves[i].value.shape
        if mode == "exact":
            shape = target
        else:
            drop = draw(st.integers(0, len(target) - 2)) if mode == "bcast" else 0
            shape = tuple(1 if draw(st.integers(0, 3)) == 3 else d for d in target[drop:])
        return self.new_leaf(shape)

    # ------------------------------------------------------------ inner nodes
    def node(self, target: tuple, mode: str, r: int, root: bool = False) -> tuple:
        """(description, shape) of a node of depth <= r fitting (target, mode)."""
        draw = self.draw
        const_ok = fits((1, 1), target, mode) and not root
        name = self.focus if root else None
        if name is not None:
            kind = FOCUS_KINDS[name]
        elif r == 0 or (not root and draw(st.integers(0, 7)) == 7):
            kind = "const" if const_ok and draw(st.integers(0, 3)) == 3 else "leaf"
        else:
            kind = draw(pick(NODE_KINDS))
        if kind == "const" and not const_ok:
            kind = "leaf" if not root else "un"
        if kind == "dot" and len(target) != 2:
            kind = "arith"
        if kind == "red" and mode == "exact" and 1 not in target:
            kind = "un"
        if kind in ("div", "pow") and r < 3:
            kind = "arith"
        if kind == "leaf":
            return self.leaf(target, mode)
        if kind == "const":
            return ("const", draw(CONSTANTS)), (1, 1)
        return getattr(self, "node_" + kind)(target, mode, r, name)

    def _form(self, name: str, operands: list, op_table: dict, fn_table: dict) -> str:
        """'op' (a Python operator) or a backend function name; operators need a non-constant."""
        choices = list(fn_table[name])
        if name in op_table and any(d[0] != "const" for d in operands):
            choices.insert(0, "op")
        return self.draw(st.sampled_from(choices))

    def _unary(self, name: str, child: tuple) -> tuple:
        return ("un", name, self._form(name, [child], UNARY_OPS, UNARY_FNS), child)

    def node_un(self, target: tuple, mode: str, r: int, name: str | None = None) -> tuple:
        name = self.draw(pick(UNARY_NAMES)) if name is None else name
        if name == "sqrt":                       # sqrt(abs(x)): two levels
            if r < 2:
                name = "tanh"
            else:
                child, shape = self.node(target, mode, r - 2)
                return self._unary("sqrt", self._unary("abs", child)), shape
        child, shape = self.node(target, mode, r - 1)
        return self._unary(name, child), shape

    def _two(self, target: tuple, mode: str, r: int) -> tuple:
        """Two operands fitting the target; in 'exact'/'ndim' mode one of them carries the mode."""
        modes = ["bcast", "bcast"]
        if mode != "bcast":
            modes[self.draw(st.integers(0, 1))] = mode
        a, sa = self.node(target, modes[0], r - 1)
        b, sb = self.node(target, modes[1], r - 1)
        return a, b, broadcast(sa, sb)

    def _binary(self, name: str, a: tuple, b: tuple) -> tuple:
        return ("bin", name, self._form(name, [a, b], BINARY_OPS, BINARY_FNS), a, b)

    def _bin_kind(self, names: list, target: tuple, mode: str, r: int, name: Any) -> tuple:
        name = self.draw(pick(names)) if name is None else name
        a, b, shape = self._two(target, mode, r)
        return self._binary(name, a, b), shape

    def node_arith(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        return self._bin_kind(["add", "sub", "mul", "minimum", "maximum"], target, mode, r, name)

    def node_cmp(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        return self._bin_kind(["eq", "ne", "lt", "le", "gt", "ge"], target, mode, r, name)

    def node_logic(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        return self._bin_kind(["and", "or", "xor"], target, mode, r, name)

    def node_div(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        """a / (|b| + c): the denominator stays away from zero."""
        draw = self.draw
        modes = ["bcast", "bcast"]
        if mode != "bcast":
            modes[draw(st.integers(0, 1))] = mode
        a, sa = self.node(target, modes[0], r - 1)
        b, sb = self.node(target, modes[1], r - 3)
        c = ("const", draw(st.sampled_from([1, 0.5, 2.0, np.float32(1.5)])))
        absb = self._unary("abs", b)
        den = self._binary("add", *((absb, c) if draw(st.booleans()) else (c, absb)))
        return self._binary("div", a, den), broadcast(sa, sb)

    def node_pow(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        draw = self.draw
        variant = draw(pick(["int", "frac", "base"]))
        if variant == "int":
            x, shape = self.node(target, mode, r - 1)
            p = draw(st.sampled_from([2, 3, 2.0, np.int8(2)]))
            return self._binary("pow", x, ("const", p)), shape
        if variant == "frac":
            x, shape = self.node(target, mode, r - 2)
            p = draw(st.sampled_from([0.5, 1.5, np.float32(0.5)]))
            return self._binary("pow", self._unary("abs", x), ("const", p)), shape
        x, shape = self.node(target, mode, r - 1)
        return self._binary("pow", ("const", draw(st.sampled_from([2, 0.5, 2.0]))), x), shape

    def node_red(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        draw = self.draw
        n = len(target)
        allowed = [i for i in range(n) if mode != "exact" or target[i] == 1]
        picked = [i for i in allowed if draw(st.booleans())] or [draw(st.sampled_from(allowed))]
        child_target = tuple(draw(st.integers(1, 4)) if i in picked else d
                             for i, d in enumerate(target))
        child, cs = self.node(child_target, mode, r - 1)
        off = n - len(cs)
        axes = {i - off for i in picked if i - off >= 0}
        for j in range(len(cs)):
            if j not in axes and (mode != "exact" or cs[j] == 1) and draw(st.integers(0, 3)) == 3:
                axes.add(j)
        if not axes:
            axes.add(draw(st.integers(0, len(cs) - 1)))
        axes = tuple(sorted(axes))
        shape = tuple(1 if j in axes else d for j, d in enumerate(cs))
        assert fits(shape, target, mode), (shape, target, mode)
        # how the axes are written: None, an int or a tuple, negative or not, in any order
        if len(axes) == len(cs) and draw(st.booleans()):
            spec: Any = None
        elif len(axes) == 1 and draw(st.booleans()):
            spec = axes[0] - (len(cs) if draw(st.booleans()) else 0)
        else:
            spec = tuple(a - (len(cs) if draw(st.booleans()) else 0)
                         for a in draw(st.permutations(axes)))
        name = draw(pick(["sum", "max", "min"])) if name is None else name
        keepdims = draw(st.sampled_from(["default", True]))
        return ("red", name, axes, spec, keepdims, child), shape

    def node_tr(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        draw = self.draw
        n = len(target)
        form = draw(st.sampled_from(["axes", "default"] + (["T", "method"] if n == 2 else [])))
        perm = (tuple(draw(st.permutations(range(n)))) if form == "axes"
                else tuple(reversed(range(n))))
        child_target = [0] * n
        for i, p in enumerate(perm):
            child_target[p] = target[i]
        child, cs = self.node(tuple(child_target), "exact" if mode == "exact" else "ndim", r - 1)
        if form in ("T", "method") and child[0] in ("leaf", "const"):
            form = "default"                     # Tensor.T is a view, not an op; numbers have no .T
        return ("tr", perm, form, child), tuple(cs[p] for p in perm)

    def node_dot(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        draw = self.draw
        m, n = target
        if mode != "exact":
            m = 1 if draw(st.integers(0, 3)) == 3 else m
            n = 1 if draw(st.integers(0, 3)) == 3 else n
        k = draw(st.integers(1, 4))
        a, _ = self.node((m, k), "exact", r - 1)
        b, _ = self.node((k, n), "exact", r - 1)
        form = "op" if any(d[0] != "const" for d in (a, b)) and draw(st.booleans()) else "fn"
        return ("dot", form, a, b), (m, n)


@st.composite
def out_shapes(draw: Any) -> tuple:
    """(argument to be.empty, tensor shape): 2-D to 4-D, or 1-D host shapes that become (n, 1)."""
    if draw(st.integers(0, 5)) == 5:
        n = draw(st.integers(1, 5))
        return (n,), (n, 1)
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=2, max_size=4)))
    return shape, shape


@st.composite
def cases(draw: Any, kind: str = "plain", focus: str | None = None) -> Case:
    """A random tree description with leaves and an output.

    kind 'plain': any tree (whose root is the op `focus`, if given); 'alias': out[:] = out * 2 +
    sum(out, axis) (+ a random tree that may read out again); 'failing': a random tree combined
    with a take whose indices are out of range.
    """
    out_arg, out_shape = draw(out_shapes())
    if focus == "dot" and len(out_shape) != 2:
        out_arg = out_shape = out_shape[-2:] if len(out_shape) > 2 else (out_shape[0], 1)
    out_dtype = draw(pick(DTYPES))
    gen = _Gen(draw, focus)
    alias = kind == "alias" or (kind == "failing" and draw(st.booleans()))
    if alias:
        gen.new_leaf(out_shape, out_dtype, "from1d" if len(out_arg) == 1 else "plain")
    r = 1 + draw(st.integers(0, 2**16)) % MAX_DEPTH     # (near-)uniform depth budget
    if focus is not None:
        r = max(r, 3)                                    # div, pow and sqrt need 3 and 2 levels
    if kind == "plain":
        desc, shape = gen.node(out_shape, "bcast", r, root=True)
    elif kind == "alias":
        t = ("leaf", 0)
        axis = draw(st.integers(0, len(out_shape) - 1))
        spec = axis - (len(out_shape) if draw(st.booleans()) else 0)
        twice = gen._binary("mul", t, ("const", draw(st.sampled_from([2, 2.0, np.float32(2)]))))
        summed = ("red", "sum", (axis,), spec, "default", t)
        desc = gen._binary("add", twice, summed)
        if draw(st.booleans()):
            extra, _ = gen.node(out_shape, "bcast", draw(st.integers(1, MAX_DEPTH - 1)))
            desc = gen._binary(draw(st.sampled_from(["add", "mul", "maximum", "lt"])), desc, extra)
        shape = out_shape
    else:
        desc, shape = failing_tree(draw, gen, out_shape, r)
    assert fits(shape, out_shape, "bcast")
    assert depth(desc) <= MAX_DEPTH
    return Case(desc, shape, gen.leaves, out_arg, out_shape, out_dtype, alias)


def failing_tree(draw: Any, gen: _Gen, out_shape: tuple, r: int) -> tuple:
    """A random tree with a take of out-of-range indices somewhere near the root."""
    other, so = gen.node(out_shape, "bcast", max(r - 2, 0))
    drop = draw(st.integers(0, len(out_shape) - 2))
    result = tuple(1 if draw(st.integers(0, 3)) == 3 else d for d in out_shape[drop:])
    axis = draw(st.integers(0, len(result) - 1))
    size = draw(st.integers(1, 4))
    src, _ = gen.new_leaf(result[:axis] + (size,) + result[axis + 1:])
    n = result[axis]
    indices = draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n))
    bad = draw(st.sampled_from([size, size + 3, -size - 1, 1000]))
    indices[draw(st.integers(0, n - 1))] = bad
    take: tuple = ("take", src, tuple(indices), axis, draw(st.sampled_from(["take", "gather"])))
    if draw(st.booleans()):
        take = gen._unary(draw(st.sampled_from(["neg", "tanh", "abs"])), take)
    name = draw(st.sampled_from(["add", "mul", "lt", "maximum"]))
    desc = gen._binary(name, *((other, take) if draw(st.booleans()) else (take, other)))
    return desc, broadcast(so, result)


# ================================================================ building the neonlike tree

class OpName(str):
    """An op's name in the expected post-order (told apart from constants and tensors)."""


def build(desc: tuple, be: Any, tensors: list) -> tuple:
    """(neonlike object, expected post-order list of leaves and OpNames) of a description."""
    kind = desc[0]
    if kind == "leaf":
        t = tensors[desc[1]]
        return t, [t]
    if kind == "const":
        return desc[1], [desc[1]]
    if kind == "un":
        name, form = desc[1], desc[2]
        x, sx = build(desc[3], be, tensors)
        obj = UNARY_OPS[name](x) if form == "op" else getattr(be, form)(x)
        return obj, sx + [OpName(name)]
    if kind == "bin":
        name, form = desc[1], desc[2]
        (a, sa), (b, sb) = build(desc[3], be, tensors), build(desc[4], be, tensors)
        if form != "op":
            return getattr(be, form)(a, b), sa + sb + [OpName(name)]
        obj = BINARY_OPS[name](a, b)
        if desc[3][0] == "const" and name in REFLECTED:   # Python asks the right operand: swapped
            return obj, sb + sa + [OpName(REFLECTED[name])]
        return obj, sa + sb + [OpName(name)]
    if kind == "red":
        name, _, spec, keepdims, child = desc[1:]
        x, sx = build(child, be, tensors)
        kwargs = {} if keepdims == "default" else {"keepdims": keepdims}
        return getattr(be, name)(x, axis=spec, **kwargs), sx + [OpName(name)]
    if kind == "tr":
        perm, form, child = desc[1:]
        x, sx = build(child, be, tensors)
        obj = {"axes": lambda: be.transpose(x, axes=perm), "default": lambda: be.transpose(x),
               "T": lambda: x.T, "method": lambda: x.transpose()}[form]()
        return obj, sx + [OpName("transpose")]
    if kind == "dot":
        (a, sa), (b, sb) = build(desc[2], be, tensors), build(desc[3], be, tensors)
        return (a @ b if desc[1] == "op" else be.dot(a, b)), sa + sb + [OpName("dot")]
    if kind == "take":
        x, sx = build(desc[1], be, tensors)
        return getattr(be, desc[4])(x, list(desc[2]), axis=desc[3]), sx + [OpName("take")]
    raise AssertionError(kind)


def backend(name: str) -> Any:
    return gen_backend(name, rng_seed=0)


def make_tensors(case: Case, be: Any) -> list:
    tensors = [spec.make(be) for spec in case.leaves]
    for spec, t in zip(case.leaves, tensors):
        assert t.shape == spec.value.shape and t.dtype == spec.data.dtype
    return tensors


def describe(desc: tuple) -> str:
    kind = desc[0]
    if kind == "leaf":
        return f"L{desc[1]}"
    if kind == "const":
        return f"{type(desc[1]).__name__}({desc[1]!r})"
    parts = [describe(d) for d in children(desc)]
    attrs = [repr(d) for d in desc[1:] if not is_desc(d)]
    return f"{kind}[{','.join(attrs)}]({', '.join(parts)})"


def check_against_oracle(got: np.ndarray, iv: Iv, out_dtype: np.dtype, context: str) -> None:
    """got (the stored output) against store(lo) <= got <= store(hi); nan -> nan (floats) or 0."""
    shape = got.shape
    v, lo, hi = (np.broadcast_to(x, shape) for x in (iv.v, iv.lo, iv.hi))
    nan, unk = np.broadcast_to(iv.nan, shape), np.broadcast_to(iv.unk, shape)
    known = ~nan & ~unk
    # self-check of the oracle: the float64 value lies in its own enclosure
    assert np.all(~known | ((lo <= v) & (v <= hi))), f"oracle self-check failed\n{context}"
    assert np.all(~nan | np.isnan(v)), f"oracle self-check (nan) failed\n{context}"
    elo, ehi = store(lo, out_dtype).astype(np.float64), store(hi, out_dtype).astype(np.float64)
    g = got.astype(np.float64)
    nan_ok = np.isnan(g) if out_dtype.kind == "f" else g == 0
    ok = unk | np.where(nan, nan_ok, (elo <= g) & (g <= ehi))
    if not ok.all():
        bad = np.argwhere(~ok)[:6]
        rows = "\n".join(
            f"  at {tuple(int(i) for i in ix)}: got {got[tuple(ix)]!r}, float64 value "
            f"{v[tuple(ix)]!r} (stored {store(v[tuple(ix)], out_dtype)!r}), allowed "
            f"[{elo[tuple(ix)]!r}, {ehi[tuple(ix)]!r}]{' (nan)' if nan[tuple(ix)] else ''}"
            for ix in bad)
        raise AssertionError(f"{int((~ok).sum())} of {ok.size} elements differ from the numpy "
                             f"float64 oracle:\n{rows}\n{context}")
    event(f"elements not compared: {'none' if not unk.any() else 'all' if unk.all() else 'some'}")


def _context(case: Case, desc: tuple, tree: Any, fmt: Fmt) -> str:
    return (f"tree: {describe(desc)}\npp: {tree.pp() if isinstance(tree, OpTreeNode) else tree!r}"
            f"\nout: {case.out_arg} {case.out_dtype}, compute dtype {fmt.dtype}")


# ================================================================ the properties

def check_every_subtree(backend_name: str, case: Case) -> None:
    """The whole tree into an output of the drawn shape and dtype, then every inner subtree into
    an output of its own shape (so that no op's error hides behind a comparison or a rint)."""
    be = backend(backend_name)
    tensors = make_tensors(case, be)
    leaf_values = [spec.value for spec in case.leaves]
    for i, sub in enumerate(subtrees(case.desc)):
        tree, _ = build(sub, be, tensors)
        fmt = compute_fmt(case, sub)
        context = _context(case, sub, tree, fmt)
        with np.errstate(all="ignore"):
            iv = evaluate(sub, leaf_values, fmt)
        assert tuple(tree.shape) == iv.lo.shape, context
        if i == 0:
            note(context)
            assert tuple(tree.shape) == case.shape
            out = be.empty(case.out_arg, dtype=case.out_dtype)
            assert out.shape == case.out_shape
        else:
            out = be.empty(tree.shape, dtype=case.out_dtype)
        out[:] = tree
        got = out.get()
        assert got.dtype == case.out_dtype and got.shape == out.shape
        check_against_oracle(got, iv, case.out_dtype, context)
    # the leaves are only read
    for spec, t in zip(case.leaves, tensors):
        np.testing.assert_array_equal(t.get(), spec.value)


@pytest.mark.parametrize("backend_name", BACKENDS)
@given(case=cases("plain"))
def test_random_tree_matches_numpy_float64(backend_name: str, case: Case) -> None:
    check_every_subtree(backend_name, case)


# every op at the root of random trees, a tenth of the profile's examples each (10 by default)
@pytest.mark.parametrize("focus", sorted(FOCUS_KINDS))
@pytest.mark.parametrize("backend_name", BACKENDS)
@settings(max_examples=max(5, settings().max_examples // 10))
@given(data=st.data())
def test_each_op_at_the_root_of_random_trees(backend_name: str, focus: str, data: Any) -> None:
    check_every_subtree(backend_name, data.draw(cases("plain", focus=focus), label="case"))


@pytest.mark.parametrize("backend_name", BACKENDS)
@given(case=cases("alias"))
def test_output_aliasing_an_input(backend_name: str, case: Case) -> None:
    """t[:] = t * 2 + be.sum(t, axis=a) [op a random tree reading t again] sees t's old values."""
    be = backend(backend_name)
    tensors = make_tensors(case, be)
    t = tensors[0]
    tree, _ = build(case.desc, be, tensors)
    fmt = compute_fmt(case, case.desc)
    with np.errstate(all="ignore"):
        iv = evaluate(case.desc, [spec.value for spec in case.leaves], fmt)
    t[:] = tree
    check_against_oracle(t.get(), iv, case.out_dtype, _context(case, case.desc, tree, fmt))


@pytest.mark.parametrize("backend_name", BACKENDS)
@given(case=cases("failing"))
def test_failed_execution_leaves_output_untouched(backend_name: str, case: Case) -> None:
    be = backend(backend_name)
    tensors = make_tensors(case, be)
    tree, _ = build(case.desc, be, tensors)
    if case.alias:
        out = tensors[0]
    else:
        init = make_values(7, 2, case.out_dtype, case.out_arg)
        out = be.array(init, dtype=case.out_dtype)
    before = out.get()
    with pytest.raises((IndexError, ValueError)):
        out[:] = tree
    assert out.get().tobytes() == before.tobytes(), (
        f"the output changed although execution failed\ntree: {describe(case.desc)}")
    for spec, t in zip(case.leaves, tensors):
        assert t.get().tobytes() == np.ascontiguousarray(spec.value).tobytes()


@given(case=cases("plain"))
def test_str_pp_traverse_of_random_trees(case: Case) -> None:
    be = backend("cpu")
    tensors = make_tensors(case, be)
    tree, expected = build(case.desc, be, tensors)
    assert isinstance(tree, OpTreeNode)
    text, infix = str(tree), tree.pp()
    assert repr(tree) == text
    stack = tree.traverse([])
    n_ops = sum(isinstance(x, OpName) for x in expected)
    assert len(stack) == len(expected) == (len(expected) - n_ops) + n_ops
    assert sum(isinstance(x, dict) for x in stack) == n_ops
    assert stack[-1] is tree[0]
    for got, exp in zip(stack, expected):
        if isinstance(exp, OpName):
            assert isinstance(got, dict) and got["op"] == exp, (got, exp)
        elif isinstance(exp, (int, float, np.generic, np.ndarray)):
            assert not isinstance(got, (dict, OpTreeNode)) and float(got) == float(exp), (got, exp)
        else:
            assert got is exp, (got, exp)
    # leaves(): the tensors, in post-order, each once
    unique: dict = {}
    for x in expected:
        if not isinstance(x, (OpName, int, float, np.generic, np.ndarray)):
            unique.setdefault(id(x), x)
    assert [id(x) for x in tree.leaves()] == list(unique)
    # every named tensor shows in str() and pp()
    for x in unique.values():
        if x.name is not None:
            assert x.name in text and x.name in infix
    assert tuple(tree[0]["shape"]) == case.shape


# ================================================================ edge values: first run = later runs
# The properties above pin the reference interpreter against the float64 oracle. This one pins the
# compiled kernels against the reference (issue 13, point 8): a random tree over leaves full of
# signed zeros, subnormals, inf and nan runs twice on the fused CPU engine with jit_after=2, once
# interpreted (the reference) and once compiled, and both give the reference's bits, -0.0 told
# from +0.0 and nan positions included. The trees hold the ops that numpy and the kernels round
# the same way (IEEE + - * / sqrt, comparisons, min/max, rint/floor/ceil, ...; max/min
# reductions), so equal bits are the rule; half of them get one op of APPROX_UNARY at the root,
# where the two implementations may differ by EDGE_ULPS ulps (see tests/test_edge_values.py) but
# nan, inf, zero and signs still agree. Sums and dots are left out: their rounding follows the
# order of the additions, which the kernels choose.
# numpy's max/min over several axes at once may walk them in memory order, or reduce a long
# contiguous run with SIMD lanes, and then the sign of a zero result is not its fold's (the last
# zero's, which the kernels give): for such trees the sign of a zero is not compared.

EXACT_UNARY = ("neg", "abs", "sqr", "sqrt", "relu", "sgn", "rint", "floor", "ceil", "finite", "not")
APPROX_UNARY = ("sig", "sig2", "tanh", "tanh2", "exp", "safelog", "softplus", "atan")
EDGE_ULPS = {np.dtype(np.float32): 4, np.dtype(np.float64): 2}
EDGE_VALUES = FLOAT_EDGES + (-0.0, -0.0, 1e-45, -1e-45, 1e-39, -1.1e-38, 2.0 ** -140, 1e-310,
                             -1e-310, -88.8, -88.7, -100.0, -128.0, -149.5, 88.8, 710.0, -745.5)


def edge_values(seed: int, dtype: np.dtype, shape: tuple) -> np.ndarray:
    """Leaf data: half edge values, half small dyadic numbers (ties for rint, equal values)."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype.kind != "f":
        return make_values(seed, 3, dtype, shape)
    x = rng.integers(-6, 7, n) / rng.choice([1.0, 2.0, 4.0], n)
    x = np.where(rng.random(n) < 0.5, rng.choice(EDGE_VALUES, n), x)
    with np.errstate(over="ignore"):
        return x.astype(dtype).reshape(shape)


class _EdgeGen(_Gen):
    """Trees of the ops numpy and the kernels round alike, over leaves of edge values."""

    def new_leaf(self, shape: tuple, dtype: Any = None, how: str | None = None) -> tuple:
        desc, shape = super().new_leaf(shape, dtype, how)
        spec = self.leaves[-1]
        spec.data = edge_values(self.draw(st.integers(0, 2**32 - 1)), spec.data.dtype,
                                spec.data.shape)
        return desc, shape

    def node_un(self, target: tuple, mode: str, r: int, name: str | None = None) -> tuple:
        return super().node_un(target, mode, r, self.draw(pick(EXACT_UNARY)) if name is None
                               else name)

    def node_red(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        return super().node_red(target, mode, r, self.draw(pick(["max", "min"])))

    def node_dot(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        return self.node_arith(target, mode, r)

    def node_pow(self, target: tuple, mode: str, r: int, name: Any = None) -> tuple:
        return self.node_arith(target, mode, r)


@st.composite
def edge_cases(draw: Any) -> Case:
    out_arg, out_shape = draw(out_shapes())
    gen = _EdgeGen(draw)
    r = 1 + draw(st.integers(0, 2**16)) % (MAX_DEPTH - 1)
    desc, shape = gen.node(out_shape, "bcast", r, root=True)
    approx = draw(st.booleans())
    if approx:
        desc = gen._unary(draw(pick(APPROX_UNARY)), desc)
    out_dtype = draw(pick(("float32", "float64") if approx else DTYPES))
    return Case(desc, shape, gen.leaves, out_arg, out_shape, np.dtype(out_dtype))


def _nodes(desc: tuple) -> Any:
    yield desc
    for d in children(desc):
        yield from _nodes(d)


def assert_same_bits(got: np.ndarray, want: np.ndarray, ulps: int, zero_sign: bool,
                     context: str) -> None:
    """Equal values, nan where nan, the sign of every zero (unless not zero_sign); finite
    non-zero floats of one sign may be `ulps` apart."""
    assert got.dtype == want.dtype and got.shape == want.shape, context
    if got.dtype.kind != "f":
        assert np.array_equal(got, want), f"{got} != {want}\n{context}"
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    gn, wn = np.isnan(g), np.isnan(w)
    ok = (gn == wn) & (np.isinf(g) == np.isinf(w)) & ((g == 0) == (w == 0))
    sign = np.signbit(g) == np.signbit(w)
    ok &= gn | sign | ((g == 0) & (not zero_sign))
    close = gn | (g == w)
    if ulps:
        bits = np.dtype(f"i{got.dtype.itemsize}")
        gi, wi = (x.view(bits).astype(np.int64) for x in (got, want))
        close |= ~gn & (np.abs(gi - wi) <= ulps)
    ok &= close
    if not ok.all():
        bad = np.argwhere(~ok)[:6]
        rows = "\n".join(f"  at {tuple(int(i) for i in ix)}: got {got[tuple(ix)]!r}, "
                         f"want {want[tuple(ix)]!r}" for ix in bad)
        raise AssertionError(f"{int((~ok).sum())} of {ok.size} elements differ\n{rows}\n{context}")


@settings(max_examples=max(10, settings().max_examples // 4))
@given(case=edge_cases())
def test_edge_value_trees_first_and_later_runs_agree_bit_for_bit(case: Case) -> None:
    pytest.importorskip("numba")
    from neonlike.backends import reference
    from neonlike.backends.cpu import device as nervanacpu
    from neonlike.backends.cpu import program as fused_cpu
    engine = fused_cpu.ENGINE
    saved, saved_after = nervanacpu._FUSED[:], engine.jit_after
    nervanacpu._FUSED[:], engine.jit_after = [engine], 2
    try:
        be = backend("cpu")
        tensors = make_tensors(case, be)
        tree, _ = build(case.desc, be, tensors)
        out = be.empty(case.out_arg, dtype=case.out_dtype)
        want = be.empty(case.out_arg, dtype=case.out_dtype)
        with np.errstate(all="ignore"):
            want._store(reference.evaluate(tree, reference.tree_dtype(out, tree)))
            before = engine.stats["interpreted"]
            out[:] = tree
            first = out.get()
            out[:] = build(case.desc, be, tensors)[0]
            second = out.get()
    finally:
        nervanacpu._FUSED[:], engine.jit_after = saved, saved_after
    fmt = compute_fmt(case, case.desc)
    context = _context(case, case.desc, tree, fmt)
    note(context)
    interpreted = engine.stats["interpreted"] - before
    event(f"first run interpreted: {bool(interpreted)}")
    # an approximate op anywhere in the tree (its error passes through min, max, + and * of
    # values of its size): the compiled runs get its tolerance
    approx = any(d[0] == "un" and d[1] in APPROX_UNARY for d in _nodes(case.desc))
    zero_sign = not any(d[0] == "red" and len(d[2]) > 1 for d in _nodes(case.desc))
    event(f"approximate op in the tree: {approx}; zero signs compared: {zero_sign}")
    # the first run is compiled where an earlier example compiled the same structure: then it
    # gets the compiled run's tolerance
    ulps = 0 if interpreted or not approx else EDGE_ULPS[fmt.dtype]
    assert_same_bits(first, want.get(), ulps, True if interpreted else zero_sign,
                     "first run\n" + context)
    assert_same_bits(second, want.get(), EDGE_ULPS[fmt.dtype] if approx else 0, zero_sign,
                     "second (compiled) run\n" + context)
