"""gen_backend and the backend registry: names, options, the RNG, the global backend, optional
dependencies (mkl-service, pycuda) and backends added through the `neonlike.backends` entry points.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

import neonlike
from neonlike import NervanaObject
from neonlike.backends import cleanup_backend, gen_backend
from neonlike.optree import OpTreeNode

REPO_ROOT = Path(__file__).resolve().parents[1]
HOST_BACKENDS = ["cpu", "mkl"]


def host_backend(name, **kwargs):
    """gen_backend(name) for 'cpu' or 'mkl' (the latter skips where mkl-service is absent)."""
    if name == "mkl":
        pytest.importorskip("mkl", reason="mkl-service is not installed")
    return gen_backend(name, **kwargs)


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=REPO_ROOT, env=env, timeout=120)


# ------------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("datatype", [np.float16, np.float32, np.float64, "float32",
                                      np.dtype("float64")])
@pytest.mark.parametrize("batch_size", [0, 1, 128])
def test_gen_backend_options(name, datatype, batch_size):
    be = host_backend(name, rng_seed=3, datatype=datatype, batch_size=batch_size, device_id=0)
    assert be.backend_name == name
    assert be.bsz == batch_size
    assert be.default_dtype == np.dtype(datatype)
    assert be.empty((2, 3)).dtype == np.dtype(datatype)
    assert be.zeros((4,)).dtype == np.dtype(datatype)
    assert be.rng_seed == 3
    assert be.device_id == 0 and be.device_type == 0
    assert NervanaObject.be is be


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_gen_backend_defaults(name):
    be = host_backend(name)
    assert be.bsz == 0
    assert be.default_dtype == np.dtype(np.float32)
    assert be.rng_seed is None
    assert isinstance(be.rng, np.random.RandomState)


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("datatype", [np.int32, np.int8, np.uint8, np.complex64, np.bool_, "foo",
                                      "float128", object])
def test_gen_backend_rejects_other_datatypes(name, datatype):
    if name == "mkl":
        pytest.importorskip("mkl", reason="mkl-service is not installed")
    with pytest.raises(ValueError, match="float32"):  # the message lists the accepted dtypes
        gen_backend(name, datatype=datatype)


def test_neonlike_exposes_gen_backend_lazily():
    assert neonlike.gen_backend is gen_backend
    assert neonlike.cleanup_backend is cleanup_backend


# ------------------------------------------------------------------------------------------------
# the RNG
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_rng_is_a_seeded_random_state(name):
    be = host_backend(name, rng_seed=1234)
    assert isinstance(be.rng, np.random.RandomState)
    draws = be.rng.uniform(size=8)
    np.testing.assert_array_equal(draws, np.random.RandomState(1234).uniform(size=8))
    again = host_backend(name, rng_seed=1234)
    np.testing.assert_array_equal(again.rng.uniform(size=8), draws)
    other = host_backend(name, rng_seed=1235)
    assert not np.array_equal(other.rng.uniform(size=8), draws)


def test_unseeded_backends_draw_differently():
    a = gen_backend("cpu").rng.uniform(size=16)
    b = gen_backend("cpu").rng.uniform(size=16)
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("seed", [0, 7, None])
def test_rng_reset_returns_to_the_initial_state(seed):
    be = gen_backend("cpu", rng_seed=seed)
    first = be.rng.normal(size=5)
    be.rng.normal(size=3)
    be.rng_reset()
    np.testing.assert_array_equal(be.rng.normal(size=5), first)


def test_rng_state_round_trip():
    be = gen_backend("cpu", rng_seed=5)
    be.rng.uniform(size=4)
    state = be.rng_get_state()
    after = be.rng.uniform(size=6)
    be.rng.uniform(size=10)
    be.rng_set_state(state)
    np.testing.assert_array_equal(be.rng.uniform(size=6), after)
    # a state taken from one backend reproduces its draws on another
    other = gen_backend("cpu", rng_seed=99)
    other.rng_set_state(state)
    np.testing.assert_array_equal(other.rng.uniform(size=6), after)


def test_gen_rng_reseeds_and_becomes_the_reset_point():
    be = gen_backend("cpu", rng_seed=1)
    rng = be.gen_rng(42)
    assert rng is be.rng and isinstance(rng, np.random.RandomState)
    draws = be.rng.uniform(size=5)
    np.testing.assert_array_equal(draws, np.random.RandomState(42).uniform(size=5))
    be.rng_reset()
    np.testing.assert_array_equal(be.rng.uniform(size=5), draws)


# ------------------------------------------------------------------------------------------------
# the global backend
# ------------------------------------------------------------------------------------------------

def test_nervana_object_be_is_the_last_backend():
    class Layer(NervanaObject):
        pass

    first = gen_backend("cpu")
    assert NervanaObject.be is first and Layer().be is first
    second = gen_backend("cpu", rng_seed=2)
    assert second is not first
    assert NervanaObject.be is second and Layer().be is second


def test_new_backend_cleans_up_the_old_one(monkeypatch):
    old = gen_backend("cpu")
    calls = []
    monkeypatch.setattr(old, "cleanup_backend", lambda: calls.append("old"), raising=False)
    new = gen_backend("cpu")
    assert calls == ["old"]
    assert NervanaObject.be is new


def test_cleanup_backend_clears_the_global_backend(monkeypatch):
    be = gen_backend("cpu")
    calls = []
    monkeypatch.setattr(be, "cleanup_backend", lambda: calls.append(1), raising=False)
    cleanup_backend()
    assert calls == [1] and NervanaObject.be is None
    cleanup_backend()  # nothing left to clean: harmless
    assert calls == [1] and NervanaObject.be is None
    assert gen_backend("cpu") is NervanaObject.be


def test_default_backend_is_mkl_when_mkl_service_is_importable():
    pytest.importorskip("mkl", reason="mkl-service is not installed")
    be = gen_backend()
    assert be.backend_name == "mkl"
    assert gen_backend(backend=None).backend_name == "mkl"


def test_default_backend_is_cpu_without_mkl_service(monkeypatch):
    monkeypatch.setitem(sys.modules, "mkl", None)
    be = gen_backend()
    assert be.backend_name == "cpu"


# ------------------------------------------------------------------------------------------------
# unknown names, missing dependencies
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["nope", "", "cpu ", "nervanagpu", "tpu"])
def test_unknown_name_lists_the_valid_names(name):
    with pytest.raises(ValueError) as info:
        gen_backend(name)
    msg = str(info.value)
    for valid in ("'cpu'", "'gpu'", "'mkl'"):
        assert valid in msg, msg
    assert repr(name) in msg


def test_gpu_without_pycuda_names_pycuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    monkeypatch.setitem(sys.modules, "pycuda.autoinit", None)
    with pytest.raises((ImportError, RuntimeError), match="pycuda"):
        gen_backend("gpu")


def test_gpu_here_without_pycuda_installed():
    if importlib.util.find_spec("pycuda") is not None:
        pytest.skip("pycuda is installed on this machine")
    with pytest.raises(ImportError, match="pycuda"):
        gen_backend("gpu")


def fake_pycuda(monkeypatch, init=None, count=1):
    """A pycuda package in sys.modules whose driver's init() runs `init`."""
    pycuda = types.ModuleType("pycuda")
    pycuda.__path__ = []
    driver = types.ModuleType("pycuda.driver")

    class Error(Exception):
        pass

    def do_init(flags=0):
        if init is not None:
            init(Error)

    driver.Error = Error
    driver.init = do_init
    driver.Device = type("Device", (), {"count": staticmethod(lambda: count),
                                        "__init__": lambda self, i: None})
    pycuda.driver = driver
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    monkeypatch.delitem(sys.modules, "pycuda.autoinit", raising=False)
    return pycuda


def _raise_cuinit(Error):
    raise Error("cuInit failed: no CUDA-capable device is detected")


def _raise_oserror(Error):
    raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")


@pytest.mark.parametrize("init", [_raise_cuinit, _raise_oserror], ids=["cuInit", "no-libcuda"])
def test_gpu_whose_driver_fails_names_the_driver(monkeypatch, init):
    fake_pycuda(monkeypatch, init=init)
    with pytest.raises((ImportError, RuntimeError)) as info:
        gen_backend("gpu")
    msg = str(info.value).lower()
    assert "driver" in msg and "cuda" in msg, msg


def test_gpu_whose_driver_module_cannot_load_names_the_driver(monkeypatch, tmp_path):
    """Real pycuda fails at `import pycuda.driver` when libcuda is missing."""
    package = tmp_path / "pycuda"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "driver.py").write_text(
        "raise ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')\n")
    pycuda = types.ModuleType("pycuda")
    pycuda.__path__ = [str(package)]
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.delitem(sys.modules, "pycuda.driver", raising=False)
    with pytest.raises((ImportError, RuntimeError)) as info:
        gen_backend("gpu")
    msg = str(info.value)
    assert "driver" in msg.lower() or "libcuda" in msg, msg


def test_gpu_with_no_device_says_so(monkeypatch):
    fake_pycuda(monkeypatch, count=0)
    with pytest.raises((ImportError, RuntimeError), match="device"):
        gen_backend("gpu")


def test_gpu_with_device_id_out_of_range(monkeypatch):
    fake_pycuda(monkeypatch, count=1)
    with pytest.raises((ImportError, RuntimeError), match="device_id|device"):
        gen_backend("gpu", device_id=3)


def test_mkl_without_mkl_service_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mkl", None)
    with pytest.raises(ImportError, match="mkl-service"):
        gen_backend("mkl")


# ------------------------------------------------------------------------------------------------
# a backend registered through the `neonlike.backends` entry-point group
# ------------------------------------------------------------------------------------------------

TOY_MODULE = '''
from neonlike.backends.nervanacpu import NervanaCPU


class ToyBackend(NervanaCPU):
    """NervanaCPU under another name."""

    backend_name = "toy"
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toybackend.py").write_text(TOY_MODULE)
    info = tmp_path / "toybackend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toybackend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[neonlike.backends]\ntoy = toybackend:ToyBackend\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("toybackend", None)


def test_entry_point_backend_is_made_by_name(toy):
    be = gen_backend("toy", rng_seed=4, datatype=np.float64, batch_size=16)
    toy_cls = sys.modules["toybackend"].ToyBackend
    assert type(be) is toy_cls and be.backend_name == "toy"
    assert NervanaObject.be is be
    assert be.bsz == 16 and be.default_dtype == np.dtype(np.float64)
    np.testing.assert_array_equal(be.rng.uniform(size=3), np.random.RandomState(4).uniform(size=3))


def test_entry_point_backend_executes_a_tree(toy):
    be = gen_backend("toy")
    xv = np.array([[-1.5, 0.0, 2.0], [1e-30, -0.0, 3.0]])
    x = be.array(xv)
    out = be.empty((2, 3))
    out[:] = be.exp(x) * 2 + 1
    np.testing.assert_allclose(out.get(), np.exp(xv) * 2 + 1, rtol=2e-6)
    assert isinstance(x * 2, OpTreeNode)


def test_entry_point_name_is_listed_for_unknown_names(toy):
    with pytest.raises(ValueError) as info:
        gen_backend("nope")
    msg = str(info.value)
    for valid in ("'toy'", "'cpu'", "'gpu'", "'mkl'"):
        assert valid in msg, msg


def test_entry_point_is_gone_when_not_installed():
    with pytest.raises(ValueError) as info:
        gen_backend("toy")
    assert "'toy'" in str(info.value)  # named as the bad name...
    assert str(info.value).count("toy") == 1  # ...but not among the valid ones


# ------------------------------------------------------------------------------------------------
# imports: numba, mkl and pycuda are optional
# ------------------------------------------------------------------------------------------------

def test_core_modules_work_with_optional_dependencies_blocked():
    result = run_python("""
        import sys
        for name in ("numba", "pycuda", "mkl"):
            sys.modules[name] = None
        import numpy as np
        import neonlike, neonlike.ops, neonlike.optree, neonlike.tensor, neonlike.backends
        import neonlike.backends.backend, neonlike.backends.reference, neonlike.backends.nervanacpu
        from neonlike.backends import gen_backend
        be = gen_backend("cpu", rng_seed=0)
        x = be.array(np.array([[1.0, -2.0, 0.5]]))
        out = be.empty((1, 3))
        out[:] = x * 2 + be.exp(x)
        print(out.get().tolist())
        print(gen_backend().backend_name)
        for name in ("mkl", "gpu"):
            try:
                gen_backend(name)
            except ImportError as e:
                print(name, "ImportError", e)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    values = np.array(eval(lines[0]))  # a list of floats printed by the child
    xv = np.array([[1.0, -2.0, 0.5]])
    np.testing.assert_allclose(values, xv * 2 + np.exp(xv), rtol=2e-6)
    assert lines[1] == "cpu"
    assert lines[2].startswith("mkl ImportError") and "mkl-service" in lines[2]
    assert lines[3].startswith("gpu ImportError") and "pycuda" in lines[3]


def test_import_neonlike_imports_no_optional_dependency():
    result = run_python("""
        import sys
        import neonlike
        print(sorted(m for m in ("numba", "mkl", "pycuda") if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_default_backend_in_a_fresh_interpreter():
    result = run_python("""
        import importlib.util
        from neonlike.backends import gen_backend
        has_mkl = importlib.util.find_spec("mkl") is not None
        print(gen_backend().backend_name, "mkl" if has_mkl else "cpu")
    """)
    assert result.returncode == 0, result.stderr
    got, expected = result.stdout.split()
    assert got == expected


# ------------------------------------------------------------------------------------------------
# random fills, begin/end, cleanup
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fill_normal_is_reproducible_with_rng_seed(name, dtype):
    values = []
    for global_seed in (0, 1):
        np.random.seed(global_seed)  # the global numpy RNG must play no part
        be = host_backend(name, rng_seed=21)
        t = be.empty((64, 32), dtype=dtype)
        be.fill_normal(t)
        values.append(t.get())
    np.testing.assert_array_equal(values[0], values[1])
    assert values[0].dtype == np.dtype(dtype)
    assert len(np.unique(values[0])) > 2000


def test_fill_normal_draws_from_be_rng():
    be = gen_backend("cpu", rng_seed=3)
    a, b = be.empty((20, 10)), be.empty((20, 10))
    state = be.rng_get_state()
    be.fill_normal(a)
    assert not np.array_equal(be.rng_get_state()[1], state[1])  # be.rng advanced
    be.rng_set_state(state)
    be.fill_normal(b)
    np.testing.assert_array_equal(a.get(), b.get())
    be.fill_normal(b)
    assert not np.array_equal(a.get(), b.get())


@pytest.mark.parametrize("mean, stdv", [(0.0, 1.0), (2.0, 0.5), (-3.0, 4.0)])
def test_fill_normal_statistics(mean, stdv):
    be = gen_backend("cpu", rng_seed=8)
    t = be.empty((200, 100), dtype=np.float64)
    be.fill_normal(t, mean=mean, stdv=stdv)
    v = t.get()
    # 20000 samples: the sample mean is within 5 standard errors, the sample std within 3%
    assert abs(v.mean() - mean) < 5 * stdv / np.sqrt(v.size)
    assert abs(v.std() / stdv - 1) < 0.03


@pytest.mark.parametrize("keepthresh", [0.0, 0.1, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.uint8])
def test_make_binary_mask(keepthresh, dtype):
    be = gen_backend("cpu", rng_seed=17)
    out = be.empty((200, 200), dtype=dtype)
    out[:] = 5
    be.make_binary_mask(out, keepthresh=keepthresh)
    mask = out.get().astype(np.float64)
    assert set(np.unique(mask)) <= {0.0, 1.0}
    assert abs(mask.mean() - keepthresh) < 0.02
    if keepthresh in (0.0, 1.0):
        assert np.all(mask == keepthresh)
    again = gen_backend("cpu", rng_seed=17)
    other = again.empty((200, 200), dtype=dtype)
    again.make_binary_mask(other, keepthresh=keepthresh)
    np.testing.assert_array_equal(other.get(), out.get())


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_begin_end_and_cleanup_do_nothing_harmful(name):
    be = host_backend(name)
    x = be.array(np.array([[1.0, 2.0], [3.0, -4.0]]))
    out = be.empty((2, 2))
    for block in ("epoch", "minibatch", "fprop", "bprop", "update", 0):
        assert be.begin(block, 0) is None
        out[:] = x * 3
        assert be.end(block, 0) is None
    np.testing.assert_allclose(out.get(), [[3.0, 6.0], [9.0, -12.0]])
    be.cleanup_backend()
    be.cleanup_backend()
    np.testing.assert_allclose(x.get(), [[1.0, 2.0], [3.0, -4.0]])


def test_the_layer_library_trains_with_optional_dependencies_blocked():
    """numba, mkl, pycuda and scikit-learn absent: layers, convolution and pooling still train
    (numpy paths), and importing the library needs none of them."""
    result = run_python("""
        import sys
        for name in ("numba", "pycuda", "mkl", "sklearn"):
            sys.modules[name] = None
        import numpy as np
        from neonlike.backends import gen_backend
        from neonlike.data import ArrayIterator
        from neonlike.initializers import Gaussian
        from neonlike.layers import Affine, Conv, GeneralizedCost, Pooling
        from neonlike.models import Model
        from neonlike.optimizers import GradientDescentMomentum
        from neonlike.transforms import CrossEntropyBinary, Logistic, Rectlin
        gen_backend("cpu", rng_seed=0, batch_size=8)
        rng = np.random.default_rng(0)
        X, y = rng.random((32, 36)), rng.integers(0, 3, 32)
        data = ArrayIterator(X, y, nclass=3, lshape=(1, 6, 6))
        model = Model([Conv((3, 3, 4), init=Gaussian(0, 0.1), activation=Rectlin()), Pooling(2),
                       Affine(3, init=Gaussian(0, 0.1), activation=Logistic(shortcut=True))])
        model.fit(data, cost=GeneralizedCost(CrossEntropyBinary()),
                  optimizer=GradientDescentMomentum(0.1, momentum_coef=0.9), num_epochs=2)
        print(model.get_outputs(data).shape)
        try:
            from neonlike.data import load_digits
            load_digits()
        except ImportError as e:
            print("ImportError", e)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "(32, 3)"
    assert lines[1].startswith("ImportError") and "scikit-learn" in lines[1]


def test_cpu_views_carry_the_attributes_the_constructor_gives():
    """CPUTensor._derived sets a view's attributes directly (faster than the constructors): the
    same names and values as CPUTensor(...) gives, for reshapes, transposes and slices."""
    from neonlike.backends.cpu.device import CPUTensor
    be = gen_backend("cpu")
    t = be.array(np.arange(24, dtype=np.float64).reshape(4, 6), dtype=np.float32)
    for view, ary in ((t.reshape((2, 12)), t._tensor.reshape(2, 12)), (t.T, t._tensor.T),
                      (t[1:3], t._tensor[1:3])):
        made = CPUTensor(be, ary, None, t.persist_values, base=t)
        assert vars(view).keys() == vars(made).keys()
        for name, value in vars(made).items():
            if name != "_tensor":
                assert getattr(view, name) == value, name
        assert type(view.shape) is tuple and view.dtype == np.float32 and view.base is t
        np.testing.assert_array_equal(view.get(), ary)
        assert np.shares_memory(view._tensor, t._tensor)


@pytest.mark.parametrize("shape", [(1,), (3, 5), (256, 1600), (0, 4), (2, 3, 7), (40, 70),
                                   (33, 31)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
def test_cpu_tensors_start_on_a_cache_line(shape, dtype):
    """The CPU backend's tensors (empty, zeros, ones, array, *_like, iobuf) of ALIGN_MIN bytes
    and more start on a 64-byte boundary (device.ALIGN), with their values, dtype and shape as
    asked (smaller ones keep numpy's allocation)."""
    from neonlike.backends.cpu.device import ALIGN, ALIGN_MIN
    be = gen_backend("cpu", batch_size=4)
    values = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    made = {"empty": be.empty(shape, dtype=dtype), "zeros": be.zeros(shape, dtype=dtype),
            "ones": be.ones(shape, dtype=dtype), "array": be.array(values, dtype=dtype)}
    made["zeros_like"] = be.zeros_like(made["array"])
    for name, t in made.items():
        a = t._tensor
        assert a.nbytes < ALIGN_MIN or a.ctypes.data % ALIGN == 0, name
        assert a.flags.c_contiguous and a.dtype == np.dtype(dtype), name
    want = {"empty": 0, "zeros": 0, "ones": 1, "zeros_like": 0}
    for name, v in want.items():
        np.testing.assert_array_equal(made[name].get(), np.full(made[name].shape, v, dtype))
    np.testing.assert_array_equal(made["array"].get(), values.reshape(made["array"].shape))
    assert be.iobuf(1024)._tensor.ctypes.data % ALIGN == 0     # (1024, batch 4) float32


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32])
def test_cpu_array_converts_as_a_store_into_its_aligned_memory(dtype):
    """be.array of a large float64 array (edge values included) equals cast_for_store's
    conversion bit for bit, whichever way the CPU backend makes it (straight into the aligned
    array for float dtypes), and warns of nothing."""
    import warnings
    from neonlike.backends.cpu.device import ALIGN, ALIGN_MIN
    from neonlike.dtypes import cast_for_store
    be = gen_backend("cpu", batch_size=4)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 300)) * 10.0 ** rng.integers(-40, 300, size=(64, 300))
    x.flat[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-320]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = be.array(x, dtype=dtype)
    want = cast_for_store(x, np.dtype(dtype))
    assert t._tensor.nbytes < ALIGN_MIN or t._tensor.ctypes.data % ALIGN == 0
    np.testing.assert_array_equal(t.get().view(np.uint8), want.view(np.uint8))
