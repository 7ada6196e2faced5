"""Asynchronous copies: TMA tensor copies (``cp.async.bulk.tensor``), bulk copies (``cp.async.bulk``),
their bulk groups, and Ampere-style ``cp.async`` with its commit/wait groups.

Each executing lane issues its own copy (kernels elect one lane). A copy's data moves when it
completes, at a time the scheduler draws: a TMA load writes shared memory and then performs
complete-tx on its mbarrier; a TMA store reads shared memory and writes global memory at completion,
so overwriting the staging buffer before ``cp.async.bulk.wait_group.read`` shows up as wrong output.
Whatever the timing, shared memory also holds each copy's bytes as in flight (``memory.InFlight``): a
load's destination until it lands, a store's source until a wait_group of the issuing warp retires it,
so writing them meanwhile is a ``ProtocolError``.
Tensor maps are found through their address (a by-value kernel parameter or a global buffer) and
must have been made by ``emu.TensorMap``.

A ``.multicast::cluster`` tensor load (PTX ISA "cp.async.bulk.tensor") lands the box at dstMem's
CTA-relative offset in every CTA whose rank bit is set in the 16-bit ctaMask, each at its own drawn
time, and performs complete-tx on the mbarrier at mbar's CTA-relative offset in each of them (with
``.cta_group::2``: in the CTA of each destination's pair that has mbar's rank parity); a mask bit beyond
the cluster is a ``ProtocolError``.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu.errors import ProtocolError
from fa4_mlir.emu.machine import FULL, LANES, WAIT, Wait
from fa4_mlir.emu.memory import PARAM_BASE, SHARED_BASE, WINDOW_SIZE, InFlight
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.operands import address, reader, syntax
from fa4_mlir.emu.ops.sync import complete_tx
from fa4_mlir.emu.params import decode_tensor_map
from fa4_mlir.emu.ptx import ast
from fa4_mlir.emu.tensormap import tma_load, tma_store


def _lanes(m):
    return LANES if m is FULL else LANES[m]


def shared_offset(w, op, value: int, what: str) -> int:
    """This CTA's shared-memory offset of a shared::cta or generic operand value."""
    if SHARED_BASE <= value < SHARED_BASE + WINDOW_SIZE:
        value -= SHARED_BASE
    if value >= WINDOW_SIZE:
        raise ProtocolError(f"{w.where(op)}: {what} must be a shared-memory address, got 0x{value:x}")
    return w.cta.local(value, f"{w.where(op)}: {what}")


def _cluster(w, op, value: int, what: str):
    """(CTA, offset) of a shared::cluster operand value: this CTA's or another of its cluster."""
    if value >= SHARED_BASE + WINDOW_SIZE or (value >= WINDOW_SIZE and value < SHARED_BASE):
        raise ProtocolError(f"{w.where(op)}: {what} must be a shared::cluster address, got 0x{value:x}")
    return w.cta.peer(value, f"{w.where(op)}: {what}")


def _multicast_targets(w, op, dst: int, bar: int, mask: int, pair: bool) -> list:
    """[(CTA, offset, barrier CTA, barrier offset)] of a ``.multicast::cluster`` tensor load (PTX ISA
    "cp.async.bulk.tensor"): every CTA whose %cluster_ctarank bit is set in the 16-bit ctaMask gets the tile
    at dstMem's CTA-relative offset, and the complete-tx at mbar's CTA-relative offset in its own shared
    memory. With .cta_group::2 the signal goes to the CTA of each destination's pair that has the parity of
    mbar's rank (the ISA lets it be the destination's or its peer's; CUTLASS's 2-SM multicast clears the
    peer bit so the even CTA's barrier counts both halves)."""
    ctas, where = w.launch.cluster_ctas, w.where(op)
    _, smem_at = _cluster(w, op, dst, "the destination")
    owner, bar_at = _cluster(w, op, bar, "the mbarrier")
    if mask >> len(ctas):
        raise ProtocolError(f"{where}: the multicast ctaMask must name only ranks of the cluster's {len(ctas)} "
                            f"CTA(s) (bits 0..{len(ctas) - 1}), got 0x{mask:04x}")
    targets = []
    for cta in ctas:
        if not mask >> cta.cluster_rank & 1:
            continue
        signalled = cta
        if pair:
            peer = (cta.cluster_rank & ~1) | (owner.cluster_rank & 1)
            if peer >= len(ctas):
                raise ProtocolError(f"{where}: a .cta_group::2 multicast destination must have its CTA pair in the "
                                    f"cluster, got rank {cta.cluster_rank} (pair {cta.cluster_rank & ~1}, "
                                    f"{cta.cluster_rank | 1}) in a cluster of {len(ctas)}")
            signalled = ctas[peer]
        targets.append((cta, smem_at, signalled, bar_at))
    return targets


def read_tensor_map(w, op, generic: int):
    if PARAM_BASE <= generic < PARAM_BASE + WINDOW_SIZE:
        off = generic - PARAM_BASE
        blob = w.launch.params[off:off + 128]
    else:
        buf, off = w.launch.memory.resolve(generic, 128, f"{w.where(op)}: tensor map")
        blob = buf[off:off + 128]
    return decode_tensor_map(blob, w.launch.tensor_maps, w.where(op))


class _Pending:
    """A bulk store of a bulk group: ``done`` once it has read shared memory; ``access`` (its source bytes)
    stays in flight until a wait_group of the issuing warp retires the group."""
    __slots__ = ("done", "describe", "access", "smem")

    def __init__(self, describe: str, access=None, smem=None):
        self.done, self.describe, self.access, self.smem = False, describe, access, smem

    def retire(self) -> None:
        if self.smem is not None:
            self.smem.release(self.access)


def _line(op) -> str:
    return op.where.split(":")[0]  # "line N"


def _drained(groups, limit: int) -> bool:
    """Does wait_group ``limit`` return now? It does once all but the ``limit`` most recent groups are
    complete (whatever the order in which the newer ones finished); it then retires exactly those
    older groups, so a store's source stays in flight until a wait that covers it, even if the copy
    is already done (the ISA orders nothing before that wait)."""
    older = len(groups) - limit
    if older > 0 and not all(p.done for g in groups[:older] for p in g):
        return False
    while len(groups) > limit:
        for p in groups.pop(0):
            p.retire()
    return True


@handles("cp")
def _cp(op, ctx) -> None:
    mods = list(op.ins.modifiers)
    if mods[:3] == ["async", "bulk", "tensor"]:
        return _tensor(op, ctx, mods[3:])
    if mods[:2] == ["async", "bulk"]:
        rest = mods[2:]
        if rest[:1] == ["commit_group"]:
            return _commit(op, "bulk")
        if rest[:1] == ["wait_group"]:
            return _wait(op, ctx, "bulk", rest[1:])
        return _bulk_copy(op, ctx, rest)
    if mods[:1] == ["async"]:
        rest = mods[1:]
        if rest == ["commit_group"]:
            return _commit(op, "cp")
        if rest == ["wait_group"] or rest == ["wait_all"]:
            return _wait(op, ctx, "cp", rest)
        return _cp_async(op, ctx, rest)
    raise unsupported(op)


def _tensor(op, ctx, mods) -> None:
    ins = op.ins
    dims = [m for m in mods if m.endswith("d") and m[:-1].isdigit()]
    known = {"tile", "shared::cluster", "shared::cta", "global", "mbarrier::complete_tx::bytes", "bulk_group",
             "L2::cache_hint", "cta_group::1", "cta_group::2", "multicast::cluster"}
    if len(dims) != 1 or set(mods) - known - set(dims):
        raise unsupported(op, "only tile-mode tensor copies (optionally .multicast::cluster) are modelled")
    rank = int(dims[0][:-1])
    load = mods.index("global") > mods.index(next(m for m in mods if m.startswith("shared")))
    operands = ins.operands
    multicast = "multicast::cluster" in mods
    if multicast and (not load or "shared::cluster" not in mods):
        raise syntax(ctx, ins, ".multicast::cluster is a form of the .shared::cluster.global load only")
    if multicast and len(operands) != 4 + ("L2::cache_hint" in mods):
        raise syntax(ctx, ins, "a multicast tensor load takes [dstMem], [tensorMap, tensorCoords], [mbar], ctaMask"
                               f"{', cache-policy' if 'L2::cache_hint' in mods else ''}, got {len(operands)} operands")
    if load:
        if "mbarrier::complete_tx::bytes" not in mods:
            raise unsupported(op, "a tensor load must signal an mbarrier (mbarrier::complete_tx::bytes)")
        dst, src, bar = operands[0], operands[1], operands[2]
        tmap_op, coords = src.tensor_map, src.coords
    else:
        if "bulk_group" not in mods:
            raise unsupported(op, "a tensor store must be tracked by a bulk group (.bulk_group)")
        dst_t, src_smem = operands[0], operands[1]
        tmap_op, coords = dst_t.tensor_map, dst_t.coords
    if not isinstance(tmap_op, ast.Register) or len(coords) != rank:
        raise unsupported(op, f"expected [tensor-map, {{{rank} coordinates}}]")
    rmap = reader(ctx, tmap_op, "u64", ins)
    rcoords = [reader(ctx, c, "s32", ins) for c in coords]
    if load:
        _, rdst = address(ctx, dst, ins, "shared")
        _, rbar = address(ctx, bar, ins, "shared")

        cluster_space = "shared::cluster" in mods
        rmask = reader(ctx, operands[3], "b16", ins) if multicast else None
        pair = "cta_group::2" in mods

        def run_load(w, m):
            maps, dsts, bars = rmap(w), rdst(w), rbar(w)
            masks = rmask(w) if multicast else None
            cs = [r(w).view(np.int32) for r in rcoords]
            for lane in _lanes(m):
                tmap = read_tensor_map(w, op, int(maps[lane]))
                coord = tuple(int(c[lane]) for c in cs)
                if multicast:
                    targets = _multicast_targets(w, op, int(dsts[lane]), int(bars[lane]), int(masks[lane]), pair)
                elif cluster_space:  # .cta_group::2: the mbarrier may be the peer CTA's
                    targets = [(*_cluster(w, op, int(dsts[lane]), "the destination"),
                                *_cluster(w, op, int(bars[lane]), "the mbarrier"))]
                else:
                    targets = [(w.cta, shared_offset(w, op, int(dsts[lane]), "the destination"),
                                w.cta, shared_offset(w, op, int(bars[lane]), "the mbarrier"))]
                where = w.where(op)
                for cta, smem_at, bar_cta, bar_at in targets:  # one landing per destination CTA, each in its own time
                    bar_cta.mbarrier(bar_at, where)
                    access = cta.smem.track(InFlight(smem_at, smem_at + tmap.box_bytes, True,
                                                     f"the TMA load at {_line(op)} ({w.name})",
                                                     "wait on the load's mbarrier first"), where)

                    def land(tmap=tmap, coord=coord, smem_at=smem_at, bar_at=bar_at, cta=cta, where=where,
                             access=access, bar_cta=bar_cta):
                        cta.smem.release(access)
                        nbytes = tma_load(tmap, w.launch.memory, coord, cta.smem.buf, smem_at, what=where)
                        complete_tx(bar_cta.mbarrier(bar_at, where), nbytes, where, bar_cta)
                    w.launch.schedule(land)
        op.run = run_load
    else:
        _, rsrc = address(ctx, src_smem, ins, "shared")

        def run_store(w, m):
            maps, srcs = rmap(w), rsrc(w)
            cs = [r(w).view(np.int32) for r in rcoords]
            for lane in _lanes(m):
                tmap = read_tensor_map(w, op, int(maps[lane]))
                coord = tuple(int(c[lane]) for c in cs)
                smem_at = shared_offset(w, op, int(srcs[lane]), "the source")
                cta = w.cta
                where = w.where(op)
                access = cta.smem.track(InFlight(smem_at, smem_at + tmap.box_bytes, False,
                                                 f"the TMA store at {_line(op)} ({w.name})",
                                                 "the issuing thread must wait with cp.async.bulk.wait_group.read "
                                                 "(and a barrier must follow) first"), where)
                pending = _Pending(f"TMA store at {op.where}", access, cta.smem)
                w.bulk_open.append(pending)

                def flush(tmap=tmap, coord=coord, smem_at=smem_at, cta=cta, pending=pending, where=where):
                    tma_store(tmap, w.launch.memory, coord, cta.smem.buf, smem_at, what=where)
                    pending.done = True
                w.launch.schedule(flush)
        op.run = run_store


def _bulk_copy(op, ctx, mods) -> None:
    """cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size, [mbar] and
    cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size."""
    ins = op.ins
    if mods[:2] in (["shared::cluster", "global"], ["shared::cta", "global"]) and \
            "mbarrier::complete_tx::bytes" in mods and set(mods) <= {"shared::cluster", "shared::cta", "global",
                                                                      "mbarrier::complete_tx::bytes", "L2::cache_hint"}:
        dst, src, size, bar = ins.operands[:4]
        _, rdst = address(ctx, dst, ins, "shared")
        _, rsrc = address(ctx, src, ins, "global")
        rsize = reader(ctx, size, "u32", ins)
        _, rbar = address(ctx, bar, ins, "shared")

        def run(w, m):
            for lane in _lanes(m):
                n = int(rsize(w)[lane])
                s_at = shared_offset(w, op, int(rdst(w)[lane]), "the destination")
                g_at = int(rsrc(w)[lane])
                b_at = shared_offset(w, op, int(rbar(w)[lane]), "the mbarrier")
                if n % 16 or s_at % 16 or g_at % 16:
                    raise ProtocolError(f"{w.where(op)}: bulk copy size and addresses must be multiples of 16, got "
                                        f"{n} bytes from 0x{g_at:x} to shared 0x{s_at:x}")
                cta = w.cta
                cta.smem.check(np.array([s_at]), n, lambda i: w.where(op))
                buf, off = w.launch.memory.resolve(g_at, n, w.where(op))
                where = w.where(op)
                access = cta.smem.track(InFlight(s_at, s_at + n, True, f"the bulk copy at {_line(op)} ({w.name})",
                                                 "wait on the copy's mbarrier first"), where)

                def land(s_at=s_at, buf=buf, off=off, n=n, b_at=b_at, cta=cta, where=where, access=access):
                    cta.smem.release(access)
                    cta.smem.buf[s_at:s_at + n] = buf[off:off + n]
                    complete_tx(cta.mbarrier(b_at, where), n, where, cta)
                w.launch.schedule(land)
        op.run = run
        return
    if mods[:2] == ["global", "shared::cta"] and set(mods) <= {"global", "shared::cta", "bulk_group", "L2::cache_hint"}:
        dst, src, size = ins.operands[:3]
        _, rdst = address(ctx, dst, ins, "global")
        _, rsrc = address(ctx, src, ins, "shared")
        rsize = reader(ctx, size, "u32", ins)

        def run_store(w, m):
            for lane in _lanes(m):
                n = int(rsize(w)[lane])
                s_at = shared_offset(w, op, int(rsrc(w)[lane]), "the source")
                g_at = int(rdst(w)[lane])
                buf, off = w.launch.memory.resolve(g_at, n, w.where(op))
                cta = w.cta
                access = cta.smem.track(InFlight(s_at, s_at + n, False, f"the bulk store at {_line(op)} ({w.name})",
                                                 "the issuing thread must wait with cp.async.bulk.wait_group.read "
                                                 "(and a barrier must follow) first"), w.where(op))
                pending = _Pending(f"bulk store at {op.where}", access, cta.smem)
                w.bulk_open.append(pending)

                def flush(s_at=s_at, buf=buf, off=off, n=n, cta=cta, pending=pending):
                    buf[off:off + n] = cta.smem.buf[s_at:s_at + n]
                    pending.done = True
                w.launch.schedule(flush)
        op.run = run_store
        return
    raise unsupported(op)


def _commit(op, kind: str) -> None:
    def run(w, m):
        if kind == "bulk":
            w.bulk_groups.append(w.bulk_open)
            w.bulk_open = []
        else:
            w.cp_groups.append(w.cp_open)
            w.cp_open = []
    op.run = run


def _wait(op, ctx, kind: str, rest) -> None:
    ins = op.ins
    if kind == "bulk" and set(rest) - {"read"}:
        raise unsupported(op)
    if rest == ["wait_all"]:
        limit = 0
    else:
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], ast.Immediate):
            raise unsupported(op, "the group count must be an immediate")
        limit = int(ins.operands[0].value)

    def run(w, m):
        groups = w.bulk_groups if kind == "bulk" else w.cp_groups
        if kind == "cp" and rest == ["wait_all"]:
            w.cp_groups.append(w.cp_open)
            w.cp_open = []
        if _drained(groups, limit):
            return None
        w.wait = Wait(lambda: _drained(groups, limit),
                      lambda: f"waits for {kind} copy groups to drain to {limit} at {op.where}", retry=False, op=op)
        return WAIT
    op.run = run


def _cp_async(op, ctx, mods) -> None:
    """cp.async.{ca,cg}.shared{::cta}.global{.L2::...} [dst], [src], cp-size{, src-size}: copies cp-size
    bytes (4, 8 or 16), of which only the first src-size come from global memory; the rest are zeros."""
    ins = op.ins
    cache = [m for m in mods if m in ("ca", "cg")]
    spaces = [m for m in mods if m in ("shared", "shared::cta", "global")]
    extra = set(mods) - {"ca", "cg", "shared", "shared::cta", "global", "L2::64B", "L2::128B", "L2::256B",
                         "L2::cache_hint"}
    if len(cache) != 1 or len(spaces) != 2 or extra:
        raise unsupported(op)
    operands = ins.operands
    dst, src, size = operands[:3]
    _, rdst = address(ctx, dst, ins, "shared")
    _, rsrc = address(ctx, src, ins, "global")
    if not isinstance(size, ast.Immediate) or int(size.value) not in (4, 8, 16):
        raise unsupported(op, "cp-size must be an immediate 4, 8 or 16")
    nbytes = int(size.value)
    rsrc_size = reader(ctx, operands[3], "u32", ins) if len(operands) > 3 else None

    def run(w, m):
        lanes = _lanes(m)
        dsts = rdst(w)[lanes].astype(np.int64)
        srcs = rsrc(w)[lanes]
        counts = rsrc_size(w)[lanes].astype(np.int64) if rsrc_size is not None else np.full(len(lanes), nbytes)
        if ((dsts - 0) % nbytes).any() or (srcs % np.uint64(nbytes)).any():
            raise ProtocolError(f"{w.where(op)}: cp.async of {nbytes} bytes needs {nbytes}-byte aligned addresses")
        targets = np.array([w.cta.local(int(d), w.lane_where(op, int(lane))) for d, lane in zip(dsts, lanes)],
                           np.int64)
        w.cta.smem.check(targets, nbytes, lambda i: w.lane_where(op, int(lanes[i])))
        data = np.zeros((len(lanes), nbytes), np.uint8)
        for i, (s, c) in enumerate(zip(srcs.tolist(), counts.tolist())):
            c = min(int(c), nbytes)
            if c > 0:
                buf, off = w.launch.memory.resolve(int(s), c, w.lane_where(op, int(lanes[i])))
                data[i, :c] = buf[off:off + c]
        pending = _Pending(f"cp.async at {op.where}")
        w.cp_open.append(pending)
        cta = w.cta
        index = (targets[:, None] + np.arange(nbytes)).reshape(-1)
        access = cta.smem.track(InFlight(index.min(), index.max() + 1, True, f"the cp.async at {_line(op)} ({w.name})",
                                         "wait with cp.async.wait_group first", index=index), w.where(op))

        def land():
            cta.smem.release(access)
            cta.smem.buf[targets[:, None] + np.arange(nbytes)] = data
            pending.done = True
            if cta.smem.shadow is not None:  # cp.async writes through the generic proxy (Triton fences it)
                cta.smem.shadow.generic_write(w, targets, nbytes, op, check=False)  # checked at issue
        w.launch.schedule(land)
    op.run = run
