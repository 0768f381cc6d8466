"""neon's layers (neon.layers.layer). Data are feature-major: a layer's input and output buffers
are (features, batch), where features is the C-order flattening of the layer's `in_shape` /
`out_shape` ((channels, height, width) for image layers).

Life of a layer: `configure(in_obj)` (shapes, from the previous layer or the dataset), then
`allocate()` (output buffer, parameters), `set_deltas()` (the buffer of the error it sends back),
then `fprop(inputs, inference)` and `bprop(error)` per minibatch. Parameter layers expose
`get_params()` -> [((param, grad), states)] for the optimizers.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np

from .. import NervanaObject
from ..transforms.transform import has_bprop

_ids = itertools.count()


def _shape(x: Any) -> tuple:
    return tuple(int(d) for d in x) if isinstance(x, (tuple, list)) else (int(x),)


class Layer(NervanaObject):
    """Base of all layers."""

    def __init__(self, name: str | None = None, parallelism: str = "Unknown") -> None:
        super().__init__(name if name is not None else f"{type(self).__name__}_{next(_ids)}")
        self.inputs: Any = None
        self.outputs: Any = None
        self.deltas: Any = None
        self.in_shape: tuple | None = None
        self.out_shape: tuple | None = None
        self.prev_layer: Any = None
        self.has_params = False
        self.owns_output = True      # False: fprop writes into its input (the previous layer's
        self.parallelism = parallelism  # output); Sequential gives a first layer its own buffer
        self.owns_delta = False      # neon's: whether set_deltas(DeltasTree) gives it a buffer
        self.next_layer: Any = None
        self.acc_on = False          # neon's: accumulate gradients over bprops (set_acc_on)
        self.acc_params: list = []   # (scratch, gradient) pairs that `accumulates` sums

    def __str__(self) -> str:
        return f"{type(self).__name__} '{self.name}': {self.in_shape} -> {self.out_shape}"

    # ---------------------------------------------------------------- set-up
    def configure(self, in_obj: Any) -> Layer:
        """Take the input shape from the previous layer, a dataset (its `shape`) or a shape."""
        if isinstance(in_obj, Layer):
            self.prev_layer = in_obj
            self.in_shape = in_obj.out_shape
        elif hasattr(in_obj, "shape") and not isinstance(in_obj, (tuple, list, int)):
            self.in_shape = _shape(in_obj.shape)
        else:
            self.in_shape = _shape(in_obj)
        return self

    @property
    def nin(self) -> int:
        return math.prod(self.in_shape)

    def allocate(self, shared_outputs: Any = None) -> None:
        if self.owns_output:
            self.outputs = self.be.iobuf(self.out_shape, shared=shared_outputs)

    def set_deltas(self, delta_buffers: Any = None) -> None:
        """The buffer of the error this layer sends to the previous one: its own; or, given
        neon's DeltasTree, one of the tree's two alternating shared buffers where the layer owns
        its deltas and has a previous layer (else None), as neon did."""
        if isinstance(self.prev_layer, BranchNode):    # the paths' errors meet in its buffer
            if self.prev_layer.deltas is None:
                self.prev_layer.set_deltas(delta_buffers)
            self.deltas = self.prev_layer.deltas
            return
        if delta_buffers is None:
            self.deltas = self.be.iobuf(self.in_shape)
            return
        if self.next_layer is not None and self.next_layer.parallelism != self.parallelism:
            self.owns_delta = True
        if self.owns_delta and self.prev_layer:
            self.deltas = self.be.iobuf(self.in_shape, shared=delta_buffers.buffers[0],
                                        parallelism=self.parallelism)
            delta_buffers.buffers.reverse()
        else:
            self.deltas = None

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        """Tell neon's DeltasTree how large an error buffer this layer needs."""
        if global_deltas is not None:
            global_deltas.proc_layer(self)

    def set_next(self, layer: Any) -> None:
        self.next_layer = layer

    is_mklop = False

    def get_is_mklop(self) -> bool:
        """neon's MKL layout flag: neonlike keeps one layout on every CPU backend, so no layer
        ever needs its data converted (be.convert_data does nothing)."""
        return self.is_mklop

    def set_is_mklop(self) -> None:
        self.is_mklop = True

    def set_not_mklop(self) -> None:
        self.is_mklop = False

    # ---------------------------------------------------------------- running
    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement fprop")

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement bprop")

    def get_params(self) -> list:
        return []

    def get_terminal(self) -> Layer:
        return self

    # ---------------------------------------------------------------- gradient accumulation
    def set_acc_on(self, acc_on: bool) -> None:
        """Make bprop add its gradients to the previous ones (True) or overwrite them; needs
        `allocate(accumulate_updates=True)` first (BufferError otherwise, as neon)."""
        if not hasattr(self, "accumulate_updates"):
            raise BufferError(f"{self.name}: set_acc_on needs allocate(accumulate_updates=True) "
                              f"first")
        if self.accumulate_updates:
            self.acc_on = bool(acc_on)

    @staticmethod
    def accumulates(f: Any) -> Any:
        """Decorate a bprop so that, with acc_on, each gradient in `acc_params` ends as its
        value before the call plus the call's."""
        @functools.wraps(f)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(self, Layer):
                raise TypeError(f"Layer.accumulates decorates methods of layers, not of "
                                f"{type(self).__name__}")
            if self.acc_on:
                for acc, grad in self.acc_params:
                    acc[:] = grad
            out = f(self, *args, **kwargs)
            if self.acc_on:
                for acc, grad in self.acc_params:
                    grad[:] = grad + acc
            return out
        return wrapper

    def _acc_buffers(self, accumulate_updates: bool, names: list) -> None:
        """With accumulate_updates, a scratch `acc_<name>` for each gradient attribute named."""
        self.accumulate_updates = accumulate_updates
        self.acc_params = []
        if accumulate_updates:
            for name in names:
                grad = getattr(self, name)
                acc = self.be.empty_like(grad)
                setattr(self, f"acc_{name}", acc)
                self.acc_params.append((acc, grad))

    # ---------------------------------------------------------------- serialisation
    def get_params_serialize(self, keep_states: bool = True) -> dict:
        return self.get_description(get_weights=True, keep_states=keep_states)

    def set_params(self, pdict: dict) -> None:
        """Set the layer's parameters from a `get_params_serialize()` dict (its 'params')."""
        for key, value in pdict.get("params", {}).items():
            current = getattr(self, key, None)
            if current is not None and hasattr(current, "set"):
                if tuple(current.shape) != tuple(np.shape(value)):
                    raise ValueError(f"{self.name}: set_params {key!r} has shape "
                                     f"{np.shape(value)}, the layer's is {tuple(current.shape)}")
                current.set(np.asarray(value))
            else:
                setattr(self, key, self.be.array(np.asarray(value), name=f"{self.name}_{key}"))

    # ---------------------------------------------------------------- serialisation (models)
    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        return {"type": type(self).__name__, "name": self.name}

    def load_weights(self, pdict: dict, load_states: bool = True) -> None:
        pass


class ParameterLayer(Layer):
    """A layer with one parameter tensor W (and its gradient dW), filled by `init`."""

    def __init__(self, init: Any = None, name: str | None = None, parallelism: str = "Unknown") -> None:
        super().__init__(name, parallelism)
        from ..initializers import GlorotUniform
        self.init = init if init is not None else GlorotUniform()
        self.owns_delta = True
        self.W: Any = None
        self.dW: Any = None
        self.states: list = []
        self.weight_shape: tuple | None = None
        self.has_params = True

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        super().allocate(shared_outputs)
        if self.W is None:
            self.W = self.be.empty(self.weight_shape, name=f"{self.name}_W")
            self.init.fill(self.W)
        elif tuple(self.W.shape) != tuple(self.weight_shape):
            raise ValueError(f"{self.name}: its weights have shape {tuple(self.W.shape)}, but "
                             f"inputs of shape {self.in_shape} need {self.weight_shape}")
        self.dW = self.be.zeros_like(self.W, name=f"{self.name}_dW")
        self._acc_buffers(accumulate_updates, ["dW"])

    def get_params(self) -> list:
        return [((self.W, self.dW), self.states)]

    def set_params(self, pdict: dict) -> None:
        super().set_params(pdict)
        if self.dW is None or tuple(self.dW.shape) != tuple(self.W.shape):
            self.dW = self.be.zeros_like(self.W, name=f"{self.name}_dW")

    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        d = super().get_description()
        if get_weights:
            d["params"] = {"W": self.W.get()}
            if keep_states:
                d["states"] = [s.get() for s in self.states]
        return d

    def load_weights(self, pdict: dict, load_states: bool = True) -> None:
        W = np.asarray(pdict["params"]["W"])
        if self.W is None:
            self.W = self.be.array(W, name=f"{self.name}_W")
        else:
            if tuple(W.shape) != tuple(self.W.shape):
                raise ValueError(f"{self.name}: saved weights have shape {W.shape}, the layer's "
                                 f"are {tuple(self.W.shape)}")
            self.W.set(W)
        if load_states and "states" in pdict:
            self.states[:] = [self.be.array(s) for s in pdict["states"]]


class Linear(ParameterLayer):
    """outputs = W @ inputs, W of shape (nout, nin); no bias (that is the Bias layer). An input
    of shape (features, steps) (a recurrent layer's: steps side by side, time-major columns) is
    read step by step, as neon: W is (nout, features) and the output (nout, steps); any other
    shape is flattened into nin features."""

    def __init__(self, nout: int, init: Any = None, bsum: bool = False, name: str | None = None) -> None:
        super().__init__(init, name)
        if not isinstance(nout, (int, np.integer)) or nout <= 0:
            raise ValueError(f"Linear: nout must be a positive int, got {nout!r}")
        self.nout = int(nout)
        self.bsum = bsum

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        if len(self.in_shape) == 2:          # (features, steps)
            self.out_shape = (self.nout, self.in_shape[1])
            self.weight_shape = (self.nout, self.in_shape[0])
        else:
            self.out_shape = (self.nout,)
            self.weight_shape = (self.nout, self.nin)
        return self

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        self.be.compound_dot(self.W, inputs, self.outputs)
        return self.outputs

    @Layer.accumulates
    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is not None:
            self.be.compound_dot(self.W.T, error, self.deltas, alpha, beta)
        self.be.compound_dot(error, self.inputs.T, self.dW)
        return self.deltas


class Bias(ParameterLayer):
    """outputs = inputs + b, one b per channel (per feature for flat inputs); in place."""

    def __init__(self, init: Any = None, name: str | None = None) -> None:
        from ..initializers import Constant
        super().__init__(init if init is not None else Constant(0.0), name)
        self.owns_output = self.owns_delta = False

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.out_shape = self.in_shape
        self.weight_shape = (self.in_shape[0], 1)
        return self

    def _channels(self, x: Any) -> Any:
        """x as (channels, everything else): a view."""
        return x if len(self.in_shape) == 1 else x.reshape((self.in_shape[0], -1))

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        if not self.owns_output:     # in place, into the previous layer's output buffer
            self.outputs = inputs
        try:
            x = self._channels(inputs)
        except ValueError:   # a strided view (a dataset's batch) cannot be reshaped: in the tree
            x = self.be.reshape(inputs, (self.in_shape[0], -1))
        self._channels(self.outputs)[:] = x + self.W
        return self.outputs

    @Layer.accumulates
    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        self.dW[:] = self.be.sum(self._channels(error), axis=1)
        return error


class Activation(Layer):
    """outputs = transform(inputs), in place; bprop multiplies the error by transform.bprop(outputs)
    (or, for a transform without bprop, runs its Autodiff gradient from the inputs)."""

    def __init__(self, transform: Any, name: str | None = None) -> None:
        super().__init__(name)
        self.owns_delta = True
        self.transform = transform
        self.own_bprop = has_bprop(transform)
        self.owns_output = not self.own_bprop   # Autodiff needs the inputs kept

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.out_shape = self.in_shape
        return self

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        if not self.owns_output:     # in place, into the previous layer's output buffer
            self.outputs = inputs
        self.outputs[:] = self.transform(inputs)
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.own_bprop:
            d = self.transform.bprop(self.outputs)
            if not (isinstance(d, (int, float)) and d == 1):
                error[:] = d * error
            return error
        from ..backends.autodiff import Autodiff
        (g,) = Autodiff(self.transform(self.inputs), self.be, next_error=error) \
            .get_grad_op_tree([self.inputs])
        error[:] = g
        return error

    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        d = super().get_description()
        d["transform"] = type(self.transform).__name__
        return d


class Dropout(Layer):
    """Training: outputs = inputs * mask, mask 1 with probability `keep`; inference: inputs * keep
    (neon's convention: no rescaling while training)."""

    def __init__(self, keep: float = 0.5, name: str | None = None) -> None:
        super().__init__(name)
        if not 0.0 < keep <= 1.0:
            raise ValueError(f"Dropout: keep must be in (0, 1], got {keep!r}")
        self.keep = keep
        self.keep_mask: Any = None

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.out_shape = self.in_shape
        return self

    def allocate(self, shared_outputs: Any = None) -> None:
        super().allocate(shared_outputs)
        self.keep_mask = self.be.iobuf(self.out_shape)

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        if inference:
            self.outputs[:] = inputs * self.keep
        else:
            self.be.make_binary_mask(self.keep_mask, self.keep)
            self.outputs[:] = inputs * self.keep_mask
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is not None:
            self.deltas[:] = error * self.keep_mask
        return self.deltas


class LookupTable(ParameterLayer):
    """Word embeddings W (vocab_size, embedding_dim). Inputs (sentence_length, batch) of word ids;
    outputs (embedding_dim, sentence_length * batch), time steps side by side (column t*batch + n
    holds the embedding of inputs[t, n]), as neon's recurrent layers read them."""

    def __init__(self, vocab_size: int, embedding_dim: int, init: Any = None, update: bool = True,
                 pad_idx: int | None = None, name: str | None = None) -> None:
        super().__init__(init, name)
        self.vocab_size, self.embedding_dim = int(vocab_size), int(embedding_dim)
        self.update, self.pad_idx = update, pad_idx

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        if len(self.in_shape) > 2:     # (sentence_length, steps): neon read the first entry
            raise ValueError(f"{self.name}: LookupTable takes (sentence_length,) inputs, got "
                             f"in_shape {self.in_shape}")
        self.out_shape = (self.embedding_dim, self.in_shape[0])
        self.weight_shape = (self.vocab_size, self.embedding_dim)
        return self

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        ids = np.rint(inputs.get()).astype(np.int64).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"{self.name}: word ids must be in [0, {self.vocab_size}), got "
                             f"{ids.min()}..{ids.max()}")
        self._ids = ids
        self.outputs.set(self.W.get()[ids].T)
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.update:
            dW = np.zeros(self.weight_shape, dtype=np.float64)
            np.add.at(dW, self._ids, error.get().T)
            if self.pad_idx is not None:
                dW[self.pad_idx] = 0
            self.dW.set(dW)
        return self.deltas      # indices take no error; neon returned its delta buffer as is


# ---------------------------------------------------------------- image layers
def _spatial(in_shape: tuple, who: str) -> tuple:
    """(C, D, H, W) of an image layer's input: (C, H, W) or (C, D, H, W)."""
    if len(in_shape) == 3:
        return (in_shape[0], 1, in_shape[1], in_shape[2])
    if len(in_shape) == 4:
        return tuple(in_shape)
    raise ValueError(f"{who}: expects inputs of shape (C, H, W) or (C, D, H, W), got in_shape "
                     f"{in_shape} (give the dataset an lshape, e.g. ArrayIterator(..., "
                     f"lshape=(1, 28, 28)))")


def _spec(value: Any, prefix: str, volumetric: bool) -> dict:
    """neon's strides/padding/dilation: an int for every spatial axis (h and w; d too for
    volumetric inputs), or a dict of some of the `str_h`-style keys (the others keep their
    defaults: 1 for strides and dilation, 0 for padding)."""
    names = ("d", "h", "w")
    if isinstance(value, dict):
        unknown = set(value) - {f"{prefix}_{n}" for n in names}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}; expected {prefix}_d/h/w")
        return {k: int(v) for k, v in value.items()}
    return {f"{prefix}_{n}": int(value) for n in (names if volumetric else names[1:])}


class Convolution(ParameterLayer):
    """Cross-correlation with K filters of (T,) R x S over (C, (D,) H, W) inputs; W is
    (C*T*R*S, K) as neon's. fshape: (R, S, K) or (T, R, S, K)."""

    def __init__(self, fshape: Any, strides: Any = None, padding: Any = None, dilation: Any = None,
                 init: Any = None, bsum: bool = False, name: str | None = None) -> None:
        super().__init__(init, name)
        fshape = _shape(fshape)
        if len(fshape) not in (3, 4):
            raise ValueError(f"Convolution: fshape must be (R, S, K) or (T, R, S, K), got {fshape}")
        self.fshape = (1,) + fshape if len(fshape) == 3 else fshape
        self.strides, self.padding, self.dilation = strides, padding, dilation
        for value, prefix in ((strides, "str"), (padding, "pad"), (dilation, "dil")):
            if value is not None:
                _spec(value, prefix, True)      # bad keys fail here, where the layer is written
        self.bsum = bsum
        self.nglayer: Any = None

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        C, D, H, W = _spatial(self.in_shape, f"{self.name} (Convolution)")
        T, R, S, K = self.fshape
        volumetric = len(self.in_shape) == 4
        params = {f"{k}_{n}": v for k, v in (("str", 1), ("pad", 0), ("dil", 1)) for n in "dhw"}
        for value, prefix in ((self.strides, "str"), (self.padding, "pad"), (self.dilation, "dil")):
            if value is not None:
                params.update(_spec(value, prefix, volumetric))
        self.nglayer = self.be.conv_layer(self.be.default_dtype, self.be.bsz, C, K, D, H, W,
                                          T, R, S, **params)
        M, P, Q = self.nglayer.M, self.nglayer.P, self.nglayer.Q
        self.out_shape = (K, P, Q) if len(self.in_shape) == 3 else (K, M, P, Q)
        self.weight_shape = (C * T * R * S, K)
        return self

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        self.be.fprop_conv(self.nglayer, inputs, self.W, self.outputs)
        return self.outputs

    @Layer.accumulates
    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is not None:
            self.be.bprop_conv(self.nglayer, self.W, error, self.deltas, alpha=alpha, beta=beta)
        self.be.update_conv(self.nglayer, self.inputs, error, self.dW)
        return self.deltas


class Convolution_bias(Convolution):
    """A Convolution with a per-filter bias fused into it (neon's Conv wrapper builds it when
    given a bias without batch norm): weight_bias (K, 1), grad_bias."""

    def __init__(self, fshape: Any, strides: Any = None, padding: Any = None, dilation: Any = None,
                 init: Any = None, bsum: bool = False, name: str | None = None,
                 bias: Any = None) -> None:
        super().__init__(fshape, strides, padding, dilation, init, bsum, name)
        from ..initializers import Constant
        self.init_bias = bias if bias is not None else Constant(0.0)
        self.weight_bias: Any = None
        self.grad_bias: Any = None
        self.states = [[], []]

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        super().allocate(shared_outputs, accumulate_updates)
        K = self.fshape[-1]
        if self.weight_bias is None:
            self.weight_bias = self.be.empty((K, 1), name=f"{self.name}_bias")
            self.init_bias.fill(self.weight_bias)
        elif tuple(self.weight_bias.shape) != (K, 1):
            raise ValueError(f"{self.name}: its bias has shape {tuple(self.weight_bias.shape)}, "
                             f"{K} filters need ({K}, 1)")
        self.grad_bias = self.be.zeros((K, 1), name=f"{self.name}_grad_bias")
        self._acc_buffers(accumulate_updates, ["dW", "grad_bias"])

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        self.be.fprop_conv(self.nglayer, inputs, self.W, self.outputs, bias=self.weight_bias)
        return self.outputs

    @Layer.accumulates
    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is not None:
            self.be.bprop_conv(self.nglayer, self.W, error, self.deltas, alpha=alpha, beta=beta)
        self.be.update_conv(self.nglayer, self.inputs, error, self.dW, grad_bias=self.grad_bias)
        return self.deltas

    def get_params(self) -> list:
        return [((self.W, self.dW), self.states[0]),
                ((self.weight_bias, self.grad_bias), self.states[1])]

    def set_params(self, pdict: dict) -> None:
        super().set_params(pdict)
        if self.weight_bias is not None and self.grad_bias is None:
            self.grad_bias = self.be.zeros_like(self.weight_bias)

    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        d = Layer.get_description(self)
        if get_weights:
            d["params"] = {"W": self.W.get(), "weight_bias": self.weight_bias.get()}
            if keep_states:
                d["states"] = [[s.get() for s in st] for st in self.states]
        return d

    def load_weights(self, pdict: dict, load_states: bool = True) -> None:
        self.set_params(pdict)
        if load_states and "states" in pdict:
            self.states = [[self.be.array(s) for s in st] for st in pdict["states"]]


class Deconvolution(ParameterLayer):
    """The transpose of a convolution: (K, (M,) P, Q) inputs to (C, (D,) H, W) outputs, fshape
    (R, S, C) or (T, R, S, C); W is (C*T*R*S, K), the weights of the convolution it inverts."""

    def __init__(self, fshape: Any, strides: Any = None, padding: Any = None, dilation: Any = None,
                 init: Any = None, bsum: bool = False, name: str | None = None) -> None:
        super().__init__(init, name)
        fshape = _shape(fshape)
        if len(fshape) not in (3, 4):
            raise ValueError(f"Deconvolution: fshape must be (R, S, C) or (T, R, S, C), got "
                             f"{fshape}")
        self.fshape = (1,) + fshape if len(fshape) == 3 else fshape
        self.strides, self.padding, self.dilation = strides, padding, dilation
        for value, prefix in ((strides, "str"), (padding, "pad"), (dilation, "dil")):
            if value is not None:
                _spec(value, prefix, True)
        self.bsum = bsum
        self.nglayer: Any = None

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        K, M, P, Q = _spatial(self.in_shape, f"{self.name} (Deconvolution)")
        T, R, S, C = self.fshape
        params = {f"{k}_{n}": v for k, v in (("str", 1), ("pad", 0), ("dil", 1)) for n in "dhw"}
        for value, prefix in ((self.strides, "str"), (self.padding, "pad"), (self.dilation, "dil")):
            if value is not None:
                params.update(_spec(value, prefix, len(self.in_shape) == 4))
        # the input size whose convolution has the given output size
        D, H, W = ((o - 1) * params[f"str_{n}"] - 2 * params[f"pad_{n}"]
                   + params[f"dil_{n}"] * (f - 1) + 1
                   for o, f, n in ((M, T, "d"), (P, R, "h"), (Q, S, "w")))
        if min(D, H, W) < 1:
            raise ValueError(f"{self.name} (Deconvolution): inputs {self.in_shape} with filter "
                             f"{self.fshape[:3]} and {params} give an output of size "
                             f"{(D, H, W)}")
        self.nglayer = self.be.conv_layer(self.be.default_dtype, self.be.bsz, C, K, D, H, W,
                                          T, R, S, **params)
        self.out_shape = (C, H, W) if len(self.in_shape) == 3 else (C, D, H, W)
        self.weight_shape = (C * T * R * S, K)
        return self

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        self.be.bprop_conv(self.nglayer, self.W, inputs, self.outputs)
        return self.outputs

    @Layer.accumulates
    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is not None:
            self.be.fprop_conv(self.nglayer, error, self.W, self.deltas, alpha=alpha, beta=beta)
        self.be.update_conv(self.nglayer, error, self.inputs, self.dW)
        return self.deltas


class Pooling(Layer):
    """Max or average pooling over (T,) R x S windows of each channel; fshape an int (square), a
    tuple (R, S), or 'all' (the whole image). Strides default to the window."""

    def __init__(self, fshape: Any, op: str = "max", strides: Any = None, padding: Any = None,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.owns_delta = True
        if op not in ("max", "avg"):
            raise ValueError(f"Pooling: op must be 'max' or 'avg', got {op!r}")
        self.fshape, self.op = fshape, op
        self.strides, self.padding = strides, padding
        self.nglayer: Any = None
        self.argmax: Any = None

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        C, D, H, W = _spatial(self.in_shape, f"{self.name} (Pooling)")
        if self.fshape == "all":
            T, R, S = D, H, W
        else:
            f = _shape(self.fshape)
            T, R, S = (1, f[0], f[0]) if len(f) == 1 else (1,) + f if len(f) == 2 else f
        volumetric = len(self.in_shape) == 4
        params = {"pad_d": 0, "pad_h": 0, "pad_w": 0, "str_d": T, "str_h": R, "str_w": S}
        if self.padding is not None:
            params.update(_spec(self.padding, "pad", volumetric))
        if self.strides is not None:
            params.update(_spec(self.strides, "str", volumetric))
        self.nglayer = self.be.pool_layer(self.be.default_dtype, self.op, self.be.bsz, C, D, H, W,
                                          1, T, R, S, **params)
        M, P, Q = self.nglayer.M, self.nglayer.P, self.nglayer.Q
        self.out_shape = (C, P, Q) if len(self.in_shape) == 3 else (C, M, P, Q)
        return self

    def allocate(self, shared_outputs: Any = None) -> None:
        super().allocate(shared_outputs)
        if self.op == "max":
            self.argmax = self.be.iobuf(self.out_shape, dtype=np.int32)

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        self.be.fprop_pool(self.nglayer, inputs, self.outputs, self.argmax)
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is not None:
            self.be.bprop_pool(self.nglayer, error, self.deltas, self.argmax, alpha, beta)
        return self.deltas


class LRN(Layer):
    """Local response normalisation across channels: y = x / (1 + ascale/depth * sum of x^2
    over the `depth` channels centred on x's (zeros beyond the edges)) ** bpower."""

    def __init__(self, depth: int, alpha: float = 1.0, beta: float = 0.0, ascale: float = 1.0,
                 bpower: float = 1.0, name: str | None = None) -> None:
        super().__init__(name)
        if int(depth) < 1 or int(depth) % 2 == 0:
            raise ValueError(f"LRN: depth must be a positive odd int, got {depth!r}")
        self.J = self.depth = int(depth)
        self.alpha, self.beta, self.ascale, self.bpower = alpha, beta, ascale, bpower
        self.owns_delta = True
        self.nglayer: Any = None
        self.denom: Any = None

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        C, D, H, W = _spatial(self.in_shape, f"{self.name} (LRN)")
        self.nglayer = self.be.lrn_layer(self.be.default_dtype, self.be.bsz, C, D, H, W, self.J)
        self.out_shape = self.in_shape
        return self

    def allocate(self, shared_outputs: Any = None) -> None:
        super().allocate(shared_outputs)
        self.denom = self.be.iobuf(self.in_shape)

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        self.be.fprop_lrn(self.nglayer, inputs, self.outputs, self.denom, self.alpha, self.beta,
                          self.ascale, self.bpower)
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is not None:
            self.be.bprop_lrn(self.nglayer, self.inputs, self.outputs, error, self.deltas,
                              self.denom, self.alpha, self.beta, self.ascale, self.bpower)
        return self.deltas


class Reshape(Layer):
    """A new shape for the same buffer: neon's (features, steps * batch) buffers reshaped in C
    order. `reshape` may hold one 0 (keep that axis of the input) and one -1 (inferred)."""

    def __init__(self, reshape: Any, name: str | None = None) -> None:
        super().__init__(name)
        self.reshape = _shape(reshape)
        if self.reshape.count(-1) > 1:
            raise ValueError(f"Reshape: at most one -1 in {self.reshape}")
        self.owns_output = False

    @staticmethod
    def _buffer_shape(shape: tuple, bsz: int) -> tuple:
        return (shape[0], shape[1] * bsz) if len(shape) == 2 else (math.prod(shape), bsz)

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        out = [self.in_shape[i] if d == 0 and i < len(self.in_shape) else d
               for i, d in enumerate(self.reshape)]
        if -1 in out:
            known = math.prod(d for d in out if d != -1)
            if known == 0 or self.nin % known:
                raise ValueError(f"{self.name}: cannot reshape {self.in_shape} to {self.reshape}")
            out = [self.nin // known if d == -1 else d for d in out]
        if math.prod(out) != self.nin:
            raise ValueError(f"{self.name}: cannot reshape {self.in_shape} ({self.nin} features) "
                             f"to {tuple(out)} ({math.prod(out)})")
        self.out_shape = tuple(out)
        self.in_shape_t = self._buffer_shape(self.in_shape, self.be.bsz)
        self.out_shape_t = self._buffer_shape(self.out_shape, self.be.bsz)
        return self

    def _view(self, x: Any, shape: tuple) -> Any:
        try:
            return x.reshape(shape)
        except ValueError:      # not contiguous: a copy
            y = self.be.empty(x.shape, dtype=x.dtype)
            y[:] = x
            return y.reshape(shape)

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        self.outputs = self._view(inputs, self.out_shape_t)
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        self.deltas = self._view(error, self.in_shape_t)
        return self.deltas


class SkipNode(Layer):
    """The identity: the short path of a residual block (MergeSum adds it to the long one)."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.owns_delta = True

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.out_shape = self.in_shape
        return self

    def fprop(self, inputs: Any, inference: bool = False, beta: float = 0.0) -> Any:
        self.inputs = inputs
        self.outputs[:] = inputs if beta == 0 else inputs + beta * self.outputs
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is not None:
            self.deltas[:] = (alpha * error if beta == 0 else
                              alpha * error + beta * self.deltas)
        return self.deltas


class BranchNode(Layer):
    """Sends the previous layer's output down several paths of a Tree; its deltas buffer
    collects their errors. Branch nodes are singletons by name (neon's): every path names the
    same node."""

    instances: dict = {}

    def __new__(cls, name: str | None = None) -> BranchNode:
        if name is not None and name in cls.instances:
            return cls.instances[name]
        return super().__new__(cls)

    def __init__(self, name: str | None = None) -> None:
        if getattr(self, "_made", False):
            return
        super().__init__(name)
        self._made = True
        if name is not None:
            BranchNode.instances[name] = self
        self.owns_output = False

    def configure(self, in_obj: Any) -> Layer:
        if in_obj is None and self.in_shape is not None:
            return self
        super().configure(in_obj)
        self.out_shape = self.in_shape
        return self

    def fprop(self, inputs: Any = None, inference: bool = False) -> Any:
        if inputs is not None:
            self.outputs = inputs
        return self.outputs

    def set_deltas(self, delta_buffers: Any = None) -> None:
        if self.deltas is None:
            if delta_buffers is None:
                self.deltas = self.be.iobuf(self.in_shape)
            else:
                self.deltas = self.be.iobuf(self.in_shape, shared=delta_buffers.buffers[0])
                delta_buffers.buffers.reverse()

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        return self.deltas


class BatchNorm(Layer):
    """Normalises each feature (each channel for image inputs) over the batch (and the image):
    y = gamma * (x - mean) / sqrt(var + eps) + beta, with running averages (rho) for inference."""

    def __init__(self, rho: float = 0.9, eps: float = 1e-3, name: str | None = None) -> None:
        super().__init__(name)
        self.gamma = self.beta = self.gmean = self.gvar = None
        self.owns_delta = True
        self.rho, self.eps = rho, eps
        self.has_params = True
        self.states: list = [[], []]

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.out_shape = self.in_shape
        self.nfm = self.in_shape[0]
        return self

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        super().allocate(shared_outputs)
        be, F = self.be, (self.nfm, 1)
        for key, fill in (("gamma", 1.0), ("beta", 0.0), ("gmean", 0.0), ("gvar", 1.0)):
            if getattr(self, key, None) is None:     # set_params may have given them
                setattr(self, key, be.array(np.full(F, fill), name=f"{self.name}_{key}"))
        self.grad_gamma, self.grad_beta = be.zeros(F), be.zeros(F)
        self.xmean, self.xvar = be.zeros(F), be.zeros(F)
        self._acc_buffers(accumulate_updates, ["grad_gamma", "grad_beta"])

    def _flat(self, x: Any) -> Any:
        return x if len(self.in_shape) == 1 else x.reshape((self.nfm, -1))

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.inputs = inputs
        self.be.compound_fprop_bn(self._flat(inputs), self.xmean, self.xvar, self.gmean, self.gvar,
                                  self.gamma, self.beta, self._flat(self.outputs), self.eps,
                                  self.rho, True, inference=inference)
        return self.outputs

    @Layer.accumulates
    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.deltas is None:   # the first layer: its input gradient is computed, not sent
            self.deltas = self.be.iobuf(self.in_shape)
            self._scratch_deltas = True
        deltas = self.deltas
        self.be.compound_bprop_bn(self._flat(deltas), self.grad_gamma, self.grad_beta,
                                  self._flat(error), self._flat(self.inputs), self.xmean,
                                  self.xvar, self.gamma, self.eps)
        return None if getattr(self, "_scratch_deltas", False) else self.deltas

    def get_params(self) -> list:
        return [((self.gamma, self.grad_gamma), self.states[0]),
                ((self.beta, self.grad_beta), self.states[1])]

    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        d = super().get_description()
        if get_weights:
            d["params"] = {k: getattr(self, k).get() for k in ("gamma", "beta", "gmean", "gvar")}
            if keep_states:
                d["states"] = [[s.get() for s in st] for st in self.states]
        return d

    def load_weights(self, pdict: dict, load_states: bool = True) -> None:
        for k in ("gamma", "beta", "gmean", "gvar"):
            getattr(self, k).set(np.asarray(pdict["params"][k]))
        if load_states and "states" in pdict:
            self.states = [[self.be.array(s) for s in st] for st in pdict["states"]]


# ---------------------------------------------------------------- compound layers
class CompoundLayer(list):
    """A list of layers built from one description (a Sequential flattens it)."""

    def __init__(self, bias: Any = None, batch_norm: bool = False, activation: Any = None,
                 name: str | None = None) -> None:
        super().__init__()
        if batch_norm and bias is not None:
            raise ValueError("batch_norm and bias cannot both be given (BatchNorm has its own shift)")
        self.bias, self.batch_norm, self.activation = bias, batch_norm, activation
        self.base_name = name

    def add_postfilter_layers(self) -> None:
        name = self.base_name
        if self.bias is not None:
            self.append(Bias(init=self.bias, name=f"{name}_bias" if name else None))
        if self.batch_norm:
            self.append(BatchNorm(name=f"{name}_bnorm" if name else None))
        if self.activation is not None:
            self.append(Activation(transform=self.activation,
                                   name=f"{name}_{type(self.activation).__name__}" if name else None))


class Affine(CompoundLayer):
    """[Linear, Bias (when `bias` is an initializer), BatchNorm, Activation]."""

    def __init__(self, nout: int, init: Any = None, bias: Any = None, batch_norm: bool = False,
                 activation: Any = None, name: str | None = None) -> None:
        super().__init__(bias, batch_norm, activation, name)
        self.append(Linear(nout, init=init, bsum=batch_norm, name=name))
        self.add_postfilter_layers()


class Conv(CompoundLayer):
    """[Convolution_bias (a bias without batch norm) or Convolution, BatchNorm, Activation]."""

    def __init__(self, fshape: Any, init: Any = None, strides: Any = None, padding: Any = None,
                 dilation: Any = None, bias: Any = None, batch_norm: bool = False,
                 activation: Any = None, name: str | None = None) -> None:
        super().__init__(bias, batch_norm, activation, name)
        if bias is not None and not batch_norm:     # neon fuses the bias into the conv
            self.append(Convolution_bias(fshape, strides=strides, padding=padding,
                                         dilation=dilation, init=init, name=name, bias=bias))
            self.bias = None
        else:
            self.append(Convolution(fshape, strides=strides, padding=padding, dilation=dilation,
                                    init=init, bsum=batch_norm, name=name))
        self.add_postfilter_layers()


# ---------------------------------------------------------------- the cost layer
class GeneralizedCost(NervanaObject):
    """A cost function applied to the network's outputs: `get_cost` gives the mean cost over the
    batch as a (1, 1) device tensor (not read back), `get_errors` the error to back-propagate."""

    def __init__(self, costfunc: Any, name: str | None = None) -> None:
        super().__init__(name)
        self.costfunc = costfunc
        self.outputs: Any = None
        self.deltas: Any = None
        self.cost: Any = None

    def initialize(self, in_obj: Any) -> None:
        terminal = in_obj.get_terminal() if hasattr(in_obj, "get_terminal") else in_obj
        shape = terminal.out_shape if isinstance(terminal, Layer) else _shape(in_obj)
        # a recurrent output (nout, steps) has one cost a step and sample, as in neon
        self.outputs = self.be.iobuf((1, shape[1]) if len(shape) == 2 else 1)
        self.deltas = self.be.iobuf(shape)
        self.cost = self.be.empty((1, 1))

    def get_cost(self, inputs: Any, targets: Any) -> Any:
        self.outputs[:] = self.costfunc(inputs, targets)
        self.cost[:] = self.be.mean(self.outputs, axis=1)
        return self.cost

    def get_errors(self, inputs: Any, targets: Any) -> Any:
        self.deltas[:] = self.costfunc.bprop(inputs, targets)
        return self.deltas

    def get_description(self) -> dict:
        return {"type": "GeneralizedCost", "costfunc": type(self.costfunc).__name__}


class GeneralizedGANCost(GeneralizedCost):
    """GeneralizedCost for a GAN's GANCost: get_cost takes the discriminator's outputs on data
    and on noise (in the place of inputs and targets) and the cost_type GANCost computes."""

    def get_cost(self, inputs: Any, targets: Any, cost_type: str = "dis") -> Any:
        self.outputs[:] = self.costfunc(inputs, targets, cost_type)
        self.cost[:] = self.be.mean(self.outputs, axis=1)
        return self.cost


class GeneralizedCostMask(GeneralizedCost):
    """GeneralizedCost whose targets come with a mask, `(targets, mask)` of the outputs' shape
    (0 where an output does not count, e.g. past a sequence's end); `weights` scales cost and
    errors. The cost is the cost function's on masked outputs and targets, the error its
    gradient on the unmasked ones times the mask, as neon's."""

    def __init__(self, costfunc: Any, weights: float = 1.0, name: str | None = None) -> None:
        super().__init__(costfunc, name)
        self.weights = weights

    def _split(self, targets_mask: Any, inputs: Any) -> tuple:
        if not isinstance(targets_mask, (tuple, list)) or len(targets_mask) != 2:
            raise TypeError(f"{type(self).__name__}: targets must be a (targets, mask) pair, got "
                            f"{type(targets_mask).__name__}")
        targets, mask = targets_mask
        for what, t in (("targets", targets), ("mask", mask)):
            if tuple(t.shape) != tuple(inputs.shape):
                raise ValueError(f"{type(self).__name__}: {what} of the outputs' shape "
                                 f"{tuple(inputs.shape)} expected, got {tuple(t.shape)}")
        return targets, mask

    def get_cost(self, inputs: Any, targets_mask: Any) -> Any:
        targets, mask = self._split(targets_mask, inputs)
        self.outputs[:] = self.costfunc(inputs * mask, targets * mask)
        self.cost[:] = self.be.mean(self.outputs, axis=1) * self.weights
        return self.cost

    def get_errors(self, inputs: Any, targets_mask: Any) -> Any:
        targets, mask = self._split(targets_mask, inputs)
        self.deltas[:] = self.costfunc.bprop(inputs, targets) * mask * self.weights
        return self.deltas
