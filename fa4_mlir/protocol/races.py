"""Shared-memory and TMEM accesses, and the races between them.

Two accesses conflict when they overlap and one writes; plain loads and stores are tracked per
region (or stage, or alias), so those of one role are assumed to touch disjoint parts. The later one must know that the earlier
one ended: a plain load or store when its warps' steps are known; a TMA load when its barrier phase
is known complete; an MMA when the commit (or wgmma wait) after it is; a TMA store when the issuing
thread's store wait is. MMAs of one issuing warp run in order and never race each other.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fa4_mlir.protocol.clocks import Condition, satisfied
from fa4_mlir.protocol.model import Access, Event, Process
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


class AccessLog:
    def __init__(self, sim):
        self.sim = sim
        self.by_root: dict[tuple[str, int, int], list[Record]] = {}
        self.inflight: dict[tuple[str, int, int], list[list[Record]]] = {}  # (mode, cta, warp) -> groups
        self.committed: dict[tuple[int, int], list[Record]] = {}  # (cta, warp) -> MMAs a commit covered
        self.reported: set = set()

    def _lists(self, acc: Access) -> list[list[Record]]:
        r = acc.resource
        if r.root == -1:
            return [v for (space, cta, _), v in self.by_root.items() if space == r.space and cta == r.cta]
        return [self.by_root.get((r.space, r.cta, r.root), []), self.by_root.get((r.space, r.cta, -1), [])]

    def record(self, p: Process, e: Event, acc: Access, clocks, end: Condition | None) -> None:
        rec = Record(p.name, e, acc, clocks, end, self.sim.step)
        if acc.resource.space == "tmem" and acc.mode != "dealloc":
            self._check_allocated(rec)
        warps = self.sim.warps(e)
        for records in self._lists(acc):
            for old in records:
                if not (old.access.write or acc.write) or not old.access.resource.overlaps(acc.resource):
                    continue
                if self._in_order(old, rec) or self._known_ended(old, warps, clocks):
                    continue
                self._report(old, rec)
        self.by_root.setdefault((acc.resource.space, acc.resource.cta, acc.resource.root), []).append(rec)
        if acc.mode in ("mma", "store"):
            for cta, warp in self.sim.warps(e):
                groups = self.inflight.setdefault((acc.mode, cta, warp), [[]])
                groups[-1].append(rec)

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
        loads and stores of one role (its threads touch their own parts of a buffer; addresses are
        not tracked below the region)."""
        same_cta = old.event.threads.cta == new.event.threads.cta
        if old.access.mode == new.access.mode == "mma":
            return same_cta and bool(set(old.event.threads.warps) & set(new.event.threads.warps))
        return old.access.mode == new.access.mode == "sync" and same_cta and old.process == new.process

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
        ``end`` becomes one more alternative of its condition."""
        for cta, warp in self.sim.warps(e):
            covered = self.committed.setdefault((cta, warp), [])
            for rec in covered:
                rec.end = [*rec.end, *end]
            for group in self.inflight.pop(("mma", cta, warp), []):
                for rec in group:
                    if rec.end is None:
                        rec.end = list(end)
                        covered.append(rec)

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

    def check_exit(self) -> None:
        """Async work still in flight when its role ends: the CTA can exit while it touches memory."""
        for records in self.by_root.values():
            for rec in records:
                if rec.end is not None or rec.access.mode not in ("store", "mma"):
                    continue
                key = ("exit", rec.event.site)
                if key in self.reported:
                    continue
                self.reported.add(key)
                wait = "fa4.tma_store_wait" if rec.access.mode == "store" else "a wait on the MMA's commit barrier"
                self.sim.violations.append(Violation(
                    "race", self.sim.step, rec.event.site,
                    f"the kernel can exit while {rec.event.site.where()} ({rec.process}) still "
                    f"{_verb(rec)}s {rec.access.what}: nothing waits for it to finish; add {wait} before "
                    f"the role ends", key=key))

    def known_by(self, e: Event, acc: Access, clock: np.ndarray) -> bool:
        for records in self.by_root.values():
            for rec in records:
                if rec.event is e and rec.access is acc:
                    return satisfied(rec.end, clock)
        return True


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
