#!/usr/bin/env python
"""An MLP in Nervana Graph (ngraph-python, late 2016) on neonlike's engine: named axes, `ng.deriv`
for the gradients and `ng.assign` for momentum SGD, then the misclassification error on the test
set.

The model is neon's mnist_mlp (features-100-10, Rectlin hidden layer, Gaussian(0, 0.01)
weights, momentum SGD 0.1 / 0.9) with a softmax output and multiclass cross entropy. Data are
feature-major as in neon: a minibatch is (features, batch), with the batch on the neon front
end's axis `ax.N`. MNIST from --data_dir (the four idx files or mnist.pkl.gz; nothing is
downloaded); where the files are not there, scikit-learn's bundled 8x8 digits (64-100-10).

    python examples/ngraph_mlp.py                 # -b cpu -e 10 -z 32 -w ~/nervana/data
    python examples/ngraph_mlp.py -b numpy        # the NumPy transformer (the reference)
"""
import argparse
import os
import time

import numpy as np

import neonlike.ngraph as ng
import neonlike.ngraph.transformers as ngt
from neonlike.data import find_mnist, load_digits, load_mnist
from neonlike.ngraph.frontends.neon import ax

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("-b", "--backend", default="cpu", choices=ngt.transformer_choices(),
                    help="the transformer: numpy (reference), cpu, mkl or gpu (default cpu)")
parser.add_argument("-e", "--epochs", type=int, default=10)
parser.add_argument("-z", "--batch_size", type=int, default=32)
parser.add_argument("-w", "--data_dir", default=os.path.join("~", "nervana", "data"))
parser.add_argument("-r", "--rng_seed", type=int, default=0)
parser.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
parser.add_argument("--momentum", type=float, default=0.9, help="momentum (default 0.9)")
args = parser.parse_args()

# the data: MNIST where its files are, else the digits (neon's examples' loaders)
if find_mnist(args.data_dir):
    (X_train, y_train), (X_test, y_test), nclass = load_mnist(args.data_dir)
    print(f"MNIST from {args.data_dir}: {len(y_train)} training, {len(y_test)} test images")
else:
    (X_train, y_train), (X_test, y_test), nclass = load_digits()
    print(f"no MNIST files under {args.data_dir}: scikit-learn's digits, {len(y_train)} "
          f"training and {len(y_test)} test images")

# axes: the batch and the classes are the neon front end's; features and hidden units are ours
ax.N.length = args.batch_size
ax.Y.length = nclass
F = ng.make_axis(X_train.shape[1], name="F")
H = ng.make_axis(100, name="H")

# the graph: placeholders for a minibatch, variables for the weights
x = ng.placeholder([F, ax.N])
t = ng.placeholder([ax.Y, ax.N])            # one-hot targets
rng = np.random.default_rng(args.rng_seed)
w1 = ng.variable([H, F - 1], initial_value=rng.normal(0.0, 0.01, (H.length, F.length)))
w2 = ng.variable([ax.Y, H - 1], initial_value=rng.normal(0.0, 0.01, (nclass, H.length)))

hidden = ng.maximum(ng.dot(w1, x), 0.0)     # dot contracts F - 1 with F: axes [H, N]
logits = ng.dot(w2, hidden)                 # [Y, N]
cost = ng.mean(ng.cross_entropy_multi(ng.softmax(logits), t), out_axes=())
errors = ng.not_equal(ng.argmax(logits, out_axes=[ax.N]), ng.argmax(t, out_axes=[ax.N]))

# momentum SGD: every velocity from the gradients at the current weights, then every weight.
# Under saved_user_deps the updates run only where asked for (the training step), not in every
# computation that reads a weight (seed 003: the optimizer's use of the context).
updates = []
with ng.Op.saved_user_deps():
    velocities = [ng.variable(w.axes, initial_value=0.0) for w in (w1, w2)]
    for w, v in zip((w1, w2), velocities):
        updates.append(ng.assign(v, args.momentum * v - args.lr * ng.deriv(cost, w)))
    for w, v in zip((w1, w2), velocities):
        updates.append(ng.assign(w, w + v))

transformer = ngt.make_transformer_factory(args.backend)()
train_step = transformer.computation([cost] + updates, x, t)
evaluate = transformer.computation(errors, x, t)

eye = np.eye(nclass, dtype=np.float32)
nbatch = len(y_train) // args.batch_size    # the last partial minibatch of each epoch is dropped
order_rng = np.random.default_rng(args.rng_seed)
start = time.perf_counter()
for epoch in range(args.epochs):
    order = order_rng.permutation(len(y_train))
    total = 0.0
    for i in range(nbatch):
        idx = order[i * args.batch_size:(i + 1) * args.batch_size]
        total += float(train_step(X_train[idx].T, eye[y_train[idx]].T)[0])
    print(f"Epoch {epoch}: {nbatch} batches, cost {total / nbatch:.4f}, "
          f"{time.perf_counter() - start:.2f}s")

# the test set in minibatches; the last one is padded, and the padding's predictions not counted
wrong = 0
for i in range(0, len(y_test), args.batch_size):
    n = min(args.batch_size, len(y_test) - i)
    xb = np.zeros((F.length, args.batch_size), dtype=np.float32)
    tb = np.zeros((nclass, args.batch_size), dtype=np.float32)
    xb[:, :n], tb[:, :n] = X_test[i:i + n].T, eye[y_test[i:i + n]].T
    wrong += int(evaluate(xb, tb)[:n].sum())
print(f"Misclassification error = {100.0 * wrong / len(y_test):.1f}%")
