"""Containers (neon.layers.container): Sequential runs its layers in order."""
from __future__ import annotations

from typing import Any

from .layer import Layer


def flatten(items: Any) -> list:
    out: list = []
    for x in items:
        if isinstance(x, (list, tuple)):
            out.extend(flatten(x))
        else:
            out.append(x)
    return out


class Sequential(Layer):
    """Layers run one after another; lists (Affine, Conv) are flattened."""

    def __init__(self, layers: Any, name: str | None = None) -> None:
        super().__init__(name)
        self.layers = flatten(layers)
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential: item {i} is a {type(layer).__name__}, not a layer "
                                f"(a cost goes to Model.fit, not into the layer list)")
        if not self.layers:
            raise ValueError("Sequential: needs at least one layer")

    @property
    def layers_to_optimize(self) -> list:
        return [layer for layer in self.layers if layer.has_params]

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        prev: Any = in_obj
        for layer in self.layers:
            layer.configure(prev)
            prev = layer
        self.out_shape = self.layers[-1].out_shape
        return self

    def allocate(self, shared_outputs: Any = None) -> None:
        # the first layer's input is the dataset's: never written in place
        self.layers[0].owns_output = True
        for layer in self.layers:
            layer.allocate()

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        """Every layer but the first sends an error back."""
        for layer in self.layers[1:]:
            if layer.deltas is None and (layer.owns_output or isinstance(layer, Sequential)):
                layer.set_deltas()

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        x = inputs
        for layer in self.layers:
            x = layer.fprop(x, inference)
        return x

    bprop_hook: Any = None   # called with each layer as its bprop ends (distributed training)

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        hook = self.bprop_hook
        for layer in reversed(self.layers):
            error = layer.bprop(error)
            if hook is not None:
                hook(layer)
        return error

    def get_terminal(self) -> Layer:
        return self.layers[-1].get_terminal()

    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        return {"type": "Sequential", "layers": [layer.get_description(get_weights, keep_states)
                                                 for layer in self.layers]}

    def load_weights(self, pdict: dict, load_states: bool = True) -> None:
        saved = pdict["layers"]
        if len(saved) != len(self.layers):
            raise ValueError(f"load_weights: the file has {len(saved)} layers, the model "
                             f"{len(self.layers)}")
        for layer, d in zip(self.layers, saved):
            if d["type"] != type(layer).__name__:
                raise ValueError(f"load_weights: the file's layer {d['name']!r} is a {d['type']}, "
                                 f"the model's {layer.name!r} a {type(layer).__name__}")
            layer.load_weights(d, load_states)
