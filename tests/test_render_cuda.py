"""render_cuda: every kind of FUSED stage renders to CUDA C that nvcc compiles for sm_90 with no
warning and no spill. Needs no GPU and no pycuda; the compile tests need nvcc on PATH.

Kernels are batched: each test renders all its trees, and `compile_kernels` compiles them as a few
translation units (one nvcc call each, run side by side), so the file stays well under a minute.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neonlike import plan as P
from neonlike.dtypes import compute_dtype
from neonlike.ops import OP_INFO, Kind, Op
from neonlike.optree import OpTreeNode
from neonlike.backends import gen_backend
from neonlike.backends.gpu import render as RC

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH: the rendered CUDA "
                                "kernels cannot be compiled here (the text tests still run)")
NVCC_CMD = ["--cubin", "-arch=sm_90", "-Xptxas", "-v", "-o", os.devnull]
ALL_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "uint8", "uint16",
              "uint32"]
ELEMENTWISE = sorted(op for op in RC.RENDERABLE if OP_INFO[op].kind is Kind.ELEMENTWISE
                     and op is not Op.CAST)


@pytest.fixture(scope="module")
def be():
    return gen_backend("cpu", rng_seed=0)


def data(shape, seed=0):
    return np.random.default_rng(seed).uniform(-3, 3, shape)


def stage_kernels(out, tree, **options):
    """The CUDA kernels of the FUSED stages of `out[:] = tree` (as a CUDA backend would render
    them: temps in the compute dtype, the last stage storing into out's dtype)."""
    _, tensors, _, nodes = P.walk(out, tree)
    plan = P.make_plan(out, tree, tensors, nodes, RC.RENDERABLE)
    ctype = compute_dtype([out.dtype] + [t.dtype for t in tensors])
    meta = {i: (len(t.shape), P._mask(t.shape), t.dtype) for i, t in enumerate(tensors)}
    meta[plan.n_inputs] = (len(out.shape), P._mask(out.shape), out.dtype)
    for j, pos in enumerate(plan.temps):
        shape = nodes[pos].shape
        meta[plan.n_inputs + 1 + j] = (len(shape), P._mask(shape))
    kernels = []
    for i, stage in enumerate(plan.stages):
        if stage.kind is P.StageKind.FUSED:
            store = out.dtype if stage.out == plan.n_inputs else ctype
            kernels.append(RC.render(stage, meta, ctype.name, store, f"test/{i}", **options))
            assert "$" not in kernels[-1].source, "a placeholder of kernels/ left unfilled"
    return kernels


_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


def _nvcc(sources: list) -> tuple:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernels.cu")
        with open(path, "w") as f:
            f.write("\n".join(sources))
        r = subprocess.run([NVCC, *NVCC_CMD, path], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def _kernel_at(log: str, sources: list) -> str:
    """The source of the kernel holding the first line nvcc's log points at."""
    m = re.search(r"kernels\.cu\((\d+)\)", log)
    line = int(m.group(1)) if m else 1
    for src in sources:
        count = src.count("\n") + 1  # sources are joined with "\n"
        if line <= count:
            return src
        line -= count
    return "(not found)"


def compile_kernels(kernels, batches: int | None = None) -> dict:
    """Compile the kernels (identical ones once) with nvcc; fail on an error, a warning or a
    spill. Returns {name: {"registers": n, "spill_stores": n, "stack": n}}."""
    unique = {k.name: k for k in kernels}
    names = sorted(unique)
    n = batches or min(os.cpu_count() or 1, 4, len(names))
    chunks = [names[i::n] for i in range(n)]
    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda c: _nvcc([unique[k].source for k in c]), chunks))
    report: dict = {}
    for chunk, (rc, log) in zip(chunks, results):
        if rc != 0 or "warning" in log:
            problems = "\n".join(line for line in log.splitlines() if "ptxas info" not in line
                                 and not _SPILL.search(line))
            pytest.fail(f"nvcc on {len(chunk)} kernels:\n{problems}\n\nthe first kernel named:\n"
                        + _kernel_at(log, [unique[k].source for k in chunk]))
        current = None
        for line in log.splitlines():
            if m := _ENTRY.search(line):
                current = report.setdefault(m.group(1), {})
            elif (m := _SPILL.search(line)) and current is not None:
                current["stack"], current["spill_stores"] = int(m.group(1)), int(m.group(2))
            elif (m := _REGS.search(line)) and current is not None:
                current["registers"] = int(m.group(1))
    assert sorted(report) == names, f"ptxas reported {sorted(report)}, expected {names}"
    spilled = {k: v for k, v in report.items() if v["spill_stores"]}
    assert not spilled, f"kernels spill registers: {spilled}"
    return report


def softmax(b, x, axis):
    return b.exp(x - b.max(x, axis=axis)) / b.sum(b.exp(x - b.max(x, axis=axis)), axis=axis)


# ---------------------------------------------------------------- compiled by nvcc

@needs_nvcc
def test_every_elementwise_op_and_cast_compiles(be):
    kernels = []
    for dtype in ("float32", "float64"):
        x, y = be.array(data((4, 6)), dtype=dtype), be.array(data((1, 6), 1), dtype=dtype)
        out = be.empty((4, 6), dtype=dtype)
        for op in ELEMENTWISE:
            tree = OpTreeNode.build(op, x, y if OP_INFO[op].arity == 2 else None)
            kernels += stage_kernels(out, tree * 1.5)
        for target in ALL_DTYPES:
            kernels += stage_kernels(out, be.cast(x * 3.0, target) + y)
    assert len({k.name for k in kernels}) == 2 * (len(ELEMENTWISE) + len(ALL_DTYPES))
    compile_kernels(kernels)


BROADCASTS = {
    "2d_row": ((4, 5), lambda b, x, y: x * 2.5 + y, [(4, 5), (1, 5)]),
    "2d_outer": ((3, 4), lambda b, x, y: x * y - x, [(3, 1), (1, 4)]),
    "3d": ((2, 3, 4), lambda b, x, y: b.exp(x) / (1 + abs(y)), [(2, 3, 4), (3, 1)]),
    "3d_middle": ((2, 3, 4), lambda b, x, y: b.maximum(x, y), [(2, 3, 4), (1, 3, 1)]),
    "4d": ((2, 1, 3, 4), lambda b, x, y: b.sqrt(abs(x)) + y, [(2, 1, 3, 4), (1, 4)]),
    "4d_all": ((2, 3, 4, 5), lambda b, x, y, z: b.tanh(x * y) - z,
               [(2, 3, 4, 5), (1, 3, 1, 5), (2, 1, 4, 1)]),
    "scalar_leaf": ((3, 4), lambda b, x, y: x + y, [(3, 4), (1, 1)]),
    "ten_op": ((50, 40), lambda b, a, c, d, e: ((a * c + d) * e - a / (c + 1)) * b.exp(-d * d)
               + b.sqrt(abs(e)), [(50, 40)] * 4),
}


@needs_nvcc
def test_broadcasting_ranks_and_views_compile(be):
    kernels = []
    for name, (shape, build, shapes) in BROADCASTS.items():
        tensors = [be.array(data(s, i)) for i, s in enumerate(shapes)]
        for index64 in (False, True):
            kernels += stage_kernels(be.empty(shape), build(be, *tensors), index64=index64)
    x = be.array(data((8, 10)))
    out = be.zeros((8, 10))
    kernels += stage_kernels(out[::2, 1::3], x[1::2, ::-4] * 3 + x[::2, 1::3])  # strided views
    kernels += stage_kernels(out, x.T.T + 1)
    compile_kernels(kernels)


REDUCTIONS = {
    "sum0": ((1, 40), lambda b, x: b.sum(x, axis=0), [(300, 40)]),
    "sum1": ((300, 1), lambda b, x: b.sum(x * x, axis=1), [(300, 40)]),
    "sum_all": ((1, 1), lambda b, x: b.sum(x), [(70, 30)]),
    "sum_3d_02": ((1, 5, 1), lambda b, x: b.sum(x, axis=(0, 2)), [(4, 5, 6)]),
    "max_3d_12": ((4, 1, 1), lambda b, x: b.max(x, axis=(1, 2)), [(4, 5, 6)]),
    "min_4d_013": ((1, 1, 4, 1), lambda b, x: b.min(x, axis=(0, 1, 3)), [(2, 3, 4, 5)]),
    "sum_4d_all": ((1, 1, 1, 1), lambda b, x: b.sum(x * 2), [(2, 3, 4, 5)]),
    "max_min": ((1, 6), lambda b, x: b.max(x, axis=0) - b.min(x, axis=0), [(7, 6)]),
    "argmax0": ((1, 6), lambda b, x: b.argmax(x, axis=0), [(7, 6)]),
    "argmax1": ((7, 1), lambda b, x: b.argmax(x, axis=1), [(7, 6)]),
    "argmin0": ((1, 6), lambda b, x: b.argmin(x, axis=0), [(7, 6)]),
    "argmin1": ((7, 1), lambda b, x: b.argmin(x * 2 - 1, axis=1), [(7, 6)]),
    "argmax_all": ((1, 1), lambda b, x: b.argmax(x, axis=None), [(7, 6)]),
    "mean_var": ((9, 1), lambda b, x: b.mean(x, axis=1) + b.var(x, axis=1), [(9, 33)]),
    "var0": ((1, 33), lambda b, x: b.var(x, axis=0), [(9, 33)]),
    "std1": ((9, 1), lambda b, x: b.std(x, axis=1), [(9, 33)]),
    "softmax0": ((30, 20), lambda b, x: softmax(b, x, 0), [(30, 20)]),
    "softmax1": ((30, 20), lambda b, x: softmax(b, x, 1), [(30, 20)]),
    "softmax_3d": ((2, 3, 4), lambda b, x: softmax(b, x, 2), [(2, 3, 4)]),
    "sum_then_broadcast": ((9, 33), lambda b, x: x * 2 + b.sum(x, axis=1), [(9, 33)]),
    "mixed_axes": ((9, 33), lambda b, x: b.sum(x, axis=0) + b.sum(x, axis=1), [(9, 33)]),
    "broadcast_operand": ((1, 6), lambda b, x, y: b.sum(x * y, axis=0), [(7, 6), (7, 1)]),
    "keepdims_false": ((1, 7), lambda b, x: b.sum(x, axis=1, keepdims=False), [(7, 6)]),
    "nested": ((7, 1), lambda b, x: b.sum(b.exp(x - b.max(x, axis=1)) * b.argmax(x, axis=1),
                                          axis=1), [(7, 6)]),
}


@needs_nvcc
def test_reductions_compile_in_every_layout(be):
    kernels = []
    for name, (shape, build, shapes) in REDUCTIONS.items():
        tensors = [be.array(data(s, i)) for i, s in enumerate(shapes)]
        for dtype in ("float32", "float64", "float16"):
            kernels += stage_kernels(be.empty(shape, dtype=dtype), build(be, *tensors))
    x = be.array(data((30, 20)))
    for p in (1, 2, 8, 32, 64, 256):  # every group size: shuffles only, shared memory only, both
        for axis in (0, 1):
            kernels += stage_kernels(be.empty((30, 20)), softmax(be, x, axis), points_per_block=p)
            kernels += stage_kernels(be.empty((1, 1)), be.argmax(x, axis=None),
                                     points_per_block=p, index64=True)
    compile_kernels(kernels)


@needs_nvcc
def test_storage_dtypes_compile(be):
    """Every input dtype loaded and every output dtype stored, elementwise and reduced."""
    kernels = []
    for in_dtype in ALL_DTYPES:
        x = be.array(np.rint(data((5, 8)) * 10), dtype=in_dtype)
        y = be.array(np.rint(data((1, 8), 1) * 10), dtype="float16")
        for out_dtype in ALL_DTYPES:
            out = be.empty((5, 8), dtype=out_dtype)
            kernels += stage_kernels(out, x * 2.5 - y)
            kernels += stage_kernels(out, x * 2.5 + be.max(x, axis=1))
    compile_kernels(kernels)


@needs_nvcc
def test_hand_made_stages_1d_and_rank_broadcast():
    """Stages over 1-D domains (tensors here are at least 2-D, but a plan may hold any rank) and
    buffers of fewer dimensions than the output (right-aligned)."""
    I = P.Instr
    ew = P.Stage(P.StageKind.FUSED, 2, (I("load", (), 0), I("load", (), 1), I("add", (0, 1)),
                                        I("const", (), 0), I("mul", (2, 3))))
    red = P.Stage(P.StageKind.FUSED, 2, (I("load", (), 0), I("load", (), 1), I("mul", (0, 1)),
                                         I("sum", (2,), (0,)), I("argmax", (2,), (0,)),
                                         I("add", (3, 4))), (0,), 0)
    kernels = [
        RC.render(ew, {0: (1, 0), 1: (1, 0), 2: (1, 0)}, "float32", np.float32, "1d"),
        RC.render(ew, {0: (1, 0), 1: (3, 0b011), 2: (3, 0)}, "float64", np.int16, "3d<-1d"),
        RC.render(red, {0: (1, 0), 1: (1, 0), 2: (1, 0b1)}, "float32", np.float16, "1d sum"),
        RC.render(red, {0: (1, 0), 1: (1, 0), 2: (1, 0)}, "float32", np.float32, "1d bcast"),
    ]
    compile_kernels(kernels, batches=1)


_UNARY = [op for op in ELEMENTWISE if OP_INFO[op].arity == 1]
_BINARY = [op for op in ELEMENTWISE if OP_INFO[op].arity == 2]


@st.composite
def _trees(draw, depth=0):
    """A recipe: a function of (be, leaves) building a random tree over leaves of shapes (3, 4),
    (1, 4) and (3, 1), with every renderable op, reductions over axis 0, 1 or both."""
    kind = draw(st.sampled_from(["leaf", "const", "unary", "binary", "binary", "reduce"]
                                if depth < 4 else ["leaf", "const"]))
    if kind == "leaf":
        i = draw(st.integers(0, 2))
        return lambda b, leaves: leaves[i]
    if kind == "const":
        c = draw(st.sampled_from([0.5, 2.0, -1.5, 7]))
        return lambda b, leaves: c
    if kind == "unary":
        op, sub = draw(st.sampled_from(_UNARY)), draw(_trees(depth + 1))
        return lambda b, leaves: OpTreeNode.build(op, _as_tree(sub(b, leaves), leaves), None)
    if kind == "binary":
        op, s, t = draw(st.sampled_from(_BINARY)), draw(_trees(depth + 1)), draw(_trees(depth + 1))
        return lambda b, leaves: OpTreeNode.build(op, _as_tree(s(b, leaves), leaves), t(b, leaves))
    name = draw(st.sampled_from(["sum", "max", "min", "argmax", "argmin"]))
    axis = draw(st.sampled_from([0, 1, (0, 1)] if not name.startswith("arg") else [0, 1]))
    sub = draw(_trees(depth + 1))
    return lambda b, leaves: getattr(b, name)(_as_tree(sub(b, leaves), leaves), axis=axis)


def _as_tree(x, leaves):
    return x if not isinstance(x, (int, float)) else leaves[0] * 0 + x


@needs_nvcc
def test_random_trees_compile():
    be = gen_backend("cpu", rng_seed=0)
    kernels = []

    @settings(max_examples=80, deadline=None, database=None)
    @given(recipe=_trees(), in_dtypes=st.lists(st.sampled_from(ALL_DTYPES), min_size=3, max_size=3),
           out_dtype=st.sampled_from(ALL_DTYPES))
    def render_tree(recipe, in_dtypes, out_dtype):
        leaves = [be.array(data(s, i), dtype=dt)
                  for i, (s, dt) in enumerate(zip([(3, 4), (1, 4), (3, 1)], in_dtypes))]
        out = be.empty((3, 4), dtype=out_dtype)
        kernels.extend(stage_kernels(out, _as_tree(recipe(be, leaves), leaves)))

    render_tree()
    assert len(kernels) >= 40
    compile_kernels(kernels)


@needs_nvcc
def test_softmax_kernel_registers(be):
    """One kernel per softmax, no spill, and registers for at least 4 blocks of 256 per SM."""
    x = be.array(data((30, 20)))
    for axis in (0, 1):
        (k,) = stage_kernels(be.empty((30, 20)), softmax(be, x, axis))
        report = compile_kernels([k], batches=1)
        assert report[k.name]["registers"] <= 64, report


# ---------------------------------------------------------------- the text (no nvcc needed)

def _events(source: str) -> list:
    """The kernel's shared-memory writes, reads and barriers, in source order."""
    out = []
    for line in source.split("void", 1)[1].splitlines():
        code = line.split("//")[0]
        if "__syncthreads()" in code:
            out.append("sync")
        if re.search(r"\bpart\[[^\]]+\] = ", code):
            out.append("write part")
        if re.search(r"= part\[p\]", code):
            out.append("read part")
        if re.search(r"\bres\[p\] = ", code):
            out.append("write res")
        if re.search(r"= res\[p\]", code):
            out.append("read res")
    return out


@pytest.mark.parametrize("axis", [0, 1])
def test_softmax_is_one_kernel_with_barriers_in_place(be, axis):
    x = be.array(data((30, 20)))
    out = be.empty((30, 20))
    tree = softmax(be, x, axis)
    _, tensors, _, nodes = P.walk(out, tree)
    plan = P.make_plan(out, tree, tensors, nodes, RC.RENDERABLE)
    assert [s.kind for s in plan.stages] == [P.StageKind.FUSED]
    (k,) = stage_kernels(out, tree)
    src = k.source
    assert src.count('extern "C" __global__') == 1
    assert src.count("// pass ") == 2 and "pass 1: max" in src and "pass 2: sum" in src
    assert ("__shfl_xor_sync(0xffffffffu" in src) == (axis == 1)  # rows: lanes share a point
    assert k.points_per_block == (32 if axis == 0 else 1)
    # per pass: partials written, barrier, combined, barrier, result read; a pass writes res
    # again only after a barrier that follows every thread's read of the previous result
    pass_events = ["write part", "sync", "read part", "write res", "sync", "read res"]
    assert _events(src) == pass_events * 2
    assert "expf(" in src and "nl_max(" in src


def test_the_same_stage_renders_the_same_text(be):
    def kernel(c, seed):
        x = be.array(data((6, 7), seed))
        return stage_kernels(be.empty((6, 7)), be.tanh(x * c) + be.sum(x, axis=0))[-1]

    a, b, c = kernel(2.0, 0), kernel(3.0, 1), kernel(3.0, 2)
    assert a.source == b.source == c.source and a.name == b.name  # constants are arguments
    x = be.array(data((6, 7)))
    other = stage_kernels(be.empty((6, 7)), be.sig(x * 2.0) + be.sum(x, axis=0))[-1]
    assert other.name != a.name
    assert re.fullmatch(r"red_[0-9a-f]{12}", a.name) and f"void {a.name}(" in a.source


def test_arguments_match_the_signature(be):
    x, y = be.array(data((4, 5)), dtype="float16"), be.array(data((1, 5)))
    (k,) = stage_kernels(be.empty((4, 5), dtype="int8"), x * 2.5 + y)
    decls = [d for d, _ in k.params]
    assert decls[0] == "signed char* out" and "const __half* b0" in decls
    assert k.arg_format == "Pii" + "ii" + "Pii" + "Pii" + "f"
    assert k.bufs == (0, 1) and k.consts == (0,)
    signature = k.source.split(f"{k.name}(", 1)[1].split(")", 1)[0]
    assert [d.strip() for d in signature.split(",")] == decls
    assert "__half2float(b0[" in k.source and "nl_sat(" in k.source
    assert k.grid((4, 5)) == 1 and k.grid((4096, 4096)) == RC.MAX_BLOCKS
    (k64,) = stage_kernels(be.empty((4, 5), dtype="float16"), x * 2.5 + y, index64=True)
    assert "long long" in k64.source and "__float2half_rn(" in k64.source
    assert k64.arg_format == "Pqq" + "qq" + "Pqq" + "Pqq" + "f"


def test_every_elementwise_and_reduction_op_is_renderable():
    missing = [op for op, info in OP_INFO.items()
               if info.kind in (Kind.ELEMENTWISE, Kind.REDUCTION) and op not in RC.RENDERABLE]
    assert not missing


def test_unknown_ops_and_bad_layouts_raise():
    I = P.Instr
    stage = P.Stage(P.StageKind.FUSED, 1, (I("load", (), 0), I("transpose", (0,))))
    meta = {0: (2, 0), 1: (2, 0)}
    with pytest.raises(NotImplementedError, match="transpose"):
        RC.render(stage, meta, "float32", np.float32, "k")
    ok = P.Stage(P.StageKind.FUSED, 1, (I("load", (), 0), I("sum", (0,), (1,))), (1,), 0)
    with pytest.raises(ValueError, match="points_per_block"):
        RC.render(ok, meta, "float32", np.float32, "k", points_per_block=3)
    with pytest.raises(ValueError, match="compute type"):
        RC.render(ok, meta, "float16", np.float32, "k")
