"""Ticker (neon.data.ticker): machine-generated sequence tasks of the Neural Turing Machine paper
(Graves et al. 2014, arXiv:1410.5401) as a data set for recurrent models.

    train_set = Ticker(CopyTask(seq_len_max=5, vec_size=8))   # after gen_backend(batch_size=...)
    for x, (t, mask) in train_set: ...      # GeneralizedCostMask takes (t, mask) as its target

Each minibatch draws one sequence length l (1..seq_len_max) for all its samples. The buffers are
sized for the longest sequence (task.time_steps_max steps, columns time-major: step s of sample b
is column s * bsz + b, the recurrent layers' layout); the steps past this minibatch's length are
zero in x and t and masked out (mask 0). An epoch is 100 freshly drawn minibatches, as neon's.

Tasks (neon's channel layout):
  CopyTask(l_max, w)              in: w bits + start + stop; the l vectors are shown after the
                                  start step, then repeated at the output after the stop step.
  RepeatCopyTask(l_max, r_max, w) the stop channel carries the repeat count r; the output is the
                                  sequence r times, then an end bit in an extra output channel.
  PrioritySortTask(l_max, w)      each vector has a priority in (-1, 1); the output is the
                                  vectors sorted by priority.

Differences from neon: the random draws come from the backend's host RandomState (`be.rng`,
seeded by gen_backend's rng_seed, so `-r SEED` repeats a run) instead of numpy's global one; and
RepeatCopyTask honours repeat_count_max (neon's set it to seq_len_max, a bug).
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from .. import NervanaObject


class Task(NervanaObject):
    """A ticker task: `nin`, `nout`, `time_steps_max` and `synthesize(x, t, mask)`, which writes
    a new minibatch into the three device buffers."""

    nin: int
    nout: int
    time_steps_max: int

    @property
    def max_columns(self) -> int:
        return self.time_steps_max * self.be.bsz

    def fetch_io(self, time_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """Zeroed host (inputs, outputs) arrays for a minibatch of `time_steps` steps."""
        columns = time_steps * self.be.bsz
        return np.zeros((self.nin, columns)), np.zeros((self.nout, columns))

    def fill_buffers(self, time_steps: int, inputs: np.ndarray, outputs: np.ndarray,
                     in_tensor: Any, out_tensor: Any, mask: Any) -> None:
        """Copy a minibatch of `time_steps` steps into the full-length device buffers, with
        the mask over the steps it uses."""
        columns = time_steps * self.be.bsz
        for host, dev in ((inputs, in_tensor), (outputs, out_tensor)):
            full = np.zeros((host.shape[0], self.max_columns), dtype=np.float32)
            full[:, :columns] = host
            dev.set(full)
        m = np.zeros((self.nout, self.max_columns), dtype=np.float32)
        m[:, :columns] = 1
        mask.set(m)

    def _rng(self) -> np.random.RandomState:
        return self.be.rng

    def _sequence(self, seq_len: int) -> np.ndarray:
        """Random bit vectors, (vec_size, seq_len * bsz), time-major."""
        return self._rng().randint(2, size=(self.vec_size, seq_len * self.be.bsz))

    def synthesize(self, in_tensor: Any, out_tensor: Any, mask: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define synthesize(x, t, mask)")


class CopyTask(Task):
    """The copy task: `seq_len_max` bit vectors of width `vec_size` (8 in the paper), shown
    after a start bit and to be reproduced after the stop bit."""

    def __init__(self, seq_len_max: int, vec_size: int) -> None:
        self.seq_len_max, self.vec_size = int(seq_len_max), int(vec_size)
        self.nout = self.vec_size
        self.nin = self.vec_size + 2               # + the start and stop channels
        self.time_steps_max = self.time_steps_func(self.seq_len_max)

    @staticmethod
    def time_steps_func(seq_len: int) -> int:
        return 2 * seq_len + 2

    def synthesize(self, in_tensor: Any, out_tensor: Any, mask: Any) -> None:
        bsz = self.be.bsz
        seq_len = self._rng().randint(1, self.seq_len_max + 1)
        time_steps = self.time_steps_func(seq_len)
        inputs, outputs = self.fetch_io(time_steps)
        seq = self._sequence(seq_len)
        stop = bsz * (seq_len + 1)
        inputs[-2, :bsz] = 1                        # start bit, step 0
        inputs[:self.vec_size, bsz:stop] = seq      # steps 1..l
        inputs[-1, stop:stop + bsz] = 1             # stop bit, step l + 1
        outputs[:, bsz * (seq_len + 2):] = seq      # steps l + 2 .. 2l + 1
        self.fill_buffers(time_steps, inputs, outputs, in_tensor, out_tensor, mask)


class RepeatCopyTask(Task):
    """The repeat-copy task: the sequence, then the repeat count r (1..repeat_count_max) in the
    stop channel; the output is the sequence r times and an end bit."""

    def __init__(self, seq_len_max: int, repeat_count_max: int, vec_size: int) -> None:
        self.seq_len_max, self.vec_size = int(seq_len_max), int(vec_size)
        self.repeat_count_max = int(repeat_count_max)
        self.nout = self.vec_size + 1              # + the end-of-output channel
        self.nin = self.vec_size + 2               # + the start and stop/count channels
        self.time_steps_max = self.time_steps_func(self.seq_len_max, self.repeat_count_max)

    @staticmethod
    def time_steps_func(seq_len: int, repeats: int) -> int:
        return seq_len * (repeats + 1) + 3

    def synthesize(self, in_tensor: Any, out_tensor: Any, mask: Any) -> None:
        bsz, rng = self.be.bsz, self._rng()
        seq_len = rng.randint(1, self.seq_len_max + 1)
        repeats = rng.randint(1, self.repeat_count_max + 1)
        time_steps = self.time_steps_func(seq_len, repeats)
        inputs, outputs = self.fetch_io(time_steps)
        seq = self._sequence(seq_len)
        stop = bsz * (seq_len + 1)
        inputs[-2, :bsz] = 1
        inputs[:self.vec_size, bsz:stop] = seq
        inputs[-1, stop:stop + bsz] = repeats
        for i in range(repeats):
            start = bsz * ((i + 1) * seq_len + 2)
            outputs[:-1, start:start + seq_len * bsz] = seq
        outputs[-1, -bsz:] = 1                     # end bit, the last step
        self.fill_buffers(time_steps, inputs, outputs, in_tensor, out_tensor, mask)


class PrioritySortTask(Task):
    """The priority-sort task: bit vectors each with a scalar priority in (-1, 1) (the last
    input channel); the output is the vectors in ascending order of priority."""

    def __init__(self, seq_len_max: int, vec_size: int) -> None:
        self.seq_len_max, self.vec_size = int(seq_len_max), int(vec_size)
        self.nout = self.vec_size
        self.nin = self.vec_size + 3               # + start, stop and priority channels
        self.time_steps_max = self.time_steps_func(self.seq_len_max)

    time_steps_func = staticmethod(CopyTask.time_steps_func)

    def synthesize(self, in_tensor: Any, out_tensor: Any, mask: Any) -> None:
        bsz, rng = self.be.bsz, self._rng()
        seq_len = rng.randint(1, self.seq_len_max + 1)
        time_steps = self.time_steps_func(seq_len)
        inputs, outputs = self.fetch_io(time_steps)
        seq = np.zeros((self.nin, seq_len * bsz))
        seq[:self.vec_size] = self._sequence(seq_len)
        seq[-1] = rng.uniform(-1, 1, size=seq_len * bsz)
        stop = bsz * (seq_len + 1)
        inputs[-3, :bsz] = 1
        inputs[-2, stop:stop + bsz] = 1
        inputs[:, bsz:stop] = seq
        steps = seq.reshape(self.nin, seq_len, bsz)           # (channel, step, sample)
        order = np.argsort(steps[-1], axis=0, kind="stable")  # per sample, over its steps
        ranked = np.take_along_axis(steps, order[None], axis=1)
        outputs[:, bsz * (seq_len + 2):] = ranked[:self.nout].reshape(self.nout, -1)
        self.fill_buffers(time_steps, inputs, outputs, in_tensor, out_tensor, mask)


class Ticker(NervanaObject):
    """A ticker data set over `task`: iterating yields `nbatches` (100) new minibatches
    `(x, (t, mask))`, in buffers of `shape` = (nin, time_steps_max) per sample."""

    def __init__(self, task: Task, nbatches: int = 100, name: str | None = None) -> None:
        super().__init__(name)
        if self.be is None or not self.be.bsz:
            raise ValueError("Ticker: create a backend with a batch size first (gen_backend("
                             "batch_size=...))")
        self.task = task
        self.batch_index = 0
        self.nbatches = int(nbatches)
        self.ndata = self.nbatches * self.be.bsz
        self.nin, self.nout = task.nin, task.nout
        self.shape = (self.nin, task.time_steps_max)
        self.dev_X = self.be.iobuf((self.nin, task.time_steps_max))
        self.dev_y = self.be.iobuf((self.nout, task.time_steps_max))
        self.mask = self.be.iobuf((self.nout, task.time_steps_max))

    def reset(self) -> None:
        """Nothing to rewind: every minibatch is new."""

    def __iter__(self) -> Iterator:
        self.batch_index = 0
        while self.batch_index < self.nbatches:
            self.task.synthesize(self.dev_X, self.dev_y, self.mask)
            self.batch_index += 1
            yield self.dev_X, (self.dev_y, self.mask)


__all__ = ["Ticker", "Task", "CopyTask", "RepeatCopyTask", "PrioritySortTask"]
