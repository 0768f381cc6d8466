"""neon's recurrent layers (neonlike.layers.recurrent) against float64 numpy references written
here, and their gradients (inputs, parameters, starting states) against central differences of
those references. neon's own tests run in the conformance suite; these are ours."""
import numpy as np
import pytest

from neonlike.backends import gen_backend
from neonlike.initializers import Gaussian, GlorotUniform
from neonlike.layers.recurrent import (GRU, LSTM, BiBNRNN, BiLSTM, BiRNN, BiSum, DeepBiLSTM,
                                       DeepBiRNN, Recurrent, RecurrentLast, RecurrentMean,
                                       RecurrentSum, get_steps)
from neonlike.transforms import Identity, Logistic, Rectlin, Tanh
from neonlike.transforms.activation import Leaky

T, NIN, NOUT, N = 3, 4, 5, 2


@pytest.fixture
def be():
    return gen_backend("cpu", datatype=np.float64, batch_size=N, rng_seed=0)


def sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def seq(x):
    """(features, T*N) -> (T, features, N)."""
    return x.reshape(x.shape[0], -1, N).transpose(1, 0, 2)


def flat(s):
    """(T, features, N) -> (features, T*N)."""
    return s.transpose(1, 0, 2).reshape(s.shape[1], -1)


# ---------------------------------------------------------------- references (float64 numpy)
def ref_rnn(x, P, h0, c0=None, reverse=False):
    Wi, Wr, b = P["W_input"], P["W_recur"], P["b"]
    xs, h, out = seq(x), h0, [None] * (x.shape[1] // N)
    for t in (reversed(range(len(out))) if reverse else range(len(out))):
        h = out[t] = np.tanh(Wi @ xs[t] + Wr @ h + b)
    return flat(np.array(out))


def ref_lstm(x, P, h0, c0, reverse=False):
    Wi, Wr, b = P["W_input"], P["W_recur"], P["b"]
    n, xs, h, c = Wr.shape[1], seq(x), h0, c0
    out = [None] * len(xs)
    for t in (reversed(range(len(xs))) if reverse else range(len(xs))):
        z = Wi @ xs[t] + Wr @ h + b
        i, f, o, g = sig(z[:n]), sig(z[n:2 * n]), sig(z[2 * n:3 * n]), np.tanh(z[3 * n:])
        c = f * c + i * g
        h = out[t] = o * np.tanh(c)
    return flat(np.array(out))


def ref_gru(x, P, h0, c0=None):
    Wi, Wr, b = P["W_input"], P["W_recur"], P["b"]
    n, xs, h = Wr.shape[1], seq(x), h0
    out = []
    for t in range(len(xs)):
        rz = sig(Wi[:2 * n] @ xs[t] + Wr[:2 * n] @ h + b[:2 * n])
        r, z = rz[:n], rz[n:]
        hc = np.tanh(Wi[2 * n:] @ xs[t] + Wr[2 * n:] @ (r * h) + b[2 * n:])
        h = (1 - z) * h + z * hc
        out.append(h)
    return flat(np.array(out))


def central(f, arrays, eps=1e-6):
    """d f / d a for each array a in `arrays` (changed in place and restored)."""
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        for k in range(a.size):
            v = a.flat[k]
            a.flat[k] = v + eps
            up = f()
            a.flat[k] = v - eps
            down = f()
            a.flat[k] = v
            g.flat[k] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def build(layer, nin=NIN, steps=T):
    layer.configure((nin, steps))
    layer.prev_layer = True
    layer.allocate()
    layer.set_deltas()
    return layer


def params(layer, names=("W_input", "W_recur", "b")):
    return {k: getattr(layer, k).get() for k in names}


UNI = [(Recurrent, ref_rnn, {}), (LSTM, ref_lstm, {"gate_activation": Logistic()}),
       (GRU, ref_gru, {"gate_activation": Logistic()})]


@pytest.mark.parametrize("cls, ref, kw", UNI, ids=["Recurrent", "LSTM", "GRU"])
def test_unidirectional_values_and_gradients(be, cls, ref, kw):
    rng = np.random.default_rng(1)
    layer = build(cls(NOUT, Gaussian(scale=0.5), activation=Tanh(), **kw))
    layer.b.set(rng.normal(0, 0.3, layer.b.shape))
    x = rng.normal(size=(NIN, T * N))
    R = rng.normal(size=(NOUT, T * N))
    h0 = np.zeros((NOUT, N))
    c0 = np.zeros((NOUT, N))
    out = layer.fprop(be.array(x)).get()
    P = params(layer)
    np.testing.assert_allclose(out, ref(x, P, h0, c0), rtol=0, atol=1e-12)

    dx = layer.bprop(be.array(R)).get()
    loss = lambda: np.sum(R * ref(x, P, h0, c0))  # noqa: E731
    gx, gWi, gWr, gb = central(loss, [x, P["W_input"], P["W_recur"], P["b"]])
    np.testing.assert_allclose(dx, gx, atol=1e-7)
    np.testing.assert_allclose(layer.dW_input.get(), gWi, atol=1e-7)
    np.testing.assert_allclose(layer.dW_recur.get(), gWr, atol=1e-7)
    np.testing.assert_allclose(layer.db.get(), gb, atol=1e-7)


@pytest.mark.parametrize("cls, ref, kw", UNI, ids=["Recurrent", "LSTM", "GRU"])
def test_state_carried_and_in_the_gradients(be, cls, ref, kw):
    """Same input tensor again: the sequence starts from the last state, and the gradients
    (dW_recur, dx, and the starting state's error) include that state's terms."""
    rng = np.random.default_rng(2)
    layer = build(cls(NOUT, Gaussian(scale=0.5), activation=Tanh(), **kw))
    x = rng.normal(size=(NIN, T * N))
    xt = be.array(x)
    first = layer.fprop(xt).get()
    P = params(layer)
    h0 = first[:, -N:].copy()
    c0 = layer.c_buffer.get()[:, -N:].copy() if cls is LSTM else np.zeros((NOUT, N))
    second = layer.fprop(xt).get()
    np.testing.assert_allclose(second, ref(x, P, h0, c0), rtol=0, atol=1e-12)

    R = rng.normal(size=(NOUT, T * N))
    dx = layer.bprop(be.array(R)).get()
    loss = lambda: np.sum(R * ref(x, P, h0, c0))  # noqa: E731
    gx, gWr, gh0 = central(loss, [x, P["W_recur"], h0])
    np.testing.assert_allclose(dx, gx, atol=1e-7)
    np.testing.assert_allclose(layer.dW_recur.get(), gWr, atol=1e-7)
    np.testing.assert_allclose(layer.get_final_hidden_error().get(), gh0, atol=1e-7)
    if cls is LSTM:
        (gc0,) = central(loss, [c0])
        np.testing.assert_allclose(layer.final_cell_error.get(), gc0, atol=1e-7)

    layer.reset_cells = True                       # stateless: zeros again
    np.testing.assert_allclose(layer.fprop(xt).get(), first, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls, ref, kw", UNI, ids=["Recurrent", "LSTM", "GRU"])
def test_init_state(be, cls, ref, kw):
    rng = np.random.default_rng(3)
    layer = build(cls(NOUT, Gaussian(scale=0.5), activation=Tanh(), **kw))
    x, h0 = rng.normal(size=(NIN, T * N)), rng.normal(size=(NOUT, N))
    out = layer.fprop(be.array(x), init_state=be.array(h0)).get()
    np.testing.assert_allclose(out, ref(x, params(layer), h0, np.zeros((NOUT, N))), atol=1e-12)
    with pytest.raises(ValueError, match=r"init_state of shape \(5, 2\).*got \(5, 3\)"):
        layer.fprop(be.array(x), init_state=be.array(np.zeros((NOUT, 3))))


BI = [(BiRNN, ref_rnn, {}), (BiLSTM, ref_lstm, {"gate_activation": Logistic()})]


@pytest.mark.parametrize("split", [False, True], ids=["shared", "split"])
@pytest.mark.parametrize("cls, ref, kw", BI, ids=["BiRNN", "BiLSTM"])
def test_bidirectional_values_and_gradients(be, cls, ref, kw, split):
    rng = np.random.default_rng(4)
    nin = 2 * NIN if split else NIN
    layer = build(cls(NOUT, Gaussian(scale=0.5), activation=Tanh(), split_inputs=split, **kw),
                  nin=nin)
    layer.b_f.set(rng.normal(0, 0.3, layer.b_f.shape))
    layer.b_b.set(rng.normal(0, 0.3, layer.b_b.shape))
    x = rng.normal(size=(nin, T * N))
    R = rng.normal(size=(2 * NOUT, T * N))
    Pf = params(layer, ("W_input_f", "W_recur_f", "b_f"))
    Pb = params(layer, ("W_input_b", "W_recur_b", "b_b"))
    Pf = dict(zip(("W_input", "W_recur", "b"), Pf.values()))
    Pb = dict(zip(("W_input", "W_recur", "b"), Pb.values()))
    z = np.zeros((NOUT, N))

    def forward():
        xf, xb = (x[:NIN], x[NIN:]) if split else (x, x)
        return np.vstack([ref(xf, Pf, z, z), ref(xb, Pb, z, z, reverse=True)])

    np.testing.assert_allclose(layer.fprop(be.array(x)).get(), forward(), atol=1e-12)
    dx = layer.bprop(be.array(R)).get()
    loss = lambda: np.sum(R * forward())  # noqa: E731
    grads = central(loss, [x, Pf["W_input"], Pf["W_recur"], Pf["b"], Pb["W_input"],
                           Pb["W_recur"], Pb["b"]])
    mine = [dx] + [getattr(layer, k).get() for k in ("dW_input_f", "dW_recur_f", "db_f",
                                                     "dW_input_b", "dW_recur_b", "db_b")]
    for got, want in zip(mine, grads):
        np.testing.assert_allclose(got, want, atol=1e-7)


def test_bibnrnn_gradients(be):
    rng = np.random.default_rng(5)
    layer = build(BiBNRNN(NOUT, Gaussian(scale=0.5), activation=Tanh()))
    x = rng.normal(size=(NIN, T * N))
    R = rng.normal(size=(2 * NOUT, T * N))
    P = {k: getattr(layer, k).get() for k in ("W_input_f", "W_recur_f", "b_f", "W_input_b",
                                               "W_recur_b", "b_b")}
    gamma = rng.uniform(0.5, 1.5, (2 * NOUT, 1))
    beta = rng.normal(0, 0.2, (2 * NOUT, 1))
    layer.gamma.set(gamma)
    layer.beta.set(beta)
    z = np.zeros((NOUT, N))

    def forward():
        ff = np.vstack([P["W_input_f"] @ x, P["W_input_b"] @ x])
        ff = (ff - ff.mean(1, keepdims=True)) / np.sqrt(ff.var(1, keepdims=True) + layer.eps)
        ff = ff * gamma + beta
        eye = {"W_input": np.eye(NOUT)}
        out_f = ref_rnn(ff[:NOUT], dict(eye, W_recur=P["W_recur_f"], b=P["b_f"]), z)
        out_b = ref_rnn(ff[NOUT:], dict(eye, W_recur=P["W_recur_b"], b=P["b_b"]), z, reverse=True)
        return np.vstack([out_f, out_b])

    np.testing.assert_allclose(layer.fprop(be.array(x)).get(), forward(), atol=1e-12)
    dx = layer.bprop(be.array(R)).get()
    loss = lambda: np.sum(R * forward())  # noqa: E731
    arrays = [x] + [P[k] for k in ("W_input_f", "W_recur_f", "b_f", "W_input_b", "W_recur_b",
                                   "b_b")] + [gamma, beta]
    grads = central(loss, arrays)
    mine = [dx] + [getattr(layer, k).get() for k in ("dW_input_f", "dW_recur_f", "db_f",
                                                     "dW_input_b", "dW_recur_b", "db_b",
                                                     "grad_gamma", "grad_beta")]
    for got, want in zip(mine, grads):
        np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("cls", [RecurrentSum, RecurrentMean, RecurrentLast])
def test_recurrent_outputs(be, cls):
    rng = np.random.default_rng(6)
    layer = build(cls())
    x, e = rng.normal(size=(NIN, T * N)), rng.normal(size=(NIN, N))
    s = seq(x)
    want = {RecurrentSum: s.sum(0), RecurrentMean: s.mean(0), RecurrentLast: s[-1]}[cls]
    np.testing.assert_allclose(layer.fprop(be.array(x)).get(), want, atol=1e-12)
    d = seq(layer.bprop(be.array(e)).get())
    for t in range(T):
        w = {RecurrentSum: e, RecurrentMean: e / T,
             RecurrentLast: e if t == T - 1 else 0 * e}[cls]
        np.testing.assert_allclose(d[t], w, atol=1e-12)


def test_bisum(be):
    layer = build(BiSum(), nin=2 * NIN)
    x = np.random.default_rng(7).normal(size=(2 * NIN, T * N))
    np.testing.assert_allclose(layer.fprop(be.array(x)).get(), x[:NIN] + x[NIN:], atol=1e-12)
    e = np.ones((NIN, T * N))
    np.testing.assert_allclose(layer.bprop(be.array(e)).get(), np.vstack([e, e]))


def test_get_steps_and_stacks(be):
    a = np.arange(12.0).reshape(2, 6)
    steps = get_steps(a, (2, 3))
    assert [s.tolist() for s in steps] == [[[0, 1], [6, 7]], [[2, 3], [8, 9]], [[4, 5], [10, 11]]]
    t = be.array(a)
    assert np.array_equal(get_steps(t, (2, 3))[1].get(), steps[1])
    with pytest.raises(ValueError, match="do not split into 4 steps"):
        get_steps(a, (2, 4))
    deep = DeepBiRNN(4, Gaussian(), activation=Tanh(), depth=3)
    assert [type(x) for x in deep] == [BiRNN] * 3
    assert [x.split_inputs for x in deep] == [False, True, True]
    summed = DeepBiRNN(4, Gaussian(), activation=Tanh(), depth=2, bi_sum=True, batch_norm=True)
    assert [type(x) for x in summed] == [BiBNRNN, BiSum, BiBNRNN, BiSum]
    lstms = DeepBiLSTM(4, Gaussian(), activation=Tanh(), gate_activation=Logistic(), depth=2)
    assert [x.split_inputs for x in lstms] == [False, True]


def test_errors_name_the_shapes(be):
    layer = build(LSTM(NOUT, Gaussian(), activation=Tanh(), gate_activation=Logistic()))
    with pytest.raises(ValueError, match=r"expected inputs of 4 features x 6 columns.*\(4, 5\)"):
        layer.fprop(be.array(np.zeros((NIN, 5))))
    layer.fprop(be.array(np.zeros((NIN, T * N))))
    with pytest.raises(ValueError, match=r"errors of shape \(5, 6\).*got \(5, 4\)"):
        layer.bprop(be.array(np.zeros((NOUT, 4))))
    with pytest.raises(ValueError, match="gate_activation is required"):
        LSTM(NOUT, Gaussian(), activation=Tanh())
    with pytest.raises(ValueError, match="activation is required"):
        Recurrent(NOUT, Gaussian())
    with pytest.raises(ValueError, match="even number of input features"):
        BiRNN(NOUT, Gaussian(), activation=Tanh(), split_inputs=True).configure((5, T))


def test_parameters_as_neon(be):
    layer = build(LSTM(NOUT, Gaussian(), activation=Tanh(), gate_activation=Logistic()))
    (W, dW), states = layer.get_params()[0]
    assert W is layer.W and dW is layer.dW and W.shape == (NIN + NOUT + 1, 4 * NOUT)
    assert layer.W_input.shape == (4 * NOUT, NIN) and layer.W_recur.shape == (4 * NOUT, NOUT)
    assert layer.b.shape == (4 * NOUT, 1) and not layer.b.get().any()
    layer.W_recur[:] = 7.0                         # the views write into W
    assert (W.get()[NIN:-1] == 7.0).all()


@pytest.mark.parametrize("make, head", [
    (lambda: LSTM(16, GlorotUniform(), activation=Tanh(), gate_activation=Logistic()),
     RecurrentLast),
    (lambda: GRU(16, GlorotUniform(), activation=Tanh(), gate_activation=Logistic()),
     RecurrentLast),
    (lambda: BiLSTM(16, GlorotUniform(), activation=Tanh(), gate_activation=Logistic()),
     RecurrentLast)], ids=["LSTM", "GRU", "BiLSTM"])
def test_trains_in_a_model(make, head):
    """Model.fit on a dataset's (strided) minibatches: predict the next point of two sines."""
    from neonlike.data import ArrayIterator
    from neonlike.layers import Affine, GeneralizedCost
    from neonlike.models import Model
    from neonlike.optimizers import RMSProp
    from neonlike.transforms import MeanSquared
    gen_backend("cpu", batch_size=32, rng_seed=0)
    steps, t = 10, np.arange(1200) * 0.1
    series = np.stack([np.sin(t), np.cos(1.3 * t)], 1).astype(np.float32)
    X = np.stack([series[i:i + steps].T for i in range(len(series) - steps - 1)])
    y = np.stack([series[i + steps] for i in range(len(series) - steps - 1)])
    data = ArrayIterator(X.reshape(len(X), -1), y, make_onehot=False, lshape=(2, steps))
    model = Model(layers=[make(), head(), Affine(2, GlorotUniform(), bias=GlorotUniform(),
                                                 activation=Identity())])
    model.fit(data, optimizer=RMSProp(learning_rate=0.01), num_epochs=4,
              cost=GeneralizedCost(MeanSquared()), callbacks=None)
    mse = np.mean((model.get_outputs(data)[:len(y)] - y) ** 2)
    assert mse < 0.1 * y.var()


# ---------------------------------------------------------------- the CPU's fused LSTM sequence
@pytest.fixture(params=["tiles", "mkl", "openblas"])
def kernel_blas(request, monkeypatch):
    """How the fused sequence kernels run their recurrent GEMMs: as register tiles
    (rnn_kernels.lstm_*_tiles; skipped where tiles.TILE is None), or through the GEMM path's
    single-threaded sgemm called in each task (gemm.kernel_gemm_pointers): MKL's or OpenBLAS's
    (skipped where not installed)."""
    from neonlike.backends.cpu import gemm as cpu_gemm
    from neonlike.backends.cpu import openblas
    from neonlike.backends.cpu import rnn as cpu_rnn
    if request.param == "tiles":
        if cpu_rnn._kernels() is None:
            pytest.skip("the fused sequence needs numba")
        from neonlike.backends.cpu import tiles
        if tiles.TILE is None:
            pytest.skip("no register tile for this host")
        monkeypatch.setattr(cpu_rnn, "TILES", True)
        yield request.param
        return
    monkeypatch.setattr(cpu_rnn, "TILES", False)
    if request.param == "openblas" and not openblas.available():
        pytest.skip("scipy-openblas32 is not installed")
    try:
        previous = cpu_gemm.set_backend(request.param)
    except RuntimeError as e:
        pytest.skip(f"{request.param} unavailable: {e}")
    want = openblas.library().pointers if request.param == "openblas" else \
        cpu_gemm.mkl_kernel_pointers()
    assert cpu_gemm.kernel_gemm_pointers() is want
    import platform
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    assert cpu_gemm.kernel_gemm_call_macs() == \
        (openblas.SMALL_MACS if request.param == "openblas" and x86 else 0)
    yield request.param
    cpu_gemm.set_backend(previous)


@pytest.mark.parametrize("dims", [(6, 16, 3), (5, 21, 53), (5, 21, 53, "units")],
                         ids=["16x3", "21x53", "21x53-units"])
@pytest.mark.parametrize("call_macs", [None, 150, 500])
@pytest.mark.parametrize("steps", [1, 6])
@pytest.mark.parametrize("cls", [LSTM, BiLSTM])
def test_float32_lstm_runs_its_steps_as_one_kernel(monkeypatch, cls, steps, kernel_blas,
                                                    call_macs, dims):
    """float32 LSTM / BiLSTM (the backward half's steps run right to left) take the CPU's fused
    sequence kernels, with a starting state and carried state, on MKL's and OpenBLAS's sgemm;
    values and gradients match the float64 layer (the per-step path, checked against central
    differences above) to float32 precision, the starting state's errors included, and the
    kernels are the ones that ran. dims (inputs, units, batch): a batch of 3 takes the tile
    kernels' unit split, one of 53 their batch split (on AVX-512 and 2 threads: shares of 16 and
    37 columns: one-vector tiles and 5 columns in a loop; 21 units: a 16-row tall tile and
    single rows), or, forced, their unit split (a task's 10 or 11 units: an 8-row panel and
    single rows; 53 columns: a 32-column tile, a 16-column one and 5 in a loop). call_macs:
    the bound on a GEMM call's size (the library's own, or small enough that the forward's
    (150: 3 rows, batch 3 by 16 units) or the backward's (500: 2 rows, batch 3 by 64) calls are
    cut into several)."""
    from neonlike.backends.cpu import rnn as cpu_rnn
    from neonlike.backends.cpu import gemm as cpu_gemm
    if cpu_rnn._kernels() is None or (kernel_blas != "tiles" and
                                      cpu_gemm.kernel_gemm_pointers() is None):
        pytest.skip("the fused sequence needs numba and MKL or OpenBLAS")
    if len(dims) > 3 and kernel_blas != "tiles":
        pytest.skip("the unit split of the tile kernels")
    if call_macs is not None and (kernel_blas == "tiles" or dims[2] != 3):
        pytest.skip("no GEMM calls to bound" if kernel_blas == "tiles" else
                    "the bounds are set for the batch of 3")
    if call_macs is not None:
        monkeypatch.setattr(cpu_gemm, "kernel_gemm_call_macs", lambda: call_macs)
    ran = []
    plan = cpu_rnn._sequence_plan

    def spy(*args):
        found = plan(*args)
        ran.append((args[2][0], found is not None))
        assert found is None or (found[1] is None) == (kernel_blas == "tiles")
        return found
    monkeypatch.setattr(cpu_rnn, "_sequence_plan", spy)
    kernels = []
    if kernel_blas == "tiles":       # which tile kernels ran: the batch split where it fits
        kernels = spy_kernels(monkeypatch, cpu_rnn._kernels(),
                              ("lstm_fprop_tiles", "lstm_bprop_tiles", "lstm_fprop_cols",
                               "lstm_bprop_cols"))
    if len(dims) > 3:
        monkeypatch.setattr(cpu_rnn, "_by_columns", lambda N, tasks: False)
    rng = np.random.default_rng(7)
    nin, nout, n = dims[:3]
    layers = {}
    for dt in (np.float64, np.float32):
        be = gen_backend("cpu", datatype=dt, batch_size=n, rng_seed=0)
        layer = cls(nout, Gaussian(scale=0.4), activation=Tanh(), gate_activation=Logistic())
        layers[dt] = (be, build(layer, nin=nin, steps=steps))
    be64, l64 = layers[np.float64]
    be32, l32 = layers[np.float32]
    W = rng.normal(scale=0.4, size=l64.W.shape)   # the biases too (they start at zero)
    l64.W.set(W)
    l32.W.set(W.astype(np.float32))
    x = rng.normal(size=(nin, steps * n))
    R = rng.normal(size=(l64.outputs.shape[0], steps * n))
    for _ in range(2):          # the second call starts from the carried state
        out64 = l64.fprop(be64.array(x)).get()
        ran.clear()
        out32 = l32.fprop(be32.array(x.astype(np.float32))).get()
        assert ran == [("ifog", True)] * (2 if cls is BiLSTM else 1)
        np.testing.assert_allclose(out32, out64, rtol=1e-4, atol=1e-5)
        dx64 = l64.bprop(be64.array(R)).get()
        ran.clear()
        dx32 = l32.bprop(be32.array(R.astype(np.float32))).get()
        assert ran == [("dh", True)] * (2 if cls is BiLSTM else 1)
        np.testing.assert_allclose(dx32, dx64, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(l32.dW.get(), l64.dW.get(), rtol=1e-4, atol=1e-4)
        for err in (("final_hidden_error", "final_cell_error") if cls is LSTM else
                    ("final_hidden_error_f", "final_cell_error_f", "final_hidden_error_b",
                     "final_cell_error_b")):    # the starting state's errors, from the kernel
            np.testing.assert_allclose(getattr(l32, err).get(), getattr(l64, err).get(),
                                       rtol=1e-4, atol=1e-5, err_msg=err)
    if kernel_blas == "tiles":
        import numba
        from neonlike.backends.cpu import tiles
        split = "cols" if n // tiles.WIDTH >= min(numba.get_num_threads(), nout) and \
            len(dims) == 3 else "tiles"
        assert set(kernels) == {f"lstm_fprop_{split}", f"lstm_bprop_{split}"}
    if cls is LSTM:
        h0 = rng.normal(size=(nout, n))
        out64 = l64.fprop(be64.array(x), init_state=be64.array(h0)).get()
        out32 = l32.fprop(be32.array(x.astype(np.float32)),
                          init_state=be32.array(h0.astype(np.float32))).get()
        np.testing.assert_allclose(out32, out64, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- the whole-sequence products
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("nin, nout, n, steps", [(21, 53, 5, 3), (64, 40, 32, 4), (3, 2, 1, 1)])
def test_rnn_products_match_float64(monkeypatch, dt, nin, nout, n, steps):
    """compound_rnn_input (W @ x + b), compound_rnn_weight_grads (delta @ x.T, and delta
    against the step before: h0 for the first) and compound_rnn_input_grads (alpha W.T @ delta
    + beta out) against float64 numpy; on the CPU in float32 as tiles.gemm products where the
    host has a tile (five: the input's, the two gradients', the input errors' at alpha 1), else
    and in float64 the generic op; a strided x takes the generic op too."""
    from neonlike.backends.cpu import rnn as cpu_rnn
    from neonlike.backends.cpu import tiles
    ran = []
    gemm = tiles.gemm
    monkeypatch.setattr(tiles, "gemm", lambda *a: (ran.append(a[:3]), gemm(*a)))
    be = gen_backend("cpu", datatype=dt, batch_size=n, rng_seed=0)
    rng = np.random.default_rng(nin + nout + n)
    rows, cols = 4 * nout, steps * n
    W, x, b = rng.normal(size=(rows, nin)), rng.normal(size=(nin, cols)), rng.normal(size=(rows, 1))
    D, h, h0 = rng.normal(size=(rows, cols)), rng.normal(size=(nout, cols)), \
        rng.normal(size=(nout, n))
    out, dWi, dWr = be.empty((rows, cols)), be.empty((rows, nin)), be.empty((rows, nout))
    be.compound_rnn_input(be.array(W), be.array(x), be.array(b), out)
    be.compound_rnn_weight_grads(be.array(D), be.array(x), be.array(h), be.array(h0), n, dWi,
                                 dWr)
    dx = be.array(rng.normal(size=(nin, cols)))
    old = dx.get().astype(np.float64)
    be.compound_rnn_input_grads(be.array(W), be.array(D), dx)
    np.testing.assert_allclose(dx.get(), W.T @ D, rtol=1e-4, atol=1e-4)
    be.compound_rnn_input_grads(be.array(W), be.array(D), dx, beta=0.5)
    np.testing.assert_allclose(dx.get(), W.T @ D * 1.5, rtol=1e-4, atol=1e-4)
    dx[:] = be.array(old)
    be.compound_rnn_input_grads(be.array(W), be.array(D), dx, alpha=2.0, beta=-1.0)
    np.testing.assert_allclose(dx.get(), 2 * W.T @ D - old, rtol=1e-4, atol=1e-4)
    h_prev = np.concatenate([h0, h[:, :-n]], axis=1)
    tol = dict(rtol=1e-4, atol=1e-4) if dt == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.get(), W @ x + b, **tol)
    np.testing.assert_allclose(dWi.get(), D @ x.T, **tol)
    np.testing.assert_allclose(dWr.get(), D @ h_prev.T, **tol)
    tiled = dt == np.float32 and cpu_rnn._tiles()
    assert ran == ([(rows, cols, nin), (rows, nin, cols), (rows, nout, cols),
                    (nin, cols, rows), (nin, cols, rows)] if tiled else [])
    ran.clear()
    flat = be.array(np.concatenate([D.reshape(-1), np.zeros(nin * cols)]))
    d_view = flat[:rows * cols].reshape((rows, cols))      # an output over its own input: the
    o_view = flat[cols:cols + nin * cols].reshape((nin, cols))   # generic op (through a temp)
    be.compound_rnn_input_grads(be.array(W), d_view, o_view)
    assert ran == []
    np.testing.assert_allclose(o_view.get(), W.T @ D, rtol=1e-4, atol=1e-4)
    wide = be.array(np.concatenate([x, x], axis=1))
    be.compound_rnn_input(be.array(W), wide[:, ::2] if cols > 1 else wide[:, :1], be.array(b),
                          out)
    assert ran == []
    np.testing.assert_allclose(out.get(), W @ np.concatenate([x, x], axis=1)[:, ::2][:, :cols]
                               + b, **tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("rows, nout, n, steps", [(12, 5, 3, 4), (8, 4, 2, 1)])
def test_rnn_recur_grad_matches_float64(dt, reverse, rows, nout, n, steps):
    """compound_rnn_recur_grad: delta's steps against the step before in the direction of
    travel (h0 for the first: step 0 forward, the last step where `reverse`) against float64
    numpy; what the forward layers and both halves of the bidirectional ones call."""
    be = gen_backend("cpu", datatype=dt, batch_size=n, rng_seed=0)
    rng = np.random.default_rng(rows + steps + reverse)
    D, h, h0 = rng.normal(size=(rows, steps * n)), rng.normal(size=(nout, steps * n)), \
        rng.normal(size=(nout, n))
    dW = be.array(rng.normal(size=(rows, nout)))          # overwritten, not accumulated
    be.compound_rnn_recur_grad(dW, be.array(D), be.array(h), be.array(h0), n, reverse=reverse)
    h_prev = np.concatenate([h[:, n:], h0], axis=1) if reverse else \
        np.concatenate([h0, h[:, :-n]], axis=1)
    want = sum(D[:, t * n:(t + 1) * n] @ h_prev[:, t * n:(t + 1) * n].T for t in range(steps))
    tol = dict(rtol=1e-4, atol=1e-4) if dt == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dW.get(), want, **tol)


# ---------------------------------------------------------------- the plain layer's kernels
def _relu(slope):
    return (lambda z: np.maximum(z, 0) + slope * np.minimum(z, 0),
            lambda y: (y > 0) + slope * (y < 0))


PLAIN_ACTS = {"tanh": (lambda: Tanh(), np.tanh, lambda y: 1 - y * y),
              "logistic": (lambda: Logistic(), sig, lambda y: y * (1 - y)),
              "rectlin": (lambda: Rectlin(), *_relu(0.0)),
              "leaky": (lambda: Leaky(0.1), *_relu(0.1)),
              "identity": (lambda: Identity(), lambda z: z, lambda y: np.ones_like(y))}


def ref_plain(x, R, Wi, Wr, b, h0, n, act, dact):
    """float64 outputs and, for the output errors R, the errors of x, of W_input, W_recur, b
    and of the starting state, of h[t] = act(Wi x[t] + Wr h[t-1] + b)."""
    xs, Rs = seq_n(x, n), seq_n(R, n)
    hs, h = [], h0
    for xt in xs:
        h = act(Wi @ xt + Wr @ h + b)
        hs.append(h)
    dWi, dWr, db = np.zeros_like(Wi), np.zeros_like(Wr), np.zeros_like(b)
    dxs, d = [None] * len(xs), None
    for t in reversed(range(len(xs))):
        d = dact(hs[t]) * (Rs[t] + (Wr.T @ d if d is not None else 0))
        dxs[t] = Wi.T @ d
        dWi += d @ xs[t].T
        dWr += d @ (hs[t - 1] if t else h0).T
        db += d.sum(axis=1, keepdims=True)
    return flat_n(hs), flat_n(dxs), dWi, dWr, db, Wr.T @ d


def seq_n(x, n):
    return list(x.reshape(x.shape[0], -1, n).transpose(1, 0, 2))


def flat_n(steps):
    return np.array(steps).transpose(1, 0, 2).reshape(steps[0].shape[0], -1)


def spy_kernels(monkeypatch, module, names):
    """The names (of `names`) of module's kernels that run, in order (each still runs)."""
    ran = []
    for name in names:
        def record(*args, _name=name, _run=getattr(module, name)):
            ran.append(_name)
            return _run(*args)
        monkeypatch.setattr(module, name, record)
    return ran


def spy_plain_kernels(monkeypatch):
    """The names of the plain recurrent kernels that run, in order."""
    from neonlike.backends.cpu import rnn as cpu_rnn
    k = cpu_rnn._plain_kernels()
    if k is None:
        pytest.skip("the plain recurrent kernels need numba and a register tile")
    return spy_kernels(monkeypatch, k, ("rnn_fprop_cols", "rnn_fprop_tiles", "rnn_bprop_cols",
                                        "rnn_bprop_tiles"))


@pytest.mark.parametrize("act", list(PLAIN_ACTS))
@pytest.mark.parametrize("dims", [(20, 37, 40, 5), (6, 19, 8, 3), (6, 19, 40, 3, "units"),
                                  (5, 17, 16, 1), (8, 21, 3, 4)])
def test_float32_recurrent_runs_its_steps_as_one_kernel(monkeypatch, act, dims):
    """A float32 Recurrent layer runs its steps as one kernel each way (plain_rnn_kernels: the
    batch split where each task gets a vector width of columns, else, or forced, the unit
    split), for each activation the kernels know; outputs, input errors, weight gradients and
    the starting state's error against float64 numpy, over two passes (the second from the
    carried state). dims (inputs, units, batch, steps): shares of 16 and 24 columns (a tall
    tile, then 8 columns as masked tiles) and 37 units (two 16-row tiles and 5 rows); a batch
    of 8 (with 2 threads the unit split: 10 and 9 units a task, an 8-row panel and single rows,
    masked); the unit split forced at 40 columns (a 32-column tile and 8 masked); one step; a
    batch of 3, under a quarter vector on AVX-512: the generic steps."""
    from neonlike.backends.cpu import rnn as cpu_rnn
    from neonlike.backends.cpu import tiles
    ran = spy_plain_kernels(monkeypatch)
    if len(dims) > 4:
        monkeypatch.setattr(cpu_rnn, "_by_columns", lambda N, tasks: False)
    nin, nout, n, steps = dims[:4]
    make, f, df = PLAIN_ACTS[act]
    be = gen_backend("cpu", datatype=np.float32, batch_size=n, rng_seed=0)
    layer = build(Recurrent(nout, Gaussian(scale=0.3), activation=make()), nin=nin, steps=steps)
    rng = np.random.default_rng(nin + nout)
    Wi, Wr = rng.normal(scale=0.3, size=(nout, nin)), rng.normal(scale=0.15, size=(nout, nout))
    b = rng.normal(scale=0.3, size=(nout, 1))
    for name, value in (("W_input", Wi), ("W_recur", Wr), ("b", b)):
        getattr(layer, name)[:] = be.array(value.astype(np.float32))
    x = rng.normal(size=(nin, steps * n))
    xt = be.array(x.astype(np.float32))
    h0 = np.zeros((nout, n))
    kernels = n >= tiles.WIDTH // 4
    split = "cols" if cpu_rnn._by_columns(n, cpu_rnn._tasks(nout)) else "tiles"
    for _ in range(2):      # the same input tensor: the second pass starts from the last state
        R = rng.normal(size=(nout, steps * n))
        want = ref_plain(x, R, Wi, Wr, b, h0, n, f, df)
        ran.clear()
        out = layer.fprop(xt).get()
        dx = layer.bprop(be.array(R.astype(np.float32))).get()
        assert ran == ([f"rnn_fprop_{split}", f"rnn_bprop_{split}"] if kernels else [])
        got = (out, dx, layer.dW_input.get(), layer.dW_recur.get(), layer.db.get(),
               layer.final_hidden_error.get())
        for name, g, w in zip(("h", "dx", "dW_input", "dW_recur", "db", "h0 error"), got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5, err_msg=name)
        h0 = want[0][:, -n:]


def test_float32_recurrent_edge_values_match_the_generic_steps(monkeypatch):
    """Inputs with 0, tiny, huge, inf and nan: the kernels give what the generic per-step ops
    give in float32 (nan where they have nan), for each activation."""
    from neonlike.backends.cpu import rnn as cpu_rnn
    nin, nout, n, steps = 6, 9, 32, 3
    rng = np.random.default_rng(3)
    x = rng.normal(size=(nin, steps * n))
    edges = [0.0, 1e-40, 1e30, -1e30, np.inf, -np.inf, np.nan]
    for k, v in enumerate(edges):
        x[k % nin, 5 * k + 1] = v
    R = rng.normal(size=(nout, steps * n))
    W = rng.normal(scale=0.3, size=(nin + nout + 1, nout))
    for act, (make, _, _) in PLAIN_ACTS.items():
        got = []
        ran = spy_plain_kernels(monkeypatch)
        for kernels in (True, False):
            if not kernels:
                split = "cols" if cpu_rnn._by_columns(n, cpu_rnn._tasks(nout)) else "tiles"
                assert ran == [f"rnn_fprop_{split}", f"rnn_bprop_{split}"], act
                monkeypatch.setattr(cpu_rnn, "_plain_kernels", lambda: None)
            be = gen_backend("cpu", datatype=np.float32, batch_size=n, rng_seed=0)
            layer = build(Recurrent(nout, Gaussian(), activation=make()), nin=nin, steps=steps)
            layer.W[:] = be.array(W.astype(np.float32))
            with np.errstate(invalid="ignore", over="ignore"):
                out = layer.fprop(be.array(x.astype(np.float32))).get()
                dx = layer.bprop(be.array(R.astype(np.float32))).get()
            got.append((out, dx, layer.dW.get(), layer.final_hidden_error.get()))
        assert len(ran) == 2, act               # (the generic steps ran no kernel)
        monkeypatch.undo()
        for name, a, b in zip(("h", "dx", "dW", "h0 error"), *got):
            assert np.array_equal(np.isnan(a), np.isnan(b)), (act, name)
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"{act} {name}")


@pytest.mark.parametrize("n", [32, 8])
def test_float32_birnn_runs_its_halves_as_one_kernel_each(monkeypatch, n):
    """BiRNN: each half's steps take the kernels, the backward half's walking the step views
    right to left (a batch of 32: the batch split on AVX-512 and 2 threads; of 8: the unit
    split, masked); values and gradients match the float64 layer (checked against references
    and central differences above)."""
    from neonlike.backends.cpu import rnn as cpu_rnn
    ran = spy_plain_kernels(monkeypatch)
    nin, nout, steps = 7, 11, 4
    rng = np.random.default_rng(5)
    layers = {}
    for dt in (np.float64, np.float32):
        be = gen_backend("cpu", datatype=dt, batch_size=n, rng_seed=0)
        layers[dt] = (be, build(BiRNN(nout, Gaussian(scale=0.4), activation=Tanh()), nin=nin,
                                steps=steps))
    (be64, l64), (be32, l32) = layers[np.float64], layers[np.float32]
    W = rng.normal(scale=0.4, size=l64.W.shape)
    l64.W.set(W)
    l32.W.set(W.astype(np.float32))
    x, R = rng.normal(size=(nin, steps * n)), rng.normal(size=(2 * nout, steps * n))
    out64 = l64.fprop(be64.array(x)).get()
    ran.clear()
    out32 = l32.fprop(be32.array(x.astype(np.float32))).get()
    dx64 = l64.bprop(be64.array(R)).get()
    dx32 = l32.bprop(be32.array(R.astype(np.float32))).get()
    split = "cols" if cpu_rnn._by_columns(n, cpu_rnn._tasks(nout)) else "tiles"
    assert ran == [f"rnn_fprop_{split}"] * 2 + [f"rnn_bprop_{split}"] * 2
    np.testing.assert_allclose(out32, out64, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dx32, dx64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(l32.dW.get(), l64.dW.get(), rtol=1e-4, atol=1e-4)
    for err in ("final_hidden_error_f", "final_hidden_error_b"):
        np.testing.assert_allclose(getattr(l32, err).get(), getattr(l64, err).get(),
                                   rtol=1e-4, atol=1e-5, err_msg=err)


@pytest.mark.parametrize("dims", [(20, 37, 40, 5), (6, 16, 32, 1), (8, 21, 3, 4)])
def test_float32_gru_runs_its_steps_as_one_kernel(monkeypatch, dims):
    """A float32 GRU runs its steps as one kernel each way (gru_kernels, the tasks sharing the
    batch: as many as it holds vector widths, at least one); values, input errors, weight
    gradients, gate errors and the starting state's error match the float64 layer (checked
    against the reference and central differences above) over two passes (the second from the
    carried state). dims (inputs, units, batch, steps): shares of 16 and 24 columns and 37
    units (two 16-row tiles and 5 rows); one step of 16 units; a batch of 3 (one task, its
    columns in a loop)."""
    from neonlike.backends.cpu import rnn as cpu_rnn
    k = cpu_rnn._gru_kernels()
    if k is None:
        pytest.skip("the GRU kernels need numba and a register tile")
    ran = spy_kernels(monkeypatch, k, ("gru_fprop_cols", "gru_bprop_cols"))
    nin, nout, n, steps = dims
    rng = np.random.default_rng(nin + nout + n)
    layers = {}
    for dt in (np.float64, np.float32):
        be = gen_backend("cpu", datatype=dt, batch_size=n, rng_seed=0)
        layer = GRU(nout, Gaussian(scale=0.3), activation=Tanh(), gate_activation=Logistic())
        layers[dt] = (be, build(layer, nin=nin, steps=steps))
    (be64, l64), (be32, l32) = layers[np.float64], layers[np.float32]
    W = rng.normal(scale=0.3, size=l64.W.shape)       # the biases too (they start at zero)
    l64.W.set(W)
    l32.W.set(W.astype(np.float32))
    x = rng.normal(size=(nin, steps * n))
    x64, x32 = be64.array(x), be32.array(x.astype(np.float32))
    for _ in range(2):      # the same input tensors: the second pass starts from the last state
        R = rng.normal(size=(nout, steps * n))
        out64 = l64.fprop(x64).get()
        dx64 = l64.bprop(be64.array(R)).get()
        ran.clear()
        out32 = l32.fprop(x32).get()
        dx32 = l32.bprop(be32.array(R.astype(np.float32))).get()
        assert ran == ["gru_fprop_cols", "gru_bprop_cols"]
        np.testing.assert_allclose(out32, out64, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(dx32, dx64, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(l32.dW.get(), l64.dW.get(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(l32.final_hidden_error.get(), l64.final_hidden_error.get(),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(l32.rzhcan_delta_buffer.get(),
                                   l64.rzhcan_delta_buffer.get(), rtol=1e-4, atol=1e-5)
