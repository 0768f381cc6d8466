"""neon's GeneralizedCostMask, Multicost, GenerativeAdversarial + GAN, Seq2Seq and BeamSearch
against float64 numpy references and central differences."""
import itertools

import numpy as np
import pytest

from neonlike.backends import gen_backend
from neonlike.initializers import Gaussian, Uniform
from neonlike.layers import (Activation, Affine, GeneralizedCost, GeneralizedCostMask,
                             GeneralizedGANCost, GenerativeAdversarial, Multicost, Recurrent,
                             Seq2Seq, Sequential)
from neonlike.layers.container import Seq2Seq as Seq2SeqFromContainer
from neonlike.models import GAN
from neonlike.optimizers import GradientDescentMomentum
from neonlike.transforms import CrossEntropyMulti, GANCost, Logistic, Softmax, SumSquared, Tanh
from neonlike.util.beamsearch import BeamSearch

N = 3


@pytest.fixture
def be():
    return gen_backend("cpu", datatype=np.float64, batch_size=N, rng_seed=0)


def rand(shape, lo=-1.0, hi=1.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def numeric(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        up = f()
        x[i] = old - h
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * h)
    return g


# ---------------------------------------------------------------- costs
def test_cost_mask_cost_and_errors(be):
    y, t = rand((4, 2 * N), 0.1, 1.0, 1), rand((4, 2 * N), 0.0, 1.0, 2)
    mask = (rand((4, 2 * N), 0, 1, 3) > 0.4).astype(float)
    layer = Sequential([Recurrent(4, Gaussian(0, 0.1), activation=Tanh())])
    layer.configure((2, 2))
    cost = GeneralizedCostMask(SumSquared(), weights=0.5)
    cost.initialize(layer)
    got = cost.get_cost(be.array(y), (be.array(t), be.array(mask))).get()
    want = 0.5 * np.mean(0.5 * np.sum((y * mask - t * mask) ** 2, axis=0))
    np.testing.assert_allclose(got, [[want]], rtol=1e-12)
    err = cost.get_errors(be.array(y), (be.array(t), be.array(mask))).get()
    np.testing.assert_allclose(err, (y - t) * mask * 0.5, rtol=1e-12)
    with pytest.raises(ValueError, match=r"mask of the outputs' shape \(4, 6\)"):
        cost.get_cost(be.array(y), (be.array(t), be.array(mask[:, :N])))
    with pytest.raises(TypeError, match="pair"):
        cost.get_errors(be.array(y), be.array(t))


def test_multicost_weights_costs_and_errors(be):
    init = Gaussian(0, 0.3)
    a = Sequential([Affine(3, init, activation=Softmax())])
    b = Sequential([Affine(2, init, activation=Logistic())])
    a.configure((4,)), b.configure((4,))
    mc = Multicost([GeneralizedCost(CrossEntropyMulti()), GeneralizedCost(SumSquared())],
                   weights=[1.0, 0.25])
    mc.initialize([a.layers[-1], b.layers[-1]])
    ya, yb = rand((3, N), 0.1, 0.9, 1), rand((2, N), 0.1, 0.9, 2)
    ta, tb = np.eye(3)[:, [0, 2, 1]], rand((2, N), 0, 1, 3)
    got = mc.get_cost([be.array(ya), be.array(yb)], [be.array(ta), be.array(tb)]).get()
    want = (np.mean(-np.sum(ta * np.log(ya), axis=0))
            + 0.25 * np.mean(0.5 * np.sum((yb - tb) ** 2, axis=0)))
    np.testing.assert_allclose(got, [[want]], rtol=1e-6)
    ea, eb = mc.get_errors([be.array(ya), be.array(yb)], [be.array(ta), be.array(tb)])
    np.testing.assert_allclose(ea.get(), ya - ta, rtol=1e-12)
    np.testing.assert_allclose(eb.get(), 0.25 * (yb - tb), rtol=1e-12)
    with pytest.raises(ValueError, match="2 targets expected, got 3"):
        mc.get_cost([be.array(ya), be.array(yb)], [be.array(ta)] * 3)
    with pytest.raises(ValueError, match="2 weights for 1 costs"):
        Multicost([GeneralizedCost(SumSquared())], weights=[1, 2])


# ---------------------------------------------------------------- GAN
def _gan_layers():
    init = Gaussian(0, 0.3)
    gen = Sequential([Affine(6, init, activation=Tanh()), Affine(4, init)])
    dis = Sequential([Affine(5, init, activation=Tanh()), Affine(1, init, activation=Logistic())])
    return GenerativeAdversarial(gen, dis)


def test_gan_container_wiring_and_discriminator_error(be):
    ga = _gan_layers()
    assert [layer.nout for layer in ga.layers if hasattr(layer, "nout")] == [6, 4, 5, 1]
    assert ga.layers == ga.generator.layers + ga.discriminator.layers
    ga.configure((3,))
    ga.allocate()
    ga.allocate_deltas()
    assert ga.discriminator.layers[0].in_shape == (4,)
    # the discriminator's input error is d sum(w * D(x)) / dx
    x = rand((4, N), seed=5)
    w = rand((1, N), 0.5, 1.5, 6)
    X = be.array(x)

    def loss():
        X.set(x)
        return float(np.sum(w * ga.discriminator.fprop(X).get()))
    want = numeric(loss, x)
    X.set(x)
    ga.discriminator.fprop(X)
    got = ga.discriminator.bprop(be.array(w)).get()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    with pytest.raises(TypeError, match="discriminator must be a Sequential"):
        GenerativeAdversarial(ga.generator, "dis")


class _Data:
    def __init__(self, be, nbatches=4):
        self.shape, self.nbatches, self.ndata = (4,), nbatches, nbatches * N
        self.x = [be.array(rand((4, N), 0.5, 1.0, 10 + i)) for i in range(nbatches)]

    def __iter__(self):
        return ((x, None) for x in self.x)


def test_gan_fit_trains_both_networks(be):
    ga = _gan_layers()
    model = GAN(ga, noise_dim=(3,), k=1)
    data = _Data(be)
    cost = GeneralizedGANCost(GANCost(func="modified"))
    model.initialize(data, cost)
    g0 = [p.get().copy() for p in (ga.generator.layers[0].W, ga.discriminator.layers[0].W)]
    model.fit(data, cost=cost, optimizer=GradientDescentMomentum(0.05, 0.0), num_epochs=2)
    g1 = [p.get() for p in (ga.generator.layers[0].W, ga.discriminator.layers[0].W)]
    assert all(not np.allclose(a, b) for a, b in zip(g0, g1))
    assert model.gen_iter == 7           # from the second of 8 minibatches on, every one
    assert np.isfinite(model.total_cost.get()).all()
    assert model.noise_batch.shape == (4, N)


def test_gan_schedule_noise_and_errors(be):
    model = GAN(_gan_layers(), noise_dim=(3,), k=2, wgan_train_sched=True, noise_type="uniform")
    assert [model.get_k(g) for g in (0, 24, 25, 26, 500, 501)] == [100, 100, 2, 2, 100, 2]
    z = be.iobuf((3,))
    model.fill_noise(z, normal=False)
    assert (z.get() >= -1).all() and (z.get() < 1).all()
    with pytest.raises(TypeError, match="GenerativeAdversarial"):
        GAN(Sequential([Affine(2)]), noise_dim=(3,))
    model = GAN(_gan_layers(), noise_dim=(3,), k=5)
    with pytest.raises(RuntimeError, match="no generator iteration"):
        model.fit(_Data(be, 2), cost=GeneralizedGANCost(GANCost()),
                  optimizer=GradientDescentMomentum(0.01, 0.0), num_epochs=1)


# ---------------------------------------------------------------- Seq2Seq
class _Shapes:
    def __init__(self, enc, dec):
        self.shape, self.decoder_shape = enc, dec


def _rnn_ref(W_in, W_rec, b, x, h0, steps):
    """float64 neon RNN: h_t = tanh(W_in x_t + W_rec h_{t-1} + b); x (nin, steps * N)."""
    hs, h = [], h0
    for t in range(steps):
        h = np.tanh(W_in @ x[:, t * N:(t + 1) * N] + W_rec @ h + b)
        hs.append(h)
    return np.concatenate(hs, axis=1), h


def _s2s(k=3, steps=4, connections=None):
    enc = [Recurrent(k, Uniform(-0.6, 0.6), activation=Tanh(), reset_cells=True)]
    dec = [Recurrent(k, Uniform(-0.6, 0.6), activation=Tanh(), reset_cells=True)]
    s2s = Seq2Seq([enc, dec], decoder_connections=connections)
    s2s.configure(_Shapes((2, steps), (k, steps)))
    s2s.allocate()
    s2s.allocate_deltas()
    for layer in s2s.layers:                      # non-zero biases
        layer.b[:] = be_array_like(layer.b, rand(layer.b.shape, -0.3, 0.3, 7))
    return s2s


def be_array_like(t, values):
    t.set(values)
    return t


def test_seq2seq_matches_reference_and_central_differences(be):
    steps, k = 4, 3
    s2s = _s2s(k, steps)
    enc, dec = s2s.encoder.layers[0], s2s.decoder.layers[0]
    x, z = rand((2, steps * N), seed=1), rand((k, steps * N), seed=2)
    X, Z = be.array(x), be.array(z)
    out = s2s.fprop((X, Z)).get()
    _, h_enc = _rnn_ref(enc.W_input.get(), enc.W_recur.get(), enc.b.get(), x, np.zeros((k, N)),
                        steps)
    want, _ = _rnn_ref(dec.W_input.get(), dec.W_recur.get(), dec.b.get(), z, h_enc, steps)
    np.testing.assert_allclose(out, want, rtol=1e-10)
    w = rand(out.shape, 0.5, 1.5, 3)

    def loss():
        return float(np.sum(w * s2s.fprop((X, Z)).get()))
    wants = []
    for p in (enc.W, dec.W):
        host = p.get()

        def ploss(p=p, host=host):
            p.set(host)
            return loss()
        wants.append(numeric(ploss, host))
        p.set(host)
    s2s.fprop((X, Z))
    s2s.bprop(be.array(w))
    for layer, want in zip((enc, dec), wants):
        np.testing.assert_allclose(layer.dW.get(), want, rtol=1e-5, atol=1e-8)


def test_seq2seq_inference_feeds_outputs_back(be):
    steps, k = 4, 3
    s2s = _s2s(k, steps)
    x = rand((2, steps * N), seed=4)
    got = s2s.fprop(be.array(x), inference=True).get().copy()
    # the same decoder run on its own outputs shifted a step (zeros first), in training mode
    z = np.concatenate([np.zeros((k, N)), got[:, :-N]], axis=1)
    want = s2s.fprop((be.array(x), be.array(z))).get()
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert s2s.decoder.in_shape == (k, steps)


def test_seq2seq_connections_and_errors(be):
    from neonlike.layers.seq2seq import Decoder, Encoder
    assert Seq2SeqFromContainer is Seq2Seq
    r = lambda: Recurrent(3, Uniform(-0.5, 0.5), activation=Tanh())   # noqa: E731
    s2s = Seq2Seq([Encoder([r(), r()]), Decoder([r()])], decoder_connections=[1])
    assert s2s.encoder.connections == [[], [0]]
    with pytest.raises(ValueError, match="as many recurrent layers, got 2 and 1"):
        Seq2Seq([[r(), r()], [r()]])
    with pytest.raises(ValueError, match="names no encoder recurrent layer"):
        Seq2Seq([[r()], [r()]], decoder_connections=[2])
    with pytest.raises(ValueError, match="4-tuple"):
        Seq2Seq([[r()], [r()]]).configure((3, 4))


def test_beamsearch_finds_the_best_sequence(be):
    """With as many beams as prefixes, the best beam is the best of all sequences."""
    k, steps = 3, 3
    enc = [Recurrent(k, Uniform(-0.8, 0.8), activation=Tanh(), reset_cells=True)]
    dec = [Recurrent(k, Uniform(-0.8, 0.8), activation=Tanh(), reset_cells=True),
           Activation(Softmax())]
    s2s = Seq2Seq([enc, dec])
    s2s.configure(_Shapes((2, steps), (k, steps)))
    s2s.allocate()
    s2s.allocate_deltas()
    enc_l, dec_l = s2s.encoder.layers[0], s2s.decoder.layers[0]
    x = rand((2, steps * N), seed=8)
    search = BeamSearch(s2s)
    best = search.beamsearch(be.array(x), num_beams=k ** (steps - 1)).get()
    _, h0 = _rnn_ref(enc_l.W_input.get(), enc_l.W_recur.get(), enc_l.b.get(), x,
                     np.zeros((k, N)), steps)
    Wi, Wr, b = dec_l.W_input.get(), dec_l.W_recur.get(), dec_l.b.get()
    for n in range(N):
        scores = {}
        for seq in itertools.product(range(k), repeat=steps):
            h, inp, score = h0[:, n:n + 1], np.zeros((k, 1)), 0.0
            for tok in seq:
                h = np.tanh(Wi @ inp + Wr @ h + b[:, :1])
                p = np.exp(h - h.max())
                score += np.log(p[tok, 0] / p.sum())
                inp = np.eye(k)[:, tok:tok + 1]
            scores[seq] = score
        want = max(scores, key=scores.get)
        assert tuple(best[:, n].astype(int)) == want
        np.testing.assert_allclose(search.scores[-1][n], scores[want], rtol=1e-9)
