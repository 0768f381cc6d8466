"""The GPU backend's parts that need no GPU and no pycuda: the nvcc binary cache, the cuBLAS
argument mapping (checked by emulating column-major GEMM in numpy), the RNG formula (its CUDA text
compiled; its C text run on the host and compared with the numpy twin), GPUTensor's view
arithmetic (checked against CPUTensor's numpy views), and the launch-argument marshalling.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from neonlike import plan as P
from neonlike.backends.gpu import cublas as CB
from neonlike.backends.gpu import compile as CC
from neonlike.backends import gen_backend
from neonlike.backends.gpu import device as G
from neonlike.backends.gpu import nn_source as NS
from neonlike.backends.gpu import render as RC
from neonlike.dtypes import compute_dtype

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty neonlike cache dir and empty in-memory binaries."""
    monkeypatch.setenv("NEONLIKE_CACHE_DIR", str(tmp_path))
    CC.clear_memory()
    yield tmp_path
    CC.clear_memory()


@pytest.fixture(scope="module")
def cpu():
    return gen_backend("cpu", rng_seed=0)


def rendered(be, out_shape, tree_fn, shapes, dtype=np.float32, **options):
    """(kernels, tensors, out, plan, nodes) of `out[:] = tree_fn(*tensors)` on the CPU backend."""
    rng = np.random.default_rng(0)
    tensors = [be.array(rng.uniform(-1, 1, s), dtype=dtype) for s in shapes]
    out = be.empty(out_shape, dtype=dtype)
    tree = tree_fn(*tensors)
    _, ts, _, nodes = P.walk(out, tree)
    plan = P.make_plan(out, tree, ts, nodes, RC.RENDERABLE)
    ctype = compute_dtype([out.dtype] + [t.dtype for t in ts])
    meta = P.buffer_meta(plan, ts, out, nodes, dtypes=True)
    kernels = [RC.render(st, meta, ctype.name, out.dtype if st.out == plan.n_inputs else ctype,
                         f"offline/{i}", **options)
               for i, st in enumerate(plan.stages) if st.kind is P.StageKind.FUSED]
    return kernels, ts, out, plan, nodes


# **************** cuda_compile ****************

@needs_nvcc
def test_compile_cache_memory_disk_arch_corrupt(cpu, cache, monkeypatch):
    (k,), *_ = rendered(cpu, (3, 4), lambda x: x * 2.0 + 1.0, [(3, 4)])
    cubin = CC.compile_cubin(k.source, k.name, "sm_90")
    assert CC.is_whole_elf(cubin)
    path = CC.cubin_path(k.source, k.name, "sm_90")
    assert path.read_bytes() == cubin and path.parent == cache / "cuda"
    assert k.name in path.name

    def no_nvcc(*a):
        raise AssertionError("nvcc ran although the binary is cached")
    monkeypatch.setattr(CC, "_nvcc", no_nvcc)
    assert CC.compile_cubin(k.source, k.name, "sm_90") is cubin          # memory
    CC.clear_memory()
    hits = CC.STATS["disk_hits"]
    assert CC.compile_cubin(k.source, k.name, "sm_90") == cubin          # disk
    assert CC.STATS["disk_hits"] == hits + 1
    monkeypatch.undo()
    monkeypatch.setenv("NEONLIKE_CACHE_DIR", str(cache))

    other = CC.compile_cubin(k.source, k.name, "sm_80")                  # arch is in the key
    assert CC.cubin_path(k.source, k.name, "sm_80") != path
    assert other != cubin and len(list((cache / "cuda").glob("*.cubin"))) == 2

    path.write_bytes(cubin[: len(cubin) // 2])                          # truncated file
    CC.clear_memory()
    corrupt = CC.STATS["corrupt"]
    assert CC.compile_cubin(k.source, k.name, "sm_90") == cubin
    assert CC.STATS["corrupt"] == corrupt + 1 and path.read_bytes() == cubin
    path.write_bytes(b"not an elf at all")
    CC.clear_memory()
    assert CC.compile_cubin(k.source, k.name, "sm_90") == cubin


@needs_nvcc
def test_compile_cache_is_shared_between_processes(cpu, cache):
    (k,), *_ = rendered(cpu, (2, 5), lambda x, y: x - y, [(2, 5), (1, 5)])
    CC.compile_cubin(k.source, k.name, "sm_90")
    src = cache / "kernel.cu"
    src.write_text(k.source)
    script = (
        "import sys\n"
        "from neonlike.backends.gpu import compile as CC\n"
        "def fail(*a): raise SystemExit('recompiled')\n"
        "CC._nvcc = fail\n"
        f"data = CC.compile_cubin(open({str(src)!r}).read(), {k.name!r}, 'sm_90')\n"
        "assert CC.STATS['disk_hits'] == 1, CC.STATS\n"
        "print(len(data))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env={**os.environ, "NEONLIKE_CACHE_DIR": str(cache)})
    assert r.returncode == 0, r.stderr


def test_missing_nvcc_is_a_clear_error(cache, monkeypatch):
    monkeypatch.setenv("NEONLIKE_NVCC", "/nonexistent/nvcc")
    with pytest.raises(RuntimeError, match="nvcc.*CUDA toolkit"):
        CC.compile_cubin("extern \"C\" __global__ void k() {}", "k", "sm_90")
    monkeypatch.delenv("NEONLIKE_NVCC")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RuntimeError, match="not on PATH"):
        CC.nvcc_path()


@needs_nvcc
def test_compile_errors_carry_the_log_and_arch_is_checked(cache, monkeypatch):
    with pytest.raises(RuntimeError, match="(?s)nvcc failed on kernel broken.*undefined"):
        CC.compile_cubin('extern "C" __global__ void broken() { undefined_thing(); }', "broken",
                         "sm_90")
    with pytest.raises(ValueError, match="sm_90"):
        CC.compile_cubin("", "k", "90")
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    with pytest.raises(RuntimeError, match="arch="):
        CC.compile_cubin("", "k")


def test_whole_elf_check():
    assert not CC.is_whole_elf(b"")
    assert not CC.is_whole_elf(b"\x7fELF" + b"\0" * 60)


# **************** the cuBLAS argument mapping, against numpy ****************

def emulate_gemm(buf: np.ndarray, g: CB.GemmArgs, alpha=1.0, beta=0.0, batch=None) -> None:
    """Column-major gemm as cuBLAS defines it, on a flat buffer (pointers are element indices)."""
    def read(ptr, ld, rows, cols):
        return buf[ptr + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld]
    for i in range(batch.count if batch else 1):
        sa, sb, sc = (batch.stride_a * i, batch.stride_b * i, batch.stride_c * i) if batch \
            else (0, 0, 0)
        x = read(g.a + sa, g.lda, *((g.m, g.k) if g.transa == CB.OP_N else (g.k, g.m)))
        y = read(g.b + sb, g.ldb, *((g.k, g.n) if g.transb == CB.OP_N else (g.n, g.k)))
        x = x if g.transa == CB.OP_N else x.T
        y = y if g.transb == CB.OP_N else y.T
        idx = g.c + sc + np.arange(g.m)[:, None] + np.arange(g.n)[None, :] * g.ldc
        buf[idx] = alpha * (x @ y) + (beta * buf[idx] if beta else 0.0)


def place(buf: np.ndarray, start: int, shape: tuple, layout: str) -> tuple:
    """A view of `buf` from `start` with the given logical shape and layout:
    'c' C-order, 't' a .T view, 's' a sub-block of a wider matrix, 'x' no unit stride."""
    r, c = shape
    if layout == "c":
        v = buf[start:start + r * c].reshape(r, c)
    elif layout == "t":
        v = buf[start:start + r * c].reshape(c, r).T
    elif layout == "s":
        v = buf[start:start + (r + 1) * (c + 3)].reshape(r + 1, c + 3)[1:, 2:2 + c]
    else:
        v = buf[start:start + 2 * r * 2 * c].reshape(2 * r, 2 * c)[::2, ::2]
    ptr = (v.__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // buf.itemsize
    return v, CB.Matrix(ptr, v.shape, tuple(s // buf.itemsize for s in v.strides))


@pytest.mark.parametrize("la", "ctsx")
@pytest.mark.parametrize("lb", "ctsx")
@pytest.mark.parametrize("lc", "ctsx")
@pytest.mark.parametrize("mnk", [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1)])
def test_gemm_args_compute_a_times_b(la, lb, lc, mnk):
    M, N, K = mnk
    buf = np.zeros(4000)
    rng = np.random.default_rng(M * 100 + N * 10 + K)
    a, ma = place(buf, 0, (M, K), la)
    b, mb = place(buf, 1000, (K, N), lb)
    c, mc = place(buf, 2000, (M, N), lc)
    a[...] = rng.uniform(-1, 1, a.shape)
    b[...] = rng.uniform(-1, 1, b.shape)
    c[...] = rng.uniform(-1, 1, c.shape)
    want = 2.0 * a @ b + 0.5 * c
    g = CB.gemm_args(ma, mb, mc)
    unmappable = {name: m for name, m in (("a", ma), ("b", mb), ("c", mc))
                  if CB.column_major(m.shape, m.strides) is None}
    if unmappable:
        assert g is None
        return
    assert g is not None
    assert min(g.lda, g.ldb, g.ldc) >= 1
    assert g.lda >= max(1, g.m if g.transa == CB.OP_N else g.k)
    assert g.ldb >= max(1, g.k if g.transb == CB.OP_N else g.n)
    assert g.ldc >= max(1, g.m)
    emulate_gemm(buf, g, 2.0, 0.5)
    np.testing.assert_allclose(c, want, rtol=1e-12)


def test_gemm_args_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="expected A"):
        CB.gemm_args(CB.Matrix(0, (2, 3), (3, 1)), CB.Matrix(0, (4, 2), (2, 1)),
                     CB.Matrix(0, (2, 2), (2, 1)))


@pytest.mark.parametrize("pattern", ["fprop", "bprop", "both3d", "ct"])
def test_batched_gemm_args(pattern):
    X, M, N, K = 3, 4, 5, 6
    buf = np.zeros(5000)
    rng = np.random.default_rng(7)
    if pattern in ("fprop", "ct"):
        a = buf[:M * K].reshape(M, K)
        b = buf[1000:1000 + X * K * N].reshape(X, K, N)
    elif pattern == "bprop":
        a = buf[:M * K].reshape(K, M).T          # W.T
        b = buf[1000:1000 + X * K * N].reshape(X, K, N)
    else:
        a = buf[:X * M * K].reshape(X, M, K)
        b = buf[1000:1000 + X * N * K].reshape(X, N, K).swapaxes(1, 2)
    if pattern == "ct":                          # C as the .T of an (X, N, M) buffer
        c = buf[3000:3000 + X * N * M].reshape(X, N, M).swapaxes(1, 2)
    else:
        c = buf[3000:3000 + X * M * N].reshape(X, M, N)
    a[...] = rng.uniform(-1, 1, a.shape)
    b[...] = rng.uniform(-1, 1, b.shape)
    want = a @ b

    def first(v):
        ptr = (v.__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // 8
        st = tuple(s // 8 for s in v.strides)
        return CB.Matrix(ptr, v.shape[-2:], st[-2:]), (st[0] if v.ndim == 3 else 0)

    (ma, sa), (mb, sb), (mc, sc) = first(a), first(b), first(c)
    args = CB.batched_gemm_args(ma, mb, mc, (sa, sb, sc), X)
    emulate_gemm(buf, args.gemm, batch=args)
    np.testing.assert_allclose(c, want, rtol=1e-12)


def test_cublas_library_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(CB, "_candidates", lambda: ["/nonexistent/libcublas.so.13"])
    with pytest.raises(RuntimeError, match="cuBLAS"):
        CB.load_library()


# **************** the RNG ****************

@needs_nvcc
def test_rng_kernels_compile(cache):
    assert CC.is_whole_elf(CC.compile_cubin(G.RNG_SOURCE, "nl_rand", "sm_90"))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")
def test_rng_c_formula_equals_the_numpy_twin(tmp_path):
    """The device functions of RNG_SOURCE, compiled as host C++, give rng_uniform_reference's
    values bit for bit."""
    device_part = G.RNG_SOURCE.split('extern "C"')[0]
    key = G.rng_key(1234, 5)
    src = tmp_path / "rng.cpp"
    src.write_text("#include <cstdio>\n#define __device__\n#define __forceinline__ inline\n"
                   + device_part
                   + "int main() { for (long long i = 0; i < 1000; ++i) "
                   f"printf(\"%.17g\\n\", (double)nl_unit({key}ull, i, 0)); return 0; }}\n")
    exe = tmp_path / "rng"
    subprocess.run(["g++", "-O1", "-o", str(exe), str(src)], check=True)
    host = np.array(subprocess.run([str(exe)], capture_output=True, text=True,
                                   check=True).stdout.split(), dtype=np.float64)
    np.testing.assert_array_equal(host, G.rng_uniform_reference(key, 1000).astype(np.float64))


def test_rng_twin_is_uniform_and_reproducible():
    n = 200_000
    u = G.rng_uniform_reference(G.rng_key(42, 0), n)
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    np.testing.assert_array_equal(u, G.rng_uniform_reference(G.rng_key(42, 0), n))
    assert not np.array_equal(u, G.rng_uniform_reference(G.rng_key(42, 1), n))
    assert not np.array_equal(u, G.rng_uniform_reference(G.rng_key(43, 0), n))
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    assert np.all(np.abs(counts - n / 20) < 5 * np.sqrt(n / 20)), counts
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01
    z = G.rng_normal_reference(G.rng_key(42, 2), n, 1.0, 2.0)
    assert abs(z.mean() - 1.0) < 0.02 and abs(z.std() - 2.0) < 0.02
    assert np.isfinite(z).all()


def test_rng_key_matches_splitmix():
    assert G.splitmix64(0) == 0xE220A8397B1DCDAF        # splitmix64's first output from seed 0
    assert len({G.rng_key(s, c) for s in range(20) for c in range(20)}) == 400


# **************** GPUTensor views, against CPUTensor's numpy views ****************

class FakeBackend:
    """Just what GPUTensor's view arithmetic asks of its backend."""
    def _dtype(self, d):
        return np.dtype(d)


def gpu_like(shape, dtype=np.float32):
    return G.GPUTensor(FakeBackend(), shape, dtype, allocation=1 << 20)


def same_layout(g, c):
    assert g.shape == c.shape and g.dtype == c.dtype
    lg, lc = g._layout(), c._layout()
    assert (lg is None) == (lc is None)
    if lg is not None:
        assert lg[0] == lc[0], (lg, lc)
        assert [s for s, d in zip(lg[1], g.shape) if d != 1] == \
            [s for s, d in zip(lc[1], c.shape) if d != 1], (lg, lc, g.shape)


VIEW_CHAINS = [
    [lambda t: t[1:3]],
    [lambda t: t[:, 2]],
    [lambda t: t[1]],
    [lambda t: t[-1, -2]],
    [lambda t: t[::2, ::-1]],
    [lambda t: t[::-1][1:, 1::3]],
    [lambda t: t.T, lambda t: t[1:, :2]],
    [lambda t: t.reshape(-1, 2)],
    [lambda t: t.reshape(2, 3, 2)[1], lambda t: t.T],
    [lambda t: t.reshape(2, 3, 2)[..., 1]],
    [lambda t: t.reshape(2, 3, 2)[:, 1:, :].reshape(2, 4)],
    [lambda t: t[:, 1:3].reshape(8)],
    [lambda t: t.T.reshape(12, 1)],
    [lambda t: t.share((2, 2))],
    [lambda t: t.share((3, 2), dtype=np.float16)],
    [lambda t: t[0:0]],
]


@pytest.mark.parametrize("chain", range(len(VIEW_CHAINS)))
def test_gpu_views_match_cpu_views(cpu, chain):
    c = cpu.array(np.arange(24).reshape(4, 6), dtype=np.float32)
    g = gpu_like((4, 6))
    for step in VIEW_CHAINS[chain]:
        try:
            c = step(c)
        except ValueError:
            with pytest.raises(ValueError):
                step(g)
            return
        g = step(g)
        same_layout(g, c)
    assert g._original_base is not g


def test_random_view_chains_match_numpy(cpu):
    rng = np.random.default_rng(3)
    for trial in range(300):
        shape = tuple(int(d) for d in rng.integers(1, 5, rng.integers(2, 5)))
        c = cpu.array(np.zeros(shape), dtype=np.float32)
        g = gpu_like(shape)
        for _ in range(4):
            k = rng.integers(4)
            if k == 0:
                key = tuple(slice(int(rng.integers(-d, d)) if rng.random() < .5 else None, None,
                                  int(rng.choice([1, 2, -1]))) for d in c.shape)
                c, g = c[key], g[key]
            elif k == 1:
                axis = int(rng.integers(len(c.shape)))
                if c.shape[axis] == 0:
                    continue
                key = (slice(None),) * axis + (int(rng.integers(c.shape[axis])),)
                c, g = c[key], g[key]
            elif k == 2:
                c, g = c.T, g.T
            else:
                target = tuple(reversed(c.shape)) if rng.random() < .5 else (c.size, 1)
                try:
                    c2 = c.reshape(target)
                except ValueError:
                    with pytest.raises(ValueError):
                        g.reshape(target)
                    continue
                c, g = c2, g.reshape(target)
            same_layout(g, c)


def test_layout_helpers():
    assert G.contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert G.is_contiguous((2, 1, 4), (4, 99, 1)) and not G.is_contiguous((2, 4), (1, 2))
    assert G.extent(5, (2, 3), (3, -1)) == (3, 9)
    assert G.extent(5, (0, 3), (3, 1)) == (5, 5)
    a = G.BufDesc(1000, (2, 3), (3, 1), 4)
    assert G.overlaps(a, G.BufDesc(1020, (1, 1), (1, 1), 4))
    assert not G.overlaps(a, G.BufDesc(1024, (2, 2), (2, 1), 4))
    assert G.same_view(a, G.BufDesc(1000, (2, 3), (3, 1), 4))
    assert not G.same_view(a, G.BufDesc(1000, (3, 2), (1, 3), 4))
    assert G.same_view(G.BufDesc(8, (1, 3), (7, 1), 4), G.BufDesc(8, (1, 3), (3, 1), 4))
    assert G.transpose_layout((2, 3, 4), (12, 4, 1)) == ((2, 4, 3), (12, 1, 4))


# **************** launch arguments ****************

def descs_for(ts, out, plan, nodes, scramble=True):
    """BufDescs for every buffer of a plan: odd pointers and strides so a misplaced value shows."""
    descs = {}
    for i, t in enumerate(ts):
        descs[i] = G.BufDesc(4096 * (i + 1), t.shape, tuple(7 * (i + 1) + k for k in
                                                           range(len(t.shape))), 4)
    descs[plan.n_inputs] = G.BufDesc(999_424, out.shape, G.contiguous_strides(out.shape), 4)
    for j, pos in enumerate(plan.temps):
        descs[plan.n_inputs + 1 + j] = G.BufDesc(2 ** 24 * (j + 1), nodes[pos].shape,
                                                 G.contiguous_strides(nodes[pos].shape), 4)
    return descs


@pytest.mark.parametrize("case", ["ew", "broadcast", "softmax", "float64", "index64"])
def test_launch_args_follow_the_kernel_params(cpu, case):
    dtype = np.float64 if case == "float64" else np.float32
    if case in ("ew", "float64", "index64"):
        spec = ((3, 4), lambda x, y: x * 2.5 + y - 7.0, [(3, 4), (3, 4)])
    elif case == "broadcast":
        spec = ((2, 3, 4), lambda x, y: x / y + 1.5, [(2, 3, 4), (1, 4)])
    else:
        spec = ((5, 6), lambda x: cpu.exp(x - cpu.max(x, axis=0)) /
                cpu.sum(cpu.exp(x - cpu.max(x, axis=0)), axis=0), [(5, 6)])
    kernels, ts, out, plan, nodes = rendered(cpu, *spec, dtype=dtype,
                                             index64=case == "index64")
    consts = [float(10 + j) for j in range(8)]
    descs = descs_for(ts, out, plan, nodes)
    fused = [st for st in plan.stages if st.kind is P.StageKind.FUSED]
    for k, stage in zip(kernels, fused):
        dom = (P.walk(out, spec[1](*ts))[3][stage.domain][1].shape if stage.domain >= 0
               else descs[stage.out].shape)
        args = G.launch_args(k, descs[stage.out], dom, descs, consts)
        assert len(args) == len(k.params)
        at = 0
        o = descs[stage.out]
        assert args[0] == o.ptr
        at = 1 + len(o.shape)
        assert args[1:at] == tuple(s if d != 1 else 0 for s, d in zip(o.strides, o.shape))
        assert args[at:at + len(dom)] == tuple(dom)
        at += len(dom)
        for b in k.bufs:
            d = descs[b]
            assert args[at] == d.ptr and k.params[at][0].endswith(f"b{b}")
            assert args[at + 1:at + 1 + len(d.shape)] == tuple(
                s if n != 1 else 0 for s, n in zip(d.strides, d.shape))
            at += 1 + len(d.shape)
        assert args[at:] == tuple(consts[c] for c in k.consts)
        chars = {"float32": "f", "float64": "d"}[compute_dtype([np.dtype(dtype)]).name]
        assert all(ch == chars for _, ch in k.params[at:])
        if case == "index64":
            assert {ch for decl, ch in k.params if "_s" in decl} == {"q"}
        for value, (_, ch) in zip(args, k.params):
            assert isinstance(value, float if ch in "fd" else int)


def test_launch_args_reject_what_does_not_fit(cpu):
    (k,), ts, out, plan, nodes = rendered(cpu, (3, 4), lambda x: x + 1.0, [(3, 4)])
    descs = descs_for(ts, out, plan, nodes)
    with pytest.raises(ValueError, match="arguments"):
        G.launch_args(k, descs[plan.n_inputs], (3, 4, 1), descs, [1.0])
    big = G.BufDesc(4096, (3, 4), (2**31, 1), 4)
    with pytest.raises(ValueError, match="does not fit"):
        G.launch_args(k, descs[plan.n_inputs], (3, 4), {0: big}, [1.0])


# **************** imports ****************

def test_cpu_backend_imports_nothing_of_the_gpu():
    code = ("import sys, neonlike\n"
            "from neonlike.backends import gen_backend\n"
            "be = gen_backend('cpu'); x = be.ones((2, 2)); x[:] = x * 2\n"
            "bad = [m for m in sys.modules if m.startswith('pycuda') or m in (\n"
            "    'neonlike.backends.nervanagpu', 'neonlike.backends.gpu.device', 'neonlike.backends.gpu.cublas',\n"
            "    'neonlike.backends.gpu.compile')]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_gpu_modules_import_without_pycuda():
    code = ("import sys\n"
            "sys.modules['pycuda'] = None\n"
            "import neonlike.backends.nervanagpu, neonlike.backends.gpu.cublas, "
            "neonlike.backends.gpu.compile\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# **************** the whole backend on an emulated device ****************
# pycuda is replaced by a numpy arena (pointers are addresses in it), each render_cuda kernel's
# launch by a numpy evaluation of its stage that reads every buffer through the pointers, strides
# and domain that launch_args passed, the conv and pool kernels (gpu/nn_source.py) by their own
# source built for the host (g++) and called on the arena, and cuBLAS by emulate_gemm on the
# mapped arguments. This
# runs NervanaGPU's own code end to end (programs, temps, aliasing, views, host transfers, GEMM
# mapping, RNG plumbing): what it cannot check is CUDA itself.

ARENA_BASE = 1 << 32


_HOST_NN: list = []
_CTYPES = {"P": ctypes.c_void_p, "q": ctypes.c_longlong, "i": ctypes.c_int,
           "f": ctypes.c_float, "d": ctypes.c_double}


def host_nn():
    """NN_SOURCE's host build (g++), loaded once per process; skips where g++ is missing."""
    if not _HOST_NN:
        if shutil.which("g++") is None:
            pytest.skip("g++ is not on PATH: the conv and pool kernels' host build needs it")
        d = tempfile.mkdtemp(prefix="nl_nn_host")
        src, lib = os.path.join(d, "nn.cpp"), os.path.join(d, "nn.so")
        with open(src, "w") as f:
            f.write(NS.host_source())
        subprocess.run(["g++", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
        _HOST_NN.append(ctypes.CDLL(lib))
    return _HOST_NN[0]


class FakeDevice:
    compute_capability, arch, sm_count = (9, 0), "sm_90", 132

    def __init__(self, kernels):
        self.arena = np.zeros(1 << 26, dtype=np.uint8)
        self.top = 0
        self.free = {}          # block size -> device pointers of freed blocks
        self.kernels = kernels
        self.context = object()
        self.cublas = FakeCublas(self)
        self.launches = []

    def alloc(self, nbytes):
        """An allocation (int() is its device pointer) whose block returns to a free list of its
        size when it is dropped, as pycuda's pooled allocations do."""
        size = -(-max(nbytes, 1) // 256) * 256
        free = self.free.get(size)
        if free:
            return FakeAllocation(self, free.pop(), size)
        at = self.top
        self.top += size
        assert self.top <= self.arena.size, "emulated device memory exhausted"
        return FakeAllocation(self, ARENA_BASE + at, size)

    def view(self, ptr, shape, strides, dtype):
        dtype = np.dtype(dtype)
        return np.ndarray(shape, dtype, buffer=self.arena, offset=ptr - ARENA_BASE,
                          strides=tuple(s * dtype.itemsize for s in strides))

    def function(self, source, name, fmt):
        return FakeFunction(self, name, fmt)

    def synchronize(self):
        pass


class FakeAllocation:
    __slots__ = ("dev", "ptr", "size")

    def __init__(self, dev, ptr, size):
        self.dev, self.ptr, self.size = dev, ptr, size

    def __int__(self):
        return self.ptr

    def __del__(self):
        self.dev.free.setdefault(self.size, []).append(self.ptr)


class FakeFunction:
    def __init__(self, dev, name, fmt):
        self.dev, self.name, self.fmt = dev, name, fmt

    def prepared_call(self, grid, block, *args):
        assert len(args) == len(self.fmt), (self.name, args, self.fmt)
        self.dev.launches.append(self.name)
        if self.name.startswith("nl_rand"):
            ptr, n, key, *extra = args
            ref = G.rng_uniform_reference if self.name == "nl_rand_uniform" else \
                G.rng_normal_reference
            self.dev.view(ptr, (n,), (1,), np.float32)[...] = ref(key, n, *extra)
            return
        if self.name.startswith(("nl_im2col", "nl_col2im", "nl_pool")):
            self.host_call(args)
            return
        run_stage(self.dev, *self.dev.kernels[self.name], args)


    def host_call(self, args):
        """The kernel's host build on the arena (device pointers mapped to its memory)."""
        fn = getattr(host_nn(), self.name)
        fn.argtypes = [_CTYPES[c] for c in self.fmt]
        base, size = self.dev.arena.ctypes.data, self.dev.arena.size
        mapped = []
        for c, a in zip(self.fmt, args):
            if c == "P" and a:
                assert ARENA_BASE <= a < ARENA_BASE + size, (self.name, a)
                a = a - ARENA_BASE + base
            mapped.append(None if c == "P" and not a else a)
        fn(*mapped)


def run_stage(dev, k, stage, meta, ctype, out_dtype, args):
    """A FUSED stage in numpy, on the buffers the launch arguments describe."""
    from neonlike.backends.cpu.render import _dedupe
    from neonlike.ops import OP_INFO, Op
    from neonlike.dtypes import cast_for_store
    args = list(args)
    n = meta[stage.out][0]
    out_ptr, out_strides = args[0], args[1:1 + n]
    dom = tuple(args[1 + n:1 + 2 * n])
    at = 1 + 2 * n

    def shape_of(buf):
        ndim, mask = meta[buf][:2]
        return tuple(1 if mask >> j & 1 else dom[n - ndim + j] for j in range(ndim))

    def dtype_of(buf):
        return meta[buf][2] if len(meta[buf]) > 2 else ctype

    arrays = {}
    for b in k.bufs:
        ndim = meta[b][0]
        ptr, strides = args[at], args[at + 1:at + 1 + ndim]
        at += 1 + ndim
        a = dev.view(ptr, shape_of(b), strides, dtype_of(b)).astype(ctype)
        arrays[b] = a.reshape((1,) * (n - ndim) + a.shape)
    consts = dict(zip(k.consts, args[at:]))
    values = []
    with np.errstate(all="ignore"):
        for ins in _dedupe(stage.program):
            if ins.op == "load":
                v = arrays[ins.arg]
            elif ins.op == "const":
                v = np.asarray(consts[ins.arg], dtype=ctype)
            elif ins.op in ("sum", "max", "min"):
                x = np.broadcast_to(values[ins.args[0]], dom)
                v = getattr(np, ins.op)(x, axis=ins.arg, keepdims=True)
            elif ins.op in ("argmax", "argmin"):
                x = np.broadcast_to(values[ins.args[0]], dom)
                R = tuple(ins.arg)
                kept = [j for j in range(n) if j not in R]
                moved = np.transpose(x, kept + list(R)).reshape([dom[j] for j in kept] + [-1])
                v = getattr(np, ins.op)(moved, axis=-1)
                v = v.reshape([1 if j in R else dom[j] for j in range(n)])
            else:
                v = OP_INFO[Op(ins.op)].ref(dict(ins.arg or ()), *(values[a] for a in ins.args))
            values.append(np.asarray(v, dtype=ctype))
        out_shape = shape_of(stage.out)
        out = dev.view(out_ptr, out_shape, out_strides, out_dtype)
        out[...] = cast_for_store(np.broadcast_to(values[-1], (1,) * 0 + out_shape), out_dtype)


class FakeCublas:
    def __init__(self, dev):
        self.dev = dev

    def _run(self, dtype, g, alpha, beta, batch=None):
        dt = np.dtype(dtype)
        item = dt.itemsize
        el = {f: (getattr(g, f) - ARENA_BASE) // item for f in ("a", "b", "c")}
        assert all((getattr(g, f) - ARENA_BASE) % item == 0 for f in ("a", "b", "c"))
        flat = self.dev.arena.view(dt)
        count = batch.count if batch else 1
        # the window of the arena the three matrices reach (converted to float64, not the arena)
        spans = []
        for f, ld, cols, stride in (("a", g.lda, g.k if g.transa == CB.OP_N else g.m,
                                     batch.stride_a if batch else 0),
                                    ("b", g.ldb, g.n if g.transb == CB.OP_N else g.k,
                                     batch.stride_b if batch else 0),
                                    ("c", g.ldc, g.n, batch.stride_c if batch else 0)):
            ends = [el[f], el[f] + (cols - 1) * ld + ld + stride * (count - 1)]
            spans += [min(ends), max(ends) + 1]
        lo, hi = min(spans), max(spans)
        work = flat[lo:hi].astype(np.float64)
        emulate_gemm(work, g._replace(**{f: v - lo for f, v in el.items()}), alpha, beta, batch)
        idx = np.unique(np.concatenate([
            el["c"] + (batch.stride_c * i if batch else 0) + np.arange(g.m)[:, None]
            + np.arange(g.n)[None, :] * g.ldc for i in range(count)]).ravel())
        flat[idx] = work[idx - lo].astype(dt)

    def gemm(self, dtype, g, alpha, beta, tf32=False):
        self._run(dtype, g, alpha, beta)

    def gemm_strided_batched(self, dtype, b, alpha, beta):
        self._run(dtype, b.gemm, alpha, beta, b)


@pytest.fixture
def gpu(monkeypatch):
    """A NervanaGPU whose device is emulated (see above)."""
    import types
    kernels = {}
    real_render = RC.render

    def recording_render(stage, meta, ctype, out_dtype, key, **kw):
        k = real_render(stage, meta, ctype, out_dtype, key, **kw)
        kernels[k.name] = (k, stage, meta, np.dtype(ctype), np.dtype(out_dtype))
        return k

    dev = FakeDevice(kernels)
    driver = types.ModuleType("pycuda.driver")
    driver.memcpy_htod = lambda ptr, a: dev.view(ptr, a.shape, G.contiguous_strides(a.shape),
                                                 a.dtype).__setitem__(Ellipsis, a)
    driver.memcpy_dtoh = lambda h, ptr: h.__setitem__(
        Ellipsis, dev.view(ptr, h.shape, G.contiguous_strides(h.shape), h.dtype))
    pycuda = types.ModuleType("pycuda")
    pycuda.driver = driver
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    monkeypatch.setattr(G, "_require_cuda", lambda device_id: None)
    monkeypatch.setattr(G._Device, "get", classmethod(lambda cls, i: dev))
    monkeypatch.setattr(RC, "render", recording_render)
    be = G.NervanaGPU(rng_seed=0)
    be.fake = dev
    return be


def test_emulated_elementwise_reductions_and_dtypes(gpu, cpu):
    rng = np.random.default_rng(0)
    xv, yv = rng.uniform(-2, 2, (5, 7)), rng.uniform(0.5, 2, (1, 7))
    for dtype in (np.float32, np.float64, np.float16, np.int16):
        res = []
        for be in (gpu, cpu):
            x, y = be.array(xv, dtype=dtype), be.array(yv, dtype=dtype)
            o = be.empty((5, 7), dtype=dtype)
            s = be.empty((1, 7), dtype=np.float32)
            m = be.empty((5, 1), dtype=np.int32)
            o[:] = be.exp(x - be.max(x, axis=0)) / be.sum(be.exp(x - be.max(x, axis=0)), axis=0)
            s[:] = be.sum(x * y + 2.0, axis=0)
            m[:] = be.argmax(x, axis=1)
            res.append((o.get(), s.get(), m.get()))
        for g, c in zip(*res):
            np.testing.assert_allclose(g.astype(np.float64), c.astype(np.float64), rtol=2e-3,
                                       atol=2e-3)


def test_emulated_views_strides_and_aliasing(gpu, cpu):
    rng = np.random.default_rng(1)
    av = rng.uniform(-1, 1, (6, 6))
    for be in (gpu,):
        a = be.array(av)
        want = av.copy()
        a[1:5:2, ::-1] = a[0:4:2, :] * 3.0       # overlapping views: through a temp
        want[1:5:2, ::-1] = want[0:4:2, :] * 3.0
        np.testing.assert_allclose(a.get(), want, rtol=1e-5, atol=1e-6)
        a[:] = a.T + 1.0                          # the output is the transpose of an input
        want = want.T + 1.0
        np.testing.assert_allclose(a.get(), want, rtol=1e-5, atol=1e-6)
        a[:] = a - be.mean(a, axis=1)             # the same view: direct
        want = want - want.mean(axis=1, keepdims=True)
        np.testing.assert_allclose(a.get(), want, rtol=1e-5, atol=1e-6)
        col = a[:, 2]
        col[:] = 7.0                              # strided fill (upload + copy kernel)
        want[:, 2] = 7.0
        np.testing.assert_allclose(a.get(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a[1:, ::2].get(), want[1:, ::2], rtol=1e-5, atol=1e-6)
        a.T[0:2].set(np.arange(12).reshape(2, 6))
        want.T[0:2] = np.arange(12).reshape(2, 6)
        np.testing.assert_allclose(a.get(), want, rtol=1e-5, atol=1e-6)
        assert a[2:4].reshape(12, 1)._layout() == (12, (1, 1))


def test_emulated_host_stages_and_gemm(gpu, cpu):
    rng = np.random.default_rng(2)
    av, bv, cv = rng.uniform(-1, 1, (4, 6)), rng.uniform(-1, 1, (6, 5)), rng.uniform(-1, 1, (4, 5))
    res = []
    for be in (gpu, cpu):
        a, b, c = be.array(av), be.array(bv), be.array(cv)
        o = be.empty((4, 5))
        o[:] = be.dot(a, b) * 2.0 + c
        p = be.empty((4, 5))
        p[:] = be.dot(a[:, ::1], b.T.T) + 0.0
        q = be.array(cv.copy())
        be.compound_dot(a, b, q, alpha=0.5, beta=2.0)
        r = be.array(cv.T.copy())
        be.compound_dot(b.T, a.T, r, relu=True)
        t = be.empty((4, 3))
        t[:] = be.take(a, [0, 2, 5], axis=1) * 2.0
        u = be.empty((4, 11))
        u[:] = be.concatenate([a, c], axis=1)
        d = be.empty((4, 5))
        d[:] = be.dot(a, b)                       # a GEMM straight into the output
        h = be.array(av.astype(np.float16), dtype=np.float16)
        w = be.empty((4, 5), dtype=np.float16)
        be.compound_dot(h, be.array(bv, dtype=np.float16), w)
        res.append([x.get() for x in (o, p, q, r, t, u, w, d)])
    for g, c in zip(*res):
        np.testing.assert_allclose(g.astype(np.float64), c.astype(np.float64), rtol=3e-3,
                                   atol=3e-3)


def test_emulated_batched_dot(gpu):
    rng = np.random.default_rng(3)
    X, K, C, N = 3, 4, 5, 6
    wv, iv, ev = rng.uniform(-1, 1, (K, C)), rng.uniform(-1, 1, (X, C, N)), \
        rng.uniform(-1, 1, (X, K, N))
    W, I, E = gpu.array(wv), gpu.array(iv), gpu.array(ev)
    O = gpu.empty((X, K, N))
    gpu.batched_dot(W, I, O)
    np.testing.assert_allclose(O.get(), wv @ iv, rtol=1e-5)
    B = gpu.empty((X, C, N))
    gpu.batched_dot(W.T, E, B)
    np.testing.assert_allclose(B.get(), wv.T @ ev, rtol=1e-5)
    U = gpu.array(np.ones((K, C)))
    gpu.batched_dot(E, I.T, U, beta=1.0)
    np.testing.assert_allclose(U.get(), 1.0 + sum(ev[x] @ iv[x].T for x in range(X)), rtol=1e-5)


def test_emulated_rng_is_reproducible(gpu):
    from neonlike.backends.gpu import device as nervanagpu
    a, b = gpu.empty((50, 40)), gpu.empty((50, 40))
    gpu.rand(a)
    gpu.rng_reset()
    gpu.rand(b)
    np.testing.assert_array_equal(a.get(), b.get())
    gpu.rand(b)
    assert not np.array_equal(a.get(), b.get())
    m = gpu.empty((50, 40), dtype=np.uint8)
    gpu.make_binary_mask(m, 0.3)
    assert set(np.unique(m.get())) <= {0, 1} and 0.2 < m.get().mean() < 0.4
    gpu.fill_normal(b, 1.0, 0.5)
    assert abs(b.get().mean() - 1.0) < 0.05
    key = nervanagpu.rng_key(gpu._rng_seed, 0)
    np.testing.assert_array_equal(a.get().ravel(), nervanagpu.rng_uniform_reference(key, 2000))


def test_emulated_failed_assignment_leaves_output_untouched(gpu, monkeypatch):
    x = gpu.array(np.arange(6.0).reshape(2, 3))
    o = gpu.array(np.full((2, 3), 5.0))

    def broken(*a, **k):
        raise RuntimeError("nvcc failed (simulated)")
    monkeypatch.setattr(RC, "render", broken)
    with pytest.raises(RuntimeError, match="simulated"):
        o[:] = gpu.sqrt(x) + 1.0
    np.testing.assert_array_equal(o.get(), np.full((2, 3), 5.0))


def test_emulated_statements_skip_the_walk_once_compiled(gpu):
    """A one-kernel statement runs from the engine's fast runner after its first run (no walk),
    with this call's constants and views; an output that is also an input goes the full way."""
    rng = np.random.default_rng(7)
    sv = rng.uniform(-1, 1, (6, 8))
    s, o = gpu.array(sv), gpu.empty((6, 8))
    o[:] = gpu.tanh(s * 2.0 + 1.0) * s - s
    walks = gpu._engine.stats["walks"]
    for c in (2.0, -3.0, 0.5):
        o[:] = gpu.tanh(s * c + 1.0) * s - s
        np.testing.assert_allclose(o.get(), np.tanh(sv * c + 1.0) * sv - sv, rtol=1e-5, atol=1e-6)
    assert gpu._engine.stats["walks"] == walks
    t = gpu.array(sv.T.copy())
    o[:] = gpu.tanh(t.T * 2.0 + 1.0) * s - s        # a transposed view in the same structure
    np.testing.assert_allclose(o.get(), np.tanh(sv * 2.0 + 1.0) * sv - sv, rtol=1e-5, atol=1e-6)
    s[:] = gpu.tanh(s * 2.0 + 1.0) * s - s          # aliasing: the walk takes it
    assert gpu._engine.stats["walks"] > walks
    np.testing.assert_allclose(s.get(), np.tanh(sv * 2.0 + 1.0) * sv - sv, rtol=1e-5, atol=1e-6)


def test_reduce_layout_fills_the_device_for_column_sums():
    """A reduction that keeps the innermost axis narrows its points per block (32 -> 8) and
    widens its block to 1024 threads while the points would leave the SMs idle; a row reduction
    (innermost axis reduced) and a column sum with points enough keep render's default."""
    assert G.reduce_layout((1,), (100_000, 1024), 132) is None           # rows: a block each
    assert G.reduce_layout((0,), (100_000, 1024), 132) == (8, 1024)      # 1024 points
    assert G.reduce_layout((0,), (64, 8192), 132) == (16, 1024)          # 8192 / 16 = 512
    assert G.reduce_layout((0,), (64, 1 << 16), 132) is None             # 2048 blocks of 32
    assert G.reduce_layout((0,), (), 132) is None


def test_emulated_wide_reduction_block_falls_back_when_registers_do_not_fit(gpu, monkeypatch):
    """A column sum takes the (8, 1024) layout; where the loaded kernel may not run 1024 threads
    (too many registers), the program runs render's default kernel instead, with the same sums."""
    rng = np.random.default_rng(3)
    xv = rng.uniform(-1, 1, (40, 24))
    x, s = gpu.array(xv), gpu.empty((1, 24))
    launched = []
    real = gpu._launch.__func__
    monkeypatch.setattr(type(gpu), "_launch",
                        lambda self, k, *a: (launched.append(k.block), real(self, k, *a))[1])
    s[:] = gpu.sum(x, axis=0)
    np.testing.assert_allclose(s.get(), xv.sum(0, keepdims=True), rtol=1e-5, atol=1e-6)
    assert launched == [1024]
    gpu._programs.clear()
    gpu._engine.runners.clear()
    monkeypatch.setattr(FakeFunction, "max_threads_per_block", 512, raising=False)
    launched.clear()
    s[:] = gpu.sum(x, axis=0)
    np.testing.assert_allclose(s.get(), xv.sum(0, keepdims=True), rtol=1e-5, atol=1e-6)
    assert launched == [RC.BLOCK]


# **************** the examples, run in this process ****************

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def example_error(monkeypatch, script, *args):
    """Run examples/<script> in this process (its gen_backend('gpu') on the emulated device where
    the `gpu` fixture's patches hold); its misclassification error (%)."""
    import contextlib
    import io
    import re
    import runpy
    from neonlike import NervanaObject
    monkeypatch.setattr(sys, "argv", [script, *args])
    monkeypatch.setattr(NervanaObject, "be", NervanaObject.be)   # the example makes its own
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(os.path.join(EXAMPLES, script), run_name="__main__")
    return float(re.search(r"Misclassification error = ([\d.]+)%", out.getvalue()).group(1))
