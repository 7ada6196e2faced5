"""CombineConfig: the split-KV combine kernel ("attention-combine", issue 26).

A split-KV attention kernel writes, per key range s of a row, the fp32 partial output O_s (normalised over
the range's keys) and its natural-log LSE_s; this kernel merges the ranges of each (batch, query, head) row
into the output dtype: ``O = sum_s exp(LSE_s - lse) O_s`` and ``lse = ln sum_s exp(LSE_s)``. One warp per
row (``warps`` rows a CTA); D (``head_dim``, the partials' columns) is compiled in, the number of ranges is
a launch argument. No MLIR import.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.configs.dtypes import DType
from fa4_mlir.configs.dtypes import dtype as lookup_dtype
from fa4_mlir.configs.support import Checked, Support
from fa4_mlir.errors import ConfigError

TARGETS = ("sm_100a", "sm_90a")
OUT_DTYPES = ("bf16", "fp16")
HEAD_DIM_STEP, HEAD_DIM_MIN, HEAD_DIM_MAX = 16, 32, 512
LANES = 32
VECTOR = 4  # f32 columns a lane reads at a time: one 16-byte load
REGISTER_FILE, REGISTER_BUDGET = 65536, 64  # an SM's 32-bit registers; what a thread of the kernel gets


@dataclasses.dataclass(frozen=True, kw_only=True)
class CombineConfig(Checked):
    """The combine kernel of one output dtype and head dim (the module doc); ``warps`` rows a CTA."""

    target: str = "sm_100a"
    dtype: str = "bf16"  # the output's; partials are always fp32
    head_dim: int = 128
    warps: int = 4  # rows a CTA: one warp per (batch, query, head) row

    def __post_init__(self):
        rules = (
            ("target", self.target in TARGETS, " or ".join(TARGETS)),
            ("head_dim", isinstance(self.head_dim, int) and HEAD_DIM_MIN <= self.head_dim <= HEAD_DIM_MAX
             and self.head_dim % HEAD_DIM_STEP == 0,
             f"a multiple of {HEAD_DIM_STEP} in [{HEAD_DIM_MIN}, {HEAD_DIM_MAX}]"),
            ("warps", isinstance(self.warps, int) and 1 <= self.warps <= 32, "an int in [1, 32]"),
        )
        for name, ok, expected in rules:
            if not ok:
                raise ConfigError(f"CombineConfig.{name} must be {expected}, got {getattr(self, name)!r}")
        lookup_dtype(self.dtype, field="CombineConfig.dtype", allowed=OUT_DTYPES)

    @property
    def elem(self) -> DType:
        return lookup_dtype(self.dtype, field="CombineConfig.dtype", allowed=OUT_DTYPES)

    @property
    def vectors(self) -> int:
        """16-byte vectors of a partial row (D / 4)."""
        return self.head_dim // VECTOR

    @property
    def steps(self) -> int:
        """Vectors each lane holds: ceil(D / 128); the last step's lanes past D / 4 only read."""
        return -(-self.vectors // LANES)

    @property
    def splits_per_step(self) -> int:
        """Key ranges a lane loads before it accumulates them: up to 8 16-byte loads in flight (6 at three
        steps), a power of two so that a step never crosses a chunk of 32 ranges; more spill at 64 registers."""
        return max(1, 8 // self.steps) if self.steps != 3 else 2

    @property
    def min_ctas(self) -> int:
        """CTAs an SM must hold at once (``.minnctapersm``): what leaves ptxas 64 registers a thread."""
        return max(1, REGISTER_FILE // (REGISTER_BUDGET * self.threads))

    @property
    def num_warps(self) -> int:
        return self.warps

    @property
    def threads(self) -> int:
        return LANES * self.warps

    def supported(self) -> Support:
        return Support(True)

    def describe(self) -> str:
        return f"CombineConfig {self.dtype} d{self.head_dim} {self.warps} warps {self.target}"
