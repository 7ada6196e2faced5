"""Sizes and offsets the attention kernel's roles share, derived once from its config."""

from __future__ import annotations

import dataclasses
from functools import cached_property

from fa4_mlir.configs.attention import AttentionConfig

BLOCK = 64  # elements of one 128B swizzle row: TMA boxes and operand tiles are [rows, 64] blocks
ROW_BYTES = 128
MMA_K = 16  # elements of bf16/fp16 per tcgen05 instruction (32 bytes of a row)
WG = 128  # threads of a warpgroup = query rows of a softmax warpgroup = TMEM lanes


@dataclasses.dataclass(frozen=True)
class Dims:
    c: AttentionConfig

    @cached_property
    def f(self):
        return self.c.fa4.validate()

    @property
    def elem(self) -> str:
        return "bf16" if self.c.dtype == "bf16" else "f16"

    @property
    def bn(self) -> int:
        return self.f.bn

    @property
    def depth(self) -> int:
        """Padded head dim: Q, K and V tiles are whole 64-column blocks (TMA zero-fills the rest)."""
        return self.f.padded_qk_depth

    @property
    def blocks(self) -> int:
        return self.depth // BLOCK

    @property
    def nqk(self) -> int:
        return self.f.qk_stages

    @property
    def nkv(self) -> int:
        return self.f.num_kv_stages

    @property
    def fused(self) -> bool:
        return self.f.fused_kv

    @property
    def bk0(self) -> int:
        return self.f.bk0

    @property
    def sub_blocks(self) -> int:
        """64-column blocks of one Q@K' depth sub-stage."""
        return self.bk0 // BLOCK

    # -- shared memory -------------------------------------------------------------------------------
    @property
    def q_chunk(self) -> int:
        """Bytes of one 128-row Q depth sub-stage."""
        return WG * self.bk0 * 2

    def q_offset(self, half: int, sub: int) -> int:
        return (half * self.nqk + sub) * self.q_chunk

    @property
    def q_bytes(self) -> int:
        return self.f.q_bytes

    @property
    def k_chunk(self) -> int:
        """Bytes of one K depth sub-stage: BN rows x BK0."""
        return self.bn * self.bk0 * 2

    @property
    def kv_stage(self) -> int:
        """Bytes of a K stage (all sub-stages) or a V stage: BN rows x the padded depth."""
        return self.bn * self.depth * 2

    @property
    def o_half(self) -> int:
        """Bytes of one 128-row output tile (written over the dead Q)."""
        return WG * self.depth * 2

    def out_blocks(self, wg: int) -> range:
        """Output column blocks softmax warpgroup ``wg`` normalises and stores: its own 128 rows in
        2Q; in 1Q both warpgroups hold the same rows, WG0 the first half of the blocks."""
        if self.c.num_q == 2:
            return range(self.blocks)
        first = -(-self.blocks // 2)
        return range(first) if wg == 0 else range(first, self.blocks)

    # -- TMEM and the P@V split ----------------------------------------------------------------------
    @property
    def pv_split(self) -> int:
        """MMA K steps of P@V stage 0: 3/4 of BN when the steps divide by 4, else half."""
        steps = self.bn // MMA_K
        return steps * 3 // 4 if steps % 4 == 0 else steps // 2

    @property
    def batch(self) -> int:
        """Softmax columns per TMEM load: 32, or 16 where the P stage boundary needs it."""
        return 32 if (self.pv_split * MMA_K) % 32 == 0 and self.bn % 32 == 0 else 16

    def p_stage(self, col: int) -> int:
        return 0 if col < self.pv_split * MMA_K else 1
