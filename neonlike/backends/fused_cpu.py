"""Fused CPU execution: plan a tree once per signature, render its FUSED stages for Numba, launch.

Imported only by NervanaCPU.execute, and only where numba is installed.
"""
from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import numpy as np

from .. import plan as P
from ..dtypes import compute_dtype
from ..ops import Op
from ..optree import shape_of
from . import gemm, reference, render_numba
from .cache import CPU_CACHE, timed_first_call

PARALLEL_MIN = 1 << 15        # elements from which a stage runs on every core
DEBUG = int(os.environ.get("NEONLIKE_DEBUG", "0") or 0)
F16 = np.dtype(np.float16)


class Kernel:
    """A rendered and imported FUSED stage: its source, buffers, constants and the two variants."""

    def __init__(self, source: str, module: Any, bufs: tuple, consts: tuple) -> None:
        self.source, self.bufs, self.consts = source, bufs, consts
        self.serial = timed_first_call(module.kernel_serial, CPU_CACHE.stats)
        self.parallel = timed_first_call(module.kernel_parallel, CPU_CACHE.stats)
        self.flat = hasattr(module, "kernel_flat_serial")
        if self.flat:
            self.flat_serial = timed_first_call(module.kernel_flat_serial, CPU_CACHE.stats)
            self.flat_parallel = timed_first_call(module.kernel_flat_parallel, CPU_CACHE.stats)


class Program:
    """A KernelPlan with its kernels, ready to run on any tree of the same signature."""

    def __init__(self, key: tuple, out: Any, value: Any, tensors: list, nodes: list) -> None:
        t0 = time.perf_counter()
        self.plan = P.make_plan(out, value, tensors, nodes, render_numba.RENDERABLE)
        self.dtype = compute_dtype([out.dtype] + [t.dtype for t in tensors])
        meta = {i: (len(t.shape), P._mask(t.shape)) for i, t in enumerate(tensors)}
        meta[self.plan.n_inputs] = (len(out.shape), P._mask(out.shape))
        for j, pos in enumerate(self.plan.temps):
            shape = nodes[pos].shape
            meta[self.plan.n_inputs + 1 + j] = (len(shape), P._mask(shape))
        self.kernels: dict[int, Kernel] = {}
        for i, stage in enumerate(self.plan.stages):
            if stage.kind is P.StageKind.FUSED:
                final = stage.out == self.plan.n_inputs
                store = out.dtype if final and out.dtype != F16 else self.dtype
                tag = hashlib.sha256(repr(key).encode()).hexdigest()[:12]
                src, bufs, consts = render_numba.render(stage, meta, self.dtype.name, store,
                                                        f"{tag}/{i}")
                self.kernels[i] = Kernel(src, CPU_CACHE.module(src), bufs, consts)
        CPU_CACHE.stats["compile_seconds"] += time.perf_counter() - t0
        if DEBUG >= 3:
            for k in self.kernels.values():
                print(k.source)

    def run(self, out: Any, tensors: list, consts: list, nodes: list) -> None:
        dt, plan = self.dtype, self.plan
        bufs: dict[int, np.ndarray] = {}
        for i, t in enumerate(tensors):
            a = t._host()
            bufs[i] = a.astype(np.float32) if a.dtype == F16 else a
        target = out._host()
        direct = out.dtype != F16 and not any(
            np.may_share_memory(target, a) and not _same_view(target, a) for a in bufs.values())
        bufs[plan.n_inputs] = target if direct else np.empty(out.shape, dtype=dt)
        for j, pos in enumerate(plan.temps):
            bufs[plan.n_inputs + 1 + j] = np.empty(nodes[pos].shape, dtype=dt)
        c = [dt.type(v) for v in consts]
        for i, stage in enumerate(plan.stages):
            dst = bufs[stage.out]
            if stage.kind is P.StageKind.FUSED:
                k = self.kernels[i]
                args = [bufs[b] for b in k.bufs]
                if k.flat and dst.flags.c_contiguous and all(a.flags.c_contiguous for a in args):
                    fn = k.flat_parallel if dst.size >= PARALLEL_MIN else k.flat_serial
                    fn(dst.reshape(-1), dst.shape, *(a.reshape(-1) for a in args),
                       *(c[j] for j in k.consts))
                    continue
                dom = shape_of(nodes[stage.domain][1]) if stage.domain >= 0 else dst.shape
                size = max(dst.size, int(np.prod(dom)))
                fn = k.parallel if size >= PARALLEL_MIN else k.serial
                fn(dst, dom, *args, *(c[j] for j in k.consts))
            elif stage.kind is P.StageKind.GEMM:
                a, b = (np.asarray(bufs[x], dtype=dt) for x in stage.inputs)
                gemm.gemm(a, b, dst)
            else:
                dst[...] = reference.evaluate(nodes[stage.inputs[0]], dt)
        if not direct:
            out._store(bufs[plan.n_inputs])


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.strides == b.strides and a.shape == b.shape)


def execute(out: Any, value: Any) -> None:
    """out[:] = value through the fused path (value is an OpTreeNode)."""
    key, tensors, consts, nodes = P.walk(out, value)
    program = CPU_CACHE.get(key)
    if DEBUG:
        print(f"neonlike: {out.name or 'out'}[:] = {value.pp()}"
              + (" (cache hit)" if program is not None and DEBUG >= 2 else ""))
    if program is None:
        program = Program(key, out, value, tensors, nodes)
        CPU_CACHE.put(key, program)
    if out.size == 0 or any(t.size == 0 for t in tensors) or any(0 in n.shape for n in nodes):
        out._store(reference.evaluate(value, program.dtype))
        return
    program.run(out, tensors, consts, nodes)


__all__ = ["execute", "Program", "Kernel", "Op"]
