"""The engine's fast path (backends/engine.py): a statement whose structure was interned while
its tree was built runs without a walk, shared subtrees holding constants included, and a
program planned for a shared tree never runs a tree that only looks like it.

Counters only: `ENGINE.stats["walks"]` counts the statements that took the walk."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from neonlike import plan as P  # noqa: E402
from neonlike.backends import Autodiff  # noqa: E402
from neonlike.backends.cpu import program as fused_cpu  # noqa: E402

ENGINE = fused_cpu.ENGINE


def data(shape, seed=0, lo=0.5, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def walks_of(run, times=4):
    """Walks taken by `run()` on its later calls (its first runs may compile)."""
    run()
    run()
    before = ENGINE.stats["walks"]
    for _ in range(times):
        run()
    return ENGINE.stats["walks"] - before


def test_statement_takes_the_fast_path(cpu):
    s, o = cpu.array(data((10, 10))), cpu.empty((10, 10))

    def run():
        o[:] = cpu.tanh(s * 2.0 + 1.0) * s - s
    assert walks_of(run) == 0
    x = s.get()
    np.testing.assert_allclose(o.get(), np.tanh(x * 2 + 1) * x - x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pattern", ["distinct", "same", "mixed", "output in"])
def test_leaf_patterns_take_the_fast_path(cpu, pattern):
    a, b, o = cpu.array(data((4, 5))), cpu.array(data((4, 5), 1)), cpu.array(data((4, 5), 2))
    x, y, z0 = a.get(), b.get(), o.get()
    z = z0.copy()

    def run():
        nonlocal z
        if pattern == "distinct":
            o[:] = a * b + 1.0
            z = x * y + 1
        elif pattern == "same":
            o[:] = a * a + a
            z = x * x + x
        elif pattern == "mixed":
            o[:] = a * b - a / b + b
            z = x * y - x / y + y
        else:
            o[:] = o * 0.5 + a
            z = z * np.float32(0.5) + x
    assert walks_of(run) == 0
    np.testing.assert_allclose(o.get(), z, rtol=1e-5)


def test_autodiff_gradients_take_the_fast_path(cpu):
    """Gradient trees share subtrees (`b + 1` below is read by two terms) whose constants the
    tree's interned constants list once per occurrence."""
    A, B, C, D = (cpu.array(data((8, 8), seed)) for seed in range(4))
    grads = [cpu.empty((8, 8)) for _ in range(4)]
    f = ((A * B + C) * D - A / (B + 1)) * cpu.exp(-C * C) + cpu.sqrt(abs(D))
    trees = Autodiff(f, cpu).get_grad_op_tree([A, B, C, D])
    shared = [g for g in trees if len(P.walk(grads[0], g)[2]) != len(g[0].consts)]
    assert shared, "no gradient tree shares a subtree holding a constant: the test tests nothing"

    def run():
        for g, out in zip(trees, grads):
            out[:] = g
    assert walks_of(run) == 0
    a, b, c, d = (t.get().astype(np.float64) for t in (A, B, C, D))
    e = np.exp(-c * c)
    np.testing.assert_allclose(grads[1].get(), (a * d + a / (b + 1) ** 2) * e, rtol=1e-4)


def test_a_shared_program_never_runs_a_lookalike(cpu):
    """`u + u` (u = s * 2.0) and `s * 2.0 + s * 3.0` have one fast key; the program planned for
    the first computes u once, so it may run a lookalike only where the constants agree."""
    s, o = cpu.array(data((3, 4))), cpu.empty((3, 4))
    x = s.get()
    for _ in range(3):
        u = s * 2.0
        o[:] = u + u
    np.testing.assert_allclose(o.get(), 4 * x, rtol=1e-6)
    before = ENGINE.stats["walks"]
    o[:] = s * 2.0 + s * 2.0             # equal constants: the shared program runs it
    assert ENGINE.stats["walks"] == before
    np.testing.assert_allclose(o.get(), 4 * x, rtol=1e-6)
    o[:] = s * 2.0 + s * 3.0             # not equal: the walk decides (another program)
    assert ENGINE.stats["walks"] == before + 1
    np.testing.assert_allclose(o.get(), 5 * x, rtol=1e-6)


def test_signed_zero_constants_are_not_equal(cpu):
    """0.0 == -0.0, but 1/(s*0.0) and 1/(s*-0.0) differ: the shared program must not run."""
    s, o = cpu.array(data((2, 3))), cpu.empty((2, 3))
    for _ in range(3):
        u = s * 0.0
        o[:] = 1.0 / u + 1.0 / u
    assert np.all(o.get() == np.inf)
    o[:] = 1.0 / (s * 0.0) + 1.0 / (s * -0.0)
    assert np.all(np.isnan(o.get()))


def test_const_order():
    from neonlike.backends import gen_backend
    be = gen_backend("cpu")
    x = be.array(np.ones((2, 2)))
    u = x * 2.0
    assert P.const_order(u + u) == [0, 0]
    assert P.const_order(((u + 1.0) * 3.0) * u - u) == [0, 1, 2, 0, 0]
    assert P.const_order(5.0 * (u + u)) == [0, 1, 1]
    w = (x * 2.0 + 1.0) * (x * 2.0)    # equal structure, no sharing: numbered as listed
    assert P.const_order(w) == [0, 1, 2]
    for tree in (u + u, 5.0 * (u + u), w):
        walked = P.walk(x, tree)[2]
        assert [walked[k] for k in P.const_order(tree)] == list(tree[0].consts)


@pytest.mark.parametrize("form", ["assign", "out="])
def test_a_gemm_statement_takes_the_fast_path(cpu, form):
    a, b, o = cpu.array(data((6, 5))), cpu.array(data((5, 7), 1)), cpu.empty((6, 7))

    def run():
        if form == "assign":
            o[:] = cpu.dot(a, b)
        else:
            cpu.dot(a, b, out=o)
    assert walks_of(run) == 0
    np.testing.assert_allclose(o.get(), a.get() @ b.get(), rtol=1e-5)


def test_a_gemm_statement_into_its_own_operand_goes_the_safe_way(cpu):
    x = data((5, 5))
    a, b = cpu.array(x), cpu.array(data((5, 5), 1))
    c = cpu.array(x.copy())
    c[:] = cpu.dot(c, b)          # compiles the structure, then runs it again in place
    c[:] = cpu.dot(c, b)
    y = b.get()
    np.testing.assert_allclose(c.get(), x @ y @ y, rtol=1e-5)
    h = cpu.empty((5, 5), dtype=np.float64)   # another dtype: the general run converts
    for _ in range(2):
        h[:] = cpu.dot(a, b)
    np.testing.assert_allclose(h.get(), x @ y, rtol=1e-5)


def test_a_transposed_gemm_operand_is_a_view_not_a_host_copy():
    # Autodiff's dot rule makes dz @ y.T and x.T @ dz: the GEMM stage reads the transpose as a
    # view (BLAS's trans flag) instead of a host stage copying it
    from neonlike import plan as P
    from neonlike.backends import gen_backend
    from neonlike.backends.cpu.program import ENGINE
    be = gen_backend("cpu")
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 4)).astype(np.float32)
    B = rng.standard_normal((4, 3)).astype(np.float32)
    a, b, bt = be.array(A), be.array(B), be.array(B.T.copy())
    out = be.empty((4, 3))
    cases = [
        (lambda: be.dot(be.transpose(a), b), lambda: A.T @ B, (True, False)),
        (lambda: be.dot(be.transpose(a * 2.0), b) + 1.0, lambda: (2 * A).T @ B + 1, (True, False)),
        (lambda: be.dot(a, be.transpose(bt)), lambda: A @ B, (False, True)),
    ]
    for make, want, trans in cases:
        for _ in range(2):                     # interpreted, then compiled
            out[:] = make()
            np.testing.assert_allclose(out.get(), want(), rtol=1e-5)
        stages = ENGINE.programs.get(P.walk(out, make())[0]).plan.stages
        assert [s.kind for s in stages if s.kind is P.StageKind.HOST] == []
        assert [s.trans for s in stages if s.kind is P.StageKind.GEMM] == [trans]
    want = A.T @ A
    a[:] = be.dot(be.transpose(a), a)          # the output is the transposed operand
    np.testing.assert_allclose(a.get(), want, rtol=1e-5)


def test_a_prepared_statement_walks_once_and_follows_its_tensors(monkeypatch):
    # Engine.prepare: the ngraph transformers' statements (the same tree objects each call)
    from neonlike.backends import gen_backend
    from neonlike.backends.cpu.program import ENGINE
    monkeypatch.setattr(ENGINE, "jit_after", 2)        # interpreted first, then compiled
    be = gen_backend("cpu")
    rng = np.random.default_rng(5)
    x = be.array(rng.standard_normal((6, 4)).astype(np.float32))
    w = be.array(rng.standard_normal((4, 3)).astype(np.float32))
    s = be.array(np.float32([[0.5, 1.5, 2.5]]))
    out = be.empty((6, 3))
    trees = [be.tanh(be.dot(x, w) * 2.0 + s) - s,          # GEMM + fused: no fast runner
             be.sig(x * 3.0 + 1.0) * x,                    # one fused stage: the fast runner
             be.sum(x * x, axis=1) * 0.5]
    outs = [out, be.empty((6, 4)), be.empty((6, 1))]
    refs = [lambda X, W, S: np.tanh(X @ W * 2 + S) - S,
            lambda X, W, S: 1 / (1 + np.exp(-(X * 3 + 1))) * X,
            lambda X, W, S: (X * X).sum(axis=1, keepdims=True) * 0.5]
    runs = [ENGINE.prepare(o, t) for o, t in zip(outs, trees)]
    for call in range(4):
        X = rng.standard_normal((6, 4)).astype(np.float32)
        x.set(X)                                           # the tensors' values change
        walks = ENGINE.stats["walks"]
        for run in runs:
            run()
        if call >= 2:
            assert ENGINE.stats["walks"] == walks          # compiled: no walk, no execute
        for o, ref in zip(outs, refs):
            np.testing.assert_allclose(o.get(), ref(X, w.get(), s.get()), rtol=1e-4, atol=1e-6)
    empty = be.empty((0, 4))
    run = ENGINE.prepare(empty, be.array(np.zeros((0, 4), np.float32)) * 2.0)
    run()
    run()                                                  # a zero size keeps going through execute


def test_a_prepared_plan_of_several_stages_runs_bound(monkeypatch):
    # Program.bind: a prepared statement of GEMM, reduction, HOST and elementwise stages runs its
    # stages over buffers and temps resolved once (Program.run is not called), and follows its
    # tensors' values; an output overlapping an operand, and a fresh target, go through run
    from neonlike.backends import gen_backend
    from neonlike.backends.cpu.program import ENGINE, Program
    monkeypatch.setattr(ENGINE, "jit_after", 1)
    be = gen_backend("cpu")
    rng = np.random.default_rng(6)
    x = be.array(rng.standard_normal((6, 4)).astype(np.float32))
    w = be.array(rng.standard_normal((4, 3)).astype(np.float32))
    v = be.array(rng.standard_normal((6, 3)).astype(np.float32))
    cases = [
        # momentum update through a GEMM: the output is an operand (the same view)
        (v, lambda: 0.9 * v - 0.1 * be.dot(be.tanh(x * 2.0), w),
         lambda X, W, V: 0.9 * V - 0.1 * (np.tanh(X * 2) @ W)),
        # two reductions of different axes: two fused stages
        (be.empty((1, 1)), lambda: be.sum(be.max(x, axis=0) * 2.0, axis=1),
         lambda X, W, V: (X.max(axis=0, keepdims=True) * 2).sum(axis=1, keepdims=True)),
        # a transpose of a tree: a HOST stage between fused ones
        (be.empty((4, 6)), lambda: be.transpose(x * 3.0 + 1.0) - 1.0,
         lambda X, W, V: (X * 3 + 1).T - 1),
        # softmax over a GEMM's result
        (be.empty((6, 3)), lambda: be.exp(be.dot(x, w)) / be.sum(be.exp(be.dot(x, w)), axis=1),
         lambda X, W, V: np.exp(X @ W) / np.exp(X @ W).sum(axis=1, keepdims=True)),
    ]
    runs = []
    for out, tree, _ in cases:
        runs.append(ENGINE.prepare(out, tree()))
    calls = []
    real_run = Program.run
    monkeypatch.setattr(Program, "run", lambda *a: calls.append(1) or real_run(*a))
    V = v.get().astype(np.float64)
    for call in range(5):
        X = rng.standard_normal((6, 4)).astype(np.float32)
        x.set(X)
        if call == 2:
            calls.clear()
        for run, (out, _, ref) in zip(runs, cases):
            want = ref(X.astype(np.float64), w.get().astype(np.float64), V)
            run()
            np.testing.assert_allclose(out.get(), want, rtol=1e-4, atol=1e-5)
            if out is v:
                V = want
    assert calls == []                            # from the third call on: all bound
    # a fresh target goes through run (the bound runner is bound to out's buffers)
    target = be.empty((4, 6))
    runs[2](target)
    assert calls == [1]
    np.testing.assert_allclose(target.get(), (X * 3 + 1).T - 1, rtol=1e-5)
    # an output overlapping an operand other than as the same view: never bound
    o = be.array(rng.standard_normal((6, 6)).astype(np.float32))
    w6 = be.array(rng.standard_normal((6, 3)).astype(np.float32))
    left = o[:, :3]                                 # a view of part of an operand
    run = ENGINE.prepare(left, 2.0 * be.dot(o, w6) + 1.0)
    calls.clear()
    for _ in range(3):
        O = o.get().astype(np.float64)
        run()
        np.testing.assert_allclose(o.get()[:, :3], 2 * O @ w6.get() + 1, rtol=1e-4, atol=1e-4)
    assert len(calls) == 3


def test_bind_refuses_large_temps_and_single_stages(monkeypatch):
    # a bound statement holds its temps between calls: not past BIND_TEMPS_MAX bytes
    from neonlike import plan as P
    from neonlike.backends import gen_backend
    from neonlike.backends.cpu import program
    be = gen_backend("cpu")
    x, w = be.array(data((8, 4))), be.array(data((4, 3), seed=1))
    out = be.empty((8, 3))
    tree = be.tanh(be.dot(x * 2.0, w))            # fused, GEMM, fused: temps of 32 + 24 floats
    out[:] = tree
    key, tensors, consts, nodes = P.walk(out, tree)
    prog = program.ENGINE.programs.get(key)
    assert prog.bind(out, tensors, consts, nodes) is not None
    monkeypatch.setattr(program, "BIND_TEMPS_MAX", (32 + 24) * 4 - 1)
    assert prog.bind(out, tensors, consts, nodes) is None
    one = be.empty((8, 4))
    one[:] = x * 2.0
    key, tensors, consts, nodes = P.walk(one, x * 2.0)
    assert program.ENGINE.programs.get(key).bind(one, tensors, consts, nodes) is None


AXPBY_SPELLINGS = [
    # (tree builder, alpha, beta as the reference computes them)
    (lambda be, o, x, y, a, b: b * o - a * be.dot(x, y), lambda a, b: (-a, b)),
    (lambda be, o, x, y, a, b: o + be.dot(x, y), lambda a, b: (1.0, 1.0)),
    (lambda be, o, x, y, a, b: be.dot(x, y) * a + o * b, lambda a, b: (a, b)),
    (lambda be, o, x, y, a, b: a * be.dot(x, y) - o, lambda a, b: (a, -1.0)),
    (lambda be, o, x, y, a, b: o * b + be.dot(x, y), lambda a, b: (1.0, b)),
]


@pytest.mark.parametrize("spelling", range(len(AXPBY_SPELLINGS)))
def test_an_update_through_a_product_is_one_scaled_gemm(spelling):
    # out[:] = beta*out + alpha*(x @ y), in its spellings: one GEMM stage writing the output
    # with alpha and beta (no temp, no pass over it); the constants are read each call (the
    # structure is cached, the values are not), on the statement path and the prepared one
    from neonlike import plan as P
    from neonlike.backends import gen_backend
    be = gen_backend("cpu")
    build, coefs = AXPBY_SPELLINGS[spelling]
    rng = np.random.default_rng(spelling)
    O = rng.standard_normal((6, 5))
    o = be.array(O.astype(np.float32))
    x, y = (be.array(rng.standard_normal(s).astype(np.float32)) for s in ((6, 4), (4, 5)))
    X, Y = x.get().astype(np.float64), y.get().astype(np.float64)
    O = o.get().astype(np.float64)
    for call, (a, b) in enumerate([(0.1, 0.9), (0.5, 1.5), (2.0, -0.25), (0.1, 0.9)]):
        o[:] = build(be, o, x, y, a, b)
        alpha, beta = coefs(a, b)
        O = alpha * (X @ Y) + beta * O
        np.testing.assert_allclose(o.get(), O, rtol=1e-5, atol=1e-5)
    tree = build(be, o, x, y, 0.1, 0.9)
    key, tensors, consts, nodes = P.walk(o, tree)
    stages = ENGINE.programs.get(key).plan.stages
    assert [(s.kind, s.out) for s in stages] == [(P.StageKind.GEMM, len(tensors))]
    run = ENGINE.prepare(o, tree)
    for _ in range(3):
        run()
        alpha, beta = coefs(0.1, 0.9)
        O = alpha * (X @ Y) + beta * O
        np.testing.assert_allclose(o.get(), O, rtol=1e-5, atol=1e-5)


def test_a_scaled_gemm_keeps_the_trees_meaning():
    from neonlike.backends import gen_backend
    be = gen_backend("cpu")
    rng = np.random.default_rng(9)
    W, X = (rng.standard_normal(s).astype(np.float32) for s in ((5, 5), (5, 5)))
    w, x = be.array(W), be.array(X)
    # the output is an operand of the product: the product is of the values before the call
    for _ in range(3):
        Wd = w.get().astype(np.float64)
        w[:] = w - 0.1 * be.dot(w, be.transpose(x))
        np.testing.assert_allclose(w.get(), Wd - 0.1 * Wd @ X.T, rtol=1e-5, atol=1e-5)
    # operands that are trees, transposed operands
    for _ in range(3):
        Wd = w.get().astype(np.float64)
        w[:] = 0.5 * w + be.dot(be.transpose(x * 2.0), be.tanh(x))
        np.testing.assert_allclose(w.get(), 0.5 * Wd + (X * 2).T @ np.tanh(X), rtol=1e-5,
                                   atol=1e-5)
    # a zero alpha or beta: inf and NaN spread as the elementwise ops spread them
    for _ in range(3):
        w[:] = np.inf
        w[:] = 0.0 * w + 0.5 * be.dot(x, x)
        assert np.isnan(w.get()).all()
        x_nan = be.array(np.full((5, 5), np.nan, np.float32))
        w[:] = 1.0
        w[:] = 2.0 * w - 0.0 * be.dot(x_nan, x)
        assert np.isnan(w.get()).all()
    # a product of another shape (broadcast over the output): not a scaled GEMM, still right
    row = be.array(rng.standard_normal((1, 5)).astype(np.float32))
    for _ in range(3):
        w[:] = 1.0
        w[:] = w + be.dot(row, x)
        np.testing.assert_allclose(w.get(), np.broadcast_to(1.0 + row.get() @ X, (5, 5)),
                                   rtol=1e-5)
    # float16 output: computed in float32, no scaled GEMM into it
    h = be.array(np.ones((5, 5), np.float16))
    for _ in range(3):
        H = h.get().astype(np.float64)
        h[:] = 0.5 * h + be.dot(x, x)
        np.testing.assert_allclose(h.get(), 0.5 * H + X.astype(np.float64) @ X, rtol=2e-3,
                                   atol=2e-2)
