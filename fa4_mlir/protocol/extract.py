"""Interpret a kernel's IR into the protocol events of every role of every CTA, for one scenario.

Each role runs as one process over the thread ids of its warps: values that depend on the thread
(``tid.x``, ``elect_one``, ``tid % 128 == 0``) are evaluated per thread, so an ``scf.if`` narrows
the set of threads that execute its protocol ops, and every arrival counts its threads. Values
that depend on kernel arguments or the CTA's place in the grid are terms, bound per scenario
(``solve``): a loop whose bounds are terms binds them to run the scenario's trip count, and every
other role sees the values bound; a branch on one takes the scenario's decision, kept consistent
with the others. Regions without protocol ops or shared-memory accesses are skipped, and so are
ops without protocol semantics whose values nothing the interpreter runs reads (``mark_dead``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fa4_mlir.protocol.mirror import NO_PROTOCOL_EFFECT, Block, Mirror, Node
from fa4_mlir.protocol import semantics
from fa4_mlir.protocol.model import (WARP, BarrierArray, Event, Kernel, Process, Site, Threads, Unverifiable)
from fa4_mlir.protocol.solve import (GRID_LEAVES, Bindings, Infeasible, describe, evaluable, leaves,
                                     substitute, trip_count)
from fa4_mlir.protocol.uniformity import captures, region_results
from fa4_mlir.protocol.values import Sym, is_int, opaque, uniform

PROTOCOL_OPS = ("fa4.mbarrier_init", "fa4.mbarrier_arrive", "fa4.mbarrier_arrive_expect_tx",
                "fa4.mbarrier_try_wait_parity", "fa4.mma_commit", "fa4.pipeline_create", "fa4.named_barrier",
                "fa4.tma_load", "fa4.tmem_alloc", "fa4.tmem_dealloc", "fa4.tcgen05_mma", "fa4.wgmma")
MAX_UNROLL = 4096  # iterations of one loop with protocol ops
WARPGROUP = 128


GRID, BLOCK = ("sreg", "nctaid.x"), ("sreg", "ctaid.x")


@dataclasses.dataclass
class Scenario:
    """How to resolve what the IR leaves to run time: the trip count that loops with unknown bounds
    are solved for (``fa4_mlir.protocol.solve``), the branch taken for each unknown condition
    (default: the then-branch), and which cluster of the grid runs: the first (``%ctaid.x = 0``)
    or the last of a grid of at least two clusters (``%nctaid.x`` solved with the loop bounds: a
    trailing CTA, whose tile range may be short or empty, or a late one, whose causal range is
    long). With ``spread`` each loop bound solved gets that many trips more than the one before
    (1: roles that loop over different arguments disagree; -1: a role whose range is clamped,
    ``min(first + per, total)``, gets fewer trips than one whose range is not)."""

    trips: int
    branches: dict = dataclasses.field(default_factory=dict)
    cta: str = "first"
    spread: int = 0
    seen: list = dataclasses.field(default_factory=list)
    dynamic_loops: int = 0  # loops whose bounds were unknown (none: every trip count gives the same run)
    uses_cta: bool = False  # the kernel reads its block index or the grid size
    bindings: Bindings = dataclasses.field(init=False)
    preconditions: list = dataclasses.field(default_factory=list)  # shared by a kernel's scenarios
    opaque_loops: int = 0  # loops whose bounds no binding resolves (they take ``trips`` as is)
    cluster: int = 1

    def __post_init__(self):
        # The grid leaves stay terms, so that what depends on the CTA's place is known as such.
        self.bindings = Bindings(self.spread, self.preconditions, {BLOCK: 0} if self.cta == "first" else {})
        least = (2 if self.cta == "last" else 1) * self.cluster
        self.bindings.constraints.append((("cmp", 5, 32, GRID, least), True))

    def block(self, cta: int):
        """``%ctaid.x`` of CTA ``cta`` of the cluster, as a term."""
        base = BLOCK if self.cta == "first" else ("bin", "subi", 32, GRID, self.cluster)
        return base if cta == 0 else ("bin", "addi", 32, base, cta)

    def precondition(self, term) -> None:
        """Record a fact about the kernel arguments that every run has, for this scenario and the
        ones after it (a scenario that contradicts one is run again, knowing it)."""
        if term not in self.preconditions:
            self.preconditions.append(term)
        self.bindings.require(term)

    def branch(self, term) -> bool:
        if term not in self.branches and term not in self.seen:
            self.seen.append(term)
        return self.branches.get(term, True)

    def signature(self) -> tuple:
        """What the run depends on: equal signatures give equal runs."""
        def grid(x) -> bool:  # the block index is implied by the mode; the grid matters if read
            return BLOCK in leaves(x) or (not self.uses_cta and GRID in leaves(x))

        return (self.cta if self.uses_cta else "",
                tuple(sorted((k, v) for k, v in self.bindings.bound.items() if not grid(k))),
                tuple(c for c in self.bindings.constraints if not grid(c[0])), tuple(sorted(self.branches.items())),
                self.trips if self.opaque_loops else None)

    def describe(self) -> str:
        parts = []
        if self.uses_cta:
            block, grid = self.bindings.value(self.block(0)), self.bindings.value(GRID)
            where = "" if block is None else f": %ctaid.x = {block}" + (f"..{block + self.cluster - 1}" if self.cluster > 1 else "")
            where += "" if grid is None else f" of %nctaid.x = {grid}"
            parts.append(f"the {self.cta} {'cluster' if self.cluster > 1 else 'CTA'} of the grid{where}")
        args = {leaf: v for leaf, v in self.bindings.bound.items() if leaf not in GRID_LEAVES}
        if args:
            parts.append(", ".join(f"{describe(leaf)} = {v}" for leaf, v in sorted(args.items())))
        elif self.dynamic_loops:
            parts.append(f"loops with unknown bounds run {self.trips} time{'s' if self.trips != 1 else ''}")
        false = sum(1 for v in self.branches.values() if not v)
        if false:
            parts.append(f"{false} unknown condition(s) false")
        return "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class KernelShape:
    """What every scenario shares: the kernel's mirror, arrays, roots and launch shape."""

    mirror: Mirror
    target_sm: int
    num_warps: int
    cluster: int
    arrays: list[BarrierArray]
    array_of: dict[int, int]  # node id -> array index
    roots: dict[tuple[str, int], str]
    root_of: dict[int, int]  # node id -> root id
    specialize: Node | None
    max_stages: int
    tmem_columns: int = 0  # columns the TMEM regions span (placed, or as the allocator packs them)
    tmem_regions: str = ""  # 'S0' 128, 'S1' 128, ... for messages


def kernel_shape(mirror: Mirror, target_sm: int) -> KernelShape | None:
    """The shape of ``mirror``'s kernel, or None if it has no barrier, pipeline or TMEM op."""
    arrays, array_of, roots, root_of = [], {}, {}, {}
    specialize, stages, relevant = None, 1, False
    tmem = []  # (first column or None, columns, name)

    def visit(blocks: list[Block]):
        nonlocal specialize, stages, relevant
        for b in blocks:
            for n in b.ops:
                a = n.attrs
                if n.name == "fa4.mbarrier_alloc":
                    counts = tuple(a["arrive_counts"]) if a.get("arrive_counts") else (a["arrive_count"],) * a["num_barriers"]
                    array_of[id(n)] = len(arrays)
                    arrays.append(BarrierArray(a["sym_name"], counts, a["arrival"], a.get("cta_group", 1), n.site,
                                               a.get("multicast_mask", 0)))
                    stages = max(stages, a["num_barriers"])
                elif n.name in ("fa4.smem_region", "fa4.tmem_region"):
                    space = "smem" if n.name == "fa4.smem_region" else "tmem"
                    root_of[id(n)] = len(root_of)
                    roots[(space, root_of[id(n)])] = a["sym_name"]
                    if space == "tmem":
                        tmem.append((a.get("column"), a["columns"], a["sym_name"]))
                elif n.name == "fa4.warp_specialize" and specialize is None:
                    specialize = n
                elif n.name == "fa4.pipeline_create":
                    stages = max(stages, a["num_stages"])
                if n.name in PROTOCOL_OPS:
                    relevant = True
                for r in n.regions:
                    visit(r)

    visit(mirror.body)
    if not relevant:
        return None
    num_warps = specialize.attrs["num_warps"] if specialize else _block_warps(mirror)
    cluster = 1
    dims = mirror.attrs.get("nvvm.cluster_dim")
    if dims:
        cluster = int(np.prod(dims))
    elif any(a.cta_group == 2 for a in arrays) or _uses_pairs(mirror.body):
        cluster = 2
    mark_dead(mirror)
    placed = all(col is not None for col, _, _ in tmem)
    span = max((col + cols for col, cols, _ in tmem), default=0) if placed else sum(c for _, c, _ in tmem)
    names = ", ".join(f"'{name}' {cols}" for _, cols, name in tmem)
    return KernelShape(mirror, target_sm, num_warps, cluster, arrays, array_of, roots, root_of, specialize, stages,
                       span, names)


_YIELDS = ("scf.yield", "gpu.yield")
# The operands these ops' semantics read (``semantics.HANDLERS``); every other op reads all of its
# operands. The data operands left out (stored values, vote predicates) carry float work.
_READS = {"llvm.store": (1,), "llvm.load": (0,), "fa4.tmem_store": (0,), "fa4.tmem_load": (0,),
          "nvvm.vote.sync": (), "fa4.wgmma": (0, 1), "fa4.tcgen05_mma": (0, 1, 2), "fa4.tma_store": (1,)}


def _opaque(n: Node) -> bool:
    """Whether the interpreter gives ``n``'s results an opaque value and does nothing else with it
    (``_Run.ops``): a region without protocol ops, or an op without semantics outside fa4."""
    if n.name in _YIELDS:
        return False
    if n.regions:
        return not n.relevant
    return n.name not in _HANDLERS and (not n.name.startswith("fa4.") or n.name in NO_PROTOCOL_EFFECT)


def mark_dead(mirror: Mirror) -> None:
    """Mark the opaque ops (``_opaque``) whose results nothing reads that the interpreter runs: it
    skips them, and every value it does read is computed as before. Live values: the operands of
    every other op (loop bounds, branch conditions, protocol operands, ...), of a live opaque op,
    and, through ``scf.yield``, a loop-carried value or a result of ``scf.for`` / ``scf.if`` that is
    live itself (float work in softmax loops is the bulk of what is skipped)."""
    definer: dict[int, tuple] = {}  # value id -> ("op", node) | ("result", node, i) | ("arg", for node, i)
    yields: dict[int, list[Node]] = {}  # id(scf op) -> the yield ending each of its regions
    roots: list[int] = []
    nodes: list[Node] = []

    def visit(blocks: list[Block]) -> None:
        for b in blocks:
            for n in b.ops:
                nodes.append(n)
                if n.name in ("scf.for", "scf.if") and n.relevant:
                    for i, r in enumerate(n.results):
                        definer[r] = ("result", n, i)
                    yields[id(n)] = [blk.ops[-1] for region in n.regions for blk in region
                                     if blk.ops and blk.ops[-1].name == "scf.yield"]
                    if n.name == "scf.for":
                        roots.extend(n.operands[:3])
                        for i, a in enumerate(n.regions[0][0].args[1:]):
                            definer[a] = ("arg", n, i)
                    else:
                        roots.append(n.operands[0])
                else:
                    for r in n.results:
                        definer[r] = ("op", n)
                    if not _opaque(n) and not (n.name == "scf.yield" and parent_is_scf.get(id(b))):
                        reads = _READS.get(n.name)
                        roots.extend(n.operands if reads is None else [n.operands[i] for i in reads
                                                                       if i < len(n.operands)])
                if not n.relevant:
                    continue  # the interpreter never enters its regions
                for region in n.regions:
                    for blk in region:
                        parent_is_scf[id(blk)] = n.name in ("scf.for", "scf.if")
                    visit(region)

    parent_is_scf: dict[int, bool] = {}
    visit(mirror.body)
    live: set[int] = set()
    alive: set[int] = set()  # ids of opaque nodes some live value needs
    work = list(roots)
    while work:
        v = work.pop()
        if v in live:
            continue
        live.add(v)
        d = definer.get(v)
        if d is None:
            continue
        if d[0] == "op":
            if id(d[1]) not in alive:
                alive.add(id(d[1]))
                work.extend(d[1].operands)
                if d[1].regions:  # a region the interpreter does not enter: what it reads from outside
                    work.extend(captures(d[1]))
            continue
        n, i = d[1], d[2]
        for y in yields.get(id(n), ()):
            if i < len(y.operands):
                work.append(y.operands[i])
        if n.name == "scf.for":  # the initial value, and the loop-carried argument and result
            work.append(n.operands[3 + i])
            work.append(n.regions[0][0].args[1 + i])
            if i < len(n.results):
                work.append(n.results[i])
    for n in nodes:
        n.dead = _opaque(n) and id(n) not in alive


def _block_warps(mirror: Mirror) -> int:
    for key in ("nvvm.reqntid", "nvvm.maxntid", "gpu.known_block_size"):
        dims = mirror.attrs.get(key)
        if dims:
            return max(1, int(np.prod(dims)) // WARP)
    return WARPGROUP // WARP


def _uses_pairs(blocks: list[Block]) -> bool:
    return any(n.attrs.get("cta_group") == 2 or _uses_pairs([b for r in n.regions for b in r])
               for b in blocks for n in b.ops)


def _warpgroups(role: str, warps: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
    """A role's processes: one per warpgroup its warps touch ("role/wg1"), or the role itself within one.
    Warpgroups run apart (wgmma and setmaxnreg are warpgroup-wide, nothing else orders them), so a role
    whose code runs in several derives per-warpgroup values (its turn barrier, its rows) from the thread
    index, each uniform in one warpgroup: run per warpgroup, those are known and the proofs per warpgroup."""
    groups: dict[int, list[int]] = {}
    for w in warps:
        groups.setdefault(w * WARP // WARPGROUP, []).append(w)
    if len(groups) == 1:
        return [(role, warps)]
    return [(f"{role}/wg{g}", tuple(ws)) for g, ws in sorted(groups.items())]


def extract(shape: KernelShape, scenario: Scenario) -> Kernel:
    """The processes of every CTA of the cluster under ``scenario``."""
    processes = []
    for cta in range(shape.cluster):
        processes += _Cta(shape, scenario, cta).processes()
    return Kernel(shape.mirror.name, shape.target_sm, shape.num_warps, shape.cluster, shape.arrays,
                  shape.roots, processes, scenario.describe(), shape.tmem_columns, shape.tmem_regions)


class _Cta:
    def __init__(self, shape: KernelShape, scenario: Scenario, cta: int):
        self.s, self.scenario, self.cta = shape, scenario, cta

    def processes(self) -> list[Process]:
        body = self.s.mirror.body[0]
        spec = self.s.specialize
        all_warps = tuple(range(self.s.num_warps))
        pro = _Run(self, "kernel", all_warps, {}, prologue=True)
        for i, a in enumerate(self.s.mirror.args):
            pro.env[a] = Sym(("arg", i))
        if spec is None:
            pro.block(body, pro.mask)
            return [Process("kernel", self.cta, all_warps, pro.events, prologue=True)]
        at = next((i for i, n in enumerate(body.ops) if n is spec), None)
        if at is None:
            raise Unverifiable(spec.site, "fa4.warp_specialize must sit directly in the kernel body")
        pro.ops(body.ops[:at], pro.mask)
        out = [Process("kernel", self.cta, all_warps, pro.events, prologue=True)]
        epilogue = body.ops[at + 1:]
        busy = set()
        for role in spec.regions[0][0].ops:
            if role.name != "fa4.warp_role":
                continue
            warps = tuple(role.attrs["warps"])
            busy |= set(warps)
            for label, group in _warpgroups(role.attrs["sym_name"], warps):
                run = _Run(self, label, group, pro.env)
                run.block(role.regions[0][0], run.mask)
                run.ops(epilogue, run.mask)
                out.append(Process(run.name, self.cta, group, run.events, loops=run.loops))
        idle = tuple(w for w in all_warps if w not in busy)
        if idle and any(n.relevant for n in epilogue):
            run = _Run(self, "idle warps", idle, pro.env)
            run.ops(epilogue, run.mask)
            out.append(Process(run.name, self.cta, idle, run.events, loops=run.loops))
        return out


class _Run:
    """The interpreter for one process: an environment of values and the events it emits."""

    def __init__(self, cta: _Cta, name: str, warps: tuple[int, ...], outer: dict, prologue: bool = False):
        self.c, self.name, self.warps = cta, name, warps
        self.tids = np.array([w * WARP + lane for w in warps for lane in range(WARP)], dtype=np.int64)
        self.mask = np.ones(len(self.tids), dtype=bool)
        self.outer = outer
        self.env: dict = {}
        self.events: list[Event] = []
        self.loops: list[tuple[Site, int, str]] = []  # loops with run-time bounds, first execution each
        self._threads: dict[bytes, Threads] = {}  # mask -> the threads it selects
        self.prologue = prologue
        self.cta_threads = cta.s.num_warps * WARP

    # ---- values ---------------------------------------------------------------------------------

    def get(self, vid: int):
        if vid in self.env:
            return self.env[vid]
        v = self.outer.get(vid)
        if isinstance(v, np.ndarray) and len(v) == self.cta_threads:  # a per-thread prologue value
            v = v[self.tids]
        if v is None:
            return Sym(("undefined", vid))
        return v

    def value(self, vid: int):
        """The value of ``vid``, with a term whose arguments the scenario has bound resolved to an int."""
        return self.resolve(self.get(vid))

    def resolve(self, v):
        """``v``, an int if it is a term whose arguments the scenario has bound."""
        if isinstance(v, Sym) and not v.varying:
            x = self.c.scenario.bindings.value(v.term)
            if x is not None:
                return x
        return v

    def set(self, node: Node, values) -> None:
        for rid, v in zip(node.results, values):
            self.env[rid] = v

    def threads(self, mask: np.ndarray) -> Threads:
        key = mask.tobytes()
        t = self._threads.get(key)
        if t is None:
            tids = self.tids[mask]
            warps = tuple(sorted(set((tids // WARP).tolist())))
            t = self._threads[key] = Threads(self.c.cta, warps, int(len(tids)),
                                             tuple(tids[tids % WARPGROUP == 0].tolist()))
        return t

    def known(self, node: Node, v, what: str) -> int:
        v = uniform(v)
        if isinstance(v, Sym) and not v.varying and evaluable(v.term):
            v = self.c.scenario.bindings.commit(v.term)
        if isinstance(v, int):
            return v
        raise Unverifiable(node.site, f"the {what} of {node.name} must be known at compile time and the same "
                                      f"in every thread; it depends on {_origin(v)}")

    def emit(self, kind: str, node: Node, mask: np.ndarray, **fields) -> Event:
        e = Event(kind, self.threads(mask), node.site, role=self.name, **fields)
        self.events.append(e)
        return e

    # ---- control flow ---------------------------------------------------------------------------

    def block(self, block: Block, mask: np.ndarray) -> list:
        return self.ops(block.ops, mask)

    def ops(self, ops: list[Node], mask: np.ndarray) -> list:
        for n in ops:
            if n.dead:
                continue
            if n.name in ("scf.yield", "gpu.yield"):
                return [self.get(v) for v in n.operands]
            if n.regions and not n.relevant:  # the same in every thread, or not: ``uniformity``
                self.set(n, region_results(self, n))
                continue
            handler = _HANDLERS.get(n.name)
            if handler is not None:
                handler(self, n, mask)
            elif n.name.startswith("fa4."):
                raise Unverifiable(n.site, f"{n.name} has no protocol semantics in the verifier")
            elif n.regions:
                raise Unverifiable(n.site, f"{n.name} holds protocol ops, but the verifier only follows "
                                           f"scf.if and scf.for; move the protocol ops out of it")
            else:
                self.set(n, [opaque(*[self.get(v) for v in n.operands])] * len(n.results))
        return []

    def scf_if(self, n: Node, mask: np.ndarray) -> None:
        cond = uniform(self.value(n.operands[0]))
        then_blocks, else_blocks = n.regions[0], (n.regions[1] if len(n.regions) > 1 else [])
        if isinstance(cond, Sym):
            if cond.varying:
                raise Unverifiable(n.site, "the verifier cannot tell which threads take this branch: its "
                                           "condition depends on a value that differs per thread and is not "
                                           "known at compile time")
            cond = 1 if self._decide(cond.term) else 0
        if isinstance(cond, int):
            blocks = then_blocks if cond else else_blocks
            self.set(n, self.block(blocks[0], mask) if blocks else [])
            return
        taken = mask & (cond != 0)
        skipped = mask & (cond == 0)
        then_vals = self.block(then_blocks[0], taken) if then_blocks and taken.any() else []
        else_vals = self.block(else_blocks[0], skipped) if else_blocks and skipped.any() else []
        out = []
        for i in range(len(n.results)):
            t = then_vals[i] if i < len(then_vals) else None
            f = else_vals[i] if i < len(else_vals) else None
            if t is None or f is None:
                out.append(t if f is None else f)
            elif is_int(t) and is_int(f):
                out.append(np.where(cond != 0, t, f))
            else:
                out.append(t if t == f else opaque(t, f, self.tids))
        self.set(n, out)

    def _decide(self, term) -> bool:
        """A branch on a value unknown at compile time: the scenario's decision, kept consistent
        with the decisions before it when the condition depends on kernel arguments."""
        sc = self.c.scenario
        want = sc.branch(term)
        if not evaluable(term):
            return want
        taken, forced = sc.bindings.decide(term, want)
        if forced and term in sc.seen and term not in sc.branches:
            sc.seen.remove(term)  # the other way contradicts earlier decisions: nothing to explore
        return taken

    def scf_for(self, n: Node, mask: np.ndarray) -> None:
        lb, ub, step = (uniform(self.value(v)) for v in n.operands[:3])
        values = [self.get(v) for v in n.operands[3:]]
        for bound in (lb, ub, step):
            if isinstance(bound, np.ndarray) or (isinstance(bound, Sym) and bound.varying):
                raise Unverifiable(n.site, "the verifier needs loop bounds that are the same in every thread")
        sc = self.c.scenario
        bounds = [self.get(v) for v in n.operands[:3]]
        lower, upper = bounds[0], bounds[1]
        if sc.cta == "first" and _peeled(lower) and isinstance(upper, Sym) and evaluable(upper.term) \
                and not any(leaf[0] == "mem" for leaf in leaves(upper.term)):
            # ``c to n`` (c > 0) or ``x + c to n``: the first c iterations are peeled, so every launch
            # gives the first CTA n >= the lower bound; a trailing CTA's own range may still be
            # empty, which is what the last-CTA scenarios look for. Not for a bound loaded from memory
            # (a packed sequence's trip count may be 0: its roles must then agree to skip the work)
            low = lower.term if isinstance(lower, Sym) else lower
            sc.precondition(("cmp", 5, 64, substitute(upper.term, {BLOCK: 0}), substitute(low, {BLOCK: 0})))
        if not all(isinstance(x, int) for x in (lb, ub, step)):
            terms = [x.term if isinstance(x, Sym) else x for x in (lb, ub, step)]
            if sc.bindings.solve_trips(*terms, sc.trips) is not None:
                sc.dynamic_loops += 1
                lb, ub, step = (sc.bindings.value(t) for t in terms)
        if all(isinstance(x, int) for x in (lb, ub, step)):
            trips = trip_count(lb, ub, step)
            if trips is None:
                raise Unverifiable(n.site, f"scf.for step must be positive, got {step}")
            if trips > MAX_UNROLL:
                raise Unverifiable(n.site, f"this loop runs {trips} iterations with protocol ops; the verifier "
                                           f"unrolls at most {MAX_UNROLL}")
        elif isinstance(lb, int) and isinstance(step, int) and step > 0:
            # an opaque bound N (a loaded value): N = trips + 1, so a loop peeled by one (``1 to N``)
            # and an unpeeled one (``0 to N``) of another role agree on the tiles they cover
            trips = max(0, -(-(sc.trips + 1 - lb) // step))
            sc.dynamic_loops += 1
            sc.opaque_loops += 1
        else:
            trips = sc.trips
            sc.dynamic_loops += 1
            sc.opaque_loops += 1
        if any(isinstance(b, Sym) for b in bounds) and all(site != n.site for site, _, _ in self.loops):
            terms = [b.term if isinstance(b, Sym) else b for b in bounds]
            text = f"{describe(terms[0])} to {describe(terms[1])}" + (f" step {describe(terms[2])}" if terms[2] != 1 else "")
            self.loops.append((n.site, trips, text))
        body = n.regions[0][0]
        for i in range(trips):
            if isinstance(lb, int) and isinstance(step, int):
                iv = lb + i * step
            else:
                iv = Sym(("iv", id(n), i))
            self.env[body.args[0]] = iv
            for a, v in zip(body.args[1:], values):
                self.env[a] = v
            values = self.block(body, mask)
        self.set(n, values)


def _peeled(lower) -> bool:
    """Whether a loop's lower bound says its first iterations were peeled: a constant > 0, or a
    run-time value plus a constant > 0."""
    if isinstance(lower, int):
        return lower > 0
    if isinstance(lower, Sym) and not lower.varying and lower.term[0] == "bin" and lower.term[1] == "addi":
        return any(isinstance(x, int) and x > 0 for x in lower.term[3:5])
    return False


def _origin(v) -> str:
    if isinstance(v, Sym):
        return "a value that differs per thread" if v.varying else "a kernel argument"
    if isinstance(v, np.ndarray):
        return "the thread index"
    return f"a {type(v).__name__}"


_HANDLERS = {"scf.if": _Run.scf_if, "scf.for": _Run.scf_for, **semantics.HANDLERS}
__all__ = ["Infeasible", "KernelShape", "Scenario", "Unverifiable", "extract", "kernel_shape"]
