"""SINGA's Tensor: a value, its device, and what autograd needs (`creator`, `requires_grad`,
`stores_grad`).

    from neonlike.singa import tensor
    w = tensor.Tensor(shape=(2, 3), requires_grad=True, stores_grad=True)
    w.gaussian(0.0, 0.1)
    x = tensor.from_numpy(np.ones((4, 2), np.float32))
    y = x @ w + 1                    # recorded by autograd (SINGA's operators are not)

Choices made where SINGA is silent or where we differ on purpose:
- Python operators (+ - * / ** @, unary -, abs, < >) are autograd operators, recorded like
  `autograd.add` (SINGA's bypass autograd, so their gradients were silently missing). `==`
  stays identity (tensors key dicts: `gradients()` is keyed by the parameter); `autograd.equal`
  compares values.
- `Tensor(data=array)` converts to `dtype` (float32 by default), as SINGA; `from_numpy` keeps
  float64 and float32 (integers become int32).
- `stores_grad=True` with `requires_grad=False` is refused (SINGA says only "must").
- `reshape`, `transpose`, `T()` and indexing are recorded operators returning new tensors.
- Values are lazy (see singa_wrap.py): reading a value (`to_numpy`) runs what it needs.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..shapes import pad2
from .device import Device, get_default_device
from .singa_wrap import CTensor, watch

float16, float32, float64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
int32 = np.dtype(np.int32)


def _ag() -> Any:
    from . import autograd
    return autograd


class Tensor:
    """SINGA's Tensor. `.data` is a CTensor (singa_wrap.py); `.shape` a tuple of any rank."""

    __hash__ = object.__hash__

    def __init__(self, shape: Any = (), device: Device | None = None, dtype: Any = float32,
                 data: Any = None, requires_grad: bool = True, stores_grad: bool = False,
                 creator: Any = None, name: str | None = None) -> None:
        if stores_grad and not requires_grad:
            raise ValueError("Tensor: stores_grad=True needs requires_grad=True (a stored "
                             "gradient must be computed)")
        if isinstance(data, CTensor):
            self.data = data
            device = data.dev
        else:
            device = device or get_default_device()
            dt = np.dtype(dtype)
            if data is None:
                shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list))
                                               else (shape,)))
                value = device.be.zeros(pad2(shape), dtype=dt)
            elif isinstance(data, (np.ndarray, list, tuple, int, float, np.number)):
                host = np.asarray(data, dtype=dt)
                shape = host.shape
                value = device.be.array(host.reshape(pad2(shape)), dtype=dt)
            else:
                raise TypeError(f"Tensor: data must be a numpy array, a number or a CTensor, "
                                f"got {type(data).__name__}")
            watch(value)
            self.data = CTensor(value, shape, device, dt)
        self.device = device
        self.requires_grad, self.stores_grad = bool(requires_grad), bool(stores_grad)
        self.creator, self.name = creator, name

    # ---------------------------------------------------------------- metadata
    @property
    def shape(self) -> tuple:
        return self.data.lshape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def size(self) -> int:
        return math.prod(self.data.lshape)

    def ndim(self) -> int:
        return len(self.data.lshape)

    def is_empty(self) -> bool:
        return self.size() == 0

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"Tensor(shape={self.shape}, dtype={self.dtype.name}, requires_grad="
                f"{self.requires_grad}, stores_grad={self.stores_grad}"
                + (f", name={self.name!r}" if self.name else "") + ")")

    # ---------------------------------------------------------------- values (in place)
    def _write(self, host_or_tree: Any) -> Tensor:
        """Write in place (a number, an array of this shape, or an engine tree)."""
        if isinstance(host_or_tree, np.ndarray):
            host_or_tree = host_or_tree.reshape(pad2(self.shape))
        self.data.write(host_or_tree)
        return self

    def set_value(self, x: Any) -> Tensor:
        return self._write(float(x))

    def gaussian(self, mean: float, std: float) -> Tensor:
        rng = self.device.be.rng
        return self._write(rng.normal(mean, std, self.shape).astype(self.dtype))

    def uniform(self, low: float, high: float) -> Tensor:
        rng = self.device.be.rng
        return self._write(rng.uniform(low, high, self.shape).astype(self.dtype))

    def bernoulli(self, p: float) -> Tensor:
        rng = self.device.be.rng
        return self._write((rng.uniform(size=self.shape) < p).astype(self.dtype))

    def copy_from_numpy(self, np_array: Any, offset: int = 0) -> Tensor:
        a = np.asarray(np_array)
        if a.size != self.size():
            raise ValueError(f"copy_from_numpy: an array of shape {a.shape} does not fit a "
                             f"tensor of shape {self.shape}")
        return self._write(a.astype(self.dtype).reshape(self.shape))

    def copy_data(self, t: Tensor) -> Tensor:
        if t.shape != self.shape:
            raise ValueError(f"copy_data: shapes differ: {t.shape} into {self.shape}")
        return self._write(t.data.materialize())

    def clone(self) -> Tensor:
        """A new tensor holding a copy of the values (no creator)."""
        return Tensor(device=self.device, dtype=self.dtype, data=self.to_numpy(),
                      requires_grad=self.requires_grad, stores_grad=self.stores_grad)

    def deepcopy(self) -> Tensor:
        return self.clone()

    def to_numpy(self) -> np.ndarray:
        return self.data.to_numpy()

    def to_host(self) -> Tensor:
        return self.to_device(get_default_device())

    def to_device(self, device: Device) -> Tensor:
        """Move the values to `device` (in place, as SINGA)."""
        if device is not self.device:
            values = self.to_numpy()
            value = device.be.array(values.reshape(pad2(self.shape)), dtype=self.dtype)
            watch(value)
            self.data = CTensor(value, self.shape, device, self.dtype)
            self.device = device
        return self

    def as_type(self, dtype: Any) -> Tensor:
        return _ag().cast(self, dtype)

    # ---------------------------------------------------------------- recorded operators
    def reshape(self, shape: Any) -> Tensor:
        return _ag().reshape(self, shape)

    def transpose(self, axes: Any = None) -> Tensor:
        return _ag().transpose(self, axes)

    def T(self) -> Tensor:
        if self.ndim() != 2:
            raise ValueError(f"T(): a 2-D tensor is needed, got shape {self.shape}")
        return _ag().transpose(self, (1, 0))

    def __getitem__(self, key: Any) -> Tensor:
        return _ag()._index(self, key)

    def __add__(self, o: Any) -> Tensor: return _ag().add(self, o)          # noqa: E704
    def __radd__(self, o: Any) -> Tensor: return _ag().add(o, self)         # noqa: E704
    def __sub__(self, o: Any) -> Tensor: return _ag().sub(self, o)          # noqa: E704
    def __rsub__(self, o: Any) -> Tensor: return _ag().sub(o, self)         # noqa: E704
    def __mul__(self, o: Any) -> Tensor: return _ag().mul(self, o)          # noqa: E704
    def __rmul__(self, o: Any) -> Tensor: return _ag().mul(o, self)         # noqa: E704
    def __truediv__(self, o: Any) -> Tensor: return _ag().div(self, o)      # noqa: E704
    def __rtruediv__(self, o: Any) -> Tensor: return _ag().div(o, self)     # noqa: E704
    def __pow__(self, o: Any) -> Tensor: return _ag().pow(self, o)          # noqa: E704
    def __rpow__(self, o: Any) -> Tensor: return _ag().pow(o, self)         # noqa: E704
    def __matmul__(self, o: Any) -> Tensor: return _ag().matmul(self, o)    # noqa: E704
    def __lt__(self, o: Any) -> Tensor: return _ag().less(self, o)          # noqa: E704
    def __gt__(self, o: Any) -> Tensor: return _ag().greater(self, o)       # noqa: E704
    def __neg__(self) -> Tensor: return _ag().negative(self)                # noqa: E704
    def __abs__(self) -> Tensor: return _ag().abs(self)                     # noqa: E704


# ---------------------------------------------------------------- module functions
def from_numpy(np_array: Any, device: Device | None = None) -> Tensor:
    """A tensor holding a copy of the array (float64 and float32 kept, integers as int32)."""
    a = np.asarray(np_array)
    dtype = a.dtype if a.dtype in (float32, float64, float16) else \
        int32 if a.dtype.kind in "iub" else float32
    return Tensor(device=device, dtype=dtype, data=a)


def to_numpy(t: Tensor) -> np.ndarray:
    return t.to_numpy()


def from_raw_tensor(t: CTensor) -> Tensor:
    return Tensor(data=t, requires_grad=False)


def from_raw_tensors(ts: Any) -> list:
    return [from_raw_tensor(t) for t in ts]


def zeros_like(t: Tensor) -> Tensor:
    return Tensor(t.shape, t.device, t.dtype)


def ones_like(t: Tensor) -> Tensor:
    out = Tensor(t.shape, t.device, t.dtype)
    return out.set_value(1.0)


def reshape(t: Tensor, shape: Any) -> Tensor:
    return t.reshape(shape)


def transpose(t: Tensor, axes: Any = None) -> Tensor:
    return t.transpose(axes)


def sum(t: Tensor, axis: Any = None) -> Tensor:   # noqa: A001 (SINGA's name)
    return _ag().reduce_sum(t, None if axis is None else [axis], keepdims=0)


def mult(A: Tensor, B: Tensor) -> Tensor:
    return _ag().matmul(A, B)


def concatenate(tensors: Any, axis: int) -> Tensor:
    return _ag().cat(list(tensors), axis)


def copy_from_numpy(t: Tensor, np_array: Any) -> Tensor:
    return t.copy_from_numpy(np_array)


__all__ = ["Tensor", "from_numpy", "to_numpy", "from_raw_tensor", "from_raw_tensors",
           "zeros_like", "ones_like", "reshape", "transpose", "sum", "mult", "concatenate",
           "copy_from_numpy", "float16", "float32", "float64", "int32"]
