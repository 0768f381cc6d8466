"""neon's compound RNN ops on the backend: the time-step loops of a plain recurrent layer.

Written once on top of `compound_dot` (the device's GEMM) and `out[:] = tree` (one fused kernel
per step), so every device has them; a device may override them with a persistent kernel.
Step lists are per-step views ((nout, bsz) column blocks of one (nout, steps * bsz) buffer), as
`neonlike.layers.recurrent.get_steps` makes them.
"""
from __future__ import annotations

from typing import Any, Sequence


def _used(steps: Sequence, num_steps: int, num_used_steps: int | None) -> Sequence:
    if num_used_steps is not None and num_used_steps < num_steps:
        return steps[:num_used_steps]
    return steps


class RNNOpsMixin:
    """compound_rnn_unroll_fprop / compound_rnn_unroll_bprop (neon's Backend API)."""

    def compound_rnn_unroll_fprop(self, W_recur: Any, h_prev_s: Sequence, h_ff_s: Sequence,
                                  h_s: Sequence, bias: Any, nout: int, num_steps: int,
                                  num_used_steps: int | None, activation: Any,
                                  reverse: bool = False) -> None:
        """h[t] = activation(W_recur @ h_prev[t] + h_ff[t] + bias) for each used step, in time
        order (reverse=True: last step first, for the backward half of a BiRNN). h_ff may be h
        itself (its step then holds the feed-forward term on entry)."""
        steps = list(zip(_used(h_s, num_steps, num_used_steps),
                         _used(h_prev_s, num_steps, num_used_steps),
                         _used(h_ff_s, num_steps, num_used_steps)))
        for h, h_prev, h_ff in (reversed(steps) if reverse else steps):
            if h_ff is h:
                self.compound_dot(W_recur, h_prev, h, beta=1.0)
                h[:] = activation(h + bias) if bias is not None else activation(h)
            else:
                self.compound_dot(W_recur, h_prev, h)
                tree = h + h_ff if bias is None else h + h_ff + bias
                h[:] = activation(tree)

    def compound_rnn_unroll_bprop(self, W_recur: Any, delta_prev_s: Sequence, delta_s: Sequence,
                                  h_s: Sequence, nout: int, num_steps: int,
                                  num_used_steps: int | None, activation: Any,
                                  reverse: bool = True) -> None:
        """For each used step (last first unless reverse=False): delta[t] = activation.bprop(h[t])
        * delta[t] (the error of the pre-activation), then delta_prev[t] += W_recur @ delta[t]
        (W_recur is the transposed recurrent matrix: the error sent one step back in time)."""
        steps = list(zip(_used(h_s, num_steps, num_used_steps),
                         _used(delta_s, num_steps, num_used_steps),
                         _used(delta_prev_s, num_steps, num_used_steps)))
        for h, delta, delta_prev in (reversed(steps) if reverse else steps):
            delta[:] = activation.bprop(h) * delta
            if delta_prev is not None:
                self.compound_dot(W_recur, delta, delta_prev, beta=1.0)

    def compound_rnn_input(self, W_input: Any, x: Any, bias: Any, out: Any) -> None:
        """out = W_input @ x + bias (bias (rows, 1), broadcast along the columns): a recurrent
        layer's input projections of every step at once. A device may run it as one kernel."""
        self.compound_dot(W_input, x, out)
        out[:] = out + bias

    def compound_rnn_weight_grads(self, delta: Any, x: Any, h: Any, h0: Any, bsz: int,
                                  dW_input: Any, dW_recur: Any) -> None:
        """A recurrent layer's weight gradients over every step, forward in time: dW_input =
        delta @ x.T and dW_recur = sum over steps t of delta[t] @ h_prev[t].T, where h_prev[t]
        is h's step t - 1 and h0 (rows, bsz) for step 0 (delta, x, h: (rows, steps * bsz))."""
        self.compound_dot(delta, x.T, dW_input)
        self.compound_rnn_recur_grad(dW_recur, delta, h, h0, bsz)

    def compound_rnn_recur_grad(self, dW_recur: Any, delta: Any, h: Any, h0: Any, bsz: int,
                                reverse: bool = False) -> None:
        """dW_recur = sum over steps t of delta[t] @ h_prev[t].T, where h_prev[t] is the step
        before t in the direction of travel (h's step t - 1; t + 1 where `reverse`, the
        backward half of a bidirectional layer) and h0 (rows, bsz) for the first step (delta,
        h: (rows, steps * bsz)): two GEMMs over all steps."""
        if reverse:
            first, rest, prev = delta[:, -bsz:], delta[:, :-bsz], h[:, bsz:]
        else:
            first, rest, prev = delta[:, :bsz], delta[:, bsz:], h[:, :-bsz]
        self.compound_dot(first, h0.T, dW_recur)
        if delta.shape[1] > bsz:
            self.compound_dot(rest, prev.T, dW_recur, beta=1.0)

    def compound_rnn_input_grads(self, W_input: Any, delta: Any, out: Any, alpha: float = 1.0,
                                 beta: float = 0.0) -> None:
        """out = alpha * W_input.T @ delta + beta * out: a recurrent layer's errors of its
        inputs over every step at once."""
        self.compound_dot(W_input.T, delta, out, alpha=alpha, beta=beta)

    def compound_lstm_fprop_steps(self, W_recur: Any, S: dict, activation: Any,
                                  gate_activation: Any) -> None:
        """Every step of an LSTM layer's fprop, in the order of S's lists (per-step views, as
        neonlike.layers.recurrent makes them: ifog, c_prev, c, c_act, h_prev, h): ifog[k] +=
        W_recur @ h_prev[k], then compound_lstm_fprop_step. A device may run them as one
        kernel."""
        n = W_recur.shape[1]
        for k in range(len(S["h"])):
            self.compound_dot(W_recur, S["h_prev"][k], S["ifog"][k], beta=1.0)
            self.compound_lstm_fprop_step(S["ifog"][k], S["c_prev"][k], S["c"][k],
                                          S["c_act"][k], S["h"][k], activation,
                                          gate_activation, n)

    def compound_lstm_bprop_steps(self, W_recur_T: Any, S: dict, activation: Any,
                                  gate_activation: Any, h0_err: Any, c0_err: Any) -> None:
        """Every step of an LSTM layer's bprop, the last of S's lists first. S["dh"] holds the
        errors of the outputs on entry; leaves the pre-activation gate errors in S["ifog_d"]
        (S["c_d"]: the cells'), and the errors of the starting state in h0_err, c0_err."""
        n, last = W_recur_T.shape[0], len(S["h"]) - 1
        for k in reversed(range(last + 1)):
            if k < last:
                self.compound_dot(W_recur_T, S["ifog_d"][k + 1], S["dh"][k], beta=1.0)
            nxt = (None, None) if k == last else (S["c_d"][k + 1], S["f"][k + 1])
            self.compound_lstm_bprop_step(S["dh"][k], S["c_d"][k], nxt[0], nxt[1], S["ifog"][k],
                                          S["c_prev"][k], S["c_act"][k], S["ifog_d"][k],
                                          activation, gate_activation, n)
        self._lstm_start_errors(W_recur_T, S, h0_err, c0_err)

    def _lstm_start_errors(self, W_recur_T: Any, S: dict, h0_err: Any, c0_err: Any) -> None:
        self.compound_dot(W_recur_T, S["ifog_d"][0], h0_err)
        c0_err[:] = S["c_d"][0] * S["f"][0]

    def compound_gru_fprop_steps(self, W_recur: Any, S: dict, activation: Any,
                                 gate_activation: Any) -> None:
        """Every step of a GRU layer's fprop (neon's GRU), in the order of S's lists (per-step
        views, as neonlike.layers.recurrent makes them): the gates rz (r and z), r, z, hcan hold
        their input projections (W_input x + b) on entry and their activations on return;
        rh_prev = r * h_prev, h = h_prev + z * (hcan - h_prev). W_recur (3n, n): W_rz, then
        W_hcan. A device may run them as one kernel."""
        n = W_recur.shape[1]
        W_rz, W_hcan = W_recur[:2 * n], W_recur[2 * n:]
        for h, h_prev, rh_prev, rz, r, z, hcan in zip(S["h"], S["h_prev"], S["rh_prev"],
                                                      S["rz"], S["r"], S["z"], S["hcan"]):
            self.compound_dot(W_rz, h_prev, rz, beta=1.0)
            rz[:] = gate_activation(rz)
            rh_prev[:] = r * h_prev
            self.compound_dot(W_hcan, rh_prev, hcan, beta=1.0)
            hcan[:] = activation(hcan)
            h[:] = h_prev + z * (hcan - h_prev)

    def compound_gru_bprop_steps(self, W_recur: Any, S: dict, activation: Any,
                                 gate_activation: Any, h0_err: Any) -> None:
        """Every step of a GRU layer's bprop, the last of S's lists first. S["dh"] holds the
        errors of the outputs on entry (each step's gets the error its next step sends back);
        leaves the gates' pre-activation errors in S["rz_d"] / S["r_d"], S["z_d"],
        S["hcan_d"], and the starting state's error in h0_err. S["wrc"]: an (n, batch)
        scratch (W_hcan.T @ hcan_d)."""
        n = W_recur.shape[1]
        W_rz, W_hcan = W_recur[:2 * n], W_recur[2 * n:]
        dh_prev = [h0_err] + S["dh"][:-1]
        h0_err[:] = 0.0
        wrc = S["wrc"]
        for t in reversed(range(len(S["h"]))):
            dh, z, r, h_prev, hcan = S["dh"][t], S["z"][t], S["r"][t], S["h_prev"][t], \
                S["hcan"][t]
            S["hcan_d"][t][:] = activation.bprop(hcan) * dh * z
            S["z_d"][t][:] = gate_activation.bprop(z) * dh * (hcan - h_prev)
            self.compound_dot(W_hcan.T, S["hcan_d"][t], wrc)
            S["r_d"][t][:] = gate_activation.bprop(r) * wrc * h_prev
            dh_prev[t][:] = dh_prev[t] + dh * (1.0 - z) + r * wrc
            self.compound_dot(W_rz.T, S["rz_d"][t], dh_prev[t], beta=1.0)

    def compound_lstm_fprop_step(self, ifog: Any, c_prev: Any, c: Any, c_act: Any, h: Any,
                                 activation: Any, gate_activation: Any, nout: int) -> None:
        """One LSTM step after its GEMMs: ifog (4 * nout, bsz) holds the pre-activations of the
        gates i, f, o, g on entry and their activations on return; c = f*c_prev + i*g,
        c_act = activation(c), h = o * c_act."""
        n = nout
        ifog[:3 * n] = gate_activation(ifog[:3 * n])
        ifog[3 * n:] = activation(ifog[3 * n:])
        i, f, o, g = ifog[:n], ifog[n:2 * n], ifog[2 * n:3 * n], ifog[3 * n:]
        c[:] = f * c_prev + i * g
        c_act[:] = activation(c)
        h[:] = o * c_act

    def compound_lstm_bprop_step(self, dh: Any, c_delta: Any, c_delta_next: Any, f_next: Any,
                                 ifog: Any, c_prev: Any, c_act: Any, ifog_delta: Any,
                                 activation: Any, gate_activation: Any, nout: int) -> None:
        """One LSTM step of bprop: dh, the error of h; c_delta_next * f_next, the error the next
        step sends to this cell (None for the last step); writes c_delta and the pre-activation
        gate errors ifog_delta (4 * nout, bsz)."""
        n = nout
        i, f, o, g = ifog[:n], ifog[n:2 * n], ifog[2 * n:3 * n], ifog[3 * n:]
        tree = activation.bprop(c_act) * o * dh
        c_delta[:] = tree if c_delta_next is None else tree + c_delta_next * f_next
        ifog_delta[:n] = gate_activation.bprop(i) * c_delta * g
        ifog_delta[n:2 * n] = gate_activation.bprop(f) * c_delta * c_prev
        ifog_delta[2 * n:3 * n] = gate_activation.bprop(o) * dh * c_act
        ifog_delta[3 * n:] = activation.bprop(g) * c_delta * i
