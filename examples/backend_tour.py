"""A tour of neonlike's backend, after neon's backend guide (seed 002).

Run: python examples/backend_tour.py [cpu|mkl]
"""
import sys

import numpy as np

from neonlike.backends import gen_backend
from neonlike.backends.backend import OpTreeNode

be = gen_backend(backend=sys.argv[1] if len(sys.argv) > 1 else "cpu", rng_seed=0)
print(f"backend: {be!r}")

# Tensors: allocation and conversion
x = be.array(be.rng.uniform(-4, 4, (4, 6)), name="x")
w = be.array(be.rng.normal(0, 0.1, (3, 4)), name="w")
print("x", x.shape, x.dtype, "| x[:, 1]", x[:, 1].shape, "| x[1]", x[1].shape)

# An op-tree is built lazily and runs only when assigned
f = 1 / (1 + be.exp(-1 * x))
print("op-tree:", f.pp())
fval = be.empty(x.shape)
fval[:] = f
assert np.allclose(fval.get(), 1 / (1 + np.exp(-x.get())), rtol=1e-6)
print("logistic(x)[0]:", np.round(fval.get()[0], 4))

# The tuple form of a tree, as neon printed it
x0, x1 = be.ones((2, 2), name="x0"), be.ones((2, 2), name="x1")
print("tree tuple:", x0 + x1)
print("post-order stack:", [d["op"] if isinstance(d, dict) else getattr(d, "name", d) for d in (x0 + 2 * x1).traverse([])])

# Reductions with axes and keepdims; softmax over axis 0 written as one tree
sm = be.empty(x.shape)
sm[:] = be.exp(x - be.max(x, axis=0)) / be.sum(be.exp(x - be.max(x, axis=0)), axis=0)
print("softmax columns sum to 1:", np.allclose(sm.get().sum(axis=0), 1, rtol=1e-6))
print("mean/std over axis 1:", be.mean(x, axis=1, keepdims=False).asnumpyarray().round(3),
      be.std(x, axis=1, keepdims=False).asnumpyarray().round(3))

# dot and a small layer: relu(w @ x) in one statement
h = be.empty((3, 6))
h[:] = be.relu(be.dot(w, x))
assert np.allclose(h.get(), np.maximum(w.get() @ x.get(), 0), rtol=1e-5, atol=1e-6)
print("relu(w . x) shape:", h.shape)

# Shapes are checked when the tree is built
try:
    x + w
except ValueError as e:
    print("build-time check:", e)

# One-hot targets and argmax
labels = be.array(np.array([[2, 0, 1, 2, 1, 0]]), dtype=np.int32)
t = be.empty((3, 6))
be.onehot(labels, axis=0, out=t)
print("onehot argmax recovers labels:", be.argmax(t, axis=0).asnumpyarray().ravel())
print("OpTreeNode.shape(x):", OpTreeNode.shape(x))
