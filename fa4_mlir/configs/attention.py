"""AttentionConfig: the attention forward kernel as users pick it (head dim, mask, Q tiles, GQA).

The kernel's resources (tile shape, K/V stages, fused or split K/V ring, barriers, TMEM map) are
those of the reference FA4Config for the same dtype, depth, Q tiles and group: ``fa4`` returns it,
so ``fa4-layout`` and the kernel read one derivation. No MLIR import.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir.configs.dtypes import dtype as lookup_dtype
from fa4_mlir.configs.fa4 import FA4Config
from fa4_mlir.configs.support import Checked, Support
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import Target

HEAD_DIMS = {"sm_100a": (64, 96, 128)}
MAX_GROUP = 128  # a fused GQA tile holds 128 / group positions of group heads
EXP2_BATCH = 32  # softmax columns per exp2 batch; exp2_emulation counts per batch


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionConfig(Checked):
    """One attention forward kernel: softmax(scale * Q K') V for Q (B, Sq, H, D), K/V (B, Sk, H/group, D).

    ``num_q = 2``: a CTA owns 256 query rows as two 128-row halves Q0/Q1, one per softmax
    warpgroup; ``num_q = 1``: 128 rows, softmax warpgroup 0 takes the even K/V tiles and 1 the odd
    ones. ``group > 1`` is GQA; when it divides 128 the heads sharing a K/V head share the CTA
    (rows = 128 / group positions x group heads). ``exp2_emulation`` of every 32 exponentials use a
    degree-3 polynomial on the FMA pipe instead of ``ex2.approx`` (0: none).
    """

    target: str = "sm_100a"
    dtype: str = "bf16"
    head_dim: int = 128
    causal: bool = False
    num_q: int = 2
    group: int = 1
    exp2_emulation: int = 0

    def __post_init__(self):
        lookup_dtype(self.dtype, field="AttentionConfig.dtype", allowed=("bf16", "fp16"))
        Target.parse(self.target)
        dims = HEAD_DIMS.get(self.target)
        if dims is None:
            raise ConfigError(f"AttentionConfig.target must be one of {', '.join(HEAD_DIMS)} (the sm_90a "
                              f"attention lowering is not built yet), got '{self.target}'")
        rules = (
            ("head_dim", self.head_dim in dims, f"one of {', '.join(map(str, dims))} on {self.target}"),
            ("causal", isinstance(self.causal, bool), "True or False"),
            ("num_q", self.num_q in (1, 2), "1 (BM 128) or 2 (BM 256)"),
            ("group", isinstance(self.group, int) and 1 <= self.group <= MAX_GROUP,
             f"in [1, {MAX_GROUP}] (query heads per K/V head)"),
            ("exp2_emulation", 0 <= self.exp2_emulation <= EXP2_BATCH and self.exp2_emulation % 2 == 0,
             f"even and in [0, {EXP2_BATCH}] (exponentials per {EXP2_BATCH} computed by polynomial)"),
        )
        for name, ok, expected in rules:
            if not ok:
                raise ConfigError(f"AttentionConfig.{name} must be {expected}, got {getattr(self, name)!r}")

    @property
    def fa4(self) -> FA4Config:
        """The reference configuration whose layout the kernel uses."""
        return FA4Config(dtype=self.dtype, qk_depth=self.head_dim, num_q=self.num_q, group=self.group)

    @property
    def fused_group(self) -> int:
        """Heads that share one CTA's rows: ``group`` when it divides the 128 rows, else 1."""
        return self.group if self.fa4.fuse_gqa else 1

    @property
    def rows(self) -> int:
        """Query rows of one softmax warpgroup (TMEM lanes)."""
        return 128

    @property
    def positions(self) -> int:
        """Sequence positions of one 128-row tile (fewer than 128 with fused GQA)."""
        return self.rows // self.fused_group

    @property
    def cta_positions(self) -> int:
        return self.positions * self.num_q

    def supported(self) -> Support:
        return self.fa4.supported()

    def describe(self) -> str:
        return (f"AttentionConfig {self.target} {self.dtype} d{self.head_dim} {self.num_q}Q"
                + (" causal" if self.causal else "") + (f" group {self.group}" if self.group > 1 else ""))
