"""Training speed: neon's mnist_mlp model and a small convnet, neonlike against PyTorch on the CPU,
side by side in one process.

    python benchmarks/bench_nn.py [--threads 2] [--epochs 3] [--conv-batches 40] [--skip-conv]

MLP: 784-100-10 without biases, Rectlin then Logistic, CrossEntropyBinary, momentum SGD (0.1, 0.9),
Gaussian(0, 0.01) weights, on MNIST-shaped random data (60000 x 784, batch 128, 469 batches): the
time of whole epochs (after a first, warm-up epoch), medians. PyTorch: the same model (Linear
without bias, ReLU, BCEWithLogits summed over classes and averaged over the batch: the same
gradients as neon's shortcut), torch.optim.SGD(momentum=0.9).

Convnet: Conv(5x5, 16) Rectlin, max pool 2, Conv(5x5, 32) Rectlin, max pool 2, Affine(10)
Logistic, on CIFAR-shaped data (3 x 32 x 32, batch 128): the time of --conv-batches minibatches
after warm-up, scaled to an epoch of 50000 images (391 batches).

neon's own CPU backend took about 6 s per MLP epoch on this machine (../shared/reference, section 7).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

NEON_MLP_EPOCH_S = 6.0


def mlp_neonlike(X, y, epochs):
    from neonlike.backends import gen_backend
    from neonlike.data import ArrayIterator
    from neonlike.initializers import Gaussian
    from neonlike.layers import Affine, GeneralizedCost
    from neonlike.models import Model
    from neonlike.optimizers import GradientDescentMomentum
    from neonlike.transforms import CrossEntropyBinary, Logistic, Rectlin
    gen_backend("cpu", rng_seed=0, batch_size=128)
    train = ArrayIterator(X, y, nclass=10, lshape=(1, 28, 28))
    init = Gaussian(0.0, 0.01)
    model = Model([Affine(100, init=init, activation=Rectlin()),
                   Affine(10, init=init, activation=Logistic(shortcut=True))])
    cost, opt = GeneralizedCost(CrossEntropyBinary()), GradientDescentMomentum(0.1, momentum_coef=0.9)

    def epoch():
        model.fit(train, cost=cost, optimizer=opt, num_epochs=model.epoch_index + 1)
    return epoch


def mlp_torch(X, y, epochs):
    import torch
    Xt, T = torch.from_numpy(X), torch.nn.functional.one_hot(torch.from_numpy(y), 10).float()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 100, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(100, 10, bias=False))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    lossf = torch.nn.BCEWithLogitsLoss(reduction="sum")
    n = X.shape[0]

    def epoch():
        for i in range(0, n - 127, 128):
            xb, tb = Xt[i:i + 128], T[i:i + 128]
            opt.zero_grad()
            loss = lossf(model(xb), tb) / 128
            loss.backward()
            opt.step()
    return epoch


def conv_neonlike(X, y):
    from neonlike.backends import gen_backend
    from neonlike.data import ArrayIterator
    from neonlike.initializers import Gaussian
    from neonlike.layers import Affine, Conv, GeneralizedCost, Pooling
    from neonlike.models import Model
    from neonlike.optimizers import GradientDescentMomentum
    from neonlike.transforms import CrossEntropyBinary, Logistic, Rectlin
    gen_backend("cpu", rng_seed=0, batch_size=128)
    train = ArrayIterator(X, y, nclass=10, lshape=(3, 32, 32))
    init = Gaussian(0.0, 0.01)
    model = Model([Conv((5, 5, 16), init=init, activation=Rectlin()), Pooling(2),
                   Conv((5, 5, 32), init=init, activation=Rectlin()), Pooling(2),
                   Affine(10, init=init, activation=Logistic(shortcut=True))])
    cost, opt = GeneralizedCost(CrossEntropyBinary()), GradientDescentMomentum(0.01, momentum_coef=0.9)
    model.initialize(train, cost)
    batches = list(iter(train))

    def steps(k):
        for x, t in batches[:k]:
            out = model.fprop(x)
            cost.get_cost(out, t)
            model.bprop(cost.get_errors(out, t))
            opt.optimize(model.layers_to_optimize, 0)
    return steps


def conv_torch(X, y):
    import torch
    Xt = torch.from_numpy(X.reshape(-1, 3, 32, 32))
    T = torch.nn.functional.one_hot(torch.from_numpy(y), 10).float()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 5, bias=False), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 5, bias=False), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 5 * 5, 10, bias=False))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    lossf = torch.nn.BCEWithLogitsLoss(reduction="sum")

    def steps(k):
        for j in range(k):
            xb, tb = Xt[j * 128:(j + 1) * 128], T[j * 128:(j + 1) * 128]
            opt.zero_grad()
            loss = lossf(model(xb), tb) / 128
            loss.backward()
            opt.step()
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--conv-batches", type=int, default=40)
    ap.add_argument("--skip-conv", action="store_true")
    args = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    import numpy as np
    rng = np.random.default_rng(0)
    X = rng.random((60000, 784), dtype=np.float32)
    y = rng.integers(0, 10, 60000)
    impls = {"neonlike": mlp_neonlike(X, y, args.epochs)}
    try:
        import torch
        torch.set_num_threads(args.threads)
        impls["torch"] = mlp_torch(X, y, args.epochs)
    except ImportError:
        print("torch is not installed: neonlike only", file=sys.stderr)
    for fn in impls.values():
        fn()                                  # warm-up epoch (compiles, thread pools)
    times = {k: [] for k in impls}
    for _ in range(args.epochs):
        for name, fn in impls.items():
            time.sleep(0.3)                   # let the other library's threads go idle
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nmnist_mlp, one epoch of 60000 x 784 (469 batches of 128), {args.threads} threads, "
          f"medians of {args.epochs}")
    print("| implementation | epoch | torch / this | neon CPU (6 s) / this |")
    print("|---|---|---|---|")
    for k, v in med.items():
        ratio = f"{med['torch'] / v:.2f}x" if "torch" in med else "—"
        print(f"| {k} | {v:.3f} s | {ratio} | {NEON_MLP_EPOCH_S / v:.1f}x |")
    if args.skip_conv:
        return
    Xc = rng.random((128 * args.conv_batches, 3 * 32 * 32), dtype=np.float32)
    yc = rng.integers(0, 10, Xc.shape[0])
    try:
        impls = {"neonlike": conv_neonlike(Xc, yc)}
    except (AttributeError, NotImplementedError) as e:
        print(f"\nconvnet: not available ({e})")
        return
    if "torch" in sys.modules:
        impls["torch"] = conv_torch(Xc, yc)
    for fn in impls.values():
        fn(3)
    times = {k: [] for k in impls}
    for _ in range(3):
        for name, fn in impls.items():
            time.sleep(0.3)
            t0 = time.perf_counter()
            fn(args.conv_batches)
            times[name].append((time.perf_counter() - t0) / args.conv_batches)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nconvnet (conv5x5x16-pool2-conv5x5x32-pool2-affine10), CIFAR-shaped batches of 128, "
          f"{args.threads} threads, medians of 3 runs of {args.conv_batches} batches")
    print("| implementation | per batch | epoch of 50000 (391 batches) | torch / this |")
    print("|---|---|---|---|")
    for k, v in med.items():
        ratio = f"{med['torch'] / v:.2f}x" if "torch" in med else "—"
        print(f"| {k} | {v * 1e3:.1f} ms | {v * 391:.1f} s | {ratio} |")


if __name__ == "__main__":
    main()
