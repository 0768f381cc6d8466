"""Backend: neon's `be` object, written once for every device.

A device subclass provides `tensor_cls`, `_from_host(values, name, persist_values)` and
`execute(assign_tree)`. Everything else here (allocation, the op functions, reductions, structural
ops, RNG) is device-independent. The elementwise functions are generated from `ops.OP_INFO`, so an
op added to that table appears here with its numpy name.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .. import shapes as S
from ..dtypes import SUPPORTED, as_dtype, cast_for_store
from ..memo import Memo
from ..ops import OP_INFO, Kind, Op
from ..optree import (_MAKERS, OpDict, OpTreeNode, Operators, _dict_update, _new_opdict, build,
                      hotpath, shape_of)
from ..tensor import Tensor
from .host_ops import HostOpsMixin
from .lrn import LRNOpsMixin
from .rnn import RNNOpsMixin

__all__ = ["Backend", "Tensor", "OpTreeNode"]

FLOATS = tuple(np.dtype(t) for t in ("float16", "float32", "float64"))
_COUNTS = Memo("backend.reduced_counts", 4096)  # (shape, axis) -> elements reduced


def _check_bn(op: str, x: Any, full: tuple, rows: tuple) -> None:
    if len(x.shape) != 2:
        raise ValueError(f"{op}: x must be 2-D (features, batch), got shape {x.shape}")
    for name, t in full:
        if tuple(t.shape) != tuple(x.shape):
            raise ValueError(f"{op}: {name} has shape {t.shape}, expected {x.shape} like x")
    for name, t in rows:
        if tuple(t.shape) != (x.shape[0], 1):
            raise ValueError(f"{op}: {name} has shape {t.shape}, expected {(x.shape[0], 1)}")


class Backend(HostOpsMixin, RNNOpsMixin, LRNOpsMixin):
    """The device-independent half of a backend. See the module docstring for the device half."""

    backend_name = "abstract"
    device_type = 0                      # neon: 0 CPU, 1 GPU
    tensor_cls: type = Tensor
    default_dtypes: tuple = FLOATS       # what gen_backend(datatype=...) accepts
    supported_dtypes: tuple = SUPPORTED  # what tensors may hold
    # The engine's fast runners (a dict keyed by engine.statement_key) where `out[:] = tree` may
    # run one straight from Tensor.__setitem__ (neonlike._hotpath.Setitem); None: the statement
    # always goes through execute_assign
    _runners: Any = None

    def __init__(self, rng_seed: int | None = None, default_dtype: Any = np.float32,
                 compat_mode: str | None = None, deterministic: bool | None = None,
                 device_id: int = 0, stochastic_round: bool = False, **kwargs: Any) -> None:
        self.default_dtype = as_dtype(default_dtype, self.default_dtypes)
        self.rng_seed = rng_seed
        self.deterministic = rng_seed is not None if deterministic is None else bool(deterministic)
        self.compat_mode = compat_mode
        self.device_id = device_id
        self.stochastic_round = stochastic_round
        self.bsz: int | None = None
        self.hist_bins, self.hist_offset = 64, -48
        self.gen_rng(rng_seed)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(default_dtype={self.default_dtype.name}, bsz={self.bsz})"

    # ---------------------------------------------------------------- device hooks
    def _from_host(self, values: np.ndarray, name: str | None, persist_values: bool) -> Tensor:
        """A new tensor holding `values` (an array from `_host_empty`, of the tensor's shape and
        dtype)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _from_host")

    def execute(self, optree: OpTreeNode) -> Tensor:
        """Run an `assign(out, value)` tree; a failure must leave `out` untouched."""
        raise NotImplementedError(f"{type(self).__name__} must implement execute")

    def execute_assign(self, out: Tensor, value: OpTreeNode) -> Tensor:
        """`out[:] = value` for a tree already checked to have out's shape: by default the
        `assign` node handed to `execute`; a backend may run it without making the node."""
        d = _new_opdict(OpDict)
        _dict_update(d, op=Op.ASSIGN, shape=out.shape)
        return self.execute(tuple.__new__(OpTreeNode, (d, out, value)))

    def cleanup_backend(self) -> None:
        """Release device resources (nothing to release on the host)."""

    def begin(self, block: Any, identifier: Any) -> None:
        """neon's loop marker; a no-op."""

    def end(self, block: Any, identifier: Any) -> None:
        """neon's loop marker; a no-op."""

    # ---------------------------------------------------------------- allocation and conversion
    def _dtype(self, dtype: Any) -> np.dtype:
        return self.default_dtype if dtype is None else as_dtype(dtype, self.supported_dtypes)

    def _host_empty(self, shape: tuple, dt: np.dtype) -> np.ndarray:
        """The host array a new tensor's values are made in before `_from_host` (a device may
        lay it out as its memory wants, as the CPU aligns it)."""
        return np.empty(shape, dt)

    def _filled(self, shape: Any, value: float, dtype: Any, name: Any, persist_values: bool) -> Tensor:
        values = self._host_empty(S.host_shape(S.as_shape(shape)), self._dtype(dtype))
        values.fill(value)
        return self._from_host(values, name, persist_values)

    def empty(self, shape: Any, dtype: Any = None, name: str | None = None,
              persist_values: bool = True, parallel: bool = False, distributed: bool = False) -> Tensor:
        """A new tensor; neonlike zero-fills it, as neon's CPU did."""
        return self._filled(shape, 0, dtype, name, persist_values)

    def zeros(self, shape: Any, dtype: Any = None, name: str | None = None,
              persist_values: bool = True, parallel: bool = False, distributed: bool = False) -> Tensor:
        return self._filled(shape, 0, dtype, name, persist_values)

    def ones(self, shape: Any, dtype: Any = None, name: str | None = None,
             persist_values: bool = True, parallel: bool = False, distributed: bool = False) -> Tensor:
        return self._filled(shape, 1, dtype, name, persist_values)

    def array(self, ary: Any, dtype: Any = None, name: str | None = None,
              persist_values: bool = True, parallel: bool = False, distributed: bool = False) -> Tensor:
        """Copy host data in; a scalar becomes (1, 1) and a 1-D (n,) becomes (n, 1)."""
        if isinstance(ary, Tensor):
            ary = ary.get()
        host = np.asarray(ary)
        if host.dtype.kind not in "biuf":
            raise TypeError(f"array: expected real numeric data, got dtype {host.dtype}")
        host, dt = host.reshape(S.host_shape(host.shape)), self._dtype(dtype)
        values = cast_for_store(host, dt, out=self._host_empty(host.shape, dt))
        return self._from_host(values, name, persist_values)

    def _like(self, other: Any, dtype: Any) -> tuple:
        if dtype is None and isinstance(other, Tensor):
            dtype = other.dtype
        return S.host_shape(tuple(np.shape(other) if not isinstance(other, Operators) else other.shape)), dtype

    def empty_like(self, other: Any, dtype: Any = None, name: str | None = None) -> Tensor:
        """A tensor of `other`'s shape; of its dtype when `other` is a Tensor, else the default."""
        shape, dtype = self._like(other, dtype)
        return self.empty(shape, dtype, name)

    def zeros_like(self, other: Any, dtype: Any = None, name: str | None = None) -> Tensor:
        shape, dtype = self._like(other, dtype)
        return self.zeros(shape, dtype, name)

    # ---------------------------------------------------------------- reductions and statistics
    def _reduced_count(self, a: Any, axis: Any, op: str) -> int:
        shape = shape_of(a)
        key = (shape, axis)
        try:
            return _COUNTS[key]
        except KeyError:
            hashable = True
        except TypeError:  # an unhashable axis (a list): not memoised
            hashable = False
        n = math.prod(shape[i] for i in S.norm_axes(axis, len(shape), op))
        if hashable:
            _COUNTS.put(key, n)
        return n

    def mean(self, a: Any, axis: Any = None, partial: Any = None, out: Any = None,
             keepdims: bool = True) -> Any:
        n = self._reduced_count(a, axis, "mean")
        return build(Op.MUL, self.sum(a, axis=axis, keepdims=keepdims), 1.0 / n if n else math.nan,
                     out=out)

    def var(self, a: Any, axis: Any = None, partial: Any = None, out: Any = None,
            keepdims: bool = True, binary: bool = False, ddof: int = 0) -> Any:
        """Variance, biased by default (neon), `ddof` as in numpy."""
        n = self._reduced_count(a, axis, "var") - ddof
        centred = a - self.mean(a, axis=axis, keepdims=True)
        total = self.sum(self.square(centred), axis=axis, keepdims=keepdims)
        return build(Op.MUL, total, 1.0 / n if n > 0 else math.nan, out=out)

    def std(self, a: Any, axis: Any = None, partial: Any = None, out: Any = None,
            keepdims: bool = True, ddof: int = 0) -> Any:
        """Standard deviation; `out` receives the deviation (neon wrote the variance there)."""
        return self.sqrt(self.var(a, axis=axis, keepdims=keepdims, ddof=ddof), out=out)

    def batch_moments(self, x: Any, mean: Tensor, var: Tensor, inv: Tensor, eps: float,
                      running: tuple | None = None, keep: float = 1.0,
                      take: tuple = (0.0, 0.0)) -> None:
        """Batch norm's statistics of x (A, C, B) per channel c, over axes 0 and 2: mean, the
        biased variance var and inv = 1 / sqrt(var + eps), into (1, C, 1) tensors; with
        running = (rmean, rvar) (C elements each), rmean = rmean * keep + mean * take[0] and
        rvar = rvar * keep + var * take[1] (neon's rho and 1 - rho; SINGA's 1 - momentum and
        momentum, times n / (n - 1) for the variance). Op-trees here; a device may fuse it."""
        n = x.shape[0] * x.shape[2]
        mean[:] = self.sum(x, axis=(0, 2)) * (1.0 / n)
        var[:] = self.sum(self.square(x - mean), axis=(0, 2)) * (1.0 / n)
        inv[:] = 1.0 / self.sqrt(var + eps)
        if running is not None:
            for r, stat, t in zip(running, (mean, var), take):
                r[:] = r * keep + stat.reshape(r.shape) * t

    def batch_grad_sums(self, dy: Any, x: Any, mean: Tensor, inv: Tensor, dgamma: Tensor,
                        dbeta: Tensor) -> None:
        """Batch norm's parameter gradients per channel c of dy and x (A, C, B): dbeta = the sum
        of dy, dgamma = the sum of dy * (x - mean) * inv, over axes 0 and 2, into (1, C, 1)
        tensors (mean and inv as batch_moments gave them)."""
        dgamma[:] = self.sum(dy * ((x - mean) * inv), axis=(0, 2))
        dbeta[:] = self.sum(dy, axis=(0, 2))

    def compound_fprop_bn(self, x: Any, xsum: Any, xvar: Any, gmean: Any, gvar: Any, gamma: Any,
                          beta: Any, y: Any, eps: float, rho: float, compute_batch_sum: bool,
                          accumbeta: float = 0.0, relu: bool = False, binary: bool = False,
                          inference: bool = False, outputs: Any = None, layer: Any = None) -> None:
        """Batch norm over axis 1 of x (F, N) as op-trees (every device). Training: xsum <- the batch mean (compute_batch_sum
        False means xsum already holds the batch *sum*, e.g. fprop_conv's bsum), xvar <- the
        biased batch variance, gmean/gvar <- rho * old + (1 - rho) * batch stat. Inference uses
        gmean/gvar and updates nothing. y = xhat * gamma + beta + accumbeta * y, then relu."""
        if binary:
            raise NotImplementedError("compound_fprop_bn: binary (shift-based) batch norm is not "
                                      "implemented")
        _check_bn("compound_fprop_bn", x, (("y", y),), (("xsum", xsum), ("xvar", xvar),
                  ("gmean", gmean), ("gvar", gvar), ("gamma", gamma), ("beta", beta)))
        if inference:
            xhat = (x - gmean) / self.sqrt(gvar + eps)
        else:
            if compute_batch_sum:
                xsum[:] = self.mean(x, axis=1)
            else:
                xsum[:] = xsum * (1.0 / x.shape[1])
            xvar[:] = self.mean(self.square(x - xsum), axis=1)
            gmean[:] = gmean * rho + (1.0 - rho) * xsum
            gvar[:] = gvar * rho + (1.0 - rho) * xvar
            xhat = (x - xsum) / self.sqrt(xvar + eps)
        value = xhat * gamma + beta
        if accumbeta != 0.0:
            value = value + accumbeta * y
        y[:] = self.maximum(value, 0) if relu else value

    def compound_bprop_bn(self, delta_out: Any, grad_gamma: Any, grad_beta: Any, delta_in: Any,
                          x: Any, xsum: Any, xvar: Any, gamma: Any, eps: float,
                          binary: bool = False, layer: Any = None) -> None:
        """Batch-norm backward from fprop's batch mean (xsum) and variance (xvar):
        grad_gamma = sum(xhat * delta_in), grad_beta = sum(delta_in) (over axis 1),
        delta_out = gamma / sqrt(xvar + eps) * (delta_in - (xhat * grad_gamma + grad_beta) / N)."""
        if binary:
            raise NotImplementedError("compound_bprop_bn: binary (shift-based) batch norm is not "
                                      "implemented")
        _check_bn("compound_bprop_bn", x, (("delta_out", delta_out), ("delta_in", delta_in)),
                  (("grad_gamma", grad_gamma), ("grad_beta", grad_beta), ("xsum", xsum),
                   ("xvar", xvar), ("gamma", gamma)))
        inv_std = 1.0 / self.sqrt(xvar + eps)
        xhat = (x - xsum) * inv_std
        grad_gamma[:] = self.sum(xhat * delta_in, axis=1)
        grad_beta[:] = self.sum(delta_in, axis=1)
        delta_out[:] = gamma * inv_std * (delta_in - (xhat * grad_gamma + grad_beta)
                                          * (1.0 / x.shape[1]))

    def sgd_momentum(self, param: Tensor, velocity: Tensor, grad: Any, lr: float,
                     momentum: float, dampening: float = 0.0, weight_decay: float = 0.0,
                     nesterov: bool = False, first: bool = False) -> None:
        """One step of SGD with momentum, in place (PyTorch's rule, which SINGA's follows):
        g = grad + weight_decay * param; velocity = g on the first step, else
        momentum * velocity + (1 - dampening) * g; param -= lr * (g + momentum * velocity if
        nesterov else velocity). Op-trees here (two statements); a device may fuse the step into
        one kernel."""
        g = grad if weight_decay == 0 else grad + float(weight_decay) * param
        if first:
            velocity[:] = g
        else:
            damped = g if dampening == 0 else (1.0 - float(dampening)) * g
            velocity[:] = velocity * float(momentum) + damped
        step = g + float(momentum) * velocity if nesterov else velocity
        param[:] = param - float(lr) * step

    # ---------------------------------------------------------------- composites of table ops
    def clip(self, a: Any, a_min: Any, a_max: Any, out: Any = None) -> Any:
        return self.minimum(self.maximum(a, a_min), a_max, out=out)

    def leakyrelu(self, x: Any, a: float = 0.01, out: Any = None) -> Any:
        return build(Op.ADD, self.relu(x), a * self.minimum(x, 0), out=out)

    def elu(self, x: Any, alpha: float = 1.0, out: Any = None) -> Any:
        return build(Op.ADD, self.relu(x), alpha * (self.exp(self.minimum(x, 0)) - 1), out=out)

    def selu(self, x: Any, alpha: float = 1.67326, gamma: float = 1.0507, out: Any = None) -> Any:
        return build(Op.MUL, gamma, self.elu(x, alpha), out=out)

    def hardsigmoid(self, x: Any, alpha: float = 0.2, gamma: float = 0.5, out: Any = None) -> Any:
        return self.clip(alpha * x + gamma, 0, 1, out=out)

    def softsign(self, x: Any, out: Any = None) -> Any:
        return build(Op.DIV, x, 1 + abs(x), out=out)

    # ---------------------------------------------------------------- linear algebra and structure
    def dot(self, a: Any, b: Any, out: Any = None) -> Any:
        if out is not None and isinstance(a, Tensor) and isinstance(b, Tensor) and \
                isinstance(out, Tensor) and a.backend is self and b.backend is self and \
                out.backend is self:
            # `be.dot(A, B, out=C)` of 2-D tensors straight to the device's GEMM (compound_dot's
            # path: no node, no statement; ~2.5 us of a small product's call)
            sa, sb = a.shape, b.shape
            if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0] and \
                    out.shape == (sa[0], sb[1]):
                fast = getattr(self, "_gemm", None)
                if fast is not None and fast(a, b, out, 1.0, 0.0):
                    return out
        return build(Op.DOT, a, b, out=out)

    def transpose(self, a: Any, axes: Sequence[int] | None = None, out: Any = None) -> Any:
        return build(Op.TRANSPOSE, a, None, out=out, axes=axes)

    def reshape(self, a: Any, shape: Any, out: Any = None) -> Any:
        return build(Op.RESHAPE, a, None, out=out, newshape=shape)

    def squeeze(self, a: Any, axis: Any = None, out: Any = None) -> Any:
        shape = shape_of(a)
        axes = tuple(i for i, d in enumerate(shape) if d == 1) if axis is None else \
            S.norm_axes(axis, len(shape), "squeeze")
        if any(shape[i] != 1 for i in axes):
            raise ValueError(f"squeeze: axes {axes} of shape {shape} are not all of size 1")
        return self.reshape(a, S.pad2(tuple(d for i, d in enumerate(shape) if i not in axes)), out)

    def expand_dims(self, a: Any, axis: int = -1, out: Any = None) -> Any:
        shape = shape_of(a)
        axis = S.norm_axis(axis, len(shape) + 1, "expand_dims")
        return self.reshape(a, shape[:axis] + (1,) + shape[axis:], out)

    unsqueeze = expand_dims

    def flatten(self, a: Any, axis: int = 1, out: Any = None) -> Any:
        """(prod(shape[:axis]), prod(shape[axis:])), as ONNX and torch.flatten(x, axis) do."""
        shape = shape_of(a)
        if not -len(shape) <= axis <= len(shape):
            raise ValueError(f"flatten: axis {axis} is out of range for shape {shape}")
        axis %= len(shape) + (axis >= 0)
        return self.reshape(a, (math.prod(shape[:axis]), math.prod(shape[axis:])), out)

    def concatenate(self, arrays: Sequence[Any], axis: int = 0, out: Any = None) -> Any:
        if len(arrays) == 0:
            raise ValueError("concatenate: needs at least one operand")
        tree = arrays[0]
        for a in arrays[1:]:
            tree = build(Op.CONCAT, tree, a, axis=axis)
        if len(arrays) == 1:
            tree = self.reshape(tree, shape_of(tree))
        return tree if out is None else build(Op.ASSIGN, out, tree)

    def slice(self, x: Any, starts: Sequence[int], ends: Sequence[int],
              axes: Sequence[int] | None = None, steps: Sequence[int] | None = None) -> Any:
        """ONNX Slice: `x[starts[i]:ends[i]:steps[i]]` along each of `axes`."""
        shape = shape_of(x)
        axes = range(len(starts)) if axes is None else axes
        steps = [1] * len(starts) if steps is None else steps
        if not len(starts) == len(ends) == len(axes) == len(steps):
            raise ValueError("slice: starts, ends, axes and steps must have the same length")
        index = [slice(None)] * len(shape)
        for s, e, a, st in zip(starts, ends, axes, steps):
            if st == 0:
                raise ValueError("slice: steps cannot be 0")
            index[S.norm_axis(a, len(shape), "slice")] = slice(s, e, st)
        return build(Op.SLICE, x, None, index=tuple(index))

    def split(self, a: Any, indices_or_sections: Any, axis: int = 0) -> list:
        """numpy's split: equal sections or split points; a list of op-trees."""
        shape = shape_of(a)
        axis = S.norm_axis(axis, len(shape), "split")
        n = shape[axis]
        if isinstance(indices_or_sections, (int, np.integer)):
            k = int(indices_or_sections)
            if k <= 0 or n % k:
                raise ValueError(f"split: axis {axis} of size {n} does not split into {k} equal parts")
            bounds = [i * (n // k) for i in range(k + 1)]
        else:
            bounds = [0, *[int(i) for i in indices_or_sections], n]
        index = [slice(None)] * len(shape)
        parts = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            index[axis] = slice(lo, hi)
            parts.append(build(Op.SLICE, a, None, index=tuple(index)))
        return parts

    def _indices(self, indices: Any) -> Any:
        if isinstance(indices, Operators):
            return indices
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
        return self.array(idx.ravel(), dtype=np.int32)

    def take(self, a: Any, indices: Any, axis: Any = None, out: Any = None) -> Any:
        """numpy's take with indices flattened; axis=None takes from the flattened tensor."""
        if axis is None:
            a, axis = self.reshape(a, (1, math.prod(shape_of(a)))), 1
        return build(Op.TAKE, a, self._indices(indices), out=out, axis=axis)

    gather = take

    def tile(self, a: Any, reps: Any, out: Any = None) -> Any:
        return build(Op.TILE, a, None, out=out, reps=reps)

    def onehot(self, indices: Any, axis: int, out: Any = None, depth: int | None = None) -> Any:
        """One-hot rows (axis=1: (N, depth)) or columns (axis=0: (depth, N)) of class indices."""
        if depth is None:
            if out is None:
                raise ValueError("onehot: give depth=, or out= whose shape gives the class count")
            depth = out.shape[0 if axis == 0 else 1]
        return build(Op.ONEHOT, self._indices(indices), None, out=out, depth=depth, axis=axis)

    def cast(self, a: Any, dtype: Any, out: Any = None) -> Any:
        """Values as `dtype` would store them (rounding, saturation), inside a tree."""
        return build(Op.CAST, a, None, out=out, dtype=dtype)

    def nonzero(self, a: Any) -> Tensor:
        """Indices of the non-zero elements, one row per axis: shape (ndim, count), int32."""
        values = a.get() if isinstance(a, Tensor) else OpTreeNode.asnumpyarray(a)
        return self.array(np.array(np.nonzero(values)).reshape(values.ndim, -1), dtype=np.int32)

    # ---------------------------------------------------------------- layer buffers and GEMM
    def iobuf(self, dim0: Any, x: Any = None, dtype: Any = None, name: str | None = None,
              persist_values: bool = True, shared: Any = None, parallelism: Any = None) -> Tensor:
        """A zeroed layer buffer of `bsz` columns: (dim0, bsz) for an int; for a tuple, (d0, d1*bsz)
        when it has two entries (time steps side by side), else (prod(dims), bsz). Returns `x` when
        it is given; with `shared`, a view over the first bytes of that buffer."""
        if x is not None:
            return x
        if not self.bsz:
            raise ValueError("iobuf: the backend has no batch size; pass batch_size= to "
                             "gen_backend or set be.bsz")
        if isinstance(dim0, (tuple, list)):
            dims = tuple(int(d) for d in dim0)
            shape = (dims[0], dims[1] * self.bsz) if len(dims) == 2 else (math.prod(dims), self.bsz)
        else:
            shape = (int(dim0), self.bsz)
        if shared is not None:
            buf = shared.share(shape, dtype=dtype, name=name)
            buf[:] = 0
            return buf
        return self.zeros(shape, dtype=dtype, name=name, persist_values=persist_values)

    def shared_iobuf_size(self, shape: Any, parallelism: Any = None) -> int:
        dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        return math.prod(dims) * self.bsz

    def compound_dot(self, A: Any, B: Any, C: Tensor, alpha: float = 1.0, beta: float = 0.0,
                     relu: bool = False, bsum: Tensor | None = None) -> Tensor:
        """C = alpha * A @ B + beta * C (relu, where asked, before the beta term); bsum, a (rows, 1)
        tensor, receives C's row sums. Transposes are `.T` views of A or B."""
        sa, sb = shape_of(A), shape_of(B)
        if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0] or tuple(C.shape) != (sa[0], sb[1]):
            raise ValueError(f"compound_dot: expected A (m, k), B (k, n) and C (m, n), got "
                             f"A {sa}, B {sb}, C {tuple(C.shape)}")
        fast = getattr(self, "_gemm", None)   # a device's direct GEMM on two tensors
        if fast is not None and not (relu and beta != 0.0) and isinstance(A, Tensor) and \
                isinstance(B, Tensor) and fast(A, B, C, alpha, beta):
            if relu:
                self.execute_assign(C, build(Op.MAXIMUM, C, 0.0))
        elif alpha == 1.0 and beta == 0.0 and not relu:
            self.execute_assign(C, build(Op.DOT, A, B))
        else:
            product = build(Op.DOT, A, B)
            value = product if alpha == 1.0 else build(Op.MUL, product, alpha)
            if relu:
                value = build(Op.MAXIMUM, value, 0.0)
            if beta != 0.0:
                value = build(Op.ADD, value, build(Op.MUL, C, beta))
            self.execute_assign(C, value)
        if bsum is not None:
            bsum[:] = build(Op.SUM, C, None, axis=1, keepdims=True)
        return C

    def copy_transpose(self, a: Any, out: Tensor, axes: Sequence[int] | None = None,
                       repeat: int = 1) -> Tensor:
        """out[:] = a transposed (the axes reversed, or permuted by `axes`)."""
        out[:] = build(Op.TRANSPOSE, a, None, axes=axes)
        return out

    # ---------------------------------------------------------------- random numbers
    def gen_rng(self, seed: int | None = None) -> np.random.RandomState:
        """A host RandomState (`be.rng`) seeded with `seed`; rng_reset returns to this state."""
        self.rng = np.random.RandomState(seed)
        self.init_rng_state = self.rng.get_state()
        return self.rng

    def rng_get_state(self) -> tuple:
        return self.rng.get_state()

    def rng_set_state(self, state: tuple) -> None:
        self.rng.set_state(state)

    def rng_reset(self) -> None:
        self.rng.set_state(self.init_rng_state)

    def fill_normal(self, ary: Tensor, mean: float = 0.0, stdv: float = 1.0) -> Tensor:
        """Normal samples from `be.rng` (neon's CPU used the global numpy RNG here)."""
        return ary.set(self.rng.normal(mean, stdv, ary.shape))

    def make_binary_mask(self, out: Tensor, keepthresh: float = 0.5) -> Tensor:
        """Dropout mask: 1 where a uniform draw from `be.rng` is below `keepthresh`."""
        return out.set(self.rng.uniform(size=out.shape) < keepthresh)

    def output_dim(self, X: int, S: int, padding: int, strides: int, pooling: bool = False,
                   dilation: int = 1) -> int:
        """neon's output length of a window of S (dilated) over X: (X - S' + 2 pad) // stride + 1;
        for pooling, the padding must be smaller than the window. (No Caffe rounding mode.)"""
        span = dilation * (S - 1) + 1
        if pooling and padding >= span:
            raise ValueError(f"Padding dim {padding} incompatible with filter size {span}")
        return (X - span + 2 * padding) // strides + 1

    def convert_data(self, tensor: Any, layer_mkl: bool) -> None:
        """neon's MKL layout conversion: nothing to do, every CPU backend keeps one layout."""
        return None

    def clean_data(self, tensor: Any, layer_mkl: bool) -> None:
        return None

    def shift(self, ary: Any, shift_ary: Any, value: bool = True, out: Any = None) -> Tensor:
        """ary times a power of two (neon's binary shift): 2^shift_ary, or with `value` the power
        of two nearest shift_ary in log scale, with its sign. Into out (or a new tensor: (1, 1)
        for a number)."""
        if value:
            exponent = self.rint(self.safelog(self.absolute(shift_ary)) * (1.0 / math.log(2.0)))
            factor = self.sgn(shift_ary) * self.exp2(exponent)
        else:
            factor = self.exp2(shift_ary)
        if out is None:
            out = self.empty(ary.shape) if hasattr(ary, "shape") else self.empty((1, 1))
        out[:] = factor * ary
        return out

    def binarize(self, ary: Any, out: Tensor, stochastic: bool = True) -> Tensor:
        """out = +1 or -1 per element (neon's CPU signature): deterministic, +1 where ary >= 0;
        stochastic, +1 with probability clip((ary + 1) / 2, 0, 1), drawn from `be.rng`."""
        if stochastic:
            draw = self.array(self.rng.uniform(0, 1, size=out.shape), dtype=out.dtype)
            out[:] = self.less_equal(draw, self.clip((ary + 1.0) * 0.5, 0.0, 1.0)) * 2.0 - 1.0
        else:
            out[:] = self.greater_equal(ary, 0.0) * 2.0 - 1.0
        return out


# ---------------------------------------------------------------- functions generated from OP_INFO

def _unary(op: Op) -> Any:
    make = _MAKERS[op]

    def fn(self: Backend, a: Any, out: Any = None) -> Any:
        if out is None:
            node = make(a)
            if node is not None:
                return node
        return build(op, a, None, out=out)
    fn.__doc__ = f"Elementwise `{op}`; an op-tree, or executed into `out`."
    return _compiled(op, True, fn)


def _binary(op: Op) -> Any:
    make = _MAKERS[op]

    def fn(self: Backend, a: Any, b: Any, out: Any = None) -> Any:
        if out is None:
            node = make(a, b)
            if node is not None:
                return node
        return build(op, a, b, out=out)
    fn.__doc__ = f"Elementwise `{op}` with numpy broadcasting; an op-tree, or executed into `out`."
    return _compiled(op, False, fn)


def _compiled(op: Op, unary: bool, fn: Any) -> Any:
    """`fn` (a method `be.fn(a[, b], out=None)`) with its node-making case in C where
    neonlike._hotpath was built (optree.elementwise_maker's; `out` and all else go to fn)."""
    hot = hotpath()
    if hot is None:
        return fn
    method = hot.Maker(op, False, unary, fn, True)
    method.__name__ = fn.__name__
    return method


def _reduction(op: Op, default_axis: Any) -> Any:
    def fn(self: Backend, a: Any, axis: Any = default_axis, out: Any = None,
           keepdims: bool = True) -> Any:
        return build(op, a, None, out=out, axis=axis, keepdims=keepdims)
    fn.__doc__ = f"`{op}` over `axis` (None, an int or a tuple); keeps reduced axes by default."
    return fn


for _op, _info in OP_INFO.items():
    if _info.kind is Kind.ELEMENTWISE and _info.names:
        for _name in _info.names:
            setattr(Backend, _name, (_unary if _info.arity == 1 else _binary)(_op))
for _op, _axis in ((Op.SUM, None), (Op.MAX, None), (Op.MIN, None), (Op.ARGMAX, 1), (Op.ARGMIN, 1)):
    setattr(Backend, _op.value, _reduction(_op, _axis))
