"""Convolution and pooling on CIFAR-shaped data: neonlike's direct and im2col+GEMM paths against
PyTorch (torch.nn.functional.conv2d, its backward, max_pool2d), float32, in one process.

Run: python benchmarks/bench_nn_ops.py [--threads 2] [--batch 128] [--repeats 7] [--quick]

For each layer shape of a small convnet (conv 5x5 or 3x3 with 16 and 32 channels, 2x2 max pool)
it times fprop, bprop (gradient w.r.t. the input) and update (gradient w.r.t. the filters) with
each neonlike path forced, the path neonlike picks by timing ('auto'), and torch on the same
data in NCHW: conv2d for fprop, aten.convolution_backward with one output mask for bprop and for
update (what autograd calls), max_pool2d_with_indices and its backward for pooling. Results are
checked against torch before timing. Cells are median milliseconds; the ratio columns are
neonlike's time over torch's (below 1: neonlike is faster).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

CONVS = [  # name, C, H=W, K, R=S, pad
    ("conv1 5x5 3->16 32x32", 3, 32, 16, 5, 2),
    ("conv2 5x5 16->32 16x16", 16, 16, 32, 5, 2),
    ("conv1 3x3 3->16 32x32", 3, 32, 16, 3, 1),
    ("conv2 3x3 16->32 16x16", 16, 16, 32, 3, 1),
]
POOLS = [("pool 2x2 16x32x32", 16, 32), ("pool 2x2 32x16x16", 32, 16)]


def timed(fn, repeats: int) -> float:
    """Median seconds per call over `repeats` batches of calls lasting >= 20 ms each."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    per = max(1, int(0.02 / max(once, 1e-6)))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        samples.append((time.perf_counter() - t0) / per)
        time.sleep(0.005)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="5x5 convs only, 3 repeats")
    args = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    import numpy as np
    from neonlike.backends import gen_backend
    from neonlike.backends.cpu import gemm as gemm
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
        print("torch is not installed: neonlike only", file=sys.stderr)
    be = gen_backend("cpu", rng_seed=0)
    rng = np.random.default_rng(0)
    N = args.batch
    convs = CONVS[:2] if args.quick else CONVS
    repeats = 3 if args.quick else args.repeats
    print(f"float32, batch {N}, {args.threads} threads, gemm: {gemm.backend_name()}, "
          f"medians of {repeats}; ms per call\n")
    print("| layer | op | direct | im2col | auto picks | torch | best neonlike / torch |")
    print("|---|---|---|---|---|---|---|")
    for name, C, X, K, RS, pad in convs:
        layer = be.conv_layer(np.float32, N, C, K, H=X, W=X, R=RS, S=RS, pad_h=pad, pad_w=pad)
        hI = rng.standard_normal(layer.dimI).astype(np.float32)
        hF = (0.1 * rng.standard_normal(layer.dimF)).astype(np.float32)
        hE = rng.standard_normal(layer.dimO).astype(np.float32)
        I, F, E = be.array(hI.reshape(layer.dimI2)), be.array(hF.reshape(layer.dimF2)), \
            be.array(hE.reshape(layer.dimO2))
        O, G, U = be.empty(layer.dimO2), be.empty(layer.dimI2), be.empty(layer.dimF2)
        ops = {"fprop": (lambda: be.fprop_conv(layer, I, F, O), O),
               "bprop": (lambda: be.bprop_conv(layer, F, E, G), G),
               "update": (lambda: be.update_conv(layer, I, E, U), U)}
        peers = {}
        if torch is not None:
            tI = torch.from_numpy(np.ascontiguousarray(hI[:, 0].transpose(3, 0, 1, 2)))
            tF = torch.from_numpy(np.ascontiguousarray(hF[:, 0].transpose(3, 0, 1, 2)))
            tE = torch.from_numpy(np.ascontiguousarray(hE[:, 0].transpose(3, 0, 1, 2)))

            def backward(mask):
                return torch.ops.aten.convolution_backward(
                    tE, tI, tF, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, mask)
            with torch.no_grad():
                peers = {"fprop": (lambda: torch.nn.functional.conv2d(tI, tF, padding=pad),
                                   lambda r: r.numpy().transpose(1, 2, 3, 0)),
                         "bprop": (lambda: backward([True, False, False])[0],
                                   lambda r: r.numpy().transpose(1, 2, 3, 0)),
                         "update": (lambda: backward([False, True, False])[1],
                                    lambda r: r.numpy().transpose(1, 2, 3, 0))}
        for op, (fn, out) in ops.items():
            cells = {}
            for algo in ("direct", "im2col", None):
                layer.set_algo(algo)
                if algo is None:
                    be.clear_conv_choices()
                fn()
                if op in peers:
                    want = peers[op][1](peers[op][0]())
                    got = out.get().reshape(want.shape)
                    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())
                cells[algo] = timed(fn, repeats)
            picked = be.conv_choices[(op, layer.key)]
            tt = timed(peers[op][0], repeats) if op in peers else None
            best = min(cells["direct"], cells["im2col"])
            print(f"| {name} | {op} | {cells['direct'] * 1e3:.2f} | {cells['im2col'] * 1e3:.2f} | "
                  f"{picked} ({cells[None] * 1e3:.2f}) | "
                  + (f"{tt * 1e3:.2f} | {best / tt:.2f} |" if tt else "- | - |"))
    for name, C, X in POOLS:
        layer = be.pool_layer(np.float32, "max", N, C, H=X, W=X, R=2, S=2)
        hI = rng.standard_normal(layer.dimI).astype(np.float32)
        hE = rng.standard_normal(layer.dimO).astype(np.float32)
        I, E = be.array(hI.reshape(layer.dimI2)), be.array(hE.reshape(layer.dimO2))
        O, G = be.empty(layer.dimO2), be.empty(layer.dimI2)
        A = be.empty(layer.dimO2, dtype=np.int8)
        fns = {"fprop": lambda: be.fprop_pool(layer, I, O, A),
               "bprop": lambda: be.bprop_pool(layer, E, G, A)}
        peers = {}
        if torch is not None:
            tI = torch.from_numpy(np.ascontiguousarray(hI[:, 0].transpose(3, 0, 1, 2)))
            tE = torch.from_numpy(np.ascontiguousarray(hE[:, 0].transpose(3, 0, 1, 2)))
            tO, tA = torch.ops.aten.max_pool2d_with_indices(tI, [2, 2], [2, 2])
            peers = {"fprop": lambda: torch.ops.aten.max_pool2d_with_indices(tI, [2, 2], [2, 2]),
                     "bprop": lambda: torch.ops.aten.max_pool2d_with_indices_backward(
                         tE, tI, [2, 2], [2, 2], [0, 0], [1, 1], False, tA)}
            be.fprop_pool(layer, I, O, A)
            np.testing.assert_array_equal(O.get().reshape(layer.dimO)[:, 0],
                                          tO.numpy().transpose(1, 2, 3, 0))
        for op, fn in fns.items():
            ours = timed(fn, repeats)
            tt = timed(peers[op], repeats) if op in peers else None
            print(f"| {name} | {op} max | {ours * 1e3:.2f} | - | direct | "
                  + (f"{tt * 1e3:.2f} | {ours / tt:.2f} |" if tt else "- | - |"))


if __name__ == "__main__":
    main()
