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
        return a * b + c, a - ONE         # float32 constants (ONE = np.float32(1.0))

    VEC = vector_kernel(cell, 3, 2)       # VEC(X, x, Y, y, Z, z, P, p, Q, q): P[p:p+W], Q[q:q+W]
    ONE_ = scalar_kernel(cell)            #   = cell(X[x:x+W], Y[y:y+W], Z[z:z+W]); W = WIDTH

Arrays are 1-D float32 (flat views), offsets in elements. The vector form forms a fused
multiply-add where a product feeds an addition (fast-math `contract`, as the kernels' scalar
code is compiled), so the two forms may differ in the last bit.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

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


def vector_kernel(fn, n_in: int, n_out: int):
    """An intrinsic taking (array, offset) for each of fn's n_in operands and then for each of
    its n_out results: WIDTH columns of each result = fn of WIDTH columns of each operand."""

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
