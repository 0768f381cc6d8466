"""neonlike.ngraph.testing (upstream's `ngraph.testing`; `ngraph.util.utils` in the seed era):
executors, numeric and symbolic derivatives, seeded random tensors, comparisons."""
from __future__ import annotations

import numpy as np
import pytest

import neonlike.ngraph as ng
import neonlike.ngraph.transformers as ngt
from neonlike.ngraph.testing import (ExecutorFactory, RandomTensorGenerator, allclose,
                                     assert_allclose, check_derivative, executor,
                                     numeric_derivative, raise_all_numpy_errors,
                                     transformer_tolerances)
from neonlike.ngraph.transformers import base


@pytest.fixture(params=["numpy", "cpu"])
def transformer_factory(request):
    """Upstream's fixture name: the default factory set to each transformer in turn."""
    saved = list(base._DEFAULT)
    ngt.set_transformer_factory(ngt.make_transformer_factory(request.param))
    yield request.param
    base._DEFAULT[:] = saved


def axes(*lengths):
    return ng.make_axes([ng.make_axis(n) for n in lengths])


def test_executor_is_callable_and_a_context_manager(transformer_factory):
    ax = axes(3, 4)
    x = ng.placeholder(ax)
    value = np.arange(12, dtype=np.float32).reshape(3, 4)
    # the seed era: executor(...)(...)
    assert_allclose(executor(2 * x, x)(value), 2 * value)
    # January 2017: with executor(...) as f
    with executor([x + 1, ng.sum(x, out_axes=())], x) as f:
        plus, total = f(value)
    assert_allclose(plus, value + 1)
    assert_allclose(total, value.sum(), rtol=1e-6)
    assert f.factory.transformer.tensors == {}      # closed at the block's end


def test_executor_factory_makes_several_computations_on_one_transformer(transformer_factory):
    x = ng.placeholder(axes(5))
    with ExecutorFactory() as ex:
        identity = ex.executor(x, x)
        square = ex.executor(x * x, x)
        assert identity.transformer is square.transformer is ex.transformer
        v = np.linspace(-1, 1, 5).astype(np.float32)
        assert_allclose(identity(v), v)
        assert_allclose(square(v), v * v)
        with pytest.raises(ValueError, match="finalized"):
            ex.executor(x + 1, x)


def test_the_default_factory_picks_the_transformer(transformer_factory):
    with ExecutorFactory() as ex:
        assert (ex.transformer.name == "numpy") == (transformer_factory == "numpy")
        assert isinstance(ex.transformer, ngt.Transformer)


def test_executor_factory_works_without_a_with_block():
    """The seed era made the factory's transformer in __init__ and never closed it."""
    x = ng.placeholder(axes(2))
    ex = ExecutorFactory()
    assert_allclose(ex.executor(-x, x)(np.array([1.0, 2.0])), [-1.0, -2.0])


def test_get_tensor_view_value_follows_updates(transformer_factory):
    w = ng.variable(axes(2, 3), initial_value=np.ones((2, 3)))
    with ExecutorFactory() as ex:
        step = ex.executor(ng.assign(w, w * 2))
        assert_allclose(ex.get_tensor_view_value(w), np.ones((2, 3)))
        step()
        step()
        assert_allclose(ex.get_tensor_view_value(w), 4 * np.ones((2, 3)))
        host = np.empty((2, 3), dtype=np.float32)
        assert ex.get_tensor_view_value(w, host) is host
        assert_allclose(host, 4 * np.ones((2, 3)))
        with pytest.raises(ValueError, match="has no storage"):
            ex.get_tensor_view_value(w + 1)


def test_a_variable_marked_input_is_a_parameter(transformer_factory):
    """Upstream's tests pass variables as parameters after `v.input = True`."""
    v = ng.variable(axes(3))
    v.input = True
    with executor(v * 3, v) as f:
        assert_allclose(f(np.array([1.0, 2.0, 3.0])), [3.0, 6.0, 9.0])


def test_numeric_derivative_of_a_numpy_function():
    x = np.array([[0.5, -1.0, 2.0]], dtype=np.float32)
    saved = x.copy()
    d = numeric_derivative(lambda v: np.array([np.sum(v ** 2), np.sum(np.sin(v))]), x, 1e-2)
    # f's shape, then x's: (2,) + (1, 3)
    assert d.shape == (2, 1, 3)
    np.testing.assert_allclose(d[0], 2 * x, rtol=1e-3)
    np.testing.assert_allclose(d[1], np.cos(x), rtol=1e-3)
    np.testing.assert_array_equal(x, saved)          # the caller's array is left alone


def test_numeric_derivative_is_central():
    """Central differences: exact for a quadratic (forward differences are off by dx)."""
    d = numeric_derivative(lambda v: v.astype(np.float64) ** 2, np.array(3.0), 0.5)
    assert d.shape == ()
    assert float(d) == pytest.approx(6.0)


def test_numeric_derivative_refuses_integers():
    with pytest.raises(ValueError, match="floating point"):
        numeric_derivative(lambda v: v, np.arange(3), 1)


def test_derivative_of_a_scalar_and_of_a_tensor(transformer_factory):
    ax = axes(4)
    x = ng.placeholder(ax)
    value = np.array([-1.5, -0.2, 0.3, 1.1], dtype=np.float32)
    cost = ng.sum(ng.tanh(x), out_axes=())
    with ExecutorFactory() as ex:
        symbolic = ex.derivative(cost, x)
        jacobian = ex.derivative(ng.tanh(x), x)
        numeric = ex.numeric_derivative(ng.tanh(x), x, 1e-3)
        expected = 1 - np.tanh(value) ** 2
        assert_allclose(symbolic(value), expected, rtol=1e-5)
        # f's axes then x's: the Jacobian of an elementwise op is diagonal
        assert_allclose(jacobian(value), np.diag(expected), rtol=1e-5, atol=1e-7)
        assert_allclose(numeric(value), np.diag(expected), rtol=1e-2, atol=1e-3)


def test_check_derivative_with_parameters(transformer_factory):
    C, N, K = ng.make_axis(3, name="C"), ng.make_axis(2, name="N"), ng.make_axis(4, name="K")
    x = ng.placeholder([C, N])
    w = ng.placeholder([K, C])
    rng = RandomTensorGenerator(0)
    x_value, w_value = rng.uniform(-1, 1, x.axes), rng.uniform(-1, 1, w.axes)
    cost = ng.sum(ng.tanh(ng.dot(w, x)), out_axes=())
    check_derivative(cost, w, 1e-3, w_value, parameters=[x], parameter_values=[x_value],
                     rtol=1e-2, atol=1e-3)
    check_derivative(ng.tanh(ng.dot(w, x)), x, 1e-3, x_value, parameters=[w],
                     parameter_values=[w_value], rtol=1e-2, atol=1e-3)


def test_check_derivative_fails_on_a_wrong_derivative(monkeypatch):
    x = ng.placeholder(axes(3))
    value = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    right = ExecutorFactory.derivative

    def doubled(self, f, px, *parameters):
        comp = right(self, f, px, *parameters)
        return lambda *args: 2 * np.asarray(comp(*args))
    monkeypatch.setattr(ExecutorFactory, "derivative", doubled)
    with pytest.raises(AssertionError):
        check_derivative(ng.sum(x * x, out_axes=()), x, 1e-3, value, rtol=1e-2)


def test_random_tensor_generator_is_seeded_and_shaped_by_axes():
    ax = axes(3, 5)
    a = RandomTensorGenerator(7)
    first = a.uniform(-1, 1, ax)
    assert first.shape == (3, 5) and first.dtype == np.float32
    assert np.all((first >= -1) & (first < 1))
    # upstream's stream: numpy's RandomState(seed)
    np.testing.assert_array_equal(first, np.random.RandomState(7).uniform(-1, 1, (3, 5))
                                  .astype(np.float32))
    a.reset()
    np.testing.assert_array_equal(a.uniform(-1, 1, ax), first)
    a.reset(8)
    assert not np.array_equal(a.uniform(-1, 1, ax), first)
    b = RandomTensorGenerator(0, np.float64)
    n = b.normal(2.0, 0.5, axes(4000))
    assert n.dtype == np.float64 and abs(n.mean() - 2.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    ints = b.random_integers(-2, 2, axes(1000))
    assert ints.dtype == np.int8 and set(ints.tolist()) == {-2, -1, 0, 1, 2}
    q = b.discrete_uniform(0.0, 1.0, 0.25, axes(1000))
    assert set(q.tolist()) == {0.0, 0.25, 0.5, 0.75, 1.0}


def test_random_tensor_generator_names_an_axis_without_length():
    H = ng.make_axis(name="Hx")
    with pytest.raises(ValueError, match="Hx"):
        RandomTensorGenerator().uniform(0, 1, [H])


def test_assert_allclose_widens_tolerances_for_the_engine(transformer_factory):
    with ExecutorFactory() as ex:
        rtol, atol = transformer_tolerances()
        assert (rtol, atol) == transformer_tolerances(ex.transformer)
        off = np.float32(1) + np.float32(3e-6)      # 3e-6 relative: a few ulps of float32
        if transformer_factory == "numpy":
            assert rtol == 0
            with pytest.raises(AssertionError):
                assert_allclose(off, 1.0)
        else:
            assert rtol == 1e-5
            assert_allclose(off, 1.0)
            assert allclose(off, 1.0, rtol=0, atol=0)
        with pytest.raises(AssertionError):
            assert_allclose(off, 1.0, transformer_overwrite=False)


def test_raise_all_numpy_errors():
    @raise_all_numpy_errors
    def divide(a):
        return np.float32(1) / a
    with pytest.raises(FloatingPointError):
        divide(np.float32(0))
    with np.errstate(divide="ignore"):
        assert np.isinf(np.float32(1) / np.float32(0))    # the settings were restored


def test_seed_era_and_upstream_paths():
    import neonlike.ngraph.testing as testing
    from neonlike.ngraph.util import utils
    assert ng.testing is testing
    for name in ("ExecutorFactory", "RandomTensorGenerator", "executor", "numeric_derivative",
                 "check_derivative", "with_error_settings", "raise_all_numpy_errors"):
        assert getattr(utils, name) is getattr(testing, name)
    assert ng.testing.assert_allclose is assert_allclose
