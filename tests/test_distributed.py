"""neonlike.distributed under `mpiexec -n 2` (one thread a rank): the ranks' parameters stay
bit-identical, 2 ranks x batch B train as 1 rank x batch 2B, a failing rank aborts the job.

Each job runs tests/mpi_worker.py; the jobs skip where mpi4py or mpiexec is missing
(`pip install -e ".[mpi]"` brings both).
"""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

WORKER = str(Path(__file__).with_name("mpi_worker.py"))
ONE_THREAD = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1"}


def _mpiexec() -> str | None:
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def _why_not() -> str | None:
    try:
        importlib.import_module("mpi4py")   # the package only: MPI itself starts in the jobs
    except ImportError:
        return "mpi4py is not installed (pip install -e '.[mpi]' brings mpi4py and mpich)"
    if _mpiexec() is None:
        return "no mpiexec beside python or on PATH (pip install mpich brings one)"
    return None


needs_mpi = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


def run(args: list, ranks: int | None = 2, timeout: float = 120) -> subprocess.CompletedProcess:
    """The worker under `mpiexec -n ranks` (None: a plain single process); fails on a time-out."""
    cmd = [sys.executable, WORKER, *args]
    if ranks is not None:
        cmd = [_mpiexec(), "-n", str(ranks), *cmd]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **ONE_THREAD})
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} hung for {timeout} s:\n{e.stdout}\n{e.stderr}")


def check(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"rc {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@needs_mpi
def test_every_rank_holds_bit_identical_parameters(tmp_path):
    out = check(run(["identical", str(tmp_path)]))
    for name in ("GradientDescentMomentum", "Adam", "OwnSGD"):
        assert f"identical {name}: 3 buckets" in out, out
    assert out.count("identical GradientDescentMomentum: 3 buckets") == 2, out


@needs_mpi
def test_two_ranks_of_batch_b_train_as_one_rank_of_batch_2b(tmp_path):
    check(run(["mlp", "16", str(tmp_path)]))
    check(run(["mlp", "32", str(tmp_path)], ranks=None))
    two, one = np.load(tmp_path / "mlp_2x16.npz"), np.load(tmp_path / "mlp_1x32.npz")
    assert len(two.files) == len(one.files) == 4
    for k in two.files:
        np.testing.assert_allclose(two[k], one[k], rtol=1e-4, atol=2e-6)
    assert max(np.abs(two[k] - one[k]).max() for k in two.files) > 0   # not the same run twice


@needs_mpi
def test_singa_dist_opt_keeps_ranks_identical(tmp_path):
    assert "singa identical: " in check(run(["singa", str(tmp_path)]))


@needs_mpi
def test_mnist_mlp_with_mpi_prints_and_saves_on_rank_0_only(tmp_path):
    example = str(Path(__file__).parents[1] / "examples" / "mnist_mlp.py")
    ckpt = tmp_path / "ckpt.pkl"
    done = subprocess.run([_mpiexec(), "-n", "2", sys.executable, example, "--mpi", "-e", "2",
                           "-z", "32", "-b", "cpu", "-w", str(tmp_path), "-s", str(ckpt),
                           "--serialize", "1"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **ONE_THREAD})
    out = check(done)
    assert out.count("Epoch 0 ") == out.count("Epoch 1 ") == 1, out
    assert out.count("Misclassification error") == 1, out
    assert "22/22 batches" in out, out              # 1438 digits // (2 ranks x 32)
    assert ckpt.exists()


@needs_mpi
def test_a_failing_rank_aborts_every_rank_within_seconds(tmp_path):
    t0 = time.perf_counter()
    done = run(["raise", str(tmp_path)], timeout=60)
    elapsed = time.perf_counter() - t0
    assert done.returncode != 0
    assert "rank 1 of 2 raised ValueError: rank 1 fails on purpose; aborting every rank" in \
        done.stderr, done.stderr
    assert elapsed < 30, f"the job took {elapsed:.1f} s to end"


def test_without_mpi4py_the_error_names_the_package():
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import neonlike.distributed as d\n"
            "from neonlike.optimizers import GradientDescentMomentum\n"
            "try:\n    d.DistributedOptimizer(GradientDescentMomentum(0.1))\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout
    assert "needs mpi4py" in out and "neonlike[mpi]" in out, out
