"""Running benchmark families into one report: the command line, the table, the notes.

`run(families, script, description)` parses the shared options (--quick, --sizes, --cases,
--repeats, --threads, --backend, --markdown, --json), times the selected cases of the families
(each family module has a CASES table and may have finish(ctx)), and prints the markdown table
with its header and notes. bench_cpu.py runs every family; each family file runs itself.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from _harness import (DEFAULT_THREADS, REPO, Case, Config, Peers, Suite, Target, copy_bench,
                      fmt_n, fmt_time, measure, thread_env)

# =====================================================================================================
# Report
# =====================================================================================================
PEERS = ("numpy", "numpy out=", "numexpr", "numba", "torch", "MKL direct")
EXTRA_PEERS = ("OpenBLAS tasks",)    # a column only where some row has the peer (bench_gemm)


@dataclass
class Row:
    case: str
    label: str
    n: str
    neon: Any                         # seconds or a string
    rate: str                         # GB/s (% of copy) or GFLOP/s
    peers: dict[str, Any]
    targets: list[Target]
    met: str


def evaluate_targets(targets: list[Target], neon: Any, gbps: float | None, ceiling: float | None,
                     peers: dict[str, Any], wrong: bool) -> str:
    if not targets:
        return "—"
    if wrong:
        return "WRONG result"
    if not isinstance(neon, float):
        return "no (neonlike failed)"
    misses, unknown = [], []
    for t in targets:
        if t.kind == "gbps":
            ok = gbps is not None and gbps >= t.value
            what = f"{gbps:.1f} GB/s" if gbps is not None else "GB/s"
        elif t.kind == "ceiling":
            if gbps is None or not ceiling:
                unknown.append("ceiling")
                continue
            ok = gbps >= t.value * ceiling
            what = f"{gbps / ceiling:.0%} of copy"
        elif t.kind == "max":
            ok, what = neon <= t.value, fmt_time(neon)
        else:
            timed = {p: peers[p] for p in t.peer.split(",") if isinstance(peers.get(p), float)}
            if not timed:
                unknown.append(t.peer)
                continue
            peer = min(timed, key=timed.__getitem__)
            p = timed[peer]
            ok, what = p / neon >= t.value * (1 - 1e-9), f"{p / neon:.2f}x {peer}"
        if not ok:
            misses.append(what)
    text = "yes" if not misses else "NO: " + ", ".join(misses)
    if unknown:
        text += f" ({', '.join(unknown)} n/a)"
    return text


def cell(v: Any, neon: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if isinstance(neon, float) and neon > 0:
        r = v / neon
        return f"{fmt_time(v)} ({r:.0f}x)" if r >= 10 else f"{fmt_time(v)} ({r:.2g}x)"
    return fmt_time(v)


def to_markdown(rows: list[Row]) -> str:
    peers = PEERS + tuple(p for p in EXTRA_PEERS if any(p in r.peers for r in rows))
    head = ["case", "size", "neonlike", "GB/s (% of copy)", *peers, "target", "met?"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        neon = fmt_time(r.neon) if isinstance(r.neon, float) else (r.neon or "—")
        vals = [r.label, r.n, neon, r.rate, *(cell(r.peers.get(p), r.neon) for p in peers),
                "; ".join(t.text() for t in r.targets) or "—", r.met]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def machine_line(threads: int, peers: Peers, be: Any) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        rev = ""
    try:
        from neonlike.backends.cpu import gemm as G
        gemm_path = f", GEMM path '{G.backend_name()}'"
    except Exception:  # noqa: BLE001
        gemm_path = ""
    vers = ", ".join(f"{k} {v}" for k, v in peers.versions.items())
    return (f"{platform.machine()}, {os.cpu_count()} CPUs ({cpu}), {threads} threads, float32, "
            f"{datetime.date.today().isoformat()}; python {platform.python_version()}, {vers}; "
            f"neonlike backend '{getattr(be, 'backend_name', '?')}'{gemm_path}"
            + (f" at {rev}" if rev else ""))


# =====================================================================================================
# Running a set of families
# =====================================================================================================
FULL_SIZES = (100, 10_000, 1_000_000, 10_000_000)
QUICK_SIZES = (1_000_000, 10_000_000)


@dataclass
class Context:
    """What a family's finish(ctx) sees: the run so far, to add rows, notes and raw results to."""
    args: argparse.Namespace
    suite: Suite
    rows: list[Row]
    notes: list[str]
    raw: dict[str, Any]
    samples: dict[str, dict[str, list[float]]]   # "case@n" -> {impl: per-round seconds}
    log: Callable[[str], None]


def cases_of(families: list[ModuleType]) -> dict[str, Case]:
    """The families' cases, after 'copy' (the ceiling) where any of them moves bytes."""
    cases: dict[str, Case] = {}
    for fam in families:
        cases.update(fam.CASES)
    if any(c.sized or c.ceiling_n for c in cases.values()):
        cases = {"copy": Case(copy_bench, sized=True), **cases}
    return cases


def parse_args(argv: list[str] | None, cases: dict[str, Case], description: str,
               order: tuple[str, ...]) -> argparse.Namespace:
    names = [c for c in order if c in cases] + [c for c in cases if c not in order]
    ap = argparse.ArgumentParser(
        description=description,
        epilog="cases: " + ", ".join(names) + ". 'copy' (the ceiling) runs whenever a "
               "bandwidth case does. Peer cells read 'time (peer time / neonlike time)': above "
               "1x neonlike is faster.")
    ap.add_argument("--quick", action="store_true",
                    help=f"sizes {','.join(fmt_n(s) for s in QUICK_SIZES)} and 5 repeats "
                         "(under 2 minutes)")
    ap.add_argument("--sizes", help="comma-separated element counts, e.g. 1e2,1e4,1e6,1e7")
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--repeats", type=int, help="timed rounds per case (default 11, quick 5)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the table (with notes) here")
    ap.add_argument("--json", metavar="FILE", help="also write the raw medians here")
    ap.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                    help="threads for every library (default 2: the targets are for 2 cores)")
    ap.add_argument("--backend", default="cpu", help="gen_backend name (default 'cpu')")
    args = ap.parse_args(argv)
    args.case_list = names if not args.cases else [c.strip() for c in args.cases.split(",")]
    bad = [c for c in args.case_list if c not in cases]
    if bad:
        ap.error(f"unknown case(s) {bad}; choose from {', '.join(names)}")
    if args.sizes:
        args.size_list = sorted({int(float(s)) for s in args.sizes.split(",") if s.strip()})
        if any(s < 1 for s in args.size_list):
            ap.error("sizes must be positive")
    else:
        args.size_list = list(QUICK_SIZES if args.quick else FULL_SIZES)
    return args


def run(families: list[ModuleType], script: str, description: str,
        argv: list[str] | None = None, order: tuple[str, ...] = ()) -> int:
    """Time the selected cases of `families` (table order: `order`, then each family's CASES),
    print the table and notes; the command line is parse_args's."""
    cases = cases_of(families)
    args = parse_args(argv, cases, description, order)
    started = time.perf_counter()
    load_start = os.getloadavg() if hasattr(os, "getloadavg") else (0.0,)
    os.environ.update(thread_env(args.threads))  # for subprocesses (and if imported, not run)
    cfg = Config(repeats=args.repeats or (5 if args.quick else 11),
                 batch_s=0.01 if args.quick else 0.04, warm_s=0.02 if args.quick else 0.1,
                 warm_calls=1 if args.quick else 3)
    from neonlike.backends import gen_backend
    be = gen_backend(args.backend, rng_seed=0)
    peers = Peers(args.threads)
    suite = Suite(be, peers)
    notes = list(peers.notes)

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {msg}", file=sys.stderr, flush=True)

    # (case, size) pairs in table order; copy at each size any bandwidth case uses
    plan: list[tuple[str, int]] = []
    sized = [c for c in args.case_list if cases[c].sized and c != "copy"]
    copy_sizes = set(args.size_list) if (sized or "copy" in args.case_list) else set()
    copy_sizes |= {cases[c].ceiling_n for c in args.case_list if cases[c].ceiling_n}
    plan += [("copy", n) for n in sorted(copy_sizes)]
    for c in args.case_list:
        if c == "copy" or cases[c].build is None:
            continue
        if cases[c].sized:
            plan += [(c, n) for n in args.size_list]
        else:
            plan.append((c, 0))

    ctx = Context(args, suite, [], notes, {}, {}, log)
    ceiling: dict[int, float] = {}
    for case, n in plan:
        log(f"{case} {fmt_n(n) if n else ''}")
        try:
            b = cases[case].build(suite, n)
        except Exception as e:  # noqa: BLE001 - a case that cannot be set up is a row saying so
            traceback.print_exc(file=sys.stderr)
            ctx.rows.append(Row(case, case, fmt_n(n) if n else "",
                                f"setup error: {type(e).__name__}", "—", {}, [], "no"))
            continue
        samples: dict[str, list[float]] = {}
        res = measure(b, cfg, samples)
        wrong = res.pop("wrong", None) == "neonlike"
        ctx.raw[f"{case}@{b.n}"] = res
        ctx.samples[f"{case}@{b.n}"] = samples
        neon = res.get("neonlike")
        gbps = rate = None
        if b.ceiling_row:
            cands = [res[k] for k in ("numpy out=", "numba") if isinstance(res.get(k), float)]
            if cands:
                ceiling[b.n] = b.nbytes / min(cands) / 1e9
                rate = f"{ceiling[b.n]:.1f} (ceiling)"
            neon = "—"
        elif isinstance(neon, float) and b.nbytes:
            gbps = b.nbytes / neon / 1e9
            ceil_n = ceiling.get(b.n)
            rate = f"{gbps:.1f}" + (f" ({gbps / ceil_n:.0%})" if ceil_n else "")
        elif isinstance(neon, float) and b.flops:
            rate = f"{b.flops / neon / 1e9:.0f} GFLOP/s"
        met = evaluate_targets(b.targets, neon, gbps, ceiling.get(b.n), res, wrong)
        if wrong:
            neon = f"WRONG {fmt_time(neon)}" if isinstance(neon, float) else neon
        size = b.size or (fmt_n(b.n) if cases[case].sized else f"{b.n:,}")
        ctx.rows.append(Row(case, b.label, size, neon, rate or "—",
                            {k: v for k, v in res.items() if k != "neonlike"}, b.targets, met))
        del b
        gc.collect()

    for fam in families:
        if hasattr(fam, "finish"):
            fam.finish(ctx)

    elapsed = time.perf_counter() - started
    cmdline = list(argv if argv is not None else sys.argv[1:])
    header = [f"Machine: {machine_line(args.threads, peers, be)}.",
              f"Run: `{' '.join([f'python benchmarks/{script}', *cmdline])}`, {elapsed:.0f} s; "
              f"medians of {cfg.repeats} interleaved rounds.",
              "Peer cells: median time (peer time / neonlike time; above 1x neonlike is faster). "
              "GB/s: inputs read once + output written once, over neonlike's time; % of copy: "
              "against the copy ceiling at the same size (the faster of np.copyto and a numba "
              "prange copy, this run)."]
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    if load is not None:
        busy = load_start[0] > 0.25 * (os.cpu_count() or 1) or load[0] > 0.25 * (os.cpu_count() or 1)
        header.append(f"Load average (1 min) {load_start[0]:.2f} at the start, {load[0]:.2f} at the "
                      f"end" + ("; other processes were using the cores, so these numbers are "
                                "noisy and multi-threaded ones suffer most." if busy else "."))
    envs = {k: v for k, v in os.environ.items() if k.startswith("NEONLIKE_")}
    header.append("neonlike environment: " + (", ".join(f"{k}={v}" for k, v in sorted(envs.items()))
                                              or "none set (library defaults)") + ".")
    if peers.numba is not None:
        try:
            layer = peers.numba.threading_layer()
        except Exception:  # noqa: BLE001 - no parallel kernel has run
            layer = "?"
        notes.append(f"numba: threading layer {layer}, SVML "
                     f"{'on' if peers.numba.config.USING_SVML else 'off (no icc_rt): exp/tanh are scalar libm calls'}")
    cache_res = [f"{fmt_n(n)}: {g:.1f} GB/s" for n, g in sorted(ceiling.items())]
    if cache_res:
        notes.append("copy ceiling " + ", ".join(cache_res))
    judged = [r for r in ctx.rows if r.targets]
    met = sum(r.met.startswith("yes") for r in judged)
    header.append(f"Targets met: {met} of {len(judged)} rows.")
    table = to_markdown(ctx.rows)
    text = "\n\n".join(header) + "\n\n" + table + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_line(args.threads, peers, be),
                                               "results": ctx.raw, "ceiling": ceiling,
                                               "samples": ctx.samples}, indent=1,
                                              default=str), encoding="utf-8")
    log(f"done in {elapsed:.0f} s")
    return 0
