"""SINGA MLP steps on the default (cpu) device or the gpu: the losses, for comparison."""
import sys
import numpy as np
from neonlike.data import load_digits
from neonlike.singa import autograd, device, opt, tensor
from neonlike.singa.tensor import Tensor
if sys.argv[1] == "gpu":
    device.create_cuda_gpu()
(X, y), _, nclass = load_digits()
r = np.random.default_rng(0)
w0 = Tensor(data=r.normal(0, 0.1, (64, 100)).astype(np.float32), requires_grad=True, stores_grad=True)
b0 = Tensor(data=np.zeros((1, 100), np.float32), requires_grad=True, stores_grad=True)
w1 = Tensor(data=r.normal(0, 0.1, (100, nclass)).astype(np.float32), requires_grad=True, stores_grad=True)
b1 = Tensor(data=np.zeros((1, nclass), np.float32), requires_grad=True, stores_grad=True)
sgd = opt.SGD(0.1, momentum=0.9)
autograd.training = True
losses = []
for i in range(0, 32 * 40, 32):
    x = Tensor(data=X[i:i + 32].astype(np.float32), requires_grad=False)
    t = Tensor(data=np.eye(nclass, dtype=np.float32)[y[i:i + 32]], requires_grad=False)
    h = autograd.relu(autograd.add_bias(autograd.matmul(x, w0), b0))
    loss = autograd.softmax_cross_entropy(autograd.add_bias(autograd.matmul(h, w1), b1), t)
    for p, g in autograd.backward(loss):
        sgd.update(p, g)
    losses.append(float(tensor.to_numpy(loss)[0]))
print(sys.argv[1], w0.device if hasattr(w0, "device") else "", " ".join(f"{v:.5f}" for v in losses[::5]), f"{losses[-1]:.6f}")
