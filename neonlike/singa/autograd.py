"""SINGA's tape autograd: Operations record their inputs' creators; `backward(loss)` walks the
record in reverse and hands out (parameter, gradient) pairs one by one.

    from neonlike.singa import autograd, opt
    autograd.training = True
    loss = autograd.softmax_cross_entropy(autograd.add_bias(autograd.matmul(x, w), b), t)
    for p, g in autograd.backward(loss):
        sgd.update(p, g)         # safe: p is yielded after its last consumer's backward

The walk (SINGA's semantics): an op needs a backward when any input requires a gradient; each
op's consumers are counted first; an op runs its backward once every consumer has handed it
its output's gradient (gradients of a tensor used several times are summed); a tensor with
`stores_grad=True`, parameter or intermediate, is yielded when its gradient is complete, data
tensors (`stores_grad=False`) are not. Leaves that store no gradient get none computed.

Operators (operators.py) build engine op-trees: an elementwise operator's result stays lazy
(singa_wrap.py) and runs fused with what reads it; the others run at once. Their backward
reuses the engine's per-op rules (`neonlike.backends.autodiff.RULES`, the table `Autodiff`
uses): `TreeOp.backward` rebuilds the op's tree over its inputs' current values and walks it
with the rules, stopping at the inputs. Hand-written only: losses, softmax, batch norm,
convolution, pooling, and what is not a tree (views, split).

Choices where SINGA is silent or wrong: `training` False records nothing, and backward then
says to set it; a non-scalar loss without `dy` is a ValueError naming its shape; a logic op's
gradient is a TypeError naming the op (SINGA: `assert False`).
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from ..backends import autodiff as _AD
from ..ops import OP_INFO, Kind
from ..optree import OpTreeNode, Operators, dag_postorder, shape_of
from ..shapes import pad2
from . import plans as _P
from .singa_wrap import CTensor, gemm_operands, ran
from .tensor import Tensor

training = False

_EW = (Kind.ELEMENTWISE, Kind.REDUCTION)


class Operation:
    """One recorded operator: `__call__(*Tensors)` records the inputs' creators and runs
    `forward(*CTensors)`; `backward(*dys)` gives the inputs' gradients (CTensors or None)."""

    op_count = 0

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self.src: list = []
        self.requires_grad = False
        self._needs: tuple | None = None   # per input: compute its gradient (None: all)

    def __call__(self, *xs: Any) -> tuple:
        return self._do_forward(*xs)

    def _do_forward(self, *xs: Any) -> tuple:
        wants = False
        for i, x in enumerate(xs):
            if not isinstance(x, Tensor):
                raise TypeError(f"{self.name}: input {i} must be a singa Tensor, got "
                                f"{type(x).__name__}")
            wants = wants or x.requires_grad
        self.requires_grad = wants = self.differentiable and wants
        if training:
            src = self.src = []
            for x in xs:
                creator = x.creator
                if creator is None:
                    creator = x.creator = Dummy(x)
                stores = x.stores_grad
                src.append((creator, id(x), x if stores else None, stores))
        else:
            self.src = None      # not recorded: backward says so
        ys = self.forward(*[x.data for x in xs])
        if type(ys) is not tuple:
            ys = ys if isinstance(ys, tuple) else (ys,)
        self._outs = tuple([(y.lshape, y.dtype, y.dev) for y in ys])
        if len(ys) == 1:
            out = Tensor(data=ys[0], requires_grad=wants, creator=self)
            self.y_id2idx = {id(out): 0}
            return (out,)
        outs = tuple([Tensor(data=y, requires_grad=wants, creator=self) for y in ys])
        self.y_id2idx = {id(y): i for i, y in enumerate(outs)}
        return outs

    differentiable = True   # False: outputs are constants (shape, onehot, ...)

    def _do_backward(self, *dys: Any) -> tuple:
        dxs = self.backward(*dys)
        return dxs if isinstance(dxs, tuple) else (dxs,)

    def forward(self, *xs: CTensor) -> Any:
        raise NotImplementedError(f"{self.name}: forward is not implemented")

    def backward(self, *dys: CTensor) -> Any:
        raise NotImplementedError(f"{self.name}: backward is not implemented")

    def get_params(self) -> list:
        return []

    def release(self) -> None:
        """Drop what forward kept for backward (called by the backward walk)."""

    def _need(self, i: int) -> bool:
        return self._needs is None or self._needs[i]


class Dummy(Operation):
    """The creator of a leaf tensor (a parameter or data): the end of every backward path."""

    def __init__(self, tensor: Tensor, name: str | None = None) -> None:
        super().__init__(name)
        self.y_id2idx = {id(tensor): 0}
        self.tensor = tensor


# ---------------------------------------------------------------- ops built from op-trees
def float_result_dtype(xs: tuple) -> Any:
    """The result dtype of an op over CTensors `xs`: their float dtypes promoted (float32
    where none is a float)."""
    first = xs[0].dtype if xs else None
    if first is not None and first.kind == "f" and all(x.dtype is first for x in xs):
        return first                  # the common case, without result_type's ~1 us
    floats = [x.dtype for x in xs if x.dtype.kind == "f"]
    return np.result_type(*floats) if floats else np.dtype(np.float32)


class TreeOp(Operation):
    """An operator whose forward is an engine op-tree over its inputs' values (`make`) and whose
    backward is the engine's gradient rules walked over that tree. `lazy`: the result stays an
    op-tree (elementwise ops); otherwise it runs at once, after the inputs are materialised
    unless `fuse_inputs` (reductions read elementwise trees in the same kernel)."""

    lazy = True
    fuse_inputs = True

    def make(self, be: Any, *values: Any) -> Any:
        raise NotImplementedError

    def out_shape(self, *shapes: tuple) -> tuple:
        return tuple(np.broadcast_shapes(*shapes))

    def out_dtype(self, xs: tuple) -> Any:
        return float_result_dtype(xs)

    def plan_key(self) -> Any:
        """What decides this op's trees besides its inputs' logical shapes and dtypes (a
        hashable value), or None where something else does (a mask drawn each step, state set
        by out_shape): then nothing about it is memoised."""
        return None

    def forward(self, *xs: CTensor) -> CTensor:
        dev = xs[0].dev
        if not self.fuse_inputs:
            for x in xs:
                x.materialize()
        pk = self.plan_key()
        known = key = None
        if pk is not None:
            key = (type(self), pk, tuple([(x.lshape, x.dtype) for x in xs]))
            known = dev.plans.get(key)
        self._fkey = key
        if known is not None:      # the shape and dtype this structure was checked to give
            shape, dtype = known
            tree = self.make(dev.be, *[x.value for x in xs])
        else:
            shape = self.out_shape(*(x.lshape for x in xs))
            with _AD._on(dev.be):
                tree = self.make(dev.be, *(x.value for x in xs))
            if tuple(shape_of(tree)) != pad2(tuple(shape)):
                raise RuntimeError(f"{self.name}: the engine tree has shape {shape_of(tree)}, "
                                   f"the result's shape is {shape} (a bug in the operator)")
            dtype = self.out_dtype(xs)
            if pk is not None:
                dev.plans.put(key, (tuple(shape), dtype))
        out = CTensor(tree, shape, dev, dtype) if self.lazy else ran(tree, shape, dev, dtype)
        if training:
            self._xs, self._out = xs, out
        return out

    def kept_inputs(self) -> tuple:
        """The input CTensors forward kept for backward (a clear error where it kept none)."""
        xs = getattr(self, "_xs", None)
        if xs is None:
            raise RuntimeError(f"{self.name}: backward needs autograd.training = True during "
                               f"forward (the inputs are kept only then)")
        return xs

    def backward(self, dy: CTensor) -> Any:
        xs = self.kept_inputs()
        needs = self._needs or (True,) * len(xs)     # the walk's, else every input's
        if not self.lazy or needs.count(True) > 1:   # read by a product or by several grads
            dy.materialize()
        dev = xs[0].dev
        values = [x.value for x in xs]
        fkey = getattr(self, "_fkey", None)
        if fkey is not None:
            lazy_out = type(self._out.value) is OpTreeNode
            key = (fkey, needs, dy.lshape, dy.dtype, lazy_out, _P.alias_pattern(values, dy.value))
            plan = dev.plans.get(key)
            if plan is None:
                plan = dev.plans.put(key, _P.record(rule_gradients, self, dev.be, xs, dy, needs,
                                                    lazy_out))
            if plan is not _P.UNPLANNABLE:
                made = _P.replay(plan, values, dy.value, None if lazy_out else self._out.value)
                srcs = self.src or [(None, 0, None, False)] * len(xs)
                out = tuple(None if g is None else
                            _grad(g, x, run and not _kept_product(g, src))
                            for (g, run), x, src in zip(made, xs, srcs))
                return out if len(out) > 1 else out[0]
        with _AD._on(dev.be):
            tree = self.make(dev.be, *values)
            z = self._out.value if not self._out.lazy else tree
            grads = rule_gradients(tree, z, values, dy.value, list(needs))
        out = tuple(None if g is None else grad_ctensor(g, x) for g, x in zip(grads, xs))
        return out if len(out) > 1 else out[0]

    def release(self) -> None:
        """Forget the inputs and output kept for backward (the walk calls this once the op's
        backward is done, so values nobody else holds are not materialised for nothing)."""
        self._xs = self._out = None


def rule_gradients(root: Any, z: Any, values: list, dy: Any, needs: list) -> list:
    """The gradients of `values` (the inputs of a tree `root` whose value is `z`), given the
    gradient `dy` of root, by the engine's rules (RULES, unbroadcast): one reverse walk over the
    nodes the op made, stopping at its inputs. An input given twice gets the whole gradient at
    its first position."""
    stop = {id(v) for v in values}
    pos: dict = {}
    for i, v in enumerate(values):
        if needs[i]:
            pos.setdefault(id(v), i)
    result: list = [None] * len(values)
    if id(root) in stop:
        if id(root) in pos:
            result[pos[id(root)]] = dy
    elif type(root) is OpTreeNode:
        grads = {id(root): dy}
        for node in reversed(dag_postorder(root, stop=stop)):
            dz = grads.pop(id(node), None)
            if dz is None:
                continue
            d, x, y = node
            rule = _AD.RULES.get(d["op"])
            if rule is None:
                raise NotImplementedError(f"no gradient rule for op '{d['op']}'")
            incs = rule(x, y, z if node is root else node, dz, d)
            elementwise = OP_INFO[d["op"]].kind is Kind.ELEMENTWISE
            for child, inc in zip((x, y), incs):
                if inc is None or not isinstance(child, Operators):
                    continue
                logical = d["shape"] if elementwise else shape_of(child)
                inc = _AD.unbroadcast(inc, shape_of(child), logical)
                k = id(child)
                if k in stop:
                    i = pos.get(k)
                    if i is not None:
                        result[i] = inc if result[i] is None else _AD.add(result[i], inc)
                elif type(child) is OpTreeNode:
                    grads[k] = _AD.add(grads[k], inc) if k in grads else inc
    # a needed input the walk did not reach (sign, ceil: zero almost everywhere) gets zeros
    return [None if not need else _AD._full(0.0, shape_of(v)) if g is None
            else _AD._full_shape(g, shape_of(v)) for g, v, need in zip(result, values, needs)]


def _grad(g: Any, like: CTensor, run: bool) -> CTensor:
    """A replayed gradient as a CTensor shaped like `like`, run at once where its plan says."""
    if run:
        return ran(g, like.lshape, like.dev, like.dtype)
    return CTensor(g, like.lshape, like.dev, like.dtype)


KEPT_PRODUCT_MIN = 1 << 15   # elements: below, the GEMM call's own cost outweighs the pass saved
#                               (bench_singa: a 64x100 weight's step 22 us slower, 784x100 ~20 faster)


def _keeps_product(src: tuple, size: int) -> bool:
    """Whether the input recorded as `src`, `size` elements, keeps a gradient that is a plain
    product lazy (_kept_product): a stored leaf of at least KEPT_PRODUCT_MIN elements."""
    return src[3] and size >= KEPT_PRODUCT_MIN and isinstance(src[0], Dummy)


def _kept_product(g: Any, src: tuple) -> bool:
    """A large stored leaf's gradient that is a plain product `A @ B` stays lazy: SGD with
    momentum runs it as a GEMM straight into its velocity (C = A @ B + m * C, no gradient tensor
    and no second pass over it); other readers run it once (opt._value)."""
    return gemm_operands(g) is not None and \
        _keeps_product(src, g[0]["shape"][0] * g[0]["shape"][1])


def grad_ctensor(g: Any, like: CTensor) -> CTensor:
    """A gradient tree as a CTensor shaped like `like`: lazy where the tree is elementwise or
    reduces (it fuses into its reader), run at once where it holds a product or a structural op."""
    if type(g) is OpTreeNode and any(OP_INFO[n[0]["op"]].kind not in _EW
                                     for n in dag_postorder(g)):
        return ran(g, like.lshape, like.dev, like.dtype)
    return CTensor(g, like.lshape, like.dev, like.dtype)


def _ones_like(t: Tensor) -> CTensor:
    dev = t.device
    return CTensor(dev.ones(pad2(t.shape), t.dtype), t.shape, dev, t.dtype)


# ---------------------------------------------------------------- the backward walk
def infer_dependency(op: Operation) -> dict:
    """op -> the number of inputs of ops reached from `op` that read its outputs."""
    counts: dict = {op: 0}
    queue = deque([op])
    while queue:
        cur = queue.pop()
        for src_op, _, _, _ in cur.src or ():
            if src_op not in counts:
                counts[src_op] = 0
                if not isinstance(src_op, Dummy):
                    queue.append(src_op)
            counts[src_op] += 1
    return counts


def backward(y: Tensor, dy: Any = None):
    """Generator of (tensor, gradient) for every tensor with stores_grad=True that `y` depends
    on, each yielded once, as soon as its gradient is complete. `y` must be a scalar unless `dy`
    (a Tensor or number) is given."""
    if not isinstance(y, Tensor):
        raise TypeError(f"backward: y must be a singa Tensor, got {type(y).__name__}")
    if dy is None:
        if y.size() != 1:
            raise ValueError(f"backward: the loss must be a scalar (size 1), got shape {y.shape}; "
                             f"reduce it (autograd.reduce_mean) or pass dy")
        dyc = _ones_like(y)
    elif isinstance(dy, Tensor):
        if dy.shape != y.shape:
            raise ValueError(f"backward: dy has shape {dy.shape}, y has shape {y.shape}")
        dyc = dy.data
    else:
        dyc = CTensor(float(dy) * _ones_like(y).value, y.shape, y.device, y.dtype)
    op = y.creator
    if op is None or isinstance(op, Dummy):
        if y.stores_grad:
            yield y, Tensor(data=dyc, requires_grad=False)
        return
    deps = infer_dependency(op)
    not_ready: dict = {}     # op -> its outputs' gradients so far, until all have come
    keep: dict = {}          # op -> {id: tensor} of its outputs that store their gradient
    ready = [(op, [dyc])]    # (op, its outputs' gradients), last in first out
    while ready:
        op, dys = ready.pop()
        if not op.requires_grad or isinstance(op, Dummy):
            continue
        src = op.src
        if src is None:
            raise RuntimeError(f"backward: {op.name} was not recorded; set autograd.training = "
                               f"True before the forward pass")
        op._needs = tuple([(stores and src_op.tensor.requires_grad) if isinstance(src_op, Dummy)
                           else src_op.requires_grad for src_op, _, _, stores in src])
        try:
            dxs = op._do_backward(*dys)
        finally:
            op._needs = None
        op.release()
        if len(dxs) != len(src):
            raise RuntimeError(f"{op.name}: backward gave {len(dxs)} gradients for "
                               f"{len(src)} inputs")
        for (src_op, x_id, x, stores), dx in zip(src, dxs):
            if stores:
                kept = keep.get(src_op)
                if kept is None:
                    kept = keep[src_op] = {}
                kept[x_id] = x
            slots = not_ready.get(src_op)
            if slots is None:
                slots = not_ready[src_op] = [None] * len(src_op.y_id2idx)
            if dx is not None:
                if not isinstance(dx, CTensor):
                    raise TypeError(f"{op.name}: backward must return CTensors or None, got "
                                    f"{type(dx).__name__}")
                i = src_op.y_id2idx[x_id]
                old = slots[i]
                slots[i] = dx if old is None else _accumulate(old, dx)
            left = deps[src_op] - 1
            deps[src_op] = left
            if left:
                continue
            del not_ready[src_op]
            kept = keep.pop(src_op, None)
            if kept:
                for x_id, t in kept.items():
                    g = slots[src_op.y_id2idx[x_id]]
                    if g is not None:
                        yield t, Tensor(data=g, requires_grad=False)
            if src_op.requires_grad and not isinstance(src_op, Dummy):
                ready.append((src_op, [g if g is not None else _zeros_for(src_op, i)
                                       for i, g in enumerate(slots)]))


def _accumulate(a: CTensor, b: CTensor) -> CTensor:
    for g in a, b:               # a product kept for a GEMM (_kept_product) runs, not fuses
        if gemm_operands(g.value) is not None:
            g.materialize()
    return CTensor(_AD.add(a.value, b.value), a.lshape, a.dev, a.dtype)


def _zeros_for(op: Operation, i: int) -> Any:
    """A zero gradient for an output of op that got none (op's other outputs got some)."""
    shape, dtype, dev = op._outs[i]
    return CTensor(dev.be.zeros(pad2(shape), dtype=dtype), shape, dev, dtype)


def gradients(y: Tensor, dy: Any = None) -> dict:
    """{tensor: gradient} for every tensor with stores_grad=True (see backward)."""
    return dict(backward(y, dy))


# ---------------------------------------------------------------- layers
class Layer:
    """SINGA's Layer: owns parameters (Tensors with stores_grad=True) and applies operators."""

    def __init__(self) -> None:
        self.allow_params: list = []

    def get_params(self) -> dict:
        return {name: getattr(self, name) for name in self.allow_params}

    def set_params(self, **parameters: Any) -> None:
        for name, value in parameters.items():
            if name not in self.allow_params:
                raise ValueError(f"{type(self).__name__}.set_params: unknown parameter {name!r}; "
                                 f"known: {self.allow_params}")
            param = getattr(self, name)
            if isinstance(value, Tensor):
                value = value.to_numpy()
            value = np.asarray(value)
            if value.shape != param.shape:
                raise ValueError(f"{type(self).__name__}.set_params: {name} has shape "
                                 f"{param.shape}, got {value.shape}")
            param.copy_from_numpy(value)

    def device_check(self, *inputs: Any) -> None:
        """Move every tensor given to the first one's device (SINGA's: a layer's parameters,
        made on the default device, follow the input it is called on)."""
        dev = inputs[0].device
        for t in inputs[1:]:
            if t is not None and t.device is not dev:
                t.to_device(dev)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _export(names: dict) -> None:
    """Re-export a module's `__all__` here (SINGA's autograd holds its operators and layers).
    operators.py and layers.py call this with their globals as their last statement, so that
    whichever of the three a script imports first, autograd ends up with every name."""
    g = globals()
    for name in names["__all__"]:
        g[name] = names[name]


from . import operators, layers  # noqa: E402,F401  (each calls _export as it finishes)
