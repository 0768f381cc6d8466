"""The 'gpu' backend: CUDA through PyCUDA, kernels from render_cuda, GEMM through cuBLAS.

    out[:] = tree -> plan.walk (signature) -> Program (cached by signature: plan.make_plan, each
    FUSED stage rendered by render_cuda, compiled by nvcc (cuda_compile: disk cache keyed by
    source, arch and toolkit) and loaded once per device) -> per stage: FUSED launch, GEMM
    through cuBLAS (cublas.py), HOST through the numpy reference interpreter on host copies
    (then uploaded).

Memory comes from one pycuda DeviceMemoryPool per device; a GPUTensor is an allocation, a byte
offset, a shape and strides in elements (views never copy). The device state (primary context,
pool, loaded kernels, cuBLAS handle) belongs to a `_Device` shared by every backend of that
device id in the process, so tensors outlive the backend that made them; cleanup_backend only
synchronises and drops the backend's program cache.

Random numbers: a counter-based generator (splitmix64 of key + element index, the key hashed from
a seed drawn once from `be.rng` and a per-call counter): no state lives on the device, a seed
reproduces every draw, and `rng_uniform_reference` is the same formula in numpy.

The pure parts (layouts, overlap, launch-argument marshalling, RNG source and its numpy twin)
need no pycuda and are tested in tests/test_gpu_offline.py; the rest in tests/test_gpu.py.

Unverified on a GPU
-------------------
Written on a machine without a GPU or pycuda. tests/test_gpu_offline.py runs this module's own
code end to end on an emulated device (numpy memory for pycuda's copies, a numpy evaluation of
each render_cuda stage from the launch arguments, column-major GEMM emulated from the cuBLAS
arguments), so the plumbing is checked; what has never run is everything that touches CUDA:
- `_Device.__init__`: Device(i).retain_primary_context() + push, compute_capability,
  MULTIPROCESSOR_COUNT, DeviceMemoryPool.allocate (ints from int(allocation) as pointers), the
  atexit `close` (stop_holding, pop) and its order against pycuda's own exit handlers.
- `_Device.function`: module_from_buffer(cubin from cuda_compile for the device's arch),
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
import os
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from .. import plan as P
from .. import shapes as S
from ..dtypes import cast_for_store, compute_dtype
from ..ops import Op
from ..optree import OpTreeNode, build, shape_of
from ..tensor import Tensor
from . import reference
from .backend import Backend

DEBUG = int(os.environ.get("NEONLIKE_DEBUG", "0") or 0)
FLOAT_DTYPES = frozenset(np.dtype(t) for t in ("float16", "float32", "float64"))
INDEX32_MAX = 2**31 - 1


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


# **************** layouts: pure arithmetic on (offset, shape, strides), in elements ****************

def contiguous_strides(shape: tuple) -> tuple:
    """C-order strides in elements."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def is_contiguous(shape: tuple, strides: tuple) -> bool:
    """C-contiguous (strides of size-1 axes do not matter)."""
    return all(s == c for d, s, c in zip(shape, strides, contiguous_strides(shape)) if d != 1)


def slice_layout(offset: int, shape: tuple, strides: tuple, slices: tuple) -> tuple:
    """(offset, shape, strides) of a basic slice (one slice per leading axis)."""
    shape, strides = list(shape), list(strides)
    for axis, key in enumerate(slices):
        start, stop, step = key.indices(shape[axis])
        n = len(range(start, stop, step))
        if n:
            offset += start * strides[axis]
        shape[axis], strides[axis] = n, strides[axis] * step
    return offset, tuple(shape), tuple(strides)


def reshape_strides(shape: tuple, strides: tuple, new_shape: tuple) -> tuple | None:
    """Strides that view a (shape, strides) layout as `new_shape` without a copy, or None where
    a copy is needed. Axes are merged or split only within runs that are contiguous in memory."""
    if math.prod(shape) != math.prod(new_shape):
        raise ValueError(f"reshape_strides: {shape} and {new_shape} differ in size")
    if math.prod(shape) == 0:
        return contiguous_strides(new_shape)
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    new = [i for i, d in enumerate(new_shape) if d != 1]
    out = [0] * len(new_shape)
    oi = ni = 0
    while oi < len(old) and ni < len(new):
        oj, nj = oi + 1, ni + 1
        o_size, n_size = old[oi][0], new_shape[new[ni]]
        while o_size != n_size:
            if o_size < n_size:
                o_size *= old[oj][0]
                oj += 1
            else:
                n_size *= new_shape[new[nj]]
                nj += 1
        for k in range(oi, oj - 1):          # the old group must be one contiguous run
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        step = old[oj - 1][1]                # split it from its innermost stride outwards
        for k in range(nj - 1, ni - 1, -1):
            out[new[k]] = step
            step *= new_shape[new[k]]
        oi, ni = oj, nj
    for i in reversed(range(len(new_shape))):  # size-1 axes: the stride they would have in C order
        if new_shape[i] == 1:
            out[i] = out[i + 1] * new_shape[i + 1] if i + 1 < len(new_shape) else 1
    return tuple(out)


def transpose_layout(shape: tuple, strides: tuple) -> tuple:
    """neon's `.T`: 2-D reverses the axes; more dims swap the last two."""
    if len(shape) == 2:
        return shape[::-1], strides[::-1]
    return (shape[:-2] + (shape[-1], shape[-2]), strides[:-2] + (strides[-1], strides[-2]))


def extent(offset: int, shape: tuple, strides: tuple) -> tuple:
    """The element range [lo, hi) a layout touches (empty for a size-0 layout)."""
    if 0 in shape:
        return offset, offset
    lo = offset + sum((d - 1) * s for d, s in zip(shape, strides) if s < 0)
    hi = offset + sum((d - 1) * s for d, s in zip(shape, strides) if s > 0) + 1
    return lo, hi


class BufDesc(NamedTuple):
    """A device buffer as a kernel sees it: the address of element 0, shape, element strides."""
    ptr: int
    shape: tuple
    strides: tuple
    itemsize: int

    def byte_span(self) -> tuple:
        lo, hi = extent(0, self.shape, self.strides)
        return self.ptr + lo * self.itemsize, self.ptr + hi * self.itemsize

    def max_index(self) -> int:
        """The largest |element offset| a kernel computes into this buffer."""
        lo, hi = extent(0, self.shape, self.strides)
        return max(-lo, hi - 1, 0)


def overlaps(a: BufDesc, b: BufDesc) -> bool:
    (alo, ahi), (blo, bhi) = a.byte_span(), b.byte_span()
    return alo < bhi and blo < ahi


def same_view(a: BufDesc, b: BufDesc) -> bool:
    """The same elements in the same order (strides of size-1 axes do not matter)."""
    return a.ptr == b.ptr and a.shape == b.shape and a.itemsize == b.itemsize and all(
        s == t for d, s, t in zip(a.shape, a.strides, b.strides) if d != 1)


# **************** launch arguments: CudaKernel + buffers + constants -> a tuple ****************

_CHAR_CHECK = {
    "P": lambda v: isinstance(v, int) and v >= 0,
    "i": lambda v: isinstance(v, int) and -2**31 <= v < 2**31,
    "q": lambda v: isinstance(v, int) and -2**63 <= v < 2**63,
    "f": lambda v: isinstance(v, float), "d": lambda v: isinstance(v, float),
}


def launch_args(kernel: Any, out: BufDesc, dom: tuple, bufs: Mapping[int, BufDesc],
                consts: Sequence[float]) -> tuple:
    """The arguments of a render_cuda kernel, in the order of `kernel.params`: the output's
    pointer and strides, the domain, each read buffer's pointer and strides (in elements; 0 on
    size-1 axes, which the kernel never indexes), then the constants as floats.

    ValueError where the count or a value does not fit the kernel's parameter list."""
    def strides(d: BufDesc) -> list:
        return [int(s) if n != 1 else 0 for n, s in zip(d.shape, d.strides)]

    args: list = [int(out.ptr), *strides(out), *(int(n) for n in dom)]
    for b in kernel.bufs:
        args += [int(bufs[b].ptr), *strides(bufs[b])]
    args += [float(consts[c]) for c in kernel.consts]
    if len(args) != len(kernel.params):
        raise ValueError(f"launch_args: {len(args)} arguments for {kernel.name}, whose parameters "
                         f"are {[decl for decl, _ in kernel.params]}")
    for value, (decl, char) in zip(args, kernel.params):
        if not _CHAR_CHECK[char](value):
            raise ValueError(f"launch_args: {value!r} does not fit parameter `{decl}` "
                             f"({char}) of {kernel.name}")
    return tuple(args)


def stage_meta(plan: P.KernelPlan, tensors: list, out: Any, nodes: list) -> dict:
    """render_cuda's meta: (ndim, size-1 mask[, storage dtype]) per buffer; temps (compute
    dtype) carry none."""
    meta = {i: (len(t.shape), P._mask(t.shape), t.dtype) for i, t in enumerate(tensors)}
    meta[plan.n_inputs] = (len(out.shape), P._mask(out.shape), out.dtype)
    for j, pos in enumerate(plan.temps):
        shape = nodes[pos].shape
        meta[plan.n_inputs + 1 + j] = (len(shape), P._mask(shape))
    return meta


# **************** random numbers: splitmix64 of (key, element index) ****************

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
STREAM = 0xD1B54A32D192ED03   # spreads element indices apart before the mix


def splitmix64(z: int) -> int:
    z = (z + GOLDEN) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_key(seed: int, counter: int) -> int:
    """The key of draw number `counter` from a generator seeded with `seed`."""
    return splitmix64((seed & M64) ^ splitmix64(counter & M64))


RNG_SOURCE = """\
// neonlike's counter-based generator: bits(i, j) = splitmix64(key + (2 i + j) * STREAM)
__device__ __forceinline__ unsigned long long nl_mix(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ float nl_unit(unsigned long long key, long long i, int j) {
    // 24 high bits: a float in [0, 1) with every value exact
    const unsigned long long z = nl_mix(key + (unsigned long long)(2 * i + j) * 0xD1B54A32D192ED03ull);
    return (float)(z >> 40) * 5.9604644775390625e-08f;
}
extern "C" __global__ void nl_rand_uniform(float* out, const long long n,
                                           const unsigned long long key)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = nl_unit(key, i, 0);
}
extern "C" __global__ void nl_rand_normal(float* out, const long long n,
                                          const unsigned long long key, const float mean,
                                          const float stdv)
{
    // Box-Muller on the element's two draws; u1 in (0, 1] keeps the log finite
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float u1 = 1.0f - nl_unit(key, i, 0);
        const float u2 = nl_unit(key, i, 1);
        out[i] = mean + stdv * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
}
"""
RNG_BLOCK = 256


def _rng_bits(key: int, n: int, j: int) -> np.ndarray:
    i = np.arange(n, dtype=np.uint64)
    z = np.uint64(key) + (np.uint64(2) * i + np.uint64(j)) * np.uint64(STREAM)
    z = z + np.uint64(GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def rng_uniform_reference(key: int, n: int) -> np.ndarray:
    """What nl_rand_uniform writes for `key`, in numpy (float32 in [0, 1))."""
    with np.errstate(over="ignore"):
        return ((_rng_bits(key, n, 0) >> np.uint64(40)).astype(np.float32)
                * np.float32(2.0**-24))


def rng_normal_reference(key: int, n: int, mean: float = 0.0, stdv: float = 1.0) -> np.ndarray:
    """nl_rand_normal's formula in numpy (float64 math: equal to the kernel's to float32's
    precision, not bit for bit)."""
    with np.errstate(over="ignore"):
        u1 = 1.0 - (_rng_bits(key, n, 0) >> np.uint64(40)).astype(np.float64) * 2.0**-24
        u2 = (_rng_bits(key, n, 1) >> np.uint64(40)).astype(np.float64) * 2.0**-24
    return (mean + stdv * np.sqrt(-2.0 * np.log(u1)) * np.cos(2 * np.pi * u2)).astype(np.float32)


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
        self.functions: dict = {}       # kernel name -> (module, prepared function)
        self._cublas: Any = None
        atexit.register(self.close)

    def alloc(self, nbytes: int) -> Any:
        return self.pool.allocate(max(int(nbytes), 1))

    def function(self, source: str, name: str, arg_format: str) -> Any:
        """The prepared kernel `name` of `source`, compiled (disk-cached) and loaded once."""
        entry = self.functions.get(name)
        if entry is None:
            from .cuda_compile import compile_cubin
            module = self.drv.module_from_buffer(compile_cubin(source, name, self.arch))
            fn = module.get_function(name)
            fn.prepare(arg_format)
            entry = self.functions[name] = (module, fn)
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

class _Program:
    """A KernelPlan with its kernels compiled and loaded, ready for any tree of its signature."""

    def __init__(self, be: NervanaGPU, key: tuple, out: Any, value: Any, tensors: list,
                 nodes: list) -> None:
        from . import render_cuda as RC
        self.plan = P.make_plan(out, value, tensors, nodes, RC.RENDERABLE)
        self.dtype = compute_dtype([out.dtype] + [t.dtype for t in tensors])
        self.meta = stage_meta(self.plan, tensors, out, nodes)
        self.out_dtype = out.dtype
        self.tag = hashlib.sha256(repr(key).encode()).hexdigest()[:12]
        self.kernels: dict = {}
        self.kernels64: dict = {}
        for i, stage in enumerate(self.plan.stages):
            if stage.kind is P.StageKind.FUSED:   # compiled now: a failure leaves out untouched
                self.kernels[i] = self._render(be, i, stage, False)
        st = self.plan.stages
        self.gemm_only = len(st) == 2 and st[0].kind is P.StageKind.GEMM and \
            st[1].program == (P.Instr("load", (), st[0].out),)

    def _render(self, be: NervanaGPU, i: int, stage: P.Stage, index64: bool) -> Any:
        from . import render_cuda as RC
        store = self.out_dtype if stage.out == self.plan.n_inputs else self.dtype
        k = RC.render(stage, self.meta, self.dtype.name, store, f"{self.tag}/{i}", index64=index64)
        if DEBUG >= 3:
            print(k.source)
        be._device.function(k.source, k.name, k.arg_format)
        return k

    def kernel(self, be: NervanaGPU, i: int, index64: bool) -> Any:
        if not index64:
            return self.kernels[i]
        k = self.kernels64.get(i)
        if k is None:
            k = self.kernels64[i] = self._render(be, i, self.plan.stages[i], True)
        return k

    def run(self, be: NervanaGPU, out: GPUTensor, tensors: list, consts: list,
            nodes: list) -> None:
        plan, dt = self.plan, self.dtype
        out_d = out.desc()
        descs = [t.desc() for t in tensors]
        direct = not any(overlaps(out_d, d) and not same_view(out_d, d) for d in descs)
        if self.gemm_only and direct and out.dtype == dt:
            a, b = (tensors[x] if x < plan.n_inputs else None for x in plan.stages[0].inputs)
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
                be._launch(self.kernel(be, i, big), dst, dom, bufs, consts)
            elif stage.kind is P.StageKind.GEMM:
                a, b = (bufs[x] for x in stage.inputs)
                be._matmul(a, b, dst, 1.0, 0.0)
            else:
                dst._store(reference.evaluate(nodes[stage.inputs[0]], dt))
        if not direct:
            be._copy(out, target)


class NervanaGPU(Backend):
    """neon's GPU backend: device tensors, fused CUDA kernels, cuBLAS GEMM."""

    backend_name = "gpu"
    device_type = 1
    tensor_cls = GPUTensor

    def __init__(self, *args: Any, device_id: int = 0, **kwargs: Any) -> None:
        _require_cuda(device_id)
        import pycuda.driver as drv
        from .cache import KernelCache
        self._drv = drv
        self._device = _Device.get(device_id)
        self.compute_capability = self._device.compute_capability
        self.sm_count = self._device.sm_count
        self.stream = None                 # every launch, copy and GEMM runs on the null stream
        self.bench = False
        self.use_pinned_mem = False
        self._programs = KernelCache(maxsize=512)
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
        buffers and constants."""
        key, tensors, consts, nodes = P.walk(out, value)
        program = self._programs.get(key)
        if DEBUG:
            pp = value.pp() if isinstance(value, OpTreeNode) else repr(value)
            print(f"neonlike gpu: {out.name or 'out'}[:] = {pp}"
                  + (" (cache hit)" if program is not None and DEBUG >= 2 else ""))
        if program is None:
            program = _Program(self, key, out, value, tensors, nodes)
            self._programs.put(key, program)
        if out.size == 0 or any(t.size == 0 for t in tensors) or \
                any(0 in n.shape for n in nodes):
            out._store(reference.evaluate(value, program.dtype))
            return out
        program.run(self, out, tensors, consts, nodes)
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
        self._device.cublas.gemm(C.dtype.name, g, alpha, beta)
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


__all__ = ["NervanaGPU", "GPUTensor", "launch_args", "stage_meta", "contiguous_strides",
           "reshape_strides", "slice_layout", "transpose_layout", "extent", "BufDesc",
           "overlaps", "same_view", "rng_key", "rng_uniform_reference", "rng_normal_reference",
           "RNG_SOURCE"]
