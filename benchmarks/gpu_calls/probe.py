"""One GPU call's probe: copy ceilings, elementwise, reduction layouts, launches per statement,
GEMM float32/tf32/float16 against torch, the statement's host cost."""
import statistics, sys, time
import numpy as np
import torch, cupy
from neonlike.backends import gen_backend
from neonlike.backends.gpu import device as G
import pycuda.driver as drv

be = gen_backend("gpu", rng_seed=0)
rng = np.random.default_rng(0)
n, cols = 10**8, 1024
rows = n // cols
host = [rng.uniform(0.1, 1.0, (rows, cols)).astype(np.float32) for _ in range(2)]
A, B = (be.array(h) for h in host)
out = be.empty((rows, cols))
th = [torch.from_numpy(h).cuda() for h in host]
tout = torch.empty_like(th[0])
cp = [cupy.asarray(h) for h in host]
cout = cupy.empty_like(cp[0])


def ev(fn, inner=10, reps=7):
    fn(); drv.Context.synchronize()
    ts = []
    for _ in range(reps):
        s, e = drv.Event(), drv.Event()
        s.record()
        for _ in range(inner):
            fn()
        e.record(); e.synchronize()
        ts.append(s.time_till(e) / inner)
    return statistics.median(ts)


nb = 4 * rows * cols
print("== copy ceilings (GB/s, read+write)")
for name, fn in [("ours out[:]=A", lambda: out.__setitem__(slice(None), A)),
                 ("memcpy_dtod", lambda: drv.memcpy_dtod(out.ptr, A.ptr, nb)),
                 ("torch copy_", lambda: tout.copy_(th[0])),
                 ("cupy copyto", lambda: cupy.copyto(cout, cp[0]))]:
    ms = ev(fn)
    print(f"{name:20s} {ms:.4f} ms {2 * nb / ms / 1e6:.0f}")
print("== elementwise x0*x0+x0*x1 (3 x nbytes)")
for name, fn in [("ours", lambda: out.__setitem__(slice(None), A * A + A * B)),
                 ("torch out=", lambda: torch.add(th[0] * th[0], th[0] * th[1], out=tout)),
                 ("cupy", lambda: cp[0] * cp[0] + cp[0] * cp[1])]:
    ms = ev(fn)
    print(f"{name:20s} {ms:.4f} ms {3 * nb / ms / 1e6:.0f}")

launches = []
real_launch = be._launch.__func__


def counting(self, kernel, *a):
    launches.append(kernel.name)
    return real_launch(self, kernel, *a)


G.NervanaGPU._launch = counting
print("== reductions: layout -> ms, GB/s of one read, regs")
hh = host[0].astype(np.float64)
for axis in (0, 1):
    red = be.empty((1, cols) if axis == 0 else (rows, 1))
    sm = be.empty((rows, cols))
    e = np.exp(hh - hh.max(axis, keepdims=True)); want = e / e.sum(axis, keepdims=True)
    layouts = [None, (32, 256), (16, 256), (8, 256), (4, 256), (32, 512), (16, 512), (8, 512),
               (4, 512), (32, 1024), (16, 1024), (8, 1024), (4, 1024)] if axis == 0 else \
        [None, (1, 512), (1, 1024), (2, 256)]
    for lay in layouts:
        G.LAYOUT_OVERRIDE[0] = lay
        be._programs.clear(); be._engine.runners.clear()
        try:
            red[:] = be.sum(A, axis=axis)
            err = abs(red.get().astype(np.float64) - hh.sum(axis, keepdims=True)).max() / hh.sum(axis).max()
            ms = ev(lambda: red.__setitem__(slice(None), be.sum(A, axis=axis)), inner=5)
            launches.clear()
            sm[:] = be.exp(A - be.max(A, axis=axis)) / be.sum(be.exp(A - be.max(A, axis=axis)), axis=axis)
            nl = len(launches)
            serr = abs(sm.get() - want).max()
            ms2 = ev(lambda: sm.__setitem__(slice(None), be.exp(A - be.max(A, axis=axis)) / be.sum(be.exp(A - be.max(A, axis=axis)), axis=axis)), inner=3)
            regs = [be._device.functions.get(k)[1].num_regs for k in launches if be._device.functions.get(k)]
            print(f"axis {axis} layout {lay}: sum {ms:.4f} ms {nb / ms / 1e6:.0f} GB/s err {err:.1e} | "
                  f"softmax {ms2:.4f} ms {2 * nb / ms2 / 1e6:.0f} GB/s (r+w) launches {nl} err {serr:.1e} regs {regs}")
        except Exception as ex:
            print(f"axis {axis} layout {lay}: {type(ex).__name__}: {str(ex)[:200]}")
    G.LAYOUT_OVERRIDE[0] = None
    be._programs.clear(); be._engine.runners.clear()
    for name, fn in [("torch sum", lambda: th[0].sum(dim=axis)), ("cupy sum", lambda: cp[0].sum(axis=axis)),
                     ("torch softmax", lambda: torch.softmax(th[0], dim=axis))]:
        ms = ev(fn, inner=5)
        print(f"   {name:16s} {ms:.4f} ms")
    red[:] = be.sum(A, axis=axis)
    ms = ev(lambda: red.__setitem__(slice(None), be.sum(A, axis=axis)), inner=5)
    print(f"   default rule now: sum {ms:.4f} ms {nb / ms / 1e6:.0f} GB/s")

print("== GEMM 4096^3")
k = 4096
ga, gb = (be.array(rng.standard_normal((k, k)).astype(np.float32)) for _ in range(2))
gc = be.empty((k, k))
ta, tb = torch.from_numpy(ga.get()).cuda(), torch.from_numpy(gb.get()).cuda()
ref = ga.get()[:64].astype(np.float64) @ gb.get().astype(np.float64)
for mode in ("fp32", "tf32", "fp16"):
    if mode == "fp16":
        x, y, z = (be.empty((k, k), dtype=np.float16) for _ in range(3))
        x[:] = ga; y[:] = gb
        tx, ty = ta.half(), tb.half()
        torch.backends.cuda.matmul.allow_tf32 = False
    else:
        x, y, z = ga, gb, gc
        tx, ty = ta, tb
        be.allow_tf32 = mode == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    be.compound_dot(x, y, z)
    err = np.linalg.norm(z.get()[:64].astype(np.float64) - ref) / np.linalg.norm(ref)
    ms = ev(lambda: be.compound_dot(x, y, z), inner=5)
    tms = ev(lambda: torch.matmul(tx, ty), inner=5)
    print(f"{mode}: ours {ms:.3f} ms {2 * k**3 / ms / 1e9:.1f} TFLOP/s err {err:.1e} | torch {tms:.3f} ms -> ours/torch rate {tms / ms:.2f}")
be.allow_tf32 = False
G.NervanaGPU._launch = real_launch

print("== statement host cost (100 elements)")
s = be.array(rng.uniform(-1, 1, (100, 1)).astype(np.float32)); o = be.empty((100, 1))
for _ in range(200):
    o[:] = be.tanh(s * 2.0 + 1.0) * s - s
be.synchronize()
for _ in range(3):
    t = time.perf_counter()
    for _ in range(5000):
        o[:] = be.tanh(s * 2.0 + 1.0) * s - s
    be.synchronize()
    print(f"ours {(time.perf_counter() - t) / 5000 * 1e6:.1f} us (walks {be._engine.stats['walks']})")
ts_ = torch.from_numpy(s.get()).cuda()
for _ in range(3):
    t = time.perf_counter()
    for _ in range(5000):
        torch.tanh(ts_ * 2.0 + 1.0) * ts_ - ts_
    torch.cuda.synchronize()
    print(f"torch {(time.perf_counter() - t) / 5000 * 1e6:.1f} us")
fn = be._device.function
import cProfile, pstats
pr = cProfile.Profile(); pr.enable()
for _ in range(3000):
    o[:] = be.tanh(s * 2.0 + 1.0) * s - s
pr.disable(); pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(12)
