#!/usr/bin/env python
"""
Train a character-level LSTM on a small text shipped with neonlike and sample text from it,
in the manner of neon's char_lstm.py and text_generation_lstm.py (Karpathy's char-rnn; Graves,
Generating sequences with recurrent neural networks, arXiv:1308.0850). Nothing is downloaded:
the text is neonlike/data/text/garden.txt (public domain), or --text FILE.

Usage:

    python examples/char_lstm.py -e 40 --num_predict 400

"""
import os
import shutil
import tempfile

import numpy as np

import neonlike.data
from neonlike import logger as neon_logger
from neonlike.callbacks.callbacks import Callbacks
from neonlike.data import Text
from neonlike.initializers import Uniform
from neonlike.layers import GeneralizedCost, LSTM, Affine
from neonlike.models import Model
from neonlike.optimizers import RMSProp
from neonlike.transforms import Logistic, Tanh, Softmax, CrossEntropyMulti
from neonlike.util.argparser import NeonArgparser

GARDEN = os.path.join(os.path.dirname(neonlike.data.__file__), 'text', 'garden.txt')

parser = NeonArgparser(__doc__, default_overrides=dict(batch_size=16, epochs=40))
parser.add_argument('--text', default=GARDEN, help='the text file to learn')
parser.add_argument('--num_predict', type=int, default=400, help='characters to sample')
parser.add_argument('--seed_text', default='The gardener', help='the sample starts with this')
parser.add_argument('--temperature', type=float, default=0.7, help='sampling temperature')
args = parser.parse_args()

# hyperparameters
time_steps = 32
hidden_size = 128
gradient_clip_value = 5

# the last tenth of the text is the validation set; one vocabulary for both
with open(args.text) as f:
    text = f.read()
vocab = sorted(set(text))
workdir = tempfile.mkdtemp(prefix='char_lstm_')
cut = int(len(text) * 0.9)
paths = []
for name, part in (('train.txt', text[:cut]), ('valid.txt', text[cut:])):
    paths.append(os.path.join(workdir, name))
    with open(paths[-1], 'w') as f:
        f.write(part)
train_set = Text(time_steps, paths[0], vocab=vocab)
valid_set = Text(time_steps, paths[1], vocab=vocab)
neon_logger.display('%d characters, %d distinct; %d training batches of %d x %d'
                    % (len(text), len(vocab), train_set.nbatches, args.batch_size, time_steps))

init = Uniform(low=-0.08, high=0.08)


def char_model():
    return Model(layers=[LSTM(hidden_size, init, activation=Tanh(), gate_activation=Logistic()),
                         Affine(len(vocab), init, bias=init, activation=Softmax())])


model = char_model()
cost = GeneralizedCost(costfunc=CrossEntropyMulti(usebits=True))
optimizer = RMSProp(gradient_clip_value=gradient_clip_value, stochastic_round=args.rounding)
callbacks = Callbacks(model, eval_set=valid_set, **args.callback_args)
model.fit(train_set, optimizer=optimizer, num_epochs=args.epochs, cost=cost,
          callbacks=callbacks)

# next-character accuracy on the validation text
correct = total = 0
for x, t in valid_set:
    y = model.fprop(x, inference=True)
    correct += int((y.get().argmax(0) == t.get().argmax(0)).sum())
    total += t.shape[1]
neon_logger.display('Validation: next character right %.1f%%' % (100.0 * correct / total))

# sampling: a model of one sequence and one step, the trained weights, the state carried on
weights = os.path.join(workdir, 'char_lstm.pkl')
model.save_params(weights)
model.be.bsz = 1
sampler = char_model()
sampler.initialize(dataset=(len(vocab), 1))
sampler.load_params(weights, load_states=False)
shutil.rmtree(workdir)

rng = np.random.RandomState(args.rng_seed)
index = {c: i for i, c in enumerate(vocab)}
x = sampler.be.zeros((len(vocab), 1))
seed = [c for c in args.seed_text if c in index] or [vocab[0]]
for c in seed:
    x.fill(0)
    x[index[c], 0] = 1
    y = sampler.fprop(x, inference=True)
generated = []
for _ in range(args.num_predict):
    logp = np.log(np.maximum(y.get()[:, -1].astype(np.float64), 1e-12)) / args.temperature
    p = np.exp(logp - logp.max())
    c = rng.choice(len(vocab), p=p / p.sum())
    generated.append(vocab[c])
    x.fill(0)
    x[c, 0] = 1
    y = sampler.fprop(x, inference=True)
neon_logger.display('Sample:\n' + ''.join(seed + generated))
