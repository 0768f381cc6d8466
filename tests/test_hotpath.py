"""neonlike._hotpath, the statement's hot path in C, against the Python it stands for.

Each C piece wraps a Python function that stays the definition (`__wrapped__`): the node makers
(optree.elementwise_maker), the statement key (engine.statement_key), the flat stage's runner
(cpu/program.py) and Tensor.__setitem__. Here each is checked to give what its Python function
gives, on the hot cases and on every case it hands back; results are checked against numpy
float64; reference counts are checked not to grow; and NEONLIKE_HOTPATH=0 is checked to give the
pure-Python path the same answers.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neonlike import optree
from neonlike.backends import engine as E
from neonlike.ops import Op
from neonlike.optree import OpDict, OpTreeNode, Operators
from neonlike.tensor import Tensor

HOT = optree.hotpath()
needs_hot = pytest.mark.skipif(HOT is None, reason="neonlike._hotpath is not built here "
                               "(no C compiler at install, or NEONLIKE_HOTPATH=0)")
FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture],
                      deadline=None, max_examples=150)


def test_the_extension_is_built_where_a_c_compiler_is():
    """setup.py builds it as optional: a silent build failure must not pass unnoticed here."""
    if os.environ.get("NEONLIKE_HOTPATH", "1") == "0":
        pytest.skip("NEONLIKE_HOTPATH=0 turns the C hot path off")
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) on this machine: the Python path is the one tested")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no Python headers (Python.h) on this machine: the Python path is the one tested")
    assert HOT is not None, "neonlike._hotpath did not build; run pip install -e . and read its log"
    assert type(Operators.__add__).__name__ == "Maker"
    assert type(Tensor.__setitem__).__name__ == "Setitem"


# ---------------------------------------------------------------- node makers: C == Python

def _same_node(a, b):
    """Two nodes made for the same operands are the same: op dict (items, sid, leaves by
    identity, consts) and children by identity."""
    assert type(a) is type(b) is OpTreeNode
    da, db = a[0], b[0]
    assert type(da) is type(db) is OpDict
    assert list(da.items()) == list(db.items())
    assert da.sid == db.sid
    assert len(da.leaves) == len(db.leaves) and all(x is y for x, y in zip(da.leaves, db.leaves))
    assert da.consts == db.consts and [type(c) for c in da.consts] == [type(c) for c in db.consts]
    for x, y in ((a[1], b[1]), (a[2], b[2])):   # operands by identity, numbers by value
        assert x is y if isinstance(x, Operators) else (type(x), x) == (type(y), y) or \
            (x != x and y != y)


def _call(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001  the comparison is of what each raises
        return "raised", (type(e), str(e))


def _operands(be):
    """Hot-path operands of every kind, and ones the C maker hands back to Python."""
    a = be.array(np.linspace(-2, 2, 12).reshape(3, 4), name="a")
    b = be.array(np.linspace(1, 3, 4).reshape(1, 4), name="b")
    c = be.array(np.arange(3.0).reshape(3, 1), name="c")
    d = be.array(np.ones((2, 5)), name="d")
    hot = [a, b, c, d, a * 2.0, be.exp(b), c - a, 2.0, -0.0, 3, 0, 1e300, float("nan"),
           float("inf")]
    handed_back = [None, True, np.float32(1.5), np.float64(2.0), np.array(3.0), 10 ** 400, "x",
                   np.ones((3, 4)), [1.0], OpTreeNode({"op": "add", "shape": (3, 4)}, a, a)]
    return hot, handed_back


DUNDERS = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul", Op.DIV: "truediv", Op.POW: "pow",
           Op.AND: "and"}


@needs_hot
@FIXTURE_OK
@given(data=st.data())
def test_binary_makers_make_the_python_makers_nodes(cpu, data):
    hot, back = _operands(cpu)
    binary = [op for op, m in optree._MAKERS.items() if type(m).__name__ == "Maker"
              and op not in (Op.NEG, Op.ABS) and _call(m.__wrapped__, hot[0], hot[0])[1] is not None]
    assert len(binary) >= 10
    op = data.draw(st.sampled_from(binary + list(DUNDERS)))
    x, y = data.draw(st.sampled_from(hot + back)), data.draw(st.sampled_from(hot + back))
    fns = [optree._MAKERS[op]]
    if op in DUNDERS and data.draw(st.booleans()):
        fns = [getattr(Operators, f"__{DUNDERS[op]}__"), getattr(Operators, f"__r{DUNDERS[op]}__")]
    for fn in fns:
        assert type(fn).__name__ == "Maker"
        got, want = _call(fn, x, y), _call(fn.__wrapped__, x, y)
        assert got[0] == want[0], (fn, x, y, got, want)
        if isinstance(got[1], OpTreeNode):
            _same_node(got[1], want[1])
        else:
            assert got == want or (got[1] is None and want[1] is None), (fn, x, y, got, want)


@needs_hot
def test_unary_makers_and_their_hand_backs(cpu):
    hot, back = _operands(cpu)
    for op in (Op.NEG, Op.EXP, Op.TANH, Op.ABS, Op.SQRT):
        make = optree._MAKERS[op]
        assert type(make).__name__ == "Maker"
        for x in hot + back:
            got, want = _call(make, x), _call(make.__wrapped__, x)
            if got[0] == "ok" and isinstance(got[1], OpTreeNode):
                _same_node(got[1], want[1])
            else:
                assert got == want, (op, x)
        # a unary maker given a second operand hands it back (the Python maker says None)
        assert make(hot[0], hot[1]) is None and make.__wrapped__(hot[0], hot[1]) is None
        # keywords: the Python maker's
        _same_node(make(x=hot[0]), make.__wrapped__(x=hot[0]))


@needs_hot
def test_operator_methods_keep_their_python_faces(cpu):
    assert Operators.__add__.__name__ == "__add__" and Operators.__rsub__.__name__ == "__rsub__"
    a = cpu.array(np.ones((2, 2)))
    bound = a.__add__
    _same_node(bound(1.0), Operators.__add__.__wrapped__(a, 1.0))
    assert "Maker" in repr(type(Operators.__add__))
    # the shape error is the Python maker's, naming the op and both shapes
    with pytest.raises(ValueError, match=r"add.*\(2, 2\).*\(3, 1\)|add.*\(3, 1\).*\(2, 2\)"):
        a + cpu.array(np.ones((3, 1)))
    with pytest.raises(TypeError, match="numpy array of shape"):
        a * np.ones((2, 2))


@needs_hot
def test_leaves_past_the_limit_give_no_structure(cpu):
    x = cpu.array(np.ones((2, 2)))
    tree = x
    for _ in range(optree.LEAVES_MAX):
        tree = tree + x
    assert tree[0].sid is None and tree[0].leaves == () and tree[0].consts == ()
    out = cpu.empty((2, 2))
    out[:] = tree
    np.testing.assert_array_equal(out.get(), np.full((2, 2), optree.LEAVES_MAX + 1.0))


# ---------------------------------------------------------------- statement key: C == Python

@needs_hot
@FIXTURE_OK
@given(pattern=st.lists(st.integers(0, 3), min_size=1, max_size=40), out_slot=st.integers(-1, 3))
def test_statement_key_is_the_python_key(cpu, pattern, out_slot):
    ts = [cpu.array(np.full((2, 3), float(i))) for i in range(4)]
    tree = ts[pattern[0]] * 1.0
    for i in pattern[1:]:
        tree = tree + ts[i]
    out = ts[out_slot] if out_slot >= 0 else cpu.empty((2, 3))
    got, want = HOT.statement_key(tree[0], out), E.statement_key(tree[0], out)
    if len(tree[0].leaves) > 32:
        assert got is NotImplemented
    else:
        assert got[0] == want[0]
        assert len(got[1]) == len(want[1]) and all(a is b for a, b in zip(got[1], want[1]))


@needs_hot
def test_statement_key_without_structure(cpu):
    x = cpu.array(np.ones((2, 2)))
    assert HOT.statement_key({"op": "add"}, x) is None           # not an OpDict
    loose = OpTreeNode({"op": "add", "shape": (2, 2)}, x, x)      # made without build()
    assert HOT.statement_key(loose[0], x) is None


# ---------------------------------------------------------------- statements: values and hand-backs

def _check(out, want):
    np.testing.assert_allclose(out.get().astype(np.float64), want, rtol=2e-6, atol=1e-6)


def test_hot_statements_against_numpy(cpu):
    be = cpu
    rng = np.random.default_rng(0)
    s_np = rng.uniform(-2, 2, (100, 1)).astype(np.float32)
    s, o = be.array(s_np), be.empty((100, 1))
    s64 = s_np.astype(np.float64)
    for k in range(4):              # interpreted first, compiled, then the runners' fast paths
        o[:] = be.tanh(s * 2.0 + float(k)) * s - s
        _check(o, np.tanh(s64 * 2.0 + k) * s64 - s64)
    # in place: the output is a leaf
    t = be.array(s_np)
    for k in range(3):
        t[:] = t * 0.5 + 1.0
    _check(t, ((s64 * 0.5 + 1) * 0.5 + 1) * 0.5 + 1)


def test_views_and_overlaps_take_the_python_path(cpu):
    """Buffers that are not plain flat memory, and outputs sharing an operand's memory, are
    handed back to the Python runner; the values are numpy's either way."""
    be = cpu
    base_np = np.arange(24, dtype=np.float32).reshape(4, 6) / 7
    for _ in range(3):
        base = be.array(base_np)
        left, right = base[:, 0:3], base[:, 3:6]       # strided views of one array
        out = be.empty((4, 3))
        out[:] = left * 2.0 + right
        _check(out, base_np[:, 0:3].astype(np.float64) * 2 + base_np[:, 3:6])
        right[:] = left + 1.0                           # output and input share memory
        want = base_np.astype(np.float64).copy()
        want[:, 3:6] = want[:, 0:3] + 1
        _check(base, want)
        t = be.array(base_np[:3, :3].copy())
        u = be.empty((3, 3))
        u[:] = t.T * 1.0 + 0.0                           # a transposed operand
        _check(u, base_np[:3, :3].T.astype(np.float64))


def test_reduction_statements_take_entry_points_only_on_plain_buffers(cpu):
    """A statement with reductions runs its n-d kernel's compiled entry point once a plain call
    has found it; strided and transposed operands of the same structure, and an output that is
    a row of a larger array, still go through numba's dispatcher and give numpy's values (the
    entry point of the 'C' layout indexes without strides)."""
    be = cpu
    rng = np.random.default_rng(3)
    x_np = rng.uniform(-2, 2, (6, 8)).astype(np.float32)
    x64 = x_np.astype(np.float64)
    x, col, rows = be.array(x_np), be.empty((6, 1)), be.empty((6, 8))
    for k in range(4):                                  # interpreted, compiled, entry points
        col[:] = be.sum(x * float(k + 1), axis=1)
        _check(col, (x64 * (k + 1)).sum(axis=1, keepdims=True))
        rows[:] = be.exp(x - be.max(x, axis=0)) + float(k)
        _check(rows, np.exp(x64 - x64.max(axis=0, keepdims=True)) + k)
    wide_np = rng.uniform(-2, 2, (6, 16)).astype(np.float32)
    wide = be.array(wide_np)
    strided = wide[:, ::2]                              # same shape, every other column
    col[:] = be.sum(strided * 3.0, axis=1)
    _check(col, (wide_np[:, ::2].astype(np.float64) * 3).sum(axis=1, keepdims=True))
    sq_np = rng.uniform(-2, 2, (8, 6)).astype(np.float32)
    col[:] = be.sum(be.array(sq_np).T * 2.0, axis=1)    # a transposed operand
    _check(col, (sq_np.T.astype(np.float64) * 2).sum(axis=1, keepdims=True))
    big = be.zeros((6, 4))
    big[:, 1:2] = be.sum(x * 5.0, axis=1)               # the output a column of a larger array
    want = np.zeros((6, 4))
    want[:, 1:2] = (x64 * 5).sum(axis=1, keepdims=True)
    _check(big, want)
    rows[:] = be.exp(x - be.max(x, axis=0)) + 1.0       # and back on the entry point
    _check(rows, np.exp(x64 - x64.max(axis=0, keepdims=True)) + 1)


def test_broadcast_assign_and_other_values_take_the_python_path(cpu):
    be = cpu
    row = be.array(np.arange(3, dtype=np.float32).reshape(1, 3))
    out = be.empty((4, 3))
    for _ in range(3):
        out[:] = row * 2.0                             # tree shape (1, 3) broadcast into (4, 3)
        _check(out, np.tile(np.arange(3.0) * 2, (4, 1)))
        out[:] = 1.5
        _check(out, np.full((4, 3), 1.5))
        out[:] = np.ones((4, 3), np.float32)
        _check(out, np.ones((4, 3)))
        out[1:3] = row + 1.0
        want = np.ones((4, 3))
        want[1:3] = np.arange(3.0) + 1
        _check(out, want)


def test_a_failed_statement_leaves_its_output_untouched(cpu):
    be = cpu
    x, out = be.array(np.ones((2, 3), np.float32)), be.array(np.full((2, 3), 7.0, np.float32))
    for _ in range(3):
        out[:] = x + 1.0
    out[:] = be.array(np.full((2, 3), 7.0, np.float32)) * 1.0
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)|\(3, 2\).*\(2, 3\)"):
        out[:] = be.array(np.ones((3, 2), np.float32)) + 1.0
    _check(out, np.full((2, 3), 7.0))


@needs_hot
def test_the_runner_is_the_c_runner_and_hands_back(cpu):
    be = cpu
    s, o = be.array(np.ones((8, 1), np.float32)), be.empty((8, 1))
    for _ in range(4):
        o[:] = s * 3.0 - 1.0
    runners = be._runners
    assert runners is not None
    key, tensors = E.statement_key((s * 3.0 - 1.0)[0], o)
    runner = runners[key]
    assert type(runner).__name__ == "FlatRunner" and tensors == (s,)
    assert runner(o, (s,), (3.0, 1.0)) is True
    # the wrong number of constants: handed to the Python runner, which declines
    assert runner(o, (s,), ()) is False and runner.__wrapped__(o, (s,), ()) is False


@needs_hot
def test_no_reference_grows(cpu):
    be = cpu
    s, o = be.array(np.ones((16, 1), np.float32)), be.empty((16, 1))
    c = 2.5
    for _ in range(5):
        o[:] = be.tanh(s * c + 1) * s - s
    before = (sys.getrefcount(s), sys.getrefcount(o), sys.getrefcount(c), sys.getrefcount(be))
    for _ in range(2000):
        o[:] = be.tanh(s * c + 1) * s - s
        _ = 3.0 - s, -s, s * np.float32(2)       # hand-backs too
    del _
    after = (sys.getrefcount(s), sys.getrefcount(o), sys.getrefcount(c), sys.getrefcount(be))
    assert after == before


def test_the_python_path_gives_the_same_values():
    """NEONLIKE_HOTPATH=0: no C maker, no C runner, no C __setitem__; the same statement values."""
    code = (
        "import numpy as np\n"
        "from neonlike import gen_backend, optree\n"
        "from neonlike.tensor import Tensor\n"
        "be = gen_backend('cpu')\n"
        "s = be.array(np.linspace(-2, 2, 50, dtype=np.float32).reshape(50, 1)); o = be.empty((50, 1))\n"
        "for _ in range(4): o[:] = be.tanh(s * 2.0 + 1.0) * s - s\n"
        "print(optree.hotpath() is None, type(Tensor.__setitem__).__name__)\n"
        "print(repr(o.get().astype(np.float64).tobytes().hex()))\n")
    env = dict(os.environ)
    runs = {}
    for flag in ("0", "1"):
        env["NEONLIKE_HOTPATH"] = flag
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        runs[flag] = r.stdout.splitlines()
    assert runs["0"][0] == "True function"
    assert runs["0"][1] == runs["1"][1]
    x = np.linspace(-2, 2, 50, dtype=np.float32).astype(np.float64)
    got = np.frombuffer(bytes.fromhex(eval(runs["0"][1])), np.float64)
    np.testing.assert_allclose(got, np.tanh(x * 2 + 1) * x - x, rtol=2e-6, atol=1e-6)
    assert not math.isnan(got.sum())


def test_trees_the_c_key_leaves_to_python_stay_on_the_fast_path(cpu):
    """More leaves than the C key compares (32): the engine makes the key in Python and still
    runs the statement's runner, with no walk."""
    from neonlike.backends.cpu import program
    xs = [cpu.array(np.full((4, 1), float(i), np.float32)) for i in range(3)]
    tree = xs[0] * 1.0
    for i in range(39):
        tree = tree + xs[i % 3]
    assert len(tree[0].leaves) == 40
    out = cpu.empty((4, 1))
    for _ in range(3):
        out[:] = tree
    walks = program.ENGINE.stats["walks"]
    for _ in range(5):
        out[:] = tree
    assert program.ENGINE.stats["walks"] == walks
    _check(out, np.full((4, 1), 0.0 + sum(float(i % 3) for i in range(39))))


def test_an_output_read_as_an_operand_is_read_through_out(cpu):
    """`p[:] = p - lr*v`: the kernel reads p through its output argument (two numba arguments
    on one memory keep LLVM's loop scalar); values match numpy wherever the statement runs
    straight into p, through a temp (float16 output; another operand overlapping p) or with a
    reduction (no alias there)."""
    from neonlike import plan as P
    from neonlike.backends.cpu import program
    pn, vn = np.linspace(-1, 1, 24).reshape(4, 6).astype(np.float32), np.ones((4, 6), np.float32)
    p, v = cpu.array(pn), cpu.array(vn)
    want = pn.astype(np.float64)
    for _ in range(3):
        p[:] = p - 0.5 * v
        want = want - 0.5
    _check(p, want)
    compiled = program.ENGINE.programs.get(P.walk(p, p - 0.5 * v)[0])
    assert compiled is not None and compiled.alias == 0
    assert all("b0 = out  # the output itself" in k.source for k in compiled.kernels.values())
    h = cpu.array(pn.astype(np.float16), dtype=np.float16)
    want16 = pn.astype(np.float16).astype(np.float64)
    for _ in range(3):
        h[:] = h * 2.0 + v
        want16 = (want16 * 2 + 1).astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(h.get().astype(np.float64), want16)
    sq = np.arange(16, dtype=np.float32).reshape(4, 4)
    for _ in range(3):
        q = cpu.array(sq)
        q[:] = q + q.T * 1.0
        _check(q, sq.astype(np.float64) + sq.T)
    for _ in range(3):
        r = cpu.array(pn)
        r[:] = r - cpu.max(r, axis=1)
        _check(r, pn.astype(np.float64) - pn.max(axis=1, keepdims=True))
