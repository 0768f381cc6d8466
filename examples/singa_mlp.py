#!/usr/bin/env python
"""SINGA's autograd MLP (seed 004, operations only) on scikit-learn's 8x8 digits (64-100-10).

    python examples/singa_mlp.py [--epochs 10] [--batch 32]

A SINGA script with `singa` renamed `neonlike.singa`: each step's elementwise operators run fused
with what reads them, and parameters are updated while the backward pass runs.
"""
import argparse
import time

import numpy as np

from neonlike.data import load_digits
from neonlike.singa import autograd, device, opt, tensor
from neonlike.singa.tensor import Tensor


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0, help="the device's random seed (initial weights)")
    args = ap.parse_args()
    (X, y), (Xt, yt), nclass = load_digits()
    device.get_default_device().SetRandSeed(args.seed)

    w0 = Tensor(shape=(64, 100), requires_grad=True, stores_grad=True)
    w0.gaussian(0.0, 0.1)
    b0 = Tensor(shape=(1, 100), requires_grad=True, stores_grad=True)
    b0.set_value(0.0)
    w1 = Tensor(shape=(100, nclass), requires_grad=True, stores_grad=True)
    w1.gaussian(0.0, 0.1)
    b1 = Tensor(shape=(1, nclass), requires_grad=True, stores_grad=True)
    b1.set_value(0.0)

    def forward(x):
        x = autograd.relu(autograd.add_bias(autograd.matmul(x, w0), b0))
        return autograd.add_bias(autograd.matmul(x, w1), b1)

    sgd = opt.SGD(args.lr, momentum=0.9)
    rng = np.random.RandomState(0)
    for epoch in range(args.epochs):
        autograd.training = True
        order, total, start = rng.permutation(len(y)), 0.0, time.perf_counter()
        for i in range(0, len(y) - args.batch + 1, args.batch):
            idx = order[i:i + args.batch]
            inputs = Tensor(data=X[idx], requires_grad=False)
            target = Tensor(data=np.eye(nclass)[y[idx]], requires_grad=False)
            loss = autograd.softmax_cross_entropy(forward(inputs), target)
            for p, g in autograd.backward(loss):
                sgd.update(p, g)
            total += float(tensor.to_numpy(loss)[0])
        print(f"Epoch {epoch}: loss {total / (len(y) // args.batch):.4f}, "
              f"{time.perf_counter() - start:.2f}s")
    autograd.training = False
    pred = tensor.to_numpy(forward(Tensor(data=Xt))).argmax(1)
    print(f"Misclassification error = {100 * np.mean(pred != yt):.1f}%")


if __name__ == "__main__":
    main()
