"""The CPU device's programs: a tree's plan with its FUSED stages rendered for Numba and loaded.

    Program(key, out, value, tensors, nodes)   (the CPU engine's compile step, see engine.py)
      -> plan.make_plan: FUSED / GEMM / HOST stages
      -> each FUSED stage rendered (render.py) and imported through CPU_CACHE's module store
      -> fast: a runner for one-stage plans (buffers, constants, one numba call)
         run:  any plan (GEMM, HOST and FUSED stages, temps)
         bind: any plan over one statement's fixed buffers (Engine.prepare): a call per stage

ENGINE is the CPU's execute pipeline (one per process: every CPU backend shares its kernels).
Imported only by NervanaCPU, and only where numba is installed.
"""
from __future__ import annotations

import hashlib
import math
import time
from typing import Any

import numpy as np
from numba import typeof

from ... import plan as P
from ...dtypes import compute_dtype
from ...memo import Memo
from ...ops import Kind, Op
from ...optree import OpTreeNode, Operators, _broadcast2, hotpath, shape_of
from .. import reference
from ..cache import CPU_CACHE, timed_first_call
from ..engine import DEBUG, Engine, jit_after_default
from . import compiler, compound, extra_ops, gemm
from . import render as render_numba

# Elements from which a stage runs on every core (below, a parallel launch costs more than it
# saves; measured on the 2-core machine with numba's tbb layer: a wake-up is ~10 us). Stages with
# transcendental functions (tens of ns per element) split earlier.
PARALLEL_MIN = 1 << 17
PARALLEL_MIN_HEAVY = 1 << 14
# Program.bind: the most temp bytes a bound statement holds between its calls
BIND_TEMPS_MAX = 1 << 22
HEAVY = frozenset(op.value for op in (
    Op.EXP, Op.LOG, Op.EXP2, Op.LOG2, Op.SIG, Op.SIG2, Op.TANH, Op.TANH2, Op.SAFELOG, Op.SOFTPLUS,
    Op.POW, Op.SIN, Op.COS, Op.TAN, Op.ASIN, Op.ACOS, Op.ATAN, Op.SINH, Op.COSH, Op.ASINH,
    Op.ACOSH, Op.ATANH, Op.DIV, Op.SQRT))
F16 = np.dtype(np.float16)


class Kernel:
    """A rendered and imported FUSED stage: its source, buffers, constants and the two variants."""

    def __init__(self, source: str, module: Any, bufs: tuple, consts: tuple) -> None:
        self.source, self.bufs, self.consts = source, bufs, consts
        self.stash = "# stash:" in source  # see Program.stash
        self.aliased = "# the output itself" in source   # see Program.alias
        self.serial = _first_call(module, module.kernel_serial)
        self.parallel = _first_call(module, module.kernel_parallel)
        self.flat = hasattr(module, "kernel_flat_serial")
        if self.flat:
            self.flat_serial = _first_call(module, module.kernel_flat_serial)
            self.flat_parallel = _first_call(module, module.kernel_flat_parallel)


def _first_call(module: Any, fn: Any) -> Any:
    """`fn` (a kernel's dispatcher), its first call compiled by the compile worker (compiler.py)
    and timed (cache.timed_first_call)."""
    return timed_first_call(fn, CPU_CACHE.stats,
                            lambda args: compiler.WORKER.compile(module, fn, args))


class Program:
    """A KernelPlan with its kernels, ready to run on any tree of the same signature."""

    def __init__(self, key: tuple, out: Any, value: Any, tensors: list, nodes: list) -> None:
        t0 = time.perf_counter()
        self.dtype = compute_dtype([out.dtype] + [t.dtype for t in tensors])
        self.plan = P.make_plan(out, value, tensors, nodes, render_numba.RENDERABLE,
                                axpby=out.dtype == self.dtype)
        meta = P.buffer_meta(self.plan, tensors, out, nodes)
        self.kernels: dict[int, Kernel] = {}
        heavy = any(ins.op in HEAVY for st in self.plan.stages for ins in st.program)
        self.parallel_min = PARALLEL_MIN_HEAVY if heavy else PARALLEL_MIN
        tag = hashlib.sha256(repr(key).encode()).hexdigest()[:12]
        # the output read as an operand (the same tensor): its slot, read through out (render)
        out_slot = next((j for j, t in enumerate(tensors) if t is out), None)
        for i, stage in enumerate(self.plan.stages):
            if stage.kind is P.StageKind.FUSED:
                final = stage.out == self.plan.n_inputs
                store = out.dtype if final and out.dtype != F16 else self.dtype
                # the key names the plan, not the stage: stages of one source share a kernel
                # (a tree split under the plan's caps, issue 13)
                src, bufs, consts = render_numba.render(stage, meta, self.dtype.name, store, tag,
                                                        out_slot if final else None)
                self.kernels[i] = Kernel(src, CPU_CACHE.module(src), bufs, consts)
        CPU_CACHE.stats["compile_seconds"] += time.perf_counter() - t0
        # a kernel of the plan writes its output before reading its inputs again (render_numba's
        # stash): the output may then share no memory with any input, not even as the same view
        self.stash = any(k.stash for k in self.kernels.values())
        # the input slot a kernel reads through its output argument (render's `alias`): where the
        # output goes through a temp (run, not direct) the temp starts with that input's values
        # (a scaled GEMM into the output reads it too: its beta * out)
        self.alias = out_slot if any(k.aliased for k in self.kernels.values()) or any(
            st.scale for st in self.plan.stages) else None
        # `out[:] = dot(a, b)` runs straight into the output where it may (a compute-dtype output
        # sharing no memory with the operands)
        self.gemm_only = P.gemm_only(self.plan)
        self.fast = self._fast_runner(out, tensors, nodes)
        if DEBUG >= 3:
            for k in self.kernels.values():
                print(k.source)

    def _fast_runner(self, out: Any, tensors: list, nodes: list) -> Any:
        """A runner for the common plan, one FUSED stage without temps (with or without
        reductions), that needs no node list; it returns False (and does nothing) where the
        general `run` must go."""
        plan = self.plan
        if self.gemm_only:
            return self._gemm_runner()
        if len(plan.stages) != 1 or plan.stages[0].kind is not P.StageKind.FUSED or \
                plan.temps or any(t.dtype == F16 for t in tensors + [out]):
            return None
        k, stage = self.kernels[0], plan.stages[0]
        if k.bufs != tuple(range(len(tensors))) or k.consts != tuple(range(len(k.consts))):
            return None
        dom_slots = None
        if stage.domain >= 0:  # the reductions' domain: the broadcast of their operand's tensors
            dom_slots = _domain_slots(nodes[stage.domain][1], tensors)
            if dom_slots is None or _broadcast_all(
                    [tensors[i].shape for i in dom_slots]) != shape_of(nodes[stage.domain][1]):
                return None
        n_consts, ctype, stash = len(k.consts), self.dtype.type, self.stash
        flat = k.flat and dom_slots is None
        nd_fns = [k.serial, k.parallel]
        flat_fns = [k.flat_serial, k.flat_parallel] if flat else None
        entries = [None, None]   # the flat variants' entry points (see _entry_point); False: none
        nd_entries = [None, None]   # the n-d variants' (reductions, broadcasts), likewise
        threshold = self.parallel_min

        def fast(out: Any, tensors: Any, consts: Any) -> bool:
            if len(consts) != n_consts:
                return False
            try:
                target, troot, tflat, plain = out._hinfo
            except AttributeError:
                target, troot, tflat, plain = _host_info(out)
            flats = []
            for t in tensors:
                try:
                    a, root, fl, p = t._hinfo
                except AttributeError:
                    a, root, fl, p = _host_info(t)
                if root == troot and np.may_share_memory(a, target) and (
                        stash or (a is not target and not _same_view(a, target))):
                    return False
                flats.append(fl)
                plain = plain and p
            size = target.size
            if size == 0:
                return False
            if plain:
                # NOTE: the constants go as Python floats: the entry point converts each to its
                # signature's float32/float64 as numpy's scalar constructor does
                if flat:
                    entry = entries[size >= threshold]
                    if entry:
                        entry(tflat, out.shape, *flats, *consts)
                        return True
                else:
                    dom, size = _domain(target, tensors, dom_slots)
                    entry = nd_entries[size >= threshold]
                    if entry and size:
                        entry(target, dom, *[t._hinfo[0] for t in tensors], *consts)
                        return True
            return launch(out, tensors, consts, target, tflat, flats, plain)

        def launch(out: Any, tensors: Any, consts: Any, target: np.ndarray, tflat: Any,
                   flats: list, plain: bool) -> bool:
            """The first calls (compiling), and buffers that are not all plain and flat."""
            c = [_constant(ctype, v) for v in consts]
            if flat and tflat is not None and all(f is not None for f in flats):
                par = target.size >= threshold
                fn = flat_fns[par]
                fn(tflat, out.shape, *flats, *c)
                if fn is k.flat_serial or fn is k.flat_parallel:
                    fn = flat_fns[par] = fn.dispatcher   # compiled: call numba directly from now on
                if plain and entries[par] is None:
                    entries[par] = _entry_point(fn, (tflat, out.shape, *flats, *c)) or False
                return True
            dom, size = _domain(target, tensors, dom_slots)
            if size == 0:
                return False
            par = size >= threshold
            fn = nd_fns[par]
            arrays = [t._hinfo[0] for t in tensors]
            fn(target, dom, *arrays, *c)
            if fn is k.serial or fn is k.parallel:
                fn = nd_fns[par] = fn.dispatcher     # compiled: call numba directly from now on
            if plain and nd_entries[par] is None:
                # plain buffers are C-contiguous: the entry point of their 'C' layout signature
                # indexes without strides, so only plain calls ever take it
                nd_entries[par] = _entry_point(fn, (target, dom, *arrays, *c)) or False
            return True
        hot = hotpath()
        if flat and hot is not None:   # its plain, apart, entry-point-known case in C
            return hot.FlatRunner(entries, n_consts, threshold, fast)
        return fast

    def _gemm_runner(self) -> Any:
        """A runner for `out[:] = dot(a, b)` of two tensors: a GEMM into the output without a
        walk (gemm.gemm goes through a temp where the output overlaps an operand); False
        (nothing done) where a dtype is not the compute dtype or a size is zero."""
        stage = self.plan.stages[0]
        ia, ib = stage.inputs
        if max(ia, ib) >= self.plan.n_inputs:
            return None
        dt = self.dtype
        ta, tb = stage.trans or (False, False)

        def fast(out: Any, tensors: Any, consts: Any) -> bool:
            target, a, b = out._host(), tensors[ia]._host(), tensors[ib]._host()
            a, b = (a.T if ta else a), (b.T if tb else b)
            if consts or not (target.dtype == a.dtype == b.dtype == dt) or \
                    0 in a.shape or 0 in b.shape or target.size == 0:
                return False
            gemm.gemm(a, b, target)
            return True
        return fast

    def bind(self, out: Any, tensors: list, consts: list, nodes: list) -> Any:
        """A runner of this plan for one statement whose tree and tensors never change (an
        ngraph computation's, Engine.prepare): its buffers, temps, constants and each stage's
        call resolved once, so that a call costs one Python call per stage instead of `run`'s
        per-call checks, allocations and numba typing (a five-stage statement: ~20 us less).
        None where `run` must serve every call: a float16 buffer, a GEMM operand of another
        dtype, an output sharing memory with an operand other than as the same view, temps of
        over BIND_TEMPS_MAX bytes (the statement would hold them; at that size a call's own
        allocations cost nothing beside its arithmetic)."""
        stages = self.plan.stages
        if (len(stages) < 2 and stages[0].kind is P.StageKind.FUSED) or sum(
                math.prod(nodes[pos].shape) for pos in self.plan.temps) * \
                self.dtype.itemsize > BIND_TEMPS_MAX:
            return None
        return _Bound.make(self, out, tensors, consts, nodes)

    def _apart(self, target: np.ndarray, arrays: Any) -> bool:
        """Whether the stages may write `target` directly: it shares no memory with an
        operand, or only as the same view where no kernel stashes (render's `stash`)."""
        return not any(np.may_share_memory(target, a) and (self.stash or not _same_view(target, a))
                       for a in arrays)

    def _stage_calls(self, bufs: dict, consts: list, nodes: list, backend: Any) -> list:
        """(function, arguments) per stage over the buffers `bufs` (tensors, output, temps):
        what `run` calls at once and `bind` keeps."""
        dt = self.dtype
        c = [dt.type(v) for v in consts]
        calls: list = []
        for i, stage in enumerate(self.plan.stages):
            dst = bufs[stage.out]
            if stage.kind is P.StageKind.FUSED:
                k = self.kernels[i]
                args = [bufs[b] for b in k.bufs]
                cs = [c[j] for j in k.consts]
                if k.flat and dst.flags.c_contiguous and all(a.flags.c_contiguous for a in args):
                    fn = k.flat_parallel if dst.size >= self.parallel_min else k.flat_serial
                    calls.append((fn, (dst.reshape(-1), dst.shape,
                                       *(a.reshape(-1) for a in args), *cs)))
                else:
                    dom = shape_of(nodes[stage.domain][1]) if stage.domain >= 0 else dst.shape
                    fn = k.parallel if max(dst.size, math.prod(dom)) >= self.parallel_min \
                        else k.serial
                    calls.append((fn, (dst, dom, *args, *cs)))
            elif stage.kind is P.StageKind.GEMM:
                a, b = (np.asarray(v, dtype=dt) for v in P.gemm_operands(stage, bufs))
                calls.append((_gemm, (a, b, dst, *P.gemm_scale(stage, consts))))
            elif stage.kind is P.StageKind.COMPOUND:
                calls.append((compound.run, (backend, nodes[stage.node][0], dst,
                                             [bufs[b] for b in stage.inputs])))
            else:
                calls.append((_host_stage, (nodes[stage.node], dst,
                                            [bufs[b] for b in stage.inputs], dt)))
        return calls

    def run(self, out: Any, tensors: list, consts: list, nodes: list) -> None:
        dt, plan = self.dtype, self.plan
        bufs: dict[int, np.ndarray] = {}
        for i, t in enumerate(tensors):
            a = t._host()
            bufs[i] = a.astype(np.float32) if a.dtype == F16 else a
        target = out._host()
        direct = out.dtype != F16 and self._apart(target, bufs.values())
        if self.gemm_only and direct and target.dtype == dt:
            # gemm.gemm itself goes through a temp where the target overlaps an operand
            gemm.gemm(*(np.asarray(v, dtype=dt) for v in P.gemm_operands(plan.stages[0], bufs)),
                      target)
            return
        bufs[plan.n_inputs] = target if direct else np.empty(out.shape, dtype=dt)
        if not direct and self.alias is not None:
            np.copyto(bufs[plan.n_inputs], bufs[self.alias])   # read through the output
        for j, pos in enumerate(plan.temps):
            bufs[plan.n_inputs + 1 + j] = np.empty(nodes[pos].shape, dtype=dt)
        for fn, args in self._stage_calls(bufs, consts, nodes, out.backend):
            fn(*args)
        if not direct:
            out._store(bufs[plan.n_inputs])


class _Bound:
    """Program.bind's runner: `calls` is one (function, arguments) pair per stage, over the
    statement's own arrays and temps (allocated once, held here). The first call runs each
    FUSED stage through its kernel's dispatcher (compiling where needed); from then on a stage
    calls the compiled entry point of those exact argument types (_entry_point)."""

    def __init__(self, calls: list) -> None:
        self.calls, self.resolved = calls, False

    @staticmethod
    def make(program: Program, out: Any, tensors: list, consts: list, nodes: list) -> Any:
        dt, plan = program.dtype, program.plan
        if out.dtype == F16 or any(t.dtype == F16 for t in tensors):
            return None
        bufs = {i: t._host() for i, t in enumerate(tensors)}
        target = out._host()
        if not program._apart(target, bufs.values()):
            return None
        bufs[plan.n_inputs] = target
        for j, pos in enumerate(plan.temps):
            bufs[plan.n_inputs + 1 + j] = np.empty(nodes[pos].shape, dtype=dt)
        # a GEMM operand of another dtype is converted each call (run), never once for all
        if any(v.dtype != dt for st in plan.stages if st.kind is P.StageKind.GEMM
               for v in P.gemm_operands(st, bufs)):
            return None
        return _Bound(program._stage_calls(bufs, consts, nodes, out.backend))

    def __call__(self) -> None:
        for fn, args in self.calls:
            fn(*args)
        if not self.resolved:       # every kernel has now run on these types: their entry points
            self.resolved = True
            self.calls = [(_resolved(fn, args), args) for fn, args in self.calls]


def _resolved(fn: Any, args: tuple) -> Any:
    """The compiled entry point for a FUSED stage's call (`fn` a timed_first_call wrapper of a
    numba dispatcher), else `fn` itself (GEMM, COMPOUND and HOST stages; no entry point)."""
    dispatcher = getattr(fn, "dispatcher", None)
    if dispatcher is None:
        return fn
    return _entry_point(dispatcher, args) or dispatcher


def _gemm(a: np.ndarray, b: np.ndarray, dst: np.ndarray, alpha: float = 1.0,
          beta: float = 0.0) -> None:
    """A GEMM stage: dst = alpha a @ b + beta dst. A zero alpha or beta, where BLAS would not
    read a @ b or dst, computes the product and the sum as the tree spells them, so that a NaN
    or inf there spreads as the reference's elementwise ops spread it (0 * inf is NaN)."""
    if beta == 0.0 and alpha == 1.0:
        gemm.gemm(a, b, dst)
    elif alpha != 0.0 and beta != 0.0:
        gemm.gemm(a, b, dst, alpha, beta)
    else:
        t = gemm.gemm(a, b, np.empty(dst.shape, dst.dtype))
        ct = dst.dtype.type
        with np.errstate(all="ignore"):     # as the fused kernels: values, no warnings
            np.add(np.multiply(ct(alpha), t), np.multiply(ct(beta), dst), out=dst)


def _host_stage(node: Any, dst: np.ndarray, operands: list, dt: Any) -> None:
    """A HOST stage: the node's op on its operands computed before (or its whole subtree); a
    transpose that rotates the axes of a float array by the tiled kernel (copy_transpose's)."""
    if operands and node[0]["op"] is Op.TRANSPOSE and \
            extra_ops.transpose_into(operands[0], dst, node[0]["axes"]):
        return
    dst[...] = reference.evaluate_op(node[0], operands, dt) if operands else \
        reference.evaluate(node, dt)


def _host_info(t: Any) -> tuple:
    """(host array, id of the object owning its memory, its 1-D view or None where it is not
    C-contiguous, whether that view is plain: aligned and writeable), memoised on the tensor: a
    CPU tensor's array never changes."""
    try:
        return t._hinfo
    except AttributeError:
        a = t._host()
        root = a
        while isinstance(root, np.ndarray) and root.base is not None:
            root = root.base
        flat = a.reshape(-1) if a.flags.c_contiguous else None
        plain = flat is not None and flat.flags.aligned and flat.flags.writeable
        info = t._hinfo = (a, id(root), flat, plain)
        return info


def _entry_point(dispatcher: Any, args: tuple) -> Any:
    """The compiled entry point that `dispatcher(*args)` ran (None where it cannot be found).

    Calling it skips numba's per-call typing of every argument (~0.25 us of a ~3 us statement).
    It is only called with arguments of the same types: the fast key fixes every buffer's dtype
    and rank, the flat variant takes 1-D C-contiguous views, and only plain (aligned, writeable)
    views go through it; anything else still goes through the dispatcher."""
    try:
        return dispatcher.overloads[tuple(typeof(a) for a in args)].entry_point
    except (AttributeError, KeyError, ValueError):
        return None


_CONSTS = {t: Memo(f"cpu.constants.{t.__name__}", 1024) for t in (np.float32, np.float64)}


def _constant(ctype: Any, v: float) -> Any:
    """v as a numpy scalar of the compute type (numba then types it float32 or float64); the
    scalars of recent values are kept (a numpy scalar costs more to make than to look up)."""
    known = _CONSTS[ctype]
    c = known.get(v)
    if c is None:
        c = known.put(v, ctype(v))
    return c


def _domain_slots(x: Any, tensors: list) -> tuple | None:
    """Slots of the tensors under the operand of a stage's reductions (an elementwise subtree,
    possibly through the stage's earlier reductions, whose operands span the same domain: var's
    x - mean(x)), or None where it holds anything else."""
    ids = {id(t): i for i, t in enumerate(tensors)}
    slots, stack, seen = set(), [x], set()
    while stack:
        y = stack.pop()
        if id(y) in seen:
            continue
        seen.add(id(y))
        if isinstance(y, OpTreeNode):
            if y.kind is not Kind.ELEMENTWISE and y.kind is not Kind.REDUCTION:
                return None
            stack.extend(c for c in (y[1], y[2]) if c is not None)
        elif isinstance(y, Operators):
            slots.add(ids[id(y)])
    return tuple(sorted(slots)) or None


def _domain(target: np.ndarray, tensors: Any, dom_slots: tuple | None) -> tuple:
    """(domain shape, elements to run over) of an n-d kernel call: the output's, or for a stage
    of reductions the broadcast of their operands' tensors (at least the output's size; 0 where
    the domain is empty)."""
    if dom_slots is None:
        return target.shape, target.size
    dom = _broadcast_all([tensors[i].shape for i in dom_slots])
    size = math.prod(dom)
    return dom, (size and max(size, target.size))


def _broadcast_all(shapes: list) -> tuple:
    shape = shapes[0]
    for s in shapes[1:]:
        shape = shape if s == shape else _broadcast2(shape, s, "reduce")
    return shape


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.strides == b.strides and a.shape == b.shape)


ENGINE = Engine("cpu", Program, CPU_CACHE, jit_after_default())

__all__ = ["ENGINE", "Program", "Kernel", "Op"]
