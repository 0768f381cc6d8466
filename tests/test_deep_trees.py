"""Deep and wide trees, and outputs of rank 21 and more (issue 13, points 4 and 5).

A tree of any depth is walked, planned, rendered and shown without Python recursion; no FUSED
stage exceeds the plan's caps (a stage over them is split into stages with temps, which share
their kernels where they have one structure); a rank-21..32 statement computes right on its
interpreted first run and its compiled second run.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import neonlike
from neonlike import plan as P
from neonlike.backends import engine, gen_backend

numba = pytest.importorskip("numba")
from neonlike.backends.cpu import program as cpu_program  # noqa: E402
from neonlike.backends.cpu import render as render_numba  # noqa: E402
from neonlike.backends.gpu import render as render_cuda  # noqa: E402


@pytest.fixture
def two_runs(monkeypatch):
    """The CPU engine as shipped: a structure's first run interpreted, its second compiled; no
    plan observers (the suite's CUDA check would render hundreds of stages for nvcc)."""
    monkeypatch.setattr(cpu_program.ENGINE, "jit_after", 2)
    monkeypatch.setattr(engine, "PLAN_OBSERVERS", [])
    neonlike.clear_caches()


def _alternating(be, x, depth):
    t, ref = x, x.get().astype(np.float64)
    for i in range(depth):
        if i % 2 == 0:
            t, ref = be.tanh(t), np.tanh(ref)
        else:
            t, ref = t * 1.0001, ref * 1.0001
    return t, ref


def _stage_cost(stage):
    """A FUSED stage's cost as the planner counts it: ops and constants, each buffer twice."""
    ops = sum(P._OP_COST.get(ins.op, 1) for ins in stage.program if ins.op != "load")
    bufs = {ins.arg for ins in stage.program if ins.op == "load"}
    return ops + P._LOAD_COST * len(bufs), len(bufs)


def _assert_capped(plan):
    fused = [st for st in plan.stages if st.kind is P.StageKind.FUSED]
    for st in fused:
        cost, bufs = _stage_cost(st)
        if st.reduce_axes:
            assert cost <= P.REDUCE_COST_MAX and bufs <= P.REDUCE_BUFFERS_MAX
        else:
            assert cost <= P.STAGE_COST_MAX and bufs <= P.STAGE_BUFFERS_MAX
    return fused


def test_a_deep_tree_is_walked_planned_rendered_and_shown_without_recursion():
    """20,000 levels under Python's default recursion limit: walk, plan, render, repr, pp and
    traverse; the plan splits the tree into capped stages of a few distinct kernels."""
    be = gen_backend("cpu", datatype=np.float32, rng_seed=0)
    x = be.array(np.linspace(-1, 1, 100, dtype=np.float32).reshape(10, 10))
    t, _ = _alternating(be, x, 20000)
    out = be.empty((10, 10))
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(1000)
        key, tensors, consts, nodes = P.walk(out, t)
        plan = P.make_plan(out, t, tensors, nodes, render_numba.RENDERABLE)
        meta = P.buffer_meta(plan, tensors, out, nodes)
        sources = {render_numba.render(st, meta, "float32", np.dtype(np.float32), "k")[0]
                   for st in plan.stages}
        assert repr(t).count("'tanh'") == 10000
        assert t.pp().count("tanh(") == 10000
        assert len(t.traverse([])) == 1 + 20000 + 10000
    finally:
        assert sys.getrecursionlimit() == 1000      # make_plan no longer raises it
        sys.setrecursionlimit(limit)
    fused = _assert_capped(plan)
    assert len(fused) > 100 and len(plan.temps) == len(fused) - 1
    # every node's op once in all: the chain's stages compute it once, in order
    assert sum(ins.op == "tanh" for st in fused for ins in st.program) == 10000
    assert len(sources) <= 3                        # the stages share their kernels


def test_depth_20000_runs_interpreted_then_compiled(two_runs):
    be = gen_backend("cpu", datatype=np.float32, rng_seed=0)
    x = be.array(np.linspace(-1, 1, 100, dtype=np.float32).reshape(10, 10))
    t, ref = _alternating(be, x, 20000)
    out = be.empty((10, 10))
    stats = cpu_program.ENGINE.stats
    before = stats["interpreted"]
    out[:] = t
    assert stats["interpreted"] == before + 1
    np.testing.assert_allclose(out.get(), ref, rtol=1e-4, atol=1e-5)
    out[:] = -1.0
    out[:] = t                                       # compiled: hundreds of stages, 3 kernels
    assert stats["interpreted"] == before + 1
    np.testing.assert_allclose(out.get(), ref, rtol=1e-4, atol=1e-5)
    program = cpu_program.ENGINE.programs.get(P.walk(out, t)[0])
    assert len(program.plan.stages) > 100
    assert len({k.source for k in program.kernels.values()}) <= 3


@pytest.mark.parametrize("reduce", [False, True])
def test_600_distinct_leaves_split_under_the_buffer_cap(two_runs, reduce):
    be = gen_backend("cpu", datatype=np.float32, rng_seed=0)
    rng = np.random.default_rng(0)
    xs = [rng.uniform(0, 1, (10, 10)).astype(np.float32) for _ in range(600)]
    ts = [be.array(v) for v in xs]
    t = ts[0]
    for u in ts[1:]:
        t = t + u
    ref = np.sum(np.array(xs, dtype=np.float64), axis=0)
    if reduce:
        t, ref = be.sum(t, axis=1), ref.sum(axis=1, keepdims=True)
    out = be.empty(ref.shape)
    for _ in range(2):                               # interpreted, then compiled
        out[:] = -1.0
        out[:] = t
        np.testing.assert_allclose(out.get(), ref, rtol=1e-5)
    program = cpu_program.ENGINE.programs.get(P.walk(out, t)[0])
    fused = _assert_capped(program.plan)
    assert len(fused) > 600 // P.STAGE_BUFFERS_MAX
    assert len({k.source for k in program.kernels.values()}) <= 4
    assert (fused[-1].reduce_axes == (1,)) is reduce


def test_a_split_plan_renders_for_cuda():
    """The GPU renderer takes the same capped stages (the plan is device-independent)."""
    be = gen_backend("cpu", datatype=np.float32, rng_seed=0)
    x = be.array(np.ones((4, 5), dtype=np.float32))
    t, _ = _alternating(be, x, 400)
    t = be.sum(t, axis=0)
    out = be.empty((1, 5))
    key, tensors, consts, nodes = P.walk(out, t)
    plan = P.make_plan(out, t, tensors, nodes, render_cuda.RENDERABLE)
    fused = _assert_capped(plan)
    assert len(fused) > 5
    meta = P.buffer_meta(plan, tensors, out, nodes, dtypes=True)
    names = set()
    for st in fused:
        k = render_cuda.render(st, meta, "float32", np.dtype(np.float32), "t")
        assert k.source.count(f"void {k.name}(") == 1
        assert k.bufs == tuple(sorted({i.arg for i in st.program if i.op == "load"}))
        names.add(k.name)
    # the stages number their buffers locally: the split chain shares its CUDA kernels, as the
    # CPU's (else each of the stages is a kernel of its own for nvcc to compile)
    assert len(names) <= 4, f"{len(names)} distinct CUDA kernels for {len(fused)} stages"


def _rank_case(n, rng):
    """A rank-n shape with size-1 axes, and a second operand broadcasting over more of them."""
    shape = tuple(2 if k % 3 == 0 else 1 for k in range(n - 1)) + (3,)
    bshape = tuple(1 if k % 2 else s for k, s in enumerate(shape))
    return rng.random(shape, dtype=np.float32), rng.random(bshape, dtype=np.float32)


@pytest.mark.parametrize("n", [20, 21, 32])
def test_high_rank_statements_compute_on_both_runs(two_runs, n):
    be = gen_backend("cpu", datatype=np.float32, rng_seed=0)
    av, bv = _rank_case(n, np.random.default_rng(n))
    a, b = be.array(av), be.array(bv)
    kept, lanes = tuple(range(n - 1)), tuple(range(1, n))  # innermost axis kept / reduced
    cases = [(lambda: be.tanh(a) * b + 1.0, np.tanh(av) * bv + 1.0),
             (lambda: be.sum(a * b + 1.0, axis=kept), np.sum(av * bv + 1.0, kept, keepdims=True)),
             (lambda: be.max(a - b, axis=lanes), np.max(av - bv, lanes, keepdims=True))]
    for tree, ref in cases:
        out = be.empty(ref.shape)
        for run in range(2):                         # interpreted, then compiled
            out[:] = -1.0
            out[:] = tree()
            np.testing.assert_allclose(out.get(), ref, rtol=2e-5, err_msg=f"run {run}")


def test_a_rank_21_statement_runs_on_every_core(two_runs):
    """Large enough for the parallel variant: prange over the leading axes' flat index."""
    be = gen_backend("cpu", datatype=np.float32, rng_seed=0)
    shape = (2,) * 17 + (1, 1, 1, 3)
    rng = np.random.default_rng(0)
    av, bv = rng.random(shape, dtype=np.float32), rng.random(shape[:-1] + (1,), dtype=np.float32)
    a, b = be.array(av), be.array(bv)
    out = be.empty(shape)
    for _ in range(2):
        out[:] = a * b - b
        np.testing.assert_allclose(out.get(), av * bv - bv, rtol=1e-6)
    program = cpu_program.ENGINE.programs.get(P.walk(out, a * b - b)[0])
    assert out.size >= program.parallel_min
    source = program.kernels[0].source
    assert "for i_flat in prange(" in source and "for i20 in range(" in source
