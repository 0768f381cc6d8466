#!/usr/bin/env python
"""A small convnet the neon way: conv-pool-conv-pool-affine, trained on MNIST when its files are in
--data_dir, on scikit-learn's 8x8 digits otherwise, then the misclassification error.

    python examples/convnet.py                 # -e 10 -z 128 -w ~/nervana/data
    mpiexec -n 2 python examples/convnet.py --mpi   # data-parallel over MPI
"""
from neonlike.callbacks.callbacks import Callbacks
from neonlike.data import ArrayIterator, MNIST, find_mnist, load_digits
from neonlike.initializers import Constant, Kaiming, GlorotUniform
from neonlike.layers import Affine, Conv, GeneralizedCost, Pooling
from neonlike.models import Model
from neonlike.optimizers import GradientDescentMomentum
from neonlike.transforms import CrossEntropyMulti, Misclassification, Rectlin, Softmax
from neonlike.util.argparser import NeonArgparser

parser = NeonArgparser(__doc__)
args = parser.parse_args()

if find_mnist(args.data_dir):
    dataset = MNIST(path=args.data_dir)
    train_set, valid_set = dataset.train_iter, dataset.valid_iter
else:
    (X_train, y_train), (X_test, y_test), nclass = load_digits()
    train_set = ArrayIterator(X_train, y_train, nclass=nclass, lshape=(1, 8, 8))
    valid_set = ArrayIterator(X_test, y_test, nclass=nclass, lshape=(1, 8, 8))
    if args.rank == 0:
        print(f"no MNIST files under {args.data_dir}: scikit-learn's digits (8 x 8)")

layers = [Conv((5, 5, 16), init=Kaiming(), bias=Constant(0.0), padding=2, activation=Rectlin()),
          Pooling(2),
          Conv((5, 5, 32), init=Kaiming(), bias=Constant(0.0), padding=2, activation=Rectlin()),
          Pooling(2),
          Affine(nout=10, init=GlorotUniform(), bias=Constant(0.0), activation=Softmax())]
model = Model(layers=layers)
optimizer = GradientDescentMomentum(0.01, momentum_coef=0.9)
if args.mpi:
    from neonlike.distributed import DistributedOptimizer
    optimizer = DistributedOptimizer(optimizer)
model.fit(train_set, optimizer=optimizer,
          num_epochs=args.epochs, cost=GeneralizedCost(costfunc=CrossEntropyMulti()),
          callbacks=Callbacks(model, eval_set=valid_set, **args.callback_args))
error_rate = model.eval(valid_set, metric=Misclassification())
if args.rank == 0:
    print(f"Misclassification error = {error_rate[0] * 100:.1f}%")
