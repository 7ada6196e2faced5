"""CopyPipelineConfig: the streaming copy kernel, out = scale * in through an N-stage smem ring.

One TMA producer warp streams ``tile_rows x tile_cols`` tiles of a row block through ``stages``
shared-memory buffers; ``consumers`` warpgroups each scale a horizontal slice of every tile into a
staging buffer and write it back with a TMA store. No MLIR import.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.configs.dtypes import DType
from fa4_mlir.configs.dtypes import dtype as lookup_dtype
from fa4_mlir.configs.fa4 import MBAR_BYTES
from fa4_mlir.configs.support import Checked, Support
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import SMEM_CARVEOUT, Target

TMA_BOX_MAX = 256  # elements per box dimension
WARPGROUP_THREADS = 128
VECTOR_BYTES = 16  # each consumer thread moves 16 bytes at a time
TILE_ALIGN = 1024


@dataclasses.dataclass(frozen=True, kw_only=True)
class CopyPipelineConfig(Checked):
    dtype: str = "bf16"
    target: str = "sm_100a"
    tile_rows: int = 128
    tile_cols: int = 64
    stages: int = 4
    consumers: int = 2  # consumer warpgroups
    producer_registers: int = 40
    consumer_registers: int = 232

    def __post_init__(self):
        lookup_dtype(self.dtype, field="CopyPipelineConfig.dtype", allowed=("bf16", "fp16"))
        Target.parse(self.target)
        rules = (
            ("tile_cols", 8 <= self.tile_cols <= TMA_BOX_MAX and self.tile_cols % 8 == 0,
             f"a multiple of 8 in [8, {TMA_BOX_MAX}] (a TMA box dimension)"),
            ("tile_rows", 1 <= self.tile_rows <= TMA_BOX_MAX, f"in [1, {TMA_BOX_MAX}] (a TMA box dimension)"),
            ("consumers", 1 <= self.consumers <= 3, "1, 2 or 3"),
            ("stages", self.stages >= 1, ">= 1"),
            ("producer_registers", 24 <= self.producer_registers <= 256 and self.producer_registers % 8 == 0,
             "a multiple of 8 in [24, 256]"),
            ("consumer_registers", 24 <= self.consumer_registers <= 256 and self.consumer_registers % 8 == 0,
             "a multiple of 8 in [24, 256]"),
        )
        for name, ok, expected in rules:
            if not ok:
                raise ConfigError(f"CopyPipelineConfig.{name} must be {expected}, got {getattr(self, name)!r}")
        slice_bytes = self.tile_bytes // self.consumers
        if self.tile_rows % self.consumers or slice_bytes % (WARPGROUP_THREADS * VECTOR_BYTES):
            raise ConfigError(
                f"CopyPipelineConfig.tile_rows must split into {self.consumers} slices of a multiple of "
                f"{WARPGROUP_THREADS * VECTOR_BYTES} bytes (one 16-byte vector per consumer thread), got "
                f"{self.tile_rows} rows of {self.tile_cols * self.elem.bytes} bytes")
        if self.stages > self.max_stages:
            raise ConfigError(
                f"CopyPipelineConfig.stages must be <= {self.max_stages} for {self.tile_rows}x{self.tile_cols} "
                f"{self.dtype} tiles (each stage {self.tile_bytes} B; {SMEM_CARVEOUT} B of shared memory, "
                f"{self.staging_bytes} B of staging), got {self.stages}")
        registers = WARPGROUP_THREADS * (self.producer_registers + self.consumers * self.consumer_registers)
        threads = WARPGROUP_THREADS * (self.consumers + 1)
        # what the CTA's warps start with (the entry cap, allocated in units of 8): setmaxnreg's pool
        pool = -(-min(255, 65536 // threads // 8 * 8) // 8) * 8 * threads
        if registers > pool:
            raise ConfigError(
                f"CopyPipelineConfig register budgets must total <= {pool}, got {registers} "
                f"(128 x ({self.producer_registers} + {self.consumers} x {self.consumer_registers})): {threads} "
                f"threads start with {pool // threads} registers each, and setmaxnreg cannot pass that pool")

    @property
    def elem(self) -> DType:
        return lookup_dtype(self.dtype, field="CopyPipelineConfig.dtype", allowed=("bf16", "fp16"))

    @property
    def tile_bytes(self) -> int:
        return self.tile_rows * self.tile_cols * self.elem.bytes

    @property
    def slice_rows(self) -> int:
        return self.tile_rows // self.consumers

    @property
    def slice_bytes(self) -> int:
        return self.tile_bytes // self.consumers

    @property
    def staging_bytes(self) -> int:
        return self.consumers * _round_up(self.slice_bytes, TILE_ALIGN)

    @property
    def max_stages(self) -> int:
        barriers = _round_up(2 * 64 * MBAR_BYTES, TILE_ALIGN)  # generous: never the limiting term
        return max(0, (SMEM_CARVEOUT - self.staging_bytes - barriers) // _round_up(self.tile_bytes, TILE_ALIGN))

    @property
    def num_warps(self) -> int:
        """Consumer warpgroups first, then one producer warpgroup (its first warp loads)."""
        return 4 * (self.consumers + 1)

    @property
    def threads(self) -> int:
        return 32 * self.num_warps

    def supported(self) -> Support:
        return Support(True)

    def describe(self) -> str:
        return (f"CopyPipelineConfig {self.dtype} {self.tile_rows}x{self.tile_cols} {self.stages} stages "
                f"{self.consumers} consumers {self.target}")


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m
