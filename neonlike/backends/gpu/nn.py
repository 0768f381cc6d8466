"""neon's compound NN ops on the GPU: convolution, pooling (batch norm is op-trees on the Backend
base, so it runs as fused kernels here as everywhere).

NervanaGPU inherits GPUNNOpsMixin: the names, signatures, layouts and conventions are the CPU
backend's (cpu/nn.py; input (C, D, H, W, N), filters (C, T, R, S, K) or (K, C, T, R, S), output
(K, M, P, Q, N), and each op's 2-D views), so a layer runs unchanged on either device.

    convolution   im2col (nn_source.nl_im2col) in blocks of output columns, CHUNK_BYTES of
                  columns at a time, and one cuBLAS GEMM a block; bprop: GEMM to columns, then
                  col2im (a gather); update: GEMMs of the columns against the errors summed over
                  the blocks. A 1x1 window at stride 1 without padding takes the input itself
                  as its columns. Bias, relu / brelu and bsum: op-trees on the result.
    pooling       one kernel each way (nl_pool, nl_pool_bprop); argmax in an int32 buffer,
                  converted where the caller's tensor has another dtype.

float16 operands are computed in float32 temporaries, as on the CPU. Outputs that are not
contiguous tensors of the compute dtype get a temporary copied back at the end; every check
runs before anything is written.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..nn_layers import (ConvLayer, NNOpsBase, PoolLayer, check_index_dtype, check_layer,
                         check_operand, work_dtype)
from .layout import INDEX32_MAX, same_view
from .nn_source import NN_SOURCE, POOL_OPS, kernel

CHUNK_BYTES = 256 << 20   # im2col columns a block
BLOCK = 256               # threads a block
MAX_BLOCKS = 1 << 16      # grid cap: the kernels loop over what the grid does not cover


class _Operands:
    """An op's GPU tensors, checked, as contiguous tensors of the compute dtype in the op's
    layout; outputs that are not already that get a temporary, copied back by `commit`."""

    def __init__(self, be: Any, op: str) -> None:
        self.be, self.op = be, op
        self.dtype: np.dtype | None = None
        self.pending: list = []

    def _check(self, t: Any, name: str, shapes: tuple, numeric: bool = False) -> None:
        from .device import GPUTensor
        if not isinstance(t, GPUTensor):
            raise TypeError(f"{self.op}: {name} must be a GPU Tensor, got {type(t).__name__}")
        self.dtype = check_operand(self.op, name, tuple(t.shape), t.dtype, shapes, numeric,
                                   self.dtype)

    def read(self, t: Any, name: str, shape: tuple, alt: tuple | None = None,
             dtype: Any = None) -> Any:
        """t as a contiguous tensor of `shape` (the compute dtype, or `dtype`)."""
        self._check(t, name, (shape,) if alt is None else (shape, alt), dtype is not None)
        want = np.dtype(dtype) if dtype is not None else work_dtype(t.dtype)
        if t.is_contiguous and t.dtype == want:
            return t.reshape(shape)
        return self.be._contiguous_copy_as(t, want).reshape(shape)

    def write(self, t: Any, name: str, shape: tuple, alt: tuple | None = None,
              keep: bool = False, dtype: Any = None) -> Any:
        """A contiguous tensor of `shape` that `commit` copies into t (t itself where it is one
        already); keep: it starts with t's values."""
        self._check(t, name, (shape,) if alt is None else (shape, alt), dtype is not None)
        want = np.dtype(dtype) if dtype is not None else work_dtype(t.dtype)
        if t.is_contiguous and t.dtype == want:
            return t.reshape(shape)
        work = self.be._empty(t.shape, want)
        if keep:
            self.be._copy(work, t)
        self.pending.append((t, work))
        return work.reshape(shape)

    def commit(self) -> None:
        for t, work in self.pending:
            self.be._copy(t, work)


def _same(a: Any, b: Any) -> bool:
    return a is b or (a is not None and b is not None and same_view(a.desc(), b.desc()))


def _pointwise(layer: ConvLayer) -> bool:
    """A 1x1(x1) window at stride 1 without padding: the input is its own column matrix."""
    return layer.TRS == (1, 1, 1) and layer.padding == (0, 0, 0) and layer.strides == (1, 1, 1)


def _chunks(layer: ConvLayer, itemsize: int) -> list:
    """(first column, columns) of each block of the (CTRS, M*P*Q*N) column matrix."""
    total = math.prod(layer.MPQ) * layer.N
    step = max(1, min(total, CHUNK_BYTES // (layer.CTRS * itemsize)))
    return [(j, min(step, total - j)) for j in range(0, total, step)]


class GPUNNOpsMixin(NNOpsBase):
    """Convolution and pooling with neon's names, signatures and layouts, on the device
    (conv_layer, pool_layer, fprop_conv and bprop_conv: NNOpsBase)."""

    def _nn_launch(self, base: str, dtype: np.dtype, total: int, *args: Any,
                   sizes: tuple = ()) -> None:
        """Launch kernel `base` over `total` elements; `sizes`: the element counts its indices
        reach (the 64-bit variant where one could pass 2**31 - 1)."""
        index64 = max((total,) + sizes) + MAX_BLOCKS * BLOCK > INDEX32_MAX
        name, fmt = kernel(base, dtype.name, index64)
        fn = self._device.function(NN_SOURCE, name, fmt)
        grid = max(1, min(-(-total // BLOCK), MAX_BLOCKS))
        fn.prepared_call((grid, 1), (BLOCK, 1, 1), *args)

    # ------------------------------------------------------------------ convolution
    def _filters(self, layer: ConvLayer, f: Any, fprop: bool) -> Any:
        """The filters as the GEMM's (K, CTRS) left operand (fprop) or (CTRS, K) (bprop)."""
        if layer.filter_layout == "CTRSK":
            m = f.reshape(layer.CTRS, layer.K)
            return m.T if fprop else m
        m = f.reshape(layer.K, layer.CTRS)
        return m if fprop else m.T

    def _xprop_conv(self, op: str, layer: ConvLayer, I: Any, F: Any, O: Any, X: Any, bias: Any,
                    bsum: Any, alpha: float, beta: float, relu: bool, brelu: bool,
                    slope: float) -> None:
        check_layer(op, layer, ConvLayer)
        fprop = op == "fprop_conv"
        din, dout = (layer.dimI, layer.dimO) if fprop else (layer.dimO, layer.dimI)
        din2, dout2 = (layer.dimI2, layer.dimO2) if fprop else (layer.dimO2, layer.dimI2)
        channels = dout[0]
        ops = _Operands(self, op)
        src = ops.read(I, "I" if fprop else "E", din, din2)
        f = ops.read(F, "F", layer.dimF, layer.dimF2)
        if relu and brelu:
            raise ValueError(f"{op}: relu and brelu exclude each other")
        x_is_out = X is None or _same(X, O)
        alpha, beta = float(alpha), float(beta)
        x = None if x_is_out else ops.read(X, "X", dout, dout2)
        b = None if bias is None else ops.read(bias, "bias", (channels, 1))
        out = ops.write(O, "O" if fprop else "grad_I", dout, dout2,
                        keep=(beta != 0.0 and x_is_out) or brelu)
        s = None if bsum is None else ops.write(bsum, "bsum", (channels, 1))
        # brelu's mask: X, or O's values before this call
        mask = None if not brelu else x if x is not None else self._contiguous_copy(out)
        raw = out if beta == 0.0 else self._empty(out.shape, out.dtype)
        (self._conv_fprop if fprop else self._conv_bprop)(layer, src, self._filters(
            layer, f, fprop), raw, alpha)
        if raw is not out:
            out[:] = raw + beta * (out if x is None else x)
        o2 = out.reshape(channels, -1)
        value = o2 if b is None else o2 + b
        if relu:
            value = self.maximum(value, 0.0) + float(slope) * self.minimum(value, 0.0)
        elif brelu:
            m2 = mask.reshape(channels, -1)
            value = value * ((m2 > 0.0) + float(slope) * (m2 < 0.0))
        if value is not o2:
            o2[:] = value
        if s is not None:
            s[:] = self.sum(o2, axis=1)
        ops.commit()

    def _conv_fprop(self, layer: ConvLayer, src: Any, fm: Any, out: Any, alpha: float) -> None:
        """out (K, M, P, Q, N) = alpha * conv(src, filters (K, CTRS))."""
        o2 = out.reshape(layer.K, -1)
        if _pointwise(layer):
            self._matmul(fm, src.reshape(layer.C, -1), o2, alpha, 0.0)
            return
        dt, geometry = src.dtype, layer.dimI + layer.TRS + layer.MPQ + layer.geometry
        chunks = _chunks(layer, dt.itemsize)
        buf = self._empty((layer.CTRS * chunks[0][1],), dt)
        for j0, L in chunks:
            col = buf.share((layer.CTRS, L))
            self._nn_launch("nl_im2col", dt, layer.CTRS * L, col.ptr, src.ptr, j0, L, *geometry,
                            sizes=(layer.sizeI, layer.sizeO))
            self._matmul(fm, col, o2[:, j0:j0 + L], alpha, 0.0)

    def _conv_bprop(self, layer: ConvLayer, err: Any, fm: Any, out: Any, alpha: float) -> None:
        """out (C, D, H, W, N) = alpha * the input gradient of the errors (K, M, P, Q, N), the
        filters as (CTRS, K)."""
        e2 = err.reshape(layer.K, -1)
        if _pointwise(layer):
            self._matmul(fm, e2, out.reshape(layer.C, -1), alpha, 0.0)
            return
        dt, geometry = err.dtype, layer.dimI + layer.TRS + layer.MPQ + layer.geometry
        out[:] = 0.0
        chunks = _chunks(layer, dt.itemsize)
        buf = self._empty((layer.CTRS * chunks[0][1],), dt)
        for j0, L in chunks:
            col = buf.share((layer.CTRS, L))
            self._matmul(fm, e2[:, j0:j0 + L], col, alpha, 0.0)
            self._nn_launch("nl_col2im", dt, out.size, out.ptr, col.ptr, j0, L, *geometry,
                            sizes=(layer.CTRS * L, layer.sizeO))

    def update_conv(self, layer: ConvLayer, I: Any, E: Any, U: Any, alpha: float = 1.0,
                    beta: float = 0.0, grad_bias: Any = None, layer_op: Any = None) -> None:
        """U = alpha * dLoss/dF + beta * U; grad_bias (K, 1) = sum of E over all but K."""
        check_layer("update_conv", layer, ConvLayer)
        ops = _Operands(self, "update_conv")
        i = ops.read(I, "I", layer.dimI, layer.dimI2)
        e = ops.read(E, "E", layer.dimO, layer.dimO2)
        alpha, beta = float(alpha), float(beta)
        u = ops.write(U, "U", layer.dimF, layer.dimF2, keep=beta != 0.0)
        gb = None if grad_bias is None else ops.write(grad_bias, "grad_bias", (layer.K, 1))
        e2 = e.reshape(layer.K, -1)
        ctrsk = layer.filter_layout == "CTRSK"
        um = u.reshape((layer.CTRS, layer.K) if ctrsk else (layer.K, layer.CTRS))

        def accumulate(col: Any, ec: Any, b: float) -> None:
            if ctrsk:
                self._matmul(col, ec.T, um, alpha, b)      # (CTRS, L) @ (L, K)
            else:
                self._matmul(ec, col.T, um, alpha, b)      # (K, L) @ (L, CTRS)

        if _pointwise(layer):
            accumulate(i.reshape(layer.C, -1), e2, beta)
        else:
            dt, geometry = i.dtype, layer.dimI + layer.TRS + layer.MPQ + layer.geometry
            chunks = _chunks(layer, dt.itemsize)
            buf = self._empty((layer.CTRS * chunks[0][1],), dt)
            for n, (j0, L) in enumerate(chunks):
                col = buf.share((layer.CTRS, L))
                self._nn_launch("nl_im2col", dt, layer.CTRS * L, col.ptr, i.ptr, j0, L,
                                *geometry, sizes=(layer.sizeI, layer.sizeO))
                accumulate(col, e2[:, j0:j0 + L], beta if n == 0 else 1.0)
        if gb is not None:
            gb[:] = self.sum(e2, axis=1)
        ops.commit()

    # ------------------------------------------------------------------ pooling
    def fprop_pool(self, layer: PoolLayer, I: Any, O: Any, argmax: Any = None,
                   beta: float = 0.0) -> None:
        """O = pool(I) + beta * O; for max pooling, argmax receives each max's window position."""
        check_layer("fprop_pool", layer, PoolLayer)
        ops = _Operands(self, "fprop_pool")
        i = ops.read(I, "I", layer.dimI, layer.dimI2)
        beta = float(beta)
        out = ops.write(O, "O", layer.dimO, layer.dimO2, keep=beta != 0.0)
        am = None
        if argmax is not None and layer.op == "max":
            am = ops.write(argmax, "argmax", layer.dimO, layer.dimO2, dtype=np.int32)
            check_index_dtype(argmax.dtype, math.prod(layer.JTRS))
        geometry = layer.dimI + (layer.K,) + layer.MPQ + layer.JTRS + layer.geometry
        self._nn_launch("nl_pool", i.dtype, out.size, out.ptr, 0 if am is None else am.ptr,
                        i.ptr, *geometry, POOL_OPS[layer.op], beta, sizes=(layer.sizeI,))
        ops.commit()

    def bprop_pool(self, layer: PoolLayer, I: Any, O: Any, argmax: Any = None,
                   alpha: float = 1.0, beta: float = 0.0) -> None:
        """O (dimI) = alpha * (error I (dimO) routed back) + beta * O: max pooling sends each
        error to its argmax, average pooling spreads it evenly over the window's valid positions."""
        check_layer("bprop_pool", layer, PoolLayer)
        if layer.op == "l2":
            raise NotImplementedError("bprop_pool: l2 pooling has no bprop (as in neon)")
        ops = _Operands(self, "bprop_pool")
        e = ops.read(I, "I (the error)", layer.dimO, layer.dimO2)
        am = None
        if layer.op == "max":
            if argmax is None:
                raise ValueError("bprop_pool: max pooling needs the argmax tensor that "
                                 "fprop_pool filled")
            am = ops.read(argmax, "argmax", layer.dimO, layer.dimO2, dtype=np.int32)
        alpha, beta = float(alpha), float(beta)
        out = ops.write(O, "O (the delta)", layer.dimI, layer.dimI2, keep=beta != 0.0)
        geometry = layer.dimI + (layer.K,) + layer.MPQ + layer.JTRS + layer.geometry
        self._nn_launch("nl_pool_bprop", e.dtype, out.size, out.ptr, e.ptr,
                        0 if am is None else am.ptr, *geometry, POOL_OPS[layer.op], alpha, beta,
                        sizes=(layer.sizeO,))
        ops.commit()
