"""Containers (neon.layers.container): Sequential runs its layers in order."""
from __future__ import annotations

from typing import Any

from .. import NervanaObject
from .layer import Layer


def flatten(items: Any) -> list:
    out: list = []
    for x in items:
        if isinstance(x, (list, tuple)):
            out.extend(flatten(x))
        else:
            out.append(x)
    return out


class DeltasTree(NervanaObject):
    """neon's pool of shared error buffers: layers report their sizes (`proc_layer`, through
    `layer.allocate_deltas(tree)`), `allocate_buffers()` makes two buffers of the largest, and
    `layer.set_deltas(tree)` hands them out alternately, so that a layer's error buffer is never
    the one its neighbour writes. A nested container descends to a child tree."""

    def __init__(self, parent: DeltasTree | None = None) -> None:
        super().__init__()
        if parent is not None and not isinstance(parent, DeltasTree):
            raise TypeError(f"DeltasTree: the parent must be a DeltasTree, got "
                            f"{type(parent).__name__}")
        self.parent, self.child = parent, None
        self.buffers: list = [None, None]
        self.max_shape = 0

    def decend(self) -> DeltasTree:  # neon's spelling
        if self.child is None:
            self.child = DeltasTree(self)
        return self.child

    descend = decend

    def ascend(self) -> DeltasTree | None:
        return self.parent

    def proc_layer(self, layer: Any) -> None:
        self.max_shape = max(self.max_shape,
                             layer.be.shared_iobuf_size(layer.in_shape, layer.parallelism))

    def allocate_buffers(self) -> None:
        if self.child is not None:
            self.child.allocate_buffers()
        for i, buf in enumerate(self.buffers):
            if buf is None and self.max_shape > 0:
                self.buffers[i] = self.be.iobuf(self.max_shape, persist_values=False,
                                                parallelism="Data")


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

    @property
    def _layers(self) -> list:
        """The layers fprop runs (neon's name; it left out its branch nodes)."""
        return self.layers

    def layers_fprop(self) -> Any:
        """Every layer in fprop order, those of nested containers after their container."""
        for layer in self.layers:
            yield layer
            if hasattr(layer, "layers_fprop"):
                yield from layer.layers_fprop()

    def configure(self, in_obj: Any) -> Layer:
        super().configure(in_obj)
        prev: Any = in_obj
        for layer in self.layers:
            layer.configure(prev)
            if isinstance(prev, Layer):
                prev.set_next(layer)
            prev = layer
        self.out_shape = self.layers[-1].out_shape
        return self

    def allocate(self, shared_outputs: Any = None) -> None:
        # the first layer's input is the dataset's: never written in place
        self.layers[0].owns_output = True
        for layer in self.layers:
            layer.allocate()

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        """Every layer but the first sends an error back; given neon's DeltasTree, the layers
        report their sizes to it instead (then `set_deltas(tree)` hands its buffers out)."""
        if global_deltas is not None:
            for layer in self.layers:
                layer.allocate_deltas(global_deltas)
            return
        for layer in self.layers[1:]:
            if layer.deltas is None and (layer.owns_output or isinstance(layer, Sequential)):
                layer.set_deltas()

    def set_deltas(self, delta_buffers: Any = None) -> None:
        if delta_buffers is None:
            super().set_deltas()
            return
        for layer in self.layers:
            layer.set_deltas(delta_buffers)

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
