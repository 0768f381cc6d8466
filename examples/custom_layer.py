#!/usr/bin/env python
"""A user's layer written as op-trees, its gradients from Autodiff, trained in a Model.

PReLU (He et al., 2015): y = max(x, 0) + alpha * min(x, 0) with one learned slope alpha per
feature. fprop is one op-tree assignment (one fused kernel); bprop asks Autodiff for the gradients
of that same tree with respect to the input and to alpha (summed over the batch: alpha is
(features, 1) and broadcasts), executed straight into the layer's buffers. Autodiff memoises the
gradient plan of the tree's structure, so building it again every minibatch is cheap.

    python examples/custom_layer.py          # scikit-learn's digits, 10 epochs
"""
from neonlike.backends import Autodiff, gen_backend
from neonlike.callbacks.callbacks import Callbacks
from neonlike.data import ArrayIterator, load_digits
from neonlike.initializers import Constant, GlorotUniform
from neonlike.layers import Affine, GeneralizedCost
from neonlike.layers.layer import ParameterLayer
from neonlike.models import Model
from neonlike.optimizers import GradientDescentMomentum
from neonlike.transforms import CrossEntropyBinary, Logistic, Misclassification


class PReLU(ParameterLayer):
    def __init__(self, init=Constant(0.25), name=None):
        super().__init__(init, name)

    def configure(self, in_obj):
        super().configure(in_obj)
        self.out_shape = self.in_shape
        self.weight_shape = (self.nin, 1)          # alpha: one slope per feature
        return self

    def tree(self, x):
        be = self.be
        return be.maximum(x, 0.0) + self.W * be.minimum(x, 0.0)

    def fprop(self, inputs, inference=False):
        self.inputs = inputs
        self.outputs[:] = self.tree(inputs)
        return self.outputs

    def bprop(self, error, alpha=1.0, beta=0.0):
        ad = Autodiff(self.tree(self.inputs), self.be, next_error=error)
        if self.deltas is not None:
            ad.back_prop_grad([self.inputs, self.W], [self.deltas, self.dW])
        else:
            ad.back_prop_grad([self.W], [self.dW])
        return self.deltas


def main():
    gen_backend("cpu", rng_seed=0, batch_size=32)
    (X, y), (Xt, yt), nclass = load_digits()
    train = ArrayIterator(X, y, nclass=nclass)
    valid = ArrayIterator(Xt, yt, nclass=nclass)
    model = Model([Affine(64, init=GlorotUniform()), PReLU(),
                   Affine(10, init=GlorotUniform(), activation=Logistic(shortcut=True))])
    model.fit(train, cost=GeneralizedCost(CrossEntropyBinary()),
              optimizer=GradientDescentMomentum(0.05, momentum_coef=0.9), num_epochs=10,
              callbacks=Callbacks(model, eval_set=valid))
    prelu = model.layers.layers[1]
    slopes = prelu.W.get()
    print(f"learned PReLU slopes: mean {slopes.mean():.3f}, range {slopes.min():.3f}..{slopes.max():.3f}")
    print(f"Misclassification error = {model.eval(valid, metric=Misclassification())[0] * 100:.1f}%")


if __name__ == "__main__":
    main()
