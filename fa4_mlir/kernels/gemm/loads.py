"""The GEMM's TMA producers: the main load (A and B) and the epilogue load (C).

The main load's elected thread walks the CTA's tiles: per K block it acquires an A/B stage, expects
its bytes on the stage's full barrier and issues the TMA loads; after each tile's first K block it
signals the load-order barrier. A CTA pair's main load then drains the ring: the leader's MMA
commits are multicast to this CTA's barriers, so it must not exit before they land; with
``cluster_m`` 2 the other CTA's consumers arrive on this CTA's empty barriers, the same way.

The epilogue load's elected thread (the EpiLoadPipeline producer) waits on the load-order barrier
per tile, so the tile's C does not compete with its first A/B load, then streams the tile's C
sub-tiles through the ring; with ``has_c`` 0 (beta = 0) it loads nothing.
"""

from __future__ import annotations

from fa4_mlir.kernels.gemm.prologue import Gemm


def _load_block(g: Gemm, ab, kk, row, bcol) -> None:
    """Acquire the A/B stage ``ab`` is at and load the K block at element column ``kk`` into it."""
    dsl, c, smem = g.dsl, g.c, g.smem
    full = g.mbars.barriers("ab_producer")
    ab.producer_acquire()
    ab.producer_commit(tx_bytes=c.stage_bytes)
    a_tile = smem.a_tile(ab.stage)
    dsl.fa4.tma_load(g.arg.a, a_tile, full, ab.stage, [kk.value, row.value], bytes=c.a_stage_bytes)
    _load_b(g, full, ab.stage, kk, bcol)


def _load_b(g: Gemm, full, stage, kk, bcol) -> None:
    """B's part of the stage, in boxes: K-major one box of B's rows (with ``cluster_m`` 2 two halves),
    MN-major one per 128B-wide column block. With ``cluster_m`` 2, CTA r loads the boxes i with
    i % 2 = r and multicasts each to the same offset in both CTAs, so each CTA's full barrier counts
    the whole stage, half of it from the other CTA's loads."""
    dsl, c, k = g.dsl, g.c, g.k
    b_tile = g.smem.b_tile(stage)

    def boxes():  # (coordinates, bytes, dst_offset) of each box, its coordinates built when it is loaded
        if c.b_major == "k":
            rows = c.b_tile_rows // c.cluster_m
            for i in range(c.cluster_m):
                yield ([kk.value, (bcol + i * rows).value if i else bcol.value], rows * c.tile_k * c.elem.bytes,
                       i * rows * 128 if c.cluster_m > 1 else None)
            return
        block = c.tile_k * 128  # one 128B-wide column block of B: tile_k rows of 128 bytes
        for j in range(c.b_tile_rows // c.swizzle_elems):
            yield [(bcol + j * c.swizzle_elems).value, kk.value], block, j * block

    for i, (coords, size, offset) in enumerate(boxes()):
        if c.cluster_m == 1:
            dsl.fa4.tma_load(g.arg.b, b_tile, full, stage, coords, bytes=size, dst_offset=offset)
            continue
        with k.if_(g.rank == i % c.cluster_m):
            dsl.fa4.tma_load(g.arg.b, b_tile, full, stage, coords, bytes=size, dst_offset=offset,
                             multicast_mask=(1 << c.cluster_m) - 1)


def main_load(g: Gemm) -> None:
    k, c = g.k, g.c
    with k.role("main_load", warps=[g.main_load_warp], registers=g.producer_registers), k.elect_one():
        ab = g.mbars.ab_pipeline().producer()
        order = g.mbars.load_order("producer")
        with g.tiles(carry=[ab, order]) as t:
            row, _, bcol = g.tile_origin(t)
            _load_block(g, ab, g.c0, row, bcol)
            ab.step()
            order.arrive_and_step()  # the tile's first A/B load is issued: C may follow
            with k.range(g.c1, g.arg.k_tiles, g.c1, carry=[ab]) as kb:
                _load_block(g, ab, kb * g.tile_k, row, bcol)
                ab.step()
        # a pair: wait until the leader's MMAs released every stage (their commits reach us); cluster_m 2:
        # until both CTAs' consumers released every stage (their arrivals reach us, our loads reach them)
        if c.cluster_size > 1:
            with k.range(g.c0, c.stages, g.c1, carry=[ab]):
                ab.producer_acquire()
                ab.step()


def epilogue_load(g: Gemm) -> None:
    dsl, k, c = g.dsl, g.k, g.c
    warp = g.main_load_warp + (2 if c.has_tmem else 1)
    with k.role("epilogue_load", warps=[warp], registers=g.producer_registers), k.elect_one():
        epi = g.mbars.epi_load_pipeline("producer")
        order = g.mbars.load_order("consumer")
        with g.tiles(carry=[epi, order]) as t:
            order.wait_and_step()
            row, col, _ = g.tile_origin(t)
            with k.if_(g.load_c, carry=[epi]), k.range(g.c0, c.num_epi_subtiles, g.c1, carry=[epi]) as j:
                with epi.produce() as stage:
                    stage.expect_bytes(c.epi_tile_bytes)
                    tile = g.smem.src_tile(stage.index())
                    column = col + j * c.epi_tile_n
                    dsl.fa4.tma_load(g.arg.c, tile, *stage.mbar(), [column.value, row.value], bytes=c.epi_tile_bytes)
