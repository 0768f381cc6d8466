"""The Numba kernels of a FUSED stage with reductions (render.py renders the rest of the module).

The kept axes are cut into tiles, and each tile runs every reduction pass, one after another, and
then its part of the epilogue, so a tile's data stays in cache between passes:

- innermost axis reduced ("lanes mode"): a tile is one point of the kept axes. A sum accumulates
  into one scalar `s<r>` through `_radd`, the only operation compiled with `reassoc`, so LLVM
  vectorizes that add (and nothing else of the tree); the order is fixed by the compiled loop, so
  the sum does not depend on threads. max, min, argmax and argmin walk the innermost axis in
  chunks of LANES elements, lane u accumulating elements u, u + LANES, ... (a loop that vectorizes
  without reassociating anything), and the lanes are combined at the end into `s<r>`.
- innermost axis kept: a tile is one point of the other kept axes and a block of innermost
  columns; a pass walks the reduced axes accumulating whole rows of the block into `a<r>`.

The parallel variant runs the tiles in CHUNKS chunks under prange; the serial one in one. Innermost
rows are read through 1-D slices (`r<b> = b<b>[j0, q:q + w]`) so that Numba indexes them with the
loop counter alone, which is what lets LLVM vectorize the lane loops. The body of
`kernel_serial` of `max(x, axis=1)` for a 2-d `x`:

    ntiles = dom[0]
    for ch in range(1):
        nchunks = 1
        a1 = np.empty(LANES, dtype=F)
        for t in range(ch * ntiles // nchunks, (ch + 1) * ntiles // nchunks):
            rest = t
            j0 = rest % dom[0]
            rest //= dom[0]
            # pass: max over axes (1,)
            for u in range(LANES):
                a1[u] = -INF
            for q in range(0, dom[1], LANES):
                w = min(LANES, dom[1] - q)
                r0 = b0[j0, q:q + w]
                for u in range(w):
                    v0 = F(r0[u])
                    a1[u] = _maximum(a1[u], v0)
            h = LANES // 2
            ...
            s1 = a1[0]
            # epilogue
            for j1 in range(out.shape[1]):
                v1 = s1
                out[j0, j1] = STORE(v1)
"""
from __future__ import annotations

from typing import Protocol

from ...ops import Op
from ...plan import closure as _closure

LANES = 128       # partial accumulators of a reduction over the innermost axis (a power of two)
BLOCK = 1024      # kept innermost-axis columns per tile when the innermost axis is kept
BLOCK_MULTI = 256  # ... when the tile is read more than once (several passes or an epilogue)
CHUNKS = 64       # tile chunks of the parallel loop (each allocates its accumulators once)
TILE_ELEMS = 1 << 17  # elements of a re-read tile (reduced rows x columns): 512 KiB of float32,
                      # half a core's L2 here (softmax over axis 0 of (1000, 4096): 4.2 -> 3.0 ms)
NEST_MAX = 8      # axes walked by nested loops; more: see open_nest

# per reduction: the accumulators' initial value, and the update of accumulator {a} with value {v}
# (argmax/argmin also keep the flat index {k} of the best value in {i})
_INIT = {Op.SUM: "ZERO", Op.MAX: "-INF", Op.MIN: "INF", Op.ARGMAX: "-INF", Op.ARGMIN: "INF"}
_LANE = {
    Op.SUM: "{a} += {v}",
    Op.MAX: "{a} = _maximum({a}, {v})",
    Op.MIN: "{a} = _minimum({a}, {v})",
    Op.ARGMAX: "if {v} > {a} or ({v} != {v} and {a} == {a}):\n    {a} = {v}\n    {i} = {k}",
    Op.ARGMIN: "if {v} < {a} or ({v} != {v} and {a} == {a}):\n    {a} = {v}\n    {i} = {k}",
}
REDUCTIONS = frozenset(_LANE)
_R_NAMES = {op.value for op in _LANE}
_ARG = (Op.ARGMAX, Op.ARGMIN)
_COMBINE_ARG = """\
best, at = a{r}[0], i{r}[0]
for u in range(1, LANES):
    v, k = a{r}[u], i{r}[u]
    if best != best:
        if v != v and k < at:
            at = k
    elif v != v or v {cmp} best or (v == best and k < at):
        best, at = v, k
s{r} = F(at)"""


class _Source(Protocol):
    """Source lines being written with an indentation level (render._Lines)."""
    depth: int

    def add(self, text: str) -> None: ...


class _Context:
    """What every piece of a reduction kernel reads: the stage's program, axes and buffers, the
    tiling chosen for it, and the source being written."""

    def __init__(self, src: _Source, program: tuple, R: tuple, n: int, meta: dict, formats: dict,
                 out_buf: int, stash_ok: bool) -> None:
        self.src, self.program, self.R, self.n, self.meta = src, program, R, n, meta
        self.formats = formats                    # Op -> format of its operands' variable names
        self.inner = n - 1
        self.top = len(program) - 1
        self.red = [i for i, ins in enumerate(program) if ins.op in _R_NAMES]
        self.lanes_mode = self.inner in R         # innermost axis reduced
        kept = [k for k in range(n) if k not in R]
        self.outer_kept = kept if self.lanes_mode else kept[:-1]
        self.outer_red = [k for k in R if k != self.inner] if self.lanes_mode else list(R)
        self.reread = len(self.red) > 1 or any(
            program[i].op == "load" for i in _closure(program, self.top))
        self.block = "LANES" if self.lanes_mode else ("BLOCK_MULTI" if self.reread else "BLOCK")
        self.lead_out = ", ".join(f"j{k}" for k in range(self.inner))
        # one reduction (not argmax/argmin) of leading axes with an epilogue that reads no buffer
        # (sum, max, min, mean over axis 0): where the kept axes give too few full-width tiles, the
        # parallel variant splits the reduced rows instead of narrowing the column blocks
        self.row_split = (not self.lanes_mode and len(self.red) == 1
                          and Op(program[self.red[0]].op) not in _ARG and not self.reread)
        self.hoisted, self.frontier = self._hoisted()
        self.stash, self.stash_pass = self._stash(out_buf, stash_ok)

    def _hoisted(self) -> tuple[set, set]:
        """Innermost axis kept: values that depend on reductions and constants only (softmax's
        1 / sum) are per column, so each tile computes them once into `h<i>` arrays, not per row.
        (hoisted, frontier): those values, and those of them that other values read (the h<i>)."""
        program = self.program
        if self.lanes_mode or not self.reread:  # (not with _row_split, which has no h arrays)
            return set(), set()
        hoisted = {i for i, ins in enumerate(program)
                   if ins.op not in ("load", "const") and ins.op not in _R_NAMES
                   and all(program[j].op != "load" for j in _closure(program, i))}
        frontier = {a for i, ins in enumerate(program) if i not in hoisted
                    for a in ins.args if a in hoisted} | ({self.top} & hoisted)
        return hoisted, frontier

    def _stash(self, out_buf: int, stash_ok: bool) -> tuple[int, int]:
        """Innermost axis kept, the output of the domain's shape in the compute dtype: the last
        pass whose value the epilogue needs again (softmax's exp(x - max)) stores it in the
        output's tile, and the epilogue reads it back instead of recomputing it. The executor
        never runs such a kernel with the output sharing memory with an input (it takes a temp
        then). (the stashed instruction, the pass that stores it), or (-1, -1)."""
        stash, stash_pass = -1, -1
        if (self.lanes_mode or not self.reread or not stash_ok
                or any(self.meta[out_buf][1] >> k & 1 for k in self.R)):
            return stash, stash_pass
        epi = _closure(self.program, self.top)
        for r in self.red:
            g = self.program[r].args[0]
            if g in epi and self.program[g].op not in ("load", "const"):
                stash, stash_pass = g, r
        return stash, stash_pass

    def buf_axes(self, buf: int) -> list:
        """Per axis of the buffer: the domain axis it follows, or None where it has size 1."""
        ndim, mask = self.meta[buf]
        return [None if mask >> k & 1 else self.n - ndim + k for k in range(ndim)]

    def full_index(self, buf: int) -> str:
        return ", ".join("0" if a is None else f"j{a}" for a in self.buf_axes(buf))

    def row_slice(self, buf: int, start: str) -> str | None:
        """A 1-D slice of the buffer along the innermost axis, or None where that is broadcast."""
        axes = self.buf_axes(buf)
        if not axes or axes[-1] is None:
            return None
        lead = ", ".join("0" if a is None else f"j{a}" for a in axes[:-1])
        return f"b{buf}[{lead + ', ' if lead else ''}{start}:{start} + w]"

    def value(self, i: int) -> str:
        """The expression of a const, reduction or op instruction (not a load)."""
        ins = self.program[i]
        if ins.op == "const":
            return f"c{ins.arg}"
        if ins.op in _R_NAMES:
            if self.lanes_mode:
                return f"s{i}"
            return f"F(i{i}[u])" if Op(ins.op) in _ARG else f"a{i}[u]"
        return self.formats[Op(ins.op)].format(*(f"v{a}" for a in ins.args))

    def body(self, order: list, lane: bool, start: str, stashed: int = -1) -> None:
        """Values of `order`; lane=True: inside a `for u in range(w)` over row slices.
        stashed: an instruction whose value is read back from the output tile `ro`."""
        src, program = self.src, self.program
        if lane:
            for b in sorted({program[i].arg for i in order if program[i].op == "load"}):
                sl = self.row_slice(b, start)
                if sl:
                    src.add(f"r{b} = {sl}")
            src.add("for u in range(w):")
            src.depth += 1
        for i in order:
            ins = program[i]
            if lane and i == stashed:
                src.add(f"v{i} = ro[u]")
            elif lane and i in self.hoisted:
                if i in self.frontier:
                    src.add(f"v{i} = h{i}[u]")
            elif ins.op == "load":
                if lane and self.row_slice(ins.arg, start):
                    src.add(f"v{i} = F(r{ins.arg}[u])")
                else:
                    src.add(f"v{i} = F(b{ins.arg}[{self.full_index(ins.arg)}])")
            else:
                src.add(f"v{i} = {self.value(i)}")

    def hoist(self, order: list, done: set) -> None:
        """Compute this section's per-column values not in `done` into `h<i>` (and add them)."""
        need = [i for i in order if i in self.frontier and i not in done]
        if not need:
            return
        done.update(need)
        src = self.src
        src.add("for u in range(w):")
        src.depth += 1
        for i in sorted(set().union(*(_closure(self.program, i) for i in need))):
            src.add(f"v{i} = {self.value(i)}")
        for i in need:
            src.add(f"h{i}[u] = v{i}")
        src.depth -= 1

    def flat_red(self, last: str) -> str:
        """The C-order flat index over R of the current element (argmax/argmin)."""
        terms = []
        for k in self.R:
            later = " * ".join(f"dom[{j}]" for j in self.R if j > k)
            var = last if k == self.inner and self.lanes_mode else f"j{k}"
            terms.append(f"{var} * {later}" if later else var)
        return " + ".join(terms)

    def open_loops(self, axes: list, extents: str) -> None:
        open_nest(self.src, "j", axes, extents)

    def tile_index(self, t: str) -> None:
        """The kept-axis indices of tile `t` (and, innermost axis kept, its block of columns)."""
        src = self.src
        src.add(f"rest = {t}")
        if not self.lanes_mode:
            src.add("c = rest % nblk * blk")
            src.add(f"w = min(blk, dom[{self.inner}] - c)")
            src.add("rest //= nblk")
        for k in reversed(self.outer_kept):
            src.add(f"j{k} = rest % dom[{k}]")
            src.add(f"rest //= dom[{k}]")


def open_nest(src: _Source, var: str, axes: list, extents: str, loop: str = "range") -> None:
    """Loops over `axes` with counters `<var><k>` to `<extents>[k]`, the first one a `loop`
    (range or prange). Beyond NEST_MAX axes the leading ones are walked by one loop over their
    flat index (`<var>_flat`), each counter taken from it: CPython compiles at most 20 nested
    blocks (a rank-21 output, issue 13), and a kernel nests a few more around and inside these."""
    lead = list(axes[:len(axes) - NEST_MAX + 1]) if len(axes) > NEST_MAX else []
    if lead:
        size = "1"                         # (no counter is updated in place: numba's prange
        for k in reversed(lead):           # takes that for an overwrite of its index)
            src.add(f"{var}_s{k} = {size}")
            size = f"{var}_s{k} * {extents}[{k}]"
        src.add(f"for {var}_flat in {loop}({size}):")
        src.depth += 1
        for k in lead:
            src.add(f"{var}{k} = {var}_flat // {var}_s{k} % {extents}[{k}]")
        loop = "range"
    for k in axes[len(lead):]:
        src.add(f"for {var}{k} in {loop}({extents}[{k}]):")
        src.depth += 1
        loop = "range"


def render_reductions(serial: _Source, parallel: _Source, program: tuple, R: tuple, n: int,
                      meta: dict, formats: dict, out_buf: int, stash_ok: bool) -> None:
    """The bodies of `kernel_serial` and `kernel_parallel` (kernels/fused.py.tmpl) of a stage with
    reductions over axes R of the domain `dom`, written into `serial` and `parallel`.
    formats: Op -> format of its operands' variable names (elementwise ops); stash_ok: the output
    is stored in the compute dtype (it may hold a pass's values)."""
    for src, in_parallel in ((serial, False), (parallel, True)):
        ctx = _Context(src, program, R, n, meta, formats, out_buf, stash_ok)
        if in_parallel and ctx.row_split:
            _row_split(ctx)
        else:
            _tiles(ctx, in_parallel)


def _tiles(ctx: _Context, parallel: bool) -> None:
    """The tile loop: the block size, the chunks (prange in the parallel variant), the
    accumulators of each chunk, then per tile every reduction pass and the epilogue."""
    src, R, inner = ctx.src, ctx.R, ctx.inner
    tiles = " * ".join([f"dom[{k}]" for k in ctx.outer_kept] + ([] if ctx.lanes_mode else ["nblk"]))
    if not ctx.lanes_mode:
        src.add(f"blk = {ctx.block}")
        if ctx.reread:  # a tile read by several passes stays within about half the L2 cache
            nrows = " * ".join(f"dom[{k}]" for k in R)
            src.add(f"while blk > 16 and {nrows} * blk > TILE_ELEMS:")
            src.add("    blk //= 2")
        if parallel:  # narrower blocks where there would be too few tiles to share
            # (not get_num_threads(): it would keep numba from caching the kernel)
            outer = " * ".join(f"dom[{k}]" for k in ctx.outer_kept) or "1"
            src.add(f"while blk > 256 and {outer} * ((dom[{inner}] + blk - 1) // blk) < MIN_TILES:")
            src.add("    blk //= 2")
        src.add(f"nblk = (dom[{inner}] + blk - 1) // blk")
    src.add(f"ntiles = {tiles or '1'}")
    if parallel:
        src.add("nchunks = min(ntiles, CHUNKS)")
        src.add("for ch in prange(nchunks):")
    else:
        src.add("for ch in range(1):")
        src.add("    nchunks = 1")
    src.depth += 1
    for i in sorted(ctx.frontier):
        src.add(f"h{i} = np.empty({ctx.block}, dtype=F)")
    for r in ctx.red:
        if ctx.lanes_mode and Op(ctx.program[r].op) is Op.SUM:
            continue
        src.add(f"a{r} = np.empty({ctx.block}, dtype=F)")
        if Op(ctx.program[r].op) in _ARG:
            src.add(f"i{r} = np.empty({ctx.block}, dtype=np.int64)")
    src.add("for t in range(ch * ntiles // nchunks, (ch + 1) * ntiles // nchunks):")
    src.depth += 1
    ctx.tile_index("t")
    done: set = set()      # the per-column values (h<i>) this tile has computed
    for r in ctx.red:
        _pass(ctx, r, done)
    _epilogue(ctx, done)


def _pass(ctx: _Context, r: int, done: set) -> None:
    """One reduction over the tile: initial accumulators, the loops over the reduced axes with
    the accumulating update, and (lanes mode) the combine of the lanes into `s<r>`."""
    src, program, inner = ctx.src, ctx.program, ctx.inner
    op = Op(program[r].op)
    operand = program[r].args[0]
    order = _closure(program, operand)
    src.add(f"# pass: {op.value} over axes {ctx.R}")
    ctx.hoist(order, done)
    if ctx.lanes_mode and op is Op.SUM:
        _sum_pass(ctx, r, order)
        return
    src.add(f"for u in range({'LANES' if ctx.lanes_mode else 'w'}):")
    src.add(f"    a{r}[u] = {_INIT[op]}")
    if op in _ARG:
        src.add(f"    i{r}[u] = {'u' if ctx.lanes_mode else '0'}")
    depth = src.depth
    ctx.open_loops(ctx.outer_red, "dom")
    if ctx.lanes_mode:
        src.add(f"for q in range(0, dom[{inner}], LANES):")
        src.add(f"    w = min(LANES, dom[{inner}] - q)")
        src.depth += 1
    stashing = r == ctx.stash_pass
    if stashing:
        src.add(f"# stash: v{ctx.stash} into the output tile, read back by the epilogue")
        src.add(f"so = out[{ctx.lead_out + ', ' if ctx.lead_out else ''}c:c + w]")
    ctx.body(order, True, "q" if ctx.lanes_mode else "c")
    v = f"v{operand}"
    src.add(_LANE[op].format(a=f"a{r}[u]", v=v, i=f"i{r}[u]", k=ctx.flat_red("(q + u)")))
    if stashing:
        src.add(f"so[u] = {v}")
    src.depth = depth
    if ctx.lanes_mode:
        _combine_lanes(ctx, r, op)
        if op not in _ARG:
            _zero_ties(ctx, r, order)


def _sum_pass(ctx: _Context, r: int, order: list) -> None:
    """A sum over the innermost axis: one register accumulator `s<r>`; `_radd` vectorizes."""
    src = ctx.src
    depth = src.depth
    src.add(f"s{r} = ZERO")
    ctx.open_loops(ctx.outer_red, "dom")
    src.add(f"w = dom[{ctx.inner}]")
    ctx.body(order, True, "0")
    src.add(f"s{r} = _radd(s{r}, v{ctx.program[r].args[0]})")
    src.depth = depth


def _combine_lanes(ctx: _Context, r: int, op: Op) -> None:
    """The LANES partial accumulators `a<r>` (and indices `i<r>`) combined into `s<r>`: a tree
    of halvings, or for argmax/argmin a walk that keeps numpy's first occurrence."""
    src = ctx.src
    if op in _ARG:
        src.add(_COMBINE_ARG.format(r=r, cmp=">" if op is Op.ARGMAX else "<"))
        return
    comb = _LANE[op].format(a=f"a{r}[u]", v=f"a{r}[u + h]")
    src.add("h = LANES // 2")
    src.add("while h > 0:")
    src.add("    for u in range(h):")
    src.add(f"        {comb}")
    src.add("    h //= 2")
    src.add(f"s{r} = a{r}[0]")


def _zero_ties(ctx: _Context, r: int, order: list) -> None:
    """max/min over the innermost axis whose result is zero: the sign of the last zero.

    numpy's max is a fold `m = maximum(m, x)`, ties going to the later element, so of +0 and -0
    it keeps the sign of the last zero; the lanes (element u + k * LANES in lane u) lose that
    order. Only where the result is exactly zero, a second walk rather than an index per lane:
    it keeps the largest 2 * (flat index) + (sign bit) of the zeros, a max that vectorizes.
    (Reductions that keep the innermost axis fold in order already.)"""
    src, inner = ctx.src, ctx.inner
    depth = src.depth
    src.add(f"if s{r} == ZERO:  # +-0: the sign of the last zero, as numpy's fold")
    src.depth += 1
    src.add("z = -1")
    ctx.open_loops(ctx.outer_red, "dom")
    src.add(f"for q in range(0, dom[{inner}], LANES):")
    src.add(f"    w = min(LANES, dom[{inner}] - q)")
    src.depth += 1
    ctx.body(order, True, "q")
    v = f"v{ctx.program[r].args[0]}"
    src.add(f"z = max(z, 2 * ({ctx.flat_red('(q + u)')}) + np.int64(np.signbit({v})) "
            f"if {v} == ZERO else -1)")
    src.depth = depth + 1
    src.add(f"s{r} = -ZERO if z & 1 else ZERO")
    src.depth = depth


def _epilogue(ctx: _Context, done: set) -> None:
    """This tile's part of the output: the tree above the reductions, stored."""
    src, program, top = ctx.src, ctx.program, ctx.top
    src.add("# epilogue")
    order = _closure(program, top)
    if ctx.lanes_mode:
        ctx.open_loops(list(ctx.R), "out.shape")
        ctx.body(order, False, "")
        src.add(f"out[{', '.join(f'j{k}' for k in range(ctx.n))}] = STORE(v{top})")
        return
    if ctx.stash >= 0:  # the stashed value is a leaf of the epilogue
        order = _closure(program, top, stop=ctx.stash)
    ctx.hoist(order, done)
    ctx.open_loops(ctx.outer_red, "out.shape")
    src.add(f"ro = out[{ctx.lead_out + ', ' if ctx.lead_out else ''}c:c + w]")
    ctx.body(order, True, "c", stashed=ctx.stash)
    src.add(f"ro[u] = STORE(v{top})")


def _row_split(ctx: _Context) -> None:
    """The whole parallel variant for one reduction of leading axes whose epilogue reads no buffer.

    Tiles are a point of the outer kept axes and a block of BLOCK columns. Where there are fewer
    than MIN_TILES of them, each tile's reduced rows are cut into RSPLIT fixed parts (not the thread
    count: results do not depend on it), part p accumulating full-width rows into row p of `part`,
    and afterwards, serially, each tile adds its RSPLIT partial rows in part order and runs its
    epilogue; otherwise (nsplit = 1) a tile accumulates into its chunk's row and runs its epilogue
    at once. One prange region either way (a second one doubles the compile time)."""
    src, program, R = ctx.src, ctx.program, ctx.R
    top = src.depth
    r = ctx.red[0]
    op = Op(program[r].op)
    outer = " * ".join(f"dom[{k}]" for k in ctx.outer_kept) or "1"
    nrows = " * ".join(f"dom[{k}]" for k in R)
    src.add("blk = BLOCK")
    src.add(f"nblk = (dom[{ctx.inner}] + blk - 1) // blk")
    src.add(f"ntiles = {outer} * nblk")
    src.add(f"nrows = {nrows}")
    src.add("nsplit = RSPLIT if ntiles < MIN_TILES and nrows >= RSPLIT else 1")
    src.add("part = np.empty((ntiles * nsplit if nsplit > 1 else 0, BLOCK), dtype=F)")
    src.add("nwork = ntiles * nsplit")
    src.add("nchunks = min(nwork, CHUNKS)")
    src.add("for chunk in prange(nchunks):")
    src.depth += 1
    src.add("acc = np.empty(BLOCK, dtype=F)")
    src.add("for p in range(chunk * nwork // nchunks, (chunk + 1) * nwork // nchunks):")
    src.depth += 1
    src.add("ch = p % nsplit")
    ctx.tile_index("p // nsplit")
    src.add(f"a{r} = part[p] if nsplit > 1 else acc")
    src.add("for u in range(w):")
    src.add(f"    a{r}[u] = {_INIT[op]}")
    depth = src.depth
    lo, hi = "ch * nrows // nsplit", "(ch + 1) * nrows // nsplit"
    if len(R) == 1:
        src.add(f"for j{R[0]} in range({lo}, {hi}):")
        src.depth += 1
    else:
        src.add(f"for row in range({lo}, {hi}):")
        src.depth += 1
        src.add("rest = row")
        for k in reversed(R):
            src.add(f"j{k} = rest % dom[{k}]")
            src.add(f"rest //= dom[{k}]")
    ctx.body(_closure(program, program[r].args[0]), True, "c")
    src.add(_LANE[op].format(a=f"a{r}[u]", v=f"v{program[r].args[0]}"))
    src.depth = depth
    src.add("if nsplit == 1:")
    src.depth += 1
    _row_split_epilogue(ctx)
    # combine in part order, then the epilogue
    src.depth = top
    src.add("if nsplit > 1:")
    src.add("    for t in range(ntiles):")
    src.depth = top + 2
    ctx.tile_index("t")
    src.add(f"a{r} = part[t * nsplit]")
    src.add("for ch in range(1, nsplit):")
    src.add("    pr = part[t * nsplit + ch]")
    src.add("    for u in range(w):")
    src.add("        " + _LANE[op].format(a=f"a{r}[u]", v="pr[u]"))
    _row_split_epilogue(ctx)
    src.depth = top


def _row_split_epilogue(ctx: _Context) -> None:
    """A row-split tile's part of the output (its epilogue reads no buffer: j<k> of R are 0)."""
    src = ctx.src
    depth = src.depth
    src.add("# epilogue")
    for k in ctx.R:
        src.add(f"j{k} = 0")
    src.add(f"ro = out[{ctx.lead_out + ', ' if ctx.lead_out else ''}c:c + w]")
    ctx.body(_closure(ctx.program, ctx.top), True, "c")
    src.add(f"ro[u] = STORE(v{ctx.top})")
    src.depth = depth
