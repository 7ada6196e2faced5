"""The sm_90a load warp over a paged K/V cache whose pages TMA cannot load (``AttentionConfig.page_gather``:
pages not a multiple of 16 keys, from 1 key up, and at head dims 192 and 256 the sizes whose TMA chunks
spilled): the whole warp gathers each K/V tile row by row with ``cp.async`` into exactly the shared layout the
TMA path writes, so the consumers (their wgmma descriptors) are the TMA-paged kernel's.

Row j of tile t is key t BN + j of the sequence (split KV: t counts from the sequence's first key, as in
``hopper_paged``), in row key % page_size of page ``block_table[b, key / page_size]``. A key at or past the
CTA's last one (``kv_limit``: Sk_b, or the split range's end) is clamped to it: its row repeats a valid one
(masked by the consumers like every key past kv_limit), so neither the block table nor the cache is read past
the sequence. The layout: 64-column block c of row j is 128 bytes at ``c * BN * 128 + j * 128`` in the stage,
its 16-byte piece p at position ``p ^ (j % 8)`` (the 128-byte swizzle; the ring is 1024-aligned and a stage a
multiple of 2048 bytes, so the swizzle phase is the row's). Lane l copies piece l % 8 of rows j with j % 4 =
l / 8 (a warp instruction fills four rows of a block); head dim 96 (a 128-column tile) zero-fills the pieces of
columns 96-127 (``cp.async`` src-size 0), as the TMA path's out-of-bounds fill does.

The block-table entries of a tile (one per row) are read first, lane l reading those of rows 32 s + l (s < BN
/ 32, read-only loads, a debug build checks each: ``paged.read_entry``), and each row takes its own by
``shfl.idx``: a read per row would put a load's latency before every row's copies. Addresses are 32-bit offsets
in 16-byte pieces (the strides are passed in pieces: ``kernels.attention.gather_arguments``; the op refuses a
cache spanning more than 64 GiB, ``torch.serving.check_gather_span``): 64-bit strides and offsets spilled the
load warp (40 registers; split KV 56) at head dims 192/256. The tile's rows are issued unrolled (a loop over
32-row slots spilled more, ptxas 13.0).

Completion (PTX ISA: ``cp.async`` writes shared memory through the generic proxy, ``wgmma`` reads it through
the async proxy): each lane commits a tile's copies as a ``cp.async`` group, waits for it
(``cp.async.wait_group``), executes ``fence.proxy.async.shared::cta`` (its landed writes ordered before later
async-proxy reads) and arrives on the stage's full barrier, which counts the 32 lanes (``threads`` arrivals,
``layouts.hopper_attention_barriers``). The order of ``hopper_paged.load_kv`` stays (K_0, then per tile j K_j
ahead of V_{j-1}, then the last V); in the loop both tiles' copies are issued before the warp waits for K_j's
(``wait_group 1``) and then V_{j-1}'s (``wait_group 0``), so two tiles are in flight.
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


class Gather:
    """The load warp's K and V tiles gathered from the block table's pages (built into the open role, every
    lane of the warp taking part)."""

    def __init__(self, k, g):
        c, t, arg = g.c, g.t, g.arg
        self.k, self.g = k, g
        self.page, self.bn, self.row = c.page_size, t.bn, g.row
        i32 = dsl.i32()
        self.i64 = ir.IntegerType.get_signless(64)
        lane = dsl.Value(dsl.nvvm.read_ptx_sreg_laneid(i32))
        self.lane = lane
        self.r0 = dsl.shrui(lane, 3)  # the lane's row within each group of ROWS
        piece = dsl.andi(lane, PIECES - 1)
        # the lane's swizzled byte offset in rows r0 (even groups: row % 8 = r0) and r0 + 4 (odd groups)
        self.dst = [self.r0 * self.row + dsl.shli(dsl.xori(piece, self.r0 + ROWS * h), 4) for h in (0, 1)]
        self.table = dsl.element_ptr(arg.block_table, g.seq * arg.pages_per_seq, i32)  # sequence b's row
        self.last = name(g.kv_limit - 1, "ld_last_key")  # kv_limit >= 1 where the warp loads
        # the lane's first piece of a row (its K/V head's, its own), added to each row's offset
        self.column = {w: g.kvh * getattr(arg, f"{w}_head_stride") + piece for w in "kv"}
        self.piece_type = ir.VectorType.get([4], ir.IntegerType.get_signless(32))  # 16 bytes
        # head dim 96: block 1's pieces of columns >= 96 are zero-filled (src-size 0), read from the row's start
        self.partial = []
        for blk in range(g.blocks):
            inside = c.head_dim - blk * BLOCK_COLUMNS
            self.partial.append(None if inside >= BLOCK_COLUMNS else piece < inside // 8)

    def _entries(self, tile) -> list:
        """Lane l's block-table entries of tile ``tile``: rows 32 s + l, one per s < ceil(BN / 32)."""
        out = []
        for s in range(-(-self.bn // WARP)):
            key = (tile * self.bn + (WARP * s) + self.lane).min(self.last)
            out.append(read_entry(self.k, self.table, self.g.seq, key // self.page, self.g.arg.num_pages))
        return out

    def issue(self, which: str, tile, state):
        """Acquire the state's stage of the K or V ring and issue tile ``tile``'s copies into it as one
        cp.async group; returns the stage (the barrier ``arrive`` signals once they landed)."""
        g = self.g
        ring = g.kring if which == "k" else g.vring
        nbytes = g.t.kv_stage_bytes
        state.producer_acquire()
        stage = state.stage
        entries = self._entries(tile)
        buf = dsl.fa4.smem_address(dsl.fa4.smem_stage(ring, stage, bytes=nbytes))
        arg, column = g.arg, self.column[which]
        page_stride, row_stride = (getattr(arg, f"{which}_{dim}_stride") for dim in ("page", "row"))
        first = tile * self.bn
        full, clamp = dsl.Value(-1).value, dsl.Value(WARP - 1).value
        modifier = dsl.nvvm.LoadCacheModifierKind.CG
        for group in range(self.bn // ROWS):
            top = group * ROWS  # the group's first row
            key = (first + top + self.r0).min(self.last)
            entry = dsl.nvvm.shfl_sync(dsl.i32(), full, entries[top // WARP].value, (self.r0 + top % WARP).value,
                                       clamp, dsl.nvvm.ShflKind.idx)
            # in 16-byte pieces (every stride a multiple of 8 elements): 32 bits reach 64 GiB past the pointer
            offset = dsl.Value(entry) * page_stride + (key % self.page) * row_stride + column
            src = dsl.element_ptr(getattr(arg, which), self._wide(offset), self.piece_type)
            dst = dsl.byte_offset(buf, self.dst[group % 2] + top * self.row)
            for blk, inside in enumerate(self.partial):
                at = dsl.byte_offset(dst, blk * self.bn * self.row)
                if inside is None:
                    dsl.nvvm.CpAsyncOp(at, dsl.byte_offset(src, blk * self.row), PIECE, modifier)
                else:  # zero-filled past the head dim (src-size 0), from an address inside the row
                    size = dsl.arith.select(inside.value, dsl.Value(PIECE).value, dsl.Value(0).value)
                    source = dsl.llvm.select(inside.value, dsl.byte_offset(src, blk * self.row), src)
                    dsl.nvvm.CpAsyncOp(at, source, PIECE, modifier, cpSize=size)
        dsl.nvvm.CpAsyncCommitGroupOp()
        state.step()
        return stage

    def arrive(self, pipeline, stage, pending: int) -> None:
        """Once all but ``pending`` of the lane's cp.async groups landed, order their writes before the
        consumers' wgmma reads (the async proxy) and arrive on ``stage``'s full barrier (32 lanes)."""
        dsl.nvvm.CpAsyncWaitGroupOp(pending)
        dsl.nvvm.FenceProxyOp(ir.Attribute.parse("#nvvm.proxy_kind<async.shared>"),
                              space=ir.Attribute.parse("#nvvm.shared_space<cta>"))
        dsl.fa4.pipeline_producer_commit(pipeline.value, stage)

    def _wide(self, x):
        return dsl.arith.extui(self.i64, dsl.Value(x).value)


def load(k, g, load_q) -> None:
    """The load role over a gathered paged cache (inside its branch on ``g.work``): Q by the elected lane's
    TMA (``hopper._load_q``), then K_0, per tile j K_j and V_{j-1}, and the last V, gathered by every lane."""
    from fa4_mlir.dsl.names import name_all

    with k.elect_one():
        zero = dsl.Value(0).value
        dsl.fa4.mbarrier_arrive_expect_tx(g.qbar, zero, tx_bytes=g.t.q_bytes)
        load_q(dsl, g, zero)
    ks, vs = g.kp.producer(), g.vp.producer()
    gather = Gather(k, g)
    first, start, stop = dsl.Value(0), 1, g.n_tiles
    if g.kv_begin is not None:  # split KV: the range's tiles, numbered from the sequence's first key
        first = name(dsl.Value(dsl.arith.divsi(g.kv_begin.value, dsl.Value(g.bn).value)), "ld_first")
        start, stop = first + 1, first + g.n_tiles
    gather.arrive(g.kp, gather.issue("k", first, ks), 0)
    with k.range(start, stop, carry=[ks, vs]) as j:
        name_all([ks.stage, ks.phase, vs.stage, vs.phase], ["ld_ks", "ld_kph", "ld_vs", "ld_vph"])
        k_stage = gather.issue("k", j, ks)
        v_stage = gather.issue("v", j - 1, vs)
        gather.arrive(g.kp, k_stage, 1)
        gather.arrive(g.vp, v_stage, 0)
    gather.arrive(g.vp, gather.issue("v", stop - 1, vs), 0)
