"""Seeds 000 and 003 with ops and transformers (import renamed: `import neonlike.ngraph as ng`),
values checked on both transformers, and the errors a bad graph gives when it is built."""
from __future__ import annotations

import numpy as np
import pytest

import neonlike.ngraph as ng
import neonlike.ngraph.op_graph.op_graph as op_graph
import neonlike.ngraph.transformers as ngt
from neonlike.ngraph.frontends.neon import ax
from neonlike.ngraph.transformers.nptransform import NumPyTransformer
from neonlike.ngraph.util.ordered import OrderedSet

TRANSFORMERS = {"numpy": ng.NumPyTransformer, "cpu": ng.make_transformer_factory("cpu")}


@pytest.fixture(params=sorted(TRANSFORMERS))
def make(request):
    return TRANSFORMERS[request.param]


def fresh(*lengths, batch=()):
    return [ng.make_axis(length=n, name=f"g{i}", batch=i in batch) for i, n in enumerate(lengths)]


# **************** seed 000 ****************

def test_seed_000_equal_of_a_tensor_and_its_transposed_twin(make):
    H = ng.make_axis(length=2)
    W = ng.make_axis(length=3)
    np_val = np.random.rand(2, 3)
    x = ng.constant(np_val, [H, W])
    y = ng.constant(np_val.T, [W, H])
    z = ng.equal(x, y)
    trans = make()
    comp = trans.computation([z])
    z_val = comp()[0]
    assert z_val.shape == (2, 3) and z_val.dtype == bool and z_val.all()
    w = ng.constant(np_val.T * 2, [W, H])
    assert not make().computation(ng.equal(x, w))().any()


def test_seed_000_commuted_sums_have_their_own_orders(make):
    H, W = fresh(2, 3)
    x = ng.constant(np.ones((2, 3)), [H, W])
    y = ng.constant(np.ones((3, 2)), [W, H])
    left = make().computation([x + y])()[0]
    right = make().computation([y + x])()[0]
    assert left.shape == (2, 3) and right.shape == (3, 2)
    assert np.all(left == 2.0) and np.all(right == 2.0)


def test_seed_000_reduction_axes():
    C, H, W = ax.C, ax.H, ax.W
    x = ng.placeholder([C, H, W])
    assert ng.sum(x, reduction_axes=[]).axes == ng.make_axes([C, H, W])
    assert ng.sum(x, reduction_axes=[C]).axes == ng.make_axes([H, W])
    assert ng.sum(x, reduction_axes=[C, W]).axes == ng.make_axes([H])
    assert ng.sum(x, reduction_axes=[W, C]).axes == ng.make_axes([H])
    assert ng.sum(x, reduction_axes=x.axes).axes == ng.make_axes([])
    # the seed-era default: every axis but the batch and recurrent ones
    y = ng.placeholder([C, ax.N, ax.REC])
    assert ng.sum(y).axes == ng.make_axes([ax.N, ax.REC])
    assert ng.max(y, out_axes=[ax.REC]).axes == ng.make_axes([ax.REC])


def test_seed_000_broadcast():
    x = ng.placeholder([ax.C, ax.H])
    assert ng.broadcast(x, [ax.C, ax.H, ax.W]).axes == ng.make_axes([ax.C, ax.H, ax.W])
    assert ng.broadcast(x, [ax.W, ax.H, ax.C]).axes == ng.make_axes([ax.W, ax.H, ax.C])


def test_seed_000_dot_axes():
    """Seed 000's 2-D and 4-D dots, both dual spellings, the dual axes in any order."""
    M, C, H, W, N, K = (ng.make_axis(name=n) for n in "MCHWNK")
    p = ng.placeholder
    assert ng.dot(p([H, W - 1]), p([W, N])).axes == ng.make_axes([H, N])
    assert ng.dot(p([H, W]), p([W + 1, N])).axes == ng.make_axes([H, N])
    assert ng.dot(p([M, C - 1, H - 1, W - 1]), p([C, H, W, N])).axes == ng.make_axes([M, N])
    assert ng.dot(p([M, C, H, W]), p([C + 1, H + 1, W + 1, N])).axes == ng.make_axes([M, N])
    assert ng.dot(p([M, W - 1, H - 1, C - 1]), p([C, H, W, N])).axes == ng.make_axes([M, N])
    A = p([C, H, W, N])
    B = p([K, C - 1, H - 1, W - 1])
    assert ng.dot(B, A).axes == ng.make_axes([K, N])


# **************** seed 003 ****************

def test_seed_003_args_and_initializers():
    x = ng.constant(0)
    y = ng.constant(1)
    mysum = ng.add(x, y)
    assert type(mysum) is op_graph.AddOp and type(mysum).__name__ == "AddOp"
    assert isinstance(mysum, op_graph.Op) and issubclass(type(mysum), ng.Op)
    assert mysum.args == (x, y) and isinstance(mysum.args, tuple)
    assert repr(mysum.args[0]).startswith("<AssignableTensorOp(<Const(0)>):")
    assert repr(mysum.args[1]).startswith("<AssignableTensorOp(<Const(1)>):")
    assert len(mysum.initializers) == 0
    (init,) = x.initializers
    assert isinstance(init, op_graph.InitTensorOp)
    assert repr(init).startswith("<InitTensorOp(InitTensorOp_")


def test_seed_003_other_deps():
    x = ng.placeholder((), initial_value=0)
    a = ng.assign(x, 5)
    z = x + 1
    assert type(z.other_deps) is OrderedSet and list(z.other_deps) == [a]
    assert z.other_deps.pop() is a
    assert isinstance(a, op_graph.AssignOp) and ng.SetItem is op_graph.AssignOp


@pytest.mark.parametrize("kind", sorted(TRANSFORMERS))
def test_seed_003_assign_orders_later_uses(kind):
    """z = x + 1 after assign(x, 5) sees 5; a computation of x runs the assignment."""
    x = ng.placeholder((), initial_value=0)
    ng.assign(x, 5)
    z = x + 1
    assert float(TRANSFORMERS[kind]().computation(z)()) == 6.0


def test_seed_003_saved_user_deps_1_2_3_then_0_0_0(make):
    w = ng.variable((), initial_value=0)
    ng.assign(w, w + 1)
    w_comp = make().computation(w)
    assert [float(w_comp()) for _ in range(3)] == [1.0, 2.0, 3.0]

    w = ng.variable((), initial_value=0)
    with ng.Op.saved_user_deps():
        update_op = ng.assign(w, w + 1)
    w_comp = make().computation(w)
    assert [float(w_comp()) for _ in range(3)] == [0.0, 0.0, 0.0]
    w_comp = make().computation([w, update_op])
    assert [float(w_comp()[0]) for _ in range(3)] == [1.0, 2.0, 3.0]


def test_seed_003_import_path_of_the_numpy_transformer():
    assert NumPyTransformer is ng.NumPyTransformer
    assert isinstance(ngt.make_transformer(), NumPyTransformer)      # 'numpy' by default
    assert ngt.transformer_choices()[0] == "numpy"


def test_seed_003_setitem_and_slice_assignment(make):
    H = ng.make_axis(length=3)
    x = ng.variable([H], initial_value=np.array([1.0, 2.0, 3.0]))
    ng.SetItem(x, x + x)
    f = make().computation(x)
    np.testing.assert_array_equal(f(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(f(), [4.0, 8.0, 12.0])
    v = ng.variable([H], initial_value=0.0)
    v[:] = ng.constant(np.array([5.0, 6.0, 7.0]), [H])
    np.testing.assert_array_equal(make().computation(v)(), [5.0, 6.0, 7.0])
    u = ng.variable([H], initial_value=1.0)
    u[...] = 3.0                                   # a number broadcast to the axes
    np.testing.assert_array_equal(make().computation(u)(), [3.0, 3.0, 3.0])


def test_seed_003_x1_used_twice(make):
    H = ng.make_axis(length=4)
    x = ng.placeholder([H])
    x1 = x + x
    y = x1 * x1 - x
    xv = np.array([0.0, 1.0, -2.0, 0.5])
    np.testing.assert_allclose(make().computation(y, x)(xv), (2 * xv) ** 2 - xv)


def _seed_003_model():
    C, W, H, Y, N = (ng.make_axis(length=n, name=f"s3{k}", batch=k == "N")
                     for k, n in zip("CWHYN", (2, 3, 2, 3, 4)))
    x = ng.placeholder((C, W, H, N))
    y0 = ng.placeholder((Y, N))
    w = ng.variable((C, W, H, Y), initial_value=lambda s: np.random.default_rng(1).normal(
        0, 0.3, s))
    b = ng.variable((Y,), initial_value=np.array([0.1, -0.2, 0.3]))
    y = ng.tanh(ng.dot(w, x) + b)
    c = ng.squared_L2(y - y0)
    return (C, W, H, Y, N), x, y0, w, b, y, c


def test_seed_003_deriv_and_variables(make):
    """Seed 003's model with its axes given lengths: dc/dw in w's axes, against central
    differences (c has the batch axis N, so the error sums it: deriv(c, w, error=ones))."""
    (C, W, H, Y, N), x, y0, w, b, y, c = _seed_003_model()
    assert c.variables() == [w, b]
    assert list(y.axes) == [Y, N] and list(c.axes) == [N]
    with pytest.raises(ValueError, match="Dependent and error must have the same set of axes"):
        ng.deriv(c, w)
    total = ng.sum(c, out_axes=())
    d, db = ng.deriv(total, w), ng.deriv(total, b)
    d_err = ng.deriv(c, w, error=ng.constant(np.ones(4), [N]))
    assert isinstance(d, op_graph.DerivOp) and d.axes == w.axes and db.axes == b.axes
    rng = np.random.default_rng(2)
    xv, yv = rng.normal(size=(2, 3, 2, 4)), rng.normal(size=(3, 4))
    f = make().computation([total, d, db, d_err, w, b], x, y0)
    tv, dv, dbv, dev, wv, bv = f(xv, yv)

    def cost(wv, bv):
        yy = np.tanh(np.einsum("cwhy,cwhn->yn", wv, xv) + bv[:, None])
        return ((yy - yv) ** 2).sum()

    assert abs(float(tv) - cost(wv, bv)) < 1e-4
    eps = 1e-3
    num = np.zeros(wv.shape)
    for i in np.ndindex(*wv.shape):
        hi, lo = wv.astype(np.float64), wv.astype(np.float64)
        hi[i] += eps
        lo[i] -= eps
        num[i] = (cost(hi, bv) - cost(lo, bv)) / (2 * eps)
    np.testing.assert_allclose(dv, num, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(dev, dv, rtol=1e-5, atol=1e-6)
    numb = [(cost(wv, bv + eps * e) - cost(wv, bv - eps * e)) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(dbv, numb, rtol=1e-3, atol=1e-4)


def test_seed_003_deriv_builds_a_graph_only():
    """deriv computes nothing: no lengths are needed until a computation runs."""
    A = ng.make_axis(name="lazy")
    w = ng.variable([A])
    d = ng.deriv(ng.sum(ng.tanh(w), out_axes=()), w)
    assert d.axes == ng.make_axes([A]) and A.length is None
    A.length = 3
    np.testing.assert_allclose(ng.NumPyTransformer().computation(d)(), [1.0, 1.0, 1.0])


def test_deriv_of_an_unreachable_independent_is_zero(make):
    A = ng.make_axis(length=3)
    w, v = ng.variable([A], initial_value=1.0), ng.variable([A], initial_value=2.0)
    d = ng.deriv(ng.sum(w * w, out_axes=()), v)
    np.testing.assert_array_equal(make().computation(d)(), [0.0, 0.0, 0.0])


def test_seed_003_softmax_schemas():
    x = ng.placeholder((ng.make_axis(20, 'C')))
    s = ng.softmax(x)
    assert isinstance(s, op_graph.DivideOp)
    assert len(s.schemas) == 1 and isinstance(s.schemas[0], op_graph.Softmax)
    assert s.find_schema(op_graph.Softmax) is s.schemas[0]
    sig = ng.sigmoid(x)
    assert isinstance(sig.find_schema(op_graph.Sigmoid), op_graph.Sigmoid)


def test_names_metadata_and_file_info():
    a, b = ng.constant(1.0), ng.constant(2.0)
    assert a.name != b.name                       # unique by default
    a.name = "mine"
    assert a.name == "mine"
    z = a + b; line = __import__("inspect").currentframe().f_lineno  # noqa: E702
    assert z.filename == __file__ and z.lineno == line
    assert z.file_info == f'File "{__file__}", line {line}'
    z.metadata["stochastic"] = "dropout"
    assert z.metadata == {"stochastic": "dropout"} and ng.add(a, b).metadata == {}
    assert ng.add(a, b, name="named").name == "named"


def test_ops_compare_by_identity():
    a = ng.constant(1.0)
    assert a == a and not (a == ng.constant(1.0)) and {a: 1}[a] == 1


def test_a_computation_returns_a_value_for_an_op_and_a_tuple_for_a_list(make):
    A = ng.make_axis(length=2)
    x = ng.placeholder([A])
    f = make().computation(x * 2, x)
    assert isinstance(f(np.ones(2)), np.ndarray)
    g = make().computation([x * 2, x + 1], x)
    out = g(np.ones(2))
    assert isinstance(out, tuple) and len(out) == 2


def test_a_computation_reads_arrays_in_the_placeholders_axes_order(make):
    A, B = fresh(2, 3)
    x, y = ng.placeholder([A, B]), ng.placeholder([B, A])
    xv, yv = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2) * 10
    np.testing.assert_allclose(make().computation(x + y, x, y)(xv, yv), xv + yv.T)
    # repeated calls with new values reuse the planned statements
    f = make().computation(x * 2, x)
    for k in range(3):
        np.testing.assert_allclose(f(xv + k), (xv + k) * 2)


def test_doall_and_an_initial_value_from_an_op(make):
    A = ng.make_axis(length=3)
    src = ng.constant(np.array([1.0, 2.0, 3.0]), [A])
    v = ng.variable([A], initial_value=src * 10)
    u = ng.variable([A], initial_value=0.0)
    with ng.Op.saved_user_deps():
        step = ng.doall([ng.assign(u, u + v)])
    f = make().computation([u, step])
    f()
    np.testing.assert_allclose(f()[0], [20.0, 40.0, 60.0])


# **************** errors at build time ****************

def test_duplicate_axes():
    H = ng.make_axis(length=2, name="dupH")
    with pytest.raises(ValueError, match="cannot contain duplicates. Axis dupH appears twice"):
        ng.constant(np.ones((2, 2)), [H, H])
    with pytest.raises(ValueError, match="duplicates"):
        ng.placeholder([H, H])


def test_mismatched_lengths_in_elementwise_ops():
    A = ng.make_axis(name="late")
    x = ng.placeholder([A])
    A.length = 3
    x2 = ng.constant(np.ones(3), [A])
    assert (x + x2).axes == ng.make_axes([A])
    with pytest.raises(ValueError, match=r"constant: axis late has length 3, the value's "
                                         r"dimension is 4"):
        ng.constant(np.ones(4), [A])


def test_an_axis_length_changed_after_a_constant_was_given_is_named(make):
    A = ng.make_axis(name="changed")
    c = ng.constant(np.ones(3), [A])
    A.length = 4
    with pytest.raises(ValueError, match=r"initial value has shape \(3,\), its axes "
                                         r"\[.*changed.*\] have lengths \(4,\)"):
        make().computation(c * 2)()
    v = ng.variable([A], initial_value=lambda lengths: np.ones(5))
    with pytest.raises(ValueError, match=r"initial value has shape \(5,\)"):
        make().computation(v)()


def test_constant_values_and_axes_must_agree():
    A, B = ng.make_axis(length=2, name="kA"), ng.make_axis(length=3, name="kB")
    with pytest.raises(ValueError, match=r"a value of shape \(2, 3\) needs 2 axes, got 1"):
        ng.constant(np.ones((2, 3)), [A])
    with pytest.raises(ValueError, match=r"axis kB has length 3, the value's dimension is 2"):
        ng.constant(np.ones((2, 2)), [A, B])


def test_dot_with_a_shared_uncontracted_axis():
    H, W, N = (ng.make_axis(length=n, name=f"d{k}") for k, n in zip("HWN", (2, 3, 4)))
    with pytest.raises(ValueError, match=r"dot: axes \[.*dN.*\] are in both operands but not "
                                         r"contracted .* cast one of them"):
        ng.dot(ng.placeholder([H, W - 1, N]), ng.placeholder([W, N]))
    # a dual shares its primary's length, so contracted lengths always agree; two different
    # axes never contract (dot pairs by identity): an outer product, no error
    V, U = ng.make_axis(length=5, name="dV"), ng.make_axis(length=6, name="dU")
    assert ng.dot(ng.placeholder([V - 1]), ng.placeholder([U])).axes.lengths == (5, 6)


def test_bad_reduction_axes():
    A, B, C = (ng.make_axis(length=n, name=f"r{k}") for k, n in zip("ABC", (2, 3, 4)))
    x = ng.placeholder([A, B])
    with pytest.raises(ValueError, match=r"Sum: reduction axes \[.*rC.*\] are not axes of its "
                                         r"operand .* \(axes \[.*rA.*rB.*\]\)"):
        ng.sum(x, reduction_axes=[C])
    with pytest.raises(ValueError, match=r"Max: out_axes \[.*rC.*\] are not the operand's axes "
                                         r"less the reduction axes"):
        ng.max(x, reduction_axes=[A], out_axes=[C])
    with pytest.raises(ValueError, match="reduction axes"):
        ng.tensor_size(x, reduction_axes=[C])


def test_cast_axes_with_wrong_lengths():
    A, B, C = (ng.make_axis(length=n, name=f"c{k}") for k, n in zip("ABC", (2, 3, 4)))
    x = ng.placeholder([A, B])
    with pytest.raises(ValueError, match=r"cast_axes: axis cB \(length 3\) cannot be cast to cC "
                                         r"\(length 4\)"):
        ng.cast_axes(x, [A, C])
    with pytest.raises(ValueError, match=r"cast_axes: .* has 2 axes .*, got 1"):
        ng.cast_axes(x, [A])


def test_broadcast_to_a_non_superset():
    A, B, C = (ng.make_axis(length=n, name=f"b{k}") for k, n in zip("ABC", (2, 3, 4)))
    x = ng.placeholder([A, B])
    with pytest.raises(ValueError, match=r"broadcast: the new axes \[.*bA.*bC.*\] must include "
                                         r"all of .*bB"):
        ng.broadcast(x, [A, C])
    with pytest.raises(ValueError, match="axes_with_order: .* are not a reordering"):
        ng.axes_with_order(x, [A, C])


def test_non_scalar_deriv_without_error():
    A = ng.make_axis(length=3, name="nsA")
    w = ng.variable([A], initial_value=1.0)
    with pytest.raises(ValueError, match=r"Dependent and error must have the same set of axes: "
                                         r"the dependent .* has \[.*nsA.*\], the error \[\]"):
        ng.deriv(w * 2, w)


def test_assign_to_a_constant():
    A = ng.make_axis(length=3)
    c = ng.constant(np.ones(3), [A])
    with pytest.raises(ValueError, match=r"assign: .* is a constant \(use force=True"):
        ng.assign(c, c + 1)
    with pytest.raises(ValueError, match="is a constant"):
        c[:] = 2.0
    with pytest.raises(TypeError, match="assign: the left side must be a tensor with storage"):
        ng.assign(c + 1, c)
    B = ng.make_axis(length=2, name="asB")
    v = ng.variable([A])
    with pytest.raises(ValueError, match=r"assign: the value has axes \[.*asB.*\] that"):
        ng.assign(v, ng.placeholder([A, B]))
    with pytest.raises(ValueError, match=r"only x\[:\] = value"):
        v[1:] = 2.0


def test_computation_parameters_and_argument_count():
    A = ng.make_axis(length=2)
    x, w = ng.placeholder([A]), ng.variable([A], initial_value=0.0)
    x.name = "px"
    t = ng.NumPyTransformer()
    with pytest.raises(ValueError, match=r"parameter 0 \('.*'\) is not a placeholder"):
        t.computation(x + w, w)
    with pytest.raises(ValueError, match=r"parameter 1 .* is not a placeholder"):
        t.computation(x + w, x, x + 1)
    f = t.computation(x + w, x)
    with pytest.raises(ValueError, match=r"takes 1 argument\(s\) \(px\), got 2"):
        f(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=r"takes 1 argument\(s\) \(px\), got 0"):
        f()
    with pytest.raises(ValueError, match=r"placeholder px has axes .* of lengths \(2,\); got an "
                                         r"array of shape \(3,\)"):
        f(np.ones(3))


def test_an_axis_without_length_at_the_first_call_is_named():
    A, B = ng.make_axis(name="unsized"), ng.make_axis(length=2, name="sized")
    x = ng.placeholder([A, B])
    y = ng.placeholder([B])
    t = ng.NumPyTransformer()
    f = t.computation(ng.sum(x, reduction_axes=[A]) + y, x, y)
    with pytest.raises(ValueError, match="unsized"):
        f(np.ones((3, 2)), np.ones(2))
    g = ng.NumPyTransformer().computation(ng.sum(x * 2, out_axes=()), x)
    with pytest.raises(ValueError, match="axis unsized"):
        g(np.ones((3, 2)))
    A.length = 3
    assert float(ng.NumPyTransformer().computation(ng.sum(x, out_axes=()), x)(
        np.ones((3, 2)))) == 6.0


def test_a_finalized_transformer_takes_no_new_computation():
    A = ng.make_axis(length=2)
    x = ng.placeholder([A])
    t = ng.make_transformer_factory("cpu")()
    f = t.computation(x + 1, x)
    g = t.computation(x * 2, x)      # before the first call: fine
    f(np.ones(2))
    np.testing.assert_array_equal(g(np.ones(2)), [2.0, 2.0])
    with pytest.raises(ValueError, match="Cannot create computations from a finalized "
                                         "transformer"):
        t.computation(x - 1, x)


def test_other_build_errors_are_clear():
    A, B = fresh(2, 3)
    x = ng.placeholder([A, B])
    with pytest.raises(ValueError, match="SlicedAxis takes a slice step of 1, -1 or None"):
        x[::2]
    with pytest.raises(ValueError, match=r"slice: 3 indices for .* 2 axes"):
        x[0, 0, 0]
    with pytest.raises(ValueError, match=r"flatten: .* must be the leading axes"):
        ng.flatten(x, [B])
    S = ng.make_axis(length=3, name="stk")
    with pytest.raises(ValueError, match=r"stack: axis stk has length 3, 2 tensors given"):
        ng.stack([x, x], S)
    with pytest.raises(ValueError, match=r"stack: every operand needs the axes"):
        ng.stack([x, ng.placeholder([A])], ng.make_axis())
    with pytest.raises(ValueError, match=r"pad: 1 paddings for .* 2 axes"):
        ng.pad(x, [1])
    with pytest.raises(TypeError, match="expected an ngraph op, a number or a numpy array, "
                                        "got str"):
        x + "1"
    with pytest.raises(ValueError, match=r"unknown transformer 'tpu'; the choices are"):
        ng.make_transformer_factory("tpu")


def test_a_strided_device_tensor_is_read_in_another_axis_order_through_permuted_strides():
    # the GPU's tensors carry element strides: a permuted view swaps shape and strides, no copy
    from neonlike.ngraph.transformers.lowering import _permuted

    class Strided:
        def __init__(self, shape, strides, offset=0):
            self.shape, self.strides, self.offset = shape, strides, offset

        def _derived(self, shape, offset, strides):
            return Strided(shape, strides, self.offset + offset)

    t = _permuted(Strided((2, 3, 4), (12, 4, 1)), [2, 0, 1])
    assert (t.shape, t.strides, t.offset) == ((4, 2, 3), (1, 12, 4), 0)
    with pytest.raises(NotImplementedError, match="permuted view"):
        _permuted(object(), [1, 0])


def test_updates_use_the_values_of_the_call_not_of_earlier_updates(make):
    # b's gradient reads w: computed with w as it was at the call (one gradient step), not with
    # w already updated by the statement before (schedule.py: deferred updates)
    X = ng.make_axis(length=3, name="X")
    x0 = np.array([0.5, -1.0, 2.0])
    w = ng.variable([X], initial_value=x0)
    b = ng.variable([X], initial_value=np.array([0.1, 0.2, 0.3]))
    loss = ng.sum(ng.tanh(w * b) * w, reduction_axes=[X])
    with ng.Op.saved_user_deps():
        updates = [ng.assign(v, v - 0.5 * ng.deriv(loss, v)) for v in (w, b)]
    f = make().computation([loss] + updates)
    f()
    w1, b1 = x0, np.array([0.1, 0.2, 0.3])
    t = np.tanh(w1 * b1)
    dw = t + w1 * (1 - t * t) * b1
    db = w1 * w1 * (1 - t * t)
    t2 = f.transformer
    np.testing.assert_allclose(t2.storage(w).get().ravel(), w1 - 0.5 * dw, rtol=1e-5)
    np.testing.assert_allclose(t2.storage(b).get().ravel(), b1 - 0.5 * db, rtol=1e-5)


def test_a_value_read_by_several_statements_is_computed_once(make):
    # the forward dot is read by the cost and by both gradients: one statement computes it
    from neonlike.optree import OpTreeNode, dag_postorder
    C, Y, N = (ng.make_axis(length=n) for n in (4, 3, 5))
    x = ng.placeholder([C, N])
    w = ng.variable([C, Y], initial_value=np.linspace(-1, 1, 12).reshape(4, 3))
    b = ng.variable([Y], initial_value=0.5)
    h = ng.tanh(ng.dot(w, x) + b)
    cost = ng.sum(h * h, reduction_axes=h.axes)
    with ng.Op.saved_user_deps():
        updates = [ng.assign(v, v - 0.1 * ng.deriv(cost, v)) for v in (w, b)]
    f = make().computation([cost] + updates, x)
    xv = np.linspace(-2, 2, 20).reshape(4, 5)
    c0 = f(xv)[0]
    forward = [n for _, tree in f.trees if isinstance(tree, OpTreeNode)
               for n in dag_postorder(tree) if n[0]["op"] == "dot"
               and n.shape == (3, 5)]
    assert len(forward) == 1, f"the forward dot is computed {len(forward)} times"
    wv, bv = np.linspace(-1, 1, 12).reshape(4, 3), 0.5
    assert np.isclose(c0, (np.tanh(wv.T @ xv + bv) ** 2).sum(), rtol=1e-5)


def test_a_variable_marked_input_is_fed_by_the_computation(make):
    # upstream's tests feed a variable by setting `v.input = True` (an alias of is_input)
    X = ng.make_axis(length=3, name="X")
    v = ng.variable([X], initial_value=np.zeros(3))
    assert v.input is False
    v.input = True
    assert v.is_input and v.input
    f = make().computation(v * 2.0, v)
    np.testing.assert_allclose(f(np.array([1.0, 2.0, 3.0])), [2.0, 4.0, 6.0])


def test_the_readme_ngraph_example_runs():
    # the README's ngraph section, as written there
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("## ngraph", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope: dict = {}
    exec(compile(code.replace("print(", "_ = ("), "README.md", "exec"), scope)
    assert tuple(a.short_name for a in scope["y"].axes) == ("Y", "N")
    assert np.isfinite(scope["train"](np.ones((4, 8)))[0])


@pytest.mark.parametrize("kind", ["numpy", "cpu"])
def test_each_call_returns_arrays_the_caller_owns(kind):
    """A large result is computed straight into a new array each call (no copy), a small one
    copied out: either way a later call leaves an earlier result as it was."""
    from neonlike.ngraph.transformers.base import FRESH_MIN
    for n in (FRESH_MIN, 10):
        A = ng.make_axis(n, name="A")
        x = ng.placeholder([A])
        w = ng.variable([A], initial_value=np.zeros(n))
        f = ng.make_transformer_factory(kind)().computation([x * 2.0 + w, ng.assign(w, w + 1)], x)
        first, _ = f(np.ones(n))
        second, _ = f(np.full(n, 3.0))
        np.testing.assert_array_equal(first, 2.0)
        np.testing.assert_array_equal(second, 7.0)
        assert not np.shares_memory(first, second)
