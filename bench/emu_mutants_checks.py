"""Experiments behind the generic reasons of bench/emu_mutants.py: instrumented emulator runs that
confirm an escaped mutant is equivalent to its kernel, i.e. that what it deleted orders nothing the
PTX ISA asks for. Each returns what contradicts the reason (empty: confirmed) over the seeds and delays
given. A *hand-off* is a release: ``mbarrier.arrive``, ``tcgen05.commit``, ``bar.sync``/``bar.arrive``
or ``barrier.cluster.arrive`` (what passes tensor memory from one warp to another).

* ``covered_waits``: at every hand-off of a warp, each of its earlier ``tcgen05.ld`` (``st``) has been
  retired by a ``tcgen05.wait::ld`` (``wait::st``) of the warp and published by a later
  ``tcgen05.fence::before_thread_sync`` or commit. ``wait::ld`` waits for *all* prior loads of the
  thread, so a deleted wait whose loads the next wait retires before the hand-off is equivalent; a load
  (store) whose cells another access reaches before it is retired is the in-flight check's error.
* ``superseded_before_fences``: after the before-fence, the warp fences again (or commits) before its
  next hand-off, so what the fence published is published again first.
* ``redundant_after_fences``: the counterfactual on the unmutated kernel: every tcgen05 access of the
  warp between this after-fence and its next one (tensor-memory cells, and a tcgen05.mma's shared
  operands) is ordered by the warp's tcgen05 view *before* the fence (``races.Races.need``), so the
  fence orders nothing the earlier one had not; the accesses so checked are counted.
* ``init_ordered``: a 1-CTA launch, and every mbarrier operation, TMA/bulk copy and commit of every
  warp is ordered after the CTA's mbarrier.init (happens-before from the race checks' clocks): the
  cluster-scope release of ``fence.mbarrier_init`` has no other CTA to reach.
"""

from __future__ import annotations

import contextlib

import numpy as np

from fa4_mlir import emu
from fa4_mlir.emu import races as R


def _mods(op) -> tuple:
    return tuple(op.ins.modifiers)


def _line(op) -> int:
    return int(op.where.split(":")[0].split()[1])


def is_handoff(op) -> bool:
    code, mods = op.ins.opcode, _mods(op)
    if code == "mbarrier":
        return bool(mods) and mods[0] == "arrive"
    if code in ("bar", "barrier"):
        return "warp" not in mods and bool({"sync", "arrive", "red"} & set(mods))
    return is_tcgen05(op, "commit")


def is_tcgen05(op, *actions: str) -> bool:
    mods = _mods(op)
    return op.ins.opcode == "tcgen05" and bool(mods) and mods[0] in actions


def _instrument(program, entry: str, hooks) -> None:
    """``hooks(op)`` -> (before(w, op) or None, after(w, op) or None), wrapped around each op's run."""
    for op in program.kernel(entry).ops:
        before, after = hooks(op)
        if before is None and after is None:
            continue

        def run(w, m, orig=op.run, op=op, before=before, after=after):
            if before is not None:
                before(w, op)
            result = orig(w, m)
            if after is not None:
                after(w, op)
            return result
        op.run = run


def _runs(case, make, run_once, seeds: int, delays, variant: int) -> None:
    for max_delay in delays:
        for seed in range(seeds):
            out = run_once(case, make(), seed, max_delay, variant)
            if out.detected:  # the instrumented run itself failed: no confirmation
                raise RuntimeError(f"seed {seed}, max_delay {max_delay}: {out.how}")


_CACHE: dict = {}


def cached(check, case, **runs):
    """``check(case, **runs)`` once per kernel, launch and settings (it instruments every site at once)."""
    key = (check.__name__, case.key, runs["variant"], runs["seeds"], tuple(runs["delays"]))
    if key not in _CACHE:
        _CACHE[key] = check(case, **runs)
    return _CACHE[key]


def covered_waits(case, ptx: str, which: str, run_once, seeds: int, delays, variant: int) -> list:
    """(hand-off line, what was left) where a warp of the mutant hands off with a tcgen05.{which} not yet
    retired, or retired but not published since."""
    seen: set = set()

    def make():
        pending, unpublished = {}, {}

        def issued(w, op):
            pending[id(w)] = _line(op)

        def retired(w, op):
            if pending.pop(id(w), None) is not None:
                unpublished[id(w)] = _line(op)

        def published(w, op):
            if id(w) not in pending:
                unpublished.pop(id(w), None)

        def handoff(w, op):
            if id(w) in pending:
                seen.add((_line(op), f"the tcgen05.{which} at line {pending[id(w)]} not retired"))
            elif id(w) in unpublished:
                seen.add((_line(op), f"the wait at line {unpublished[id(w)]} not followed by a before-fence"))

        def hooks(op):
            if is_tcgen05(op, which):
                return None, issued
            if is_tcgen05(op, f"wait::{which}"):
                return None, retired
            if is_tcgen05(op, "fence::before_thread_sync"):
                return None, published
            if is_handoff(op):  # a commit publishes (implicit before-fence) and hands off at once
                return (lambda w, op: (published(w, op), handoff(w, op))) if is_tcgen05(op, "commit") else handoff, \
                    None
            return None, None
        program = emu.load_ptx(ptx)
        _instrument(program, case.entry, hooks)
        return program
    _runs(case, make, run_once, seeds, delays, variant)
    return sorted(seen)


def superseded_before_fences(case, run_once, seeds: int, delays, variant: int) -> dict:
    """{line: hand-off lines} of the unmutated kernel's tcgen05.fence::before_thread_sync executions
    after which the warp released (an arrive, a barrier) before it fenced again or committed."""
    seen: dict = {}

    def make():
        armed: dict = {}

        def fence(w, op):
            armed[id(w)] = _line(op)

        def handoff(w, op):
            line = armed.pop(id(w), None)
            if line is not None and not is_tcgen05(op, "commit"):
                seen.setdefault(line, set()).add(_line(op))

        def hooks(op):
            if is_tcgen05(op, "fence::before_thread_sync"):
                return fence, None  # a fence supersedes the warp's previous one (and is armed itself)
            if is_handoff(op):
                return handoff, None
            return None, None
        program = emu.load_ptx(case.ptx)
        _instrument(program, case.entry, hooks)
        return program
    _runs(case, make, run_once, seeds, delays, variant)
    return {line: sorted(lines) for line, lines in seen.items()}


@contextlib.contextmanager
def _patched(cls, name: str, wrapper):
    original = getattr(cls, name)
    setattr(cls, name, wrapper(original))
    try:
        yield
    finally:
        setattr(cls, name, original)


def redundant_after_fences(case, run_once, seeds: int, delays, variant: int) -> dict:
    """{line: [needed, checked]}: per after-fence of the unmutated kernel, how many of its warp's tcgen05
    accesses up to the warp's next after-fence were unordered by the view before it, and how many accesses
    with a conflicting earlier record were checked."""
    seen: dict = {}
    window: dict = {}  # warp -> (line, view before the fence)

    def fence(w, op):
        races = w.launch.races
        window[id(w)] = (_line(op), races.view[w.race_id].copy())
        seen.setdefault(_line(op), [0, 0])

    def tmem(original):
        def run(self, w, cta, lane0, lane1, col0, col1, kind):
            if id(w) in window:
                line, old = window[id(w)]
                latest = self.cells(cta, lane0, lane1, col0, col1).max(axis=(0, 1))
                stamped = (latest >> R.OP_BITS) > 0
                stamped[:, w.race_id] = False
                seen[line][1] += bool(stamped.any())
                seen[line][0] += bool(((latest >> R.OP_BITS) > self.need(w.race_id, kind, old)[:, :self.n]).any())
            return original(self, w, cta, lane0, lane1, col0, col1, kind)
        return run

    def operands(original):
        def run(self, access):
            w = self.races.current
            if id(w) in window and w.last_op.ins.opcode == "tcgen05":
                line, old = window[id(w)]
                found = self.unordered(access, w, old)
                if found is not None:
                    seen[line][1] += 1
                    seen[line][0] += bool((~(found[3] & found[4])).any())
            return original(self, access)
        return run

    def make():
        window.clear()
        program = emu.load_ptx(case.ptx)
        _instrument(program, case.entry, lambda op: (fence, None) if is_tcgen05(op, "fence::after_thread_sync")
                    else (None, None))
        return program
    with _patched(R.Races, "tmem", tmem), _patched(R.SmemShadow, "async_read", operands):
        _runs(case, make, run_once, seeds, delays, variant)
    return seen


def init_ordered(case, ptx: str, run_once, seeds: int, delays, variant: int) -> list:
    """Operations (their lines) on or through mbarriers not ordered after every mbarrier.init of the CTA,
    in the runs of ``ptx`` (with or without the fence: it is a no-op); a launch of several CTAs per
    cluster fails the check outright."""
    if getattr(case, "cluster", (1, 1, 1)) != (1, 1, 1):
        return ["a cluster of several CTAs"]
    seen: set = set()

    def make():
        inits: dict = {}

        def record(w, op):
            races = w.launch.races
            inits.setdefault(id(w.cta), []).append((w.race_id, int(races.state[w.race_id, R.VC, w.race_id])))

        def check(w, op):
            races = w.launch.races
            for a, epoch in inits.get(id(w.cta), []):
                if races.state[w.race_id, R.VC, a] < epoch:
                    seen.add(_line(op))
                    return

        def hooks(op):
            mods = _mods(op)
            if op.ins.opcode == "mbarrier" and mods and mods[0] == "init":
                return None, record
            if op.ins.opcode == "mbarrier" or is_tcgen05(op, "commit") or \
                    (op.ins.opcode == "cp" and mods[:2] == ("async", "bulk")):
                return check, None
            return None, None
        program = emu.load_ptx(ptx)
        _instrument(program, case.entry, hooks)
        return program
    _runs(case, make, run_once, seeds, delays, variant)
    return sorted(seen)


def race_checked(case, ptx: str, run_once, seeds: int, delays, variant: int) -> int:
    """How many tcgen05 accesses of the mutant's runs found earlier records of another warp on their cells
    (each checked against the ISA's ordering rules by the race checks, which report any unordered one:
    then the run fails and this raises)."""
    count = [0]

    def tmem(original):
        def run(self, w, cta, lane0, lane1, col0, col1, kind):
            latest = self.cells(cta, lane0, lane1, col0, col1).max(axis=(0, 1))
            stamped = (latest >> R.OP_BITS) > 0
            stamped[:, w.race_id] = False
            count[0] += bool(stamped.any())
            return original(self, w, cta, lane0, lane1, col0, col1, kind)
        return run
    with _patched(R.Races, "tmem", tmem):
        _runs(case, lambda: emu.load_ptx(ptx), run_once, seeds, delays, variant)
    return count[0]


def ordered_access(case, ptx: str, line: int, run_once, seeds: int, delays, variant: int) -> tuple[int, int]:
    """(executions of the access at ``line`` (generic shared memory, or tcgen05) that found another warp's
    earlier access to the same bytes or cells on record, executions) in the mutant's runs. The race checks, on, verify each is
    ordered (happens-before) and fail the run otherwise; the first number shows the check was not vacuous."""
    found = [0, 0]

    def count(method):
        def wrapper(original):
            def run(self, w, offsets, width, *rest, **kwargs):
                if _line(w.last_op) == line:
                    granules, masks, words, bytes_ = self._granules(offsets, width)
                    other = self.readers[granules].copy()  # other warps' reads of these bytes
                    other[:, w.race_id] = 0
                    other[(self.rmask[granules] & masks[:, None]) == 0] = 0
                    writers = self.gwriter[words]          # another warp's generic write of them, or a landing
                    wrote = (writers >= 0) & (writers != w.race_id) & ((self.gmask[words] & bytes_) != 0)
                    landed = self.writer[granules] >= self.races.n
                    found[0] += bool(other.any() or wrote.any() or landed.any())
                    found[1] += 1
                return original(self, w, offsets, width, *rest, **kwargs)
            return run
        return wrapper
    def tmem(original):
        def run(self, w, cta, lane0, lane1, col0, col1, kind):
            if _line(w.last_op) == line:
                latest = self.cells(cta, lane0, lane1, col0, col1).max(axis=(0, 1))
                stamped = (latest >> R.OP_BITS) > 0
                stamped[:, w.race_id] = False
                found[0] += bool(stamped.any())
                found[1] += 1
            return original(self, w, cta, lane0, lane1, col0, col1, kind)
        return run
    with _patched(R.SmemShadow, "generic_write", count("write")), _patched(R.SmemShadow, "generic_read", count("read")), \
            _patched(R.Races, "tmem", tmem):
        _runs(case, lambda: emu.load_ptx(ptx), run_once, seeds, delays, variant)
    return found[0], found[1]


def never_awaited(case, line: int, run_once, seeds: int, delays, variant: int) -> tuple[int, int]:
    """(arrivals of the tcgen05.commit at ``line``, waits on those mbarriers after them) in the unmutated
    kernel's runs: no wait means no warp observes the phase the commit completes."""
    from fa4_mlir.emu.ops import tcgen05 as T

    arrived, waited = {}, [0]

    def commit_arrive(original):
        def run(w, bar, count, where):
            if where.startswith(f"line {line}:"):
                arrived[id(bar)] = arrived.get(id(bar), 0) + 1
            return original(w, bar, count, where)
        return run

    def waits(original):
        def run(self, w, checks, parity):
            waited[0] += sum(id(bar) in arrived for bar, _, _ in checks)
            return original(self, w, checks, parity)
        return run
    original = T.arrive
    T.arrive = commit_arrive(original)
    try:
        with _patched(R.Races, "mbar_wait", waits):
            _runs(case, lambda: emu.load_ptx(case.ptx), run_once, seeds, delays, variant)
    finally:
        T.arrive = original
    return sum(arrived.values()), waited[0]
