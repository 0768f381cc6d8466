"""NeonArgparser (neon.util.argparser): neon's example-script flags; parse_args() also makes the
backend (gen_backend) from them, as neon's did.

    parser = NeonArgparser(__doc__); args = parser.parse_args()
    args.epochs, args.batch_size, args.data_dir, args.callback_args  # -> Callbacks(model, **args.callback_args)

    args = parser.parse_args(gen_be=False)                    # neon's deferred backend:
    be = gen_backend(**extract_valid_args(args, gen_backend))

As neon: args.datatype is the numpy type (-d f16 -> np.float16), args.rounding is neon's
-u/--rounding (False; -u alone: True; -u BITS: the bit count), for the optimizers'
stochastic_round (neon's CPU backend refused it: so does -b cpu, as a usage error).

A backend that is not registered, or that cannot be made here (gpu without pycuda or a driver, mkl
without mkl-service), is a usage error (exit status 2), not a traceback.
"""
from __future__ import annotations

import argparse
import inspect
from typing import Any, Callable

import numpy as np

_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64,
           "float16": np.float16, "float32": np.float32, "float64": np.float64}


def extract_valid_args(args: Any, func: Callable, startidx: int = 0) -> dict:
    """The entries of the namespace `args` that `func` takes as named parameters (neon's helper:
    `gen_backend(**extract_valid_args(args, gen_backend))`). `startidx` skips that many leading
    parameters (1 for a method's `self`); **kwargs catch-alls take nothing."""
    params = list(inspect.signature(func).parameters.values())
    if inspect.ismethod(func):
        startidx = max(0, startidx - 1)      # a bound method's signature has no self already
    named = {p.name for p in params[startidx:]
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in vars(args).items() if k in named}


class NeonArgparser(argparse.ArgumentParser):
    """neon's flags on argparse. `desc` is the help's description (neon's examples pass their
    docstring); the program name is argparse's, the script's file name. Other argparse settings
    go by keyword."""

    def __init__(self, desc: str | None = None, *, default_overrides: dict | None = None,
                 **kwargs: Any) -> None:
        if desc is not None:
            if "description" in kwargs:
                raise TypeError("NeonArgparser: give the description once, as `desc` (neon's first "
                                "argument) or as description=, not both")
            kwargs["description"] = desc
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(**kwargs)
        from ..backends import registry
        g = self.add_argument_group("neon")
        names = sorted(registry())
        g.add_argument("-b", "--backend", default=None, choices=names, metavar="NAME",
                       help=f"one of {', '.join(names)} (default: mkl where mkl-service is "
                            f"installed, else cpu)")
        g.add_argument("-z", "--batch_size", type=int, default=128)
        g.add_argument("-e", "--epochs", type=int, default=10)
        g.add_argument("-r", "--rng_seed", type=int, default=None)
        g.add_argument("-i", "--device_id", type=int, default=0, help="gpu device id")
        g.add_argument("-u", "--rounding", type=int, nargs="?", const=True, default=False,
                       metavar="BITS", help="stochastic rounding of the optimizers' updates "
                                            "[to BITS bits if given]; not on -b cpu")
        g.add_argument("-d", "--datatype", default="f32", choices=sorted(_DTYPES))
        g.add_argument("-w", "--data_dir", default="~/nervana/data",
                       help="where the dataset files are (nothing is downloaded)")
        g.add_argument("-eval", "--eval_freq", type=int, default=1, help="validate every N epochs (0: never)")
        g.add_argument("-s", "--save_path", default=None, help="checkpoint file")
        g.add_argument("--serialize", type=int, default=0, help="checkpoint every N epochs")
        g.add_argument("--history", type=int, default=1, help="checkpoints kept")
        g.add_argument("--model_file", default=None, help="weights to load before training")
        g.add_argument("-o", "--output_file", default=None)
        g.add_argument("--no_progress_bar", action="store_true")
        g.add_argument("-v", "--verbose", action="count", default=0)
        g.add_argument("--mpi", action="store_true",
                       help="data-parallel training over MPI: run under mpiexec -n N (the script "
                            "wraps its optimizer in DistributedOptimizer; args.rank is this "
                            "process's rank, 0 without --mpi)")
        if default_overrides:
            self.set_defaults(**default_overrides)

    def parse_args(self, args: Any = None, namespace: Any = None, gen_be: bool = True) -> Any:  # type: ignore[override]
        ns = super().parse_args(args, namespace)
        ns.callback_args = {"eval_freq": ns.eval_freq, "save_path": ns.save_path,
                            "serialize": ns.serialize, "history": ns.history,
                            "model_file": ns.model_file, "output_file": ns.output_file,
                            "progress_bar": not ns.no_progress_bar}
        ns.progress_bar = not ns.no_progress_bar
        ns.compat_mode = None
        ns.rank = 0
        if ns.mpi:
            try:
                from ..distributed.comm import world
                ns.rank = world().Get_rank()
            except ImportError as e:
                self.error(f"argument --mpi: {e}")
        from ..backends import _default_backend, gen_backend
        name = ns.backend = ns.backend if ns.backend is not None else _default_backend()
        ns.datatype = _DTYPES[ns.datatype]
        if name == "cpu" and ns.rounding:
            self.error("argument -u/--rounding: the cpu backend does not support stochastic "
                       "rounding (as neon's); leave -u out or try -b mkl")
        if gen_be:
            try:
                ns.be = gen_backend(backend=name, rng_seed=ns.rng_seed, datatype=ns.datatype,
                                    batch_size=ns.batch_size, device_id=ns.device_id)
            except (ImportError, RuntimeError) as e:
                cause = " ".join(str(e).split()) or type(e).__name__
                self.error(f"argument -b/--backend: {name!r} is unavailable here: {cause}")
        return ns


__all__ = ["NeonArgparser", "extract_valid_args"]
