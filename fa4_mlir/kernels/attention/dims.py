"""Sizes and offsets the attention kernel's roles share, derived once from its config."""

from __future__ import annotations

import dataclasses
from functools import cached_property

from fa4_mlir.configs.attention import AttentionConfig

BLOCK = 64  # elements of one swizzle row (128B of bf16/fp16, 64B of fp8): operand tiles are [rows, 64] blocks
ROW_BYTES = 128  # of a bf16/fp16 block row (and of a 64-column bf16 output block)
MMA_K = 16  # elements of bf16/fp16 per tcgen05 instruction (32 bytes of a row)
K_STEP_BYTES = 32  # bytes of a row one tcgen05 instruction consumes (16 bf16/fp16, 32 e4m3)
WG = 128  # threads of a warpgroup = query rows of a softmax warpgroup = TMEM lanes
FP8_OUT_CHUNK = 32  # fp8: bf16 output columns per store chunk (64-byte rows: the bytes of one 64-column fp8 block)


@dataclasses.dataclass(frozen=True)
class Dims:
    c: AttentionConfig

    @cached_property
    def f(self):
        return self.c.fa4.validate()

    @property
    def fp8(self) -> bool:
        return self.c.is_fp8

    @property
    def elem(self) -> str:
        """The MMA input type (``fa4.tcgen05_mma`` ab_type)."""
        return "e4m3" if self.fp8 else "bf16" if self.c.dtype == "bf16" else "f16"

    @property
    def dsz(self) -> int:
        """Bytes of a Q/K/V/P element."""
        return 1 if self.fp8 else 2

    @property
    def row_bytes(self) -> int:
        """Bytes of a block row of Q, K, V: the swizzle width (64B for fp8, 128B else)."""
        return BLOCK * self.dsz

    @property
    def swizzle(self) -> str:
        return f"{self.row_bytes}B"

    @property
    def mma_k(self) -> int:
        """Elements of K per tcgen05 instruction (32 bytes of a row)."""
        return self.f.mma_k

    @property
    def bn(self) -> int:
        return self.f.bn

    @property
    def depth(self) -> int:
        """Padded V / O depth (the head dim; MLA prefill: the nope part, 128): Q, K and V tiles are whole
        64-column blocks (TMA zero-fills the rest)."""
        return self.f.padded_ov_depth

    @property
    def blocks(self) -> int:
        """64-column blocks of V and O (and of Q and K but for MLA's rope block)."""
        return self.depth // BLOCK

    # -- registers (setmaxnreg, per warpgroup; the sum over the 16 warps is the 64K register file) ------
    @property
    def registers(self) -> tuple[int, int, int]:
        """(softmax, correction, MMA / load warps): 184 / 80 / 64; MLA prefill 168 / 80 / 96: its
        Q@K' has 12 K steps a Q half (8 nope, 4 rope), whose loop-invariant Q descriptors (ptxas
        keeps both halves' 24 live across the loop) spill the MMA thread at 64 and at 80 (ptxas);
        the softmax of BN 128 fits 168. fp8 MLA prefill 176 / 80 / 80: 8 K steps a Q half (4 e4m3,
        4 of the 16-bit rope) fit the MMA thread at 80, and its causal softmax spills at 168 (ptxas)."""
        if self.mla:
            return (176, 80, 80) if self.fp8 else (168, 80, 96)
        return (184, 80, 64)

    # -- MLA prefill (spec 1.2: is_mla, nqk = 1): Q@K' is 128 nope + 64 rope columns ---------------------
    @property
    def mla(self) -> bool:
        return self.f.is_mla

    @property
    def rope(self) -> int:
        """Rope columns of Q and K (MLA: 64, in their own regions / buffers; else 0)."""
        return self.f.rope_depth

    @property
    def rope_dsz(self) -> int:
        """Bytes of a rope element: the rope dtype's (fp8 MLA keeps a 16-bit rope; else the Q/K element's)."""
        return self.f.rope_bytes or self.dsz

    @property
    def rope_elem(self) -> str:
        """The rope Q@K' MMAs' input type: the rope dtype's (a kind::f16 MMA into the fp8 kernel's S)."""
        return {"bf16": "bf16", "fp16": "f16"}.get(self.f.rope_dtype, self.elem) if self.fp8 else self.elem

    @property
    def rope_blocks(self) -> int:
        """Swizzle blocks of a rope row (64 rope columns): one, or two 32-column blocks of a 16-bit rope
        in fp8's 64B swizzle (the regions' swizzle is the config's)."""
        return self.rope * self.rope_dsz // self.row_bytes

    @property
    def rope_block_cols(self) -> int:
        """Rope columns of one swizzle block (a TMA box's width)."""
        return self.row_bytes // self.rope_dsz

    @property
    def rope_bufs(self) -> int:
        """MLA, fused K/V ring: the K tiles' rope buffers, ceil(nkv / 2) (half the ring's slots hold K);
        a split ring keeps each tile's rope in its K stage after K_nope."""
        return -(-self.nkv // 2) if self.mla and self.fused else 0

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
        """Bytes of one 128-row Q depth sub-stage (MLA: the nope part; the rope part is in q_rope)."""
        return WG * (self.bk0 - self.rope) * self.dsz

    @property
    def q_tx(self) -> int:
        """Bytes a 128-row Q sub-stage's TMA loads bring (MLA: nope and rope)."""
        return WG * ((self.bk0 - self.rope) * self.dsz + self.rope * self.rope_dsz)

    def q_offset(self, half: int, sub: int) -> int:
        return (half * self.nqk + sub) * self.q_chunk

    @property
    def q_bytes(self) -> int:
        return self.f.q_bytes

    @property
    def k_chunk(self) -> int:
        """Bytes of one K depth sub-stage: BN rows x BK0 (MLA in a fused ring: the nope part, a slot)."""
        return self.bn * (self.bk0 - self.rope) * self.dsz + (0 if self.rope_bufs else self.rope_chunk)

    @property
    def k_tx(self) -> int:
        """Bytes a K sub-stage's TMA loads bring (MLA: nope and rope)."""
        return self.bn * (self.bk0 - self.rope) * self.dsz + self.rope_chunk

    @property
    def rope_chunk(self) -> int:
        """MLA: bytes of one K tile's rope (BN rows x 64), a rope buffer in a fused ring."""
        return self.bn * self.rope * self.rope_dsz

    @property
    def kv_stage(self) -> int:
        """Bytes of a V stage (and of a K stage, all sub-stages, but for MLA): BN rows x the padded depth."""
        return self.bn * self.depth * self.dsz

    @property
    def o_half(self) -> int:
        """Bytes of one 128-row output tile (written over the dead Q)."""
        return WG * self.depth * 2

    # -- fp8: the bf16 output in chunks over the (half as large) fp8 Q ---------------------------------
    @property
    def out_chunks(self) -> int:
        """fp8: 32-column bf16 chunks of a 128-row output tile (each 128 x 64 bytes: one fp8 Q block)."""
        return self.depth // FP8_OUT_CHUNK

    def chunk_plan(self, wg: int) -> tuple[range, list[int]]:
        """fp8: (the output chunks warpgroup ``wg`` stores, the byte offsets in the Q region of the
        chunk buffers it cycles through). 2Q: its own Q half's blocks; 1Q: both warpgroups hold the
        same rows and split the chunks and the Q blocks (one block, d64: warpgroup 0 stores all)."""
        chunk = WG * BLOCK  # bytes of a chunk = of an fp8 Q block
        if self.c.num_q == 2:
            return range(self.out_chunks), [self.q_offset(wg, 0) + b * chunk for b in range(self.blocks)]
        if self.blocks == 1:
            return (range(self.out_chunks), [0]) if wg == 0 else (range(0), [])
        half = self.out_chunks // 2
        mine = range(half) if wg == 0 else range(half, self.out_chunks)
        per = self.blocks // 2
        return mine, [(wg * per + b) * chunk for b in range(per)]

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
        steps = self.bn // self.mma_k
        return steps * 3 // 4 if steps % 4 == 0 else steps // 2

    @property
    def batch(self) -> int:
        """Softmax columns per TMEM load: 32, or 16 where the P stage boundary needs it."""
        return 32 if (self.pv_split * self.mma_k) % 32 == 0 and self.bn % 32 == 0 else 16

    def p_stage(self, col: int) -> int:
        return 0 if col < self.pv_split * self.mma_k else 1
