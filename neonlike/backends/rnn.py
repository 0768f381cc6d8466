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
