"""The depth-256/512 kernel's TMA load warp (warp 9, both CTAs of the pair), built through
``fa4_mlir.dsl`` (imported when called: this module imports without MLIR).

One KV ring of ``num_kv_stages`` slots, filled in the order the MMA warp consumes them: K_0's
depth sub-tiles (``Dims.chunks``: ``num_qk_stages``, then MLA's rope chunk from q_rope / k_rope in
half a slot; each with Q's matching depth chunk on the same barrier), then per
tile t >= 1 the sub-tiles of K_t followed by V_{t-1}'s (``num_pv_stages`` sub-tiles of BK1 keys
per O half), and V_last at the end. The MMA issues Q@K_t' before P_{t-1}@V_{t-1}, so the ring
order is that. Each CTA loads its half: K rows [0, BN/2) (leader) or [BN/2, BN) (peer); V columns
[0, v_cols) or [v_cols, 2 v_cols) of each O half. The slot barriers are the leader's (cta_group 2):
its expect_tx counts both CTAs' bytes and the TMA of both complete on it. Keys past seq_k are zero
filled (0 * garbage cannot make NaN). Afterwards the warp drains the ring: the leader's MMA
multicasts the releases to this CTA's barriers, so the CTA must not exit before they land.
"""

from __future__ import annotations

from fa4_mlir.kernels.attention.depth512.common import BLOCK, coords


def _load_k(x, ring, tile, with_q: bool) -> None:
    from fa4_mlir import dsl

    d = x.d
    key = tile * d.bn + x.rank * d.k_rows
    for q, ch in enumerate(d.chunks):
        ring.producer_acquire()
        ring.producer_commit(tx_bytes=(d.k_rows + (d.bm if with_q else 0)) * ch.depth * ch.elem_bytes)
        slot = dsl.fa4.smem_stage(x.kv, ring.stage, bytes=d.kv_slot_bytes)
        row = d.row_bytes  # one swizzle row: BLOCK elements, or row / 2 bf16 rope columns under fp8
        for blk in range(ch.depth * ch.elem_bytes // row):
            col = ch.col + blk * (row // ch.elem_bytes)
            if with_q:  # Q's depth chunk q rides on K_0's chunk q (the reference's Q + K0 load)
                dsl.fa4.tma_load(getattr(x.arg, ch.q_map), x.q[q], x.kv_full, ring.stage,
                                 coords(col, x.head0, x.q_start, x.bz), bytes=d.bm * row,
                                 dst_offset=blk * d.bm * row)
            dsl.fa4.tma_load(getattr(x.arg, ch.k_map), slot, x.kv_full, ring.stage, coords(col, x.kvh, key, x.bz),
                             bytes=d.k_rows * row, dst_offset=blk * d.k_rows * row)
        ring.step()


def _load_v(x, ring, tile) -> None:
    from fa4_mlir import dsl

    d = x.d
    for h, _ in enumerate(d.halves):
        col0 = x.rank * d.v_cols_per_cta + h * d.o_cols
        for j in range(d.num_pv_stages):
            ring.producer_acquire()
            ring.producer_commit(tx_bytes=d.v_chunk)
            slot = dsl.fa4.smem_stage(x.kv, ring.stage, bytes=d.kv_slot_bytes)
            key = tile * d.bn + j * d.bk1
            for blk in range(d.v_cols_per_cta // BLOCK):
                dsl.fa4.tma_load(getattr(x.arg, d.v_map), slot, x.kv_full, ring.stage,
                                 coords(col0 + blk * BLOCK, x.kvh, key, x.bz), bytes=d.bk1 * d.row_bytes,
                                 dst_offset=blk * d.bk1 * d.row_bytes)
            ring.step()


def load(k, x) -> None:
    from fa4_mlir import dsl

    V = dsl.Value
    with k.role("load", warps=[9], registers=x.registers["producers"]), k.elect_one():
        ring = x.mbars.get_kv_mbars().producer()
        _load_k(x, ring, V(0), with_q=True)
        with k.range(1, x.n_tiles, carry=[ring]) as t:
            _load_k(x, ring, t, with_q=False)
            _load_v(x, ring, t - 1)
        _load_v(x, ring, x.n_tiles - 1)
        with k.range(0, x.d.num_kv_stages, carry=[ring]):  # every release of the leader's MMA has landed
            ring.producer_acquire()
            ring.step()
