"""Seed 002 ("neon backend"), sections "Directly calling the backend" and "Op-Trees", run verbatim
with `neon` renamed to `neonlike`, and their results asserted. (Autodiff is a later issue.)

Oracle: numpy float64 on the same data, computed here.
"""
from __future__ import annotations

import numpy as np
import pytest

from neonlike.backends.backend import OpTreeNode


@pytest.fixture
def mkl():
    pytest.importorskip("mkl", reason="gen_backend('mkl') needs mkl-service")


def f32(x):
    """Host data as the default float32 tensor holds it, widened again for a float64 oracle."""
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def value_of(be, tree, dtype=None):
    out = be.empty(OpTreeNode.shape(tree), dtype=dtype)
    out[:] = tree
    return out.get()


# ==================================================================== Directly calling the backend

def test_directly_calling_the_backend_verbatim(mkl):
    from neonlike.backends import gen_backend
    be = gen_backend(backend='mkl')
    assert be.backend_name == "mkl"
    assert be.default_dtype == "float32"

    from neonlike.backends.backend import Tensor
    myTensor = be.zeros((100, 100))
    assert isinstance(myTensor, Tensor)
    assert myTensor.shape == (100, 100) and myTensor.dtype == "float32"
    assert myTensor.get().shape == (100, 100) and not myTensor.get().any()

    import numpy as np
    # initialize a numpy array of zeros
    array_of_zeros = np.zeros((100, 100))
    # 1. array of zeros with the shape like the input array
    myTensor = be.zeros_like(array_of_zeros)
    assert isinstance(myTensor, Tensor)
    assert myTensor.shape == (100, 100) and myTensor.dtype == np.float32
    np.testing.assert_array_equal(myTensor.get(), array_of_zeros)
    # 2. initialize a tensor with same values as the input array
    myTensor = be.array(array_of_zeros)
    assert myTensor.shape == (100, 100) and myTensor.dtype == np.float32
    np.testing.assert_array_equal(myTensor.get(), array_of_zeros)
    # 3. initialize an empty Tensor, then set elements to zero
    myTensor = be.empty((100, 100))
    myTensor[:] = 0
    assert myTensor.shape == (100, 100)
    np.testing.assert_array_equal(myTensor.get(), array_of_zeros)
    # 4. initialize an empty Tensor, then fill the elements to zero
    myTensor = be.empty((100, 100))
    myTensor.fill(0.0)
    np.testing.assert_array_equal(myTensor.get(), array_of_zeros)
    # 5. deep copy another Tensor
    yourTensor = be.zeros((100, 100))
    myTensor = yourTensor.copy(yourTensor)
    assert myTensor is yourTensor  # copy(a) assigns a into self and returns self
    np.testing.assert_array_equal(myTensor.get(), array_of_zeros)

    myNumpyArray = myTensor.get()
    assert isinstance(myNumpyArray, np.ndarray)
    assert myNumpyArray.shape == (100, 100) and myNumpyArray.dtype == np.float32
    np.testing.assert_array_equal(myNumpyArray, array_of_zeros)


def test_initialisation_ways_overwrite_existing_values(mkl):
    """Ways 3-5 of the seed, on tensors that did not start as zeros, so they are seen to act."""
    from neonlike.backends import gen_backend
    be = gen_backend(backend='mkl')
    myTensor = be.ones((100, 100))
    myTensor[:] = 0
    np.testing.assert_array_equal(myTensor.get(), np.zeros((100, 100)))
    myTensor = be.ones((100, 100))
    myTensor.fill(0.0)
    np.testing.assert_array_equal(myTensor.get(), np.zeros((100, 100)))
    yourTensor = be.array(np.arange(10000.0).reshape(100, 100))
    myTensor = be.ones((100, 100))
    assert myTensor.copy(yourTensor) is myTensor
    np.testing.assert_array_equal(myTensor.get(), np.arange(10000.0).reshape(100, 100))
    yourTensor[:] = -1  # deep: later writes to the source do not show in the copy
    np.testing.assert_array_equal(myTensor.get(), np.arange(10000.0).reshape(100, 100))


def test_tensor_operations_list_verbatim_on_zeros(mkl):
    from neonlike.backends import gen_backend
    be = gen_backend(backend='mkl')
    myTensor = be.zeros((100, 100))
    yourTensor = be.zeros((100, 100))
    zeros = np.zeros((100, 100))

    # Fancy slicing
    assert myTensor[:, 1].shape == (100, 1)
    assert myTensor[:, 3:10].shape == (100, 7)
    # Basic element-wise arithmetic
    for tree in (myTensor * yourTensor, myTensor + yourTensor):
        assert isinstance(tree, OpTreeNode)
        np.testing.assert_array_equal(value_of(be, tree), zeros)
    # Transcendental functions
    np.testing.assert_array_equal(value_of(be, be.exp(myTensor)), np.ones((100, 100)))
    np.testing.assert_array_equal(value_of(be, be.sqrt(myTensor)), zeros)
    # Logical operations
    np.testing.assert_array_equal(value_of(be, myTensor == yourTensor), np.ones((100, 100)))
    np.testing.assert_array_equal(value_of(be, myTensor > yourTensor), zeros)
    # Dot product
    np.testing.assert_array_equal(value_of(be, be.dot(myTensor, yourTensor)), zeros)
    # Summary statistics
    np.testing.assert_array_equal(value_of(be, be.max(myTensor)), [[0.0]])
    np.testing.assert_array_equal(value_of(be, be.mean(myTensor)), [[0.0]])


def test_tensor_operations_list_on_data(mkl, rng):
    from neonlike.backends import gen_backend
    be = gen_backend(backend='mkl')
    my_vals = rng.uniform(0.0, 3.0, (100, 100))
    your_vals = rng.uniform(0.0, 3.0, (100, 100))
    your_vals[::3] = my_vals[::3]  # some equal entries for ==
    my_vals[5, 7], your_vals[5, 7] = 0.0, -0.0
    myTensor, yourTensor = be.array(my_vals), be.array(your_vals)
    m, y = f32(my_vals), f32(your_vals)

    # Fancy slicing (views with the numpy values, neon's keep-2-D shape)
    np.testing.assert_array_equal(myTensor[:, 1].get(), m[:, 1:2])
    np.testing.assert_array_equal(myTensor[:, 3:10].get(), m[:, 3:10])
    # Basic element-wise arithmetic
    np.testing.assert_allclose(value_of(be, myTensor * yourTensor), m * y, rtol=2e-7)
    np.testing.assert_allclose(value_of(be, myTensor + yourTensor), m + y, rtol=2e-7)
    np.testing.assert_allclose(value_of(be, myTensor - yourTensor), m - y, rtol=2e-7, atol=1e-6)
    np.testing.assert_allclose(value_of(be, myTensor / (yourTensor + 1)), m / (y + 1), rtol=3e-7)
    # Transcendental functions
    np.testing.assert_allclose(value_of(be, be.exp(myTensor)), np.exp(m), rtol=2e-6)
    np.testing.assert_allclose(value_of(be, be.sqrt(myTensor)), np.sqrt(m), rtol=2e-7)
    # Logical operations
    eq = value_of(be, myTensor == yourTensor)
    np.testing.assert_array_equal(eq, (m == y).astype(np.float64))
    assert eq.sum() >= 34 * 100  # the rows made equal above (and 0 == -0)
    np.testing.assert_array_equal(value_of(be, myTensor > yourTensor), (m > y).astype(np.float64))
    # Dot product
    np.testing.assert_allclose(value_of(be, be.dot(myTensor, yourTensor)), m @ y, rtol=1e-5)
    # Summary statistics
    np.testing.assert_array_equal(value_of(be, be.max(myTensor)), [[m.max()]])
    np.testing.assert_allclose(value_of(be, be.mean(myTensor)), [[m.mean()]], rtol=1e-5)
    assert OpTreeNode.shape(be.max(myTensor)) == (1, 1)
    assert OpTreeNode.shape(be.mean(myTensor)) == (1, 1)


def test_logistic_verbatim(mkl):
    from neonlike.backends import gen_backend
    be = gen_backend(backend='mkl')
    myTensor = be.zeros((100, 100))
    f = 1/(1+be.exp(-1*myTensor))
    assert isinstance(f, OpTreeNode)
    assert f.shape == (100, 100)
    fval = be.empty((100, 100))  # allocate space for output
    fval[:] = f  # execute the op-tree
    np.testing.assert_array_equal(fval.get(), np.full((100, 100), 0.5))


def test_logistic_on_data(mkl, rng):
    from neonlike.backends import gen_backend
    be = gen_backend(backend='mkl')
    vals = rng.uniform(-10.0, 10.0, (100, 100))
    edge = [0.0, -0.0, 1e-30, -1e-30, 1e-45, 80.0, -80.0, 100.0, -100.0, 1e30, -1e30, 3e38,
            -3e38, np.inf, -np.inf, np.nan]
    vals[0, :len(edge)] = edge
    myTensor = be.array(vals)
    f = 1/(1+be.exp(-1*myTensor))
    fval = be.empty((100, 100))
    fval[:] = f
    x = f32(vals)
    with np.errstate(over="ignore"):
        expected = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(fval.get(), expected, rtol=2e-6, atol=1e-7, equal_nan=True)
    got = fval.get()
    assert got[0, 13] == 1.0 and got[0, 14] == 0.0 and np.isnan(got[0, 15])


# ==================================================================== Op-Trees

def test_minimal_example_verbatim(capsys):
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    x0 = be.ones((2, 2), name='x0')
    x1 = be.ones((2, 2), name='x1')
    f = x0 + x1 # op-tree creation
    f_val = be.empty((2, 2)) # output buffer allocation
    f_val[:] = f # execution
    print(f) # print the op-tree tuple
    print(f_val.get()) # get the device tensor

    printed = capsys.readouterr().out
    # the seed (Python 2) printed {'shape': (2, 2), 'op': 'add'}: neonlike puts 'op' first
    assert printed == "({'op': 'add', 'shape': (2, 2)}, x0, x1)\n[[2. 2.]\n [2. 2.]]\n"
    assert str(f) == repr(f) == "({'op': 'add', 'shape': (2, 2)}, x0, x1)"
    assert f[0] == {'shape': (2, 2), 'op': 'add'}
    assert list(f[0]) == ['op', 'shape']
    np.testing.assert_array_equal(f_val.get(), np.full((2, 2), 2.0))


def test_op_tree_is_a_tuple_of_three():
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    x0 = be.ones((2, 2), name='x0')
    x1 = be.ones((2, 2), name='x1')
    f = x0 + x1
    assert isinstance(f, OpTreeNode)
    assert isinstance(f, tuple)
    assert len(f) == 3
    op, left, right = f
    assert isinstance(op, dict)
    assert op['op'] == 'add' and op['shape'] == (2, 2)
    assert left is x0 and right is x1
    assert f.shape == (2, 2)


# -------------------------------------------------------------------- Op-Tree creation

def test_creation_by_operator_overload(rng):
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    v1, v2, v3, v4 = (rng.standard_normal((3, 4)) for _ in range(4))
    x1, x2 = be.array(v1, name='x1'), be.array(v2, name='x2')
    t1 = be.array(v3) * 2
    t2 = be.array(v4) - 1
    assert isinstance(t1, OpTreeNode) and isinstance(t2, OpTreeNode)
    a1, a2, a3, a4 = (f32(v) for v in (v1, v2, v3, v4))
    cases = [
        (x1 + x2, a1 + a2),  # Tensor + Tensor
        (x1 + t1, a1 + a3 * 2),  # Tensor + OpTreeNode
        (t1 + t2, a3 * 2 + (a4 - 1)),  # OpTreeNode + OpTreeNode
        (t1 + x1, a3 * 2 + a1),  # OpTreeNode + Tensor
    ]
    for f, expected in cases:
        assert isinstance(f, OpTreeNode)
        assert f[0]['op'] == 'add'
        assert f.shape == (3, 4)
        np.testing.assert_allclose(value_of(be, f), expected, rtol=2e-6, atol=1e-6)


def test_creation_by_backend_functions(rng):
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    vals = rng.standard_normal((4, 5))
    x = be.array(vals)
    f = be.mean(x) # f is an optree   (the seed writes `ng.mean(x)`)
    assert isinstance(f, OpTreeNode)
    assert f.shape == (1, 1)
    np.testing.assert_allclose(value_of(be, f), [[f32(vals).mean()]], rtol=1e-5, atol=1e-7)
    g = be.mean(x, axis=0)
    assert isinstance(g, OpTreeNode) and g.shape == (1, 5)
    np.testing.assert_allclose(value_of(be, g), f32(vals).mean(axis=0, keepdims=True),
                               rtol=1e-5, atol=1e-7)


def test_creation_by_build(rng):
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    va, vb = rng.uniform(0, 4, (2, 3)), rng.uniform(0, 4, (2, 3))
    a, b = be.array(va), be.array(vb)

    f = OpTreeNode.build("add", a, b) # binary ops
    assert isinstance(f, OpTreeNode)
    assert f[0] == {'op': 'add', 'shape': (2, 3)}  # build appends the shape
    assert f[1] is a and f[2] is b
    np.testing.assert_allclose(value_of(be, f), f32(va) + f32(vb), rtol=2e-7)

    out_buffer = be.zeros((2, 3))
    OpTreeNode.build("sqrt", a, None, out=out_buffer) # unary ops
    np.testing.assert_allclose(out_buffer.get(), np.sqrt(f32(va)), rtol=2e-7)  # executed at once

    g = OpTreeNode.build("sqrt", a, None)
    assert isinstance(g, OpTreeNode)
    assert g[0] == {'op': 'sqrt', 'shape': (2, 3)} and g[1] is a and g[2] is None
    # build checks shapes
    with pytest.raises(ValueError):
        OpTreeNode.build("add", a, be.ones((3, 2)))


def test_creation_by_constructor(rng):
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    va, vb = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    a, b = be.array(va), be.array(vb)
    op_dict = {'op': 'add', 'shape': (2, 2)}
    f = OpTreeNode(op_dict, a, b)
    assert isinstance(f, OpTreeNode) and len(f) == 3
    assert f[0] == op_dict and f[1] is a and f[2] is b
    assert f.shape == (2, 2)
    f_val = be.empty((2, 2))
    f_val[:] = f
    np.testing.assert_allclose(f_val.get(), f32(va) + f32(vb), rtol=2e-7)
    # the node does not share the caller's dict: it stays as built
    op_dict['op'] = 'sub'
    assert f[0]['op'] == 'add'
    # no shape calculation: the given op_dict is taken as it is
    g = OpTreeNode({'op': 'add', 'shape': (7, 9)}, a, b)
    assert g.shape == (7, 9)


# -------------------------------------------------------------------- Op-Tree execution

def test_execution_by_assignment_and_by_build_assign(rng):
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    va, vb = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    x0, x1 = be.array(va, name='x0'), be.array(vb, name='x1')
    f = x0 * x1 + 1
    expected = f32(va) * f32(vb) + 1

    f_val = be.zeros((2, 2))
    f_val[:] = f
    np.testing.assert_allclose(f_val.get(), expected, rtol=2e-7, atol=1e-7)

    f_val = be.zeros((2, 2))
    result = OpTreeNode.build("assign", f_val, f)  # executes on build
    np.testing.assert_allclose(f_val.get(), expected, rtol=2e-7, atol=1e-7)
    assert result is f_val  # the CPU returns the output tensor, as neon's did

    # an assign node made by the constructor runs with .execute()
    f_val = be.zeros((2, 2))
    OpTreeNode({'op': 'assign', 'shape': (2, 2)}, f_val, f).execute()
    np.testing.assert_allclose(f_val.get(), expected, rtol=2e-7, atol=1e-7)

    # the tree is lazy: building it did not touch the leaves
    np.testing.assert_array_equal(x0.get(), va.astype(np.float32))
    np.testing.assert_array_equal(x1.get(), vb.astype(np.float32))


def test_optreenode_shape_of_operands():
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    x = be.zeros((3, 4))
    assert OpTreeNode.shape(x) == (3, 4)
    assert OpTreeNode.shape(be.zeros((5,))) == (5, 1)
    assert OpTreeNode.shape(x + 1) == (3, 4)
    assert OpTreeNode.shape(be.sum(x, axis=0)) == (1, 4)
    assert OpTreeNode.shape(2.0) == (1, 1)
    # the seed's my_loop helper: be.zeros(OpTreeNode.shape(x))
    y = be.zeros(OpTreeNode.shape(x), name='tensor-zero')
    assert y.shape == (3, 4)


# -------------------------------------------------------------------- Property of the op-tree

def test_op_tree_is_immutable():
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    x0, x1 = be.ones((2, 2), name='x0'), be.ones((2, 2), name='x1')
    f = x0 + x1
    with pytest.raises(TypeError):
        f[0]['op'] = 'sub'
    with pytest.raises(TypeError):
        f[0]['shape'] = (4, 1)
    with pytest.raises(TypeError):
        f[0]['axis'] = 0
    with pytest.raises(TypeError):
        del f[0]['op']
    with pytest.raises(TypeError):
        f[0].update(op='sub')
    with pytest.raises(TypeError):
        f[0].pop('op')
    with pytest.raises(TypeError):
        f[0].clear()
    with pytest.raises(TypeError):
        f[0].setdefault('axis', 1)
    with pytest.raises(TypeError):
        f[0].popitem()
    with pytest.raises(TypeError):
        f[0] |= {'op': 'sub'}
    with pytest.raises(TypeError):
        f[1] = x1  # a tuple
    assert f[0] == {'op': 'add', 'shape': (2, 2)}
    assert f[1] is x0 and f[2] is x1
    f_val = be.empty((2, 2))
    f_val[:] = f
    np.testing.assert_array_equal(f_val.get(), np.full((2, 2), 2.0))


def test_traverse_gives_the_post_order_stack():
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    x0, x1 = be.ones((2, 2), name='x0'), be.ones((2, 2), name='x1')
    f = x0 + 2 * x1
    given_stack = []
    stack = f.traverse(given_stack)
    assert stack is given_stack
    assert isinstance(stack, list) and len(stack) == 5
    assert stack[0] is x0 and stack[1] == 2 and stack[2] is x1
    assert stack[3] == {'op': 'mul', 'shape': (2, 2)}
    assert stack[4] == {'op': 'add', 'shape': (2, 2)}
    assert stack[4] is f[0] and stack[3] is f[2][0]

    # a deeper tree: leaves then ops, children before parents
    g = be.sqrt(x0 * x1) - be.exp(x1)
    s = g.traverse([])
    assert [type(e).__name__ if not isinstance(e, dict) else e['op'] for e in s] == \
        ['CPUTensor', 'CPUTensor', 'mul', 'sqrt', 'CPUTensor', 'exp', 'sub']
    assert s[0] is x0 and s[1] is x1 and s[4] is x1

    # the stack is a plain list: editing it (the seed's "swap x1 for x2") leaves the tree alone
    x2 = be.zeros((2, 2), name='x2')
    s = [x2 if e is x1 else e for e in f.traverse([])]
    assert s[2] is x2
    assert f[2][2] is x1
    np.testing.assert_array_equal(value_of(be, f), np.full((2, 2), 3.0))


def test_leaves_and_ops():
    from neonlike.backends import gen_backend
    be = gen_backend('cpu')
    x0, x1 = be.ones((2, 2), name='x0'), be.ones((2, 2), name='x1')
    f = be.tanh((x0 * x1) + (x0 / x1)) + 3
    assert len(f.leaves()) == 2 and f.leaves()[0] is x0 and f.leaves()[1] is x1

    # every internal node is an op node (dict first), every leaf a numeric node
    def walk(node, depth=0):
        assert isinstance(node, OpTreeNode) and len(node) == 3
        op, left, right = node
        assert isinstance(op, dict) and 'op' in op and 'shape' in op
        children = [c for c in (left, right) if c is not None]
        # unary: the right child is None; binary: two children
        assert len(children) in (1, 2)
        if len(children) == 1:
            assert right is None
        for c in children:
            if isinstance(c, OpTreeNode):
                walk(c, depth + 1)
            else:
                assert c is x0 or c is x1 or isinstance(c, (int, float))
    walk(f)
    ops = [e['op'] for e in f.traverse([]) if isinstance(e, dict)]
    assert ops == ['mul', 'div', 'add', 'tanh', 'add']
    unary = be.sqrt(x0)
    assert unary[2] is None and unary[1] is x0
