"""gemm: warp-specialised GEMM with a residual epilogue, D = alpha * A @ B + beta * C.

``A`` is (M, K) row-major; ``B`` is (N, K) row-major (``b_major = "k"``, the transpose of a K x N
matrix) or (K, N) row-major (``"mn"``); ``C`` and ``D`` are (M, N) row-major; bf16 or fp16, math in
f32, rounded once. The grid is persistent: CTA (or CTA pair) ``b`` of ``G`` takes output tiles
``b, b + G, ...`` in a grouped raster (bands of ``group_m`` tile rows, so the CTAs working at one
time share A and B panels in L2). Every role walks the same tile sequence:

* main load (one elected thread): per tile, for each K block, acquires an A/B stage, expects its
  bytes and issues the TMA loads; after the tile's first K block it signals the load-order barrier;
* epilogue load (one elected thread, the EpiLoadPipeline producer): per tile, waits on the
  load-order barrier so C does not compete with the tile's first A/B load, then streams the tile's
  ``tile_n / epi_tile_n`` C sub-tiles through ``epi_load_stages`` buffers (skipped when ``has_c`` is
  0, i.e. beta = 0: C is then never read, as torch.addmm ignores NaN in it);
* sm_100a: the MMA warp (leader CTA of a pair) issues tcgen05 MMAs into a TMEM accumulator stage,
  commits each A/B stage back to the main load and the finished accumulator to the epilogue; the
  4 epilogue warps read the accumulator sub-tile by sub-tile (tcgen05.ld), release the accumulator
  stage after the last read, and write D;
* sm_90a: each consumer warpgroup (64 rows) issues wgmma with the accumulator in registers, keeps
  one wgmma group in flight and releases the previous A/B stage when it retires, then runs the
  epilogue itself.

The epilogue of a sub-tile: wait for C, compute ``alpha * acc + beta * C`` per element, write D into
one of two swizzled staging buffers (the TMA store of the other may still read it), fence, meet at
a named barrier, and one thread TMA-stores it. C and D sub-tiles use the swizzle of their row width,
so each thread's 4- or 16-byte accesses are free of bank conflicts. Out-of-bounds rows and columns
of every tile are zero-filled by TMA loads and clipped by TMA stores: any M, N, K the tensor maps
accept work.
"""

from __future__ import annotations

from fa4_mlir.configs.gemm import MMA_K_BYTES, GemmConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.source import KernelSource, Param, TensorMapSpec, kernel_module

NAME = "gemm"
MAX_TILES = (1 << 31) - 1  # tile indices are i32
SM90_CONSUMER_REGISTERS = {1: 240, 2: 232}  # 2 x 128 x 232 + 128 x 40 <= 65536
SM90_PRODUCER_REGISTERS = 40


def launch_geometry(config: GemmConfig, m: int, n: int, k: int, ctas: int) -> tuple[tuple[int], dict]:
    """The grid and scalar arguments for an (m, n, k) problem on a GPU that holds ``ctas`` resident
    CTAs: one CTA (pair) per resident slot, at most one per tile."""
    num_m, num_n = -(-m // config.tile_m), -(-n // config.tile_n)
    total = num_m * num_n
    if not 1 <= total <= MAX_TILES:
        raise LaunchError(f"gemm: the output must have 1 to {MAX_TILES} tiles of {config.tile_m}x{config.tile_n}, "
                          f"got {total} for {m}x{n}")
    if k < 1:
        raise LaunchError(f"gemm: K must be >= 1, got {k}")
    groups = max(1, min(ctas // config.cta_group, total))
    return (groups * config.cta_group,), {"num_m": num_m, "num_n": num_n, "k_tiles": -(-k // config.tile_k)}


def build(config: GemmConfig) -> KernelSource:
    config.validate()
    c = config
    k = _Kernel(c)
    cluster = " attributes {nvvm.cluster_dim = array<i32: 2, 1, 1>}" if c.cta_group == 2 else ""
    preamble = (f"!acc = !llvm.struct<({', '.join(['f32'] * (c.tile_n // 2))})>",) if not c.has_tmem else ()
    args = ("%a_map: !fa4.tensormap, %b_map: !fa4.tensormap, %c_map: !fa4.tensormap, %d_map: !fa4.tensormap, "
            "%num_m: i32, %num_n: i32, %k_tiles: i32, %alpha: f32, %beta: f32, %has_c: i32")
    prologue = k.prologue()
    roles = [*k.main_load(), *k.epilogue_load(), *(k.sm100_roles() if c.has_tmem else k.sm90_roles())]
    mlir = kernel_module(NAME, c.target, args, prologue, roles, c.num_warps, cluster, preamble)
    e = c.dtype
    b_box = (c.tile_k, c.b_tile_rows) if c.b_major == "k" else (c.swizzle_elems, c.tile_k)
    store_rows = c.rows_per_cta if c.has_tmem else 64
    return KernelSource(
        name=NAME, target=c.target, mlir=mlir,
        params=(
            Param("a", "tensormap", "A[M, K], row-major", TensorMapSpec(e, (c.tile_k, c.rows_per_cta), "128B")),
            Param("b", "tensormap", "B[N, K] (b_major k) or B[K, N] (b_major mn), row-major",
                  TensorMapSpec(e, b_box, "128B")),
            Param("c", "tensormap", "C[M, N], row-major (the residual)",
                  TensorMapSpec(e, (c.epi_tile_n, c.rows_per_cta), c.epi_swizzle)),
            Param("d", "tensormap", "D[M, N], row-major (the output)",
                  TensorMapSpec(e, (c.epi_tile_n, store_rows), c.epi_swizzle)),
            Param("num_m", "i32", f"ceil(M / {c.tile_m})"),
            Param("num_n", "i32", f"ceil(N / {c.tile_n})"),
            Param("k_tiles", "i32", f"ceil(K / {c.tile_k}), >= 1"),
            Param("alpha", "f32", "scale of A @ B"),
            Param("beta", "f32", "scale of C"),
            Param("has_c", "i32", "0 when beta = 0: C is not read"),
        ),
        grid=f"(min(resident CTAs, num_m * num_n * {c.cta_group}), 1, 1) (launch_geometry)",
        config={f: getattr(c, f) for f in ("dtype", "tile_m", "tile_n", "tile_k", "stages", "epi_tile_n",
                                           "epi_load_stages", "accum_stages", "cta_group", "b_major", "group_m")},
    )


class _Kernel:
    """Emits the kernel's MLIR text; every method returns lines."""

    def __init__(self, c: GemmConfig):
        self.c = c
        self.pair = c.cta_group == 2

    # -- shared pieces -------------------------------------------------------------------------------
    def prologue(self) -> list[str]:
        c = self.c
        smem = '"fa4.smem_region"() {{sym_name = "{}", bytes = {}, align = 1024, swizzle = "{}"}} : () -> !fa4.smem'
        lines = [
            "      %c0 = arith.constant 0 : i32",
            "      %c1 = arith.constant 1 : i32",
            "      %true = arith.constant true",
            "      %false = arith.constant false",
            f"      %a = {smem.format('a', c.stages * c.a_stage_bytes, '128B')}",
            f"      %b = {smem.format('b', c.stages * c.b_stage_bytes, '128B')}",
            f"      %c = {smem.format('c', c.epi_load_stages * c.epi_tile_bytes, c.epi_swizzle)}",
        ]
        if c.has_tmem:
            lines += [f"      %d = {smem.format('d', 2 * c.epi_tile_bytes, c.epi_swizzle)}",
                      '      %slot = "fa4.smem_region"() {sym_name = "tmem_addr", bytes = 4, align = 4} : () -> !fa4.smem',
                      f'      %accum = "fa4.tmem_region"() {{sym_name = "accum", columns = {c.tmem_used}}} : () -> !fa4.tmem',
                      "      %tid0 = nvvm.read.ptx.sreg.tid.x : i32",
                      "      %c32 = arith.constant 32 : i32",
                      "      %warp0 = arith.divui %tid0, %c32 : i32",
                      "      %alloc_warp = arith.cmpi eq, %warp0, %c0 : i32",
                      "      scf.if %alloc_warp {",
                      f'        "fa4.tmem_alloc"(%slot) {{cta_group = {c.cta_group}}} : (!fa4.smem) -> ()',
                      "      }"]
        else:
            half = 2 * 64 * c.epi_row_bytes
            lines += [f"      %d{i} = {smem.format(f'd{i}', half, c.epi_swizzle)}" for i in range(c.consumers)]
        g = c.cta_group
        ab_empty = (f"arrive_count = 1, arrival = \"commit\", cta_group = {g}" if c.has_tmem
                    else f"arrive_count = {4 * c.consumers}, arrival = \"threads\"")
        bars = [("ab_full", c.stages, f'arrive_count = 1, arrival = "tx", cta_group = {g}'),
                ("ab_empty", c.stages, ab_empty)]
        if c.has_tmem:
            bars += [("accum_full", c.accum_stages, f'arrive_count = 1, arrival = "commit", cta_group = {g}'),
                     ("accum_empty", c.accum_stages,
                      f'arrive_count = {c.epilogue_threads * g}, arrival = "threads", cta_group = {g}')]
        bars += [("epi_full", c.epi_load_stages, 'arrive_count = 1, arrival = "tx"'),
                 ("epi_empty", c.epi_load_stages, f'arrive_count = {c.epilogue_threads}, arrival = "threads"'),
                 ("order_full", 1, 'arrive_count = 1, arrival = "threads"'),
                 ("order_empty", 1, 'arrive_count = 1, arrival = "threads"')]
        for name, n, attrs in bars:
            sym = {"ab_full": "ab_producer", "ab_empty": "ab_consumer", "accum_full": "accum_producer",
                   "accum_empty": "accum_consumer", "epi_full": "epi_load_full", "epi_empty": "epi_load_empty",
                   "order_full": "load_order_full", "order_empty": "load_order_empty"}[name]
            lines.append(f'      %{name} = "fa4.mbarrier_alloc"() {{sym_name = "{sym}", num_barriers = {n}, '
                         f"{attrs}}} : () -> !fa4.mbarriers")
        pipes = [("ab", "ab_full", "ab_empty", c.stages), ("epi", "epi_full", "epi_empty", c.epi_load_stages),
                 ("order", "order_full", "order_empty", 1)]
        if c.has_tmem:
            pipes.insert(1, ("acc", "accum_full", "accum_empty", c.accum_stages))
        for name, full, empty, n in pipes:
            lines.append(f'      %{name} = "fa4.pipeline_create"(%{full}, %{empty}) {{sym_name = "{name}", '
                         f"num_stages = {n}}} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline")
        lines += [f'      "fa4.mbarrier_init"(%{name}) : (!fa4.mbarriers) -> ()' for name, _, _ in bars]
        lines += [
            "      %block = nvvm.read.ptx.sreg.ctaid.x : i32",
            "      %blocks = nvvm.read.ptx.sreg.nctaid.x : i32",
            "      %total = arith.muli %num_m, %num_n : i32",
            f"      %tile_m = arith.constant {c.tile_m} : i32",
            f"      %tile_n = arith.constant {c.tile_n} : i32",
            f"      %tile_k = arith.constant {c.tile_k} : i32",
            f"      %group_m = arith.constant {c.group_m} : i32",
            "      %band = arith.muli %group_m, %num_n : i32",
            "      %load_c = arith.cmpi ne, %has_c, %c0 : i32",
        ]
        if self.pair:
            lines += ["      %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32",
                      "      %first = arith.shrui %block, %c1 : i32",
                      "      %stride = arith.shrui %blocks, %c1 : i32",
                      "      %leader = arith.cmpi eq, %rank, %c0 : i32",
                      f"      %half_m = arith.constant {c.rows_per_cta} : i32",
                      "      %cta_row = arith.muli %rank, %half_m : i32",
                      f"      %half_n = arith.constant {c.b_tile_rows} : i32",
                      "      %cta_col = arith.muli %rank, %half_n : i32"]
        else:
            lines += ["      %first = arith.addi %block, %c0 : i32",
                      "      %stride = arith.addi %blocks, %c0 : i32",
                      "      %cta_row = arith.addi %c0, %c0 : i32",
                      "      %cta_col = arith.addi %c0, %c0 : i32"]
        return lines

    @staticmethod
    def tile_origin(p: str, ind: str, t: str) -> list[str]:
        """%{p}row: the first row of tile ``t`` (grouped raster) this CTA owns (a pair splits the
        tile's rows), %{p}col: its first column, %{p}bcol: the first N column of B this CTA loads."""
        return [
            f"{ind}%{p}o_g = arith.divui {t}, %band : i32",
            f"{ind}%{p}o_fm = arith.muli %{p}o_g, %group_m : i32",
            f"{ind}%{p}o_left = arith.subi %num_m, %{p}o_fm : i32",
            f"{ind}%{p}o_gm = arith.minui %{p}o_left, %group_m : i32",
            f"{ind}%{p}o_r = arith.remui {t}, %band : i32",
            f"{ind}%{p}o_mi = arith.remui %{p}o_r, %{p}o_gm : i32",
            f"{ind}%{p}o_mb = arith.addi %{p}o_fm, %{p}o_mi : i32",
            f"{ind}%{p}o_nb = arith.divui %{p}o_r, %{p}o_gm : i32",
            f"{ind}%{p}o_tm = arith.muli %{p}o_mb, %tile_m : i32",
            f"{ind}%{p}col = arith.muli %{p}o_nb, %tile_n : i32",
            f"{ind}%{p}row = arith.addi %{p}o_tm, %cta_row : i32",
            f"{ind}%{p}bcol = arith.addi %{p}col, %cta_col : i32",
        ]

    # -- main load -----------------------------------------------------------------------------------
    def _load_block(self, tag: str, ind: str, s: str, p: str, kk: str, row: str, bcol: str) -> list[str]:
        """Acquire stage ``s`` (phase ``p``) and load the K block at element column ``kk``."""
        c = self.c
        lines = [
            f'{ind}"fa4.pipeline_producer_acquire"(%ab, {s}, {p}) : (!fa4.pipeline, i32, i32) -> ()',
            f'{ind}"fa4.pipeline_producer_commit"(%ab, {s}) {{tx_bytes = {c.stage_bytes}}} : (!fa4.pipeline, i32) -> ()',
            f'{ind}%ml_abuf{tag} = "fa4.smem_stage"(%a, {s}) {{bytes = {c.a_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
            f'{ind}"fa4.tma_load"(%a_map, %ml_abuf{tag}, %ab_full, {s}, {kk}, {row}) {{bytes = {c.a_stage_bytes}}} : '
            "(!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()",
            f'{ind}%ml_bbuf{tag} = "fa4.smem_stage"(%b, {s}) {{bytes = {c.b_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
        ]
        if c.b_major == "k":
            lines.append(f'{ind}"fa4.tma_load"(%b_map, %ml_bbuf{tag}, %ab_full, {s}, {kk}, {bcol}) {{bytes = {c.b_stage_bytes}}} : '
                         "(!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()")
        else:
            block = c.tile_k * 128  # one 128B-wide column block of B: tile_k rows of 128 bytes
            for j in range(c.b_tile_rows // c.swizzle_elems):
                lines += [f"{ind}%ml_bc{tag}{j} = arith.addi {bcol}, %ml_off{j} : i32",
                          f'{ind}"fa4.tma_load"(%b_map, %ml_bbuf{tag}, %ab_full, {s}, %ml_bc{tag}{j}, {kk}) {{bytes = {block}, '
                          f"dst_offset = {j * block}}} : (!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()"]
        return lines

    def main_load(self) -> list[str]:
        c = self.c
        i = "              "
        offsets = [f"          %ml_off{j} = arith.constant {j * c.swizzle_elems} : i32"
                   for j in range(c.b_tile_rows // c.swizzle_elems)] if c.b_major == "mn" else []
        return [
            '        "fa4.warp_role"() ({',
            '          %ml_e = "fa4.elect_one"() : () -> i1',
            *offsets,
            "          scf.if %ml_e {",
            '            %ml_ps:2 = "fa4.pipeline_initial_state"(%ab) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)',
            '            %ml_os:2 = "fa4.pipeline_initial_state"(%order) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)',
            "            %ml_end:4 = scf.for %ml_t = %first to %total step %stride iter_args(%ml_s = %ml_ps#0, "
            "%ml_p = %ml_ps#1, %ml_q = %ml_os#0, %ml_r = %ml_os#1) -> (i32, i32, i32, i32) : i32 {",
            *self.tile_origin("ml_", i, "%ml_t"),
            *self._load_block("0", i, "%ml_s", "%ml_p", "%c0", "%ml_row", "%ml_bcol"),
            f'{i}%ml_n1:2 = "fa4.pipeline_advance"(%ab, %ml_s, %ml_p) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f'{i}"fa4.pipeline_producer_acquire"(%order, %ml_q, %ml_r) : (!fa4.pipeline, i32, i32) -> ()',
            f'{i}"fa4.pipeline_producer_commit"(%order, %ml_q) : (!fa4.pipeline, i32) -> ()',
            f'{i}%ml_on:2 = "fa4.pipeline_advance"(%order, %ml_q, %ml_r) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{i}%ml_in:2 = scf.for %ml_k = %c1 to %k_tiles step %c1 iter_args(%ml_s2 = %ml_n1#0, %ml_p2 = %ml_n1#1) "
            "-> (i32, i32) : i32 {",
            f"{i}  %ml_kk = arith.muli %ml_k, %tile_k : i32",
            *self._load_block("k", i + "  ", "%ml_s2", "%ml_p2", "%ml_kk", "%ml_row", "%ml_bcol"),
            f'{i}  %ml_n2:2 = "fa4.pipeline_advance"(%ab, %ml_s2, %ml_p2) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{i}  scf.yield %ml_n2#0, %ml_n2#1 : i32, i32",
            f"{i}}}",
            f"{i}scf.yield %ml_in#0, %ml_in#1, %ml_on#0, %ml_on#1 : i32, i32, i32, i32",
            "            }",
            *self._drain(),
            "          }",
            "          gpu.yield",
            f'        }}) {{sym_name = "main_load", warps = array<i32: {self.main_load_warp}>{self.producer_registers}}} : () -> ()',
        ]

    def _drain(self) -> list[str]:
        """A pair's main load waits until the leader's MMAs have released every stage: their commits
        are multicast to this CTA's barriers, so it must not exit before they land."""
        if not self.pair:
            return []
        return [
            f"            %ml_stages = arith.constant {self.c.stages} : i32",
            "            %ml_tail:2 = scf.for %ml_d = %c0 to %ml_stages step %c1 iter_args(%ml_s3 = %ml_end#0, "
            "%ml_p3 = %ml_end#1) -> (i32, i32) : i32 {",
            '              "fa4.pipeline_producer_acquire"(%ab, %ml_s3, %ml_p3) : (!fa4.pipeline, i32, i32) -> ()',
            '              %ml_n3:2 = "fa4.pipeline_advance"(%ab, %ml_s3, %ml_p3) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            "              scf.yield %ml_n3#0, %ml_n3#1 : i32, i32",
            "            }",
        ]

    @property
    def main_load_warp(self) -> int:
        return 4 if self.c.has_tmem else 4 * self.c.consumers

    @property
    def producer_registers(self) -> str:
        return "" if self.c.has_tmem else f", registers = {SM90_PRODUCER_REGISTERS}"

    # -- epilogue load -------------------------------------------------------------------------------
    def epilogue_load(self) -> list[str]:
        c = self.c
        i = "              "
        return [
            '        "fa4.warp_role"() ({',
            '          %el_e = "fa4.elect_one"() : () -> i1',
            f"          %el_sub = arith.constant {c.num_epi_subtiles} : i32",
            f"          %el_w = arith.constant {c.epi_tile_n} : i32",
            "          scf.if %el_e {",
            '            %el_ps:2 = "fa4.pipeline_initial_state"(%epi) {side = "producer"} : (!fa4.pipeline) -> (i32, i32)',
            '            %el_os:2 = "fa4.pipeline_initial_state"(%order) {side = "consumer"} : (!fa4.pipeline) -> (i32, i32)',
            "            %el_end:4 = scf.for %el_t = %first to %total step %stride iter_args(%el_s = %el_ps#0, "
            "%el_p = %el_ps#1, %el_q = %el_os#0, %el_r = %el_os#1) -> (i32, i32, i32, i32) : i32 {",
            f'{i}"fa4.pipeline_consumer_wait"(%order, %el_q, %el_r) : (!fa4.pipeline, i32, i32) -> ()',
            f'{i}"fa4.pipeline_consumer_release"(%order, %el_q) : (!fa4.pipeline, i32) -> ()',
            f'{i}%el_on:2 = "fa4.pipeline_advance"(%order, %el_q, %el_r) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            *self.tile_origin("el_", i, "%el_t"),
            f"{i}%el_out:2 = scf.if %load_c -> (i32, i32) {{",
            f"{i}  %el_sub_end:2 = scf.for %el_j = %c0 to %el_sub step %c1 iter_args(%el_s2 = %el_s, %el_p2 = %el_p) "
            "-> (i32, i32) : i32 {",
            f'{i}    "fa4.pipeline_producer_acquire"(%epi, %el_s2, %el_p2) : (!fa4.pipeline, i32, i32) -> ()',
            f'{i}    "fa4.pipeline_producer_commit"(%epi, %el_s2) {{tx_bytes = {c.epi_tile_bytes}}} : (!fa4.pipeline, i32) -> ()',
            f'{i}    %el_buf = "fa4.smem_stage"(%c, %el_s2) {{bytes = {c.epi_tile_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
            f"{i}    %el_jn = arith.muli %el_j, %el_w : i32",
            f"{i}    %el_cn = arith.addi %el_col, %el_jn : i32",
            f'{i}    "fa4.tma_load"(%c_map, %el_buf, %epi_full, %el_s2, %el_cn, %el_row) {{bytes = {c.epi_tile_bytes}}} : '
            "(!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32) -> ()",
            f'{i}    %el_n:2 = "fa4.pipeline_advance"(%epi, %el_s2, %el_p2) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{i}    scf.yield %el_n#0, %el_n#1 : i32, i32",
            f"{i}  }}",
            f"{i}  scf.yield %el_sub_end#0, %el_sub_end#1 : i32, i32",
            f"{i}}} else {{",
            f"{i}  scf.yield %el_s, %el_p : i32, i32",
            f"{i}}}",
            f"{i}scf.yield %el_out#0, %el_out#1, %el_on#0, %el_on#1 : i32, i32, i32, i32",
            "            }",
            "          }",
            "          gpu.yield",
            f'        }}) {{sym_name = "epilogue_load", warps = array<i32: {self.main_load_warp + 2 if c.has_tmem else self.main_load_warp + 1}>'
            f"{self.producer_registers}}} : () -> ()",
        ]

    # -- the epilogue of one sub-tile, shared by both targets ----------------------------------------
    def _subtile(self, p: str, ind: str, j: int, with_c: bool, values, cs, dbuf: str, store_lead: str,
                 store_row: str, barrier: str, threads: int, chunks):
        """Lines of sub-tile ``j`` and the C pipeline state after it. ``values(chunk, name, ind)``
        defines ``name``, the f32 accumulator vector of ``chunk``; ``chunks`` lists (chunk, element
        count, C byte offset, D byte offset) of this thread's accesses."""
        c = self.c
        pending = 1 if c.num_epi_subtiles % 2 == 0 else 0  # buffer j % 2 was last stored 2 stores ago
        e = "bf16" if c.dtype == "bf16" else "f16"
        q = f"{p}{j}{'c' if with_c else 'z'}"
        lines = []
        if with_c:
            lines += [f'{ind}"fa4.pipeline_consumer_wait"(%epi, {cs[0]}, {cs[1]}) : (!fa4.pipeline, i32, i32) -> ()',
                      f'{ind}%{q}cb = "fa4.smem_stage"(%c, {cs[0]}) {{bytes = {c.epi_tile_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
                      f'{ind}%{q}ca = "fa4.smem_address"(%{q}cb) : (!fa4.smem) -> !llvm.ptr<3>']
        lines += [
            f"{ind}scf.if {store_lead} {{",
            f'{ind}  "fa4.tma_store_wait"() {{pending = {pending}}} : () -> ()',
            f"{ind}}}",
            f'{ind}"fa4.named_barrier"() {{sym_name = "{barrier}", threads = {threads}}} : () -> ()',
            f'{ind}%{q}db = "fa4.smem_stage"({dbuf}, %{p}d{j % 2}) {{bytes = {self.d_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
            f'{ind}%{q}da = "fa4.smem_address"(%{q}db) : (!fa4.smem) -> !llvm.ptr<3>',
        ]
        for idx, (chunk, n, c_off, d_off) in enumerate(chunks):
            v = f"vector<{n}xf32>"
            x = f"%{q}x{idx}"
            lines += [*values(chunk, f"{x}a", ind, q),
                      f"{ind}{x}s = arith.mulf {x}a, %{p}alpha{n} : {v}"]
            if with_c:
                lines += [f"{ind}{x}cp = llvm.getelementptr %{q}ca[{c_off}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8",
                          f"{ind}{x}c = llvm.load {x}cp {{alignment = {2 * n} : i64}} : !llvm.ptr<3> -> vector<{n}x{e}>",
                          f"{ind}{x}cf = arith.extf {x}c : vector<{n}x{e}> to {v}",
                          f"{ind}{x}bc = arith.mulf {x}cf, %{p}beta{n} : {v}",
                          f"{ind}{x}y = arith.addf {x}s, {x}bc : {v}"]
                y = f"{x}y"
            else:
                y = f"{x}s"
            lines += [f"{ind}{x}t = arith.truncf {y} : {v} to vector<{n}x{e}>",
                      f"{ind}{x}dp = llvm.getelementptr %{q}da[{d_off}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8",
                      f"{ind}llvm.store {x}t, {x}dp {{alignment = {2 * n} : i64}} : vector<{n}x{e}>, !llvm.ptr<3>"]
        if with_c:
            lines.append(f'{ind}"fa4.pipeline_consumer_release"(%epi, {cs[0]}) : (!fa4.pipeline, i32) -> ()')
        lines += [
            f"{ind}nvvm.fence.proxy {{kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}}",
            f'{ind}"fa4.named_barrier"() {{sym_name = "{barrier}", threads = {threads}}} : () -> ()',
            f"{ind}scf.if {store_lead} {{",
            f"{ind}  %{q}w = arith.constant {j * c.epi_tile_n} : i32",
            f"{ind}  %{q}dc = arith.addi %{p}col, %{q}w : i32",
            f'{ind}  "fa4.tma_store"(%d_map, %{q}db, %{q}dc, {store_row}) {{bytes = {self.d_stage_bytes}}} : '
            "(!fa4.tensormap, !fa4.smem, i32, i32) -> ()",
            f"{ind}}}",
        ]
        if not with_c:
            return lines, cs
        lines.append(f'{ind}%{q}next:2 = "fa4.pipeline_advance"(%epi, {cs[0]}, {cs[1]}) : '
                     "(!fa4.pipeline, i32, i32) -> (i32, i32)")
        return lines, (f"%{q}next#0", f"%{q}next#1")

    @property
    def d_stage_bytes(self) -> int:
        """One D staging buffer of one storing group: the CTA's rows (sm_100a), 64 rows (a warpgroup)."""
        return self.c.epi_tile_bytes if self.c.has_tmem else 64 * self.c.epi_row_bytes

    def _epilogue(self, p: str, ind: str, cs_in, values, dbuf: str, store_lead: str, store_row: str,
                  barrier: str, threads: int, chunks, before=None) -> list[str]:
        """All sub-tiles of a tile, once with C (has_c) and once without, as an scf.if whose results
        (%{p}cs#0, #1) are the C pipeline state. ``before(j, with_c, ind)`` adds lines ahead of
        sub-tile ``j`` (the sm_100a accumulator read)."""
        out = [f"{ind}%{p}cs:2 = scf.if %load_c -> (i32, i32) {{"]
        for with_c in (True, False):
            cs = cs_in
            for j in range(self.c.num_epi_subtiles):
                if before:
                    out += before(j, with_c, ind + "  ")
                lines, cs = self._subtile(p, ind + "  ", j, with_c, values, cs, dbuf, store_lead, store_row,
                                          barrier, threads, chunks(j))
                out += lines
            out.append(f"{ind}  scf.yield {cs[0]}, {cs[1]} : i32, i32")
            out.append(f"{ind}}} else {{" if with_c else f"{ind}}}")
        return out

    def _epilogue_constants(self, p: str, ind: str, n: int) -> list[str]:
        return [f"{ind}%{p}d0 = arith.constant 0 : i32",
                f"{ind}%{p}d1 = arith.constant 1 : i32",
                f"{ind}%{p}alpha{n} = vector.broadcast %alpha : f32 to vector<{n}xf32>",
                f"{ind}%{p}beta{n} = vector.broadcast %beta : f32 to vector<{n}xf32>"]

    def _swizzled_rows(self, p: str, ind: str, row: str) -> list[str]:
        """%{p}rowb (byte offset of ``row`` in a C/D sub-tile) and %{p}sw, the row's swizzle phase:
        address bits 7.. of the row start, masked to the chunk bits the swizzle XORs."""
        S = self.c.epi_row_bytes
        return [f"{ind}%{p}pitch = arith.constant {S} : i32",
                f"{ind}%{p}rowb = arith.muli {row}, %{p}pitch : i32",
                f"{ind}%{p}c7 = arith.constant 7 : i32",
                f"{ind}%{p}rowh = arith.shrui %{p}rowb, %{p}c7 : i32",
                f"{ind}%{p}swm = arith.constant {S // 16 - 1} : i32",
                f"{ind}%{p}sw = arith.andi %{p}rowh, %{p}swm : i32",
                f"{ind}%{p}c4 = arith.constant 4 : i32"]

    # -- sm_90a: consumer warpgroups ------------------------------------------------------------------
    def sm90_roles(self) -> list[str]:
        return [line for w in range(self.c.consumers) for line in self._sm90_consumer(w)]

    def _wgmmas(self, w: int, ind: str, out: str, stage: str, acc_in: str, first: bool):
        c = self.c
        ab = "bf16" if c.dtype == "bf16" else "f16"
        lines = [f'{ind}%{out}ab = "fa4.smem_stage"(%a, {stage}) {{bytes = {c.a_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
                 f'{ind}%{out}bb = "fa4.smem_stage"(%b, {stage}) {{bytes = {c.b_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem']
        acc = acc_in
        for kk in range(c.tile_k * c.elem.bytes // MMA_K_BYTES):
            a_off = w * 64 * 128 + kk * MMA_K_BYTES  # warpgroup w's 64 rows of 128-byte K rows
            b_attrs = (f"b_offset = {kk * MMA_K_BYTES}" if c.b_major == "k" else
                       f'b_offset = {kk * 16 * 128}, b_major = "mn", b_block_stride = {c.tile_k * 128}')
            nxt = f"%{out}r{kk}"
            lines.append(f'{ind}{nxt} = "fa4.wgmma"(%{out}ab, %{out}bb, {acc}) {{n = {c.tile_n}, ab_type = "{ab}", '
                         f"accumulate = {0 if first and kk == 0 else 1}, a_offset = {a_off}, {b_attrs}}} : "
                         "(!fa4.smem, !fa4.smem, !acc) -> !acc")
            acc = nxt
        lines.append(f'{ind}"fa4.wgmma_commit"() : () -> ()')
        return lines, acc

    def _sm90_consumer(self, w: int) -> list[str]:
        c = self.c
        p = f"w{w}_"
        S = c.epi_row_bytes
        ind = "          "
        li = ind + "  "
        first_lines, first_acc = self._wgmmas(w, li, f"{p}k0", f"%{p}s", f"%{p}zero_acc", True)
        loop_lines, loop_acc = self._wgmmas(w, li + "  ", f"{p}kl", f"%{p}s2", f"%{p}acc", False)
        per_sub = c.epi_tile_n // 8

        def values(chunk, name, vind, q):
            # m64nNk16 f32 fragment: for each 8 columns the thread holds (row, 2q, 2q + 1) at 4i, 4i + 1
            # and (row + 8, 2q, 2q + 1) at 4i + 2, 4i + 3 (row = 16 * warp + lane / 4, q = lane % 4)
            col8, half = chunk
            base = 4 * col8 + 2 * half
            return [f"{vind}{name}0 = llvm.extractvalue %{p}loop#0[{base}] : !acc",
                    f"{vind}{name}1 = llvm.extractvalue %{p}loop#0[{base + 1}] : !acc",
                    f"{vind}{name} = vector.from_elements {name}0, {name}1 : vector<2xf32>"]

        def chunks(j):
            return [((j * per_sub + ch, h), 2, f"%{p}coff{ch}_{h}", f"%{p}off{ch}_{h}")
                    for ch in range(per_sub) for h in (0, 1)]

        offsets = []
        for ch in range(per_sub):
            offsets += [f"{ind}%{p}ch{ch} = arith.constant {ch} : i32",
                        f"{ind}%{p}x{ch} = arith.xori %{p}sw, %{p}ch{ch} : i32",
                        f"{ind}%{p}xs{ch} = arith.shli %{p}x{ch}, %{p}c4 : i32"]
            for h in (0, 1):
                offsets += [f"{ind}%{p}off{ch}_{h} = arith.addi %{p}xs{ch}, %{p}rq{h} : i32",
                            f"{ind}%{p}coff{ch}_{h} = arith.addi %{p}off{ch}_{h}, %{p}wbytes : i32"]
        return [
            '        "fa4.warp_role"() ({',
            f"{ind}%{p}tid = nvvm.read.ptx.sreg.tid.x : i32",
            f"{ind}%{p}c128 = arith.constant 128 : i32",
            f"{ind}%{p}c32 = arith.constant 32 : i32",
            f"{ind}%{p}c2 = arith.constant 2 : i32",
            f"{ind}%{p}c3 = arith.constant 3 : i32",
            f"{ind}%{p}c16 = arith.constant 16 : i32",
            f"{ind}%{p}me = arith.remui %{p}tid, %{p}c128 : i32",
            f"{ind}%{p}lead = arith.cmpi eq, %{p}me, %c0 : i32",
            f"{ind}%{p}lane = arith.remui %{p}tid, %{p}c32 : i32",
            f"{ind}%{p}lane0 = arith.cmpi eq, %{p}lane, %c0 : i32",
            f"{ind}%{p}wi = arith.divui %{p}me, %{p}c32 : i32",
            f"{ind}%{p}lq = arith.shrui %{p}lane, %{p}c2 : i32",
            f"{ind}%{p}lr = arith.andi %{p}lane, %{p}c3 : i32",
            f"{ind}%{p}wr = arith.muli %{p}wi, %{p}c16 : i32",
            f"{ind}%{p}trow = arith.addi %{p}wr, %{p}lq : i32",
            *self._swizzled_rows(p, ind, f"%{p}trow"),
            f"{ind}%{p}lrb = arith.muli %{p}lr, %{p}c4 : i32",
            f"{ind}%{p}rq0 = arith.addi %{p}rowb, %{p}lrb : i32",
            f"{ind}%{p}eight = arith.constant {8 * S} : i32",
            f"{ind}%{p}rq1 = arith.addi %{p}rq0, %{p}eight : i32",
            f"{ind}%{p}wbytes = arith.constant {w * 64 * S} : i32",
            *offsets,
            f"{ind}%{p}wrow = arith.constant {w * 64} : i32",
            *self._epilogue_constants(p, ind, 2),
            f"{ind}%{p}zero_acc = llvm.mlir.zero : !acc",
            f'{ind}%{p}as:2 = "fa4.pipeline_initial_state"(%ab) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
            f'{ind}%{p}es:2 = "fa4.pipeline_initial_state"(%epi) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
            f"{ind}%{p}end:4 = scf.for %{p}t = %first to %total step %stride iter_args(%{p}s = %{p}as#0, "
            f"%{p}ph = %{p}as#1, %{p}e0 = %{p}es#0, %{p}e1 = %{p}es#1) -> (i32, i32, i32, i32) : i32 {{",
            *self.tile_origin(p, li, f"%{p}t"),
            f"{li}%{p}srow = arith.addi %{p}row, %{p}wrow : i32",
            f'{li}"fa4.pipeline_consumer_wait"(%ab, %{p}s, %{p}ph) : (!fa4.pipeline, i32, i32) -> ()',
            *first_lines,
            f'{li}%{p}n1:2 = "fa4.pipeline_advance"(%ab, %{p}s, %{p}ph) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{li}%{p}loop:4 = scf.for %{p}k = %c1 to %k_tiles step %c1 iter_args(%{p}acc = {first_acc}, "
            f"%{p}s2 = %{p}n1#0, %{p}p2 = %{p}n1#1, %{p}prev = %{p}s) -> (!acc, i32, i32, i32) : i32 {{",
            f'{li}  "fa4.pipeline_consumer_wait"(%ab, %{p}s2, %{p}p2) : (!fa4.pipeline, i32, i32) -> ()',
            *loop_lines,
            # the group before this one has retired: its A/B stage may be refilled
            f'{li}  "fa4.wgmma_wait"() {{pending = 1}} : () -> ()',
            f"{li}  scf.if %{p}lane0 {{",
            f'{li}    "fa4.pipeline_consumer_release"(%ab, %{p}prev) : (!fa4.pipeline, i32) -> ()',
            f"{li}  }}",
            f'{li}  %{p}n2:2 = "fa4.pipeline_advance"(%ab, %{p}s2, %{p}p2) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{li}  scf.yield {loop_acc}, %{p}n2#0, %{p}n2#1, %{p}s2 : !acc, i32, i32, i32",
            f"{li}}}",
            f'{li}"fa4.wgmma_wait"() {{pending = 0}} : () -> ()',
            f"{li}scf.if %{p}lane0 {{",
            f'{li}  "fa4.pipeline_consumer_release"(%ab, %{p}loop#3) : (!fa4.pipeline, i32) -> ()',
            f"{li}}}",
            *self._epilogue(p, li, (f"%{p}e0", f"%{p}e1"), values, f"%d{w}", f"%{p}lead", f"%{p}srow",
                            f"epilogue{w}", 128, chunks),
            f"{li}scf.yield %{p}loop#1, %{p}loop#2, %{p}cs#0, %{p}cs#1 : i32, i32, i32, i32",
            f"{ind}}}",
            f"{ind}scf.if %{p}lead {{",
            f'{ind}  "fa4.tma_store_wait"() {{pending = 0}} : () -> ()',
            f"{ind}}}",
            "          gpu.yield",
            f'        }}) {{sym_name = "consumer{w}", warps = array<i32: {", ".join(str(x) for x in range(4 * w, 4 * w + 4))}>, '
            f"registers = {SM90_CONSUMER_REGISTERS[c.consumers]}}} : () -> ()",
        ]

    # -- sm_100a: MMA warp and epilogue warps ---------------------------------------------------------
    def sm100_roles(self) -> list[str]:
        return self._sm100_mma() + self._sm100_epilogue()

    def _tcgen05s(self, ind: str, out: str, stage: str, first: bool) -> list[str]:
        c = self.c
        ab = "bf16" if c.dtype == "bf16" else "f16"
        lines = [f'{ind}%{out}ab = "fa4.smem_stage"(%a, {stage}) {{bytes = {c.a_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
                 f'{ind}%{out}bb = "fa4.smem_stage"(%b, {stage}) {{bytes = {c.b_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem']
        for kk in range(c.tile_k * c.elem.bytes // MMA_K_BYTES):
            b_attrs = (f"b_offset = {kk * MMA_K_BYTES}" if c.b_major == "k" else
                       f'b_offset = {kk * 16 * 128}, b_major = "mn", b_block_stride = {c.tile_k * 128}')
            acc = "%false" if first and kk == 0 else "%true"
            lines.append(f'{ind}"fa4.tcgen05_mma"(%mm_d, %{out}ab, %{out}bb, {acc}) {{m = {128 * c.cta_group}, '
                         f'n = {c.tile_n}, ab_type = "{ab}", cta_group = {c.cta_group}, a_offset = {kk * MMA_K_BYTES}, '
                         f"{b_attrs}}} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()")
        return lines

    def _release(self, ind: str, pipe: str, barriers: str, stage: str, producer: bool = False) -> str:
        """The MMA warp's commit to ``barriers[stage]``: multicast to both CTAs of a pair."""
        if self.pair:
            return f'{ind}"fa4.mma_commit"(%{barriers}, {stage}) {{multicast_mask = 3}} : (!fa4.mbarriers, i32) -> ()'
        op = "pipeline_producer_commit" if producer else "pipeline_consumer_release"
        return f'{ind}"fa4.{op}"(%{pipe}, {stage}) : (!fa4.pipeline, i32) -> ()'

    def _sm100_mma(self) -> list[str]:
        c = self.c
        ind = "            "
        li = ind + "  "
        go = ["          %mm_go = arith.andi %mm_e, %leader : i1"] if self.pair else              ["          %mm_go = arith.andi %mm_e, %true : i1"]
        return [
            '        "fa4.warp_role"() ({',
            '          %mm_e = "fa4.elect_one"() : () -> i1',
            *go,
            "          scf.if %mm_go {",
            f'{ind}%mm_as:2 = "fa4.pipeline_initial_state"(%ab) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
            f'{ind}%mm_cs:2 = "fa4.pipeline_initial_state"(%acc) {{side = "producer"}} : (!fa4.pipeline) -> (i32, i32)',
            f"{ind}%mm_end:4 = scf.for %mm_t = %first to %total step %stride iter_args(%mm_s = %mm_as#0, "
            "%mm_p = %mm_as#1, %mm_q = %mm_cs#0, %mm_r = %mm_cs#1) -> (i32, i32, i32, i32) : i32 {",
            f'{li}"fa4.pipeline_producer_acquire"(%acc, %mm_q, %mm_r) : (!fa4.pipeline, i32, i32) -> ()',
            f'{li}%mm_d = "fa4.tmem_stage"(%accum, %mm_q) {{columns = {c.tile_n}}} : (!fa4.tmem, i32) -> !fa4.tmem',
            f'{li}"fa4.pipeline_consumer_wait"(%ab, %mm_s, %mm_p) : (!fa4.pipeline, i32, i32) -> ()',
            *self._tcgen05s(li, "mm_k0", "%mm_s", True),
            self._release(li, "ab", "ab_empty", "%mm_s"),
            f'{li}%mm_n1:2 = "fa4.pipeline_advance"(%ab, %mm_s, %mm_p) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{li}%mm_loop:2 = scf.for %mm_k = %c1 to %k_tiles step %c1 iter_args(%mm_s2 = %mm_n1#0, "
            "%mm_p2 = %mm_n1#1) -> (i32, i32) : i32 {",
            f'{li}  "fa4.pipeline_consumer_wait"(%ab, %mm_s2, %mm_p2) : (!fa4.pipeline, i32, i32) -> ()',
            *self._tcgen05s(li + "  ", "mm_kl", "%mm_s2", False),
            self._release(li + "  ", "ab", "ab_empty", "%mm_s2"),
            f'{li}  %mm_n2:2 = "fa4.pipeline_advance"(%ab, %mm_s2, %mm_p2) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{li}  scf.yield %mm_n2#0, %mm_n2#1 : i32, i32",
            f"{li}}}",
            self._release(li, "acc", "accum_full", "%mm_q", producer=True),
            f'{li}%mm_qn:2 = "fa4.pipeline_advance"(%acc, %mm_q, %mm_r) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{li}scf.yield %mm_loop#0, %mm_loop#1, %mm_qn#0, %mm_qn#1 : i32, i32, i32, i32",
            f"{ind}}}",
            "          }",
            "          gpu.yield",
            f'        }}) {{sym_name = "mma", warps = array<i32: {self.main_load_warp + 1}>}} : () -> ()',
        ]

    def _sm100_epilogue(self) -> list[str]:
        c = self.c
        p = "ep_"
        ind = "          "
        li = ind + "  "
        E = c.epi_tile_n
        chunks_per_sub = E // 8

        def before(j, with_c, bind):
            q = f"{p}{j}{'c' if with_c else 'z'}"
            lines = [f'{bind}%{q}raw = "fa4.tmem_load"(%{p}acc) {{column_offset = {j * E}}} : (!fa4.tmem) -> vector<{E}xi32>',
                     f"{bind}%{q}f = arith.bitcast %{q}raw : vector<{E}xi32> to vector<{E}xf32>"]
            if j == c.num_epi_subtiles - 1:  # the accumulator stage is read: the MMA may reuse it
                lines.append(f'{bind}"fa4.pipeline_consumer_release"(%acc, %{p}q) : (!fa4.pipeline, i32) -> ()')
            return lines

        def values(chunk, name, vind, q):
            j, ch = chunk
            return [f"{vind}{name} = vector.extract_strided_slice %{q}f {{offsets = [{8 * ch}], sizes = [8], "
                    f"strides = [1]}} : vector<{E}xf32> to vector<8xf32>"]

        def chunks(j):
            return [((j, ch), 8, f"%{p}off{ch}", f"%{p}off{ch}") for ch in range(chunks_per_sub)]

        offsets = []
        for ch in range(chunks_per_sub):
            offsets += [f"{ind}%{p}ch{ch} = arith.constant {ch} : i32",
                        f"{ind}%{p}x{ch} = arith.xori %{p}sw, %{p}ch{ch} : i32",
                        f"{ind}%{p}xs{ch} = arith.shli %{p}x{ch}, %{p}c4 : i32",
                        f"{ind}%{p}off{ch} = arith.addi %{p}xs{ch}, %{p}rowb : i32"]
        body = self._epilogue(p, li, (f"%{p}e0", f"%{p}e1"), values, "%d", f"%{p}lead", f"%{p}row",
                              "epilogue", c.epilogue_threads, chunks, before)
        return [
            '        "fa4.warp_role"() ({',
            f"{ind}%{p}tid = nvvm.read.ptx.sreg.tid.x : i32",
            f"{ind}%{p}lead = arith.cmpi eq, %{p}tid, %c0 : i32",
            *self._swizzled_rows(p, ind, f"%{p}tid"),
            *offsets,
            *self._epilogue_constants(p, ind, 8),
            f'{ind}%{p}as:2 = "fa4.pipeline_initial_state"(%acc) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
            f'{ind}%{p}es:2 = "fa4.pipeline_initial_state"(%epi) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
            f"{ind}%{p}end:4 = scf.for %{p}t = %first to %total step %stride iter_args(%{p}q = %{p}as#0, "
            f"%{p}r = %{p}as#1, %{p}e0 = %{p}es#0, %{p}e1 = %{p}es#1) -> (i32, i32, i32, i32) : i32 {{",
            *self.tile_origin(p, li, f"%{p}t"),
            f'{li}"fa4.pipeline_consumer_wait"(%acc, %{p}q, %{p}r) : (!fa4.pipeline, i32, i32) -> ()',
            f'{li}%{p}acc = "fa4.tmem_stage"(%accum, %{p}q) {{columns = {c.tile_n}}} : (!fa4.tmem, i32) -> !fa4.tmem',
            *body,
            f'{li}%{p}qn:2 = "fa4.pipeline_advance"(%acc, %{p}q, %{p}r) : (!fa4.pipeline, i32, i32) -> (i32, i32)',
            f"{li}scf.yield %{p}qn#0, %{p}qn#1, %{p}cs#0, %{p}cs#1 : i32, i32, i32, i32",
            f"{ind}}}",
            f"{ind}scf.if %{p}lead {{",
            f'{ind}  "fa4.tma_store_wait"() {{pending = 0}} : () -> ()',
            f"{ind}}}",
            # every MMA into this CTA's TMEM is done (its last accumulator was waited for) and read
            f'{ind}"fa4.named_barrier"() {{sym_name = "epilogue", threads = {c.epilogue_threads}}} : () -> ()',
            f"{ind}%{p}c32 = arith.constant 32 : i32",
            f"{ind}%{p}warp = arith.divui %{p}tid, %{p}c32 : i32",
            f"{ind}%{p}w0 = arith.cmpi eq, %{p}warp, %c0 : i32",
            f"{ind}scf.if %{p}w0 {{",
            f'{ind}  "fa4.tmem_dealloc"(%slot) {{cta_group = {c.cta_group}}} : (!fa4.smem) -> ()',
            f"{ind}}}",
            "          gpu.yield",
            '        }) {sym_name = "epilogue", warps = array<i32: 0, 1, 2, 3>} : () -> ()',
        ]
