"""Race detection: the orderings the PTX memory model demands across proxies and between tcgen05
operations, checked as the kernel runs (docs/emulator.md, "Race detection"; on by default, off with
``launch(..., race_checks=False)`` or FA4_EMU_RACE_CHECKS=0; ``race_checks="implicit-tcgen05-fences"`` or
FA4_EMU_RACE_CHECKS=implicit-tcgen05-fences lets every thread synchronisation perform the tcgen05 fences,
the assumption NVIDIA's and Triton's Blackwell code makes).

The unit of execution is the warp (its lanes run in lockstep here). Each warp of a cluster carries
vector clocks over the cluster's warps, advanced at every release and fence:

- ``vc``: happens-before (PTX ISA "Base causality order"). A release (``bar.sync``/``bar.arrive``,
  ``barrier.cluster.arrive``, ``mbarrier.arrive``, the arrive of ``tcgen05.commit``) joins the warp's
  clocks into the synchronisation object; an acquire (a ``bar.sync`` completing, ``barrier.cluster.wait``,
  an ``mbarrier.try_wait``/``test_wait`` that succeeds) joins the object's clocks into the warp's.
  mbarrier arrivals are release read-modify-writes of one object, so a wait that observes a phase
  synchronises with every arrival before it (the clock is cumulative).
- ``pf``: the part of ``vc`` that a ``fence.proxy.async`` (shared::cta, bi-directional or
  async::generic.release) has made visible to the async proxy. It travels like ``vc``, so the fence
  counts anywhere on the base-causality path from a write to the async operation (in the writing
  thread before its barrier, or in the issuing thread after it), as the ISA's rule for alias fences
  ("a proxy fence along the base causality path") reads for the async proxy.
- four tcgen05 frontiers in transit (``ld``: loads a ``tcgen05.wait::ld`` completed, ``st``: stores a
  ``wait::st`` completed, ``pipe``: MMAs issued, ordered for a pipelined successor MMA, ``done``: MMAs
  whose completion a ``tcgen05.commit`` signalled). ``tcgen05.fence::before_thread_sync`` (and the
  commit, which performs it implicitly) publishes the warp's own frontiers; every synchronisation
  carries them on; ``tcgen05.fence::after_thread_sync`` moves what the warp received into its *view*,
  the frontier its later tcgen05 operations are ordered after (PTX ISA "Memory Consistency Model for
  5th generation of TensorCore operations", canonical patterns). The after-fence also snapshots ``vc``
  and ``pf``: an asynchronous tcgen05 operation is ordered after the warp's waits only through it, so a
  ``tcgen05.mma``'s shared-memory operands are checked against that snapshot.

Besides the warps, the copy engine's landings are clock entries, one per mbarrier the loads complete
on (up to ENGINE_SLOTS per cluster, then shared: coarser, which can only miss a race): a TMA or bulk
load landing is an event of its mbarrier's entry that its complete-tx releases on that mbarrier, so a
wait orders exactly the loads of the barriers it observed.

Shared memory (per 16-byte granule, our kernels' generic stores are 16-byte aligned at most that wide)
keeps its last writer (a warp through the generic proxy, or a landing) and each warp's latest generic
read. An async-proxy read (TMA or bulk store source, wgmma and tcgen05.mma shared operands) of a granule
a warp wrote must be ordered after that write by ``vc`` and ``pf``; a landed load's bytes need only the
order (its completion performs an implicit generic-async proxy fence; a tcgen05.mma: through the
after-fence). Generic accesses of different warps to the same bytes, one of them a write, must be
ordered (``vc``; per 4-byte word for the last write and per granule with byte masks for the reads, so
disjoint words of one granule do not conflict; a store of the bytes already there is not reported), and
so must a load (TMA, bulk, cp.async) after the generic accesses to its destination, at its issue.

Tensor memory (per 16-lane block and column) keeps, per warp, its latest access of each kind: a
``tcgen05.st`` or MMA write, a ``tcgen05.ld`` or MMA read (of an A operand in tensor memory). A
conflicting access by warp B after one by warp A is ordered when B's view holds A's frontier for it:
``st`` for a store, ``ld`` for a load, ``done`` for an MMA (``pipe`` when B's access is an MMA too: the
pair is pipelined). Within one warp, a ``wait::st``/``wait::ld`` orders its stores/loads, MMAs are
pipelined with MMAs, and an MMA before a load or store needs its commit, the mbarrier wait and the
after-fence (the ISA's same-thread pattern). ``tcgen05.dealloc`` must come after every access to its
columns' writes (completed by the writing warp and ordered before; dealloc is synchronous, so no fence).
A violation is a ``ProtocolError`` naming both instructions, both warps and the address.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu.errors import ProtocolError

GRANULE = 4          # log2 of the shared-memory granule (16 bytes)
LANE_BLOCK = 16      # tensor-memory lanes per tracked block (layout F's MMA blocks are 16 lanes)
OP_BITS = 20         # a record is epoch << OP_BITS | op index
OP_MASK = (1 << OP_BITS) - 1
ENGINE_SLOTS = 64    # clock entries for the loads' landings, one per mbarrier they complete on
INF = 1 << 62
VC, PF = 0, 1                   # rows of a warp's state: happens-before, proxy-fenced
LD, ST, PIPE, DONE = 0, 1, 2, 3  # tcgen05 frontiers (state rows 2 + x, view rows x)
LDW, STW = 6, 7                  # state rows: loads/stores waited for, released by any release (dealloc)
ROWS = 8
W_ST, W_MMA, R_LD, R_MMA = 0, 1, 2, 3  # kinds of tensor-memory records
# race_checks mode: every release (bar.sync/bar.arrive, mbarrier arrive, barrier.cluster.arrive) also performs
# tcgen05.fence::before_thread_sync and every acquire (a barrier or mbarrier wait that completes)
# tcgen05.fence::after_thread_sync. The PTX ISA's patterns put these fences around the thread synchronisation;
# NVIDIA's CUTLASS/CuTe DSL and Triton 3.9 (run on B200s by their authors) never emit them, so their code runs
# under this mode with every other check on (wait::ld/st, commits, proxy fences, landings).
IMPLICIT_TCGEN05_FENCES = "implicit-tcgen05-fences"
_FIX = ("the async proxy", "fence.proxy.async.shared::cta in the writing thread after the write and before the "
        "barrier or arrive that orders it (or in the issuing thread after its wait, before the async operation)")


class Races:
    """The race state of one cluster's run (``Launch._run_cluster``)."""

    def __init__(self, launch, ctas):
        self.warps = [w for cta in ctas for w in cta.warps]
        self.n = n = len(self.warps)
        self.m = m = n + ENGINE_SLOTS  # clock entries: the warps, then the landings per mbarrier
        for i, w in enumerate(self.warps):
            w.race_id = i
        self.ops = launch.kernel.ops
        self.state = np.zeros((n, ROWS, m), np.int64)  # per warp: vc, pf, tcgen05 frontiers in transit
        self.state[np.arange(n), VC, np.arange(n)] = 1
        self.view = np.zeros((n, ROWS, m), np.int64)   # per warp: the state at its last after-fence
        self.engine: dict = {}                      # mbarrier -> its landings' clock entry
        self.engine_epoch = np.zeros(m, np.int64)
        self.landing = None                         # (shadow, granules) of the load landing right now
        self.own = np.zeros((n, 2), np.int64)       # per warp: epoch of its last wait::ld, wait::st
        self.clocks: dict = {}                      # synchronisation object -> its (ROWS, m) clock
        self.waiters: dict = {}                     # named barrier -> warps blocked in its bar.sync
        self.cluster_done: dict = {}                # barrier.cluster generation -> its clock
        self.tmem_cells: dict = {}                  # CTA -> (blocks, columns, kind, warp) records
        self.current = None                         # the warp the scheduler runs (async reads' issuer)
        self.implicit_fences = launch.race_checks == IMPLICIT_TCGEN05_FENCES
        for cta in ctas:
            cta.smem.shadow = SmemShadow(self, cta)

    # -- clocks ------------------------------------------------------------------------------------
    def _stamp(self, w, op) -> int:
        return (int(self.state[w.race_id, VC, w.race_id]) << OP_BITS) | op.index

    def _bump(self, i: int) -> None:
        self.state[i, VC, i] += 1

    def release(self, w, key) -> None:
        i = w.race_id
        if self.implicit_fences:
            self._publish(i, self.state[i])
        clock = self.clocks.get(key)
        if clock is None:
            clock = self.clocks[key] = np.zeros((ROWS, self.m), np.int64)
        self.state[i, LDW:, i] = self.own[i]
        np.maximum(clock, self.state[i], out=clock)
        self._bump(i)

    def acquire(self, w, key) -> None:
        clock = self.clocks.get(key)
        if clock is not None:
            self._join(w.race_id, clock)

    def _join(self, i: int, clock) -> None:
        """Warp ``i`` acquires ``clock`` (in the implicit-fences mode, then fences after the sync)."""
        np.maximum(self.state[i], clock, out=self.state[i])
        if self.implicit_fences:
            np.maximum(self.view[i], self.state[i], out=self.view[i])

    def deliver(self, key, message) -> None:
        """An arrive on ``key`` performed on a warp's behalf later (a tcgen05.commit's)."""
        clock = self.clocks.get(key)
        if clock is None:
            self.clocks[key] = message.copy()
        else:
            np.maximum(clock, message, out=clock)

    def complete_tx(self, bar) -> None:
        """A load that just landed completes on ``bar``: a new event of the mbarrier's clock entry, stamped
        on the bytes and released on the barrier (the mbarrier.complete_tx instruction carries nothing)."""
        if self.landing is None:
            return
        shadow, granules = self.landing
        self.landing = None
        engine = self.engine.get(bar)
        if engine is None:
            engine = self.engine[bar] = self.n + len(self.engine) % ENGINE_SLOTS
        self.engine_epoch[engine] += 1
        epoch = int(self.engine_epoch[engine])
        shadow.writer[granules] = engine
        shadow.stamp[granules] = epoch << OP_BITS
        clock = self.clocks.get(bar)
        if clock is None:
            clock = self.clocks[bar] = np.zeros((ROWS, self.m), np.int64)
        clock[VC, engine] = max(clock[VC, engine], epoch)

    # -- synchronisation -----------------------------------------------------------------------------
    def bar(self, w, bar, waits: bool, completes: bool) -> None:
        """bar.sync / bar.arrive on a named barrier: a release; a completing generation is acquired by
        every warp waiting in it (bar.arrive does not wait, so does not acquire)."""
        self.release(w, bar)
        waiters = self.waiters.setdefault(bar, [])
        if waits:
            waiters.append(w.race_id)
        if completes:
            clock = self.clocks.pop(bar)
            for i in waiters:
                self._join(i, clock)
            waiters.clear()

    def cluster_arrive(self, w, generation: int, completes: bool) -> None:
        key = ("cluster", generation)
        self.release(w, key)
        if completes:
            self.cluster_done[generation] = self.clocks.pop(key)
            for i in self.waiters.pop(key, []):
                self._join(i, self.cluster_done[generation])

    def cluster_wait(self, w, generation: int, done: bool) -> None:
        if done:
            clock = self.cluster_done.get(generation)
            if clock is not None:
                self._join(w.race_id, clock)
        else:
            self.waiters.setdefault(("cluster", generation), []).append(w.race_id)

    def mbar_wait(self, w, checks, parity: bool) -> None:
        """An mbarrier try_wait/test_wait: acquire every barrier whose awaited phase has completed."""
        for bar, want, _ in checks:
            if ((bar.phase & 1) != (want & 1)) if parity else (bar.phase > want):
                self.acquire(w, bar)

    def fence_proxy(self, w) -> None:
        """fence.proxy.async (shared memory): what this warp's clock covers is now proxy-fenced."""
        row = self.state[w.race_id]
        row[PF] = row[VC]
        self._bump(w.race_id)

    # -- tcgen05 ordering -------------------------------------------------------------------------------
    def _publish(self, i: int, row) -> None:
        """What tcgen05.fence::before_thread_sync makes visible of warp ``i``'s own operations."""
        row[2 + LD, i] = max(row[2 + LD, i], self.own[i, 0])
        row[2 + ST, i] = max(row[2 + ST, i], self.own[i, 1])
        row[2 + PIPE, i] = self.state[i, VC, i]

    def before_thread_sync(self, w) -> None:
        self._publish(w.race_id, self.state[w.race_id])
        self._bump(w.race_id)

    def after_thread_sync(self, w) -> None:
        i = w.race_id
        np.maximum(self.view[i], self.state[i], out=self.view[i])

    def wait_ld(self, w) -> None:
        self.own[w.race_id, 0] = self.state[w.race_id, VC, w.race_id]
        self._bump(w.race_id)

    def wait_st(self, w) -> None:
        self.own[w.race_id, 1] = self.state[w.race_id, VC, w.race_id]
        self._bump(w.race_id)

    def commit(self, w):
        """tcgen05.commit: the message its arrive delivers once the warp's MMAs so far completed (the
        commit performs tcgen05.fence::before_thread_sync implicitly)."""
        i = w.race_id
        self._publish(i, self.state[i])
        self.state[i, LDW:, i] = self.own[i]
        message = self.state[i].copy()
        message[2 + DONE, i] = self.state[i, VC, i]
        self._bump(i)
        return message

    def tmem(self, w, cta, lane0: int, lane1: int, col0: int, col1: int, kind: str) -> None:
        """A tcgen05 access of lanes [lane0, lane1) x columns [col0, col1) of ``cta``'s tensor memory by
        the instruction ``w`` executes: kind "ld", "st", "mma" (writes D) or "mma_a" (reads A)."""
        i, op = w.race_id, w.last_op
        cells = self.cells(cta, lane0, lane1, col0, col1)
        mma, writes = kind in ("mma", "mma_a"), kind in ("st", "mma")
        latest = cells.max(axis=(0, 1))
        bad = (latest >> OP_BITS) > self.need(i, kind, self.view[i])[:, :self.n]
        if bad.any():
            record, a = (int(x[0]) for x in np.nonzero(bad))
            self._tmem_race(w, op, kind, record, a, int(latest[record, a]), (lane0, lane1, col0, col1), mma)
        stamp = self._stamp(w, op)
        if writes:
            cells[...] = 0
            cells[:, :, W_MMA if mma else W_ST, i] = stamp
        else:
            cells[:, :, R_MMA if mma else R_LD, i] = stamp

    def cells(self, cta, lane0: int, lane1: int, col0: int, col1: int):
        """The records of lanes [lane0, lane1) x columns [col0, col1): (blocks, columns, kind, warp)."""
        return self._cells(cta)[lane0 // LANE_BLOCK:-(-lane1 // LANE_BLOCK), col0:col1]

    def need(self, i: int, kind: str, view) -> np.ndarray:
        """(record kind, warp) -> the epoch up to which warp ``i``'s ``view`` orders that warp's records
        of that kind before an access of ``kind`` (the ISA's canonical patterns; INF: no order needed)."""
        mma, writes = kind in ("mma", "mma_a"), kind in ("st", "mma")
        view = view[2:]
        need = np.empty((4, self.m), np.int64)
        need[W_ST], need[W_ST, i] = view[ST], self.own[i, 1]
        need[W_MMA] = view[PIPE] if mma else view[DONE]
        need[W_MMA, i] = INF if mma else view[DONE, i]  # MMA -> MMA of one warp: pipelined
        if writes:
            need[R_LD], need[R_LD, i] = view[LD], self.own[i, 0]
            need[R_MMA] = need[W_MMA]
        else:
            need[R_LD] = need[R_MMA] = INF
        return need

    def dealloc(self, w, cta, col0: int, col1: int) -> None:
        """tcgen05.dealloc frees columns: every write to them (a tcgen05.st its warp waited for with
        wait::st, an MMA its commit signalled) must be complete and ordered before it. Dealloc is synchronous
        and the ISA gives no fence pattern for it (CUTLASS and DeepGEMM free after a plain barrier), so no
        fences are needed; a load does not hold its columns (dealloc changes no cell; ``tmem.dealloc``)."""
        i, shadow = w.race_id, self.tmem_cells.get(cta)
        if shadow is None:
            return
        cells = shadow[:, col0:col1]
        got = self.state[i]
        need = np.stack([got[STW], got[2 + DONE], np.full(self.m, INF), got[2 + DONE]])[:, :self.n]
        need[W_ST, i] = self.own[i, 1]
        latest = cells.max(axis=(0, 1))
        bad = (latest >> OP_BITS) > need
        if bad.any():
            record, a = (int(x[0]) for x in np.nonzero(bad))
            self._tmem_race(w, w.last_op, "dealloc", record, a, int(latest[record, a]),
                            (0, 128, col0, col1), False)
        cells[...] = 0

    def _cells(self, cta):
        cells = self.tmem_cells.get(cta)
        if cells is None:
            cells = self.tmem_cells[cta] = np.zeros((128 // LANE_BLOCK, 512, 4, self.n), np.int64)
        return cells

    def _tmem_race(self, w, op, kind, record, a, stamp, region, mma) -> None:
        i, epoch, other = w.race_id, stamp >> OP_BITS, self.warps[a]
        first = self.ops[stamp & OP_MASK]
        did = {W_ST: "wrote", W_MMA: "writes", R_LD: "read", R_MMA: "reads"}[record]
        verb = {"ld": "reads", "st": "writes", "mma": "writes", "mma_a": "reads", "dealloc": "frees"}[kind]
        row = {W_ST: ST, R_LD: LD}.get(record, PIPE if mma else DONE)
        if a == i:
            why = {W_ST: "no tcgen05.wait::st of this warp between them",
                   R_LD: "no tcgen05.wait::ld of this warp between them"}.get(
                record, "the MMA's completion was not observed between them (tcgen05.commit, a wait on its "
                        "mbarrier, then tcgen05.fence::after_thread_sync)")
        elif kind != "dealloc" and self.state[i, 2 + row, a] >= epoch:
            why = (f"{w.name} executed no tcgen05.fence::after_thread_sync between the wait that ordered it and "
                   f"this access")
        elif kind == "dealloc" and self.state[i, VC, a] >= epoch:
            why = (f"{other.name} had not completed it (tcgen05.wait::ld or wait::st, or for an MMA its commit and "
                   f"that mbarrier's wait) before the synchronisation that orders it before this dealloc")
        elif self.state[i, VC, a] >= epoch:
            if record == R_LD and self.own[a, 0] < epoch:
                why = f"{other.name} released it without a tcgen05.wait::ld (then tcgen05.fence::before_thread_sync)"
            elif record == W_ST and self.own[a, 1] < epoch:
                why = f"{other.name} released it without a tcgen05.wait::st (then tcgen05.fence::before_thread_sync)"
            elif row == DONE:
                why = (f"its completion was not observed: {other.name} must tcgen05.commit it and {w.name} wait on "
                       f"that mbarrier")
            else:
                why = (f"{other.name} executed no tcgen05.fence::before_thread_sync between it and the barrier or "
                       f"arrive that orders it")
        else:
            why = "no barrier or mbarrier orders it before this access"
        lane0, lane1, col0, col1 = region
        raise ProtocolError(f"{w.where(op)} {verb} tensor memory lanes {lane0}..{lane1 - 1}, columns {col0}.."
                            f"{col1 - 1} that {first.where} ({other.name}) {did}, and {why}: a data race (PTX ISA "
                            f"'Memory Consistency Model for 5th generation of TensorCore operations')")


class SmemShadow:
    """One CTA's shared memory as the race checks see it, per granule: the last writer (a warp through the
    generic proxy, or the copy engine for a landed load) and, per warp, its latest generic read since."""

    def __init__(self, races: Races, cta):
        self.races, self.cta = races, cta
        granules = (cta.smem.size >> GRANULE) + 1
        self.writer = np.full(granules, -1, np.int16)
        self.stamp = np.zeros(granules, np.int64)
        self.readers = np.zeros((granules, races.n), np.int64)
        # Generic accesses conflict only where their bytes overlap (warps writing disjoint words of one
        # granule do not race): per 4-byte word the last generic writer, its stamp and the bytes it wrote;
        # per granule and warp the bytes read since the granule's last write.
        words = granules << (GRANULE - 2)
        self.gwriter = np.full(words, -1, np.int16)
        self.gstamp = np.zeros(words, np.int64)
        self.gmask = np.zeros(words, np.uint8)
        self.rmask = np.zeros((granules, races.n), np.uint16)
        # The last tcgen05.mma that read each granule (its warp, its stamp): a write after it (a load, a
        # store) must wait for the MMA's completion, which only its commit's mbarrier signals.
        self.mma_reader = np.full(granules, -1, np.int16)
        self.mma_stamp = np.zeros(granules, np.int64)

    def _mma_unordered(self, w, granules):
        """(granule, warp, stamp) of a tcgen05.mma read of these granules whose completion ``w`` has not
        observed (its commit's arrive, acquired: the DONE frontier), or None."""
        readers = self.mma_reader[granules].astype(np.int64)
        late = readers >= 0
        if not late.any():
            return None
        done = self.races.state[w.race_id, 2 + DONE]
        late[late] = (self.mma_stamp[granules[late]] >> OP_BITS) > done[readers[late]]
        if not late.any():
            return None
        k = int(np.argmax(late))
        return int(granules[k]), int(readers[k]), int(self.mma_stamp[granules[k]])

    def _mma_race(self, w, verb: str, found) -> None:
        g, a, stamp = found
        races = self.races
        raise ProtocolError(f"{w.where(w.last_op)} {verb} shared bytes 0x{g << GRANULE:x}..0x{(g << GRANULE) + 15:x} "
                            f"({self.cta.describe_smem(g << GRANULE)}) that {races.ops[stamp & OP_MASK].where} "
                            f"({races.warps[a].name}) reads, and no wait on the mbarrier its tcgen05.commit arrives on "
                            f"orders the MMA's completion before this write: a data race; wait for the stage's "
                            f"release (the commit's mbarrier) first")

    @staticmethod
    def _granules(offsets: np.ndarray, width: int) -> tuple[np.ndarray, ...]:
        """Of ``width``-byte accesses at ``offsets``: their granules with the bytes touched in each (16-bit
        masks), and their 4-byte words with the bytes touched in each (4-bit masks)."""
        offsets = np.asarray(offsets, np.int64)
        if width <= 4:  # naturally aligned: one word, one granule
            bits = (1 << width) - 1
            return (offsets >> GRANULE, (bits << (offsets & 15)).astype(np.uint16), offsets >> 2,
                    (bits << (offsets & 3)).astype(np.uint8))
        words = (offsets[:, None] + np.arange(0, width, 4)).reshape(-1) >> 2
        granules = words >> (GRANULE - 2)
        masks = (np.uint16(0xF) << ((words & 3) << 2).astype(np.uint16)).astype(np.uint16)
        return granules, masks, words, np.full(words.shape, 0xF, np.uint8)

    def _unordered(self, w, granules: np.ndarray, readers: bool, masks: np.ndarray | None = None):
        """(granule, warp, stamp, is-read) of a write (and, with ``readers``, a read) of another warp (or the
        copy engine) to these granules that ``w``'s clock does not order before now; else None. With
        ``masks`` (a generic access: its bytes per granule) only a landing counts of the writes (the generic
        ones are checked per word: ``_generic_unordered``) and a read only where the bytes overlap."""
        races, i = self.races, w.race_id
        vc = races.state[i, VC]
        writers = self.writer[granules].astype(np.int64)
        late = (writers >= 0) & (writers != i)
        if masks is not None:
            late &= writers >= races.n
        if late.any():
            late[late] = (self.stamp[granules[late]] >> OP_BITS) > vc[writers[late]]
            if late.any():
                k = int(np.argmax(late))
                return int(granules[k]), int(writers[k]), int(self.stamp[granules[k]]), False
        if readers:
            seen = self.readers[granules] >> OP_BITS
            seen[:, i] = 0
            if masks is not None:
                seen[(self.rmask[granules] & masks[:, None]) == 0] = 0
            late = seen > vc[:races.n]
            if late.any():
                k, a = (int(x[0]) for x in np.nonzero(late))
                return int(granules[k]), a, int(self.readers[granules[k], a]), True
        return None

    def _generic_unordered(self, w, words: np.ndarray, masks: np.ndarray, same: np.ndarray | None = None):
        """(granule, warp, stamp, False) of another warp's generic write to these bytes that ``w``'s clock
        does not order before now; else None. ``same``: per word, a write of the bytes already there (not
        reported: two warps storing one value, as Triton's broadcast layouts do, observe nothing)."""
        races, i = self.races, w.race_id
        writers = self.gwriter[words].astype(np.int64)
        late = (writers >= 0) & (writers != i) & ((self.gmask[words] & masks) != 0)
        if same is not None:
            late &= ~same
        if late.any():
            late[late] = (self.gstamp[words[late]] >> OP_BITS) > races.state[i, VC][writers[late]]
            if late.any():
                k = int(np.argmax(late))
                return int(words[k]) >> (GRANULE - 2), int(writers[k]), int(self.gstamp[words[k]]), False
        return None

    def _race(self, w, verb: str, found, remedy: str) -> None:
        g, a, stamp, read = found
        races = self.races
        at = f"0x{g << GRANULE:x}..0x{(g << GRANULE) + 15:x} ({self.cta.describe_smem(g << GRANULE)})"
        if a >= races.n:
            first = "a TMA or bulk load (its landing)"
        else:
            first = f"{races.ops[stamp & OP_MASK].where} ({races.warps[a].name})"
        raise ProtocolError(f"{w.where(w.last_op)} {verb} shared bytes {at} that {first} "
                            f"{'read' if read else 'wrote'}, and no barrier or mbarrier orders that access before "
                            f"this one: a data race; {remedy}")

    def generic_read(self, w, offsets: np.ndarray, width: int) -> None:
        """ld/ldmatrix read ``width`` bytes at each shared offset: a write of another warp, or a load's
        landing, must be ordered before it."""
        granules, masks, words, bytes_ = self._granules(offsets, width)
        found = self._unordered(w, granules, readers=False, masks=masks) or \
            self._generic_unordered(w, words, bytes_)
        if found is not None:
            self._race(w, "reads", found, "wait on the load's mbarrier first" if found[1] >= self.races.n else
                       "synchronise the two warps (an mbarrier arrive and wait, or bar.sync) between them")
        i = w.race_id
        self.readers[granules, i] = self.races._stamp(w, w.last_op)
        np.bitwise_or.at(self.rmask[:, i], granules, masks)

    def generic_write(self, w, offsets: np.ndarray, width: int, op, check: bool = True,
                      data: np.ndarray | None = None) -> None:
        """st/atom/stmatrix (or, unchecked, a landed cp.async) wrote ``width`` bytes at each shared offset:
        every earlier access of another warp must be ordered before it."""
        granules, masks, words, bytes_ = self._granules(offsets, width)
        if check:
            same = None
            if data is not None:  # (lanes, width) bytes about to be stored: equal to what is there, per word
                equal = self.cta.smem.buf[np.asarray(offsets, np.int64)[:, None] + np.arange(width)] == data
                same = equal.reshape(len(equal), max(1, width // 4), -1).all(axis=2).reshape(-1)
            found = self._unordered(w, granules, readers=True, masks=masks) or \
                self._generic_unordered(w, words, bytes_, same)
            if found is not None:
                self._race(w, "writes", found, "wait on the load's mbarrier first" if found[1] >= self.races.n
                           else "synchronise the two warps (an mbarrier arrive and wait, or bar.sync) between them")
            found = self._mma_unordered(w, granules)
            if found is not None:
                self._mma_race(w, "writes", found)
        # Each word keeps the bytes of its last write only (an earlier sub-word write's bytes are forgotten: a
        # miss, never a false report; the lanes of this write are merged).
        i, stamp = w.race_id, self.races._stamp(w, op)
        self.gmask[words] = 0
        np.bitwise_or.at(self.gmask, words, bytes_)
        self.gwriter[words] = i
        self.gstamp[words] = stamp
        self.readers[granules] = 0
        self.rmask[granules] = 0
        self.mma_reader[granules] = -1
        self.writer[granules] = i
        self.stamp[granules] = stamp

    def async_write(self, access) -> None:
        """A load (TMA, bulk, cp.async) is issued into these bytes: every generic access of another warp
        must be ordered before its issue (the data lands any time after)."""
        w = self.races.current
        lo, hi = access.lo >> GRANULE, (access.hi + 15) >> GRANULE
        granules = np.arange(lo, hi) if access.index is None else np.unique(access.index >> GRANULE)
        found = self._unordered(w, granules, readers=True)
        if found is not None and found[1] < self.races.n:
            self._race(w, f"issues {access.what}, which writes", found, "synchronise the warps that read or "
                       "wrote the buffer with this one (the consumer's release, an mbarrier the producer waits on) "
                       "before the copy")
        found = self._mma_unordered(w, granules)
        if found is not None:
            self._mma_race(w, f"issues {access.what}, which writes", found)
        self.mma_reader[granules] = -1

    def async_wrote(self, access) -> None:
        """A load landed: the bytes hold async-proxy data (its completion fences it). A TMA or bulk load's
        complete-tx, next, stamps them with its mbarrier's event (``Races.complete_tx``); a cp.async's are
        a generic write of its warp (``generic_write``, next)."""
        granules = slice(access.lo >> GRANULE, (access.hi + 15) >> GRANULE) if access.index is None else \
            access.index >> GRANULE
        self.readers[granules] = 0
        self.rmask[granules] = 0
        self.writer[granules] = -1
        if access.index is None:
            self.gwriter[granules.start << (GRANULE - 2):granules.stop << (GRANULE - 2)] = -1
        else:
            self.gwriter[(granules[:, None] << (GRANULE - 2)) + np.arange(1 << (GRANULE - 2))] = -1
        if access.index is None:
            self.races.landing = (self, granules)

    def unordered(self, access, w, row):
        """(granules, writers, epochs, ordered, fenced, generic) of an async-proxy read by ``w`` whose
        ordering is ``row`` (its state, or its tcgen05 view), or None when no granule has a writer."""
        lo, hi = access.lo >> GRANULE, (access.hi + 15) >> GRANULE
        if self.writer[lo:hi].max() < 0:
            return None
        if access.index is None:
            granules = np.arange(lo, hi)
        else:  # the operand's granules, without sorting its (many) byte addresses
            hit = np.zeros(hi - lo, np.bool_)
            hit[(access.index >> GRANULE) - lo] = True
            granules = np.flatnonzero(hit) + lo
        writers = self.writer[granules].astype(np.int64)
        granules, writers = granules[writers >= 0], writers[writers >= 0]
        epochs = self.stamp[granules] >> OP_BITS
        i, state = w.race_id, self.races.state[w.race_id]
        vc, pf = row[VC][writers], row[PF][writers]
        mine = writers == i  # the warp's own writes: in program order (the proxy fence still needed)
        vc[mine], pf[mine] = state[VC, i], state[PF, i]
        generic = writers < self.races.n  # a load's landing (the copy engine) needs no proxy fence
        return granules, writers, epochs, vc >= epochs, (pf >= epochs) | ~generic, generic

    def async_read(self, access) -> None:
        """An async-proxy read is issued (TMA/bulk store source, wgmma or tcgen05.mma operand): every
        granule a generic write last wrote must be ordered before it and proxy-fenced."""
        races = self.races
        w = races.current
        # A tcgen05.mma is ordered after what its warp knew at its last tcgen05.fence::after_thread_sync.
        tcgen05 = w.last_op.ins.opcode == "tcgen05"
        if tcgen05:  # the MMA reads its operands until it completes: record it (see _mma_unordered)
            lo, hi = access.lo >> GRANULE, (access.hi + 15) >> GRANULE
            hit = np.zeros(hi - lo, np.bool_)
            hit[((access.index >> GRANULE) - lo) if access.index is not None else slice(None)] = True
            read = np.flatnonzero(hit) + lo
            self.mma_reader[read] = w.race_id
            self.mma_stamp[read] = races._stamp(w, w.last_op)
        found = self.unordered(access, w, (races.view if tcgen05 else races.state)[w.race_id])
        if found is None:
            return
        granules, writers, epochs, ordered, fenced, generic = found
        bad = ~(ordered & fenced)
        if not bad.any():
            return
        k = int(np.argmax(bad))
        g, a = int(granules[k]), int(writers[k])
        at = f"0x{g << GRANULE:x}..0x{(g << GRANULE) + 15:x} ({self.cta.describe_smem(g << GRANULE)})"
        if not generic[k]:
            why = ("its warp executed no tcgen05.fence::after_thread_sync after the mbarrier wait that orders the "
                   "load (PTX ISA tcgen05.fence: an asynchronous tcgen05 operation is ordered after prior waits only "
                   "through it)" if races.state[w.race_id, VC, a] >= epochs[k] else
                   "no mbarrier wait orders the load's completion before it")
            raise ProtocolError(f"{w.where(w.last_op)} reads shared bytes {at} ({access.what}) that a TMA or bulk "
                                f"load wrote, and {why}: a data race; wait on the load's mbarrier (then "
                                f"tcgen05.fence::after_thread_sync) first")
        first = races.ops[int(self.stamp[g]) & OP_MASK]
        if ordered[k]:
            why = "no fence.proxy.async orders it for the async proxy"
        elif tcgen05 and races.state[w.race_id, VC, a] >= epochs[k]:
            why = (f"{w.name} executed no tcgen05.fence::after_thread_sync after the barrier or wait that orders "
                   f"the write")
        else:
            why = "no barrier or mbarrier orders that write before this read"
        raise ProtocolError(f"{w.where(w.last_op)} reads shared bytes {at} through {_FIX[0]} ({access.what}) that "
                            f"{first.where} ({races.warps[a].name}) wrote through the generic proxy, and {why}: a "
                            f"cross-proxy data race; execute {_FIX[1]}")
