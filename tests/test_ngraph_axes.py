"""Seed 000's axes, without ops or transformers: the axis core (neonlike.axes) through ngraph's
module paths (import renamed: `import neonlike.ngraph as ng`)."""
from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import pytest

import neonlike.ngraph as ng
from neonlike.ngraph.frontends.neon import ar, ax
from neonlike.ngraph.op_graph.axes import (
    Axes, DualAxis, FlattenedAxis, PaddedAxis, SlicedAxis, TensorDescription,
)
from neonlike.ngraph.util.names import NameScope


def axes(*items):
    return ng.make_axes(list(items))


def fresh(*names, length=None):
    """Distinct axes for one test (names the neon scope does not hold)."""
    return [ng.make_axis(length=length, name=f"t{name}") for name in names]


def dot_axes(x, y):
    """Seed 000's dot as axes arithmetic: x's axes matching a y axis one dual level up contract."""
    reduced = x.intersect(y.get_dual())
    return (x - reduced) + (y - reduced.get_dual(+1))


# ---------------------------------------------------------------- making axes
def test_make_axis_and_make_axes():
    H = ng.make_axis(length=3, name='height')
    W = ng.make_axis(length=4, name='width')
    a = ng.make_axes([H, W])
    assert isinstance(H, ng.Axis) and isinstance(a, ng.Axes)
    assert (H.length, W.length) == (3, 4) and H.name == 'height'
    assert list(a) == [H, W] and a.lengths == (3, 4) and a.names == ('height', 'width')
    assert len(a) == 2 and a[0] is H and a[-1] is W and a[1:] == axes(W)
    assert a != axes(W, H)                  # ordered equality
    assert a.has_same_axes([W, H])          # same set, seed 000's "same type"
    assert ng.make_axes() == Axes([]) == Axes(None) and Axes(H) == axes(H)


def test_delayed_lengths():
    H = ng.make_axis(name='height')
    W = ng.make_axis(name='width')
    image_axes = axes(H, W)
    assert image_axes.lengths == (None, None)
    H.length = 3
    W.length = 4
    assert image_axes.lengths == (3, 4) and image_axes.require_lengths() == (3, 4)
    assert image_axes.size == 12


def test_a_missing_length_is_an_error_naming_the_axis():
    H, W = ng.make_axis(3, name='rows'), ng.make_axis(name='cols')
    with pytest.raises(ValueError, match=r"axis cols .* has length None; set cols.length"):
        axes(H, W).require_lengths()
    with pytest.raises(ValueError, match=r"must always have non-None length. Axis cols has"):
        TensorDescription([H, W])
    with pytest.raises(ValueError, match="cols"):
        axes(H, W).size


def test_bad_lengths_are_refused():
    with pytest.raises(ValueError, match="length of axis neg must be >= 0, got -1"):
        ng.make_axis(-1, name='neg')
    A = ng.make_axis(name='la')
    with pytest.raises(TypeError, match="length of axis la must be an int or None"):
        A.length = 2.5
    A.length = np.int64(5)
    assert A.length == 5 and type(A.length) is int


def test_roles_and_the_axis_alias():
    role_channel = ng.make_axis_role(name="Channel")
    axis_channel = ng.axis(length=3, roles=[role_channel], name="my_axis")
    assert ng.axis is ng.make_axis
    assert axis_channel.roles == {role_channel} and axis_channel.has_role(role_channel)
    assert role_channel.name == "Channel" and isinstance(role_channel, ng.AxisRole)
    other = ng.make_axis_role(name="Channel")
    assert not axis_channel.has_role(other)     # roles are identities too
    with pytest.raises(TypeError, match="must be AxisRoles"):
        ng.make_axis(roles=["Channel"])


def test_batch_and_recurrent_flags_select_axes():
    t = ng.make_axis_role(name="T")
    B = ng.make_axis(2, name='bb', batch=True)
    R = ng.make_axis(3, name='rr', recurrent=True, roles=[t])
    F = ng.make_axis(4, name='ff', docstring="features")
    a = axes(F, R, B)
    assert a.batch_axes() == axes(B)
    assert a.sample_axes() == axes(F, R)
    assert a.recurrent_axes() == axes(R)
    assert a.role_axes(t) == axes(R)
    assert F.docstring == "features" and not F.is_batch and not F.is_recurrent


# ---------------------------------------------------------------- duplicates
def test_an_axis_occurs_at_most_once():
    H = ng.make_axis(length=2, name='dup')
    W = ng.make_axis(length=2)
    with pytest.raises(ValueError, match=r"^The axes labels of a tensor cannot contain "
                                         r"duplicates. Axis dup appears twice"):
        ng.make_axes([H, H])
    assert ng.make_axes([H, W]).lengths == (2, 2)
    with pytest.raises(ValueError, match="duplicates"):
        Axes([[H, W], W, [H, W]])           # one FlattenedAxis twice (equal by structure)
    assert Axes([W, [H, W]]).lengths == (2, 4)   # a flattened axis is not its parts
    with pytest.raises(ValueError, match="duplicates"):
        Axes([ax.C - 1, ax.C.get_dual()])


def test_axes_refuse_what_is_not_an_axis():
    with pytest.raises(TypeError, match="got str 'C'"):
        Axes(['C'])
    with pytest.raises(TypeError, match="got int 3"):
        Axes([ax.C, 3])


# ---------------------------------------------------------------- identity
def test_equality_is_identity_not_length_or_name():
    examples = ng.make_axis(50, name='examples')
    features = ng.make_axis(50, name='features')
    twin = ng.make_axis(50, name='examples')
    assert examples != features and examples != twin
    assert examples == examples and axes(examples) != axes(features)


def test_hash_agrees_with_eq():
    H, W = fresh('H', 'W', length=3)
    d = {H: 'h', W - 1: 'w-1', axes(H, W): 'hw', FlattenedAxis([H, W]): 'flat'}
    assert d[H] == 'h' and d[W.get_dual(-1)] == 'w-1' and d[Axes([H, W])] == 'hw'
    assert d[FlattenedAxis([H, W])] == 'flat'           # structural, a new object
    assert FlattenedAxis([H, W]) != FlattenedAxis([W, H])
    assert FlattenedAxis([W, H]) not in d
    assert {H, W, H - 1 + 1, W - 1} == {H, W, W - 1}
    for a, b in [(H, (H - 1) + 1), (W - 1, W.get_dual()), (FlattenedAxis([H]), FlattenedAxis([H]))]:
        assert a == b and hash(a) == hash(b)


def test_the_identity_indirection_is_what_unify_will_link():
    # issue 15's unify is to link one root under another; everything else reads through it
    A, B = fresh('ua', 'ub')
    A.length = 6
    held = axes(B, fresh('uc')[0])
    assert A.annotated_axis is A and B != A
    B._parent = A
    assert B == A and hash(B) == hash(A) and B.length == 6 and B.annotated_axis is A
    assert B - 1 == A - 1 and A in held and (B - 1).length == 6


# ---------------------------------------------------------------- names
def test_names_are_unique_among_live_axes():
    first = ng.make_axis(name='unique_me')
    second = ng.make_axis(name='unique_me')
    assert first.name == 'unique_me' and second.name == 'unique_me_1'
    assert second.short_name == 'unique_me'
    assert axes(first, second).find_by_name('unique_me') == axes(first, second)
    assert axes(first, second).find_by_name('unique_me_1') == axes(second)
    del first
    gc.collect()
    assert ng.make_axis(name='unique_me').name == 'unique_me'    # freed with its axis
    assert second.named('renamed') is second and second.name == 'renamed'
    assert ng.make_axis(name='unique_me').name == 'unique_me'


def test_an_axis_without_a_name_is_anonymous():
    A = ng.make_axis(3)
    assert A.name is None and (A - 1).name is None and A != ng.make_axis(3)
    assert Axes([A]).names == (None,)


def test_name_scopes_name_their_anonymous_values():
    sc = ng.make_name_scope(name="sc")
    assert sc.name == "sc" and isinstance(sc, NameScope)
    sc.Rows = ng.make_axis(length=2)
    sc.Kind = ng.make_axis_role()
    sc.Kept = ng.make_axis(name='given')
    assert sc.Rows.name == 'Rows' and sc.Kind.name == 'Kind' and sc.Kept.name == 'given'
    plain = NameScope()
    plain.Other = ng.make_axis()
    assert plain.name is None and plain.Other.name == 'Other'
    assert ng.make_name_scope().named("late").name == "late"


# ---------------------------------------------------------------- the neon scopes
NEON_AXES = [
    # name, batch, recurrent, role, docstring
    ("N", True, False, None, "minibatch size"),
    ("C", False, False, "Channel", "number of input feature maps"),
    ("D", False, False, "Depth", "input image depth"),
    ("H", False, False, "Height", "input image height"),
    ("W", False, False, "Width", "input image width"),
    ("R", False, False, "Height", "filter height"),
    ("S", False, False, "Width", "filter width"),
    ("T", False, False, "Depth", "filter depth"),
    ("J", False, False, "Channel", "filter channel size (for crossmap pooling)"),
    ("K", False, False, "Channelout", "number of output feature maps"),
    ("M", False, False, "Depth", "output image depth"),
    ("P", False, False, "Height", "output image height"),
    ("Q", False, False, "Width", "output image width"),
    ("REC", False, True, "Time", "recurrent axis"),
    ("Y", False, False, None, "target"),
]


@pytest.mark.parametrize("name, batch, recurrent, role, doc", NEON_AXES)
def test_the_neon_axes_are_seed_000s(name, batch, recurrent, role, doc):
    axis = getattr(ax, name)
    assert axis.name == name and axis.length is None
    assert (axis.is_batch, axis.is_recurrent, axis.docstring) == (batch, recurrent, doc)
    assert axis.roles == ({getattr(ar, role)} if role else set())


def test_the_neon_roles_are_seed_000s():
    names = ["Height", "Width", "Depth", "Channel", "Channelout", "Time"]
    roles = [getattr(ar, n) for n in names]
    assert [r.name for r in roles] == names and len(set(roles)) == 6
    assert all(isinstance(r, ng.AxisRole) for r in roles)
    assert ax.name == "ax" and ar.name == "ar"
    assert Axes([ax.C, ax.H, ax.W, ax.N]).role_axes(ar.Height) == axes(ax.H)
    assert Axes([ax.C, ax.H, ax.W, ax.N]).batch_axes() == axes(ax.N)


def test_the_neon_module_path():
    from neonlike.ngraph.frontends.neon import axis
    assert axis.ax is ax and axis.ar is ar


# ---------------------------------------------------------------- dual axes
def test_a_dual_axis_shares_its_primarys_length():
    C = fresh('C')[0]
    d = C - 1
    assert isinstance(d, DualAxis) and d.length is None
    C.length = 5
    assert d.length == 5 and (C + 1).length == 5
    assert d.primary_axis is C and d.dual_level == -1 and (C + 1).dual_level == 1
    with pytest.raises(AttributeError, match="set tC.length instead"):
        d.length = 4
    assert isinstance(ax.C - 1, DualAxis) and (ax.C - 1).length is ax.C.length


def test_duals_are_cached_named_and_offsets_add():
    C = fresh('C')[0]
    assert C - 1 is C - 1 is C.get_dual() is C.get_dual(-1)
    assert (C - 1).name == f'{C.name}-1' and (C + 1).name == f'{C.name}+1'
    assert (ng.make_axis(name='dualname') + 2).name == 'dualname+2'
    assert (C - 1) + 1 is C and (C + 1) - 1 is C and C - 0 is C
    assert (C - 1) - 1 is C - 2 and (C - 1).get_dual(-1) is C - 2
    assert C - 1 != C and C - 1 != C + 1 and C - 1 not in axes(C)
    assert (C - 1).T is C and C.T is C - 1
    assert ax.C - 1 != ax.H - 1
    with pytest.raises(TypeError):
        C + C


def test_axes_get_dual():
    H, W = fresh('H', 'W')
    assert Axes([H, W - 1]).get_dual() == axes(H - 1, W - 2)
    assert Axes([H, W - 1]).get_dual(1) == axes(H + 1, W)
    assert axes(ax.C, ax.H).get_dual() == axes(ax.C - 1, ax.H - 1)


def test_dot_pairs_as_axes_arithmetic():
    H, W, N, M, C = fresh('H', 'W', 'N', 'M', 'C')
    # 2d dot
    assert dot_axes(axes(H, W - 1), axes(W, N)) == axes(H, N)
    assert dot_axes(axes(H, W), axes(W + 1, N)) == axes(H, N)
    # 4d dot, and swapping the order of the axes is allowed
    assert dot_axes(axes(M, C - 1, H - 1, W - 1), axes(C, H, W, N)) == axes(M, N)
    assert dot_axes(axes(M, C, H, W), axes(C + 1, H + 1, W + 1, N)) == axes(M, N)
    assert dot_axes(axes(M, W - 1, H - 1, C - 1), axes(C, H, W, N)) == axes(M, N)
    # the seed's A, B: B's C-1, H-1, W-1 cancel A's C, H, W, leaving [K, N]
    A = Axes([ax.C, ax.H, ax.W, ax.N])
    B = Axes([ax.K, ax.C - 1, ax.H - 1, ax.W - 1])
    assert dot_axes(B, A) == axes(ax.K, ax.N)


# ---------------------------------------------------------------- Axes algebra
def test_ordered_union_follows_the_elementwise_table():
    H, W, N, C = fresh('H', 'W', 'N', 'C')
    cases = [
        ((H,), (H,), (H,)),
        ((H, W), (H, W), (H, W)),
        ((H, W), (H,), (H, W)),
        ((H, W), (W,), (H, W)),
        ((H, W), (W, N), (H, W, N)),
        ((H, W), (N, W), (H, W, N)),
        ((C, H), (W, H, N), (C, H, W, N)),
        # commuted: the same axes, the order of the left operand first
        ((H,), (W,), (H, W)),
        ((W,), (H,), (W, H)),
        ((C,), (H, W), (C, H, W)),
        ((H, W), (C,), (H, W, C)),
        ((H, W), (W, H), (H, W)),
        ((W, H), (H, W), (W, H)),
    ]
    for left, right, out in cases:
        assert axes(*left) + axes(*right) == axes(*out), (left, right)
    # associative and distributive
    assert (axes(H) + axes(W)) + axes(N) == axes(H) + (axes(W) + axes(N)) == axes(H, W, N)
    assert axes(H) + (axes(W) + axes(N)) == (axes(H) + axes(W)) + (axes(H) + axes(N))
    # lists and single axes join too
    assert axes(H) + [W] == [H] + axes(W) == axes(H) + W == axes(H, W)


def test_difference_and_intersection():
    C, H, W = ax.C, ax.H, ax.W
    x = axes(C, H, W)
    # the reduction table, as what stays
    assert x - [] == axes(C, H, W)
    assert x - [C] == axes(H, W)
    assert x - [C, W] == axes(H)
    assert x - [W, C] == axes(H)
    assert x - x == axes()
    assert x.intersect([W, ax.N, C]) == axes(C, W)
    # broadcasting needs a superset: nothing of x is left outside the target
    assert not axes(C, H) - axes(W, H, C) and axes(C, H) - axes(C, W)


# ---------------------------------------------------------------- derived axes
def test_flattened_axis_lengths():
    A, B, C = fresh('A', 'B', 'C')
    flat = FlattenedAxis([A, B])
    nested = Axes([A, (B, C)])
    assert flat.length is None
    A.length, B.length, C.length = 10, 15, 20
    assert flat.length == 150 and flat.axes == axes(A, B)
    assert isinstance(nested[1], FlattenedAxis) and nested.lengths == (10, 300)
    assert nested.full_lengths == (10, (15, 20))
    assert FlattenedAxis([A, (B, C)]).length == 3000
    assert Axes([A, [B]]) == axes(A, B)              # a nested single axis is that axis
    assert axes(A, B).flatten() == flat and axes(A).flatten() is A
    with pytest.raises(AttributeError):
        flat.length = 3


@pytest.mark.parametrize("s, length", [
    (slice(0, 5), 5), (slice(5, 0), 0), (slice(0, None), 10), (slice(5, 0, -1), 5),
    (slice(0, 5, -1), 0), (slice(None, None, -1), 10), (slice(-3, None), 3),
])
def test_sliced_axis_length(s, length):
    a = ng.make_axis(10)
    assert SlicedAxis(a, s).length == length


def test_sliced_and_padded_axes_follow_their_parent():
    a = ng.make_axis(name='parent_axis', batch=True, roles=[ar.Height])
    s, p = SlicedAxis(a, slice(1, None)), PaddedAxis(a, (1, 2))
    assert s.length is None and p.length is None
    a.length = 10
    assert s.length == 9 and p.length == 13
    assert s.is_batch and p.roles == {ar.Height} and s != a and p != a and s != p
    with pytest.raises(ValueError, match="step of 1, -1 or None, got 2"):
        SlicedAxis(a, slice(0, 5, 2))
    with pytest.raises(AttributeError, match="follows parent_axis"):
        s.length = 3


# ---------------------------------------------------------------- layout
def test_tensor_description_is_c_contiguous_in_axes_order():
    A, B, C = fresh('A', 'B', 'C')
    A.length, B.length, C.length = 2, 3, 4
    td = TensorDescription([A, B])
    assert td.shape == (2, 3) and td.strides == (12, 4) and td.dtype == np.float32
    view = td.broadcast([B, C, A])          # reorder and a new axis of stride 0
    assert view.shape == (3, 4, 2) and view.strides == (4, 0, 12)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.ndarray(view.shape, view.dtype, buffer=x, offset=view.offset, strides=view.strides)
    np.testing.assert_array_equal(y, np.broadcast_to(x.T[:, None, :], (3, 4, 2)))
    assert TensorDescription([A], dtype=np.float64).strides == (8,)
    with pytest.raises(ValueError, match="lacks"):
        td.broadcast([A, C])


# ---------------------------------------------------------------- module paths
def test_module_paths_serve_one_core():
    import neonlike.axes as core
    from neonlike.ngraph.op_graph import axes as op_axes
    from neonlike.ngraph.util import names
    for name in ("Axis", "Axes", "DualAxis", "FlattenedAxis", "SlicedAxis", "PaddedAxis",
                 "TensorDescription", "AxisRole", "make_axis", "make_axes", "make_axis_role"):
        assert getattr(op_axes, name) is getattr(core, name)
        assert getattr(ng, name) is getattr(core, name)
    assert ng.make_name_scope is names.make_name_scope and ng.NameScope is names.NameScope


def test_importing_neonlike_imports_no_axes():
    code = ("import sys, neonlike\n"
            "assert not [m for m in sys.modules if m.startswith(('neonlike.axes', "
            "'neonlike.ngraph'))], sorted(sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
