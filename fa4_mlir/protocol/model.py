"""The protocol model: what one warp role does, as a straight-line list of events.

``extract`` turns a kernel into these (loops unrolled, branches resolved per thread) for one scenario;
``simulate`` runs them. Nothing here imports MLIR, so the semantics can be read and tested alone.

A *process* is one role of one CTA: its warps execute its events in program order, together
("in step"). Each event records which threads execute it: an arrival counts once per thread, and
happens-before is tracked per warp, so a release by one warp does not order the reads of its
partners.
"""

from __future__ import annotations

import dataclasses
from typing import Any

WARP = 32


@dataclasses.dataclass(frozen=True)
class Site:
    """Where an event comes from: the op and its source location."""

    op: str
    file: str | None = None
    line: int | None = None
    col: int | None = None

    def where(self) -> str:
        if self.file is None:
            return self.op
        return f"{self.op} at {self.file}:{self.line}:{self.col}"


class Unverifiable(Exception):
    """The verifier cannot model this kernel; ``site`` is the op, the message says why."""

    def __init__(self, site: Site, message: str, cls: str = "unsupported"):
        super().__init__(message)
        self.site, self.cls = site, cls


@dataclasses.dataclass(frozen=True)
class Threads:
    """The threads of one CTA that execute an event: their warps and how many threads in all."""

    cta: int
    warps: tuple[int, ...]
    count: int
    first_tids: tuple[int, ...] = ()  # tid % 128 == 0 threads among them (sm_90a commit arrivals)

    def describe(self) -> str:
        warps = ",".join(str(w) for w in self.warps)
        return f"{self.count} thread{'s' if self.count != 1 else ''} of warp{'s' if len(self.warps) > 1 else ''} {warps}"


@dataclasses.dataclass(frozen=True)
class Barrier:
    """One mbarrier of one CTA: array ``array`` (an index into ``Kernel.arrays``), entry ``index``."""

    cta: int
    array: int
    index: int


@dataclasses.dataclass(frozen=True)
class BarrierArray:
    name: str
    counts: tuple[int, ...]
    arrival: str  # threads | tx | commit
    cta_group: int
    site: Site
    multicast_mask: int = 0  # threads: each arrival goes to the barrier at this index in every CTA of the mask


@dataclasses.dataclass(frozen=True)
class Resource:
    """Memory an access touches: ``space`` smem or tmem, the root region (``root``) of CTA ``cta``,
    bytes (smem) or columns (tmem) ``[lo, hi)``, and for TMEM the 32-lane quarters (a bit mask).
    ``root = -1`` is the whole space (a TMEM deallocation)."""

    space: str
    cta: int
    root: int
    lo: int
    hi: int
    lanes: int = 0b1111

    def overlaps(self, other: Resource) -> bool:
        if self.space != other.space or self.cta != other.cta:
            return False
        if self.root == -1 or other.root == -1:
            return True
        return (self.root == other.root and self.lo < other.hi and other.lo < self.hi
                and bool(self.lanes & other.lanes))


@dataclasses.dataclass(frozen=True)
class Access:
    """A read or write of ``resource``; ``mode`` says how it completes:
    ``sync`` (done when the op returns), ``tma`` (a TMA load: done when its barrier phase completes),
    ``mma`` (done at the issuing thread's next commit or wgmma wait), ``store`` (a TMA store: done at
    the issuing thread's next store wait), ``dealloc``."""

    write: bool
    resource: Resource
    mode: str = "sync"
    what: str = ""  # e.g. "stage 1 of smem 'ring'", for messages
    barrier: Barrier | None = None  # the barrier whose phase completes a TMA load


@dataclasses.dataclass
class Event:
    """One protocol step. ``kind`` is one of:

    wait (``barrier``, ``parity``); arrive (``arrivals``: [(Barrier, n)], ``tx``: [(Barrier, bytes)]);
    tma_load (``tx`` and ``accesses``); commit (``arrivals``; completes the issuer's MMAs);
    mma (``accesses``, ``pair``); wgmma_commit; wgmma_wait (``pending``); tma_store (``accesses``);
    store_wait (``pending``); access (``accesses``); named (``name``, ``expected``, ``sync``);
    proxy_fence; tmem_alloc; tmem_dealloc; init (``array``); cta_barrier (``scope``: cta | cluster).
    """

    kind: str
    threads: Threads
    site: Site
    role: str = ""
    barrier: Barrier | None = None
    parity: int = 0
    arrivals: list[tuple[Barrier, int]] = dataclasses.field(default_factory=list)
    tx: list[tuple[Barrier, int]] = dataclasses.field(default_factory=list)
    accesses: list[Access] = dataclasses.field(default_factory=list)
    pending: int = 0
    name: str = ""
    expected: int = 0
    sync: bool = True
    array: int = -1
    scope: str = "cta"
    pair: bool = False
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Process:
    """A role of one CTA: its name, warps and events (the prologue is the process ``kernel``)."""

    name: str
    cta: int
    warps: tuple[int, ...]
    events: list[Event]
    prologue: bool = False
    loops: list[tuple[Site, int, str]] = dataclasses.field(default_factory=list)  # run-time bounds: trips, bound


@dataclasses.dataclass
class Kernel:
    """What the simulator needs: the kernel's barrier arrays, named TMEM/SMEM roots, the processes
    of every CTA of a cluster, and the scenario it was extracted for."""

    name: str
    target_sm: int
    num_warps: int
    cluster: int
    arrays: list[BarrierArray]
    roots: dict[tuple[str, int], str]  # (space, root id) -> region name
    processes: list[Process]
    scenario: str  # e.g. "dynamic loops run 5 times"
    tmem_columns: int = 0  # TMEM columns the regions span
    tmem_regions: str = ""
