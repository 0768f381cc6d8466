"""Autodiff misuse (issue 13, point 9): use after cleanup(), gradients asked for an op-tree, an
unused tensor holding inf/nan, one buffer given for two tensors. Each gets a clear error or the
right value."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from neonlike.backends import Autodiff, gen_backend
from neonlike.backends.autodiff import UnusedTensorWarning


@pytest.fixture
def be():
    return gen_backend("cpu", rng_seed=0, datatype=np.float64)


def rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape)


def _ask(be, ad, method, tensors):
    """Every gradient of `tensors` through `method`, as host arrays (op-trees assigned first)."""
    if method == "back_prop_grad":
        bufs = [be.empty(t.shape, dtype=t.dtype) for t in tensors]
        ad.back_prop_grad(tensors, bufs)
        return bufs
    got = getattr(ad, method)(tensors)
    if method == "get_grad_op_tree":
        return [tree.astensor() for tree in got]
    return got


METHODS = ["get_grad_op_tree", "get_grad_tensor", "get_grad_asnumpyarray", "back_prop_grad"]


# ---------------------------------------------------------------- after cleanup()
@pytest.mark.parametrize("method", METHODS)
def test_use_after_cleanup_raises(be, method):
    """Before, the gradients were silently zeros after cleanup() (neon dropped its backend and
    crashed on None); now each method says what happened and what to do."""
    x = be.array(rand((2, 3)))
    ad = Autodiff(x * x, be)
    ad.cleanup()
    with pytest.raises(RuntimeError, match=rf"^Autodiff\.{method}: this Autodiff was cleaned up "
                                           r"\(cleanup\(\) frees its gradients\); build a new "
                                           r"Autodiff\(op_tree, be\) to take them again$"):
        _ask(be, ad, method, [x])


def test_cleanup_frees_the_trees_and_can_be_repeated(be):
    x, e = be.array(rand((2, 3))), be.array(rand((2, 3), seed=1))
    ad = Autodiff(x * x, be, next_error=e)
    ad.cleanup()
    ad.cleanup()
    assert ad.op_tree is None and ad.next_error is None
    g = Autodiff(x * x, be).get_grad_asnumpyarray([x])[0]   # a new one works
    np.testing.assert_allclose(g, 2 * x.get())


# ---------------------------------------------------------------- an op-tree is not a tensor
OP_TREE = (r"^Autodiff: gradients are taken with respect to Tensors, got neonlike\.optree\."
           r"OpTreeNode at tensors\[1\]: the op-tree \(x \* 2\.0\) of shape \(2, 3\); an op-tree "
           r"has no gradient of its own, ask for the Tensors it reads$")


@pytest.mark.parametrize("method", METHODS)
def test_a_gradient_asked_for_an_op_tree_is_refused(be, method):
    x = be.array(rand((2, 3)), name="x")
    ad = Autodiff(x * x, be)
    with pytest.raises(TypeError, match=OP_TREE):
        if method == "back_prop_grad":
            ad.back_prop_grad([x, x * 2.0], [be.empty((2, 3)), be.empty((2, 3))])
        else:
            getattr(ad, method)([x, x * 2.0])


def test_a_long_op_tree_is_shown_cut(be):
    x = be.array(rand((2, 3)))
    tree = x
    for _ in range(10):
        tree = be.tanh(tree) + 1.0
    with pytest.raises(TypeError, match=r"the op-tree \(.{50,60}\.\.\. of shape \(2, 3\)"):
        Autodiff(x * x, be).get_grad_op_tree([tree])


@pytest.mark.parametrize("bad, given", [
    (lambda be, x: x * 2.0, r"neonlike\.optree\.OpTreeNode; an op-tree cannot be written into"),
    (lambda be, x: np.zeros((2, 3)), r"numpy\.ndarray of shape \(2, 3\)"),
    (lambda be, x: None, r"NoneType"),
])
def test_a_buffer_that_is_not_a_tensor_is_refused(be, bad, given):
    """Before, `'OpTreeNode' object has no attribute '_original_base'` (an AttributeError)."""
    x, y = be.array(rand((2, 3))), be.array(rand((2, 3), seed=1))
    ad = Autodiff(x * y, be)
    with pytest.raises(TypeError, match=r"^back_prop_grad: gradients\[1\] must be a Tensor to "
                                        r"write the gradient into, got " + given + "$"):
        ad.back_prop_grad([x, y], [be.empty((2, 3)), bad(be, x)])
    with pytest.raises(TypeError, match=r"pass a list of Tensors to write the gradients into, "
                                        r"got a single .*Tensor"):
        ad.back_prop_grad([x], be.empty((2, 3)))


# ---------------------------------------------------------------- a zero gradient is exactly zero
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method", METHODS)
def test_an_unused_tensor_holding_inf_and_nan_gets_exact_zeros(be, method, dtype):
    """neon computed `t * 0.`: [inf, nan, 1] gave [nan, nan, 0]. The zeros are +0.0, of the
    tensor's shape and dtype, whichever way they are asked for."""
    x = be.array(rand((2, 3)), name="x")
    u = be.array(np.array([[np.inf, np.nan, 1.0], [-np.inf, -1.0, 0.0]]), dtype=dtype, name="u")
    ad = Autodiff(x * 2.0, be)
    with pytest.warns(UnusedTensorWarning, match=r"tensor 'u' of shape \(2, 3\)"):
        gx, gu = _ask(be, ad, method, [x, u])
    got = gu if isinstance(gu, np.ndarray) else gu.get()
    assert got.shape == (2, 3)
    if method != "get_grad_asnumpyarray":     # that one casts to the backend's dtype, as neon
        assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.zeros((2, 3)))
    assert not np.signbit(got).any()
    np.testing.assert_array_equal(gx if isinstance(gx, np.ndarray) else gx.get(),
                                  np.full((2, 3), 2.0))


def test_the_zero_gradient_op_tree_is_not_a_shared_tensor(be):
    """The zeros come from a cached constant; what a user gets is an op-tree over it, so writing
    into a result cannot change the next zero gradient."""
    x, u = be.array(rand((2, 3))), be.array(rand((2, 3), seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedTensorWarning)
        g = Autodiff(x * 2.0, be).get_grad_tensor([u])[0]
        g[:] = 5.0
        again = Autodiff(x * 3.0, be).get_grad_op_tree([u])[0]
    assert type(again).__name__ == "OpTreeNode"
    np.testing.assert_array_equal(again.astensor().get(), np.zeros((2, 3)))


def test_a_tensor_read_only_through_zero_gradient_ops_gets_exact_zeros(be):
    """sgn(u) reads u (no warning) but its gradient is zero: still zeros, not nan."""
    x = be.array(rand((2, 3)))
    u = be.array(np.array([[np.inf, np.nan, 1.0], [-np.inf, -1.0, 0.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnusedTensorWarning)
        g = Autodiff(x * be.sgn(u), be).get_grad_asnumpyarray([u])[0]
    np.testing.assert_array_equal(g, np.zeros((2, 3)))


# ---------------------------------------------------------------- one buffer for two tensors
def test_one_buffer_for_two_tensors_is_refused(be):
    """Before, both gradients were written into it and only the last survived."""
    x, y, z = (be.array(rand((2, 3), seed=i)) for i in range(3))
    ad = Autodiff(x * y + z, be)
    g, other = be.zeros((2, 3)), be.zeros((2, 3))
    with pytest.raises(ValueError, match=r"^back_prop_grad: gradients\[0\] and gradients\[2\] "
                                         r"are the same buffer; each tensor needs a buffer of "
                                         r"its own \(else only the gradient written last "
                                         r"survives\)$"):
        ad.back_prop_grad([x, y, z], [g, other, g])
    np.testing.assert_array_equal(g.get(), np.zeros((2, 3)))      # nothing was written
    np.testing.assert_array_equal(other.get(), np.zeros((2, 3)))


def test_overlapping_views_of_one_buffer_are_refused(be):
    x, y = be.array(rand((2, 3))), be.array(rand((2, 3), seed=1))
    ad = Autodiff(x * y, be)
    big = be.zeros((3, 3))
    with pytest.raises(ValueError, match=r"^back_prop_grad: gradients\[0\] and gradients\[1\] "
                                         r"are views sharing memory; each tensor needs a buffer"):
        ad.back_prop_grad([x, y], [big[0:2], big[1:3]])
    np.testing.assert_array_equal(big.get(), np.zeros((3, 3)))


def test_disjoint_views_of_one_buffer_are_accepted(be):
    x, y = be.array(rand((2, 3))), be.array(rand((2, 3), seed=1))
    ad = Autodiff(x * y, be)
    big = be.zeros((4, 3))
    ad.back_prop_grad([x, y], [big[0:2], big[2:4]])
    np.testing.assert_allclose(big.get(), np.concatenate([y.get(), x.get()]))
