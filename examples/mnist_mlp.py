#!/usr/bin/env python
"""neon's examples/mnist_mlp.py on neonlike: a 784-100-10 MLP (Rectlin, then Logistic) trained with
CrossEntropyBinary and momentum SGD, then the misclassification error on the test set.

Data: MNIST from --data_dir (the four idx files or mnist.pkl.gz; nothing is downloaded); where the
files are not there, scikit-learn's bundled 8x8 digits (64-100-10).

    python examples/mnist_mlp.py                   # -e 10 -z 128 -w ~/nervana/data -b mkl
    mpiexec -n 2 python examples/mnist_mlp.py --mpi   # data-parallel: batch 128 on each rank
"""
from neonlike.callbacks.callbacks import Callbacks
from neonlike.data import ArrayIterator, MNIST, find_mnist, load_digits
from neonlike.initializers import Gaussian
from neonlike.layers import Affine, GeneralizedCost
from neonlike.models import Model
from neonlike.optimizers import GradientDescentMomentum
from neonlike.transforms import CrossEntropyBinary, Logistic, Misclassification, Rectlin
from neonlike.util.argparser import NeonArgparser

# parse the command line arguments (this also makes the backend)
parser = NeonArgparser(__doc__)
args = parser.parse_args()

# the data: MNIST where its files are, else the digits
if find_mnist(args.data_dir):
    dataset = MNIST(path=args.data_dir)
    train_set, valid_set = dataset.train_iter, dataset.valid_iter
    if args.rank == 0:
        print(f"MNIST from {args.data_dir}: {train_set.ndata} training, {valid_set.ndata} test images")
else:
    (X_train, y_train), (X_test, y_test), nclass = load_digits()
    train_set = ArrayIterator(X_train, y_train, nclass=nclass, lshape=(1, 8, 8))
    valid_set = ArrayIterator(X_test, y_test, nclass=nclass, lshape=(1, 8, 8))
    if args.rank == 0:
        print(f"no MNIST files under {args.data_dir}: scikit-learn's digits, {train_set.ndata} "
              f"training and {valid_set.ndata} test images")

# setup weight initialization function
init_norm = Gaussian(loc=0.0, scale=0.01)

# setup model layers
layers = [Affine(nout=100, init=init_norm, activation=Rectlin()),
          Affine(nout=10, init=init_norm, activation=Logistic(shortcut=True))]

# setup cost function as CrossEntropy
cost = GeneralizedCost(costfunc=CrossEntropyBinary())

# setup optimizer
optimizer = GradientDescentMomentum(0.1, momentum_coef=0.9, stochastic_round=False)
if args.mpi:   # the one line that makes the script data-parallel
    from neonlike.distributed import DistributedOptimizer
    optimizer = DistributedOptimizer(optimizer)

# initialize model object
mlp = Model(layers=layers)

# configure callbacks
callbacks = Callbacks(mlp, eval_set=valid_set, **args.callback_args)

# run fit
mlp.fit(train_set, optimizer=optimizer, num_epochs=args.epochs, cost=cost, callbacks=callbacks)
error_rate = mlp.eval(valid_set, metric=Misclassification())
if args.rank == 0:
    print(f"Misclassification error = {error_rate[0] * 100:.1f}%")
