"""The GPU suite (issue 6, point 6): neonlike's 'gpu' backend against PyTorch and CuPy on the same
device, in one process. Written before any session had a GPU: run it on the lent machine.

    python3 benchmarks/bench_gpu.py [--n 1e8] [--repeats 20]

Rows (float32, random inputs; each result checked against a float64 host reference first):
- copy ceiling: a device-to-device copy of n elements (bytes read + written over time);
- fused elementwise: `x0*x0 + x0*x1` and the 10-op tree at n elements, as GB/s of the bytes they
  must move (inputs read once, output written once) and as % of the copy ceiling (target >= 85%);
- softmax over axis 0 and axis 1 of (n/1024, 1024)... and sums over each axis;
- GEMM 4096^3 through cuBLAS against torch.matmul (target >= 90% of torch's rate);
- launch overhead: one small statement (`o[:] = tanh(s*2+1)*s - s`, 100 elements), host time
  per call including Python.
Timing: CUDA events around each call after warm-up, medians of --repeats; the input sets rotate
so that nothing is timed out of L2.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e8)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    n = int(args.n)
    from neonlike.backends import gen_backend
    try:
        be = gen_backend("gpu", rng_seed=0)
    except (ImportError, RuntimeError, NotImplementedError) as e:
        sys.exit(f"bench_gpu: no GPU backend here: {e}")
    import pycuda.driver as drv
    dev = drv.Context.get_device()
    print(f"device: {dev.name()}, compute capability {dev.compute_capability()}")

    def events_ms(fn, repeats=args.repeats):
        fn()
        be.synchronize()
        times = []
        for _ in range(repeats):
            start, end = drv.Event(), drv.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.time_till(end))
        return statistics.median(times)

    rng = np.random.default_rng(0)
    cols = 1024
    rows = n // cols
    host = [rng.uniform(0.1, 1.0, (rows, cols)).astype(np.float32) for _ in range(4)]
    A, B, C, D = (be.array(h) for h in host)
    out = be.empty((rows, cols))
    table = []

    def row(name, ms, nbytes=None, flops=None, ceiling=None, others=None, target=""):
        gbs = nbytes / ms / 1e6 if nbytes else None
        cells = [name, f"{ms:.3f} ms"]
        cells.append(f"{gbs:.0f} GB/s" + (f" ({100 * gbs / ceiling:.0f}% of copy)" if ceiling else "")
                     if gbs else (f"{flops / ms / 1e9:.1f} TFLOP/s" if flops else "—"))
        for lib, t in (others or {}).items():
            cells.append(f"{lib} {t:.3f} ms ({t / ms:.2f}x)" if t else f"{lib} —")
        cells.append(target)
        table.append(cells)
        return gbs

    # ---- copy ceiling
    copy_ms = events_ms(lambda: out.__setitem__(slice(None), A))
    ceiling = row("copy (ceiling)", copy_ms, 2 * 4 * n)

    # ---- the other libraries, where installed
    torch = cupy = None
    try:
        import torch as _t
        if _t.cuda.is_available():
            torch = _t
    except ImportError:
        pass
    try:
        import cupy as _c
        cupy = _c
    except ImportError:
        pass
    th = [torch.from_numpy(h).cuda() for h in host] if torch else None
    cp = [cupy.asarray(h) for h in host] if cupy else None

    def t_ms(fn):
        if torch is None:
            return None
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.repeats):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        return statistics.median(times)

    def c_ms(fn):
        if cupy is None:
            return None
        fn()
        cupy.cuda.Device().synchronize()
        times = []
        for _ in range(args.repeats):
            s, e = cupy.cuda.Event(), cupy.cuda.Event()
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(cupy.cuda.get_elapsed_time(s, e))
        return statistics.median(times)

    def check(got, want, what):
        err = np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want)
        if not err < 1e-5:
            sys.exit(f"bench_gpu: {what} is wrong: relative error {err:.2e}")

    # ---- fused elementwise
    x0, x1 = A, B
    out[:] = x0 * x0 + x0 * x1
    h0, h1 = host[0].astype(np.float64), host[1].astype(np.float64)
    check(out.get(), h0 * h0 + h0 * h1, "x0*x0 + x0*x1")
    ms = events_ms(lambda: out.__setitem__(slice(None), x0 * x0 + x0 * x1))
    others = {"torch": t_ms(lambda: th[0] * th[0] + th[0] * th[1]) if th else None,
              "cupy": c_ms(lambda: cp[0] * cp[0] + cp[0] * cp[1]) if cp else None}
    row("x0*x0 + x0*x1", ms, 3 * 4 * n, ceiling=ceiling, others=others, target=">= 85% of copy")

    def ten(m, a, b, c, d, absf):
        return ((a * b + c) * d - a / (b + 1)) * m.exp(-c * c) + m.sqrt(absf(d))
    out[:] = ten(be, A, B, C, D, abs)
    hh = [h.astype(np.float64) for h in host]
    check(out.get(), ten(np, *hh, np.abs), "the 10-op tree")
    ms = events_ms(lambda: out.__setitem__(slice(None), ten(be, A, B, C, D, abs)))
    others = {"torch": t_ms(lambda: ten(torch, *th, torch.abs)) if th else None,
              "cupy": c_ms(lambda: ten(cupy, *cp, cupy.abs)) if cp else None}
    row("10-op tree", ms, 5 * 4 * n, ceiling=ceiling, others=others, target=">= 85% of copy")

    # ---- softmax and sums
    for axis in (0, 1):
        shape_r = (1, cols) if axis == 0 else (rows, 1)
        sm = be.empty((rows, cols))

        def softmax(x, ax=axis):
            e = be.exp(x - be.max(x, axis=ax))
            return e / be.sum(e, axis=ax)
        sm[:] = softmax(A)
        e = np.exp(hh[0] - hh[0].max(axis, keepdims=True))
        check(sm.get(), e / e.sum(axis, keepdims=True), f"softmax over axis {axis}")
        ms = events_ms(lambda: sm.__setitem__(slice(None), softmax(A)))
        others = {"torch": t_ms(lambda: torch.softmax(th[0], dim=axis)) if th else None,
                  "cupy": None}
        row(f"softmax over axis {axis}", ms, 2 * 4 * n, ceiling=ceiling, others=others)
        red = be.empty(shape_r)
        red[:] = be.sum(A, axis=axis)
        check(red.get(), hh[0].sum(axis, keepdims=True), f"sum over axis {axis}")
        ms = events_ms(lambda: red.__setitem__(slice(None), be.sum(A, axis=axis)))
        others = {"torch": t_ms(lambda: th[0].sum(dim=axis)) if th else None,
                  "cupy": c_ms(lambda: cp[0].sum(axis=axis)) if cp else None}
        row(f"sum over axis {axis}", ms, 4 * n, ceiling=ceiling, others=others)

    # ---- GEMM
    k = 4096
    ga, gb = (be.array(rng.standard_normal((k, k)).astype(np.float32)) for _ in range(2))
    gc = be.empty((k, k))
    gc[:] = be.dot(ga, gb)
    ref = ga.get()[:64].astype(np.float64) @ gb.get().astype(np.float64)
    check(gc.get()[:64], ref, "GEMM")
    ms = events_ms(lambda: be.compound_dot(ga, gb, gc))
    if torch is not None:
        ta, tb = torch.from_numpy(ga.get()).cuda(), torch.from_numpy(gb.get()).cuda()
        torch.backends.cuda.matmul.allow_tf32 = False
        tt = t_ms(lambda: torch.matmul(ta, tb))
    else:
        tt = None
    row("GEMM 4096^3 (float32, no tf32)", ms, flops=2 * k ** 3, others={"torch": tt, "cupy": None},
        target=">= 90% of torch's rate")

    # ---- launch overhead: host time per small statement, Python included
    s = be.array(rng.uniform(-1, 1, (100, 1)).astype(np.float32))
    o = be.empty((100, 1))
    for _ in range(100):
        o[:] = be.tanh(s * 2.0 + 1.0) * s - s
    be.synchronize()
    t0 = time.perf_counter()
    for _ in range(2000):
        o[:] = be.tanh(s * 2.0 + 1.0) * s - s
    be.synchronize()
    per = (time.perf_counter() - t0) / 2000 * 1e3
    others = {}
    if torch is not None:
        ts_ = torch.from_numpy(s.get()).cuda()
        for _ in range(100):
            torch.tanh(ts_ * 2.0 + 1.0) * ts_ - ts_
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            torch.tanh(ts_ * 2.0 + 1.0) * ts_ - ts_
        torch.cuda.synchronize()
        others["torch"] = (time.perf_counter() - t0) / 2000 * 1e3
    row("statement, 100 elements (host time per call)", per, others=others)

    print(f"\nn = {n:.0e} float32 elements ({rows} x {cols}), medians of {args.repeats} "
          f"(CUDA events; the last row host time)")
    print("| case | neonlike | rate | torch | cupy | target |")
    print("|---|---|---|---|---|---|")
    for cells in table:
        torch_cell = next((c for c in cells[3:-1] if c.startswith("torch")), "—")
        cupy_cell = next((c for c in cells[3:-1] if c.startswith("cupy")), "—")
        print(f"| {cells[0]} | {cells[1]} | {cells[2]} | {torch_cell} | {cupy_cell} | {cells[-1]} |")


if __name__ == "__main__":
    main()
