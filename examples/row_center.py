"""Row centering, y = x - mean(x) along each row: the fa4_mlir.dsl tutorial kernel (docs/authoring.md).

X and Y are (M, 64) bf16, row-major. The CTA streams tiles of 128 rows through a ring of 4 shared-
memory stages: one producer warp TMA-loads the tiles, one consumer warpgroup (a thread per row) sums
its row, subtracts the mean into a staging buffer and TMA-stores it. CTA ``b`` of ``G`` takes tiles
``b, b + G, ...``.

    fa4-compile examples/row_center.py --target sm_90a -o out
"""

from __future__ import annotations

from fa4_mlir import dsl

COLS, ROWS, STAGES = 64, 128, 4            # a tile: 128 rows of 64 bf16 (128 bytes per row)
TILE_BYTES = ROWS * COLS * 2
CHUNK = 8                                  # bf16 per 16-byte vector access
THREADS = 128                              # the consumer warpgroup: one thread per row of a tile


def build(target: str = "sm_100a"):
    from fa4_mlir._mlir import ir

    k = dsl.Kernel("row_center", target, num_warps=5)
    x_map = k.tensormap("x", "bf16", box=(COLS, ROWS), doc="X[M, 64] bf16, row-major")
    y_map = k.tensormap("y", "bf16", box=(COLS, ROWS), doc="Y[M, 64] bf16, row-major (the output)")
    k.i32("tiles", doc="ceil(M / 128)")
    with k.body() as arg:
        # Shared memory and the ring: `full` barriers complete when a tile's bytes land (tx count),
        # `empty` ones when all 128 consumer threads have released the stage.
        ring = k.smem_region("ring", bytes=STAGES * TILE_BYTES, align=1024)
        out = k.smem_region("out", bytes=TILE_BYTES, align=1024)
        full = k.mbarriers("full", STAGES, arrive_count=1, arrival="tx")
        empty = k.mbarriers("empty", STAGES, arrive_count=THREADS, arrival="threads")
        pipe = k.pipeline("ring", STAGES, full, empty)
        dsl.fa4.mbarrier_init(full)
        dsl.fa4.mbarrier_init(empty)
        first, step = dsl.ctaid("x"), dsl.Value(dsl.nvvm.read_ptx_sreg_nctaid_x(dsl.i32()))

        # The producer: one elected lane of warp 4 walks the CTA's tiles, acquiring a stage for each.
        with k.role("producer", warps=[4]), k.elect_one():
            state = pipe.producer()
            with k.range(first, arg.tiles, step, carry=[state]) as tile:
                state.producer_acquire()
                state.producer_commit(tx_bytes=TILE_BYTES)
                stage = dsl.fa4.smem_stage(ring, state.stage, bytes=TILE_BYTES)
                dsl.fa4.tma_load(x_map.value, stage, full, state.stage, [dsl.Value(0).value, (tile * ROWS).value],
                                 bytes=TILE_BYTES)
                state.step()

        # The consumer warpgroup: thread r owns row r of each tile.
        with k.role("consumer", warps=[0, 1, 2, 3]):
            f32 = ir.F32Type.get()
            wide, narrow = ir.VectorType.get([CHUNK], f32), ir.VectorType.get([CHUNK], ir.BF16Type.get())
            row = dsl.tid_x() * (COLS * 2)                # the row's byte offset in a tile
            lead = (dsl.tid_x() == 0).named("lead")
            staged = dsl.fa4.smem_address(out)
            state = pipe.consumer()
            with k.range(first, arg.tiles, step, carry=[state]) as tile:
                state.consumer_wait()
                with k.if_(lead):                         # the last tile's store must be done reading `out`
                    dsl.fa4.tma_store_wait(pending=0)
                dsl.fa4.named_barrier(sym_name="consumer", threads=THREADS)
                x = dsl.fa4.smem_address(dsl.fa4.smem_stage(ring, state.stage, bytes=TILE_BYTES))

                def chunk(j):
                    """Chunk j of the row (8 values) as f32, and its byte offset in the tile."""
                    at = row + j * (CHUNK * 2)
                    return dsl.arith.extf(wide, dsl.llvm.load(narrow, dsl.byte_offset(x, at), alignment=16)), at

                total = dsl.Var(dsl.arith.constant(f32, 0.0))
                with k.range(0, COLS // CHUNK, carry=[total]) as j:
                    values, _ = chunk(j)
                    total.value = dsl.arith.addf(total.value, dsl.vector.reduction(f32, dsl.vector.CombiningKind.ADD,
                                                                                      values))
                mean = dsl.vector.broadcast(wide, dsl.arith.mulf(total.value, dsl.arith.constant(f32, 1.0 / COLS)))
                with k.range(0, COLS // CHUNK) as j:
                    values, at = chunk(j)
                    centered = dsl.arith.truncf(narrow, dsl.arith.subf(values, mean))
                    dsl.llvm.store(centered, dsl.byte_offset(staged, at), alignment=16)
                state.consumer_release()                  # the stage is read: the producer may refill it
                dsl.nvvm.fence_proxy(dsl.nvvm.ProxyKind.async_shared, space=dsl.nvvm.SharedSpace.shared_cta)
                dsl.fa4.named_barrier(sym_name="consumer", threads=THREADS)
                with k.if_(lead):                         # the staged tile is written and fenced: store it
                    dsl.fa4.tma_store(y_map.value, out, [dsl.Value(0).value, (tile * ROWS).value], bytes=TILE_BYTES)
                state.step()
            with k.if_(lead):
                dsl.fa4.tma_store_wait(pending=0)
    return k.source(grid="(min(resident CTAs, tiles), 1, 1)", config={"cols": COLS, "rows": ROWS, "stages": STAGES})
