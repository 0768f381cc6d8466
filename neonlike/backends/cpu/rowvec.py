"""Explicit-vector row kernels for Numba (imported by rnn_kernels when first used): a cell's
arithmetic written once as a Python function of its operands, run on tiles.WIDTH columns at a
time as LLVM vectors (`vector_kernel`) and on the columns left over as float32 scalars
(`scalar_kernel`).

Why: an LSTM cell's row is short (a task's 16 or 32 columns of the batch) and reads and writes
several arrays. Numba's loops over such a row paid more for their setup than for their
arithmetic: a row slice's bounds arithmetic, LLVM's run-time overlap checks between the arrays,
remainder loops; one fused loop over all the operands was not vectorised at all (too many
overlap checks), and flat loops at unsigned offsets were vectorised in one caller and turned
into scatter stores in another (the backward cell ran 1.36x slower inside the unit split's
step). Here each vector of columns is a fixed sequence: one load per input, the arithmetic, one
store per output; nothing to check, since every load comes before every store.

    def cell(a, b, c):                    # plain arithmetic on its arguments: + - * and
        return a * b + c, a - ONE         # float32 constants (ONE = np.float32(1.0)), and
                                          # vecmath's sig32 and tanh32: sig32(a) * b

    VEC = vector_kernel(cell, 3, 2)       # VEC(X, x, Y, y, Z, z, P, p, Q, q): P[p:p+W], Q[q:q+W]
    ONE_ = scalar_kernel(cell)            #   = cell(X[x:x+W], Y[y:y+W], Z[z:z+W]); W = WIDTH

Arrays are 1-D float32 (flat views), offsets in elements. The vector form forms a fused
multiply-add where a product feeds an addition (fast-math `contract`, as the kernels' scalar
code is compiled), so the two forms may differ in the last bit. sig32 and tanh32 run as vector
forms of vecmath's formulas (_vsig, _vtanh), which give the scalar functions' bits.
"""
from __future__ import annotations

import types as pytypes
from functools import partial

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import vecmath as vm
from .tiles import WIDTH, _data

_FLAGS = ("contract",)


class _Vec:
    """An LLVM <WIDTH x float> value while a vector kernel's code is built: + - * with other
    vectors and with numbers (made constant vectors)."""

    __slots__ = ("b", "v")

    def __init__(self, builder, value):
        self.b, self.v = builder, value

    def _of(self, x):
        if isinstance(x, _Vec):
            return x.v
        return ir.Constant(self.v.type, [ir.Constant(ir.FloatType(), float(x))] * WIDTH)

    def _op(self, name, x, y):
        return _Vec(self.b, getattr(self.b, name)(self._of(x), self._of(y), flags=_FLAGS))


def _operator(name: str, swapped: bool):
    """_Vec's method for an LLVM float instruction; `swapped`: the reflected form (number op
    vector)."""
    if swapped:
        return lambda self, x: self._op(name, x, self)
    return lambda self, x: self._op(name, self, x)


for _name, _instr in (("add", "fadd"), ("sub", "fsub"), ("mul", "fmul")):
    setattr(_Vec, f"__{_name}__", _operator(_instr, False))
    setattr(_Vec, f"__r{_name}__", _operator(_instr, True))


# ---------------------------------------------------------------- vecmath's sig32 and tanh32
# The same operations as vecmath's scalar functions, in the same order, on WIDTH lanes at once:
# the same bits in each lane (tests/test_tiles.py), without the loop LLVM wraps around a row
# slice of 16 floats (the LSTM's forward cell: its four gate activations cost 0.69 ms of a
# 256-unit, batch-32, 50-step pass as such loops). fmuladd where vecmath's _muladd is, plain
# instructions (no contraction, as vecmath is compiled) elsewhere.

def _lanes(value, kind=None):
    """value in every lane (a float32 vector, or of `kind`, an integer type)."""
    kind = kind or ir.FloatType()
    value = int(value) if isinstance(kind, ir.IntType) else float(value)
    return ir.Constant(ir.VectorType(kind, WIDTH), [ir.Constant(kind, value)] * WIDTH)


def _intrinsic_call(b, name, *args):
    """LLVM's intrinsic `name` on float32 vectors (llvm.fabs, llvm.fmuladd)."""
    vt = args[0].type
    fn = cgutils.get_or_insert_function(b.module, ir.FunctionType(vt, [vt] * len(args)),
                                        f"{name}.v{WIDTH}f32")
    return b.call(fn, list(args))


def _exp(b, x):
    """vecmath.exp32."""
    c = _lanes
    muladd = partial(_intrinsic_call, b, "llvm.fmuladd")
    x = b.select(b.fcmp_ordered(">", x, c(vm._EXP_HI)), c(vm._EXP_HI), x)
    x = b.select(b.fcmp_ordered("<", x, c(vm._EXP_LO)), c(vm._EXP_LO), x)
    t = muladd(x, c(vm._LOG2E), c(vm._MAGIC))
    i32 = ir.IntType(32)
    n = b.sub(b.bitcast(t, ir.VectorType(i32, WIDTH)), _lanes(vm._MAGIC_BITS, i32))
    fn = b.fsub(t, c(vm._MAGIC))
    r = muladd(fn, c(vm._NLN2_HI), x)
    r = muladd(fn, c(vm._NLN2_LO), r)
    q = muladd(muladd(muladd(muladd(c(vm._EQ0), r, c(vm._EQ1)), r, c(vm._EQ2)), r, c(vm._EQ3)),
               r, c(vm._EQ4))
    p = b.fadd(muladd(b.fmul(r, r), q, r), c(vm._ONE))
    # vecmath._pow2_scale: p * 2**n1 * 2**n2, n1 = n >> 1, n2 = n - n1
    n1 = b.ashr(n, _lanes(1, i32))
    n2 = b.sub(n, n1)
    vt = p.type

    def two_to(k):
        return b.bitcast(b.shl(b.add(k, _lanes(127, i32)), _lanes(23, i32)), vt)

    return b.fmul(b.fmul(p, two_to(n1)), two_to(n2))


def _vsig(x: "_Vec") -> "_Vec":
    """vecmath.sig32."""
    b, v = x.b, x.v
    c = _lanes
    t = _exp(b, b.fsub(c(-0.0), _intrinsic_call(b, "llvm.fabs", v)))
    num = b.select(b.fcmp_ordered(">=", v, c(0.0)), c(1.0),
                   b.select(b.fcmp_ordered(">", v, c(-vm._EXP_OVF)), t, c(0.0)))
    return _Vec(b, b.fdiv(num, b.fadd(c(1.0), t)))


def _vtanh(x: "_Vec") -> "_Vec":
    """vecmath.tanh32 (its _tanh_core with y = x)."""
    b, v = x.b, x.v
    c = _lanes
    muladd = partial(_intrinsic_call, b, "llvm.fmuladd")
    ay = _intrinsic_call(b, "llvm.fabs", v)
    t = _exp(b, b.fmul(c(-2.0), ay))
    z = b.fmul(ay, ay)
    rz = muladd(muladd(muladd(muladd(c(vm._TR0), z, c(vm._TR1)), z, c(vm._TR2)), z, c(vm._TR3)),
                z, c(vm._TR4))
    small = muladd(b.fmul(ay, z), rz, ay)
    big = b.fdiv(b.fsub(c(1.0), t), b.fadd(c(1.0), t))
    r = b.select(b.fcmp_ordered("<", ay, c(vm._TANH_POLY_MAX)), small, big)
    iv = ir.VectorType(ir.IntType(32), WIDTH)
    sign = b.and_(b.bitcast(v, iv), _lanes(vm._SIGN_BIT, ir.IntType(32)))
    return _Vec(b, b.bitcast(b.or_(b.bitcast(r, iv), sign), r.type))


def _on_vectors(fn):
    """fn with vecmath's sig32 and tanh32, wherever it finds them (its globals, its closure),
    replaced by their vector forms."""
    forms = {id(vm.sig32): _vsig, id(vm.tanh32): _vtanh}
    names = {k: forms[id(v)] for k, v in fn.__globals__.items()
             if k in fn.__code__.co_names and id(v) in forms}
    cells = fn.__closure__ and tuple(
        pytypes.CellType(forms.get(id(c.cell_contents), c.cell_contents)) for c in fn.__closure__)
    return pytypes.FunctionType(fn.__code__, {**fn.__globals__, **names}, fn.__name__,
                                fn.__defaults__, cells)


def vector_kernel(fn, n_in: int, n_out: int):
    """An intrinsic taking (array, offset) for each of fn's n_in operands and then for each of
    its n_out results: WIDTH columns of each result = fn of WIDTH columns of each operand. fn
    may call vecmath's sig32 and tanh32: here they run as their vector forms."""
    fn = _on_vectors(fn)

    def typer(typingctx, *args):
        if not all(isinstance(a, types.Array) and a.dtype == types.float32 and a.ndim == 1
                   for a in args[0::2]) or \
                not all(isinstance(o, types.Integer) for o in args[1::2]):
            return None
        sig = types.void(*args)

        def codegen(context, builder, signature, llargs):
            at = signature.args
            vp = ir.VectorType(ir.FloatType(), WIDTH).as_pointer()

            def pointer(k):
                off = context.cast(builder, llargs[2 * k + 1], at[2 * k + 1], types.int64)
                return builder.bitcast(builder.gep(_data(context, builder, at[2 * k],
                                                         llargs[2 * k]), [off]), vp)

            ins = [_Vec(builder, builder.load(pointer(k), align=4)) for k in range(n_in)]
            outs = fn(*ins)
            outs = outs if isinstance(outs, tuple) else (outs,)
            assert len(outs) == n_out, (fn, len(outs), n_out)
            for k, out in enumerate(outs):
                builder.store(out.v, pointer(n_in + k), align=4)
            return context.get_dummy_value()

        return sig, codegen

    # numba's intrinsics take a fixed argument list (not *args): one is written out for this
    # count
    names = ", ".join(f"a{k}" for k in range(2 * (n_in + n_out)))
    scope = {"typer": typer}
    exec(f"def {fn.__name__}_vector(typingctx, {names}):\n"
         f"    return typer(typingctx, {names})\n", scope)
    return intrinsic(scope[f"{fn.__name__}_vector"])


def scalar_kernel(fn):
    """fn compiled for float32 scalars, inlined into its caller (the columns past the last
    whole vector)."""
    return njit(cache=True, fastmath={"contract"}, inline="always")(fn)


ONE = np.float32(1.0)
