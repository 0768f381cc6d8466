"""Data-parallel training over MPI (issue 18, point 6), one thread a rank:

    python benchmarks/bench_mpi.py            # --ranks 2 --repeats 21 --epochs 7
    python benchmarks/bench_mpi.py --quick

1. all-reduce bandwidth: the fused gradient buffer's path (GradientBuckets: its Iallreduce and
   Waitall; and with the 1/size averaging statement before it, the path of an optimizer of the
   user's own: neonlike's fold the 1/size into their update) against mpi4py's raw
   `Allreduce(IN_PLACE)` of a numpy array of the same bytes, at several buffer sizes;
2. the MLP epoch's parallel efficiency: mnist_mlp's model (784-100-10 and 784-1024-10) on
   synthetic MNIST-shaped data (16384 samples), batch 128 a rank: the plain script on 1 rank
   (ArrayIterator, the optimizer unwrapped) against DistributedOptimizer on N ranks (the same
   epoch of samples: N ranks take N times fewer steps each), with the share of a step spent in
   the wait for the averaged gradients (`buckets.wait`, timed here by wrapping it).

The driver runs the parts under mpiexec (or alone for 1 rank) and prints the tables; each part
is `bench_mpi.py --part allreduce|mlp` inside a job, rank 0 printing one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ONE_THREAD = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1"}


def part_allreduce(repeats: int) -> dict:
    import numpy as np
    from mpi4py import MPI
    from neonlike.backends import gen_backend
    from neonlike.distributed import GradientBuckets
    comm = MPI.COMM_WORLD
    gen_backend("cpu", batch_size=1)
    be = __import__("neonlike").NervanaObject.be
    rows = []
    for nbytes in (64 << 10, 1 << 20, 4 << 20, 16 << 20):
        n = nbytes // 4
        buckets = GradientBuckets(comm, be, [n], [0], fusion_bytes=nbytes, first_bytes=nbytes)
        raw = np.ones(n, dtype=np.float32)
        host, buf = buckets.hosts[0], buckets.buffers[0]

        def fused_wire() -> None:          # Iallreduce + Waitall of the fused buffer
            MPI.Request.Waitall([comm.Iallreduce(MPI.IN_PLACE, host, op=MPI.SUM)])

        def fused_average() -> None:       # what a step does: scale statement, Iallreduce, wait
            buckets.ready(0)
            buckets.wait()

        def raw_allreduce() -> None:
            comm.Allreduce(MPI.IN_PLACE, raw, op=MPI.SUM)

        timings = {}
        for name, fn in (("raw", raw_allreduce), ("fused", fused_wire), ("avg", fused_average)):
            for _ in range(3):
                fn()
            samples = []
            for _ in range(repeats):
                comm.Barrier()
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
            timings[name] = max(comm.allgather(statistics.median(samples)))
        host[:] = 1.0
        buf[:] = buf * 1.0
        rows.append({"bytes": nbytes, **timings})
    return {"ranks": comm.Get_size(), "rows": rows}


def part_mlp(epochs: int, hidden: int) -> dict:
    import numpy as np
    from mpi4py import MPI
    from neonlike.backends import gen_backend
    from neonlike.callbacks.callbacks import Callbacks
    from neonlike.data import ArrayIterator
    from neonlike.distributed import DistributedOptimizer
    from neonlike.initializers import Gaussian
    from neonlike.layers import Affine, GeneralizedCost
    from neonlike.models import Model
    from neonlike.optimizers import GradientDescentMomentum
    from neonlike.transforms import CrossEntropyBinary, Logistic, Rectlin
    comm = MPI.COMM_WORLD
    gen_backend("cpu", batch_size=128, rng_seed=0)
    rng = np.random.default_rng(0)
    X = rng.random((16384, 784), dtype=np.float32)
    y = rng.integers(0, 10, 16384)
    train = ArrayIterator(X, y, nclass=10)
    init = Gaussian(scale=0.01)
    model = Model([Affine(hidden, init, activation=Rectlin()),
                   Affine(10, init, activation=Logistic(shortcut=True))])
    plain = comm.Get_size() == 1              # the baseline: the script without --mpi
    opt = GradientDescentMomentum(0.1, momentum_coef=0.9)
    if not plain:
        opt = DistributedOptimizer(opt)
    model.fit(train, GeneralizedCost(CrossEntropyBinary()), opt, num_epochs=1,   # warm-up
              callbacks=Callbacks(model, progress_bar=False))
    waited = [0.0]
    if not plain:
        wait = opt.buckets.wait

        def timed_wait() -> None:
            t0 = time.perf_counter()
            wait()
            waited[0] += time.perf_counter() - t0

        opt.buckets.wait = timed_wait
    epoch_times, shares = [], []
    for _ in range(epochs):
        waited[0] = 0.0
        comm.Barrier()
        t0 = time.perf_counter()
        model.fit(train, GeneralizedCost(CrossEntropyBinary()), opt,
                  num_epochs=model.epoch_index + 1, callbacks=Callbacks(model, progress_bar=False))
        dt = time.perf_counter() - t0
        epoch_times.append(max(comm.allgather(dt)))
        shares.append(max(comm.allgather(waited[0] / dt)))
    return {"ranks": comm.Get_size(), "hidden": hidden, "epoch": statistics.median(epoch_times),
            "best": min(epoch_times),
            "comm_share": statistics.median(shares), "steps": train.nbatches if plain else
            16384 // (128 * comm.Get_size()),
            "buckets": 0 if plain else len(opt.buckets.buffers),
            "grad_bytes": 0 if plain else opt.buckets.nbytes}


def job(args: list, ranks: int) -> dict:
    me = [sys.executable, __file__, *args]
    if ranks > 1:
        mpiexec = Path(sys.executable).with_name("mpiexec")
        me = [str(mpiexec) if mpiexec.exists() else "mpiexec", "-n", str(ranks), *me]
    done = subprocess.run(me, capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    if done.returncode:
        sys.exit(f"{' '.join(me)} failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["allreduce", "mlp"])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--epochs", type=int, default=7)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.repeats, a.epochs = 7, 1
    if a.part is not None:
        out = part_allreduce(a.repeats) if a.part == "allreduce" else part_mlp(a.epochs, a.hidden)
        from mpi4py import MPI
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps(out), flush=True)
        return
    n = a.ranks
    ar = job(["--part", "allreduce", "--repeats", str(a.repeats)], n)
    print(f"### all-reduce, {n} ranks x 1 thread (median of {a.repeats}; slowest rank)\n")
    print("| bytes | raw Allreduce | fused Iallreduce+wait | ratio | GB/s raw | GB/s fused "
          "| with averaging statement | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for r in ar["rows"]:
        b = r["bytes"]
        print(f"| {b >> 10} KiB | {r['raw'] * 1e6:.0f} us | {r['fused'] * 1e6:.0f} us | "
              f"{r['fused'] / r['raw']:.2f} | {b / r['raw'] / 1e9:.2f} | {b / r['fused'] / 1e9:.2f} "
              f"| {r['avg'] * 1e6:.0f} us | {r['avg'] / r['raw']:.2f} |")
    print(f"\n### MLP epoch (16384 samples, batch 128 a rank), 1 rank vs {n} ranks x 1 thread "
          f"(median of {a.epochs})\n")
    print("| model | grads | buckets | 1 rank epoch | "
          f"{n} ranks epoch | speed-up | efficiency | best-epoch speed-up | efficiency "
          f"| comm share of a step ({n} ranks) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for hidden in (100, 1024):
        one = job(["--part", "mlp", "--epochs", str(a.epochs), "--hidden", str(hidden)], 1)
        many = job(["--part", "mlp", "--epochs", str(a.epochs), "--hidden", str(hidden)], n)
        speed, best = one["epoch"] / many["epoch"], one["best"] / many["best"]
        print(f"| 784-{hidden}-10 | {many['grad_bytes'] >> 10} KiB | {many['buckets']} | "
              f"{one['epoch'] * 1e3:.0f} ms | {many['epoch'] * 1e3:.0f} ms | {speed:.2f}x | "
              f"{speed / n:.0%} | {best:.2f}x | {best / n:.0%} | {many['comm_share']:.0%} |")


if __name__ == "__main__":
    main()
