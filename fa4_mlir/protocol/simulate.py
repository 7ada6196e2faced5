"""Run a kernel's processes over the hardware semantics of mbarriers and named barriers.

The schedule is canonical: every process runs until it blocks, round-robin, and async work (TMA
bytes, MMA commits) lands at once. One schedule suffices because happens-before, tracked per warp,
proves the others equivalent (a partial-order argument): every arrival of phase ``n`` must know
phase ``n - 1`` completed (else, in another schedule, it lands a phase early: over-arrival), and
phase ``n + 1`` must not be able to complete before a wait that passed on phase ``n`` (else the
wait can miss its phase: a parity error). When both hold, every schedule matches arrivals to the
same phases and passes every wait on the same phase as this one; data races are checked against
happens-before, not against this schedule's order.

mbarrier semantics (PTX): ``init(count)`` starts phase 0 with ``count`` pending arrivals; arrivals
decrement it, ``expect_tx`` adds transaction bytes that TMA ``complete_tx`` removes; the phase
completes when both are zero, and the next starts with ``count`` pending. ``try_wait.parity(p)``
passes once the last completed phase has parity ``p`` (a fresh barrier passes parity 1).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fa4_mlir.protocol.clocks import ClockSpace, Condition, satisfied
from fa4_mlir.protocol.model import WARP, Access, Barrier, Event, Kernel, Process, Site
from fa4_mlir.protocol.races import AccessLog
from fa4_mlir.protocol.violations import Violation, Witness


@dataclasses.dataclass
class Arrival:
    step: int
    process: str
    event: Event
    count: int
    clocks: list[np.ndarray]


@dataclasses.dataclass
class BarrierState:
    count: int
    initialised: bool = False
    completed: int = 0  # phases completed so far; the current phase is number ``completed``
    pending: int = 0
    tx: int = 0  # expected minus delivered transaction bytes of the current phase
    expected: int = 0
    delivered: int = 0
    arrivals: list[list[Arrival]] = dataclasses.field(default_factory=lambda: [[]])
    completion: list[np.ndarray] = dataclasses.field(default_factory=list)
    clock: np.ndarray | None = None


@dataclasses.dataclass
class NamedState:
    expected: int
    site: Site
    arrived: int = 0
    generation: int = 0
    clock: np.ndarray | None = None
    completion: list[np.ndarray] = dataclasses.field(default_factory=list)
    members: list[tuple[str, Event]] = dataclasses.field(default_factory=list)
    previous: list[tuple[str, Event]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Wait:
    step: int
    process: str
    event: Event
    phase: int  # the phase it passed on (-1: a fresh barrier's parity-1 wait)
    times: dict[int, int]  # warp component -> that warp's own time at the wait


class Simulation:
    """One canonical run of ``kernel``; ``violations`` holds what it found."""

    def __init__(self, kernel: Kernel, max_steps: int = 2_000_000):
        self.k = kernel
        self.max_steps = max_steps
        barriers = [Barrier(c, a, i) for c in range(kernel.cluster) for a, arr in enumerate(kernel.arrays)
                    for i in range(len(arr.counts))]
        named = sorted({(e.threads.cta, e.name) for p in kernel.processes for e in p.events if e.kind == "named"})
        named += [(c, "__cta__") for c in range(kernel.cluster)] + [(-1, "__cluster__")]
        self.space = ClockSpace(kernel.num_warps, kernel.cluster, barriers, named)
        self.clock = {(c, w): self.space.zero() for c in range(kernel.cluster) for w in range(kernel.num_warps)}
        self.bars = {b: BarrierState(kernel.arrays[b.array].counts[b.index]) for b in barriers}
        self.named: dict[tuple[int, str], NamedState] = {}
        self.waits: list[Wait] = []
        self.step = 0
        self.witness = Witness(kernel)
        self.violations: list[Violation] = []
        self.log = AccessLog(self)
        self.tmem_alloc: dict[int, tuple[Event, dict[int, int]]] = {}
        self.tmem_freed: dict[int, Event] = {}
        # (event, the CTA it reaches, barrier or access, step, for a thread arrival the condition "its warps' steps
        # so far are known"); checked when the kernel ends (a CTA must not exit before what reaches it)
        self.remote: list[tuple[Event, int, Barrier | None, Access | None, int, Condition | None]] = []
        self.arrived_gen: dict[int, int] = {}  # process index -> generation it waits for at a sync
        self.pc = [0] * len(kernel.processes)
        self._warps: dict[int, tuple] = {}  # id(Threads) -> (the Threads, kept alive, and its warps)

    # ---- running ------------------------------------------------------------------------------

    def run(self) -> list[Violation]:
        procs = self.k.processes
        progressed = True
        while progressed and self.step < self.max_steps:
            progressed = False
            for i, p in enumerate(procs):
                if p.prologue is False and not self._prologue_done(p.cta):
                    continue
                while self.pc[i] < len(p.events) and self._try(i, p, p.events[self.pc[i]]):
                    self.pc[i] += 1
                    self.step += 1
                    progressed = True
        if self.step >= self.max_steps:
            self.violations.append(Violation(
                "limit", self.step, procs[0].events[0].site if procs[0].events else Site("kernel"),
                f"the protocol run exceeded {self.max_steps} steps; verify a smaller configuration or "
                f"raise the pass option max-steps", key=("limit",)))
            return self.violations
        stuck = [i for i, p in enumerate(procs) if self.pc[i] < len(p.events)]
        if stuck:
            from fa4_mlir.protocol.deadlock import diagnose_deadlock
            self.violations.extend(diagnose_deadlock(self, stuck))
        self._check_waits()
        self._check_end()
        return self.violations

    def _prologue_done(self, cta: int) -> bool:
        return all(self.pc[i] >= len(p.events) for i, p in enumerate(self.k.processes)
                   if p.prologue and p.cta == cta)

    def _try(self, i: int, p: Process, e: Event) -> bool:
        kind = e.kind
        if kind == "wait":
            return self._wait(p, e)
        if kind in ("named", "cta_barrier"):
            return self._named(i, p, e)
        getattr(self, "_" + kind)(p, e)
        return True

    # ---- clocks ---------------------------------------------------------------------------------

    def warps(self, e: Event) -> tuple[tuple[int, int], ...]:
        """(CTA, warp) of each executing warp; one tuple per ``Threads`` (the events of a run share them)."""
        t = e.threads
        out = self._warps.get(id(t))
        if out is None:
            out = self._warps[id(t)] = (t, tuple((t.cta, w) for w in t.warps))
        return out[1]

    def tick(self, e: Event) -> list[np.ndarray]:
        """Advance the executing warps' own components; their clocks after the step."""
        out = []
        for key in self.warps(e):
            vc = self.clock[key]
            vc[self.space.warp(*key)] += 1
            out.append(vc.copy())
        return out

    def acquire(self, e: Event, clock: np.ndarray) -> None:
        for key in self.warps(e):
            np.maximum(self.clock[key], clock, out=self.clock[key])

    def own_times(self, e: Event) -> dict[int, int]:
        out = {}
        for key in self.warps(e):
            c = self.space.warp(*key)
            out[c] = int(self.clock[key][c])
        return out

    def warp_condition(self, e: Event) -> Condition:
        """End condition "every executing warp's step so far is known"."""
        return [[(c, t) for c, t in self.own_times(e).items()]]

    # ---- mbarriers ------------------------------------------------------------------------------

    def label(self, b: Barrier, phase: int | None = None) -> str:
        name = self.k.arrays[b.array].name
        text = f"{name}[{b.index}]"
        if self.k.cluster > 1:
            text += f" of CTA {b.cta}"
        return text if phase is None else f"{text} phase {phase}"

    def _usable(self, b: Barrier, p: Process, e: Event) -> BarrierState:
        s = self.bars[b]
        if not s.initialised:
            self.violations.append(Violation(
                "init", self.step, e.site,
                f"{self.label(b)} is used by {p.name} before any fa4.mbarrier_init of "
                f"'{self.k.arrays[b.array].name}'; initialise it before fa4.warp_specialize",
                key=("init", b.cta, b.array)))
            s.initialised, s.pending = True, s.count
        return s

    def _wait(self, p: Process, e: Event) -> bool:
        s = self._usable(e.barrier, p, e)
        if s.completed % 2 == e.parity:
            return False
        phase = s.completed - 1
        if phase >= 0:
            self.acquire(e, s.completion[phase])
        self.tick(e)
        self.waits.append(Wait(self.step, p.name, e, phase, self.own_times(e)))
        self.witness.record(self.step, p, e, f"{self.label(e.barrier)} parity {e.parity} passes "
                                             f"({'fresh barrier' if phase < 0 else f'phase {phase} done'})",
                            barriers=[e.barrier])
        return True

    def _check_order(self, b: Barrier, s: BarrierState, p: Process, e: Event, clocks, what: str, cls: str):
        """Rule 1: an arrival for phase n must know phase n - 1 completed."""
        if s.completed == 0:
            return
        comp = self.space.barrier[b]
        if all(vc[comp] >= s.completed for vc in clocks):
            return
        prev = s.arrivals[s.completed - 1]
        others = "; ".join(sorted({f"{a.process} ({a.event.site.where()})" for a in prev}))
        self.violations.append(Violation(
            cls, self.step, e.site,
            f"{what} of {p.name} on {self.label(b)} is not ordered after phase {s.completed - 1} "
            f"completed, so in another schedule it lands in phase {s.completed - 1}, whose arrivals "
            f"come from {others}: make it wait for that phase (or give each arriving group its own barrier)",
            key=(cls, b.cta, b.array, e.site), barriers=[b]))

    def _arrive_on(self, b: Barrier, n: int, tx: int, p: Process, e: Event, clocks, what: str) -> None:
        s = self._usable(b, p, e)
        self._check_order(b, s, p, e, clocks, what, "over-arrival")
        if n > s.pending:
            self.violations.append(Violation(
                "over-arrival", self.step, e.site,
                f"{self.label(b, s.completed)} expects {s.count} arrivals and has {s.pending} left, "
                f"but {p.name} ({e.threads.describe()}) arrives {n} times at {e.site.where()}: the arrive "
                f"count must equal the arrivals of one phase",
                key=("over-arrival", b.cta, b.array), barriers=[b]))
            n = s.pending
        s.pending -= n
        s.tx += tx
        s.expected += tx
        self._join(s, clocks)
        s.arrivals[-1].append(Arrival(self.step, p.name, e, n, clocks))
        self._settle(b, s, p, e)

    def _join(self, s: BarrierState, clocks) -> None:
        for vc in clocks:
            s.clock = vc.copy() if s.clock is None else np.maximum(s.clock, vc)

    def _settle(self, b: Barrier, s: BarrierState, p: Process, e: Event) -> None:
        if s.pending == 0 and s.tx < 0:
            self.violations.append(Violation(
                "tx-mismatch", self.step, e.site,
                f"{self.label(b, s.completed)}: TMA loads deliver {s.delivered} bytes but expect_tx "
                f"announced {s.expected}; the expect_tx bytes must equal the bytes of the phase's loads"
                + (" (of both CTAs of a pair)" if self.k.arrays[b.array].cta_group == 2 else ""),
                key=("tx-mismatch", b.cta, b.array), barriers=[b]))
            s.tx = 0
        if s.pending == 0 and s.tx == 0:
            clock = s.clock if s.clock is not None else self.space.zero()
            clock = clock.copy()
            clock[self.space.barrier[b]] = s.completed + 1
            s.completion.append(clock)
            s.completed += 1
            s.pending, s.tx, s.expected, s.delivered, s.clock = s.count, 0, 0, 0, None
            s.arrivals.append([])
            self.witness.note_completion(self.label(b, s.completed - 1))

    def _arrive(self, p: Process, e: Event) -> None:
        clocks = self.tick(e)
        tx = dict((b, n) for b, n in e.tx)
        text = []
        for b, n in e.arrivals:
            extra = tx.pop(b, 0)
            text.append(f"{self.label(b, self.bars[b].completed)} arrive {n}" + (f", expect {extra} B" if extra else ""))
            if b.cta != e.threads.cta:  # a remote arrival (a pair's leader barrier, a multicast_mask array)
                self.remote.append((e, b.cta, b, None, self.step, self.warp_condition(e)))
            self._arrive_on(b, n, extra, p, e, clocks, "the arrival")
        self.witness.record(self.step, p, e, "; ".join(text), barriers=[b for b, _ in e.arrivals])

    def _tma_load(self, p: Process, e: Event) -> None:
        clocks = self.tick(e)
        ends = {}
        text = []
        for b, n in e.tx:
            s = self._usable(b, p, e)
            self._check_order(b, s, p, e, clocks, "the complete_tx of the TMA load", "tx-mismatch")
            ends[b] = [[(self.space.barrier[b], s.completed + 1)]]
            text.append(f"{self.label(b, s.completed)} complete_tx {n} B")
        for acc in e.accesses:
            self.log.record(p, e, acc, clocks, ends.get(acc.barrier) if acc.barrier is not None else None)
            if acc.resource.cta != e.threads.cta:
                self.remote.append((e, acc.resource.cta, None, acc, self.step, None))
        for b, n in e.tx:
            s = self.bars[b]
            s.tx -= n
            s.delivered += n
            self._join(s, clocks)
            s.arrivals[-1].append(Arrival(self.step, p.name, e, 0, clocks))
            if b.cta != e.threads.cta:
                self.remote.append((e, b.cta, b, None, self.step, None))
            self._settle(b, s, p, e)
        self.witness.record(self.step, p, e, "; ".join(text), barriers=[b for b, _ in e.tx])

    def _commit(self, p: Process, e: Event) -> None:
        clocks = self.tick(e)
        end: Condition = []
        text = []
        for b, n in e.arrivals:
            s = self._usable(b, p, e)
            end.append([(self.space.barrier[b], s.completed + 1)])
            text.append(f"{self.label(b, s.completed)} commit arrive {n}")
        if self.k.target_sm < 100:  # sm_90a: the commit waits for the warpgroup's wgmmas itself
            end += self.warp_condition(e)
        self.log.complete_mma(e, end)
        for b, n in e.arrivals:
            if b.cta != e.threads.cta:
                self.remote.append((e, b.cta, b, None, self.step, None))
            self._arrive_on(b, n, 0, p, e, clocks, "the MMA commit")
        self.witness.record(self.step, p, e, "; ".join(text), barriers=[b for b, _ in e.arrivals])

    # ---- MMA, TMA stores, plain accesses ----------------------------------------------------------

    def _mma(self, p: Process, e: Event) -> None:
        clocks = self.tick(e)
        if e.pair and e.threads.cta % 2:
            self.violations.append(Violation(
                "cta-pair", self.step, e.site,
                f"a cta_group = 2 MMA is issued by {p.name} in CTA {e.threads.cta}, the odd CTA of its "
                f"pair: only the leader (even) CTA issues the pair's MMAs; guard it with the CTA rank",
                key=("cta-pair", "mma", e.site)))
        for acc in e.accesses:
            self.log.record(p, e, acc, clocks, None)
            if acc.resource.cta != e.threads.cta:
                self.remote.append((e, acc.resource.cta, None, acc, self.step, None))
        self.witness.record(self.step, p, e, "MMA issued", barriers=[])

    def _wgmma_commit(self, p: Process, e: Event) -> None:
        self.tick(e)
        self.log.close_group(e, "mma")

    def _wgmma_wait(self, p: Process, e: Event) -> None:
        self.tick(e)
        self.log.wait_groups(e, "mma", e.pending, self.warp_condition(e))

    def _tma_store(self, p: Process, e: Event) -> None:
        clocks = self.tick(e)
        for acc in e.accesses:
            self.log.record(p, e, acc, clocks, None)
        self.log.close_group(e, "store")
        self.witness.record(self.step, p, e, "TMA store issued", barriers=[])

    def _store_wait(self, p: Process, e: Event) -> None:
        self.tick(e)
        self.log.wait_groups(e, "store", e.pending, self.warp_condition(e))

    def _access(self, p: Process, e: Event) -> None:
        clocks = self.tick(e)
        for acc in e.accesses:
            self.log.record(p, e, acc, clocks, self.warp_condition(e))

    def _proxy_fence(self, p: Process, e: Event) -> None:
        self.tick(e)
        self.log.fence(e)
        self.witness.record(self.step, p, e, "fence.proxy.async", barriers=[])

    def _init(self, p: Process, e: Event) -> None:
        self.tick(e)
        for b, s in self.bars.items():
            if b.array == e.array and b.cta == e.threads.cta:
                s.initialised, s.pending, s.completed = True, s.count, 0
                s.arrivals, s.completion, s.tx, s.clock = [[]], [], 0, None

    def _tmem_alloc(self, p: Process, e: Event) -> None:
        self.tick(e)
        cta = e.threads.cta
        self._one_warp(p, e, "fa4.tmem_alloc", "allocates for the CTA")
        if cta in self.tmem_alloc and cta not in self.tmem_freed:
            first = self.tmem_alloc[cta][0]
            self.violations.append(Violation(
                "tmem", self.step, e.site,
                f"{p.name} allocates TMEM at {e.site.where()} while the allocation at {first.site.where()} "
                f"({first.role}) is still live: allocate once per CTA and deallocate before allocating again",
                key=("tmem", cta, "twice")))
        columns, need = e.detail.get("columns"), self.k.tmem_columns
        if columns is not None and columns < need:
            self.violations.append(Violation(
                "tmem", self.step, e.site,
                f"fa4.tmem_alloc allocates {columns} columns, but the kernel's TMEM regions span {need} "
                f"({self.k.tmem_regions}): allocate at least {need} columns (a power of two >= 32)",
                key=("tmem", cta, "columns")))
        self.tmem_alloc[cta] = (e, self.own_times(e))
        self.tmem_freed.pop(cta, None)

    def _one_warp(self, p: Process, e: Event, op: str, what: str) -> None:
        if len(e.threads.warps) == 1 and e.threads.count == WARP:
            return
        self.violations.append(Violation(
            "tmem", self.step, e.site,
            f"{op} (TMEM regions {self.k.tmem_regions or 'none'}) must be executed by exactly one whole warp "
            f"(its tcgen05 instruction is .sync.aligned, and one warp {what}), got {e.threads.describe()} of "
            f"{p.name}: guard it with a warp index test",
            key=("tmem", e.threads.cta, "warps", e.site)))

    def _tmem_dealloc(self, p: Process, e: Event) -> None:
        clocks = self.tick(e)
        cta = e.threads.cta
        self._one_warp(p, e, "fa4.tmem_dealloc", "frees the CTA's allocation")
        if cta not in self.tmem_alloc:
            self.violations.append(Violation(
                "tmem", self.step, e.site, f"{p.name} deallocates TMEM that no fa4.tmem_alloc allocated",
                key=("tmem", cta, "dealloc")))
        elif cta in self.tmem_freed:
            self.violations.append(Violation(
                "tmem", self.step, e.site,
                f"{p.name} deallocates TMEM at {e.site.where()} that {self.tmem_freed[cta].site.where()} "
                f"({self.tmem_freed[cta].role}) already freed: deallocate once",
                key=("tmem", cta, "double-free")))
        else:
            alloc = self.tmem_alloc[cta][0]
            if alloc.threads.warps != e.threads.warps and len(alloc.threads.warps) == len(e.threads.warps) == 1:
                self.violations.append(Violation(
                    "tmem", self.step, e.site,
                    f"TMEM (regions {self.k.tmem_regions or 'none'}) allocated by warp {alloc.threads.warps[0]} "
                    f"({alloc.role}, {alloc.site.where()}) is "
                    f"deallocated by warp {','.join(map(str, e.threads.warps))} ({p.name}): one warp of the CTA "
                    f"must perform both the allocation and the deallocation (PTX ISA, tcgen05.alloc); "
                    f"deallocate in the allocating warp", key=("tmem", cta, "owner")))
        for acc in e.accesses:
            self.log.record(p, e, acc, clocks, self.warp_condition(e))
        self.tmem_freed[cta] = e
        self.witness.record(self.step, p, e, "TMEM deallocated", barriers=[])

    # ---- named barriers and the CTA / cluster barrier ---------------------------------------------

    def _named(self, i: int, p: Process, e: Event) -> bool:
        if e.kind == "cta_barrier":
            key = (-1, "__cluster__") if e.scope == "cluster" else (e.threads.cta, "__cta__")
            expected = self.k.num_warps * WARP * (self.k.cluster if e.scope == "cluster" else 1)
        else:
            key, expected = (e.threads.cta, e.name), e.expected
        st = self.named.get(key)
        if st is None:
            st = self.named[key] = NamedState(expected, e.site)
        if i in self.arrived_gen:  # arrived earlier; passes once that generation completed
            if st.generation <= self.arrived_gen[i]:
                return False
            self.acquire(e, st.completion[self.arrived_gen.pop(i)])
            self.tick(e)
            return True
        if e.kind == "named" and e.expected != st.expected:
            self.violations.append(Violation(
                "named-barrier", self.step, e.site,
                f"named barrier '{e.name}' counts {e.expected} threads at {e.site.where()} but "
                f"{st.expected} at {st.site.where()}: every use of one barrier must give the same count",
                key=("named-barrier", e.name, "count")))
        clocks = self.tick(e)
        comp = self.space.named[key]
        if e.kind == "named" and st.generation and any(vc[comp] < st.generation for vc in clocks):
            last = "; ".join(sorted({f"{n} ({ev.site.where()})" for n, ev in st.previous}))
            self.violations.append(Violation(
                "named-barrier", self.step, e.site,
                f"named barrier '{e.name}' (one hardware id) is reused by {p.name} ({e.threads.describe()}) "
                f"without being ordered after its previous use by {last}: the two groups' arrivals can "
                f"mix; give each group its own barrier name",
                key=("named-barrier", e.name, "reuse")))
        arrive = len(e.threads.warps) * WARP  # bar.sync counts whole warps
        st.arrived += arrive
        for vc in clocks:
            st.clock = vc.copy() if st.clock is None else np.maximum(st.clock, vc)
        st.members.append((p.name, e))
        what = f"named barrier '{e.name}'" if e.kind == "named" else f"the {e.scope} barrier after fa4.mbarrier_init"
        self.witness.record(self.step, p, e, f"{what}: arrive {arrive} ({st.arrived} of {st.expected})", barriers=[])
        if st.arrived > st.expected:
            who = "; ".join(f"{n} ({ev.threads.describe()}, {ev.site.where()})" for n, ev in st.members)
            self.violations.append(Violation(
                "named-barrier", self.step, e.site,
                f"named barrier '{e.name}' counts {st.expected} threads but {st.arrived} arrive in one "
                f"generation: {who}; the thread count must equal the threads that meet there",
                key=("named-barrier", e.name, "over")))
            st.arrived = st.expected
        gen = st.generation
        if st.arrived == st.expected:
            clock = st.clock.copy()
            clock[comp] = gen + 1
            st.completion.append(clock)
            st.generation += 1
            st.arrived, st.clock, st.members, st.previous = 0, None, [], st.members
        if e.kind == "named" and not e.sync:
            return True
        self.arrived_gen[i] = gen
        self.pc[i] -= 1  # re-enter this event to pass it once the generation completes
        return True

    # ---- checks after the run -------------------------------------------------------------------

    def _check_waits(self) -> None:
        """Rule 2: phase n + 1 must not be able to complete before a wait that passed on phase n."""
        for w in self.waits:
            b = w.event.barrier
            s = self.bars[b]
            nxt = w.phase + 1
            if nxt >= s.completed:
                continue
            arrivals = s.arrivals[nxt]
            if all(any(vc[c] >= t for a in arrivals for vc in a.clocks) for c, t in w.times.items()):
                continue
            what = ("a fresh barrier, so it passes at once" if w.phase < 0
                    else f"phase {w.phase}")
            by = "; ".join(sorted({f"{a.process} ({a.event.site.where()})" for a in arrivals}))
            self.violations.append(Violation(
                "parity", w.step, w.event.site,
                f"the wait of {w.process} on {self.label(b)} for parity {w.event.parity} passes on "
                f"{what}, but phase {nxt} can complete before the wait runs (its arrivals from {by} do "
                f"not depend on it), and then the wait blocks or passes on the wrong phase: check the "
                f"phase the wait starts from",
                key=("parity", b.cta, b.array, w.event.site), barriers=[b]))

    def _check_partial_phases(self) -> None:
        """A phase some role arrived on that never completes before the kernel exits: the roles
        that arrive on the barrier did so a different number of times (one skipped its last tile)."""
        from fa4_mlir.protocol.deadlock import loop_mismatch

        for b, s in self.bars.items():
            arrived = s.count - s.pending
            if not s.initialised or not (0 < arrived or s.expected or s.delivered):
                continue
            who = "; ".join(sorted({f"{a.process} ({a.event.site.where()})" for a in s.arrivals[-1]}))
            loops = loop_mismatch([p for p in self.k.processes if p.cta == b.cta])
            site = s.arrivals[-1][0].event.site if s.arrivals[-1] else self.k.arrays[b.array].site
            self.violations.append(Violation(
                "under-arrival", self.step, site,
                f"{self.label(b, s.completed)} has {arrived} of its {s.count} arrivals"
                + (f" and {s.delivered} of {s.expected} tx bytes" if s.expected or s.delivered else "")
                + f" when the kernel exits (from {who}): the roles that arrive on it must do so equally "
                f"often; " + (loops or "one of them arrives fewer times than the others"),
                key=("under-arrival", b.cta, b.array, "exit"), barriers=[b]))

    def _check_end(self) -> None:
        procs = self.k.processes
        finished = all(self.pc[i] >= len(p.events) for i, p in enumerate(procs))
        exits = {}
        for c in range(self.k.cluster):
            vc = self.space.zero()
            for w in range(self.k.num_warps):
                np.maximum(vc, self.clock[(c, w)], out=vc)
            exits[c] = vc
        if finished:
            self.log.check_exit(exits)
            self._check_partial_phases()
        for (cta, name), st in self.named.items():
            if finished and st.arrived and not name.startswith("__"):
                who = "; ".join(f"{n} ({ev.threads.describe()}, {ev.site.where()})" for n, ev in st.members)
                self.violations.append(Violation(
                    "named-barrier", self.step, st.members[0][1].site,
                    f"named barrier '{name}' counts {st.expected} threads but only {st.arrived} meet there "
                    f"({who}) before the kernel exits: the thread count must equal the threads that meet there",
                    key=("named-barrier", name, "under")))
        regions = ", ".join(f"'{n}'" for (space, _), n in self.k.roots.items() if space == "tmem")
        for cta, (e, _) in self.tmem_alloc.items():
            if cta not in self.tmem_freed:
                self.violations.append(Violation(
                    "tmem", self.step, e.site,
                    f"TMEM (regions {regions or 'none'}) allocated by {e.role} at {e.site.where()} is not deallocated before the kernel "
                    f"exits{f' in CTA {cta}' if self.k.cluster > 1 else ''}: add fa4.tmem_dealloc after its "
                    f"last use", key=("tmem", cta, "leak")))
        if self.k.cluster == 1:
            return
        done = {c: all(self.pc[i] >= len(p.events) for i, p in enumerate(procs) if p.cta == c)
                for c in range(self.k.cluster)}
        for e, cta, b, acc, step, after in self.remote:
            if not done.get(cta):
                continue
            if b is not None:
                # known: the CTA waited for the phase the arrival completes, or (a thread arrival) it knows a later
                # step of the arriving warps (their next arrival, released after this one, reached it)
                phase = next((n for n, arr in enumerate(self.bars[b].arrivals) for a in arr if a.event is e), None)
                known = phase is not None and exits[cta][self.space.barrier[b]] >= phase + 1 or satisfied(
                    after, exits[cta])
                what = self.label(b)  # names the CTA
            else:
                known = self.log.known_by(e, acc, exits[cta])
                what = f"{acc.what or acc.resource.space} of CTA {cta}"
            if not known:
                self.violations.append(Violation(
                    "cta-pair", step, e.site,
                    f"CTA {cta} can exit while CTA {e.threads.cta} still signals it: {e.role} "
                    f"({e.site.where()}) reaches {what}, and no thread of CTA {cta} waits "
                    f"for that before exiting; end the kernel with a wait on it (or a cluster barrier)",
                    key=("cta-pair", cta, e.site)))
