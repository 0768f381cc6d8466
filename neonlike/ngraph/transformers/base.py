"""Transformers: computations of an ngraph graph, run as neonlike engine statements.

    t = ngt.make_transformer()                  # 'numpy' by default (set_transformer_factory)
    f = t.computation([y, update], x)           # y's value and the update, for each x given
    y_value, _ = f(x_array)                     # arrays in each placeholder's axes order

A computation is planned once, at its first call (when every axis length must be known; the
error names an axis that has none): its statements, in dependency order, are the assignments it
depends on and its results, each one engine op-tree (lowering.py). Later calls feed the
placeholders and run the same trees, which the engine's structural kernel cache serves. Each call
returns new arrays the caller owns (a result of FRESH_MIN elements or more on a host backend is
computed straight into a new array, not copied out of a buffer; upstream's CPU transformer gave
its buffers themselves, overwritten by the next call).

`NumPyTransformer` runs each statement through neonlike's numpy reference interpreter (the oracle
the engine is tested against); the engine transformers ('cpu', 'mkl', 'gpu') assign the trees on
the backend of that name (`gen_backend`), fused and compiled.

Ordering: the statements follow a depth-first walk of the results' data and control dependencies,
each emitted once its dependencies are; an assignment's statement comes before any op built
after it from its tensor (seed 003). Values are recomputed in each statement that reads them
(they are not kept between statements), so a value read both before and after an assignment of
a tensor it reads sees the tensor as it is at each statement.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...axes import Axes
from ..op_graph import op_graph as G
from .lowering import Lowering, _lengths, _pad2
from .schedule import dependency_order as _dependency_order, schedule

# results of this many elements or more are computed into a new array each call and handed to
# the caller (below it, copying the result costs less than making the new array a tensor)
FRESH_MIN = 1 << 14


class Computation:
    """A callable computing `results` (one op: its value; a list: a tuple) from `parameters`."""

    def __init__(self, transformer: Transformer, results: Any, parameters: tuple) -> None:
        self.transformer = transformer
        self.single = isinstance(results, G.Op)
        self.results = (results,) if self.single else tuple(G.as_op(r) for r in results)
        for i, p in enumerate(parameters):
            if not (isinstance(p, G.AssignableTensorOp) and p.is_input):
                raise ValueError(f"computation: parameter {i} ({getattr(p, 'name', p)!r}) is not a "
                                 f"placeholder; only placeholders take the call's arguments")
        self.parameters = tuple(parameters)
        # the assignments recorded for the results now (seed 003: computation(w) after assign)
        self.deps = [d for r in self.results for d in G.Op._user_deps.get(r, ())]
        self.statements: list | None = None

    def __call__(self, *args: Any) -> Any:
        if len(args) != len(self.parameters):
            raise ValueError(f"computation: takes {len(self.parameters)} argument(s) "
                             f"({', '.join(p.name for p in self.parameters)}), got {len(args)}")
        t = self.transformer
        if self.statements is None:
            t._finalize()
            self.statements = self._plan()
        for p, value in zip(self.parameters, args):
            t._feed(p, value)
        if t.random:
            t._draw_random(self)
        fresh: dict = {}
        if not self._fresh_at:
            for run in self.statements:
                run()
        else:
            for i, run in enumerate(self.statements):
                target = self._fresh_at.get(i)
                if target is None:
                    run()
                else:                   # a large result: computed into a new array, handed over
                    op, shape, dtype = target
                    fresh[op] = np.empty(shape, dtype)
                    run(t._host_tensor(fresh[op]))
        if self.single:
            return self._fetch(self.results[0], fresh)
        return tuple(self._fetch(r, fresh) for r in self.results)

    # ---------------------------------------------------------------- planning
    def _plan(self) -> list:
        t = self.transformer
        for r in self.results:
            if isinstance(r, G.TensorOp):
                r.axes.require_lengths()
        order = _dependency_order(self.deps + list(self.results))
        statements, stored = [], []
        self._outs: dict = {}
        wanted = set(self.results)
        for op in order:
            if isinstance(op, G.AssignOp):
                lvalue, rvalue = op.args
                statements.append((*self._statement(t.storage(lvalue), lvalue, rvalue), op))
            if op in wanted and isinstance(op, G.TensorOp) and op not in self._outs:
                op.axes.require_lengths()
                out = t.be.empty(_pad2(_lengths(op.axes)), dtype=_out_dtype(op))
                self._outs[op] = out
                # a tensor with storage is read when the computation is done (its updates in)
                (stored if isinstance(op, G.AssignableTensorOp) else statements).append(
                    (*self._statement(out, op, op), op))
        statements = schedule(t.be, statements + stored)
        self.trees = [(out, tree) for out, tree, _ in statements]
        self._fresh_at = self._fresh_results(statements)
        return [t._prepare(out, tree) for out, tree in self.trees]

    def _fresh_results(self, statements: list) -> dict:
        """statement index -> (result op, shape, dtype) for the results computed straight into a
        new host array each call (no copy at the end): on an engine over host memory, results of
        FRESH_MIN elements or more written by one statement of their own."""
        t = self.transformer
        if _engine(t.be) is None or not hasattr(t, "_host_tensor"):
            return {}
        fresh = {}
        for op, out in self._outs.items():
            writers = [i for i, (o, _, _) in enumerate(statements)
                       if o is out or getattr(o, "base", None) is out]
            o = statements[writers[0]][0] if len(writers) == 1 else None
            if o is not None and out.size >= FRESH_MIN and o.size == out.size and \
                    getattr(o, "_tensor", None) is not None and o._tensor.flags.c_contiguous:
                fresh[writers[0]] = (op, tuple(o.shape), o.dtype)
        return fresh

    def _statement(self, out: Any, lvalue: G.TensorOp, value: G.TensorOp) -> tuple:
        t = self.transformer
        frame = t.lowering.frame(value, first=lvalue.axes)
        for a in frame:
            if a.length is None:
                raise ValueError(f"computation: axis {a.name or a} has no length (set "
                                 f"{a.name or 'its'}.length before the first call)")
        view = t.lowering.view(out, lvalue.axes, frame)
        return view, t.lowering.value(value, frame)

    def _fetch(self, op: G.Op, fresh: dict) -> Any:
        value = fresh.get(op)
        if value is None:
            out = self._outs.get(op)
            if out is None:
                return None
            value = out.get()
        return value.reshape(_lengths(op.axes)).astype(op.dtype, copy=False)


def _engine(be: Any) -> Any:
    """The engine (engine.Engine) that runs `be`'s statements, or None (the reference)."""
    engine = getattr(be, "_engine", None)          # the GPU's
    if engine is None and type(be).__module__.startswith("neonlike.backends.cpu"):
        from ...backends.cpu.device import _fused
        engine = _fused()
    return engine


def _out_dtype(op: G.TensorOp) -> Any:
    """The engine dtype of op's values (booleans are held as 0.0 / 1.0, integers as float64)."""
    if op.dtype.kind == "b":
        return np.float32
    return op.dtype if op.dtype.kind == "f" else np.float64


class Transformer:
    """Runs computations of a graph on a neonlike backend; tensors with storage live here."""

    name = "engine"

    def __init__(self, backend: str = "cpu", **backend_args: Any) -> None:
        from ...backends import gen_backend
        self.be = gen_backend(backend, **backend_args)
        self.tensors: dict = {}
        self.computations: list = []
        self.finalized = False
        self.random: dict = {}       # RngOp -> its tensor, drawn anew before each call
        self.lowering = Lowering(self.be, self.storage, self._random_tensor)
        self.rng = np.random.default_rng(0)

    def computation(self, results: Any, *parameters: Any) -> Computation:
        if self.finalized:
            raise ValueError("Cannot create computations from a finalized transformer")
        c = Computation(self, results, parameters)
        self.computations.append(c)
        return c

    def initialize(self) -> None:
        self._finalize()

    def close(self) -> None:
        self.tensors.clear()

    def _finalize(self) -> None:
        self.finalized = True

    # ---------------------------------------------------------------- storage
    def storage(self, op: G.AssignableTensorOp) -> Any:
        """op's engine tensor, made (and given its initial value) on first use."""
        t = self.tensors.get(op)
        if t is None:
            op.axes.require_lengths()
            t = self.tensors[op] = self.be.zeros(_pad2(_lengths(op.axes)), dtype=_out_dtype(op))
            for init in op.initializers:
                self._initialize(op, t, init.value)
        return t

    def _initialize(self, op: G.AssignableTensorOp, t: Any, value: Any) -> None:
        lengths = _lengths(op.axes)
        if isinstance(value, G.Op):
            tree = self.lowering.value(value, tuple(op.axes) if len(op.axes) else ())
            self._run(self.lowering.view(t, op.axes, tuple(op.axes)), tree)
            return
        if callable(value):
            value = value(lengths)
        array = np.asarray(value, dtype=t.dtype)
        if array.ndim and array.shape != lengths:
            raise ValueError(f"{op.name}: its initial value has shape {array.shape}, its axes "
                             f"{list(op.axes)} have lengths {lengths} (was an axis length "
                             f"changed after the value was given?)")
        array = np.broadcast_to(array, lengths)
        t.set(np.ascontiguousarray(array).reshape(t.shape))

    def _feed(self, p: G.AssignableTensorOp, value: Any) -> None:
        lengths = _lengths(p.axes)
        array = value if type(value) is np.ndarray else np.asarray(value)
        if array.shape != lengths:
            if array.size == 1 and not lengths:
                array = array.reshape(())
            else:
                raise ValueError(f"computation: placeholder {p.name} has axes {list(p.axes)} of "
                                 f"lengths {lengths}; got an array of shape {array.shape}")
        t = self.storage(p)
        if array.dtype != t.dtype or not array.flags.c_contiguous:
            array = np.ascontiguousarray(array, dtype=t.dtype)
        t._store(array.reshape(t.shape))     # its shape checked above

    def _random_tensor(self, op: G.RngOp) -> Any:
        t = self.random.get(op)
        if t is None:
            op.axes.require_lengths()
            t = self.random[op] = self.be.empty(_pad2(_lengths(op.axes)), dtype=_out_dtype(op))
        return t

    def _draw_random(self, c: Computation) -> None:
        for op, t in self.random.items():
            draw = getattr(self.rng, op.distribution)
            t.set(draw(*op.params.values(), size=t.shape).astype(t.dtype))

    def _run(self, out: Any, tree: Any) -> None:
        out[:] = tree

    def _host_tensor(self, array: np.ndarray) -> Any:
        """A tensor of this transformer's backend over a host array (no copy)."""
        from ...backends.cpu.device import CPUTensor
        return CPUTensor(self.be, array)

    def _prepare(self, out: Any, tree: Any) -> Any:
        """A runner of `out[:] = tree` (the same objects each call): the engine's prepared
        statement where the backend runs one (engine.Engine.prepare), else an assignment."""
        engine = _engine(self.be)
        if engine is None:
            return lambda: self._run(out, tree)
        return engine.prepare(out, tree)


def transformer_factory(name: str) -> Any:
    return make_transformer_factory(name)


_FACTORIES: dict = {}


def make_transformer_factory(name: str, **kwargs: Any) -> Any:
    """A callable making transformers of kind `name` ('numpy', 'cpu', 'mkl', 'gpu')."""
    if name not in transformer_choices():
        raise ValueError(f"unknown transformer {name!r}; the choices are {transformer_choices()}")
    if name == "numpy":
        from .nptransform import NumPyTransformer
        return lambda **kw: NumPyTransformer(**{**kwargs, **kw})
    return lambda **kw: Transformer(name, **{**kwargs, **kw})


def transformer_choices() -> list:
    return ["numpy", "cpu", "mkl", "gpu"]


_DEFAULT: list = []


def set_transformer_factory(factory: Any) -> None:
    _DEFAULT[:] = [factory]


def make_transformer(**kwargs: Any) -> Transformer:
    """A transformer from the factory set by set_transformer_factory (default 'numpy')."""
    factory = _DEFAULT[0] if _DEFAULT else make_transformer_factory("numpy")
    return factory(**kwargs)


__all__ = ["Transformer", "Computation", "make_transformer", "make_transformer_factory",
           "set_transformer_factory", "transformer_choices", "Axes"]
