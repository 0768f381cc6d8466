"""neon's recurrent layers (neon.layers.recurrent): Recurrent, LSTM, GRU, and RecurrentSum /
RecurrentMean / RecurrentLast, which collapse the time axis; the bi-directional BiRNN / BiBNRNN /
BiLSTM, BiSum, DeepBiRNN / DeepBiLSTM are in layers/bidirectional.py and importable from here.

Layout (neon's): a sequence of T steps of a minibatch of N is one (features, T * N) buffer, time
major: columns t*N .. t*N + N - 1 hold step t. `get_steps` cuts such a buffer into T (features, N)
views. Parameters are neon's too: one W of shape (nin + nout + 1, ngates * nout) (twice that for
the bi-directional layers) with the views W_input (ngates*nout, nin), W_recur (ngates*nout, nout)
and b (ngates*nout, 1), and dW with the views dW_input, dW_recur, db; gates are stacked in rows in
neon's order (LSTM: input, forget, output, cell candidate; GRU: reset, update, candidate).

Each step is one GEMM (`be.compound_dot` on step views) and a few fused `out[:] = tree` kernels;
the input projections, the weight gradients and the error sent to the previous layer are one GEMM
each over all steps.

State: a layer is stateful as in neon (reset_cells=False) when fprop is given the same input
tensor again (a data iterator's buffer): the first step then starts from the last step of the
previous call. A new input tensor, or reset_cells=True, starts from zeros; `init_state` starts
from the given (nout, N) state. Unlike neon, the starting state's term is in the gradients
(dW_recur gets delta_0 @ h0.T, the LSTM forget gate sees c0), so they are the exact gradients of
the function computed, and bprop does not write into the error it is given.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .layer import Layer, ParameterLayer


def get_steps(x: Any, shape: Sequence[int]) -> list:
    """A (features, steps * batch) array or tensor as a list of `steps` (features, batch) views."""
    steps = int(shape[-1])
    if x is None:
        return [None] * steps
    rows = int(math.prod(shape[:-1]))
    if x.ndim != 2 or x.shape[0] != rows:
        x = x.reshape(rows, -1)
    if x.shape[1] % steps:
        raise ValueError(f"get_steps: {x.shape[1]} columns do not split into {steps} steps "
                         f"(shape {tuple(x.shape)}, expected (features, steps * batch))")
    n = x.shape[1] // steps
    return [x[:, s * n:(s + 1) * n] for s in range(steps)]


def interpret_in_shape(xshape: Any) -> tuple:
    """(features, steps) of a previous layer's output shape: an int or a 1-tuple is one step."""
    if isinstance(xshape, (int, np.integer)):
        return int(xshape), 1
    xshape = tuple(int(d) for d in xshape)
    if len(xshape) == 1:
        return xshape[0], 1
    if len(xshape) == 2:
        return xshape
    return int(math.prod(xshape[:-1])), xshape[-1]


def _rows(x: Any, rows: int, cols: int, who: str) -> Any:
    """x as a (rows, cols) view, with an error naming both shapes where its size differs; None
    where x is a strided view (a dataset's minibatch) that only a copy can reshape."""
    if tuple(x.shape) == (rows, cols):
        return x
    if x.size != rows * cols:
        raise ValueError(f"{who}: expected inputs of {rows} features x {cols} columns (steps * "
                         f"batch), got shape {tuple(x.shape)}")
    try:
        return x.reshape(rows, cols)
    except ValueError:
        return None


def _as_rows(layer: Any, x: Any, rows: int, cols: int) -> Any:
    """_rows, or a copy into the layer's own (rows, cols) buffer where a view cannot be had."""
    view = _rows(x, rows, cols, layer.name)
    if view is not None:
        return view
    buf = getattr(layer, "_x_copy", None)
    if buf is None or tuple(buf.shape) != (rows, cols):
        buf = layer._x_copy = layer.be.empty((rows, cols))
    buf.reshape(x.shape)[:] = x
    return buf


def _in_order(steps: list, reverse: bool) -> list:
    return steps[::-1] if reverse else steps


class _Gates:
    """Row slices of a list of (ngates * nout, N) step views: gate k is rows k*nout..(k+1)*nout."""

    def __init__(self, steps: list, nout: int) -> None:
        self.steps = steps
        self.nout = nout

    def rows(self, first: int, last: int) -> list:
        return [s[first * self.nout:last * self.nout] for s in self.steps]


# ---------------------------------------------------------------------------------------------
# LSTM and GRU step loops, over lists in the order of travel (the same code runs both halves of
# a BiLSTM: the backward half's lists are reversed)
# ---------------------------------------------------------------------------------------------

def _lstm_lists(ifog: list, ifog_d: list | None, nout: int) -> dict:
    g, S = _Gates(ifog, nout), {"ifog": ifog}
    S.update(ifo=g.rows(0, 3), i=g.rows(0, 1), f=g.rows(1, 2), o=g.rows(2, 3), g=g.rows(3, 4))
    if ifog_d is not None:
        d = _Gates(ifog_d, nout)
        S.update(ifog_d=ifog_d, i_d=d.rows(0, 1), f_d=d.rows(1, 2), o_d=d.rows(2, 3),
                 g_d=d.rows(3, 4))
    return S


# ---------------------------------------------------------------------------------------------
# Recurrent
# ---------------------------------------------------------------------------------------------

class Recurrent(ParameterLayer):
    """Basic recurrent layer: h[t] = activation(W_input @ x[t] + W_recur @ h[t-1] + b).

    Arguments (neon's): output_size (int, hidden units), init (Initializer of the input weights,
    and of the recurrent ones unless init_inner is given; biases start at zero), init_inner,
    activation (Transform, required), reset_cells (False: stateful, see the module docstring),
    name.
    """

    nin: Any = None          # set by configure (a plain attribute here, as in neon)
    ngates = 1

    def __init__(self, output_size: int, init: Any, init_inner: Any = None, activation: Any = None,
                 reset_cells: bool = False, name: str | None = None) -> None:
        if activation is None:
            raise ValueError(f"{type(self).__name__}: activation is required (e.g. Tanh())")
        if not isinstance(output_size, (int, np.integer)) or output_size <= 0:
            raise ValueError(f"{type(self).__name__}: output_size must be a positive int, got "
                             f"{output_size!r}")
        super().__init__(init, name)
        self.nout = self.output_size = self.h_nout = int(output_size)
        self.activation = activation
        self.init_inner = init_inner
        self.reset_cells = reset_cells
        self.x: Any = None
        self.xs: Any = None
        self._x_src: Any = None
        self.W_input: Any = None
        self.nsteps = 0
        self.out_deltas_buffer: Any = None       # set_deltas gives it (not for a first layer)
        self.out_deltas_buffer_f = self.out_deltas_buffer_b = None

    def __str__(self) -> str:
        return (f"{type(self).__name__} Layer '{self.name}': {self.nin} inputs, {self.nout} "
                f"outputs, {self.nsteps} steps")

    # ---------------------------------------------------------------- set-up
    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.nin, self.nsteps = interpret_in_shape(self.in_shape)
        self.i_shape = (self.nin, self.nsteps)
        self.out_shape = (self.nout, self.nsteps)
        self.gate_shape = (self.nout * self.ngates, self.nsteps)
        self.weight_shape = (self.nout, self.nin)
        return self

    def allocate(self, shared_outputs: Any = None) -> None:
        Layer.allocate(self, shared_outputs)
        be = self.be
        self.h = get_steps(self.outputs, self.out_shape)
        self.h0 = be.iobuf(self.nout)                    # the state before the first step
        self.h_prev = [self.h0] + self.h[:-1]
        self.final_state_buffer = be.iobuf(self.nout)
        self.h_delta_buffer = be.iobuf(self.out_shape)   # errors of the outputs, then of the
        self.h_delta = get_steps(self.h_delta_buffer, self.out_shape)   # pre-activations
        self.final_hidden_error = be.iobuf(self.nout)
        self.init_params(self.weight_shape)
        self._allocate_cells()

    def _allocate_cells(self) -> None:
        self.h_ff_buffer = self.be.zeros_like(self.outputs)
        self.h_ff = get_steps(self.h_ff_buffer, self.out_shape)

    def set_deltas(self, delta_buffers: Any = None) -> None:
        super().set_deltas(delta_buffers)
        self.out_deltas_buffer = self.deltas
        self.out_delta = get_steps(self.deltas, self.i_shape)

    def init_params(self, shape: tuple) -> None:
        """W (nin + nout + 1, ngates * nout) and dW, with neon's views; filled when new."""
        nout, nin = shape
        g = self.ngates * nout
        wshape = (nin + nout + 1, g)
        fill = self.W is None
        if fill:
            self.W = self.be.empty(wshape, name=f"{self.name}_W")
        elif tuple(self.W.shape) != wshape:
            raise ValueError(f"{self.name}: weights of shape {wshape} expected for {nin} inputs "
                             f"and {nout} outputs, found {tuple(self.W.shape)}")
        if self.dW is None or tuple(self.dW.shape) != wshape:
            self.dW = self.be.zeros_like(self.W, name=f"{self.name}_dW")
        self.W_input = self.W[:nin].reshape((g, nin))
        self.W_recur = self.W[nin:-1].reshape((g, nout))
        self.b = self.W[-1:].reshape((g, 1))
        self.dW_input = self.dW[:nin].reshape((g, nin))
        self.dW_recur = self.dW[nin:-1].reshape((g, nout))
        self.db = self.dW[-1:].reshape((g, 1))
        if fill:
            self._fill([self.W_input], [self.W_recur], [self.b], nout)

    def _fill(self, inputs: list, recurs: list, biases: list, nout: int) -> None:
        """neon's initialisation: each gate's block filled on its own; biases zero."""
        for W, initfunc in [(w, self.init) for w in inputs] + \
                [(w, self.init_inner or self.init) for w in recurs]:
            for k in range(self.ngates):
                initfunc.fill(W[k * nout:(k + 1) * nout])
        for b in biases:
            b[:] = 0.0

    # ---------------------------------------------------------------- running
    def init_buffers(self, inputs: Any) -> bool:
        """Take `inputs` as (nin, steps * batch); True when it is a new input tensor."""
        if self.x is not None and inputs is self._x_src:
            if self.x is getattr(self, "_x_copy", None):
                self.x.reshape(inputs.shape)[:] = inputs      # the same tensor, new values
            return False
        self.x = _as_rows(self, inputs, self.nin, self.nsteps * self.be.bsz)
        self._x_src = inputs
        self.xs = get_steps(self.x, self.i_shape)
        return True

    def _start(self, fresh: bool, init_state: Any, pairs: list) -> None:
        """Set each (start, carried) state pair: init_state (first pair only), zeros, or the
        carried final state of the previous call."""
        for k, (start, carried) in enumerate(pairs):
            if init_state is not None and k == 0:
                if tuple(init_state.shape) != tuple(start.shape):
                    raise ValueError(f"{self.name}: init_state of shape {tuple(start.shape)} "
                                     f"(nout, batch) expected, got {tuple(init_state.shape)}")
                start[:] = init_state
            elif fresh or self.reset_cells:
                start[:] = 0.0
            else:
                start[:] = carried

    def fprop(self, inputs: Any, inference: bool = False, init_state: Any = None) -> Any:
        fresh = self.init_buffers(inputs)
        self._start(fresh, init_state, [(self.h0, self.final_state_buffer)])
        be = self.be
        be.compound_dot(self.W_input, self.x, self.h_ff_buffer)
        be.compound_rnn_unroll_fprop(self.W_recur, self.h_prev, self.h_ff, self.h, self.b,
                                     self.nout, self.nsteps, self.nsteps, self.activation)
        self.final_state_buffer[:] = self.h[-1]
        return self.outputs

    def _take_error(self, deltas: Any) -> None:
        shape = tuple(self.outputs.shape)
        if tuple(deltas.shape) != shape:
            raise ValueError(f"{self.name}: bprop expected errors of shape {shape} (nout, steps "
                             f"* batch), got {tuple(deltas.shape)}")
        self.h_delta_buffer[:] = deltas

    def _input_grads(self, d: Any, W_input: Any, dW_input: Any, db: Any, x: Any, out: Any,
                     alpha: float, beta: float) -> None:
        be = self.be
        be.compound_dot(d, x.T, dW_input)
        self._bias_and_input_errors(d, W_input, db, out, alpha, beta)

    def _bias_and_input_errors(self, d: Any, W_input: Any, db: Any, out: Any, alpha: float,
                               beta: float) -> None:
        be = self.be
        db[:] = be.sum(d, axis=1)
        if out is not None:
            be.compound_rnn_input_grads(W_input, d, out, alpha=alpha, beta=beta)

    def _sequence_grads(self, d: Any, alpha: float, beta: float) -> None:
        """dW_input, dW_recur, db and the input errors of a layer run forward in time, from d,
        the pre-activation errors (rows, steps * bsz) of every step."""
        be = self.be
        be.compound_rnn_weight_grads(d, self.x, self.outputs, self.h0, be.bsz, self.dW_input,
                                     self.dW_recur)
        self._bias_and_input_errors(d, self.W_input, self.db,
                                    self._deltas_2d(self.out_deltas_buffer, self.nin), alpha, beta)

    def _deltas_2d(self, deltas: Any, rows: int) -> Any:
        return None if deltas is None else deltas.reshape(rows, -1)

    def bprop(self, deltas: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        self._take_error(deltas)
        be, d = self.be, self.h_delta_buffer
        self.final_hidden_error[:] = 0.0
        be.compound_rnn_unroll_bprop(self.W_recur.T, [self.final_hidden_error] + self.h_delta[:-1],
                                     self.h_delta, self.h, self.nout, self.nsteps, self.nsteps,
                                     self.activation)
        self._sequence_grads(d, alpha, beta)
        return self.out_deltas_buffer

    def final_state(self) -> Any:
        """The last step's output (sequence-to-sequence models)."""
        return self.final_state_buffer

    def get_final_hidden_error(self) -> Any:
        """The error of the starting state after bprop (sequence-to-sequence models)."""
        return self.final_hidden_error


# ---------------------------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------------------------

class LSTM(Recurrent):
    """Long Short-Term Memory (Hochreiter and Schmidhuber, 1997).

    Gates in neon's row order: input i, forget f, output o (gate_activation), cell candidate g
    (activation); c[t] = f*c[t-1] + i*g, h[t] = o*activation(c[t]). Buffers as neon's:
    ifog_buffer (the activated gates), c_buffer, c_act_buffer, ifog_delta_buffer.
    """

    ngates = 4

    def __init__(self, output_size: int, init: Any, init_inner: Any = None, activation: Any = None,
                 gate_activation: Any = None, reset_cells: bool = False,
                 name: str | None = None) -> None:
        if gate_activation is None:
            raise ValueError(f"{type(self).__name__}: gate_activation is required "
                             f"(e.g. Logistic())")
        super().__init__(output_size, init, init_inner, activation, reset_cells, name)
        self.gate_activation = gate_activation

    def _allocate_cells(self) -> None:
        be = self.be
        self.c_buffer = be.iobuf(self.out_shape)
        self.c = get_steps(self.c_buffer, self.out_shape)
        self.c0 = be.iobuf(self.nout)
        self.final_cell_buffer = be.iobuf(self.nout)
        self.c_prev = [self.c0] + self.c[:-1]
        self.c_act_buffer = be.iobuf(self.out_shape)
        self.c_act = get_steps(self.c_act_buffer, self.out_shape)
        self.ifog_buffer = be.iobuf(self.gate_shape)
        self.ifog_delta_buffer = be.iobuf(self.gate_shape)
        self.c_delta_buffer = be.iobuf(self.out_shape)
        self.final_cell_error = be.iobuf(self.nout)
        S = _lstm_lists(get_steps(self.ifog_buffer, self.gate_shape),
                        get_steps(self.ifog_delta_buffer, self.gate_shape), self.nout)
        S.update(h=self.h, h_prev=self.h_prev, c=self.c, c_prev=self.c_prev, c_act=self.c_act,
                 dh=self.h_delta, c_d=get_steps(self.c_delta_buffer, self.out_shape))
        self._S = S
        for key in ("ifog", "ifo", "i", "f", "o", "g"):
            setattr(self, key, S[key])

    def fprop(self, inputs: Any, inference: bool = False, init_state: Any = None) -> Any:
        fresh = self.init_buffers(inputs)
        self._start(fresh, init_state, [(self.h0, self.final_state_buffer),
                                        (self.c0, self.final_cell_buffer)])
        be = self.be
        be.compound_rnn_input(self.W_input, self.x, self.b, self.ifog_buffer)
        be.compound_lstm_fprop_steps(self.W_recur, self._S, self.activation,
                                     self.gate_activation)
        self.final_state_buffer[:] = self.h[-1]
        self.final_cell_buffer[:] = self.c[-1]
        return self.outputs

    def bprop(self, deltas: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        self._take_error(deltas)
        be, d = self.be, self.ifog_delta_buffer
        be.compound_lstm_bprop_steps(self.W_recur.T, self._S, self.activation,
                                     self.gate_activation, self.final_hidden_error,
                                     self.final_cell_error)
        self._sequence_grads(d, alpha, beta)
        return self.out_deltas_buffer


# ---------------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------------

class GRU(Recurrent):
    """Gated Recurrent Unit (Cho et al., 2014), neon's form: r, z = gate_activation(...),
    hcan = activation(W_input_c x + W_recur_c (r * h_prev) + b_c), h = (1 - z) h_prev + z hcan.
    Buffers as neon's: rzhcan_buffer (activated r, z, hcan), rh_prev_buffer, rzhcan_delta_buffer
    (the pre-activation errors)."""

    ngates = 3

    def __init__(self, output_size: int, init: Any, init_inner: Any = None, activation: Any = None,
                 gate_activation: Any = None, reset_cells: bool = False,
                 name: str | None = None) -> None:
        if gate_activation is None:
            raise ValueError("GRU: gate_activation is required (e.g. Logistic())")
        super().__init__(output_size, init, init_inner, activation, reset_cells, name)
        self.gate_activation = gate_activation

    def init_params(self, shape: tuple) -> None:
        super().init_params(shape)
        n = shape[0]
        self.Wrz_recur, self.Whcan_recur = self.W_recur[:2 * n], self.W_recur[2 * n:]
        self.b_rz, self.b_hcan = self.b[:2 * n], self.b[2 * n:]
        self.dWrz_recur, self.dWhcan_recur = self.dW_recur[:2 * n], self.dW_recur[2 * n:]

    def _allocate_cells(self) -> None:
        be, n = self.be, self.nout
        self.rh_prev_buffer = be.iobuf(self.out_shape)
        self.rh_prev = get_steps(self.rh_prev_buffer, self.out_shape)
        self.wrc_T_dc = be.iobuf(n)
        self.rzhcan_buffer = be.iobuf(self.gate_shape)
        self.rzhcan = get_steps(self.rzhcan_buffer, self.gate_shape)
        self.rzhcan_delta_buffer = be.iobuf(self.gate_shape)
        self.rzhcan_delta = get_steps(self.rzhcan_delta_buffer, self.gate_shape)
        g, d = _Gates(self.rzhcan, n), _Gates(self.rzhcan_delta, n)
        self.rz, self.r, self.z, self.hcan = g.rows(0, 2), g.rows(0, 1), g.rows(1, 2), g.rows(2, 3)
        self.rz_delta, self.r_delta = d.rows(0, 2), d.rows(0, 1)
        self.z_delta, self.hcan_delta = d.rows(1, 2), d.rows(2, 3)
        self._S = dict(h=self.h, h_prev=self.h_prev, rh_prev=self.rh_prev, gates=self.rzhcan,
                       rz=self.rz, r=self.r, z=self.z, hcan=self.hcan, dh=self.h_delta,
                       gates_d=self.rzhcan_delta, rz_d=self.rz_delta, r_d=self.r_delta,
                       z_d=self.z_delta, hcan_d=self.hcan_delta, wrc=self.wrc_T_dc)

    def fprop(self, inputs: Any, inference: bool = False, init_state: Any = None) -> Any:
        fresh = self.init_buffers(inputs)
        self._start(fresh, init_state, [(self.h0, self.final_state_buffer)])
        be = self.be
        be.compound_rnn_input(self.W_input, self.x, self.b, self.rzhcan_buffer)
        be.compound_gru_fprop_steps(self.W_recur, self._S, self.activation, self.gate_activation)
        self.final_state_buffer[:] = self.h[-1]
        return self.outputs

    def bprop(self, deltas: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        self._take_error(deltas)
        be, n = self.be, self.be.bsz
        be.compound_gru_bprop_steps(self.W_recur, self._S, self.activation, self.gate_activation,
                                    self.final_hidden_error)
        d = self.rzhcan_delta_buffer
        be.compound_rnn_recur_grad(self.dWrz_recur, d[:2 * self.nout], self.outputs, self.h0, n)
        be.compound_dot(d[2 * self.nout:], self.rh_prev_buffer.T, self.dWhcan_recur)
        self._input_grads(d, self.W_input, self.dW_input, self.db, self.x,
                          self._deltas_2d(self.out_deltas_buffer, self.nin), alpha, beta)
        return self.out_deltas_buffer


# ---------------------------------------------------------------------------------------------
# Collapsing the time axis
# ---------------------------------------------------------------------------------------------

class RecurrentOutput(Layer):
    """Base of the layers that combine a recurrent layer's outputs over time into (nin, batch);
    no parameters."""

    nin: Any = None

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.owns_output = self.owns_delta = True
        self.x: Any = None
        self.nsteps = 0
        self.deltas_buffer: Any = None
        self.delta_steps: list = []

    def __str__(self) -> str:
        return (f"RecurrentOutput choice {self.name} : ({self.nin}, {self.nsteps}) inputs, "
                f"{self.nin} outputs")

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.nin, self.nsteps = interpret_in_shape(self.in_shape)
        self.out_shape = (self.nin, 1)
        return self

    def set_deltas(self, delta_buffers: Any = None) -> None:
        super().set_deltas(delta_buffers)
        self.deltas_buffer = self.deltas
        self.delta_steps = [] if self.deltas is None else \
            get_steps(self.deltas, (self.nin, self.nsteps))

    def init_buffers(self, inputs: Any) -> None:
        if self.x is None or self.x is not inputs:
            self.x = inputs
            self.xs = get_steps(_as_rows(self, inputs, self.nin, self.nsteps * self.be.bsz),
                                (self.nin, self.nsteps))


class RecurrentSum(RecurrentOutput):
    """Sum of the outputs over time steps."""

    sumscale = 1.0

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.init_buffers(inputs)
        tree = self.xs[0]
        for x in self.xs[1:]:
            tree = tree + x
        self.outputs[:] = tree if self.sumscale == 1.0 else tree * self.sumscale
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        scale = alpha * self.sumscale
        for delta in self.delta_steps:
            delta[:] = scale * error if beta == 0 else scale * error + beta * delta
        return self.deltas_buffer


class RecurrentMean(RecurrentSum):
    """Mean of the outputs over time steps."""

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        self.sumscale = 1.0 / self.nsteps
        return self


class RecurrentLast(RecurrentOutput):
    """The output of the last time step."""

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        self.init_buffers(inputs)
        self.outputs[:] = self.xs[-1]
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if self.delta_steps:
            self.deltas_buffer[:] = 0.0
            self.delta_steps[-1][:] = alpha * error
        return self.deltas_buffer


_BIDIRECTIONAL = ("BiRNN", "BiBNRNN", "BiLSTM", "BiSum", "DeepBiRNN", "DeepBiLSTM")


def __getattr__(name: str) -> Any:
    """neon's module path of the bi-directional layers (they live in layers/bidirectional.py)."""
    if name in _BIDIRECTIONAL:
        from . import bidirectional
        return getattr(bidirectional, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
