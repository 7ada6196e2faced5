"""Which tensor-memory cell each register of a ``tcgen05.ld`` / ``tcgen05.st`` moves, per shape.

PTX ISA "TensorCore 5th Generation Family Instructions": "Data Movement Shape" -> "Memory Layout" ->
"Matrix fragments for shape .32x32b / .16x64b / .16x128b / .16x256b / .16x32bx2" (figures 183-187 in
PTX 8.7), "tcgen05.ld" / "tcgen05.st" (the ``.num`` table, Table 49 in 8.7) and "Packing and
Unpacking" (figure 193). The figures are images; the text states the lane count and the bits per lane
of each shape, the table the register counts. The thread/register <-> (lane, column) assignment below
is the figures' as CUTLASS's ``Copy_Traits<SM100_TMEM_LOAD_*>`` and Triton's tensor-memory linear
layouts encode it (both agree; docs/emulator-tcgen05-isa.md section 5 cites the lines).

Notation: ``t`` the thread's lane in the warp (0..31), ``L``/``C`` the lane/column of the block's
address, ``i`` the repeat index (0 .. num-1). Registers are numbered low to high in the brace vector.

    shape       lanes  registers      register r of thread t            TMEM lane             column
    .32x32b       32   num            r = i                             L + t                 C + i
    .16x64b       16   num            r = i                             L + 8*(t%2) + t//4    C + 2i + (t//2)%2
    .16x128b      16   2 num (<=x64)  r = 2i + h                        L + t//4 + 8h         C + 4i + t%4
    .16x256b      16   4 num (<=x32)  r = 4i + 2h + e                   L + t//4 + 8h         C + 8i + 2(t%4) + e
    .16x32bx2   16+16  num            r = i                             L + t%16              C + i
      (threads 0-15 at ``taddr``, threads 16-31 at ``taddr + immHalfSplitoff``, a second 16-lane block)

So one repeat covers 32 lanes x 1 column, or 16 lanes x 2, 4 or 8 columns, each cell once.

``.pack::16b`` (ld) / ``.unpack::16b`` (st): each 32-bit column ``u`` of the table becomes two adjacent
columns, ``C + 2(u - C)`` and the next, holding one 16-bit element each in their low halves; register
bits 15:0 <-> the first column's bits 15:0, bits 31:16 <-> the second's bits 15:0. The register count is
unchanged; the footprint doubles. What an ``unpack::16b`` store leaves in the upper halves is not in the
ISA's text (the figure was unavailable; CUTLASS models only the low halves): the emulator writes
0xA5A5 there, the upper half of its unwritten-cell pattern, so a 32-bit read of them shows.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

# shape: (TMEM lanes per block, columns per repeat, registers per repeat, the largest .num)
SHAPES = {
    "32x32b": (32, 1, 1, 128),
    "16x64b": (16, 2, 1, 128),
    "16x128b": (16, 4, 2, 64),
    "16x256b": (16, 8, 4, 32),
    "16x32bx2": (16, 1, 1, 128),
}
NUMS = (1, 2, 4, 8, 16, 32, 64, 128)
UNPACKED_HIGH = 0xA5A50000  # the upper halves an unpack::16b store leaves (undefined by the ISA)


@dataclasses.dataclass(frozen=True)
class Fragment:
    """One ``tcgen05.{ld,st}.<shape>.x<num>[.pack::16b|.unpack::16b]``: ``lane[t, r]`` and ``column[t, r]``
    are the lane and (first) column offsets of register ``r`` of thread ``t`` from its block's address;
    ``block[t]`` is 1 for the threads of the second half of ``.16x32bx2``, else 0. A block spans
    ``lanes`` lanes and ``columns`` columns; ``packed`` moves two 16-bit halves per register."""

    shape: str
    num: int
    packed: bool
    registers: int
    lanes: int
    columns: int
    lane: np.ndarray
    column: np.ndarray
    block: np.ndarray


def registers(shape: str, num: int) -> int:
    """Registers per thread (the ISA's table); ValueError for a shape/num the ISA does not have."""
    if shape not in SHAPES:
        raise ValueError(f"tcgen05.ld/st shape must be one of .{', .'.join(SHAPES)}, got .{shape}")
    _, _, per_repeat, most = SHAPES[shape]
    if num not in NUMS or num > most:
        allowed = ", ".join(f".x{n}" for n in NUMS if n <= most)
        raise ValueError(f"tcgen05.ld/st .{shape} .num must be one of {allowed}, got .x{num}")
    return per_repeat * num


@functools.lru_cache(maxsize=None)
def fragment(shape: str, num: int, packed: bool = False) -> Fragment:
    """The mapping of the module docstring's table as arrays; ValueError for an illegal shape/num."""
    nregs = registers(shape, num)
    rows, per_repeat_cols, per_repeat_regs, _ = SHAPES[shape]
    t = np.arange(32)[:, None]
    r = np.arange(nregs)[None, :]
    if shape == "32x32b":
        lane, column = t + 0 * r, r + 0 * t
    elif shape == "16x64b":
        lane, column = 8 * (t % 2) + t // 4 + 0 * r, 2 * r + (t // 2) % 2
    elif shape == "16x128b":
        i, h = r // 2, r % 2
        lane, column = t // 4 + 8 * h, 4 * i + t % 4
    elif shape == "16x256b":
        i, h, e = r // 4, (r // 2) % 2, r % 2
        lane, column = t // 4 + 8 * h, 8 * i + 2 * (t % 4) + e
    else:  # 16x32bx2: two 16x32b accesses, threads 16-31 at the second address
        lane, column = t % 16 + 0 * r, r + 0 * t
    block = (np.arange(32) >= 16).astype(np.int64) if shape == "16x32bx2" else np.zeros(32, np.int64)
    columns = per_repeat_cols * num
    if packed:
        column, columns = 2 * column, 2 * columns
    for a in (lane, column, block):
        a.setflags(write=False)
    return Fragment(shape=shape, num=num, packed=packed, registers=nregs, lanes=rows, columns=columns,
                    lane=lane.astype(np.int64), column=column.astype(np.int64), block=block)


def gather(cells: np.ndarray, frag: Fragment, lane0: np.ndarray, col0: np.ndarray) -> np.ndarray:
    """The (32, registers) uint32 values a load gives; ``lane0``/``col0``: each block's first lane and
    column (index 0, and 1 for the second half of .16x32bx2)."""
    lanes = lane0[frag.block][:, None] + frag.lane
    cols = col0[frag.block][:, None] + frag.column
    if not frag.packed:
        return cells[lanes, cols]
    low = cells[lanes, cols] & np.uint32(0xFFFF)
    high = cells[lanes, cols + 1] & np.uint32(0xFFFF)
    return low | (high << np.uint32(16))


def scatter(cells: np.ndarray, frag: Fragment, lane0: np.ndarray, col0: np.ndarray, values: np.ndarray) -> None:
    """Write a store's (32, registers) uint32 ``values`` into ``cells``."""
    lanes = lane0[frag.block][:, None] + frag.lane
    cols = col0[frag.block][:, None] + frag.column
    values = values.astype(np.uint32)
    if not frag.packed:
        cells[lanes, cols] = values
        return
    high = np.uint32(UNPACKED_HIGH)
    cells[lanes, cols] = (values & np.uint32(0xFFFF)) | high
    cells[lanes, cols + 1] = (values >> np.uint32(16)) | high
