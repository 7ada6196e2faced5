"""The GEMM's sm_90a role: a consumer warpgroup (64 rows of the tile), MMA and epilogue in one.

Per tile, warpgroup ``w`` waits for each A/B stage and issues the K block's wgmmas (m64nNk16, the
accumulator in registers, an ``!llvm.struct`` of tile_n / 2 f32 per thread) as one group. It keeps
one group in flight: once the group before retires (``wgmma_wait`` 1), lane 0 of each warp releases
that group's A/B stage (the ring's empty barrier counts 4 arrivals per warpgroup). After the last
group retires it releases the last stage and runs the epilogue (``epilogue.Epilogue``) on its rows:
each thread holds, per 8 columns, two pairs of adjacent f32 (rows r and r + 8), which it writes as
4-byte accesses at swizzled offsets.
"""

from __future__ import annotations

from fa4_mlir.configs.gemm import MMA_K_BYTES
from fa4_mlir.kernels.gemm import SM90_CONSUMER_REGISTERS
from fa4_mlir.kernels.gemm.epilogue import Epilogue, swizzled_rows
from fa4_mlir.kernels.gemm.prologue import Gemm, k_steps


def _wgmmas(g: Gemm, w: int, stage, acc, first: bool):
    """Warpgroup ``w``'s wgmmas of the K block in A/B stage ``stage``, committed as one group; the
    accumulator after them."""
    dsl, c, smem = g.dsl, g.c, g.smem
    ab_type = "bf16" if c.dtype == "bf16" else "f16"
    a_tile, b_tile = smem.a_tile(stage), smem.b_tile(stage)
    for kk, b_layout in k_steps(c):
        acc = dsl.fa4.wgmma(a_tile, b_tile, acc, n=c.tile_n, ab_type=ab_type, accumulate=0 if first and kk == 0 else 1,
                            a_offset=w * 64 * 128 + kk * MMA_K_BYTES, **b_layout)  # warpgroup w's 64 rows of 128 B
    dsl.fa4.wgmma_commit()
    return acc


def _consumer_release_at(g: Gemm, ab, stage) -> None:
    """Release A/B stage ``stage`` (not the state's current one), without stepping: the reference's
    ``consumer_release_at``."""
    g.dsl.fa4.pipeline_consumer_release(ab.pipeline.value, stage.value, sub_stage=0)


def consumer(g: Gemm, w: int) -> None:
    from fa4_mlir._mlir import ir

    dsl, k, c = g.dsl, g.k, g.c
    pitch = c.epi_row_bytes
    per_sub = c.epi_tile_n // 8
    with k.role(f"consumer{w}", warps=range(4 * w, 4 * w + 4), registers=SM90_CONSUMER_REGISTERS[c.consumers]):
        tid = dsl.tid_x()
        me = tid % 128
        lead = me == g.c0
        lane = tid % 32
        lane0 = lane == g.c0
        warp = me // 32
        quad, pos = dsl.shrui(lane, 2), dsl.andi(lane, 3)
        row = warp * 16 + quad  # m64nNk16 fragment: thread row 16 * warp + lane / 4 (and row + 8)
        rowb, sw = swizzled_rows(g, row)
        rows = [rowb + pos * 4]
        rows.append(rows[0] + 8 * pitch)
        offsets, c_offsets = {}, {}
        for ch in range(per_sub):
            x = dsl.shli(dsl.xori(sw, ch), 4)
            for h in (0, 1):
                offsets[ch, h] = x + rows[h]
                c_offsets[ch, h] = offsets[ch, h] + w * 64 * pitch  # C holds both warpgroups' rows
        ep = Epilogue(g, 2, w, lead, f"epilogue{w}", 128)
        acc_type = ir.Type.parse(f"!llvm.struct<({', '.join(['f32'] * (c.tile_n // 2))})>")
        f32 = ir.F32Type.get()
        zero = dsl.llvm.mlir_zero(acc_type)
        ab = g.mbars.ab_pipeline().consumer()
        epi = g.mbars.epi_load_pipeline("consumer")
        with g.tiles(carry=[ab, epi]) as t:
            tile_row, col, _ = g.tile_origin(t)
            store_row = tile_row + w * 64
            ab.consumer_wait()
            acc = dsl.Var(_wgmmas(g, w, ab.stage, zero, first=True))
            prev = dsl.Var(ab.stage)
            ab.step()
            with k.range(g.c1, g.arg.k_tiles, g.c1, carry=[acc, ab, prev]):
                ab.consumer_wait()
                acc.value = _wgmmas(g, w, ab.stage, acc.value, first=False)
                # the group before this one has retired: its A/B stage may be refilled
                dsl.fa4.wgmma_wait(pending=1)
                with k.if_(lane0):
                    _consumer_release_at(g, ab, prev.value)
                stage = ab.stage
                ab.step()
                prev.value = stage
            dsl.fa4.wgmma_wait(pending=0)
            with k.if_(lane0):
                _consumer_release_at(g, ab, prev.value)

            def chunks(j):
                return [((j * per_sub + ch, h), c_offsets[ch, h], offsets[ch, h])
                        for ch in range(per_sub) for h in (0, 1)]

            def values(chunk, _):
                # for each 8 columns the thread holds (row, 2q, 2q + 1) at 4i, 4i + 1 and
                # (row + 8, 2q, 2q + 1) at 4i + 2, 4i + 3 (q = lane % 4)
                col8, half = chunk
                base = 4 * col8 + 2 * half
                pair = [dsl.llvm.extractvalue(f32, acc.value, [base + i]) for i in (0, 1)]
                return dsl.vector.from_elements(ep.wide, pair)

            ep.tile(epi, col, store_row, chunks, values)
        with k.if_(lead):
            dsl.fa4.tma_store_wait(pending=0)
