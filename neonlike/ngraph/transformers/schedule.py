"""A computation's statements, scheduled so that each value is computed once per call.

The lowering gives one op-tree per statement (an assignment, a result), and the trees share node
objects: a forward pass read by the cost and by every derivative (Autodiff's gradient trees hold
the forward nodes they need). Run as they are, each statement would compute the shared nodes
again, and an update written by an earlier statement would change what a later one computes.
Two passes fix both:

- shared values: a dot, a reduction, a structural node, a convolution or a pooling that several
  statements read is computed once, into a temporary, by a statement placed before its first
  reader; every tree then reads the temporary (its tree is rebuilt around it, nothing else
  changes);
- deferred updates: an assignment whose tensor a later statement reads without depending on the
  assignment (seed 003: it does not come after it) writes into a temporary, copied into the
  tensor after that reader. Statements that depend on the assignment still see the new value.
"""
from __future__ import annotations

from typing import Any

from ...dtypes import compute_dtype
from ...ops import Kind
from ...optree import Operators, OpTreeNode, dag_postorder, trusted_node
from ..op_graph import op_graph as G

# node kinds worth computing once: their cost is well above a read of the temporary
SHARED_KINDS = (Kind.MATMUL, Kind.REDUCTION, Kind.STRUCTURAL, Kind.COMPOUND)


def schedule(be: Any, statements: list) -> list:
    """statements: (out, tree, ngraph op or None) in order; the same, scheduled."""
    return _deferred_updates(be, _shared_values(be, statements))


def dependency_order(roots: list) -> list:
    """Ops reachable from `roots` through args and other_deps, each after its dependencies
    (depth first, in the roots' order); iterative, so deep graphs do not recurse."""
    order, done, stack = [], set(), [(r, False) for r in reversed(roots)]
    while stack:
        op, expanded = stack.pop()
        if op in done:
            continue
        if expanded:
            done.add(op)
            order.append(op)
            continue
        stack.append((op, True))
        for d in reversed(list(op.all_deps())):
            if d not in done:
                stack.append((d, False))
    return order


def _nodes(tree: Any) -> list:
    return dag_postorder(tree) if isinstance(tree, OpTreeNode) else []


def _shared_values(be: Any, statements: list) -> list:
    nodes = [_nodes(tree) for _, tree, _ in statements]     # each tree walked once
    uses: dict = {}
    for ns in nodes:
        for n in ns:
            uses[id(n)] = uses.get(id(n), 0) + 1
    shared = {id(n) for ns in nodes for n in ns if uses[id(n)] > 1 and n.kind in SHARED_KINDS}
    if not shared:
        return statements
    temps: dict = {}
    scheduled = []
    for (out, tree, op), ns in zip(statements, nodes):
        for n in ns:                 # post-order: a shared node's shared parts come first
            if id(n) in shared and id(n) not in temps:
                body = substitute(n, temps, keep_root=True)
                dtype = compute_dtype([t.dtype for t in n.leaves()])
                temps[id(n)] = tmp = be.empty(n.shape, dtype=dtype)
                scheduled.append((tmp, body, None))
        scheduled.append((out, substitute(tree, temps), op))
    return scheduled


def substitute(tree: Any, temps: dict, keep_root: bool = False) -> Any:
    """`tree` with its nodes whose id is in `temps` replaced by those tensors (the root too,
    unless keep_root); nodes above a replacement are rebuilt, the rest kept."""
    if not isinstance(tree, OpTreeNode):
        return tree
    if not keep_root and id(tree) in temps:
        return temps[id(tree)]
    new: dict = {}
    for n in dag_postorder(tree):
        a, b = (None if c is None else
                temps.get(id(c)) if id(c) in temps else new.get(id(c), c) for c in (n[1], n[2]))
        if a is n[1] and b is n[2]:
            new[id(n)] = n
        else:
            d = n[0]
            items = tuple((k, v) for k, v in d.items() if k not in ("op", "shape")) or None
            new[id(n)] = trusted_node(d["op"], d["shape"], items, a, b)
    return new[id(tree)]


def _reads(tree: Any, base: Any) -> bool:
    if isinstance(tree, OpTreeNode):
        return any(t._original_base is base for t in tree.leaves())
    return isinstance(tree, Operators) and tree._original_base is base


def _deferred_updates(be: Any, statements: list) -> list:
    ancestors: dict = {}

    def depends(j: int, op: Any) -> bool:
        later = statements[j][2]
        if later is None:
            return False
        if isinstance(later, G.AssignableTensorOp):
            return True             # a tensor asked for as a result: read when all is done
        if later not in ancestors:
            ancestors[later] = set(dependency_order([later]))
        return op in ancestors[later]

    commits: dict = {}       # position -> statements to run before it
    result = list(statements)
    for i, (out, tree, op) in enumerate(statements):
        if not isinstance(op, G.AssignOp):
            continue
        base = out._original_base
        readers = [j for j in range(i + 1, len(statements)) if _reads(statements[j][1], base)]
        late = [j for j in readers if not depends(j, op)]
        if not late:
            continue
        dependents = [j for j in readers if j not in late]
        at = max(late) + 1
        if dependents and dependents[0] < at:
            at = dependents[0]      # a dependent reader first: it must see the new value
        if at <= i + 1:
            continue
        tmp = be.empty(out.shape, dtype=out.dtype)
        result[i] = (tmp, tree, op)
        commits.setdefault(at, []).append((out, tmp, None))
    scheduled = []
    for j, s in enumerate(result):
        scheduled.extend(commits.get(j, ()))
        scheduled.append(s)
    scheduled.extend(commits.get(len(result), ()))
    return scheduled
