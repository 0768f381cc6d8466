"""neon's bi-directional recurrent layers (neon.layers.recurrent, where neonlike.layers.recurrent
serves them too): BiRNN, BiBNRNN, BiLSTM, BiSum and the stacks DeepBiRNN, DeepBiLSTM.

A bi-directional layer runs a forward and a backward (last step first) recurrence over the same
sequence and stacks their outputs: (2 * nout, steps * batch), the forward half first. Layouts,
parameter views and state follow neonlike.layers.recurrent's module docstring.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .layer import Layer
from .recurrent import (Recurrent, _as_rows, _in_order, _lstm_lists, get_steps,
                        interpret_in_shape)


class BiRNN(Recurrent):
    """Bi-directional recurrent layer: a forward and a backward (last step first) Recurrent side
    by side; outputs (2 * nout, steps * batch), forward half first. split_inputs=True: the
    first half of the input features feeds the forward half, the second the backward one.
    Parameters: W (2 * (nin + nout + 1), ngates * nout) with the views W_input_f/_b,
    W_recur_f/_b, b_f/_b (and the d-prefixed gradients)."""

    def __init__(self, output_size: int, init: Any, init_inner: Any = None, activation: Any = None,
                 reset_cells: bool = False, split_inputs: bool = False, name: str | None = None,
                 parallelism: str = "Data") -> None:
        super().__init__(output_size, init, init_inner, activation, reset_cells, name)
        self.split_inputs = split_inputs
        self.parallelism = parallelism

    def __str__(self) -> str:
        ins = f"({self.nin // 2} inputs) * 2" if self.split_inputs else f"{self.nin} inputs"
        return (f"{type(self).__name__} Layer '{self.name}': {ins}, ({self.nout} outputs) * 2, "
                f"{self.nsteps} steps")

    def configure(self, in_obj: Any) -> Layer:
        Layer.configure(self, in_obj)
        self.nin, self.nsteps = interpret_in_shape(self.in_shape)
        if self.split_inputs and self.nin % 2:
            raise ValueError(f"{self.name}: split_inputs=True needs an even number of input "
                             f"features, got {self.nin}")
        self.out_shape = (2 * self.nout, self.nsteps)
        self.gate_shape = (2 * self.nout * self.ngates, self.nsteps)
        self.o_shape = (self.nout, self.nsteps)
        self.g_shape = (self.nout * self.ngates, self.nsteps)
        self.i_shape = (self.nin // 2 if self.split_inputs else self.nin, self.nsteps)
        self.weight_shape = (self.nout, self.nin)
        return self

    def allocate(self, shared_outputs: Any = None) -> None:
        Layer.allocate(self, shared_outputs)
        be, n = self.be, self.nout
        self.h_buffer = self.outputs
        self.h_buffer_f, self.h_buffer_b = self.outputs[:n], self.outputs[n:]
        self.h_f = get_steps(self.h_buffer_f, self.o_shape)
        self.h_b = get_steps(self.h_buffer_b, self.o_shape)
        self.h0_f, self.h0_b = be.iobuf(n), be.iobuf(n)
        self.h_prev = [self.h0_f] + self.h_f[:-1]
        self.h_next = self.h_b[1:] + [self.h0_b]
        self.final_f, self.final_b = be.iobuf(n), be.iobuf(n)
        self.h_delta_buffer = be.iobuf(self.out_shape)
        self.h_delta_f = get_steps(self.h_delta_buffer[:n], self.o_shape)
        self.h_delta_b = get_steps(self.h_delta_buffer[n:], self.o_shape)
        self.final_hidden_error_f, self.final_hidden_error_b = be.iobuf(n), be.iobuf(n)
        self.final_hidden_error = self.final_hidden_error_f
        self.init_params(self.weight_shape)
        self._allocate_cells()

    def _allocate_cells(self) -> None:
        n = self.nout
        self.h_ff_buffer = self.be.zeros_like(self.outputs)
        self.h_ff_f = get_steps(self.h_ff_buffer[:n], self.o_shape)
        self.h_ff_b = get_steps(self.h_ff_buffer[n:], self.o_shape)

    def set_deltas(self, delta_buffers: Any = None) -> None:
        Layer.set_deltas(self, delta_buffers)
        self.out_deltas_buffer = self.deltas
        nin = self.i_shape[0]
        if self.deltas is None:
            self.out_deltas_buffer_f = self.out_deltas_buffer_b = None
        elif self.split_inputs:
            d = self.deltas.reshape(self.nin, -1)
            self.out_deltas_buffer_f, self.out_deltas_buffer_b = d[:nin], d[nin:]
        else:
            self.out_deltas_buffer_f = self.out_deltas_buffer_b = self.deltas.reshape(nin, -1)

    def init_params(self, shape: tuple) -> None:
        nout, nin = self.nout, self.i_shape[0]
        g = self.ngates * nout
        wshape = (2 * (nin + nout + 1), g)
        fill = self.W is None
        if fill:
            self.W = self.be.empty(wshape, name=f"{self.name}_W")
        elif tuple(self.W.shape) != wshape:
            raise ValueError(f"{self.name}: weights of shape {wshape} expected for {nin} inputs "
                             f"and {nout} outputs a direction, found {tuple(self.W.shape)}")
        if self.dW is None or tuple(self.dW.shape) != wshape:
            self.dW = self.be.zeros_like(self.W, name=f"{self.name}_dW")
        cuts = {"input_f": (0, nin), "input_b": (nin, 2 * nin),
                "recur_f": (2 * nin, 2 * nin + nout),
                "recur_b": (2 * nin + nout, 2 * nin + 2 * nout)}
        for key, (lo, hi) in cuts.items():
            setattr(self, "W_" + key, self.W[lo:hi].reshape((g, hi - lo)))
            setattr(self, "dW_" + key, self.dW[lo:hi].reshape((g, hi - lo)))
        rows = wshape[0]
        self.b_f, self.b_b = (self.W[rows - 2:rows - 1].reshape((g, 1)),
                              self.W[rows - 1:].reshape((g, 1)))
        self.db_f, self.db_b = (self.dW[rows - 2:rows - 1].reshape((g, 1)),
                                self.dW[rows - 1:].reshape((g, 1)))
        if fill:
            self._fill([self.W_input_f, self.W_input_b], [self.W_recur_f, self.W_recur_b],
                       [self.b_f, self.b_b], nout)

    def init_buffers(self, inputs: Any) -> bool:
        fresh = super().init_buffers(inputs)
        if fresh:
            nin = self.i_shape[0]
            self.x_f, self.x_b = (self.x[:nin], self.x[nin:]) if self.split_inputs else \
                (self.x, self.x)
            self.xs_f = get_steps(self.x_f, self.i_shape)
            self.xs_b = get_steps(self.x_b, self.i_shape)
        return fresh

    def _start_bi(self, fresh: bool, pairs: list) -> None:
        for start, carried in pairs:
            if fresh or self.reset_cells:
                start[:] = 0.0
            else:
                start[:] = carried

    def _feed_forward(self, ff_f: Any, ff_b: Any) -> None:
        self.be.compound_dot(self.W_input_f, self.x_f, ff_f)
        self.be.compound_dot(self.W_input_b, self.x_b, ff_b)

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        fresh = self.init_buffers(inputs)
        self._start_bi(fresh, [(self.h0_f, self.final_f), (self.h0_b, self.final_b)])
        n = self.nout
        self._feed_forward(self.h_ff_buffer[:n], self.h_ff_buffer[n:])
        self._unroll()
        self.final_f[:] = self.h_f[-1]
        self.final_b[:] = self.h_b[0]
        return self.h_buffer

    def _unroll(self) -> None:
        be, T = self.be, self.nsteps
        be.compound_rnn_unroll_fprop(self.W_recur_f, self.h_prev, self.h_ff_f, self.h_f,
                                     self.b_f, self.nout, T, T, self.activation, False)
        be.compound_rnn_unroll_fprop(self.W_recur_b, self.h_next, self.h_ff_b, self.h_b,
                                     self.b_b, self.nout, T, T, self.activation, True)

    def _unroll_bprop(self) -> None:
        be, T = self.be, self.nsteps
        self.final_hidden_error_f[:] = 0.0
        self.final_hidden_error_b[:] = 0.0
        be.compound_rnn_unroll_bprop(self.W_recur_f.T,
                                     [self.final_hidden_error_f] + self.h_delta_f[:-1],
                                     self.h_delta_f, self.h_f, self.nout, T, T,
                                     self.activation, True)
        be.compound_rnn_unroll_bprop(self.W_recur_b.T,
                                     self.h_delta_b[1:] + [self.final_hidden_error_b],
                                     self.h_delta_b, self.h_b, self.nout, T, T,
                                     self.activation, False)

    def _bi_grads(self, d_f: Any, d_b: Any, alpha: float) -> None:
        be, n = self.be, self.be.bsz
        be.compound_rnn_recur_grad(self.dW_recur_f, d_f, self.h_buffer_f, self.h0_f, n)
        be.compound_rnn_recur_grad(self.dW_recur_b, d_b, self.h_buffer_b, self.h0_b, n,
                                   reverse=True)
        self._input_grads(d_f, self.W_input_f, self.dW_input_f, self.db_f, self.x_f,
                          self.out_deltas_buffer_f, alpha, 0.0)
        self._input_grads(d_b, self.W_input_b, self.dW_input_b, self.db_b, self.x_b,
                          self.out_deltas_buffer_b, alpha, 0.0 if self.split_inputs else 1.0)

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 1.0) -> Any:
        """Errors of both halves; the deltas buffer is overwritten (the two halves' errors of
        shared inputs are summed), as neon does whatever beta is."""
        self._take_error(error)
        self._unroll_bprop()
        n = self.nout
        self._bi_grads(self.h_delta_buffer[:n], self.h_delta_buffer[n:], alpha)
        return self.out_deltas_buffer


class BiSum(Layer):
    """Sums the two halves (forward, backward) of a bi-directional layer's output."""

    nin: Any = None

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.owns_output = self.owns_delta = True
        self.x: Any = None

    def __str__(self) -> str:
        return "Sum layer to combine the forward and backward passes for BiRNN"

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.nin, self.nsteps = interpret_in_shape(self.in_shape)
        if self.nin % 2:
            raise ValueError(f"{self.name}: needs an even number of input features (two "
                             f"halves), got {self.nin}")
        self.out_shape = (self.nin // 2, self.nsteps)
        return self

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.x = _as_rows(self, inputs, self.nin, self.nsteps * self.be.bsz)
        half = self.nin // 2
        self.outputs[:] = self.x[:half] + self.x[half:]
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        half = self.nin // 2
        d = self.deltas.reshape(self.nin, -1)
        d[:half] = error
        d[half:] = error
        return self.deltas


class BiBNRNN(BiRNN):
    """BiRNN with sequence-wise batch normalisation of the input projections (Laurent et al.,
    2015, arXiv:1510.01378): gamma, beta and the running gmean, gvar per feature."""

    def __init__(self, output_size: int, init: Any, init_inner: Any = None, activation: Any = None,
                 reset_cells: bool = False, split_inputs: bool = False,
                 name: str | None = None) -> None:
        super().__init__(output_size, init, init_inner, activation, reset_cells, split_inputs,
                         name)
        self.rho, self.eps = 0.9, 1e-3
        self.beta = self.gamma = self.gmean = self.gvar = None

    def init_params(self, shape: tuple) -> None:
        super().init_params(shape)
        be, nf = self.be, self.out_shape[0]
        dt = np.float64 if np.dtype(be.default_dtype) == np.float64 else np.float32
        if self.gmean is None:
            self.gmean, self.gvar = be.zeros((nf, 1), dtype=dt), be.zeros((nf, 1), dtype=dt)
        if self.beta is None:
            self.beta, self.gamma = be.zeros((nf, 1), dtype=dt), be.ones((nf, 1), dtype=dt)
        self.xmean, self.xvar = be.empty((nf, 1), dtype=dt), be.empty((nf, 1), dtype=dt)
        self.inf_params = [self.gmean, self.gvar]
        self.params = [self.beta, self.gamma]
        self.grad_params = [be.zeros_like(p) for p in self.params]
        self.grad_beta, self.grad_gamma = self.grad_params
        self.allparams = self.params + self.inf_params
        self.states_bn: list = [[] for _ in self.grad_params]
        self.plist = [((self.W, self.dW), self.states)] + \
            [((p, g), s) for p, g, s in zip(self.params, self.grad_params, self.states_bn)]

    def get_params(self) -> list:
        return self.plist

    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        d = super().get_description(get_weights, keep_states)
        if get_weights:
            for key in ("gmean", "gvar", "beta", "gamma"):
                d["params"][key] = getattr(self, key).get()
        return d

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        fresh = self.init_buffers(inputs)
        self._start_bi(fresh, [(self.h0_f, self.final_f), (self.h0_b, self.final_b)])
        n = self.nout
        self._feed_forward(self.h_ff_buffer[:n], self.h_ff_buffer[n:])
        self._fprop_bn(self.h_ff_buffer, inference)
        self._unroll()
        self.final_f[:] = self.h_f[-1]
        self.final_b[:] = self.h_b[0]
        return self.h_buffer

    def _fprop_bn(self, inputs: Any, inference: bool = False) -> Any:
        be = self.be
        if inference:
            inputs[:] = (inputs - self.gmean) / be.sqrt(self.gvar + self.eps) * self.gamma \
                + self.beta
            return inputs
        self.xmean[:] = be.mean(inputs, axis=1)
        self.xvar[:] = be.var(inputs, axis=1)
        inputs[:] = (inputs - self.xmean) / be.sqrt(self.xvar + self.eps) * self.gamma + self.beta
        self.gmean[:] = self.gmean * self.rho + (1.0 - self.rho) * self.xmean
        self.gvar[:] = self.gvar * self.rho + (1.0 - self.rho) * self.xvar
        return inputs

    def _bprop_bn(self, error: Any, input_post_bn: Any) -> Any:
        be = self.be
        hhat = (input_post_bn - self.beta) / self.gamma
        self.grad_gamma[:] = be.sum(hhat * error, axis=1)
        self.grad_beta[:] = be.sum(error, axis=1)
        htmp = (hhat * self.grad_gamma + self.grad_beta) / float(input_post_bn.shape[1])
        error[:] = self.gamma * (error - htmp) / be.sqrt(self.xvar + self.eps)
        return error

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 1.0) -> Any:
        self._take_error(error)
        self._unroll_bprop()
        be, n, bsz = self.be, self.nout, self.be.bsz
        d = self.h_delta_buffer
        be.compound_rnn_recur_grad(self.dW_recur_f, d[:n], self.h_buffer_f, self.h0_f, bsz)
        be.compound_rnn_recur_grad(self.dW_recur_b, d[n:], self.h_buffer_b, self.h0_b, bsz,
                                   reverse=True)
        self.db_f[:] = be.sum(d[:n], axis=1)      # the bias is added after the normalisation
        self.db_b[:] = be.sum(d[n:], axis=1)
        self._bprop_bn(d, self.h_ff_buffer)
        for half, W, dW, out, b in ((d[:n], self.W_input_f, self.dW_input_f,
                                     self.out_deltas_buffer_f, 0.0),
                                    (d[n:], self.W_input_b, self.dW_input_b,
                                     self.out_deltas_buffer_b,
                                     0.0 if self.split_inputs else 1.0)):
            x = self.x_f if W is self.W_input_f else self.x_b
            be.compound_dot(half, x.T, dW)
            if out is not None:
                be.compound_dot(W.T, half, out, alpha=alpha, beta=b)
        return self.out_deltas_buffer


class BiLSTM(BiRNN):
    """Bi-directional LSTM: a forward and a backward LSTM side by side (see LSTM and BiRNN)."""

    ngates = 4

    def __init__(self, output_size: int, init: Any, init_inner: Any = None, activation: Any = None,
                 gate_activation: Any = None, reset_cells: bool = False,
                 split_inputs: bool = False, name: str | None = None) -> None:
        if gate_activation is None:
            raise ValueError("BiLSTM: gate_activation is required (e.g. Logistic())")
        super().__init__(output_size, init, init_inner, activation, reset_cells, split_inputs,
                         name)
        self.gate_activation = gate_activation

    def _allocate_cells(self) -> None:
        be, n, g = self.be, self.nout, self.ngates * self.nout
        self.c_buffer = be.iobuf(self.out_shape)
        self.c_act_buffer = be.iobuf(self.out_shape)
        self.ifog_buffer = be.iobuf(self.gate_shape)
        self.ifog_delta_buffer = be.iobuf(self.gate_shape)
        self.c_delta_buffer = be.iobuf(self.out_shape)
        self.c0_f, self.c0_b = be.iobuf(n), be.iobuf(n)
        self.final_cf, self.final_cb = be.iobuf(n), be.iobuf(n)
        self.final_cell_error_f, self.final_cell_error_b = be.iobuf(n), be.iobuf(n)
        self.ifog_buffer_f, self.ifog_buffer_b = self.ifog_buffer[:g], self.ifog_buffer[g:]
        self.c_f = get_steps(self.c_buffer[:n], self.o_shape)
        self.c_b = get_steps(self.c_buffer[n:], self.o_shape)
        self._S = []
        for k, reverse in ((0, False), (1, True)):
            rows = slice(k * g, (k + 1) * g)
            nrows = slice(k * n, (k + 1) * n)
            S = _lstm_lists(_in_order(get_steps(self.ifog_buffer[rows], self.g_shape), reverse),
                            _in_order(get_steps(self.ifog_delta_buffer[rows], self.g_shape),
                                      reverse), n)
            h = _in_order(get_steps(self.outputs[nrows], self.o_shape), reverse)
            c = _in_order(get_steps(self.c_buffer[nrows], self.o_shape), reverse)
            h0, c0 = (self.h0_b, self.c0_b) if reverse else (self.h0_f, self.c0_f)
            S.update(h=h, h_prev=[h0] + h[:-1], c=c, c_prev=[c0] + c[:-1],
                     c_act=_in_order(get_steps(self.c_act_buffer[nrows], self.o_shape), reverse),
                     dh=_in_order(get_steps(self.h_delta_buffer[nrows], self.o_shape), reverse),
                     c_d=_in_order(get_steps(self.c_delta_buffer[nrows], self.o_shape), reverse))
            self._S.append(S)

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        fresh = self.init_buffers(inputs)
        self._start_bi(fresh, [(self.h0_f, self.final_f), (self.h0_b, self.final_b),
                               (self.c0_f, self.final_cf), (self.c0_b, self.final_cb)])
        be = self.be
        self._feed_forward(self.ifog_buffer_f, self.ifog_buffer_b)
        self.ifog_buffer_f[:] = self.ifog_buffer_f + self.b_f
        self.ifog_buffer_b[:] = self.ifog_buffer_b + self.b_b
        for W, S in ((self.W_recur_f, self._S[0]), (self.W_recur_b, self._S[1])):
            be.compound_lstm_fprop_steps(W, S, self.activation, self.gate_activation)
        self.final_f[:] = self.h_f[-1]
        self.final_b[:] = self.h_b[0]
        self.final_cf[:] = self.c_f[-1]
        self.final_cb[:] = self.c_b[0]
        return self.h_buffer

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        self._take_error(error)
        be, g = self.be, self.ngates * self.nout
        be.compound_lstm_bprop_steps(self.W_recur_f.T, self._S[0], self.activation,
                                     self.gate_activation, self.final_hidden_error_f,
                                     self.final_cell_error_f)
        be.compound_lstm_bprop_steps(self.W_recur_b.T, self._S[1], self.activation,
                                     self.gate_activation, self.final_hidden_error_b,
                                     self.final_cell_error_b)
        self._bi_grads(self.ifog_delta_buffer[:g], self.ifog_delta_buffer[g:], alpha)
        return self.out_deltas_buffer


class DeepBiRNN(list):
    """A stack of `depth` BiRNN layers (BiBNRNN with batch_norm=True), each after the first
    taking split inputs, or BiSum layers between them with bi_sum=True."""

    def __init__(self, nout: int, init: Any, init_inner: Any = None, activation: Any = None,
                 reset_cells: bool = False, depth: int = 1, batch_norm: bool = False,
                 bi_sum: bool = False) -> None:
        super().__init__()
        if depth <= 0:
            raise ValueError(f"DeepBiRNN: depth must be >= 1, got {depth}")
        cls = BiBNRNN if batch_norm else BiRNN
        for k in range(depth):
            self.append(cls(nout, init, init_inner, activation, reset_cells,
                            split_inputs=(k > 0 and not bi_sum)))
            if bi_sum:
                self.append(BiSum())


class DeepBiLSTM(list):
    """A stack of `depth` BiLSTM layers, each after the first taking split inputs."""

    def __init__(self, nout: int, init: Any, init_inner: Any = None, activation: Any = None,
                 gate_activation: Any = None, reset_cells: bool = False, depth: int = 1) -> None:
        super().__init__()
        if depth <= 0:
            raise ValueError(f"DeepBiLSTM: depth must be >= 1, got {depth}")
        for k in range(depth):
            self.append(BiLSTM(nout, init, init_inner, activation, gate_activation, reset_cells,
                               split_inputs=k > 0))
