"""FUSED stage -> Python source for Numba. Pure: a plan stage in, text out; imports no numba.

The module is kernels/fused.py.tmpl (header, constants, helpers, the @njit variants) filled with
the kernels' bodies; a stage without reductions becomes one loop nest over the output:

    @njit(parallel=True, cache=True, error_model="numpy")
    def kernel_parallel(out, dom, b0, b1, c0):
        for i0 in prange(out.shape[0]):
            for i1 in range(out.shape[1]):
                v0 = F(b0[i0, i1])
                v1 = F(b1[0, i1])
                v2 = c0
                v3 = (v0 * v2)
                v4 = (v3 + v1)
                out[i0, i1] = STORE(v4)

A stage with reductions over axes R of the domain `dom` (the reductions' operand shape) is rendered
by render_reduce.py: tiles of the kept axes, each running one pass per reduction and then its part
of the epilogue. Constants arrive as arguments (`c0`), never as literals, so `2.5*A` and `3.0*A`
share a kernel.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ops import Op
from ... import plan as P
from ...plan import Stage
from ...kernels import fill, sections, template
from .render_reduce import (BLOCK, BLOCK_MULTI, CHUNKS, LANES, REDUCTIONS, TILE_ELEMS, _R_NAMES,
                            open_nest, render_reductions)

RENDERER_VERSION = 7   # 7: sgn(-0.0), max/min zero ties, vecmath sig/exp2 underflow (issue 13)

_U = {  # unary ops: a format of the operand's variable name
    Op.NEG: "(-{0})", Op.ABS: "abs({0})", Op.SQRT: "np.sqrt({0})",
    Op.SGN: "(np.sign({0}) + ZERO)",   # + 0: numpy's sign(-0.0) is +0.0, np.sign in Numba -0.0
    Op.SQR: "({0} * {0})", Op.EXP: "np.exp({0})", Op.LOG: "np.log({0})", Op.EXP2: "np.exp2({0})",
    Op.LOG2: "np.log2({0})", Op.SIG: "(ONE / (ONE + np.exp(-{0})))",
    Op.SIG2: "(ONE / (ONE + np.exp2(-{0})))", Op.TANH: "np.tanh({0})",
    Op.TANH2: "np.tanh({0} * LN2)", Op.SAFELOG: "np.log(_maximum({0}, SAFELOG_MIN))",
    Op.FINITE: "F(np.isfinite({0}))", Op.RINT: "np.rint({0})", Op.CEIL: "np.ceil({0})",
    Op.FLOOR: "np.floor({0})", Op.RECIPROCAL: "(ONE / {0})", Op.RELU: "_maximum({0}, ZERO)",
    Op.SOFTPLUS: "np.logaddexp(ZERO, {0})", Op.NOT: "F({0} == ZERO)",
    Op.SIN: "np.sin({0})", Op.COS: "np.cos({0})", Op.TAN: "np.tan({0})",
    Op.ASIN: "np.arcsin({0})", Op.ACOS: "np.arccos({0})", Op.ATAN: "np.arctan({0})",
    Op.SINH: "np.sinh({0})", Op.COSH: "np.cosh({0})", Op.ASINH: "np.arcsinh({0})",
    Op.ACOSH: "np.arccosh({0})", Op.ATANH: "np.arctanh({0})",
}
# float32 trees use neonlike's vectorizable float32 math (backends/cpu/vecmath.py) instead of libm
_U32 = {
    Op.EXP: "exp32({0})", Op.EXP2: "exp2_32({0})", Op.LOG: "log32({0})", Op.LOG2: "log2_32({0})",
    Op.TANH: "tanh32({0})", Op.TANH2: "tanh2_32({0})", Op.SIG: "sig32({0})",
    Op.SIG2: "sig2_32({0})", Op.SOFTPLUS: "softplus32({0})", Op.SAFELOG: "safelog32({0})",
}
_B = {  # binary ops
    Op.ADD: "({0} + {1})", Op.SUB: "({0} - {1})", Op.MUL: "({0} * {1})", Op.DIV: "({0} / {1})",
    Op.POW: "np.power({0}, {1})", Op.EQ: "F({0} == {1})", Op.NE: "F({0} != {1})",
    Op.LT: "F({0} < {1})", Op.LE: "F({0} <= {1})", Op.GT: "F({0} > {1})", Op.GE: "F({0} >= {1})",
    Op.MINIMUM: "_minimum({0}, {1})", Op.MAXIMUM: "_maximum({0}, {1})",
    Op.AND: "F(({0} != ZERO) & ({1} != ZERO))", Op.OR: "F(({0} != ZERO) | ({1} != ZERO))",
    Op.XOR: "F(({0} != ZERO) != ({1} != ZERO))",
}
RENDERABLE = frozenset(_U) | frozenset(_B) | REDUCTIONS   # (reductions: render_reduce.py)


class _Lines:
    """Source lines with an indentation level (no hand-counted spaces)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def add(self, text: str) -> None:
        for line in text.split("\n"):
            self.lines.append("    " * self.depth + line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


_closure, _dedupe = P.closure, P.dedupe   # (kept under these names for the renderers)
HELPERS = "numba_helpers.py.tmpl"   # the parts a module carries where its kernels call them


def render(stage: Stage, meta: dict, ftype: str, out_dtype: Any,
           key: str, alias: int | None = None) -> tuple[str, tuple, tuple]:
    """Source of a module with `kernel_serial` and `kernel_parallel` (and, where every operand has
    the output's shape, `kernel_flat_serial` / `kernel_flat_parallel` over raveled contiguous
    arrays), plus the (buffers, consts) the kernels take. The module is kernels/fused.py.tmpl
    (and fused_flat.py.tmpl) filled with the kernels' bodies and the helpers they call.

    meta[buf] = (ndim, size-1 mask) for every buffer the stage reads and for the output; ftype is
    the compute type ('float32' or 'float64'); out_dtype the numpy dtype of the stored output.
    `alias`: the buffer that is the output itself (the statement's output read as an operand,
    `p[:] = p - lr*v`): an elementwise kernel then reads it through `out` (`b0 = out`), since
    two arguments on the same memory send LLVM's loop to its scalar version (its runtime alias
    check fails): at 78400 elements 23 us against 6 reading through out.
    """
    program, R = _dedupe(stage.program), stage.reduce_axes
    program, meta, out_buf, bufs, consts = P.local_names(program, meta, stage.out)
    n = meta[out_buf][0]
    formats = {**_U, **_U32, **_B} if ftype == "float32" else {**_U, **_B}
    args = ", ".join(["out", "dom"] + [f"b{b}" for b in range(len(bufs))]
                     + [f"c{c}" for c in range(len(consts))])
    serial, parallel = _Lines(), _Lines()
    local = bufs.index(alias) if alias is not None and alias in bufs and not R else None
    prologue = "" if local is None else f"b{local} = out  # the output itself: one array"
    if prologue:
        serial.add(prologue)
        parallel.add(prologue)
    if R:
        render_reductions(serial, parallel, program, R, n, meta, formats, out_buf,
                          np.dtype(out_dtype) == np.dtype(ftype))
    else:
        _loop_nest(serial, program, n, meta, formats, parallel=False)
        _loop_nest(parallel, program, n, meta, formats, parallel=True)
    flat = ""
    # where every operand has the output's shape, contiguous arrays run as one flat loop
    if not R and all(meta[b] == meta[out_buf] for b in range(len(bufs))):
        top = len(program) - 1
        body = _Lines()
        _values(body, program, _closure(program, top), meta, n, formats, flat=True)
        flat = "\n\n" + fill(template("fused_flat.py.tmpl"), args=args, body=body.text(),
                             value=f"v{top}", prologue=prologue)
    kernels = serial.text() + parallel.text() + flat
    parts = sections(HELPERS)
    helpers = [parts[h] for h in ("_maximum", "_minimum", "_radd") if h + "(" in kernels]
    if out_dtype.kind == "f":
        helpers.append(parts["STORE float"])
    else:
        info = np.iinfo(out_dtype)
        helpers.append(fill(parts["STORE int"], lo=float(info.min), hi=float(info.max)))
    source = fill(
        template("fused.py.tmpl"), version=RENDERER_VERSION, key=key, ftype=ftype,
        imports=parts["vecmath"] if ftype == "float32" and "32(" in kernels else "",
        lanes=LANES, block=BLOCK, block_multi=BLOCK_MULTI, chunks=CHUNKS, tile_elems=TILE_ELEMS,
        helpers="\n\n\n".join(helpers), args=args, serial=serial.text(), parallel=parallel.text(),
        flat=flat)
    return source, bufs, consts


def _loop_nest(src: _Lines, program: tuple, n: int, meta: dict, formats: dict,
               parallel: bool) -> None:
    """The body of a kernel without reductions: a loop nest over the output (prange over its
    first axis in the parallel variant), the values, the store."""
    open_nest(src, "i", list(range(n)), "out.shape", "prange" if parallel else "range")
    top = len(program) - 1
    _values(src, program, _closure(program, top), meta, n, formats)
    src.add(f"out[{', '.join(f'i{k}' for k in range(n))}] = STORE(v{top})")


def _values(src: _Lines, program: tuple, order: list, meta: dict, n: int, formats: dict,
            flat: bool = False) -> None:
    """`v<i> = ...` for each instruction of `order`: a load indexes its buffer at the loop
    counters `i<k>` (0 on its size-1 axes), or at `i` in a flat loop."""
    for i in order:
        ins = program[i]
        if ins.op == "load":
            ndim, mask = meta[ins.arg]
            index = "i" if flat else ", ".join(
                "0" if mask >> k & 1 else f"i{n - ndim + k}" for k in range(ndim))
            src.add(f"v{i} = F(b{ins.arg}[{index}])")
        elif ins.op == "const":
            src.add(f"v{i} = c{ins.arg}")
        elif ins.op in _R_NAMES:  # (a stage with reductions renders through render_reduce.py)
            src.add(f"v{i} = acc{i}[{', '.join(f'i{k}' for k in range(n))}]")
        else:
            src.add(f"v{i} = {formats[Op(ins.op)].format(*(f'v{a}' for a in ins.args))}")
