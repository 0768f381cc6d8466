"""neon names added for its scripts and tests (issue 17): the logger, transforms, costs and
metrics, each against numpy float64 references and, where it has a gradient, central
differences."""
import logging

import numpy as np
import pytest

import neonlike
from neonlike import NervanaObject
from neonlike.backends import gen_backend
from neonlike.transforms import BLEUScore, GANCost, PixelwiseSoftmax, PrecisionRecall, Sign

RNG = np.random.default_rng(3)


@pytest.fixture
def be():
    be = gen_backend("cpu", datatype=np.float64)
    NervanaObject.be = be
    return be


def run(be, tree, shape):
    out = be.empty(shape)
    out[:] = tree
    return out.get()


def test_logger_displays_at_neons_display_level(caplog):
    from neonlike import logger
    assert logger is neonlike.logger and logger.name == "neonlike"
    with caplog.at_level(logging.ERROR, logger="neonlike"):
        logger.display("epsilon %e", 1e-3)
    assert [(r.levelno, r.levelname, r.getMessage()) for r in caplog.records] == \
        [(41, "DISPLAY", "epsilon 1.000000e-03")]
    assert not hasattr(logging.getLogger("elsewhere"), "display")   # no global patch


def test_sign_and_its_straight_through_gradient(be):
    x = np.array([[-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0]]).T
    sign = Sign()
    y = run(be, sign(be.array(x)), x.shape)
    np.testing.assert_array_equal(y, np.where(x >= 0, 1.0, -1.0))
    np.testing.assert_array_equal(run(be, sign.bprop(be.array(y)), x.shape),
                                  (np.abs(x) <= 1).astype(float))


def test_binarize_deterministic_and_stochastic(be):
    x = np.linspace(-1.5, 1.5, 7).reshape(7, 1)
    out = be.empty((7, 1))
    be.binarize(be.array(x), out, stochastic=False)
    np.testing.assert_array_equal(out.get(), np.where(x >= 0, 1.0, -1.0))
    p = np.full((4000, 1), 0.5)                      # +1 with probability (0.5 + 1) / 2
    draws = be.empty((4000, 1))
    be.binarize(be.array(p), draws)
    assert set(np.unique(draws.get())) == {-1.0, 1.0}
    assert abs((draws.get() == 1).mean() - 0.75) < 0.03


def test_pixelwise_softmax_normalises_each_pixel_over_the_channels(be):
    c, pixels, n = 3, 4, 2
    x = RNG.normal(0, 2, (c * pixels, n))
    X = be.array(x)
    PixelwiseSoftmax(c)(X)                            # in place, as neon
    v = x.reshape(c, -1)
    want = np.exp(v - v.max(0)) / np.exp(v - v.max(0)).sum(0)
    np.testing.assert_allclose(X.get(), want.reshape(x.shape), rtol=1e-12)
    assert PixelwiseSoftmax(c).bprop(X) == 1.0


def numeric(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += h
        lo[i] -= h
        g[i] = (f(hi) - f(lo)) / (2 * h)
    return g


@pytest.mark.parametrize("func", GANCost.FUNCS)
def test_gan_costs_and_their_gradients(be, func):
    yd, yn = RNG.uniform(0.1, 0.9, (1, 6)), RNG.uniform(0.1, 0.9, (1, 6))
    cost = GANCost(scale=1.0, func=func)
    logs = {"dis_data": -np.log(yd), "dis_noise": -np.log(1 - yn),
            "gen": -np.log(yn) if func == "modified" else np.log(1 - yn)}
    if func == "wasserstein":
        logs = {"dis_data": yd, "dis_noise": -yn, "gen": yn}
    logs["dis"] = logs["dis_data"] + logs["dis_noise"]
    for kind, want in logs.items():
        got = run(be, cost(be.array(yd), be.array(yn), kind), (1, 6))
        np.testing.assert_allclose(got, want, rtol=1e-12)

    def total(kind, data, noise):
        return run(be, cost(be.array(data), be.array(noise), kind), (1, 6)).sum()
    checks = [(cost.bprop_data(be.array(yd)), numeric(lambda v: total("dis", v, yn), yd)),
              (cost.bprop_noise(be.array(yn)), numeric(lambda v: total("dis", yd, v), yn)),
              (cost.bprop_generator(be.array(yn)), numeric(lambda v: total("gen", yd, v), yn))]
    for tree, want in checks:
        np.testing.assert_allclose(run(be, tree, (1, 6)), want, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="cost_type must be one of"):
        cost(be.array(yd), be.array(yn), "both")
    with pytest.raises(ValueError, match="func must be one of"):
        GANCost(func="hinge")


def test_precision_recall_against_numpy(be):
    k, n = 4, 12
    t = np.eye(k)[:, RNG.integers(0, k, n)]
    scores = RNG.uniform(0, 1, (k, n))
    y = np.eye(k)[:, scores.argmax(0)]
    tp, pred, actual = (y * t).sum(1), y.sum(1), t.sum(1)
    want = np.array([(tp / (pred + 1e-6)).mean(), (tp / (actual + 1e-6)).mean()])
    np.testing.assert_allclose(PrecisionRecall(k)(be.array(y), be.array(t)), want, rtol=1e-12)
    Y = be.array(scores)
    np.testing.assert_allclose(PrecisionRecall(k, binarize=True)(Y, be.array(t)), want,
                               rtol=1e-12)
    np.testing.assert_array_equal(Y.get(), y)         # binarized in place
    with pytest.raises(ValueError, match="made for 3 classes, the outputs have 4"):
        PrecisionRecall(3)(be.array(y), be.array(t))


def test_bleu_score_by_hand():
    bleu = BLEUScore()
    assert bleu(["the cat sat"], [["the cat sat"]], N=3) == pytest.approx(100, rel=1e-6)
    # candidate 'the the cat': unigrams: the x2 (clipped to 1), cat 1 -> 2/3; bigrams:
    # 'the the' 0, 'the cat' 1 -> 1/2
    bleu(["the the cat"], [["the cat sat", "a cat"]], N=2)
    np.testing.assert_allclose(bleu.bleu_n, [100 * 2 / 3, 100 * np.sqrt(2 / 3 * 1 / 2)],
                               rtol=1e-6)
    # an unknown word never matches; the brevity penalty takes the closest reference (3 words)
    bleu(["<unk> cat"], [["the cat sat", "a cat on the mat"]], N=1, brevity_penalty=True)
    np.testing.assert_allclose(bleu.bleu_n, [100 * np.exp(1 - 3 / 2) * 0.5], rtol=1e-6)
    with pytest.raises(ValueError, match="2 sentences but 1 lists of references"):
        bleu(["a", "b"], [["a"]])


def test_array_identity_and_orthonormal_initializers(be):
    from neonlike.initializers import Array, IdentityInit, Orthonormal
    w = be.empty((3, 4))
    vals = RNG.normal(size=(3, 4))
    Array(vals).fill(w)
    np.testing.assert_array_equal(w.get(), vals)
    src = be.array(vals * 2)
    init = Array(src)
    init.fill(w)
    np.testing.assert_array_equal(w.get(), vals * 2)
    assert isinstance(init.get_description()["config"]["val"], np.ndarray)
    with pytest.raises(ValueError, match=r"the values have shape \(2, 2\), the parameter \(3, 4\)"):
        Array(np.zeros((2, 2))).fill(w)
    for shape in ((3, 4), (4, 3)):
        w = be.empty(shape)
        IdentityInit().fill(w)
        np.testing.assert_array_equal(w.get(), np.eye(*shape))
        Orthonormal(scale=1.5).fill(w)
        q = w.get() / 1.5
        small = q.T @ q if shape[0] > shape[1] else q @ q.T
        np.testing.assert_allclose(small, np.eye(3), atol=1e-12)


def test_shift_rounds_to_powers_of_two(be):
    x, s = RNG.normal(size=(4, 3)), RNG.normal(0, 3, (4, 3))
    got = be.shift(be.array(x), be.array(s)).get()
    np.testing.assert_allclose(got, x * np.sign(s) * 2.0 ** np.rint(np.log2(np.abs(s))))
    np.testing.assert_allclose(be.shift(be.array(x), -2, value=False).get(), x / 4)
    assert be.shift(0.1, -3, value=False).get().item() == pytest.approx(0.1 / 8)


def test_schedules():
    from neonlike.optimizers import ExpSchedule, PolySchedule, PowerSchedule, ShiftSchedule
    epochs = np.arange(8)
    assert [PowerSchedule(2, 0.5).get_learning_rate(0.1, e) for e in epochs] == \
        pytest.approx(0.1 * 0.5 ** (epochs // 2))
    assert [ExpSchedule(0.3).get_learning_rate(0.1, e) for e in epochs] == \
        pytest.approx(0.1 / (1 + 0.3 * epochs))
    assert [PolySchedule(8, 2.0).get_learning_rate(0.1, e) for e in epochs] == \
        pytest.approx(0.1 * (1 - epochs / 8) ** 2)
    assert [ShiftSchedule(3, 2).get_learning_rate(1.0, e) for e in epochs] == \
        pytest.approx(2.0 ** (-2 * (epochs // 3)))
    with pytest.raises(ValueError, match="step_config must be an int"):
        PowerSchedule([2, 4], 0.5)


class OneParam:
    """A layer whose get_params gives one ((W, dW), states) tuple, as neon allowed."""

    def __init__(self, be, w, g, name="one"):
        self.W, self.dW, self.states, self.name = be.array(w), be.array(g), [], name

    def get_params(self):
        return (self.W, self.dW), self.states


def test_shift_adamax_against_numpy_and_a_single_tuple_layer(be):
    from neonlike.optimizers import ShiftAdaMax
    be.bsz = 8
    w, g = RNG.uniform(-1, 1, (5, 4)), RNG.normal(0, 0.1, (5, 4))
    layer = OneParam(be, w, g)
    opt = ShiftAdaMax(learning_rate=0.01)
    m, v = np.zeros_like(w), np.zeros_like(w)

    def shift(a, s):
        return a * np.sign(s) * 2.0 ** np.rint(np.log2(np.maximum(np.abs(s), np.exp(-50))))
    for epoch in range(3):
        opt.optimize([layer], epoch)
        gb = g / 8
        m = 0.9 * m + 0.1 * gb
        v = np.maximum(0.999 * v, np.abs(gb))
        w = np.clip(w - shift(shift(m, 1 / (v + 1e-8)), 0.01 / (1 - 0.9 ** (epoch + 1))), -1, 1)
        np.testing.assert_allclose(layer.W.get(), w, rtol=1e-12)


def test_multi_optimizer_map_list(be):
    from neonlike.optimizers import GradientDescentMomentum, MultiOptimizer
    be.bsz = 1
    a, b = GradientDescentMomentum(0.1), GradientDescentMomentum(0.2)
    layers = [OneParam(be, np.ones((2, 2)), np.ones((2, 2)), name=n) for n in ("x", "y", "z")]
    opt = MultiOptimizer({"default": a, "y": b})
    opt.optimize(layers, 0)
    assert opt.map_list == {a: [layers[0], layers[2]], b: [layers[1]]}
    np.testing.assert_allclose([lay.W.get()[0, 0] for lay in layers], [0.9, 0.8, 0.9])


def test_nms_keeps_the_best_of_overlapping_boxes(be):
    dets = np.array([[0, 0, 9, 9, 0.9],       # kept
                     [1, 1, 10, 10, 0.8],     # IoU with the first 81/119 = 0.68: dropped at 0.5
                     [20, 20, 29, 29, 0.7],   # apart: kept
                     [0, 0, 0, 0, 0.0],       # score 0: ignored
                     [0, 0, 9, 4, 0.6]])      # inside the first: IoU 0.5, kept at <= 0.5
    assert be.nms(be.array(dets), 0.5) == [0, 2, 3]
    assert be.nms(be.array(dets), 0.7) == [0, 1, 2, 3]
    normalized = dets[:, :4] / 30
    assert be.nms(np.hstack([normalized, dets[:, 4:]]), 0.5, normalized=True) == [0, 2, 3]
    with pytest.raises(ValueError, match=r"nms: detections must be \(count, 5\)"):
        be.nms(np.zeros((3, 4)), 0.5)


def test_timing_marks(be):
    tic, toc = be.init_mark(), be.init_mark()
    be.record_mark(tic)
    sum(range(10000))
    be.record_mark(toc)
    be.synchronize_mark(toc)
    assert be.get_time(tic, toc) > 0


def test_check_gpu_without_a_gpu_says_zero():
    from neonlike.backends.util import check_gpu
    import importlib.util
    if importlib.util.find_spec("pycuda") is not None:
        pytest.skip("pycuda is installed: the count depends on the machine")
    assert check_gpu.get_compute_capability(0) == 0.0 and check_gpu.get_device_count() == 0


@pytest.fixture
def be4():
    be = gen_backend("cpu", batch_size=4)
    NervanaObject.be = be
    return be


def test_text_streams_time_major_batches(be4, tmp_path):
    from neonlike.data import Text
    text = "the quick brown fox jumps over the lazy dog, again and again and again."
    path = tmp_path / "t.txt"
    path.write_text(text)
    train_path, valid_path = Text.create_valid_file(str(path), valid_split=0.25)
    assert open(train_path).read() + open(valid_path).read() == text
    data = Text(3, str(path))
    assert data.nbatches == len(text) // 12 and data.ndata == data.nbatches * 4
    for i, (X, y) in enumerate(data):
        ids, nxt = X.get().argmax(0), y.get().argmax(0)
        for b in range(4):                    # stream b continues across batches
            start = b * 3 * data.nbatches + i * 3
            assert "".join(data.index_to_token[k] for k in ids[b::4]) == text[start:start + 3]
            want = (text[:data.nbatches * 12] * 2)[start + 1:start + 4]
            assert "".join(data.index_to_token[k] for k in nxt[b::4]) == want
    with pytest.raises(ValueError, match="the given vocab lacks"):
        Text(3, str(path), vocab=["a"])


def test_ptb_reads_local_files_with_the_training_vocab(be4, tmp_path):
    from neonlike.data import PTB
    for phase, words in (("train", " a b c d \n" * 8), ("valid", " a b \n" * 8),
                         ("test", " c d \n" * 8)):         # PTB lines: " words \n"
        (tmp_path / f"ptb.{phase}.txt").write_text(words)
    ptb = PTB(2, path=str(tmp_path), tokenizer="newline_tokenizer")
    assert ptb.train_iter.vocab == ptb.valid_iter.vocab == ["<eos>", "a", "b", "c", "d"]
    with pytest.raises(FileNotFoundError, match="ptb.train.txt"):
        PTB(2, path=str(tmp_path / "nowhere")).train_iter
    with pytest.raises(ValueError, match="no tokenizer named 'words'"):
        PTB(2, tokenizer="words")


def test_array_iterator_sequence_labels(be4):
    from neonlike.data import ArrayIterator
    x = np.arange(30.0).reshape(10, 3)
    y = np.arange(20).reshape(10, 2) % 5
    batches = [(X.get(), Y.get()) for X, Y in ArrayIterator(x, y, nclass=5)]
    order = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]            # the last batch wraps around
    for i, (X, Y) in enumerate(batches):
        rows = order[4 * i:4 * i + 4]
        np.testing.assert_array_equal(X, x[rows].T)
        assert Y.shape == (5, 8)
        np.testing.assert_array_equal(Y.argmax(0), np.concatenate([y[rows, 0], y[rows, 1]]))


def test_benchmark_and_print_stats(be4):
    from neonlike.benchmark import Benchmark
    from neonlike.data import ArrayIterator
    from neonlike.initializers import Gaussian
    from neonlike.layers import Affine, GeneralizedCost
    from neonlike.models import Model
    from neonlike.optimizers import GradientDescentMomentum
    from neonlike.transforms import CrossEntropyBinary, Logistic
    data = ArrayIterator(RNG.normal(size=(12, 5)), RNG.integers(0, 3, 12), nclass=3)
    model = Model([Affine(3, Gaussian(scale=0.1), activation=Logistic(shortcut=True))])
    bench = Benchmark(model)
    with pytest.raises(RuntimeError, match="needs the model's cost and optimizer"):
        bench.time(data, niterations=2)
    model.initialize(data, GeneralizedCost(CrossEntropyBinary()))
    model.optimizer = GradientDescentMomentum(0.1)
    times = bench.time(data, niterations=4)
    assert all(len(v) == 4 and min(v) >= 0 for k, v in times.items() if not k.startswith("b")
               or k == "bprop")
    assert any(k.startswith("fprop ") for k in times) and any(k.startswith("bprop ") for k in times)

    class Screen:
        def display(self, text):
            self.text = text
    screen = Screen()
    stats = Benchmark.print_stats({"step": [1.0, 2.0, 4.0]}, output=screen)
    assert stats == {"step": {"Mean": pytest.approx(7 / 3), "Median": 2.0, "Amin": 1.0,
                              "Amax": 4.0}}
    assert "Amax" in screen.text and "step" in screen.text
    with pytest.raises(TypeError, match="display method"):
        Benchmark.print_stats({"step": [1.0]}, output=object())
    with pytest.raises(ValueError, match="provide a dict of timings"):
        Benchmark.print_stats({})
    model.set_batch_size(3)
    model.set_seq_len(7)
    assert all(layer.actual_bsz == 3 and layer.actual_seq_len == 7
               for layer in model.layers.layers)
    result = model.benchmark(data, inference=True, niterations=2, nskip=1)
    assert set(result) == {"fprop"}


def test_a_pooling_whose_window_does_not_fit_builds_and_refuses_to_run(be4):
    layer = be4.pool_layer(np.float32, "max", 4, 2, H=2, W=2, R=3, S=3, str_h=2, str_w=2)
    assert layer.dimO == (2, 1, 0, 0, 4)
    with pytest.raises(ValueError, match=r"fprop_pool: pool_layer \(height\): a window of 3"):
        be4.fprop_pool(layer, be4.zeros(layer.dimI2), be4.zeros((1, 4)))


def test_hdf5_iterators(be4, tmp_path):
    h5py = pytest.importorskip("h5py")
    from neonlike.data import HDF5Iterator, HDF5IteratorAutoencoder, HDF5IteratorOneHot
    n, lshape = 10, (2, 1, 3)
    x = RNG.normal(size=(n, 6))
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("input", data=x).attrs["lshape"] = lshape
        f.create_dataset("mean", data=np.array([1.0, -2.0]))           # per channel
        out = f.create_dataset("output", data=(np.arange(n) % 3).reshape(-1, 1))
        out.attrs["nclass"] = 3
    centred = x - np.repeat([1.0, -2.0], 3)
    order = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]                     # the last batch wraps
    it = HDF5Iterator(str(path))
    assert it.shape == lshape and it.nbatches == 3
    for i, (X, T) in enumerate(it):
        rows = order[4 * i:4 * i + 4]
        np.testing.assert_allclose(X.get(), centred[rows].T, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(T.get(), (np.array(rows) % 3)[None, :])
    it.cleanup()
    hot = HDF5IteratorOneHot(str(path))
    for i, (X, T) in enumerate(hot):
        np.testing.assert_array_equal(T.get(), np.eye(3)[np.array(order[4 * i:4 * i + 4]) % 3].T)
    hot.cleanup()
    ae = HDF5IteratorAutoencoder(str(path))
    assert all(X is T for X, T in ae)
    ae.cleanup()
    with pytest.raises(OSError, match="file not found"):
        HDF5Iterator(str(tmp_path / "none.h5"))
