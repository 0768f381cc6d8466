"""The OpTreeNode contract: structure, OpTreeNode.build, the operators, printing, truth values and
hashing, and shape inference (with its build-time errors).

Trees are built, not executed, in most tests here; where values are checked the oracle is numpy
float64 computed in the test.
"""
from __future__ import annotations

import operator
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neonlike.optree import OpTreeNode
from neonlike.tensor import Tensor

FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def x(cpu):
    return cpu.array(np.arange(6, dtype=np.float64).reshape(2, 3) - 2.5, name="x")


@pytest.fixture
def y(cpu):
    return cpu.array(np.linspace(-1, 4, 6).reshape(2, 3), name="y")


def pad2(shape):
    """Computed results never have fewer than 2 dims: missing dims are leading 1s."""
    shape = tuple(shape)
    return (1,) * (2 - len(shape)) + shape if len(shape) < 2 else shape


# ------------------------------------------------------------------------------------------------
# structure: a 3-tuple (op_dict, left, right) whose op_dict is a frozen dict
# ------------------------------------------------------------------------------------------------

def test_node_is_a_three_tuple_of_op_dict_left_right(x, y):
    node = x + y
    assert isinstance(node, OpTreeNode) and isinstance(node, tuple)
    assert len(node) == 3
    op_dict, left, right = node
    assert left is x and right is y
    assert isinstance(op_dict, dict)
    assert op_dict == {"op": "add", "shape": (2, 3)}
    assert {"op": "add", "shape": (2, 3)} == op_dict
    assert op_dict["op"] == "add" and isinstance(op_dict["op"], str)
    assert node.shape == (2, 3) and all(type(d) is int for d in node.shape)
    with pytest.raises(TypeError):
        node[0] = {"op": "sub", "shape": (2, 3)}  # the tuple itself is immutable


def test_unary_node_has_none_as_right_child(x):
    node = OpTreeNode.build("exp", x, None)
    assert node[0] == {"op": "exp", "shape": (2, 3)}
    assert node[1] is x and node[2] is None


def test_reduction_op_dict_carries_axis_and_keepdims(cpu, x):
    node = cpu.sum(x, axis=1)
    assert node[0]["op"] == "sum" and node[0]["shape"] == (2, 1)
    assert "axis" in node[0] and "keepdims" in node[0]
    assert node[0]["keepdims"] is True
    assert node[0]["axis"] in (1, (1,))
    flat = cpu.max(x, axis=0, keepdims=False)
    assert flat[0]["op"] == "max" and flat[0]["shape"] == (1, 3) and flat[0]["keepdims"] is False


MUTATIONS = {
    "setitem": lambda d: d.__setitem__("op", "sub"),
    "setitem-new": lambda d: d.__setitem__("axis", 0),
    "delitem": lambda d: d.__delitem__("op"),
    "update": lambda d: d.update(shape=(3, 2)),
    "update-mapping": lambda d: d.update({"axis": 1}),
    "pop": lambda d: d.pop("op"),
    "pop-default": lambda d: d.pop("absent", None),
    "popitem": lambda d: d.popitem(),
    "clear": lambda d: d.clear(),
    "setdefault": lambda d: d.setdefault("axis", 1),
    "ior": lambda d: operator.ior(d, {"axis": 1}),
    "reinit": lambda d: d.__init__(axis=1),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_op_dict_is_immutable(x, y, mutate):
    node = x * y
    before = dict(node[0])
    with pytest.raises(TypeError):
        mutate(node[0])
    assert node[0] == before == {"op": "mul", "shape": (2, 3)}


def test_op_dict_copy_is_a_plain_mutable_dict(x, y):
    d = dict((x + y)[0])
    d["op"] = "sub"
    assert d == {"op": "sub", "shape": (2, 3)}


# ------------------------------------------------------------------------------------------------
# OpTreeNode.build
# ------------------------------------------------------------------------------------------------

def test_build_binary_and_unary(x, y):
    node = OpTreeNode.build("mul", x, y)
    assert node[0] == {"op": "mul", "shape": (2, 3)} and node[1] is x and node[2] is y
    node = OpTreeNode.build("sqrt", x, None)
    assert node[0] == {"op": "sqrt", "shape": (2, 3)} and node[1] is x and node[2] is None
    node = OpTreeNode.build("add", x, 1.5)
    assert node[1] is x and node[2] == 1.5


def test_build_with_out_executes(cpu, x):
    out = cpu.zeros((2, 3))
    OpTreeNode.build("mul", x, 3, out=out)
    np.testing.assert_allclose(out.get(), x.get().astype(np.float64) * 3, rtol=1e-6)


def test_build_assign_executes_immediately(cpu, x, y):
    out = cpu.zeros((2, 3))
    OpTreeNode.build("assign", out, x - y)
    expected = x.get().astype(np.float64) - y.get().astype(np.float64)
    np.testing.assert_allclose(out.get(), expected, rtol=1e-6, atol=1e-7)


def test_build_unknown_op_lists_known_ops(x, y):
    with pytest.raises(ValueError, match="frobnicate") as info:
        OpTreeNode.build("frobnicate", x, y)
    msg = str(info.value)
    for known in ("add", "mul", "exp", "sum", "dot", "transpose", "assign"):
        assert re.search(rf"\b{known}\b", msg), (known, msg)


@pytest.mark.parametrize("op, a, b", [
    ("add", "x", None), ("add", None, "y"), ("add", None, None), ("mul", "x", None),
    ("exp", "x", "y"), ("exp", None, None), ("exp", None, "x"), ("sum", "x", "y"),
    ("dot", "x", None), ("transpose", "x", "y"),
])
def test_build_wrong_operand_count(x, y, op, a, b):
    operands = {"x": x, "y": y, None: None}
    with pytest.raises(ValueError, match=op):
        OpTreeNode.build(op, operands[a], operands[b])


@pytest.mark.parametrize("op, b, kwargs", [
    ("add", "y", {"axis": 1}),
    ("exp", None, {"keepdims": True}),
    ("sum", None, {"bogus": 1}),
    ("sum", None, {"axis": 0, "depth": 2}),
    ("dot", "y.T", {"axes": (1, 0)}),
])
def test_build_unknown_keyword_is_type_error(x, y, op, b, kwargs):
    operands = {"y": y, "y.T": y.T, None: None}
    with pytest.raises(TypeError, match=list(kwargs)[-1]):
        OpTreeNode.build(op, x, operands[b], **kwargs)


def test_backend_reduction_rejects_unknown_keyword(cpu, x):
    with pytest.raises(TypeError):
        cpu.sum(x, bogus=1)


UNSUPPORTED = [("a", "str"), ([1.0], "list"), (1 + 2j, "complex"), (object(), "object"),
               (np.complex128(1j), "complex128"), ({"a": 1}, "dict")]


@pytest.mark.parametrize("bad, name", UNSUPPORTED, ids=[n for _, n in UNSUPPORTED])
@pytest.mark.parametrize("side", ["left", "right"])
def test_build_unsupported_operand_type_names_it(x, bad, name, side):
    with pytest.raises(TypeError, match=rf"\b{name}\b"):
        if side == "left":
            OpTreeNode.build("add", bad, x)
        else:
            OpTreeNode.build("add", x, bad)


@pytest.mark.parametrize("side", ["left", "right"])
def test_build_rejects_nd_array_pointing_to_be_array(x, side):
    host = np.ones((2, 3))
    with pytest.raises(TypeError, match=r"be\.array"):
        if side == "left":
            OpTreeNode.build("add", host, x)
        else:
            OpTreeNode.build("add", x, host)


def test_execute_needs_an_assign_root(x, y):
    for tree in (x + y, OpTreeNode.build("exp", x, None), (x + y).T):
        with pytest.raises(ValueError, match="assign"):
            tree.execute()


def test_execute_of_an_assign_node_runs_it(cpu, x):
    out = cpu.zeros((2, 3))
    node = OpTreeNode({"op": "assign", "shape": (2, 3)}, out, x * 2)
    node.execute()
    np.testing.assert_allclose(out.get(), x.get().astype(np.float64) * 2, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# traverse, pp, shape, T, astensor, asnumpyarray, reshape
# ------------------------------------------------------------------------------------------------

def test_traverse_gives_the_post_order_stack(x, y):
    f = x + 2 * y
    stack = f.traverse([])
    assert len(stack) == 5
    assert stack[0] is x and stack[1] == 2 and stack[2] is y
    assert stack[3] == {"op": "mul", "shape": (2, 3)}
    assert stack[4] == {"op": "add", "shape": (2, 3)}


def test_traverse_appends_to_the_given_list(x, y):
    given_stack = ["sentinel"]
    result = (-x).traverse(given_stack)
    assert given_stack[0] == "sentinel" and given_stack[1] is x
    assert given_stack[2] == {"op": "neg", "shape": (2, 3)}
    assert result == given_stack and len(result) == 3


def test_traverse_nested_trees(cpu, x, y):
    f = cpu.exp(x * y) - cpu.sum(y, axis=0)
    stack = f.traverse([])
    assert stack[0] is x and stack[1] is y
    assert [s["op"] for s in stack if isinstance(s, dict)] == ["mul", "exp", "sum", "sub"]
    assert stack[4] is y
    assert stack[-1]["shape"] == (2, 3)


def test_pp_is_infix(cpu, x, y):
    text = (x + 2 * y).pp()
    assert isinstance(text, str)
    positions = [text.index(s) for s in ("x", "+", "2", "*", "y")]
    assert positions == sorted(positions), text
    assert "exp" in OpTreeNode.pp(cpu.exp(x))  # neon's unbound form


def test_shape_of_node_and_static_form(cpu, x):
    assert (x @ x.T).shape == (2, 2)
    assert cpu.sum(x, axis=0).shape == (1, 3)
    assert OpTreeNode.shape(x) == (2, 3)
    assert OpTreeNode.shape(x @ x.T) == (2, 2)


def test_tree_T_is_a_transpose_op(x):
    inner = x + 1
    t = inner.T
    assert isinstance(t, OpTreeNode)
    assert t[0]["op"] == "transpose" and t.shape == (3, 2)
    assert t[1] is inner and t[2] is None
    np.testing.assert_allclose(t.asnumpyarray(), (x.get().astype(np.float64) + 1).T, rtol=1e-6)


def test_tree_transpose_into_out(cpu, x):
    out = cpu.zeros((3, 2))
    (x * 2).transpose(out=out)
    np.testing.assert_allclose(out.get(), x.get().astype(np.float64).T * 2, rtol=1e-6)


def test_astensor_and_asnumpyarray(cpu, x, y):
    f = x * 2 + cpu.exp(y)
    expected = x.get().astype(np.float64) * 2 + np.exp(y.get().astype(np.float64))
    t = f.astensor()
    assert isinstance(t, Tensor) and t.shape == (2, 3)
    np.testing.assert_allclose(t.get(), expected, rtol=2e-6)
    host = f.asnumpyarray()
    assert isinstance(host, np.ndarray) and host.shape == (2, 3)
    np.testing.assert_allclose(host, expected, rtol=2e-6)


@pytest.mark.parametrize("args, shape", [
    (((3, 2),), (3, 2)), ((3, 2), (3, 2)), ((-1, 2), (3, 2)), ((1, 6), (1, 6)),
    ((6,), (6, 1)), ((-1,), (6, 1)), ((2, 1, 3), (2, 1, 3)),
])
def test_reshape_on_a_tree(x, args, shape):
    node = (x + 1).reshape(*args)
    assert isinstance(node, OpTreeNode) and node.shape == shape
    expected = (x.get().astype(np.float64) + 1).reshape(shape)
    np.testing.assert_allclose(node.asnumpyarray(), expected, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# printing: neon's `({'op': 'add', 'shape': (2, 3)}, x, 1)`
# ------------------------------------------------------------------------------------------------

def test_print_str_repr_format(x, y, capsys):
    f = x + 1
    print(f)
    assert capsys.readouterr().out == "({'op': 'add', 'shape': (2, 3)}, x, 1)\n"
    assert str(f) == repr(f) == "({'op': 'add', 'shape': (2, 3)}, x, 1)"
    nested = x + 2 * y
    assert str(nested) == "({'op': 'add', 'shape': (2, 3)}, x, ({'op': 'mul', 'shape': (2, 3)}, 2, y))"
    assert str(-x) == "({'op': 'neg', 'shape': (2, 3)}, x, None)"
    assert str(x * 0.5) == "({'op': 'mul', 'shape': (2, 3)}, x, 0.5)"


def test_unnamed_tensors_print_as_tensor_id(cpu):
    a, b = cpu.ones((2, 3)), cpu.ones((2, 3))
    text = str(a + b)
    match = re.fullmatch(r"\(\{'op': 'add', 'shape': \(2, 3\)\}, (tensor-0x[0-9a-f]+), (tensor-0x[0-9a-f]+)\)",
                         text)
    assert match, text
    assert match.group(1) != match.group(2)
    assert str(a + 1).split(", ")[-2] == match.group(1)  # the same tensor prints the same way


# ------------------------------------------------------------------------------------------------
# operators: every one builds a node with the right op and operand order
# ------------------------------------------------------------------------------------------------

ARITH = [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
         ("div", operator.truediv), ("pow", operator.pow), ("dot", operator.matmul),
         ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor)]
# (op name, operator, op name of the reflected form `const OP t`, which becomes `t OP' const`)
COMPARE = [("eq", operator.eq, "eq"), ("ne", operator.ne, "ne"), ("lt", operator.lt, "gt"),
           ("le", operator.le, "ge"), ("gt", operator.gt, "lt"), ("ge", operator.ge, "le")]
CONSTANTS = [2, 2.5, np.float32(2.5), np.float64(2.5), np.int64(2), np.bool_(True),
             np.array(2.5), np.array(3)]
CONSTANT_IDS = ["int", "float", "np.float32", "np.float64", "np.int64", "np.bool_", "0d-float",
                "0d-int"]


def _refuse(what):
    def method(self, *args):
        raise AssertionError(f"the tensor was {what} (numpy tried to iterate it)")
    return method


NO_ITERATION = {"__len__": _refuse("asked for its length"), "__getitem__": _refuse("indexed"),
                "__iter__": _refuse("iterated")}


def guarded(tensor):
    """The tensor, retyped so that any attempt to iterate or index it fails the test."""
    tensor.__class__ = type("Guarded" + type(tensor).__name__, (type(tensor),), NO_ITERATION)
    return tensor


def make_operand(cpu, kind, shape):
    t = guarded(cpu.ones(shape, name="t"))
    return t if kind == "tensor" else cpu.exp(t)


def assert_constant(leaf, c):
    assert not isinstance(leaf, (Tensor, OpTreeNode, tuple))
    assert np.ndim(leaf) == 0 and leaf == np.asarray(c).item()


@pytest.mark.parametrize("kind", ["tensor", "tree"])
@pytest.mark.parametrize("c", CONSTANTS, ids=CONSTANT_IDS)
@pytest.mark.parametrize("name, op", ARITH, ids=[a[0] for a in ARITH])
def test_arithmetic_with_constants_builds_nodes(cpu, kind, c, name, op):
    t = make_operand(cpu, kind, (1, 1) if name == "dot" else (2, 3))
    forward = op(t, c)
    assert isinstance(forward, OpTreeNode)
    assert forward[0]["op"] == name and forward[1] is t
    assert_constant(forward[2], c)
    reflected = op(c, t)  # numpy scalars and 0-d arrays defer to the tensor
    assert isinstance(reflected, OpTreeNode)
    assert reflected[0]["op"] == name and reflected[2] is t
    assert_constant(reflected[1], c)
    assert forward.shape == reflected.shape == t.shape


@pytest.mark.parametrize("kind", ["tensor", "tree"])
@pytest.mark.parametrize("c", CONSTANTS, ids=CONSTANT_IDS)
@pytest.mark.parametrize("name, op, reflected_name", COMPARE, ids=[c[0] for c in COMPARE])
def test_comparisons_with_constants_build_nodes(cpu, kind, c, name, op, reflected_name):
    t = make_operand(cpu, kind, (2, 3))
    forward = op(t, c)
    assert isinstance(forward, OpTreeNode), type(forward)
    assert forward[0]["op"] == name and forward[1] is t
    assert_constant(forward[2], c)
    reflected = op(c, t)
    assert isinstance(reflected, OpTreeNode), type(reflected)
    assert reflected[0]["op"] == reflected_name and reflected[1] is t
    assert_constant(reflected[2], c)


@pytest.mark.parametrize("kinds", [("tensor", "tensor"), ("tensor", "tree"), ("tree", "tensor"),
                                   ("tree", "tree")])
@pytest.mark.parametrize("name, op", ARITH + [(c[0], c[1]) for c in COMPARE],
                         ids=[a[0] for a in ARITH] + [c[0] for c in COMPARE])
def test_binary_operators_between_tensors_and_trees(cpu, kinds, name, op):
    shape = (3, 3)
    a = make_operand(cpu, kinds[0], shape)
    b = make_operand(cpu, kinds[1], shape)
    node = op(a, b)
    assert isinstance(node, OpTreeNode)
    assert node[0] == {"op": name, "shape": shape}
    assert node[1] is a and node[2] is b


@pytest.mark.parametrize("kind", ["tensor", "tree"])
@pytest.mark.parametrize("name, op", [("neg", operator.neg), ("not", operator.invert), ("abs", abs)])
def test_unary_operators(cpu, kind, name, op):
    t = make_operand(cpu, kind, (2, 3))
    node = op(t)
    assert isinstance(node, OpTreeNode)
    assert node[0] == {"op": name, "shape": (2, 3)}
    assert node[1] is t and node[2] is None


def test_operators_compute_the_right_values(cpu):
    av = np.array([[-2.0, -0.0, 0.5], [1.0, 3.0, 0.0]])
    bv = np.array([[1.0, 2.0, -0.5], [1.0, 0.0, 4.0]])
    a, b = cpu.array(av), cpu.array(bv)
    with np.errstate(divide="ignore"):
        inverse = 3 / bv
    cases = [
        (2 - a, 2 - av), (a / 4, av / 4), (np.float32(3) / b.T.T, inverse), (2 ** a, 2.0 ** av),
        (a ** 2, av ** 2), (np.float64(1.5) * a, 1.5 * av), (-a + b, -av + bv),
        (a < 1, (av < 1) * 1.0), (np.int64(1) < a, (1 < av) * 1.0), (a == b, (av == bv) * 1.0),
        (a != 0, (av != 0) * 1.0), (a & b, np.logical_and(av, bv) * 1.0),
        (a | 0, np.logical_or(av, 0) * 1.0), (a ^ b, np.logical_xor(av, bv) * 1.0),
        (~a, np.logical_not(av) * 1.0), (abs(a), np.abs(av)), (a @ b.T, av @ bv.T),
    ]
    for tree, expected in cases:
        np.testing.assert_allclose(tree.asnumpyarray(), expected, rtol=2e-6, atol=1e-7,
                                   err_msg=str(tree))


@pytest.mark.parametrize("kind", ["tensor", "tree"])
@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.pow, operator.matmul, operator.and_, operator.or_,
                                operator.xor, operator.eq, operator.ne, operator.lt, operator.le,
                                operator.gt, operator.ge],
                         ids=lambda op: op.__name__)
@pytest.mark.parametrize("side", ["left", "right"])
def test_nd_array_operand_raises_pointing_to_be_array(cpu, kind, op, side):
    t = make_operand(cpu, kind, (3, 3))
    host = np.ones((3, 3))
    with pytest.raises(TypeError, match=r"be\.array"):
        op(host, t) if side == "left" else op(t, host)


@pytest.mark.parametrize("kind", ["tensor", "tree"])
@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.lt, operator.ge],
                         ids=lambda op: op.__name__)
@pytest.mark.parametrize("bad", ["a", [1.0], 1j, object(), None, (), (1.0, 2.0)],
                         ids=["str", "list", "complex", "object", "None", "empty-tuple", "tuple"])
def test_unsupported_operands_raise_type_error(cpu, kind, op, bad):
    """Never tuple concatenation or tuple comparison, never a bool."""
    t = make_operand(cpu, kind, (2, 3))
    with pytest.raises(TypeError):
        op(t, bad)
    with pytest.raises(TypeError):
        op(bad, t)


def test_complex_operand_is_named(x):
    with pytest.raises(TypeError, match="complex"):
        x * 1j
    with pytest.raises(TypeError, match="str"):
        x + "a"


def test_numpy_scalars_never_iterate_the_tensor(cpu):
    t = guarded(cpu.ones((4, 5)))
    for c in (np.float32(2), np.float64(2), np.int64(2), np.bool_(False), np.array(2.0)):
        for node in (c * t, t * c, c + t, c - t, c / t, c ** t, c < t, c == t, c != t):
            assert isinstance(node, OpTreeNode) and node.shape == (4, 5)


def test_np_float32_times_tensor_computes(cpu):
    values = np.array([[1.0, -2.0], [0.5, 3e38]])
    t = cpu.array(values)
    with np.errstate(over="ignore"):
        expected = (2 * values).astype(np.float32)  # 6e38 overflows float32 to inf
    np.testing.assert_allclose((np.float32(2) * t).asnumpyarray(), expected, rtol=1e-6)


def test_no_tuple_behaviour_leaks(x, y):
    node, other = x + y, x * y
    assert len(node) == 3
    for result, name, left, right in [
        (node + node, "add", node, node), (node + other, "add", node, other),
        (node * 2, "mul", node, 2), (2 * node, "mul", 2, node), (node * 0, "mul", node, 0),
        (node < other, "lt", node, other), (node <= node, "le", node, node),
        (node > other, "gt", node, other), (node >= other, "ge", node, other),
        (node == other, "eq", node, other), (node != other, "ne", node, other),
    ]:
        assert isinstance(result, OpTreeNode), (name, type(result))
        assert len(result) == 3 and result[0]["op"] == name
        assert result[1] is left or result[1] == left
        assert result[2] is right or result[2] == right


def test_positive_is_identity(x):
    assert +x is x


# ------------------------------------------------------------------------------------------------
# hashing and truth values
# ------------------------------------------------------------------------------------------------

def test_nodes_are_unhashable(x, y):
    for node in (x + y, x == y, -x):
        with pytest.raises(TypeError):
            hash(node)
        with pytest.raises(TypeError):
            {node: 1}


def test_tensors_hash_by_identity(cpu):
    a, b = cpu.zeros((2, 3)), cpu.zeros((2, 3))
    assert hash(a) == hash(a)
    table = {a: "a", b: "b"}
    assert table[a] == "a" and table[b] == "b"
    assert len({a, b, a}) == 2
    assert a in table and cpu.zeros((2, 3)) not in table


def test_membership_compares_tensors_by_identity_same_shapes(cpu):
    a, b, c = cpu.zeros((2, 3)), cpu.zeros((2, 3)), cpu.zeros((2, 3))
    assert a in [b, a]
    assert c not in [a, b]
    items = [a, b, c]
    assert items.index(c) == 2
    items.remove(b)
    assert items[0] is a and items[1] is c
    assert [a, b].count(a) == 1


@pytest.mark.parametrize("other_shape", [(4, 5), (1, 3), (2, 1), (3, 2), (2, 3, 4), (1, 1)])
def test_membership_compares_tensors_by_identity_different_shapes(cpu, other_shape):
    a, b = cpu.zeros((2, 3)), cpu.zeros((2, 3))
    z = cpu.zeros(other_shape)
    assert z not in [a, b]
    assert a not in [z, b]
    assert z in [a, z]
    assert [a, z, b].index(b) == 2


def test_equality_of_tensors_that_cannot_broadcast_is_identity(cpu):
    a, z = cpu.zeros((2, 3)), cpu.zeros((4, 5))
    assert (a == z) is False
    assert (a != z) is True


def test_bool_of_tensor_equality_is_identity(cpu):
    a, b = cpu.zeros((2, 3)), cpu.zeros((2, 3))
    assert bool(a == a) is True and bool(a != a) is False
    assert bool(a == b) is False and bool(a != b) is True


TRUTHLESS = {
    "add": lambda x, y: x + y,
    "lt": lambda x, y: x < y,
    "eq-const": lambda x, y: x == 1,
    "ne-const": lambda x, y: x != 0,
    "const-eq": lambda x, y: 0.5 == x,
    "eq-tree-tensor": lambda x, y: (x + 0) == y,
    "eq-tensor-tree": lambda x, y: x == (y * 1),
    "ne-trees": lambda x, y: (x + 0) != (y + 0),
    "not-eq": lambda x, y: ~(x == y),
    "and": lambda x, y: (x > 0) & (y > 0),
    "neg": lambda x, y: -x,
    "sum": lambda x, y: x.backend.sum(x),
}


@pytest.mark.parametrize("make", TRUTHLESS.values(), ids=TRUTHLESS.keys())
def test_bool_of_other_trees_raises_with_an_explanation(x, y, make):
    tree = make(x, y)
    assert isinstance(tree, OpTreeNode)
    with pytest.raises(TypeError) as info:
        bool(tree)
    msg = str(info.value)
    assert "assign" in msg.lower() and ".get()" in msg
    assert "&" in msg and "|" in msg
    with pytest.raises(TypeError):
        if tree:
            pass
    with pytest.raises(TypeError):
        not tree  # noqa: B015


# ------------------------------------------------------------------------------------------------
# shape inference errors at build time
# ------------------------------------------------------------------------------------------------

BE_BINARY = [("add", "add"), ("subtract", "sub"), ("multiply", "mul"), ("divide", "div"),
             ("power", "pow"), ("equal", "eq"), ("not_equal", "ne"), ("less", "lt"),
             ("less_equal", "le"), ("greater", "gt"), ("greater_equal", "ge"),
             ("minimum", "minimum"), ("maximum", "maximum"), ("logical_and", "and"),
             ("logical_or", "or"), ("logical_xor", "xor")]
BAD_PAIRS = [((2, 3), (4, 5)), ((2, 3), (3, 2)), ((2, 3, 4), (3, 3)), ((5, 1, 4), (2, 3, 5))]


def assert_names(msg, names, shapes):
    assert any(re.search(rf"\b{re.escape(n)}\b", msg) for n in names), (names, msg)
    for s in shapes:
        assert str(tuple(s)) in msg, (s, msg)


@pytest.mark.parametrize("sa, sb", BAD_PAIRS)
@pytest.mark.parametrize("fn, op", BE_BINARY, ids=[b[0] for b in BE_BINARY])
def test_incompatible_broadcast_in_backend_functions(cpu, fn, op, sa, sb):
    a, b = cpu.zeros(sa), cpu.zeros(sb)
    with pytest.raises(ValueError) as info:
        getattr(cpu, fn)(a, b)
    assert_names(str(info.value), (op, fn), (sa, sb))


OPERATORS = [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
             ("div", operator.truediv), ("pow", operator.pow), ("lt", operator.lt),
             ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge), ("and", operator.and_),
             ("or", operator.or_), ("xor", operator.xor), ("eq", operator.eq), ("ne", operator.ne)]


@pytest.mark.parametrize("kinds", [("tensor", "tree"), ("tree", "tensor"), ("tree", "tree")])
@pytest.mark.parametrize("name, op", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_incompatible_broadcast_in_operators(cpu, kinds, name, op):
    sa, sb = (2, 3), (4, 5)
    a = make_operand(cpu, kinds[0], sa)
    b = make_operand(cpu, kinds[1], sb)
    with pytest.raises(ValueError) as info:
        op(a, b)
    assert_names(str(info.value), (name,), (sa, sb))


@pytest.mark.parametrize("name, op", [o for o in OPERATORS if o[0] not in ("eq", "ne")],
                         ids=[o[0] for o in OPERATORS if o[0] not in ("eq", "ne")])
def test_incompatible_broadcast_between_tensors(cpu, name, op):
    sa, sb = (3, 2), (2, 3)
    with pytest.raises(ValueError) as info:
        op(cpu.zeros(sa), cpu.zeros(sb))
    assert_names(str(info.value), (name,), (sa, sb))


@pytest.mark.parametrize("sa, sb", [((2, 3), (4, 5)), ((2, 3), (2, 3)), ((3, 1), (3, 1)),
                                    ((1, 4), (5, 4))])
def test_dot_inner_dimension_mismatch(cpu, sa, sb):
    a, b = cpu.zeros(sa), cpu.zeros(sb)
    for build in (lambda: a @ b, lambda: cpu.dot(a, b), lambda: OpTreeNode.build("dot", a, b),
                  lambda: (a + 0) @ b):
        with pytest.raises(ValueError) as info:
            build()
        assert_names(str(info.value), ("dot",), (sa, sb))


@pytest.mark.parametrize("fn", ["sum", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("shape, axis", [((2, 3), 2), ((2, 3), -3), ((2, 3, 4), 3), ((2, 3), 7)])
def test_reduction_axis_out_of_range(cpu, fn, shape, axis):
    with pytest.raises(ValueError) as info:
        getattr(cpu, fn)(cpu.zeros(shape), axis=axis)
    assert_names(str(info.value), (fn,), ())
    assert str(axis) in str(info.value)


@pytest.mark.parametrize("fn", ["sum", "max", "min"])
@pytest.mark.parametrize("axis", [(0, 2), (-4,)])
def test_reduction_axis_tuple_out_of_range(cpu, fn, axis):
    with pytest.raises(ValueError, match=fn):
        getattr(cpu, fn)(cpu.zeros((2, 3)), axis=axis)


@pytest.mark.parametrize("fn", ["sum", "max", "min"])
@pytest.mark.parametrize("axis", [(1, 1), (1, -1), (0, -2), (0, 1, 0)])
def test_reduction_repeated_axis(cpu, fn, axis):
    with pytest.raises(ValueError) as info:
        getattr(cpu, fn)(cpu.zeros((2, 3)), axis=axis)
    assert_names(str(info.value), (fn,), ())
    assert re.search("repeat|duplicate", str(info.value))


@pytest.mark.parametrize("shape, axes", [((2, 3), (0, 0)), ((2, 3), (1,)), ((2, 3), (0, 1, 2)),
                                         ((2, 3, 4), (0, 1, 1)), ((2, 3, 4), (2, 0)),
                                         ((2, 3, 4), (0, 1, 3))])
def test_transpose_axes_not_a_permutation(cpu, shape, axes):
    for a in (cpu.zeros(shape), cpu.zeros(shape) + 1):
        with pytest.raises(ValueError, match="transpose"):
            cpu.transpose(a, axes=axes)


@pytest.mark.parametrize("shape, target", [((2, 3), (4, 2)), ((2, 3), (5,)), ((2, 3), (-1, 4)),
                                           ((2, 3, 4), (5, -1)), ((2, 3), (0, -1)),
                                           ((2, 3), (7, 1))])
def test_reshape_size_mismatch(cpu, shape, target):
    t = cpu.zeros(shape)
    for build in (lambda: cpu.reshape(t, target), lambda: (t + 1).reshape(target),
                  lambda: cpu.reshape(t + 1, target)):
        with pytest.raises(ValueError) as info:
            build()
        assert_names(str(info.value), ("reshape",), (shape, target))


def test_reshape_two_minus_ones(cpu):
    t = cpu.zeros((2, 3, 4))
    for build in (lambda: cpu.reshape(t, (-1, -1)), lambda: (t + 1).reshape(-1, 2, -1)):
        with pytest.raises(ValueError, match="reshape") as info:
            build()
        assert "-1" in str(info.value)


@pytest.mark.parametrize("sa, sb, axis", [((2, 3), (2, 4), 0), ((2, 3), (3, 3), 1),
                                          ((2, 3), (2, 3, 1), 0), ((2, 3, 4), (2, 5, 5), 1)])
def test_concatenate_mismatch(cpu, sa, sb, axis):
    with pytest.raises(ValueError) as info:
        cpu.concatenate([cpu.zeros(sa), cpu.zeros(sb)], axis=axis)
    assert_names(str(info.value), ("concatenate",), (sa, sb))


def test_concatenate_axis_out_of_range(cpu):
    with pytest.raises(ValueError, match="concatenate"):
        cpu.concatenate([cpu.zeros((2, 3)), cpu.zeros((2, 3))], axis=2)


@pytest.mark.parametrize("kwargs", [{"axis": 2, "depth": 4}, {"axis": -3, "depth": 4},
                                    {"axis": 0, "depth": 0}, {"axis": 1, "depth": -1},
                                    {"axis": 0, "depth": 2.5}, {"axis": 0}])
def test_onehot_bad_axis_or_depth(cpu, kwargs):
    idx = cpu.array(np.array([0, 2, 1]), dtype=np.int32)
    with pytest.raises(ValueError, match="onehot") as info:
        cpu.onehot(idx, **kwargs)
    bad = "depth" if "depth" not in kwargs or kwargs["depth"] in (0, -1, 2.5) else "axis"
    assert bad in str(info.value)


@pytest.mark.parametrize("out_shape, value_shape", [((2, 3), (3, 2)), ((2, 3), (4, 5)),
                                                    ((1, 3), (2, 3)), ((2, 3), (1, 2, 3)),
                                                    ((2, 3, 4), (2, 3)), ((2, 1), (2, 3))])
@pytest.mark.parametrize("how", ["tensor", "tree", "build", "out="])
def test_assign_of_incompatible_value(cpu, out_shape, value_shape, how):
    out = cpu.array(np.full(out_shape, 7.0))
    value = cpu.ones(value_shape)
    with pytest.raises(ValueError) as info:
        if how == "tensor":
            out[:] = value
        elif how == "tree":
            out[:] = value * 2
        elif how == "build":
            OpTreeNode.build("assign", out, value)
        else:
            cpu.exp(value, out=out)
    assert_names(str(info.value), ("assign",), (out_shape, value_shape))
    np.testing.assert_array_equal(out.get(), np.full(out_shape, 7.0))  # untouched


@pytest.mark.parametrize("value_shape", [(2, 1), (1, 3), (1, 1), (2, 3)])
def test_assign_of_a_broadcasting_value(cpu, value_shape):
    vals = np.arange(np.prod(value_shape), dtype=np.float64).reshape(value_shape) + 1
    out = cpu.zeros((2, 3))
    out[:] = cpu.array(vals) * 2
    np.testing.assert_allclose(out.get(), np.broadcast_to(vals * 2, (2, 3)), rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# N-D shape inference (up to 6 dims), compared with numpy
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sa, sb", [
    ((2, 1, 4), (3, 1)), ((3, 1), (2, 1, 4)), ((1, 2, 3, 1, 5, 1), (3, 1, 1, 6)),
    ((5, 1), (1, 1, 1, 1, 1, 7)), ((2, 3, 4, 5), (4, 1)), ((1, 1), (2, 2, 2, 2, 2, 2)),
    ((6, 1, 1, 2), (1, 5, 3, 1)),
])
def test_nd_broadcast_examples(cpu, sa, sb):
    a, b = cpu.zeros(sa), cpu.zeros(sb)
    expected = np.broadcast_shapes(sa, sb)
    for node in (a + b, b * a, cpu.maximum(a, b), a < b, (a + 1) - (b * 2), cpu.exp(a) ** b):
        assert node.shape == expected, (str(node)[:80], expected)


def test_nd_broadcast_values(cpu, rng):
    av = rng.standard_normal((2, 1, 4))
    bv = rng.standard_normal((3, 1))
    a, b = cpu.array(av, dtype=np.float64), cpu.array(bv, dtype=np.float64)
    out = cpu.zeros((2, 3, 4), dtype=np.float64)
    out[:] = a * b + 1
    np.testing.assert_allclose(out.get(), av * bv + 1, rtol=1e-12)
    cv = rng.standard_normal((1, 2, 1, 3, 1, 2))
    dv = rng.standard_normal((2, 1, 3, 1, 1))
    c, d = cpu.array(cv, dtype=np.float64), cpu.array(dv, dtype=np.float64)
    out = cpu.zeros(np.broadcast_shapes(cv.shape, dv.shape), dtype=np.float64)
    out[:] = c - d
    np.testing.assert_allclose(out.get(), cv - dv, rtol=1e-12)


@FIXTURE_OK
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=2, max_dims=6, max_side=3),
       op=st.sampled_from([operator.add, operator.mul, operator.lt, operator.xor]))
def test_nd_broadcast_matches_numpy(cpu, shapes, op):
    sa, sb = shapes.input_shapes
    node = op(cpu.zeros(sa), cpu.zeros(sb) + 0)
    assert node.shape == np.broadcast_shapes(sa, sb) == shapes.result_shape


@FIXTURE_OK
@given(sa=hnp.array_shapes(min_dims=2, max_dims=6, min_side=1, max_side=3),
       sb=hnp.array_shapes(min_dims=2, max_dims=6, min_side=1, max_side=3))
def test_nd_broadcast_agrees_with_numpy_or_raises(cpu, sa, sb):
    try:
        expected = np.broadcast_shapes(sa, sb)
    except ValueError:
        expected = None
    a, b = cpu.zeros(sa), cpu.zeros(sb)
    if expected is None:
        with pytest.raises(ValueError) as info:
            cpu.subtract(a, b)
        assert_names(str(info.value), ("sub", "subtract"), (sa, sb))
    else:
        assert cpu.subtract(a, b).shape == expected


@st.composite
def shape_and_axes(draw, min_axes=0):
    shape = draw(hnp.array_shapes(min_dims=2, max_dims=6, min_side=1, max_side=3))
    ndim = len(shape)
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=min_axes, max_size=ndim, unique=True))
    signs = draw(st.lists(st.booleans(), min_size=len(axes), max_size=len(axes)))
    return shape, tuple(a - ndim if neg else a for a, neg in zip(axes, signs))


@FIXTURE_OK
@given(case=shape_and_axes(min_axes=1), keepdims=st.booleans(), fn=st.sampled_from(["sum", "max", "min"]))
def test_nd_reduction_shapes(cpu, case, keepdims, fn):
    shape, axes = case
    expected = pad2(np.zeros(shape).sum(axis=axes, keepdims=keepdims).shape)
    axis = axes[0] if len(axes) == 1 else axes
    assert getattr(cpu, fn)(cpu.zeros(shape), axis=axis, keepdims=keepdims).shape == expected


@FIXTURE_OK
@given(shape=hnp.array_shapes(min_dims=2, max_dims=6, min_side=1, max_side=3),
       keepdims=st.booleans())
def test_nd_full_reduction_shapes(cpu, shape, keepdims):
    expected = pad2(np.zeros(shape).sum(keepdims=keepdims).shape)
    assert cpu.sum(cpu.zeros(shape), axis=None, keepdims=keepdims).shape == expected


@FIXTURE_OK
@given(case=shape_and_axes(min_axes=1), keepdims=st.booleans(),
       fn=st.sampled_from(["argmax", "argmin"]))
def test_nd_arg_reduction_shapes(cpu, case, keepdims, fn):
    shape, axes = case
    expected = pad2(np.argmax(np.zeros(shape), axis=axes[0], keepdims=keepdims).shape)
    assert getattr(cpu, fn)(cpu.zeros(shape), axis=axes[0], keepdims=keepdims).shape == expected


@FIXTURE_OK
@given(data=st.data(), shape=hnp.array_shapes(min_dims=2, max_dims=6, min_side=1, max_side=4))
def test_nd_transpose_shapes(cpu, data, shape):
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    expected = np.transpose(np.zeros(shape), axes).shape
    assert cpu.transpose(cpu.zeros(shape), axes=axes).shape == expected
    assert cpu.transpose(cpu.zeros(shape) + 1, axes=axes).shape == expected
    assert cpu.transpose(cpu.zeros(shape) + 1).shape == tuple(reversed(shape))


@FIXTURE_OK
@given(data=st.data(), shape=hnp.array_shapes(min_dims=2, max_dims=6, min_side=1, max_side=4))
def test_nd_reshape_shapes(cpu, data, shape):
    target = list(data.draw(st.permutations(shape)))
    if data.draw(st.booleans(), label="use -1") and math_prod(shape) > 0:
        target[data.draw(st.integers(0, len(target) - 1), label="where")] = -1
    expected = np.zeros(shape).reshape(target).shape
    assert cpu.reshape(cpu.zeros(shape), tuple(target)).shape == expected
    assert (cpu.zeros(shape) * 2).reshape(tuple(target)).shape == expected


def math_prod(shape):
    return int(np.prod(shape, dtype=np.int64))


@FIXTURE_OK
@given(data=st.data(), shape=hnp.array_shapes(min_dims=2, max_dims=6, min_side=1, max_side=3))
def test_nd_concatenate_shapes(cpu, data, shape):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(1, 3))
    expected = np.concatenate([np.zeros(shape), np.zeros(other)], axis=axis).shape
    assert cpu.concatenate([cpu.zeros(shape), cpu.zeros(tuple(other))], axis=axis).shape == expected


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 2, 1, 3), (2, 1, 2, 1, 2), (2, 2, 1, 2, 1, 3)])
def test_nd_elementwise_and_constants_keep_shape(cpu, shape):
    t = cpu.zeros(shape)
    for node in (t + 1, 2 * t, -t, abs(t), cpu.exp(t), cpu.sqrt(t) * t, t < 0.5, ~t):
        assert node.shape == shape
