"""OpTreeNode: neon's immutable op-tree `(op_dict, left, right)`, and the operator overloads.

A tree is built by operators on Tensors and OpTreeNodes, by backend functions, or by
`OpTreeNode.build`; it runs only when assigned: `out[:] = tree` builds `assign(out, tree)` and the
output's backend executes it. Shapes are checked while the tree is built, so a bad tree fails where
it was written, naming the op and the shapes.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from . import ops as _OPS
from . import shapes as S
from .memo import Memo
from .ops import ACCEPTED_KWARGS, OP_INFO, Kind, Op, as_op

_NUMBER_KINDS = "biuf"


class OpDict(dict):
    """The op slot of a node: `{'op': Op, 'shape': tuple, **attrs}`, frozen once made.

    `token` memoises the node's part of a structural signature (see plan.walk). Nodes made by
    `build` also carry their tree's structure as it is built (see `_intern`): `sid`, an interned
    id of the tree's structure, `leaves` (the tree's Tensors in post-order, repeats included) and
    `consts` (its constants in post-order, as floats), so that executing a tree needs no walk.
    """

    __slots__ = ("token", "sid", "leaves", "consts")

    def _frozen(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("an op-tree's op_dict is immutable; build a new node instead")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _frozen  # type: ignore

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(self):
            self._frozen()
        dict.__init__(self, *args, **kwargs)

    def __reduce__(self) -> tuple:
        return (OpDict, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


def constant(x: Any, op: Any) -> Any:
    """A Python or numpy real number (or 0-d array) as a Python int/float constant."""
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, (int, float)) and not isinstance(x, np.generic):
        value = x
    elif isinstance(x, (np.generic, np.ndarray)) and np.ndim(x) == 0 and x.dtype.kind in _NUMBER_KINDS:
        value = x.item()
        value = int(value) if isinstance(value, bool) else value
    else:
        hint = ""
        if isinstance(x, np.ndarray):
            hint = f" (a numpy array of shape {x.shape}: copy it to the backend with be.array(...))"
        raise TypeError(f"{op}: operands must be Tensors, op-trees or real numbers, "
                        f"got {type(x).__name__}{hint}")
    try:
        float(value)
    except OverflowError:
        text = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ValueError(f"{op}: constant {text} does not fit a float64") from None
    return value


def shape_of(x: Any) -> tuple | None:
    """The shape of an operand: a Tensor's or node's shape, (1, 1) for a number, None for None."""
    if x is None:
        return None
    if isinstance(x, Operators):
        return x.shape
    return (1, 1)


# ---------------------------------------------------------------- structure, kept as trees are built
#
# A tree's structure (ops, attrs, and per leaf: Tensor (dtype, ndim, size-1 axes) or constant) is
# interned into a small int `sid` as each node is made, from its children's: equal structures get
# equal sids. Which leaves are the same Tensor is not part of it (the executor adds that).
_STRUCTS = Memo("optree.structures", 1 << 16)   # ids are never reused: eviction is safe
# A tree with more leaves and constants than this (counted with repeats: `y = tanh(y + y)` doubles
# them at each level) keeps no structure id; executing it walks it (plan.walk) instead.
LEAVES_MAX = 512
_next_sid = itertools.count()
_next_token = itertools.count(1)


def tensor_token(t: Any) -> int:
    """An interned int for a Tensor's (dtype char, ndim, mask of size-1 axes), memoised on the
    Tensor (its shape and dtype never change)."""
    try:
        return t._token
    except AttributeError:
        shape, char = t.shape, t.dtype.char
        tok = _SHAPE_TOKENS.get((char, shape))   # a fresh view of a shape seen before: ~1 us less
        if tok is None:
            key = ("t", char, len(shape), sum(1 << i for i, d in enumerate(shape) if d == 1))
            tok = _TENSOR_TOKENS.get(key)
            if tok is None:
                tok = _TENSOR_TOKENS.put(key, -next(_next_token))
            _SHAPE_TOKENS.put((char, shape), tok)
        t._token = tok
        return tok


_TENSOR_TOKENS = Memo("optree.tensor_tokens", 1024)
_SHAPE_TOKENS = Memo("optree.shape_tokens", 4096)   # (dtype char, shape) -> its token


def _parts(x: Any) -> tuple:
    """(structure token, leaves, consts) of an operand; token None where it has no structure."""
    tx = type(x)
    if tx is float or tx is int:
        return "c", (), (float(x),)
    if tx is OpTreeNode:
        d = x[0]
        try:
            return d.sid, d.leaves, d.consts
        except AttributeError:
            return None, (), ()
    if x is None:
        return False, (), ()
    if isinstance(x, Operators):
        return tensor_token(x), (x,), ()
    return "c", (), (float(x),)


def _intern(d: OpDict, op: Op, attrs: Any, a: Any, b: Any) -> None:
    ta, la, ca = _parts(a)
    tb, lb, cb = _parts(b)
    if ta is None or tb is None or len(la) + len(lb) + len(ca) + len(cb) > LEAVES_MAX:
        d.sid, d.leaves, d.consts = None, (), ()
        return
    d.leaves, d.consts = (la + lb, ca + cb) if lb else (la, ca + cb)
    key = (op, attrs, ta, tb)
    try:
        sid = _STRUCTS.get(key)
    except TypeError:              # unhashable attrs: no structure id (the executor walks the tree)
        d.sid = None
        return
    if sid is None:
        sid = _STRUCTS.put(key, next(_next_sid))
    d.sid = sid


def _broadcast2(sa: tuple, sb: tuple, op: Op) -> tuple:
    try:
        return _BCAST[(sa, sb)]
    except KeyError:
        shape = S.broadcast(sa, sb, op)   # raises, naming the op and shapes, where they don't fit
        _BCAST.put((sa, sb), shape)
        return shape


class Tensor_:
    """Marker base of Tensor (tensor.py imports this module, so Tensor itself cannot be named here)."""
    __slots__ = ()


_BCAST = Memo("optree.broadcast", 4096)
# (op, operand shape, keyword items) -> (shape, attrs, attr items) of a reduction
_INFERRED = Memo("optree.reductions", 4096)
_new_opdict, _dict_update = dict.__new__, dict.update   # an OpDict without its guarded __init__
_make_node = tuple.__new__


def elementwise_maker(op: Op, swap: bool = False, fallback: Any = None) -> Any:
    """`make(x, y)`: an `op` node on the hot path of every statement (operands Tensors, trees
    made by build() or Python numbers, no keywords), written out flat: one frame per node.
    Anything else goes to `fallback(x, y)`, the general path that checks and reports, or gives
    None where there is none. `swap` makes the node of (y, x): the reflected operators."""
    unary = OP_INFO[op].arity == 1

    def make(x: Any, y: Any = None) -> Any:
        if swap:
            a, b = y, x
        else:
            a, b = x, y
        # NOTE: the two operands are classified by the same lines, written twice: a helper
        # would cost a call per operand on every node
        t = type(a)
        if t is OpTreeNode:
            d = a[0]
            try:
                sa, ka, la, ca = d["shape"], d.sid, d.leaves, d.consts
            except AttributeError:     # a node made without build(): no structure to extend
                return None if fallback is None else fallback(x, y)
        elif t is float:
            sa, ka, la, ca = None, "c", (), (a,)
        elif t is int:
            try:
                sa, ka, la, ca = None, "c", (), (float(a),)
            except OverflowError:
                return None if fallback is None else fallback(x, y)
        elif isinstance(a, Tensor_):
            sa, la, ca = a.shape, (a,), ()
            try:
                ka = a._token
            except AttributeError:
                ka = tensor_token(a)
        else:
            return None if fallback is None else fallback(x, y)
        if unary:
            if b is not None:
                return None if fallback is None else fallback(x, y)
            shape, kb, leaves, consts = sa or (1, 1), False, la, ca
        else:
            t = type(b)
            if t is OpTreeNode:
                d = b[0]
                try:
                    sb, kb, lb, cb = d["shape"], d.sid, d.leaves, d.consts
                except AttributeError:
                    return None if fallback is None else fallback(x, y)
            elif t is float:
                sb, kb, lb, cb = None, "c", (), (b,)
            elif t is int:
                try:
                    sb, kb, lb, cb = None, "c", (), (float(b),)
                except OverflowError:
                    return None if fallback is None else fallback(x, y)
            elif isinstance(b, Tensor_):
                sb, lb, cb = b.shape, (b,), ()
                try:
                    kb = b._token
                except AttributeError:
                    kb = tensor_token(b)
            else:
                return None if fallback is None else fallback(x, y)
            if sa == sb or sb is None:
                shape = sa or (1, 1)
            elif sa is None:
                shape = sb
            else:
                shape = _broadcast2(sa, sb, op)
            leaves = la + lb if lb else la
            consts = ca + cb if cb else ca
        d = _new_opdict(OpDict)
        _dict_update(d, op=op, shape=shape)
        if ka is None or kb is None or len(leaves) + len(consts) > LEAVES_MAX:
            d.sid, d.leaves, d.consts = None, (), ()
        else:
            d.leaves, d.consts = leaves, consts
            key = (op, None, ka, kb)
            sid = _STRUCTS.get(key)
            if sid is None:
                sid = _STRUCTS.put(key, next(_next_sid))
            d.sid = sid
        return _make_node(OpTreeNode, (d, a, b))
    make.__name__ = f"make_{op.value}"
    return _compiled(op, swap, unary, make)


def _compiled(op: Op, swap: bool, unary: bool, make: Any) -> Any:
    """`make` as neonlike._hotpath' C maker where the extension was built (the same nodes, ~5x
    faster to make; calls off its hot path go to `make`), else `make` itself."""
    nodes = hotpath()
    return make if nodes is None else nodes.Maker(op, swap, unary, make)


def hotpath() -> Any:
    """The C extension neonlike._hotpath, set up with this module's types and tables, or None
    where it was not built (no C compiler at install) or NEONLIKE_HOTPATH=0."""
    if _HOTPATH:
        return _HOTPATH[0]
    import os
    nodes = None
    if os.environ.get("NEONLIKE_HOTPATH", "1") != "0":
        try:
            from . import _hotpath as nodes
        except ImportError:
            nodes = None
    _HOTPATH.append(nodes)   # set up at the end of this module, once OpTreeNode exists
    return nodes


def _new_sid(key: tuple) -> int:
    """The sid of a structure key seen first (the C maker's miss)."""
    return _STRUCTS.put(key, next(_next_sid))


_HOTPATH: list = []


_MAKERS = {op: elementwise_maker(op) for op, info in OP_INFO.items()
           if info.kind is Kind.ELEMENTWISE and info.infer in (_OPS._same, _OPS._broadcast)}


def trusted_node(op: Op, shape: tuple, items: tuple | None, a: Any, b: Any) -> Any:
    """A node whose shape and attrs (`items`, as the node's op_dict holds them after op and
    shape) are already known right for these operands (a replayed gradient plan): no checks."""
    d = _new_opdict(OpDict)
    _dict_update(d, items or (), op=op, shape=shape)
    _intern(d, op, items, a, b)
    return tuple.__new__(OpTreeNode, (d, a, b))


def build(op: Any, a: Any, b: Any, out: Any = None, **kwargs: Any) -> Any:
    """Check operands, infer the shape and make a node; `assign` (or `out=`) executes it at once."""
    op = op if type(op) is Op else as_op(op)
    if not kwargs:
        make = _MAKERS.get(op)
        if make is not None:
            node = make(a, b)
            if node is not None:
                return node if out is None else _assign_to(out, node)
        elif isinstance(a, Operators) and isinstance(b, Operators):
            # a binary structural op (dot) seen before on these shapes: its checked result
            hit = _INFERRED.get((op, a.shape, b.shape))
            if hit is not None:
                d = _new_opdict(OpDict)
                _dict_update(d, op=op, shape=hit[0])
                _intern(d, op, None, a, b)
                node = tuple.__new__(OpTreeNode, (d, a, b))
                return node if out is None else _assign_to(out, node)
    elif out is None and b is None and isinstance(a, Operators):
        # a reduction (or other keyword op) seen before on this shape: its checked result
        try:
            hit = _INFERRED.get((op, a.shape, tuple(kwargs.items())))
        except TypeError:  # unhashable keyword values (an axis list): the general path
            hit = None
        if hit is not None:
            shape, attrs, items = hit
            d = _new_opdict(OpDict)
            _dict_update(d, attrs, op=op, shape=shape)
            _intern(d, op, items, a, None)
            return tuple.__new__(OpTreeNode, (d, a, None))
    info = OP_INFO[op]
    if a is not None and not isinstance(a, Operators):
        a = constant(a, op)
    if b is not None and not isinstance(b, Operators):
        b = constant(b, op)
    given = (a is not None) + (b is not None)
    if given != info.arity:
        raise ValueError(f"{op}: takes {info.arity} operand(s), got {given}")
    if info.arity == 1 and a is None:
        raise ValueError(f"{op}: a unary op takes its operand on the left: build({op.value!r}, x, None)")
    accepted = ACCEPTED_KWARGS.get(info.infer, ())
    if kwargs and set(kwargs) - set(accepted):
        unknown = set(kwargs) - set(accepted)
        raise TypeError(f"{op}: unexpected keyword argument(s) {sorted(unknown)}; "
                        f"accepted: {list(accepted) or 'none'}")
    if op is Op.ASSIGN:
        if not isinstance(a, Operators) or isinstance(a, OpTreeNode):
            raise TypeError(f"assign: the output must be a Tensor, got {type(a).__name__}")
        info.infer(op, a.shape, shape_of(b), kwargs)
        return OpTreeNode(OpDict(op=op, shape=a.shape), a, b).execute()
    shape, attrs = info.infer(op, shape_of(a), shape_of(b), kwargs)
    d = OpDict(op=op, shape=shape, **attrs)
    items = tuple(attrs.items()) if attrs else None
    _intern(d, op, items, a, b)
    if info.kind is Kind.REDUCTION and b is None and isinstance(a, Operators):
        try:
            key = (op, a.shape, tuple(kwargs.items()))
            _INFERRED.put(key, (shape, attrs, items))
        except TypeError:
            pass
    elif info.kind is Kind.MATMUL and not attrs and isinstance(a, Operators) and \
            isinstance(b, Operators):
        _INFERRED.put((op, a.shape, b.shape), (shape, attrs, items))
    node = tuple.__new__(OpTreeNode, (d, a, b))
    if out is not None:
        return _assign_to(out, node)
    return node


def _assign_to(out: Any, node: Any) -> Any:
    """`build(..., out=out)`: the node executed into out, which is returned. A Tensor of the
    node's shape takes it as `out[:] = node` (Tensor.__setitem__: the statement's fast path),
    anything else through the checked `assign` node."""
    if isinstance(out, Tensor_) and node[0]["shape"] == out.shape:
        out[:] = node
        return out
    return build(Op.ASSIGN, out, node)


def dag_postorder(root: Any, stop: Any = ()) -> list:
    """The op nodes under `root` (root included) as a DAG: each node object once, children
    before parents, left before right. Nodes whose id is in `stop` are neither listed nor entered.
    (A tree built as `y = tanh(y + y)` n times has n nodes here and 2^n as a tree.)"""
    order: list = []
    seen: set = set(stop)
    stack = [] if id(root) in seen else [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if id(node) not in seen:
                seen.add(id(node))
                order.append(node)
            continue
        if id(node) in seen:
            continue
        stack.append((node, True))
        for child in (node[2], node[1]):
            if type(child) is OpTreeNode and id(child) not in seen:
                stack.append((child, False))
    return order


def _is_tensor(x: Any) -> bool:
    return isinstance(x, Operators) and not isinstance(x, OpTreeNode)


def _leaf_str(x: Any) -> str:
    if isinstance(x, OpTreeNode):
        return str(x)
    if isinstance(x, Operators):
        return x.name if x.name is not None else f"tensor-{hex(id(x))}"
    return repr(x)


def _text(root: Any, pieces: Any) -> str:
    """The text of a tree where `pieces(node)` lists a node's text as strings and operands
    (None, a number, a Tensor or a node, shown in its place), written out without recursion
    (trees may be thousands of nodes deep) and joined once."""
    out: list = []
    stack = [root]
    while stack:
        x = stack.pop()
        if type(x) is str:
            out.append(x)
        elif isinstance(x, OpTreeNode):
            stack.extend(reversed(pieces(x)))
        else:
            out.append(_leaf_str(x))
    return "".join(out)


def _binary(op: Op, reflected: bool = False) -> Any:
    """The operator method of `op` (the reflected one with `reflected`): the flat elementwise
    maker first where `op` has one, then the general checks and build()."""
    def method(self: Any, other: Any) -> Any:
        if not isinstance(other, (Operators, int, float)):
            if isinstance(other, np.ndarray) and other.ndim > 0:
                raise TypeError(f"{op}: cannot combine a {type(self).__name__} with a numpy array "
                                f"of shape {other.shape}; copy it to the backend with be.array(...)")
            if not (isinstance(other, (np.generic, np.ndarray))
                    and other.dtype.kind in _NUMBER_KINDS):
                if isinstance(self, OpTreeNode) and op not in (Op.EQ, Op.NE):
                    # a tree is a tuple: NotImplemented would let tuple + / < take over
                    raise TypeError(f"{op}: unsupported operand type {type(other).__name__} "
                                    "for an op-tree; expected a Tensor, op-tree or real number")
                return NotImplemented
        return build(op, other, self) if reflected else build(op, self, other)
    method.__name__ = f"__{'r' if reflected else ''}{op.value}__"
    if op not in _MAKERS:
        return method
    fast = elementwise_maker(op, swap=reflected, fallback=method)
    fast.__name__ = method.__name__
    return fast


def _equality(op: Op) -> Any:
    """== and != build trees; between two Tensors of shapes that cannot broadcast they answer
    by identity instead (False / True), so `t in [a, b]` works for tensors of any shapes."""
    elementwise = _binary(op)

    def method(self: Any, other: Any) -> Any:
        if isinstance(other, Operators) and not isinstance(self, OpTreeNode) and \
                not isinstance(other, OpTreeNode):
            try:
                S.broadcast(self.shape, other.shape, op)
            except ValueError:
                return op is Op.NE
        return elementwise(self, other)
    method.__name__ = f"__{op.value}__"
    return method


class Operators:
    """Operator overloads shared by Tensor and OpTreeNode: each builds an op-tree.

    numpy defers to these (`__array_ufunc__ = None`), so `np.float32(2) * t` builds a tree too.
    """

    __slots__ = ()
    __array_ufunc__ = None

    __add__, __radd__ = _binary(Op.ADD), _binary(Op.ADD, True)
    __sub__, __rsub__ = _binary(Op.SUB), _binary(Op.SUB, True)
    __mul__, __rmul__ = _binary(Op.MUL), _binary(Op.MUL, True)
    __truediv__, __rtruediv__ = _binary(Op.DIV), _binary(Op.DIV, True)
    __pow__, __rpow__ = _binary(Op.POW), _binary(Op.POW, True)
    __matmul__, __rmatmul__ = _binary(Op.DOT), _binary(Op.DOT, True)
    __and__, __rand__ = _binary(Op.AND), _binary(Op.AND, True)
    __or__, __ror__ = _binary(Op.OR), _binary(Op.OR, True)
    __xor__, __rxor__ = _binary(Op.XOR), _binary(Op.XOR, True)
    __eq__, __ne__ = _equality(Op.EQ), _equality(Op.NE)  # type: ignore[assignment]
    __lt__, __le__ = _binary(Op.LT), _binary(Op.LE)
    __gt__, __ge__ = _binary(Op.GT), _binary(Op.GE)

    def __neg__(self) -> OpTreeNode:
        node = _MAKERS[Op.NEG](self)
        return node if node is not None else build(Op.NEG, self, None)

    def __abs__(self) -> OpTreeNode:
        node = _MAKERS[Op.ABS](self)
        return node if node is not None else build(Op.ABS, self, None)

    def __invert__(self) -> OpTreeNode:
        return build(Op.NOT, self, None)

    def __pos__(self) -> Any:
        return self


class _ShapeAttr:
    """`node.shape` is the node's shape; `OpTreeNode.shape(x)` is the shape of any operand (neon)."""

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        return shape_of if obj is None else obj[0]["shape"]


class OpTreeNode(Operators, tuple):
    """An immutable 3-tuple `(op_dict, left, right)`; leaves are Tensors, numbers or None."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # == builds a tree, so nodes are not hashable
    shape = _ShapeAttr()
    build = staticmethod(build)

    def __new__(cls, op_dict: dict, left: Any = None, right: Any = None) -> OpTreeNode:
        if type(op_dict) is not OpDict:
            op_dict = OpDict(op_dict)
        return tuple.__new__(cls, (op_dict, left, right))

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    def __repr__(self) -> str:
        return _text(self, lambda x: ["(", repr(x[0]), ", ", x[1], ", ", x[2], ")"])

    __str__ = __repr__

    def __bool__(self) -> bool:
        op, left, right = self
        if op["op"] in (Op.EQ, Op.NE) and _is_tensor(left) and _is_tensor(right):
            return (left is right) == (op["op"] == Op.EQ)  # list membership compares identity
        raise TypeError(
            f"the truth value of an op-tree ({op['op']}) is undefined: the tree is lazy and "
            "elementwise. Assign it (out[:] = tree) and read values with out.get(); combine "
            "conditions with & | ~ or be.logical_and/or/not, not Python's and/or/not.")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an op-tree is lazy: use tree.asnumpyarray() or assign it to a Tensor")

    def execute(self) -> Any:
        """Run an `assign`-rooted tree on its output's backend; returns the output."""
        if self[0]["op"] != Op.ASSIGN:
            raise ValueError(f"only an 'assign' tree can be executed, this one is '{self[0]['op']}'; "
                             "assign it to a tensor: out[:] = tree")
        return self[1].backend.execute(self)

    def traverse(self, stack: list) -> list:
        """Append the post-order stack (leaves, then op_dicts) to `stack` and return it."""
        work: list = [(self, True)]      # (item, expand); iterative: trees may be deep
        while work:
            x, expand = work.pop()
            if not expand:
                stack.append(x)
                continue
            work.append((x[0], False))
            for child in (x[2], x[1]):
                if isinstance(child, OpTreeNode):
                    work.append((child, True))
                elif child is not None:
                    work.append((child, False))
        return stack

    def leaves(self) -> list:
        """The Tensors of the tree, in post-order, each once."""
        found: dict[int, Any] = {}
        entered: set = set()
        stack = [self]
        while stack:                    # a shared subtree is entered once
            x = stack.pop()
            if type(x) is OpTreeNode:
                if id(x) not in entered:
                    entered.add(id(x))
                    stack.extend(c for c in (x[2], x[1]) if c is not None)
            elif isinstance(x, Operators):
                found.setdefault(id(x), x)
        return list(found.values())

    def pp(self) -> str:
        """An infix rendering: `((x0 * 2) + exp(x1))`."""
        def pieces(x: OpTreeNode) -> list:
            d, left, right = x
            info = OP_INFO[Op(d["op"])]
            if info.symbol and info.arity == 2:
                return ["(", left, f" {info.symbol} ", right, ")"]
            if info.symbol:
                return [f"({info.symbol}", left, ")"]
            args: list = [c for c in (left, right) if c is not None]
            args += [f"{k}={v!r}" for k, v in d.items() if k not in ("op", "shape")]
            return [f"{d['op']}("] + [p for i, a in enumerate(args)
                                      for p in ((", ", a) if i else (a,))] + [")"]
        return _text(self, pieces)

    @property
    def T(self) -> OpTreeNode:
        """Transpose as Tensor.T does: 2-D reverses the axes, more dims swap the last two."""
        n = len(self.shape)
        axes = None if n == 2 else tuple(range(n - 2)) + (n - 1, n - 2)
        return build(Op.TRANSPOSE, self, None, axes=axes)

    def transpose(self, out: Any = None) -> Any:
        return self.T if out is None else build(Op.ASSIGN, out, self.T)

    def reshape(self, *shape: Any) -> OpTreeNode:
        newshape = shape[0] if len(shape) == 1 else shape
        return build(Op.RESHAPE, self, None, newshape=newshape)

    @property
    def kind(self) -> Kind:
        return OP_INFO[Op(self[0]["op"])].kind

    def backend(self) -> Any:
        """The backend of the first Tensor in the tree, or the global one (NervanaObject.be)."""
        for leaf in self.leaves():
            return leaf.backend
        from . import NervanaObject
        if NervanaObject.be is None:
            raise RuntimeError("this op-tree holds no Tensor and no backend exists: call gen_backend()")
        return NervanaObject.be

    def astensor(self) -> Any:
        """A new tensor holding the tree's value: of its float leaves' dtype, else the default."""
        be = self.backend()
        floats = [t.dtype for t in self.leaves() if t.dtype.kind == "f"]
        out = be.empty(self.shape, dtype=np.result_type(*floats) if floats else None)
        out[:] = self
        return out

    def asnumpyarray(self) -> np.ndarray:
        return self.astensor().get()


if _HOTPATH and _HOTPATH[0] is not None:
    _HOTPATH[0].setup(OpTreeNode, OpDict, Tensor_, _STRUCTS, _new_sid, _BCAST, _broadcast2,
                      tensor_token, LEAVES_MAX)
