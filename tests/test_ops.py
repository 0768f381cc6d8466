"""Every op of neonlike's table, on every backend, checked against numpy float64.

The expected values are numpy float64 formulas written here (never the library's own reference);
they are rounded with the store rule of the output's dtype before comparing.
The elementwise tests are driven by the backend function names that `OP_INFO` generates, so an
op added to the table without a formula in EXPECTED makes `test_every_generated_name_has_a_formula`
fail.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from neonlike.ops import OP_INFO, Kind

# the numpy reference interpreter: these tests pin each op's semantics on thousands of one-off
# trees; test_fused_cpu.py runs every op fused against it (see conftest.cpu_engine)
CPU_ENGINE = "reference"

# ---------------------------------------------------------------- inputs

EDGE = np.array([0.0, -0.0, 1e-30, 1e-40, -1e-30, 1e30, 3e38, -3e38, np.inf, -np.inf, np.nan,
                 0.5, -0.5, 1.0, -1.0, 2.5, 100.0, -100.0])
INT_EDGE = {
    "int8": np.array([0, 1, -1, 2, -2, 3, 5, -5, 7, 100, -100, 127, -128]),
    "uint8": np.array([0, 1, 2, 3, 5, 7, 100, 200, 255]),
    "int32": np.array([0, 1, -1, 2, -2, 3, 5, -5, 7, 100, -100, 65536, 2**31 - 1, -2**31]),
}
FLOAT_DTYPES = ["float32", "float64", "float16"]
INT_DTYPES = ["int8", "uint8", "int32"]


def random_values(dtype: str, shape: tuple, seed: int = 0) -> np.ndarray:
    """Random inputs already representable in `dtype` (integer-valued for integer dtypes)."""
    r = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return (r.normal(0.0, 2.0, shape)).astype(dtype)
    info = np.iinfo(dtype)
    return r.integers(max(info.min, -20), min(info.max, 20), shape, endpoint=True).astype(dtype)


# ---------------------------------------------------------------- the oracle

def _f(cond):
    return np.asarray(cond, dtype=np.float64)


def _softplus(x):
    return np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(np.minimum(x, 0))))


# backend function name -> numpy float64 formula (x, or x and y, already float64)
EXPECTED = {
    "negative": lambda x: -x,
    "absolute": np.abs, "fabs": np.abs, "abs": np.abs,
    "sign": np.sign, "sgn": np.sign,
    "sqrt": np.sqrt,
    "square": lambda x: x * x,
    "exp": np.exp, "log": np.log,
    "exp2": lambda x: 2.0 ** x, "log2": lambda x: np.log(x) / np.log(2),
    "sig": lambda x: 1 / (1 + np.exp(-x)), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "sig2": lambda x: 1 / (1 + 2.0 ** -x),
    "tanh": np.tanh,
    "tanh2": lambda x: np.tanh(x * math.log(2)),
    "safelog": lambda x: np.log(np.maximum(x, math.exp(-50))),
    "finite": lambda x: _f(np.isfinite(x)), "isfinite": lambda x: _f(np.isfinite(x)),
    "rint": np.rint, "ceil": np.ceil, "floor": np.floor,
    "reciprocal": lambda x: 1 / x,
    "relu": lambda x: np.maximum(x, 0.0),
    "softplus": _softplus,
    "logical_not": lambda x: _f(x == 0),
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "arcsin": np.arcsin, "asin": np.arcsin, "arccos": np.arccos, "acos": np.arccos,
    "arctan": np.arctan, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh,
    "arcsinh": np.arcsinh, "asinh": np.arcsinh, "arccosh": np.arccosh, "acosh": np.arccosh,
    "arctanh": np.arctanh, "atanh": np.arctanh,
    "add": lambda x, y: x + y,
    "subtract": lambda x, y: x - y,
    "multiply": lambda x, y: x * y,
    "divide": lambda x, y: x / y, "true_divide": lambda x, y: x / y,
    "power": lambda x, y: x ** y,
    "equal": lambda x, y: _f(x == y), "not_equal": lambda x, y: _f(x != y),
    "less": lambda x, y: _f(x < y), "less_equal": lambda x, y: _f(x <= y),
    "greater": lambda x, y: _f(x > y), "greater_equal": lambda x, y: _f(x >= y),
    "minimum": np.minimum, "maximum": np.maximum,
    "logical_and": lambda x, y: _f((x != 0) & (y != 0)),
    "logical_or": lambda x, y: _f((x != 0) | (y != 0)),
    "logical_xor": lambda x, y: _f((x != 0) != (y != 0)),
}

GENERATED = [(name, info.arity) for op, info in OP_INFO.items()
             if info.kind is Kind.ELEMENTWISE for name in info.names]
GENERATED_IDS = [name for name, _ in GENERATED]


def oracle(fn, *args):
    with np.errstate(all="ignore"):
        return np.asarray(fn(*(np.asarray(a, dtype=np.float64) for a in args)), dtype=np.float64)


def store(values, dtype) -> np.ndarray:
    """The store rule written out: floats round; integers round half-even, saturate, nan -> 0."""
    dtype = np.dtype(dtype)
    values = np.asarray(values, dtype=np.float64)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            return values.astype(dtype)
    info = np.iinfo(dtype)
    values = np.where(np.isnan(values), 0.0, values)
    return np.clip(np.rint(values), info.min, info.max).astype(dtype)


def assert_close(actual, expected64, dtype, compute=None, atol=None):
    """`actual` (read back from a tensor of `dtype`) against the float64 oracle.

    compute: the tree's compute dtype (float32 unless a float64/int32/uint32 is involved).
    """
    dtype = np.dtype(dtype)
    assert actual.dtype == dtype
    expected = store(expected64, dtype)
    assert actual.shape == expected.shape
    if dtype.kind != "f":
        np.testing.assert_array_equal(actual, expected)
        return
    if dtype == np.float16:
        rtol, atol = 1e-3, 1e-7
    elif dtype == np.float64 and np.dtype(compute or dtype) == np.float64:
        rtol, atol = 1e-12, 1e-300
    else:
        rtol, atol = 1e-5, 1e-37 if atol is None else atol
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


def run(be, tree, dtype=None) -> np.ndarray:
    """Assign `tree` to a new tensor of its shape and read it back."""
    out = be.empty(tree.shape, dtype=dtype)
    out[:] = tree
    return out.get()


def call(be_or_np, name, *args, **kwargs):
    return getattr(be_or_np, name)(*args, **kwargs)


# ---------------------------------------------------------------- 1. elementwise table ops

def test_every_generated_name_has_a_formula():
    missing = [name for name in GENERATED_IDS if name not in EXPECTED]
    assert not missing, f"ops in OP_INFO with no expected formula in this file: {missing}"


def test_every_formula_name_is_a_backend_function(be):
    """Every name given a formula here (numpy's and neon's) is a backend function from the table."""
    missing = [name for name in EXPECTED if not callable(getattr(be, name, None))]
    assert not missing
    assert set(EXPECTED) <= set(GENERATED_IDS)


def _unary_inputs(kind, dtype):
    if np.dtype(dtype).kind != "f":
        return INT_EDGE[dtype] if kind == "edge" else random_values(dtype, (4, 6))
    return EDGE if kind == "edge" else random_values(dtype, (4, 6))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES)
@pytest.mark.parametrize("name, arity", GENERATED, ids=GENERATED_IDS)
def test_elementwise(be, name, arity, dtype):
    """Edge values (every pair for binary ops: a column against a row) and random values."""
    fn = EXPECTED.get(name)
    if fn is None:
        pytest.fail(f"no expected formula for {name!r}")
    compute = np.float64 if dtype in ("float64", "int32") else np.float32
    for kind in ("edge", "random"):
        host = _unary_inputs(kind, dtype)
        x = be.array(host, dtype=dtype)
        xs = store(host, dtype)                          # what the tensor holds
        if arity == 1:
            tree = call(be, name, x)
            expected = oracle(fn, xs.reshape(x.shape))
        elif kind == "edge":
            y = be.array(host.reshape(1, -1), dtype=dtype)
            tree = call(be, name, x, y)
            expected = oracle(fn, xs.reshape(-1, 1), xs.reshape(1, -1))
        else:
            yhost = random_values(dtype, (1, 6), seed=1)
            tree = call(be, name, x, be.array(yhost, dtype=dtype))
            expected = oracle(fn, xs, store(yhost, dtype))
        assert tree.shape == expected.shape
        assert_close(run(be, tree, dtype), expected, dtype, compute)


@pytest.mark.parametrize("name, arity", GENERATED, ids=GENERATED_IDS)
def test_elementwise_in_a_tree_and_with_out(be, name, arity):
    fn = EXPECTED[name]
    xh, yh = random_values("float64", (3, 5), 2), random_values("float64", (3, 5), 3)
    x, y = be.array(xh, dtype=np.float64), be.array(yh, dtype=np.float64)
    if arity == 1:
        tree = call(be, name, x - y) * 2 + y
        expected = oracle(fn, xh - yh) * 2 + yh
        alone = call(be, name, x, out=be.empty((3, 5), dtype=np.float64))
        expected_alone = oracle(fn, xh)
    else:
        tree = call(be, name, x * 1.5, y - 0.5) * 2 + x
        expected = oracle(fn, xh * 1.5, yh - 0.5) * 2 + xh
        alone, expected_alone = (call(be, name, x, y, out=be.empty((3, 5), dtype=np.float64)),
                                 oracle(fn, xh, yh))
    assert_close(run(be, tree, np.float64), expected, np.float64)
    # out= executes at once and returns the output tensor
    assert alone.shape == (3, 5) and alone.dtype == np.float64
    assert_close(alone.get(), expected_alone, np.float64)

    # float32 leaves, a float32 output and a Python number on the left of a binary op
    xh32 = random_values("float32", (2, 3), 4)
    out = be.empty((2, 3))
    if arity == 1:
        result, expected = call(be, name, be.array(xh32), out=out), oracle(fn, xh32)
    else:
        result = call(be, name, 0.75, be.array(xh32), out=out)
        expected = oracle(fn, np.full((2, 3), 0.75), xh32)
    assert result is out
    assert_close(out.get(), expected, np.float32)

    # float32 edge leaves with a float64 output compute in float64: no float32 rounding
    x = be.array(EDGE, dtype=np.float32)
    xs = EDGE.astype(np.float32).reshape(-1, 1)
    if arity == 1:
        tree, expected = call(be, name, x), oracle(fn, xs)
    else:
        y = be.array(EDGE.reshape(1, -1), dtype=np.float32)
        tree, expected = call(be, name, x, y), oracle(fn, xs, xs.reshape(1, -1))
    assert_close(run(be, tree, np.float64), expected, np.float64)


# ---------------------------------------------------------------- 2. composite functions

COMPOSITES = {
    "clip": (lambda be, x, **kw: be.clip(x, -1.0, 2.5, **kw),
             lambda x: np.minimum(np.maximum(x, -1.0), 2.5)),
    "leakyrelu": (lambda be, x, **kw: be.leakyrelu(x, **kw),
                  lambda x: np.maximum(x, 0) + 0.01 * np.minimum(x, 0)),
    "leakyrelu_a": (lambda be, x, **kw: be.leakyrelu(x, 0.2, **kw),
                    lambda x: np.maximum(x, 0) + 0.2 * np.minimum(x, 0)),
    "elu": (lambda be, x, **kw: be.elu(x, **kw),
            lambda x: np.where(x > 0, x, np.exp(x) - 1)),
    "elu_alpha": (lambda be, x, **kw: be.elu(x, alpha=0.5, **kw),
                  lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
    "selu": (lambda be, x, **kw: be.selu(x, **kw),
             lambda x: 1.0507 * np.where(x > 0, x, 1.67326 * (np.exp(x) - 1))),
    "selu_params": (lambda be, x, **kw: be.selu(x, alpha=2.0, gamma=3.0, **kw),
                    lambda x: 3.0 * np.where(x > 0, x, 2.0 * (np.exp(x) - 1))),
    "hardsigmoid": (lambda be, x, **kw: be.hardsigmoid(x, **kw),
                    lambda x: np.minimum(np.maximum(0.2 * x + 0.5, 0), 1)),
    "hardsigmoid_params": (lambda be, x, **kw: be.hardsigmoid(x, alpha=0.5, gamma=0.25, **kw),
                           lambda x: np.minimum(np.maximum(0.5 * x + 0.25, 0), 1)),
    "softsign": (lambda be, x, **kw: be.softsign(x, **kw), lambda x: x / (1 + np.abs(x))),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite(be, name, dtype):
    build, fn = COMPOSITES[name]
    for kind, host in (("edge", EDGE), ("random", random_values(dtype, (4, 5)))):
        x = be.array(host, dtype=dtype)
        expected = oracle(fn, store(host, dtype).reshape(x.shape))
        tree = build(be, x)
        assert tree.shape == x.shape
            # float32 constants such as 0.2 carry a relative error of ~3e-8: near-cancelling results
        # of O(1) inputs may be off by that much in absolute terms
        assert_close(run(be, tree, dtype), expected, dtype, atol=3e-7 if kind == "random" else None)


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_in_a_tree_and_with_out(be, name):
    build, fn = COMPOSITES[name]
    xh, yh = random_values("float64", (3, 4), 5), random_values("float64", (1, 4), 6)
    x, y = be.array(xh, dtype=np.float64), be.array(yh, dtype=np.float64)
    assert_close(run(be, build(be, x * 2 - y) * 3 + y, np.float64),
                 oracle(fn, xh * 2 - yh) * 3 + yh, np.float64)
    out = be.empty((3, 4), dtype=np.float64)
    assert build(be, x, out=out) is out
    assert_close(out.get(), oracle(fn, xh), np.float64)


def test_clip_with_tensor_bounds(be):
    xh = random_values("float64", (3, 4), 7)
    lo, hi = np.array([[-1.0], [0.0], [0.5]]), np.array([[0.0, 1.0, 2.0, 3.0]])
    tree = be.clip(be.array(xh, dtype=np.float64), be.array(lo, dtype=np.float64),
                   be.array(hi, dtype=np.float64))
    assert_close(run(be, tree, np.float64), np.minimum(np.maximum(xh, lo), hi), np.float64)


STAT_AXES = [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1, 2), (-1, 0)]


def _neon_shape(shape):
    """neon's rule for computed shapes: fewer than 2 dims get leading 1s."""
    shape = tuple(shape)
    return (1,) * (2 - len(shape)) + shape if len(shape) < 2 else shape


@pytest.mark.parametrize("axis", STAT_AXES, ids=str)
@pytest.mark.parametrize("stat, ddof", [("mean", None), ("var", 0), ("var", 1), ("std", 0),
                                        ("std", 1)])
def test_statistics(be, stat, ddof, axis):
    xh = random_values("float64", (3, 4, 5), 8)
    kw = {} if ddof is None else {"ddof": ddof}
    for keepdims in (True, False):
        expected = call(np, stat, xh, axis=axis, keepdims=keepdims, **kw)
        tree = call(be, stat, be.array(xh, dtype=np.float64), axis=axis, keepdims=keepdims, **kw)
        assert tree.shape == _neon_shape(expected.shape)
        assert_close(run(be, tree, np.float64), np.reshape(expected, tree.shape), np.float64)


@pytest.mark.parametrize("stat", ["mean", "var", "std"])
def test_statistics_default_is_all_axes_keepdims_biased(be, stat):
    xh = random_values("float64", (3, 4), 9)
    tree = call(be, stat, be.array(xh, dtype=np.float64))
    assert tree.shape == (1, 1)
    assert_close(run(be, tree, np.float64), call(np, stat, xh, keepdims=True), np.float64)


# rows with a different kind of edge value each; no row cancels or overflows in a float32 sum
EDGE_ROWS = np.array([
    [0.0, -0.0, 1e-30, 1e-40, -1e-30, 0.5],
    [1e30, 1e30, 1.0, 2.5, 100.0, -100.0],
    [np.inf, 1.0, 2.0, -1.0, 0.0, 0.5],
    [np.inf, -np.inf, 1.0, 2.0, 3.0, 4.0],
    [np.nan, 1.0, 2.0, 3.0, 4.0, 5.0],
    [3e38, 1.0, 1.0, 1.0, 1.0, 1.0],
    [-1.0, -0.5, -np.inf, 1e-30, -1e-40, -100.0],
])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [1, 0, None, (0, 1)], ids=str)
@pytest.mark.parametrize("stat, ddof", [("mean", None), ("var", 0), ("var", 1), ("std", 0),
                                        ("std", 1)])
def test_statistics_edge_values(be, stat, ddof, axis, dtype):
    xs = EDGE_ROWS.astype(dtype).astype(np.float64)
    kw = {} if ddof is None else {"ddof": ddof}
    with np.errstate(all="ignore"):
        expected = call(np, stat, xs, axis=axis, keepdims=True, **kw)
        if stat == "std" and dtype == "float32":         # a float32 variance overflows first
            expected = np.sqrt(store(call(np, "var", xs, axis=axis, keepdims=True, **kw), dtype)
                               .astype(np.float64))
    tree = call(be, stat, be.array(EDGE_ROWS, dtype=dtype), axis=axis, **kw)
    assert_close(run(be, tree, dtype), expected, dtype)


@pytest.mark.parametrize("stat", ["mean", "var", "std"])
def test_statistics_with_out(be, stat):
    xh = random_values("float64", (4, 6), 10)
    out = be.empty((4, 1), dtype=np.float64)
    result = call(be, stat, be.array(xh, dtype=np.float64), axis=1, out=out)
    assert result is out
    assert_close(out.get(), call(np, stat, xh, axis=1, keepdims=True), np.float64)


# ---------------------------------------------------------------- 3. reductions

RED_SHAPES = [(3, 4), (2, 3, 4), (2, 3, 1, 4), (2, 1, 3, 2, 3)]


def _axes_cases():
    for shape in RED_SHAPES:
        n = len(shape)
        cases = [None, *range(n), *range(-n, 0), *itertools.combinations(range(n), 2),
                 tuple(range(n)), (-1, 0)]
        if n >= 3:
            cases.append((0, n - 2, n - 1))
        for axis in cases:
            yield pytest.param(shape, axis, id=f"{len(shape)}d-axis{axis}")


@pytest.mark.parametrize("shape, axis", list(_axes_cases()))
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reduction(be, name, shape, axis):
    xh = random_values("float32", shape, 11)
    for keepdims in (True, False):
        expected = call(np, name, xh.astype(np.float64), axis=axis, keepdims=keepdims)
        tree = call(be, name, be.array(xh), axis=axis, keepdims=keepdims)
        assert tree.shape == _neon_shape(expected.shape)
        got = run(be, tree)
        if name == "sum":
            np.testing.assert_allclose(got, np.reshape(expected, tree.shape), rtol=1e-5, atol=1e-5)
        else:
            assert_close(got, np.reshape(expected, tree.shape), np.float32)


@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reduction_default_is_all_axes_keepdims(be, name):
    xh = random_values("float64", (2, 3, 4), 12)
    tree = call(be, name, be.array(xh, dtype=np.float64))
    assert tree.shape == (1, 1, 1)
    assert_close(run(be, tree, np.float64), call(np, name, xh, keepdims=True), np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [1, 0, None], ids=str)
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reduction_edge_values(be, name, axis, dtype):
    xs = EDGE_ROWS.astype(dtype).astype(np.float64)
    with np.errstate(all="ignore"):
        expected = call(np, name, xs, axis=axis, keepdims=True)
    tree = call(be, name, be.array(EDGE_ROWS, dtype=dtype), axis=axis)
    assert_close(run(be, tree, dtype), expected, dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reduction_into_integers_saturates(be, name, dtype):
    xh = np.array([[100, 100, 100], [-100, -100, 5], [7, 3, 1]]).astype(dtype)
    tree = call(be, name, be.array(xh, dtype=dtype), axis=1)
    expected = call(np, name, xh.astype(np.float64), axis=1, keepdims=True)
    assert_close(run(be, tree, dtype), expected, dtype)


@pytest.mark.parametrize("name", ["sum", "max", "min", "argmax", "argmin"])
def test_reduction_bad_axis_raises(be, name):
    x = be.ones((2, 3))
    with pytest.raises(ValueError, match=name):
        call(be, name, x, axis=2)


def test_reduction_repeated_axis_raises(be):
    with pytest.raises(ValueError):
        be.sum(be.ones((2, 3)), axis=(1, -1))


ARG_SHAPES = [(4, 6), (3, 4, 5), (2, 3, 2, 4)]


@pytest.mark.parametrize("axis", ["default", None, 0, 1, -1], ids=str)
@pytest.mark.parametrize("shape", ARG_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduction(be, name, shape, axis):
    # few distinct values: many ties, where the first index must win
    xh = np.random.default_rng(13).integers(0, 3, shape).astype(np.float32)
    kw = {} if axis == "default" else {"axis": axis}
    np_axis = 1 if axis == "default" else axis
    for keepdims in (True, False):
        expected = call(np, name, xh, axis=np_axis, keepdims=keepdims)
        expected_shape = (1, 1) if np_axis is None else _neon_shape(expected.shape)
        tree = call(be, name, be.array(xh), keepdims=keepdims, **kw)
        assert tree.shape == expected_shape
        assert_close(run(be, tree), np.reshape(expected, expected_shape), np.float32)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduction_default_axis_is_1(be, name):
    xh = random_values("float32", (5, 7), 14)
    tree = call(be, name, be.array(xh))
    assert tree.shape == (5, 1)
    assert_close(run(be, tree), call(np, name, xh, axis=1, keepdims=True), np.float32)


@pytest.mark.parametrize("axis", [1, 0, None], ids=str)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduction_nan_inf_and_signed_zero(be, name, axis):
    xh = np.array([[1.0, np.nan, 3.0, np.nan],
                   [np.inf, 2.0, np.inf, -np.inf],
                   [0.0, -0.0, 0.0, -0.0],
                   [-np.inf, -np.inf, 5.0, np.nan],
                   [-1e30, 1e-40, -3e38, 3e38]])
    for dtype in ("float32", "float64"):
        expected = call(np, name, xh.astype(dtype), axis=axis, keepdims=axis is not None)
        tree = call(be, name, be.array(xh, dtype=dtype), axis=axis)
        assert_close(run(be, tree, dtype), np.reshape(expected, tree.shape), dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float16"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduction_of_other_dtypes(be, name, dtype):
    xh = np.array([[3, 7, 7, 1], [0, 0, 0, 0], [9, 2, 9, 1]]).astype(dtype)
    tree = call(be, name, be.array(xh, dtype=dtype), axis=1)
    out = be.empty(tree.shape, dtype=np.int32)
    assert call(be, name, be.array(xh, dtype=dtype), axis=1, out=out) is out
    expected = call(np, name, xh, axis=1, keepdims=True)
    assert_close(out.get(), expected, np.int32)


# ---------------------------------------------------------------- 4. structural ops

def _host(shape, seed=15):
    return np.random.default_rng(seed).integers(-50, 50, shape).astype(np.float64)


# name -> (f(m, *operands, **out_kw), operand shapes, neon shape of the result or None for numpy's)
# m is numpy or the backend; both spell the call the same way.
STRUCTURAL = {
    "dot": (lambda m, a, b, **kw: m.dot(a, b, **kw), [(3, 4), (4, 5)], (3, 5)),
    "dot_vector": (lambda m, a, b, **kw: m.dot(a, b, **kw), [(3, 4), (4, 1)], (3, 1)),
    "transpose_2d": (lambda m, a, **kw: m.transpose(a, **kw), [(3, 4)], (4, 3)),
    "transpose_3d_default": (lambda m, a, **kw: m.transpose(a, **kw), [(2, 3, 4)], (4, 3, 2)),
    "transpose_axes": (lambda m, a, **kw: m.transpose(a, (2, 0, 1), **kw), [(2, 3, 4)], (4, 2, 3)),
    "transpose_negative_axes": (lambda m, a, **kw: m.transpose(a, (-1, 0, -2), **kw), [(2, 3, 4)],
                                (4, 2, 3)),
    "transpose_4d": (lambda m, a, **kw: m.transpose(a, (1, 3, 0, 2), **kw), [(2, 3, 4, 5)],
                     (3, 5, 2, 4)),
    "reshape_minus1_last": (lambda m, a, **kw: m.reshape(a, (2, -1), **kw), [(3, 4)], (2, 6)),
    "reshape_minus1_first": (lambda m, a, **kw: m.reshape(a, (-1, 6), **kw), [(2, 3, 4)], (4, 6)),
    "reshape_minus1_middle": (lambda m, a, **kw: m.reshape(a, (2, -1, 3), **kw), [(3, 4)],
                              (2, 2, 3)),
    "reshape_1d_minus1": (lambda m, a, **kw: m.reshape(a, (-1,), **kw), [(3, 4)], (12, 1)),
    "reshape_1d": (lambda m, a, **kw: m.reshape(a, 12, **kw), [(2, 6)], (12, 1)),
    "reshape_4d": (lambda m, a, **kw: m.reshape(a, (1, 2, 3, 2), **kw), [(3, 4)], (1, 2, 3, 2)),
    "concatenate_axis0": (lambda m, a, b, **kw: m.concatenate([a, b], 0, **kw), [(2, 3), (4, 3)],
                          (6, 3)),
    "concatenate_axis1": (lambda m, a, b, **kw: m.concatenate([a, b], axis=1, **kw),
                          [(2, 3), (2, 1)], (2, 4)),
    "concatenate_axis_neg": (lambda m, a, b, **kw: m.concatenate([a, b], axis=-1, **kw),
                             [(2, 3, 1), (2, 3, 2)], (2, 3, 3)),
    "concatenate_three_axis0": (lambda m, a, b, c, **kw: m.concatenate([a, b, c], axis=0, **kw),
                                [(1, 4), (2, 4), (3, 4)], (6, 4)),
    "concatenate_three_axis1": (lambda m, a, b, c, **kw: m.concatenate([a, b, c], axis=1, **kw),
                                [(3, 1), (3, 2), (3, 4)], (3, 7)),
    "concatenate_three_3d_axis1": (lambda m, a, b, c, **kw: m.concatenate((a, b, c), axis=1, **kw),
                                   [(2, 1, 3), (2, 2, 3), (2, 3, 3)], (2, 6, 3)),
    "take_axis0": (lambda m, a, **kw: m.take(a, [2, 0, 2, 1], 0, **kw), [(3, 4)], (4, 4)),
    "take_axis1_negative": (lambda m, a, **kw: m.take(a, [-1, 0, -4], axis=1, **kw), [(3, 4)],
                            (3, 3)),
    "take_axis_neg_3d": (lambda m, a, **kw: m.take(a, [1, -2], axis=-1, **kw), [(2, 3, 4)],
                         (2, 3, 2)),
    "take_axis_none": (lambda m, a, **kw: m.take(a, [0, 11, -1, 5, 5], **kw), [(3, 4)], (1, 5)),
    "take_axis_none_3d": (lambda m, a, **kw: m.take(a, [23, 0, 7], None, **kw), [(2, 3, 4)],
                          (1, 3)),
    "tile_2d": (lambda m, a, **kw: m.tile(a, (2, 3), **kw), [(2, 3)], (4, 9)),
    "tile_int": (lambda m, a, **kw: m.tile(a, 2, **kw), [(2, 3)], (2, 6)),
    "tile_more_reps": (lambda m, a, **kw: m.tile(a, (2, 1, 2), **kw), [(2, 3)], (2, 2, 6)),
    "tile_fewer_reps": (lambda m, a, **kw: m.tile(a, (3, 1), **kw), [(2, 3, 2)], (2, 9, 2)),
    "squeeze_all": (lambda m, a, **kw: m.squeeze(a, **kw), [(1, 3, 1, 4)], (3, 4)),
    "squeeze_axis": (lambda m, a, **kw: m.squeeze(a, axis=0, **kw), [(1, 3, 1, 4)], (3, 1, 4)),
    "squeeze_negative_axis": (lambda m, a, **kw: m.squeeze(a, axis=-2, **kw), [(1, 3, 1, 4)],
                              (1, 3, 4)),
    "squeeze_axes": (lambda m, a, **kw: m.squeeze(a, axis=(0, 2), **kw), [(1, 3, 1, 4)], (3, 4)),
    "squeeze_column": (lambda m, a, **kw: m.squeeze(a, **kw), [(3, 1)], (1, 3)),
    "squeeze_row": (lambda m, a, **kw: m.squeeze(a, **kw), [(1, 5)], (1, 5)),
    "squeeze_scalar": (lambda m, a, **kw: m.squeeze(a, **kw), [(1, 1)], (1, 1)),
    "expand_dims_0": (lambda m, a, **kw: m.expand_dims(a, 0, **kw), [(3, 4)], (1, 3, 4)),
    "expand_dims_1": (lambda m, a, **kw: m.expand_dims(a, 1, **kw), [(3, 4)], (3, 1, 4)),
    "expand_dims_last": (lambda m, a, **kw: m.expand_dims(a, -1, **kw), [(3, 4)], (3, 4, 1)),
    "expand_dims_neg3": (lambda m, a, **kw: m.expand_dims(a, -3, **kw), [(3, 4)], (1, 3, 4)),
    "expand_dims_3d": (lambda m, a, **kw: m.expand_dims(a, 2, **kw), [(2, 3, 4)], (2, 3, 1, 4)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8"])
@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural(be, name, dtype):
    f, shapes, neon_shape = STRUCTURAL[name]
    hosts = [_host(s, seed=16 + i).astype(dtype) for i, s in enumerate(shapes)]
    expected = f(np, *(h.astype(np.float64) for h in hosts))
    tensors = [be.array(h, dtype=dtype) for h in hosts]
    assert [t.shape for t in tensors] == shapes
    tree = f(be, *tensors)
    assert tree.shape == neon_shape
    assert expected.size == math.prod(neon_shape)
    expected = np.reshape(expected, neon_shape)
    assert_close(run(be, tree, dtype), expected, dtype)
    # the same op with out=: executes at once and returns the output
    out = be.empty(neon_shape, dtype=dtype)
    assert f(be, *tensors, out=out) is out
    assert_close(out.get(), expected, dtype)


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural_in_a_tree(be, name):
    f, shapes, neon_shape = STRUCTURAL[name]
    hosts = [_host(s, seed=20 + i) for i, s in enumerate(shapes)]
    tensors = [be.array(h, dtype=np.float64) for h in hosts]
    # the op of an operand tree, inside a larger tree
    tree = f(be, *(t * 2 + 1 for t in tensors)) * 3 - 1
    expected = np.reshape(f(np, *(h * 2 + 1 for h in hosts)), neon_shape) * 3 - 1
    assert tree.shape == neon_shape
    assert_close(run(be, tree, np.float64), expected, np.float64)


def test_dot_float32_tolerance_and_operator(be):
    a, b = random_values("float32", (5, 7), 24), random_values("float32", (7, 3), 25)
    ta, tb = be.array(a), be.array(b)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    for tree in (be.dot(ta, tb), ta @ tb):
        assert tree.shape == (5, 3)
        np.testing.assert_allclose(run(be, tree), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa, sb", [((3, 4), (5, 2)), ((3, 4), (3, 4)), ((2, 3, 4), (4, 2)),
                                    ((3, 4), (4, 2, 2))])
def test_dot_shape_error(be, sa, sb):
    a, b = be.ones(sa), be.ones(sb)
    with pytest.raises(ValueError, match="dot") as info:
        be.dot(a, b)
    assert str(sa) in str(info.value) and str(sb) in str(info.value)
    with pytest.raises(ValueError, match="dot"):
        a @ b


def test_dot_edge_values(be):
    a = np.array([[np.inf, 1.0], [np.nan, 0.0], [1e30, 1e30], [0.0, -0.0]])
    b = np.array([[1.0, 0.0, -1.0], [2.0, 1e-30, 1.0]])
    with np.errstate(all="ignore"):
        expected = a @ b
    assert_close(run(be, be.dot(be.array(a, dtype=np.float64), be.array(b, dtype=np.float64)),
                     np.float64), expected, np.float64)


@pytest.mark.parametrize("axes", [(0, 0, 1), (0, 1), (0, 1, 3), (0, 1, 2, 3)])
def test_transpose_bad_axes_raise(be, axes):
    with pytest.raises(ValueError, match="transpose"):
        be.transpose(be.ones((2, 3, 4)), axes)


@pytest.mark.parametrize("shape", [(5, 5), (-1, -1), (7, -1)])
def test_reshape_bad_target_raises(be, shape):
    with pytest.raises(ValueError, match="reshape"):
        be.reshape(be.ones((3, 4)), shape)


def test_concatenate_mismatch_raises(be):
    with pytest.raises(ValueError, match="concatenate"):
        be.concatenate([be.ones((2, 3)), be.ones((3, 3))], axis=1)
    with pytest.raises(ValueError, match="concatenate"):
        be.concatenate([be.ones((2, 3)), be.ones((2, 3, 1))], axis=0)


@pytest.mark.parametrize("axis", [1, 3, -1, (0, 1)])
def test_squeeze_of_a_non_unit_axis_raises(be, axis):
    with pytest.raises(ValueError, match="squeeze"):
        be.squeeze(be.ones((1, 3, 1, 4)), axis=axis)


# split: (f(m, x) -> list, input shape, neon shapes of the parts)
SPLITS = {
    "sections_axis0": (lambda m, x: m.split(x, 2, axis=0), (4, 6), [(2, 6), (2, 6)]),
    "sections_axis1": (lambda m, x: m.split(x, 3, axis=1), (4, 6), [(4, 2)] * 3),
    "sections_negative_axis": (lambda m, x: m.split(x, 2, axis=-1), (2, 3, 4), [(2, 3, 2)] * 2),
    "indices_axis0": (lambda m, x: m.split(x, [1, 3], axis=0), (4, 6), [(1, 6), (2, 6), (1, 6)]),
    "indices_axis1": (lambda m, x: m.split(x, [2], axis=1), (4, 6), [(4, 2), (4, 4)]),
    "indices_negative": (lambda m, x: m.split(x, [-1], axis=1), (4, 6), [(4, 5), (4, 1)]),
    "indices_3d_axis1": (lambda m, x: m.split(x, [1, 2], axis=1), (2, 3, 4),
                         [(2, 1, 4), (2, 1, 4), (2, 1, 4)]),
    "one_section": (lambda m, x: m.split(x, 1, axis=0), (3, 2), [(3, 2)]),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split(be, name):
    f, shape, neon_shapes = SPLITS[name]
    xh = _host(shape, 26)
    x = be.array(xh, dtype=np.float64)
    parts, expected = f(be, x), f(np, xh)
    assert isinstance(parts, list) and len(parts) == len(expected)
    assert [p.shape for p in parts] == neon_shapes
    for part, exp in zip(parts, expected):
        assert_close(run(be, part, np.float64), np.reshape(exp, part.shape), np.float64)
    # each part is an op-tree usable inside a larger tree
    assert_close(run(be, parts[-1] * 2 + 1, np.float64), np.reshape(expected[-1], parts[-1].shape)
                 * 2 + 1, np.float64)


def test_split_unequal_sections_raises(be):
    with pytest.raises(ValueError, match="split"):
        be.split(be.ones((4, 6)), 4, axis=1)


INT64_MAX, INT64_MIN = 2**63 - 1, -2**63

# ONNX Slice: (input shape, starts, ends, axes, steps, numpy key written by hand)
SLICES = {
    "rows": ((4, 6), [1], [3], None, None, np.s_[1:3]),
    "both_axes_default": ((4, 6), [1, 2], [3, 5], None, None, np.s_[1:3, 2:5]),
    "axes_out_of_order_steps": ((4, 6), [0, 1], [-1, 1000], [1, 0], [2, 1], np.s_[1:1000, 0:-1:2]),
    "negative_axis": ((4, 6), [-4], [INT64_MAX], [-1], None, np.s_[:, -4:]),
    "reverse_all": ((4, 6), [-1], [INT64_MIN], [1], [-1], np.s_[:, ::-1]),
    "reverse_step2": ((4, 6), [3], [0], [0], [-2], np.s_[3:0:-2]),
    "reverse_to_start": ((4, 6), [5], [-7], [1], [-3], np.s_[:, 5::-3]),
    "clamped_ends": ((4, 6), [-100], [100], [0], [1], np.s_[:]),
    "3d_mixed": ((3, 4, 5), [0, 4], [2, 0], [0, 2], [1, -1], np.s_[0:2, :, 4:0:-1]),
    "3d_middle_step": ((3, 4, 5), [1], [4], [1], [2], np.s_[:, 1:4:2]),
    "one_row": ((4, 6), [2], [3], [0], None, np.s_[2:3]),
}


@pytest.mark.parametrize("name", sorted(SLICES))
def test_slice_onnx(be, name):
    shape, starts, ends, axes, steps, key = SLICES[name]
    xh = _host(shape, 27)
    x = be.array(xh, dtype=np.float64)
    tree = be.slice(x, starts, ends, axes, steps)
    expected = xh[key]
    assert tree.shape == expected.shape                  # slicing never drops an axis
    assert_close(run(be, tree, np.float64), expected, np.float64)
    assert_close(run(be, be.slice(x * 2, starts, ends, axes=axes, steps=steps) + x.shape[0],
                     np.float64), expected * 2 + shape[0], np.float64)


def test_slice_zero_step_raises(be):
    with pytest.raises(ValueError):
        be.slice(be.ones((3, 4)), [0], [2], [0], [0])


@pytest.mark.parametrize("axis, indices", [(0, [0, 4]), (0, [-5]), (1, [1, 3, 2]), (None, [12]),
                                           (None, [-13]), (-1, [0, 3])])
def test_take_out_of_range_raises_at_execution_and_leaves_out_untouched(be, axis, indices):
    x = be.array(_host((4, 3), 28), dtype=np.float64)
    tree = be.take(x, indices, axis)                     # building cannot see the index values
    out = be.empty(tree.shape, dtype=np.float64)
    out[:] = 7.0
    with pytest.raises(IndexError):
        out[:] = tree
    np.testing.assert_array_equal(out.get(), np.full(tree.shape, 7.0))
    with pytest.raises(IndexError):
        be.take(x, indices, axis, out=out)
    np.testing.assert_array_equal(out.get(), np.full(tree.shape, 7.0))


def test_take_with_tensor_indices_and_gather(be):
    xh = _host((3, 5), 29)
    x = be.array(xh, dtype=np.float64)
    idx = be.array(np.array([[4, 0], [-1, 2]]), dtype=np.int32)
    expected = np.take(xh, [4, 0, -1, 2], axis=1)
    assert be.take(x, idx, 1).shape == (3, 4)
    assert_close(run(be, be.take(x, idx, axis=1), np.float64), expected, np.float64)
    assert_close(run(be, be.gather(x, [4, 0, -1, 2], 1), np.float64), expected, np.float64)
    # 2-D host indices are flattened
    assert_close(run(be, be.take(x, np.array([[4, 0], [-1, 2]]), 1), np.float64), expected,
                 np.float64)


@pytest.mark.parametrize("axis", [1, 0, 2, 3, -1, -2, -3])
def test_flatten(be, axis):
    xh = _host((2, 3, 4), 30)
    a = axis + 3 if axis < 0 else axis                   # ONNX: negative counts from the back
    neon_shape = (math.prod(xh.shape[:a]), math.prod(xh.shape[a:]))
    x = be.array(xh, dtype=np.float64)
    tree = be.flatten(x, axis)
    assert tree.shape == neon_shape
    assert_close(run(be, tree, np.float64), xh.reshape(neon_shape), np.float64)
    out = be.empty(neon_shape, dtype=np.float64)
    assert be.flatten(x, axis, out=out) is out
    assert_close(out.get(), xh.reshape(neon_shape), np.float64)
    assert_close(run(be, be.flatten(x + 1, axis) * 2, np.float64), (xh.reshape(neon_shape) + 1) * 2,
                 np.float64)


@pytest.mark.parametrize("axis", [4, -4])
def test_flatten_axis_out_of_range_raises(be, axis):
    with pytest.raises(ValueError, match="flatten"):
        be.flatten(be.ones((2, 3, 4)), axis)


def test_flatten_default_axis_is_1(be):
    xh = _host((2, 3, 4), 31)
    tree = be.flatten(be.array(xh, dtype=np.float64))
    assert tree.shape == (2, 12)
    assert_close(run(be, tree, np.float64), xh.reshape(2, 12), np.float64)


def test_unsqueeze_is_expand_dims(be):
    xh = _host((3, 4), 32)
    tree = be.unsqueeze(be.array(xh, dtype=np.float64), 1)
    assert tree.shape == (3, 1, 4)
    assert_close(run(be, tree, np.float64), np.expand_dims(xh, 1), np.float64)


CAST_VALUES = np.array([0.0, -0.0, 0.4, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.7, -3.7, 127.4, 127.5,
                        128.0, -128.5, -129.0, 255.5, 256.0, -1.0, 1e-6, 1e-40, 1e-50, 65504.0,
                        65520.0, 1e5, -1e5, 1e10, -1e10, 2147483647.5, 4294967295.4, 3e38, 1e39,
                        np.inf, -np.inf, np.nan])
ALL_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32",
              "uint8", "uint16", "uint32"]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_cast(be, dtype):
    x = be.array(CAST_VALUES, dtype=np.float64)
    expected = store(CAST_VALUES, dtype).astype(np.float64).reshape(-1, 1)
    tree = be.cast(x, dtype)
    assert tree.shape == (len(CAST_VALUES), 1)
    np.testing.assert_array_equal(run(be, tree, np.float64), expected)
    # with out= of the same dtype, and inside a larger tree
    out = be.empty(x.shape, dtype=dtype)
    assert be.cast(x, dtype, out=out) is out
    np.testing.assert_array_equal(out.get(), store(CAST_VALUES, dtype).reshape(-1, 1))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run(be, be.cast(x * 2, np.dtype(dtype)) + 0.25, np.float64),
                                      store(CAST_VALUES * 2, dtype).astype(np.float64)
                                      .reshape(-1, 1) + 0.25)


def test_cast_unsupported_dtype_raises(be):
    with pytest.raises(ValueError, match="float16"):
        be.cast(be.ones((2, 2)), np.int64)


@pytest.mark.parametrize("how", ["depth", "out"])
@pytest.mark.parametrize("axis", [0, 1])
def test_onehot(be, axis, how):
    labels = np.array([2, 0, 1, 3, 2, 7])                # 7 is past depth: an all-zero column
    depth = 4
    hot = (np.arange(depth)[:, None] == labels[None, :]).astype(np.float64)
    expected = hot if axis == 0 else hot.T
    idx = be.array(labels.reshape(1, -1), dtype=np.int32)
    out = be.empty(expected.shape)
    if how == "depth":
        tree = be.onehot(idx, axis=axis, depth=depth)
        assert tree.shape == expected.shape
        assert_close(run(be, tree), expected, np.float32)
        assert_close(run(be, be.onehot(idx, axis, depth=depth) * 2 - 1), expected * 2 - 1,
                     np.float32)
    else:
        assert be.onehot(idx, axis, out=out) is out
        assert_close(out.get(), expected, np.float32)


def test_onehot_from_host_labels_and_column_tensor(be):
    labels = np.array([1, 1, 0, 2])
    expected = (np.arange(3)[:, None] == labels[None, :]).astype(np.float64)
    assert_close(run(be, be.onehot(labels, 0, depth=3)), expected, np.float32)
    col = be.array(labels, dtype=np.float32)             # (4, 1): still N = 4 labels
    assert_close(run(be, be.onehot(col, 1, depth=3)), expected.T, np.float32)


def test_onehot_without_depth_or_out_raises(be):
    with pytest.raises(ValueError, match="onehot"):
        be.onehot(be.array(np.array([0, 1]), dtype=np.int32), axis=0)


NONZERO_INPUTS = {
    "2d": np.array([[0.0, 1.5, -0.0], [np.nan, 0.0, -2.0]]),
    "3d": np.array([[[0.0, 1.0], [2.0, 0.0]], [[0.0, 0.0], [1e-40, -np.inf]]]),
    "none": np.zeros((2, 3)),
    "all": np.ones((3, 2)),
}


@pytest.mark.parametrize("name", sorted(NONZERO_INPUTS))
def test_nonzero(be, name):
    xh = NONZERO_INPUTS[name]
    expected = np.array(np.nonzero(xh)).reshape(xh.ndim, -1)
    result = be.nonzero(be.array(xh, dtype=np.float64))
    assert result.dtype == np.int32
    assert result.shape == expected.shape
    np.testing.assert_array_equal(result.get(), expected)


def test_nonzero_of_a_tree_is_eager(be):
    xh = np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 5.0]])
    x = be.array(xh, dtype=np.float64)
    result = be.nonzero(x - 1)
    np.testing.assert_array_equal(result.get(), np.array(np.nonzero(xh - 1)))
    x[:] = 1.0                                           # the result was computed already
    np.testing.assert_array_equal(result.get(), np.array(np.nonzero(xh - 1)))


# ---------------------------------------------------------------- 5. reductions in larger trees

# f(m, x) with m numpy or the backend; x is (3, 4)
REDUCTION_TREES = {
    "sum": lambda m, x: m.sum(x * 2, axis=0, keepdims=True) + x,
    "sum_tuple": lambda m, x: m.sum(m.exp(x), axis=(0, 1), keepdims=True) * x,
    "max": lambda m, x: x - m.max(x, axis=1, keepdims=True),
    "min": lambda m, x: m.min(x + 1, axis=0, keepdims=True) * m.sqrt(m.abs(x)),
    "argmax": lambda m, x: m.argmax(x * -1, axis=0, keepdims=True) * 2 + 1,
    "argmin": lambda m, x: m.argmin(x, axis=1, keepdims=True) + x,
    "mean": lambda m, x: x - m.mean(x, axis=1, keepdims=True),
    "var": lambda m, x: m.var(x * 2, axis=0, keepdims=True) + 1,
    "std": lambda m, x: (x - m.mean(x, axis=0, keepdims=True)) / m.std(x, axis=0, keepdims=True),
    "softmax": lambda m, x: m.exp(x - m.max(x, axis=0, keepdims=True)) /
    m.sum(m.exp(x - m.max(x, axis=0, keepdims=True)), axis=0, keepdims=True),
}


@pytest.mark.parametrize("name", sorted(REDUCTION_TREES))
def test_reduction_in_a_tree(be, name):
    f = REDUCTION_TREES[name]
    xh = random_values("float64", (3, 4), 33)
    tree = f(be, be.array(xh, dtype=np.float64))
    expected = f(np, xh)
    assert tree.shape == expected.shape
    assert_close(run(be, tree, np.float64), expected, np.float64)


@pytest.mark.parametrize("name", ["sum", "max", "min", "argmax", "argmin"])
def test_reduction_with_out(be, name):
    xh = random_values("float64", (3, 4), 34)
    out = be.empty((1, 4), dtype=np.float64)
    assert call(be, name, be.array(xh, dtype=np.float64), axis=0, out=out) is out
    assert_close(out.get(), call(np, name, xh, axis=0, keepdims=True), np.float64)
    out2 = be.empty((1, 3), dtype=np.float64)            # keepdims=False: (3,) becomes (1, 3)
    assert call(be, name, be.array(xh, dtype=np.float64), axis=1, keepdims=False, out=out2) is out2
    assert_close(out2.get(), call(np, name, xh, axis=1).reshape(1, 3), np.float64)
