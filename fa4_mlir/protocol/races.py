"""Shared-memory and TMEM accesses, and the races between them.

Two accesses conflict when they overlap and one writes; plain loads and stores are tracked per
region (or stage, or alias). Those of one role by the same threads are assumed to touch each
thread's own part; when the threads differ (warp 0 writes a scratch buffer that the whole role then
reads) they must be ordered like any others. The later access must know that the earlier one
ended: a plain load or store when its warps' steps are known; a TMA load when its barrier phase is
known complete; an MMA when the commit (or wgmma wait) after it is; a TMA store when the issuing
thread's store wait is. MMAs of one issuing warp run in order and never race each other.

Proxies: plain stores write shared memory through the generic proxy; TMA stores and MMAs read it
through the async proxy. A generic write that an async read depends on must be followed, in each
writing warp, by ``fence.proxy.async`` before the synchronisation that orders it before the read
(the TMA store's own fence covers only its issuing thread's writes).

An access that a later write covers and knows ended is dropped: whatever conflicts with it
conflicts with the write, and knowing the write ended means knowing the earlier access did.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fa4_mlir.protocol.clocks import Condition, satisfied
from fa4_mlir.protocol.model import Access, Event, Process, Resource
from fa4_mlir.protocol.violations import Violation


@dataclasses.dataclass
class Record:
    process: str
    event: Event
    access: Access
    clocks: list[np.ndarray]
    end: Condition | None
    step: int
    known: set = dataclasses.field(default_factory=set)  # warps whose clock already knows it ended
    fences: dict = dataclasses.field(default_factory=dict)  # generic write: warp component -> its fence time


def _covers(a: Resource, b: Resource) -> bool:
    if a.space != b.space or a.cta != b.cta:
        return False
    if a.root == -1:
        return True
    return a.root == b.root and a.lo <= b.lo and a.hi >= b.hi and (a.lanes & b.lanes) == b.lanes


class AccessLog:
    def __init__(self, sim):
        self.sim = sim
        self.by_root: dict[tuple[str, int, int], list[Record]] = {}
        self.inflight: dict[tuple[str, int, int], list[list[Record]]] = {}  # (mode, cta, warp) -> groups
        self.chains: dict[tuple[int, int], list[list]] = {}  # (cta, warp) -> end conditions commits extend
        self.unfenced: dict[tuple[int, int], list[Record]] = {}  # (cta, warp) -> generic smem writes
        self.records: dict[tuple[int, int], Record] = {}  # (id(event), id(access)) -> its record
        self.reported: set = set()

    def _lists(self, acc: Access) -> list[list[Record]]:
        r = acc.resource
        if r.root == -1:
            return [v for (space, cta, _), v in self.by_root.items() if space == r.space and cta == r.cta]
        return [self.by_root.get((r.space, r.cta, r.root), []), self.by_root.get((r.space, r.cta, -1), [])]

    def record(self, p: Process, e: Event, acc: Access, clocks, end: Condition | None) -> None:
        rec = Record(p.name, e, acc, clocks, end, self.sim.step)
        self.records[(id(e), id(acc))] = rec
        if acc.resource.space == "tmem" and acc.mode != "dealloc":
            self._check_allocated(rec)
        warps = self.sim.warps(e)
        async_read = not acc.write and acc.mode in ("mma", "store") and acc.resource.space == "smem"
        for records in self._lists(acc):
            if not acc.write:  # a read conflicts with earlier writes only, and removes nothing
                for old in records:
                    if old.access.write and old.access.resource.overlaps(acc.resource):
                        if not (self._in_order(old, rec) or self._known_ended(old, warps, clocks)):
                            self._report(old, rec)
                        elif async_read and old.access.mode == "sync":
                            self._check_fenced(old, rec, warps, clocks)
                continue
            keep = []
            for old in records:
                if not (old.access.write or acc.write) or not old.access.resource.overlaps(acc.resource):
                    keep.append(old)
                    continue
                ordered = self._in_order(old, rec) or self._known_ended(old, warps, clocks)
                if not ordered:
                    self._report(old, rec)
                elif async_read and old.access.write and old.access.mode == "sync":
                    self._check_fenced(old, rec, warps, clocks)
                if not (ordered and acc.write and _covers(acc.resource, old.access.resource)):
                    keep.append(old)
            records[:] = keep
        self.by_root.setdefault((acc.resource.space, acc.resource.cta, acc.resource.root), []).append(rec)
        if acc.mode in ("mma", "store"):
            for cta, warp in warps:
                groups = self.inflight.setdefault((acc.mode, cta, warp), [[]])
                groups[-1].append(rec)
        elif acc.write and acc.mode == "sync" and acc.resource.space == "smem":
            for key in warps:
                self.unfenced.setdefault(key, []).append(rec)

    def fence(self, e: Event) -> None:
        """``fence.proxy.async`` by the warps of ``e``: their generic writes so far become visible to
        the async proxy once the fence is known."""
        for key in self.sim.warps(e):
            comp = self.sim.space.warp(*key)
            time = int(self.sim.clock[key][comp])
            for rec in self.unfenced.pop(key, []):
                rec.fences[comp] = time

    def _check_fenced(self, old: Record, new: Record, warps, clocks) -> None:
        """An async read of a generic write: every writing warp fenced after the write, and the
        reader knows those fences; the TMA store's own fence covers its issuing threads' writes."""
        if new.access.mode == "store" and old.event.threads == new.event.threads:
            return
        needed = [self.sim.space.warp(old.event.threads.cta, w) for w in old.event.threads.warps]
        if all(c in old.fences and all(vc[c] >= old.fences[c] for vc in clocks) for c in needed):
            return
        key = ("fence", old.event.site, new.event.site)
        if key in self.reported:
            return
        self.reported.add(key)
        what = "the TMA store" if new.access.mode == "store" else "the MMA"
        missing = [c for c in needed if c not in old.fences]
        why = ("no fence.proxy.async follows the write in " + ("its warps" if len(needed) > 1 else "its warp")
               if missing else "the fence.proxy.async after the write is not ordered before the read")
        self.sim.violations.append(Violation(
            "fence", new.step, new.event.site,
            f"{what} at {new.event.site.where()} ({new.process}) reads {new.access.what} through the async "
            f"proxy, but {old.event.site.where()} ({old.process}) wrote it through the generic proxy and "
            f"{why}: add nvvm.fence.proxy {{kind = #nvvm.proxy_kind<async.shared>, space = "
            f"#nvvm.shared_space<cta>}} in the writing threads after their stores and before the barrier "
            f"that hands the buffer to {what}",
            key=key, steps=[old.step, new.step]))

    @staticmethod
    def _known_ended(old: Record, warps, clocks) -> bool:
        """Whether every warp of the new access knows ``old`` ended; a warp's clock only grows, so
        once it knows, it is remembered."""
        for warp, vc in zip(warps, clocks):
            if warp in old.known:
                continue
            if not satisfied(old.end, vc):
                return False
            old.known.add(warp)
        return True

    @staticmethod
    def _in_order(old: Record, new: Record) -> bool:
        """Pairs that never race: MMAs issued by one warp (they execute in issue order), and plain
        loads and stores of one role by the same threads (each thread touches its own part of a
        buffer; addresses are not tracked below the region)."""
        same_cta = old.event.threads.cta == new.event.threads.cta
        if old.access.mode == new.access.mode == "mma":
            return same_cta and bool(set(old.event.threads.warps) & set(new.event.threads.warps))
        return (old.access.mode == new.access.mode == "sync" and old.process == new.process
                and old.event.threads == new.event.threads)

    def _check_allocated(self, rec: Record) -> None:
        cta = rec.access.resource.cta
        alloc = self.sim.tmem_alloc.get(cta)
        known = alloc is not None and all(all(vc[c] >= t for c, t in alloc[1].items()) for vc in rec.clocks)
        if known or ("tmem-alloc", rec.event.site) in self.reported:
            return
        self.reported.add(("tmem-alloc", rec.event.site))
        where = "" if alloc is None else f" ({alloc[0].site.where()})"
        self.sim.violations.append(Violation(
            "tmem", rec.step, rec.event.site,
            f"{rec.process} uses TMEM ({rec.access.what}) before it is known to be allocated{where}: "
            f"order the use after fa4.tmem_alloc (e.g. a named barrier the allocating warp arrives at)",
            key=("tmem", cta, "alloc", rec.event.site)))

    def _report(self, old: Record, new: Record) -> None:
        key = (old.event.site, new.event.site)
        if key in self.reported:
            return
        self.reported.add(key)
        a, b = old.access, new.access
        dealloc = "dealloc" in (a.mode, b.mode)
        if dealloc and b.mode == "dealloc":
            message = (f"TMEM is deallocated by {new.process} at {new.event.site.where()} while "
                       f"{old.event.site.where()} ({old.process}) may still {_verb(old)} {a.what}: "
                       f"deallocate after the last use is known complete")
        elif dealloc:
            message = (f"{new.process} uses TMEM ({b.what}) at {new.event.site.where()} after it may have "
                       f"been deallocated at {old.event.site.where()} ({old.process})")
        else:
            message = (f"race on {b.what}: {new.event.site.where()} ({new.process}) {_verb(new)}s it while "
                       f"{old.event.site.where()} ({old.process}) may still {_verb(old)} it; "
                       f"{_advice(old, new)}")
        self.sim.violations.append(Violation(
            "tmem" if dealloc else "race", new.step, new.event.site, message,
            key=("tmem" if dealloc else "race", old.event.site, new.event.site), steps=[old.step, new.step]))

    # ---- completion of async accesses ---------------------------------------------------------

    def complete_mma(self, e: Event, end: Condition) -> None:
        """A commit: every MMA its warps issued before it ends at ``end`` at the latest. One an
        earlier commit covered also ends there (a commit tracks all earlier MMAs of the thread), so
        ``end`` becomes one more alternative of its condition: the MMAs a commit covers first share
        one list of alternatives that every later commit extends."""
        for cta, warp in self.sim.warps(e):
            chains = self.chains.setdefault((cta, warp), [])
            for chain in chains:
                chain.extend(end)
            fresh = list(end)
            for group in self.inflight.pop(("mma", cta, warp), []):
                for rec in group:
                    if rec.end is None:
                        rec.end = fresh
            chains.append(fresh)

    def close_group(self, e: Event, mode: str) -> None:
        for cta, warp in self.sim.warps(e):
            self.inflight.setdefault((mode, cta, warp), [[]]).append([])

    def wait_groups(self, e: Event, mode: str, pending: int, end: Condition) -> None:
        """A wait that leaves the newest ``pending`` closed groups in flight."""
        for cta, warp in self.sim.warps(e):
            groups = self.inflight.get((mode, cta, warp))
            if not groups:
                continue
            closed, open_ = groups[:-1], groups[-1]
            keep = closed[len(closed) - pending:] if pending else []
            for group in closed[:len(closed) - pending]:
                for rec in group:
                    if rec.end is None:
                        rec.end = end
            self.inflight[(mode, cta, warp)] = [*keep, open_]

    def check_exit(self, exits: dict) -> None:
        """Async work its CTA does not know complete when it exits: the CTA can exit while a TMA
        load, MMA or TMA store still touches its memory. ``exits``: CTA -> the join of its warps'
        final clocks."""
        for records in self.by_root.values():
            for rec in records:
                mode = rec.access.mode
                if mode not in ("store", "mma", "tma"):
                    continue
                if rec.end is not None and satisfied(rec.end, exits[rec.access.resource.cta]):
                    continue
                key = ("exit", rec.event.site)
                if key in self.reported:
                    continue
                self.reported.add(key)
                if mode == "tma":
                    b = rec.access.barrier
                    wait = (f"a wait on {self.sim.label(b)} (every load must be consumed before the CTA "
                            f"exits; a producer loop that runs more times than its consumer's leaves one in flight)")
                else:
                    wait = "fa4.tma_store_wait" if mode == "store" else "a wait on the MMA's commit barrier"
                self.sim.violations.append(Violation(
                    "race", self.sim.step, rec.event.site,
                    f"the kernel can exit while {rec.event.site.where()} ({rec.process}) still "
                    f"{_verb(rec)}s {rec.access.what}: nothing waits for it to finish; add {wait} before "
                    f"the role ends", key=key))

    def known_by(self, e: Event, acc: Access, clock: np.ndarray) -> bool:
        rec = self.records.get((id(e), id(acc)))
        return True if rec is None else satisfied(rec.end, clock)


def _verb(rec: Record) -> str:
    return "write" if rec.access.write else "read"


def _advice(old: Record, new: Record) -> str:
    if old.access.mode == "tma" or new.access.mode == "tma":
        return "the TMA load and the other access must be ordered by the stage's barriers (wait for the full barrier before reading, and for the empty barrier before loading again)"
    if old.access.mode == "mma":
        return "wait for the MMA's commit barrier before touching its operands or accumulator"
    if old.access.mode == "store":
        return "wait for the TMA store (fa4.tma_store_wait) before overwriting its source"
    return "order the two accesses with a barrier both sides take part in"
