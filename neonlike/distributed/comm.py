"""MPI plumbing shared by the front ends: the communicator, the abort hook, fused gradient buckets.

mpi4py is imported on first use (`mpi()`), never at import time. Tensors reach MPI through their
host memory (`host_array`): the CPU backends ('cpu', 'mkl') only, until the GPU path (CUDA-aware
MPI or NCCL, docs/distributed.md) is built.
"""
from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

ABORT_GRACE_S = 0.5   # after a failing rank's message, before MPI_Abort (see install_abort_hook)
_INSTALL = "pip install 'neonlike[mpi]' (mpi4py and mpich, which brings mpiexec)"


def mpi() -> Any:
    """mpi4py's MPI module (importing it initialises MPI), or an ImportError saying what to install."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"neonlike.distributed needs mpi4py and an MPI library: {_INSTALL} "
                          f"({e})") from e
    return MPI


def world() -> Any:
    """MPI.COMM_WORLD."""
    return mpi().COMM_WORLD


def host_array(tensor: Any) -> np.ndarray:
    """The numpy array over a host tensor's memory (no copy), the buffer MPI reads and writes."""
    host = getattr(tensor, "_host", None)
    if host is None:
        raise NotImplementedError(
            f"neonlike.distributed: a {type(tensor).__name__} has no host memory; distributed "
            f"training runs on the 'cpu' and 'mkl' backends (the GPU path, CUDA-aware MPI or "
            f"NCCL, is not built yet)")
    ary = host()
    if not ary.flags.c_contiguous:
        raise ValueError(f"neonlike.distributed: {tensor!r} is a strided view; MPI needs "
                         f"contiguous memory")
    return ary


_HOOKED: dict = {}


def install_abort_hook(comm: Any) -> None:
    """An uncaught exception on any rank prints its traceback, says which rank failed and calls
    MPI_Abort, which ends every rank of the job (the others would wait in a collective forever)."""
    if _HOOKED.get("comm") is not None or comm.Get_size() == 1:
        return
    previous = sys.excepthook
    rank, size = comm.Get_rank(), comm.Get_size()

    def abort_on_exception(etype: Any, value: Any, tb: Any) -> None:
        try:
            previous(etype, value, tb)
            sys.stderr.write(f"neonlike.distributed: rank {rank} of {size} raised "
                             f"{etype.__name__}: {value}; aborting every rank (MPI_Abort)\n")
            sys.stderr.flush()
            # MPI_Abort tears the job down at once, and mpiexec dropped what this rank had
            # written but not yet forwarded (1 run in 8 lost the line above): give it time
            time.sleep(ABORT_GRACE_S)
        finally:
            comm.Abort(1)

    _HOOKED["comm"] = comm
    sys.excepthook = abort_on_exception


def broadcast_tensors(comm: Any, tensors: list, root: int = 0) -> None:
    """Every tensor's values from `root` (one Bcast each; done once, before training)."""
    for t in tensors:
        comm.Bcast(host_array(t), root=root)


class GradientBuckets:
    """Gradients fused into a few float32 buffers, each all-reduced by one non-blocking call.

    `sizes` lists the gradients' element counts in the order the backward pass produces them and
    `groups` the index of the layer (or op) that produces each; a bucket holds whole groups, so
    it can start as soon as its last group is done. A bucket is closed before a group that would
    take it past its cap: `first_bytes` for the first bucket (the last layers' gradients, ready
    first, so their reduction starts while the big early layers still run), `fusion_bytes` after.

    Per step: `ready(group)` as each group's gradients are in place (a bucket whose groups are all
    there is scaled by 1/size, one fused statement, then `Iallreduce`d in place); `wait()` starts
    what has not started and waits for all, leaving the averaged gradients in the buffers. With
    `average=False` the buffers hold the sums (no statement: the reader divides).
    """

    def __init__(self, comm: Any, backend: Any, sizes: list, groups: list,
                 fusion_bytes: int = 4 << 20, first_bytes: int = 64 << 10,
                 dtype: Any = np.float32, average: bool = True) -> None:
        if len(sizes) != len(groups):
            raise ValueError(f"GradientBuckets: {len(sizes)} sizes for {len(groups)} groups")
        self.MPI = mpi()
        self.comm, self.be, self.size = comm, backend, comm.Get_size()
        self.dtype, self.average = np.dtype(dtype), average
        runs: list = []                    # [first entry, end entry] of each group's run
        for i in range(len(sizes)):
            if i == 0 or groups[i] != groups[i - 1]:
                runs.append([i, i])
            runs[-1][1] = i + 1
        spans: list = []                   # (first entry, end entry) of each bucket
        cap, item = first_bytes, self.dtype.itemsize
        for lo, hi in runs:
            nbytes = sum(sizes[lo:hi]) * item
            if spans and spans[-1][2] + nbytes > cap:
                spans.append([lo, hi, nbytes])
                cap = fusion_bytes
            elif spans:
                spans[-1][1:] = [hi, spans[-1][2] + nbytes]
            else:
                spans.append([lo, hi, nbytes])
        self.buffers, self.views, self.bucket_of = [], [], []
        self.waiting: list = []            # groups each bucket still waits for
        for b, (lo, hi, _) in enumerate(spans):
            total = int(sum(sizes[lo:hi]))
            buf = backend.zeros((total, 1), dtype=self.dtype, name=f"grad_bucket{b}")
            self.buffers.append(buf)
            off = 0
            for i in range(lo, hi):
                self.views.append(buf[off:off + sizes[i]])
                self.bucket_of.append(b)
                off += sizes[i]
            self.waiting.append(len({groups[i] for i in range(lo, hi)}))
        self.hosts = [host_array(b).reshape(-1) for b in self.buffers]
        self.group_bucket = {g: self.bucket_of[i] for i, g in enumerate(groups)}
        self.left = list(self.waiting)
        self.requests: list = [None] * len(self.buffers)
        self.nbytes = sum(h.nbytes for h in self.hosts)

    def view(self, i: int) -> Any:
        """Entry i's place in its bucket: a flat (n, 1) view."""
        return self.views[i]

    def ready(self, group: Any) -> None:
        """`group`'s gradients are in place; starts its bucket where that was the last one."""
        b = self.group_bucket.get(group)
        if b is None:
            return
        self.left[b] -= 1
        if self.left[b] == 0:
            self.start(b)

    def start(self, b: int) -> None:
        if self.requests[b] is not None:
            return
        buf = self.buffers[b]
        if self.average and self.size > 1:
            buf[:] = buf * (1.0 / self.size)
        self.requests[b] = self.comm.Iallreduce(self.MPI.IN_PLACE, self.hosts[b], op=self.MPI.SUM)

    def progress(self) -> None:
        """Lets MPI move the started reductions on (without a progress thread, MPICH advances a
        non-blocking collective only inside MPI calls)."""
        started = [r for r in self.requests if r is not None]
        if started:
            self.MPI.Request.Testall(started)

    def wait(self) -> None:
        """Starts every bucket not yet started, waits for all; the buffers hold the averages."""
        for b in range(len(self.buffers)):
            self.start(b)
        self.MPI.Request.Waitall(self.requests)
        self.requests = [None] * len(self.buffers)
        self.left = list(self.waiting)


class StreamingBuckets:
    """Gradients of unknown number and size fused in the order they stream out (SINGA's backward).

    `add(value, shape)` writes a gradient (an op-tree or a tensor: one fused statement) into the
    open bucket and returns its place there; a bucket is started (scaled by 1/size, Iallreduce'd
    in place) as soon as the next gradient would take it past its cap (`first_bytes` for the
    first, `fusion_bytes` after; a bigger gradient gets a bucket of its own size). The buffers
    are kept and reused, so from the second step on nothing is allocated. `wait()` starts the
    last bucket and waits for all.
    """

    def __init__(self, comm: Any, fusion_bytes: int = 4 << 20, first_bytes: int = 64 << 10) -> None:
        self.MPI = mpi()
        self.comm, self.size = comm, comm.Get_size()
        self.fusion_bytes, self.first_bytes = fusion_bytes, first_bytes
        self.buffers: list = []            # engine tensors (n, 1), reused step after step
        self.requests: list = []
        self.dtype: Any = None
        self.current, self.fill = 0, 0

    def _capacity(self, k: int) -> int:
        return max(1, (self.first_bytes if k == 0 else self.fusion_bytes) // self.dtype.itemsize)

    def add(self, backend: Any, value: Any, shape: tuple, dtype: Any) -> Any:
        """Writes `value` (shape `shape`) into the open bucket; its place there, shaped `shape`."""
        dtype = np.dtype(dtype)
        if self.dtype is None:
            self.dtype = dtype
        elif dtype != self.dtype:
            raise TypeError(f"StreamingBuckets: a {dtype} gradient after {self.dtype} ones; "
                            f"train one dtype at a time")
        n = int(np.prod(shape))
        if self.fill and self.fill + n > self._capacity(self.current):
            self._start(self.current)
            self.current, self.fill = self.current + 1, 0
        k = self.current
        if k == len(self.buffers) or self.buffers[k].shape[0] < max(n, self._capacity(k)):
            buf = backend.zeros((max(n, self._capacity(k)), 1), dtype=dtype, name=f"grads{k}")
            self.buffers[k:k + 1] = [buf]
        place = self.buffers[k][self.fill:self.fill + n].reshape(shape)
        place[:] = value
        self.fill += n
        return place

    def _start(self, k: int) -> None:
        part = self.buffers[k][0:self.fill]
        if self.size > 1:
            part[:] = part * (1.0 / self.size)
        self.requests.append(self.comm.Iallreduce(self.MPI.IN_PLACE, host_array(part).reshape(-1),
                                                  op=self.MPI.SUM))

    def progress(self) -> None:
        if self.requests:
            self.MPI.Request.Testall(self.requests)

    def wait(self) -> None:
        if self.fill:
            self._start(self.current)
        self.MPI.Request.Waitall(self.requests)
        self.requests, self.current, self.fill = [], 0, 0


__all__ = ["mpi", "world", "host_array", "install_abort_hook", "broadcast_tensors",
           "GradientBuckets", "StreamingBuckets"]
