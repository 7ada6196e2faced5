"""Warpgroup MMA (``wgmma.*``, sm_90a): D = A x B (+ D), A from shared memory (SS) or registers (RS).

``wgmma.mma_async.sync.aligned.m64nNkK.dtype.atype.btype d, a, b-desc, scale-d, imm-scale-a,
imm-scale-b{, imm-trans-a}{, imm-trans-b}`` (A from registers: 16-bit pairs, or for e4m3/e5m2 four
bytes a register, the lowest byte first): each warp q of the warpgroup owns rows 16q..16q+15 of the
64 x N result (the register fragments of the ISA), and those rows depend only on the same rows of A,
so each warp computes its share when it issues; no warp waits for the others here.

The operation is asynchronous: shared-memory operands are read at a completion time the scheduler
draws (so a buffer released before ``wgmma.wait_group`` can be overwritten first), and the result
reaches the registers at ``wgmma.wait_group``. Until then, any other instruction that names a
destination or A-fragment register is a ``ProtocolError`` (the ISA makes it undefined). Its shared
operands are in flight (``memory.InFlight``) from issue until a ``wgmma.wait_group`` of any warp of the
warpgroup retires its group (the wgmma is one warpgroup operation): a write to them meanwhile (a TMA
load into a stage released too early) is a ``ProtocolError`` whatever the timing.

Numerics: each K-step is one fused sum of the exact products and the accumulator with the H100's
truncated alignment and round-toward-zero (``isa.mma_numerics``: the model, its parameters and the
7.3 million probe outputs it reproduces bit for bit).
"""

from __future__ import annotations

import re

import numpy as np

from fa4_mlir.emu.errors import EmulationError, ProtocolError
from fa4_mlir.emu.isa import wgmma_layout as L
from fa4_mlir.emu.isa.mma_numerics import dot_accumulate
from fa4_mlir.emu.machine import FULL, WAIT, WARP, Wait
from fa4_mlir.emu.memory import InFlight
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.operands import reader
from fa4_mlir.emu.ptx import ast

_SHAPE = re.compile(r"m64n(\d+)k(\d+)$")
_ELEM = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1}


def _fp8_table(kind: str) -> np.ndarray:
    """float64 value of every e4m3 / e5m2 byte (PTX ISA "Alternate floating point data formats")."""
    exp_bits, man_bits, bias = (4, 3, 7) if kind == "e4m3" else (5, 2, 15)
    table = np.zeros(256, np.float64)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> man_bits) & ((1 << exp_bits) - 1)
        f = b & ((1 << man_bits) - 1)
        if kind == "e4m3" and e == 15 and f == 7:
            table[b] = np.nan
        elif kind == "e5m2" and e == 31:
            table[b] = np.nan if f else s * np.inf
        elif e == 0:
            table[b] = s * f * 2.0 ** (1 - bias - man_bits)
        else:
            table[b] = s * (1 + f / (1 << man_bits)) * 2.0 ** (e - bias)
    return table


_FP8 = {"e4m3": _fp8_table("e4m3"), "e5m2": _fp8_table("e5m2")}


def to_float64(bits: np.ndarray, kind: str) -> np.ndarray:
    if kind == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if kind == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if kind == "tf32":
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    return _FP8[kind][bits.astype(np.uint8)]


class _Entry:
    """One issued wgmma of one warp: computes its 16 x N block on demand, in issue order."""
    __slots__ = ("compute_fn", "result", "prev", "slots", "a_slots", "access")

    def __init__(self, compute_fn, prev, slots, a_slots, access):
        self.compute_fn, self.result, self.prev, self.slots, self.a_slots = compute_fn, None, prev, slots, a_slots
        self.access = access  # its shared operand bytes, in flight until its group is retired

    def compute(self):
        if self.result is None:
            base = self.prev.compute() if self.prev is not None else None
            self.result = self.compute_fn(base)
            self.prev = None
        return self.result


@handles("wgmma")
def _wgmma(op, ctx) -> None:
    mods = list(op.ins.modifiers)
    if mods[0] == "fence" and set(mods[1:]) <= {"sync", "aligned"}:
        op.run = lambda w, m: None
        return
    if mods[0] == "commit_group" and set(mods[1:]) <= {"sync", "aligned"}:
        op.run = _commit
        return
    if mods[0] == "wait_group" and set(mods[1:]) <= {"sync", "aligned"}:
        return _wait(op)
    if mods[0] == "mma_async":
        return _mma(op, ctx, mods[1:])
    raise unsupported(op)


def _commit(w, m) -> None:
    for entry in w.wgmma_open:
        entry.access.seq = w.wgmma_committed
    w.wgmma_committed += 1
    w.wgmma_groups.append(w.wgmma_open)
    w.wgmma_open = []


def _retire(w, limit: int) -> None:
    while len(w.wgmma_groups) > limit:
        for entry in w.wgmma_groups.pop(0):
            values = entry.compute()
            for i, slot in enumerate(entry.slots):
                w.regs[slot] = values[:, i].copy()
    # Groups 0 .. retired-1 of this warp are complete, so are those of its warpgroup: their operands are free.
    retired, smem, group = w.wgmma_committed - len(w.wgmma_groups), w.cta.smem, w.wid // 4
    for access in [a for a in smem.in_flight if a.group == group and a.seq is not None and a.seq < retired]:
        smem.release(access)
    pending = set()
    for entry in w.wgmma_open + [e for g in w.wgmma_groups for e in g]:
        pending.update(entry.slots)
        pending.update(entry.a_slots)
    w.pending_regs = pending | w.tmem_ld_pending


def _wait(op) -> None:
    operands = op.ins.operands
    if len(operands) != 1 or not isinstance(operands[0], ast.Immediate):
        raise unsupported(op, "wgmma.wait_group needs an immediate group count")
    limit = int(operands[0].value)

    def run(w, m):
        _retire(w, limit)
    op.run = run


def _mma(op, ctx, mods) -> None:
    ins = op.ins
    rest = [x for x in mods if x not in ("sync", "aligned")]
    if len(rest) != 4 or not _SHAPE.match(rest[0]):
        raise unsupported(op, "expected .m64nNkK.dtype.atype.btype")
    shape, dtype, atype, btype = rest
    n, k = (int(x) for x in _SHAPE.match(shape).groups())
    if dtype not in ("f32", "f16") or atype not in _ELEM or btype not in _ELEM:
        raise unsupported(op, f"types .{dtype}.{atype}.{btype}")
    elem = _ELEM[atype]
    if k * elem != 32 or n % 8 or not 8 <= n <= 256:
        raise unsupported(op, f"shape {shape} for .{atype}")
    operands = ins.operands
    d = operands[0]
    if not isinstance(d, ast.Vector):
        raise unsupported(op, "the accumulator must be a vector of registers")
    per_thread = n // 2 if dtype == "f32" else n // 4
    if len(d.elements) != per_thread:
        raise unsupported(op, f"{shape} .{dtype} needs {per_thread} accumulator registers, got {len(d.elements)}")
    slots = tuple(ctx.slot(r, ins) for r in d.elements)
    rs = isinstance(operands[1], ast.Vector)
    transposable = atype in ("bf16", "f16")
    n_imm = (3 if rs else 4) if transposable else 2  # scale-a, scale-b, [trans-a], [trans-b]
    if len(operands) != 4 + n_imm:
        raise unsupported(op, f"expected {4 + n_imm} operands, got {len(operands)}")
    imms = operands[4:]
    if not all(isinstance(x, ast.Immediate) for x in imms):
        raise unsupported(op, "scale and transpose operands must be immediates")
    scale_a, scale_b = int(imms[0].value), int(imms[1].value)
    trans_a = int(imms[2].value) if transposable and not rs else 0
    trans_b = int(imms[-1].value) if transposable else 0
    if scale_a not in (1, -1) or scale_b not in (1, -1) or trans_a not in (0, 1) or trans_b not in (0, 1):
        raise unsupported(op, "imm-scale must be 1 or -1, imm-trans 0 or 1")
    rb = reader(ctx, operands[2], "b64", ins)
    rscale = reader(ctx, operands[3], "pred", ins)
    if rs:
        a_regs = operands[1].elements
        if len(a_regs) != 4 or atype not in ("bf16", "f16", "e4m3", "e5m2") or atype != btype:
            raise unsupported(op, "register A must be 4 x .b32 of f16/bf16 pairs or e4m3/e5m2 quads (as B)")
        a_slots = tuple(ctx.slot(r, ins) for r in a_regs)
        ra = None
        a_rows, a_cols = L.a_fragment_coords(k, elem)
    else:
        a_slots = ()
        ra = reader(ctx, operands[1], "b64", ins)
    d_rows, d_cols = L.accumulator_coords(n)
    op.is_async_mma = True

    def run(w, m):
        if m is not FULL:
            raise ProtocolError(f"{w.where(op)}: wgmma.mma_async is .sync.aligned: all 32 lanes must execute it")
        q = w.wid % 4
        threads = slice(32 * q, 32 * q + 32)
        rows, cols = d_rows[threads] - 16 * q, d_cols[threads]
        desc_b = L.decode_descriptor(int(rb(w)[0]))
        use_c = bool(rscale(w)[0])
        if rs:
            bits = np.stack([w.regs[s] for s in a_slots], axis=1)  # (32, 4) b32
            # each register holds 32 / elem bits elements, the lowest first (a_fragment_coords' order)
            width = 8 * elem
            parts = np.stack([(bits >> np.uint32(width * i)) & np.uint32((1 << width) - 1) for i in range(4 // elem)],
                             axis=2).reshape(WARP, 16 // elem)
            a_block = np.zeros((16, k), np.float64)
            a_block[a_rows[threads] - 16 * q, a_cols[threads]] = to_float64(parts, atype)
            desc_a = None
        else:
            desc_a = L.decode_descriptor(int(ra(w)[0]))
            a_block = None
        prev = None
        for entry in reversed([e for g in w.wgmma_groups for e in g] + w.wgmma_open):  # latest issued first
            if entry.slots == slots:
                prev = entry
                break
        initial = np.stack([w.regs[s] for s in slots], axis=1) if (prev is None and use_c) else None
        smem = w.cta.smem.buf

        def compute(base, a_block=a_block):
            if a_block is None:
                a_bits = L.load_operand(smem, desc_a, 64, k, elem, not trans_a)
                a_block = to_float64(a_bits[16 * q:16 * q + 16], atype)
            b = to_float64(L.load_operand(smem, desc_b, n, k, elem, not trans_b), btype)
            c_mat = None
            if use_c:
                c_bits = base if base is not None else initial  # (32, per_thread) uint32
                if dtype == "f32":
                    c_mat = np.zeros((16, n), np.uint32)
                    c_mat[rows, cols] = c_bits
                else:
                    c_mat = np.zeros((16, n), np.uint16)
                    c_mat[rows, cols] = np.ascontiguousarray(c_bits).view(np.uint16).reshape(WARP, -1)
            kind = atype if atype == btype else (atype, btype)
            d = dot_accumulate(a_block * scale_a, b * scale_b, c_mat, kind, dtype)[rows, cols]
            if dtype == "f32":
                return d
            return np.ascontiguousarray(d).view(np.uint32).reshape(WARP, per_thread)

        where = w.where(op)

        def located(base):
            try:
                return compute(base)
            except EmulationError as exc:  # an operand outside shared memory, a bad descriptor
                raise type(exc)(f"{where}: {exc}") from None

        index = L.operand_addresses(desc_b, n, k, elem, not trans_b)
        if desc_a is not None:
            index = np.concatenate([L.operand_addresses(desc_a, 64, k, elem, not trans_a), index])
        access = w.cta.smem.track(InFlight(index.min(), index.max() + 1, False,
                                           f"the wgmma.mma_async at {op.where.split(':')[0]} ({w.name})",
                                           "retire it with wgmma.wait_group first", index=index, group=w.wid // 4),
                                  where)
        w.wgmma_issued += 1
        entry = _Entry(located, prev if use_c else None, slots, a_slots, access)
        w.wgmma_open.append(entry)
        w.pending_regs.update(slots)
        w.pending_regs.update(a_slots)

        def early(w=w, entry=entry):
            entry.compute()
        w.launch.schedule(early)
    op.run = run
