"""HDF5Iterator (neon.data.hdf5iterator): minibatches read from an HDF5 file (h5py, the 'hdf5'
extra: pip install -e ".[hdf5]").

The file holds `input` (N, features), with attribute `lshape` (e.g. (C, H, W)), optionally a
`mean` to subtract (one value per feature, or per channel), and optionally `output` (N, M)
targets; HDF5IteratorOneHot reads `output` as class indices with attribute `nclass` and gives
one-hot targets; HDF5IteratorAutoencoder gives the inputs as targets. Minibatches are read from
the file one at a time (the data need not fit in memory) and are feature-major (features, bsz),
like ArrayIterator's; the last partial batch wraps around to the start and the overflow carries
into the next epoch (neon's).
"""
from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np

from .. import NervanaObject


def _h5py() -> Any:
    try:
        import h5py
    except ImportError:
        raise ImportError("HDF5Iterator needs h5py: pip install h5py (or the neonlike extra: "
                          "pip install -e \".[hdf5]\")") from None
    return h5py


class HDF5Iterator(NervanaObject):
    def __init__(self, hdf_filename: str, name: str | None = None) -> None:
        super().__init__(name)
        if not os.path.isfile(hdf_filename):
            raise OSError(f"HDF5Iterator: file not found: {hdf_filename}")
        self.hdf_filename = hdf_filename
        self.hdf_file = _h5py().File(hdf_filename, mode="r")
        if "input" not in self.hdf_file:
            raise ValueError(f"HDF5Iterator: {hdf_filename} has no 'input' dataset (has "
                             f"{sorted(self.hdf_file)})")
        self.inp = self.hdf_file["input"]
        self.ndata = self.inp.shape[0]
        if self.ndata < self.be.bsz:
            raise ValueError(f"HDF5Iterator: {self.ndata} samples are fewer than the batch size "
                             f"{self.be.bsz}")
        if "lshape" not in self.inp.attrs:
            raise ValueError("HDF5Iterator: the 'input' dataset needs an 'lshape' attribute")
        self.lshape = self.shape = tuple(int(d) for d in self.inp.attrs["lshape"])
        self.out = self.hdf_file["output"] if "output" in self.hdf_file else None
        self.start = 0
        self.inpbuf = self.outbuf = None
        self.allocated = False

    @property
    def nbatches(self) -> int:
        return -((self.start - self.ndata) // self.be.bsz)

    def allocate(self) -> None:
        if not self.allocated:
            self.allocate_inputs()
            self.allocate_outputs()
            self.allocated = True

    def allocate_inputs(self) -> None:
        be = self.be
        self.inpbuf = be.iobuf(self.inp.shape[1])
        self.mini_batch_in = np.zeros(self.inpbuf.shape, dtype=np.float32)
        self.mean = None               # on the device, (features, 1) or (channels, 1)
        if "mean" in self.hdf_file:
            mean = np.asarray(self.hdf_file["mean"], dtype=np.float64).ravel()
            if mean.size == self.inp.shape[1]:
                self.meansub_view = self.inpbuf
            elif mean.size == self.lshape[0]:         # per channel: rows of (C, H*W*bsz)
                self.meansub_view = self.inpbuf.reshape((self.lshape[0], -1))
            else:
                raise ValueError(f"HDF5Iterator: 'mean' has {mean.size} values: one per feature "
                                 f"({self.inp.shape[1]}) or per channel ({self.lshape[0]}) "
                                 "expected")
            self.mean = be.array(mean.reshape(-1, 1))

    def allocate_outputs(self) -> None:
        if self.out is not None:
            self.outbuf = self.be.iobuf(self.out.shape[1])
            self.mini_batch_out = np.zeros(self.outbuf.shape, dtype=np.float32)

    def gen_input(self, mini_batch: np.ndarray) -> None:
        self.inpbuf.set(mini_batch)
        if self.mean is not None:
            self.meansub_view[:] = self.meansub_view - self.mean

    def gen_output(self, mini_batch: np.ndarray) -> None:
        self.outbuf.set(mini_batch)

    def cleanup(self) -> None:
        """Close the file."""
        if getattr(self, "hdf_file", None) is not None:
            self.hdf_file.close()

    def __del__(self) -> None:
        self.cleanup()

    def reset(self) -> None:
        self.start = 0

    def _read(self, data: Any, buf: np.ndarray, i1: int, i2: int) -> None:
        n = i2 - i1
        buf[:, :n] = np.asarray(data[i1:i2]).T
        if n < buf.shape[1]:
            buf[:, n:] = np.asarray(data[:buf.shape[1] - n]).T

    def __iter__(self) -> Iterator:
        self.allocate()
        bsz = self.be.bsz
        for i1 in range(self.start, self.ndata, bsz):
            i2 = min(i1 + bsz, self.ndata)
            if i2 == self.ndata:
                self.start = bsz - (i2 - i1)
            self._read(self.inp, self.mini_batch_in, i1, i2)
            self.gen_input(self.mini_batch_in)
            if self.outbuf is not None:
                self._read(self.out, self.mini_batch_out, i1, i2)
                self.gen_output(self.mini_batch_out)
            yield self.inpbuf, self.outbuf


class HDF5IteratorOneHot(HDF5Iterator):
    """Targets one-hot from the class indices in `output` (its attribute `nclass`)."""

    def __init__(self, hdf_filename: str, name: str | None = None) -> None:
        super().__init__(hdf_filename, name)
        if self.out is not None:
            if "nclass" not in self.out.attrs:
                raise ValueError("HDF5IteratorOneHot: the 'output' dataset needs an 'nclass' "
                                 "attribute")
            self.nclass = int(self.out.attrs["nclass"])
            self.out = np.asarray(self.out, dtype=np.int64).reshape(-1, 1)

    def allocate_outputs(self) -> None:
        if self.out is not None:
            self.outbuf = self.be.iobuf(self.nclass)
            self.mini_batch_out = np.zeros((1, self.be.bsz), dtype=np.int64)
            self._hot = np.eye(self.nclass, dtype=np.float32)

    def gen_output(self, mini_batch: np.ndarray) -> None:
        self.outbuf.set(self._hot[:, mini_batch[0]])


class HDF5IteratorAutoencoder(HDF5Iterator):
    """The inputs are the targets."""

    def __iter__(self) -> Iterator:
        for x, _ in super().__iter__():
            yield x, x


__all__ = ["HDF5Iterator", "HDF5IteratorOneHot", "HDF5IteratorAutoencoder"]
