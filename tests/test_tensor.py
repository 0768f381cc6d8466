"""The Tensor contract: allocation and conversion, dtypes and the store rule, views, reshape,
transpose, take, share, metadata, N-D tensors, host interop, and failed assignments.

Oracle: numpy on the same data, computed independently here.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neonlike.backends.backend import Tensor

SUPPORTED = ["float16", "float32", "float64", "int8", "int16", "int32", "uint8", "uint16", "uint32"]
FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "int16", "int32", "uint8", "uint16", "uint32"]
UNSUPPORTED = [bool, np.bool_, np.int64, "int64", np.uint64, np.complex64, "complex128", "foo",
               np.float128 if hasattr(np, "float128") else "longdouble", object, str]


def store_int(values, dtype):
    """The store rule for integer outputs, written independently: round half to even, nan -> 0,
    +-inf and out-of-range values saturate to the type's range."""
    info = np.iinfo(dtype)
    v = np.array(values, dtype=np.float64)
    v = np.where(np.isnan(v), 0.0, v)
    v = np.clip(np.round(v), float(info.min), float(info.max))
    return v.astype(dtype)


def stored(values, dtype):
    """What a tensor of `dtype` holds after a store of float64 host `values`."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            return np.asarray(values, dtype=np.float64).astype(dtype)
    return store_int(values, dtype)


def assert_supported_list(excinfo):
    msg = str(excinfo.value)
    for name in SUPPORTED:
        assert name in msg, f"{name!r} missing from the error message: {msg}"


def base_data(shape=(3, 4)):
    return np.arange(np.prod(shape), dtype=np.float64).reshape(shape)


# ==================================================================== allocation and conversion

@pytest.mark.parametrize("shape, expected", [
    ((3, 4), (3, 4)), ((5,), (5, 1)), (5, (5, 1)), ((1, 7), (1, 7)), ((2, 3, 4), (2, 3, 4)),
    ((2, 1, 3, 1, 2, 1), (2, 1, 3, 1, 2, 1)), ((np.int64(2), np.int32(3)), (2, 3)),
])
@pytest.mark.parametrize("alloc", ["empty", "zeros", "ones"])
def test_allocation_shape_and_default_dtype(be, alloc, shape, expected):
    t = getattr(be, alloc)(shape)
    assert isinstance(t, Tensor)
    assert t.shape == expected
    assert all(type(d) is int for d in t.shape)
    assert t.dtype == be.default_dtype == np.float32
    assert t.get().shape == expected
    assert t.get().dtype == np.float32
    if alloc == "zeros":
        np.testing.assert_array_equal(t.get(), np.zeros(expected))
    if alloc == "ones":
        np.testing.assert_array_equal(t.get(), np.ones(expected))


@pytest.mark.parametrize("dtype", SUPPORTED)
@pytest.mark.parametrize("spelling", ["str", "type", "dtype"])
@pytest.mark.parametrize("alloc", ["empty", "zeros", "ones", "array", "zeros_like", "empty_like"])
def test_dtype_on_each_allocation(be, alloc, dtype, spelling):
    dt = {"str": dtype, "type": getattr(np, dtype), "dtype": np.dtype(dtype)}[spelling]
    host = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.float64)
    if alloc == "array":
        t = be.array(host, dtype=dt)
    elif alloc.endswith("_like"):
        t = getattr(be, alloc)(host, dtype=dt)
    else:
        t = getattr(be, alloc)((2, 3), dtype=dt)
    assert t.dtype == np.dtype(dtype)
    assert isinstance(t.dtype, np.dtype)
    values = t.get()
    assert values.dtype == np.dtype(dtype)
    assert values.shape == (2, 3)
    if alloc == "array":
        np.testing.assert_array_equal(values, host.astype(dtype))
    elif alloc == "ones":
        np.testing.assert_array_equal(values, np.ones((2, 3), dtype))
    elif alloc == "zeros" or alloc == "zeros_like":
        np.testing.assert_array_equal(values, np.zeros((2, 3), dtype))


@pytest.mark.parametrize("dtype", UNSUPPORTED, ids=repr)
@pytest.mark.parametrize("alloc", ["empty", "zeros", "ones", "array", "zeros_like", "empty_like"])
def test_unsupported_dtype_raises_valueerror_naming_supported(be, alloc, dtype):
    with pytest.raises(ValueError) as excinfo:
        if alloc == "array":
            be.array(np.ones((2, 2)), dtype=dtype)
        elif alloc.endswith("_like"):
            getattr(be, alloc)(be.ones((2, 2)), dtype=dtype)
        else:
            getattr(be, alloc)((2, 2), dtype=dtype)
    assert_supported_list(excinfo)


@pytest.mark.parametrize("data", [
    np.array(["a", "b"]), np.array([b"x"]), np.array([object(), 1], dtype=object),
    np.array([1 + 2j, 3j]), ["a", "b"], np.array(["2000-01-01"], dtype="datetime64[D]"),
], ids=["str", "bytes", "object", "complex", "list-of-str", "datetime"])
def test_array_of_non_numeric_raises_typeerror(be, data):
    with pytest.raises(TypeError):
        be.array(data)


@pytest.mark.parametrize("data, expected_shape", [
    (3.5, (1, 1)), (np.float64(-2.0), (1, 1)), (np.array(7.0), (1, 1)), (7, (1, 1)),
    ([1.0, 2.0, 3.0], (3, 1)), (np.arange(5.0), (5, 1)),
    (np.arange(6.0).reshape(2, 3), (2, 3)), (np.arange(6.0).reshape(1, 6), (1, 6)),
    (np.arange(24.0).reshape(2, 3, 4), (2, 3, 4)),
    (np.arange(24.0).reshape(1, 2, 1, 3, 4, 1), (1, 2, 1, 3, 4, 1)),
    (np.arange(64.0).reshape(2, 2, 2, 2, 2, 2), (2, 2, 2, 2, 2, 2)),
    (np.arange(4.0).reshape(1, 1, 1, 4), (1, 1, 1, 4)),
])
def test_array_shapes_and_values(be, data, expected_shape):
    t = be.array(data)
    assert t.shape == expected_shape
    assert t.ndim == len(expected_shape)
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t.get(), np.asarray(data, dtype=np.float64).reshape(expected_shape))


def test_array_copies_the_host_data(be):
    host = np.arange(6.0).reshape(2, 3)
    t = be.array(host, dtype=np.float64)
    host[:] = -1
    np.testing.assert_array_equal(t.get(), np.arange(6.0).reshape(2, 3))


def test_array_of_bool_and_int_host_data(be):
    t = be.array(np.array([[True, False], [False, True]]))
    np.testing.assert_array_equal(t.get(), [[1.0, 0.0], [0.0, 1.0]])
    t = be.array(np.array([[1, -2], [3, 2 ** 40]], dtype=np.int64), dtype=np.float64)
    np.testing.assert_array_equal(t.get(), [[1.0, -2.0], [3.0, 2.0 ** 40]])


def test_array_name(be):
    assert be.array(np.ones((2, 2)), name="w").name == "w"
    assert be.zeros((2, 2), name="z").name == "z"
    assert be.empty((2, 2)).name is None


@pytest.mark.parametrize("like", ["zeros_like", "empty_like"])
@pytest.mark.parametrize("dtype", SUPPORTED)
def test_like_of_tensor_keeps_its_dtype(be, like, dtype):
    src = be.ones((3, 5), dtype=dtype)
    t = getattr(be, like)(src)
    assert t is not src
    assert t.shape == (3, 5)
    assert t.dtype == np.dtype(dtype)
    if like == "zeros_like":
        np.testing.assert_array_equal(t.get(), np.zeros((3, 5)))
    # a new tensor: writing it leaves the source alone
    t[:] = 7
    np.testing.assert_array_equal(src.get(), np.ones((3, 5)))


@pytest.mark.parametrize("like", ["zeros_like", "empty_like"])
@pytest.mark.parametrize("host_dtype", [np.float64, np.int64, np.float16, np.uint8])
@pytest.mark.parametrize("shape, expected", [((4, 6), (4, 6)), ((7,), (7, 1)), ((2, 3, 4), (2, 3, 4))])
def test_like_of_ndarray_uses_default_dtype(be, like, host_dtype, shape, expected):
    t = getattr(be, like)(np.ones(shape, dtype=host_dtype))
    assert t.shape == expected
    assert t.dtype == be.default_dtype
    if like == "zeros_like":
        np.testing.assert_array_equal(t.get(), np.zeros(expected))


@pytest.mark.parametrize("datatype", FLOATS)
def test_like_of_ndarray_follows_backend_default_dtype(be, datatype):
    from neonlike.backends import gen_backend
    be2 = gen_backend(be.backend_name, datatype=datatype)
    assert be2.default_dtype == np.dtype(datatype)
    assert be2.empty_like(np.ones((2, 3), dtype=np.int64)).dtype == np.dtype(datatype)
    assert be2.zeros_like(np.ones(4, dtype=np.float32)).dtype == np.dtype(datatype)
    assert be2.zeros_like(be2.ones((2, 2), dtype=np.uint8)).dtype == np.uint8
    assert be2.array([1.0, 2.0]).dtype == np.dtype(datatype)
    assert be2.empty((2, 2)).dtype == np.dtype(datatype)


@pytest.mark.parametrize("value", [0.0, -0.0, 2.5, -1e30, 1e-30, np.inf, -np.inf, np.nan,
                                   np.float32(3.25), np.int64(-4), True])
@pytest.mark.parametrize("dtype", SUPPORTED)
def test_fill(be, dtype, value):
    t = be.empty((2, 3), dtype=dtype)
    assert t.fill(value) is t
    np.testing.assert_array_equal(t.get(), stored(np.full((2, 3), float(value)), dtype))
    assert t.get().dtype == np.dtype(dtype)


def test_fill_minus_zero_keeps_sign(be):
    t = be.ones((2, 2), dtype=np.float64)
    t.fill(-0.0)
    assert np.all(np.signbit(t.get()))


def test_copy_assigns_into_self_and_returns_self(be, rng):
    src_vals = rng.standard_normal((4, 5))
    src = be.array(src_vals)
    dst = be.zeros((4, 5))
    assert dst.copy(src) is dst
    np.testing.assert_array_equal(dst.get(), src_vals.astype(np.float32))
    # a deep copy: later writes to the source do not reach dst
    src[:] = 0
    np.testing.assert_array_equal(dst.get(), src_vals.astype(np.float32))
    # copy of an op-tree, a number, an array
    assert dst.copy(src + 2) is dst
    np.testing.assert_array_equal(dst.get(), np.full((4, 5), 2.0))
    assert dst.copy(-3.5) is dst
    np.testing.assert_array_equal(dst.get(), np.full((4, 5), -3.5))
    host = rng.standard_normal((4, 5))
    assert dst.copy(host) is dst
    np.testing.assert_array_equal(dst.get(), host.astype(np.float32))


def test_self_copy_is_identity(be, rng):
    vals = rng.standard_normal((3, 3))
    t = be.array(vals)
    assert t.copy(t) is t
    np.testing.assert_array_equal(t.get(), vals.astype(np.float32))


def test_get_is_always_a_copy(be):
    t = be.array(base_data(), dtype=np.float64)
    got = t.get()
    got[:] = -99
    np.testing.assert_array_equal(t.get(), base_data())
    # also for views
    v = t[1:, ::2]
    got = v.get()
    got[:] = -99
    np.testing.assert_array_equal(t.get(), base_data())
    # two gets are distinct arrays
    assert t.get() is not t.get()
    assert not np.shares_memory(t.get(), t.get())
    # asnumpyarray is a copy too
    a = t.asnumpyarray()
    a[:] = -1
    np.testing.assert_array_equal(t.get(), base_data())


@pytest.mark.parametrize("host, expected", [
    (np.arange(12.0).reshape(3, 4), np.arange(12.0).reshape(3, 4)),            # same shape
    (np.arange(4.0).reshape(1, 4), np.tile(np.arange(4.0), (3, 1))),           # row broadcasts
    (np.arange(3.0).reshape(3, 1), np.repeat(np.arange(3.0)[:, None], 4, 1)),  # column broadcasts
    (np.arange(3.0), np.repeat(np.arange(3.0)[:, None], 4, 1)),                # 1-D (n,) is (n, 1)
    (np.float64(5.0), np.full((3, 4), 5.0)),                                   # a scalar broadcasts
    (np.arange(12.0), np.arange(12.0).reshape(3, 4)),                          # same size
    (np.arange(12.0).reshape(4, 3), np.arange(12.0).reshape(3, 4)),            # same size
    (np.arange(12.0).reshape(2, 2, 3), np.arange(12.0).reshape(3, 4)),         # same size
])
def test_set(be, host, expected):
    t = be.zeros((3, 4))
    assert t.set(host) is t
    np.testing.assert_array_equal(t.get(), expected)


@pytest.mark.parametrize("host_shape", [(5,), (3, 5), (4, 4), (2, 4, 2), (13,), (4, 1)])
def test_set_wrong_size_raises_naming_both_shapes(be, host_shape):
    t = be.array(base_data())
    with pytest.raises(ValueError) as excinfo:
        t.set(np.ones(host_shape))
    msg = str(excinfo.value)
    assert str(host_shape) in msg and str((3, 4)) in msg, msg
    np.testing.assert_array_equal(t.get(), base_data())


def test_set_non_numeric_raises_typeerror(be):
    t = be.zeros((1, 2))
    with pytest.raises(TypeError):
        t.set(np.array(["a", "b"]))
    np.testing.assert_array_equal(t.get(), np.zeros((1, 2)))


@pytest.mark.parametrize("dtype", SUPPORTED)
def test_set_applies_the_store_rule(be, dtype):
    host = np.array([[0.0, 1.5, 2.5, -2.5, 3.5, -0.5],
                     [1e10, -1e10, np.nan, np.inf, -np.inf, 65504.5]])
    t = be.zeros((2, 6), dtype=dtype)
    t.set(host)
    np.testing.assert_array_equal(t.get(), stored(host, dtype))


# -------------------------------------------------------------------- [:] assignment

def test_setitem_from_tensor(be, rng):
    vals = rng.standard_normal((3, 4))
    src = be.array(vals)
    out = be.zeros((3, 4))
    out[:] = src
    np.testing.assert_array_equal(out.get(), vals.astype(np.float32))
    src[:] = 0  # out holds its own values
    np.testing.assert_array_equal(out.get(), vals.astype(np.float32))


@pytest.mark.parametrize("src_shape", [(1, 4), (3, 1), (1, 1)])
def test_setitem_from_broadcasting_tensor(be, src_shape):
    vals = np.arange(np.prod(src_shape), dtype=np.float64).reshape(src_shape) + 1
    out = be.zeros((3, 4))
    out[:] = be.array(vals)
    np.testing.assert_array_equal(out.get(), np.broadcast_to(vals, (3, 4)))


@pytest.mark.parametrize("src_shape", [(4, 3), (3, 5), (2, 4), (4, 1), (3, 4, 1), (2, 3, 4)])
def test_setitem_from_non_broadcasting_tensor_raises(be, src_shape):
    out = be.array(base_data())
    with pytest.raises(ValueError):
        out[:] = be.ones(src_shape)
    np.testing.assert_array_equal(out.get(), base_data())


def test_setitem_from_optree(be, rng):
    a_vals, b_vals = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    a, b = be.array(a_vals), be.array(b_vals)
    out = be.zeros((3, 4))
    out[:] = a * b + 1
    a32, b32 = a_vals.astype(np.float32).astype(np.float64), b_vals.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(out.get(), a32 * b32 + 1, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("value", [2.5, -7, 0, np.float32(1.25), np.float64(-3.0), np.int64(9),
                                   np.int8(-3), np.uint16(65535), np.array(4.5), np.array(3),
                                   np.float16(0.5), np.bool_(True)],
                         ids=repr)
def test_setitem_from_scalar(be, value):
    out = be.zeros((2, 3))
    out[:] = value
    np.testing.assert_array_equal(out.get(), np.full((2, 3), float(value)))


def test_setitem_from_ndarray(be, rng):
    vals = rng.standard_normal((3, 4))
    out = be.zeros((3, 4), dtype=np.float64)
    out[:] = vals
    np.testing.assert_array_equal(out.get(), vals)
    vals[:] = 0  # copied, not aliased
    assert not np.all(out.get() == 0)
    # a row broadcasts
    out[:] = np.arange(4.0).reshape(1, 4)
    np.testing.assert_array_equal(out.get(), np.tile(np.arange(4.0), (3, 1)))


def test_setitem_wrong_size_ndarray_raises(be):
    out = be.array(base_data())
    with pytest.raises(ValueError):
        out[:] = np.ones((5, 5))
    np.testing.assert_array_equal(out.get(), base_data())


@pytest.mark.parametrize("value", ["abc", None, [1, 2, 3], {"a": 1}, object()],
                         ids=lambda v: type(v).__name__)
def test_setitem_from_unsupported_value_raises_typeerror(be, value):
    out = be.array(base_data())
    with pytest.raises(TypeError):
        out[:] = value
    np.testing.assert_array_equal(out.get(), base_data())


@pytest.mark.parametrize("dtype", SUPPORTED)
def test_setitem_from_float_tensor_applies_store_rule(be, dtype):
    # float32 source: every value here is exactly representable in float32
    host = np.array([[0.0, 1.5, 2.5, -2.5, 3.5, -0.5, 127.5, 255.5],
                     [3e9, -3e9, np.nan, np.inf, -np.inf, 65504.0, 1e38, -128.5]])
    src = be.array(host, dtype=np.float32)
    out = be.zeros((2, 8), dtype=dtype)
    out[:] = src
    np.testing.assert_array_equal(out.get(), stored(host.astype(np.float32), dtype))


def test_setitem_aliasing_reads_before_writing(be):
    host = base_data((4, 4))
    t = be.array(host, dtype=np.float64)
    t[:] = t.T
    np.testing.assert_array_equal(t.get(), host.T)
    t = be.array(host, dtype=np.float32)
    t[1:] = t[:-1] + 0
    expected = host.copy()
    expected[1:] = host[:-1]
    np.testing.assert_array_equal(t.get(), expected)
    t = be.array(host, dtype=np.float32)
    t[:, ::-1] = t
    np.testing.assert_array_equal(t.get(), host[:, ::-1])
    t = be.array(host, dtype=np.int16)
    t.transpose(out=t)
    np.testing.assert_array_equal(t.get(), host.T)


@pytest.mark.parametrize("shape, exc", [((-1, 2), ValueError), ((2, -3), ValueError),
                                        ((2.5,), TypeError), ("ab", TypeError), (None, TypeError)],
                         ids=repr)
@pytest.mark.parametrize("alloc", ["empty", "zeros", "ones"])
def test_allocation_bad_shape(be, alloc, shape, exc):
    with pytest.raises(exc):
        getattr(be, alloc)(shape)


@pytest.mark.parametrize("dtype, values, expected", [
    ("int8", [[1, 2, -2, 0]], [[100, 127, -128, 0]]),        # neon's CPU wrapped 2*100 to -56
    ("uint8", [[1, 2, 3, 0]], [[100, 200, 255, 0]]),
    ("int16", [[300, 400, -400, 1]], [[30000, 32767, -32768, 100]]),
])
def test_int_tree_result_saturates(be, dtype, values, expected):
    x = be.array(np.array(values), dtype=dtype)
    out = be.empty(x.shape, dtype=dtype)
    out[:] = x * 100
    np.testing.assert_array_equal(out.get(), np.array(expected, dtype=dtype))


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_wide_int_tree_is_exact_and_saturates(be, dtype):
    info = np.iinfo(dtype)
    vals = np.array([[info.max, info.max - 1, info.min, 123456789]], dtype=np.int64)
    x = be.array(vals, dtype=dtype)
    out = be.empty(x.shape, dtype=dtype)
    out[:] = x + 1  # computes in float64: every int32/uint32 value is exact
    expected = np.clip(vals + 1, int(info.min), int(info.max)).astype(dtype)
    np.testing.assert_array_equal(out.get(), expected)
    out[:] = x - 1
    expected = np.clip(vals - 1, int(info.min), int(info.max)).astype(dtype)
    np.testing.assert_array_equal(out.get(), expected)


@pytest.mark.parametrize("dtype", SUPPORTED)
def test_setitem_into_strided_view_of_each_dtype(be, dtype):
    host = np.arange(20, dtype=np.float64).reshape(4, 5)
    t = be.array(host, dtype=dtype)
    t[::-2, 1::2] = np.array([[7.0, 8.0], [9.0, 10.0]])
    t[1:3, 0] = 2.5
    expected = host.copy()
    expected[::-2, 1::2] = [[7.0, 8.0], [9.0, 10.0]]
    expected[1:3, 0] = 2.5
    np.testing.assert_array_equal(t.get(), stored(expected, dtype))


# ==================================================================== dtype round trips

@pytest.mark.parametrize("dtype", FLOATS)
def test_float_round_trip(be, dtype):
    host = np.array([[0.0, -0.0, 1e-30, 5e-324, 1e-8, 6e-8, 1.0 / 3.0, -2.75],
                     [1e30, 3e38, 1e39, -7e4, 65519.0, np.inf, -np.inf, np.nan]])
    t = be.array(host, dtype=dtype)
    got = t.get()
    assert got.dtype == np.dtype(dtype)
    with np.errstate(over="ignore"):
        expected = host.astype(dtype)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_round_trip_exact_values(be, dtype):
    info = np.finfo(dtype)
    host = np.array([[info.max, info.min, info.tiny, info.smallest_subnormal, info.eps, 1.0]],
                    dtype=dtype)
    t = be.array(host, dtype=dtype)
    np.testing.assert_array_equal(t.get(), host)
    # and back in again, from a tensor's own host copy
    t2 = be.array(t.get(), dtype=dtype)
    np.testing.assert_array_equal(t2.get(), host)


@pytest.mark.parametrize("dtype", INTS)
def test_int_round_trip_in_range(be, dtype):
    info = np.iinfo(dtype)
    host = np.array([[info.min, info.min + 1, 0, 1, info.max - 1, info.max]], dtype=np.int64)
    t = be.array(host, dtype=dtype)
    got = t.get()
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, host.astype(dtype))
    # through the tensor's own dtype
    np.testing.assert_array_equal(be.array(got, dtype=dtype).get(), got)


@pytest.mark.parametrize("dtype", INTS)
def test_int_store_rule_from_float_host(be, dtype):
    host = np.array([[0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, -0.0],
                     [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -3e9, 4294967295.4, 70000.5, -129.5]])
    t = be.array(host, dtype=dtype)
    expected = store_int(host, dtype)
    np.testing.assert_array_equal(t.get(), expected)
    # spot checks of the rule itself
    g = t.get()
    info = np.iinfo(dtype)
    assert g[0, 0] == 0 and g[0, 1] == 2 and g[0, 2] == 2 and g[0, 3] == 4
    assert g[1, 0] == 0                      # nan -> 0
    assert g[1, 1] == info.max               # inf -> max
    assert g[1, 2] == info.min               # -inf -> min
    assert g[1, 3] == info.max and g[1, 4] == info.min


@pytest.mark.parametrize("dtype", INTS)
def test_int_store_rule_from_wide_int_host(be, dtype):
    info = np.iinfo(dtype)
    host = np.array([[int(info.max) + 1, int(info.min) - 1, 2 ** 40, -(2 ** 40), 0]], dtype=np.int64)
    t = be.array(host, dtype=dtype)
    np.testing.assert_array_equal(t.get(), [[info.max, info.min, info.max, info.min, 0]])


@pytest.mark.parametrize("dtype", INTS)
def test_int_store_rule_on_fill_and_setitem(be, dtype):
    info = np.iinfo(dtype)
    t = be.zeros((2, 2), dtype=dtype)
    for value, expected in [(np.nan, 0), (np.inf, info.max), (-np.inf, info.min), (2.5, 2),
                            (3.5, 4), (-2.5, -2 if info.min < 0 else 0), (1e20, info.max),
                            (-1e20, info.min), (2 ** 40, info.max)]:
        t[:] = value
        np.testing.assert_array_equal(t.get(), np.full((2, 2), expected, dtype=dtype),
                                      err_msg=f"value {value!r}")


# ==================================================================== views

SLICE_KEYS = [
    (slice(1, 3), slice(None)), (slice(None, None, -1),), (slice(None), slice(None, None, -2)),
    (slice(-2, None), slice(-3, -1)), (slice(None, None, 2), slice(3, 0, -1)),
    (slice(-1, -4, -1), slice(1, None, 2)), (slice(5, 10),), (slice(0, 0),),
    (slice(None), slice(1, 2)), (slice(-100, 100), slice(None, -10)),
]


@pytest.mark.parametrize("key", SLICE_KEYS, ids=repr)
def test_basic_slicing_reads_like_numpy(be, key):
    host = base_data((4, 5))
    t = be.array(host, dtype=np.float64)
    v = t[key]
    expected = host[key]
    assert v.shape == expected.shape
    np.testing.assert_array_equal(v.get(), expected)


@pytest.mark.parametrize("key", SLICE_KEYS, ids=repr)
def test_basic_slicing_writes_through_to_base(be, key):
    host = base_data((4, 5))
    t = be.array(host, dtype=np.float64)
    v = t[key]
    expected = host.copy()
    if expected[key].size == 0:
        v[:] = -1.0
        np.testing.assert_array_equal(t.get(), host)
        return
    fill = -np.arange(expected[key].size, dtype=np.float64).reshape(expected[key].shape) - 1
    v[:] = fill
    expected[key] = fill
    np.testing.assert_array_equal(t.get(), expected)
    # and an op-tree written through the view, reading the view itself
    v[:] = v * 2 + 1
    expected[key] = expected[key] * 2 + 1
    np.testing.assert_array_equal(t.get(), expected)
    # and through the base: the view sees it
    t[:] = 0.5
    np.testing.assert_array_equal(v.get(), np.full(expected[key].shape, 0.5))


def test_setitem_with_key_writes_view(be):
    host = base_data((4, 5))
    t = be.array(host, dtype=np.float64)
    expected = host.copy()
    t[1:3, ::-2] = 9
    expected[1:3, ::-2] = 9
    t[::-1, 0] = np.arange(4.0)
    expected[::-1, 0] = np.arange(4.0)
    t[-1] = be.array(np.full((1, 5), -4.0))
    expected[-1] = -4.0
    t[0, :] = t[1, :] + t[2, :]
    expected[0, :] = expected[1, :] + expected[2, :]
    np.testing.assert_array_equal(t.get(), expected)


@st.composite
def shapes_and_keys(draw):
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    nkey = draw(st.integers(1, ndim))
    key = []
    for d in shape[:nkey]:
        start = draw(st.none() | st.integers(-d - 2, d + 2))
        stop = draw(st.none() | st.integers(-d - 2, d + 2))
        step = draw(st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3]))
        key.append(slice(start, stop, step))
    return shape, tuple(key)


@settings(suppress_health_check=[*settings().suppress_health_check,
                                 HealthCheck.function_scoped_fixture])
@given(shapes_and_keys())
def test_slicing_property_matches_numpy(cpu, shape_key):
    shape, key = shape_key
    host = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    t = cpu.array(host, dtype=np.float64)
    v = t[key]
    assert v.shape == host[key].shape
    np.testing.assert_array_equal(v.get(), host[key])
    expected = host.copy()
    expected[key] = -1
    v[:] = -1
    np.testing.assert_array_equal(t.get(), expected)


@pytest.mark.parametrize("key, np_key", [
    (0, (slice(0, 1),)), (2, (slice(2, 3),)), (-1, (slice(2, 3),)), (-3, (slice(0, 1),)),
    ((slice(None), 0), (slice(None), slice(0, 1))),
    ((slice(None), -1), (slice(None), slice(3, 4))),
    ((1, 1), (slice(1, 2), slice(1, 2))), ((-1, -4), (slice(2, 3), slice(0, 1))),
    ((1, slice(1, None, 2)), (slice(1, 2), slice(1, None, 2))),
    ((slice(None, None, -1), 2), (slice(None, None, -1), slice(2, 3))),
    ((np.int64(1), np.int32(2)), (slice(1, 2), slice(2, 3))),
], ids=repr)
def test_integer_index_keeps_2d(be, key, np_key):
    host = base_data((3, 4))
    t = be.array(host, dtype=np.float64)
    v = t[key]
    expected = host[np_key]
    assert v.shape == expected.shape and v.ndim == 2
    np.testing.assert_array_equal(v.get(), expected)
    v[:] = -5
    host[np_key] = -5
    np.testing.assert_array_equal(t.get(), host)


def test_integer_index_shapes_on_2d(be):
    x = be.zeros((3, 4))
    assert x[0].shape == (1, 4)
    assert x[:, 0].shape == (3, 1)
    assert x[1, 1].shape == (1, 1)
    assert x[-1].shape == (1, 4)
    assert x[:, -2].shape == (3, 1)
    # the seed's fancy slicing
    assert x[:, 1].shape == (3, 1)
    assert x[:, 3:10].shape == (3, 1)
    assert x[:, 1:10].shape == (3, 3)


@pytest.mark.parametrize("key, expected_shape", [
    (0, (3, 4)), (-1, (3, 4)), ((slice(None), 0), (2, 4)), ((slice(None), slice(None), -1), (2, 3)),
    ((0, slice(1, 3)), (2, 4)), ((1, slice(None), slice(None, None, -1)), (3, 4)),
    ((0, 0), (1, 4)), ((0, slice(None), 2), (1, 3)), ((1, 2, 3), (1, 1)),
    ((slice(0, 2),), (2, 3, 4)), ((slice(None), slice(0, 1)), (2, 1, 4)),
], ids=repr)
def test_integer_index_on_3d_drops_the_axis(be, key, expected_shape):
    host = base_data((2, 3, 4))
    t = be.array(host, dtype=np.float64)
    v = t[key]
    assert v.shape == expected_shape
    np.testing.assert_array_equal(v.get(), host[key].reshape(expected_shape))
    v[:] = -7
    host[key] = -7
    np.testing.assert_array_equal(t.get(), host)


def test_slicing_keeps_size_one_axes_on_nd(be):
    # neon's CPU dropped every size-1 axis of a >2-D view; neonlike keeps them
    t = be.zeros((2, 1, 4))
    assert t[0:2].shape == (2, 1, 4)
    assert t[:, :, 1:3].shape == (2, 1, 2)
    t6 = be.zeros((1, 2, 1, 3, 1, 2))
    assert t6[:, 1:].shape == (1, 1, 1, 3, 1, 2)
    assert t6[0].shape == (2, 1, 3, 1, 2)


@pytest.mark.parametrize("key, np_key", [
    ((Ellipsis, 0), (Ellipsis, slice(0, 1))),
    ((0, Ellipsis), (slice(0, 1), Ellipsis)),
    ((Ellipsis, slice(1, 3)), (Ellipsis, slice(1, 3))),
    ((slice(1, None), Ellipsis, -1), (slice(1, None), slice(3, 4))),
    (Ellipsis, Ellipsis),
], ids=repr)
def test_ellipsis_on_2d(be, key, np_key):
    host = base_data((3, 4))
    t = be.array(host, dtype=np.float64)
    v = t[key]
    assert v.shape == host[np_key].shape
    np.testing.assert_array_equal(v.get(), host[np_key])


@pytest.mark.parametrize("key", [(Ellipsis, 1), (0, Ellipsis), (Ellipsis, slice(1, 3), 0),
                                 (0, Ellipsis, slice(None, None, -1)), (1, Ellipsis, 2, 3)], ids=repr)
def test_ellipsis_on_4d(be, key):
    host = base_data((2, 3, 4, 5))
    t = be.array(host, dtype=np.float64)
    v = t[key]
    expected = host[key]
    if expected.ndim < 2:  # fewer than 2 dims: leading 1s
        expected = expected.reshape((1,) * (2 - expected.ndim) + expected.shape)
    assert v.shape == expected.shape
    np.testing.assert_array_equal(v.get(), expected)
    v[:] = -1
    host[key] = -1
    np.testing.assert_array_equal(t.get(), host)


def test_full_slice_and_ellipsis_return_self(be):
    t = be.zeros((3, 4))
    assert t[:] is t
    assert t[...] is t


@pytest.mark.parametrize("shape, key", [
    ((3, 4), 3), ((3, 4), -4), ((3, 4), (0, 4)), ((3, 4), (slice(None), -5)), ((3, 4), (2, -5)),
    ((3, 4), (0, 0, 0)), ((3, 4), (Ellipsis, 0, 0, 0)), ((3, 4), (Ellipsis, Ellipsis)),
    ((2, 3, 4), 2), ((2, 3, 4), (0, 3)), ((2, 3, 4), (0, 0, -5)),
], ids=repr)
def test_out_of_range_index_raises_indexerror(be, shape, key):
    t = be.zeros(shape)
    with pytest.raises(IndexError):
        t[key]
    with pytest.raises(IndexError):
        t[key] = 1.0
    np.testing.assert_array_equal(t.get(), np.zeros(shape))


@pytest.mark.parametrize("key", [
    [0, 1], np.array([0, 2]), np.array([True, False, True]), True, False, None,
    (slice(None), None), (None, 0), (slice(None), [0, 1]), 1.0, "a",
], ids=repr)
def test_fancy_bool_none_index_raises_typeerror_pointing_to_take(be, key):
    t = be.array(base_data())
    with pytest.raises(TypeError, match="take"):
        t[key]
    with pytest.raises(TypeError, match="take"):
        t[key] = 0.0
    np.testing.assert_array_equal(t.get(), base_data())


def test_index_with_tensor_raises_typeerror(be):
    t = be.array(base_data())
    idx = be.array(np.array([0, 1]), dtype=np.int32)
    with pytest.raises(TypeError, match="take"):
        t[idx]


# -------------------------------------------------------------------- reshape

@pytest.mark.parametrize("args, expected", [
    ((-1,), (12, 1)), (((-1,),), (12, 1)), ((12,), (12, 1)), ((2, -1), (2, 6)),
    (((-1, 3),), (4, 3)), (((2, 2, 3),), (2, 2, 3)), ((1, 2, -1, 1, 2, 1), (1, 2, 3, 1, 2, 1)),
    (((6, 2),), (6, 2)), ((1, 12), (1, 12)),
])
def test_reshape_is_a_view(be, args, expected):
    host = base_data((3, 4))
    t = be.array(host, dtype=np.float64)
    r = t.reshape(*args)
    assert r.shape == expected
    np.testing.assert_array_equal(r.get(), host.reshape(expected))
    assert r.base is t
    r[:] = -np.arange(12.0).reshape(expected)
    np.testing.assert_array_equal(t.get(), -np.arange(12.0).reshape(3, 4))


def test_reshape_of_contiguous_view(be):
    host = base_data((4, 3))
    t = be.array(host, dtype=np.float64)
    r = t[1:3].reshape(-1)
    assert r.shape == (6, 1)
    np.testing.assert_array_equal(r.get(), host[1:3].reshape(6, 1))
    r[:] = 0
    host[1:3] = 0
    np.testing.assert_array_equal(t.get(), host)


@pytest.mark.parametrize("view", ["T", "step", "column"])
def test_reshape_needing_a_copy_raises(be, view):
    t = be.array(base_data((3, 4)))
    v = {"T": t.T, "step": t[::2, ::3], "column": t[:, 1:3]}[view]
    with pytest.raises(ValueError):
        v.reshape(-1)
    np.testing.assert_array_equal(t.get(), base_data((3, 4)))


@pytest.mark.parametrize("args", [(5,), (5, -1), (3, 5), (-1, -1), ((2, 2, 2),), (0, -1), (13, 1)])
def test_reshape_size_mismatch_raises(be, args):
    t = be.zeros((3, 4))
    with pytest.raises(ValueError):
        t.reshape(*args)


# -------------------------------------------------------------------- transpose

def test_T_2d_is_a_view(be):
    host = base_data((3, 4))
    t = be.array(host, dtype=np.float64)
    tt = t.T
    assert tt.shape == (4, 3)
    assert tt.base is t
    np.testing.assert_array_equal(tt.get(), host.T)
    tt[0] = 100.0         # row 0 of the transpose is column 0 of the base
    host[:, 0] = 100.0
    np.testing.assert_array_equal(t.get(), host)
    np.testing.assert_array_equal(tt.T.get(), host)
    assert tt.T.shape == (3, 4)


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 1, 3, 5), (1, 2, 1, 2, 3, 2)])
def test_T_nd_swaps_last_two(be, shape):
    host = base_data(shape)
    t = be.array(host, dtype=np.float64)
    tt = t.T
    expected = np.swapaxes(host, -1, -2)
    assert tt.shape == expected.shape
    np.testing.assert_array_equal(tt.get(), expected)
    tt[:] = -np.swapaxes(host, -1, -2)
    np.testing.assert_array_equal(t.get(), -host)


def test_transpose_method(be, rng):
    vals = rng.standard_normal((3, 5))
    t = be.array(vals)
    v = t.transpose()
    assert v.shape == (5, 3)
    np.testing.assert_array_equal(v.get(), vals.T.astype(np.float32))
    o = be.zeros((5, 3))
    t.transpose(out=o)
    np.testing.assert_array_equal(o.get(), vals.T.astype(np.float32))
    # a new buffer: writing o leaves t alone
    o[:] = 0
    np.testing.assert_array_equal(t.get(), vals.astype(np.float32))
    with pytest.raises(ValueError):
        t.transpose(out=be.zeros((3, 5)))


# -------------------------------------------------------------------- take

@pytest.mark.parametrize("indices, axis", [
    ([2, 0], 1), ([0, 0, 2], 0), (np.array([[1], [2]]), 0), ([-1], 1), ([3, 1, 0, 2], 1),
    (np.array([5, 0, 11]), None), ([1], 0),
], ids=repr)
def test_take_returns_a_new_tensor(be, indices, axis):
    host = base_data((3, 4))
    t = be.array(host, dtype=np.float64)
    r = t.take(indices, axis=axis)
    assert isinstance(r, Tensor)
    flat = np.asarray(indices).ravel()
    if axis is None:
        expected = np.take(host.ravel(), flat).reshape(1, -1)
    else:
        expected = np.take(host, flat, axis=axis)
    assert r.shape == expected.shape
    np.testing.assert_array_equal(r.get(), expected)
    r[:] = -1  # a copy: writes do not reach t
    np.testing.assert_array_equal(t.get(), host)


def test_take_into_out(be):
    host = base_data((3, 4))
    t = be.array(host, dtype=np.float64)
    o = be.zeros((2, 4), dtype=np.float64)
    t.take([2, 0], axis=0, out=o)
    np.testing.assert_array_equal(o.get(), host[[2, 0]])
    o2 = be.zeros((3, 2), dtype=np.float32)
    t.take(np.array([3, 3]), axis=1, out=o2)
    np.testing.assert_array_equal(o2.get(), host[:, [3, 3]])
    o3 = be.zeros((3, 2))
    be.take(t, [1, 0], axis=1, out=o3)
    np.testing.assert_array_equal(o3.get(), host[:, [1, 0]])


# -------------------------------------------------------------------- share, base, metadata

def test_share(be):
    host = base_data((3, 4))
    t = be.array(host)
    s = t.share((2, 3))
    assert s.shape == (2, 3)
    assert s.dtype == t.dtype
    np.testing.assert_array_equal(s.get(), host.ravel()[:6].reshape(2, 3))
    s[:] = -1
    expected = host.copy().ravel()
    expected[:6] = -1
    np.testing.assert_array_equal(t.get(), expected.reshape(3, 4))
    t[:] = 2
    np.testing.assert_array_equal(s.get(), np.full((2, 3), 2.0))
    s1 = t.share(5)
    assert s1.shape == (5, 1)
    s1[:] = 8
    np.testing.assert_array_equal(t.get().ravel()[:5], np.full(5, 8.0))


def test_base_and_original_base(be):
    t = be.zeros((4, 6))
    assert t.base is None
    assert t._original_base is t
    v = t[1:]
    assert v.base is t and v._original_base is t
    w = v[:, ::2]
    assert w.base is v and w._original_base is t
    x = w.T
    assert x.base is w and x._original_base is t
    r = t.reshape(6, 4)
    assert r.base is t and r._original_base is t
    r2 = r[0]
    assert r2._original_base is t
    s = t.share((2, 2))
    assert s._original_base is t


@pytest.mark.parametrize("shape", [(3, 4), (1, 1), (5, 1), (2, 3, 4), (2, 1, 2, 1, 3, 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8"])
def test_metadata(be, shape, dtype):
    t = be.zeros(shape, dtype=dtype, name="meta")
    assert t.shape == shape
    assert isinstance(t.shape, tuple)
    assert t.dtype == np.dtype(dtype)
    assert t.size == int(np.prod(shape))
    assert t.name == "meta"
    assert t.ndim == len(shape)
    assert len(t) == shape[0]
    v = t[0]
    assert len(v) == v.shape[0]
    assert v.dtype == t.dtype
    assert v.size == int(np.prod(v.shape))


# ==================================================================== N-D tensors

def test_6d_arithmetic(be, rng):
    a_vals = rng.standard_normal((2, 3, 1, 2, 3, 2))
    b_vals = rng.standard_normal((1, 3, 4, 1, 3, 1))
    a, b = be.array(a_vals), be.array(b_vals)
    out = be.empty((2, 3, 4, 2, 3, 2))
    out[:] = a * b - a / (abs(b) + 1) + 2
    a32, b32 = (v.astype(np.float32).astype(np.float64) for v in (a_vals, b_vals))
    expected = a32 * b32 - a32 / (np.abs(b32) + 1) + 2
    np.testing.assert_allclose(out.get(), expected, rtol=1e-5, atol=1e-6)
    # a 2-D operand broadcasts against the trailing axes
    c = be.array(rng.standard_normal((3, 2)))
    out2 = be.empty(a.shape)
    out2[:] = a + c
    np.testing.assert_allclose(out2.get(), a32 + c.get().astype(np.float64), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("axis, keepdims", [
    (None, True), (None, False), (0, True), (-1, True), (3, False), ((1, 3), True),
    ((0, 2, 5), False), ((0, 1, 2, 3, 4), False), ((0, 1, 2, 3, 4, 5), True),
])
@pytest.mark.parametrize("red", ["sum", "max", "min", "mean"])
def test_6d_reductions(be, rng, red, axis, keepdims):
    vals = rng.standard_normal((2, 3, 1, 2, 3, 2))
    a = be.array(vals, dtype=np.float64)
    tree = getattr(be, red)(a, axis=axis, keepdims=keepdims)
    expected = getattr(np, red)(vals, axis=axis, keepdims=keepdims)
    if expected.ndim < 2:
        expected = expected.reshape((1,) * (2 - expected.ndim) + expected.shape)
    assert tree.shape == expected.shape
    out = be.empty(tree.shape, dtype=np.float64)
    out[:] = tree
    np.testing.assert_allclose(out.get(), expected, rtol=1e-12, atol=1e-12)


def test_6d_views_and_slices(be):
    host = base_data((2, 3, 4, 1, 2, 3))
    t = be.array(host, dtype=np.float64)
    for key in [(0,), (1, slice(None, None, -1)), (Ellipsis, 2), (0, 1, 2, 0, 1),
                (slice(None), slice(1, 3), slice(None, None, 2))]:
        v = t[key]
        expected = host[key]
        if expected.ndim < 2:
            expected = expected.reshape((1,) * (2 - expected.ndim) + expected.shape)
        assert v.shape == expected.shape, key
        np.testing.assert_array_equal(v.get(), expected)
    t[1, :, ::2] = t[0, :, ::2] * 10
    host[1, :, ::2] = host[0, :, ::2] * 10
    np.testing.assert_array_equal(t.get(), host)


# ==================================================================== host interop

@pytest.mark.parametrize("dtype", SUPPORTED)
def test_np_asarray_gives_values(be, dtype):
    host = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = be.array(host, dtype=dtype)
    a = np.asarray(t)
    assert isinstance(a, np.ndarray)
    assert a.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(a, host)
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), host)
    np.testing.assert_array_equal(np.array(t), host)
    # views too
    np.testing.assert_array_equal(np.asarray(t[:, ::-1]), host[:, ::-1])


def test_iterating_raises_typeerror(be):
    t = be.zeros((3, 4))
    with pytest.raises(TypeError):
        iter(t)
    with pytest.raises(TypeError):
        list(t)
    with pytest.raises(TypeError):
        for _ in t:
            pass
    with pytest.raises(TypeError):
        tuple(t[0])


# ==================================================================== failed assignments

def test_failed_build_leaves_output_untouched(be):
    out = be.array(base_data((3, 4)))
    a, b = be.ones((3, 4)), be.ones((4, 3))
    with pytest.raises(ValueError) as excinfo:
        out[:] = a + b
    assert "(3, 4)" in str(excinfo.value) and "(4, 3)" in str(excinfo.value)
    np.testing.assert_array_equal(out.get(), base_data((3, 4)))
    # a tree whose shape does not fit the output
    with pytest.raises(ValueError):
        out[:] = be.ones((3, 5)) * 2
    with pytest.raises(ValueError):
        out[:] = be.sum(be.ones((2, 4)), axis=1)  # (2, 1) into (3, 4)
    np.testing.assert_array_equal(out.get(), base_data((3, 4)))


def test_failed_execution_leaves_output_untouched(be):
    host = base_data((3, 4))
    t = be.array(host)
    out = be.array(np.full((3, 2), 42.0))
    with pytest.raises(IndexError):
        be.take(t, [0, 9], axis=1, out=out)
    np.testing.assert_array_equal(out.get(), np.full((3, 2), 42.0))
    with pytest.raises(IndexError):
        out[:] = be.take(t, [1, -5], axis=1)
    np.testing.assert_array_equal(out.get(), np.full((3, 2), 42.0))
    with pytest.raises(IndexError):
        t.take([0, 3], axis=0, out=be.zeros((2, 4)))
    # the output being an operand of the failing tree does not matter either
    out2 = be.array(host)
    with pytest.raises(IndexError):
        out2[:] = out2 * 2 + be.reshape(be.take(t, [0, 1, 2, 12, 4, 5, 6, 7, 8, 9, 10, 11]), (3, 4))
    np.testing.assert_array_equal(out2.get(), host)


def test_failed_set_leaves_output_untouched(be):
    out = be.array(base_data((3, 4)))
    with pytest.raises(ValueError):
        out.set(np.ones(13))
    with pytest.raises(ValueError):
        out[1:] = np.ones((3, 4))
    np.testing.assert_array_equal(out.get(), base_data((3, 4)))
