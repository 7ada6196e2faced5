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
from fa4_mlir.kernels.source import KernelSource, Param, TensorMapSpec, kernel_module

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
    c = config
    elem = c.elem.mlir
    vec = VECTOR_BYTES // c.elem.bytes
    steps = c.slice_bytes // (WARPGROUP_THREADS * VECTOR_BYTES)
    args = "%src: !fa4.tensormap, %dst: !fa4.tensormap, %num_tiles: i32, %total_tiles: i32, %tiles_per_cta: i32, %scale: f32"
    lines = [
        "      %c0 = arith.constant 0 : i32",
        "      %c1 = arith.constant 1 : i32",
        f'      %ring = "fa4.smem_region"() {{sym_name = "ring", bytes = {c.stages * c.tile_bytes}, align = 1024}} : () -> !fa4.smem',
    ]
    lines += [f'      %out{i} = "fa4.smem_region"() {{sym_name = "out{i}", bytes = {c.slice_bytes}, align = 1024}} : () -> !fa4.smem'
              for i in range(c.consumers)]
    lines += [
        f'      %full = "fa4.mbarrier_alloc"() {{sym_name = "full", num_barriers = {c.stages}, arrive_count = 1, arrival = "tx"}} : () -> !fa4.mbarriers',
        f'      %empty = "fa4.mbarrier_alloc"() {{sym_name = "empty", num_barriers = {c.stages}, arrive_count = {WARPGROUP_THREADS * c.consumers}, arrival = "threads"}} : () -> !fa4.mbarriers',
        f'      %pipe = "fa4.pipeline_create"(%full, %empty) {{sym_name = "ring", num_stages = {c.stages}}} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline',
        '      "fa4.mbarrier_init"(%full) : (!fa4.mbarriers) -> ()',
        '      "fa4.mbarrier_init"(%empty) : (!fa4.mbarriers) -> ()',
        "      %block = nvvm.read.ptx.sreg.ctaid.x : i32",
        "      %first = arith.muli %block, %tiles_per_cta : i32",
        "      %end = arith.addi %first, %tiles_per_cta : i32",
        "      %last = arith.minui %end, %total_tiles : i32",
        f"      %rows = arith.constant {c.tile_rows} : i32",
        f"      %cols = arith.constant {c.tile_cols} : i32",
    ]
    roles = [*_producer(c), *[line for i in range(c.consumers) for line in _consumer(c, i, elem, vec, steps)]]
    mlir = kernel_module(NAME, c.target, args, lines, roles, c.num_warps)
    box_in = (c.tile_cols, c.tile_rows)
    box_out = (c.tile_cols, c.slice_rows)
    return KernelSource(
        name=NAME, target=c.target, mlir=mlir,
        params=(
            Param("src", "tensormap", "in[M, N], row-major", TensorMapSpec(c.dtype, box_in)),
            Param("dst", "tensormap", "out[M, N], row-major", TensorMapSpec(c.dtype, box_out)),
            Param("num_tiles", "i32", f"column tiles per row block: ceil(N / {c.tile_cols})"),
            Param("total_tiles", "i32", f"ceil(M / {c.tile_rows}) * num_tiles"),
            Param("tiles_per_cta", "i32", "ceil(total_tiles / CTAs): consecutive tiles each CTA streams"),
            Param("scale", "f32", "the factor applied to every element"),
        ),
        grid="(ceil(total_tiles / tiles_per_cta), 1, 1): one CTA per SM (launch_geometry)",
        config={k: getattr(c, k) for k in ("dtype", "tile_rows", "tile_cols", "stages", "consumers")},
    )


def _producer(c: CopyPipelineConfig) -> list[str]:
    return [
        '        "fa4.warp_role"() ({',
        '          %elected = "fa4.elect_one"() : () -> i1',
        "          scf.if %elected {",
        '            %ps:2 = "fa4.pipeline_initial_state"(%pipe) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)',
        "            %pend:2 = scf.for %t = %first to %last step %c1 iter_args(%s = %ps#0, %p = %ps#1) -> (i32, i32) : i32 {",
        '              "fa4.pipeline_producer_acquire"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()',
        f'              "fa4.pipeline_producer_commit"(%pipe, %s) {{tx_bytes = {c.tile_bytes}}} : (!fa4.pipeline, i32) -> ()',
        f'              %buf = "fa4.smem_stage"(%ring, %s) {{bytes = {c.tile_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
        *_tile_origin("              "),
        f'              "fa4.tma_load"(%src, %buf, %full, %s, %col, %row) {{bytes = {c.tile_bytes}}} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()',
        '              %next:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
        "              scf.yield %next#0, %next#1 : i32, i32",
        "            }",
        "          }",
        "          gpu.yield",
        f'        }}) {{sym_name = "producer", warps = array<i32: {4 * c.consumers}>, registers = {c.producer_registers}}} : () -> ()',
    ]


def _tile_origin(indent: str) -> list[str]:
    """%row, %col: the top-left element of tile %t (row-major over row blocks of num_tiles tiles)."""
    return [
        f"{indent}%rb = arith.divui %t, %num_tiles : i32",
        f"{indent}%ct = arith.remui %t, %num_tiles : i32",
        f"{indent}%row = arith.muli %rb, %rows : i32",
        f"{indent}%col = arith.muli %ct, %cols : i32",
    ]


def _consumer(c: CopyPipelineConfig, i: int, elem: str, vec: int, steps: int) -> list[str]:
    v, x = f"vector<{vec}x{elem}>", f"%x{i}"
    warps = ", ".join(str(w) for w in range(4 * i, 4 * i + 4))
    return [
        '        "fa4.warp_role"() ({',
        f"          %tid{i} = nvvm.read.ptx.sreg.tid.x : i32",
        f"          %wg{i} = arith.constant {WARPGROUP_THREADS} : i32",
        f"          %me{i} = arith.remui %tid{i}, %wg{i} : i32",
        f"          %lead{i} = arith.cmpi eq, %me{i}, %c0 : i32",
        f"          %sixteen{i} = arith.constant {VECTOR_BYTES} : i32",
        f"          %mine{i} = arith.muli %me{i}, %sixteen{i} : i32",
        f"          %slice{i} = arith.constant {i * c.slice_bytes} : i32",
        f"          %step{i} = arith.constant {WARPGROUP_THREADS * VECTOR_BYTES} : i32",
        f"          %steps{i} = arith.constant {steps} : i32",
        f"          %srow{i} = arith.constant {i * c.slice_rows} : i32",
        f"          %factor{i} = vector.broadcast %scale : f32 to vector<{vec}xf32>",
        f'          %out_addr{i} = "fa4.smem_address"(%out{i}) : (!fa4.smem) -> !llvm.ptr<3>',
        f'          %cs{i}:2 = "fa4.pipeline_initial_state"(%pipe) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
        f"          %cend{i}:2 = scf.for %t = %first to %last step %c1 iter_args(%s = %cs{i}#0, %p = %cs{i}#1) -> (i32, i32) : i32 {{",
        '            "fa4.pipeline_consumer_wait"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> ()',
        f"            scf.if %lead{i} {{",
        '              "fa4.tma_store_wait"() {pending = 0} : () -> ()',
        "            }",
        f'            "fa4.named_barrier"() {{sym_name = "consumer{i}", threads = {WARPGROUP_THREADS}}} : () -> ()',
        f'            %buf = "fa4.smem_stage"(%ring, %s) {{bytes = {c.tile_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
        '            %in = "fa4.smem_address"(%buf) : (!fa4.smem) -> !llvm.ptr<3>',
        f"            scf.for %k = %c0 to %steps{i} step %c1 : i32 {{",
        f"              %kb = arith.muli %k, %step{i} : i32",
        f"              %off = arith.addi %kb, %mine{i} : i32",
        f"              %src_off = arith.addi %off, %slice{i} : i32",
        "              %pin = llvm.getelementptr %in[%src_off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8",
        f"              {x} = llvm.load %pin {{alignment = 16 : i64}} : !llvm.ptr<3> -> {v}",
        f"              %wide = arith.extf {x} : {v} to vector<{vec}xf32>",
        f"              %scaled = arith.mulf %wide, %factor{i} : vector<{vec}xf32>",
        f"              %y = arith.truncf %scaled : vector<{vec}xf32> to {v}",
        f"              %pout = llvm.getelementptr %out_addr{i}[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8",
        f"              llvm.store %y, %pout {{alignment = 16 : i64}} : {v}, !llvm.ptr<3>",
        "            }",
        '            "fa4.pipeline_consumer_release"(%pipe, %s) : (!fa4.pipeline, i32) -> ()',
        "            nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}",
        f'            "fa4.named_barrier"() {{sym_name = "consumer{i}", threads = {WARPGROUP_THREADS}}} : () -> ()',
        f"            scf.if %lead{i} {{",
        *_tile_origin("              "),
        f"              %orow = arith.addi %row, %srow{i} : i32",
        f'              "fa4.tma_store"(%dst, %out{i}, %col, %orow) {{bytes = {c.slice_bytes}}} : (!fa4.tensormap, !fa4.smem, i32, i32) -> ()',
        "            }",
        '            %next:2 = "fa4.pipeline_advance"(%pipe, %s, %p) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
        "            scf.yield %next#0, %next#1 : i32, i32",
        "          }",
        f"          scf.if %lead{i} {{",
        '            "fa4.tma_store_wait"() {pending = 0} : () -> ()',
        "          }",
        "          gpu.yield",
        f'        }}) {{sym_name = "consumer{i}", warps = array<i32: {warps}>, registers = {c.consumer_registers}}} : () -> ()',
    ]
