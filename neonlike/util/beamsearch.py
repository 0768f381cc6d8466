"""Beam search over a trained Seq2Seq (neon.util.beamsearch).

    search = BeamSearch(seq2seq)
    best = search.beamsearch(inputs, num_beams=5)      # (steps, batch) token ids, a device tensor
    search.candidates, search.scores                   # every beam's tokens and log score

The encoder runs once; then, each step, the decoder runs one step for every live beam from that
beam's decoder states, and of all (beam, token) extensions the num_beams with the highest summed
log-probability are kept, separately for each sample of the batch. The decoder's outputs are
taken as probabilities (a softmax): a beam's score is the sum of the logs of its tokens'.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import NervanaObject


class BeamSearch(NervanaObject):
    """Beam search with a Seq2Seq container (its decoder is switched to single steps)."""

    def __init__(self, seq2seq: Any) -> None:
        super().__init__(name=None)
        if not hasattr(seq2seq, "decoder") or not hasattr(seq2seq, "encoder"):
            raise TypeError(f"BeamSearch: needs a Seq2Seq container, got "
                            f"{type(seq2seq).__name__}")
        self.layers = seq2seq
        self.hasLUT = seq2seq.hasLUT
        seq2seq.decoder.switch_mode(inference=True)
        self.z_shape: Any = 1 if self.hasLUT else (seq2seq.out_shape[0], 1)

    def beamsearch(self, inputs: Any, num_beams: int = 5, steps: int | None = None) -> Any:
        """Search `steps` tokens (default: the decoder's sequence length) with num_beams beams;
        returns the best beam's tokens, (steps, batch) (the last beam: beams are kept in
        ascending order of score)."""
        if num_beams < 1:
            raise ValueError(f"BeamSearch: num_beams must be at least 1, got {num_beams}")
        be, s2s = self.be, self.layers
        decoder = s2s.decoder
        steps = s2s.in_shape[1] if steps is None else int(steps)
        bsz = be.bsz
        self.num_beams, self.num_live = num_beams, 1
        self.z_list = [be.iobuf(self.z_shape) for _ in range(num_beams)]
        for z in self.z_list:
            z[:] = 0.0
            if getattr(decoder, "start_index", None) is not None:
                z[decoder.start_index] = 1.0
        self.candidates = [np.zeros((steps, bsz)) for _ in range(num_beams)]
        self.scores = [np.zeros(bsz) for _ in range(num_beams)]

        s2s.encoder.fprop(inputs, inference=True)
        first = s2s.encoder.get_final_states(s2s.decoder_connections)
        recurrent = decoder._recurrent
        if len(first) != len(recurrent):
            raise ValueError(f"BeamSearch: {len(recurrent)} decoder recurrent layers but "
                             f"{len(first)} decoder connections")
        # each beam's starting states (a state that is None starts from zeros: kept as zeros)
        self.init_state_lists = [[be.zeros_like(layer.h[-1]) for layer in recurrent]
                                 for _ in range(num_beams)]
        for state, given in zip(self.init_state_lists[0], first):
            if given is not None:
                state[:] = given
        out_shape = decoder.out_shape if self.hasLUT else self.z_shape
        z_beams = [be.iobuf(out_shape) for _ in range(num_beams)]
        final_beams = [[be.zeros_like(layer.final_state()) for layer in recurrent]
                       for _ in range(num_beams)]
        for t in range(steps):
            for b in range(self.num_live):
                z_beams[b][:] = decoder.fprop(self.z_list[b], inference=True,
                                              init_state_list=self.init_state_lists[b])
                for state, layer in zip(final_beams[b], recurrent):
                    state[:] = layer.final_state()
            self._beamsearch_step(t, z_beams, final_beams)
        return be.array(self.candidates[self.num_live - 1])

    def _beamsearch_step(self, t: int, z_beams: list, final_beams: list) -> None:
        """Keep the best num_beams of every live beam's extensions, per sample."""
        nout = self.layers.out_shape[0]
        n_beams, live = self.num_beams, self.num_live
        # every extension's score: (live * nout, batch), rows beam-major
        scores_list = [np.log(z_beams[b].get()) + self.scores[b] for b in range(live)]
        self.scores_list = scores_list
        # NOTE: a stable sort, so that ties go the same way on every machine (numpy's default
        # sort kind breaks them differently where it uses SIMD sorting)
        keep = min(n_beams, live * nout)     # the first steps may have fewer extensions
        ranked = np.vstack(scores_list).argsort(axis=0, kind="stable")[-keep:]   # best last
        beam_of, token_of = ranked // nout, ranked % nout
        cols = np.arange(ranked.shape[1])
        old_candidates = [c.copy() for c in self.candidates]
        states = [[s.get() for s in beam] for beam in final_beams[:live]]
        for b in range(keep):
            src = beam_of[b]
            self.candidates[b][:] = np.stack([old_candidates[k] for k in range(live)])[src, :, cols].T
            self.candidates[b][t] = token_of[b]
            self.scores[b] = np.stack(scores_list)[src, token_of[b], cols]
            for j, state in enumerate(self.init_state_lists[b]):
                state.set(np.stack([states[k][j] for k in range(live)])[src, :, cols].T)
        self.num_live = keep
        for b in range(keep):
            tokens = self.candidates[b][t]
            if self.hasLUT:
                self.z_list[b].set(tokens.reshape(1, -1))
            else:
                self.z_list[b].set(np.eye(nout)[tokens.astype(np.int64)].T)
