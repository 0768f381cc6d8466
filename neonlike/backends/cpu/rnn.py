"""The CPU's LSTM step ops: one Numba kernel a step (rnn_kernels.py) for neon's standard cell
(Logistic gates, Tanh activation) in float32, in place of the generic version's fused statements
(backends/rnn.py: five a step forward, five backward), whose launches cost more than the
arithmetic at RNN sizes. Other cells and dtypes, and machines without numba, take the generic
version."""
from __future__ import annotations

from typing import Any

import numpy as np

_F32 = np.dtype(np.float32)
_KERNELS: list = []


def _kernels() -> Any:
    if not _KERNELS:
        try:
            from . import rnn_kernels
        except ImportError:          # no numba: the generic op-tree steps
            rnn_kernels = None
        _KERNELS.append(rnn_kernels)
    return _KERNELS[0]


def _standard(activation: Any, gate_activation: Any) -> bool:
    from ...transforms.activation import Logistic, Tanh
    return (type(activation) is Tanh and type(gate_activation) is Logistic
            and not gate_activation.shortcut)


def _roots(tensors: tuple) -> list | None:
    """(root, r0, c0) for each float32 step view: the C-ordered 2-D array over the view's base
    with rows as long as the view's row stride, and the view's first row and column in it; None
    where a view does not lie in one so. Kept on the view (its geometry never changes)."""
    out = []
    for t in tensors:
        found = getattr(t, "_rnn_root", None)
        if found is None:
            found = t._rnn_root = _root(t)
        if found is False:
            return None
        out += found
    return out


def _root(t: Any) -> tuple | bool:
    a = getattr(t, "_tensor", None)
    root = getattr(getattr(t, "_original_base", None), "_tensor", None)
    if not isinstance(a, np.ndarray) or a.dtype != _F32 or a.ndim != 2 or \
            not isinstance(root, np.ndarray) or root.dtype != _F32 or \
            not root.flags.c_contiguous or a.strides[1] != 4 or a.strides[0] % 4 or \
            a.strides[0] <= 0:
        return False
    L = a.strides[0] // 4
    off = (a.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // 4
    r0, c0 = divmod(off, L)
    if root.size % L or c0 + a.shape[1] > L:
        return False
    return (root.reshape(-1, L), r0, c0)


class CPURNNMixin:
    """compound_lstm_fprop_step / compound_lstm_bprop_step as one kernel each."""

    def compound_lstm_fprop_step(self, ifog: Any, c_prev: Any, c: Any, c_act: Any, h: Any,
                                 activation: Any, gate_activation: Any, nout: int) -> None:
        args = _roots((ifog, c_prev, c, c_act, h)) \
            if _standard(activation, gate_activation) else None
        k = _kernels() if args is not None else None
        if k is None:
            return super().compound_lstm_fprop_step(ifog, c_prev, c, c_act, h, activation,
                                                    gate_activation, nout)
        k.lstm_fprop(*args, nout, h.shape[1])

    def compound_lstm_bprop_step(self, dh: Any, c_delta: Any, c_delta_next: Any, f_next: Any,
                                 ifog: Any, c_prev: Any, c_act: Any, ifog_delta: Any,
                                 activation: Any, gate_activation: Any, nout: int) -> None:
        has_next = c_delta_next is not None
        nxt = (c_delta_next, f_next) if has_next else (c_delta, c_delta)
        args = _roots((dh, c_delta) + nxt + (ifog, c_prev, c_act, ifog_delta)) \
            if _standard(activation, gate_activation) else None
        k = _kernels() if args is not None else None
        if k is None:
            return super().compound_lstm_bprop_step(dh, c_delta, c_delta_next, f_next, ifog,
                                                    c_prev, c_act, ifog_delta, activation,
                                                    gate_activation, nout)
        k.lstm_bprop(*args[:12], has_next, *args[12:], nout, dh.shape[1])
