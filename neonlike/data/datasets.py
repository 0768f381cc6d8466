"""Datasets: MNIST from local files (no download), and scikit-learn's bundled 8x8 digits.

    (X_train, y_train), (X_test, y_test), nclass = load_mnist(path)   # X: (N, 784) in [0, 1]
    mnist = MNIST(path); train, valid = mnist.train_iter, mnist.valid_iter
    (X_train, y_train), (X_test, y_test), nclass = load_digits()      # X: (N, 64) in [0, 1]

MNIST is read from `path` in either of the standard forms: the four idx files
(train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte,
each optionally .gz) or neon's `mnist.pkl.gz` (the pickled ((X, y), (X, y), (X, y)) of
deeplearning.net). `find_mnist(path)` says whether they are there.
"""
from __future__ import annotations

import gzip
import os
import pickle
from typing import Any

import numpy as np

from .. import NervanaObject
from .dataiterator import ArrayIterator

IDX_FILES = {"train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
             "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte"}


def _open(path: str) -> Any:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _find(path: str, stem: str) -> str | None:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        p = os.path.join(path, name)
        if os.path.exists(p):
            return p
    return None


def read_idx(filename: str) -> np.ndarray:
    """An idx file (LeCun's format: magic, dims, big-endian uint8 data) as an array."""
    with _open(filename) as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{filename}: not an unsigned-byte idx file")
    ndim = data[3]
    dims = np.frombuffer(data, dtype=">u4", count=ndim, offset=4).astype(int)
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{filename}: header says {tuple(dims)}, found {body.size} values")
    return body.reshape(tuple(dims))


def find_mnist(path: str | None) -> str | None:
    """'idx' or 'pkl' where the MNIST files are under `path`, else None."""
    if not path or not os.path.isdir(os.path.expanduser(path)):
        return None
    path = os.path.expanduser(path)
    if all(_find(path, stem) for stem in IDX_FILES.values()):
        return "idx"
    if os.path.exists(os.path.join(path, "mnist.pkl.gz")):
        return "pkl"
    return None


def load_mnist(path: str = ".", normalize: bool = True) -> tuple:
    """((X_train, y_train), (X_test, y_test), 10): X (N, 784) float32, /255 when normalize."""
    kind = find_mnist(path)
    path = os.path.expanduser(path)
    if kind is None:
        raise FileNotFoundError(
            f"MNIST: no MNIST files under {path!r}: expected the four idx files "
            f"({', '.join(IDX_FILES.values())}, optionally .gz) or mnist.pkl.gz")
    if kind == "idx":
        arrays = {k: read_idx(_find(path, stem)) for k, stem in IDX_FILES.items()}
        X_train = arrays["train_x"].reshape(-1, 784).astype(np.float32)
        X_test = arrays["test_x"].reshape(-1, 784).astype(np.float32)
        y_train, y_test = arrays["train_y"].astype(np.int64), arrays["test_y"].astype(np.int64)
        if normalize:
            X_train /= 255.0
            X_test /= 255.0
    else:
        with gzip.open(os.path.join(path, "mnist.pkl.gz"), "rb") as f:
            train, valid, test = pickle.load(f, encoding="latin1")
        X_train = np.vstack([train[0], valid[0]]).astype(np.float32)
        y_train = np.concatenate([train[1], valid[1]]).astype(np.int64)
        X_test, y_test = test[0].astype(np.float32), test[1].astype(np.int64)
        if not normalize:
            X_train *= 255.0
            X_test *= 255.0
    return (X_train, y_train), (X_test, y_test), 10


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> tuple:
    """scikit-learn's 1797 8x8 digits: ((X_train, y_train), (X_test, y_test), 10), X in [0, 1],
    a fixed shuffled split."""
    try:
        from sklearn.datasets import load_digits as sk_digits
    except ImportError:
        raise ImportError("load_digits needs scikit-learn (pip install scikit-learn)") from None
    d = sk_digits()
    X, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    order = np.random.RandomState(seed).permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return (X[train], y[train]), (X[test], y[test]), 10


class MNIST(NervanaObject):
    """neon's MNIST dataset object over local files: `train_iter`, `valid_iter`, `gen_iterators()`."""

    def __init__(self, path: str = ".", subset_pct: float = 100, normalize: bool = True,
                 size: int = 28, name: str | None = None) -> None:
        super().__init__(name)
        self.path, self.subset_pct, self.normalize, self.size = path, subset_pct, normalize, size
        self._iters: dict | None = None

    def gen_iterators(self) -> dict:
        if self._iters is None:
            (X, y), (Xt, yt), nclass = load_mnist(self.path, self.normalize)
            if self.subset_pct < 100:
                X, y = X[: int(len(y) * self.subset_pct / 100)], y[: int(len(y) * self.subset_pct / 100)]
            lshape = (1, 28, 28)
            self._iters = {"train": ArrayIterator(X, y, nclass=nclass, lshape=lshape),
                           "valid": ArrayIterator(Xt, yt, nclass=nclass, lshape=lshape)}
        return self._iters

    @property
    def train_iter(self) -> ArrayIterator:
        return self.gen_iterators()["train"]

    @property
    def valid_iter(self) -> ArrayIterator:
        return self.gen_iterators()["valid"]


__all__ = ["load_mnist", "load_digits", "find_mnist", "read_idx", "MNIST"]
