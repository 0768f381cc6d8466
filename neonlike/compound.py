"""Convolution and pooling as op-tree nodes: shape rules and numpy reference semantics.

    y = conv(x, f, padding=(0, 1, 1))           # x (C, D, H, W, N), f (C, T, R, S, K)
    z = pool(y, 'max', window=(1, 2, 2))        # (K, M, P', Q', N)
    out[:] = relu(z)                            # one statement: conv and pool stages, then a
                                                # fused kernel; Autodiff differentiates through

Layouts are neon's, batch innermost: input (C, D, H, W, N), filters (C, T, R, S, K), output
(K, M, P, Q, N). Five ops (rows of `ops.OP_INFO`, kind COMPOUND):

    conv(I, F)            -> O        (K, M, P, Q, N)
    conv_bprop(E, F)      -> dI       (C, D, H, W, N)   the input gradient; attrs add in_dhw
    conv_update(I, E)     -> dF       (C, T, R, S, K)   the filter gradient; attrs add window
    pool(I)               -> O        (C, M, P, Q, N)   'max' or 'avg'
    pool_bprop(I, E)      -> dI       (C, D, H, W, N)   E routed back through pool(I)

They close under differentiation: conv_bprop and conv_update are conv's two partial adjoints,
and each of the three is bilinear with adjoints among the three (Autodiff's rules). The plan runs
a compound node as a stage of its own on materialised operands; a device runs it with its own
kernels (the CPU: neon's compound conv and pool kernels, cpu/compound.py) and the reference
interpreter with the functions below (float64, loops over the window's taps, written for
clarity, not speed). Conventions are the CPU backend's: padding never wins a max (the first
maximum in t, r, s order does; a NaN propagates and wins), and an average divides by the window positions inside the
input. Geometry lives in hashable attrs, so it is part of the structural kernel cache key.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

POOL_OPS = ("max", "avg")


def output_dim(X: int, S: int, pad: int, stride: int, dil: int, what: str) -> int:
    """neon's output size along one axis: (X + 2*pad - (dil*(S-1)+1)) // stride + 1."""
    if min(X, S, stride, dil) < 1 or pad < 0:
        raise ValueError(f"{what}: sizes, strides and dilations must be >= 1 and padding >= 0, "
                         f"got size {X}, window {S}, pad {pad}, stride {stride}, dilation {dil}")
    size = (X + 2 * pad - (dil * (S - 1) + 1)) // stride + 1
    if size < 1:
        raise ValueError(f"{what}: a window of {S} (dilation {dil}) does not fit an input of "
                         f"{X} with padding {pad}: output size {size}; pad more or shrink the "
                         "window")
    return size


# ---------------------------------------------------------------- shape rules (ops.py's infer)

def _triple(value: Any, default: int, what: str, op: str) -> tuple:
    value = default if value is None else value
    if isinstance(value, (int, np.integer)):
        value = (value,) * 3
    value = tuple(value)
    if len(value) != 3 or not all(isinstance(v, (int, np.integer)) for v in value):
        raise ValueError(f"{op}: {what} must be an int or 3 ints (depth, height, width), "
                         f"got {value!r}")
    return tuple(int(v) for v in value)


def _rank5(op: str, name: str, shape: tuple, layout: str) -> None:
    if len(shape) != 5:
        raise ValueError(f"{op}: {name} must be 5-D {layout}, got shape {shape}")


def _conv_geometry(op: str, kw: dict) -> tuple:
    return (_triple(kw.get("padding"), 0, "padding", op) + _triple(kw.get("strides"), 1,
            "strides", op) + _triple(kw.get("dilation"), 1, "dilation", op))


def _out_dhw(op: str, dhw: tuple, trs: tuple, g: tuple) -> tuple:
    return tuple(output_dim(x, s, g[i], g[3 + i], g[6 + i], f"{op} ({axis})")
                 for i, (x, s, axis) in enumerate(zip(dhw, trs, ("depth", "height", "width"))))


def conv_shape(op, sa, sb, kw):
    _rank5(op, "the input", sa, "(C, D, H, W, N)")
    _rank5(op, "the filters", sb, "(C, T, R, S, K)")
    if sa[0] != sb[0]:
        raise ValueError(f"{op}: the input has {sa[0]} channels (shape {sa}), the filters "
                         f"{sb[0]} (shape {sb})")
    g = _conv_geometry(op, kw)
    return (sb[4],) + _out_dhw(op, sa[1:4], sb[1:4], g) + (sa[4],), {"geometry": g}


def conv_bprop_shape(op, sa, sb, kw):
    _rank5(op, "the error", sa, "(K, M, P, Q, N)")
    _rank5(op, "the filters", sb, "(C, T, R, S, K)")
    g, dhw = _conv_geometry(op, kw), _triple(kw.get("in_dhw"), 1, "in_dhw", op)
    if sa[0] != sb[4] or _out_dhw(op, dhw, sb[1:4], g) != sa[1:4]:
        raise ValueError(f"{op}: an error of shape {sa} is not the output of filters {sb} on "
                         f"an input of depth, height, width {dhw}")
    return (sb[0],) + dhw + (sa[4],), {"geometry": g, "in_dhw": dhw}


def conv_update_shape(op, sa, sb, kw):
    _rank5(op, "the input", sa, "(C, D, H, W, N)")
    _rank5(op, "the error", sb, "(K, M, P, Q, N)")
    g, trs = _conv_geometry(op, kw), _triple(kw.get("window"), 1, "window", op)
    if sa[4] != sb[4] or _out_dhw(op, sa[1:4], trs, g) != sb[1:4]:
        raise ValueError(f"{op}: an error of shape {sb} is not the output of a {trs} window "
                         f"on an input of shape {sa}")
    return (sa[0],) + trs + (sb[0],), {"geometry": g, "window": trs}


def _pool_attrs(op: str, kw: dict) -> dict:
    kind = kw.get("pool_op", "max")
    if kind not in POOL_OPS:
        raise ValueError(f"{op}: pool_op must be one of {POOL_OPS}, got {kind!r}")
    window = _triple(kw.get("window"), 1, "window", op)
    pads = _triple(kw.get("padding"), 0, "padding", op)
    strides = _triple(kw.get("strides") or window, 1, "strides", op)
    for p, w in zip(pads, window):
        if p >= w:
            raise ValueError(f"{op}: padding {pads} must be smaller than the window {window} "
                             "so that no window lies wholly in the padding")
    return {"pool_op": kind, "window": window, "geometry": pads + strides + (1, 1, 1)}


def pool_shape(op, sa, sb, kw):
    _rank5(op, "the input", sa, "(C, D, H, W, N)")
    d = _pool_attrs(op, kw)
    return (sa[0],) + _out_dhw(op, sa[1:4], d["window"], d["geometry"]) + (sa[4],), d


def pool_bprop_shape(op, sa, sb, kw):
    shape, d = pool_shape(op, sa, None, kw)
    if tuple(sb) != shape:
        raise ValueError(f"{op}: the error must have the pooled shape {shape}, got {sb}")
    return tuple(sa), d


ACCEPTED = {
    conv_shape: ("padding", "strides", "dilation"),
    conv_bprop_shape: ("padding", "strides", "dilation", "in_dhw"),
    conv_update_shape: ("padding", "strides", "dilation", "window"),
    pool_shape: ("pool_op", "window", "padding", "strides"),
    pool_bprop_shape: ("pool_op", "window", "padding", "strides"),
}


def geometry_kwargs(d: dict) -> dict:
    """A node's attrs as the keyword arguments that build the same geometry again."""
    g = d["geometry"]
    kw = {"padding": g[0:3], "strides": g[3:6]}
    if "pool_op" in d:
        kw.update(pool_op=d["pool_op"], window=d["window"])
    else:
        kw["dilation"] = g[6:9]
    return kw


# ---------------------------------------------------------------- reference semantics (numpy)

def _taps(d: dict, trs: tuple, dhw: tuple, mpq: tuple):
    """Per window tap (t, r, s): its number, the tap and the strided slices of the padded input
    that it reads for every output position."""
    g = d["geometry"]
    for n, tap in enumerate(itertools.product(*(range(k) for k in trs))):
        yield n, tap, (slice(None),) + tuple(
            slice(tap[i] * g[6 + i], tap[i] * g[6 + i] + (mpq[i] - 1) * g[3 + i] + 1, g[3 + i])
            for i in range(3)) + (slice(None),)


def _padded(x: np.ndarray, g: tuple, value: float = 0.0) -> np.ndarray:
    return np.pad(x, [(0, 0)] + [(p, p) for p in g[:3]] + [(0, 0)], constant_values=value)


def _crop(x: np.ndarray, g: tuple) -> np.ndarray:
    return x[(slice(None),) + tuple(slice(p, x.shape[1 + i] - p) for i, p in enumerate(g[:3]))]


def conv_ref(d: dict, I: np.ndarray, F: np.ndarray) -> np.ndarray:
    C, T, R, S, K = F.shape
    out = np.zeros(d["shape"], dtype=np.result_type(I, F))
    xp = _padded(I, d["geometry"])
    for _, (t, r, s), sl in _taps(d, (T, R, S), I.shape[1:4], out.shape[1:4]):
        out += np.einsum("cmpqn,ck->kmpqn", xp[sl], F[:, t, r, s, :])
    return out


def conv_bprop_ref(d: dict, E: np.ndarray, F: np.ndarray) -> np.ndarray:
    C, T, R, S, K = F.shape
    g = d["geometry"]
    grad = _padded(np.zeros(d["shape"], dtype=np.result_type(E, F)), g)
    for _, (t, r, s), sl in _taps(d, (T, R, S), d["shape"][1:4], E.shape[1:4]):
        grad[sl] += np.einsum("kmpqn,ck->cmpqn", E, F[:, t, r, s, :])
    return _crop(grad, g)


def conv_update_ref(d: dict, I: np.ndarray, E: np.ndarray) -> np.ndarray:
    trs = d["window"]
    out = np.zeros(d["shape"], dtype=np.result_type(I, E))
    xp = _padded(I, d["geometry"])
    for _, (t, r, s), sl in _taps(d, trs, I.shape[1:4], E.shape[1:4]):
        out[:, t, r, s, :] = np.einsum("cmpqn,kmpqn->ck", xp[sl], E)
    return out


def _pool_windows(d: dict, I: np.ndarray, mpq: tuple):
    g = d["geometry"]
    fill = -np.inf if d["pool_op"] == "max" else 0.0
    xp = _padded(I.astype(np.result_type(I, np.float32)), g, fill)
    inside = _padded(np.ones((1,) + I.shape[1:4] + (1,)), g)
    return xp, inside, [(n, sl) for n, _, sl in _taps(d, d["window"], I.shape[1:4], mpq)]


def pool_ref(d: dict, I: np.ndarray) -> np.ndarray:
    mpq = d["shape"][1:4]
    xp, inside, taps = _pool_windows(d, I, mpq)
    if d["pool_op"] == "max":
        return np.maximum.reduce([xp[sl] for _, sl in taps])
    count = sum(inside[sl] for _, sl in taps)
    return sum(xp[sl] for _, sl in taps) / count


def pool_bprop_ref(d: dict, I: np.ndarray, E: np.ndarray) -> np.ndarray:
    mpq = E.shape[1:4]
    g = d["geometry"]
    xp, inside, taps = _pool_windows(d, I, mpq)
    grad = np.zeros(xp.shape, dtype=np.result_type(E, np.float32))
    if d["pool_op"] == "max":
        best = np.full(E.shape, -np.inf)
        first = np.zeros(E.shape, dtype=np.int64)
        for n, sl in taps:          # the first maximum in tap order wins, a NaN before all
            better = (xp[sl] > best) | (np.isnan(xp[sl]) & ~np.isnan(best))
            best = np.where(better, xp[sl], best)
            first = np.where(better, n, first)
        for n, sl in taps:
            grad[sl] += np.where(first == n, E, 0.0)
    else:
        count = sum(inside[sl] for _, sl in taps)
        for _, sl in taps:
            grad[sl] += E / count * inside[sl]
    return _crop(grad, g)


# ---------------------------------------------------------------- building nodes

def conv(I: Any, F: Any, padding: Any = 0, strides: Any = 1, dilation: Any = 1) -> Any:
    """conv(I, F): a node of I (C, D, H, W, N) convolved with F (C, T, R, S, K)."""
    from .optree import build
    return build("conv", I, F, padding=padding, strides=strides, dilation=dilation)


def pool(I: Any, pool_op: str = "max", window: Any = 1, padding: Any = 0,
         strides: Any = None) -> Any:
    """pool(I): a node pooling I (C, D, H, W, N) over `window` (strides default to it)."""
    from .optree import build
    return build("pool", I, None, pool_op=pool_op, window=window, padding=padding,
                 strides=strides)
