"""The kernel plan: an assignment tree split into stages, as plain device-independent data.

    out[:] = tree  ->  signature(out, tree)  (structure only: the cache key)
                   ->  make_plan(out, tree)  (stages; cached by the signature)
                   ->  bind(plan, out, tree) (this call's buffers, constants and temp shapes)

Stage kinds:
- FUSED: one loop nest computing a post-order program of loads, constants and elementwise ops, with
  reductions over one axis set R (each a pass over the reduction domain D) and an epilogue over the
  output. Softmax `exp(x - max(x, 0)) / sum(exp(x - max(x, 0)), 0)` is one FUSED stage.
- GEMM: `out = a @ b` for two buffers; where the tree is `beta*out + alpha*(a @ b)` and the
  device's GEMM takes alpha and beta (make_plan's axpby), the whole statement is one GEMM writing
  the output (Stage.scale).
- COMPOUND: a convolution or pooling node (compound.py) on buffers, run by the device's own
  kernels (the reference interpreter's functions where a device has none).
- HOST: a structural op (reshape, slice, take, concatenate, tile, onehot, transpose of a tree)
  evaluated by the reference interpreter into a temp, on its operands computed by earlier stages;
  an op the device does not render (and a structural op of a constant), with its whole subtree.

Buffers are numbered: the tree's tensors in first-occurrence order, then the output, then temps.
Nothing here imports a device library.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .ops import OP_INFO, Kind, Op
from .optree import OpTreeNode, Operators, dag_postorder, shape_of


class StageKind(enum.Enum):
    FUSED = "fused"
    GEMM = "gemm"
    COMPOUND = "compound"
    HOST = "host"


@dataclass(frozen=True)
class Instr:
    """One step of a FUSED program: `load` a buffer, read `const` k, or apply `op` to earlier steps."""
    op: str                # 'load' | 'const' | an Op value
    args: tuple = ()       # indices of earlier instructions
    arg: Any = None        # load: buffer; const: constant index; reductions: (axes, keepdims)


@dataclass(frozen=True)
class Stage:
    kind: StageKind
    out: int                       # the buffer written
    program: tuple = ()            # FUSED: Instr tuple (the last is the value stored)
    reduce_axes: tuple = ()        # FUSED: the axes every reduction of the stage reduces
    domain: int = -1               # FUSED with reductions: position of a reduction node, whose
                                   # operand's shape is the reduction domain
    inputs: tuple = ()             # GEMM, COMPOUND, HOST: operand buffers (HOST: none where it
                                   # evaluates the node's whole subtree)
    trans: tuple = ()              # GEMM: (a, b) read transposed (2-D views), or () for neither
    node: int = -1                 # COMPOUND, HOST: the node's position (its op and attrs)
    scale: tuple = ()              # GEMM into the output: (alpha, beta) of out = alpha a @ b +
                                   # beta out, each (sign, constant index or None for 1); ()
                                   # for out = a @ b (see gemm_scale)


def gemm_operands(stage: Stage, bufs: Any) -> tuple:
    """A GEMM stage's two operands from `bufs` (arrays or tensors with `.T`), as it reads them."""
    a, b = (bufs[x] for x in stage.inputs)
    if stage.trans:
        a = a.T if stage.trans[0] else a
        b = b.T if stage.trans[1] else b
    return a, b


def gemm_scale(stage: Stage, consts: Any) -> tuple:
    """(alpha, beta) of a GEMM stage for this call's constants: (1.0, 0.0) for a plain one."""
    if not stage.scale:
        return 1.0, 0.0
    return tuple(sign * (1.0 if k is None else float(consts[k])) for sign, k in stage.scale)


def _transposed(x: Any) -> Any:
    """The operand of a 2-D transpose node (the whole transpose of a matrix), else None."""
    if type(x) is OpTreeNode and x[0]["op"] == Op.TRANSPOSE and len(shape_of(x[1])) == 2 \
            and x[0].get("axes") in (None, (1, 0)):
        return x[1]
    return None


@dataclass(frozen=True)
class KernelPlan:
    stages: tuple
    n_inputs: int                  # buffers 0..n_inputs-1 are tensors, n_inputs is the output
    temps: tuple                   # per temp buffer: the node position whose shape it takes


def _mask(shape: tuple) -> int:
    return sum(1 << i for i, d in enumerate(shape) if d == 1)


def buffer_meta(plan: KernelPlan, tensors: list, out: Any, nodes: list,
                dtypes: bool = False) -> dict:
    """What a renderer knows of each buffer: (ndim, mask of size-1 axes), and with `dtypes` the
    storage dtype of the tensors and the output (temps hold the compute dtype and carry none)."""
    def entry(shape: tuple, dtype: Any) -> tuple:
        return (len(shape), _mask(shape), dtype) if dtypes else (len(shape), _mask(shape))
    meta = {i: entry(t.shape, t.dtype) for i, t in enumerate(tensors)}
    meta[plan.n_inputs] = entry(out.shape, out.dtype)
    for j, pos in enumerate(plan.temps):
        shape = nodes[pos].shape
        meta[plan.n_inputs + 1 + j] = (len(shape), _mask(shape))
    return meta


def gemm_only(plan: KernelPlan) -> bool:
    """`out[:] = dot(a, b)`: a GEMM into a temp that the last stage only copies to the output (a
    device may run the GEMM straight into the output)."""
    st = plan.stages
    return len(st) == 2 and st[0].kind is StageKind.GEMM and \
        st[1].program == (Instr("load", (), st[0].out),)


def _node_token(d: dict) -> tuple:
    attrs = tuple((k, v) for k, v in d.items() if k != "op" and k != "shape")
    return (d["op"], attrs, len(d["shape"]), _mask(d["shape"]))


def walk(out: Any, value: Any) -> tuple:
    """One pass over `assign(out, value)`: (signature, tensors, constants, nodes).

    The signature holds ops, attrs, dtypes, ndim, size-1 patterns, which leaves are the same tensor,
    which subtrees are the same node object, and whether the output is one of the tensors; never
    constant values, tensor identities or sizes. Tensors are listed in first-occurrence order,
    constants and nodes in post-order; a node reached again is not entered again (the tree is a
    DAG: 20 nested `y = tanh(y + y)` are 20 nodes, not 2^20).
    """
    slots: dict[int, int] = {}
    tensors: list = []
    consts: list = []
    nodes: list = []
    key: list = []
    seen: dict[int, int] = {}

    stack: list = [(value, False)]           # iterative: trees may be thousands of nodes deep
    while stack:
        x, done = stack.pop()
        if isinstance(x, OpTreeNode):
            if done:
                d = x[0]
                try:
                    key.append(d.token)
                except AttributeError:
                    d.token = _node_token(d)
                    key.append(d.token)
                seen[id(x)] = len(nodes)
                nodes.append(x)
                continue
            pos = seen.get(id(x))
            if pos is not None:       # a shared subtree: listed (and computed) once
                key.append(("dup", pos))
                continue
            stack.append((x, True))
            if x[2] is not None:
                stack.append((x[2], False))
            if x[1] is not None:
                stack.append((x[1], False))
        elif isinstance(x, Operators):
            slot = slots.setdefault(id(x), len(tensors))
            if slot == len(tensors):
                tensors.append(x)
            key.append((slot, x.dtype.char, len(x.shape), _mask(x.shape)))
        else:
            key.append("c")
            consts.append(x)

    key.append(("out", slots.get(id(out), -1), out.dtype.char, len(out.shape), _mask(out.shape)))
    return tuple(key), tensors, consts, nodes


def const_order(value: Any) -> list:
    """For each constant of `value` in tree order (as a node's interned `consts` lists them: a
    shared subtree's constants once per occurrence), its number in walk()'s order (a shared
    subtree's constants numbered once). `u = x * 2.0; u + u` gives [0, 0]."""
    numbers: dict[int, list] = {}        # id(node) -> its constants' walk() numbers, tree order
    const_number: dict[tuple, int] = {}  # (id(parent), side) -> a constant's walk() number
    stack: list = [(value, None, 0, False)]
    while stack:                         # walk()'s traversal, so the numbering is walk()'s
        x, parent, side, done = stack.pop()
        if isinstance(x, OpTreeNode):
            if done:
                numbers[id(x)] = [k for i in (1, 2) for k in (
                    numbers[id(x[i])] if isinstance(x[i], OpTreeNode) else
                    (const_number[(id(x), i)],) if (id(x), i) in const_number else ())]
            elif id(x) not in numbers:
                stack.append((x, parent, side, True))
                for i in (2, 1):
                    if x[i] is not None:
                        stack.append((x[i], x, i, False))
        elif not isinstance(x, Operators):
            const_number[(id(parent), side)] = len(const_number)
    return numbers[id(value)]


# The work of one FUSED stage is capped (issue 13), so that any tree, however deep or wide,
# compiles in well under a second per kernel: a node whose fused region would exceed the caps has
# its largest operands computed into temps by stages of their own (one kernel each). The cost is a
# weighted count of the stage's instructions before dedupe (an upper bound of what is rendered),
# a distinct buffer counting as an argument and a load. Measured on the 2-core machine with numba
# (benchmarks/bench_deep_trees.py): about 4 ms of compile per unit, float32 transcendentals (which
# inline neonlike's vecmath) three times that, and more per buffer in a stage with reductions
# (each pass slices each buffer's rows).
STAGE_COST_MAX = 96
STAGE_BUFFERS_MAX = 24
REDUCE_COST_MAX = 48        # ... a stage with reductions
REDUCE_BUFFERS_MAX = 8
_LOAD_COST = 2
_OP_COST = {op.value: 3 for op in (
    Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.TANH, Op.TANH2, Op.SIG, Op.SIG2, Op.SOFTPLUS, Op.SAFELOG,
    Op.POW, Op.SIN, Op.COS, Op.TAN, Op.ASIN, Op.ACOS, Op.ATAN, Op.SINH, Op.COSH, Op.ASINH,
    Op.ACOSH, Op.ATANH)}


def _drive(call: Any) -> Any:
    """Run a planner step written as a generator: each generator it yields is a call, run to its
    end before the caller resumes with its return value. The planner's recursion (a node's
    operands, a stage's materialised operands) lives on this list, not on Python's stack."""
    stack, value = [call], None
    while stack:
        try:
            sub = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            value = done.value
        else:
            stack.append(sub)
            value = None
    return value


class _Planner:
    """Lowers one tree into stages (runs once per signature). The steps that follow the tree are
    generators run by _drive: `yield step(...)` is a call."""

    def __init__(self, out: Any, value: Any, tensors: list, nodes: list, renderable: Any) -> None:
        self.renderable = renderable
        self.slot = {id(t): i for i, t in enumerate(tensors)}
        self.pos = {id(n): i for i, n in enumerate(nodes)}
        self.n_inputs = len(tensors)
        self.temps: list = []
        self.stages: list = []
        # constants are numbered in post-order as walk() lists them, keyed by (parent, side)
        self.const_index: dict[tuple, int] = {}
        self._n_consts = 0
        self._numbered: set = set()
        self.made: dict[int, int] = {}   # id(node) -> the temp it was materialised into
        self._number_consts(value, None, 0)
        self.cuts = self._cuts(value) if isinstance(value, OpTreeNode) else set()

    def _number_consts(self, x: Any, parent: Any, side: int) -> None:
        """Constants numbered in walk()'s order (post-order, a shared node's once)."""
        stack = [(x, parent, side)]
        while stack:
            y, par, sd = stack.pop()
            if isinstance(y, OpTreeNode):
                if id(y) in self._numbered:
                    continue
                self._numbered.add(id(y))
                for i, c in ((2, y[2]), (1, y[1])):
                    if c is not None:
                        stack.append((c, y, i))
            elif not isinstance(y, Operators):
                self.const_index[(id(par), sd)] = self._n_consts
                self._n_consts += 1

    def _cuts(self, value: OpTreeNode) -> set:
        """The nodes computed into temps so that no FUSED stage exceeds the caps (ids).

        Bottom-up, each node's region (what a stage rooted there would compute: itself and its
        fused operands' regions, a shared node once) is a dict key -> cost; where it is over the
        caps, the node's largest fused operands are cut (loaded instead) until it fits. A node cut
        after a parent's region took it in leaves that region an overestimate, which is safe."""
        order = dag_postorder(value)
        uses: dict[int, int] = {}
        for x in order:
            for c in (x[1], x[2]):
                if type(c) is OpTreeNode:
                    uses[id(c)] = uses.get(id(c), 0) + 1
        regions: dict[int, tuple] = {}   # id(node) -> (region, holds a reduction), until last use
        cuts: set = set()
        for x in order:
            fused = [(i, c) for i, c in ((1, x[1]), (2, x[2]))
                     if type(c) is OpTreeNode and id(c) not in cuts and self._fusable(c)]
            while True:
                region, red = {("n", id(x)): _OP_COST.get(Op(x[0]["op"]).value, 1)}, \
                    x.kind is Kind.REDUCTION
                for i, c in ((1, x[1]), (2, x[2])):
                    if c is None:
                        continue
                    if any(c is f for _, f in fused):
                        sub, sub_red = regions[id(c)]
                        region.update(sub)
                        red = red or sub_red
                    elif isinstance(c, Operators):
                        region[("b", id(c))] = _LOAD_COST
                    else:
                        region[("c", id(x), i)] = 1
                cost_max, bufs_max = (REDUCE_COST_MAX, REDUCE_BUFFERS_MAX) if red else \
                    (STAGE_COST_MAX, STAGE_BUFFERS_MAX)
                if not fused or (sum(region.values()) <= cost_max and
                                 sum(k[0] == "b" for k in region) <= bufs_max):
                    break
                _, big = max(fused, key=lambda f: sum(regions[id(f[1])][0].values()))
                cuts.add(id(big))
                fused = [f for f in fused if f[1] is not big]
            for c in (x[1], x[2]):
                if type(c) is OpTreeNode:
                    uses[id(c)] -= 1
                    if not uses[id(c)]:
                        regions.pop(id(c), None)
            if self._fusable(x):
                regions[id(x)] = (region, red)
        return cuts

    def new_temp(self, node: OpTreeNode) -> int:
        self.temps.append(self.pos[id(node)])
        return self.n_inputs + len(self.temps)

    def materialize(self, node: OpTreeNode) -> Any:
        """A stage (or stages) computing `node` into a new temp; returns the temp's buffer (the
        same one for a node reached again)."""
        buf = self.made.get(id(node))
        if buf is None:
            buf = self.made[id(node)] = yield self._materialize(node)
        return buf

    def _materialize(self, node: OpTreeNode) -> Any:
        kind = node.kind
        if kind is Kind.MATMUL:
            # a 2-D transpose of an operand is read as a transposed view (BLAS's trans flag),
            # not copied by a host stage: Autodiff's dot rule makes dz @ y.T and x.T @ dz
            ta, tb = (_transposed(c) for c in (node[1], node[2]))
            a = yield self.as_buffer(node[1] if ta is None else ta)
            b = yield self.as_buffer(node[2] if tb is None else tb)
            buf = self.new_temp(node)
            trans = (ta is not None, tb is not None)
            self.stages.append(Stage(StageKind.GEMM, buf, inputs=(a, b),
                                     trans=trans if any(trans) else ()))
            return buf
        children = (node[1], node[2])[:OP_INFO[Op(node[0]["op"])].arity]
        if kind in (Kind.COMPOUND, Kind.STRUCTURAL) and \
                all(isinstance(c, Operators) for c in children):
            # the op alone, on its operands computed first (a conv under a reshape runs on the
            # device's kernels, not in the host's evaluation of the reshape's subtree)
            operands = []
            for c in children:
                operands.append((yield self.as_buffer(c)))
            buf = self.new_temp(node)
            self.stages.append(Stage(StageKind.COMPOUND if kind is Kind.COMPOUND else
                                     StageKind.HOST, buf, inputs=tuple(operands),
                                     node=self.pos[id(node)]))
            return buf
        if kind is Kind.STRUCTURAL or not self._fusable(node):
            buf = self.new_temp(node)     # the whole subtree on the host
            self.stages.append(Stage(StageKind.HOST, buf, node=self.pos[id(node)]))
            return buf
        buf = self.new_temp(node)  # an elementwise or reduction subtree its consumer cannot fuse
        yield self.fused(node, buf, node.shape)
        return buf

    def _fusable(self, node: OpTreeNode) -> bool:
        op = Op(node[0]["op"])
        if node.kind is Kind.REDUCTION:
            return op in self.renderable and _keeps_layout(node)
        return node.kind is Kind.ELEMENTWISE and op in self.renderable

    def as_buffer(self, x: Any) -> Any:
        if isinstance(x, OpTreeNode):
            return (yield self.materialize(x))
        if isinstance(x, Operators):
            return self.slot[id(x)]
        raise ValueError("a GEMM operand must be a tensor or a tree, not a constant")

    def axpby(self, out: Any, value: Any) -> Any:
        """A GEMM writing `value` = alpha x @ y + beta out straight into the output, where
        `value` spells that (`0.9*out - 0.1*dot(x, y)`, `out + dot(x, y)`, either order): the
        update of a momentum or an accumulated gradient, with no temp and no pass over it.
        Returns whether it did."""
        if type(value) is not OpTreeNode or value[0]["op"] not in (Op.ADD, Op.SUB) or \
                len(out.shape) != 2 or id(out) not in self.slot:
            return False
        terms = {}
        for side in (1, 2):
            sign = -1.0 if side == 2 and value[0]["op"] is Op.SUB else 1.0
            term = self._scaled_term(value[side], sign, out)
            if term is None:
                return False
            terms[term[0]] = term[1:]
        if set(terms) != {"out", "dot"}:
            return False
        dot, alpha = terms["dot"]
        beta = terms["out"][1]
        if shape_of(dot) != tuple(out.shape):
            return False
        ta, tb = (_transposed(c) for c in (dot[1], dot[2]))
        a = yield self.as_buffer(dot[1] if ta is None else ta)
        b = yield self.as_buffer(dot[2] if tb is None else tb)
        trans = (ta is not None, tb is not None)
        self.stages.append(Stage(StageKind.GEMM, self.n_inputs, inputs=(a, b),
                                 trans=trans if any(trans) else (), scale=(alpha, beta)))
        return True

    def _scaled_term(self, x: Any, sign: float, out: Any) -> Any:
        """('out' or 'dot', the operand, (sign, constant index or None)) for `x`, `c * x` or
        `x * c` with x the output tensor or a 2-D product; None for anything else."""
        k = None
        if type(x) is OpTreeNode and x[0]["op"] is Op.MUL:
            consts = [i for i in (1, 2) if not isinstance(x[i], Operators)]
            if len(consts) != 1:
                return None
            k = self.const_index[(id(x), consts[0])]
            x = x[3 - consts[0]]
        if x is out:
            return "out", x, (sign, k)
        if type(x) is OpTreeNode and x[0]["op"] is Op.DOT and len(shape_of(x)) == 2:
            return "dot", x, (sign, k)
        return None

    def fused(self, value: Any, out_buf: int, out_shape: tuple) -> Any:
        """A FUSED stage; where the reductions' domain does not fit the output, they become temps."""
        for no_reduce in (False, True):
            program: list = []
            state: dict = {"R": None, "D": None, "emitted": {}, "root": value}
            stages_before, temps_before = len(self.stages), len(self.temps)
            yield self._emit(value, None, 0, program, state, no_reduce)
            R, D = state["R"], state["D"]
            if R is None or _domain_ok(D, out_shape, R):
                self.stages.append(Stage(StageKind.FUSED, out_buf, tuple(program), R or (),
                                         state.get("pos", -1)))
                return
            del self.stages[stages_before:], self.temps[temps_before:]
            last = self.n_inputs + temps_before
            self.made = {k: b for k, b in self.made.items() if b <= last}
        raise AssertionError("unreachable: with every reduction materialised a stage always fuses")

    def _emit(self, x: Any, parent: Any, side: int, program: list, state: dict,
              no_reduce: bool) -> Any:
        if not isinstance(x, Operators):
            program.append(Instr("const", (), self.const_index[(id(parent), side)]))
            return len(program) - 1
        if not isinstance(x, OpTreeNode):
            program.append(Instr("load", (), self.slot[id(x)]))
            return len(program) - 1
        emitted = state["emitted"]   # id(node) -> its instruction: a shared node is one value
        at = emitted.get(id(x))
        if at is None:
            at = emitted[id(x)] = yield self._emit_node(x, program, state, no_reduce)
        return at

    def _emit_node(self, x: OpTreeNode, program: list, state: dict, no_reduce: bool) -> Any:
        d, left, right = x
        kind = x.kind
        cut = id(x) in self.cuts and x is not state["root"]
        if kind is Kind.ELEMENTWISE and not cut and self._fusable(x):
            args = []
            for i, c in ((1, left), (2, right)):
                if c is not None:
                    args.append((yield self._emit(c, x, i, program, state, no_reduce)))
            program.append(Instr(Op(d["op"]).value, tuple(args), _attrs(d)))
            return len(program) - 1
        if kind is Kind.REDUCTION and not no_reduce and not cut and self._fusable(x):
            dom = shape_of(left)
            axes = d["axis"] if d["op"] not in (Op.ARGMAX, Op.ARGMIN) else (
                tuple(range(len(dom))) if d["axis"] is None else (d["axis"],))
            if state["R"] is None:
                state["R"], state["D"], state["pos"] = axes, dom, self.pos[id(x)]
            if axes == state["R"] and dom == state["D"]:
                arg = yield self._emit(left, x, 1, program, state, no_reduce)
                program.append(Instr(Op(d["op"]).value, (arg,), axes))
                return len(program) - 1
        buf = yield self.materialize(x)
        program.append(Instr("load", (), buf))
        return len(program) - 1


_REDUCTIONS = frozenset(op.value for op, info in OP_INFO.items() if info.kind is Kind.REDUCTION)


def local_names(program: tuple, meta: dict, out: int) -> tuple:
    """A FUSED program with its buffers and constants numbered in the stage: (program, meta,
    output buffer, the plan's buffers, the plan's constants). Loads read 0.. and constants c0..
    in the order of the plan's numbers (a kernel's arguments), the output comes after the
    buffers; so the stages of one structure render to one source, and a tree split under the
    caps shares its kernels (issue 13). A one-stage plan's numbers are already these."""
    bufs = tuple(sorted({ins.arg for ins in program if ins.op == "load"}))
    consts = tuple(sorted({ins.arg for ins in program if ins.op == "const"}))
    where = {b: j for j, b in enumerate(bufs)}
    which = {c: j for j, c in enumerate(consts)}
    local = tuple(ins if ins.op not in ("load", "const") else type(ins)(
        ins.op, ins.args, (where if ins.op == "load" else which)[ins.arg]) for ins in program)
    return (local, {**{j: meta[b] for j, b in enumerate(bufs)}, len(bufs): meta[out]},
            len(bufs), bufs, consts)


def closure(program: tuple, top: int, stop: int = -1) -> list[int]:
    """Instructions of a FUSED program that `top` needs, in program order, stopping at (and
    excluding the operands of) reductions and instruction `stop`: what one pass computes."""
    need, stack = set(), [top]
    while stack:
        i = stack.pop()
        if i in need:
            continue
        need.add(i)
        if program[i].op in _REDUCTIONS or i == stop:
            continue
        stack.extend(program[i].args)
    return sorted(need)


def dedupe(program: tuple) -> tuple:
    """The program with repeated instructions merged (the two `max(x, 0)` of a softmax become one
    pass); post-order is kept and the value stored stays last."""
    seen: dict = {}
    new: list = []
    where: list = []
    for ins in program:
        ins = type(ins)(ins.op, tuple(where[a] for a in ins.args), ins.arg)
        key = (ins.op, ins.args, repr(ins.arg))
        if key not in seen:
            seen[key] = len(new)
            new.append(ins)
        where.append(seen[key])
    if where[-1] != len(new) - 1:  # the root equals an earlier instruction: keep it last
        new.append(new[where[-1]])
    return tuple(new)


def _attrs(d: dict) -> Any:
    items = tuple((k, v) for k, v in d.items() if k not in ("op", "shape"))
    return items or None


def _keeps_layout(node: OpTreeNode) -> bool:
    """A reduction whose result is its operand's shape with the reduced axes set to 1."""
    d, operand = node[0], shape_of(node[1])
    if d["op"] in (Op.ARGMAX, Op.ARGMIN) and d["axis"] is None:
        return all(s == 1 for s in d["shape"]) and len(d["shape"]) == len(operand)
    axes = d["axis"] if isinstance(d["axis"], tuple) else (d["axis"],)
    return d["shape"] == tuple(1 if i in axes else n for i, n in enumerate(operand))


def _domain_ok(dom: tuple, out: tuple, R: tuple) -> bool:
    """The output spans the domain's kept axes, and each reduced axis fully or not at all."""
    if len(dom) != len(out):
        return False
    return all((out[i] in (1, dom[i])) if i in R else out[i] == dom[i] for i in range(len(dom)))


def make_plan(out: Any, value: Any, tensors: list, nodes: list, renderable: Any,
              axpby: bool = False) -> KernelPlan:
    """Split `assign(out, value)` into stages; the last stage writes the output (buffer n_inputs).

    `renderable`: the ops the device renders in FUSED stages; other elementwise ops become HOST.
    `axpby`: the device's GEMM takes alpha and beta (scaled GEMM stages, _Planner.axpby), and
    its output is in the compute dtype.
    """
    p = _Planner(out, value, tensors, nodes, frozenset(renderable))
    out_buf = p.n_inputs
    if not (axpby and _drive(p.axpby(out, value))):
        if isinstance(value, OpTreeNode) and not p._fusable(value):
            value_buf = _drive(p.materialize(value))
            p.stages.append(Stage(StageKind.FUSED, out_buf, (Instr("load", (), value_buf),)))
        else:
            _drive(p.fused(value, out_buf, out.shape))
    return KernelPlan(tuple(p.stages), p.n_inputs, tuple(p.temps))


__all__ = ["StageKind", "Instr", "Stage", "KernelPlan", "walk", "make_plan", "closure", "dedupe",
           "local_names", "gemm_scale"]
