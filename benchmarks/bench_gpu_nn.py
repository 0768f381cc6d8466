"""The GPU's NN ops and training (issue 19, point 3): neonlike's 'gpu' backend against PyTorch
(cuDNN) on the same device, in one process. Written without a GPU: run it on the lent machine.

    python3 benchmarks/bench_gpu_nn.py [--repeats 20] [--conv-batches 100]
    python3 benchmarks/bench_gpu_nn.py --backend cpu --torch-device cpu --conv-batches 5   # dry run

Rows (float32; each neonlike result checked against torch's first):
- conv fprop / bprop / update and max-pool fprop / bprop at a few layer shapes (neon's layouts
  against torch's NCHW): ms a call, medians of --repeats after a warm-up;
- epochs: examples/mnist_mlp.py's model (784-100-10, Rectlin, Logistic, momentum SGD) over 60000
  MNIST-shaped random images, and examples/convnet.py's (conv 5x5x16 pad 2, pool 2, conv 5x5x32
  pad 2, pool 2, affine 10 softmax) timed over --conv-batches minibatches of 128 and scaled to
  an epoch (469 batches); torch the same models (BCEWithLogits / cross entropy, SGD momentum 0.9).
Each timing synchronises the device before the clock stops.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

LAYERS = [  # N, C, K, H, W, R, S, pad, stride
    (128, 64, 64, 32, 32, 3, 3, 1, 1),
    (128, 16, 32, 14, 14, 5, 5, 2, 1),
    (64, 128, 128, 16, 16, 3, 3, 1, 2),
    (128, 256, 256, 8, 8, 1, 1, 0, 1),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="gpu")
    ap.add_argument("--torch-device", default="cuda")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--conv-batches", type=int, default=100)
    args = ap.parse_args()
    from neonlike.backends import gen_backend
    try:
        be = gen_backend(args.backend, rng_seed=0, batch_size=128)
    except (ImportError, RuntimeError, NotImplementedError) as e:
        sys.exit(f"bench_gpu_nn: no {args.backend} backend here: {e}")
    try:
        import torch
        tdev = torch.device(args.torch_device)
        torch.zeros(1, device=tdev)
    except Exception as e:  # ImportError, or no CUDA in this torch
        torch = None
        print(f"torch on {args.torch_device} unavailable ({e}): neonlike only", file=sys.stderr)

    def sync():
        be.synchronize() if hasattr(be, "synchronize") else None
        if torch is not None and tdev.type == "cuda":
            torch.cuda.synchronize()

    def median_ms(fn, repeats=args.repeats):
        fn()
        sync()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    rng = np.random.default_rng(0)
    print(f"backend {args.backend}, torch on {args.torch_device}")
    print("| op | shape | neonlike | torch | torch / neonlike |")
    print("|---|---|---|---|---|")

    def report(op, shape, ours, theirs):
        ratio = f"{theirs / ours:.2f}x" if theirs else "—"
        print(f"| {op} | {shape} | {ours:.3f} ms | "
              f"{f'{theirs:.3f} ms' if theirs else '—'} | {ratio} |", flush=True)

    for N, C, K, H, W, R, S, pad, st in LAYERS:
        layer = be.conv_layer(np.float32, N, C, K, 1, H, W, 1, R, S, 0, pad, pad, 1, st, st)
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        f = (rng.standard_normal((K, C, R, S)) / np.sqrt(C * R * S)).astype(np.float32)
        e = rng.standard_normal((N, K, layer.P, layer.Q)).astype(np.float32)
        I = be.array(x.transpose(1, 2, 3, 0).reshape(layer.dimI))
        F = be.array(f.transpose(1, 2, 3, 0).reshape(layer.dimF))
        E = be.array(e.transpose(1, 2, 3, 0).reshape(layer.dimO))
        O, G, U = be.empty(layer.dimO), be.empty(layer.dimI), be.empty(layer.dimF)
        shape = f"N{N} C{C} K{K} {H}x{W} {R}x{S} pad {pad} str {st}"
        t = {}
        if torch is not None:
            xt = torch.from_numpy(x).to(tdev).requires_grad_()
            ft = torch.from_numpy(f).to(tdev).requires_grad_()
            et = torch.from_numpy(e).to(tdev)
            yt = torch.nn.functional.conv2d(xt, ft, padding=pad, stride=st)
            gx, gf = torch.autograd.grad(yt, (xt, ft), et)
            be.fprop_conv(layer, I, F, O)
            be.bprop_conv(layer, F, E, G)
            be.update_conv(layer, I, E, U)
            for name, ours, ref, order in (("fprop", O, yt, (1, 2, 3, 0)),
                                           ("bprop", G, gx, (1, 2, 3, 0)),
                                           ("update", U, gf, (1, 2, 3, 0))):
                want = ref.detach().cpu().numpy().astype(np.float64).transpose(order)
                got = ours.get().reshape(want.shape)
                err = np.linalg.norm(got - want) / np.linalg.norm(want)
                if not err < 1e-3:
                    sys.exit(f"bench_gpu_nn: conv {name} at {shape} is wrong: relative error "
                             f"{err:.2e}")
            with torch.no_grad():
                t["fprop"] = median_ms(lambda: torch.nn.functional.conv2d(xt, ft, padding=pad,
                                                                          stride=st))
            y2 = torch.nn.functional.conv2d(xt, ft, padding=pad, stride=st)
            t["bprop"] = median_ms(lambda: torch.autograd.grad(y2, xt, et, retain_graph=True))
            t["update"] = median_ms(lambda: torch.autograd.grad(y2, ft, et, retain_graph=True))
        report("conv fprop", shape, median_ms(lambda: be.fprop_conv(layer, I, F, O)),
               t.get("fprop"))
        report("conv bprop", shape, median_ms(lambda: be.bprop_conv(layer, F, E, G)),
               t.get("bprop"))
        report("conv update", shape, median_ms(lambda: be.update_conv(layer, I, E, U)),
               t.get("update"))

    N, C, H, W = 128, 64, 32, 32
    pl = be.pool_layer(np.float32, "max", N, C, 1, H, W, 1, 1, 2, 2)
    x = rng.standard_normal((C, 1, H, W, N)).astype(np.float32)
    I, O, A = be.array(x), be.empty(pl.dimO), be.empty(pl.dimO, dtype=np.int32)
    E, G = be.array(rng.standard_normal(pl.dimO).astype(np.float32)), be.empty(pl.dimI)
    tp = {}
    if torch is not None:
        xt = torch.from_numpy(x.reshape(C, H, W, N).transpose(3, 0, 1, 2).copy()).to(tdev)
        xt.requires_grad_()
        yt = torch.nn.functional.max_pool2d(xt, 2)
        et = torch.ones_like(yt)
        with torch.no_grad():
            tp["f"] = median_ms(lambda: torch.nn.functional.max_pool2d(xt, 2))
        tp["b"] = median_ms(lambda: torch.autograd.grad(yt, xt, et, retain_graph=True))
    shape = f"N{N} C{C} {H}x{W} 2x2"
    report("max pool fprop", shape, median_ms(lambda: be.fprop_pool(pl, I, O, A)), tp.get("f"))
    report("max pool bprop", shape, median_ms(lambda: be.bprop_pool(pl, E, G, A)), tp.get("b"))
    epochs(args, be, torch, tdev if torch is not None else None, sync, rng)


def epochs(args, be, torch, tdev, sync, rng) -> None:
    """Training epochs: neonlike's Model on `be` against torch on `tdev`."""
    from neonlike.data import ArrayIterator
    from neonlike.initializers import Constant, Gaussian, GlorotUniform, Kaiming
    from neonlike.layers import Affine, Conv, GeneralizedCost, Pooling
    from neonlike.models import Model
    from neonlike.optimizers import GradientDescentMomentum
    from neonlike.transforms import (CrossEntropyBinary, CrossEntropyMulti, Logistic, Rectlin,
                                     Softmax)
    print("\n| model | neonlike epoch | torch epoch | torch / neonlike |")
    print("|---|---|---|---|")
    n = 128 * args.conv_batches
    X = rng.random((n, 784), dtype=np.float32)
    y = rng.integers(0, 10, n)
    scale = 469 / args.conv_batches
    for name in ("mnist_mlp", "convnet"):
        train = ArrayIterator(X, y, nclass=10, lshape=(1, 28, 28))
        if name == "mnist_mlp":
            init = Gaussian(0.0, 0.01)
            layers = [Affine(100, init=init, activation=Rectlin()),
                      Affine(10, init=init, activation=Logistic(shortcut=True))]
            cost, lr = GeneralizedCost(CrossEntropyBinary()), 0.1
        else:
            layers = [Conv((5, 5, 16), init=Kaiming(), bias=Constant(0.0), padding=2,
                           activation=Rectlin()), Pooling(2),
                      Conv((5, 5, 32), init=Kaiming(), bias=Constant(0.0), padding=2,
                           activation=Rectlin()), Pooling(2),
                      Affine(10, init=GlorotUniform(), bias=Constant(0.0), activation=Softmax())]
            cost, lr = GeneralizedCost(CrossEntropyMulti()), 0.01
        model = Model(layers)
        opt = GradientDescentMomentum(lr, momentum_coef=0.9)
        model.fit(train, cost=cost, optimizer=opt, num_epochs=1)      # warm-up: compiles
        sync()
        t0 = time.perf_counter()
        model.fit(train, cost=cost, optimizer=opt, num_epochs=2)
        sync()
        ours = (time.perf_counter() - t0) * scale
        theirs = None
        if torch is not None:
            nn = torch.nn
            if name == "mnist_mlp":
                net = nn.Sequential(nn.Linear(784, 100, bias=False), nn.ReLU(),
                                    nn.Linear(100, 10, bias=False))
                lossf = nn.BCEWithLogitsLoss(reduction="sum")
            else:
                net = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                    nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                    nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
                lossf = nn.CrossEntropyLoss(reduction="sum")
            net = net.to(tdev)
            topt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
            Xt = torch.from_numpy(X).to(tdev)
            Xt = Xt if name == "mnist_mlp" else Xt.reshape(-1, 1, 28, 28)
            Tt = torch.from_numpy(y).to(tdev)
            T1 = nn.functional.one_hot(Tt, 10).float()

            def epoch():
                for i in range(0, n - 127, 128):
                    topt.zero_grad()
                    out = net(Xt[i:i + 128])
                    loss = lossf(out, T1[i:i + 128] if name == "mnist_mlp" else Tt[i:i + 128])
                    (loss / 128).backward()
                    topt.step()
            epoch()
            sync()
            t0 = time.perf_counter()
            epoch()
            sync()
            theirs = (time.perf_counter() - t0) * scale
        ratio = f"{theirs / ours:.2f}x" if theirs else "—"
        print(f"| {name} (469 batches of 128) | {ours:.3f} s | "
              f"{f'{theirs:.3f} s' if theirs else '—'} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
