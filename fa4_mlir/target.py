"""The compilation target: a small frozen value (``Target.parse("sm_100a")``). No MLIR import."""

from __future__ import annotations

import dataclasses
import re

from fa4_mlir.errors import ConfigError

# Per-block opt-in shared memory on sm_90/sm_100: 228 KiB per SM minus the 1 KiB the driver reserves.
SMEM_CARVEOUT = 232448
TMEM_COLUMNS = 512  # sm_100: 512 columns x 128 lanes x 32 bit


@dataclasses.dataclass(frozen=True)
class Target:
    """A GPU architecture we compile for. Only the arch-specific ("a") variants are supported:
    wgmma, setmaxnreg and tcgen05 exist only there."""

    sm: int
    ptx_isa: int

    SUPPORTED = (90, 100)

    def __post_init__(self):
        if self.sm not in self.SUPPORTED:
            raise ConfigError(f"Target.sm must be one of 90, 100, got {self.sm}")

    @classmethod
    def parse(cls, name: str) -> Target:
        """``sm_90a`` or ``sm_100a``."""
        m = re.fullmatch(r"sm_(\d+)a", name.strip())
        if not m or int(m.group(1)) not in cls.SUPPORTED:
            raise ConfigError(f"target must be sm_90a or sm_100a, got '{name}'")
        sm = int(m.group(1))
        return cls(sm=sm, ptx_isa=86 if sm == 100 else 80)

    @property
    def name(self) -> str:
        return f"sm_{self.sm}a"

    @property
    def smem_capacity(self) -> int:
        return SMEM_CARVEOUT

    @property
    def tmem_columns(self) -> int:
        return TMEM_COLUMNS if self.sm >= 100 else 0

    def __str__(self) -> str:
        return self.name
