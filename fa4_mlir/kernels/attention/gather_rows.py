"""A load warp's gathered K/V rows, shared by both targets' gathered paged kernels (``AttentionConfig.page_gather``:
``hopper_gather`` on sm_90a, ``gather`` on sm_100a): every lane of the warp copies 16-byte pieces of a tile's rows
with ``cp.async`` into exactly the shared layout the TMA path writes, so the consumers (wgmma / tcgen05.mma
descriptors) are the TMA-paged kernel's.

Row j of a tile whose first key is ``first`` is key first + j of the sequence, in row key % page_size of page
``block_table[b, key / page_size]``. A key at or past the CTA's last one (``last``: Sk_b - 1, or the split range's
end - 1) is clamped to it: its row repeats a valid one (masked by the consumers like every key past the limit), so
neither the block table nor the cache is read past the sequence. The layout: 64-column block c of row j is 128 bytes
at ``c_offset + j * 128`` in the buffer (``c_offset`` the caller's: bn * 128 bytes apart in a stage), its 16-byte
piece p at position ``p ^ (j % 8)`` (the 128-byte swizzle; buffers are 1024-aligned and a block a multiple of 1024
bytes, so the swizzle phase is the row's). Lane l copies piece l % 8 of rows j with j % 4 = l / 8 (a warp
instruction fills four rows of a block); a head dim whose last block is partial (96: a 128-column tile) zero-fills
the pieces past it (``cp.async`` src-size 0), as the TMA path's out-of-bounds fill does.

The block-table entries of a tile (one per row) are read first, lane l reading those of rows 32 s + l (s < bn / 32,
``paged.read_entry``: a debug build checks each), and each row takes its own by ``shfl.idx``: a read per row would
put a load's latency before every row's copies. Addresses are 32-bit offsets in 16-byte pieces (the strides are
passed in pieces: ``kernels.attention.gather_arguments``; the op refuses a cache spanning more than 64 GiB,
``torch.serving.check_gather_span``): 64-bit strides and offsets spilled the sm_90a load warp at head dims 192/256.
A tile's rows are issued unrolled (a loop over 32-row slots spilled more, ptxas 13.0).

Completion (PTX ISA: ``cp.async`` writes shared memory through the generic proxy; ``wgmma`` and ``tcgen05.mma``
read it through the async proxy): each lane commits its copies as ``cp.async`` groups, waits for them
(``cp.async.wait_group``), executes ``fence.proxy.async.shared::cta`` (its landed writes ordered before later
async-proxy reads) and arrives on the stage's full barrier, which counts the 32 lanes (``threads`` arrivals:
``layouts.hopper_attention_barriers``, ``layouts.fa4_barriers``).
"""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir._mlir import ir
from fa4_mlir.dsl.names import name
from fa4_mlir.kernels.attention.paged import read_entry

WARP = 32
PIECE = 16  # bytes one cp.async copies
PIECES = 8  # 16-byte pieces of a 128-byte swizzled row of a 64-column block
ROWS = WARP // PIECES  # rows of a block one warp instruction fills
BLOCK_COLUMNS = 64  # 16-bit columns of a 128-byte row


class RowGather:
    """Lane values and row copies of a gathered paged cache (built into the open role, every lane taking part):
    sequence ``seq``'s block-table row, K/V head ``kvh``, tiles of ``bn`` rows of ``row`` bytes a block, keys
    clamped to the last before ``limit`` (the CTA's key limit, >= 1 where the warp loads)."""

    def __init__(self, k, arg, *, page: int, bn: int, row: int, head_dim: int, blocks: int, seq, kvh, limit):
        i32 = dsl.i32()
        self.k, self.arg, self.seq = k, arg, seq
        self.page, self.bn, self.row = page, bn, row
        self.i64 = ir.IntegerType.get_signless(64)
        lane = dsl.Value(dsl.nvvm.read_ptx_sreg_laneid(i32))
        self.lane = lane
        self.r0 = dsl.shrui(lane, 3)  # the lane's row within each group of ROWS
        piece = dsl.andi(lane, PIECES - 1)
        # the lane's swizzled byte offset in rows r0 (even groups: row % 8 = r0) and r0 + 4 (odd groups)
        self.dst = [self.r0 * self.row + dsl.shli(dsl.xori(piece, self.r0 + ROWS * h), 4) for h in (0, 1)]
        self.table = dsl.element_ptr(arg.block_table, seq * arg.pages_per_seq, i32)  # sequence b's row
        self.last = name(limit - 1, "ld_last_key")
        # the lane's first piece of a row (its K/V head's, its own), added to each row's offset
        self.column = {w: kvh * getattr(arg, f"{w}_head_stride") + piece for w in "kv"}
        self.piece_type = ir.VectorType.get([4], ir.IntegerType.get_signless(32))  # 16 bytes
        # a partial last block (head dim 96): its pieces past the head dim are zero-filled (src-size 0)
        self.partial = []
        for blk in range(blocks):
            inside = head_dim - blk * BLOCK_COLUMNS
            self.partial.append(None if inside >= BLOCK_COLUMNS else piece < inside // 8)

    def entries(self, first) -> list:
        """Lane l's block-table entries of the tile whose first key is ``first``: rows 32 s + l, s <
        ceil(bn / 32)."""
        out = []
        for s in range(-(-self.bn // WARP)):
            key = (first + (WARP * s) + self.lane).min(self.last)
            out.append(read_entry(self.k, self.table, self.seq, key // self.page, self.arg.num_pages))
        return out

    def copy(self, entries: list, first, targets) -> None:
        """Issue the rows of the tile whose first key is ``first`` (its ``entries``) into each target (which cache,
        "k" or "v"; the shared buffer; its ``blocks``: (64-column block of the head dim, byte offset in the buffer)),
        row group by row group: a row's page and offset are computed once for all targets."""
        arg = self.arg
        strides = [[getattr(arg, f"{which}_{dim}_stride") for dim in ("page", "row")] for which, _, _ in targets]
        full, clamp = dsl.Value(-1).value, dsl.Value(WARP - 1).value
        modifier = dsl.nvvm.LoadCacheModifierKind.CG
        for group in range(self.bn // ROWS):
            top = group * ROWS  # the group's first row
            key = (first + top + self.r0).min(self.last)
            entry = dsl.nvvm.shfl_sync(dsl.i32(), full, entries[top // WARP].value, (self.r0 + top % WARP).value,
                                       clamp, dsl.nvvm.ShflKind.idx)
            for (which, buf, blocks), (page_stride, row_stride) in zip(targets, strides):
                # in 16-byte pieces (every stride a multiple of 8 elements): 32 bits reach 64 GiB past the pointer
                offset = dsl.Value(entry) * page_stride + (key % self.page) * row_stride + self.column[which]
                src = dsl.element_ptr(getattr(arg, which), self._wide(offset), self.piece_type)
                dst = dsl.byte_offset(buf, self.dst[group % 2] + top * self.row)
                for blk, at_offset in blocks:
                    self._piece(blk, dsl.byte_offset(dst, at_offset), src, modifier)

    def _piece(self, blk: int, at, src, modifier) -> None:
        """The lane's piece of a row's 64-column block ``blk`` (``src``: the row's first piece) to ``at``."""
        inside = self.partial[blk]
        if inside is None:
            dsl.nvvm.CpAsyncOp(at, dsl.byte_offset(src, blk * self.row), PIECE, modifier)
        else:  # zero-filled past the head dim (src-size 0), from an address inside the row
            size = dsl.arith.select(inside.value, dsl.Value(PIECE).value, dsl.Value(0).value)
            source = dsl.llvm.select(inside.value, dsl.byte_offset(src, blk * self.row), src)
            dsl.nvvm.CpAsyncOp(at, source, PIECE, modifier, cpSize=size)

    @staticmethod
    def commit() -> None:
        """The lane's copies issued since the last commit become one ``cp.async`` group."""
        dsl.nvvm.CpAsyncCommitGroupOp()

    @staticmethod
    def landed(pending: int) -> None:
        """Once all but ``pending`` of the lane's ``cp.async`` groups landed, order their writes before the
        consumers' async-proxy reads (the caller then arrives on the stage's full barrier)."""
        dsl.nvvm.CpAsyncWaitGroupOp(pending)
        dsl.nvvm.FenceProxyOp(ir.Attribute.parse("#nvvm.proxy_kind<async.shared>"),
                              space=ir.Attribute.parse("#nvvm.shared_space<cta>"))

    def _wide(self, x):
        return dsl.arith.extui(self.i64, dsl.Value(x).value)
