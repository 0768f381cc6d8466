"""Containers (neon.layers.container): Sequential runs its layers in order."""
from __future__ import annotations

import inspect
import math
from functools import reduce
from operator import add
from typing import Any

from .. import NervanaObject
from .layer import BranchNode, Layer


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
        """The layers bprop runs: all but the branch nodes (neon's name)."""
        return [layer for layer in self.layers if not isinstance(layer, BranchNode)]

    def layers_fprop(self) -> Any:
        """Every layer in fprop order, those of nested containers after their container."""
        for layer in self.layers:
            yield layer
            if hasattr(layer, "layers_fprop"):
                yield from layer.layers_fprop()

    def configure(self, in_obj: Any) -> Layer:
        layers = self.layers
        if in_obj is None:      # a Tree's path that starts at a branch node configured before
            if not isinstance(layers[0], BranchNode) or layers[0].out_shape is None:
                raise ValueError(f"{self.name}: configure(None) needs a first layer that is a "
                                 f"branch node already configured, got {layers[0]}")
            in_obj, layers = layers[0], layers[1:]
        super().configure(in_obj)
        prev: Any = in_obj
        for layer in layers:
            layer.configure(prev)
            if isinstance(prev, Layer):
                prev.set_next(layer)
            prev = layer
        self.out_shape = self.layers[-1].out_shape
        return self

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        """Allocate each layer (the last that owns its output into `shared_outputs`, a view of
        a merging container's buffer); `accumulate_updates` goes to the layers that take it."""
        self.accumulate_updates = accumulate_updates
        # the first layer's input is the dataset's: never written in place
        if not isinstance(self.layers[0], BranchNode):
            self.layers[0].owns_output = True
        last = [layer for layer in self.layers if layer.owns_output][-1]
        for layer in self.layers:
            kwargs: dict = {}
            if "accumulate_updates" in inspect.signature(layer.allocate).parameters:
                kwargs["accumulate_updates"] = accumulate_updates
            if layer is last and shared_outputs is not None and layer.outputs is None:
                kwargs["shared_outputs"] = shared_outputs
            layer.allocate(**kwargs)

    def set_acc_on(self, acc_on: bool) -> None:
        if not hasattr(self, "accumulate_updates"):
            raise BufferError(f"{self.name}: set_acc_on needs allocate(accumulate_updates=True) "
                              f"first")
        for layer in self.layers:
            if hasattr(layer, "accumulate_updates"):
                layer.set_acc_on(acc_on)

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        """Every layer but the first sends an error back; given neon's DeltasTree, the layers
        report their sizes to it instead (then `set_deltas(tree)` hands its buffers out)."""
        if global_deltas is not None:
            for layer in self.layers:
                layer.allocate_deltas(global_deltas)
            return
        for layer in self.layers[1:]:
            if layer.deltas is None and (layer.owns_output or isinstance(layer, Sequential)
                                         or isinstance(layer.prev_layer, BranchNode)
                                         or isinstance(layer, BranchNode)):
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
        """alpha and beta scale the errors sent from the first layer and from the layers after
        a branch node: deltas = alpha * error + beta * deltas (several paths add up there)."""
        hook = self.bprop_hook
        layers = self._layers
        for layer in reversed(layers):
            if layer is layers[0] or isinstance(layer.prev_layer, BranchNode):
                error = layer.bprop(error, alpha, beta)
            else:
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


def _paths(layers: Any, who: str) -> list:
    """Each item as a Sequential: a list becomes one, a layer one of one."""
    out = []
    for i, item in enumerate(layers):
        if isinstance(item, Sequential):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out.append(Sequential(list(item)))
        elif isinstance(item, Layer):
            out.append(Sequential([item]))
        else:
            raise TypeError(f"{who}: item {i} is a {type(item).__name__}, expected a layer, a "
                            f"list of layers or a Sequential")
    if not out:
        raise ValueError(f"{who}: needs at least one path")
    return out


class Tree(Sequential):
    """Several outputs from one input: the first path (the trunk) runs from the input, the
    others start at a BranchNode of an earlier path. fprop returns one output a path; bprop
    takes one error a path and adds them up at the branch nodes (alphas scale each path's)."""

    def __init__(self, layers: Any, name: str | None = None, alphas: Any = None) -> None:
        Layer.__init__(self, name)
        self.layers = _paths(layers, "Tree")
        self.alphas = [1.0] * len(self.layers) if alphas is None else [float(a) for a in alphas]
        if len(self.alphas) != len(self.layers):
            raise ValueError(f"Tree: {len(self.alphas)} alphas for {len(self.layers)} paths")
        # bprop runs the paths last first: the last to reach a branch node overwrites its
        # buffer (beta 0), the others add to it
        self.betas, seen = [], set()
        for path in reversed(self.layers):
            root = path.layers[0]
            self.betas.append(0.0 if isinstance(root, BranchNode) and id(root) not in seen
                              else 1.0)
            seen.add(id(root))
        self.betas.reverse()

    @property
    def _layers(self) -> list:
        return self.layers

    def configure(self, in_obj: Any) -> Layer:
        Layer.configure(self, in_obj)
        self.layers[0].configure(in_obj)
        for path in self.layers[1:]:
            path.configure(None)
        self.out_shape = [path.out_shape for path in self.layers]
        return self

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        for path in self.layers:
            path.allocate(accumulate_updates=accumulate_updates)
        self.accumulate_updates = accumulate_updates
        self.outputs = [path.outputs for path in self.layers]

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        for path in reversed(self.layers):
            path.allocate_deltas(global_deltas)

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        x = self.layers[0].fprop(inputs, inference)
        return [x] + [path.fprop(None, inference) for path in self.layers[1:]]

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        if len(error) != len(self.layers):
            raise ValueError(f"{self.name}: bprop takes {len(self.layers)} errors (one a path), "
                             f"got {len(error)}")
        out = None
        for path, e, a, b in reversed(list(zip(self.layers, error, self.alphas, self.betas))):
            out = path.bprop(e, alpha=a, beta=b)
        return out

    def get_terminal(self) -> Any:
        return [path.get_terminal() for path in self.layers]

    def get_description(self, get_weights: bool = False, keep_states: bool = False) -> dict:
        d = super().get_description(get_weights, keep_states)
        d["type"] = type(self).__name__
        return d


class SingleOutputTree(Tree):
    """A Tree whose other paths run in training only (auxiliary costs): inference returns
    the trunk's output alone."""

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        x = self.layers[0].fprop(inputs, inference)
        if inference:
            return x
        return [x] + [path.fprop(None, inference) for path in self.layers[1:]]


class Broadcast(Sequential):
    """The same input to several paths; subclasses merge their outputs. Each path's first layer
    sends its error into its own buffer, summed into this container's deltas."""

    def __init__(self, layers: Any, name: str | None = None) -> None:
        Layer.__init__(self, name)
        self.layers = _paths(layers, type(self).__name__)
        self.owns_delta = True

    @property
    def _layers(self) -> list:
        return self.layers

    nest_deltas = True

    def configure(self, in_obj: Any) -> Layer:
        Layer.configure(self, in_obj)
        for path in self.layers:
            path.configure(in_obj)
        self._configure_merge()
        return self

    def _configure_merge(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _configure_merge")

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        if global_deltas is not None:
            global_deltas.proc_layer(self)

    def set_deltas(self, delta_buffers: Any = None) -> None:
        for path in self.layers:
            path.allocate_deltas()          # own buffers inside each path
            path.layers[0].set_deltas()     # and for the error each path sends back
        if isinstance(self.prev_layer, BranchNode):
            Layer.set_deltas(self, delta_buffers)
        else:
            self.deltas = self.be.iobuf(self.in_shape)

    def _sum_path_errors(self, errors: list, alpha: float, beta: float) -> Any:
        total = errors[0]
        for e in errors[1:]:
            total = total + e
        self.deltas[:] = alpha * total if beta == 0 else alpha * total + beta * self.deltas
        return self.deltas

    def get_terminal(self) -> Any:
        return [path.get_terminal() for path in self.layers]


class MergeSum(Broadcast):
    """The sum of its paths' outputs (a residual block: a path of convolutions and a SkipNode)."""

    def _configure_merge(self) -> None:
        shapes = [tuple(path.out_shape) for path in self.layers]
        if any(s != shapes[0] for s in shapes):
            raise ValueError(f"{self.name}: MergeSum's paths must give one shape, got {shapes}")
        self.out_shape = shapes[0]

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        for path in self.layers:
            path.allocate(accumulate_updates=accumulate_updates)
        self.accumulate_updates = accumulate_updates
        self.outputs = self.be.iobuf(self.out_shape, shared=shared_outputs)

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        outs = [path.fprop(inputs, inference) for path in self.layers]
        total = outs[0]
        for o in outs[1:]:
            total = total + o
        self.outputs[:] = total
        return self.outputs

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        return self._sum_path_errors([path.bprop(error) for path in self.layers], alpha, beta)


class MergeBroadcast(Broadcast):
    """Its paths' outputs joined: 'depth' along channels, 'stack' along the flattened
    features, 'recurrent' along time steps."""

    def __init__(self, layers: Any, merge: str, alphas: Any = None, name: str | None = None) -> None:
        super().__init__(layers, name)
        if merge not in ("recurrent", "depth", "stack"):
            raise ValueError(f"{type(self).__name__}: merge must be 'recurrent', 'depth' or "
                             f"'stack', got {merge!r}")
        self.merge = merge
        self.alphas = [1.0] * len(self.layers) if alphas is None else list(alphas)

    def _configure_merge(self) -> None:
        shapes = [tuple(path.out_shape) if isinstance(path.out_shape, (tuple, list))
                  else (int(path.out_shape),) for path in self.layers]
        if self.merge == "recurrent":
            sizes = [s[1] for s in shapes]
            self.out_shape = (shapes[0][0], sum(sizes))
        elif self.merge == "depth":
            if any(s[1:] != shapes[0][1:] for s in shapes):
                raise ValueError(f"{self.name}: 'depth' merges paths with one image shape, got "
                                 f"{shapes}")
            sizes = [s[0] for s in shapes]
            self.out_shape = (sum(sizes),) + shapes[0][1:]
        else:
            sizes = [math.prod(s) for s in shapes]
            self.out_shape = (sum(sizes),)
        self._sizes = sizes

    def _parts(self, x: Any) -> list:
        """Views of x, one per path."""
        parts, start = [], 0
        for path, size in zip(self.layers, self._sizes):
            n = (size * self.be.bsz if self.merge == "recurrent" else
                 math.prod(path.out_shape) if self.merge == "depth" else size)
            parts.append(x[:, start:start + n] if self.merge == "recurrent" else
                         x[start:start + n])
            start += n
        return parts

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        self.outputs = self.be.iobuf(self.out_shape, shared=shared_outputs)
        for path in self.layers:
            path.allocate(accumulate_updates=accumulate_updates)
        self.accumulate_updates = accumulate_updates

    def _join(self, outs: list) -> Any:
        for part, o in zip(self._parts(self.outputs), outs):
            part[:] = o
        return self.outputs

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        return self._join([path.fprop(inputs, inference) for path in self.layers])

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        errs = [path.bprop(e, alpha=a) for path, e, a
                in zip(self.layers, self._parts(error), self.alphas)]
        return self._sum_path_errors(errs, alpha, beta)


class MergeMultistream(MergeBroadcast):
    """MergeBroadcast over several inputs: path i takes input i (configure with a list of
    shapes, fprop with a list of tensors)."""

    def __init__(self, layers: Any, merge: str, name: str | None = None) -> None:
        super().__init__(layers, merge=merge, name=name)

    nest_deltas = False

    def configure(self, in_obj: Any) -> Layer:
        self.prev_layer = None
        if not isinstance(in_obj, (list, tuple)) or len(in_obj) != len(self.layers):
            shapes = getattr(in_obj, "shape", None)
            if isinstance(shapes, list) and len(shapes) == len(self.layers):
                in_obj = shapes
            else:
                raise ValueError(f"{self.name}: MergeMultistream takes a list of "
                                 f"{len(self.layers)} inputs or shapes, got {in_obj!r}")
        for inp, path in zip(in_obj, self.layers):
            if hasattr(inp, "shape") and not isinstance(inp, (tuple, list, Layer)):
                inp = (inp.shape[0], inp.shape[1] // self.be.bsz)
                inp = inp if inp[1] > 1 else inp[0]
            path.configure(inp)
        self.in_shape = [path.in_shape for path in self.layers]
        self._configure_merge()
        return self

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        pass        # its paths' errors go to their inputs, the data: nothing is shared

    def set_deltas(self, delta_buffers: Any = None) -> None:
        for path in self.layers:
            path.allocate_deltas()

    def fprop(self, inputs: Any, inference: bool = False) -> Any:
        return self._join([path.fprop(x, inference) for path, x in zip(self.layers, inputs)])

    def bprop(self, error: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        for path, e in zip(self.layers, self._parts(error)):
            path.bprop(e)
        return None


class GenerativeAdversarial(Sequential):
    """A GAN's two stacks (neon's GAN model trains them): `generator` and `discriminator`, each
    a Sequential (or a list of layers); `layers` is the generator's followed by the
    discriminator's."""

    def __init__(self, generator: Any, discriminator: Any, name: str | None = None) -> None:
        Layer.__init__(self, name)
        stacks = []
        for who, stack in (("generator", generator), ("discriminator", discriminator)):
            if isinstance(stack, (list, tuple)):
                stack = Sequential(list(stack))
            if not isinstance(stack, Sequential):
                raise TypeError(f"GenerativeAdversarial: the {who} must be a Sequential or a list "
                                f"of layers, got {type(stack).__name__}")
            stacks.append(stack)
        self.generator, self.discriminator = stacks
        self.layers = self.generator.layers + self.discriminator.layers

    def configure(self, in_obj: Any) -> Layer:
        """in_obj: the noise's shape; the discriminator takes the generator's output."""
        Layer.configure(self, in_obj)
        self.generator.configure(in_obj)
        self.discriminator.configure(self.generator)
        self.out_shape = self.discriminator.out_shape
        return self

    def allocate(self, shared_outputs: Any = None, accumulate_updates: bool = False) -> None:
        # the discriminator sums its gradients over a noise batch and a data batch
        self.generator.allocate(accumulate_updates=accumulate_updates)
        self.discriminator.allocate(accumulate_updates=True)

    def allocate_deltas(self, global_deltas: Any = None) -> None:
        self.generator.allocate_deltas(global_deltas)
        self.discriminator.allocate_deltas(global_deltas)
        first = self.discriminator.layers[0]
        if global_deltas is None and first.deltas is None:
            first.set_deltas()      # the generator's error comes through it

    def get_terminal(self) -> Layer:
        return self.discriminator.get_terminal()


class Multicost(NervanaObject):
    """The costs of a Tree's outputs, one a path in order, weighted: the cost is
    sum(weights[i] * costs[i]), each path's error its cost's times its weight. Targets are one
    a cost (None: that cost is left out) or one for all."""

    def __init__(self, costs: Any, weights: Any = None, name: str | None = None) -> None:
        super().__init__(name)
        self.costs = list(costs)
        if not self.costs:
            raise ValueError("Multicost: needs at least one cost")
        self.weights = [1.0] * len(self.costs) if weights is None else list(weights)
        if len(self.weights) != len(self.costs):
            raise ValueError(f"Multicost: {len(self.weights)} weights for {len(self.costs)} "
                             f"costs")
        self.costfunc = self.costs[0].costfunc        # what callbacks display
        self.deltas: Any = None
        self.total: Any = None

    def initialize(self, in_obj: Any) -> None:
        if isinstance(in_obj, Layer) and hasattr(in_obj, "layers"):
            terminals = in_obj.get_terminal()
        elif isinstance(in_obj, (list, tuple)):
            terminals = list(in_obj)
        else:
            raise TypeError(f"Multicost: initialize takes a container or a list of layers, got "
                            f"{type(in_obj).__name__}")
        if not isinstance(terminals, list) or len(terminals) != len(self.costs):
            n = len(terminals) if isinstance(terminals, list) else 1
            raise ValueError(f"Multicost: {len(self.costs)} costs for {n} outputs")
        for cost, terminal in zip(self.costs, terminals):
            cost.initialize(terminal)
        self.total = self.be.empty((1, 1))

    @property
    def cost(self) -> Any:
        return self.costs[0].cost

    @property
    def outputs(self) -> Any:
        return self.costs[0].outputs

    def _targets(self, targets: Any) -> list:
        if isinstance(targets, (tuple, list)):
            if len(targets) != len(self.costs):
                raise ValueError(f"Multicost: {len(self.costs)} targets expected, got "
                                 f"{len(targets)}")
            return list(targets)
        return [targets] * len(self.costs)

    def get_cost(self, inputs: Any, targets: Any) -> Any:
        if not isinstance(inputs, list):       # a SingleOutputTree in inference
            return self.costs[0].get_cost(inputs, targets)
        terms = [w * c.get_cost(i, t) for w, c, i, t
                 in zip(self.weights, self.costs, inputs, self._targets(targets))
                 if t is not None]
        self.total[:] = reduce(add, terms)
        return self.total

    def get_errors(self, inputs: Any, targets: Any) -> list:
        for cost, i, t, w in zip(self.costs, inputs, self._targets(targets), self.weights):
            if t is not None:
                cost.get_errors(i, t)
                cost.deltas[:] = cost.deltas * w
        if self.deltas is None:
            self.deltas = [c.deltas for c in self.costs]
        return self.deltas

    def get_description(self) -> dict:
        return {"type": "Multicost", "weights": self.weights,
                "costs": [c.get_description() for c in self.costs]}


def __getattr__(name: str) -> Any:
    """neon's module path of the sequence-to-sequence containers (in layers/seq2seq.py)."""
    if name in ("Seq2Seq", "Encoder", "Decoder"):
        from . import seq2seq
        return getattr(seq2seq, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
