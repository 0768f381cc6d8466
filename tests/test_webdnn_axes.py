"""neonlike.webdnn.graph axes: anonymous numbering, unify's algebra against a reference
union-find (hypothesis), its errors, AxisKeyDict, Order, Placeholder, and no growing state."""
from __future__ import annotations

import gc
import re
import weakref

import pytest
from hypothesis import given, strategies as st

from neonlike import axes as core
from neonlike.axes import UnifyError, make_axis
from neonlike.webdnn.graph import (Axis, AxisKeyDict, Order, OrderNC, OrderNCHW, Placeholder,
                                   Variable)


def number(axis):
    match = re.fullmatch(r"\?(\d+)", axis.name)
    assert match, axis.name
    return int(match.group(1))


# ---------------------------------------------------------------- anonymous axes
def test_anonymous_axes_are_numbered_in_creation_order():
    a, b, c = Axis(), Axis(), Axis()
    assert number(b) == number(a) + 1 and number(c) == number(a) + 2
    assert str(a) == f"<Axis ?{number(a)}>"
    assert Axis("T").name == "T" and str(Axis("T")) == "<Axis T>"
    v = Variable([2, 3], Order([a, b]))
    assert re.fullmatch(rf"<Variable\d+ shape=\(2, 3\), order=\[\?{number(a)}, \?{number(b)}\]>",
                        repr(v))
    assert re.fullmatch(r"<Variable\d+ shape=\(4,\), order=\[T\]>", repr(Variable([4], [Axis("T")])))


def test_named_axes_print_as_named_and_presets_are_kinds():
    x = Variable([1, 3], OrderNC)
    y = Variable([5, 7], OrderNC)         # presets take no length: any sizes
    assert str(x.order) == "[N, C]" and y.shape == (5, 7)
    with pytest.raises(UnifyError, match="preset axis N"):
        Axis().unify(Axis.N)
    with pytest.raises(TypeError, match="preset axis C .* takes no length"):
        Axis.C.length = 3


# ---------------------------------------------------------------- unify: algebra
class RefUnionFind:
    def __init__(self, lengths):
        self.parent = list(range(len(lengths)))
        self.length = list(lengths)

    def find(self, i):
        while self.parent[i] != i:
            i = self.parent[i]
        return i

    def unify(self, i, j):
        """True if unified, False if the lengths conflict (nothing changes)."""
        a, b = self.find(i), self.find(j)
        if a == b:
            return True
        la, lb = self.length[a], self.length[b]
        if la is not None and lb is not None and la != lb:
            return False
        self.parent[b] = a
        self.length[a] = la if la is not None else lb
        return True


lengths_st = st.lists(st.sampled_from([None, 2, 3]), min_size=2, max_size=7)


@given(lengths_st, st.data())
def test_unify_agrees_with_a_reference_union_find(lengths, data):
    n = len(lengths)
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                               max_size=12))
    flips = data.draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    axes = [Axis() for _ in range(n)]
    for axis, length in zip(axes, lengths):
        if length is not None:
            axis.length = length
    first = number(axes[0])
    ref = RefUnionFind(lengths)
    for (i, j), flip in zip(pairs, flips):
        ok = ref.unify(i, j)
        a, b = (axes[j], axes[i]) if flip else (axes[i], axes[j])   # order-independent
        if ok:
            assert a.unify(b) is a
        else:
            with pytest.raises(UnifyError, match="lengths differ"):
                a.unify(b)
    for i in range(n):
        members = [k for k in range(n) if ref.find(k) == ref.find(i)]
        assert number(axes[i]) == first + min(members)      # the earliest member's number
        assert axes[i].length == ref.length[ref.find(i)]
        for j in range(n):
            same = ref.find(i) == ref.find(j)
            assert (axes[i] == axes[j]) == same
            if same:
                assert hash(axes[i]) == hash(axes[j])


def test_unify_is_transitive_and_reaches_every_holder():
    a, b, c = Axis(), Axis(), Axis()
    x = Variable([2, 5], Order([a, Axis()]))
    z = Variable([5, 2], Order([Axis(), c]))
    b.unify(a)
    c.unify(b)
    assert x.order.axes[0] == z.order.axes[1] == c
    assert str(z.order).endswith(f"?{number(a)}]")
    a.unify(a)                                   # a no-op
    a.unify(c)                                   # already one: a no-op
    assert number(c) == number(a)


def test_unify_errors_name_both_axes():
    a, b = Axis(), Axis()
    Variable([2], [a]), Variable([3], [b])
    with pytest.raises(UnifyError, match=rf"axis \?{number(a)} \(length 2\) with axis "
                                         rf"\?{number(b)} \(length 3\)"):
        a.unify(b)
    with pytest.raises(TypeError, match="axis P with axis Q: they are named differently"):
        Axis("P").unify(Axis("Q"))
    named, anon = Axis("P"), Axis()
    anon.unify(named)
    assert anon.name == "P"                        # the class takes the name
    with pytest.raises(ValueError, match="cannot unify axis P with axis Q"):
        anon.unify(Axis("Q"))                      # also through the class
    with pytest.raises(UnifyError, match="derived"):
        (make_axis() - 1).unify(make_axis())


def test_ngraph_axes_unify_in_the_same_core():
    """An ngraph axis made without a name is anonymous; unify is the core's."""
    c = make_axis(length=4, name="Cng")
    anon = make_axis(length=4)
    assert anon.name is None
    anon.unify(c)
    assert anon == c and anon.name == c.name and (anon - 1) == (c - 1)
    assert core.Axes([anon]) == core.Axes([c])


def test_unify_state_dies_with_the_axes():
    a, b = Axis(), Axis()
    a.unify(b)
    refs = [weakref.ref(a), weakref.ref(b)]
    named = make_axis(name="webdnn_gone")
    named.unify(make_axis())
    del a, b, named
    gc.collect()
    assert all(r() is None for r in refs)
    assert "webdnn_gone" not in core._LIVE_NAMES


# ---------------------------------------------------------------- AxisKeyDict, Order
def test_axis_key_dict_follows_unify():
    a, b, c = Axis(), Axis(), Axis()
    d = AxisKeyDict([a, b], [1, 2])
    assert d[a] == 1 and b in d and c not in d and len(d) == 2
    c.unify(b)
    assert d[c] == 2                   # c is b now
    a.unify(b)
    assert len(d) == 1 and d[b] == 1   # two keys became one: the first inserted stays
    with pytest.raises(ValueError, match="given twice"):
        AxisKeyDict([a, a], [1, 2])
    with pytest.raises(ValueError, match="2 keys and 1 values"):
        AxisKeyDict([Axis(), Axis()], [1])
    assert dict(AxisKeyDict(AxisKeyDict([(c, 5)])).items()) == {c: 5}


def test_order():
    a, b = Axis(), Axis()
    assert Order([a, b]) == Order([a, b]) != Order([b, a])
    with pytest.raises(ValueError, match=r"axis \?\d+ appears twice"):
        Order([a, a])
    fresh = Order([None, None])
    assert len({number(x) for x in fresh.axes}) == 2
    assert OrderNCHW.get_common_axes(OrderNC) == [Axis.N, Axis.C]
    assert OrderNC.get_all_axes(Order([Axis.H])) == [Axis.N, Axis.C, Axis.H]
    assert OrderNCHW.check_same_axes(Order([Axis.W, Axis.H, Axis.C, Axis.N]))
    p, q = Order([None, None]), Order([None, None])
    p.unify(q)
    assert p == q and p.axes_dict[q.axes[1]] == 1
    with pytest.raises(ValueError, match="2 axes against 1"):
        p.unify(Order([None]))


# ---------------------------------------------------------------- Placeholder, Variable
def test_placeholder():
    n = Placeholder(label="N")
    m = n * 2 + 1
    assert str(m) == "((N * 2) + 1)" and not m.is_resolved and m == n * 2 + 1
    with pytest.raises(TypeError, match="set N first"):
        int(m)
    n.value = 4
    assert m.value == 9 and int(m // 2) == 4 and m % 4 == 1 and 10 - n == 6
    with pytest.raises(ValueError, match="already has the value 4; a value can be set once"):
        n.value = 5
    with pytest.raises(ValueError, match="expression"):
        m.value = 3
    with pytest.raises(TypeError, match="int value"):
        Placeholder(label="X").value = 2.5


def test_variable_binds_lengths():
    a = Axis()
    Variable([3], [a])
    assert a.length == 3
    with pytest.raises(ValueError, match=rf"axis \?{number(a)} has length 3, the shape gives it 4"):
        Variable([4], [a])
    with pytest.raises(ValueError, match=r"shape \(1, 2\) has 2 sizes, order \[\?\d+\] has 1"):
        Variable([1, 2], [None])
    v = Variable([2, 3], [None, None])
    assert v.shape_dict[v.order.axes[1]] == 3 and v.size == 6 and v.ndim == 2
    assert list(v.axes) == list(v.order.axes)       # core Axes, for ngraph
    with pytest.raises(TypeError, match="no truth value"):
        bool(v > 0)
