"""Synchronisation and warp-level operations: named barriers, mbarriers, fences, elect, shuffles,
votes, reductions and setmaxnreg.

mbarrier (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier"): an object in
shared memory with a phase, a pending-arrival count, an expected-arrival count and a tx-count. Each
executing thread's arrive decrements the pending count; expect-tx raises the tx-count and complete-tx
(a TMA copy landing) lowers it; when both reach zero the phase completes: the phase advances and the
pending count is reset to the expected count. ``try_wait.parity P`` is true once the phase whose
parity is P has completed, i.e. while the current phase's parity differs from P. Arriving past the
pending count, a wait on an uninitialised barrier and an init count outside [1, 2^20 - 1] are
``ProtocolError``s. ``try_wait`` blocks the warp (it may return false after a time limit, which the
scheduler does under some seeds); ``test_wait`` never blocks.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu.errors import ProtocolError
from fa4_mlir.emu.machine import FULL, LANES, WAIT, WARP, MBarrier, Wait
from fa4_mlir.emu.memory import SHARED_BASE, WINDOW_SIZE
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.operands import address, reader, writer
from fa4_mlir.emu.ptx import ast

MAX_ARRIVALS = (1 << 20) - 1
SPURIOUS_TIMEOUT = 8  # one try_wait in this many that would block returns false instead


def _active(m) -> int:
    return WARP if m is FULL else int(np.count_nonzero(m))


# -- named barriers ----------------------------------------------------------------------------------
@handles("bar", "barrier")
def _bar(op, ctx) -> None:
    ins = op.ins
    mods = set(ins.modifiers)
    if "cluster" in mods:
        return _cluster_barrier(op, ctx, mods)
    if "warp" in mods:  # bar.warp.sync membermask: the lanes of a warp already run in lockstep here
        if mods != {"warp", "sync"}:
            raise unsupported(op)
        op.run = lambda w, m: None
        return
    kind = mods & {"sync", "arrive", "red"}
    if len(kind) != 1 or "red" in kind or mods - {"sync", "arrive", "aligned", "cta"}:
        raise unsupported(op)
    aligned = ins.opcode == "bar" or "aligned" in mods
    waits = "sync" in kind
    operands = ins.operands
    if not 1 <= len(operands) <= 2:
        raise unsupported(op, "expected a barrier id and an optional thread count")
    rid = reader(ctx, operands[0], "u32", ins)
    rcount = reader(ctx, operands[1], "u32", ins) if len(operands) == 2 else None
    if not waits and rcount is None:
        raise unsupported(op, "bar.arrive needs a thread count")

    def run(w, m):
        ids = rid(w) if m is FULL else rid(w)[m]
        ident = int(ids[0])
        if (ids != ident).any():  # one warp arrives at one barrier: its id (a register) must be warp-uniform
            raise ProtocolError(f"{w.where(op)}: barrier id must be the same in every active thread of a warp, got "
                                f"{', '.join(map(str, sorted(set(ids.tolist()))))}")
        if ident > 15:
            raise ProtocolError(f"{w.where(op)}: barrier id must be in [0, 15], got {ident}")
        count = int(rcount(w)[0]) if rcount is not None else w.cta.nthreads
        if rcount is not None and (count % WARP or count == 0):
            raise ProtocolError(f"{w.where(op)}: barrier thread count must be a non-zero multiple of 32, got {count}")
        bar = w.cta.bars[ident]
        if bar.arrived == 0:
            bar.expected, bar.first = count, op
        elif bar.expected != count:
            raise ProtocolError(f"{w.where(op)}: barrier {ident} expects {count} threads here but {bar.expected} at "
                                f"{bar.first.where}; every arrival at one barrier must give the same count")
        bar.arrived += WARP if aligned else _active(m)
        generation = bar.generation
        if w.launch.races is not None:  # a release; the completing arrival hands the clock to the waiters
            w.launch.races.bar(w, bar, waits, bar.arrived >= bar.expected)
        if bar.arrived >= bar.expected:
            if bar.arrived > bar.expected:
                raise ProtocolError(f"{w.where(op)}: barrier {ident} got {bar.arrived} arrivals for a count of "
                                    f"{bar.expected}")
            bar.arrived = 0
            bar.generation += 1
            return None
        if not waits:
            return None
        w.wait = Wait(lambda: bar.generation != generation,
                      lambda: f"named barrier {ident} ({bar.arrived} of {bar.expected} threads arrived) at {op.where}",
                      retry=False, op=op)
        return WAIT
    op.run = run


def _cluster_barrier(op, ctx, mods) -> None:
    kind = mods & {"arrive", "wait"}
    if len(kind) != 1 or mods - {"cluster", "arrive", "wait", "aligned", "release", "acquire", "relaxed"}:
        raise unsupported(op)
    if "arrive" in kind:
        def arrive(w, m):
            state = w.launch.cluster_barrier
            # Threads, not warps, count (PTX ISA "barrier.cluster": all non-exited threads of the cluster
            # arrive): a warp's live lanes, fewer than 32 in a block that is not a multiple of 32.
            state["arrived"] += _active(m)
            w.cluster_generation = state["generation"]
            total = sum(cta.nthreads for cta in w.launch.cluster_ctas)
            if w.launch.races is not None:
                w.launch.races.cluster_arrive(w, state["generation"], state["arrived"] >= total)
            if state["arrived"] >= total:
                state["arrived"] = 0
                state["generation"] += 1
        op.run = arrive
    else:
        def wait(w, m):
            state = w.launch.cluster_barrier
            mine = getattr(w, "cluster_generation", None)
            if mine is None:
                raise ProtocolError(f"{w.where(op)}: barrier.cluster.wait without a preceding barrier.cluster.arrive")
            w.cluster_generation = None
            if w.launch.races is not None:
                w.launch.races.cluster_wait(w, mine, state["generation"] > mine)
            if state["generation"] > mine:
                return None
            w.wait = Wait(lambda: state["generation"] > mine,
                          lambda: f"barrier.cluster ({state['arrived']} threads arrived) at {op.where}", False, op)
            return WAIT
        op.run = wait


# -- mbarriers ---------------------------------------------------------------------------------------
def _mbar_address(op, ctx, operand):
    mods = set(op.ins.modifiers)
    shared = any(m.startswith("shared") for m in mods)
    if "shared::cluster" in mods:
        space = "cluster"
    else:
        space = "shared" if shared else "generic"
    _, addr = address(ctx, operand, op.ins, space)

    def barrier_addresses(w, m) -> dict:
        """{shared address: active lanes naming it}: each executing thread operates on its own operand."""
        a = addr(w)
        lanes = LANES if m is FULL else LANES[m]
        values = a[lanes]
        if (values == values[0]).all():
            groups = {int(values[0]): lanes}
        else:
            groups = {int(v): lanes[values == v] for v in np.unique(values)}
        out = {}
        for first, group in groups.items():
            if space == "generic":
                if not SHARED_BASE <= first < SHARED_BASE + WINDOW_SIZE:
                    raise ProtocolError(f"{w.where(op)}: an mbarrier must be in shared memory, got generic address "
                                        f"0x{first:x}")
                first -= SHARED_BASE
            if first % 8:
                raise ProtocolError(f"{w.where(op)}: an mbarrier must be 8-byte aligned, got shared address "
                                    f"0x{first:x}")
            if space == "cluster":  # (CTA, offset): this CTA's or another of the cluster (remote arrive)
                out[w.cta.peer(first, w.where(op))] = group
            else:
                out[w.cta.local(first, w.where(op))] = group
        return out
    return barrier_addresses


def describe(bar: MBarrier, cta) -> str:
    return (f"mbarrier at shared 0x{bar.address:x} ({cta.describe_smem(bar.address)}; phase {bar.phase}, "
            f"{bar.pending} of {bar.expected} arrivals pending, tx-count {bar.tx})")


def arrive(w, bar: MBarrier, count: int, where: str) -> None:
    if count > bar.pending:
        raise ProtocolError(f"{where}: {count} arrival(s) on the {describe(bar, w.cta)} exceed the pending count; "
                            f"the barrier was initialised with {bar.expected} and this phase has fewer arrivals left")
    bar.pending -= count
    bar.check_complete()


def complete_tx(bar: MBarrier, nbytes: int, where: str, cta) -> None:
    if cta.launch.races is not None:  # a landing's complete-tx releases it (race checks)
        cta.launch.races.complete_tx(bar)
    bar.tx -= nbytes
    if bar.tx < -MAX_ARRIVALS:
        raise ProtocolError(f"{where}: tx-count of the {describe(bar, cta)} fell below -(2^20 - 1)")
    bar.check_complete()


@handles("mbarrier")
def _mbarrier(op, ctx) -> None:
    ins = op.ins
    mods = list(ins.modifiers)
    allowed = {"shared", "shared::cta", "shared::cluster", "b64", "release", "acquire", "relaxed", "cta", "cluster",
               "parity", "expect_tx", "noComplete"}
    action = mods[0] if mods else ""
    extra = set(mods[1:]) - allowed
    if extra:
        raise unsupported(op, f"modifiers {sorted(extra)}")
    if "shared::cluster" in mods and action != "arrive":
        raise unsupported(op, "shared::cluster mbarriers are modelled for arrive (remote arrive) only")
    operands = ins.operands
    if action == "init":
        bar_at = _mbar_address(op, ctx, operands[0])
        rcount = reader(ctx, operands[1], "u32", ins)

        def init(w, m):
            counts = rcount(w)
            for a, lanes in bar_at(w, m).items():
                count = int(counts[lanes[-1]])
                if not 1 <= count <= MAX_ARRIVALS:
                    raise ProtocolError(f"{w.where(op)}: mbarrier.init count must be in [1, 2^20 - 1], got {count}")
                w.cta.mbarriers[a] = MBarrier(a, count)
        op.run = init
    elif action == "inval":
        bar_at = _mbar_address(op, ctx, operands[0])

        def inval(w, m):
            for a in bar_at(w, m):
                w.cta.mbarrier(a, w.where(op))
                del w.cta.mbarriers[a]
        op.run = inval
    elif action == "arrive":
        expect = "expect_tx" in mods
        if "noComplete" in mods:
            raise unsupported(op, ".noComplete")
        state = writer(ctx, operands[0], "b64", ins)
        bar_at = _mbar_address(op, ctx, operands[1])
        rtx = reader(ctx, operands[2], "u32", ins) if expect else None
        rcount = reader(ctx, operands[2], "u32", ins) if (not expect and len(operands) > 2) else None

        def run_arrive(w, m):
            token = np.zeros(WARP, np.uint64)
            txs = rtx(w) if rtx is not None else None
            counts = rcount(w) if rcount is not None else None
            for a, lanes in bar_at(w, m).items():
                cta, a = a if isinstance(a, tuple) else (w.cta, a)
                bar = cta.mbarrier(a, w.where(op))
                token[lanes] = bar.phase
                if txs is not None:
                    bar.tx += int(txs[lanes].astype(np.int64).sum())
                count = int(counts[lanes].astype(np.int64).sum()) if counts is not None else len(lanes)
                if w.launch.races is not None:
                    w.launch.races.release(w, bar)
                arrive(w, bar, count, w.where(op))
            state(w, token, m)
        op.run = run_arrive
    elif action in ("expect_tx", "complete_tx"):
        bar_at = _mbar_address(op, ctx, operands[0])
        rtx = reader(ctx, operands[1], "u32", ins)

        def run_tx(w, m):
            txs = rtx(w)
            for a, lanes in bar_at(w, m).items():
                bar = w.cta.mbarrier(a, w.where(op))
                n = int(txs[lanes].astype(np.int64).sum())
                if action == "expect_tx":
                    bar.tx += n  # may bring a negative tx-count (bytes landed first) back to zero
                    bar.check_complete()
                else:
                    complete_tx(bar, n, w.where(op), w.cta)
        op.run = run_tx
    elif action in ("try_wait", "test_wait"):
        parity = "parity" in mods
        done = writer(ctx, operands[0], "pred", ins)
        bar_at = _mbar_address(op, ctx, operands[1])
        rphase = reader(ctx, operands[2], "u32" if parity else "b64", ins)
        blocking = action == "try_wait"

        def run_wait(w, m):
            wants = rphase(w)
            checks = []
            for a, lanes in bar_at(w, m).items():
                bar = w.cta.mbarrier(a, w.where(op))
                for want in {int(x) for x in wants[lanes]}:
                    checks.append((bar, want, lanes[wants[lanes] == want]))

            def complete_lanes():
                result = np.zeros(WARP, np.bool_)
                for bar, want, lanes in checks:
                    result[lanes] = ((bar.phase & 1) != (want & 1)) if parity else (bar.phase > want)
                return result

            def complete():
                return all(((bar.phase & 1) != (want & 1)) if parity else (bar.phase > want)
                           for bar, want, _ in checks)
            if w.launch.races is not None:  # an acquire of each barrier whose awaited phase completed
                w.launch.races.mbar_wait(w, checks, parity)
            if not blocking or complete():
                done(w, complete_lanes(), m)
                return None
            if w.launch.rng.integers(SPURIOUS_TIMEOUT) == 0:  # the time limit expired first
                done(w, complete_lanes(), m)
                return None

            def describe_wait():
                bar, want, _ = checks[0]
                what = f"phase parity {want & 1}" if parity else f"the phase after {want}"
                return f"waits for {what} of the {describe(bar, w.cta)} at {op.where}"
            w.wait = Wait(complete, describe_wait, retry=True, op=op)
            return WAIT
        op.run = run_wait
    elif action == "pending_count":
        raise unsupported(op)
    else:
        raise unsupported(op)


# -- fences ------------------------------------------------------------------------------------------
@handles("fence", "membar")
def _fence(op, ctx) -> None:
    # Memory operations execute in one sequentially consistent order here, so fences order nothing more,
    # except for the race checks: a proxy fence between generic and async proxies covering shared memory.
    mods = op.ins.modifiers
    proxy = "proxy" in mods and ("async" in mods or "async::generic" in mods) and "global" not in mods

    def run(w, m):
        if proxy and w.launch.races is not None:
            w.launch.races.fence_proxy(w)
    op.run = run


# -- warp-level --------------------------------------------------------------------------------------
@handles("elect")
def _elect(op, ctx) -> None:
    ins = op.ins
    if list(ins.modifiers) != ["sync"]:
        raise unsupported(op)
    dst, member = ins.operands
    outs = list(dst.elements) if isinstance(dst, ast.Vector) else [dst]
    if len(outs) != 2:
        raise unsupported(op, "elect.sync writes d|p")
    wd, wp = writer(ctx, outs[0], "b32", ins), writer(ctx, outs[1], "pred", ins)
    rmask = reader(ctx, member, "b32", ins)

    def run(w, m):
        members = int(rmask(w)[0])
        active = LANES if m is FULL else LANES[m]
        chosen = [int(l) for l in active if members >> int(l) & 1]
        if len(chosen) != len(active):
            raise ProtocolError(f"{w.where(op)}: elect.sync executed by lanes outside its membermask 0x{members:08x}")
        leader = chosen[0]
        wd(w, np.full(WARP, leader, np.uint32), m)
        wp(w, LANES == leader, m)
    op.run = run


POISON = 0xBAADF00D  # what a shuffle reads from an inactive lane (undefined in the ISA)


@handles("shfl")
def _shfl(op, ctx) -> None:
    ins = op.ins
    mods = list(ins.modifiers)
    modes = [x for x in mods if x in ("up", "down", "bfly", "idx")]
    if mods[:1] != ["sync"] or len(modes) != 1 or mods[-1] != "b32" or len(mods) != 3:
        raise unsupported(op)
    mode = modes[0]
    dst, a, b, c, member = ins.operands
    outs = list(dst.elements) if isinstance(dst, ast.Vector) else [dst]
    wd = writer(ctx, outs[0], "b32", ins)
    wp = writer(ctx, outs[1], "pred", ins) if len(outs) > 1 else None
    ra, rb, rc, rm = (reader(ctx, x, "b32", ins) for x in (a, b, c, member))

    def run(w, m):
        lane = LANES.astype(np.int64)
        bval = rb(w).astype(np.int64) & 0x1F
        cval = rc(w).astype(np.int64)
        seg = (cval >> 8) & 0x1F
        clamp = cval & 0x1F
        max_lane = (lane & seg) | (clamp & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bval
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        active = FULL if m is FULL else m
        members = int(rm(w)[0])
        if m is not FULL and any(not (members >> int(l) & 1) for l in LANES[m]):
            raise ProtocolError(f"{w.where(op)}: shfl.sync executed by lanes outside its membermask 0x{members:08x}")
        src = ra(w)
        value = src[j].copy()
        if active is not FULL:
            value[~active[j]] = POISON
        wd(w, value, m)
        if wp is not None:
            wp(w, ok, m)
    op.run = run


@handles("vote")
def _vote(op, ctx) -> None:
    ins = op.ins
    mods = list(ins.modifiers)
    kinds = [x for x in mods if x in ("all", "any", "uni", "ballot")]
    if "sync" not in mods or len(kinds) != 1:
        raise unsupported(op)
    kind = kinds[0]
    dst, a, member = ins.operands
    ra = reader(ctx, a, "pred", ins)
    wd = writer(ctx, dst, "b32" if kind == "ballot" else "pred", ins)

    def run(w, m):
        p = ra(w)
        act = np.ones(WARP, np.bool_) if m is FULL else m
        vals = p[act]
        if kind == "ballot":
            bits = int(np.sum((p & act).astype(np.uint64) << LANES.astype(np.uint64)))
            wd(w, np.full(WARP, bits, np.uint32), m)
        elif kind == "all":
            wd(w, np.full(WARP, bool(vals.all())), m)
        elif kind == "any":
            wd(w, np.full(WARP, bool(vals.any())), m)
        else:
            wd(w, np.full(WARP, bool(vals.all() or not vals.any())), m)
    op.run = run


@handles("activemask")
def _activemask(op, ctx) -> None:
    wd = writer(ctx, op.ins.operands[0], "b32", op.ins)

    def run(w, m):
        bits = 0xFFFFFFFF if m is FULL else int(np.bitwise_or.reduce(np.uint64(1) << LANES[m].astype(np.uint64)))
        wd(w, np.full(WARP, bits, np.uint32), m)
    op.run = run


@handles("redux")
def _redux(op, ctx) -> None:
    ins = op.ins
    mods = list(ins.modifiers)
    kinds = [x for x in mods if x in ("add", "min", "max", "and", "or", "xor")]
    types = [x for x in mods if x in ("u32", "s32", "b32")]
    if "sync" not in mods or len(kinds) != 1 or len(types) != 1:
        raise unsupported(op)
    kind, type_name = kinds[0], types[0]
    dst, a, member = ins.operands
    ra, wd = reader(ctx, a, type_name, ins), writer(ctx, dst, type_name, ins)

    def run(w, m):
        vals = ra(w) if m is FULL else ra(w)[m]
        view = vals.view(np.int32) if type_name == "s32" else vals
        if kind == "add":
            r = int(np.sum(vals.astype(np.uint64))) & 0xFFFFFFFF
        elif kind == "min":
            r = int(view.min()) & 0xFFFFFFFF
        elif kind == "max":
            r = int(view.max()) & 0xFFFFFFFF
        else:
            fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
            r = int(fn.reduce(vals))
        wd(w, np.full(WARP, r, np.uint32), m)
    op.run = run


# -- register budget ---------------------------------------------------------------------------------
@handles("setmaxnreg")
def _setmaxnreg(op, ctx) -> None:
    ins = op.ins
    mods = set(ins.modifiers)
    direction = mods & {"inc", "dec"}
    if len(direction) != 1 or mods - {"inc", "dec", "sync", "aligned", "u32"}:
        raise unsupported(op)
    if not isinstance(ins.operands[0], ast.Immediate):
        raise unsupported(op, "the register count must be an immediate")
    count = int(ins.operands[0].value)
    inc = "inc" in direction

    def run(w, m):
        if not 24 <= count <= 256 or count % 8:
            raise ProtocolError(f"{w.where(op)}: setmaxnreg count must be a multiple of 8 in [24, 256], got {count}")
        if m is not FULL:
            raise ProtocolError(f"{w.where(op)}: setmaxnreg is .sync.aligned: every lane of the warp must execute it")
        cta = w.cta
        current = w.maxnreg if w.maxnreg is not None else cta_default_registers(cta)
        if (inc and count < current) or (not inc and count > current):
            raise ProtocolError(f"{w.where(op)}: setmaxnreg.{'inc' if inc else 'dec'} to {count} registers from "
                                f"{current} goes the wrong way")
        group = cta.warps[w.wid // 4 * 4: w.wid // 4 * 4 + 4]
        if inc:
            # The per-CTA pool holds only what setmaxnreg.dec released (PTX ISA, setmaxnreg): the warps
            # together never hold more than the CTA was launched with, its default count per thread.
            pool = cta_default_registers(cta) * WARP * len(cta.warps)
            used = sum((x.maxnreg if x.maxnreg is not None else cta_default_registers(cta)) * WARP
                       for x in cta.warps if x is not w)
            if used + count * WARP > pool:
                w.wait = Wait(lambda: sum((x.maxnreg if x.maxnreg is not None else cta_default_registers(cta)) * WARP
                                          for x in cta.warps if x is not w) + count * WARP <= pool,
                              lambda: f"setmaxnreg.inc to {count} registers waits for registers to be released at "
                                      f"{op.where}", retry=True, op=op)
                return WAIT
        w.maxnreg = count
        others = [x.maxnreg for x in group if x is not w and x.maxnreg is not None and x.setmaxnreg_op is op]
        if any(o != count for o in others):
            raise ProtocolError(f"{w.where(op)}: setmaxnreg must give every warp of a warpgroup the same count")
        w.setmaxnreg_op = op
    op.run = run


def cta_default_registers(cta) -> int:
    """Registers per thread a CTA starts with: the .maxnreg directive, else what the register file gives
    each thread of the block (64K registers, in steps of 8, at most 255)."""
    directive = cta.launch.kernel.directives.get("maxnreg")
    if directive:
        return int(directive[0])
    return min(248, (65536 // max(cta.nthreads, 1)) // 8 * 8)
