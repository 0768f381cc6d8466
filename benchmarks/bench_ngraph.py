"""ngraph on the engine (issue 14, point 8): computations of `neonlike.ngraph` graphs against the
same work written as `be` statements, the NumPyTransformer and PyTorch eager, in one process.

    python benchmarks/bench_ngraph.py             # --threads 2 --repeats 11 --transformer cpu
    python benchmarks/bench_ngraph.py --quick     # 5 rounds, shorter batches

Rows (float32, random data; each implementation's first result is checked against a float64
numpy reference first, a wrong one is not timed):

- 10op@1e6: the graph of `((a*b+c)*d - a/(b+1)) * exp(-c*c) + sqrt(abs(d))` on (1000, 1000)
  variables, a computation taking no argument and returning the value (one fused kernel, then
  the result copied out), against the same tree as one `be` statement `out[:] = tree` (tree
  built each call), the statement followed by `out.get()` (the same copy out), the graph on
  placeholders fed four arrays per call, and the NumPyTransformer on the variables' graph.
- stmt100: `tanh(s*2 + 1)*s - s` on 100 elements, a computation fed `s` (placeholder) and
  returning the value, against the `be` statement `o[:] = be.tanh(s*2.0 + 1.0)*s - s`
  (bench_statement.py's row), and the graph on a variable (no argument).
- mlp: one train step of examples/ngraph_mlp.py's model (features-100-10, ReLU, softmax +
  cross entropy averaged over the batch, `ng.deriv`, momentum SGD by `ng.assign`; the minibatch
  fed as two arrays, the cost returned) against torch eager doing the same (Linear without bias,
  F.cross_entropy, backward, torch.optim.SGD(momentum=0.9), loss.item()) and the
  NumPyTransformer, at the digits' shapes (64-100-10, batch 32) and MNIST's (784-100-10,
  batch 128). All start from the same weights; the first step's costs are checked equal.

Medians of interleaved batches (benchmarks/_harness.measure). The table prints each
comparison's ratio and whether issue 14's target is met.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import _harness  # noqa: F401  first: pins the thread pools before numpy loads

import numpy as np  # noqa: E402

from _harness import GEMM_PAUSE_S, Bench, Config, Peers, fmt_n, fmt_time, measure  # noqa: E402
from _runner import machine_line  # noqa: E402


def ten_op(m, a, b, c, d):
    return ((a * b + c) * d - a / (b + 1)) * m.exp(-c * c) + m.sqrt(abs(d))


def stmt_expr(m, s):
    return m.tanh(s * 2.0 + 1.0) * s - s


def bench_10op(ng, ngt, be, kind: str, n: int) -> Bench:
    rows, cols = 1000, n // 1000
    R, C = ng.make_axis(rows, name="R"), ng.make_axis(cols, name="C")
    rng = np.random.default_rng(0)
    host = [rng.uniform(0.1, 1.0, (rows, cols)).astype(np.float32) for _ in range(4)]
    variables = [ng.variable([R, C], initial_value=h) for h in host]
    placeholders = [ng.placeholder([R, C]) for _ in host]
    t = ngt.make_transformer_factory(kind)()
    on_variables = t.computation(ten_op(ng, *variables))
    on_placeholders = t.computation(ten_op(ng, *placeholders), *placeholders)
    on_numpy = ngt.make_transformer_factory("numpy")().computation(ten_op(ng, *variables))
    tensors = [be.array(h) for h in host]
    out = be.empty((rows, cols))

    def statement():
        out[:] = ten_op(be, *tensors)
        return out

    def statement_get():
        out[:] = ten_op(be, *tensors)
        return out.get()
    impls = {"ngraph": on_variables, "be statement": statement,
             "be statement + get()": statement_get,
             "ngraph, placeholders fed": lambda: on_placeholders(*host),
             "NumPyTransformer": on_numpy}
    ref = lambda: ten_op(np, *(h.astype(np.float64) for h in host))  # noqa: E731
    return Bench("10op", "10-op tree", n, impls, ref)


def bench_small(ng, ngt, be, kind: str, n: int = 100) -> Bench:
    S = ng.make_axis(n, name="S")
    host = np.random.default_rng(1).uniform(-1, 1, n).astype(np.float32)
    s = ng.placeholder([S])
    v = ng.variable([S], initial_value=host)
    t = ngt.make_transformer_factory(kind)()
    fed = t.computation(stmt_expr(ng, s), s)
    held = t.computation(stmt_expr(ng, v))
    st, o = be.array(host.reshape(n, 1)), be.empty((n, 1))

    def statement():
        o[:] = be.tanh(st * 2.0 + 1.0) * st - st
        return o
    impls = {"ngraph": lambda: fed(host), "be statement": statement, "ngraph, variable": held}
    return Bench("stmt100", "tanh(s*2 + 1)*s - s", n, impls,
                 lambda: stmt_expr(np, host.astype(np.float64)))


BATCHES = 64


def bench_mlp(ng, ngt, kind: str, nf: int, nh: int, nc: int, bs: int, torch) -> Bench:
    rng = np.random.default_rng(2)
    W1 = rng.normal(0.0, 0.1, (nh, nf)).astype(np.float32)
    W2 = rng.normal(0.0, 0.1, (nc, nh)).astype(np.float32)
    # a cycle of random minibatches with random labels: nothing to learn, so the outputs never
    # saturate (one batch repeated is fitted within a few hundred steps, and then the softmax's
    # denormal exps slow every implementation down 100-fold)
    Xs = [rng.uniform(0.0, 1.0, (nf, bs)).astype(np.float32) for _ in range(BATCHES)]
    labels = [rng.integers(0, nc, bs) for _ in range(BATCHES)]
    Ts = [np.eye(nc, dtype=np.float32)[y].T.copy() for y in labels]

    def cycle(f):
        count = [0]

        def step():
            i = count[0] % BATCHES
            count[0] += 1
            return f(i)
        return step

    def graph_step(transformer_kind: str):
        N = ng.make_axis(bs, name="N", batch=True)
        Y, F, H = (ng.make_axis(k, name=nm) for k, nm in ((nc, "Y"), (nf, "F"), (nh, "H")))
        x, t = ng.placeholder([F, N]), ng.placeholder([Y, N])
        w1 = ng.variable([H, F - 1], initial_value=W1)
        w2 = ng.variable([Y, H - 1], initial_value=W2)
        logits = ng.dot(w2, ng.maximum(ng.dot(w1, x), 0.0))
        cost = ng.mean(ng.cross_entropy_multi(ng.softmax(logits), t), out_axes=())
        updates = []
        with ng.Op.saved_user_deps():
            vs = [ng.variable(w.axes, initial_value=0.0) for w in (w1, w2)]
            for w, v in zip((w1, w2), vs):
                updates.append(ng.assign(v, 0.9 * v - 0.1 * ng.deriv(cost, w)))
            for w, v in zip((w1, w2), vs):
                updates.append(ng.assign(w, w + v))
        step = ngt.make_transformer_factory(transformer_kind)().computation(
            [cost] + updates, x, t)
        return cycle(lambda i: step(Xs[i], Ts[i])[0])
    impls = {"ngraph": graph_step(kind)}
    if torch is not None:
        lin1 = torch.nn.Linear(nf, nh, bias=False)
        lin2 = torch.nn.Linear(nh, nc, bias=False)
        with torch.no_grad():
            lin1.weight.copy_(torch.from_numpy(W1))
            lin2.weight.copy_(torch.from_numpy(W2))
        model = torch.nn.Sequential(lin1, torch.nn.ReLU(), lin2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        Xb = [torch.from_numpy(X.T.copy()) for X in Xs]
        yb = [torch.from_numpy(y.astype(np.int64)) for y in labels]

        def torch_step(i):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(Xb[i]), yb[i])
            loss.backward()
            opt.step()
            return loss.item()
        impls["torch eager"] = cycle(torch_step)
    impls["NumPyTransformer"] = graph_step("numpy")

    def ref():
        z = W2.astype(np.float64) @ np.maximum(W1.astype(np.float64) @ Xs[0], 0.0)
        z = z - z.max(axis=0)
        logp = z - np.log(np.exp(z).sum(axis=0))
        return np.asarray(-(logp * Ts[0]).sum(axis=0).mean())
    return Bench("mlp", f"MLP train step {nf}-{nh}-{nc}, batch {bs}", nf * bs, impls, ref,
                 rtol=1e-4, size=f"{nf}-{nh}-{nc}, batch {bs}", pause_s=GEMM_PAUSE_S)


# (bench, ngraph impl, peer impl, target kind, target value, target text): 'within' is
# ngraph / peer <= value, 'faster' is peer / ngraph >= value
COMPARISONS = [
    ("10op", "ngraph", "be statement", "within", 1.10, "within 10% of the be statement"),
    ("10op", "ngraph", "be statement + get()", None, None, "—"),
    ("10op", "ngraph, placeholders fed", "be statement", None, None, "—"),
    ("10op", "ngraph", "NumPyTransformer", "faster", 5.0, ">= 5x the NumPyTransformer"),
    ("stmt100", "ngraph", "be statement", "within", 2.0, "<= 2x the be statement"),
    ("stmt100", "ngraph, variable", "be statement", None, None, "—"),
    ("mlp", "ngraph", "torch eager", "within", 1.0, "no slower than torch eager"),
    ("mlp", "ngraph", "NumPyTransformer", None, None, "—"),
]


def table(results: list) -> str:
    lines = ["| case | size | ngraph | time | against | its time | ratio (against / ngraph) "
             "| target | met? |", "|---|---|---|---|---|---|---|---|---|"]
    for b, res in results:
        for case, mine, peer, kind, value, text in COMPARISONS:
            if case != b.case or mine not in res or peer not in res:
                continue
            a, p = res[mine], res[peer]
            if not (isinstance(a, float) and isinstance(p, float)):
                lines.append(f"| {b.label} | {b.size or fmt_n(b.n)} | {mine} | {a} | {peer} | "
                             f"{p} | — | {text} | not timed |")
                continue
            met = "—"
            if kind == "within":
                met = "yes" if a <= value * p else f"NO: {a / p:.2f}x its time"
            elif kind == "faster":
                met = "yes" if p >= value * a else f"NO: {p / a:.2f}x"
            lines.append(f"| {b.label} | {b.size or fmt_n(b.n)} | {mine} | {fmt_time(a)} | {peer} "
                         f"| {fmt_time(p)} | {p / a:.2f}x | {text} | {met} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="5 rounds, 10 ms batches")
    ap.add_argument("--transformer", default="cpu", help="the engine transformer (cpu, mkl, gpu)")
    ap.add_argument("--n", type=float, default=1e6, help="elements of the 10-op case")
    ap.add_argument("--cases", default="10op,stmt100,mlp", help="which of 10op, stmt100, mlp")
    ap.add_argument("--markdown", help="write the table and notes to this file")
    args = ap.parse_args()
    cfg = Config(repeats=args.repeats or (5 if args.quick else 11),
                 batch_s=0.01 if args.quick else 0.04, warm_s=0.02 if args.quick else 0.1,
                 warm_calls=1 if args.quick else 3)
    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    peers = Peers(args.threads)
    import neonlike.ngraph as ng
    import neonlike.ngraph.transformers as ngt
    from neonlike.backends import gen_backend
    be = gen_backend(args.transformer, rng_seed=0)
    builds = [("10op", lambda: bench_10op(ng, ngt, be, args.transformer, int(args.n))),
              ("stmt100", lambda: bench_small(ng, ngt, be, args.transformer)),
              ("mlp", lambda: bench_mlp(ng, ngt, args.transformer, 64, 100, 10, 32, peers.torch)),
              ("mlp", lambda: bench_mlp(ng, ngt, args.transformer, 784, 100, 10, 128,
                                        peers.torch))]
    results = []
    for case, build in builds:
        if case not in args.cases.split(","):
            continue
        b = build()
        print(f"  {b.label} ({b.size or fmt_n(b.n)}) ...", file=sys.stderr, flush=True)
        # the train steps warm up longer: their first ~100 calls run 5-50x slower (measured on
        # the MNIST shapes: the interpret-first tier, GEMM path timing, kernels loaded)
        warm = Config(cfg.repeats, cfg.batch_s, max(cfg.warm_s, 2.0), cfg.warm_calls) \
            if case == "mlp" else cfg
        results.append((b, measure(b, warm)))
    load1 = os.getloadavg()[0]
    text = "\n".join([
        f"Machine: {machine_line(args.threads, peers, be)}.",
        "",
        f"Run: `{' '.join(['python benchmarks/bench_ngraph.py', *sys.argv[1:]])}`, "
        f"{time.perf_counter() - started:.0f} s; medians of {cfg.repeats} interleaved rounds; "
        f"ngraph computations on the '{args.transformer}' transformer.",
        "",
        f"Load average (1 min) {load0:.2f} at the start, {load1:.2f} at the end.",
        "",
        table(results),
        *([""] + [f"Note: {n}" for n in peers.notes] if peers.notes else []),
    ])
    print(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
