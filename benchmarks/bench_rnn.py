"""neon's recurrent layers on the engine against PyTorch's on the CPU, side by side in one run:
LSTM against nn.LSTM, the plain Recurrent layer (tanh) against nn.RNN, GRU against nn.GRU.

    python benchmarks/bench_rnn.py                 # --threads 2 --repeats 11
    python benchmarks/bench_rnn.py --quick
    python benchmarks/bench_rnn.py --cases lstm    # the cases whose name starts so

One training pass of one layer (float32, random data): forward over all steps, then backward
from a random output error to the input error and the weight gradients. neonlike: layer.fprop +
layer.bprop (neon's (features, steps * batch) layout); torch: the module on a (steps, batch,
input) tensor that requires its gradient, (out * R).sum().backward(). Both start from the same
weights (torch's gate order mapped from neon's: LSTM i, f, g, o from i, f, o, g), and for the
LSTM and the plain layer the outputs, input errors and dW_recur are checked equal before timing.
neon's GRU is another variant than torch's (the reset gate applied before the recurrent product,
W (r * h), where torch takes r * (W h + b); z weighting the candidate where torch's weights the
state): the same products and cells, other values, so that case is timed only. Each round times
a batch of passes of each in turn; the table gives medians.
"""
from __future__ import annotations

import argparse
import statistics
import time

import _harness  # noqa: F401,E402  first: pins the thread pools before numpy loads
from _harness import GEMM_PAUSE_S  # noqa: E402  (BLAS pools spin: see _harness)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from neonlike.backends import gen_backend  # noqa: E402
from neonlike.initializers import Gaussian  # noqa: E402
from neonlike.layers import GRU, LSTM, Recurrent  # noqa: E402
from neonlike.transforms import Logistic, Tanh  # noqa: E402

CASES = {"lstm 256x256, batch 32, 50 steps": ("lstm", 256, 256, 32, 50),
         "lstm 128x128, batch 16, 20 steps": ("lstm", 128, 128, 16, 20),
         "rnn 256x256, batch 32, 50 steps": ("rnn", 256, 256, 32, 50),
         "gru 256x256, batch 32, 50 steps": ("gru", 256, 256, 32, 50)}

# per kind: the neon layer, torch's module and the rows of neon's gate blocks in torch's order
KINDS = {
    "lstm": (lambda n: LSTM(n, Gaussian(scale=0.1), activation=Tanh(),
                            gate_activation=Logistic()), torch.nn.LSTM,
             lambda n: np.r_[0:2 * n, 3 * n:4 * n, 2 * n:3 * n]),      # ifgo <- ifog
    "rnn": (lambda n: Recurrent(n, Gaussian(scale=0.1), activation=Tanh()), torch.nn.RNN,
            lambda n: np.arange(n)),
    "gru": (lambda n: GRU(n, Gaussian(scale=0.1), activation=Tanh(),
                          gate_activation=Logistic()), torch.nn.GRU,
            lambda n: np.arange(3 * n)),           # (a different variant: timed only)
}


def make_case(kind, nin, nout, bsz, steps, rng):
    be = gen_backend("cpu", batch_size=bsz, rng_seed=0)
    make_layer, module, rows = KINDS[kind]
    layer = make_layer(nout)
    layer.configure((nin, steps))
    layer.prev_layer = True
    layer.allocate()
    layer.set_deltas()
    layer.b.set(rng.normal(0, 0.1, layer.b.shape).astype(np.float32))
    X = rng.normal(size=(nin, steps * bsz)).astype(np.float32)
    R = rng.normal(size=(nout, steps * bsz)).astype(np.float32)
    x, r = be.array(X), be.array(R)

    def ours():
        layer.fprop(x)
        layer.bprop(r)

    net = module(nin, nout)
    order = rows(nout)
    with torch.no_grad():
        net.weight_ih_l0.copy_(torch.from_numpy(layer.W_input.get()[order]))
        net.weight_hh_l0.copy_(torch.from_numpy(layer.W_recur.get()[order]))
        net.bias_ih_l0.copy_(torch.from_numpy(layer.b.get()[order, 0]))
        net.bias_hh_l0.zero_()
    tx = torch.from_numpy(X.reshape(nin, steps, bsz).transpose(1, 2, 0).copy()).requires_grad_()
    tr = torch.from_numpy(R.reshape(nout, steps, bsz).transpose(1, 2, 0).copy())

    def theirs():
        tx.grad = None
        net.zero_grad(set_to_none=True)
        out, _ = net(tx)
        (out * tr).sum().backward()
        return out

    ours()
    out = theirs()
    if kind == "gru":       # another variant than torch's (see above): timed only
        return ours, theirs
    mine = layer.outputs.get().reshape(nout, steps, bsz).transpose(1, 2, 0)
    np.testing.assert_allclose(mine, out.detach().numpy(), atol=1e-4)
    dx = layer.out_deltas_buffer.get().reshape(nin, steps, bsz).transpose(1, 2, 0)
    np.testing.assert_allclose(dx, tx.grad.numpy(), atol=1e-3, rtol=1e-3)
    np.testing.assert_allclose(layer.dW_recur.get()[order], net.weight_hh_l0.grad.numpy(),
                               atol=1e-2, rtol=1e-3)
    return ours, theirs


def timed(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cases", default="", help="comma-separated name prefixes (lstm, rnn, gru)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    repeats, inner = (3, 2) if args.quick else (args.repeats, 3)
    rng = np.random.default_rng(0)
    print(f"threads {args.threads}, torch {torch.__version__}, medians of {repeats} rounds of "
          f"{inner} passes (forward + backward)")
    print(f"{'case':36s} {'neonlike ms':>12s} {'torch ms':>10s} {'torch/neonlike':>15s}")
    wanted = [c for c in args.cases.split(",") if c]
    for name, dims in CASES.items():
        if wanted and not any(name.startswith(c) for c in wanted):
            continue
        ours, theirs = make_case(*dims, rng)
        for fn in (ours, theirs):      # warm-up: kernels compiled, GEMM paths chosen
            timed(fn, 2)
        a, b = [], []
        for _ in range(repeats):   # pauses: neither library's pool spins into the other's round
            a.append(timed(ours, inner))
            time.sleep(GEMM_PAUSE_S)
            b.append(timed(theirs, inner))
            time.sleep(GEMM_PAUSE_S)
        ma, mb = statistics.median(a) * 1e3, statistics.median(b) * 1e3
        print(f"{name:36s} {ma:12.2f} {mb:10.2f} {mb / ma:15.2f}")


if __name__ == "__main__":
    main()
