"""neonlike.backends.cpu.vecmath: accuracy over the whole float32 range, special values, vectorization.

Every function runs inside an @njit(fastmath=False) loop, the way the numba renderer calls it, and is
compared with the float64 numpy reference rounded to float32. Errors are counted in float32 ulps: the
distance between the two results in the ordered list of float32 values (+0 and -0 count as one value,
FLT_MAX and inf are 1 apart), so 0 means correctly rounded. No timing here (see benchmarks/).
"""
from __future__ import annotations

import math
import platform
import re

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from neonlike.backends.cpu import vecmath as vm  # noqa: E402

F32 = np.float32
LN2 = math.log(2.0)
SAFELOG_MIN = F32(math.exp(-50.0))
STRIDE = 97                 # every 97th of the 2**32 bit patterns: 44.3 million float32 values
CHUNK = 1 << 22             # values per chunk, to keep memory modest


# The reference interpreter computes these in float32, and there e**-x (2**-x) overflows from
# x = -88.72284 (-128) down, so its sig is +0 there; vecmath follows it (issue 13), and the true
# value, a subnormal down to -103.97 (-149), is the reference everywhere else.
SIG_ZERO, SIG2_ZERO, EXP2_ZERO = F32(-88.72284), F32(-128.0), F32(-149.5)


def _ref_sig(x):
    return np.where(x <= SIG_ZERO, 0.0, 1.0 / (1.0 + np.exp(-x)))


def _ref_sig2(x):
    return np.where(x <= SIG2_ZERO, 0.0, 1.0 / (1.0 + np.exp2(-x)))


def _ref_exp2(x):
    # numpy's float32 exp2 is +0 from -149.5 down (2**-149.5 rounds to the smallest subnormal)
    return np.where(x <= EXP2_ZERO, 0.0, np.exp2(x))


# name -> (function, float64 numpy reference, max ulp error stated in vecmath's docstring)
FUNCS = {
    "exp32": (vm.exp32, np.exp, vm.MAX_ULP["exp32"]),
    "exp2_32": (vm.exp2_32, _ref_exp2, vm.MAX_ULP["exp2_32"]),
    "log32": (vm.log32, np.log, vm.MAX_ULP["log32"]),
    "log2_32": (vm.log2_32, np.log2, vm.MAX_ULP["log2_32"]),
    "tanh32": (vm.tanh32, np.tanh, vm.MAX_ULP["tanh32"]),
    "tanh2_32": (vm.tanh2_32, lambda x: np.tanh(x * LN2), vm.MAX_ULP["tanh2_32"]),
    "sig32": (vm.sig32, _ref_sig, vm.MAX_ULP["sig32"]),
    "sig2_32": (vm.sig2_32, _ref_sig2, vm.MAX_ULP["sig2_32"]),
    "softplus32": (vm.softplus32, lambda x: np.logaddexp(0.0, x), vm.MAX_ULP["softplus32"]),
    "safelog32": (vm.safelog32, lambda x: np.log(np.maximum(x, np.float64(SAFELOG_MIN))),
                  vm.MAX_ULP["safelog32"]),
}

_KERNELS: dict = {}


def kernel(fn):
    """An @njit loop applying `fn` elementwise (compiled once per function)."""
    if fn not in _KERNELS:
        @numba.njit(fastmath=False, error_model="numpy")
        def apply(x, out):
            for i in range(x.size):
                out[i] = fn(x[i])
        _KERNELS[fn] = apply
    return _KERNELS[fn]


def run(name, x):
    x = np.ascontiguousarray(x, dtype=F32)
    out = np.empty_like(x)
    kernel(FUNCS[name][0])(x, out)
    return out


def reference(name, x):
    with np.errstate(all="ignore"):
        return FUNCS[name][1](np.asarray(x, dtype=F32).astype(np.float64)).astype(F32)


def _ordered(a):
    """float32 -> int64 keys in value order; +0 and -0 share key 0."""
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, np.int64(-(2 ** 31)) - i, i)


NAN_MISMATCH = 1 << 40


def ulp_distance(got, ref):
    d = np.abs(_ordered(got) - _ordered(ref))
    gn, rn = np.isnan(got), np.isnan(ref)
    d[gn & rn] = 0
    d[gn ^ rn] = NAN_MISMATCH
    return d


def f32(*vals):
    return np.array(vals, dtype=F32)


def bits(*patterns):
    return np.array(patterns, dtype=np.uint32).view(F32)


_TINY = float(np.finfo(F32).tiny)
_MAX = float(np.finfo(F32).max)
_BASE = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
         _TINY, -_TINY, _MAX, -_MAX, 1e-45, -1e-45, 1e-40, -1e-40, 1e-30, -1e-30, 1e-7, -1e-7,
         # exp / sig / softplus overflow and underflow thresholds
         88.72283, 88.72284, 88.7229, 89.0, -87.33654, -87.33655, -88.0, -100.0, -103.0,
         -103.27893, -103.5, -103.97207, -103.97208, -104.0, -104.5, -200.0, 200.0,
         # exp2 / sig2 thresholds
         127.0, 127.99999, 128.0, 129.0, -126.0, -126.5, -149.0, -149.5, -149.99998, -150.0,
         -150.00002, -151.0, -152.0,
         # tanh / log branch points
         0.625, 0.62499994, 0.6250001, 0.9016844, 0.90168446, 9.0, 9.010913, 10.0, -10.0,
         0.70710677, 0.7071068, 1.4142135, 1.4142137, 17.0, -17.0, 40.0, -40.0,
         # safelog clamp
         float(SAFELOG_MIN), 1.9e-22, 2e-22, -1e-22]


def special_values():
    base = np.array(_BASE, dtype=F32)
    with np.errstate(over="ignore"):
        up = np.nextafter(base, F32(np.inf))
        down = np.nextafter(base, F32(-np.inf))
    powers = np.ldexp(F32(1.0), np.arange(-149, 128)).astype(F32)
    return np.concatenate([base, up, down, powers, -powers,
                           bits(0x7F800001, 0x7FBFFFFF, 0x7FFFFFFF, 0xFF800001, 0xFFFFFFFF)])


def check(name, x, bound):
    got, ref = run(name, x), reference(name, x)
    d = ulp_distance(got, ref)
    worst = int(d.argmax())
    assert d[worst] <= bound, (
        f"{name}({x[worst]!r}) = {got[worst]!r}, reference {ref[worst]!r}: "
        f"{'nan mismatch' if d[worst] == NAN_MISMATCH else f'{d[worst]} ulp'} > {bound} ulp")
    return int(d.max())


# ------------------------------------------------------------ (1) whole float32 range

@pytest.mark.parametrize("name", list(FUNCS))
def test_whole_range_within_stated_ulp(name):
    bound = FUNCS[name][2]
    worst = check(name, special_values(), bound)
    total = 1 << 32
    for start in range(0, total, CHUNK * STRIDE):
        patterns = np.arange(start, min(start + CHUNK * STRIDE, total), STRIDE, dtype=np.uint64)
        x = patterns.astype(np.uint32).view(F32)
        worst = max(worst, check(name, x, bound))
    assert worst <= bound


def test_stated_bounds_meet_targets():
    for name in ("exp32", "exp2_32", "log32", "log2_32", "safelog32"):
        assert vm.MAX_ULP[name] <= 2
    for name in ("tanh32", "tanh2_32", "sig32", "sig2_32", "softplus32"):
        assert vm.MAX_ULP[name] <= 4
    assert set(vm.MAX_ULP) == set(FUNCS)
    for name in FUNCS:
        assert f"{name}" in vm.__doc__


# ------------------------------------------------------------ (2) edge values

def same(got, expected):
    """Bitwise-equal up to the sign of zero and the payload of nan."""
    got, expected = np.asarray(got, F32), np.asarray(expected, F32)
    return np.array_equal(got, expected, equal_nan=True)


def test_exp_edges():
    x = f32(0.0, -0.0, np.inf, -np.inf, np.nan, 89.0, 1000.0, -104.0, -1000.0, 1e-30, -1e-30)
    assert same(run("exp32", x), f32(1, 1, np.inf, 0, np.nan, np.inf, np.inf, 0, 0, 1, 1))
    x = f32(1.0, -1.0, 0.5, 10.0, -10.0, 50.0)
    assert same(run("exp32", x), reference("exp32", x))      # correctly rounded here
    # e**-104 = 6.8e-46 is below half the smallest subnormal (7.0e-46): correctly rounded to +0
    assert run("exp32", f32(-104.0))[0] == 0 and not np.signbit(run("exp32", f32(-104.0))[0])
    # the largest finite result and the first overflow
    big = run("exp32", f32(88.72283, 88.7229))
    assert np.isfinite(big[0]) and big[1] == np.inf
    # gradual underflow: results are correctly rounded subnormals (within 1 ulp, i.e. 1.4e-45)
    x = f32(-87.5, -90.0, -95.0, -100.0, -103.0, -103.27893, -103.5, -103.9)
    got, ref = run("exp32", x), reference("exp32", x)
    assert np.all(ref < _TINY) and np.all(ref > 0)
    assert ulp_distance(got, ref).max() <= 1


def test_exp2_edges():
    k = np.arange(-149, 128)
    assert same(run("exp2_32", k.astype(F32)), np.ldexp(np.float64(1.0), k).astype(F32))
    x = f32(0.0, -0.0, np.inf, -np.inf, np.nan, 128.0, 129.0, -150.0, -151.0, -149.5, -149.49998)
    # +0 from -149.5 down, as numpy's float32 exp2 (the reference interpreter's) is there
    assert same(run("exp2_32", x), f32(1, 1, np.inf, 0, np.nan, np.inf, np.inf, 0, 0, 0, 1e-45))


def test_log_edges():
    x = f32(0.0, -0.0, -1.0, -1e-45, -np.inf, np.inf, np.nan, 1.0, 1e-45, _TINY, _MAX)
    got = run("log32", x)
    assert same(got[:8], f32(-np.inf, -np.inf, np.nan, np.nan, np.nan, np.inf, np.nan, 0.0))
    assert not np.signbit(got[7])
    assert same(got[8:], reference("log32", x[8:]))          # log(1e-45) = -103.27893
    assert got[8] == F32(-103.27893)
    # every subnormal power of two and every normal one
    k = np.arange(-149, 128)
    p = np.ldexp(F32(1.0), k).astype(F32)
    assert same(run("log2_32", p), k.astype(F32))             # log2 of a power of two is exact
    assert ulp_distance(run("log32", p), reference("log32", p)).max() <= vm.MAX_ULP["log32"]
    got2 = run("log2_32", x)
    assert same(got2[:8], f32(-np.inf, -np.inf, np.nan, np.nan, np.nan, np.inf, np.nan, 0.0))
    assert got2[8] == -149.0


def test_safelog_edges():
    x = f32(0.0, -0.0, -1.0, -np.inf, 1e-45, 1e-30, np.nan, np.inf, 1.0, SAFELOG_MIN, 1e-20)
    got = run("safelog32", x)
    assert same(got[:6], f32(-50.0, -50.0, -50.0, -50.0, -50.0, -50.0))
    assert same(got[6:9], f32(np.nan, np.inf, 0.0))
    assert got[9] == F32(-50.0)
    assert same(got[10], reference("safelog32", x[10:])[0])


@pytest.mark.parametrize("name", ["tanh32", "tanh2_32"])
def test_tanh_edges(name):
    big = f32(14.0, 20.0, 88.0, 200.0, 1e10, 1e30, _MAX, np.inf)
    assert np.all(run(name, big) == 1.0)
    assert np.all(run(name, -big) == -1.0)
    got = run(name, f32(0.0, -0.0, np.nan))
    assert got[0] == 0 and not np.signbit(got[0])
    assert got[1] == 0 and np.signbit(got[1])                 # tanh keeps the sign of zero
    assert np.isnan(got[2])
    tiny = f32(1e-45, -1e-45, 1e-38, 1e-20, -1e-10)
    assert same(run(name, tiny), reference(name, tiny))      # tanh(x) ~ x (x*ln2) correctly rounded
    sym = np.linspace(-12, 12, 10001, dtype=F32)
    assert same(run(name, -sym), -run(name, sym))             # odd function, bit for bit


@pytest.mark.parametrize("name, cut", [("sig32", 88.72284), ("sig2_32", 128.0)])
def test_sig_edges(name, cut):
    got = run(name, f32(0.0, -0.0, np.inf, -np.inf, np.nan, 30.0, 100.0, 200.0, 1e30, _MAX))
    assert same(got, f32(0.5, 0.5, 1.0, 0.0, np.nan, 1.0, 1.0, 1.0, 1.0, 1.0))
    # +0 once the float32 e**-x (2**-x) of the reference's 1 / (1 + e**-x) overflows
    zeros = run(name, f32(-cut, -cut - 0.01, -151.0, -1000.0, -1e30, -_MAX))
    assert np.all(zeros == 0) and not np.signbit(zeros).any()
    # above that, sig(-large) is exp(-|x|): tiny and accurate, subnormals included
    x = -np.linspace(10.0, cut - 0.001, 2001).astype(F32)
    got, ref = run(name, x), reference(name, x)
    assert np.all(got > 0)
    assert ulp_distance(got, ref).max() <= vm.MAX_ULP[name]


@pytest.mark.parametrize("name", ["exp32", "exp2_32", "sig32", "sig2_32", "softplus32", "tanh32"])
def test_zero_inf_and_nan_where_numpy_float32_has_them(name):
    """Against numpy's own float32 computation (what the reference interpreter runs): every
    float32 in [60, 200] and [-200, -60] (all the overflow and underflow thresholds) gives
    +0, inf and nan exactly where numpy's does."""
    lo, hi = F32(60.0).view(np.int32), F32(200.0).view(np.int32)
    pos = np.arange(lo, hi, dtype=np.int32).view(F32)
    x = np.concatenate([pos, -pos])
    numpy_f32 = {"exp32": np.exp, "exp2_32": np.exp2, "tanh32": np.tanh,
                 "sig32": lambda v: F32(1) / (F32(1) + np.exp(-v)),
                 "sig2_32": lambda v: F32(1) / (F32(1) + np.exp2(-v)),
                 "softplus32": lambda v: np.logaddexp(F32(0), v)}[name]
    with np.errstate(all="ignore"):
        want = numpy_f32(x)
    got = run(name, x)
    for kind, test in (("zero", lambda v: v == 0), ("inf", np.isinf), ("nan", np.isnan)):
        bad = test(got) != test(want)
        assert not bad.any(), (f"{name}: {kind} at {x[bad][:4]} (got {got[bad][:4]}, numpy "
                               f"{want[bad][:4]})")


def test_softplus_edges():
    x = f32(0.0, -0.0, np.inf, -np.inf, np.nan, 20.0, 100.0, 1e30, _MAX, -104.0, -1e30)
    got = run("softplus32", x)
    assert same(got, f32(LN2, LN2, np.inf, 0.0, np.nan, 20.0, 100.0, 1e30, _MAX, 0.0, 0.0))
    # log(1 + e**x) for very negative x is e**x (not log(1 + tiny) = 0), subnormals included
    x = -np.linspace(15.0, 103.0, 2001).astype(F32)
    got, ref = run("softplus32", x), reference("softplus32", x)
    assert np.all(got > 0)
    assert ulp_distance(got, ref).max() <= vm.MAX_ULP["softplus32"]
    # and x + log1p(e**-x) for large x: no overflow in e**x
    x = np.linspace(15.0, 1000.0, 2001).astype(F32)
    assert ulp_distance(run("softplus32", x), reference("softplus32", x)).max() <= 1


def test_bitcasts():
    @numba.njit
    def roundtrip(x):
        out = np.empty(x.size, np.int32)
        back = np.empty_like(x)
        for i in range(x.size):
            out[i] = vm.bitcast_f32_to_i32(x[i])
            back[i] = vm.bitcast_i32_to_f32(out[i])
        return out, back

    x = special_values()
    i, back = roundtrip(x)
    assert np.array_equal(i, x.view(np.int32))
    assert np.array_equal(back.view(np.int32), x.view(np.int32))   # nan payloads and -0 too

    @numba.njit
    def from_int64(n):
        return vm.bitcast_i32_to_f32(n)                    # low 32 bits of a wider integer
    assert from_int64(0x3F800000) == 1.0
    assert from_int64((1 << 32) + 0x40000000) == 2.0


def test_float64_and_python_arguments_are_converted_to_float32():
    @numba.njit(fastmath=False, error_model="numpy")
    def k(v):
        return vm.exp32(v), vm.log32(v), vm.tanh32(v)

    a = k(np.float64(0.5))
    b = k(F32(0.5))
    assert a == b and all(isinstance(v, float) for v in a)
    assert vm.exp32(1.0) == run("exp32", f32(1.0))[0]        # callable from Python too


# ------------------------------------------------------------ (3) vectorization and isolation

def _simd_reason():
    """None when the host CPU has the SIMD units the vectorization test needs, else why not."""
    import llvmlite.binding as llvm
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i686", "x86"):
        return None                                  # SSE2 is part of x86_64: it must vectorize
    try:
        features = llvm.get_host_cpu_features()
    except RuntimeError as e:                        # pragma: no cover - exotic hosts
        return f"cannot read the host CPU features: {e}"
    if any(features.get(f, False) for f in ("neon", "sve", "altivec", "vsx", "simd128", "v")):
        return None
    return f"host CPU {machine!r} has no SIMD unit LLVM can vectorize float32 loops with"


@pytest.mark.parametrize("name", list(FUNCS))
def test_loop_vectorizes(name):
    reason = _simd_reason()
    if reason:
        pytest.skip(reason)
    fn = FUNCS[name][0]

    @numba.njit(fastmath=False)
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i]) * F32(2.0)

    x = np.linspace(0.5, 2.0, 1000, dtype=F32)
    out = np.empty_like(x)
    loop(x, out)
    np.testing.assert_array_equal(out, run(name, x) * F32(2.0))
    llvm_ir = loop.inspect_llvm(loop.signatures[0])
    found = sorted(set(re.findall(r"<(\d+) x float>", llvm_ir)), key=int)
    assert set(found) & {"4", "8", "16"}, (
        f"{name}: the loop was not vectorized (no <4|8|16 x float> in the LLVM IR)")
    # the functions are inlined: no call to a numba-compiled vecmath function remains
    assert not re.search(rf"call [^\n]*vecmath[^\n]*{name}", llvm_ir)


def test_fastmath_caller_does_not_change_results():
    """Fused kernels may be compiled with fastmath=True; vecmath's own code must keep IEEE semantics
    (its range reduction and nan/inf selects would be folded away otherwise)."""
    def body(x, o):
        for i in range(x.size):
            o[0, i] = vm.exp32(x[i])
            o[1, i] = vm.log32(x[i])
            o[2, i] = vm.tanh32(x[i])
            o[3, i] = vm.sig32(x[i])
            o[4, i] = vm.softplus32(x[i])
            o[5, i] = vm.exp2_32(x[i])

    strict = numba.njit(fastmath=False, error_model="numpy")(body)
    fast = numba.njit(fastmath=True, error_model="numpy")(body)
    x = np.concatenate([special_values(),
                        np.random.default_rng(0).uniform(-120, 120, 4000).astype(F32)])
    a = np.empty((6, x.size), F32)
    b = np.empty_like(a)
    strict(x, a)
    fast(x, b)
    np.testing.assert_array_equal(a, b)
    names = ["exp32", "log32", "tanh32", "sig32", "softplus32", "exp2_32"]
    for row, name in enumerate(names):
        assert ulp_distance(a[row], reference(name, x)).max() <= vm.MAX_ULP[name]


def test_prange_kernel_matches_serial():
    @numba.njit(parallel=True, fastmath=False, error_model="numpy")
    def par(a, b, out):
        for i in numba.prange(out.size):
            out[i] = vm.sig32(a[i] * b[i] + F32(0.5)) * vm.tanh32(a[i] - b[i]) \
                + vm.exp32(-a[i] * a[i]) * F32(0.25)

    rng = np.random.default_rng(1)
    a = rng.standard_normal(100_003).astype(F32)
    b = rng.standard_normal(100_003).astype(F32)
    out = np.empty_like(a)
    par(a, b, out)
    expected = (run("sig32", a * b + F32(0.5)) * run("tanh32", a - b)
                + run("exp32", -a * a) * F32(0.25))
    np.testing.assert_array_equal(out, expected)
