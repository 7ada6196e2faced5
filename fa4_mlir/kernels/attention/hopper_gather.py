"""The sm_90a load warp over a paged K/V cache whose pages TMA cannot load (``AttentionConfig.page_gather``:
pages not a multiple of 16 keys, from 1 key up, and at head dims 192 and 256 the sizes whose TMA chunks
spilled): the whole warp gathers each K/V tile row by row with ``cp.async`` into exactly the shared layout the
TMA path writes (``gather_rows``: the rows, their block-table entries, the layout, the 32-bit offsets, the zero
fill of head dim 96's columns 96-127, and the completion), so the consumers (their wgmma descriptors) are the
TMA-paged kernel's.

Row j of tile t is key t BN + j of the sequence (split KV: t counts from the sequence's first key, as in
``hopper_paged``); keys are clamped to the CTA's last one (``kv_limit``: Sk_b, or the split range's end). A stage's
64-column block c is at ``c * BN * 128`` (the ring is 1024-aligned and a stage a multiple of 2048 bytes). Each tile's
entries are read by the tile's own issue (K_j and V_{j-1} differ).

Completion: each lane commits a tile's copies as a ``cp.async`` group, waits for it, fences the async proxy and
arrives on the stage's full barrier, which counts the 32 lanes (``layouts.hopper_attention_barriers``). The order
of ``hopper_paged.load_kv`` stays (K_0, then per tile j K_j ahead of V_{j-1}, then the last V); in the loop both
tiles' copies are issued before the warp waits for K_j's (``wait_group 1``) and then V_{j-1}'s (``wait_group 0``),
so two tiles are in flight.
"""

from __future__ import annotations

from fa4_mlir import dsl
from fa4_mlir.dsl.names import name
from fa4_mlir.kernels.attention.gather_rows import RowGather


class Gather:
    """The load warp's K and V tiles gathered from the block table's pages (built into the open role, every
    lane of the warp taking part)."""

    def __init__(self, k, g):
        c, t = g.c, g.t
        self.k, self.g, self.bn = k, g, t.bn
        self.rows = RowGather(k, g.arg, page=c.page_size, bn=t.bn, row=g.row, head_dim=c.head_dim, blocks=g.blocks,
                              seq=g.seq, kvh=g.kvh, limit=g.kv_limit)
        self.blocks = [(blk, blk * t.bn * g.row) for blk in range(g.blocks)]

    def issue(self, which: str, tile, state):
        """Acquire the state's stage of the K or V ring and issue tile ``tile``'s copies into it as one
        cp.async group; returns the stage (the barrier ``arrive`` signals once they landed)."""
        g = self.g
        ring = g.kring if which == "k" else g.vring
        nbytes = g.t.kv_stage_bytes
        state.producer_acquire()
        stage = state.stage
        first = tile * self.bn
        entries = self.rows.entries(first)
        buf = dsl.fa4.smem_address(dsl.fa4.smem_stage(ring, stage, bytes=nbytes))
        self.rows.copy(entries, first, [(which, buf, self.blocks)])
        self.rows.commit()
        state.step()
        return stage

    def arrive(self, pipeline, stage, pending: int) -> None:
        """Once all but ``pending`` of the lane's cp.async groups landed, order their writes before the
        consumers' wgmma reads (the async proxy) and arrive on ``stage``'s full barrier (32 lanes)."""
        self.rows.landed(pending)
        dsl.fa4.pipeline_producer_commit(pipeline.value, stage)


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
