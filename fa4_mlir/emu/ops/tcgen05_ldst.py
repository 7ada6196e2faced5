"""``tcgen05.ld`` / ``tcgen05.st`` (sm_100a): registers <-> tensor memory in every shape of the ISA, and
the tensor-memory helpers the other tcgen05 handlers share.

PTX ISA "TensorCore 5th Generation Family Instructions" -> "tcgen05.ld", "tcgen05.st":

    tcgen05.ld.sync.aligned.{32x32b|16x64b|16x128b|16x256b}.num{.pack::16b}.b32  r, [taddr];
    tcgen05.ld.sync.aligned.16x32bx2.num{.pack::16b}.b32                          r, [taddr], immHalfSplitoff;
    tcgen05.st.sync.aligned.{32x32b|16x64b|16x128b|16x256b}.num{.unpack::16b}.b32 [taddr], r;
    tcgen05.st.sync.aligned.16x32bx2.num{.unpack::16b}.b32                         [taddr], immHalfSplitoff, r;

Which cell each register moves: ``isa.tmem_fragments`` (the "Matrix fragments" table). Rules enforced:
all 32 threads execute it (.sync.aligned) with the same ``taddr``; warp ``w`` reaches TMEM lanes
``32*(w % 4)`` .. ``+31`` only ("Tensor Memory" -> access restrictions), so a 32-lane block must start at
that base and a 16-lane block inside it; the columns must lie inside one allocation. A shape, ``.num``
or register count the ISA does not have is a ``PtxSyntaxError`` (ptxas rejects it); ``tcgen05.ld.red``
is ``Unsupported``.

Asynchrony: a load's destination registers are usable at once (PTX ISA 9.7.16.6.4.5: a true register
dependency is respected), but its cells stay in flight until the warp's ``tcgen05.wait::ld``: a write to
them meanwhile is a ``ProtocolError``; a store's cells are in flight until ``tcgen05.wait::st``.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu import types as T
from fa4_mlir.emu.errors import ProtocolError
from fa4_mlir.emu.isa import tmem_fragments as F
from fa4_mlir.emu.isa.tcgen05_desc import TMEM_COLUMNS, split_tmem_address
from fa4_mlir.emu.machine import FULL, WARP
from fa4_mlir.emu.ops import unsupported
from fa4_mlir.emu.ops.operands import address, reader, syntax, writer
from fa4_mlir.emu.ptx import ast
from fa4_mlir.emu.tmem import Region, TensorMemory

_SYNC = {"sync", "aligned"}


def tmem(cta) -> TensorMemory:
    """The CTA's tensor memory, made on first use."""
    if cta.tmem is None:
        cta.tmem = TensorMemory()
    return cta.tmem


def full_warp(w, op, m, what: str) -> None:
    if m is not FULL:
        raise ProtocolError(f"{w.where(op)}: {what} is .sync.aligned: all 32 lanes of the warp must execute it")


def _parse(op, ctx, action: str, mods: list):
    """(shape, num, packed) of the modifiers after ld/st; illegal combinations are syntax errors."""
    ins = op.ins
    if "red" in mods:
        raise unsupported(op, "tcgen05.ld.red (the min/max reduction) is not modelled")
    rest = [x for x in mods if x not in _SYNC]
    pack = "pack::16b" if action == "ld" else "unpack::16b"
    wrong = "unpack::16b" if action == "ld" else "pack::16b"
    if wrong in rest:
        raise syntax(ctx, ins, f"tcgen05.{action} takes .{pack}, not .{wrong}")
    packed = pack in rest
    rest = [x for x in rest if x != pack]
    if len(rest) != 3 or rest[2] != "b32" or not rest[1].startswith("x") or not rest[1][1:].isdigit():
        raise syntax(ctx, ins, f"tcgen05.{action} modifiers must be .sync.aligned.<shape>.x<num>"
                               f"[.{pack}].b32, got .{'.'.join(mods)}")
    shape, num = rest[0], int(rest[1][1:])
    try:
        frag = F.fragment(shape, num, packed)
    except ValueError as exc:
        raise syntax(ctx, ins, str(exc)) from None
    return frag


def compile_ld_st(op, ctx, action: str, mods: list) -> None:
    frag = _parse(op, ctx, action, mods)
    ins = op.ins
    split = frag.shape == "16x32bx2"
    operands = list(ins.operands)
    want = 3 if split else 2
    if len(operands) != want:
        form = ("r, [taddr]" if action == "ld" else "[taddr], r") if not split else \
            ("r, [taddr], immHalfSplitoff" if action == "ld" else "[taddr], immHalfSplitoff, r")
        raise syntax(ctx, ins, f"tcgen05.{action}.{frag.shape} operands must be {form}, got {len(operands)} operands")
    regs_operand, addr_operand = (operands[0], operands[1]) if action == "ld" else (operands[-1], operands[0])
    offset = 0
    if split:
        imm = operands[2] if action == "ld" else operands[1]
        if not isinstance(imm, ast.Immediate):
            raise syntax(ctx, ins, f"immHalfSplitoff must be an immediate, got {imm}")
        offset = int(imm.value) & 0xFFFFFFFF
    regs = regs_operand.elements if isinstance(regs_operand, ast.Vector) else [regs_operand]
    if len(regs) != frag.registers:
        raise syntax(ctx, ins, f"tcgen05.{action}.{frag.shape}.x{frag.num} needs {frag.registers} registers "
                               f"(the ISA's .num table), got {len(regs)}")
    _, addr = address(ctx, addr_operand, ins, "tmem")
    dtype = T.STORAGE["b32"]
    if action == "ld":
        writes = [writer(ctx, r, "b32", ins) for r in regs]
    else:
        reads = [reader(ctx, r, "b32", ins) for r in regs]
    line = op.where.split(":")[0]
    store = action == "st"

    def locate(w, m):
        """(memory, first lanes, first columns) of the warp's one or two blocks, every rule checked."""
        full_warp(w, op, m, f"tcgen05.{action}")
        taddrs = addr(w)
        taddr = int(taddrs[0])
        if (taddrs != taddrs[0]).any():
            other = int(np.argmax(taddrs != taddrs[0]))
            raise ProtocolError(f"{w.where(op)}: every thread of tcgen05.{action} must give the same taddr, got "
                                f"0x{taddr:08x} in lane 0 and 0x{int(taddrs[other]):08x} in lane {other}")
        starts = [taddr, (taddr + offset) & 0xFFFFFFFF] if split else [taddr]
        base, memory = 32 * (w.wid % 4), tmem(w.cta)
        lanes, cols = [], []
        for at in starts:
            lane, col = split_tmem_address(at)
            rows, width = frag.lanes, frag.columns
            if lane < base or lane + rows > base + 32:
                raise ProtocolError(f"{w.where(op)}: warp {w.wid} (warp {w.wid % 4} of its warpgroup) reaches "
                                    f"tensor-memory lanes {base}..{base + 31} only; this access needs lanes "
                                    f"{lane}..{lane + rows - 1}")
            if col + width > TMEM_COLUMNS:
                raise ProtocolError(f"{w.where(op)}: columns {col}..{col + width - 1} run past tensor memory's "
                                    f"{TMEM_COLUMNS}")
            memory.check_allocated(col, col + width, w.where(op))
            memory.guard(lane, lane + rows, col, col + width, store, w.where(op))
            if w.launch.races is not None:
                w.launch.races.tmem(w, w.cta, lane, lane + rows, col, col + width, action)
            lanes.append(lane)
            cols.append(col)
        return memory, np.array(lanes, np.int64), np.array(cols, np.int64)

    if action == "ld":
        def run(w, m):
            memory, lane0, col0 = locate(w, m)
            values = F.gather(memory.cells, frag, lane0, col0)
            for i, write in enumerate(writes):
                write(w, values[:, i].astype(dtype), m)
            # PTX ISA 9.7.16.6.4.5: a true register dependency on a tcgen05.ld result is respected without
            # tcgen05.wait::ld (CuTe DSL kernels use the registers right away), so the values are usable
            # now. What the wait orders is the TMEM read itself: until then a write to the cells is the
            # anti-dependence race the same section names.
            for lane, col in zip(lane0.tolist(), col0.tolist()):
                w.tmem_ld_reads.append(memory.track(Region(
                    lane, lane + frag.lanes, col, col + frag.columns, False, f"the tcgen05.ld at {line} ({w.name})",
                    "the loading warp must execute tcgen05.wait::ld (then tcgen05.fence::before_thread_sync and "
                    "a synchronisation) first")))
    else:
        def run(w, m):
            memory, lane0, col0 = locate(w, m)
            values = np.empty((WARP, frag.registers), np.uint32)
            for i, read in enumerate(reads):
                values[:, i] = read(w)
            F.scatter(memory.cells, frag, lane0, col0, values)
            for lane, col in zip(lane0.tolist(), col0.tolist()):
                w.tmem_st_pending.append(memory.track(Region(
                    lane, lane + frag.lanes, col, col + frag.columns, True, f"the tcgen05.st at {line} ({w.name})",
                    "wait with tcgen05.wait::st first")))
    op.run = run
