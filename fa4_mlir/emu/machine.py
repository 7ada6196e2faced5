"""The execution model: clusters of CTAs of warps, SIMT over 32 lanes, a seeded scheduler.

A warp runs its instructions vectorised over its 32 lanes. Its reconvergence stack holds entries
``[pc, mask, rpc]``: a divergent branch turns the running entry into the reconvergence entry (pc =
the branch's immediate post-dominator) and pushes one entry per path; an entry whose pc reaches its
rpc is popped, so the paths meet again where the hardware's would. Masks that are all-true are the
``FULL`` singleton, so handlers can skip masking.

Warps of one cluster interleave: the scheduler (seeded, ``numpy.random.Generator``) picks a runnable
warp and runs it for a random quantum of instructions or until it blocks (named barrier, mbarrier
wait, wgmma/bulk group wait). Asynchronous work (TMA copies, bulk stores, wgmma) completes at a time
drawn by the scheduler, counted in executed warp-instructions; data moves at completion, so a read
that forgets its wait sees stale data under some seed.

The seed also draws the launch's tempo, so that twenty seeds cover schedules far apart rather than
twenty variations of one (in the spirit of PCT, probabilistic concurrency testing): the bound on
completion delays (``max_delay`` times DELAY_FACTORS: 1 in three seeds of five, 16 or 256 in the
others); how often an asynchronous operation is a straggler (never, 1 in 16, 1 in 4), completing up
to HOLD_SCALE**2 times the bound late; and, in half the seeds, how often each warp that a wait
releases is held back before it runs again (never, 1 in 4 or always, drawn per warp) for
bound/HOLD_SCALE to HOLD_SCALE times the bound (both lengths log-uniform, so a few outlast whole
phases of a pipeline). A correct kernel must tolerate any such delay; a missing wait shows under the
tempos that open its window (a copy still in flight when its data is read, a consumer reading a
buffer its producer has not filled yet). Clusters run one after another (in a seeded order);
inter-cluster communication other than through global memory at kernel end is not modelled.

If no warp can run and nothing is pending, the launch fails with ``Deadlock`` naming every blocked
warp, what it waits for and the PTX line.
"""

from __future__ import annotations

import heapq
import time

import numpy as np

from fa4_mlir.emu.errors import Deadlock, ProtocolError
from fa4_mlir.emu.memory import CLUSTER_SHIFT, SHARED_BASE, WINDOW_SIZE, SharedMemory

WARP = 32
FULL = np.ones(WARP, np.bool_)
FULL.setflags(write=False)
LANES = np.arange(WARP, dtype=np.uint32)
LANES.setflags(write=False)


class Wait:
    """Why a warp is blocked: ``ready()`` says when it may go on; ``retry`` re-executes the instruction."""
    __slots__ = ("ready", "describe", "retry", "op")

    def __init__(self, ready, describe, retry: bool, op=None):
        self.ready, self.describe, self.retry, self.op = ready, describe, retry, op


WAIT = object()  # what a handler returns after setting ``warp.wait``


class _Held(Wait):
    """The scheduler holding a warp back after a wait released it (``Warp.hold_chance``)."""
    __slots__ = ()

    def __init__(self, ready, describe):
        super().__init__(ready, describe, retry=False)


DELAY_FACTORS = (1, 1, 1, 16, 256)  # most seeds fast: fine interleavings; some slow: long windows
HOLD_CHANCES = (0.0, 0.25, 1.0)
STRAGGLE_CHANCES = (0.0, 1 / 16, 1 / 4)
HOLD_SCALE = 16  # holds last bound/16 .. 16 x bound, stragglers bound .. 256 x bound (log-uniform)


def _nothing() -> None:
    pass


_ZEROS: dict = {}


def _zero_registers(kernel) -> list:
    """The kernel's register file at launch: one shared read-only zero array per register dtype."""
    cached = kernel.zero_registers
    if cached is None or len(cached) != len(kernel.slots):
        zeros = []
        for _, dtype in kernel.slots:
            zero = _ZEROS.get(np.dtype(dtype))
            if zero is None:
                zero = _ZEROS[np.dtype(dtype)] = np.zeros(WARP, dtype)
                zero.setflags(write=False)
            zeros.append(zero)
        kernel.zero_registers = cached = zeros
    return cached


class Warp:
    def __init__(self, cta, wid: int, nthreads: int, kernel, launch):
        self.cta, self.wid, self.launch = cta, wid, launch
        self.kernel = kernel
        first = wid * WARP
        live = np.clip(nthreads - first, 0, WARP)
        mask = FULL if live == WARP else (LANES < live)
        self.stack = [[0, mask, -1]]
        # Registers hold values: a write replaces the slot's array, never fills it in place, so every warp
        # starts from one read-only zero array per dtype (allocating thousands per warp: ~2% of a launch).
        self.regs = list(_zero_registers(kernel))
        self.wait: Wait | None = None
        self.hold_chance = 0.0  # drawn per launch by the scheduler (Launch._run_cluster)
        self.done = False
        self.special_cache: dict[str, np.ndarray] = {}
        lin = first + LANES
        bx, by, _ = launch.block
        self.tid = (lin % bx, (lin // bx) % by, lin // (bx * by))
        # async state
        self.wgmma_open: list = []          # issued, not yet committed
        self.wgmma_groups: list[list] = []  # committed groups, oldest first
        self.pending_regs: set[int] = set()   # registers an async wgmma / tcgen05.ld still writes
        self.wgmma_issued = 0               # wgmma.mma_async executed (every warp of a warpgroup must)
        self.wgmma_committed = 0            # wgmma.commit_group executed: numbers the groups
        self.tmem_ld_pending: set[int] = set()  # tcgen05.ld destinations until tcgen05.wait::ld
        self.tmem_st_pending: list = []     # tcgen05.st cells (tmem.Region) until tcgen05.wait::st
        self.tmem_ld_reads: list = []       # tcgen05.ld cells (tmem.Region) until tcgen05.wait::ld
        self.tc_tail = 0                    # completion time of the last tcgen05.mma this warp issued
        self.bulk_open: list = []
        self.bulk_groups: list[list] = []
        self.cp_open: list = []
        self.cp_groups: list[list] = []
        self.maxnreg = None
        self.setmaxnreg_op = None
        self.cluster_generation = None
        self.last_op = None
        self.local = None

    @property
    def name(self) -> str:
        return f"warp {self.wid} of CTA {self.cta.ctaid}"

    def where(self, op) -> str:
        return f"{op.where} ({self.name})"

    def lane_where(self, op, lane: int) -> str:
        return f"{op.where} ({self.name}, lane {lane})"

    # -- execution ------------------------------------------------------------------------------
    def run(self, budget: int) -> int:
        """Run up to ``budget`` warp-instructions; returns how many ran."""
        ops, nops, stats = self.kernel.ops, len(self.kernel.ops), self.launch.stats
        executed = 0
        stack = self.stack
        while executed < budget:
            if not stack:
                self._finish()
                break
            top = stack[-1]
            pc, mask = top[0], top[1]
            if pc == top[2]:
                stack.pop()
                continue
            if pc >= nops:
                self._exit(mask, None)
                continue
            op = ops[pc]
            self.last_op = op
            if op.guard >= 0:
                pred = self.regs[op.guard]
                if op.guard_negated:
                    pred = ~pred
                if mask is not FULL:
                    pred = pred & mask
                if pred.all():
                    mask = FULL
                elif not pred.any():
                    top[0] = pc + 1
                    executed += 1
                    continue
                else:
                    mask = pred
            executed += 1
            stats.warp_instructions += 1
            stats.instructions += WARP if mask is FULL else int(np.count_nonzero(mask))
            if self.pending_regs and op.regs and not op.is_async_mma and self.pending_regs & op.regs:
                self._pending_access(op)
            kind = op.kind
            if kind == "plain":
                if op.run(self, mask) is WAIT:
                    if not self.wait.retry:
                        top[0] = pc + 1
                    break
                top[0] = pc + 1
            elif kind == "branch":
                self._branch(top, op, mask)
            else:  # exit
                self._exit(mask, op)
        return executed

    def _branch(self, top, op, taken) -> None:
        current = top[1]
        if taken is FULL or (current is not FULL and np.array_equal(taken, current)):
            top[0] = op.target
            return
        if current is FULL:
            rest = ~taken
        else:
            rest = current & ~taken
        top[0] = op.reconv
        self.stack.append([op.index + 1, rest, op.reconv])
        self.stack.append([op.target, taken, op.reconv])

    def _exit(self, mask, op) -> None:
        dead = FULL if mask is FULL else mask
        for entry in self.stack:
            m = entry[1]
            entry[1] = (m & ~dead) if m is not FULL else ~dead
        while self.stack and not self.stack[-1][1].any():
            self.stack.pop()
        if not self.stack:
            self._finish(op)

    def _finish(self, op=None) -> None:
        if self.done:
            return
        self.done = True
        self.stack = []
        where = op.where if op is not None else "the end of the kernel"
        if self.wgmma_open or self.wgmma_groups:
            raise ProtocolError(f"{self.name} exits at {where} with wgmma operations still in flight "
                                f"({len(self.wgmma_open)} uncommitted, {len(self.wgmma_groups)} committed groups); "
                                f"wait for them with wgmma.wait_group 0")
        if self.bulk_open or any(self.bulk_groups):
            raise ProtocolError(f"{self.name} exits at {where} with bulk copies (TMA stores) still reading shared "
                                f"memory; wait for them with cp.async.bulk.wait_group.read 0")
        if self.cp_open or any(self.cp_groups):
            raise ProtocolError(f"{self.name} exits at {where} with cp.async copies still in flight; "
                                f"wait for them with cp.async.wait_all")

    def _pending_access(self, op) -> None:
        hit = self.pending_regs & op.regs
        if op.moved and hit <= self.tmem_ld_pending and not hit & op.moved:
            # A mov of a tcgen05.ld result before tcgen05.wait::ld (LLVM schedules register packing there)
            # copies a value that is not defined yet: its destination is pending too, until the wait.
            self.tmem_ld_pending |= op.moved
            self.pending_regs |= op.moved
            return
        regs = sorted(self.kernel.slots[s][0] for s in hit)
        named = f"{', '.join(regs[:4])}{' ...' if len(regs) > 4 else ''}"
        if hit & self.tmem_ld_pending:
            raise ProtocolError(f"{self.where(op)} accesses {named} before the tcgen05.ld that writes it is "
                                f"waited for; wait with tcgen05.wait::ld first")
        raise ProtocolError(f"{self.where(op)} accesses {named} while a wgmma.mma_async still writes it; wait "
                            f"with wgmma.wait_group first")

    def _local(self) -> np.ndarray:
        size = max(1, self.kernel.local_bytes)
        if self.local is None:
            self.local = np.zeros(WARP * size, np.uint8)
        return self.local

    def local_read(self, lane: int, offset: int, nbytes: int) -> bytes:
        size = max(1, self.kernel.local_bytes)
        if not 0 <= offset <= size - nbytes:
            raise ProtocolError(f"{self.name}, lane {lane}: local access at {offset} is outside the {size}-byte frame")
        base = lane * size + offset
        return bytes(self._local()[base:base + nbytes])

    def local_write(self, lane: int, offset: int, data: bytes) -> None:
        size = max(1, self.kernel.local_bytes)
        base = lane * size + offset
        self._local()[base:base + len(data)] = np.frombuffer(data, np.uint8)

    def mask_lanes(self, mask) -> np.ndarray:
        return LANES if mask is FULL else LANES[mask]


class NamedBarrier:
    __slots__ = ("expected", "arrived", "generation", "first")

    def __init__(self):
        self.expected, self.arrived, self.generation, self.first = 0, 0, 0, None


class MBarrier:
    """An mbarrier object: phase count, pending arrivals of the current phase, expected count, tx-count."""
    __slots__ = ("expected", "pending", "tx", "phase", "address")

    def __init__(self, address: int, count: int):
        self.address, self.expected, self.pending, self.tx, self.phase = address, count, count, 0, 0

    def check_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected


class CTA:
    def __init__(self, launch, ctaid, cluster_rank: int):
        k = launch.kernel
        self.launch, self.ctaid, self.cluster_rank = launch, ctaid, cluster_rank
        self.window = cluster_rank << CLUSTER_SHIFT  # shared addresses of this CTA: window | offset
        self.smem = SharedMemory(k.static_smem, k.dynamic_offset, launch.smem_bytes)
        self.mbarriers: dict[int, MBarrier] = {}
        self.bars = [NamedBarrier() for _ in range(16)]
        self.tmem = None       # tmem.TensorMemory, made by the first tcgen05 instruction
        self.tc_tail = 0       # completion time of the last tcgen05.mma issued in this CTA
        bx, by, bz = launch.block
        nthreads = bx * by * bz
        self.nthreads = nthreads
        self.warps = [Warp(self, w, nthreads, k, launch) for w in range((nthreads + WARP - 1) // WARP)]

    def local(self, value: int, where: str) -> int:
        """The offset in this CTA's shared memory of a shared::cta address (or a generic one)."""
        if SHARED_BASE <= value < SHARED_BASE + WINDOW_SIZE:
            value -= SHARED_BASE
        if value >> CLUSTER_SHIFT != self.cluster_rank:
            raise ProtocolError(f"{where}: shared address 0x{value:x} is not in this CTA's window (rank "
                                f"{self.cluster_rank}: 0x{self.window:x}..); another CTA's shared memory is reached "
                                f"through shared::cluster")
        return value & ((1 << CLUSTER_SHIFT) - 1)

    def peer(self, value: int, where: str):
        """(CTA, offset) a shared::cluster address (or a generic shared one) names in this cluster."""
        if SHARED_BASE <= value < SHARED_BASE + WINDOW_SIZE:
            value -= SHARED_BASE
        rank, ctas = value >> CLUSTER_SHIFT, self.launch.cluster_ctas
        if rank >= len(ctas):
            raise ProtocolError(f"{where}: shared::cluster address 0x{value:x} names CTA rank {rank}, but the "
                                f"cluster has {len(ctas)} CTA(s)")
        return ctas[rank], value & ((1 << CLUSTER_SHIFT) - 1)

    def mbarrier(self, address: int, where: str) -> MBarrier:
        bar = self.mbarriers.get(address)
        if bar is None:
            raise ProtocolError(f"{where}: no mbarrier was initialised at shared address 0x{address:x} "
                                f"({self.describe_smem(address)}); mbarrier.init it first")
        return bar

    def describe_smem(self, address: int) -> str:
        names = [(a, n) for n, a in self.launch.kernel.shared_symbols.items() if a <= address]
        if not names:
            return "in the reserved area"
        a, n = max(names)
        return f"{n}+{address - a}"


class Stats:
    def __init__(self):
        self.instructions = 0
        self.warp_instructions = 0
        self.seconds = 0.0
        self.ctas = 0
        self.async_ops = 0
        self.output: list[str] = []  # what the kernel printed (vprintf), in execution order

    def __repr__(self) -> str:
        return (f"Stats(instructions={self.instructions}, warp_instructions={self.warp_instructions}, "
                f"ctas={self.ctas}, seconds={self.seconds:.3f})")


class Launch:
    """One kernel launch: global memory, parameters, the scheduler and its clock."""

    def __init__(self, kernel, grid, block, cluster, smem_bytes, memory, params: np.ndarray, seed: int,
                 tensor_maps: list, max_delay: int = 400, quantum: int = 64, race_checks: bool = True):
        self.kernel, self.grid, self.block, self.cluster = kernel, grid, block, cluster
        self.race_checks = race_checks
        self.races = None  # races.Races of the cluster running, when race_checks
        self.smem_bytes, self.memory, self.params = smem_bytes, memory, params
        self.tensor_maps = tensor_maps
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.max_delay, self.quantum = max_delay, quantum
        self.delay_bound = max_delay * DELAY_FACTORS[int(self.rng.integers(len(DELAY_FACTORS)))]
        self.straggle_chance = STRAGGLE_CHANCES[int(self.rng.integers(len(STRAGGLE_CHANCES)))]
        # Half the seeds hold no warp back; in the others each warp draws how often it is held.
        self.holds = self.rng.integers(0, 2) == 1
        self.stats = Stats()
        self.now = 0
        self._events: list = []
        self._sequence = 0
        self.cluster_ctas: list[CTA] = []
        self.cluster_barrier = {"arrived": 0, "generation": 0}
        self.global_symbols: dict[str, int] = {}

    def global_symbol(self, name: str) -> int:
        return self.global_symbols[name]

    # -- async work -------------------------------------------------------------------------------
    def delay(self) -> int:
        if self.straggle_chance and self.rng.random() < self.straggle_chance:
            return 1 + self._long(self.delay_bound)  # a straggler: far slower than the rest (a long race window)
        return int(self.rng.integers(1, self.delay_bound))

    def _long(self, shortest: float) -> int:
        """A heavy-tailed length: log-uniform from ``shortest`` to HOLD_SCALE**2 times as much, so a few
        holds and stragglers outlast whole phases of a pipeline (many completions of the others)."""
        return int(shortest * HOLD_SCALE ** self.rng.uniform(0.0, 2.0))

    def schedule(self, callback, delay: int | None = None) -> None:
        self._sequence += 1
        self.stats.async_ops += 1
        heapq.heappush(self._events, (self.now + (self.delay() if delay is None else delay), self._sequence, callback))

    def _fire_due(self) -> None:
        while self._events and self._events[0][0] <= self.now:
            _, _, callback = heapq.heappop(self._events)
            callback()

    # -- running ----------------------------------------------------------------------------------
    def run(self) -> Stats:
        start = time.perf_counter()
        gx, gy, gz = self.grid
        cx, cy, cz = self.cluster
        clusters = [(x, y, z) for z in range(0, gz, cz) for y in range(0, gy, cy) for x in range(0, gx, cx)]
        order = self.rng.permutation(len(clusters))
        for i in order:
            x0, y0, z0 = clusters[int(i)]
            ctas = []
            for dz in range(cz):
                for dy in range(cy):
                    for dx in range(cx):
                        rank = dx + cx * (dy + cy * dz)
                        ctas.append(CTA(self, (x0 + dx, y0 + dy, z0 + dz), rank))
            self._run_cluster(ctas)
            self.stats.ctas += len(ctas)
        self.stats.seconds = time.perf_counter() - start
        return self.stats

    def _run_cluster(self, ctas: list[CTA]) -> None:
        self.cluster_ctas = ctas
        self.cluster_barrier = {"arrived": 0, "generation": 0}
        if self.race_checks:
            from fa4_mlir.emu.races import Races
            self.races = Races(self, ctas)
        races = self.races
        warps = [w for cta in ctas for w in cta.warps]
        for w in warps:  # how often the scheduler holds each warp back after a wait releases it
            w.hold_chance = HOLD_CHANCES[int(self.rng.integers(len(HOLD_CHANCES)))] if self.holds else 0.0
        rng = self.rng
        quantum = self.quantum
        while True:
            runnable = [w for w in warps if not w.done and w.wait is None]
            if not runnable:
                if self._events:
                    self.now = self._events[0][0]
                    self._fire_due()
                    self._wake(warps)
                    continue
                if all(w.done for w in warps):
                    break
                self._deadlock(warps)
            w = runnable[int(rng.integers(len(runnable)))] if len(runnable) > 1 else runnable[0]
            if races is not None:
                races.current = w
            self.now += w.run(int(rng.integers(1, quantum)))
            self._fire_due()
            self._wake(warps)
        for cta in ctas:
            self._check_exit(cta)

    def _wake(self, warps) -> None:
        for w in warps:
            wait = w.wait
            if wait is not None and wait.ready():
                w.wait = None
                if w.hold_chance and not isinstance(wait, _Held) and self.rng.random() < w.hold_chance:
                    self._hold(w)

    def _hold(self, w) -> None:
        """Keep a warp that its wait just released off the schedule for a while (a retried try_wait
        then re-reads the phase afterwards); an empty event lets the clock reach the end of the hold."""
        until = self.now + 1 + self._long(self.delay_bound / HOLD_SCALE)
        w.wait = _Held(lambda: self.now >= until, lambda: f"is held back by the scheduler until time {until}")
        self._sequence += 1
        heapq.heappush(self._events, (until, self._sequence, _nothing))

    def _deadlock(self, warps) -> None:
        blocked = [f"{w.name}: {w.wait.describe()}" for w in warps if not w.done and w.wait is not None]
        raise Deadlock("deadlock: every live warp is blocked and no asynchronous work is pending\n  "
                       + "\n  ".join(blocked), blocked)

    def _check_exit(self, cta: CTA) -> None:
        for first in range(0, len(cta.warps) - len(cta.warps) % 4, 4):
            counts = [w.wgmma_issued for w in cta.warps[first:first + 4]]
            if len(set(counts)) > 1:
                raise ProtocolError(f"CTA {cta.ctaid}: warps {first}..{first + 3} executed {counts} wgmma.mma_async "
                                    f"instructions; .sync.aligned needs all four warps of the warpgroup in each")
        leaks = cta.tmem.leaks() if cta.tmem is not None else None
        if leaks:
            raise ProtocolError(f"CTA {cta.ctaid} exits with tensor memory still allocated: {leaks}; "
                                f"tcgen05.dealloc every allocation before exit")
        for ident, named in enumerate(cta.bars):
            if named.arrived:
                raise ProtocolError(f"CTA {cta.ctaid} exits with named barrier {ident} half arrived ({named.arrived} "
                                    f"of {named.expected} threads, first at {named.first.where}): a bar.arrive or "
                                    f"bar.sync has no partner")
        for bar in cta.mbarriers.values():
            if 0 < bar.pending < bar.expected:
                raise ProtocolError(f"CTA {cta.ctaid} exits with the mbarrier at shared address 0x{bar.address:x} "
                                    f"({cta.describe_smem(bar.address)}) half arrived: {bar.expected - bar.pending} "
                                    f"of {bar.expected} arrivals in phase {bar.phase}; an arrive has no partner")
            if bar.tx != 0:
                raise ProtocolError(f"CTA {cta.ctaid} exits with the mbarrier at shared address 0x{bar.address:x} "
                                    f"({cta.describe_smem(bar.address)}) still expecting {bar.tx} transaction bytes "
                                    f"(phase {bar.phase}): a TMA copy it tracks never completed its bytes")
