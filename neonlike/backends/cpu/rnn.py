"""The CPU's LSTM ops for neon's standard cell (Logistic gates, Tanh activation) in float32:
one Numba kernel a step (rnn_kernels.lstm_fprop / lstm_bprop) in place of the generic version's
fused statements (backends/rnn.py: five a step forward, five backward), whose launches cost more
than the arithmetic at RNN sizes; and a layer's whole sequence as one kernel with its recurrent
GEMMs where the step views lie in their buffers at a fixed column step. The recurrent GEMMs run
as register tiles (tiles.py) where the host has a tile shape (x86-64 with AVX-512 or AVX2 + FMA):
the tasks split the batch where it holds a vector width of columns for each
(rnn_kernels.lstm_fprop_cols / lstm_bprop_cols), else the units (lstm_fprop_tiles /
lstm_bprop_tiles); elsewhere each task calls the GEMM path's sgemm (MKL's or OpenBLAS's:
lstm_fprop_seq / lstm_bprop_seq). Other cells and dtypes, and machines without numba, take the
generic version."""
from __future__ import annotations

import importlib
from typing import Any, Sequence

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


_TILE_KERNELS: dict = {}


def _tile_kernels(name: str) -> Any:
    """The tile-only kernel module `name` of this package (imported once), or None without
    numba (_kernels) or a register tile (_tiles)."""
    if name not in _TILE_KERNELS:
        _TILE_KERNELS[name] = None if _kernels() is None else \
            importlib.import_module(f"{__package__}.{name}")
    return _TILE_KERNELS[name] if _tiles() else None


def _plain_kernels() -> Any:
    return _tile_kernels("plain_rnn_kernels")


def _gru_kernels() -> Any:
    return _tile_kernels("gru_kernels")


def _activation_code(activation: Any) -> tuple | None:
    """(code, slope) of an activation the plain recurrent kernels run (plain_rnn_kernels: 0
    identity, 1 tanh, 2 logistic, 3 rectifier with its slope), None for any other."""
    from ...transforms.activation import Identity, Leaky, Logistic, Rectlin, Tanh
    code = {Identity: 0, Tanh: 1, Logistic: 2, Rectlin: 3, Leaky: 3}.get(type(activation))
    if code is None or (code == 2 and activation.shortcut):
        return None
    return code, np.float32(getattr(activation, "slope", 0.0))


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
    """compound_lstm_fprop_step / compound_lstm_bprop_step as one kernel each, and a layer's
    whole sequence (compound_lstm_fprop_steps / compound_lstm_bprop_steps) as one kernel with
    its recurrent GEMMs."""

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

    # ---------------------------------------------------------------- the plain recurrent layer
    def compound_rnn_unroll_fprop(self, W_recur: Any, h_prev_s: Sequence, h_ff_s: Sequence,
                                  h_s: Sequence, bias: Any, nout: int, num_steps: int,
                                  num_used_steps: int | None, activation: Any,
                                  reverse: bool = False) -> None:
        """Every step as one kernel with its recurrent GEMMs as register tiles
        (plain_rnn_kernels.rnn_fprop_cols, or rnn_fprop_tiles where the batch holds fewer
        vectors than there are tasks: _by_columns), where the steps run over all of
        them in either direction (reverse: the last first, a bidirectional layer's backward
        half; the kernels then walk the step views right to left), h_prev is h0 then h's steps
        in that order, h_ff is another buffer, the activation is one the kernels know
        (_activation_code) and every operand is float32 in step views a root and a column
        step reach (_rnn_plan); else the generic per-step op."""
        way = _backwards if reverse else _as_is
        plan = None if bias is None or h_ff_s is h_s else \
            _rnn_plan(W_recur, False, way(h_prev_s), way(h_s), (way(h_s), way(h_ff_s)),
                      num_steps, num_used_steps, activation)
        b = _plain((bias,)) if plan is not None else None
        if b is None or b[0].shape != (plan[1].shape[0], 1) or _overlaps([plan[2][0][0]], b):
            return super().compound_rnn_unroll_fprop(W_recur, h_prev_s, h_ff_s, h_s, bias, nout,
                                                     num_steps, num_used_steps, activation,
                                                     reverse)
        k, W, (h, ff), h0, T, N, tasks, (code, slope) = plan
        run = k.rnn_fprop_cols if _by_columns(N, tasks) else k.rnn_fprop_tiles
        run(W, h0, *h, *ff, _flat(b[0]), code, slope, W.shape[0], N, T, tasks)

    def compound_rnn_unroll_bprop(self, W_recur: Any, delta_prev_s: Sequence, delta_s: Sequence,
                                  h_s: Sequence, nout: int, num_steps: int,
                                  num_used_steps: int | None, activation: Any,
                                  reverse: bool = True) -> None:
        """Every step as one kernel (plain_rnn_kernels.rnn_bprop_cols / rnn_bprop_tiles), the
        starting state's error included, where fprop's would run: the steps last first
        (reverse=False: first first, a bidirectional layer's backward half), delta_prev the
        starting state's error then delta's steps in that order; W_recur is the transposed
        recurrent matrix (W_recur.T of the layer's)."""
        way = _as_is if reverse else _backwards
        plan = _rnn_plan(W_recur, True, way(delta_prev_s), way(delta_s), (way(delta_s),
                         way(h_s)), num_steps, num_used_steps, activation)
        if plan is None:
            return super().compound_rnn_unroll_bprop(W_recur, delta_prev_s, delta_s, h_s, nout,
                                                     num_steps, num_used_steps, activation,
                                                     reverse)
        k, W, (d, h), h0e, T, N, tasks, (code, slope) = plan
        run = k.rnn_bprop_cols if _by_columns(N, tasks) else k.rnn_bprop_tiles
        run(W, *d, *h, code, slope, W.shape[0], N, T, tasks, h0e)

    # ---------------------------------------------------------------- GRU
    def compound_gru_fprop_steps(self, W_recur: Any, S: dict, activation: Any,
                                 gate_activation: Any) -> None:
        """Every step as one kernel with its recurrent GEMMs as register tiles
        (gru_kernels.gru_fprop_cols), the tasks sharing the batch (one task for a batch under
        two vector widths), for the standard cell over float32 step views a root and a column
        step reach (_gru_plan); else the generic per-step ops."""
        plan = _gru_plan(W_recur, S, ("gates", "h", "rh_prev"), activation, gate_activation)
        if plan is None:
            return super().compound_gru_fprop_steps(W_recur, S, activation, gate_activation)
        k, W, (g, h, rh), h0, T, N, tasks = plan
        k.gru_fprop_cols(W, *g, h0, *h, *rh, W.shape[1], N, T, tasks)

    def compound_gru_bprop_steps(self, W_recur: Any, S: dict, activation: Any,
                                 gate_activation: Any, h0_err: Any) -> None:
        """Every step as one kernel (gru_kernels.gru_bprop_cols), where fprop's would run and
        h0_err and S["wrc"] are C-ordered float32 (n, batch) arrays; else the generic ops."""
        plan = _gru_plan(W_recur, S, ("dh", "gates_d", "gates", "h"), activation,
                         gate_activation)
        ends = _plain((h0_err, S["wrc"])) if plan is not None else None
        if ends is None or any(a.shape != plan[3].shape for a in ends) or \
                _overlaps(ends, [v[0] for v in plan[2]] + [plan[1], plan[3]]) or \
                np.may_share_memory(*ends):
            return super().compound_gru_bprop_steps(W_recur, S, activation, gate_activation,
                                                    h0_err)
        k, W, (d, gd, g, h), h0, T, N, tasks = plan
        h0e, wrc = ends
        h0e.fill(0.0)
        k.gru_bprop_cols(W, *d, *gd, *g, h0, *h, wrc, h0e, W.shape[1], N, T, tasks)

    # ---------------------------------------------------------------- whole products
    def compound_rnn_input(self, W_input: Any, x: Any, bias: Any, out: Any) -> None:
        """As the generic op (W_input @ x + bias), as tiles.gemm with the bias as C's start
        where the tile kernels run and the operands are C-ordered float32 arrays: one pass
        over out where the GEMM path's call and a bias statement made two (256 units, batch
        32, 50 steps: 4.28 against 4.90 ms, order-balanced)."""
        arrays = _plain((W_input, x, bias, out))
        if arrays is None or not _tiles() or arrays[2].shape != (arrays[0].shape[0], 1) or \
                _overlaps(arrays[3:], arrays[:3]):
            return super().compound_rnn_input(W_input, x, bias, out)
        from . import tiles
        W, X, b, C = arrays
        (M, K), N = W.shape, X.shape[1]
        if X.shape[0] != K or C.shape != (M, N):
            return super().compound_rnn_input(W_input, x, bias, out)
        tiles.gemm(M, N, K, _flat(W), 0, 1, K, _flat(X), 0, N, False, _flat(C), 0, N, _flat(b),
                   0.0, False, _tasks(M // tiles.ROWS))

    def compound_rnn_weight_grads(self, delta: Any, x: Any, h: Any, h0: Any, bsz: int,
                                  dW_input: Any, dW_recur: Any) -> None:
        """As the generic op, as two tiles.gemm products of delta (read in place) and x.T, then
        h_prev.T, each packed first as panels (tiles.pack_transposed, h_prev from h0 and h's
        steps but the last): where the tile kernels run and the operands are C-ordered float32
        arrays (256 units, batch 32, 50 steps: 4.12 against the GEMM path's 4.46 ms a
        product, order-balanced, the packing included)."""
        arrays = _plain((delta, x, h, h0, dW_input, dW_recur))
        if arrays is None or not _tiles() or _overlaps(arrays[4:], arrays):
            return super().compound_rnn_weight_grads(delta, x, h, h0, bsz, dW_input, dW_recur)
        D, X, H, H0, dWi, dWr = arrays
        M, K = D.shape
        if X.shape[1] != K or H.shape[1] != K or H0.shape != (H.shape[0], bsz) or \
                dWi.shape != (M, X.shape[0]) or dWr.shape != (M, H.shape[0]) or K % bsz:
            return super().compound_rnn_weight_grads(delta, x, h, h0, bsz, dW_input, dW_recur)
        from . import tiles
        tasks = _tasks(M // tiles.ROWS)
        none = np.empty(0, _F32)
        for X0, X1, split, dW in ((X, X, K, dWi), (H0, H, bsz, dWr)):
            N = X0.shape[0]
            P = self._rnn_scratch(-(-N // tiles.PANEL) * tiles.PANEL * K)
            tiles.pack_transposed(X0, X1, split, K, P, tasks)
            tiles.gemm(M, N, K, _flat(D), 0, 1, K, P, 0, 0, True, _flat(dW), 0, N, none, 0.0,
                       False, tasks)

    def compound_rnn_input_grads(self, W_input: Any, delta: Any, out: Any, alpha: float = 1.0,
                                 beta: float = 0.0) -> None:
        """As the generic op (W_input.T @ delta), as tiles.gemm reading W_input's columns in
        place, the tasks sharing delta's columns, where the tile kernels run, alpha is 1 and
        the operands are C-ordered float32 arrays (256 units, batch 32, 50 steps, after a
        pass: 4.02-4.11 against the GEMM path's 4.33 ms, order-balanced)."""
        arrays = _plain((W_input, delta, out))
        if arrays is None or alpha != 1.0 or not _tiles() or _overlaps(arrays[2:], arrays[:2]):
            return super().compound_rnn_input_grads(W_input, delta, out, alpha, beta)
        from . import tiles
        W, D, C = arrays
        (K, M), N = W.shape, D.shape[1]
        if D.shape[0] != K or C.shape != (M, N):
            return super().compound_rnn_input_grads(W_input, delta, out, alpha, beta)
        tiles.gemm(M, N, K, _flat(W), 0, M, 1, _flat(D), 0, N, False, _flat(C), 0, N,
                   np.empty(0, _F32), float(beta), True, _tasks(-(-N // tiles.PANEL)))

    def _rnn_scratch(self, size: int) -> np.ndarray:
        """A float32 scratch of at least `size` elements, kept on the backend (allocated anew
        each call, a ~1.6 MB buffer cost its page faults: ~0.1 ms)."""
        buf = getattr(self, "_rnn_scratch_buf", None)
        if buf is None or buf.size < size:
            buf = self._rnn_scratch_buf = np.empty(size, _F32)
        return buf[:size]

    # ---------------------------------------------------------------- whole sequences
    def compound_lstm_fprop_steps(self, W_recur: Any, S: dict, activation: Any,
                                  gate_activation: Any) -> None:
        """Every step as one kernel with its recurrent GEMMs (rnn_kernels.lstm_fprop_seq), for
        the standard float32 cell over step views a root and a column step reach; else the
        per-step loop."""
        plan = _sequence_plan(W_recur, S, ("ifog", "h", "c", "c_act"), False) \
            if _standard(activation, gate_activation) else None
        if plan is None:
            return super().compound_lstm_fprop_steps(W_recur, S, activation, gate_activation)
        k, ptrs, W, views, (h0, c0), T, N, tasks, macs = plan
        if ptrs is None:
            run = k.lstm_fprop_cols if _by_columns(N, tasks) else k.lstm_fprop_tiles
            run(W, *views[0], h0, c0, *views[1], *views[2], *views[3], W.shape[1], N, T, tasks)
            return
        k.lstm_fprop_seq(*ptrs, W, *views[0], h0, c0, *views[1], *views[2], *views[3],
                         W.shape[1], N, T, tasks, _max_rows(macs, N, W.shape[1]))

    def compound_lstm_bprop_steps(self, W_recur_T: Any, S: dict, activation: Any,
                                  gate_activation: Any, h0_err: Any, c0_err: Any) -> None:
        """Every step as one kernel (rnn_kernels.lstm_bprop_seq), where fprop's would run, with
        the starting state's errors h0_err and c0_err (in place of a separate GEMM at ~55
        GFLOP/s and a statement, ~0.3-0.45 ms of a 256-unit, 50-step pass)."""
        plan = _sequence_plan(W_recur_T, S, ("dh", "c_d", "ifog", "c", "c_act", "ifog_d"),
                              True) if _standard(activation, gate_activation) else None
        if plan is None:
            return super().compound_lstm_bprop_steps(W_recur_T, S, activation, gate_activation,
                                                     h0_err, c0_err)
        k, ptrs, W, views, (_, c0), T, N, tasks, macs = plan
        dh, cd, ifog, c, ca, ifd = views
        n = W.shape[1]
        starts = [getattr(e, "_tensor", None) for e in (h0_err, c0_err)]
        direct = all(isinstance(a, np.ndarray) and a.dtype == _F32 and a.shape == (n, N) and
                     a.flags.c_contiguous for a in starts)
        if not direct:      # the kernel's start errors go to scratch; the generic ones below
            starts = [np.empty((n, N), _F32) for _ in range(2)]
        if ptrs is None:
            run = k.lstm_bprop_cols if _by_columns(N, tasks) else k.lstm_bprop_tiles
            run(W, *dh, *cd, *ifog, c0, *c, *ca, *ifd, n, N, T, tasks, *starts)
        else:
            k.lstm_bprop_seq(*ptrs, W, *dh, *cd, *ifog, c0, *c, *ca, *ifd, n, N, T, tasks,
                             _max_rows(macs, N, W.shape[0]), *starts)
        if not direct:
            self._lstm_start_errors(W_recur_T, S, h0_err, c0_err)


def _sequence_plan(W_recur: Any, S: dict, keys: tuple, transposed: bool) -> tuple | None:
    """What lstm_fprop_seq / lstm_bprop_seq take, or None where they cannot run: the GEMM
    path's kernel pointers (gemm.kernel_gemm_pointers), None where the tile kernels
    (lstm_*_tiles / lstm_*_cols) run instead (_tiles); W (4n, n) C-ordered float32 (W_recur
    itself, or the array under W_recur.T when `transposed`); per key of S, (root, r0, c0,
    column step) of its step views; the starting state h0, c0 as C-ordered float32 (n, N)
    arrays (h_prev and c_prev must be them, then h's and c's steps); the step count, the
    batch, the task count and the GEMM call bound (gemm.kernel_gemm_call_macs). Checked once
    per S and kept."""
    k = _kernels()
    if k is None or len(S["h"]) == 0:
        return None
    from .gemm import kernel_gemm_pointers
    tiled = _tiles()
    ptrs = None if tiled else kernel_gemm_pointers()
    W = _recurrent_matrix(W_recur, transposed, 4)
    if (ptrs is None and not tiled) or W is None:
        return None
    memo = S.setdefault("_sequence_plans", {})
    found = memo.get(keys)
    if found is None:
        found = memo[keys] = _views_plan(S, keys, W.shape[1]) or False
    if found is False:
        return None
    views, starts, T, N = found
    from .gemm import kernel_gemm_call_macs
    return k, ptrs, W, views, starts, T, N, _tasks(W.shape[1]), kernel_gemm_call_macs()


TILES = True     # the tile kernels where tiles.TILE is set (tests switch it off for the BLAS ones)


def _tiles() -> bool:
    """Whether the sequences run as register tiles (rnn_kernels.lstm_*_tiles or lstm_*_cols,
    whatever the GEMM path): TILES, and a tile shape for this host (tiles.TILE; numba
    installed, as _kernels found)."""
    if not TILES:
        return False
    from . import tiles
    return tiles.TILE is not None


def _by_columns(N: int, tasks: int) -> bool:
    """Whether the tile kernels split the batch (rnn_kernels.lstm_*_cols: a vector width of
    columns or more for each task, each running every step on its own) rather than the units
    (lstm_*_tiles: one parallel region a step). Order-balanced A/B, 256 units, batch 32, 50
    steps, 2 tasks: forward 0.96x, backward 0.87x the unit split's time."""
    from . import tiles
    return N // tiles.WIDTH >= tasks


def _max_rows(macs: int, N: int, K: int) -> int:
    """The most rows a sequence kernel's GEMM call takes (N columns, K deep) to stay within
    `macs` multiply-adds; 0 for no bound (none given, or not even one row fits)."""
    return macs // (N * K) if macs else 0


def _as_is(steps: Sequence) -> Sequence:
    return steps


def _backwards(steps: Sequence) -> list:
    return list(steps)[::-1]


def _rnn_plan(W_recur: Any, transposed: bool, prev_s: Sequence, chain: Sequence, lists: tuple,
              num_steps: int, num_used_steps: int | None, activation: Any) -> tuple | None:
    """What the plain recurrent kernels take (plain_rnn_kernels), or None where they cannot
    run: the kernels; W (n, n) C-ordered float32 (W_recur, or the array under it where
    `transposed`); (root, r0, c0, column step) of each list's step views (each (n, N));
    prev_s's first step, a C-ordered (n, N) float32 array (its later steps must be chain's
    steps before them); the step count, the batch, the task count and (code, slope) of the
    activation. A batch under a quarter vector takes the generic steps. The outputs' memory
    (the first list's, and the start's) must not overlap the others'."""
    k = _plain_kernels()
    T = len(chain)
    if k is None or T == 0 or num_steps != T or num_used_steps not in (None, T) or \
            len(prev_s) != T or any(len(steps) != T for steps in lists):
        return None
    from . import tiles
    if chain[0].shape[1] < tiles.WIDTH // 4:     # (the per-step GEMM calls ran a batch of 3
        return None                              # at 256 units 3.3 against the kernels' 4.3 ms)
    code = _activation_code(activation)
    W = _recurrent_matrix(W_recur, transposed, 1)
    if code is None or W is None:
        return None
    n, N = W.shape[0], chain[0].shape[1]
    start = _chained_start(prev_s, chain, n, N)
    if start is None:
        return None
    views = [_step_views(steps, T, N) for steps in lists]
    if any(v is None for v in views) or \
            any(s.shape != (n, N) for steps in lists for s in steps):
        return None
    roots = [v[0] for v in views]
    if _overlaps([roots[0], start], roots + [start, W]):
        return None
    return k, W, views, start, T, N, _tasks(n), code


def _gru_plan(W_recur: Any, S: dict, keys: tuple, activation: Any,
              gate_activation: Any) -> tuple | None:
    """What the GRU kernels take (gru_kernels), or None where they cannot run: the kernels; W
    (3n, n) C-ordered float32; (root, r0, c0, column step) of each key's step views (no two
    roots, W and h0 overlapping); h0, a C-ordered (n, N) float32 array (h_prev must be it,
    then h's steps); the step count, the batch and the task count: as many tasks as the batch
    holds vector widths of columns (one for a batch under a vector), the GRU kernels sharing
    only the batch. The standard cell only."""
    k = _gru_kernels()
    T = len(S["h"])
    W = _recurrent_matrix(W_recur, False, 3)
    if k is None or T == 0 or not _standard(activation, gate_activation) or W is None:
        return None
    from . import tiles
    n, N = W.shape[1], S["h"][0].shape[1]
    tasks = max(1, min(_tasks(n), N // tiles.WIDTH))
    h0 = _chained_start(S["h_prev"], S["h"], n, N)
    if h0 is None:
        return None
    views = [_step_views(S[key], T, N) for key in keys]
    if any(v is None for v in views):
        return None
    rows = {"gates": 3 * n, "gates_d": 3 * n}
    if any(s.shape != (rows.get(key, n), N) for key in keys for s in S[key]):
        return None
    roots = [v[0] for v in views]
    if _overlaps(roots, roots + [h0, W]):
        return None
    return k, W, views, h0, T, N, tasks


def _recurrent_matrix(W_recur: Any, transposed: bool, gates: int) -> np.ndarray | None:
    """The array under W_recur (under W_recur.T where `transposed`: the layer's matrix) where it
    is C-ordered float32 (gates * n, n), else None."""
    W = getattr(W_recur, "_tensor", None)
    if not isinstance(W, np.ndarray):
        return None
    W = W.T if transposed else W
    if W.dtype != _F32 or W.ndim != 2 or not W.flags.c_contiguous or \
            W.shape[0] != gates * W.shape[1]:
        return None
    return W


def _chained_start(prev_s: Sequence, chain: Sequence, n: int, N: int) -> np.ndarray | None:
    """The array under prev_s's first step, a sequence's starting state, where it is C-ordered
    float32 (n, N) and each later step of prev_s is chain's step before it; else None."""
    a = getattr(prev_s[0], "_tensor", None)
    if not isinstance(a, np.ndarray) or a.dtype != _F32 or a.shape != (n, N) or \
            not a.flags.c_contiguous or \
            any(prev_s[t] is not chain[t - 1] for t in range(1, len(chain))):
        return None
    return a


def _step_views(steps: Sequence, T: int, N: int) -> tuple | None:
    """(root, r0, c0, column step) of T step views of N columns each lying in one root, step t
    at column c0 + t * step (step < 0: views right to left); None where they do not."""
    found = _roots(tuple(steps))
    if found is None or any(s.shape[1] != N for s in steps):
        return None
    root, r0, c0 = found[0], found[1], found[2]
    step = found[5] - c0 if T > 1 else N
    for t in range(T):
        rt, rr, rc = found[3 * t:3 * t + 3]
        if rt.__array_interface__["data"][0] != root.__array_interface__["data"][0] or \
                rt.shape != root.shape or rr != r0 or rc != c0 + t * step:
            return None
    return root, r0, c0, step


def _views_plan(S: dict, keys: tuple, n: int) -> tuple | None:
    T, N = len(S["h"]), S["h"][0].shape[1]
    starts = tuple(_chained_start(S[f"{key}_prev"], S[key], n, N) for key in ("h", "c"))
    views = [_step_views(S[key], T, N) for key in keys]
    if any(a is None for a in starts) or any(v is None for v in views):
        return None
    return views, starts, T, N


def _plain(tensors: tuple) -> list | None:
    """The C-ordered 2-D float32 numpy arrays under these tensors, or None where one is not."""
    out = []
    for t in tensors:
        a = getattr(t, "_tensor", None)
        if not isinstance(a, np.ndarray) or a.dtype != _F32 or a.ndim != 2 or \
                not a.flags.c_contiguous:
            return None
        out.append(a)
    return out


def _overlaps(outs: list, arrays: list) -> bool:
    """Whether an output's memory may overlap another of `arrays` (bounds only): such calls take
    the generic op, whose GEMM path copies through a temp."""
    return any(o is not a and np.may_share_memory(o, a) for o in outs for a in arrays)


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(a.size)


def _tasks(shares: int) -> int:
    """Tasks for work of `shares` parts (a product's row or column panels, a sequence's units):
    numba's threads, at most one a part."""
    import numba
    return max(1, min(numba.get_num_threads(), shares))
