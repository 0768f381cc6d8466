"""FUSED stage -> CUDA C. Pure: a plan stage in, text out; imports no pycuda and needs no GPU.

A kernel is a skeleton of kernels/ (elementwise.cu.tmpl, reduce.cu.tmpl) filled with the stage's
values, after the device helpers of kernels/cuda_helpers.cuh (inline: each source stands alone).
A stage without reductions becomes one grid-stride loop over the output's elements; each buffer
is read through its strides (in elements, passed as arguments: 0 or anything on broadcast axes),
so views and strided tensors need no copy:

    extern "C" __global__ void ew_0a3a71f34426(
        float* out, const int out_s0, const int out_s1,
        const int d0, const int d1,
        const float* b0, const int b0_s0, const int b0_s1,
        const float c0)
    {
        const int n = d0 * d1;
        const int stride = (int)blockDim.x * gridDim.x;
        for (int i = (int)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            int rest = i;
            const int j1 = rest % d1;
            rest /= d1;
            const int j0 = rest;
            const float v0 = b0[j0 * b0_s0 + j1 * b0_s1];  // load b0
            const float v1 = c0;  // const c0
            const float v2 = v0 * v1;  // mul
            out[j0 * out_s0 + j1 * out_s1] = v2;  // store float32
        }
    }

A stage with reductions over the axes R of the domain `d` (the reductions' operand shape) runs one
thread block per group of P output points (a point: an index of the kept axes). The G = BLOCK / P
threads of a point each accumulate a strided part of the reduced elements; the partials are
combined across lanes with `__shfl_xor_sync`, then across warps through shared memory, and the
result is broadcast to every thread. Each reduction is one such pass over the domain, in program
order (softmax: the max pass, then the sum pass reading the max), and the epilogue then writes the
point's part of the output. P = 1 where the innermost axis is reduced (a warp reads a row), P = 32
where it is kept (a warp reads 32 neighbouring columns of a row: coalesced).

Kernel arguments, in order (`CudaKernel.params` lists them with their pycuda struct chars):
out, its strides; the domain shape d0..; per buffer read: its pointer and its strides; the
constants (`c<k>`, in the compute type, so `2*x` and `3*x` share a kernel). Launch with
`CudaKernel.block` threads per block and `CudaKernel.grid(dom)` blocks.
"""
from __future__ import annotations

import hashlib
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ...kernels import fill, template
from ...ops import SAFELOG_MIN, LN2, Op
from ... import plan as P
from ...plan import Stage
from ...plan import closure as _closure
from ...plan import dedupe as _dedupe

RENDERER_VERSION = 1
BLOCK = 256          # threads per block (a multiple of 32)
MAX_BLOCKS = 4096    # grid cap of CudaKernel.grid (the loops are grid-stride)
FULL_MASK = "0xffffffffu"
HELPERS = "cuda_helpers.cuh"   # the device helpers every kernel carries (inline)

# The formats below use {a} and {b} (operands), {f} (the C math suffix: 'f' for float32, '' for
# float64: `exp{f}` is expf or exp), {one}, {zero} (literals of the compute type).
_U = {  # unary ops
    Op.NEG: "-{a}", Op.ABS: "fabs{f}({a})", Op.SQRT: "sqrt{f}({a})", Op.SQR: "{a} * {a}",
    # numpy's sign: +0 for +-0, nan for nan
    Op.SGN: "({a} > {zero} ? {one} : ({a} < {zero} ? -{one} : ({a} == {zero} ? {zero} : {a})))",
    Op.EXP: "exp{f}({a})", Op.LOG: "log{f}({a})", Op.EXP2: "nl_exp2({a})",
    Op.LOG2: "log2{f}({a})", Op.SIG: "{one} / ({one} + exp{f}(-{a}))",
    Op.SIG2: "{one} / ({one} + exp2{f}(-{a}))", Op.TANH: "tanh{f}({a})",
    Op.TANH2: "tanh{f}({a} * {ln2})", Op.SAFELOG: "log{f}(nl_max({a}, {safelog_min}))",
    Op.FINITE: "(isfinite({a}) ? {one} : {zero})", Op.RINT: "rint{f}({a})",
    Op.CEIL: "ceil{f}({a})", Op.FLOOR: "floor{f}({a})", Op.RECIPROCAL: "{one} / {a}",
    Op.RELU: "nl_max({a}, {zero})",
    # numpy's logaddexp(0, x): max(x, 0) + log1p(exp(-|x|)); nan stays nan through nl_max
    Op.SOFTPLUS: "nl_max({a}, {zero}) + log1p{f}(exp{f}(-fabs{f}({a})))",
    Op.NOT: "({a} == {zero} ? {one} : {zero})",
    Op.SIN: "sin{f}({a})", Op.COS: "cos{f}({a})", Op.TAN: "tan{f}({a})",
    Op.ASIN: "asin{f}({a})", Op.ACOS: "acos{f}({a})", Op.ATAN: "atan{f}({a})",
    Op.SINH: "sinh{f}({a})", Op.COSH: "cosh{f}({a})", Op.ASINH: "asinh{f}({a})",
    Op.ACOSH: "acosh{f}({a})", Op.ATANH: "atanh{f}({a})",
}
_B = {  # binary ops
    Op.ADD: "{a} + {b}", Op.SUB: "{a} - {b}", Op.MUL: "{a} * {b}", Op.DIV: "{a} / {b}",
    Op.POW: "pow{f}({a}, {b})",
    Op.EQ: "({a} == {b} ? {one} : {zero})", Op.NE: "({a} != {b} ? {one} : {zero})",
    Op.LT: "({a} < {b} ? {one} : {zero})", Op.LE: "({a} <= {b} ? {one} : {zero})",
    Op.GT: "({a} > {b} ? {one} : {zero})", Op.GE: "({a} >= {b} ? {one} : {zero})",
    Op.MINIMUM: "nl_min({a}, {b})", Op.MAXIMUM: "nl_max({a}, {b})",
    Op.AND: "(({a} != {zero} && {b} != {zero}) ? {one} : {zero})",
    Op.OR: "(({a} != {zero} || {b} != {zero}) ? {one} : {zero})",
    Op.XOR: "(({a} != {zero}) != ({b} != {zero}) ? {one} : {zero})",
}
# reductions: (initial value, combine of accumulators {a} and {b}); argmax/argmin carry an index
_R = {
    Op.SUM: ("{zero}", "{a} + {b}"),
    Op.MAX: ("-{inf}", "nl_max({a}, {b})"),
    Op.MIN: ("{inf}", "nl_min({a}, {b})"),
    Op.ARGMAX: ("-{inf}", "nl_argmax_takes"),
    Op.ARGMIN: ("{inf}", "nl_argmin_takes"),
}
_ARG = (Op.ARGMAX, Op.ARGMIN)
RENDERABLE = frozenset(_U) | frozenset(_B) | frozenset(_R) | {Op.CAST}
_R_NAMES = {op.value for op in _R}

_STORAGE = {  # the C type of each storage dtype
    "float16": "__half", "float32": "float", "float64": "double", "int8": "signed char",
    "int16": "short", "int32": "int", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int",
}

@dataclass(frozen=True)
class CudaKernel:
    """One rendered FUSED stage: the CUDA C source and what a launcher needs to call it."""
    source: str
    name: str
    bufs: tuple              # buffers read, in argument order
    consts: tuple            # constant indices, in argument order
    params: tuple            # (C declaration, pycuda struct char) per kernel argument
    block: int               # threads per block (the kernel assumes exactly this many)
    points_per_block: int    # reductions: output points per block (P); 0 without reductions
    reduce_axes: tuple       # the stage's reduced axes of the domain
    index64: bool            # indices are `long long` (else `int`: every offset < 2**31)

    @property
    def arg_format(self) -> str:
        """The argument struct of pycuda's `Function.prepare`."""
        return "".join(char for _, char in self.params)

    def grid(self, dom: tuple) -> int:
        """Blocks to launch for domain `dom` (the output's shape without reductions)."""
        if self.points_per_block:
            points = math.prod(n for k, n in enumerate(dom) if k not in self.reduce_axes)
            blocks = -(-points // self.points_per_block)
        else:
            blocks = -(-math.prod(dom) // self.block)
        return max(1, min(blocks, MAX_BLOCKS))


class _Real:
    """The compute type: its C name, math suffix and literals."""

    def __init__(self, ctype: str) -> None:
        if ctype not in ("float32", "float64"):
            raise ValueError(f"compute type must be 'float32' or 'float64', got {ctype!r}")
        self.single = ctype == "float32"
        self.name = "float" if self.single else "double"
        self.f = "f" if self.single else ""
        self.names = {"f": self.f, "one": self.lit(1.0), "zero": self.lit(0.0),
                      "ln2": self.lit(LN2), "safelog_min": self.lit(SAFELOG_MIN),
                      "inf": "INFINITY" if self.single else "(double)INFINITY"}

    def lit(self, x: float) -> str:
        return repr(float(x)) + ("f" if self.single else "")


class _Code:
    """C source lines with an indentation level."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def add(self, text: str) -> None:
        for line in text.split("\n"):
            self.lines.append("    " * self.depth + line if line else "")

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        self.add(head + " {" if head else "{")
        self.depth += 1
        yield
        self.depth -= 1
        self.add("}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render(stage: Stage, meta: dict, ctype: str, out_dtype: Any, key: str, *,
           index64: bool = False, points_per_block: int | None = None,
           block: int = BLOCK) -> CudaKernel:
    """The CUDA kernel of a FUSED stage.

    meta[buf] = (ndim, size-1 mask) or (ndim, size-1 mask, storage dtype) for every buffer the stage
    reads and for the output (a buffer without a dtype, a temp, holds the compute type); ctype is
    the compute type ('float32' or 'float64'); out_dtype the dtype stored into the output.
    points_per_block (a power of two up to `block`) overrides the reductions' layout; index64
    renders `long long` indices for tensors of 2**31 elements or more.
    The kernel's name is a hash of its text (without the header comment naming `key`): equal
    stages render equal kernels, and a binary cache can key on the name.
    NotImplementedError names an op this renderer does not know.
    """
    real = _Real(ctype)
    program, R = _dedupe(stage.program), tuple(stage.reduce_axes)
    for ins in program:
        if ins.op not in ("load", "const") and Op(ins.op) not in RENDERABLE:
            raise NotImplementedError(f"no CUDA rendering for {Op(ins.op)!r}")
    if block % 32 or block <= 0:
        raise ValueError(f"block must be a positive multiple of 32, got {block}")
    n = meta[stage.out][0]
    if any(not 0 <= k < n for k in R):
        raise ValueError(f"reduced axes {R} outside a {n}-d domain")
    # buffers and constants numbered in the stage (plan.local_names): the stages of a split tree
    # render to one kernel; the kernel's bufs / consts give the plan's numbers back
    program, meta, out_buf, plan_bufs, plan_consts = P.local_names(program, meta, stage.out)
    ctx = _Context(program, meta, real, np.dtype(out_dtype), out_buf, n, index64)
    if R:
        p = points_per_block or (32 if n - 1 not in R else 1)
        if p & (p - 1) or not 1 <= p <= block:
            raise ValueError(f"points_per_block must be a power of two in [1, {block}], got {p}")
        prefix, skeleton, fields = "red_", "reduce.cu.tmpl", _reduction(ctx, R, p, block)
    else:
        p = 0
        prefix, skeleton, fields = "ew_", "elementwise.cu.tmpl", _elementwise(ctx)
    groups = ctx.params()
    params = tuple(param for group in groups for param in group)
    # NOTE: no __launch_bounds__: with it ptxas (CUDA 13, sm_90) picked 40 registers for a float64
    # softmax and spilled around the division's slow path; without, 47 and no spill
    fields.update(version=RENDERER_VERSION, key=key, helpers=template(HELPERS), I=ctx.I,
                  params=",\n    ".join(", ".join(decl for decl, _ in group) for group in groups))
    text = template(skeleton)
    # the name hashes the kernel from its `extern "C"` line on (the header names the stage key)
    draft = fill(text, name="NAME", **fields)
    digest = hashlib.sha256(draft[draft.index('extern "C"'):].encode()).hexdigest()[:12]
    name = prefix + digest
    source = fill(text, name=name, **fields)
    return CudaKernel(source, name, tuple(plan_bufs[j] for j in ctx.bufs),
                      tuple(plan_consts[j] for j in ctx.consts), tuple(params), block, p, R, index64)


class _Context:
    """What both kernel shapes share: the program, buffers, types and how to index and store."""

    def __init__(self, program: tuple, meta: dict, real: _Real, out_dtype: np.dtype, out: int,
                 n: int, index64: bool) -> None:
        self.program, self.meta, self.real, self.out, self.n = program, meta, real, out, n
        self.out_dtype = out_dtype
        self.I = "long long" if index64 else "int"
        self.bufs = tuple(sorted({ins.arg for ins in program if ins.op == "load"}))
        self.consts = tuple(sorted({ins.arg for ins in program if ins.op == "const"}))

    def dtype(self, buf: int) -> str:
        m = self.meta[buf]
        return np.dtype(m[2]).name if len(m) > 2 else ("float32" if self.real.single else "float64")

    def params(self) -> list:
        """The kernel's (C declaration, pycuda struct char) pairs, in groups of one line each: the
        output and its strides, the domain, each buffer and its strides, the constants."""
        idx = "q" if self.I == "long long" else "i"
        groups = [[(f"{_STORAGE[self.out_dtype.name]}* out", "P")]
                  + [(f"const {self.I} out_s{k}", idx) for k in range(self.meta[self.out][0])]]
        groups.append([(f"const {self.I} d{k}", idx) for k in range(self.n)])
        for b in self.bufs:
            groups.append([(f"const {_STORAGE[self.dtype(b)]}* b{b}", "P")]
                          + [(f"const {self.I} b{b}_s{k}", idx) for k in range(self.meta[b][0])])
        groups.append([(f"const {self.real.name} c{c}", "f" if self.real.single else "d")
                       for c in self.consts])
        return [g for g in groups if g]

    def offset(self, buf: int | None) -> str:
        """The element offset of buffer `buf` (None: the output) at domain indices j0.."""
        ndim, mask = self.meta[self.out if buf is None else buf][:2]
        name = "out" if buf is None else f"b{buf}"
        terms = [f"j{self.n - ndim + k} * {name}_s{k}" for k in range(ndim) if not mask >> k & 1]
        return " + ".join(terms) or "0"

    def load(self, buf: int) -> str:
        v = f"b{buf}[{self.offset(buf)}]"
        if self.dtype(buf) == "float16":
            v = f"__half2float({v})"
            return v if self.real.single else f"(double){v}"
        same = self.dtype(buf) == ("float32" if self.real.single else "float64")
        return v if same else f"({self.real.name}){v}"

    def store(self, v: str) -> tuple[str, str]:
        """(the stored expression of compute value `v`, a comment naming the conversion)."""
        dt = self.out_dtype
        if dt.kind == "f":
            if dt.itemsize == 2:
                return (f"__float2half_rn({v})" if self.real.single else f"__double2half({v})",
                        "float16, rounded to nearest even")
            if (dt.itemsize == 4) == self.real.single:
                return v, dt.name
            return f"({_STORAGE[dt.name]}){v}", dt.name
        info = np.iinfo(dt)
        lo, hi = self.real.lit(info.min), self.real.lit(info.max)
        return (f"({_STORAGE[dt.name]})nl_sat({v}, {lo}, {hi})",
                f"{dt.name}: rounded half to even, saturated, nan -> 0")

    def expr(self, i: int) -> tuple[str, str]:
        """(expression, comment) of a const or elementwise instruction."""
        ins = self.program[i]
        if ins.op == "const":
            return f"c{ins.arg}", f"const c{ins.arg}"
        op = Op(ins.op)
        a = f"v{ins.args[0]}"
        if op is Op.CAST:
            dt = np.dtype(dict(ins.arg)["dtype"])
            return self.cast(a, dt), f"cast to {dt.name}"
        fmt = _U.get(op) or _B[op]
        b = f"v{ins.args[1]}" if len(ins.args) > 1 else None
        return fmt.format(a=a, b=b, **self.real.names), op.value

    def cast(self, v: str, dt: np.dtype) -> str:
        """`v` rounded as a store into `dt` rounds it, back in the compute type."""
        T = self.real.name
        if dt.kind == "f":
            if dt.itemsize == 2:
                h = f"__float2half_rn({v})" if self.real.single else f"__double2half({v})"
                return f"__half2float({h})" if self.real.single else f"(double)__half2float({h})"
            return v if (dt.itemsize == 4) == self.real.single or dt.itemsize == 8 \
                else f"({T})(float){v}"
        info = np.iinfo(dt)
        return f"nl_sat({v}, {self.real.lit(info.min)}, {self.real.lit(info.max)})"

    def body(self, code: _Code, order: list, done: set) -> None:
        """`const T v<i> = ...;` for each instruction of `order` not in `done` (reductions are
        values computed before: never in an order's body)."""
        for i in order:
            if i in done:
                continue
            ins = self.program[i]
            if ins.op == "load":
                code.add(f"const {self.real.name} v{i} = {self.load(ins.arg)};  // load b{ins.arg}")
            else:
                e, comment = self.expr(i)
                code.add(f"const {self.real.name} v{i} = {e};  // {comment}")

    def axes(self, order: list, out: bool) -> set:
        """The domain axes that the loads of `order` (and the output's store) index."""
        bufs = [self.program[i].arg for i in order if self.program[i].op == "load"]
        used = set()
        for buf in bufs + ([self.out] if out else []):
            ndim, mask = self.meta[buf][:2]
            used |= {self.n - ndim + k for k in range(ndim) if not mask >> k & 1}
        return used

    def decompose(self, code: _Code, flat: str, axes: list, var: str, used: set) -> None:
        """`const j<k>` of the C-order flat index `flat` over `axes`, for the axes in `used`."""
        inward = list(reversed(axes))              # innermost first
        needed = [i for i, k in enumerate(inward) if k in used]
        if not needed:
            return
        steps = inward[:needed[-1] + 1]            # down to the outermost axis used
        if len(steps) == 1:
            k = steps[0]
            code.add(f"const {self.I} j{k} = {flat if k == axes[0] else f'{flat} % d{k}'};")
            return
        code.add(f"{self.I} {var} = {flat};")
        for i, k in enumerate(steps):
            if k == axes[0]:
                code.add(f"const {self.I} j{k} = {var};")
                break
            if k in used:
                code.add(f"const {self.I} j{k} = {var} % d{k};")
            if i < len(steps) - 1:
                code.add(f"{var} /= d{k};")


def _elementwise(ctx: _Context) -> dict:
    """The fields of kernels/elementwise.cu.tmpl: the loop's size, and per element its indices
    and values (`body`) and the store."""
    code = _Code()
    n, top = ctx.n, len(ctx.program) - 1
    order = _closure(ctx.program, top)
    ctx.decompose(code, "i", list(range(n)), "rest", ctx.axes(order, True))
    ctx.body(code, order, set())
    stored, stored_as = ctx.store(f"v{top}")
    return dict(size=" * ".join(f"d{k}" for k in range(n)) or "1", body=code.text(),
                out_offset=ctx.offset(None), stored=stored, stored_as=stored_as)


def _reduction(ctx: _Context, R: tuple, P: int, block: int) -> dict:
    """The fields of kernels/reduce.cu.tmpl for a stage with reductions over R: a loop over
    groups of P points, each point a pass per reduction and then its epilogue (see the module
    docstring)."""
    program, I, n, T = ctx.program, ctx.I, ctx.n, ctx.real.name
    G = block // P                        # threads per point
    width = max(32, P)                    # threads that leave one partial per point
    NW = block // width                   # partials per point in shared memory
    kept = [k for k in range(n) if k not in R]
    red = [i for i, ins in enumerate(program) if ins.op in _R_NAMES]
    has_arg = any(Op(program[r].op) in _ARG for r in red)
    out_mask = ctx.meta[ctx.out][1]
    epi_axes = [k for k in R if not out_mask >> k & 1]  # reduced axes the output spans in full
    top = len(program) - 1
    shared = _Code()
    only_arg = all(Op(program[r].op) in _ARG for r in red)
    if not only_arg or NW > 1:  # (argmax alone, one partial per point: only its index is shared)
        shared.add(f"__shared__ {T} part[{NW * P}];  // per point: one partial per warp (or row)")
    if not only_arg:
        shared.add(f"__shared__ {T} res[{P}];  // per point: the block's result")
    if has_arg:
        shared.add(f"__shared__ {I} part_k[{NW * P}];  // argmax/argmin: the partials' indices")
        shared.add(f"__shared__ {I} res_k[{P}];  // argmax/argmin: the result")
    whole = epi_axes == list(R)           # the epilogue runs over all reduced elements
    nepi = " * ".join(f"d{k}" for k in epi_axes) or "1"
    point = _Code()
    ctx.decompose(point, "q", kept, "qrest", ctx.axes(list(range(len(program))), True))
    passes = _Code()
    for m, r in enumerate(red):
        _pass(passes, ctx, r, m, R, P, G, width, NW)
    epilogue = _Code()
    order = _closure(program, top)
    used = ctx.axes(order, True)
    ctx.decompose(epilogue, "e", epi_axes, "erest", used)
    for k in R:
        if k not in epi_axes and k in used:
            epilogue.add(f"const {I} j{k} = 0;")
    ctx.body(epilogue, order, set(red))
    stored, stored_as = ctx.store(f"v{top}")
    return dict(
        kept=str(tuple(kept)), P=P, G=G, R=str(R), shared=shared.text(),
        npoints=" * ".join(f"d{k}" for k in kept) or "1", nred=" * ".join(f"d{k}" for k in R),
        nepi_decl="" if whole else f"const {I} nepi = {nepi};",
        nepi="nred" if whole else "nepi", point=point.text(),
        passes=passes.text(), epilogue=epilogue.text(),
        out_offset=ctx.offset(None), stored=stored, stored_as=stored_as)


def _pass(code: _Code, ctx: _Context, r: int, m: int, R: tuple, P: int, G: int, width: int,
          NW: int) -> None:
    """One reduction's pass over the point's domain, its combine, and `v<r>` for every thread."""
    program, real, I, T = ctx.program, ctx.real, ctx.I, ctx.real.name
    op = Op(program[r].op)
    init, combine = _R[op]
    arg = op in _ARG
    src = program[r].args[0]
    a, k = f"a{r}", f"k{r}"
    code.add(f"// pass {m + 1}: {op.value} over axes {R}")
    code.add(f"{T} {a} = {init.format(**real.names)};")
    if arg:
        code.add(f"{I} {k} = g;  // a thread's first element: the index kept on ties with +-inf")
    with code.block(f"if (active) for ({I} e = g; e < nred; e += {G})"):
        order = _closure(program, src)
        ctx.decompose(code, "e", list(R), "rrest", ctx.axes(order, False))
        ctx.body(code, order, {i for i in order if program[i].op in _R_NAMES})
        if arg:
            with code.block(f"if ({combine}(v{src}, e, {a}, {k}))"):
                code.add(f"{a} = v{src};")
                code.add(f"{k} = e;")
        else:
            code.add(f"{a} = {combine.format(a=a, b=f'v{src}')};  // {op.value}")
    code.add("// combine: the point's lanes of a warp, then its warps through shared memory")
    off = 16
    while off >= P:
        other = f"__shfl_xor_sync({FULL_MASK}, {a}, {off})"
        if arg:
            with code.block(""):
                code.add(f"const {T} ov = {other};")
                code.add(f"const {I} ok = __shfl_xor_sync({FULL_MASK}, {k}, {off});")
                code.add(f"if ({combine}(ov, ok, {a}, {k})) {{ {a} = ov; {k} = ok; }}")
        else:
            code.add(f"{a} = {combine.format(a=a, b=other)};")
        off //= 2
    slot = f"(threadIdx.x / {width}) * {P} + p"
    store = " ".join(([f"part[{slot}] = {a};"] if not arg or NW > 1 else [])
                     + ([f"part_k[{slot}] = {k};"] if arg else []))
    code.add(store if P >= 32 else f"if (threadIdx.x % 32 < {P}) {{ {store} }}")
    code.add("__syncthreads();  // every partial is in part")
    with code.block(f"if (threadIdx.x < {P})"):
        if not arg or NW > 1:
            code.add(f"{T} s = part[p];")
        if arg:
            code.add(f"{I} sk = part_k[p];")
        if NW > 1:
            with code.block(f"for (int w = 1; w < {NW}; ++w)"):
                if arg:
                    code.add(f"const {T} ov = part[w * {P} + p];")
                    code.add(f"const {I} ok = part_k[w * {P} + p];")
                    code.add(f"if ({combine}(ov, ok, s, sk)) {{ s = ov; sk = ok; }}")
                else:
                    code.add(f"s = {combine.format(a='s', b=f'part[w * {P} + p]')};")
        code.add("res_k[p] = sk;" if arg else "res[p] = s;")
    # NOTE: the second barrier publishes res; the next pass writes part only after this one and
    # res only after its own first barrier, which no thread passes before reading res here
    code.add("__syncthreads();  // res is complete")
    value = f"({T})res_k[p]" if arg else "res[p]"
    code.add(f"const {T} v{r} = {value};  // {op.value}, the same in every thread of the point")


__all__ = ["CudaKernel", "RENDERABLE", "RENDERER_VERSION", "render"]
