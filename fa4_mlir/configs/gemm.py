"""GemmConfig: the warp-specialised GEMM with a residual epilogue, D = alpha * A @ B + beta * C.

Layout after the reference SM100 matmul (spec 5.1-5.2): A/B stages fed by TMA, a TMEM accumulator
with ``accum_stages`` stages (sm_100a), an epilogue-load warp streaming C through an EpiLoadPipeline
of ``epi_load_stages`` sub-tiles of ``tile_m x epi_tile_n``, and a double-buffered D store tile.
``num_stages = 0`` picks the most A/B stages that fit (at most 8); ``epi_tile_n = 0`` the target's
sub-tile width. ``b_major`` says how B is laid out in memory. ``pingpong`` (sm_90a): each of the two
consumer warpgroups computes whole tiles (every other one), with a D staging tile of its own and the
turn barriers. ``cluster_m`` 2 (sm_90a): two CTAs of a 2x1 cluster take vertically adjacent tiles of
one N column, and each loads half of the B stage they share and multicasts it to both. No MLIR import.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property

from fa4_mlir.configs.dtypes import DType
from fa4_mlir.configs.dtypes import dtype as lookup_dtype
from fa4_mlir.configs.fa4 import MBAR_BYTES, TMEM_ADDR_BYTES
from fa4_mlir.configs.support import Checked, Support
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import SMEM_CARVEOUT, TMEM_COLUMNS, Target

MAX_STAGES = 8
WARPGROUP_ROWS = 64  # rows of one sm_90a wgmma (m64nNk16): one consumer warpgroup each
EPILOGUE_THREADS_SM100 = 128  # warps 0-3 read the 128 TMEM lanes
MMA_K_BYTES = 32  # K bytes one MMA instruction consumes per row (16 elements of bf16/fp16)
SWIZZLE_BYTES = 128  # A/B tiles: 128B swizzle, one row of tile_k elements
MAX_ACCUMULATOR_REGISTERS = 192  # sm_90a: f32 accumulator registers a consumer thread can hold (of 232-240)
DEFAULT_EPI_TILE_N = {"sm_100a": 64, "sm_90a": 64}  # sm_90a: 64 (3 A/B stages) beat 32 (4 stages), docs/PERF.md


@dataclasses.dataclass(frozen=True, kw_only=True)
class GemmConfig(Checked):
    dtype: str = "bf16"
    target: str = "sm_100a"
    tile_m: int = 128
    tile_n: int = 256
    tile_k: int = 64
    num_stages: int = 0  # 0: as many as fit, at most 8
    epi_tile_n: int = 0  # 0: the target's default (DEFAULT_EPI_TILE_N)
    epi_load_stages: int = 2
    accum_stages: int = 2  # TMEM accumulator stages (sm_100a)
    cta_group: int = 1
    b_major: str = "k"  # "k": B is given as (N, K), K contiguous; "mn": as (K, N), N contiguous
    group_m: int = 8  # tile raster: output tiles are visited in bands of group_m tile rows (L2 reuse)
    # sm_90a: two consumer warpgroups that each own a whole tile (alternate tiles of the CTA's walk), so
    # one's epilogue runs while the other's wgmmas keep the tensor cores busy; False: both share a tile
    pingpong: bool = False
    # sm_90a: CTAs of a cluster along M (1 or 2). With 2 the cluster's CTAs take the tiles of rows 2i and
    # 2i + 1 of one N column, so they read the same B panel: each TMA-loads half of a B stage and multicasts it
    # to both CTAs (half the L2 reads of B), and a stage is released to the loads of both CTAs
    cluster_m: int = 1

    def __post_init__(self):
        lookup_dtype(self.dtype, field="GemmConfig.dtype", allowed=("bf16", "fp16"))
        Target.parse(self.target)
        if self.epi_tile_n == 0:
            object.__setattr__(self, "epi_tile_n", DEFAULT_EPI_TILE_N[self.target])
        sm90 = self.target == "sm_90a"
        e = self.elem.bytes
        rules = (
            ("cta_group", self.cta_group in (1, 2), "1 or 2"),
            ("tile_m", self.tile_m in ((64, 128) if sm90 else (128 * self.cta_group,)),
             "64 or 128 on sm_90a (one consumer warpgroup per 64 rows)" if sm90 else
             f"{128 * self.cta_group} on sm_100a with cta_group {self.cta_group} (128 TMEM lanes per CTA)"),
            ("tile_n", 16 <= self.tile_n <= 256 and self.tile_n % 16 == 0, "a multiple of 16 in [16, 256]"),
            ("tile_k", self.tile_k == SWIZZLE_BYTES // e, f"{SWIZZLE_BYTES // e} (one 128B swizzle row of "
                                                          f"{self.dtype})"),
            ("num_stages", 0 <= self.num_stages <= MAX_STAGES, f"in [0, {MAX_STAGES}] (0: as many as fit)"),
            ("epi_tile_n", self.epi_tile_n in (16, 32, 64) and self.epi_tile_n <= self.tile_n,
             f"16, 32 or 64 (one swizzled row of at most 128 B) and <= tile_n ({self.tile_n})"),
            ("epi_load_stages", 1 <= self.epi_load_stages <= 4, "in [1, 4]"),
            ("accum_stages", 1 <= self.accum_stages <= 2, "1 or 2"),
            ("b_major", self.b_major in ("k", "mn"), "'k' (B given as (N, K)) or 'mn' (B given as (K, N))"),
            ("group_m", 1 <= self.group_m <= 64, "in [1, 64]"),
            ("pingpong", not self.pingpong or sm90, "False on sm_100a (one MMA warp feeds a TMEM accumulator)"),
            ("cluster_m", self.cluster_m == 1 or (sm90 and self.cluster_m == 2),
             "1 or 2 on sm_90a (B multicast over a 2x1 cluster), 1 on sm_100a (cta_group pairs CTAs there)"),
            ("tile_n", not self.pingpong or self.wg_rows * self.tile_n <= 128 * MAX_ACCUMULATOR_REGISTERS,
             f"<= {128 * MAX_ACCUMULATOR_REGISTERS // self.tile_m} with pingpong and tile_m {self.tile_m} (a "
             f"warpgroup holds its tile's f32 accumulator, at most {MAX_ACCUMULATOR_REGISTERS} registers a thread)"),
        )
        for name, ok, expected in rules:
            if not ok:
                raise ConfigError(f"GemmConfig.{name} must be {expected}, got {getattr(self, name)!r}")
        if self.tile_n % self.epi_tile_n:
            raise ConfigError(f"GemmConfig.epi_tile_n must divide tile_n ({self.tile_n}), got {self.epi_tile_n}")
        if self.cta_group == 2 and self.target != "sm_100a":
            raise ConfigError(f"GemmConfig.cta_group must be 1 on {self.target} (CTA-pair MMA is sm_100a), got 2")
        if self.b_major == "mn" and self.b_tile_rows % self.swizzle_elems:
            raise ConfigError(f"GemmConfig.tile_n / cta_group must be a multiple of {self.swizzle_elems} when "
                              f"b_major is 'mn' (B is loaded in {SWIZZLE_BYTES}B-wide column blocks), got "
                              f"{self.b_tile_rows}")
        if self.cluster_m == 2 and self.b_major == "mn" and self.b_tile_rows // self.swizzle_elems < 2:
            raise ConfigError(f"GemmConfig.tile_n must be >= {2 * self.swizzle_elems} with cluster_m 2 and b_major "
                              f"'mn' (each CTA of the cluster loads B column blocks of {self.swizzle_elems}), got "
                              f"{self.tile_n}")

    @property
    def elem(self) -> DType:
        return lookup_dtype(self.dtype, field="dtype", allowed=("bf16", "fp16"))

    @property
    def has_tmem(self) -> bool:
        return Target.parse(self.target).tmem_columns > 0

    @property
    def swizzle_elems(self) -> int:
        return SWIZZLE_BYTES // self.elem.bytes

    @property
    def rows_per_cta(self) -> int:
        """Output rows each CTA owns: a CTA pair splits the tile's M (and B's N) between its CTAs."""
        return self.tile_m // self.cta_group

    @property
    def b_tile_rows(self) -> int:
        """N columns of B each CTA holds per stage (with ``cluster_m`` 2 it loads half of them)."""
        return self.tile_n // self.cta_group

    @property
    def cluster_size(self) -> int:
        """CTAs of a cluster: a CTA pair (``cta_group`` 2, sm_100a) or B's multicast group (``cluster_m``)."""
        return self.cta_group * self.cluster_m

    @property
    def cluster_rows(self) -> int:
        """Output rows of the tile a cluster computes: one step of the tile walk's M."""
        return self.tile_m * self.cluster_m

    @property
    def a_stage_bytes(self) -> int:
        return self.rows_per_cta * self.tile_k * self.elem.bytes

    @property
    def b_stage_bytes(self) -> int:
        return self.b_tile_rows * self.tile_k * self.elem.bytes

    @property
    def stage_bytes(self) -> int:
        """One A + B stage in one CTA."""
        return self.a_stage_bytes + self.b_stage_bytes

    @property
    def epi_row_bytes(self) -> int:
        """Bytes of one C/D sub-tile row: also its swizzle width (32, 64 or 128 B)."""
        return self.epi_tile_n * self.elem.bytes

    @property
    def epi_swizzle(self) -> str:
        return f"{self.epi_row_bytes}B"

    @property
    def epi_tile_bytes(self) -> int:
        return self.rows_per_cta * self.epi_row_bytes

    @property
    def num_epi_subtiles(self) -> int:
        """C/D sub-tiles per output tile (the reference's num_epi_load_stages = MMA_N / OutputN)."""
        return self.tile_n // self.epi_tile_n

    @property
    def consumers(self) -> int:
        """sm_90a: consumer warpgroups (MMA and epilogue), one per 64 rows; two with ``pingpong``."""
        return 2 if self.pingpong else self.tile_m // WARPGROUP_ROWS

    @property
    def wg_rows(self) -> int:
        """sm_90a: output rows of a tile one consumer warpgroup computes (the whole tile with ``pingpong``)."""
        return self.tile_m if self.pingpong else WARPGROUP_ROWS

    @property
    def tile_consumers(self) -> int:
        """sm_90a: consumer warpgroups that read one A/B stage and one C sub-tile (1 with ``pingpong``)."""
        return 1 if self.pingpong else self.consumers

    @property
    def epilogue_threads(self) -> int:
        """Threads that read one C sub-tile and write D: the 4 epilogue warps (sm_100a), the tile's
        consumer warpgroups (sm_90a)."""
        return EPILOGUE_THREADS_SM100 if self.has_tmem else 128 * self.tile_consumers

    @property
    def d_buffers(self) -> int:
        """D staging buffers of ``epi_tile_bytes``: double-buffered, per warpgroup with ``pingpong``."""
        return 2 * self.consumers if self.pingpong else 2

    @property
    def num_warps(self) -> int:
        # sm_100a: epilogue warps 0-3, main load 4, MMA 5, epilogue load 6, 7 idle (a warpgroup pair).
        # sm_90a: consumer warpgroups first, then a producer warpgroup (main load, epilogue load, 2 idle).
        return 8 if self.has_tmem else 4 * self.consumers + 4

    def mbarrier_count(self, stages: int) -> int:
        # A/B full+empty, accumulator full+empty, C full+empty, load order full+empty; pingpong: the
        # warpgroups' MMA and epilogue turns, full+empty each.
        accum = 2 * self.accum_stages if self.has_tmem else 0
        return 2 * stages + accum + 2 * self.epi_load_stages + 2 + (4 if self.pingpong else 0)

    def smem_for(self, stages: int) -> int:
        fixed = ((self.epi_load_stages + self.d_buffers) * self.epi_tile_bytes
                 + (TMEM_ADDR_BYTES if self.has_tmem else 0))
        return stages * self.stage_bytes + fixed + self.mbarrier_count(stages) * MBAR_BYTES

    @cached_property
    def stages(self) -> int:
        if self.num_stages:
            return self.num_stages
        fitting = [s for s in range(1, MAX_STAGES + 1) if self.smem_for(s) <= SMEM_CARVEOUT]
        return fitting[-1] if fitting else 1

    @property
    def smem_used(self) -> int:
        return self.smem_for(self.stages)

    @property
    def tmem_used(self) -> int:
        return self.accum_stages * self.tile_n if self.has_tmem else 0

    def supported(self) -> Support:
        if self.smem_used > SMEM_CARVEOUT:
            fix = "lower num_stages" if self.num_stages else "use a smaller tile"
            return Support(False, f"smem needs {self.smem_used} B, {self.target} has {SMEM_CARVEOUT} B: {fix}")
        if self.stages < 2:
            return Support(False, f"num_stages = {self.stages} must be >= 2 to overlap loads with MMA")
        if self.tmem_used > TMEM_COLUMNS:
            return Support(False, f"TMEM needs accum_stages x tile_n = {self.tmem_used} columns, sm_100a has "
                                  f"{TMEM_COLUMNS}: lower accum_stages or tile_n")
        return Support(True)

    def describe(self) -> str:
        pair = " cta_group 2" if self.cta_group == 2 else ""
        pingpong = " pingpong" if self.pingpong else ""
        cluster = f" cluster_m {self.cluster_m}" if self.cluster_m > 1 else ""
        return (f"GemmConfig {self.tile_m}x{self.tile_n}x{self.tile_k} {self.dtype} {self.target}{pair}{pingpong}"
                f"{cluster}")
