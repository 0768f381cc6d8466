"""Forward plus gradient of the 10-op tree at 1e6 float32 elements: neonlike's Autodiff (gradient
op-trees run through the fused kernels) against PyTorch autograd on the CPU, in one process.

Run: python benchmarks/bench_autodiff.py [--threads 2] [--n 1000000] [--repeats 11]

Each iteration does the whole step a training loop does: build the forward tree and run it, then
neonlike: `Autodiff(f, be).back_prop_grad([a, b, c, d], buffers)` (gradient trees built and run);
torch: the forward with requires_grad tensors and `f.backward(ones)`. Medians of interleaved
batches; results are checked against each other first. A second table gives the Python cost of
building the gradient trees, with the memoised gradient plan and without.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--repeats", type=int, default=11)
    args = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    import numpy as np
    from neonlike.backends import Autodiff, gen_backend
    be = gen_backend("cpu", rng_seed=0)
    n = int(args.n)
    shape = (1000, n // 1000)
    rng = np.random.default_rng(0)
    host = [rng.uniform(0.1, 1.0, shape).astype(np.float32) for _ in range(4)]
    A, B, C, D = (be.array(h) for h in host)
    out = be.empty(shape)
    grads = [be.empty(shape) for _ in range(4)]

    def tree(m, a, b, c, d):
        return ((a * b + c) * d - a / (b + 1)) * m.exp(-c * c) + m.sqrt(abs(d))

    def neon() -> None:
        f = tree(be, A, B, C, D)
        out[:] = f
        Autodiff(f, be).back_prop_grad([A, B, C, D], grads)

    impls = {"neonlike": neon}
    try:
        import torch
        torch.set_num_threads(args.threads)
        ts = [torch.from_numpy(h.copy()).requires_grad_() for h in host]
        ones = torch.ones(shape)

        def torch_step() -> None:
            for t in ts:
                t.grad = None
            f = tree(torch, *ts)
            f.backward(ones)
        impls["torch"] = torch_step
        neon()
        torch_step()
        for g, t in zip(grads, ts):
            np.testing.assert_allclose(g.get(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    except ImportError:
        print("torch is not installed: neonlike only", file=sys.stderr)
    samples = {k: [] for k in impls}
    for fn in impls.values():
        for _ in range(3):
            fn()
    for r in range(args.repeats):
        for name, fn in impls.items():
            t0 = time.perf_counter()
            for _ in range(5):
                fn()
            samples[name].append((time.perf_counter() - t0) / 5)
            time.sleep(0.01)
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"forward + gradient of the 10-op tree, {shape} float32, {args.threads} threads, "
          f"medians of {args.repeats}")
    print("| implementation | time | torch / neonlike |")
    print("|---|---|---|")
    for k, v in med.items():
        ratio = f"{med['torch'] / v:.2f}x" if "torch" in med else "—"
        print(f"| {k} | {v * 1e3:.2f} ms | {ratio} |")
    building(be, tree, [A, B, C, D], args.repeats)


def building(be, tree, leaves: list, repeats: int) -> None:
    """The Python cost of the gradient trees alone (nothing runs): a tree of a structure seen
    before replays its memoised gradient plan; with the plans cleared every rule runs again."""
    from neonlike.backends import Autodiff, autodiff

    def build(clear: bool) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(200):
                if clear:
                    autodiff.clear_plans()
                Autodiff(tree(be, *leaves), be).get_grad_op_tree(leaves)
            times.append((time.perf_counter() - t0) / 200)
        return statistics.median(times)
    forward = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(200):
            tree(be, *leaves)
        forward.append((time.perf_counter() - t0) / 200)
    fwd, hit, miss = statistics.median(forward), build(False), build(True)
    print("\nbuilding the 10-op tree and its 4 gradient trees (no execution), medians")
    print("| step | time |")
    print("|---|---|")
    print(f"| forward tree alone | {fwd * 1e6:.1f} us |")
    print(f"| forward + Autodiff + get_grad_op_tree, plan memoised | {hit * 1e6:.1f} us |")
    print(f"| forward + Autodiff + get_grad_op_tree, plans cleared each time | {miss * 1e6:.1f} us |")


if __name__ == "__main__":
    main()
