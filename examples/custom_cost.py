#!/usr/bin/env python
"""A user's cost written as an op-tree, its gradient from Autodiff, trained in a Model.

Label-smoothed cross-entropy on logits: the network's last layer has no activation, and the cost
takes the log-softmax itself: cost(x, t) = -sum((t * (1 - eps) + eps / K) * log_softmax(x)) per
sample. The class defines only `__call__`; Cost.bprop asks Autodiff for d cost / d x (which is
softmax(x) minus the smoothed targets), so nothing is derived by hand.

    python examples/custom_cost.py          # scikit-learn's digits, 10 epochs
"""
from neonlike.backends import gen_backend
from neonlike.callbacks.callbacks import Callbacks
from neonlike.data import ArrayIterator, load_digits
from neonlike.initializers import GlorotUniform
from neonlike.layers import Affine, GeneralizedCost
from neonlike.models import Model
from neonlike.optimizers import Adam
from neonlike.transforms import Misclassification, Rectlin
from neonlike.transforms.cost import Cost


class SmoothedCrossEntropyOnLogits(Cost):
    def __init__(self, eps=0.1, name=None):
        super().__init__(name)
        self.eps = eps

    def __call__(self, x, t):
        be = self.be
        shifted = x - be.max(x, axis=0)
        log_softmax = shifted - be.log(be.sum(be.exp(shifted), axis=0))
        k = x.shape[0]
        return be.sum(-(t * (1.0 - self.eps) + self.eps / k) * log_softmax, axis=0)


def main():
    gen_backend("cpu", rng_seed=0, batch_size=32)
    (X, y), (Xt, yt), nclass = load_digits()
    train = ArrayIterator(X, y, nclass=nclass)
    valid = ArrayIterator(Xt, yt, nclass=nclass)
    model = Model([Affine(100, init=GlorotUniform(), activation=Rectlin()),
                   Affine(10, init=GlorotUniform())])          # logits: no activation
    model.fit(train, cost=GeneralizedCost(SmoothedCrossEntropyOnLogits(eps=0.1)),
              optimizer=Adam(learning_rate=0.003), num_epochs=10,
              callbacks=Callbacks(model, eval_set=valid))
    print(f"Misclassification error = {model.eval(valid, metric=Misclassification())[0] * 100:.1f}%")


if __name__ == "__main__":
    main()
