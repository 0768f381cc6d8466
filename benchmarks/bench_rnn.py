"""neon's LSTM layer on the engine against PyTorch's nn.LSTM on the CPU, side by side in one run.

    python benchmarks/bench_rnn.py                 # --threads 2 --repeats 11
    python benchmarks/bench_rnn.py --quick

One training pass of one LSTM layer (float32, random data): forward over all steps, then backward
from a random output error to the input error and the weight gradients. neonlike: LSTM.fprop +
LSTM.bprop (neon's (features, steps * batch) layout); torch: nn.LSTM(input, hidden) on a (steps,
batch, input) tensor that requires its gradient, (out * R).sum().backward(). Both start from the
same weights (torch's gate order i, f, g, o mapped from neon's i, f, o, g); the outputs and input
errors are checked equal before timing. Each round times a batch of passes of each in turn; the
table gives medians.
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
from neonlike.layers import LSTM  # noqa: E402
from neonlike.transforms import Logistic, Tanh  # noqa: E402

CASES = {"lstm 256x256, batch 32, 50 steps": (256, 256, 32, 50),
         "lstm 128x128, batch 16, 20 steps": (128, 128, 16, 20)}


def make_case(nin, nout, bsz, steps, rng):
    be = gen_backend("cpu", batch_size=bsz, rng_seed=0)
    layer = LSTM(nout, Gaussian(scale=0.1), activation=Tanh(), gate_activation=Logistic())
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

    net = torch.nn.LSTM(nin, nout)
    order = np.r_[0:2 * nout, 3 * nout:4 * nout, 2 * nout:3 * nout]  # torch ifgo <- neon ifog
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
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    repeats, inner = (3, 2) if args.quick else (args.repeats, 3)
    rng = np.random.default_rng(0)
    print(f"threads {args.threads}, torch {torch.__version__}, medians of {repeats} rounds of "
          f"{inner} passes (forward + backward)")
    print(f"{'case':36s} {'neonlike ms':>12s} {'torch ms':>10s} {'torch/neonlike':>15s}")
    for name, dims in CASES.items():
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
