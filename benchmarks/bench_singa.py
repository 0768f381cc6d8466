"""SINGA on the engine (issue 16, point 8): one train step of neonlike.singa models against the
same step in PyTorch eager, in one process.

    python benchmarks/bench_singa.py            # --threads 2 --repeats 11
    python benchmarks/bench_singa.py --quick

Rows (float32, random data, same starting weights; the first step's losses are checked equal):
- mlp digits / mlp mnist: examples/singa_mlp.py's model (features-100-10, ReLU, bias, softmax
  cross entropy, SGD momentum 0.9 updating inside the backward loop, the loss read back) at
  64-100-10 batch 32 and 784-100-10 batch 128; torch: nn.Linear x2, F.relu, F.cross_entropy,
  backward, optim.SGD(momentum=0.9).step(), loss.item().
- cnn digits: examples/singa_cnn.py's model (conv 1->16, relu, BN, maxpool 3/1/1, two convs
  16->8 concatenated, relu, BN, avgpool 2, linear 256->10) on 8x8 images, batch 32.
Each round times a batch of steps of every implementation in turn; the table gives medians.
"""
from __future__ import annotations

import argparse
import statistics
import time

import _harness  # noqa: F401,E402  first: pins the thread pools before numpy loads
from _harness import GEMM_PAUSE_S  # noqa: E402  (BLAS pools spin: see _harness)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402

from neonlike.singa import autograd, opt  # noqa: E402
from neonlike.singa.tensor import Tensor  # noqa: E402


def _param(a):
    return Tensor(data=a, requires_grad=True, stores_grad=True)


def mlp_case(n_in, batch, rng):
    w0, w1 = rng.randn(n_in, 100).astype(np.float32) * 0.1, rng.randn(100, 10).astype(np.float32) * 0.1
    X = rng.rand(batch, n_in).astype(np.float32)
    labels = rng.randint(0, 10, batch)
    T = np.eye(10, dtype=np.float32)[labels]
    ps = [_param(w0), _param(np.zeros(100, np.float32)), _param(w1), _param(np.zeros(10, np.float32))]
    sgd = opt.SGD(0.01, momentum=0.9)
    x, t = Tensor(data=X, requires_grad=False), Tensor(data=T, requires_grad=False)

    def singa_step():
        h = autograd.relu(autograd.add_bias(autograd.matmul(x, ps[0]), ps[1]))
        loss = autograd.softmax_cross_entropy(autograd.add_bias(autograd.matmul(h, ps[2]), ps[3]), t)
        for p, g in autograd.backward(loss):
            sgd.update(p, g)
        return float(loss.to_numpy()[0])

    l0, l1 = torch.nn.Linear(n_in, 100), torch.nn.Linear(100, 10)
    with torch.no_grad():
        l0.weight.copy_(torch.tensor(w0.T)); l0.bias.zero_()      # noqa: E702
        l1.weight.copy_(torch.tensor(w1.T)); l1.bias.zero_()      # noqa: E702
    topt = torch.optim.SGD(list(l0.parameters()) + list(l1.parameters()), 0.01, momentum=0.9)
    tx, tl = torch.tensor(X), torch.tensor(labels)

    def torch_step():
        topt.zero_grad()
        loss = TF.cross_entropy(l1(TF.relu(l0(tx))), tl)
        loss.backward()
        topt.step()
        return loss.item()
    return singa_step, torch_step


def cnn_case(batch, rng):
    X = rng.rand(batch, 1, 8, 8).astype(np.float32)
    labels = rng.randint(0, 10, batch)
    T = np.eye(10, dtype=np.float32)[labels]
    conv1 = autograd.Conv2d(1, 16, 3, padding=1, bias=False)
    bn1, bn2 = autograd.BatchNorm2d(16), autograd.BatchNorm2d(16)
    pool1, pool2 = autograd.MaxPool2d(3, 1, padding=1), autograd.AvgPool2d(2)
    conv21, conv22 = autograd.Conv2d(16, 8, 3, padding=1), autograd.Conv2d(16, 8, 3, padding=1)
    linear = autograd.Linear(256, 10)
    sgd = opt.SGD(0.01, momentum=0.9)
    x, t = Tensor(data=X, requires_grad=False), Tensor(data=T, requires_grad=False)

    def singa_step():
        y = pool1(bn1(autograd.relu(conv1(x))))
        y = pool2(bn2(autograd.relu(autograd.cat((conv21(y), conv22(y)), 1))))
        loss = autograd.softmax_cross_entropy(linear(autograd.flatten(y)), t)
        for p, g in autograd.backward(loss):
            sgd.update(p, g)
        return float(loss.to_numpy()[0])

    def tp(a):
        return torch.nn.Parameter(torch.tensor(a.to_numpy()))
    tw = {k: tp(v) for k, v in dict(c1=conv1.W, c21=conv21.W, b21=conv21.b, c22=conv22.W,
                                     b22=conv22.b, lw=linear.W, lb=linear.b, s1=bn1.scale,
                                     o1=bn1.bias, s2=bn2.scale, o2=bn2.bias).items()}
    stats = [torch.zeros(16), torch.ones(16), torch.zeros(16), torch.ones(16)]
    topt = torch.optim.SGD(list(tw.values()), 0.01, momentum=0.9)
    tx, tl = torch.tensor(X), torch.tensor(labels)

    def torch_step():
        topt.zero_grad()
        y = TF.batch_norm(TF.relu(TF.conv2d(tx, tw["c1"], padding=1)), stats[0], stats[1],
                          tw["s1"], tw["o1"], training=True, momentum=0.9)
        y = TF.max_pool2d(y, 3, 1, 1)
        y = torch.cat((TF.conv2d(y, tw["c21"], tw["b21"], padding=1),
                       TF.conv2d(y, tw["c22"], tw["b22"], padding=1)), 1)
        y = TF.avg_pool2d(TF.batch_norm(TF.relu(y), stats[2], stats[3], tw["s2"], tw["o2"],
                                        training=True, momentum=0.9), 2)
        loss = TF.cross_entropy(y.flatten(1) @ tw["lw"] + tw["lb"], tl)
        loss.backward()
        topt.step()
        return loss.item()
    return singa_step, torch_step


def timed(fn, n):
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    repeats, steps = (5, 20) if args.quick else (args.repeats, 50)
    autograd.training = True
    rows = [("mlp digits 64-100-10 b32", lambda r: mlp_case(64, 32, r)),
            ("mlp mnist 784-100-10 b128", lambda r: mlp_case(784, 128, r)),
            ("cnn digits 1x8x8 b32", lambda r: cnn_case(32, r))]
    print(f"threads {args.threads}, {repeats} rounds of {steps} steps; median ms per step")
    print(f"{'case':28} {'singa':>9} {'torch':>9} {'torch/singa':>12}")
    for name, make in rows:
        singa_step, torch_step = make(np.random.RandomState(0))
        a, b = singa_step(), torch_step()
        if not np.isclose(a, b, rtol=1e-4):
            print(f"{name}: first losses differ: singa {a:.6f}, torch {b:.6f}")
            continue
        for _ in range(3):
            singa_step(), torch_step()
        s, t = [], []
        for _ in range(repeats):   # pauses: neither library's pool spins into the other's round
            s.append(timed(singa_step, steps))
            time.sleep(GEMM_PAUSE_S)
            t.append(timed(torch_step, steps))
            time.sleep(GEMM_PAUSE_S)
        ms, mt = statistics.median(s) * 1e3, statistics.median(t) * 1e3
        print(f"{name:28} {ms:9.3f} {mt:9.3f} {mt / ms:11.2f}x")


if __name__ == "__main__":
    main()
