"""SINGA's layers (autograd.Linear, Conv2d, BatchNorm2d, pooling, RNN, LSTM) and the handle-based
operators under them (conv2d, batchnorm_2d, pooling_2d).

Convolution and pooling run the backend's compound ops (be.fprop_conv / bprop_conv /
update_conv, be.fprop_pool / bprop_pool) in neon's layouts: input (C, 1, H, W, N), filters
(C, 1, R, S, K), output (K, 1, P, Q, N). Their results stay in that layout (layout.py): a CTensor
holds the lazy NCHW transpose of the CHWN tensor, and the next convolution, pooling, batch norm or
channel cat takes the CHWN tensor itself, through the elementwise operators between them (relu,
batch norm's arithmetic, summed gradients). Only a value in plain NCHW (the data, flatten's
gradient) is transposed on the way in (`layout.permuted`: be.copy_transpose, a tiled kernel on
the CPU for these rotations of the axes, ~10 us at 32x16x8x8), and only a reader that wants NCHW
pays the transpose out (singa_wrap.run). Pooling of a plain NCHW value needs no copy either: the
buffer is, as it lies, the (N*C, 1, H, W, 1) input of a pooling layer over N*C channels of a
batch of one (each image's planes are pooled apart), which the CPU runs plane by plane.

Batch norm reduces over the channel's values with the backend's batch_moments / batch_grad_sums,
in whichever layout its input is held ((1, C, H*W*N) rows in CHWN, (N, C, H*W) in NCHW); its
output and input gradient stay lazy op-trees that fuse with what reads them. Running statistics
follow SINGA: r * (1 - momentum) + batch * momentum (momentum 0.9 by default), the running
variance unbiased (n / (n - 1)).

Choices where SINGA is silent or limited: Conv2d supports dilation (SINGA raises) and groups
(as `group` convolutions of the channel slices); asymmetric ("odd") padding is refused by name.
Average pooling divides by the window positions inside the input (padding excluded). RNN/LSTM
are compositions of recorded operators (one GEMM per input and per step); LSTM keeps its four
gates in one (in, 4H) / (H, 4H) weight pair and one (4H,) bias, gates ordered i, f, o, g.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import autograd as ag
from . import operators as F
from .autograd import Layer, Operation
from .layout import as_chwn, chwn_copy, nchw, permuted, take_chwn
from .singa_wrap import CTensor
from .tensor import Tensor


def _pair(v: Any, what: str) -> tuple:
    if isinstance(v, (int, np.integer)):
        return (int(v), int(v))
    v = tuple(int(x) for x in v)
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or a pair, got {v}")
    return v


def _neon_input(x: CTensor, dims: tuple) -> Any:
    """NCHW x as neon's input `dims` ((C, 1, H, W, N), or (C, H, W, N)): the CHWN tensor it is
    held as (layout.py), else a transposed copy of its value."""
    try:
        return as_chwn(x).reshape(dims)
    except ValueError:    # held as a strided view
        return chwn_copy(x).reshape(dims)


def _kctrs(layer: Any) -> bool:
    """Whether a conv layer takes filters (and gives their gradient) as SINGA's (K, C, R, S)."""
    return getattr(layer, "filter_layout", "CTRSK") == "KCTRS"


def _nchw_result(t: Any, like: CTensor) -> CTensor:
    """A CTensor of neon's (C, 1, H, W, N) result t, held as it lies (layout.nchw)."""
    C, _, H, W, N = t.shape
    return CTensor(nchw(t.reshape((C, H, W, N))), (N, C, H, W), like.dev, like.dtype)


# ---------------------------------------------------------------- handles
class ConvHandle:
    """The geometry of a convolution (SINGA's ConvHandle)."""

    def __init__(self, x: Any, kernel_size: Any, stride: Any, padding: Any, in_channels: int,
                 out_channels: int, bias: bool, group: int = 1, dilation: Any = 1) -> None:
        self.kernel, self.stride = _pair(kernel_size, "kernel_size"), _pair(stride, "stride")
        self.padding, self.dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
        self.in_channels, self.out_channels, self.bias = in_channels, out_channels, bias
        self.group = group
        self._layers: dict = {}

    def layer(self, be: Any, dtype: Any, shape: tuple) -> Any:
        key = (np.dtype(dtype).str, shape)
        layer = self._layers.get(key)
        if layer is None:
            N, C, H, W = shape
            (R, S), (ph, pw), (sh, sw), (dh, dw) = self.kernel, self.padding, self.stride, \
                self.dilation
            layer = self._layers[key] = be.conv_layer(
                dtype, N, C, self.out_channels // self.group, D=1, H=H, W=W, T=1, R=R, S=S,
                pad_h=ph, pad_w=pw, str_h=sh, str_w=sw, dil_h=dh, dil_w=dw,
                # SINGA's own (K, C, R, S) weights, where the backend takes them (the CPU's):
                # no transposed copy of W or of its gradient a step
                **({"filter_layout": "KCTRS"}
                   if "KCTRS" in getattr(be, "conv_filter_layouts", ()) else {}))
        return layer


class PoolingHandle:
    def __init__(self, x: Any, kernel_size: Any, stride: Any, padding: Any,
                 is_max: bool = True) -> None:
        self.kernel, self.stride = _pair(kernel_size, "kernel_size"), _pair(stride, "stride")
        self.padding, self.is_max = _pair(padding, "padding"), is_max
        self._layers: dict = {}

    def layer(self, be: Any, dtype: Any, shape: tuple, held_chwn: bool = False) -> Any:
        """The pooling of NCHW `shape`: for an input held in CHWN (layout.py), neon's layer over
        C channels of a batch of N; else neon's layer over N*C planes of a batch of one, whose
        (N*C, 1, H, W, 1) input the NCHW buffer is as it lies (no transpose either way)."""
        key = (np.dtype(dtype).str, shape, held_chwn)
        layer = self._layers.get(key)
        if layer is None:
            N, C, H, W = shape
            (R, S), (ph, pw), (sh, sw) = self.kernel, self.padding, self.stride
            n, c = (N, C) if held_chwn else (1, N * C)
            layer = self._layers[key] = be.pool_layer(
                dtype, "max" if self.is_max else "avg", n, c, D=1, H=H, W=W, R=R, S=S,
                pad_h=ph, pad_w=pw, str_h=sh, str_w=sw)
        return layer


class BatchNormHandle:
    def __init__(self, momentum: float, x: Any = None, eps: float = 1e-5) -> None:
        self.factor, self.eps = momentum, eps


def _check4(x: CTensor, what: str, channels: int | None = None) -> None:
    if len(x.lshape) != 4 or (channels is not None and x.lshape[1] != channels):
        want = f"(N, {channels}, H, W)" if channels is not None else "(N, C, H, W)"
        raise ValueError(f"{what}: expected input {want}, got {x.lshape}")


# ---------------------------------------------------------------- operators
class _Conv2d(Operation):
    """conv(x, W) + b with W (K, C, R, S), x (N, C, H, W): the backend's fprop/bprop/update."""

    def __init__(self, handle: ConvHandle) -> None:
        super().__init__()
        self.handle = handle

    def forward(self, x: CTensor, W: CTensor, b: CTensor | None = None) -> CTensor:
        h = self.handle
        _check4(x, "conv2d", h.in_channels // h.group)
        K, C, R, S = W.lshape
        if (C, (R, S)) != (x.lshape[1], h.kernel):
            raise ValueError(f"conv2d: W of shape {W.lshape} does not fit input {x.lshape} and "
                             f"kernel {h.kernel}")
        be = x.dev.be
        layer = h.layer(be, x.dtype, x.lshape)
        alloc = x.dev.alloc
        I = _neon_input(x, layer.dimI)
        if _kctrs(layer):      # the backend takes W as it lies
            Fw = _as_shape(W.materialize(), layer.dimF, alloc)
        else:
            Fw = permuted(W.materialize(), (1, 2, 3, 0), alloc).reshape((C, 1, R, S, K))
        O = alloc(layer.dimO, x.dtype)   # every element written (beta 0)
        bias = None if b is None else b.materialize().reshape((K, 1))
        be.fprop_conv(layer, I, Fw, O, bias=bias)
        if ag.training:
            self.layer, self.I, self.F, self.wshape = layer, I, Fw, W.lshape
            self.has_bias = b is not None
        return _nchw_result(O, x)

    def backward(self, dy: CTensor) -> tuple:
        be, layer = dy.dev.be, self.layer
        alloc = dy.dev.alloc
        E = _neon_input(dy, layer.dimO)
        K, C, R, S = self.wshape
        dx = dW = db = None
        if self._need(0):
            G = alloc(layer.dimI, dy.dtype)
            be.bprop_conv(layer, self.F, E, G)
            dx = _nchw_result(G, dy)
        U = alloc(layer.dimF, dy.dtype)
        gb = alloc((K, 1), dy.dtype) if self.has_bias else None
        be.update_conv(layer, self.I, E, U, grad_bias=gb)
        if _kctrs(layer):
            dW = U.reshape(self.wshape)
        else:
            dW = permuted(U.reshape((C, R, S, K)), (3, 0, 1, 2), alloc)
        dW = CTensor(dW, self.wshape, dy.dev, dy.dtype)
        if gb is not None:
            db = CTensor(gb.reshape((1, K)), (K,), dy.dev, dy.dtype)
            return dx, dW, db
        return dx, dW


class _Pooling2d(Operation):
    def __init__(self, handle: PoolingHandle) -> None:
        super().__init__()
        self.handle = handle

    def forward(self, x: CTensor) -> CTensor:
        _check4(x, "pooling_2d")
        be = x.dev.be
        alloc = x.dev.alloc
        t = take_chwn(x)
        held = t is not None
        layer = self.handle.layer(be, x.dtype, x.lshape, held)
        # every element written, argmax too
        argmax = alloc(layer.dimO, np.int32) if self.handle.is_max else None
        if held:
            out = alloc(layer.dimO, x.dtype)
            be.fprop_pool(layer, t.reshape(layer.dimI), out, argmax)
            y = _nchw_result(out, x)
        else:
            N, C, _, _ = x.lshape
            out = alloc((N, C) + layer.MPQ[1:], x.dtype)
            be.fprop_pool(layer, _as_shape(x.materialize(), layer.dimI, alloc),
                          out.reshape(layer.dimO), argmax)
            y = CTensor(out, out.shape, x.dev, x.dtype)
        if ag.training:
            self.layer, self.argmax, self.xshape, self.held = layer, argmax, x.lshape, held
        return y

    def backward(self, dy: CTensor) -> CTensor:
        be = dy.dev.be
        alloc = dy.dev.alloc
        if self.held:    # in CHWN: dy as neon's (C, 1, P, Q, N), its own or transposed
            dx = alloc(self.layer.dimI, dy.dtype)
            be.bprop_pool(self.layer, _neon_input(dy, self.layer.dimO), dx, self.argmax)
            return _nchw_result(dx, dy)
        dx = alloc(self.xshape, dy.dtype)
        be.bprop_pool(self.layer, _as_shape(dy.materialize(), self.layer.dimO, alloc),
                      dx.reshape(self.layer.dimI), self.argmax)
        return CTensor(dx, dx.shape, dy.dev, dy.dtype)


def _as_shape(t: Any, shape: tuple, alloc: Any) -> Any:
    """Engine tensor t reshaped to `shape`: a view, or a C-ordered copy's where t is a strided
    view (the pooling planes (N*C, 1, H, W, 1) of an NCHW tensor, the (N, C, H*W) rows that the
    backend's batch-norm sums take)."""
    try:
        return t.reshape(shape)
    except ValueError:
        out = alloc(tuple(t.shape), t.dtype)
        out[:] = t
        return out.reshape(shape)


def _channel_rows(t: Any, alloc: Any) -> Any:
    N, C, H, W = t.shape
    return _as_shape(t, (N, C, H * W), alloc)


class _BatchNorm2d(Operation):
    """Batch norm over axes (0, 2, 3) of NCHW x; scale and bias (C,). The statistics and the
    parameter gradients are the backend's batch_moments / batch_grad_sums (one kernel each on
    the CPU, running statistics updated in place); the output and the input gradient stay
    lazy op-trees that fuse with what reads them."""

    def __init__(self, handle: BatchNormHandle, running_mean: Tensor,
                 running_var: Tensor) -> None:
        super().__init__()
        self.handle, self.running_mean, self.running_var = handle, running_mean, running_var

    def forward(self, x: CTensor, scale: CTensor, bias: CTensor) -> CTensor:
        _check4(x, "batchnorm_2d", scale.Size())
        be, C = x.dev.be, x.lshape[1]
        eps, m = self.handle.eps, self.handle.factor
        xv = take_chwn(x)          # x held in CHWN (layout.py): the sums run there
        held = xv is not None
        col = (C, 1, 1, 1) if held else (1, C, 1, 1)
        xv = xv if held else x.materialize()
        gamma = scale.materialize().reshape(col)
        beta = bias.materialize().reshape(col)
        rm, rv = self.running_mean.data, self.running_var.data
        if ag.training:
            n = x.Size() // C
            alloc = x.dev.alloc
            x3 = _as_shape(xv, (1, C, n), alloc) if held else _channel_rows(xv, alloc)
            mean, var, inv = (alloc((1, C, 1), x.dtype) for _ in range(3))
            unbiased = n / (n - 1) if n > 1 else 1.0
            be.batch_moments(x3, mean, var, inv, eps, (rm.writable(), rv.writable()), 1.0 - m,
                             (m, m * unbiased))
            mean3, inv3 = mean, inv          # (1, C, 1), as batch_grad_sums takes them
            mean, inv = mean.reshape(col), inv.reshape(col)
            # gamma * inv as the layer's own tensor: the input gradient then reads no parameter,
            # so the optimizer's update of the scale does not force it to run (CTensor.settle)
            # and it stays lazy, fused with what reads it
            ginv = alloc(col, x.dtype)
            ginv[:] = inv * gamma
            self.x3, self.mean3, self.inv3, self.ginv, self.n = x3, mean3, inv3, ginv, n
            self.x, self.mean, self.inv, self.held = xv, mean, inv, held
            y = (xv - mean) * ginv + beta
        else:
            mean = rm.materialize().reshape(col)
            var = rv.materialize().reshape(col)
            y = (xv - mean) / be.sqrt(var + eps) * gamma + beta
        return CTensor(nchw(y) if held else y, x.lshape, x.dev, x.dtype)

    def backward(self, dy: CTensor) -> tuple:
        be, C = dy.dev.be, dy.lshape[1]
        alloc = dy.dev.alloc
        if self.held:     # in CHWN, as forward ran: dy's own CHWN tensor or a transposed copy
            g = _neon_input(dy, self.x.shape)
            g3 = g.reshape((1, C, self.n))
        else:
            g = dy.materialize()
            g3 = _channel_rows(g, alloc)
        dgamma, dbeta = alloc((1, C, 1), dy.dtype), alloc((1, C, 1), dy.dtype)
        be.batch_grad_sums(g3, self.x3, self.mean3, self.inv3, dgamma, dbeta)
        xhat = (self.x - self.mean) * self.inv
        col = self.mean.shape
        dgamma4, dbeta4 = dgamma.reshape(col), dbeta.reshape(col)
        dx = self.ginv * (g - (xhat * dgamma4 + dbeta4) * (1.0 / self.n))
        shape = (C,)
        return (CTensor(nchw(dx) if self.held else dx, dy.lshape, dy.dev, dy.dtype),
                CTensor(dgamma.reshape((1, C)), shape, dy.dev, dy.dtype),
                CTensor(dbeta.reshape((1, C)), shape, dy.dev, dy.dtype))


def conv2d(handle: ConvHandle, x: Tensor, W: Tensor, b: Tensor | None = None,
           odd_padding: Any = (0, 0, 0, 0)) -> Tensor:
    if any(odd_padding):
        raise NotImplementedError(f"conv2d: odd (asymmetric) padding {tuple(odd_padding)} is not "
                                  f"supported; pad symmetrically")
    op = _Conv2d(handle)
    return op(x, W)[0] if b is None else op(x, W, b)[0]


def pooling_2d(handle: PoolingHandle, x: Tensor, odd_padding: Any = (0, 0, 0, 0)) -> Tensor:
    if any(odd_padding):
        raise NotImplementedError(f"pooling_2d: odd (asymmetric) padding {tuple(odd_padding)} "
                                  f"is not supported; pad symmetrically")
    return _Pooling2d(handle)(x)[0]


def batchnorm_2d(handle: BatchNormHandle, x: Tensor, scale: Tensor, bias: Tensor,
                 running_mean: Tensor, running_var: Tensor) -> Tensor:
    return _BatchNorm2d(handle, running_mean, running_var)(x, scale, bias)[0]


# ---------------------------------------------------------------- layers
def _param(shape: tuple, value: float | None = None, std: float | None = None) -> Tensor:
    t = Tensor(shape=shape, requires_grad=True, stores_grad=True)
    if std is not None:
        t.gaussian(0.0, std)
    elif value:
        t.set_value(value)
    return t


class Linear(Layer):
    """y = x @ W + b; W (in, out) ~ N(0, sqrt(2 / (in + out))), b (out,) zeros (SINGA's)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features, self.bias = in_features, out_features, bias
        self.W = _param((in_features, out_features), std=math.sqrt(2.0 / (in_features +
                                                                          out_features)))
        self.allow_params = ["W"]
        if bias:
            self.b = _param((out_features,))
            self.allow_params.append("b")

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"Linear: expected input (N, {self.in_features}), got {x.shape}")
        self.device_check(x, self.W, self.b if self.bias else None)
        y = F.matmul(x, self.W)
        return F.add_bias(y, self.b, axis=0) if self.bias else y


class Conv2d(Layer):
    """W (out, in / group, kh, kw) ~ N(0, sqrt(2 / (kh * kw * in + out))) (SINGA's), b (out,)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, group: int = 1, bias: bool = True,
                 pad_mode: str = "NOTSET", **kwargs: Any) -> None:
        super().__init__()
        if in_channels % group or out_channels % group:
            raise ValueError(f"Conv2d: channels {in_channels} -> {out_channels} do not divide "
                             f"into {group} groups")
        if isinstance(padding, (tuple, list)) and len(padding) == 4:
            raise NotImplementedError("Conv2d: odd (4-tuple) padding is not supported")
        if pad_mode != "NOTSET":
            raise NotImplementedError(f"Conv2d: pad_mode {pad_mode!r}; give padding instead")
        self.in_channels, self.out_channels, self.group = in_channels, out_channels, group
        self.kernel_size, self.bias = _pair(kernel_size, "kernel_size"), bias
        kh, kw = self.kernel_size
        std = math.sqrt(2.0 / (kh * kw * in_channels + out_channels))
        self.W = _param((out_channels, in_channels // group, kh, kw), std=std)
        self.allow_params = ["W"]
        if bias:
            self.b = _param((out_channels,))
            self.allow_params.append("b")
        self.handle = ConvHandle(None, kernel_size, stride, padding, in_channels, out_channels,
                                 bias, group, dilation)

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"Conv2d: expected input (N, {self.in_channels}, H, W), got "
                             f"{x.shape}")
        self.device_check(x, self.W, self.b if self.bias else None)
        if self.group == 1:
            return conv2d(self.handle, x, self.W, self.b if self.bias else None)
        g = self.group
        xs = F.split(x, 1, num_output=g)
        ws = F.split(self.W, 0, num_output=g)
        bs = F.split(self.b, 0, num_output=g) if self.bias else [None] * g
        return F.cat([conv2d(self.handle, xi, wi, bi) for xi, wi, bi in zip(xs, ws, bs)], 1)


class BatchNorm2d(Layer):
    def __init__(self, num_features: int, momentum: float = 0.9) -> None:
        super().__init__()
        self.channels, self.momentum = num_features, momentum
        self.scale = _param((num_features,), value=1.0)
        self.bias = _param((num_features,))
        self.running_mean = Tensor(shape=(num_features,), requires_grad=False)
        self.running_var = Tensor(shape=(num_features,), requires_grad=False)
        self.running_var.set_value(1.0)
        self.allow_params = ["scale", "bias"]
        self.handle = BatchNormHandle(momentum)

    def __call__(self, x: Tensor) -> Tensor:
        self.device_check(x, self.scale, self.bias, self.running_mean, self.running_var)
        return batchnorm_2d(self.handle, x, self.scale, self.bias, self.running_mean,
                            self.running_var)


class Pooling2d(Layer):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 is_max: bool = True) -> None:
        super().__init__()
        stride = kernel_size if stride is None else stride
        self.handle = PoolingHandle(None, kernel_size, stride, padding, is_max)

    def __call__(self, x: Tensor) -> Tensor:
        return pooling_2d(self.handle, x)


class MaxPool2d(Pooling2d):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 odd_padding: Any = (0, 0, 0, 0)) -> None:
        super().__init__(kernel_size, stride, padding, True)


class AvgPool2d(Pooling2d):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 odd_padding: Any = (0, 0, 0, 0)) -> None:
        super().__init__(kernel_size, stride, padding, False)


class Pooling1d(Layer):
    """Pooling over the last axis of (N, C, L): a 2-D pooling of height 1."""

    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0,
                 is_max: bool = True) -> None:
        super().__init__()
        stride = kernel_size if stride is None else stride
        self.pool = Pooling2d((1, kernel_size), (1, stride), (0, padding), is_max)

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim() != 3:
            raise ValueError(f"pooling 1d: expected input (N, C, L), got {x.shape}")
        y = self.pool(F.unsqueeze(x, [2]))
        return F.squeeze(y, [2])


class MaxPool1d(Pooling1d):
    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0,
                 odd_padding: Any = (0, 0, 0, 0)) -> None:
        super().__init__(kernel_size, stride, padding, True)


class AvgPool1d(Pooling1d):
    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0,
                 odd_padding: Any = (0, 0, 0, 0)) -> None:
        super().__init__(kernel_size, stride, padding, False)


class RNN(Layer):
    """h_t = tanh(x_t @ Wx + h_{t-1} @ Wh + b) (or relu); `rnn(xs, h0)` -> (outputs, h)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0, bidirectional: bool = False) -> None:
        super().__init__()
        if num_layers != 1 or bidirectional:
            raise NotImplementedError("RNN: one layer, one direction")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity, self.hidden_size = nonlinearity, hidden_size
        std = 1.0 / math.sqrt(hidden_size)
        self.Wx = _param((input_size, hidden_size), std=std)
        self.Wh = _param((hidden_size, hidden_size), std=std)
        self.b = _param((hidden_size,))
        self.allow_params = ["Wx", "Wh", "b"]

    def step_forward(self, x: Tensor, h: Tensor) -> Tensor:
        a = F.add_bias(F.add(F.matmul(x, self.Wx), F.matmul(h, self.Wh)), self.b)
        return F.tanh(a) if self.nonlinearity == "tanh" else F.relu(a)

    def __call__(self, xs: Any, h0: Tensor) -> tuple:
        self.device_check(h0, self.Wx, self.Wh, self.b)
        out, h = [], h0
        for x in xs:
            h = self.step_forward(x, h)
            out.append(h)
        return out, h


class LSTM(Layer):
    """i, f, o = sigmoid(.), g = tanh(.) of x_t @ Wx + h @ Wh + b; c = f * c + i * g;
    h = o * tanh(c). `lstm(xs, (h0, c0))` -> (outputs, h, c)."""

    def __init__(self, input_size: int, hidden_size: int, nonlinearity: str = "tanh",
                 num_layers: int = 1, bias: bool = True, batch_first: bool = False,
                 dropout: float = 0, bidirectional: bool = False) -> None:
        super().__init__()
        if num_layers != 1 or bidirectional:
            raise NotImplementedError("LSTM: one layer, one direction")
        self.hidden_size = hidden_size
        std = 1.0 / math.sqrt(hidden_size)
        self.Wx = _param((input_size, 4 * hidden_size), std=std)
        self.Wh = _param((hidden_size, 4 * hidden_size), std=std)
        self.b = _param((4 * hidden_size,))
        self.allow_params = ["Wx", "Wh", "b"]

    def step_forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple:
        z = F.add_bias(F.add(F.matmul(x, self.Wx), F.matmul(h, self.Wh)), self.b)
        i, f, o, g = F.split(z, 1, num_output=4)
        c = F.add(F.mul(F.sigmoid(f), c), F.mul(F.sigmoid(i), F.tanh(g)))
        h = F.mul(F.sigmoid(o), F.tanh(c))
        return h, c

    def __call__(self, xs: Any, hc: tuple) -> tuple:
        h, c = hc
        self.device_check(h, self.Wx, self.Wh, self.b)
        out = []
        for x in xs:
            h, c = self.step_forward(x, h, c)
            out.append(h)
        return out, h, c


__all__ = ["Linear", "Conv2d", "BatchNorm2d", "MaxPool2d", "AvgPool2d", "MaxPool1d",
           "AvgPool1d", "Pooling2d", "RNN", "LSTM", "ConvHandle", "PoolingHandle",
           "BatchNormHandle", "conv2d", "pooling_2d", "batchnorm_2d"]
ag._export(globals())
