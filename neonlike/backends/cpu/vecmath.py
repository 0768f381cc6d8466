"""Inline, vectorizable float32 exp/log/tanh/sigmoid/softplus for the Numba backend's fused kernels.

Why: Numba has no vector math library, so `math.exp` / `math.tanh` inside a generated `prange` loop
are scalar libm calls (about 4 and 18 ns per element per thread on the 2-core dev machine) and the loop
does not vectorize. The functions here are plain float32 arithmetic: range reduction, a polynomial,
and 2**n built by bit-casting an int32 to float32 (`bitcast_i32_to_f32`, an llvmlite `bitcast`).
There are no branches (the special cases are selects and bit masks), so once inlined LLVM vectorizes
the caller's loop (<16 x float> with AVX-512, <8 x float> with AVX2, <4 x float> with SSE2/NEON).

How a generated kernel calls them (float32 trees only; float64 trees keep using `math.*`)::

    import numba
    import numpy as np
    from neonlike.backends.cpu.vecmath import exp32, sig32, tanh32

    @numba.njit(parallel=True, fastmath=False, error_model="numpy")
    def _kernel(a, b, out):                       # out = sig(a * b) * tanh(a) + exp(-a) * 0.5
        for i in numba.prange(out.size):
            x = a[i]
            out[i] = sig32(x * b[i]) * tanh32(x) + exp32(-x) * np.float32(0.5)

Rules for the renderer: pass float32 values (a float64 or Python-number argument is rounded to
float32 first, and the result is always float32), and write constants as `np.float32(...)`: a Python
float literal in `exp32(x) * 0.5` promotes that product to float64 and the store converts it back.

Decoration: every function is `numba.njit(fastmath=False, error_model="numpy", forceinline=True)`.
`forceinline` marks the compiled function `alwaysinline` for LLVM, so it is inlined into the kernel
after Numba lowered it with its *own* flags. Measured alternatives (numba 0.68.1, llvmlite 0.50):
`njit(inline="always")` and `register_jitable(inline="always")` also vectorize, but inline at the Numba
IR level, which about doubles the compile time of a kernel (1.5 s instead of 0.7 s for
sig*tanh+exp) and, worse, lowers the inlined code with the caller's flags: in a `fastmath=True`
kernel they return exp32(-1) = 0.5 and tanh32(-1) = -0.78 (the round-to-integer trick and the
nan/inf selects are folded away). Plain `njit` vectorizes too, but leaves inlining to LLVM's cost
model. Polynomials use `llvm.fmuladd`, i.e. a fused multiply-add where the target has FMA (1.4x
faster exp32 here) and multiply-then-add elsewhere; the bounds below hold, and were measured, for both.

Accuracy: max error in float32 ulps against the correctly rounded result (the float64 libm value
rounded to float32), counted as the distance in the ordered list of float32 values (0 = correctly
rounded), measured over ALL 2**32 inputs, with and without FMA (see `MAX_ULP`); the float32
underflow cut-offs below (sig, sig2, exp2: +0 where numpy's float32 formula gives +0) are the
reference interpreter's, not the correctly rounded value's. Against numpy's float32 results
(the reference interpreter's) every function is within 4 ulps (tests/test_edge_values.py):

    ==========  =======  ================================================================
    function    max ulp  computes
    ==========  =======  ================================================================
    exp32        1       e**x
    exp2_32      1       2**x
    log32        1       log(x)
    log2_32      1       log2(x)
    safelog32    1       log(max(x, exp(-50)))  (the clamp is float32(exp(-50)))
    tanh32       2       tanh(x)
    tanh2_32     2       tanh(x * ln 2); 2**(-2|x|) above |x ln2| = 0.625, so no rounded x*ln2 there
    sig32        2       1 / (1 + exp(-x))
    sig2_32      2       1 / (1 + 2**-x)
    softplus32   2       log(1 + exp(x)), as max(x, 0) + log1p(exp(-|x|))
    ==========  =======  ================================================================

Special values (all tested in tests/test_vecmath.py):

* nan in, nan out, for every function (safelog32 too, like numpy.maximum).
* exp32: exp(+-0) = 1, exp(inf) = inf, exp(-inf) = +0. Overflow is correctly rounded: the result is
  inf from x = 88.72284 up (exp(89) = inf). Underflow is gradual: from x = -87.33655 down it is a
  subnormal, correctly rounded to within 1 ulp, and +0 once e**x < 2**-150 (x <= -103.972084; so
  exp(-104) = +0). Never -0. exp2_32 likewise: exact powers of two for integer x in [-149, 127],
  inf from x = 128, and +0 from x = -149.5 down, as numpy's float32 exp2 (the reference
  interpreter's) is there, though 2**-149.5 would round to the smallest subnormal.
* log32 / log2_32: log(+-0) = -inf, log(x < 0) = nan (-inf included), log(inf) = inf, log(1) = +0,
  subnormal inputs are exact-exponent (log(1e-45) = -103.27893, log2(2**-149) = -149; log2 of every
  power of two is exact).
* safelog32(x) = -50 for every x <= float32(exp(-50)) including 0, negatives and -inf.
* tanh32 / tanh2_32: odd bit for bit, tanh(-0) = -0, tiny x gives x (x*ln2), subnormals included; exactly
  +-1 once the true value rounds to it (|x| >= 8.67 for tanh32, >= 12.5 for tanh2_32), inf included.
* sig32 / sig2_32: sig(+-0) = 0.5, sig(x) = 1 exactly from x = 16.64 (sig32), sig(inf) = 1; for x < 0 it is
  exp(x) / (1 + exp(x)), so sig(-large) is the tiny exp(x), as accurate as exp32, subnormals
  included, down to where the reference interpreter's float32 e**-x (2**-x) overflows: from
  x = -88.72284 (-128) down it is +0, as its 1 / (1 + inf) is (sig(-inf) = +0).
* softplus32: softplus(x) = x exactly once log1p(e**-x) is below half an ulp of x (from x = 14.56),
  softplus(inf) = inf, softplus(-inf) = +0, softplus(0) = log 2, and for x < 0 the result tracks
  e**x down into the subnormals (no log(1 + tiny) = 0 cancellation).
"""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "bitcast_f32_to_i32", "bitcast_i32_to_f32",
    "exp32", "exp2_32", "log32", "log2_32", "tanh32", "tanh2_32",
    "sig32", "sig2_32", "softplus32", "safelog32", "MAX_ULP",
]

# Max error in float32 ulps over all 2**32 inputs (see the module docstring); the tests assert these.
MAX_ULP = {
    "exp32": 1, "exp2_32": 1, "log32": 1, "log2_32": 1, "safelog32": 1,
    "tanh32": 2, "tanh2_32": 2, "sig32": 2, "sig2_32": 2, "softplus32": 2,
}


# ------------------------------------------------------------------ bit casts

@intrinsic
def bitcast_f32_to_i32(typingctx, x):
    """The IEEE-754 bits of float32 `x` as an int32 (a float64 argument is first rounded to float32)."""
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if x.bitwidth != 32:
            v = builder.fptrunc(v, ir.FloatType())
        return builder.bitcast(v, ir.IntType(32))

    return types.int32(x), codegen


@intrinsic
def bitcast_i32_to_f32(typingctx, i):
    """The float32 whose bits are the low 32 bits of integer `i`."""
    if not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if i.bitwidth > 32:
            v = builder.trunc(v, ir.IntType(32))
        elif i.bitwidth < 32:
            v = (builder.sext if i.signed else builder.zext)(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(i), codegen


def _int32_op(name, build):
    """An int32 intrinsic `name(a, b)`: both operands truncated or extended to i32, the result an
    int32. Numba widens int32 arithmetic to int64, and 64-bit lanes do not vectorize well without
    AVX-512 (no 64-bit arithmetic shift or int64->float conversion in AVX2); these keep the integer
    parts of the functions below in 32-bit lanes."""
    def impl(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            vals = [_to_i32(builder, v, t) for v, t in zip(args, signature.args)]
            return build(builder, *vals)

        return types.int32(a, b), codegen
    impl.__name__ = name
    return intrinsic(impl)


def _to_i32(builder, v, t):
    if t.bitwidth > 32:
        return builder.trunc(v, ir.IntType(32))
    if t.bitwidth < 32:
        return (builder.sext if t.signed else builder.zext)(v, ir.IntType(32))
    return v


_iadd = _int32_op("_iadd", lambda b, x, y: b.add(x, y))
_isub = _int32_op("_isub", lambda b, x, y: b.sub(x, y))
_iand = _int32_op("_iand", lambda b, x, y: b.and_(x, y))
_ior = _int32_op("_ior", lambda b, x, y: b.or_(x, y))
_ishl = _int32_op("_ishl", lambda b, x, y: b.shl(x, y))
_ishr = _int32_op("_ishr", lambda b, x, y: b.ashr(x, y))


@intrinsic
def _itof(typingctx, i):
    """int32 -> float32 (sitofp on 32-bit lanes)."""
    if not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.sitofp(_to_i32(builder, args[0], signature.args[0]), ir.FloatType())

    return types.float32(i), codegen


@intrinsic
def _muladd(typingctx, a, b, c):
    """a * b + c as LLVM's llvm.fmuladd.f32: one fused multiply-add where the target has FMA,
    otherwise a multiply and an add (each rounded). Either way within the documented bounds."""
    if not all(isinstance(t, types.Float) for t in (a, b, c)):
        return None

    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        vals = [context.cast(builder, v, t, types.float32) for v, t in zip(args, signature.args)]
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32] * 3),
                                            "llvm.fmuladd.f32")
        return builder.call(fn, vals)

    return types.float32(a, b, c), codegen


_jit = numba.njit(fastmath=False, error_model="numpy", forceinline=True)

F = np.float32
_ONE = F(1.0)
_ZERO = F(0.0)
_INF = F(np.inf)
_NINF = F(-np.inf)
_NAN = F(np.nan)
_MAGIC = F(12582912.0)              # 1.5 * 2**23: x + MAGIC rounds x to an integer in the low bits
_MAGIC_BITS = 0x4B400000
_SIGN_BIT = -0x80000000             # int32 0x80000000
_LOG2E = F(1.4426950408889634)
_LN2 = F(math.log(2.0))
_LN2_HI = F(0.693359375)            # 9 significant bits: k * _LN2_HI is exact for |k| < 2**15
_LN2_LO = F(math.log(2.0) - 0.693359375)
_NLN2_HI = -_LN2_HI
_NLN2_LO = -_LN2_LO
_NHALF = F(-0.5)
_L2E_HI = F(2955.0 / 2048.0)        # 12 significant bits
_L2E_LO = F(1.4426950408889634 - 2955.0 / 2048.0)
_EXP_HI = F(89.0)
_EXP_LO = F(-104.0)
_EXP2_HI = F(129.0)
_EXP2_LO = F(-151.0)
_EXP2_ZERO = F(-149.5)              # numpy's float32 exp2 is +0 from here down (2**-149.5 rounds to
                                    # the smallest subnormal, but the reference interpreter's is 0)
_EXP_OVF = F(88.72284)              # the first float32 whose exp overflows (numpy's and exp32's)
_EXP2_OVF = F(128.0)                # ... and whose exp2 overflows
_TINY = F(1.1754943508222875e-38)   # smallest normal float32
_TWO23 = F(8388608.0)
_SAFELOG_MIN = F(math.exp(-50.0))

# exp: e**r = 1 + r + r*r*Q(r), |r| <= ln2/2
_EQ0 = F(0.0013926198007538915)
_EQ1 = F(0.008363190107047558)
_EQ2 = F(0.041666556149721146)
_EQ3 = F(0.16666576266288757)
_EQ4 = F(0.5)
# exp2: 2**r = 1 + r*P(r), |r| <= 1/2
_E2P0 = F(0.00015453163359779865)
_E2P1 = F(0.0013390863314270973)
_E2P2 = F(0.009618083015084267)
_E2P3 = F(0.055503569543361664)
_E2P4 = F(0.24022650718688965)
_E2P5 = F(0.6931471824645996)
# log: log1p(f) = f - f*f/2 + f**3*P(f), sqrt(1/2)-1 <= f < sqrt(2)-1
_LP0 = F(0.06971611827611923)
_LP1 = F(-0.11479733884334564)
_LP2 = F(0.11685419827699661)
_LP3 = F(-0.12425687164068222)
_LP4 = F(0.14249058067798615)
_LP5 = F(-0.1666780263185501)
_LP6 = F(0.20000715553760529)
_LP7 = F(-0.2499999701976776)
_LP8 = F(0.3333333134651184)
# tanh: tanh(x) = x + x**3*R(x*x), |x| < 0.625
_TR0 = F(-0.006096714176237583)
_TR1 = F(0.020997179672122)
_TR2 = F(-0.05385090783238411)
_TR3 = F(0.1333276927471161)
_TR4 = F(-0.333333283662796)
_TANH_POLY_MAX = F(0.625)


@_jit
def _pow2_scale(p, n):
    """p * 2**n for float32 p in [0.5, 2] and integer n in [-151, 129], rounded once."""
    n1 = _ishr(n, 1)
    n2 = _isub(n, n1)
    return p * bitcast_i32_to_f32(_ishl(_iadd(n1, 127), 23)) * bitcast_i32_to_f32(_ishl(_iadd(n2, 127), 23))


@_jit
def exp32(x):
    """e**x."""
    x = F(x)
    x = _EXP_HI if x > _EXP_HI else x
    x = _EXP_LO if x < _EXP_LO else x
    t = _muladd(x, _LOG2E, _MAGIC)
    n = _isub(bitcast_f32_to_i32(t), _MAGIC_BITS)
    fn = t - _MAGIC
    r = _muladd(fn, _NLN2_HI, x)
    r = _muladd(fn, _NLN2_LO, r)
    q = _muladd(_muladd(_muladd(_muladd(_EQ0, r, _EQ1), r, _EQ2), r, _EQ3), r, _EQ4)
    p = _muladd(r * r, q, r) + _ONE
    return _pow2_scale(p, n)


@_jit
def exp2_32(x):
    """2**x."""
    x = F(x)
    x = _EXP2_HI if x > _EXP2_HI else x
    x = _EXP2_LO if x <= _EXP2_ZERO else x
    t = x + _MAGIC
    n = _isub(bitcast_f32_to_i32(t), _MAGIC_BITS)
    r = x - (t - _MAGIC)
    q = _muladd(_muladd(_muladd(_muladd(_muladd(_E2P0, r, _E2P1), r, _E2P2), r, _E2P3), r, _E2P4),
                r, _E2P5)
    p = _muladd(r, q, _ONE)
    return _pow2_scale(p, n)


@_jit
def _log_parts(x):
    """x > 0 finite -> (k, f, y) with x = 2**k * (1 + f), log1p(f) = f + y."""
    sub = x < _TINY
    xs = x * _TWO23 if sub else x
    i = bitcast_f32_to_i32(xs)
    tmp = _isub(i, 0x3F3504F3)
    k = _ishr(tmp, 23)
    k = _isub(k, 23) if sub else k
    m = bitcast_i32_to_f32(_iadd(_iand(tmp, 0x007FFFFF), 0x3F3504F3))
    f = m - _ONE
    z = f * f
    pf = _muladd(_LP0, f, _LP1)
    pf = _muladd(pf, f, _LP2)
    pf = _muladd(pf, f, _LP3)
    pf = _muladd(pf, f, _LP4)
    pf = _muladd(pf, f, _LP5)
    pf = _muladd(pf, f, _LP6)
    pf = _muladd(pf, f, _LP7)
    pf = _muladd(pf, f, _LP8)
    y = _muladd(z * f, pf, _NHALF * z)
    return _itof(k), f, y


@_jit
def _log_fix(x, r):
    r = r if x < _INF else x + x       # +inf -> inf, nan -> nan
    r = _NINF if x == _ZERO else r
    return _NAN if x < _ZERO else r


@_jit
def log32(x):
    """Natural log; -inf at +-0, nan below 0."""
    x = F(x)
    fk, f, y = _log_parts(x)
    a = fk * _LN2_HI
    s = a + f
    err = f - (s - a)
    r = s + (err + _muladd(fk, _LN2_LO, y))
    return _log_fix(x, r)


@_jit
def log2_32(x):
    """Base-2 log, exact on powers of two; -inf at +-0, nan below 0."""
    x = F(x)
    fk, f, y = _log_parts(x)
    fh = bitcast_i32_to_f32(_iand(bitcast_f32_to_i32(f), -4096))
    fl = f - fh
    ph = fh * _L2E_HI
    pl = _muladd(fl, _L2E_HI, _muladd(f, _L2E_LO, y * _LOG2E))
    s = fk + ph
    err = ph - (s - fk)
    r = s + (err + pl)
    return _log_fix(x, r)


@_jit
def _tanh_core(x, y, t):
    """tanh of the argument whose scaled value is y (poly branch) and t = exp(-2|arg|)."""
    ay = abs(y)
    z = ay * ay
    rz = _muladd(_muladd(_muladd(_muladd(_TR0, z, _TR1), z, _TR2), z, _TR3), z, _TR4)
    small = _muladd(ay * z, rz, ay)
    big = (_ONE - t) / (_ONE + t)
    r = small if ay < _TANH_POLY_MAX else big           # |tanh|, or nan
    # copysign(r, x) on the bits: tanh(-0) = -0, and no branch
    return bitcast_i32_to_f32(_ior(bitcast_f32_to_i32(r), _iand(bitcast_f32_to_i32(x), _SIGN_BIT)))


@_jit
def tanh32(x):
    """tanh(x)."""
    x = F(x)
    return _tanh_core(x, x, exp32(F(-2.0) * abs(x)))


@_jit
def tanh2_32(x):
    """tanh(x * ln 2) = (2**(2x) - 1) / (2**(2x) + 1)."""
    x = F(x)
    return _tanh_core(x, x * _LN2, exp2_32(F(-2.0) * abs(x)))


@_jit
def sig32(x):
    """Logistic 1 / (1 + e**-x), computed from e**-|x|; +0 where the float32 e**-x overflows (as
    the reference's 1 / (1 + inf) is)."""
    x = F(x)
    t = exp32(-abs(x))
    num = _ONE if x >= _ZERO else (t if x > -_EXP_OVF else _ZERO)
    return num / (_ONE + t)


@_jit
def sig2_32(x):
    """1 / (1 + 2**-x), computed from 2**-|x|; +0 where the float32 2**-x overflows."""
    x = F(x)
    t = exp2_32(-abs(x))
    num = _ONE if x >= _ZERO else (t if x > -_EXP2_OVF else _ZERO)
    return num / (_ONE + t)


@_jit
def softplus32(x):
    """log(1 + e**x) = max(x, 0) + log1p(e**-|x|); log1p(t) = log(u) + (t - (u - 1)) / u, u = 1 + t."""
    x = F(x)
    t = exp32(-abs(x))
    u = _ONE + t
    c = t - (u - _ONE)
    l1p = log32(u) + c / u
    return (x if x > _ZERO else _ZERO) + l1p


@_jit
def safelog32(x):
    """log(max(x, float32(exp(-50)))): -50 for x <= exp(-50), 0 and negatives included; nan stays nan."""
    x = F(x)
    return log32(_SAFELOG_MIN if x < _SAFELOG_MIN else x)
