"""The GEMM's sm_100a roles: the MMA warp and the epilogue warps.

The MMA warp's elected thread (of the leader CTA of a pair) acquires a TMEM accumulator stage per
tile, waits for each A/B stage, issues the tile's tcgen05 MMAs (the first K block overwrites the
accumulator) and commits the A/B stage back to the main load; after the last K block it commits the
accumulator to the epilogue. In a pair the commits are multicast to both CTAs' barriers.

The epilogue warps (0-3, one thread per TMEM lane) wait for the accumulator, read it sub-tile by
sub-tile (tcgen05.ld of ``epi_tile_n`` columns), release the stage after the last read and write D
(``epilogue.Epilogue``). At the end warp 0 frees the TMEM, once every warp's reads are done.
"""

from __future__ import annotations

from fa4_mlir.configs.gemm import MMA_K_BYTES
from fa4_mlir.kernels.gemm.epilogue import Epilogue, chunk_offset, swizzled_rows
from fa4_mlir.kernels.gemm.prologue import Gemm, k_steps


def _mmas(g: Gemm, accum, stage, first: bool) -> None:
    """The K block's tcgen05 MMAs from A/B stage ``stage`` into ``accum``."""
    dsl, c, smem = g.dsl, g.c, g.smem
    ab_type = "bf16" if c.dtype == "bf16" else "f16"
    a_tile, b_tile = smem.a_tile(stage), smem.b_tile(stage)
    for kk, b_layout in k_steps(c):
        dsl.fa4.tcgen05_mma(accum, a_tile, b_tile, g.false if first and kk == 0 else g.true, m=128 * c.cta_group,
                            n=c.tile_n, ab_type=ab_type, cta_group=c.cta_group, a_offset=kk * MMA_K_BYTES, **b_layout)


def _commit(g: Gemm, state, barriers: str, producer: bool = False) -> None:
    """The MMA's commit to ``barriers[state.stage]`` once its MMAs are done: multicast to both CTAs
    of a pair, else the pipeline's own release (A/B) or commit (accumulator)."""
    if g.pair:
        g.dsl.fa4.mma_commit(g.mbars.barriers(barriers), state.stage, multicast_mask=3)
    elif producer:
        state.producer_commit()
    else:
        state.consumer_release()


def mma(g: Gemm) -> None:
    dsl, k = g.dsl, g.k
    with k.role("mma", warps=[g.main_load_warp + 1]):
        elected = dsl.fa4.elect_one()
        go = dsl.andi(elected, g.leader if g.pair else g.true)  # a pair: the leader CTA issues
        with k.if_(go):
            ab = g.mbars.ab_pipeline().consumer()
            acc = g.mbars.accum_pipeline().producer()
            with g.tiles(carry=[ab, acc]):
                acc.producer_acquire()
                accum = g.smem.accum_stage(acc.stage)
                ab.consumer_wait()
                _mmas(g, accum, ab.stage, first=True)
                _commit(g, ab, "ab_consumer")
                ab.step()
                with k.range(g.c1, g.arg.k_tiles, g.c1, carry=[ab]):
                    ab.consumer_wait()
                    _mmas(g, accum, ab.stage, first=False)
                    _commit(g, ab, "ab_consumer")
                    ab.step()
                _commit(g, acc, "accum_producer", producer=True)
                acc.step()
            if g.pair:  # wait until both CTAs' epilogues released every accumulator stage: the other CTA's
                # arrivals land on this CTA's barriers, so it must not exit before they do
                with k.range(g.c0, g.c.accum_stages, g.c1, carry=[acc]):
                    acc.producer_acquire()
                    acc.step()


def epilogue(g: Gemm) -> None:
    from fa4_mlir._mlir import ir

    dsl, k, c = g.dsl, g.k, g.c
    width = c.epi_tile_n
    with k.role("epilogue", warps=[0, 1, 2, 3]):
        tid = dsl.tid_x()
        lead = tid == g.c0
        rowb, sw = swizzled_rows(g, tid)
        offsets = [chunk_offset(g, sw, ch, rowb) for ch in range(width // 8)]
        ep = Epilogue(g, 8, 0, lead, "epilogue", c.epilogue_threads)
        raw_type = ir.VectorType.get([width], ir.IntegerType.get_signless(32))
        f32_type = ir.VectorType.get([width], ir.F32Type.get())
        acc = g.mbars.accum_pipeline().consumer()
        epi = g.mbars.epi_load_pipeline("consumer")
        with g.tiles(carry=[acc, epi]) as t:
            row, col, _ = g.tile_origin(t)
            acc.consumer_wait()
            accum = g.smem.accum_stage(acc.stage)

            def read(j, with_c):
                """Sub-tile ``j`` of the accumulator (f32 bits); after the last, the MMA may reuse the stage."""
                bits = dsl.fa4.tmem_load(accum, result_type=raw_type, column_offset=j * width)
                values = dsl.arith.bitcast(f32_type, bits)
                if j == c.num_epi_subtiles - 1:
                    acc.consumer_release()
                return values

            def chunk(ch, values):
                return dsl.vector.extract_strided_slice(ep.wide, values, [8 * ch], [8], [1])

            ep.tile(epi, col, row, lambda j: [(ch, off, off) for ch, off in enumerate(offsets)], chunk, read)
            acc.step()
        with k.if_(lead):
            dsl.fa4.tma_store_wait(pending=0)
        # every MMA into this CTA's TMEM is done (its last accumulator was waited for) and read
        dsl.fa4.named_barrier(sym_name="epilogue", threads=c.epilogue_threads)
        with k.if_(tid // 32 == g.c0):
            dsl.fa4.tmem_dealloc(g.smem.tmem_addr(), cta_group=c.cta_group)
