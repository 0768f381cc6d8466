#!/usr/bin/env python
"""SINGA's autograd CNN (seed 004's layers: Conv2d, BatchNorm2d, pooling, cat, Linear) on
scikit-learn's 8x8 digits.

    python examples/singa_cnn.py [--epochs 3] [--batch 32]
"""
import argparse
import time

import numpy as np

from neonlike.data import load_digits
from neonlike.singa import autograd, device, opt, tensor


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0, help="the device's random seed (initial weights)")
    args = ap.parse_args()
    (X, y), (Xt, yt), nclass = load_digits()
    X, Xt = X.reshape(-1, 1, 8, 8), Xt.reshape(-1, 1, 8, 8)
    dev = device.get_default_device()
    dev.SetRandSeed(args.seed)

    conv1 = autograd.Conv2d(1, 16, 3, padding=1, bias=False)
    bn1 = autograd.BatchNorm2d(16)
    pooling1 = autograd.MaxPool2d(3, 1, padding=1)
    conv21 = autograd.Conv2d(16, 8, 3, padding=1)
    conv22 = autograd.Conv2d(16, 8, 3, padding=1)
    bn2 = autograd.BatchNorm2d(16)
    pooling2 = autograd.AvgPool2d(2)
    linear = autograd.Linear(16 * 4 * 4, nclass)

    def forward(x, t):
        y = bn1(autograd.relu(conv1(x)))
        y = pooling1(y)
        y = autograd.cat((conv21(y), conv22(y)), 1)
        y = pooling2(bn2(autograd.relu(y)))
        y = linear(autograd.flatten(y))
        return autograd.softmax_cross_entropy(y, t), y

    sgd = opt.SGD(lr=args.lr, momentum=0.9)
    rng = np.random.RandomState(0)
    for epoch in range(args.epochs):
        autograd.training = True
        order, total, start = rng.permutation(len(y)), 0.0, time.perf_counter()
        for i in range(0, len(y) - args.batch + 1, args.batch):
            idx = order[i:i + args.batch]
            inputs = tensor.Tensor(device=dev, data=X[idx], stores_grad=False)
            targets = tensor.Tensor(device=dev, data=np.eye(nclass)[y[idx]],
                                    requires_grad=False)
            loss, _ = forward(inputs, targets)
            for p, gp in autograd.backward(loss):
                sgd.update(p, gp)
            total += float(tensor.to_numpy(loss)[0])
        print(f"Epoch {epoch}: loss {total / (len(y) // args.batch):.4f}, "
              f"{time.perf_counter() - start:.2f}s")
    autograd.training = False
    dummy = tensor.Tensor(data=np.eye(nclass)[yt], requires_grad=False)
    _, logits = forward(tensor.Tensor(data=Xt), dummy)
    pred = tensor.to_numpy(logits).argmax(1)
    print(f"Misclassification error = {100 * np.mean(pred != yt):.1f}%")


if __name__ == "__main__":
    main()
