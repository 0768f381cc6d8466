"""The 'gpu' backend: CUDA through PyCUDA, kernels from render_cuda, GEMM through cuBLAS.

    out[:] = tree -> plan.walk (signature) -> Program (cached by signature: plan.make_plan, each
    FUSED stage rendered by render_cuda, compiled by nvcc (compile.py: disk cache keyed by
    source, arch and toolkit) and loaded once per device) -> per stage: FUSED launch, GEMM
    through cuBLAS (cublas.py), COMPOUND (conv, pool nodes) through the backend's conv and pool
    ops (nn.py, compound.py), HOST through the numpy reference interpreter on host copies (then
    uploaded).

Memory comes from one pycuda DeviceMemoryPool per device; a GPUTensor is an allocation, a byte
offset, a shape and strides in elements (views never copy). The device state (primary context,
pool, loaded kernels, cuBLAS handle) belongs to a `_Device` shared by every backend of that
device id in the process, so tensors outlive the backend that made them; cleanup_backend only
synchronises and drops the backend's program cache.

Random numbers: a counter-based generator (splitmix64 of key + element index, the key hashed from
a seed drawn once from `be.rng` and a per-call counter): no state lives on the device, a seed
reproduces every draw, and `rng_uniform_reference` is the same formula in numpy.

The pure parts need no pycuda: layout.py (layouts, overlap, launch-argument marshalling) and
rng.py (the RNG's CUDA source and its numpy twin); they are tested in
tests/test_gpu_offline.py, the rest in tests/test_gpu.py.

Unverified on a GPU
-------------------
Written on a machine without a GPU or pycuda. tests/test_gpu_offline.py runs this module's own
code end to end on an emulated device (numpy memory for pycuda's copies, a numpy evaluation of
each render_cuda stage from the launch arguments, column-major GEMM emulated from the cuBLAS
arguments), so the plumbing is checked; what has never run is everything that touches CUDA:
- `_Device.__init__`: Device(i).retain_primary_context() + push, compute_capability,
  MULTIPROCESSOR_COUNT, DeviceMemoryPool.allocate (ints from int(allocation) as pointers), the
  atexit `close` (stop_holding, pop) and its order against pycuda's own exit handlers.
- `_Device.function`: module_from_buffer(cubin from compile.py for the device's arch),
  get_function, prepare(arg_format); `prepared_call((grid, 1), (block, 1, 1), *args)` with int
  pointers, 'i'/'q' strides and 'f'/'d' constants (render_cuda's kernels are compiled by nvcc in
  the tests, never launched).
- memcpy_htod / memcpy_dtoh with int device pointers (GPUTensor.get, _store, _from_host).
- cublas.py on the device: load_library's search (pip nvidia-cublas, torch/lib), cublasCreate_v2
  inside pycuda's primary context, cublasSetStream_v2(NULL), Sgemm_v2 / Dgemm_v2 / GemmEx (float16,
  CUBLAS_COMPUTE_32F) / S|DgemmStridedBatched, and the status -> CublasError path.
- The RNG kernels nl_rand_uniform / nl_rand_normal (compiled, and their mixing function run as host
  C++, in the tests; never launched), cospif/logf accuracy against rng_normal_reference.
- Index64 kernels (tensors of 2**31 elements), the grid cap (render_cuda.MAX_BLOCKS) on real sizes.
- Several backends in one process, cleanup_backend with live tensors, other threads (the context
  is pushed only in the thread that built the device's first backend).
First commands on the device (carry .whl as /work/shared/gpu/README.md says):
    python3 -c "import pycuda.autoinit; from neonlike.backends import cublas; cublas.Cublas()"
    python3 -m pytest -x -q tests/test_gpu.py tests/test_gpu_offline.py
    python3 -m pytest -x -q tests/test_backends.py tests/test_tensor.py -k gpu
"""
from __future__ import annotations

import atexit
import hashlib
import math
from typing import Any, Mapping, Sequence

import numpy as np

from ... import plan as P
from ... import shapes as S
from ...dtypes import cast_for_store, compute_dtype
from ...memo import Memo
from ...ops import Op
from ...optree import OpTreeNode, build, shape_of
from ...tensor import Tensor
from .. import reference
from ..backend import Backend
from ..engine import DEBUG
from . import compound
from .nn import GPUNNOpsMixin

FLOAT_DTYPES = frozenset(np.dtype(t) for t in ("float16", "float32", "float64"))

def _require_cuda(device_id: int) -> None:
    try:
        import pycuda.driver as drv
    except ImportError as e:
        raise ImportError(f"gen_backend('gpu') needs pycuda (pip install 'neonlike[gpu]' on a "
                          f"machine with CUDA): {e}") from e
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as e:  # pycuda.driver.Error, or a missing libcuda
        raise RuntimeError(f"gen_backend('gpu'): pycuda found no usable CUDA driver: {e}") from e
    if not 0 <= device_id < count:
        raise RuntimeError(f"gen_backend('gpu'): device_id {device_id} requested, "
                           f"{count} CUDA device(s) present")


# layouts and random numbers live in their own modules (pure, no pycuda); their names are
# re-exported here, where the backend and its tests use them
from .layout import (BufDesc, INDEX32_MAX, contiguous_strides, extent,  # noqa: E402,F401
                         is_contiguous, launch_args, overlaps, reshape_strides, same_view,
                         slice_layout, transpose_layout)
from .rng import (RNG_BLOCK, RNG_SOURCE, rng_key,  # noqa: E402,F401
                      rng_normal_reference, rng_uniform_reference, splitmix64)


# **************** the device ****************

class _Device:
    """One CUDA device's state for the process: its primary context (pushed in this thread), the
    memory pool, loaded kernels (by name) and the cuBLAS handle."""

    _all: dict = {}

    @classmethod
    def get(cls, device_id: int) -> _Device:
        dev = cls._all.get(device_id)
        if dev is None:
            dev = cls._all[device_id] = cls(device_id)
        return dev

    def __init__(self, device_id: int) -> None:
        import pycuda.driver as drv
        import pycuda.tools
        self.drv = drv
        self.device_id = device_id
        self.device = drv.Device(device_id)
        self.context = self.device.retain_primary_context()
        self.context.push()
        major, minor = self.device.compute_capability()
        self.compute_capability = (major, minor)
        self.arch = f"sm_{major}{minor}"
        self.sm_count = self.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
        self.pool = pycuda.tools.DeviceMemoryPool()
        self.functions = Memo(f"gpu{device_id}.functions", 4096)  # name -> (module, function)
        self._cublas: Any = None
        atexit.register(self.close)

    def alloc(self, nbytes: int) -> Any:
        return self.pool.allocate(max(int(nbytes), 1))

    def function(self, source: str, name: str, arg_format: str) -> Any:
        """The prepared kernel `name` of `source`, compiled (disk-cached) and loaded once."""
        entry = self.functions.get(name)
        if entry is None:
            from .compile import compile_cubin
            module = self.drv.module_from_buffer(compile_cubin(source, name, self.arch))
            fn = module.get_function(name)
            fn.prepare(arg_format)
            entry = self.functions.put(name, (module, fn))
        return entry[1]

    @property
    def cublas(self) -> Any:
        if self._cublas is None:
            from .cublas import Cublas
            self._cublas = Cublas()
            self._cublas.set_stream(None)
        return self._cublas

    def synchronize(self) -> None:
        self.context.synchronize()

    def close(self) -> None:
        """At exit: free the pool's held blocks, destroy cuBLAS, pop the context."""
        if self.context is None:
            return
        try:
            self.synchronize()
            if self._cublas is not None:
                self._cublas.destroy()
            self.functions.clear()
            self.pool.stop_holding()
            self.context.pop()
        finally:
            self.context = None
            _Device._all.pop(self.device_id, None)


# **************** tensors ****************

class GPUTensor(Tensor):
    """A Tensor over device memory: an allocation, a byte offset to element 0, element strides."""

    def __init__(self, backend: Any, shape: tuple, dtype: Any, allocation: Any, offset: int = 0,
                 strides: tuple | None = None, name: str | None = None,
                 persist_values: bool = True, base: Tensor | None = None) -> None:
        super().__init__(backend, shape, dtype, name, persist_values, base)
        self.allocation = allocation     # keeps the memory alive (views share it)
        self.offset = int(offset)        # bytes from the allocation's start to element 0
        self.strides = contiguous_strides(self.shape) if strides is None else tuple(strides)

    # ---------------------------------------------------------------- metadata
    @property
    def ptr(self) -> int:
        return int(self.allocation) + self.offset

    gpudata = ptr

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        return is_contiguous(self.shape, self.strides)

    @property
    def is_trans(self) -> bool:
        """A 2-D `.T`-style view: columns are contiguous, rows are not."""
        return len(self.shape) == 2 and self.strides[0] == 1 and self.shape[0] > 1 and \
            self.strides[1] != 1

    def desc(self) -> BufDesc:
        return BufDesc(self.ptr, self.shape, self.strides, self.dtype.itemsize)

    def _derived(self, shape: tuple, offset_elems: int, strides: tuple,
                 dtype: Any = None, name: str | None = None) -> GPUTensor:
        dt = self.dtype if dtype is None else np.dtype(dtype)
        return GPUTensor(self.backend, shape, dt, self.allocation,
                         self.offset + offset_elems * self.dtype.itemsize, strides, name,
                         self.persist_values, base=self)

    # ---------------------------------------------------------------- views
    def _view(self, slices: tuple, shape: tuple) -> GPUTensor:
        offset, sliced, strides = slice_layout(0, self.shape, self.strides, slices)
        return self._derived(shape, offset, reshape_strides(sliced, strides, shape))

    def reshape(self, *shape: Any) -> GPUTensor:
        """A view of another shape (one dim may be -1); ValueError where that needs a copy."""
        target = S.reshape_target(self.shape, shape[0] if len(shape) == 1 else shape)
        strides = reshape_strides(self.shape, self.strides, target)
        if strides is None:
            raise ValueError(f"reshape: a strided view of shape {self.shape} cannot be reshaped to "
                             f"{target} without a copy; assign it to a new tensor first")
        return self._derived(target, 0, strides)

    @property
    def T(self) -> GPUTensor:
        """Transposed view: 2-D reverses the axes; more dims swap the last two (batched matrices)."""
        shape, strides = transpose_layout(self.shape, self.strides)
        return self._derived(shape, 0, strides)

    def share(self, shape: Any, dtype: Any = None, name: str | None = None) -> GPUTensor:
        """A tensor over the first bytes of this one's (contiguous) memory."""
        dt = self.backend._dtype(dtype if dtype is not None else self.dtype)
        shape = S.host_shape(S.as_shape(shape))
        nbytes = int(np.prod(shape)) * dt.itemsize
        if not self.is_contiguous or nbytes > self.nbytes:
            raise ValueError(f"share: needs a contiguous tensor of at least {nbytes} bytes, "
                             f"this one has shape {self.shape} and {self.nbytes} bytes")
        return GPUTensor(self.backend, shape, dt, self.allocation, self.offset, None, name,
                         base=self)

    def _layout(self) -> tuple | None:
        root = self._original_base
        item = self.dtype.itemsize
        delta = self.offset - root.offset
        if self.dtype != root.dtype or delta % item or self.allocation is not root.allocation:
            return None
        return delta // item, self.strides

    # ---------------------------------------------------------------- host transfers
    def get(self) -> np.ndarray:
        """A host copy (always a copy)."""
        host = np.empty(self.shape, dtype=self.dtype)
        if self.size == 0:
            return host
        src = self if self.is_contiguous else self.backend._contiguous_copy(self)
        self.backend._drv.memcpy_dtoh(host, src.ptr)
        return host

    _host = get   # the reference interpreter (HOST stages) reads leaves through _host()

    def _store(self, values: np.ndarray) -> None:
        """Write host values that broadcast to self.shape: one upload where the tensor is
        contiguous and the values whole, else an upload of the values as they are and a copy
        kernel that broadcasts and strides them."""
        if self.size == 0:
            return
        host = cast_for_store(np.asarray(values), self.dtype)
        if host.shape == self.shape and self.is_contiguous:
            self.backend._drv.memcpy_htod(self.ptr, np.ascontiguousarray(host))
            return
        host = host.reshape((1,) * (len(self.shape) - host.ndim) + host.shape)
        src = self.backend._from_host(np.ascontiguousarray(host), None, False)
        self.backend._copy(self, src)


# **************** the backend ****************

# reduce_layout's answer for every reduction where set (benchmarks probe layouts with it)
LAYOUT_OVERRIDE: list = [None]


def reduce_layout(reduce_axes: Sequence[int], dom: tuple, sm_count: int) -> tuple | None:
    """(points per block, threads per block) of a reduction over `reduce_axes` of domain `dom`,
    or None for render's default (a block per row where the innermost axis is reduced).

    Where the innermost axis is kept (sums over columns: softmax over axis 0), a warp reads P
    neighbouring points of a row. render's default P = 32 leaves points / 32 blocks, which for a
    (1e5, 1024) column sum is 32 blocks on a 132-SM device (a fifth of its bandwidth measured on
    an H100). P shrinks (down to 8: a warp still reads whole 32-byte sectors) until there are two
    blocks per SM, and the block grows to 1024 threads so that each point has more readers.
    """
    if LAYOUT_OVERRIDE[0] is not None:
        return LAYOUT_OVERRIDE[0]
    n = len(dom)
    if not n or n - 1 in reduce_axes:
        return None
    points = math.prod(d for k, d in enumerate(dom) if k not in reduce_axes)
    ppb = 32
    while ppb > 8 and points // ppb < 2 * sm_count:
        ppb //= 2
    return (ppb, 1024) if points // ppb < 4 * sm_count else None

class _Program:
    """A KernelPlan with its kernels compiled and loaded, ready for any tree of its signature."""

    def __init__(self, be: NervanaGPU, key: tuple, out: Any, value: Any, tensors: list,
                 nodes: list) -> None:
        self.be = be
        from . import render as RC
        self.plan = P.make_plan(out, value, tensors, nodes, RC.RENDERABLE)
        self.dtype = compute_dtype([out.dtype] + [t.dtype for t in tensors])
        self.meta = P.buffer_meta(self.plan, tensors, out, nodes, dtypes=True)
        self.out_dtype = out.dtype
        self.tag = hashlib.sha256(repr(key).encode()).hexdigest()[:12]
        self.kernels: dict = {}           # stage -> its kernel for 32-bit indices, default layout
        self.variants: dict = {}          # (stage, index64, points per block, block) -> kernel
        for i, stage in enumerate(self.plan.stages):
            if stage.kind is P.StageKind.FUSED:   # compiled now: a failure leaves out untouched
                self.kernels[i] = self._render(be, i, stage, False)
        self.gemm_only = P.gemm_only(self.plan)
        self.fast = self._fast_runner(be)

    def _render(self, be: NervanaGPU, i: int, stage: P.Stage, index64: bool,
                layout: tuple | None = None) -> Any:
        from . import render as RC
        store = self.out_dtype if stage.out == self.plan.n_inputs else self.dtype
        ppb, block = layout or (None, RC.BLOCK)
        k = RC.render(stage, self.meta, self.dtype.name, store, f"{self.tag}/{i}",
                      index64=index64, points_per_block=ppb, block=block)
        if DEBUG >= 3:
            print(k.source)
        be._device.function(k.source, k.name, k.arg_format)
        return k

    def _fast_runner(self, be: NervanaGPU) -> Any:
        """`fast(out, tensors, consts) -> bool` for a plan that is one elementwise kernel into the
        output (most statements): the launch straight from the call's tensors, without the
        walk, descriptors or temps. False (nothing done) where `run` must decide: the output
        shares an allocation with an input (aliasing), an empty or 2**31-index tensor."""
        plan = self.plan
        if len(plan.stages) != 1 or plan.temps:
            return None
        stage = plan.stages[0]
        if (stage.kind is not P.StageKind.FUSED or stage.reduce_axes or stage.domain >= 0
                or stage.out != plan.n_inputs):
            return None
        k = self.kernels[0]
        call = be._device.function(k.source, k.name, k.arg_format).prepared_call
        bufs, cidx, block, grid = k.bufs, k.consts, (k.block, 1, 1), k.grid
        limit = INDEX32_MAX

        def fast(out: GPUTensor, tensors: Sequence[GPUTensor], consts: Sequence[float]) -> bool:
            shape, alloc = out.shape, out.allocation
            args = [int(alloc) + out.offset]
            span = 0
            for d, st in zip(shape, out.strides):
                args.append(st if d != 1 else 0)
                span += (d - 1) * (st if st > 0 else -st)
            if not 0 <= span < limit or 0 in shape:
                return False
            args += shape
            for b in bufs:
                t = tensors[b]
                if t.allocation is alloc:
                    return False
                args.append(int(t.allocation) + t.offset)
                span = 0
                for d, st in zip(t.shape, t.strides):
                    args.append(st if d != 1 else 0)
                    span += (d - 1) * (st if st > 0 else -st)
                if not 0 <= span < limit or 0 in t.shape:
                    return False
            for c in cidx:
                args.append(consts[c])
            call((grid(shape), 1), block, *args)
            return True
        return fast

    def kernel(self, be: NervanaGPU, i: int, index64: bool, dom: tuple = ()) -> Any:
        """Stage i's kernel for this call: 64-bit indices where a buffer needs them, and for a
        reduction the layout that fills the device at this domain (reduce_layout), unless its
        kernel needs more registers than a block of that size may have."""
        stage = self.plan.stages[i]
        layout = reduce_layout(stage.reduce_axes, dom, be.sm_count) if stage.reduce_axes \
            else None
        if not index64 and layout is None:
            return self.kernels[i]
        k = self.variants.get((i, index64, layout))
        if k is None:
            k = self._render(be, i, stage, index64, layout)
            fn = be._device.function(k.source, k.name, k.arg_format)
            if getattr(fn, "max_threads_per_block", k.block) < k.block:
                # too many registers a thread for the wide block: render's default layout
                k = self._render(be, i, stage, True) if index64 else self.kernels[i]
            self.variants[(i, index64, layout)] = k
        return k

    def run(self, out: GPUTensor, tensors: list, consts: list, nodes: list) -> None:
        be, plan, dt = self.be, self.plan, self.dtype
        out_d = out.desc()
        descs = [t.desc() for t in tensors]
        direct = not any(overlaps(out_d, d) and not same_view(out_d, d) for d in descs)
        if self.gemm_only and direct and out.dtype == dt:
            a, b = (P.gemm_operands(plan.stages[0], tensors)
                    if max(plan.stages[0].inputs) < plan.n_inputs else (None, None))
            if a is not None and b is not None and be._gemm(a, b, out, 1.0, 0.0):
                return
        target = out if direct else be._empty(out.shape, out.dtype)
        bufs: dict = dict(enumerate(tensors))
        bufs[plan.n_inputs] = target
        for j, pos in enumerate(plan.temps):
            bufs[plan.n_inputs + 1 + j] = be._empty(nodes[pos].shape, dt)
        index64 = any(t.desc().max_index() > INDEX32_MAX or t.size > INDEX32_MAX
                      for t in bufs.values())
        for i, stage in enumerate(plan.stages):
            dst = bufs[stage.out]
            if stage.kind is P.StageKind.FUSED:
                dom = shape_of(nodes[stage.domain][1]) if stage.domain >= 0 else dst.shape
                big = index64 or math.prod(dom) > INDEX32_MAX
                be._launch(self.kernel(be, i, big, dom), dst, dom, bufs, consts)
            elif stage.kind is P.StageKind.GEMM:
                a, b = P.gemm_operands(stage, bufs)
                be._matmul(a, b, dst, 1.0, 0.0)
            elif stage.kind is P.StageKind.COMPOUND:
                compound.run(be, nodes[stage.node][0], dst, [bufs[b] for b in stage.inputs])
            elif stage.inputs:    # HOST: on the host
                dst._store(reference.evaluate_op(nodes[stage.node][0],
                                                 [bufs[b].get() for b in stage.inputs], dt))
            else:
                dst._store(reference.evaluate(nodes[stage.node], dt))
        if not direct:
            be._copy(out, target)


class NervanaGPU(GPUNNOpsMixin, Backend):
    """neon's GPU backend: device tensors, fused CUDA kernels, cuBLAS GEMM."""

    backend_name = "gpu"
    device_type = 1
    tensor_cls = GPUTensor

    def __init__(self, *args: Any, device_id: int = 0, **kwargs: Any) -> None:
        _require_cuda(device_id)
        import pycuda.driver as drv
        from ..cache import KernelCache
        from ..engine import Engine
        self._drv = drv
        self._device = _Device.get(device_id)
        self.compute_capability = self._device.compute_capability
        self.sm_count = self._device.sm_count
        self.stream = None                 # every launch, copy and GEMM runs on the null stream
        self.bench = False
        self.use_pinned_mem = False
        # float32 GEMMs on the tensor cores in tf32 (off by default, as torch.matmul's)
        self.allow_tf32 = False
        self._programs = KernelCache(f"gpu{device_id}.programs", maxsize=512)
        self._engine = Engine("gpu", lambda *a: _Program(self, *a), self._programs)
        self._runners = self._engine.fast_runners  # Tensor.__setitem__'s C fast path uses them
        super().__init__(*args, device_id=device_id, **kwargs)

    # ---------------------------------------------------------------- memory
    def _empty(self, shape: tuple, dtype: Any) -> GPUTensor:
        """An uninitialised contiguous tensor (temps)."""
        dt = np.dtype(dtype)
        shape = tuple(shape)
        return GPUTensor(self, shape, dt, self._device.alloc(math.prod(shape) * dt.itemsize))

    def _from_host(self, values: np.ndarray, name: str | None, persist_values: bool) -> GPUTensor:
        values = np.ascontiguousarray(values)
        t = GPUTensor(self, values.shape, values.dtype, self._device.alloc(values.nbytes),
                      name=name, persist_values=persist_values)
        if values.size:
            self._drv.memcpy_htod(t.ptr, values)
        return t

    def _copy(self, dst: GPUTensor, src: GPUTensor) -> None:
        """dst[:] = src (src broadcasts to dst's shape; a store conversion where dtypes differ)."""
        self.execute_assign(dst, src)

    def _contiguous_copy(self, t: GPUTensor) -> GPUTensor:
        c = self._empty(t.shape, t.dtype)
        self._copy(c, t)
        return c

    # ---------------------------------------------------------------- execution
    def execute(self, optree: OpTreeNode) -> GPUTensor:
        return self.execute_assign(optree[1], optree[2])

    def execute_assign(self, out: GPUTensor, value: Any) -> GPUTensor:
        """out[:] = value: the tree's program (cached by its signature) run on this call's
        buffers and constants (engine.py)."""
        self._engine.execute(out, value)
        return out

    def _launch(self, kernel: Any, dst: GPUTensor, dom: tuple, bufs: Mapping[int, GPUTensor],
                consts: Sequence[float]) -> None:
        fn = self._device.function(kernel.source, kernel.name, kernel.arg_format)
        args = launch_args(kernel, dst.desc(), dom, {b: bufs[b].desc() for b in kernel.bufs},
                           consts)
        fn.prepared_call((kernel.grid(dom), 1), (kernel.block, 1, 1), *args)

    def synchronize(self) -> None:
        self._device.synchronize()

    def cleanup_backend(self) -> None:
        """Wait for the device and drop this backend's programs (the device's context, pool and
        kernels stay for other backends and live tensors; they are released at exit)."""
        if self._device.context is not None:
            self.synchronize()
        self._programs.clear()

    # ---------------------------------------------------------------- GEMM
    def _gemm(self, A: GPUTensor, B: GPUTensor, C: GPUTensor, alpha: float, beta: float) -> bool:
        """C = alpha * A @ B + beta * C through cuBLAS (compound_dot's fast path); False where
        the dtypes differ or are not float, or C shares memory with A or B (the op-tree path then
        runs)."""
        if not (A.dtype == B.dtype == C.dtype) or C.dtype not in FLOAT_DTYPES:
            return False
        cd = C.desc()
        if overlaps(cd, A.desc()) or overlaps(cd, B.desc()):
            return False
        self._matmul(A, B, C, alpha, beta)
        return True

    def _matmul(self, A: GPUTensor, B: GPUTensor, C: GPUTensor, alpha: float,
                beta: float) -> None:
        """C = alpha * A @ B + beta * C for a float C sharing no memory with A or B: operands of
        another dtype or a layout cuBLAS cannot read are copied to contiguous temps first."""
        from .cublas import Matrix, column_major, gemm_args
        M, N, K = C.shape[0], C.shape[1], A.shape[1]
        if M * N == 0:
            return
        if K == 0:
            self.execute_assign(C, build(Op.MUL, C, float(beta)))
            return

        def operand(t: GPUTensor) -> GPUTensor:
            ok = t.dtype == C.dtype and column_major(t.shape, t.strides) is not None
            return t if ok else self._contiguous_copy_as(t, C.dtype)

        A, B = operand(A), operand(B)
        target = C
        g = gemm_args(Matrix(A.ptr, A.shape, A.strides), Matrix(B.ptr, B.shape, B.strides),
                      Matrix(C.ptr, C.shape, C.strides))
        if g is None:                       # C itself is not one cuBLAS matrix
            target = self._contiguous_copy(C) if beta else self._empty(C.shape, C.dtype)
            g = gemm_args(Matrix(A.ptr, A.shape, A.strides), Matrix(B.ptr, B.shape, B.strides),
                          Matrix(target.ptr, target.shape, target.strides))
        self._device.cublas.gemm(C.dtype.name, g, alpha, beta, self.allow_tf32)
        if target is not C:
            self._copy(C, target)

    def _contiguous_copy_as(self, t: GPUTensor, dtype: Any) -> GPUTensor:
        c = self._empty(t.shape, dtype)
        self._copy(c, t)
        return c

    def batched_dot(self, A: GPUTensor, B: GPUTensor, C: GPUTensor, alpha: float = 1.0,
                    beta: float = 0.0, relu: bool = False, repeat: int = 1,
                    size: Any = None) -> GPUTensor:
        """neon's batched_dot. A 3-D C (X, m, n): C[x] = alpha * A[x] @ B[x] + beta * C[x], a 2-D
        A or B used by every x (fprop W.I, bprop W.T.E); a 2-D C: the sum over x (update E.I.T).
        relu applies before the beta term."""
        if relu and beta != 0.0:
            product = self._empty(C.shape, C.dtype)
            self.batched_dot(A, B, product, alpha, 0.0, False)
            self.execute_assign(C, build(Op.ADD, build(Op.MAXIMUM, product, 0.0),
                                         build(Op.MUL, C, float(beta))))
            return C
        a3, b3, c3 = len(A.shape) == 3, len(B.shape) == 3, len(C.shape) == 3
        if not (a3 or b3) or len(C.shape) not in (2, 3):
            raise ValueError(f"batched_dot: expected a 3-D A or B, got A {A.shape}, B {B.shape}, "
                             f"C {C.shape}")
        X = (A if a3 else B).shape[0]
        if (a3 and A.shape[0] != X) or (b3 and B.shape[0] != X) or (c3 and C.shape[0] != X):
            raise ValueError(f"batched_dot: batch sizes differ: A {A.shape}, B {B.shape}, "
                             f"C {C.shape}")
        if c3 and not self._batched(A, B, C, alpha, beta):
            for x in range(X):
                self._matmul(A[x] if a3 else A, B[x] if b3 else B, C[x], alpha, beta)
        elif not c3:
            for x in range(X):
                self._matmul(A[x] if a3 else A, B[x] if b3 else B, C, alpha,
                             beta if x == 0 else 1.0)
        if relu:
            self.execute_assign(C, build(Op.MAXIMUM, C, 0.0))
        return C

    def _batched(self, A: GPUTensor, B: GPUTensor, C: GPUTensor, alpha: float,
                 beta: float) -> bool:
        """One cublas<S|D>gemmStridedBatched call where the layouts allow it."""
        from .cublas import Matrix, batched_gemm_args
        if not (A.dtype == B.dtype == C.dtype) or C.dtype.name not in ("float32", "float64"):
            return False
        if any(overlaps(C.desc(), t.desc()) for t in (A, B)) or 0 in C.shape or \
                0 in A.shape[-1:]:
            return False

        def first(t: GPUTensor) -> tuple:
            three = len(t.shape) == 3
            return Matrix(t.ptr, t.shape[-2:], t.strides[-2:]), (t.strides[0] if three else 0)

        (ma, sa), (mb, sb), (mc, sc) = first(A), first(B), first(C)
        args = batched_gemm_args(ma, mb, mc, (sa, sb, sc), C.shape[0])
        if args is None:
            return False
        self._device.cublas.gemm_strided_batched(C.dtype.name, args, alpha, beta)
        return True

    # ---------------------------------------------------------------- random numbers
    def gen_rng(self, seed: int | None = None) -> np.random.RandomState:
        """The host RandomState (`be.rng`), and the device generator's seed drawn from it (the
        host state is then restored, so host draws match the CPU backend's)."""
        rng = super().gen_rng(seed)
        state = rng.get_state()
        self._rng_seed = int(rng.randint(0, 2**62, dtype=np.int64)) * 4 + int(rng.randint(0, 4))
        rng.set_state(state)
        self._rng_counter = 0
        self._rng_init = (self._rng_seed, 0)
        return rng

    def rng_get_state(self) -> tuple:
        """(host state, (device seed, draw counter))."""
        return self.rng.get_state(), (self._rng_seed, self._rng_counter)

    def rng_set_state(self, state: tuple) -> None:
        if len(state) == 2 and isinstance(state[1], tuple):
            self.rng.set_state(state[0])
            self._rng_seed, self._rng_counter = state[1]
        else:                               # a host-only state, as neon accepted
            self.rng.set_state(state)

    def rng_reset(self) -> None:
        super().rng_reset()
        self._rng_seed, self._rng_counter = self._rng_init

    def _draw(self, kernel: str, shape: tuple, *extra: float) -> GPUTensor:
        """A new float32 tensor of draws from the counter-based generator."""
        key = rng_key(self._rng_seed, self._rng_counter)
        self._rng_counter += 1
        out = self._empty(shape, np.float32)
        n = out.size
        if n:
            fmt = "PqQ" + "f" * len(extra)
            fn = self._device.function(RNG_SOURCE, kernel, fmt)
            grid = max(1, min(-(-n // RNG_BLOCK), 4096))
            fn.prepared_call((grid, 1), (RNG_BLOCK, 1, 1), out.ptr, n, key,
                             *(float(x) for x in extra))
        return out

    def rand(self, out: GPUTensor) -> GPUTensor:
        """Uniform [0, 1) draws into `out` (reproducible for be's seed)."""
        self.execute_assign(out, self._draw("nl_rand_uniform", out.shape))
        return out

    def make_binary_mask(self, out: GPUTensor, keepthresh: float = 0.5) -> GPUTensor:
        """Dropout mask: 1 where a uniform draw is below `keepthresh`."""
        u = self._draw("nl_rand_uniform", out.shape)
        self.execute_assign(out, build(Op.LT, u, float(keepthresh)))
        return out

    def dropout(self, keep: float = 0.5, out: GPUTensor | None = None) -> GPUTensor:
        if out is None:
            raise ValueError("dropout: give out= (the mask's tensor)")
        return self.make_binary_mask(out, keep)

    def fill_normal(self, ary: GPUTensor, mean: float = 0.0, stdv: float = 1.0) -> GPUTensor:
        """Normal draws (Box-Muller on the device), reproducible for be's seed."""
        self.execute_assign(ary, self._draw("nl_rand_normal", ary.shape, mean, stdv))
        return ary


__all__ = ["NervanaGPU", "GPUTensor", "launch_args", "contiguous_strides",
           "reshape_strides", "slice_layout", "transpose_layout", "extent", "BufDesc",
           "overlaps", "same_view", "rng_key", "rng_uniform_reference", "rng_normal_reference",
           "RNG_SOURCE"]
