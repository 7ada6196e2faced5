"""Depth512Config: the depth-256/512 attention forward, always a CTA pair (cta_group 2, cluster 2x1x1).

Spec section 1.5. With ``ov_depth > 256`` the output is split into O_lo/O_hi halves (``split_o``)
and MMA_M drops to 128 so that O and two S tiles fit TMEM under the pair layout rule
"an accumulator [MMA_M, N] takes MMA_M*N/256 columns per CTA". ``rope_depth = 64`` is the absorbed
MLA form (spec 4.9, DeepSeek-V3 decode): Q and K are 512 latent + 64 rope columns, V the 512 latent
columns; Q's rope columns follow its latent ones in the Q region and K's rope chunk takes one KV slot
after the four latent chunks. No MLIR import.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property

from fa4_mlir.configs.dtypes import DType
from fa4_mlir.configs.dtypes import dtype as lookup_dtype
from fa4_mlir.configs.fa4 import MBAR_BYTES, TMEM_ADDR_BYTES, _align_down, _prev_power_of_two
from fa4_mlir.configs.support import Checked, Support
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import SMEM_CARVEOUT, TMEM_COLUMNS

DEPTHS = (256, 512)
ROPE_DEPTHS = (0, 64)  # 64: absorbed MLA (q/k 512 + 64, v 512)
MAX_BARRIERS = 32  # one init warp: lane i initialises barrier i


@dataclasses.dataclass(frozen=True, kw_only=True)
class Depth512Config(Checked):
    """One depth-256/512 configuration. Worked values (spec 1.5):

    | case      | split_o | MMA_M | BM/CTA | BN  | BK0 | BK1 | v_cols | TMEM O,O_hi,S_even,S_odd | nkv | smem   |
    |-----------|---------|-------|--------|-----|-----|-----|--------|--------------------------|-----|--------|
    | bf16 d512 | yes     | 128   | 64     | 256 | 128 | 128 | 128    | 0,128,256,384            | 4   | 229780 |
    | bf16 d256 | no      | 256   | 128    | 128 | 128 | 64  | 128    | 0,-,256,384              | 8   | 230084 |
    | fp8 d512  | yes     | 128   | 64     | 256 | 128 | 128 | 128    | 0,128,256,384            | 11  | 229892 |
    | bf16 MLA  | yes     | 128   | 64     | 256 | 128 | 128 | 128    | 0,128,256,384            | 3   | 205188 |

    MLA (``rope_depth`` 64): Q takes BM x 576 (73728 B), leaving room for 3 KV slots of 32 KiB. The
    spec's rule ``nkv >= nqk`` comes from the reference loading K_0's chunks without acquiring their
    slots; this kernel acquires every slot, so a ring of 3 streams the 5 K chunks (4 latent + rope,
    the rope chunk using half its slot) and MLA needs only ``nkv >= 2``.
    """

    dtype: str = "bf16"
    qk_depth: int = 512
    ov_depth: int | None = None  # None: same as qk_depth
    group: int = 1
    page_size: int = 0
    rope_depth: int = 0  # 64: absorbed MLA, Q/K = qk_depth latent + rope_depth rope columns
    rope_dtype: str | None = None  # MLA: the rope columns' dtype (None: dtype); bf16/fp16 with an fp8 latent

    def __post_init__(self):
        lookup_dtype(self.dtype, field="Depth512Config.dtype")
        if self.qk_depth not in DEPTHS:
            raise ConfigError(f"Depth512Config.qk_depth must be 256 or 512, got {self.qk_depth!r}; other "
                              f"depths use FA4Config")
        if self.ov_depth is not None and (self.ov_depth not in DEPTHS or self.ov_depth > self.qk_depth):
            raise ConfigError(f"Depth512Config.ov_depth must be 256 or 512 and <= qk_depth "
                              f"({self.qk_depth}), got {self.ov_depth!r}")
        if self.group < 1:
            raise ConfigError(f"Depth512Config.group must be >= 1, got {self.group!r}")
        if self.page_size < 0:
            raise ConfigError(f"Depth512Config.page_size must be >= 0 (0: not paged), got {self.page_size!r}")
        if self.rope_depth not in ROPE_DEPTHS:
            raise ConfigError(f"Depth512Config.rope_depth must be 0 or 64 (absorbed MLA), got {self.rope_depth!r}")
        if self.rope_depth:
            rules = (("qk_depth", self.qk_depth == 512, "512 with rope_depth 64 (the MLA latent)"),
                     ("ov_depth", self.ov == 512, "512 (or None) with rope_depth 64 (V is the latent)"),
                     ("rope_dtype", self.rope_dtype in ((None, self.dtype) if self.qkv.is_half else ("bf16", "fp16")),
                      "bf16 or fp16 with an fp8_e4m3 dtype (else None or the dtype) with rope_depth 64"),
                     ("page_size", self.page_size == 0, "0 with rope_depth 64 (MLA is not paged)"))
            for name, ok, expected in rules:
                if not ok:
                    raise ConfigError(f"Depth512Config.{name} must be {expected}, got {getattr(self, name)!r}")
        elif self.rope_dtype is not None:
            raise ConfigError(f"Depth512Config.rope_dtype must be None without rope columns (rope_depth 0), got "
                              f"{self.rope_dtype!r}")

    @property
    def qkv(self) -> DType:
        return lookup_dtype(self.dtype, field="dtype")

    @property
    def rope(self) -> DType:
        """The rope columns' dtype (MLA): ``rope_dtype``, else ``dtype``."""
        return lookup_dtype(self.rope_dtype or self.dtype, field="rope_dtype")

    @property
    def swizzle_bytes(self) -> int:
        """Bytes of one swizzle row of every tile (spec 1.2 step 4): 128, 64 for fp8 (64 elements either way)."""
        return 128 if self.qkv.is_half else 64

    @property
    def rescale_threshold(self) -> float:
        """Lazy rescale (log2 units): a row maximum that grew by less keeps the stale one (spec 4.8)."""
        return -8.0 if self.qkv.is_half else -2.0

    @property
    def p_bias(self) -> float:
        """fp8: log2 of P's scale before the e4m3 cast, ``8 + rescale_threshold`` (spec 4.8), else 0."""
        return 0.0 if self.qkv.is_half else 8.0 + self.rescale_threshold

    @property
    def ov(self) -> int:
        return self.ov_depth if self.ov_depth is not None else self.qk_depth

    @property
    def split_o(self) -> bool:
        return self.ov > 256

    @property
    def cta_group(self) -> int:
        return 2

    @property
    def mma_m(self) -> int:
        return 128 if self.split_o else 256

    @property
    def mma_k(self) -> int:
        return 16 if self.qkv.is_half else 32

    @property
    def bm(self) -> int:
        """Q rows per CTA."""
        return self.mma_m // 2

    @property
    def fuse_gqa(self) -> bool:
        return self.group > 1 and self.mma_m % self.group == 0

    @property
    def num_qk_stages(self) -> int:
        return self.qk_depth // 128

    @property
    def num_pv_stages(self) -> int:
        return 2

    @property
    def num_k_chunks(self) -> int:
        """K depth chunks of a tile, one KV slot each: the ``num_qk_stages`` chunks, plus the rope chunk."""
        return self.num_qk_stages + (1 if self.rope_depth else 0)

    @property
    def q_depth(self) -> int:
        """Columns of Q (and K): qk_depth, plus rope_depth for MLA."""
        return self.qk_depth + self.rope_depth

    @property
    def bk0(self) -> int:
        return self.qk_depth // self.num_qk_stages

    @cached_property
    def bn(self) -> int:
        bn = min(256, _align_down((TMEM_COLUMNS * 256 // self.mma_m - self.ov) // 2, self.mma_k))
        if self.page_size and bn > 0 and self.page_size % bn and bn % self.page_size:
            bn = _prev_power_of_two(bn)
        return bn

    @property
    def bk1(self) -> int:
        return self.bn // 2

    @property
    def v_cols_per_cta(self) -> int:
        return self.ov // 4 if self.split_o else self.ov // 2

    def _columns(self, n: int) -> int:
        return self.mma_m * n // 256

    @property
    def tmem_columns(self) -> dict[str, tuple[int, int]]:
        """name -> (first column, columns) in each CTA of the pair."""
        s_even = self._columns(self.ov)
        s_cols = self._columns(self.bn)
        o = {"O_lo": (0, self.ov // 4), "O_hi": (self.ov // 4, self.ov // 4)} if self.split_o else \
            {"O": (0, s_even)}
        return {**o, "S_even": (s_even, s_cols), "S_odd": (s_even + s_cols, s_cols)}

    @property
    def tmem_used(self) -> int:
        return self._columns(self.ov) + 2 * self._columns(self.bn)

    @property
    def num_fixed_mbarriers(self) -> int:
        return 10 if self.split_o else 8

    @property
    def q_bytes(self) -> int:
        return self.bm * (self.qk_depth * self.qkv.bytes + self.rope_depth * self.rope.bytes)

    @property
    def p_bytes(self) -> int:
        return self.bm * self.bn * self.qkv.bytes

    @property
    def correction_bytes(self) -> int:
        return self.bm * 4

    @property
    def kv_slot_bytes(self) -> int:
        """One K sub-tile (BN/2 x BK0) or V sub-tile (BK1 x v_cols) in the ring."""
        return self.bn // 2 * self.bk0 * self.qkv.bytes

    @property
    def _fixed_bytes(self) -> int:
        return (TMEM_ADDR_BYTES + self.q_bytes + self.p_bytes + self.correction_bytes
                + self.num_fixed_mbarriers * MBAR_BYTES)

    @cached_property
    def num_kv_stages(self) -> int:
        slot = self.kv_slot_bytes + 2 * MBAR_BYTES
        by_smem = max(0, SMEM_CARVEOUT - self._fixed_bytes) // slot
        return min(by_smem, (MAX_BARRIERS - self.num_fixed_mbarriers) // 2)

    @property
    def num_mbarriers(self) -> int:
        return self.num_fixed_mbarriers + 2 * self.num_kv_stages

    @property
    def smem_used(self) -> int:
        return self._fixed_bytes + self.num_kv_stages * (self.kv_slot_bytes + 2 * MBAR_BYTES)

    def supported(self) -> Support:
        if self.bn < 32:
            return Support(False, f"BN = {self.bn} must be >= 32")
        if self.tmem_used > TMEM_COLUMNS:
            return Support(False, f"TMEM needs {self.tmem_used} columns, sm_100a has {TMEM_COLUMNS}")
        if self.smem_used > SMEM_CARVEOUT:
            return Support(False, f"smem needs {self.smem_used} B, sm_100a has {SMEM_CARVEOUT} B")
        if self.rope_depth and self.num_kv_stages < 2:  # the MLA kernel acquires every slot (class doc)
            return Support(False, f"num_kv_stages = {self.num_kv_stages} must be >= 2")
        if not self.rope_depth and self.num_kv_stages < max(2, self.num_qk_stages):
            return Support(False, f"num_kv_stages = {self.num_kv_stages} must be >= max(2, num_qk_stages = "
                                  f"{self.num_qk_stages})")
        return Support(True)

    def describe(self) -> str:
        return f"Depth512Config {self.dtype} d{self.qk_depth}" + (f"+{self.rope_depth} MLA" if self.rope_depth else "")
