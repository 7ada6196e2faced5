"""copy-pipeline: the smallest kernel that uses every fa4 mechanism the lowering supports on both targets.

``out[M, N] = scale * in[M, N]`` (bf16 or fp16, math in f32). The tensor is cut into
``tile_rows x tile_cols`` tiles, numbered row-major (``num_tiles = ceil(N / tile_cols)`` per row
block, ``total_tiles`` in all). The grid is persistent: CTA ``b`` streams tiles
``[b * tiles_per_cta, min((b + 1) * tiles_per_cta, total_tiles))`` through one pipeline, across row
blocks, so every SM gets the same share whatever the shape (``launch_geometry``):

* the producer warp (first warp of the last warpgroup, 40 registers) acquires a ring stage,
  expects the tile's bytes on its full barrier and issues the TMA load; one elected lane does this;
* consumer warpgroup ``c`` (232 registers) waits for the stage, scales its slice of rows into its
  staging buffer (16-byte vectors, one per thread per step), releases the stage (every consumer
  thread arrives on the empty barrier), fences the generic-proxy writes, meets its warpgroup at a
  named barrier, and thread 0 of the warpgroup TMA-stores the slice. Before the staging buffer is
  rewritten, thread 0 waits for the previous store to finish reading it.

Out-of-bounds rows and columns are zero-filled by the load and clipped by the store, so any M and N
(with N * element size a multiple of 16 bytes, a TMA rule) work.
"""

from __future__ import annotations

from fa4_mlir.configs.copy_pipeline import VECTOR_BYTES, WARPGROUP_THREADS, CopyPipelineConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.source import KernelSource

NAME = "copy_pipeline"
MAX_TILES = (1 << 31) - 1  # tile indices are i32


def launch_geometry(config: CopyPipelineConfig, rows: int, cols: int, ctas: int) -> tuple[tuple[int], dict]:
    """The grid and scalar arguments for an ``rows x cols`` tensor on a GPU that holds ``ctas``
    resident CTAs (one per SM for the default config)."""
    num_tiles = -(-cols // config.tile_cols)
    total = -(-rows // config.tile_rows) * num_tiles
    if not 1 <= total <= MAX_TILES:
        raise LaunchError(f"copy_pipeline: the tensor must have 1 to {MAX_TILES} tiles of "
                          f"{config.tile_rows}x{config.tile_cols}, got {total} for {rows}x{cols}")
    per_cta = -(-total // max(1, min(ctas, total)))
    return (-(-total // per_cta),), {"num_tiles": num_tiles, "total_tiles": total, "tiles_per_cta": per_cta}


def build(config: CopyPipelineConfig) -> KernelSource:
    """The kernel, built through ``fa4_mlir.dsl`` (MLIR bindings; imported here so that this module,
    and the launch geometry above, import without MLIR)."""
    from fa4_mlir import dsl

    c = config
    k = dsl.Kernel(NAME, c.target, c.num_warps)
    src = k.tensormap("src", c.dtype, (c.tile_cols, c.tile_rows), doc="in[M, N], row-major")
    dst = k.tensormap("dst", c.dtype, (c.tile_cols, c.slice_rows), doc="out[M, N], row-major")
    k.i32("num_tiles", f"column tiles per row block: ceil(N / {c.tile_cols})")
    k.i32("total_tiles", f"ceil(M / {c.tile_rows}) * num_tiles")
    k.i32("tiles_per_cta", "ceil(total_tiles / CTAs): consecutive tiles each CTA streams")
    k.f32("scale", "the factor applied to every element")
    with k.body() as arg:
        ring = k.smem_region("ring", bytes=c.stages * c.tile_bytes, align=1024)
        outs = [k.smem_region(f"out{i}", bytes=c.slice_bytes, align=1024) for i in range(c.consumers)]
        full = k.mbarriers("full", c.stages, arrive_count=1, arrival="tx")
        empty = k.mbarriers("empty", c.stages, arrive_count=WARPGROUP_THREADS * c.consumers, arrival="threads")
        pipe = k.pipeline("ring", c.stages, full, empty)
        dsl.fa4.mbarrier_init(full)
        dsl.fa4.mbarrier_init(empty)
        first = dsl.ctaid("x") * arg.tiles_per_cta
        last = (first + arg.tiles_per_cta).min(arg.total_tiles)

        def origin(t):
            """(column, row) of tile ``t``'s top-left element (row-major over row blocks)."""
            block, column = t // arg.num_tiles, t % arg.num_tiles
            row = block * c.tile_rows
            return column * c.tile_cols, row

        with k.role("producer", warps=[4 * c.consumers], registers=c.producer_registers), k.elect_one():
            state = pipe.producer()
            with k.range(first, last, carry=[state]) as t:
                state.producer_acquire()
                state.producer_commit(tx_bytes=c.tile_bytes)
                buf = dsl.fa4.smem_stage(ring, state.stage, bytes=c.tile_bytes)
                col, row = origin(t)
                dsl.fa4.tma_load(src.value, buf, full, state.stage, [col.value, row.value], bytes=c.tile_bytes)
                state.step()
        for i in range(c.consumers):
            with k.role(f"consumer{i}", warps=range(4 * i, 4 * i + 4), registers=c.consumer_registers):
                _consumer(dsl, k, c, i, pipe, ring, outs[i], dst, arg, first, last, origin)
    return k.source(grid="(ceil(total_tiles / tiles_per_cta), 1, 1): one CTA per SM (launch_geometry)",
                    config={f: getattr(c, f) for f in ("dtype", "tile_rows", "tile_cols", "stages", "consumers")})


def _consumer(dsl, k, c: CopyPipelineConfig, i: int, pipe, ring, out, dst, arg, first, last, origin) -> None:
    """Consumer warpgroup ``i``: scale its slice of each tile into ``out`` and TMA-store it."""
    from fa4_mlir._mlir import ir

    vec = VECTOR_BYTES // c.elem.bytes
    wide = ir.VectorType.get([vec], ir.F32Type.get())
    narrow = ir.VectorType.get([vec], ir.Type.parse(c.elem.mlir))
    me = dsl.tid_x() % WARPGROUP_THREADS
    lead = (me == 0).named(f"lead{i}")
    mine = me * VECTOR_BYTES
    factor = dsl.vector.broadcast(wide, arg.scale)
    out_addr = dsl.fa4.smem_address(out)
    state = pipe.consumer()
    with k.range(first, last, carry=[state]) as t:
        state.consumer_wait()
        with k.if_(lead):
            dsl.fa4.tma_store_wait(pending=0)
        dsl.fa4.named_barrier(sym_name=f"consumer{i}", threads=WARPGROUP_THREADS)
        buf = dsl.fa4.smem_stage(ring, state.stage, bytes=c.tile_bytes)
        base = dsl.fa4.smem_address(buf)
        with k.range(0, c.slice_bytes // (WARPGROUP_THREADS * VECTOR_BYTES)) as step:
            offset = step * (WARPGROUP_THREADS * VECTOR_BYTES) + mine
            x = dsl.llvm.load(narrow, dsl.byte_offset(base, offset + i * c.slice_bytes), alignment=16)
            y = dsl.arith.truncf(narrow, dsl.arith.mulf(dsl.arith.extf(wide, x), factor))
            dsl.llvm.store(y, dsl.byte_offset(out_addr, offset), alignment=16)
        state.consumer_release()
        dsl.nvvm.fence_proxy(dsl.nvvm.ProxyKind.async_shared, space=dsl.nvvm.SharedSpace.shared_cta)
        dsl.fa4.named_barrier(sym_name=f"consumer{i}", threads=WARPGROUP_THREADS)
        with k.if_(lead):
            col, row = origin(t)
            dsl.fa4.tma_store(dst.value, out, [col.value, (row + i * c.slice_rows).value], bytes=c.slice_bytes)
        state.step()
    with k.if_(lead):
        dsl.fa4.tma_store_wait(pending=0)

