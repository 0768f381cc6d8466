"""Autodiff: every rule against float64 central differences, the DAG walk, second order, neon's API.

Runs on the reference interpreter (hundreds of one-off trees); gradient trees through the fused
kernels are checked in test_autodiff_fused.py.
"""
from __future__ import annotations

import importlib
import re
import warnings

import numpy as np
import pytest

from neonlike.backends import Autodiff, gen_backend
from neonlike.backends.autodiff import RULES, UnusedTensorWarning, _dag_postorder
from neonlike.ops import OP_INFO, Kind, Op

CPU_ENGINE = "reference"


@pytest.fixture
def be():
    return gen_backend("cpu", rng_seed=0, datatype=np.float64)


def rand(shape, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def numeric_grad(be, build, arrays, weights, h=1e-6, sums=None):
    """Central differences of sum(weights * build(*tensors)) with respect to each array (the
    sums evaluated are appended to `sums` where given)."""
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            vals = []
            for sign in (1, -1):
                shifted = [x.copy() for x in arrays]
                shifted[k][idx] += sign * h
                ts = [be.array(x) for x in shifted]
                out = be.empty(weights.shape)
                out[:] = build(be, *ts)
                vals.append(float(np.sum(weights * out.get())))
            g[idx] = (vals[0] - vals[1]) / (2 * h)
            if sums is not None:
                sums.extend(vals)
        grads.append(g)
    return grads


def check(be, build, arrays, rtol=1e-5, atol=1e-6, seed=1):
    """Autodiff against central differences; a tensor warned about as unused (a random tree may
    leave one out) must have a zero numeric gradient."""
    ts = [be.array(a, name=f"x{i}") for i, a in enumerate(arrays)]
    tree = build(be, *ts)
    w = rand(tree.shape if hasattr(tree, "shape") else (1, 1), 0.5, 1.5, seed=seed)
    ad = Autodiff(tree, be, next_error=be.array(w))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnusedTensorWarning)
        got = ad.get_grad_asnumpyarray(ts)
    unused = {int(m) for c in caught for m in re.findall(r"tensor 'x(\d+)'", str(c.message))}
    sums = []
    want = numeric_grad(be, build, arrays, w, sums=sums)
    # a central difference is only as exact as its two sums: each rounds by ~eps * |sum|, so the
    # quotient carries up to ~eps * |sum| / h of absolute error (6e-6 where the sums reach 2.6e4,
    # as a random tree's exp of a square makes them); the tolerance is never below 4 times that
    floor = 4 * np.finfo(np.float64).eps * max(map(abs, sums), default=0.0) / 1e-6
    for i, (g, n, t) in enumerate(zip(got, want, ts)):
        assert g.shape == t.shape
        np.testing.assert_allclose(g, n, rtol=rtol, atol=max(atol, floor))
        assert i not in unused or not n.any(), f"x{i} warned about as unused"


# ---------------------------------------------------------------- one rule at a time
# (op, builder, domain): domains keep central differences away from kinks and poles
UNARY = {
    Op.NEG: (lambda b, x: -x, (-2, 2)),
    Op.ABS: (lambda b, x: abs(x), (0.2, 2)),
    Op.SQRT: (lambda b, x: b.sqrt(x), (0.5, 3)),
    Op.SQR: (lambda b, x: b.square(x), (-2, 2)),
    Op.EXP: (lambda b, x: b.exp(x), (-2, 2)),
    Op.EXP2: (lambda b, x: b.exp2(x), (-2, 2)),
    Op.LOG: (lambda b, x: b.log(x), (0.5, 3)),
    Op.LOG2: (lambda b, x: b.log2(x), (0.5, 3)),
    Op.SAFELOG: (lambda b, x: b.safelog(x), (0.5, 3)),
    Op.SIG: (lambda b, x: b.sig(x), (-3, 3)),
    Op.SIG2: (lambda b, x: b.sig2(x), (-3, 3)),
    Op.TANH: (lambda b, x: b.tanh(x), (-2, 2)),
    Op.TANH2: (lambda b, x: b.tanh2(x), (-2, 2)),
    Op.RECIPROCAL: (lambda b, x: b.reciprocal(x), (0.5, 2)),
    Op.RELU: (lambda b, x: b.relu(x), (0.1, 2)),
    Op.SOFTPLUS: (lambda b, x: b.softplus(x), (-3, 3)),
    Op.SIN: (lambda b, x: b.sin(x), (-2, 2)),
    Op.COS: (lambda b, x: b.cos(x), (-2, 2)),
    Op.TAN: (lambda b, x: b.tan(x), (-1, 1)),
    Op.ASIN: (lambda b, x: b.arcsin(x), (-0.8, 0.8)),
    Op.ACOS: (lambda b, x: b.arccos(x), (-0.8, 0.8)),
    Op.ATAN: (lambda b, x: b.arctan(x), (-2, 2)),
    Op.SINH: (lambda b, x: b.sinh(x), (-2, 2)),
    Op.COSH: (lambda b, x: b.cosh(x), (-2, 2)),
    Op.ASINH: (lambda b, x: b.arcsinh(x), (-2, 2)),
    Op.ACOSH: (lambda b, x: b.arccosh(x), (1.5, 3)),
    Op.ATANH: (lambda b, x: b.arctanh(x), (-0.8, 0.8)),
}
BINARY = {
    Op.ADD: (lambda b, x, y: x + y, (-2, 2), (-2, 2)),
    Op.SUB: (lambda b, x, y: x - y, (-2, 2), (-2, 2)),
    Op.MUL: (lambda b, x, y: x * y, (-2, 2), (-2, 2)),
    Op.DIV: (lambda b, x, y: x / y, (-2, 2), (0.5, 2)),
    Op.POW: (lambda b, x, y: x ** y, (0.5, 2), (-2, 2)),
    Op.MAXIMUM: (lambda b, x, y: b.maximum(x, y), (-2, 2), (-2, 2)),
    Op.MINIMUM: (lambda b, x, y: b.minimum(x, y), (-2, 2), (-2, 2)),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_rule(be, op):
    fn, (lo, hi) = UNARY[op]
    check(be, fn, [rand((2, 3), lo, hi)])


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), (1, 3)), ((2, 1), (1, 3)),
                                    ((2, 3, 2), (3, 1))])
def test_binary_rule_with_broadcasting(be, op, shapes):
    fn, da, db = BINARY[op]
    check(be, fn, [rand(shapes[0], *da, seed=2), rand(shapes[1], *db, seed=3)])


@pytest.mark.parametrize("build, shapes", [
    (lambda b, x, y: b.mean(x - y, axis=2, keepdims=True) * 1.0, ((2, 3, 4), (1, 4))),
    (lambda b, x, y: b.sum(x * y, axis=(0, 2), keepdims=True) * 1.0, ((2, 3, 4), (3, 1))),
    (lambda b, x, y: b.max(x + y, axis=3, keepdims=True) * 1.0, ((2, 2, 3, 4), (1, 3, 4)))])
def test_a_lower_rank_operand_under_a_reduction(be, build, shapes):
    """Found by hypothesis: the operand's gradient, summed to size 1 along a broadcast axis and
    left of the reduced tree's rank, ((1, 1, 1) for a (1, 4) operand), went out of higher rank."""
    check(be, build, [rand(s, seed=i) for i, s in enumerate(shapes)])


@pytest.mark.parametrize("const", [2.0, 0.5])
def test_constant_operands(be, const):
    check(be, lambda b, x: (x * const + const) / (const - x * x) + x ** const,
          [rand((2, 3), 0.2, 1.0)])


@pytest.mark.parametrize("kind", ["sum", "mean", "var", "std", "max", "min"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), 2])
@pytest.mark.parametrize("keepdims", [True, False])
def test_reductions(be, kind, axis, keepdims):
    check(be, lambda b, x: getattr(b, kind)(x, axis=axis, keepdims=keepdims) * 1.0,
          [rand((2, 3, 4), seed=4)])


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_max_min_route_to_the_first_extreme(be, kind, axis):
    x = np.array([[3.0, 1.0, 3.0], [0.0, 3.0, 3.0]]) * (1 if kind == "max" else -1)
    t = be.array(x)
    g = Autodiff(getattr(be, kind)(t, axis=axis), be).get_grad_asnumpyarray([t])[0]
    if axis is None:
        want = [[1, 0, 0], [0, 0, 0]]
    elif axis == 0:
        want = [[1, 0, 1], [0, 1, 0]]
    else:
        want = [[1, 0, 0], [0, 1, 0]]
    np.testing.assert_array_equal(g, want)


def test_dot_transpose_reshape(be):
    check(be, lambda b, w, x: b.dot(w, x), [rand((3, 4), seed=5), rand((4, 2), seed=6)])
    check(be, lambda b, w, x: b.dot(w.T, b.tanh(x)), [rand((4, 3), seed=5), rand((4, 2), seed=6)])
    check(be, lambda b, x: b.transpose(b.exp(x), (1, 2, 0)), [rand((2, 3, 4), seed=7)])
    check(be, lambda b, x: b.reshape(x * x, (3, 4)) * 2.0, [rand((2, 6), seed=8)])


def test_structural_ops_under_a_reduction(be):
    """A sum's gradient is smaller than its operand: a dot, transpose, reshape, concatenate or
    tile below it must see it broadcast to full size."""
    check(be, lambda b, w, x: b.sum(b.dot(w, x), axis=0), [rand((3, 4), seed=5), rand((4, 2), seed=6)])
    check(be, lambda b, x: b.sum(b.transpose(x * x), axis=1), [rand((2, 3), seed=7)])
    check(be, lambda b, x: b.sum(b.reshape(x * x, (3, 2)), axis=None), [rand((2, 3), seed=8)])
    check(be, lambda b, x, y: b.max(b.concatenate([x * 2.0, y], axis=1), axis=0),
          [rand((2, 3), seed=9), rand((2, 2), seed=10)])
    check(be, lambda b, x: b.sum(b.tile(x * x, (2, 1)), axis=1), [rand((2, 3), seed=11)])


def test_concatenate_and_tile(be):
    check(be, lambda b, x, y: b.concatenate([x * 2.0, b.exp(y)], axis=1),
          [rand((2, 3), seed=9), rand((2, 2), seed=10)])
    check(be, lambda b, x: b.tile(x * x, (2, 3)), [rand((2, 3), seed=11)])


def test_non_differentiable_ops_give_zero(be):
    x = be.array(rand((2, 3)))
    tree = (x > 0) + be.sgn(x) + be.rint(x) + be.floor(x) + (x == x) + be.argmax(x, axis=1)
    g = Autodiff(tree, be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_array_equal(g, np.zeros((2, 3)))


def test_every_differentiable_table_op_has_a_rule():
    missing = [op for op, info in OP_INFO.items()
               if op not in RULES and info.kind is not Kind.ASSIGN]
    assert missing == [], missing


@pytest.mark.parametrize("op, make", [(Op.TAKE, lambda b, x: b.take(x, [0, 2], axis=1)),
                                      (Op.SLICE, lambda b, x: b.slice(x, [0], [1], [0]))])
def test_an_op_without_a_rule_is_named(be, monkeypatch, op, make):
    monkeypatch.delitem(RULES, op)
    x = be.array(rand((2, 3)))
    with pytest.raises(NotImplementedError, match=f"no gradient rule for op '{op.value}'"):
        Autodiff(make(be, x) * 2.0, be)


# ---------------------------------------------------------------- the seed's examples, neon's API
def test_seed_x0_x0_plus_x0_x1(be):
    x0 = be.array(np.array([[1.0, 2.0], [3.0, 4.0]]))
    x1 = be.array(np.array([[5.0, 6.0], [7.0, 8.0]]))
    f = x0 * x0 + x0 * x1
    ad = Autodiff(op_tree=f, be=be, next_error=None)
    g0, g1 = ad.get_grad_asnumpyarray([x0, x1])
    np.testing.assert_allclose(g0, 2 * x0.get() + x1.get())
    np.testing.assert_allclose(g1, x0.get())


def test_seed_tanh_example(be):
    x = be.array(rand((3, 3), seed=12))
    w = be.array(rand((3, 3), seed=13))
    f = be.tanh(x * w + 1.0)
    g = Autodiff(f, be).get_grad_asnumpyarray([x])[0]
    z = np.tanh(x.get() * w.get() + 1.0)
    np.testing.assert_allclose(g, (1 - z * z) * w.get(), rtol=1e-12)


def test_seed_dynamic_tree(be):
    """A tree built by a Python loop and condition (the seed's my_loop / my_condition)."""
    x = be.array(rand((2, 2), 0.1, 0.9, seed=14))

    def my_condition(v):
        return float(np.mean(v)) > 0.3

    def my_loop(t, n):
        y = t
        for i in range(n):
            y = y * t if my_condition(x.get()) else y + t
        return y

    f = my_loop(x, 3)
    g = Autodiff(f, be).get_grad_asnumpyarray([x])[0]
    xv = x.get()
    want = 4 * xv ** 3 if my_condition(xv) else np.full_like(xv, 4.0)
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_next_error_weights(be):
    x = be.array(rand((2, 3), seed=15))
    w = rand((2, 3), seed=16)
    g = Autodiff(be.exp(x), be, next_error=be.array(w)).get_grad_asnumpyarray([x])[0]
    np.testing.assert_allclose(g, w * np.exp(x.get()), rtol=1e-12)
    g = Autodiff(be.exp(x), be, next_error=2.0).get_grad_asnumpyarray([x])[0]
    np.testing.assert_allclose(g, 2 * np.exp(x.get()), rtol=1e-12)
    with pytest.raises(ValueError, match=r"next_error must have the op-tree's shape \(2, 3\)"):
        Autodiff(be.exp(x), be, next_error=be.ones((3, 2)))


def test_api(be):
    x, y = be.array(rand((2, 3), seed=17)), be.array(rand((2, 3), seed=18))
    unused = be.array(rand((4, 4), seed=19))
    ad = Autodiff(x * y, be)
    with pytest.warns(UnusedTensorWarning, match=r"unnamed tensor of shape \(4, 4\)"):
        trees = ad.get_grad_op_tree([x, y, unused])
    assert [t.shape for t in trees] == [(2, 3), (2, 3), (4, 4)]
    tensors = ad.get_grad_tensor([x, unused])
    np.testing.assert_allclose(tensors[0].get(), y.get())
    np.testing.assert_array_equal(tensors[1].get(), np.zeros((4, 4)))
    bufs = [be.empty((2, 3)), be.empty((2, 3))]
    ad.back_prop_grad([x, y], bufs)
    np.testing.assert_allclose(bufs[1].get(), x.get())
    with pytest.raises(ValueError, match="shape"):
        ad.back_prop_grad([x], [be.empty((3, 2))])
    with pytest.raises(ValueError, match="shares memory with a tensor of the graph"):
        ad.back_prop_grad([x], [y])
    ad.cleanup()
    assert isinstance(ad, Autodiff)


def test_gradient_of_a_constant_tree(be):
    x = be.array(rand((2, 3)))
    g = Autodiff(x * 0.0 + 3.0, be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_array_equal(g, np.zeros((2, 3)))
    g = Autodiff(be.sum(x, axis=None), be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_array_equal(g, np.ones((2, 3)))


# ---------------------------------------------------------------- what Autodiff refuses (issue 12)
ACCEPTS = r"op_tree must be an OpTreeNode or a Tensor, got "


@pytest.mark.parametrize("op_tree, given", [
    (np.ones((3, 3)), r"numpy\.ndarray of shape \(3, 3\); put an array on the backend with "
                      r"be\.array"),
    (1.5, r"float; a number has no gradient"),
    (3, r"int; a number has no gradient"),
    (np.float32(2.0), r"numpy\.float32; a number has no gradient"),
    (None, r"NoneType$"),
    ("x0 * x0", r"str$"),
    ([1.0, 2.0], r"list$")])
def test_an_op_tree_that_is_not_one_is_refused(be, op_tree, given):
    """neon's assert let numbers through, but its memoiser then called op_tree.key(), which only
    an OpTreeNode has: a number never worked there (here it gave zeros without a word)."""
    with pytest.raises(TypeError, match="^Autodiff: " + ACCEPTS + given):
        Autodiff(op_tree, be)
    with pytest.raises(TypeError, match=ACCEPTS + given):
        Autodiff(op_tree=op_tree, be=be, next_error=None)


def test_a_list_of_trees_is_refused(be):
    x = be.array(rand((2, 3)))
    with pytest.raises(TypeError, match=ACCEPTS + "list$"):
        Autodiff([x * 2.0, x], be)


def test_a_tensor_is_an_op_tree(be):
    x = be.array(rand((2, 3)))
    np.testing.assert_array_equal(Autodiff(x, be).get_grad_asnumpyarray([x])[0], np.ones((2, 3)))


@pytest.mark.parametrize("bad, given", [
    (lambda be: None, "NoneType"), (lambda be: "cpu", "str"),
    (lambda be: importlib.import_module("neonlike.backends"), "the module neonlike.backends"),
    (lambda be: type(be), r"the class neonlike\.backends\.\S+\.NervanaCPU"),
    (lambda be: be.array(rand((2, 3))), r"neonlike\.backends\.\S+\.CPUTensor")])
def test_a_be_that_is_not_a_backend_is_refused(be, bad, given):
    x = be.array(rand((2, 3)))
    with pytest.raises(TypeError, match=r"^Autodiff: be must be a backend from "
                                        r"gen_backend\(\.\.\.\) \(an instance of "
                                        r"neonlike\.backends\.backend\.Backend\), got " + given):
        Autodiff(x * 2.0, bad(be))


def test_gradients_are_asked_for_a_list_of_tensors(be):
    x = be.array(rand((2, 3)))
    ad = Autodiff(x * 2.0, be)
    with pytest.raises(TypeError, match=r"pass a list of Tensors, got a single .*Tensor"):
        ad.get_grad_op_tree(x)
    with pytest.raises(TypeError, match=r"pass a list of Tensors, got a single .*Tensor"):
        ad.back_prop_grad(x, [be.empty((2, 3))])
    for method in (ad.get_grad_op_tree, ad.get_grad_tensor, ad.get_grad_asnumpyarray):
        with pytest.raises(TypeError, match=r"with respect to Tensors, got neonlike\.optree\."
                                            r"OpTreeNode"):
            method([x * 1.0])
        with pytest.raises(TypeError, match=r"with respect to Tensors, got numpy\.ndarray of "
                                            r"shape \(2, 3\)"):
            method([x.get()])


UNUSED = r"Autodiff: tensor 'u' of shape \(4, 4\) does not appear in the op-tree"


@pytest.mark.parametrize("method", ["get_grad_op_tree", "get_grad_tensor",
                                    "get_grad_asnumpyarray", "back_prop_grad"])
def test_an_unused_tensor_gets_zeros_and_a_warning_naming_it(be, method):
    """neon returned `tensor * 0.` for a tensor the tree does not use, and its tests rely on it
    (test_backend_autodiff.py's func_real never reads x0): zeros, with a warning (once per
    Autodiff and tensor) that points at the caller."""
    x = be.array(rand((2, 3)), name="x")
    u = be.array(rand((4, 4), seed=1), name="u")
    ad = Autodiff(x * 2.0, be)

    def ask():
        if method == "back_prop_grad":
            bufs = [be.empty((2, 3)), be.empty((4, 4))]
            ad.back_prop_grad([x, u], bufs)
            return [b.get() for b in bufs]
        got = getattr(ad, method)([x, u])
        if method == "get_grad_op_tree":
            trees, got = got, [be.empty(t.shape) for t in (x, u)]
            got[0][:], got[1][:] = trees
        return [g if isinstance(g, np.ndarray) else g.get() for g in got]

    with pytest.warns(UnusedTensorWarning, match=UNUSED + r" \(neither it nor a view of it\): "
                                                          r"its gradient is zeros") as caught:
        got = ask()
    assert len(caught) == 1 and caught[0].filename == __file__
    np.testing.assert_array_equal(got[0], np.full((2, 3), 2.0))
    np.testing.assert_array_equal(got[1], np.zeros((4, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnusedTensorWarning)
        ask()                                         # once per Autodiff and tensor
    with pytest.warns(UnusedTensorWarning, match=UNUSED):
        Autodiff(x * 3.0, be).get_grad_op_tree([u])   # a new Autodiff says it again


def test_neon_func_real_leaves_x0_out(be):
    """neon's test_backend_autodiff.py Funcs.func_real: x0 is asked about and not used."""
    xs = [be.array(rand((2, 2), seed=i), name=f"x{i}") for i in range(5)]
    x0, x1, x2, x3, x4 = xs
    f = x1 + be.absolute(x2 + x3) + x4 - (x1 + be.square(x2 + x3) + x4)
    with pytest.warns(UnusedTensorWarning, match=r"tensor 'x0' of shape \(2, 2\)"):
        grads = Autodiff(f, be).get_grad_asnumpyarray(xs)
    np.testing.assert_array_equal(grads[0], np.zeros((2, 2)))


def test_a_cost_that_ignores_its_outputs_warns(be):
    from neonlike.transforms.cost import Cost

    class TargetsOnly(Cost):
        def __call__(self, y, t):
            return self.be.sum(t * t, axis=0)

    y, t = be.array(rand((3, 4)), name="y"), be.array(rand((3, 4), seed=1), name="t")
    with pytest.warns(UnusedTensorWarning, match=r"tensor 'y' of shape \(3, 4\)"):
        g = TargetsOnly().bprop(y, t)
    out = be.empty((3, 4))
    out[:] = g
    np.testing.assert_array_equal(out.get(), np.zeros((3, 4)))


def _rows(*rows):
    return np.array(rows, dtype=float)


@pytest.mark.parametrize("tree, want", [
    (lambda b, x: x[0] * 3.0, _rows([3, 3, 3], [0, 0, 0])),
    (lambda b, x: x.T * 3.0, _rows([3, 3, 3], [3, 3, 3])),
    (lambda b, x: x[:, 1:] + 1.0, _rows([0, 1, 1], [0, 1, 1])),
    (lambda b, x: b.argmax(x, axis=1) * 1.0, np.zeros((2, 3))),   # read, with zero gradient
    (lambda b, x: (x > 0) * 2.0, np.zeros((2, 3)))])
def test_a_tensor_read_through_a_view_or_a_zero_gradient_op_is_used(be, tree, want):
    x = be.array(rand((2, 3)), name="x")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnusedTensorWarning)
        g = Autodiff(tree(be, x), be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_array_equal(g, want)


# ---------------------------------------------------------------- the DAG walk
def test_shared_subtrees_are_differentiated_once(be):
    x = be.array(rand((2, 2), -0.5, 0.5, seed=20))
    sizes = []
    for depth in (5, 10, 20):
        y = x
        for _ in range(depth):
            y = be.tanh(y + y)
        g = Autodiff(y, be).get_grad_op_tree([x])[0]
        sizes.append(len(_dag_postorder(g)))
    assert sizes[2] - sizes[1] == 2 * (sizes[1] - sizes[0])   # linear in depth
    assert sizes[2] < 200


def test_shared_subtree_gradient_is_right(be):
    check(be, lambda b, x: b.tanh(b.tanh(x + x) + b.tanh(x + x)) * x, [rand((2, 2), -1, 1)])


# ---------------------------------------------------------------- second order
def test_second_derivatives(be):
    x = be.array(rand((2, 3), -1.5, 1.5, seed=21))
    xv = x.get()
    d1 = Autodiff(x * x * x, be).get_grad_op_tree([x])[0]
    d2 = Autodiff(d1, be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_allclose(d2, 6 * xv, rtol=1e-12)
    d1 = Autodiff(be.tanh(x), be).get_grad_op_tree([x])[0]
    d2 = Autodiff(d1, be).get_grad_asnumpyarray([x])[0]
    t = np.tanh(xv)
    np.testing.assert_allclose(d2, -2 * t * (1 - t * t), rtol=1e-10)
    d1 = Autodiff(be.sig(x) * be.exp(x), be).get_grad_op_tree([x])[0]
    d2 = Autodiff(d1, be).get_grad_asnumpyarray([x])[0]
    s, e = 1 / (1 + np.exp(-xv)), np.exp(xv)
    ds, dds = s * (1 - s), s * (1 - s) * (1 - 2 * s)
    np.testing.assert_allclose(d2, dds * e + 2 * ds * e + s * e, rtol=1e-10)


def test_mixed_second_derivative(be):
    x, y = be.array(rand((2, 2), seed=22)), be.array(rand((2, 2), seed=23))
    dx = Autodiff(be.sin(x * y), be).get_grad_op_tree([x])[0]     # y cos(xy)
    dxy = Autodiff(dx, be).get_grad_asnumpyarray([y])[0]           # cos(xy) - xy sin(xy)
    xv, yv = x.get(), y.get()
    np.testing.assert_allclose(dxy, np.cos(xv * yv) - xv * yv * np.sin(xv * yv), rtol=1e-10)


# ---------------------------------------------------------------- random trees with broadcasting
def _random_tree(rng, be, leaves, depth):
    if depth == 0:
        return leaves[rng.integers(len(leaves))]
    a = _random_tree(rng, be, leaves, depth - 1)
    kind = rng.integers(6)
    if kind == 0:
        return a * _random_tree(rng, be, leaves, depth - 1)
    if kind == 1:
        return a + _random_tree(rng, be, leaves, depth - 1)
    if kind == 2:
        return be.tanh(a)
    if kind == 3:
        return a / (be.square(_random_tree(rng, be, leaves, depth - 1)) + 1.0)
    if kind == 4:
        return be.sig(a) - a * 0.5
    return be.sum(a, axis=int(rng.integers(2)))


@pytest.mark.parametrize("seed", range(12))
def test_random_trees(be, seed):
    shapes = [(3, 4), (3, 1), (1, 4)]
    arrays = [rand(s, -1, 1, seed=seed * 10 + i) for i, s in enumerate(shapes)]

    def build(b, *ts):
        return _random_tree(np.random.default_rng(seed), b, list(ts), 3) * 1.0
    check(be, build, arrays, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- views (neon got these wrong)
def test_a_slice_gradient_lands_in_its_place(be):
    x = be.array(rand((2, 3), seed=24))
    g = Autodiff(x[0] * 2.0, be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_array_equal(g, [[2, 2, 2], [0, 0, 0]])
    g = Autodiff(x[:, 1:] * x[:, :2], be).get_grad_asnumpyarray([x])[0]
    xv = x.get()
    want = np.zeros((2, 3))
    want[:, 1:] += xv[:, :2]
    want[:, :2] += xv[:, 1:]
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_transposed_views(be):
    s = be.array(rand((3, 3), seed=25))
    g = Autodiff(s * s.T, be).get_grad_asnumpyarray([s])[0]
    np.testing.assert_allclose(g, 2 * s.get().T, rtol=1e-12)
    check(be, lambda b, x: b.dot(x, x.T), [rand((2, 3), seed=26)])
    check(be, lambda b, x: b.exp(x.reshape((3, 2))) * 1.0, [rand((2, 3), seed=27)])


# ---------------------------------------------------------------- seed 002, verbatim but for the port
def test_seed002_autodiff_examples(capsys):
    """Seed 002's 'Automatic differentiation' section: `neon` -> `neonlike`, 'nervanagpu' ->
    'cpu', print statements -> print(), and int() around the loop count (a float32 element is
    not a range() bound in Python 3)."""
    from neonlike.backends import gen_backend, Autodiff
    from neonlike.backends.backend import OpTreeNode
    be = gen_backend('cpu')
    x0 = be.array(np.ones((3, 3)) * 1., name='x0')
    x1 = be.array(np.ones((3, 3)) * 2., name='x1')
    print('# example 0')
    f = x0 * x0 + x0 * x1
    ad = Autodiff(op_tree=f, be=be, next_error=None)
    print(ad.get_grad_asnumpyarray([x0, x1]))  # result is [2 * x0 + x1, x0]
    g0, g1 = ad.get_grad_asnumpyarray([x0, x1])
    np.testing.assert_array_equal(g0, np.full((3, 3), 4.0))
    np.testing.assert_array_equal(g1, np.ones((3, 3)))

    f = be.tanh((x0 * x1) + (x0 / x1))
    ad = Autodiff(op_tree=f, be=be, next_error=None)
    [x0_grad_op_tree, x1_grad_op_tree] = ad.get_grad_op_tree([x0, x1])
    print(OpTreeNode.pp(x0_grad_op_tree))
    print(OpTreeNode.pp(x1_grad_op_tree))
    u = 1 * 2 + 1 / 2      # float32: 1 - tanh(u)**2 loses ~4 bits to cancellation, hence 1e-5
    sech2 = 1 - np.tanh(u) ** 2
    np.testing.assert_allclose(ad.get_grad_asnumpyarray([x0])[0], sech2 * (2 + 1 / 2), rtol=1e-5)
    np.testing.assert_allclose(ad.get_grad_asnumpyarray([x1])[0], sech2 * (1 - 1 / 4), rtol=1e-5)

    x0 = be.array(np.random.randint(10, size=(3, 3)), name='x0')

    def my_loop(x):
        y = be.zeros(OpTreeNode.shape(x), name='tensor-zero')
        for _ in range(int(x.get()[0, 0])):
            y = y + x
        return y

    def my_condition(x):
        if x.get()[0, 0] % 2 == 0:
            return be.sig(x)
        else:
            return be.tanh(x)
    f = my_loop(x0) + my_condition(x0)
    ad = Autodiff(f, be)
    x0_grad_tree = ad.get_grad_op_tree([x0])[0]
    print(x0.get())
    print(OpTreeNode.pp(f))
    print(OpTreeNode.pp(x0_grad_tree))
    xv = x0.get().astype(np.float64)
    k = int(xv[0, 0])
    if k % 2 == 0:
        s = 1 / (1 + np.exp(-xv))
        d = s * (1 - s)
    else:
        d = 1 - np.tanh(xv) ** 2
    got = ad.get_grad_asnumpyarray([x0])[0]
    np.testing.assert_allclose(got, k + d, rtol=1e-5, atol=1e-6)
    assert "tanh" in capsys.readouterr().out


# ---------------------------------------------------------------- slice and take as ops in a tree
@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], [0], [1]), ([0, 1], [2, 4], [0, 1], [1, 2]), ([3], [None], [1], [-1]),
    ([4], [0], [1], [-2]), ([0], [5], [1], [3]), ([2], [2], [1], [1]), ([-2], [None], [2], [1])])
def test_slice_op_gradient(be, starts, ends, axes, steps):
    ends = [e if e is not None else (-10 ** 9 if st < 0 else 10 ** 9) for e, st in zip(ends, steps)]
    check(be, lambda b, x: b.slice(b.tanh(x) * 1.5, starts, ends, axes, steps),
          [rand((3, 5, 3), seed=40)])


def test_slices_of_one_tree_add_up(be):
    check(be, lambda b, x: b.concatenate(b.split(b.exp(x), 3, axis=1)[::-1], axis=1) * x,
          [rand((2, 6), seed=41)])


@pytest.mark.parametrize("axis, idx", [(0, [2, 0, 2, -1]), (1, [1, 1, 1]), (2, [0]),
                                       (None, [0, 5, 5, 23])])
def test_take_op_gradient_adds_repeats(be, axis, idx):
    check(be, lambda b, x: b.take(b.sin(x), idx, axis=axis) * 2.0, [rand((3, 4, 2), seed=42)])


def test_take_of_a_2d_tensor(be):
    x = be.array(rand((4, 3), seed=43))
    g = Autodiff(be.take(x, [3, 3, 0], axis=0) * 1.0, be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_array_equal(g, [[1, 1, 1], [0, 0, 0], [0, 0, 0], [2, 2, 2]])


# ---------------------------------------------------------------- gradient plans (the memo)
def _grad_plan_tree(b, x, y, c=2.0):
    return b.sum(b.tanh(x * y + c) * x, axis=1) + b.max(y, axis=1)


def test_a_tree_of_the_same_structure_reuses_the_plan(be):
    from neonlike.backends import autodiff
    autodiff.clear_plans()
    a, b_ = rand((3, 4), seed=50), rand((3, 4), seed=51)
    Autodiff(_grad_plan_tree(be, be.array(a), be.array(b_)), be)
    assert autodiff.PLAN_STATS == {"hits": 0, "misses": 1, "unplanned": 0}
    c, d = rand((3, 4), seed=52), rand((3, 4), seed=53)
    x, y = be.array(c), be.array(d)
    second = Autodiff(_grad_plan_tree(be, x, y), be)
    assert autodiff.PLAN_STATS["hits"] == 1 and autodiff.PLAN_STATS["misses"] == 1
    got = second.get_grad_asnumpyarray([x, y])   # the replayed gradients are x's and y's
    want = numeric_grad(be, _grad_plan_tree, [c, d], np.ones((3, 1)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


@pytest.mark.filterwarnings("ignore::neonlike.backends.autodiff.UnusedTensorWarning")  # (x, x)
@pytest.mark.parametrize("other", [
    lambda b, x, y: _grad_plan_tree(b, x, y, c=3.0),         # another constant
    lambda b, x, y: _grad_plan_tree(b, x, x),                 # one tensor in both places
    lambda b, x, y: _grad_plan_tree(b, y, x) * 1.0,           # another op
    lambda b, x, y: b.sum(b.tanh(x * y + 2.0) * y, axis=1) + b.max(y, axis=1)])  # another leaf
def test_another_structure_gets_another_plan(be, other):
    from neonlike.backends import autodiff
    autodiff.clear_plans()
    x, y = be.array(rand((3, 4), seed=54)), be.array(rand((3, 4), seed=55))
    Autodiff(_grad_plan_tree(be, x, y), be)
    ad = Autodiff(other(be, x, y), be)
    assert autodiff.PLAN_STATS["hits"] == 0 and autodiff.PLAN_STATS["misses"] == 2
    check(be, other, [x.get(), y.get()])
    want = Autodiff(other(be, x, y), be).get_grad_asnumpyarray([x, y])
    for g, w in zip(ad.get_grad_asnumpyarray([x, y]), want):
        np.testing.assert_array_equal(g, w)


def test_plans_are_keyed_on_shapes_and_next_error(be):
    from neonlike.backends import autodiff
    autodiff.clear_plans()
    for shape in [(3, 4), (3, 4), (4, 3), (3, 1)]:
        x = be.array(rand(shape, seed=56))
        Autodiff(be.sum(x * x, axis=0), be)
    assert autodiff.PLAN_STATS["misses"] == 3 and autodiff.PLAN_STATS["hits"] == 1
    x = be.array(rand((3, 4), seed=57))
    for seed in [2.0, 2.0, -0.0, 0.0]:
        g = Autodiff(x * x, be, next_error=seed).get_grad_asnumpyarray([x])[0]
        np.testing.assert_array_equal(g, 2 * seed * x.get())
    assert autodiff.PLAN_STATS["misses"] == 6
    w1, w2 = be.array(rand((3, 4), seed=58)), be.array(rand((3, 4), seed=59))
    for w in (w1, w2):
        g = Autodiff(x * x, be, next_error=w).get_grad_asnumpyarray([x])[0]
        np.testing.assert_allclose(g, 2 * w.get() * x.get(), rtol=1e-12)
    assert autodiff.PLAN_STATS["misses"] == 7 and autodiff.PLAN_STATS["hits"] == 3


def test_the_memo_is_bounded_and_keeps_no_tensor_alive(be, monkeypatch):
    import gc
    import weakref
    from neonlike.backends import autodiff
    autodiff.clear_plans()
    monkeypatch.setattr(autodiff._PLANS, "maxsize", 4)
    refs = []
    for n in range(1, 10):
        x, w = be.array(rand((2, n), seed=n)), be.array(rand((2, n), seed=n + 1))
        ad = Autodiff(be.tanh(x) * w, be, next_error=be.array(np.ones((2, n))))
        ad.get_grad_tensor([x, w])
        refs += [weakref.ref(x), weakref.ref(w), weakref.ref(ad.next_error)]
        del x, w, ad
    gc.collect()
    assert len(autodiff._PLANS) == 4
    assert all(r() is None for r in refs)


def test_a_deep_shared_chain_replays_linearly(be):
    x = be.array(rand((2, 2), seed=60))
    for _ in range(2):
        y = x
        for _ in range(20):
            y = be.tanh(y + y)
        g = Autodiff(y, be).get_grad_op_tree([x])[0]
        assert len(_dag_postorder(g)) < 200


# ---------------------------------------------------------------- views, through the layout hook
def test_views_that_do_not_overlap_give_nothing(be):
    x = be.array(rand((2, 3), seed=61))
    with pytest.warns(UnusedTensorWarning, match=r"shape \(1, 3\) does not appear"):
        g = Autodiff(x[1] * 3.0, be).get_grad_asnumpyarray([x[0]])[0]
    np.testing.assert_array_equal(g, np.zeros((1, 3)))
    g = Autodiff(x * 3.0, be).get_grad_asnumpyarray([x[0]])[0]   # a view asked about
    np.testing.assert_array_equal(g, np.full((1, 3), 3.0))


def test_strided_and_reshaped_views(be):
    x = be.array(rand((4, 6), seed=62))
    xv = x.get()
    g = Autodiff(x[1:4:2, ::-2] * x[::2, 1::2].T.T, be).get_grad_asnumpyarray([x])[0]
    want = np.zeros((4, 6))
    want[1:4:2, ::-2] += xv[::2, 1::2]
    want[::2, 1::2] += xv[1:4:2, ::-2]
    np.testing.assert_allclose(g, want, rtol=1e-12)
    g = Autodiff(be.sum(x.reshape((6, 4)) * x.reshape((3, 8)).reshape((6, 4)), axis=None),
                 be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_allclose(g, 2 * xv, rtol=1e-12)


def test_a_device_without_layouts_says_so(be, monkeypatch):
    x = be.array(rand((2, 3), seed=63))
    v = x[0]
    monkeypatch.setattr(type(v), "_layout", lambda self: None)
    with pytest.raises(NotImplementedError, match=r"shares memory .* \(Tensor._layout\)"):
        Autodiff(v * 2.0, be).get_grad_op_tree([x])


# ---------------------------------------------------------------- random trees (hypothesis)
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SHAPES = [(3, 4), (3, 1), (1, 4), (4,), (2, 3, 4)]
_UNARY_SAFE = [lambda b, a: b.tanh(a), lambda b, a: b.sig(a), lambda b, a: b.sin(a),
               lambda b, a: b.square(a), lambda b, a: b.exp(b.tanh(a)), lambda b, a: -a,
               lambda b, a: b.sqrt(b.square(a) + 1.0), lambda b, a: b.log(b.square(a) + 0.5),
               lambda b, a: b.safelog(b.sig(a)), lambda b, a: b.absolute(a + 5.0)]
_BINARY_SAFE = [lambda b, a, c: a + c, lambda b, a, c: a - c, lambda b, a, c: a * c,
                lambda b, a, c: a / (b.square(c) + 1.0), lambda b, a, c: b.maximum(a, c + 0.5),
                lambda b, a, c: b.power(b.sig(a) + 0.5, c)]
_REDUCE = [lambda b, a, ax: b.sum(a, axis=ax, keepdims=True),
           lambda b, a, ax: b.mean(a, axis=ax, keepdims=True),
           lambda b, a, ax: b.max(a, axis=ax, keepdims=True),
           lambda b, a, ax: b.var(a, axis=ax, keepdims=True)]


@st.composite
def gradient_trees(draw):
    """(shapes of three leaves that broadcast together, a builder of a random tree over them)."""
    base = draw(st.sampled_from([(3, 4), (2, 3, 4)]))
    shapes = [base] + [tuple(draw(st.sampled_from([d, 1])) for d in base)[-draw(
        st.integers(1, len(base))):] for _ in range(2)]
    shapes = [s if len(s) > 1 else (1,) + s for s in shapes]
    program = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 99), st.integers(0, 99),
                                      st.integers(0, 99)), min_size=1, max_size=7))

    def make(b, *leaves):
        values = list(leaves)
        for kind, i, j, k in program:
            a, c = values[i % len(values)], values[j % len(values)]
            if kind == 0:
                values.append(_UNARY_SAFE[k % len(_UNARY_SAFE)](b, a))
            elif kind == 1 or kind == 3:
                values.append(_BINARY_SAFE[k % len(_BINARY_SAFE)](b, a, c))
            else:
                values.append(_REDUCE[k % len(_REDUCE)](b, a, k % len(a.shape)))
        return values[-1] * 1.0
    return shapes, make


@given(gradient_trees(), st.integers(0, 2 ** 16))
def test_random_trees_hypothesis(case, seed):
    be = gen_backend("cpu", rng_seed=0, datatype=np.float64)
    shapes, make = case
    arrays = [rand(s, -1.5, 1.5, seed=seed + i) for i, s in enumerate(shapes)]
    check(be, make, arrays, rtol=1e-4, atol=1e-6)
