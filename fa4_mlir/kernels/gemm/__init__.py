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
* sm_90a: each consumer warpgroup issues wgmma with the accumulator in registers, keeps one wgmma
  group in flight and releases the previous A/B stage when it retires, then runs the epilogue
  itself. Cooperative (the default): the warpgroups split every tile, 64 rows each. ``pingpong``:
  each owns every other tile whole, taking turns (two one-stage rings) to wait on the A/B ring and
  on the C ring, so that one's epilogue runs under the other's wgmmas (``sm90``). The op picks
  between the two per output shape (``choose_schedule``). ``cluster_m`` 2: CTA pairs of a 2x1 cluster
  take vertically adjacent tiles and multicast B to each other (``loads``); not faster on the H100
  (docs/PERF.md), so the op never takes it.

The epilogue of a sub-tile: wait for C, compute ``alpha * acc + beta * C`` per element, write D into
one of two swizzled staging buffers (the TMA store of the other may still read it), fence, meet at
a named barrier, and one thread TMA-stores it. C and D sub-tiles use the swizzle of their row width,
so each thread's 4- or 16-byte accesses are free of bank conflicts. Out-of-bounds rows and columns
of every tile are zero-filled by TMA loads and clipped by TMA stores: any M, N, K the tensor maps
accept work.

The kernel is built with ``fa4_mlir.dsl`` (issue 22): ``prologue`` (parameters' uses, shared memory
and barriers through ``fa4_mlir.dsl.structs.gemm``, the tile walk), ``loads`` (main and epilogue
load), ``epilogue`` (a tile's sub-tiles, both targets), ``sm100`` (MMA warp, epilogue warps) and
``sm90`` (consumer warpgroups). This module imports no MLIR: the runtime reads ``launch_geometry``
on machines without it; ``build`` imports the builders.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.configs.gemm import GemmConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels.source import KernelSource

NAME = "gemm"
MAX_TILES = (1 << 31) - 1  # tile indices are i32
SM90_CONSUMER_REGISTERS = {1: 240, 2: 232}  # 2 x 128 x 232 + 128 x 40 <= 65536
SM90_PRODUCER_REGISTERS = 40
# sm_90a: the pingpong tile the op takes for large outputs (choose_schedule), and its measured rate over
# the cooperative 128 x 256 tile where both run many tiles a CTA (docs/PERF.md, the pingpong sweep:
# 0.99-1.10 on 8192^3, 16384x8192x2048 and 8192x28672x4096 in two runs, median 1.03)
SM90_PINGPONG = {"pingpong": True, "tile_n": 192, "epi_tile_n": 32}
SM90_PINGPONG_BASE_M = 128
PINGPONG_RATE = 1.03

__all__ = ["MAX_TILES", "NAME", "PINGPONG_RATE", "SM90_CONSUMER_REGISTERS", "SM90_PINGPONG", "SM90_PRODUCER_REGISTERS",
           "GemmConfig", "build", "choose_schedule", "launch_geometry"]


def choose_schedule(config: GemmConfig, m: int, n: int, ctas: int) -> GemmConfig:
    """The op's config for an (m, n) output on a GPU holding ``ctas`` resident CTAs: on sm_90a the
    pingpong 128 x 192 tile (``SM90_PINGPONG``) where its rounds of tiles per CTA cost less than the
    cooperative tile's (``config``), a round costing its tile's area over the tile's measured rate
    (``PINGPONG_RATE``); ``config`` otherwise. Large outputs take pingpong (its epilogue hides behind
    the other warpgroup's MMAs); few tiles a CTA take the larger tile (fewer, fuller rounds)."""
    if config.target != "sm_90a" or config.pingpong or config.tile_m != SM90_PINGPONG_BASE_M:
        return config
    pingpong = dataclasses.replace(config, **SM90_PINGPONG)

    def cost(c: GemmConfig, rate: float) -> float:
        tiles = -(-m // c.tile_m) * -(-n // c.tile_n)
        return -(-tiles // max(1, ctas)) * c.tile_m * c.tile_n / rate

    return pingpong if cost(pingpong, PINGPONG_RATE) < cost(config, 1.0) else config


def launch_geometry(config: GemmConfig, m: int, n: int, k: int, ctas: int) -> tuple[tuple[int], dict]:
    """The grid and scalar arguments for an (m, n, k) problem on a GPU that holds ``ctas`` resident
    CTAs: one CTA (or cluster of two) per resident slot, at most one per tile (of a cluster's rows)."""
    num_m, num_n = -(-m // config.cluster_rows), -(-n // config.tile_n)
    total = num_m * num_n
    if not 1 <= total <= MAX_TILES:
        raise LaunchError(f"gemm: the output must have 1 to {MAX_TILES} tiles of {config.cluster_rows}x{config.tile_n}"
                          f", got {total} for {m}x{n}")
    if k < 1:
        raise LaunchError(f"gemm: K must be >= 1, got {k}")
    groups = max(1, min(ctas // config.cluster_size, total))
    return (groups * config.cluster_size,), {"num_m": num_m, "num_n": num_n, "k_tiles": -(-k // config.tile_k)}


def build(config: GemmConfig) -> KernelSource:
    """The kernel, built through ``fa4_mlir.dsl`` (imported here, with the role modules, so that this
    module and the launch geometry above import without MLIR)."""
    from fa4_mlir import dsl
    from fa4_mlir.kernels.gemm import loads, prologue

    config.validate()
    c = config
    k = dsl.Kernel(NAME, c.target, c.num_warps, cluster=(c.cluster_size, 1, 1) if c.cluster_size > 1 else None)
    e = c.dtype
    b_box = (c.tile_k, c.b_tile_rows // c.cluster_m) if c.b_major == "k" else (c.swizzle_elems, c.tile_k)
    store_rows = c.rows_per_cta if c.has_tmem else c.wg_rows
    k.tensormap("a", e, (c.tile_k, c.rows_per_cta), "128B", doc="A[M, K], row-major")
    k.tensormap("b", e, b_box, "128B", doc="B[N, K] (b_major k) or B[K, N] (b_major mn), row-major")
    k.tensormap("c", e, (c.epi_tile_n, c.rows_per_cta), c.epi_swizzle, doc="C[M, N], row-major (the residual)")
    k.tensormap("d", e, (c.epi_tile_n, store_rows), c.epi_swizzle, doc="D[M, N], row-major (the output)")
    k.i32("num_m", f"ceil(M / {c.cluster_rows})")
    k.i32("num_n", f"ceil(N / {c.tile_n})")
    k.i32("k_tiles", f"ceil(K / {c.tile_k}), >= 1")
    k.f32("alpha", "scale of A @ B")
    k.f32("beta", "scale of C")
    k.i32("has_c", "0 when beta = 0: C is not read")
    with k.body() as arg:
        g = prologue.Gemm(dsl, k, c, arg)
        loads.main_load(g)
        loads.epilogue_load(g)
        if c.has_tmem:
            from fa4_mlir.kernels.gemm import sm100
            sm100.mma(g)
            sm100.epilogue(g)
        else:
            from fa4_mlir.kernels.gemm import sm90
            for w in range(c.consumers):
                sm90.consumer(g, w)
    return k.source(grid=f"(min(resident CTAs, num_m * num_n * {c.cluster_size}), 1, 1) (launch_geometry)",
                    config={f: getattr(c, f) for f in ("dtype", "tile_m", "tile_n", "tile_k", "stages", "epi_tile_n",
                                                       "epi_load_stages", "accum_stages", "cta_group", "b_major",
                                                       "group_m", "pingpong", "cluster_m")})
