"""Warp-collective 8x8 matrix loads and stores: ``ldmatrix`` and ``stmatrix`` (.m8n8, .b16).

PTX ISA "ldmatrix" / "stmatrix": with ``.x1/.x2/.x4`` the warp moves 1, 2 or 4 matrices of 8 rows x
8 16-bit elements. Lanes 8i .. 8i+7 give the shared addresses of rows 0..7 of matrix i (each row 16
contiguous bytes). In registers, matrix i is register i of every lane: lane t holds row t / 4, elements
2 (t % 4) and 2 (t % 4) + 1 (low half first). ``.trans`` swaps rows and columns between memory and
registers.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu.errors import ProtocolError
from fa4_mlir.emu.machine import FULL, LANES
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.memory import resolve
from fa4_mlir.emu.ops.operands import address, reader, writer
from fa4_mlir.emu.ptx import ast

_ROW = LANES // 4
_COL = 2 * (LANES % 4)


def _form(op):
    mods = list(op.ins.modifiers)
    counts = [m for m in mods if m in ("x1", "x2", "x4")]
    allowed = {"sync", "aligned", "m8n8", "x1", "x2", "x4", "trans", "shared", "shared::cta", "b16"}
    if len(counts) != 1 or "m8n8" not in mods or "b16" not in mods or set(mods) - allowed:
        raise unsupported(op, "only .m8n8 .x1/.x2/.x4 {.trans} .shared .b16 is modelled")
    return int(counts[0][1]), "trans" in mods


def _row_offsets(w, op, addr, count: int) -> np.ndarray:
    rows = addr(w)[: 8 * count]
    buf, offsets = resolve(w, op, "shared", rows, LANES[: 8 * count], 16)
    return offsets.reshape(count, 8)


@handles("ldmatrix")
def _ldmatrix(op, ctx) -> None:
    count, trans = _form(op)
    dst, src = op.ins.operands
    if not isinstance(dst, ast.Vector) or len(dst.elements) != count:
        raise unsupported(op, f".x{count} needs {count} destination registers")
    _, addr = address(ctx, src, op.ins, "shared")
    writes = [writer(ctx, d, "b32", op.ins) for d in dst.elements]

    def run(w, m):
        if m is not FULL:
            raise ProtocolError(f"{w.where(op)}: ldmatrix is .sync.aligned: all 32 lanes must execute it")
        offsets = _row_offsets(w, op, addr, count)
        w.cta.smem.guard(offsets.reshape(-1), 16, w.where(op), reading=True)  # a TMA load's destination?
        if w.cta.smem.shadow is not None:  # ordered after the last write (race checks)?
            w.cta.smem.shadow.generic_read(w, offsets.reshape(-1), 16)
        smem = w.cta.smem.buf
        for i in range(count):
            tile = smem[offsets[i][:, None] + np.arange(16)].copy().view(np.uint16)  # (8 rows, 8 elements)
            if trans:
                tile = tile.T
            lo, hi = tile[_ROW, _COL], tile[_ROW, _COL + 1]
            writes[i](w, lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16)), m)
    op.run = run


@handles("stmatrix")
def _stmatrix(op, ctx) -> None:
    count, trans = _form(op)
    dst, src = op.ins.operands
    if not isinstance(src, ast.Vector) or len(src.elements) != count:
        raise unsupported(op, f".x{count} needs {count} source registers")
    _, addr = address(ctx, dst, op.ins, "shared")
    reads = [reader(ctx, s, "b32", op.ins) for s in src.elements]

    def run(w, m):
        if m is not FULL:
            raise ProtocolError(f"{w.where(op)}: stmatrix is .sync.aligned: all 32 lanes must execute it")
        offsets = _row_offsets(w, op, addr, count)
        w.cta.smem.guard(offsets.reshape(-1), 16, w.where(op))  # a TMA store's source?
        if w.cta.smem.shadow is not None:  # a generic-proxy write (race checks)
            w.cta.smem.shadow.generic_write(w, offsets.reshape(-1), 16, op)
        smem = w.cta.smem.buf
        for i in range(count):
            value = reads[i](w)
            tile = np.zeros((8, 8), np.uint16)
            tile[_ROW, _COL] = value & np.uint32(0xFFFF)
            tile[_ROW, _COL + 1] = value >> np.uint32(16)
            if trans:
                tile = tile.T.copy()
            smem[offsets[i][:, None] + np.arange(16)] = tile.view(np.uint8).reshape(8, 16)
    op.run = run
