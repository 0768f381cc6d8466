"""neon's sequence-to-sequence containers (neon.layers.container): Seq2Seq holds an Encoder and a
Decoder, each a Sequential with recurrent layers. Decoder recurrent layer i starts from the final
state of encoder recurrent layer `decoder_connections[i]` (None: from zeros), and in bprop the
error of that starting state goes back into the last step of the encoder layer's output error.

Training: `fprop((x, z))`, encoder inputs x and decoder inputs z (the target shifted by a step).
Inference: `fprop(x, inference=True)` runs the encoder, then the decoder one step at a time
(`Decoder.switch_mode` reconfigures it for single steps, keeping the weights), each step's
output the next step's input (its argmax where the decoder starts with a LookupTable).
"""
from __future__ import annotations

from typing import Any

from .container import Sequential
from .layer import Layer, LookupTable
from .recurrent import Recurrent, get_steps


def _recurrent(layers: list) -> list:
    return [layer for layer in layers if isinstance(layer, Recurrent)]


class Encoder(Sequential):
    """The encoder stack of a Seq2Seq: a Sequential whose bprop takes the decoder's starting-state
    errors (a list, one per decoder recurrent layer) instead of an output error."""

    def __init__(self, layers: Any, name: str | None = None) -> None:
        super().__init__(layers, name)
        self._recurrent = _recurrent(self.layers)
        self.connections: list | None = None
        self.error_buf: Any = None

    def fprop(self, inputs: Any, inference: bool = False, beta: float = 0.0) -> Any:
        return super().fprop(inputs, inference)

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        super().allocate_deltas(global_deltas)
        self.error_buf = self.be.iobuf(self.out_shape)    # the top layer's output gets no error

    def set_connections(self, decoder_cons: list) -> None:
        """connections[k]: the decoder recurrent layers that start from encoder layer k."""
        self.connections = [[d for d, e in enumerate(decoder_cons) if e == k]
                            for k in range(len(self._recurrent))]

    def get_final_states(self, decoder_cons: list) -> list:
        """The starting state of each decoder recurrent layer (None where not connected)."""
        return [None if k is None else self._recurrent[k].final_state() for k in decoder_cons]

    def bprop(self, hidden_error_list: list, inference: bool = False, alpha: float = 1.0,
              beta: float = 0.0) -> Any:
        error = self.error_buf
        error[:] = 0.0
        k = len(self._recurrent) - 1
        layers = self._layers
        for layer in reversed(layers):
            if isinstance(layer, Recurrent):
                # NOTE: into the error this layer receives; neon added every layer's into the
                # top layer's buffer, so a lower encoder layer lost its decoder error
                last = get_steps(error, layer.out_shape)[-1]
                for d in self.connections[k]:
                    if hidden_error_list[d] is not None:
                        last[:] = last + hidden_error_list[d]
                k -= 1
            if layer is layers[0]:
                error = layer.bprop(error, alpha, beta)
            else:
                error = layer.bprop(error)
        return error


class Decoder(Sequential):
    """The decoder stack of a Seq2Seq: fprop takes each recurrent layer's starting state, bprop
    returns the errors of those states. `start_index`: the token a generated sequence starts
    with in beam search (None: an all-zero first input)."""

    def __init__(self, layers: Any, name: str | None = None, start_index: int | None = None) -> None:
        super().__init__(layers, name)
        self._recurrent = _recurrent(self.layers)
        self.connections: list | None = None
        self.full_steps: int | None = None
        self.start_index = start_index

    def fprop(self, x: Any, inference: bool = False, init_state_list: Any = None) -> Any:
        n = len(self._recurrent)
        if init_state_list is None:
            init_state_list = [None] * n
        elif len(init_state_list) < n:
            raise ValueError(f"{self.name}: {n} recurrent layers need {n} starting states, got "
                             f"{len(init_state_list)}")
        states = iter(init_state_list)
        for layer in self.layers:
            if isinstance(layer, Recurrent):
                x = layer.fprop(x, inference=inference, init_state=next(states))
            else:
                x = layer.fprop(x, inference)
        return x

    def set_connections(self, decoder_cons: list) -> None:
        self.connections = decoder_cons

    def bprop(self, error: Any, inference: bool = False, alpha: float = 1.0,
              beta: float = 0.0) -> list:
        """The error of each recurrent layer's starting state, in layer order."""
        hidden = []
        for layer in reversed(self._layers):
            error = layer.bprop(error)
            if isinstance(layer, Recurrent):
                hidden.append(layer.get_final_hidden_error())
        hidden.reverse()
        return hidden

    def switch_mode(self, inference: bool) -> None:
        """Reconfigure for one step at a time (inference) or the full sequence (training);
        weights are kept, output and step buffers made anew."""
        lut = isinstance(self.layers[0], LookupTable)
        cur = self.in_shape[0] if lut else self.in_shape[1]
        new = 1 if inference else self.full_steps
        if new is None or new == cur:
            return
        if lut:
            in_obj: Any = (new,)
        else:
            in_obj = (self.in_shape[0], new)
        self.configure(in_obj)
        for layer in self.layers:
            if layer.owns_output:
                layer.outputs = None
            layer.deltas = None
            if isinstance(layer, Recurrent):
                layer.x = None          # its input buffers follow the new step count
        self.allocate()
        self.allocate_deltas()


def _container(item: Any, cls: type, who: str) -> Any:
    if isinstance(item, cls):
        return item
    if isinstance(item, (list, tuple)):
        return cls(list(item))
    if isinstance(item, Layer):
        return cls([item])
    raise TypeError(f"Seq2Seq: the {who} must be an {cls.__name__}, a list of layers or a layer, "
                    f"got {type(item).__name__}")


class Seq2Seq(Sequential):
    """Encoder and decoder: `Seq2Seq([encoder, decoder], decoder_connections=None)`, each an
    Encoder / Decoder, a list of layers or a layer. decoder_connections[i] is the encoder
    recurrent layer (its index among the encoder's recurrent layers, or None) whose final state
    starts decoder recurrent layer i; by default layer i starts from layer i (equal counts).
    configure takes a dataset with `shape` (encoder) and `decoder_shape`, or a 4-tuple of both."""

    def __init__(self, layers: Any, decoder_connections: Any = None, name: str | None = None) -> None:
        Layer.__init__(self, name)
        if not isinstance(layers, (list, tuple)) or len(layers) != 2:
            raise ValueError(f"Seq2Seq: layers must be [encoder, decoder], got {layers!r}")
        self.encoder = _container(layers[0], Encoder, "encoder")
        self.decoder = _container(layers[1], Decoder, "decoder")
        self.layers = self.encoder.layers + self.decoder.layers
        self.hasLUT = isinstance(self.encoder.layers[0], LookupTable)
        n_enc, n_dec = len(self.encoder._recurrent), len(self.decoder._recurrent)
        if decoder_connections is None:
            if n_enc != n_dec:
                raise ValueError(f"Seq2Seq: without decoder_connections the encoder and decoder "
                                 f"need as many recurrent layers, got {n_enc} and {n_dec}")
            decoder_connections = list(range(n_enc))
        decoder_connections = list(decoder_connections)
        if len(decoder_connections) != n_dec:
            raise ValueError(f"Seq2Seq: one decoder connection per decoder recurrent layer "
                             f"({n_dec}) expected, got {len(decoder_connections)}")
        for k in decoder_connections:
            if k is not None and not 0 <= k < n_enc:
                raise ValueError(f"Seq2Seq: decoder connection {k} names no encoder recurrent "
                                 f"layer (there are {n_enc})")
        self.decoder_connections = decoder_connections
        self.encoder.set_connections(decoder_connections)
        self.decoder.set_connections(decoder_connections)

    @property
    def _layers(self) -> list:
        return [self.encoder, self.decoder]

    def layers_fprop(self) -> Any:
        for part in (self.encoder, self.decoder):
            yield part
            yield from part.layers_fprop()

    @property
    def layers_to_optimize(self) -> list:
        return self.encoder.layers_to_optimize + self.decoder.layers_to_optimize

    def configure(self, in_obj: Any) -> Layer:
        if isinstance(in_obj, tuple):
            if len(in_obj) != 4:
                raise ValueError(f"Seq2Seq: configure takes a dataset (shape, decoder_shape) or "
                                 f"a 4-tuple of both shapes, got {in_obj!r}")
            enc, dec = in_obj[0:2], in_obj[2:4]
        elif hasattr(in_obj, "decoder_shape"):
            enc, dec = in_obj.shape, in_obj.decoder_shape
        else:
            raise ValueError(f"Seq2Seq: configure needs a dataset with shape and decoder_shape, "
                             f"got {type(in_obj).__name__}")
        self.encoder.configure(enc)
        self.decoder.configure(dec)
        self.parallelism = self.decoder.parallelism
        self.out_shape = self.decoder.out_shape
        self.in_shape = self.decoder.layers[-1].in_shape if self.hasLUT else self.decoder.in_shape
        self.decoder.full_steps = self.in_shape[1]
        return self

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        self.decoder.allocate(shared_outputs, accumulate_updates)
        self.encoder.allocate(accumulate_updates=accumulate_updates)
        self.xbuf = self.be.iobuf(self.out_shape)       # inference: the steps' outputs

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        self.encoder.allocate_deltas(global_deltas)
        self.decoder.allocate_deltas(global_deltas)

    def fprop(self, inputs: Any, inference: bool = False, beta: float = 0.0) -> Any:
        self.decoder.switch_mode(inference)
        if not inference:
            if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
                raise ValueError(f"{self.name}: training fprop takes (encoder inputs, decoder "
                                 f"inputs), got {type(inputs).__name__}")
            x, z = inputs
            self.encoder.fprop(x, inference)
            states = self.encoder.get_final_states(self.decoder_connections)
            return self.decoder.fprop(z, inference, init_state_list=states)
        return self._generate(inputs)

    def _generate(self, x: Any) -> Any:
        be = self.be
        self.encoder.fprop(x, inference=True)
        states = self.encoder.get_final_states(self.decoder_connections)
        z_in = be.iobuf(1 if self.hasLUT else (self.out_shape[0], 1))
        z_in[:] = 0.0
        bsz = be.bsz
        for t in range(self.in_shape[1]):
            # NOTE: one input buffer for every step: the recurrent layers then carry their
            # other state (an LSTM's cells) from step to step
            z = self.decoder.fprop(z_in, inference=True, init_state_list=states)
            states = [layer.final_state() for layer in self.decoder._recurrent]
            self.xbuf[:, t * bsz:(t + 1) * bsz] = z
            z_in[:] = be.argmax(z, axis=0) if self.hasLUT else z
        return self.xbuf

    def bprop(self, error: Any, inference: bool = False, alpha: float = 1.0,
              beta: float = 0.0) -> Any:
        hidden = self.decoder.bprop(error)
        return self.encoder.bprop(hidden, alpha=alpha, beta=beta)

    def get_terminal(self) -> Layer:
        return self.decoder.get_terminal()

    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        return {"type": "Seq2Seq", "decoder_connections": self.decoder_connections,
                "num_encoder_layers": len(self.encoder.layers),
                "layers": [layer.get_description(get_weights, keep_states)
                           for layer in self.layers]}
