"""FA4Config: the configuration of the SM100 FlashAttention-4 (and MLA) forward kernel.

Reproduces the reference system's derivation (spec section 1.2) exactly, in the same order: tile
shape from the MMA and TMEM, qk depth staging, then the number of K/V shared-memory slots from the
space left under the carveout, which also decides fused (one K/V ring) or split (K ring + V ring)
mode. No MLIR import: the runtime uses configs too.
"""

from __future__ import annotations

import dataclasses
import math
from functools import cached_property

from fa4_mlir.configs.dtypes import DType
from fa4_mlir.configs.dtypes import dtype as lookup_dtype
from fa4_mlir.configs.support import Checked, Support
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import SMEM_CARVEOUT, TMEM_COLUMNS

MBAR_BYTES = 8
TMEM_ADDR_BYTES = 4  # the u32 that tcgen05.alloc writes
NUM_PV_STAGES = 2  # P is written and consumed in two sub-stages
MAX_DEPTH = 576  # MLA: 512 nope + 64 rope


def _align_up(x: int, a: int) -> int:
    return -(-x // a) * a


def _align_down(x: int, a: int) -> int:
    return x // a * a


def _prev_power_of_two(x: int) -> int:
    return 1 << (x.bit_length() - 1) if x > 0 else 0


@dataclasses.dataclass(frozen=True)
class SmemBudget:
    """The outcome of the K/V slot search (spec 1.2 step 10)."""

    num_kv_stages: int
    num_qk_stages: int
    fused_kv: bool
    smem_used: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class FA4Config(Checked):
    """One FA4 / MLA forward configuration. Field checks run at construction; resource checks
    (TMEM, shared memory, depth limits of each mode) in ``supported()`` / ``validate()``.

    Derived values are properties; the worked configurations of the spec (section 1.3):

    | case               | MMA_M | BM  | BN  | nqk/BK0 | mode  | nkv | smem_used |
    |--------------------|-------|-----|-----|---------|-------|-----|-----------|
    | bf16 d64 2Q        | 128   | 256 | 192 | 1 / 64  | split | 4   | 230636    |
    | bf16 d128 2Q       | 128   | 256 | 128 | 1 / 128 | fused | 5   | 230596    |
    | bf16 d128 2Q pair  | 256   | 256 | 128 | 2 / 64  | split | 5   | 230756    |
    | bf16 d128 1Q       | 128   | 128 | 128 | 2 / 64  | split | 3   | 230644    |
    | fp8 d128 2Q        | 128   | 256 | 128 | 2 / 64  | split | 6   | 230804    |
    """

    dtype: str = "bf16"
    qk_depth: int = 128
    ov_depth: int | None = None  # None: same as qk_depth (MHA)
    num_q: int = 2  # Q tiles per CTA: 2 = two 128-row halves Q0/Q1 (BM 256), 1 = BM 128
    pair_cta: bool = False
    group: int = 1  # query heads per KV head (GQA)
    page_size: int = 0  # 0: contiguous KV
    rope_dtype: str | None = None
    scale_dtype: str | None = None  # per-token scales (fp8 MLA)
    swizzle: int = 128  # requested TMA swizzle in bytes; fp8 forces 64
    is_mla: bool = False
    num_qk_stages: int = 0  # 0: derive
    use_order_barriers: bool = False
    # the K/V tiles of a paged cache gathered by the load warp's 32 lanes (cp.async; ``AttentionConfig.page_gather``):
    # their full barriers count the lanes, and Q0 loads on its own barriers (``Q0_sync``) instead of K_0's
    page_gather: bool = False

    def __post_init__(self):
        d = lookup_dtype(self.dtype, field="FA4Config.dtype")
        if self.rope_dtype is not None:
            lookup_dtype(self.rope_dtype, field="FA4Config.rope_dtype")
        if self.scale_dtype is not None:
            lookup_dtype(self.scale_dtype, field="FA4Config.scale_dtype", allowed=("bf16", "fp16", "fp32"))
        rows = 16 // d.bytes  # a TMA row must be a multiple of 16 bytes
        for name in ("qk_depth", "ov_depth"):
            value = getattr(self, name)
            if name == "ov_depth" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not rows <= value <= MAX_DEPTH \
                    or value % rows:
                raise ConfigError(f"FA4Config.{name} must be a multiple of {rows} in [{rows}, {MAX_DEPTH}] "
                                  f"for {self.dtype} (16-byte TMA rows), got {value!r}")
        if self.ov_depth is not None and self.ov_depth > self.qk_depth:
            raise ConfigError(f"FA4Config.ov_depth must be <= qk_depth ({self.qk_depth}): the extra qk "
                              f"columns are the rope part, got {self.ov_depth}")
        checks = (("num_q", self.num_q in (1, 2), "1 or 2"), ("group", self.group >= 1, ">= 1"),
                  ("page_size", self.page_size >= 0, ">= 0 (0: not paged)"),
                  ("swizzle", self.swizzle in (32, 64, 128), "32, 64 or 128 (bytes)"),
                  ("num_qk_stages", self.num_qk_stages >= 0, ">= 0 (0: derive)"),
                  ("page_gather", isinstance(self.page_gather, bool)
                   and not (self.page_gather and (self.is_mla or self.pair_cta)),
                   "True or False, and False with is_mla or pair_cta (the gathered load warp is the one-CTA paged "
                   "attention kernel's)"))
        for name, ok, expected in checks:
            if not ok:
                raise ConfigError(f"FA4Config.{name} must be {expected}, got {getattr(self, name)!r}")

    # -- element types -------------------------------------------------------------------------------
    @property
    def qkv(self) -> DType:
        return lookup_dtype(self.dtype, field="dtype")

    @property
    def rope_bytes(self) -> int:
        return lookup_dtype(self.rope_dtype, field="rope_dtype").bytes if self.rope_dtype else 0

    @property
    def scale_bytes(self) -> int:
        return lookup_dtype(self.scale_dtype, field="scale_dtype", allowed=("bf16", "fp16", "fp32")).bytes \
            if self.scale_dtype else 0

    # -- tile shape (steps 1-7) ----------------------------------------------------------------------
    @property
    def mma_k(self) -> int:
        return 16 if self.qkv.is_half else 32

    @property
    def mma_m(self) -> int:
        return 256 if self.pair_cta else 128

    @property
    def bm(self) -> int:
        return self.mma_m if self.num_q == 1 else 256

    @property
    def cta_group(self) -> int:
        return 2 if self.pair_cta else 1

    @property
    def fuse_gqa(self) -> bool:
        return self.group > 1 and self.mma_m % self.group == 0 and not self.is_mla

    @property
    def bm_eff(self) -> int:
        return self.bm // self.group if self.fuse_gqa else self.bm

    @property
    def swizzle_bytes(self) -> int:
        return 64 if self.qkv.bytes == 1 else self.swizzle

    @property
    def swizzle_elems(self) -> int:
        return self.swizzle_bytes // self.qkv.bytes

    @property
    def padded_qk_depth(self) -> int:
        return _align_up(self.qk_depth, self.swizzle_elems)

    @property
    def padded_ov_depth(self) -> int:
        return _align_up(self.ov_depth if self.ov_depth is not None else self.qk_depth, self.swizzle_elems)

    @property
    def rope_depth(self) -> int:
        return self.padded_qk_depth - self.padded_ov_depth

    @cached_property
    def bn(self) -> int:
        """Two S tiles and two O tiles must fit the 512 TMEM columns: 2*BN + 2*pov <= 512."""
        bn = min(256, _align_down(256 - self.padded_ov_depth, self.mma_k))
        if self.page_size and bn > 0 and self.page_size % bn and bn % self.page_size:
            bn = _prev_power_of_two(bn)
        return bn

    @property
    def tmem_columns(self) -> dict[str, tuple[int, int]]:
        """TMEM regions as name -> (first column, columns). P_i lives in S_i; C_i is S_i's upper half."""
        bn, pov = self.bn, self.padded_ov_depth
        return {"S0": (0, bn), "S1": (bn, bn), "O0": (2 * bn, pov), "O1": (2 * bn + pov, pov)}

    @property
    def tmem_used(self) -> int:
        return 2 * self.bn + 2 * self.padded_ov_depth

    @property
    def num_pv_stages(self) -> int:
        return NUM_PV_STAGES

    @property
    def v_cols_per_cta(self) -> int:
        return self.padded_ov_depth // 2 if self.pair_cta else self.padded_ov_depth

    @property
    def k_rows_per_cta(self) -> int:
        return self.bn // 2 if self.pair_cta else self.bn

    # -- qk staging and shared memory (steps 8-12) ---------------------------------------------------
    def _derived_qk_stages(self) -> int:
        if self.is_mla:
            return 1
        if self.num_qk_stages:
            return self.num_qk_stages
        return math.gcd(self.padded_qk_depth // self.swizzle_elems, self.padded_qk_depth // self.mma_k)

    @property
    def fixed_mbarriers(self) -> int:
        """Barriers outside the K/V rings, counted with the pre-fusion nqk as the reference does
        (which over-reserves 8 B in fused mode)."""
        order = 2 if self.use_order_barriers else 0
        q1_sync = self._derived_qk_stages() if self.num_q == 2 else 0
        return 8 + order + 2 * NUM_PV_STAGES + q1_sync

    @property
    def q_bytes(self) -> int:
        if self.rope_dtype:
            return self.bm * (self.padded_ov_depth * self.qkv.bytes + self.rope_depth * self.rope_bytes)
        return self.bm * self.padded_qk_depth * self.qkv.bytes

    @property
    def correction_bytes(self) -> int:
        return (2 if self.num_q == 1 else 1) * self.bm * 4

    @property
    def q_scale_bytes(self) -> int:
        return self.bm * self.scale_bytes

    @cached_property
    def budget(self) -> SmemBudget:
        used = TMEM_ADDR_BYTES + self.fixed_mbarriers * MBAR_BYTES
        used += self.q_bytes + self.q_scale_bytes + self.correction_bytes
        dsz = self.qkv.bytes
        bytes_per_kv = (self.bn * self.padded_ov_depth // self.cta_group) * dsz + 2 * MBAR_BYTES
        kv_rows = self.k_rows_per_cta
        bytes_per_k = kv_rows * self.rope_depth * self.rope_bytes + kv_rows * self.scale_bytes
        slots = max(0, SMEM_CARVEOUT - used) // (bytes_per_kv + bytes_per_k // 2)
        if self.num_qk_stages > 1 and slots % 2:
            slots -= 1

        def kv_bytes(n: int) -> int:
            return n * bytes_per_kv + -(-n // 2) * bytes_per_k

        while slots > 0 and used + kv_bytes(slots) > SMEM_CARVEOUT:
            slots -= 1
        used += kv_bytes(slots)
        if slots % 2:
            return SmemBudget(num_kv_stages=slots, num_qk_stages=1, fused_kv=True, smem_used=used)
        nkv, nqk = slots // 2, self._derived_qk_stages()
        extra = (nqk - 1) * nkv * 2 * MBAR_BYTES
        if used + extra <= SMEM_CARVEOUT:
            used += extra
        else:
            nqk = 1
        return SmemBudget(num_kv_stages=nkv, num_qk_stages=nqk, fused_kv=False, smem_used=used)

    @property
    def num_kv_stages(self) -> int:
        return self.budget.num_kv_stages

    @property
    def qk_stages(self) -> int:
        """The effective number of Q@K' depth sub-stages (1 in fused mode)."""
        return self.budget.num_qk_stages

    @property
    def fused_kv(self) -> bool:
        return self.budget.fused_kv

    @property
    def smem_used(self) -> int:
        return self.budget.smem_used

    @property
    def num_k_scale_bufs(self) -> int:
        """Per-token K scale buffers (BN scales each): one per K stage, ceil(nkv / 2) when K and V share
        one ring (half its slots hold K); 0 without per-token scales."""
        if not self.scale_bytes:
            return 0
        return -(-self.num_kv_stages // 2) if self.fused_kv else self.num_kv_stages

    @property
    def bk0(self) -> int:
        return self.padded_qk_depth // self.qk_stages

    @property
    def bk1(self) -> int:
        return self.bn

    # -- support -------------------------------------------------------------------------------------
    def supported(self) -> Support:
        """Whether the reference kernel supports this config, with the reason when not (spec 1.2)."""
        if not self.is_mla and self.page_size and (self.page_size < self.bn or self.page_size % self.mma_k):
            return Support(False, f"page_size {self.page_size} must be >= BN ({self.bn}) and a multiple of "
                                  f"{self.mma_k} for paged FA4")
        if self.num_q == 1 and self.pair_cta:
            return Support(False, "pair_cta needs num_q = 2: the 1Q kernel is single-CTA")
        if self.num_q == 1 and not 64 <= self.qk_depth <= 256:
            return Support(False, f"qk_depth {self.qk_depth} must be in [64, 256] for num_q = 1")
        if self.pair_cta and not 64 < self.qk_depth <= 128:
            return Support(False, f"qk_depth {self.qk_depth} must be in (64, 128] for pair_cta")
        if self.num_q == 2 and not self.pair_cta and self.qk_depth < 64:
            return Support(False, f"qk_depth {self.qk_depth} must be >= 64 for num_q = 2")
        if self.bn < 64:
            return Support(False, f"BN = {self.bn} must be >= 64: the O tiles (2 x {self.padded_ov_depth} "
                                  f"columns) leave too little of TMEM's {TMEM_COLUMNS} columns; depth 256/512 "
                                  f"uses the depth-512 kernel")
        if self.tmem_used > TMEM_COLUMNS:
            return Support(False, f"TMEM needs {self.tmem_used} columns, sm_100a has {TMEM_COLUMNS}")
        if self.smem_used > SMEM_CARVEOUT:
            return Support(False, f"smem needs {self.smem_used} B, sm_100a has {SMEM_CARVEOUT} B: Q takes "
                                  f"{self.q_bytes} B; lower qk_depth or use num_q = 1")
        if self.num_kv_stages < 2:
            return Support(False, f"num_kv_stages = {self.num_kv_stages} must be >= 2: Q and the fixed "
                                  f"regions leave room for too few K/V stages")
        return Support(True)

    def describe(self) -> str:
        ov = "" if self.ov_depth in (None, self.qk_depth) else f"/{self.ov_depth}"
        return (f"FA4Config {self.dtype} d{self.qk_depth}{ov} {self.num_q}Q" + (" pair-CTA" if self.pair_cta else "")
                + (f" group {self.group}" if self.group > 1 else ""))
