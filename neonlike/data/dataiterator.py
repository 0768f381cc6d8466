"""ArrayIterator (neon.data.dataiterator): minibatches of in-memory arrays, feature-major.

The whole X goes to the device once (N, features), and the labels once as one-hot rows (N, nclass);
labels (N, T) of a sequence become targets (nclass, T*bsz), step t's one-hot columns at t*bsz.
A minibatch is the transposed view of bsz consecutive rows, (features, bsz) and (nclass, bsz): no
copy (neon copied and transposed each batch; GEMMs read the transposed view as it is, and layers
never write into their inputs). The last partial batch wraps around to the start of the data, and
the overflow carries into the next epoch (neon's behaviour), so every batch is full; that batch
is copied into the buffers `Xbuf` / `ybuf`.
"""
from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np

from .. import NervanaObject


class ArrayIterator(NervanaObject):
    def __init__(self, X: Any, y: Any = None, nclass: int | None = None, lshape: Any = None,
                 make_onehot: bool = True, name: str | None = None) -> None:
        super().__init__(name)
        be = self.be
        if be is None:
            raise RuntimeError("ArrayIterator: create a backend first (gen_backend)")
        if not be.bsz:
            raise ValueError("ArrayIterator: the backend has no batch size; pass batch_size= to "
                             "gen_backend")
        X = np.asarray(X)
        if X.ndim != 2:
            X = X.reshape(X.shape[0], -1) if X.ndim > 2 else X
        if X.ndim != 2:
            raise ValueError(f"ArrayIterator: X must be (samples, features), got shape {X.shape}")
        self.ndata, self.nfeatures = X.shape
        if self.ndata < be.bsz:
            raise ValueError(f"ArrayIterator: {self.ndata} samples are fewer than the batch size "
                             f"{be.bsz}")
        if lshape is not None:
            lshape = tuple(int(d) for d in lshape)
            if math.prod(lshape) != self.nfeatures:
                raise ValueError(f"ArrayIterator: lshape {lshape} holds {math.prod(lshape)} "
                                 f"features, X has {self.nfeatures}")
        self.lshape = lshape
        self.shape = lshape if lshape is not None else (self.nfeatures,)
        self.make_onehot = make_onehot
        self.Xdev = be.array(X.astype(be.default_dtype, copy=False))
        self.Xbuf = be.iobuf(self.nfeatures)
        self.ybuf = None
        self.ydev = None
        self.steps = 1
        if y is not None:
            y = np.asarray(y)
            if y.shape[0] != self.ndata:
                raise ValueError(f"ArrayIterator: X has {self.ndata} samples, y has {y.shape[0]}")
            if make_onehot:
                y = y.reshape(self.ndata, -1)
                if y.dtype.kind not in "iu" and not np.all(np.rint(y) == y):
                    raise ValueError("ArrayIterator: class labels must be integers")
                if nclass is None:
                    raise ValueError("ArrayIterator: give nclass= with class labels")
                if y.size and (y.min() < 0 or y.max() >= nclass):
                    raise ValueError(f"ArrayIterator: labels must be in [0, {nclass}), got "
                                     f"{y.min()}..{y.max()}")
                self.nclass = int(nclass)
                self.steps = y.shape[1]        # labels per sample: a sequence's, one per step
                self.labels = y.astype(np.int64) if self.steps > 1 else \
                    y.reshape(-1).astype(np.int64)
                hot = np.zeros((self.ndata, self.steps, self.nclass), dtype=be.default_dtype)
                np.put_along_axis(hot, y.astype(np.int64)[:, :, None], 1.0, axis=2)
                self.ydev = be.array(hot.reshape(self.ndata, -1))
            else:
                y = y.reshape(self.ndata, -1)
                self.nclass = y.shape[1]
                self.ydev = be.array(y.astype(be.default_dtype))
            self.ybuf = be.iobuf((self.nclass, self.steps)) if self.steps > 1 else \
                be.iobuf(self.nclass)
        self.start = 0

    @property
    def nbatches(self) -> int:
        return -((self.start - self.ndata) // self.be.bsz)

    def reset(self) -> None:
        self.start = 0

    def _fill(self, lo: int, n: int, at: int) -> None:
        """Samples lo..lo+n into columns at..at+n of the buffers (a sequence's labels: step t's
        one-hot columns at t*bsz + at, neon's time-major layout)."""
        self.Xbuf[:, at:at + n] = self.Xdev[lo:lo + n].T
        if self.ybuf is None:
            return
        c, bsz = self.nclass, self.be.bsz
        for t in range(self.steps):
            self.ybuf[:, t * bsz + at:t * bsz + at + n] = self.ydev[lo:lo + n, t * c:(t + 1) * c].T

    def __iter__(self) -> Iterator:
        bsz = self.be.bsz
        for i in range(self.start, self.ndata, bsz):
            n = min(bsz, self.ndata - i)
            if n == bsz and self.steps > 1:
                self._fill(i, n, 0)
                yield self.Xdev[i:i + n].T, self.ybuf
            elif n == bsz:
                yield self.Xdev[i:i + n].T, (None if self.ydev is None else self.ydev[i:i + n].T)
            else:                                  # wrap around to the start
                self._fill(i, n, 0)
                self._fill(0, bsz - n, n)
                yield self.Xbuf, self.ybuf
        self.start = (self.start - self.ndata) % bsz


__all__ = ["ArrayIterator"]
