"""Text (neon.data.text): a text file as minibatches of token sequences for recurrent models.

    train_path, valid_path = Text.create_valid_file('input.txt', valid_split=0.1)
    train = Text(time_steps=64, path=train_path)               # characters by default
    valid = Text(64, valid_path, vocab=train.vocab)
    for X, y in train: ...    # X one-hot (nclass, time_steps * bsz), y: the next tokens

As neon: the tokens are cut to a multiple of bsz * time_steps and laid out as bsz parallel
streams, so sample b of batch i continues sample b of batch i - 1; columns are time-major
(step t of sample b is column t * bsz + b, the recurrent layers' layout); the target of each
token is the next one (the last wraps to the first), or with reverse_target the sequence itself
reversed. A `tokenizer` (a function of the text) gives word-level tokens. `get_prev_target`
yields ((X, Z), y) with Z the targets delayed one step (a decoder's input).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import numpy as np

from .. import NervanaObject


class Text(NervanaObject):
    def __init__(self, time_steps: int, path: str, vocab: Any = None,
                 tokenizer: Callable | None = None, onehot_input: bool = True,
                 reverse_target: bool = False, get_prev_target: bool = False,
                 name: str | None = None) -> None:
        super().__init__(name)
        be = self.be
        if be is None or not be.bsz:
            raise ValueError("Text: create a backend with a batch size first (gen_backend("
                             "batch_size=...))")
        self.seq_length = self.time_steps = int(time_steps)
        self.onehot_input, self.reverse_target = onehot_input, reverse_target
        self.get_prev_target = get_prev_target
        with open(path) as f:
            tokens = self.get_tokens(f.read(), tokenizer)
        per_batch = be.bsz * self.seq_length
        self.nbatches = len(tokens) // per_batch
        if not self.nbatches:
            raise ValueError(f"Text: {path} holds {len(tokens)} tokens, fewer than one "
                             f"minibatch of {be.bsz} x {self.seq_length}")
        tokens = tokens[:self.nbatches * per_batch]
        self.ndata = self.nbatches * be.bsz
        self.vocab = sorted(self.get_vocab(tokens, vocab))
        self.nclass = self.nout = len(self.vocab)
        self.token_to_index = {t: i for i, t in enumerate(self.vocab)}
        self.index_to_token = dict(enumerate(self.vocab))
        X = np.array([self.token_to_index[t] for t in tokens], dtype=np.int64)
        y = X.copy() if reverse_target else np.roll(X, -1)
        self.X = X.reshape(be.bsz, self.nbatches, self.seq_length)
        self.y = y.reshape(be.bsz, self.nbatches, self.seq_length)
        self.shape = (self.nclass, self.seq_length) if onehot_input else (self.seq_length, 1)
        self.decoder_shape = self.shape
        cols = self.seq_length * be.bsz
        self.dev_X = be.iobuf(self.shape if onehot_input else self.seq_length)
        self.dev_y = be.iobuf((self.nclass, self.seq_length))
        self.dev_Z = be.iobuf(self.shape if onehot_input else self.seq_length) \
            if get_prev_target else None
        self._hot = np.eye(self.nclass, dtype=np.float32)
        self._cols = cols
        self.batch_index = 0

    # ---------------------------------------------------------------- neon's helpers
    @staticmethod
    def create_valid_file(path: str, valid_split: float = 0.1) -> tuple[str, str]:
        """Split a text file into <name>_train<ext> and <name>_valid<ext> (the last
        valid_split of its characters); returns their paths."""
        with open(path) as f:
            text = f.read()
        stem, ext = os.path.splitext(path)
        cut = int(len(text) * (1 - valid_split))
        paths = (stem + "_train" + ext, stem + "_valid" + ext)
        for part, out in zip((text[:cut], text[cut:]), paths):
            with open(out, "w") as f:
                f.write(part)
        return paths

    @staticmethod
    def get_tokens(string: str, tokenizer: Callable | None = None) -> Any:
        return string if tokenizer is None else tokenizer(string)

    @staticmethod
    def get_vocab(tokens: Any, vocab: Any = None) -> set:
        if vocab is None:
            return set(tokens)
        vocab = set(vocab)
        missing = set(tokens) - vocab
        if missing:
            raise ValueError(f"Text: the given vocab lacks {len(missing)} of the text's tokens, "
                             f"e.g. {sorted(missing)[:5]}")
        return vocab

    # ---------------------------------------------------------------- iterating
    def reset(self) -> None:
        self.batch_index = 0

    def _columns(self, ids: np.ndarray) -> np.ndarray:
        """(bsz, time_steps) token ids as time-major columns (time_steps * bsz,)."""
        return ids.T.reshape(-1)

    def __iter__(self) -> Iterator:
        self.batch_index = 0
        while self.batch_index < self.nbatches:
            i = self.batch_index
            x = self._columns(self.X[:, i, :])
            target = self.y[:, i, ::-1] if self.reverse_target else self.y[:, i, :]
            y = self._columns(target)
            self.dev_y.set(self._hot[:, y])
            if self.onehot_input:
                self.dev_X.set(self._hot[:, x])
            else:
                self.dev_X.set(self.X[:, i, :].T.astype(np.float32))
            self.batch_index += 1
            if self.get_prev_target:
                bsz = self.be.bsz
                if self.onehot_input:
                    z = np.zeros((self.nclass, self._cols), dtype=np.float32)
                    z[:, bsz:] = self._hot[:, y[:-bsz]]
                else:
                    z = np.zeros((self.seq_length, bsz), dtype=np.float32)
                    z[1:] = target.T[:-1]
                self.dev_Z.set(z)
                yield (self.dev_X, self.dev_Z), self.dev_y
            else:
                yield self.dev_X, self.dev_y


class PTB(NervanaObject):
    """Penn Treebank (Zaremba et al.'s split) from local files ptb.train.txt, ptb.valid.txt and
    ptb.test.txt in `path` (neonlike downloads nothing): `train_iter`, `valid_iter`,
    `test_iter`, `gen_iterators()`, Text iterators sharing the training vocabulary. `tokenizer`
    names a tokenizer of this class ('newline_tokenizer': words, a newline as '<eos>'); None
    reads characters."""

    PHASES = ("train", "test", "valid")

    def __init__(self, timesteps: int, path: str = ".", onehot_input: bool = True,
                 tokenizer: str | None = None, reverse_target: bool = False,
                 get_prev_target: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        if tokenizer is not None and not callable(getattr(type(self), tokenizer, None)):
            raise ValueError(f"PTB: no tokenizer named {tokenizer!r} (have "
                             "'newline_tokenizer')")
        self.timesteps, self.path, self.onehot_input = timesteps, path, onehot_input
        self.tokenizer = tokenizer
        self.tokenizer_func = getattr(self, tokenizer) if tokenizer else None
        self.reverse_target, self.get_prev_target = reverse_target, get_prev_target
        self.vocab = None
        self._data_dict: dict | None = None

    @staticmethod
    def newline_tokenizer(s: str) -> list:
        return s.replace("\n", "<eos>").split()

    @staticmethod
    def gen_filename(phase: str) -> str:
        return f"ptb.{phase}.txt"

    def load_data(self) -> dict:
        paths = {p: os.path.join(self.path, self.gen_filename(p)) for p in self.PHASES}
        missing = [p for p in paths.values() if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"PTB: {missing} not found; put the Penn Treebank text files "
                                    "(ptb.train.txt, ptb.valid.txt, ptb.test.txt) there")
        self.file_paths = paths
        return paths

    def gen_iterators(self) -> dict:
        if self._data_dict is None:
            paths = self.load_data()
            self._data_dict = {}
            for phase in self.PHASES:
                self._data_dict[phase] = Text(
                    self.timesteps, paths[phase], vocab=self.vocab, tokenizer=self.tokenizer_func,
                    onehot_input=self.onehot_input, reverse_target=self.reverse_target,
                    get_prev_target=self.get_prev_target and phase == "train")
                self.vocab = self.vocab or self._data_dict["train"].vocab
        return self._data_dict

    @property
    def data_dict(self) -> dict:
        return self.gen_iterators()

    train_iter = property(lambda self: self.gen_iterators()["train"])
    valid_iter = property(lambda self: self.gen_iterators()["valid"])
    test_iter = property(lambda self: self.gen_iterators()["test"])


__all__ = ["Text", "PTB"]
