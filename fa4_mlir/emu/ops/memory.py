"""Loads, stores and atomics in every state space, bounds-checked per lane.

An address names a state space either by the instruction (``ld.shared``, ``st.global``, ``ld.param``)
or, for generic accesses, by the window it falls in (see ``fa4_mlir.emu.memory``). A fault names the
address, the nearest allocation, the PTX line, the warp and the lane. Natural alignment of the whole
access (vector accesses included) is required, as the ISA requires it. ``.shared::cluster`` and generic
shared addresses reach any CTA of the cluster (distributed shared memory: CTA r's window at
r << ``memory.CLUSTER_SHIFT``); ``.shared``/``.shared::cta`` only the executing CTA's.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu import types as T
from fa4_mlir.emu.errors import MemoryFault, ProtocolError
from fa4_mlir.emu.machine import FULL, LANES, WARP
from fa4_mlir.emu.memory import CLUSTER_SHIFT, LOCAL_BASE, PARAM_BASE, SHARED_BASE, WINDOW_SIZE, as_words, lane_bytes
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.operands import address, reader, writer
from fa4_mlir.emu.ptx import ast

SPACES = {"global", "shared", "shared::cta", "shared::cluster", "param", "param::entry", "local", "const"}
IGNORED = {"weak", "volatile", "relaxed", "acquire", "release", "nc", "cta", "cluster", "gpu", "sys", "ca", "cg",
           "cs", "lu", "cv", "wb", "wt", "L1::evict_normal", "L1::evict_unchanged", "L1::evict_first",
           "L1::evict_last", "L1::no_allocate", "L2::evict_normal", "L2::evict_first", "L2::evict_last",
           "L2::64B", "L2::128B", "L2::256B", "L2::cache_hint", "unified", "mmio"}
VECTORS = {"v2": 2, "v4": 4, "v8": 8}


def _windows(addrs: np.ndarray) -> np.ndarray:
    """Per-lane state space of generic addresses: 0 global, 1 shared, 2 param, 3 local."""
    kind = np.zeros(addrs.shape, np.int8)
    for code, base in ((1, SHARED_BASE), (2, PARAM_BASE), (3, LOCAL_BASE)):
        kind[(addrs >= np.uint64(base)) & (addrs < np.uint64(base + WINDOW_SIZE))] = code
    return kind


def resolve(w, op, space: str, addrs: np.ndarray, lane_ids: np.ndarray, nbytes: int):
    """(buffer, int64 offsets) of the accessed lanes; raises MemoryFault naming the culprit."""
    def what(i):
        return w.lane_where(op, int(lane_ids[i]))
    if nbytes > 1:
        bad = (addrs % np.uint64(nbytes)) != 0
        if bad.any():
            i = int(np.argmax(bad))
            raise MemoryFault(f"{what(i)}: {nbytes}-byte access at 0x{int(addrs[i]):x} is misaligned "
                              f"(PTX requires {nbytes}-byte alignment)")
    if space == "generic":
        kinds = _windows(addrs)
        first = int(kinds[0])
        if not (kinds == first).all():
            raise MemoryFault(f"{what(0)}: one generic access spans several state spaces; the emulator "
                              f"requires the lanes of one access to agree")
        # A generic shared address may be another CTA's (cvta of a mapa result: PTX ISA "Generic Addressing",
        # the shared::cluster window), so it resolves in the cluster's window.
        space = ("global", "shared::cluster", "param", "local")[first]
        base = (0, SHARED_BASE, PARAM_BASE, LOCAL_BASE)[first]
        if base:
            addrs = addrs - np.uint64(base)
    if space == "global" or space == "const":
        buf, offsets = w.launch.memory.offsets(addrs, nbytes, what)
        if buf is None:
            return None, None
        return buf, offsets
    if space == "shared":
        offsets = addrs.astype(np.int64)
        if w.cta.window or (offsets >> CLUSTER_SHIFT).any():  # this CTA's window only (shared::cta)
            ranks = offsets >> CLUSTER_SHIFT
            if (ranks != w.cta.cluster_rank).any():
                i = int(np.argmax(ranks != w.cta.cluster_rank))
                raise MemoryFault(f"{what(i)}: shared address 0x{int(offsets[i]):x} is not in this CTA's window "
                                  f"(rank {w.cta.cluster_rank}); another CTA's shared memory is reached through "
                                  f"shared::cluster")
            offsets = offsets & ((1 << CLUSTER_SHIFT) - 1)
        w.cta.smem.check(offsets, nbytes, what)
        return w.cta.smem.buf, offsets
    if space == "shared::cluster":
        return _cluster_shared(w, op, addrs.astype(np.int64), nbytes, what)
    if space == "param":
        params = w.launch.params
        offsets = addrs.astype(np.int64)
        if int(offsets.max()) + nbytes > params.size or int(offsets.min()) < 0:
            raise MemoryFault(f"{what(0)}: param access at offset {int(offsets.max())} is outside the "
                              f"{params.size}-byte parameter buffer")
        return params, offsets
    if space == "local":
        size = max(1, w.kernel.local_bytes)
        if w.local is None:
            w.local = np.zeros(WARP * size, np.uint8)
        offsets = addrs.astype(np.int64)
        if int(offsets.max()) + nbytes > size or int(offsets.min()) < 0:
            raise MemoryFault(f"{what(0)}: local access at offset {int(offsets.max())} is outside the "
                              f"{size}-byte local frame")
        return w.local, offsets + lane_ids.astype(np.int64) * size
    raise MemoryFault(f"{what(0)}: state space {space} is not modelled")


def _cluster_shared(w, op, offsets: np.ndarray, nbytes: int, what):
    """(buffer, offsets) of a shared::cluster access: CTA r's window is r << CLUSTER_SHIFT (PTX ISA "State
    Spaces" -> the shared::cta window inside the shared::cluster window), so lanes may reach a peer's
    shared memory (distributed shared memory). (None, None) when the lanes reach several CTAs: the
    callers then go lane by lane. The peer must not have exited (the ISA requires the program to keep a
    CTA alive, e.g. with barrier.cluster, while others access its shared memory); in-flight bytes are
    guarded here for every CTA, since the callers guard only their own."""
    ranks, ctas = offsets >> CLUSTER_SHIFT, w.launch.cluster_ctas
    if (ranks >= len(ctas)).any():
        i = int(np.argmax(ranks >= len(ctas)))
        raise MemoryFault(f"{what(i)}: shared::cluster address 0x{int(offsets[i]):x} must name a CTA of the cluster "
                          f"(rank below {len(ctas)}), got rank {int(ranks[i])}")
    if (ranks != ranks[0]).any():
        return None, None
    cta = ctas[int(ranks[0])]
    if cta is not w.cta and all(x.done for x in cta.warps):
        raise ProtocolError(f"{what(0)}: accesses the shared memory of CTA rank {cta.cluster_rank}, which has exited; "
                            f"a CTA must stay alive while others access its shared memory (barrier.cluster.arrive "
                            f"and wait before it exits)")
    offsets = offsets & ((1 << CLUSTER_SHIFT) - 1)
    cta.smem.check(offsets, nbytes, what)
    if cta.smem.in_flight:
        cta.smem.guard(offsets, nbytes, w.where(op), reading=op.ins.opcode in ("ld", "ldu"))
    return cta.smem.buf, offsets


def _space(op, mods) -> str:
    spaces = [m for m in mods if m in SPACES]
    if len(spaces) > 1:
        raise unsupported(op, "more than one state space")
    if not spaces:
        return "generic"
    if spaces[0] == "shared::cluster":  # another CTA's shared memory is reachable (distributed shared memory)
        return "shared::cluster"
    return spaces[0].split("::")[0]


def _access_shape(op, type_mods: list[str]) -> tuple[str, int]:
    types = [m for m in type_mods if T.is_type(m)]
    vecs = [VECTORS[m] for m in type_mods if m in VECTORS]
    if len(types) != 1:
        raise unsupported(op, "expected one type")
    return types[0], (vecs[0] if vecs else 1)


@handles("ld", "ldu")
def _ld(op, ctx) -> None:
    ins = op.ins
    mods = list(ins.modifiers)
    space = _space(op, mods)
    type_name, count = _access_shape(op, mods)
    unknown = set(mods) - SPACES - IGNORED - set(VECTORS) - {type_name}
    if unknown:
        raise unsupported(op, f"modifiers {sorted(unknown)}")
    if type_name == "b128":
        raise unsupported(op, ".b128 accesses")
    dst, src = ins.operands[0], ins.operands[1]
    dsts = list(dst.elements) if isinstance(dst, ast.Vector) else [dst]
    if len(dsts) != count:
        raise unsupported(op, f"vector of {count} needs {count} destinations")
    sym_space, addr = address(ctx, src, ins, space)
    if space in ("generic", "param") and sym_space not in (None, "generic"):
        space = sym_space  # a call parameter named by symbol lives in local memory
    elem = T.width(type_name)
    writes = [writer(ctx, d, type_name, ins) for d in dsts]
    dtype = T.STORAGE[type_name]

    def run(w, m):
        lane_ids = LANES if m is FULL else LANES[m]
        addrs = addr(w) if m is FULL else addr(w)[m]
        buf, offsets = resolve(w, op, space, addrs, lane_ids, elem * count)
        if buf is None:  # lanes in several global allocations
            words = np.stack([_gather_one(w, op, space, a, l, elem * count) for a, l in zip(addrs, lane_ids)])
        else:
            if buf is w.cta.smem.buf and w.cta.smem.in_flight:  # bytes a TMA load has not landed in?
                w.cta.smem.guard(offsets, elem * count, w.where(op), reading=True)
            if buf is w.cta.smem.buf and w.cta.smem.shadow is not None:  # ordered after the last write?
                w.cta.smem.shadow.generic_read(w, offsets, elem * count)
            words = as_words(lane_bytes(buf, offsets, elem * count), elem)
        for i, write in enumerate(writes):
            if m is FULL:
                write(w, words[:, i].astype(dtype), m)
            else:
                full = np.zeros(WARP, dtype)
                full[m] = words[:, i]
                write(w, full, m)
    op.run = run


def _gather_one(w, op, space, a, lane, nbytes):
    buf, off = resolve(w, op, space, np.array([a], np.uint64), np.array([lane]), nbytes)
    return as_words(lane_bytes(buf, off, nbytes), nbytes if nbytes in (1, 2, 4, 8) else 1)[0]


@handles("st")
def _st(op, ctx) -> None:
    ins = op.ins
    mods = list(ins.modifiers)
    space = _space(op, mods)
    type_name, count = _access_shape(op, mods)
    unknown = set(mods) - SPACES - IGNORED - set(VECTORS) - {type_name}
    if unknown:
        raise unsupported(op, f"modifiers {sorted(unknown)}")
    dst, src = ins.operands[0], ins.operands[1]
    srcs = list(src.elements) if isinstance(src, ast.Vector) else [src]
    if len(srcs) != count:
        raise unsupported(op, f"vector of {count} needs {count} sources")
    sym_space, addr = address(ctx, dst, ins, space)
    if space in ("generic", "param") and sym_space not in (None, "generic"):
        space = sym_space  # a call parameter named by symbol lives in local memory
    if space == "param":
        raise unsupported(op, "stores to kernel parameters")
    elem = T.width(type_name)
    reads = [reader(ctx, s, type_name, ins) for s in srcs]
    dtype = T.STORAGE[type_name]
    steps = np.arange(elem * count, dtype=np.int64)

    def run(w, m):
        lane_ids = LANES if m is FULL else LANES[m]
        addrs = addr(w) if m is FULL else addr(w)[m]
        values = np.stack([r(w) if m is FULL else r(w)[m] for r in reads], axis=1).astype(dtype)
        raw = np.ascontiguousarray(values).view(np.uint8).reshape(len(addrs), elem * count)
        buf, offsets = resolve(w, op, space, addrs, lane_ids, elem * count)
        if buf is None:
            for i, (a, lane) in enumerate(zip(addrs, lane_ids)):
                b, off = resolve(w, op, space, np.array([a], np.uint64), np.array([lane]), elem * count)
                b[int(off[0]) + steps] = raw[i]
            return
        if buf is w.cta.smem.buf and w.cta.smem.in_flight:  # bytes a TMA store or wgmma may still read?
            w.cta.smem.guard(offsets, elem * count, w.where(op))
        if buf is w.cta.smem.buf and w.cta.smem.shadow is not None:  # a generic-proxy write (race checks)
            w.cta.smem.shadow.generic_write(w, offsets, elem * count, op, data=raw)
        # Lanes storing to the same bytes: the highest lane wins (one of them does, on a GPU).
        buf[offsets[:, None] + steps] = raw
    op.run = run


_ATOM_OPS = {"add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"}


@handles("atom", "red")
def _atom(op, ctx) -> None:
    ins = op.ins
    mods = list(ins.modifiers)
    space = _space(op, mods)
    kinds = [m for m in mods if m in _ATOM_OPS]
    types = [m for m in mods if T.is_type(m)]
    unknown = set(mods) - SPACES - IGNORED - _ATOM_OPS - set(types)
    if len(kinds) != 1 or len(types) != 1 or unknown or types[0] not in ("b32", "u32", "s32", "f32", "b64", "u64",
                                                                            "s64", "f64"):
        raise unsupported(op)
    kind, type_name = kinds[0], types[0]
    has_result = ins.opcode == "atom"
    operands = ins.operands
    expected = (3 if has_result else 2) + (1 if kind == "cas" else 0)
    if len(operands) != expected:
        raise unsupported(op, f"expected {expected} operands")
    write = writer(ctx, operands[0], type_name, ins) if has_result else None
    addr_operand = operands[1] if has_result else operands[0]
    sym_space, addr = address(ctx, addr_operand, ins, space)
    if space == "generic" and sym_space not in (None, "generic"):
        space = sym_space
    reads = [reader(ctx, o, type_name, ins) for o in operands[(2 if has_result else 1):]]
    dtype = np.dtype(T.STORAGE[type_name])
    elem = dtype.itemsize
    view = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "s64": np.int64}.get(type_name, dtype.type)

    def combine(old, b, c):
        o, v = np.array([old], dtype).view(view)[0], np.array([b], dtype).view(view)[0]
        if kind == "add":
            r = o + v
        elif kind == "min":
            r = min(o, v)
        elif kind == "max":
            r = max(o, v)
        elif kind == "inc":
            r = 0 if o >= v else o + 1
        elif kind == "dec":
            r = v if (o == 0 or o > v) else o - 1
        elif kind == "and":
            r = o & v
        elif kind == "or":
            r = o | v
        elif kind == "xor":
            r = o ^ v
        elif kind == "exch":
            r = v
        else:  # cas
            r = np.array([c], dtype).view(view)[0] if o == v else o
        return np.array([r], view).view(dtype)[0]

    def run(w, m):
        lane_ids = LANES if m is FULL else LANES[m]
        addrs = addr(w) if m is FULL else addr(w)[m]
        args = [r(w) for r in reads]
        olds = np.zeros(WARP, dtype)
        with np.errstate(all="ignore"):
            for a, lane in zip(addrs, lane_ids):  # lanes in ascending order: one legal serialisation
                buf, off = resolve(w, op, space, np.array([a], np.uint64), np.array([lane]), elem)
                if buf is w.cta.smem.buf and w.cta.smem.in_flight:
                    w.cta.smem.guard(off, elem, w.where(op))
                if buf is w.cta.smem.buf and w.cta.smem.shadow is not None:
                    w.cta.smem.shadow.generic_write(w, off, elem, op)
                cell = buf[int(off[0]):int(off[0]) + elem].view(dtype)
                old = cell[0]
                olds[lane] = old
                cell[0] = combine(old, args[0][lane], args[1][lane] if len(args) > 1 else 0)
        if write is not None:
            write(w, olds, m)
    op.run = run
