"""The GPU backend's layouts: pure arithmetic on (offset, shape, strides) in elements, buffer
descriptions, overlap tests and kernel-launch argument marshalling. Needs no pycuda (tested in
tests/test_gpu_offline.py)."""
from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Sequence


INDEX32_MAX = 2**31 - 1


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
