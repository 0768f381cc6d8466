"""neonlike.backends.cpu.gemm against numpy float64: on the MKL path, the numpy path, and 'auto'
(the faster of the two per shape class, timed once) with each outcome."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neonlike.backends.cpu import gemm as G
from neonlike.backends.cpu import openblas as OB

DTYPES = [np.float32, np.float64, np.float16]
RTOL = {np.float64: 1e-12, np.float32: 1e-5, np.float16: 1e-3}


@pytest.fixture(params=["mkl", "openblas", "numpy", "auto-mkl", "auto-openblas", "auto-numpy"])
def path(request, monkeypatch):
    """Run the test on the MKL path (skipped where MKL does not load), the OpenBLAS path
    (skipped without scipy-openblas32), the numpy path, and through 'auto' with every size timed
    (no small-GEMM shortcut) and the timing's verdict fixed to each: what 'auto' runs must not
    depend on which path won."""
    name, _, verdict = request.param.partition("-")
    if "openblas" in request.param and not OB.available():
        pytest.skip("scipy-openblas32 is not installed")
    try:
        previous = G.set_backend(name)
    except RuntimeError as e:
        pytest.skip(f"MKL unavailable here: {e}")
    if G.backend_name() != name:
        G.set_backend(previous)
        pytest.skip("MKL unavailable here: 'auto' runs numpy")
    if verdict:
        monkeypatch.setattr(G, "SMALL_MACS", 0)
        monkeypatch.setattr(G, "_time_paths", lambda run_mkl, run_numpy: verdict)
    G.clear_choices()
    yield request.param
    G.clear_choices()
    G.set_backend(previous)


@pytest.fixture(autouse=True)
def no_mkl_parameter_errors(capfd):
    """MKL reports a rejected argument on stdout (and leaves C alone): fail on any."""
    yield
    out, err = capfd.readouterr()
    assert "MKL ERROR" not in out + err, out + err


@pytest.fixture
def rng():
    return np.random.default_rng(20240607)


def operand(rng, shape, dtype, kind):
    """A (rows, cols) array of `dtype` laid out as `kind` says."""
    r, c = shape
    if kind == "c":
        return rng.standard_normal((r, c)).astype(dtype)
    if kind == "t":  # transposed view of a C array
        return rng.standard_normal((c, r)).astype(dtype).T
    if kind == "f":
        return np.asfortranarray(rng.standard_normal((r, c)).astype(dtype))
    if kind == "sub":  # unit last stride, leading dimension > cols
        return rng.standard_normal((r + 2, c + 3)).astype(dtype)[1:r + 1, 2:c + 2]
    if kind == "subt":  # transposed view of a column block
        return rng.standard_normal((c + 1, r + 4)).astype(dtype)[1:, 3:r + 3].T
    if kind == "step":  # steps in both axes: must be copied
        return rng.standard_normal((2 * r, 3 * c)).astype(dtype)[::2, ::3]
    if kind == "neg":  # negative stride: must be copied
        return rng.standard_normal((r, c)).astype(dtype)[::-1]
    raise ValueError(kind)


LAYOUTS = ["c", "t", "f", "sub", "subt", "step", "neg"]


def reference(A, B, C0, alpha, beta):
    out = alpha * (A.astype(np.float64) @ B.astype(np.float64))
    if beta != 0:
        out = out + beta * C0.astype(np.float64)
    return out


def assert_gemm_close(got, A, B, C0, alpha, beta, dtype):
    """|got - ref| <= rtol * (|alpha| |A| @ |B| + |beta| |C0|), float64 reference."""
    want = reference(A, B, C0, alpha, beta)
    scale = abs(alpha) * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    if beta != 0:
        scale = scale + abs(beta) * np.abs(C0.astype(np.float64))
    rtol = RTOL[np.dtype(dtype).type]
    tiny = np.finfo(dtype).tiny
    err = np.abs(got.astype(np.float64) - want)
    bad = err > rtol * scale + tiny
    assert not bad.any(), (f"max err {err.max()} vs allowed {(rtol * scale).max()} at "
                           f"{np.argwhere(bad)[:5].tolist()}")


# ---------------------------------------------------------------------------------------------
# gemm
# ---------------------------------------------------------------------------------------------

SHAPES = [(1, 1, 1), (1, 7, 5), (5, 7, 1), (1, 1, 9), (9, 1, 1), (1, 13, 1), (7, 1, 6),
          (17, 33, 9), (64, 64, 64), (3, 130, 2), (33, 5, 70)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,K,N", SHAPES)
def test_gemm_shapes(path, rng, dtype, M, K, N):
    A = operand(rng, (M, K), dtype, "c")
    B = operand(rng, (K, N), dtype, "c")
    C = np.full((M, N), np.nan, dtype)
    out = G.gemm(A, B, C)
    assert out is C
    assert_gemm_close(C, A, B, C, 1.0, 0.0, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ka", LAYOUTS)
@pytest.mark.parametrize("kb", LAYOUTS)
def test_gemm_layouts(path, rng, dtype, ka, kb):
    for M, K, N in [(6, 5, 4), (1, 5, 4), (6, 5, 1), (6, 1, 4)]:
        A = operand(rng, (M, K), dtype, ka)
        B = operand(rng, (K, N), dtype, kb)
        A0, B0 = A.copy(), B.copy()
        C = rng.standard_normal((M, N)).astype(dtype)
        C0 = C.copy()
        G.gemm(A, B, C, 1.5, 0.5)
        assert_gemm_close(C, A, B, C0, 1.5, 0.5, dtype)
        np.testing.assert_array_equal(A, A0)  # inputs untouched
        np.testing.assert_array_equal(B, B0)


OUT_VIEWS = {  # C as a view into a bigger array (M, N = 7, 5)
    "sub": lambda x: x[1:8, 2:7],
    "subt": lambda x: x.T[2:9, 1:6],
    "step": lambda x: x[::3, ::3][:7, :5],
    "neg": lambda x: x[6::-1, :5],
    "t": lambda x: x[:5, :7].T,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kc", ["c", "f"] + list(OUT_VIEWS))
def test_gemm_output_layouts(path, rng, dtype, kc):
    M, K, N = 7, 6, 5
    A = operand(rng, (M, K), dtype, "c")
    B = operand(rng, (K, N), dtype, "t")
    big = rng.standard_normal((3 * M + 2, 3 * N + 4)).astype(dtype)
    if kc == "c":
        C = big[:M, :N].copy()
    elif kc == "f":
        C = np.asfortranarray(big[:M, :N])
    else:
        C = OUT_VIEWS[kc](big)
    assert C.shape == (M, N)
    big0, C0 = big.copy(), C.copy()
    G.gemm(A, B, C, -0.5, 2.0)
    assert_gemm_close(C, A, B, C0, -0.5, 2.0, dtype)
    outside = np.ones(big.shape, bool)
    if kc in OUT_VIEWS:
        OUT_VIEWS[kc](outside)[...] = False
    np.testing.assert_array_equal(big[outside], big0[outside])  # nothing else written


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (2.5, 0.0), (1.0, 1.0), (-0.5, 2.0),
                                        (1.5, -1.0), (0.0, 3.0), (0.0, 0.0), (1.0, 0.25)])
def test_gemm_alpha_beta(path, rng, dtype, alpha, beta):
    M, K, N = 9, 11, 8
    A = operand(rng, (M, K), dtype, "c")
    B = operand(rng, (K, N), dtype, "f")
    C = rng.standard_normal((M, N)).astype(dtype)
    C0 = C.copy()
    G.gemm(A, B, C, alpha, beta)
    assert_gemm_close(C, A, B, C0, alpha, beta, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_beta_zero_ignores_c_and_alpha_zero_ignores_ab(path, rng, dtype):
    A = operand(rng, (4, 3), dtype, "c")
    B = operand(rng, (3, 5), dtype, "c")
    C = np.full((4, 5), np.nan, dtype)
    G.gemm(A, B, C, 2.0, 0.0)
    assert np.isfinite(C).all()
    assert_gemm_close(C, A, B, C, 2.0, 0.0, dtype)
    An = np.full((4, 3), np.nan, dtype)
    C = rng.standard_normal((4, 5)).astype(dtype)
    C0 = C.copy()
    G.gemm(An, B, C, 0.0, 2.0)
    np.testing.assert_array_equal(C, (2.0 * C0.astype(np.float64)).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,K,N", [(0, 3, 4), (3, 0, 4), (3, 4, 0), (0, 0, 0)])
@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_gemm_zero_size(path, rng, dtype, M, K, N, beta):
    A = operand(rng, (M, K), dtype, "c")
    B = operand(rng, (K, N), dtype, "c")
    C = rng.standard_normal((M, N)).astype(dtype)
    C0 = C.copy()
    assert G.gemm(A, B, C, 1.0, beta) is C
    np.testing.assert_array_equal(C, (beta * C0.astype(np.float64)).astype(dtype))


def unaligned(x):
    """A writable copy of x whose data address is not a multiple of its itemsize."""
    buf = bytearray(x.nbytes + 1)
    out = np.ndarray(x.shape, x.dtype, buffer=buf, offset=1)
    out[...] = x
    assert not out.flags.aligned
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_unaligned(path, rng, dtype):
    A = unaligned(operand(rng, (5, 4), dtype, "c"))
    B = unaligned(operand(rng, (4, 3), dtype, "c"))
    C = unaligned(rng.standard_normal((5, 3)).astype(dtype))
    C0 = C.copy()
    G.gemm(A, B, C, 1.0, 1.0)
    assert_gemm_close(C, A, B, C0, 1.0, 1.0, dtype)
    Ab = unaligned(rng.standard_normal((2, 5, 4)).astype(dtype))
    Cb = unaligned(rng.standard_normal((2, 5, 3)).astype(dtype))
    Cb0 = Cb.copy()
    G.batched_gemm(Ab, unaligned(B), Cb, 2.0, 0.5)
    assert_batched_close(Cb, Ab, B, Cb0, 2.0, 0.5, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_c_aliasing_an_input(path, rng, dtype):
    A = rng.standard_normal((6, 6)).astype(dtype)
    B = rng.standard_normal((6, 6)).astype(dtype)
    A0, B0 = A.copy(), B.copy()
    G.gemm(A, B, A, 1.0, 0.5)  # C is A
    assert_gemm_close(A, A0, B0, A0, 1.0, 0.5, dtype)
    buf = rng.standard_normal((8, 8)).astype(dtype)
    buf0 = buf.copy()
    G.gemm(buf[:6, :6].T, B0, buf[2:, 2:])  # overlapping, not identical
    assert_gemm_close(buf[2:, 2:], buf0[:6, :6].T, B0, buf0[2:, 2:], 1.0, 0.0, dtype)


def test_gemm_mkl_views_need_no_copy(rng, monkeypatch):
    """Transposed, Fortran and column-sliced operands go to CBLAS as they are."""
    try:
        previous = G.set_backend("mkl")
    except RuntimeError as e:
        pytest.skip(f"MKL unavailable here: {e}")
    try:
        def no_copy(*args, **kwargs):
            raise AssertionError("operand was copied")
        monkeypatch.setattr(np, "ascontiguousarray", no_copy)
        for ka in ["c", "t", "f", "sub", "subt"]:
            for kb in ["c", "t", "f", "sub", "subt"]:
                A = operand(rng, (5, 4), np.float32, ka)
                B = operand(rng, (4, 3), np.float32, kb)
                C = np.empty((5, 3), np.float32)
                G.gemm(A, B, C)
                monkeypatch.undo()
                assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
                monkeypatch.setattr(np, "ascontiguousarray", no_copy)
    finally:
        monkeypatch.undo()
        G.set_backend(previous)


def test_layout_helper():
    e = 4
    a = np.empty((5, 7), np.float32)
    assert G._layout(*a.strides, 5, 7, e) == (G._NO_TRANS, 7)
    assert G._layout(*a.T.strides, 7, 5, e) == (G._TRANS, 7)
    assert G._layout(*a[:, 2:5].strides, 5, 3, e) == (G._NO_TRANS, 7)
    assert G._layout(*a[:, 2:5].T.strides, 3, 5, e) == (G._TRANS, 7)
    f = np.asfortranarray(a)
    assert G._layout(*f.strides, 5, 7, e) == (G._TRANS, 5)
    assert G._layout(*a[::2, ::2].strides, 3, 4, e) is None
    assert G._layout(*a[::-1].strides, 5, 7, e) is None
    assert G._layout(*a[:1, ::2].strides, 1, 4, e) == (G._TRANS, 2)  # a stepped row
    assert G._layout(*a[:, :1].strides, 5, 1, e) == (G._NO_TRANS, 7)  # a column


def test_operand_layout_addresses_every_element():
    """Whatever layout is chosen, (trans, ld) reaches each element where numpy has it."""
    base = np.zeros((9, 11), np.float64)
    views = [base, base.T, base[2:7, 3:4], base[2:3, 3:9], base[:1, :1], base[:, 4:5].T,
             base[1:, 2:].T, np.asfortranarray(base)[1:5, 2:], base[::2, :], base[:, ::2],
             base[::-1], base[:1, ::3], base[::3, :1], np.asfortranarray(base[:1]),
             np.zeros((4, 1)), np.zeros((1, 4)).T]
    e = base.itemsize
    for v in views:
        r, c = v.shape
        lay = G._operand_layout(v, r, c, e)
        if lay is None:
            continue
        trans, ld = lay
        stored_cols = c if trans == G._NO_TRANS else r
        assert ld >= max(1, stored_cols), (v.strides, lay)
        for i in range(r):
            for j in range(c):
                want = i * v.strides[0] + j * v.strides[1]
                got = (i * ld + j) * e if trans == G._NO_TRANS else (j * ld + i) * e
                assert got == want, (v.shape, v.strides, lay, i, j)


# ---------------------------------------------------------------------------------------------
# Errors leave C untouched
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", ["gemm", "batched_gemm"])
def test_shape_mismatch(path, rng, fn):
    f = getattr(G, fn)
    lead = (3,) if fn == "batched_gemm" else ()
    A = rng.standard_normal(lead + (4, 5)).astype(np.float32)
    cases = [
        (A, rng.standard_normal(lead + (6, 3)).astype(np.float32), lead + (4, 3)),   # K
        (A, rng.standard_normal(lead + (5, 3)).astype(np.float32), lead + (4, 4)),   # C cols
        (A, rng.standard_normal(lead + (5, 3)).astype(np.float32), lead + (5, 3)),   # C rows
        (A[..., 0], rng.standard_normal(lead + (5, 3)).astype(np.float32), lead + (4, 3)),
    ]
    if fn == "batched_gemm":
        cases += [
            (A[:2], rng.standard_normal((3, 5, 3)).astype(np.float32), (3, 4, 3)),  # X
            (A, rng.standard_normal((2, 5, 3)).astype(np.float32), (3, 4, 3)),
            (A, rng.standard_normal((5, 3)).astype(np.float32), (4, 3)),           # C 2-D
        ]
    for a, b, cshape in cases:
        C = rng.standard_normal(cshape).astype(np.float32)
        C0 = C.copy()
        with pytest.raises(ValueError) as info:
            f(a, b, C, 1.0, 1.0)
        msg = str(info.value)
        assert str(a.shape) in msg and str(b.shape) in msg and str(C.shape) in msg
        assert "expected" in msg
        np.testing.assert_array_equal(C, C0)


@pytest.mark.parametrize("fn", ["gemm", "batched_gemm"])
@pytest.mark.parametrize("da,db,dc", [
    (np.float64, np.float32, np.float32), (np.float32, np.float64, np.float32),
    (np.float32, np.float32, np.float64), (np.float16, np.float32, np.float32),
    (np.int32, np.int32, np.int32), (np.complex64, np.complex64, np.complex64),
    (">f4", ">f4", ">f4")])
def test_dtype_mismatch(path, rng, fn, da, db, dc):
    lead = (2,) if fn == "batched_gemm" else ()
    A = (rng.standard_normal(lead + (3, 4)) * 4).astype(da)
    B = (rng.standard_normal(lead + (4, 5)) * 4).astype(db)
    C = (rng.standard_normal(lead + (3, 5)) * 4).astype(dc)
    C0 = C.copy()
    with pytest.raises(ValueError) as info:
        getattr(G, fn)(A, B, C, 1.0, 1.0)
    msg = str(info.value)
    assert str(A.dtype) in msg and str(B.dtype) in msg and str(C.dtype) in msg
    np.testing.assert_array_equal(C, C0)


def test_read_only_and_non_array(path, rng):
    A = rng.standard_normal((3, 4)).astype(np.float32)
    B = rng.standard_normal((4, 5)).astype(np.float32)
    C = np.zeros((3, 5), np.float32)
    C.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        G.gemm(A, B, C)
    with pytest.raises(TypeError):
        G.gemm(A.tolist(), B, np.zeros((3, 5), np.float32))
    with pytest.raises(TypeError):
        G.gemm(A, B, [[0.0] * 5] * 3)


# ---------------------------------------------------------------------------------------------
# prepared calls: a layout seen before runs without the checks (gemm's _PREPARED)
# ---------------------------------------------------------------------------------------------

def full_path_calls(monkeypatch):
    """Calls that went the full way (checks, layouts) rather than a prepared call."""
    return calls_of(monkeypatch, "_check_arrays")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ka,kb,kc", [("c", "c", "c"), ("t", "c", "c"), ("c", "t", "f"),
                                      ("sub", "subt", "c"), ("f", "f", "f"), ("c", "c", "sub")])
def test_prepared_calls_compute_on_every_path(path, rng, monkeypatch, dtype, ka, kb, kc):
    """The second call of a layout is a prepared one (no checks), with new data, alpha and
    beta each time, and still right; the inputs are untouched."""
    M, K, N = 7, 5, 6
    views = {"c": lambda x: x, "f": np.asfortranarray, "sub": lambda x: np.pad(x, 2)[2:-2, 2:-2]}
    full = full_path_calls(monkeypatch)
    for alpha, beta in [(1.0, 0.0), (1.0, 0.0), (-0.5, 2.0), (2, 1), (-0.5, 2.0), (1.0, 0.0)]:
        A, B = operand(rng, (M, K), dtype, ka), operand(rng, (K, N), dtype, kb)
        A0, B0 = A.copy(), B.copy()
        C = views[kc](rng.standard_normal((M, N)).astype(dtype))
        C0 = C.copy()
        assert G.gemm(A, B, C, alpha, beta) is C
        assert_gemm_close(C, A, B, C0, alpha, beta, dtype)
        np.testing.assert_array_equal(A, A0)
        np.testing.assert_array_equal(B, B0)
    # (under 'auto' a class MKL won against OpenBLAS takes the full path until confirmed)
    G._State.unconfirmed.clear()
    before = len(full)
    for alpha, beta in [(1.0, 0.0), (-0.5, 2.0)]:
        G.gemm(A, B, C, alpha, beta)
    assert len(full) == before, "a layout seen before went the full path again"
    assert len(G._PREPARED) >= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prepared_call_with_overlapping_output_goes_through_a_temp(path, rng, dtype):
    """A layout prepared on separate arrays, then called with C the very memory of A or B (the
    same shapes and strides): the product of the inputs as they were, not a smeared one."""
    n = 48
    for victim in ("A", "B"):
        A = rng.standard_normal((n, n)).astype(dtype)
        B = rng.standard_normal((n, n)).astype(dtype)
        G.gemm(A, B, np.empty((n, n), dtype))      # prepared
        G.gemm(A, B, np.empty((n, n), dtype))
        A0, B0 = A.copy(), B.copy()
        C = A if victim == "A" else B
        G.gemm(A, B, C)
        assert_gemm_close(C, A0, B0, C, 1.0, 0.0, dtype)


def test_prepared_call_keeps_the_checks_that_depend_on_the_call(path, rng, monkeypatch):
    """A prepared layout still refuses a read-only C, skips A and B at alpha == 0 (their NaNs do
    not spread), and sends misaligned data through the full path."""
    A = rng.standard_normal((4, 3)).astype(np.float32)
    B = rng.standard_normal((3, 5)).astype(np.float32)
    for _ in range(2):
        G.gemm(A, B, np.zeros((4, 5), np.float32))
    C = np.zeros((4, 5), np.float32)
    C.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        G.gemm(A, B, C)
    C = np.ones((4, 5), np.float32)
    G.gemm(np.full_like(A, np.nan), B, C, 0.0, 2.0)
    np.testing.assert_array_equal(C, 2.0)
    raw = np.zeros(4 * 3 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(4, 3)  # misaligned
    raw[...] = A
    assert not raw.flags.aligned and raw.strides == A.strides
    full = full_path_calls(monkeypatch)
    C = np.empty((4, 5), np.float32)
    G.gemm(raw, B, C)
    assert len(full) == (0 if path.endswith("numpy") else 1)   # (numpy's matmul copes itself)
    assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)


def test_prepared_calls_follow_the_path_and_choices(rng, monkeypatch):
    """The path is looked up at each call: set_backend after a layout was prepared takes effect,
    and under 'auto' a class with no verdict (clear_choices) is timed again on the full path."""
    try:
        previous = G.set_backend("mkl")
    except RuntimeError as e:
        pytest.skip(f"MKL unavailable here: {e}")
    try:
        A, B = operand(rng, (70, 80), np.float32, "c"), operand(rng, (80, 90), np.float32, "c")
        C = np.empty((70, 90), np.float32)
        for name in ("mkl", "numpy", "mkl"):
            G.set_backend(name)
            seen = calls_of(monkeypatch, {"mkl": "_mkl_run", "numpy": "_numpy_gemm"}[name])
            for _ in range(3):
                G.gemm(A, B, C)
                assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
            assert len(seen) == 3   # every call on the path set (a spy stands in: it is called)
            monkeypatch.undo()
        G.set_backend("auto")
        if G.backend_name() != "auto":
            return
        G.clear_choices()
        monkeypatch.setattr(G, "SMALL_MACS", 0)
        verdicts = []
        monkeypatch.setattr(G, "_time_paths",
                            lambda run_mkl, run_rival: verdicts.append(1) or "numpy")
        for _ in range(3):
            G.gemm(A, B, C)
        G.clear_choices()
        G.gemm(A, B, C)
        assert len(verdicts) == 2
        assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
    finally:
        G.clear_choices()
        G.set_backend(previous)


def test_prepared_calls_are_a_bounded_memo_cleared_with_the_caches(rng):
    import neonlike
    A, B = operand(rng, (3, 4), np.float32, "c"), operand(rng, (4, 5), np.float32, "c")
    G.gemm(A, B, np.empty((3, 5), np.float32))
    assert len(G._PREPARED) >= 1 and G._PREPARED.maxsize == G.MAX_PREPARED
    neonlike.clear_caches()
    assert len(G._PREPARED) == 0


# ---------------------------------------------------------------------------------------------
# batched_gemm
# ---------------------------------------------------------------------------------------------

def batch_operand(rng, shape, dtype, kind):
    """(X, rows, cols) operands in various layouts, or a 2-D one for kind '2d*'."""
    x, r, c = shape
    if kind == "2d":
        return rng.standard_normal((r, c)).astype(dtype)
    if kind == "2dt":
        return rng.standard_normal((c, r)).astype(dtype).T
    if kind == "c":
        return rng.standard_normal((x, r, c)).astype(dtype)
    if kind == "t":  # each slice a transposed view
        return rng.standard_normal((x, c, r)).astype(dtype).transpose(0, 2, 1)
    if kind == "inter":  # batch axis in the middle: slices interleaved
        return rng.standard_normal((r, x, c)).astype(dtype).transpose(1, 0, 2)
    if kind == "bstep":  # every other slice of a bigger stack
        return rng.standard_normal((2 * x, r, c)).astype(dtype)[::2]
    if kind == "bcast":  # one slice broadcast (batch stride 0)
        return np.broadcast_to(rng.standard_normal((r, c)).astype(dtype), (x, r, c))
    if kind == "step":  # must be copied
        return rng.standard_normal((x, 2 * r, 2 * c)).astype(dtype)[:, ::2, ::2]
    if kind == "neg":
        return rng.standard_normal((x, r, c)).astype(dtype)[::-1]
    raise ValueError(kind)


BATCH_LAYOUTS = ["2d", "2dt", "c", "t", "inter", "bstep", "bcast", "step", "neg"]


def assert_batched_close(C, A, B, C0, alpha, beta, dtype):
    X = C.shape[0]
    for x in range(X):
        a = A if A.ndim == 2 else A[x]
        b = B if B.ndim == 2 else B[x]
        assert_gemm_close(C[x], a, b, C0[x], alpha, beta, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ka", BATCH_LAYOUTS)
@pytest.mark.parametrize("kb", BATCH_LAYOUTS)
def test_batched_layouts(path, rng, dtype, ka, kb):
    X, M, K, N = 3, 5, 4, 6
    A = batch_operand(rng, (X, M, K), dtype, ka)
    B = batch_operand(rng, (X, K, N), dtype, kb)
    C = rng.standard_normal((X, M, N)).astype(dtype)
    C0 = C.copy()
    assert G.batched_gemm(A, B, C, 0.75, -1.0) is C
    assert_batched_close(C, A, B, C0, 0.75, -1.0, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kc", ["c", "t", "inter", "bstep", "step", "neg"])
@pytest.mark.parametrize("ka,kb", [("c", "2d"), ("2dt", "c"), ("t", "t"), ("c", "c")])
def test_batched_output_layouts(path, rng, dtype, kc, ka, kb):
    X, M, K, N = 4, 3, 5, 2
    A = batch_operand(rng, (X, M, K), dtype, ka)
    B = batch_operand(rng, (X, K, N), dtype, kb)
    C = batch_operand(rng, (X, M, N), dtype, kc)
    if not C.flags.writeable:
        C = C.copy()
    C0 = C.copy()
    G.batched_gemm(A, B, C, 1.0, 0.5)
    assert_batched_close(C, A, B, C0, 1.0, 0.5, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("X,M,K,N", [(1, 4, 3, 2), (5, 1, 7, 1), (2, 1, 1, 1), (7, 8, 1, 9),
                                     (0, 3, 4, 5), (3, 0, 4, 5), (3, 4, 0, 5), (3, 4, 5, 0)])
@pytest.mark.parametrize("ka,kb", [("c", "c"), ("2d", "c"), ("c", "2d"), ("t", "2dt")])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (2.0, 1.0), (0.0, 0.5)])
def test_batched_shapes(path, rng, dtype, X, M, K, N, ka, kb, alpha, beta):
    A = batch_operand(rng, (X, M, K), dtype, ka)
    B = batch_operand(rng, (X, K, N), dtype, kb)
    C = rng.standard_normal((X, M, N)).astype(dtype)
    if beta == 0:
        C[...] = np.nan
    C0 = C.copy()
    G.batched_gemm(A, B, C, alpha, beta)
    if min(X, M, N) > 0:
        assert np.isfinite(C).all()
    assert_batched_close(C, A, B, C0, alpha, beta, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_c_aliasing_an_input(path, rng, dtype):
    A = rng.standard_normal((3, 4, 4)).astype(dtype)
    B = rng.standard_normal((4, 4)).astype(dtype)
    A0 = A.copy()
    G.batched_gemm(A, B, A, 2.0, 1.0)
    assert_batched_close(A, A0, B, A0, 2.0, 1.0, dtype)


def test_batched_without_batch_strided(rng, monkeypatch):
    """The per-slice loop MKL falls back on when cblas_?gemm_batch_strided is missing."""
    try:
        previous = G.set_backend("mkl")
    except RuntimeError as e:
        pytest.skip(f"MKL unavailable here: {e}")
    try:
        monkeypatch.setattr(G._State.mkl, "batch", {})
        for ka, kb in [("c", "c"), ("inter", "t"), ("bcast", "c"), ("c", "bstep"), ("2d", "t")]:
            for dtype in (np.float32, np.float64):
                A = batch_operand(rng, (3, 5, 4), dtype, ka)
                B = batch_operand(rng, (3, 4, 6), dtype, kb)
                C = rng.standard_normal((3, 5, 6)).astype(dtype)
                C0 = C.copy()
                G.batched_gemm(A, B, C, 1.0, 1.0)
                assert_batched_close(C, A, B, C0, 1.0, 1.0, dtype)
    finally:
        G.set_backend(previous)


@given(X=st.integers(1, 4), M=st.integers(1, 9), K=st.integers(1, 9), N=st.integers(1, 9),
       ka=st.sampled_from(BATCH_LAYOUTS), kb=st.sampled_from(BATCH_LAYOUTS),
       dtype=st.sampled_from(DTYPES), backend=st.sampled_from(["mkl", "numpy"]),
       kc=st.sampled_from(["c", "t", "inter", "bstep", "step"]),
       alpha=st.sampled_from([1.0, -2.0, 0.5]), beta=st.sampled_from([0.0, 1.0, -0.5]),
       seed=st.integers(0, 2**32 - 1))
def test_batched_property(X, M, K, N, ka, kb, kc, dtype, backend, alpha, beta, seed):
    try:
        previous = G.set_backend(backend)
    except RuntimeError:
        return
    try:
        rng = np.random.default_rng(seed)
        A = batch_operand(rng, (X, M, K), dtype, ka)
        B = batch_operand(rng, (X, K, N), dtype, kb)
        C = batch_operand(rng, (X, M, N), dtype, kc)
        C0 = C.copy()
        G.batched_gemm(A, B, C, alpha, beta)
        assert_batched_close(C, A, B, C0, alpha, beta, dtype)
        if A.ndim == 2 and B.ndim == 2:
            return
        C2 = rng.standard_normal((M, N)).astype(dtype)
        C20 = C2.copy()
        a = A if A.ndim == 2 else A[-1]
        b = B if B.ndim == 2 else B[-1]
        G.gemm(a, b, C2, alpha, beta)
        assert_gemm_close(C2, a, b, C20, alpha, beta, dtype)
    finally:
        G.set_backend(previous)


# ---------------------------------------------------------------------------------------------
# Backend selection, loading, threads
# ---------------------------------------------------------------------------------------------

def test_env_var_forces_numpy(monkeypatch):
    previous = G.set_backend(None)
    try:
        monkeypatch.setenv(G.ENV_VAR, "numpy")
        G.set_backend(None)
        assert G.backend_name() == "numpy"
        monkeypatch.setenv(G.ENV_VAR, "bogus")
        G.set_backend(None)
        with pytest.raises(ValueError, match=G.ENV_VAR):
            G.backend_name()
    finally:
        monkeypatch.undo()
        G.set_backend(previous)
    assert G.backend_name() in ("auto", "numpy")


def test_set_backend_rejects_unknown():
    with pytest.raises(ValueError):
        G.set_backend("blis")


def test_import_is_lazy():
    """Importing gemm loads no MKL; the first call does."""
    code = "\n".join([
        "import sys, neonlike.backends",
        "def mapped():",
        "    if not sys.platform.startswith('linux'):",
        "        return False",
        "    with open('/proc/self/maps') as f:",
        "        return 'libmkl_rt' in f.read()",
        "before = ('mkl' in sys.modules, mapped())",
        "import neonlike.backends.cpu.gemm as G",
        "assert G._State.mkl is None and G._State.resolved is None",
        "assert ('mkl' in sys.modules, mapped()) == before, before",
        "print(G.backend_name(), G.mkl_library_path() is not None)",
    ])
    env = {k: v for k, v in os.environ.items() if k != G.ENV_VAR}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    name, loaded = res.stdout.split()
    assert (name, loaded) in (("auto", "True"), ("numpy", "False"))


def test_no_mkl_falls_back_to_numpy(monkeypatch, rng):
    previous = G.set_backend(None)
    try:
        monkeypatch.delenv(G.ENV_VAR, raising=False)
        monkeypatch.setattr(G._State, "mkl", None)
        monkeypatch.setattr(G._State, "mkl_error", None)
        monkeypatch.setattr(G, "_candidate_paths", lambda: ["/nonexistent/libmkl_rt.so.2"])
        G.set_backend(None)
        if OB.available():           # without MKL, 'auto' takes OpenBLAS where it is installed
            assert G.backend_name() == "openblas"
            monkeypatch.setattr(OB, "available", lambda: False)
            G.set_backend(None)
        assert G.backend_name() == "numpy"
        with pytest.raises(RuntimeError, match="libmkl_rt"):
            G.set_backend("mkl")
        assert G.backend_name() == "numpy"
        A = rng.standard_normal((3, 4)).astype(np.float32)
        B = rng.standard_normal((4, 2)).astype(np.float32)
        C = np.empty((3, 2), np.float32)
        G.gemm(A, B, C)
        assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
    finally:
        monkeypatch.undo()
        G.set_backend(previous)


def test_mkl_library_found_through_metadata():
    try:
        previous = G.set_backend("mkl")
    except RuntimeError as e:
        pytest.skip(f"MKL unavailable here: {e}")
    G.set_backend(previous)
    path = G.mkl_library_path()
    assert path is not None and os.path.basename(path).startswith("libmkl_rt")
    assert any(os.path.samefile(path, p) for p in G._candidate_paths() if os.path.exists(p))


def test_data_pointer_matches_ctypes(monkeypatch):
    assert G._pointer_offset() is not None  # CPython: the fast reader is in use
    base = np.arange(120, dtype=np.float32).reshape(10, 12)
    arrays = [base, base.T, base[3:, 5:], base[::2, ::-3], np.empty((0, 4)), base[4],
              np.asfortranarray(base)[2:, 1:]]
    for offset in (G._pointer_offset(), None):  # None: the .ctypes.data fallback
        monkeypatch.setattr(G, "_PTR_OFFSET", offset)
        for a in arrays:
            assert G._ptr(a) == a.ctypes.data


def test_fallback_pointer_path_computes(monkeypatch, rng):
    try:
        previous = G.set_backend("mkl")
    except RuntimeError as e:
        pytest.skip(f"MKL unavailable here: {e}")
    try:
        monkeypatch.setattr(G, "_PTR_OFFSET", None)
        A = operand(rng, (5, 4), np.float32, "t")
        B = operand(rng, (4, 3), np.float32, "sub")
        C = np.empty((5, 3), np.float32)
        G.gemm(A, B, C)
        assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
    finally:
        G.set_backend(previous)


def test_set_num_threads():
    pytest.importorskip("mkl")
    before = G.get_num_threads()
    try:
        assert G.set_num_threads(1) == before
        assert G.get_num_threads() == 1
    finally:
        G.set_num_threads(before)
    assert G.get_num_threads() == before
    with pytest.raises(ValueError):
        G.set_num_threads(0)


def test_set_num_threads_sets_numpy_blas_too_and_forgets_choices():
    """Under 'auto' a class may run on numpy's BLAS: its pool follows set_num_threads, and the
    choices timed with the old count are dropped."""
    pytest.importorskip("threadpoolctl")
    pools = G._numpy_blas_pools()
    if not pools:
        pytest.skip("numpy's BLAS is not one threadpoolctl controls here")
    before = pools[0].num_threads
    G._remember(("gemm", "f", 1, 64, 64, 64, "NN>N", True, True), "numpy")
    try:
        G.set_num_threads(1)
        assert [p.num_threads for p in G._numpy_blas_pools()] == [1] * len(pools)
        assert G.choices() == {}
    finally:
        G.set_num_threads(before)
    assert G._numpy_blas_pools()[0].num_threads == before


# ---------------------------------------------------------------------------------------------
# 'auto': the faster path per shape class
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def auto(monkeypatch):
    """'auto' with an empty table (skipped where MKL does not load: then 'auto' is numpy)."""
    previous = G.set_backend("auto")
    if G.backend_name() != "auto":
        G.set_backend(previous)
        pytest.skip("MKL unavailable here: 'auto' runs numpy")
    G.clear_choices()
    # the rules against numpy's matmul (its pool's spinning); OpenBLAS as the rival has its own
    monkeypatch.setattr(G._State, "rival", "numpy")
    yield
    G.clear_choices()
    G.set_backend(previous)


def slowed(fn, seconds):
    def slow(*args, **kwargs):
        time.sleep(seconds)
        return fn(*args, **kwargs)
    return slow


def calls_of(monkeypatch, name):
    """Count the calls of gemm's module function `name` (still running it)."""
    seen = []
    real = getattr(G, name)

    def spy(*args, **kwargs):
        seen.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(G, name, spy)
    return seen


@pytest.mark.parametrize("slow", ["numpy", "mkl"])
def test_auto_takes_the_faster_path(auto, rng, monkeypatch, slow):
    """One path slowed by 20 ms a call: the class is timed once and the other path runs it
    (numpy's thread pool taken as quiet after its calls: _spinning has its own test). A stall
    of this shared machine during a warm-up call must not end the timing here (CI once read a
    slowed MKL's warm-up over SLOW_RUN_S, 50 ms, and kept MKL): test_auto_gives_up_timing_slow_calls
    tests that rule."""
    monkeypatch.setattr(G, "_spinning", lambda: False)
    monkeypatch.setattr(G, "SLOW_RUN_S", 2.0)
    real_mkl, real_numpy = G._mkl_run, G._numpy_gemm
    if slow == "numpy":
        monkeypatch.setattr(G, "_numpy_gemm", slowed(real_numpy, 0.02))
    else:
        monkeypatch.setattr(G, "_mkl_run", slowed(real_mkl, 0.02))
    timings = calls_of(monkeypatch, "_time_paths")
    A = operand(rng, (100, 90), np.float32, "c")
    B = operand(rng, (90, 80), np.float32, "t")
    C = np.empty((100, 80), np.float32)
    G.gemm(A, B, C)
    assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
    want = "mkl" if slow == "numpy" else "numpy"
    assert G.choices() == {G.ShapeClass("gemm", "float32", 1, 128, 128, 128, "NT>N", True, True):
                           want}
    monkeypatch.setattr(G, "_numpy_gemm", real_numpy)
    monkeypatch.setattr(G, "_mkl_run", real_mkl)
    numpy_calls = calls_of(monkeypatch, "_numpy_gemm")
    mkl_calls = calls_of(monkeypatch, "_mkl_run")
    A2 = operand(rng, (120, 70), np.float32, "c")   # another shape of the same class
    B2 = operand(rng, (70, 100), np.float32, "t")
    C2 = np.empty((120, 100), np.float32)
    G.gemm(A2, B2, C2)
    assert_gemm_close(C2, A2, B2, C2, 1.0, 0.0, np.float32)
    assert len(timings) == 1                       # timed once
    assert (len(numpy_calls), len(mkl_calls)) == ((0, 1) if want == "mkl" else (1, 0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layouts", [("c", "c", "c"), ("t", "f", "f"), ("sub", "subt", "c")])
def test_auto_paths_agree(auto, rng, monkeypatch, dtype, layouts):
    """The same call gives the same result whichever path 'auto' picked (float16 is timed on
    its float32 temps)."""
    ka, kb, kc = layouts
    A = operand(rng, (70, 90), dtype, ka)
    B = operand(rng, (90, 50), dtype, kb)
    C0 = operand(rng, (70, 50), dtype, kc)
    got = {}
    for verdict in ("mkl", "numpy"):
        G.clear_choices()
        monkeypatch.setattr(G, "_time_paths", lambda run_mkl, run_numpy: verdict)
        C = C0.copy(order="K")
        G.gemm(A, B, C, 1.5, 0.5)
        assert_gemm_close(C, A, B, C0, 1.5, 0.5, dtype)
        assert set(G.choices().values()) == {verdict}
        got[verdict] = C
        Cb = np.zeros((3, 70, 50), dtype)
        G.batched_gemm(np.stack([A] * 3), B, Cb)
        assert_batched_close(Cb, np.stack([A] * 3), B, Cb, 1.0, 0.0, dtype)
    # the two agree to rounding: |mkl - numpy| within twice the bound each meets
    scale = 1.5 * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))) \
        + 0.5 * np.abs(C0.astype(np.float64))
    diff = np.abs(got["mkl"].astype(np.float64) - got["numpy"].astype(np.float64))
    assert (diff <= 2 * RTOL[np.dtype(dtype).type] * scale + np.finfo(dtype).tiny).all()
    timed_as = "float32" if dtype == np.float16 else np.dtype(dtype).name
    assert {c.dtype for c in G.choices()} == {timed_as}


def test_auto_table_is_bounded_and_cleared(auto, rng, monkeypatch):
    monkeypatch.setattr(G, "SMALL_MACS", 0)
    monkeypatch.setattr(G._State.choices, "maxsize", 4)
    monkeypatch.setattr(G, "_time_paths", lambda run_mkl, run_numpy: "mkl")
    A = operand(rng, (40, 600), np.float32, "c")
    seen = []
    for k in (40, 70, 130, 260, 520):              # five K buckets: five classes
        C = np.empty((40, 40), np.float32)
        G.gemm(A[:, :k], A[:, :k].T, C)
        seen.append(G.ShapeClass("gemm", "float32", 1, 64, 64, G._bucket(k), "NT>N", True, True))
        assert len(G.choices()) <= 4
    assert list(G.choices()) == seen[1:]           # the oldest went first
    G.clear_choices()
    assert G.choices() == {}


def test_auto_small_and_copied_operands_are_not_timed(auto, rng, monkeypatch):
    """Up to SMALL_MACS numpy runs untimed (not an outer product, K = 1: that is timed);
    operands the MKL path copies keep MKL, untimed."""
    timings = calls_of(monkeypatch, "_time_paths")
    mkl_calls = calls_of(monkeypatch, "_mkl_run")
    numpy_calls = calls_of(monkeypatch, "_numpy_gemm")
    A, B = operand(rng, (64, 64), np.float32, "c"), operand(rng, (64, 64), np.float32, "c")
    C = np.empty((64, 64), np.float32)
    G.gemm(A, B, C)                                # 64^3 = SMALL_MACS
    Ab, Bb = np.stack([A[:16, :16]] * 16), np.stack([B[:16, :16]] * 16)
    G.batched_gemm(Ab, Bb, np.empty((16, 16, 16), np.float32))
    assert (len(numpy_calls), len(mkl_calls)) == (2, 0)
    A, B = operand(rng, (100, 100), np.float32, "step"), operand(rng, (100, 100), np.float32, "c")
    C = np.empty((100, 100), np.float32)
    G.gemm(A, B, C)
    assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
    assert (len(numpy_calls), len(mkl_calls)) == (2, 1)
    assert timings == [] and G.choices() == {}
    A, B = operand(rng, (128, 1), np.float32, "c"), operand(rng, (1, 128), np.float32, "c")
    C = np.empty((128, 128), np.float32)
    G.gemm(A, B, C)
    assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
    assert len(timings) == 1 and list(G.choices()) == [
        G.ShapeClass("gemm", "float32", 1, 128, 128, 1, "NN>N", True, True)]


@pytest.mark.parametrize("mkl_best,numpy_best,spinning,want", [
    (1e-3, 0.90e-3, False, "numpy"),   # 10% faster, no pool left spinning
    (1e-3, 0.97e-3, False, "mkl"),     # within the 5% margin: a tie goes to MKL
    (1e-3, 0.50e-3, True, "mkl"),      # faster, but OpenBLAS's pool spins on after it
    (20e-3, 14e-3, True, "numpy"),     # ... unless the call is long (SPIN_OK_S = 5 ms) and
    (20e-3, 16e-3, True, "mkl"),       # numpy's saving large (SPIN_MARGIN = 0.75)
    (20e-3, 18e-3, False, "numpy"),    # a long call that leaves no spin: the 5% margin
    (None, 0.1e-3, False, "mkl"),      # MKL's warm-up call over SLOW_RUN_S
    (1e-3, None, False, "mkl")])
def test_auto_verdict(monkeypatch, mkl_best, numpy_best, spinning, want):
    monkeypatch.setattr(G._State, "rival", "numpy")
    runs = {"mkl": lambda: "mkl", "numpy": lambda: "numpy"}
    monkeypatch.setattr(G, "_best_of", lambda run: mkl_best if run() == "mkl" else numpy_best)
    monkeypatch.setattr(G, "_spinning", lambda: spinning)
    monkeypatch.setattr(G, "SPIN_OK_S", 5e-3)
    monkeypatch.setattr(G, "SPIN_MARGIN", 0.75)
    # a long call is judged by the medians of its calls (its own test below, on a fake clock);
    # here they are the given times
    monkeypatch.setattr(G, "_median", lambda run: mkl_best if run() == "mkl" else numpy_best)
    assert G._time_paths(runs["mkl"], runs["numpy"]) == want


@pytest.mark.parametrize("mkl_time,rival_time,mkl_spins,want", [
    (1e-3, 0.90e-3, False, "openblas"),       # 10% faster
    (1e-3, 1.03e-3, False, "openblas"),       # within the margin: a tie goes to OpenBLAS
    (0.92e-3, 1e-3, False, "openblas"),       # MKL 8% faster: still within MKL_MARGIN (10%)
    (0.85e-3, 1e-3, False, "mkl"),            # MKL 15% faster
    (20e-3, 14e-3, False, "openblas"),        # long calls: the medians, same margin,
    (20e-3, 20.5e-3, False, "openblas"),
    (17e-3, 20e-3, False, "mkl"),
    (0.85e-3, 1e-3, True, "openblas"),        # MKL leaves its threads spinning (Intel OpenMP):
    (0.70e-3, 1e-3, True, "mkl"),             # it must save SPIN_MARGIN (25%)
    (17e-3, 20e-3, True, "openblas"),
    (None, 0.1e-3, False, "mkl"),             # MKL's warm-up call over SLOW_RUN_S
    (1e-3, None, False, "mkl")])
def test_auto_verdict_against_openblas(monkeypatch, mkl_time, rival_time, mkl_spins, want):
    """OpenBLAS on numba's pool leaves no thread spinning: MKL keeps a class by MKL_MARGIN (10%
    faster), or by SPIN_MARGIN where MKL's own calls leave a thread spinning (the probe right
    after them); OpenBLAS is timed once the spin has stopped (_settle)."""
    monkeypatch.setattr(G._State, "rival", "openblas")
    log = []

    def run(name):
        def call():
            log.append(name)
            return name
        return call
    monkeypatch.setattr(G, "_best_of", lambda run: mkl_time if run() == "mkl" else rival_time)
    monkeypatch.setattr(G, "_median", lambda run: mkl_time if run() == "mkl" else rival_time)
    monkeypatch.setattr(G, "SPIN_OK_S", 5e-3)
    monkeypatch.setattr(G, "SPIN_MARGIN", 0.75)
    monkeypatch.setattr(G, "_spinning", lambda: log.append("probe") or mkl_spins)
    monkeypatch.setattr(G, "_settle", lambda: log.append("settle"))
    assert G._time_paths(run("mkl"), run("openblas")) == want
    # every OpenBLAS timing follows a settle, never straight after MKL's calls
    calls = [e for e in log if e != "probe"]
    for k, e in enumerate(calls):
        if e == "openblas" and k and calls[k - 1] == "mkl":
            raise AssertionError(f"OpenBLAS timed right after MKL's calls: {calls}")


@pytest.mark.parametrize("rival,verdicts,want", [
    ("openblas", ["mkl", "openblas"], "openblas"),   # MKL's first win not confirmed
    ("openblas", ["mkl", "mkl"], "mkl"),             # confirmed: timed twice, no more
    ("openblas", ["openblas"], "openblas"),          # OpenBLAS's verdict stands at once
    ("numpy", ["mkl"], "mkl")])                      # against numpy: one timing, as before
def test_auto_mkl_keeps_a_class_from_openblas_only_by_winning_twice(auto, rng, monkeypatch,
                                                                      rival, verdicts, want):
    """A class MKL won against OpenBLAS runs MKL for CONFIRM_AFTER calls, is then timed again,
    and the second verdict stands; results are right on either path throughout."""
    monkeypatch.setattr(G._State, "rival", rival)
    if rival == "openblas":
        if not OB.available():
            pytest.skip("scipy-openblas32 is not installed")
        monkeypatch.setattr(G._State, "openblas", OB.library())
    monkeypatch.setattr(G, "SMALL_MACS", 0)
    monkeypatch.setattr(G, "CONFIRM_AFTER", 3)
    queue = list(verdicts)
    timings = []

    def verdict(run_mkl, run_rival):
        timings.append(1)
        return queue.pop(0)
    monkeypatch.setattr(G, "_time_paths", verdict)
    mkl_calls = calls_of(monkeypatch, "_mkl_run")
    A, B = operand(rng, (50, 40), np.float32, "c"), operand(rng, (40, 30), np.float32, "c")
    cls = G.ShapeClass("gemm", "float32", 1, 64, 32, 64, "NN>N", True, True)
    seen = []
    for _ in range(6):
        C = np.empty((50, 30), np.float32)
        G.gemm(A, B, C)
        assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
        seen.append(G.choices()[cls])
    assert len(timings) == len(verdicts) and not queue
    if verdicts[0] == "mkl" and rival == "openblas":
        # calls 1-3 on MKL, the 4th re-timed, the rest on the second verdict
        assert seen == ["mkl"] * 3 + [want] * 3
        assert len(mkl_calls) == 3 + (3 if want == "mkl" else 0)
    else:
        assert seen == [want] * 6
    G.clear_choices()
    assert len(G._State.unconfirmed) == 0


def test_auto_openblas_rival_first_call_does_not_lose_the_class(monkeypatch):
    """A process's first OpenBLAS call also loads tiles' compiled kernel (~0.4 s): that call is
    made before the timing, so it cannot end the timing as a slow warm-up (SLOW_RUN_S) would."""
    monkeypatch.setattr(G._State, "rival", "openblas")
    monkeypatch.setattr(G, "QUIET_S", 0.0)
    monkeypatch.setattr(G, "SLOW_RUN_S", 0.05)
    rival_calls = []

    def rival():
        rival_calls.append(1)
        if len(rival_calls) == 1:
            time.sleep(0.06)       # the load, once

    def mkl():
        time.sleep(0.002)
    assert G._time_paths(mkl, rival) == "openblas"
    # the load, a warm-up and TIMING_RUNS (the slow-call check), two rounds of LONG_RUNS
    assert len(rival_calls) == 1 + 1 + G.TIMING_RUNS + 2 * G.LONG_RUNS


# ---------------------------------------------------------------------------------------------
# OpenBLAS cut into small-kernel calls ('auto' times the cuts per class: _choose_split)
# ---------------------------------------------------------------------------------------------

def test_small_splits_fit_the_small_kernels():
    assert OB.small_splits(100, 128, 784, 2) == [(True, 4), (True, 8), (False, 4), (False, 8)]
    assert OB.small_splits(1024, 1024, 1024, 2) == []     # no call of 4 rows fits
    for M, N, K, threads in [(256, 256, 256, 2), (32, 512, 512, 2), (300, 200, 100, 4),
                             (7, 9, 11, 2), (64, 1024, 256, 8)]:
        for along_m, step in OB.small_splits(M, N, K, threads):
            dim, other = (M, N) if along_m else (N, M)
            blocks = -(-dim // step)
            assert step * other * K <= OB.SMALL_MACS
            assert threads <= blocks <= OB.SPLIT_BLOCKS_MAX


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ka,kb,kc", [("c", "c", "c"), ("t", "sub", "c"), ("c", "t", "f"),
                                      ("subt", "f", "sub")])
def test_openblas_split_calls_compute(rng, dtype, ka, kb, kc):
    """Every small split of a product, on every CBLAS layout (C column-major: the call's M and N
    exchanged), with alpha and beta: the float64 product."""
    if not OB.available():
        pytest.skip("scipy-openblas32 is not installed")
    G.backend_name()
    lib = OB.library()
    M, K, N = 37, 23, 45
    A, B = operand(rng, (M, K), dtype, ka), operand(rng, (K, N), dtype, kb)
    views = {"c": lambda x: x, "f": np.asfortranarray, "sub": lambda x: np.pad(x, 1)[1:-1, 1:-1]}
    splits = OB.small_splits(M, N, K, 2) + OB.small_splits(N, M, K, 2)
    assert len(splits) >= 6
    for split in splits:
        C = views[kc](rng.standard_normal((M, N)).astype(dtype))
        C0 = C.copy()
        G._blas_gemm(lib, A, B, C, M, N, K, -0.5, 1.5, split)
        assert_gemm_close(C, A, B, C0, -0.5, 1.5, dtype)


@pytest.mark.parametrize("times,want", [
    ([100, 90, 96], (True, 4)),      # the fastest small split, 10% faster
    ([100, 97, 91], (False, 8)),
    ([100, 96, 97], None),           # within SPLIT_MARGIN of the packed split: keep it
    ([100, None, 80], (False, 8)),   # a candidate too slow to time is skipped
    ([None, 10, 10], None),          # the packed split too slow to time: keep it
])
def test_choose_split_takes_the_fastest_cut_by_a_margin(monkeypatch, rng, times, want):
    if not OB.available():
        pytest.skip("scipy-openblas32 is not installed")
    G.backend_name()
    monkeypatch.setattr(G._State, "openblas", OB.library())
    monkeypatch.setattr(OB, "small_splits", lambda M, N, K, threads: [(True, 4), (False, 8)])
    monkeypatch.setattr(G, "_settle", lambda: None)
    queue = [t if t is None else t * 1e-6 for t in times]
    monkeypatch.setattr(G, "_best_of", lambda run: queue.pop(0))
    A, B = operand(rng, (20, 30), np.float32, "c"), operand(rng, (30, 40), np.float32, "c")
    T = np.empty((20, 40), np.float32)
    assert G._choose_split(A, B, T, 20, 40, 30, 1.0, 0.0) == want
    assert queue == [] or times[0] is None
    monkeypatch.setattr(OB, "small_splits", lambda M, N, K, threads: [])
    assert G._choose_split(A, B, T, 20, 40, 30, 1.0, 0.0) is None


def test_auto_runs_a_class_in_the_split_it_chose(auto, rng, monkeypatch):
    """Under 'auto' against OpenBLAS, a class whose small split won runs every call in it, the
    prepared ones too, and right; clear_choices forgets it."""
    if not OB.available():
        pytest.skip("scipy-openblas32 is not installed")
    monkeypatch.setattr(G._State, "rival", "openblas")
    monkeypatch.setattr(G._State, "openblas", OB.library())
    monkeypatch.setattr(G, "SMALL_MACS", 0)
    monkeypatch.setattr(G, "_choose_split", lambda *args: (False, 8))
    monkeypatch.setattr(G, "_time_paths", lambda run_mkl, run_rival: "openblas")
    seen = []
    lib = OB.library()
    real = lib.split[4]

    def spy(*args):
        seen.append(args[:2])
        return real(*args)
    monkeypatch.setitem(lib.split, 4, spy)
    A, B = operand(rng, (50, 40), np.float32, "c"), operand(rng, (40, 60), np.float32, "c")
    for _ in range(4):
        C = np.empty((50, 60), np.float32)
        G.gemm(A, B, C)
        assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
    assert seen == [(False, 8)] * 4
    cls = G.ShapeClass("gemm", "float32", 1, 64, 64, 64, "NN>N", True, True)
    assert G.split_choices() == {cls: (False, 8)}
    G.clear_choices()
    assert G.split_choices() == {} and len(G._State.splits) == 0


def test_best_of_warms_up_then_takes_the_fastest_call():
    calls = []
    best = G._best_of(lambda: calls.append(sum(range(2000))))
    assert len(calls) == 1 + G.TIMING_RUNS and 0 < best < G.SLOW_RUN_S


def test_spinning_sees_a_busy_thread():
    import threading
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass
    t = threading.Thread(target=spin)
    t.start()
    try:
        assert G._spinning()
    finally:
        stop.set()
        t.join()


def test_auto_times_large_classes_on_a_smaller_representative(auto, rng, monkeypatch):
    """Above TIMED_MACS the class takes the verdict of a halved product, timed on scratch."""
    monkeypatch.setattr(G, "SMALL_MACS", 0)
    monkeypatch.setattr(G, "TIMED_MACS", 1 << 15)
    timed = []

    def fake(run_mkl, run_numpy):
        timed.append(1)
        run_mkl()
        run_numpy()
        return "numpy"
    monkeypatch.setattr(G, "_time_paths", fake)
    A = operand(rng, (64, 64), np.float32, "t")
    B = operand(rng, (64, 64), np.float32, "c")
    C = np.empty((64, 64), np.float32)
    G.gemm(A, B, C)
    assert_gemm_close(C, A, B, C, 1.0, 0.0, np.float32)
    assert G.choices() == {
        G.ShapeClass("gemm", "float32", 1, 32, 32, 32, "TN>N", True, True): "numpy",
        G.ShapeClass("gemm", "float32", 1, 64, 64, 64, "TN>N", True, True): "numpy"}
    Cb = np.empty((4, 64, 64), np.float32)       # batched: the batch is halved first
    G.batched_gemm(np.stack([A] * 4), B, Cb)
    assert_batched_close(Cb, np.stack([A] * 4), B, Cb, 1.0, 0.0, np.float32)
    assert len(timed) == 2 and len(G.choices()) == 4


def test_auto_gives_up_timing_slow_calls(auto, rng, monkeypatch):
    """A warm-up call over SLOW_RUN_S ends the timing: MKL is kept."""
    monkeypatch.setattr(G, "SMALL_MACS", 0)
    monkeypatch.setattr(G, "SLOW_RUN_S", 0.001)
    monkeypatch.setattr(G, "_mkl_run", slowed(G._mkl_run, 0.002))
    A = operand(rng, (64, 64), np.float32, "c")
    G.gemm(A, A, np.empty((64, 64), np.float32))
    assert list(G.choices().values()) == ["mkl"]


@pytest.mark.parametrize("forced", ["mkl", "numpy"])
def test_env_var_forcing_bypasses_auto(monkeypatch, rng, forced):
    previous = G.set_backend(None)
    try:
        monkeypatch.setenv(G.ENV_VAR, forced)
        try:
            G.set_backend(None)
            assert G.backend_name() == forced
        except RuntimeError as e:
            pytest.skip(f"MKL unavailable here: {e}")
        G.clear_choices()
        other = calls_of(monkeypatch, "_numpy_gemm" if forced == "mkl" else "_mkl_run")
        A = operand(rng, (100, 100), np.float32, "c")
        C = np.empty((100, 100), np.float32)
        G.gemm(A, A, C)
        assert_gemm_close(C, A, A, C, 1.0, 0.0, np.float32)
        assert other == [] and G.choices() == {}
        monkeypatch.setenv(G.ENV_VAR, "auto")
        G.set_backend(None)
        assert G.backend_name() in ("auto", "numpy")  # numpy where MKL does not load
    finally:
        monkeypatch.undo()
        G.set_backend(previous)


def test_mkl_threads_come_from_tbb_and_the_environment_is_left_alone():
    """MKL is asked for its TBB threading layer (numba's pool), without leaving
    MKL_THREADING_LAYER in the environment: a child process, which has not preloaded libtbb,
    must not inherit it (MKL aborts a process that cannot load its layer)."""
    import textwrap
    if G.backend_name() not in ("mkl", "auto"):
        pytest.skip("MKL is not installed")
    code = textwrap.dedent("""
        import os, subprocess, sys
        import numpy as np
        from neonlike.backends.cpu import gemm as gemm
        gemm.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), np.empty((2, 2), np.float32))
        maps = open("/proc/self/maps").read()
        print("tbb" if "libmkl_tbb_thread" in maps else "other", os.environ.get("MKL_THREADING_LAYER"))
        before = gemm.set_num_threads(1)          # thread control still works on the TBB layer
        print(gemm.get_num_threads(), gemm.set_num_threads(before) == 1)
        child = subprocess.run([sys.executable, "-c", "import mkl, numpy; print('child ok')"],
                               capture_output=True, text=True)
        print(child.stdout.strip(), child.returncode)
    """)
    # os.environ, not the C-level environment, which mkl-service's import may have changed
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "MKL_THREADING_LAYER"})
    assert out.returncode == 0, out.stderr
    first, threads, second = out.stdout.splitlines()
    assert first == "tbb None", first
    assert threads == "1 True", threads
    assert second == "child ok 0", second


def test_auto_judges_long_calls_by_their_medians(monkeypatch):
    """A long call (SPIN_OK_S or more) is judged by the medians of its calls (MKL's, then
    numpy's): MKL whose fastest call wins but whose typical call is slower loses to a steadier
    numpy, and a steady MKL keeps a tie. Times come from a fake clock that each call advances."""
    monkeypatch.setattr(G._State, "rival", "numpy")
    clock = [0.0]
    monkeypatch.setattr(G.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(G.time, "sleep", lambda s: None)
    monkeypatch.setattr(G, "_spinning", lambda: False)

    def runs(seconds):
        it = iter(seconds)

        def run():
            clock[0] += next(it)
        return run
    fast_then_slow = [0.012] + [0.010, 0.010, 0.010] + [0.010, 0.016, 0.016, 0.016, 0.016]
    steady = [0.011] * 10
    # best-of alone would keep MKL (10 ms against 11); its median (16 ms) loses to numpy's 11
    assert G._time_paths(runs(fast_then_slow), runs(steady)) == "numpy"
    # numpy 5% or less faster in the median: a tie, MKL keeps it
    assert G._time_paths(runs([0.011] * 9), runs([0.0106] * 9)) == "mkl"
    # short calls keep the best-of rule (and its spin check)
    assert G._time_paths(runs([0.001] * 4), runs([0.0009] * 4)) == "numpy"
    assert G._time_paths(runs([0.001] * 4), runs([0.00099] * 4)) == "mkl"
    # a long numpy call that leaves its pool spinning must save over a quarter of MKL's time,
    # on a second timing of MKL too (4 best-of calls, then 5 + 5 for the medians; numpy's 5
    # calls are timed once)
    monkeypatch.setattr(G, "_spinning", lambda: True)
    assert G._time_paths(runs([0.016] * 14), runs([0.013] * 5)) == "mkl"
    assert G._time_paths(runs([0.016] * 14), runs([0.011] * 5)) == "numpy"
    # MKL slow on the first timing only (a core taken for a while): its second timing counts
    assert G._time_paths(runs([0.016] * 9 + [0.008] * 5), runs([0.010] * 5)) == "mkl"
