"""The GEMM's sm_90a role: a consumer warpgroup, MMA and epilogue in one.

Without ``pingpong`` the two (or one) consumer warpgroups share every tile of the CTA's walk,
warpgroup ``w`` its 64 rows ``64w..``. With ``pingpong`` each warpgroup owns every other tile (from
the ``w``-th) whole: the main load fills the A/B ring tile after tile, so one warpgroup's K loop
follows the other's and its epilogue runs while the other's wgmmas keep the tensor cores busy. A
stage and a C sub-tile then have one reader, and each warpgroup steps its ring states past the
other's tiles (``k_tiles`` A/B stages, ``tile_n / epi_tile_n`` C sub-tiles where C is read).

Per tile, a warpgroup waits for each A/B stage and issues the K block's wgmmas (m64nNk16, one per
64 rows it owns, each accumulator in registers, an ``!llvm.struct`` of tile_n / 2 f32 per thread)
as one group. It keeps one group in flight: once the group before retires (``wgmma_wait`` 1), lane
0 of each warp releases that group's A/B stage (the ring's empty barrier counts 4 arrivals per
warpgroup that reads a stage). After the last group retires it releases the last stage and runs the
epilogue (``epilogue.Epilogue``) on its rows: each thread holds, per 8 columns of a 64-row block,
two pairs of adjacent f32 (rows r and r + 8), which it writes as 4-byte accesses at swizzled
offsets.
"""

from __future__ import annotations

from fa4_mlir.configs.gemm import MMA_K_BYTES
from fa4_mlir.kernels.gemm import SM90_CONSUMER_REGISTERS
from fa4_mlir.kernels.gemm.epilogue import Epilogue, swizzled_rows
from fa4_mlir.kernels.gemm.prologue import Gemm, k_steps


def _wgmmas(g: Gemm, w: int, stage, accs: list, first: bool) -> list:
    """Warpgroup ``w``'s wgmmas of the K block in A/B stage ``stage``, committed as one group; the
    accumulators after them (one per 64 rows the warpgroup owns: its own 64 rows of the tile, or with
    ``pingpong`` all of the tile's)."""
    dsl, c, smem = g.dsl, g.c, g.smem
    ab_type = "bf16" if c.dtype == "bf16" else "f16"
    a_tile, b_tile = smem.a_tile(stage), smem.b_tile(stage)
    blocks = range(len(accs)) if c.pingpong else [w]  # the A tile's 64-row blocks of 128 B rows
    accs = list(accs)
    for kk, b_layout in k_steps(c):
        for i, block in enumerate(blocks):
            accs[i] = dsl.fa4.wgmma(a_tile, b_tile, accs[i], n=c.tile_n, ab_type=ab_type,
                                    accumulate=0 if first and kk == 0 else 1,
                                    a_offset=block * 64 * 128 + kk * MMA_K_BYTES, **b_layout)
    dsl.fa4.wgmma_commit()
    return accs


def _consumer_release_at(g: Gemm, ab, stage) -> None:
    """Release A/B stage ``stage`` (not the state's current one), without stepping: the reference's
    ``consumer_release_at``."""
    g.dsl.fa4.pipeline_consumer_release(ab.pipeline.value, stage.value, sub_stage=0)


def _skip_tile(g: Gemm, ab, epi) -> None:
    """Step both rings past one tile of the other pingpong warpgroup's: its ``k_tiles`` A/B stages,
    and its C sub-tiles where C is read (without C the ring is never used)."""
    with g.k.range(g.c0, g.arg.k_tiles, g.c1, carry=[ab]):
        ab.step()
    with g.k.if_(g.load_c, carry=[epi]):
        for _ in range(g.c.num_epi_subtiles):
            epi.consumer_step()


def _pass(k, turn, lane0) -> None:
    """Hand a pingpong turn to the other warpgroup and step to this one's next."""
    with k.if_(lane0):
        turn.arrive()
    turn.step()


def consumer(g: Gemm, w: int) -> None:
    """Consumer warpgroup ``w``: without ``pingpong`` rows 64w.. of every tile of the CTA's walk, with
    it every other tile (from the w-th), whose A/B stages and C sub-tiles it alone reads (it steps
    its ring states past the other warpgroup's)."""
    from fa4_mlir._mlir import ir

    dsl, k, c = g.dsl, g.k, g.c
    pitch = c.epi_row_bytes
    per_sub = c.epi_tile_n // 8
    halves = c.wg_rows // 64  # 64-row accumulators this warpgroup holds
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
        # C holds the tile's rows (warpgroup w's 64 start at 64w), D staging the warpgroup's; with
        # pingpong both hold the tile's, its 64-row block i at 64i (offset in chunks: fewer live values)
        offsets, c_offsets = {}, {}
        for ch in range(per_sub):
            x = dsl.shli(dsl.xori(sw, ch), 4)
            for h in (0, 1):
                offsets[ch, h] = x + rows[h]
                c_offsets[ch, h] = offsets[ch, h] if c.pingpong else offsets[ch, h] + w * 64 * pitch
        ep = Epilogue(g, 2, w, lead, f"epilogue{w}", 128)
        acc_type = ir.Type.parse(f"!llvm.struct<({', '.join(['f32'] * (c.tile_n // 2))})>")
        f32 = ir.F32Type.get()
        zero = dsl.llvm.mlir_zero(acc_type)
        ab = g.mbars.ab_pipeline().consumer()
        epi = g.mbars.epi_load_pipeline("consumer")
        sharers = c.consumers if c.pingpong else 1
        turns = [g.mbars.turn("mma", w), g.mbars.turn("epilogue", w)] if c.pingpong else []
        for _ in range(w if c.pingpong else 0):  # the tiles of the warpgroups before this one
            _skip_tile(g, ab, epi)
        with g.tiles(carry=[ab, epi, *turns], share=w if c.pingpong else 0, sharers=sharers) as t:
            tile_row, col, _ = g.tile_origin(t)
            store_row = tile_row if c.pingpong else tile_row + w * 64
            if turns:
                turns[0].wait()
            ab.consumer_wait()
            accs = [dsl.Var(a) for a in _wgmmas(g, w, ab.stage, [zero] * halves, first=True)]
            prev = dsl.Var(ab.stage)
            ab.step()
            with k.range(g.c1, g.arg.k_tiles, g.c1, carry=[*accs, ab, prev]):
                ab.consumer_wait()
                for var, value in zip(accs, _wgmmas(g, w, ab.stage, [a.value for a in accs], first=False)):
                    var.value = value
                # the group before this one has retired: its A/B stage may be refilled
                dsl.fa4.wgmma_wait(pending=1)
                with k.if_(lane0):
                    _consumer_release_at(g, ab, prev.value)
                stage = ab.stage
                ab.step()
                prev.value = stage
            if turns:  # every A/B wait of the tile passed: the other warpgroup's next tile may wait
                _pass(k, turns[0], lane0)
            dsl.fa4.wgmma_wait(pending=0)
            with k.if_(lane0):
                _consumer_release_at(g, ab, prev.value)

            def chunks(j):
                return [((i, j * per_sub + ch, h), c_offsets[ch, h] + 64 * i * pitch, offsets[ch, h] + 64 * i * pitch)
                        for i in range(halves) for ch in range(per_sub) for h in (0, 1)]

            def values(chunk, _):
                # for each 8 columns the thread holds (row, 2q, 2q + 1) at 4i, 4i + 1 and
                # (row + 8, 2q, 2q + 1) at 4i + 2, 4i + 3 (q = lane % 4)
                i, col8, half = chunk
                base = 4 * col8 + 2 * half
                pair = [dsl.llvm.extractvalue(f32, accs[i].value, [base + n]) for n in (0, 1)]
                return dsl.vector.from_elements(ep.wide, pair)

            if turns:
                turns[1].wait()
            ep.tile(epi, col, store_row, chunks, values)
            if turns:
                _pass(k, turns[1], lane0)
            for _ in range(sharers - 1):  # the other warpgroups' next tiles
                _skip_tile(g, ab, epi)
        with k.if_(lead):
            dsl.fa4.tma_store_wait(pending=0)
